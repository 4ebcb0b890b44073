//===- InterpExpr.cpp - Expressions and function calls --------------------===//
//
// Interp's expressions: literals, names, lists, operators (with overflow
// checks and floor division), conditions, indexing, and calls of user
// functions; built-in calls, methods and properties go to
// InterpBuiltins.cpp.
//
//===----------------------------------------------------------------------===//

#include "Interp.h"

using namespace coll;
using namespace coll::lang;
using namespace coll::lang::ast;

namespace {

/// Equality of two integers, booleans or strings; nothing for other values.
std::optional<bool> equalScalars(const Value &a, const Value &b) {
  if (a.data.index() != b.data.index())
    return std::nullopt;
  if (const int64_t *x = a.get<int64_t>())
    return *x == *b.get<int64_t>();
  if (const bool *x = a.get<bool>())
    return *x == *b.get<bool>();
  if (const std::string *x = a.get<std::string>())
    return *x == *b.get<std::string>();
  return std::nullopt;
}

} // namespace

std::optional<Value> Interp::eval(const Expr &expr, Frame &frame) {
  DepthScope nesting(depth);
  if (!tick(expr.loc))
    return std::nullopt;
  switch (expr.getKind()) {
  case Expr::Kind::Int: return Value(llvm::cast<IntExpr>(expr).value);
  case Expr::Kind::Bool: return Value(llvm::cast<BoolExpr>(expr).value);
  case Expr::Kind::String: return Value(llvm::cast<StringExpr>(expr).value);
  case Expr::Kind::Name: {
    auto &name = llvm::cast<NameExpr>(expr);
    switch (name.binding.kind) {
    case Binding::Kind::Input:
      return Value(BufferId{ir::BufferKind::Input, 0});
    case Binding::Kind::Output:
      return Value(BufferId{ir::BufferKind::Output, 0});
    case Binding::Kind::Scratch:
      return Value(BufferId{ir::BufferKind::Scratch, 0});
    case Binding::Kind::Auto: return Value(AutoHint{});
    default: break;
    }
    const Value &value = slot(name.binding, frame);
    // Only a parameter or top-level variable read from a function can be
    // unset: the function ran before the declaration.
    if (value.isNone())
      return fail(name.loc,
                  "'" + name.name +
                      "' is used before its declaration is evaluated (a "
                      "function that reads it ran before the declaration)");
    return value;
  }
  case Expr::Kind::List: {
    auto &list = llvm::cast<ListExpr>(expr);
    auto values = std::make_shared<std::vector<Value>>();
    values->reserve(list.elements.size());
    for (const ExprPtr &element : list.elements) {
      std::optional<Value> value = eval(*element, frame);
      if (!value)
        return std::nullopt;
      values->push_back(std::move(*value));
    }
    return Value(ListPtr(std::move(values)));
  }
  case Expr::Kind::Unary:
    return evalUnary(llvm::cast<UnaryExpr>(expr), frame);
  case Expr::Kind::Binary:
    return evalBinary(llvm::cast<BinaryExpr>(expr), frame);
  case Expr::Kind::Cond: {
    auto &cond = llvm::cast<CondExpr>(expr);
    std::optional<bool> which = evalAs<bool>(*cond.cond, frame);
    if (!which)
      return std::nullopt;
    return eval(*(*which ? cond.then : cond.otherwise), frame);
  }
  case Expr::Kind::Index: {
    auto &index = llvm::cast<IndexExpr>(expr);
    std::optional<ListPtr> list = evalAs<ListPtr>(*index.base, frame);
    std::optional<int64_t> i =
        list ? evalAs<int64_t>(*index.index, frame) : std::nullopt;
    if (!i)
      return std::nullopt;
    if (*i < 0 || static_cast<uint64_t>(*i) >= (*list)->size())
      return fail(index.index->loc, "index " + llvm::Twine(*i) +
                                        " is out of range (the list has " +
                                        llvm::Twine((*list)->size()) +
                                        " elements)");
    return (**list)[*i];
  }
  case Expr::Kind::Call:
    return evalCall(llvm::cast<CallExpr>(expr), frame, /*wantValue=*/true);
  case Expr::Kind::Method:
    return evalMethod(llvm::cast<MethodExpr>(expr), frame);
  case Expr::Kind::Member:
    return evalMember(llvm::cast<MemberExpr>(expr), frame);
  }
  return std::nullopt;
}

std::optional<Value> Interp::evalUnary(const UnaryExpr &unary,
                                       Frame &frame) {
  if (unary.op == UnaryOp::Not) {
    std::optional<bool> operand = evalAs<bool>(*unary.operand, frame);
    return operand ? std::optional<Value>(Value(!*operand)) : std::nullopt;
  }
  std::optional<int64_t> operand = evalAs<int64_t>(*unary.operand, frame);
  if (!operand)
    return std::nullopt;
  if (*operand == INT64_MIN)
    return fail(unary.loc,
                "integer overflow: -(" + llvm::Twine(*operand) + ")");
  return Value(-*operand);
}

std::optional<Value> Interp::evalBinary(const BinaryExpr &binary,
                                        Frame &frame) {
  BinaryOp op = binary.op;
  if (op == BinaryOp::And || op == BinaryOp::Or) {
    std::optional<bool> lhs = evalAs<bool>(*binary.lhs, frame);
    if (!lhs)
      return std::nullopt;
    if (*lhs == (op == BinaryOp::Or))
      return Value(*lhs);
    std::optional<bool> rhs = evalAs<bool>(*binary.rhs, frame);
    return rhs ? std::optional<Value>(Value(*rhs)) : std::nullopt;
  }
  std::optional<Value> lhs = eval(*binary.lhs, frame);
  std::optional<Value> rhs = lhs ? eval(*binary.rhs, frame) : std::nullopt;
  if (!rhs)
    return std::nullopt;
  llvm::StringRef spelled = spelling(op);
  if (op == BinaryOp::Eq || op == BinaryOp::Ne) {
    std::optional<bool> equal = equalScalars(*lhs, *rhs);
    if (!equal)
      return fail(binary.opLoc,
                  "'" + spelled + "' cannot compare " + typeName(*lhs) +
                      " with " + typeName(*rhs) +
                      " (it compares integers, booleans or strings)");
    return Value(*equal == (op == BinaryOp::Eq));
  }
  if (op == BinaryOp::Add && lhs->get<ListPtr>() && rhs->get<ListPtr>()) {
    const std::vector<Value> &a = **lhs->get<ListPtr>(),
                             &b = **rhs->get<ListPtr>();
    if (!tick(binary.opLoc, a.size() + b.size()))
      return std::nullopt;
    auto joined = std::make_shared<std::vector<Value>>(a);
    joined->insert(joined->end(), b.begin(), b.end());
    return Value(ListPtr(std::move(joined)));
  }
  // String concatenation (names of scratch buffers); an integer operand
  // is written in decimal.
  if (op == BinaryOp::Add &&
      (lhs->get<std::string>() || rhs->get<std::string>()) &&
      (lhs->get<std::string>() || lhs->get<int64_t>()) &&
      (rhs->get<std::string>() || rhs->get<int64_t>())) {
    auto text = [](const Value &v) {
      const std::string *s = v.get<std::string>();
      return s ? *s : std::to_string(*v.get<int64_t>());
    };
    std::string joined = text(*lhs) + text(*rhs);
    if (!tick(binary.opLoc, joined.size()))
      return std::nullopt;
    return Value(std::move(joined));
  }
  const int64_t *a = lhs->get<int64_t>(), *b = rhs->get<int64_t>();
  if (!a || !b)
    return fail(binary.opLoc,
                "'" + spelled + "' needs two integers" +
                    (op == BinaryOp::Add ? ", two lists or a string" : "") +
                    ", got " + typeName(*lhs) + " and " + typeName(*rhs));
  int64_t result = 0;
  bool overflow = false;
  switch (op) {
  case BinaryOp::Add:
    overflow = __builtin_add_overflow(*a, *b, &result);
    break;
  case BinaryOp::Sub:
    overflow = __builtin_sub_overflow(*a, *b, &result);
    break;
  case BinaryOp::Mul:
    overflow = __builtin_mul_overflow(*a, *b, &result);
    break;
  case BinaryOp::Div:
  case BinaryOp::Mod:
    if (*b == 0)
      return fail(binary.opLoc, op == BinaryOp::Div ? "division by zero"
                                                    : "modulo by zero");
    overflow = *a == INT64_MIN && *b == -1;
    if (!overflow) {
      // Floor division; the remainder takes the divisor's sign.
      int64_t q = *a / *b, r = *a % *b;
      if (r != 0 && ((r < 0) != (*b < 0))) {
        --q;
        r += *b;
      }
      result = op == BinaryOp::Div ? q : r;
    }
    break;
  case BinaryOp::Lt: return Value(*a < *b);
  case BinaryOp::Le: return Value(*a <= *b);
  case BinaryOp::Gt: return Value(*a > *b);
  case BinaryOp::Ge: return Value(*a >= *b);
  default: llvm_unreachable("handled above");
  }
  if (overflow)
    return fail(binary.opLoc, "integer overflow: " + llvm::Twine(*a) + " " +
                                  spelled + " " + llvm::Twine(*b));
  return Value(result);
}

std::optional<Value> Interp::evalCall(const CallExpr &call, Frame &frame,
                                      bool wantValue) {
  if (call.builtin)
    return evalBuiltin(*call.builtin, call, frame, wantValue);
  const FnDecl &fn = *call.fn;
  if (callDepth >= limits::MaxCallDepth)
    return fail(call.loc, "recursion is too deep (more than " +
                              llvm::Twine(limits::MaxCallDepth) +
                              " nested calls)");
  Frame callee = takeFrame(fn.numSlots);
  for (const Arg &arg : call.args) {
    std::optional<Value> value = eval(*arg.value, frame);
    if (!value)
      return std::nullopt;
    callee[arg.param] = std::move(*value);
  }
  ++callDepth;
  activeCalls.push_back({call.loc});
  Flow flow = execBlock(fn.body, callee);
  activeCalls.pop_back();
  --callDepth;
  releaseFrame(std::move(callee));
  if (flow == Flow::Fail)
    return std::nullopt;
  Value result = std::exchange(returnValue, Value());
  if (result.isNone() && wantValue)
    return fail(call.loc, "function '" + fn.name + "' returns no value");
  return result;
}
