//===- Interp.cpp - Evaluating .coll programs -----------------------------===//
//
// A tree-walking interpreter over the resolved AST. Statement lists and loops
// are iterated; recursion follows only the nesting of the source (bounded by
// the parser) and calls of user functions (bounded by MaxCallDepth), and
// their product is bounded by MaxEvalDepth and the stack actually used. Every
// statement and expression costs one step of a budget, so no program runs
// forever: a fixed budget, plus StepsPerTracedChunk for every chunk the
// traced operations move (so loops that trace nothing stop early and large
// programs are not cut short).
//
// The first error ends evaluation: each evaluation function reports it and
// returns an empty optional (or Flow::Fail), which every caller passes on.
// Chunk operations go to the Tracer.
//
//===----------------------------------------------------------------------===//

#include "Limits.h"
#include "Sema.h"
#include "Tracer.h"

#include "coll/lang/Frontend.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/thread.h"

#include <array>
#include <cstdio>
#include <variant>

using namespace coll;
using namespace coll::lang;
using namespace coll::lang::ast;

namespace {

/// `contrib(rank, index)`: original input chunk `index` of `rank`.
struct Contribution {
  int32_t rank = 0, index = 0;
};

/// `auto`: a scheduling hint left to the compiler, as a value so that
/// helper functions can pass hints through.
struct AutoHint {};

struct Value;
using ListPtr = std::shared_ptr<const std::vector<Value>>;
using ValueData = std::variant<std::monostate, int64_t, bool, std::string,
                               BufferId, SlotRange, Contribution, ListPtr,
                               AutoHint>;

/// A run-time value. Lists are immutable, so they can be shared.
struct Value {
  ValueData data;

  Value() = default;
  template <typename T,
            typename = std::enable_if_t<std::is_constructible_v<ValueData, T>>>
  Value(T value) : data(std::move(value)) {}
  template <typename T> const T *get() const { return std::get_if<T>(&data); }
  bool isNone() const { return data.index() == 0; }
};

/// What a program calls the value types, by ValueData alternative.
llvm::StringRef typeName(size_t alternative) {
  static const char *const names[] = {
      "nothing",  "an integer",        "a boolean",      "a string",
      "a buffer", "a chunk reference", "a contribution", "a list",
      "auto"};
  static_assert(std::size(names) == std::variant_size_v<ValueData>);
  return names[alternative];
}
llvm::StringRef typeName(const Value &value) {
  return typeName(value.data.index());
}
template <typename T, size_t I = 0> llvm::StringRef typeName() {
  if constexpr (std::is_same_v<std::variant_alternative_t<I, ValueData>, T>)
    return typeName(I);
  else
    return typeName<T, I + 1>();
}

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

/// Counts nesting for as long as it lives.
class DepthScope {
public:
  explicit DepthScope(unsigned &counter) : depth(counter) { ++depth; }
  ~DepthScope() { --depth; }

private:
  unsigned &depth;
};

/// Expression and statement nesting summed over all active calls: the
/// interpreter's recursion depth.
constexpr unsigned MaxEvalDepth = 10000;
/// The evaluation thread's stack. A level of MaxEvalDepth takes about 1 KiB
/// in optimised builds and 10 KiB under AddressSanitizer; the stack is only
/// reserved, not committed, so it can be generous.
constexpr unsigned EvalStackSize = 256u << 20;
/// Stack use at which evaluation stops even below MaxEvalDepth, for builds
/// whose frames are larger still.
constexpr uintptr_t MaxStackUse = EvalStackSize - (8u << 20);

class Interp {
public:
  Interp(const Program &program, const Overrides &overrides,
         DiagnosticEngine &diags)
      : program(program), overrides(overrides), diags(diags), tracer(diags) {
    for (const StmtPtr &item : program.items) {
      if (auto *decl = llvm::dyn_cast<CollectiveDecl>(item.get()))
        collective = decl;
      if (auto *param = llvm::dyn_cast<ParamDecl>(item.get()))
        paramNames.push_back(param->name);
    }
  }

  std::optional<ChunkDag> run() {
    char base;
    stackBase = reinterpret_cast<uintptr_t>(&base);
    for (const auto &[name, value] : overrides.params)
      if (!llvm::is_contained(paramNames, name))
        diags.error(llvm::SMLoc(),
                    "-D " + name + ": the program has no parameter named '" +
                        name + "'");
    if (diags.hasErrors())
      return std::nullopt;
    globals.resize(program.numGlobals);
    if (execBlock(program.items, globals) == Flow::Fail)
      return std::nullopt;
    return tracer.finish(options);
  }

private:
  using Frame = std::vector<Value>;
  enum class Flow : uint8_t { Next, Return, Fail };
  /// Which part of the program is running: chunk operations only happen in
  /// the body, the pre/post blocks of a custom collective state conditions.
  enum class Phase : uint8_t { Body, Pre, Post };
  using Args = std::array<const Expr *, 6>;

  /// Reports an error; the result converts to the failed result of a
  /// statement or an expression.
  struct Failure {
    operator Flow() const { return Flow::Fail; }
    template <typename T> operator std::optional<T>() const {
      return std::nullopt;
    }
  };
  Failure fail(llvm::SMLoc loc, const llvm::Twine &message) {
    diags.error(loc, message);
    return {};
  }

  /// Charges `cost` steps and checks the nesting; false after an error.
  bool tick(llvm::SMLoc loc, uint64_t cost = 1) {
    steps += cost;
    char here;
    uintptr_t stackUse = stackBase - reinterpret_cast<uintptr_t>(&here);
    // A program earns budget by tracing: a loop that never ends traces
    // nothing (or reaches MaxOps), while a large program's evaluation
    // grows with the chunks it moves.
    uint64_t maxSteps = baseSteps +
                        limits::StepsPerTracedChunk * tracer.chunksTraced();
    if (LLVM_LIKELY(steps <= maxSteps && depth <= MaxEvalDepth &&
                    stackUse <= MaxStackUse))
      return true;
    return tickFailed(loc, maxSteps, stackUse);
  }
  LLVM_ATTRIBUTE_NOINLINE bool tickFailed(llvm::SMLoc loc, uint64_t maxSteps,
                                          uintptr_t stackUse) {
    if (steps > maxSteps)
      diags.error(loc, "the program runs too long (more than " +
                           llvm::Twine(maxSteps) +
                           " evaluation steps); does a loop never end?");
    else if (depth > MaxEvalDepth || stackUse > MaxStackUse)
      diags.error(loc, "evaluation is nested too deeply (recursive calls "
                       "inside deeply nested code)");
    else
      return true;
    return false;
  }

  Value &slot(const Binding &binding, Frame &frame) {
    assert(binding.kind == Binding::Kind::Global ||
           binding.kind == Binding::Kind::Local);
    return binding.kind == Binding::Kind::Global ? globals[binding.slot]
                                                 : frame[binding.slot];
  }

  static Args bind(const std::vector<Arg> &args) {
    Args bound{};
    for (const Arg &arg : args) {
      assert(arg.param < bound.size() &&
             "more parameters than any built-in has");
      bound[arg.param] = arg.value.get();
    }
    return bound;
  }

  //===--------------------------------------------------------------------===//
  // Statements
  //===--------------------------------------------------------------------===//

  Flow execBlock(const Block &block, Frame &frame) {
    for (const StmtPtr &stmt : block)
      if (Flow flow = exec(*stmt, frame); flow != Flow::Next)
        return flow;
    return Flow::Next;
  }

  Flow exec(const Stmt &stmt, Frame &frame) {
    DepthScope nesting(depth);
    if (!tick(stmt.loc))
      return Flow::Fail;
    switch (stmt.getKind()) {
    case Stmt::Kind::Let: {
      auto &let = llvm::cast<LetStmt>(stmt);
      std::optional<Value> value = eval(*let.init, frame);
      if (!value)
        return Flow::Fail;
      slot(let.binding, frame) = std::move(*value);
      return Flow::Next;
    }
    case Stmt::Kind::Assign: {
      auto &assign = llvm::cast<AssignStmt>(stmt);
      std::optional<Value> value = eval(*assign.value, frame);
      if (!value)
        return Flow::Fail;
      slot(assign.binding, frame) = std::move(*value);
      return Flow::Next;
    }
    case Stmt::Kind::For: return execFor(llvm::cast<ForStmt>(stmt), frame);
    case Stmt::Kind::While: {
      auto &loop = llvm::cast<WhileStmt>(stmt);
      for (;;) {
        std::optional<bool> cond = evalAs<bool>(*loop.cond, frame);
        if (!cond)
          return Flow::Fail;
        if (!*cond)
          return Flow::Next;
        if (Flow flow = execBlock(loop.body, frame); flow != Flow::Next)
          return flow;
      }
    }
    case Stmt::Kind::If: {
      auto &ifStmt = llvm::cast<IfStmt>(stmt);
      for (const IfStmt::Branch &branch : ifStmt.branches) {
        std::optional<bool> cond = evalAs<bool>(*branch.cond, frame);
        if (!cond)
          return Flow::Fail;
        if (*cond)
          return execBlock(branch.body, frame);
      }
      return ifStmt.elseBody ? execBlock(*ifStmt.elseBody, frame) : Flow::Next;
    }
    case Stmt::Kind::Return: {
      auto &ret = llvm::cast<ReturnStmt>(stmt);
      returnValue = Value();
      if (ret.value) {
        std::optional<Value> value = eval(*ret.value, frame);
        if (!value)
          return Flow::Fail;
        returnValue = std::move(*value);
      }
      return Flow::Return;
    }
    case Stmt::Kind::Parallelize: {
      auto &par = llvm::cast<ParallelizeStmt>(stmt);
      std::optional<int64_t> factor = evalAs<int64_t>(*par.factor, frame);
      if (!factor)
        return Flow::Fail;
      if (*factor < 1)
        return fail(par.factor->loc,
                    "parallelize needs a factor of at least 1, got " +
                        llvm::Twine(*factor));
      if (*factor > INT32_MAX / parallel)
        return fail(par.factor->loc,
                    "nested parallelize factors multiply to more than " +
                        llvm::Twine(INT32_MAX));
      int32_t outer = parallel;
      parallel *= static_cast<int32_t>(*factor);
      Flow flow = execBlock(par.body, frame);
      parallel = outer;
      return flow;
    }
    case Stmt::Kind::Expr: {
      const Expr &expr = *llvm::cast<ExprStmt>(stmt).expr;
      auto *call = llvm::dyn_cast<CallExpr>(&expr);
      bool ok = call ? evalCall(*call, frame, /*wantValue=*/false).has_value()
                     : eval(expr, frame).has_value();
      return ok ? Flow::Next : Flow::Fail;
    }
    case Stmt::Kind::Param:
      return execParam(llvm::cast<ParamDecl>(stmt)) ? Flow::Next : Flow::Fail;
    case Stmt::Kind::Collective:
      return execCollective(llvm::cast<CollectiveDecl>(stmt));
    case Stmt::Kind::Option:
      return execOption(llvm::cast<OptionDecl>(stmt)) ? Flow::Next : Flow::Fail;
    case Stmt::Kind::Fn: return Flow::Next;
    }
    return Flow::Fail;
  }

  Flow execFor(const ForStmt &loop, Frame &frame) {
    if (!loop.to) {
      std::optional<ListPtr> list = evalAs<ListPtr>(*loop.from, frame);
      if (!list)
        return Flow::Fail;
      for (const Value &element : **list) {
        if (!tick(loop.loc))
          return Flow::Fail;
        slot(loop.binding, frame) = element;
        if (Flow flow = execBlock(loop.body, frame); flow != Flow::Next)
          return flow;
      }
      return Flow::Next;
    }
    std::optional<int64_t> from = evalAs<int64_t>(*loop.from, frame);
    std::optional<int64_t> to =
        from ? evalAs<int64_t>(*loop.to, frame) : std::nullopt;
    if (!to)
      return Flow::Fail;
    int64_t step = 1;
    if (loop.step) {
      std::optional<int64_t> value = evalAs<int64_t>(*loop.step, frame);
      if (!value)
        return Flow::Fail;
      if (*value == 0)
        return fail(loop.step->loc, "the step of a for loop must not be 0");
      step = *value;
    }
    for (int64_t i = *from; step > 0 ? i < *to : i > *to;) {
      if (!tick(loop.loc))
        return Flow::Fail;
      slot(loop.binding, frame) = Value(i);
      if (Flow flow = execBlock(loop.body, frame); flow != Flow::Next)
        return flow;
      if (__builtin_add_overflow(i, step, &i))
        break; // past the end of the range either way
    }
    return Flow::Next;
  }

  bool execParam(const ParamDecl &param) {
    std::optional<Value> value = eval(*param.value, globals);
    if (!value)
      return false;
    if (auto it = overrides.params.find(param.name);
        it != overrides.params.end()) {
      bool isInt = std::holds_alternative<int64_t>(it->second);
      if (isInt ? !value->get<int64_t>() : !value->get<bool>()) {
        diags.error(param.nameLoc, "-D " + param.name + " gives " +
                                       (isInt ? "an integer" : "a boolean") +
                                       " but parameter '" + param.name +
                                       "' is " + typeName(*value));
        return false;
      }
      *value = std::visit([](auto v) { return Value(v); }, it->second);
    }
    slot(param.binding, globals) = std::move(*value);
    return true;
  }

  /// An integer argument in [lo, hi], reported as `what`.
  std::optional<int32_t> evalBounded(const Expr &expr, Frame &frame,
                                     llvm::StringRef what, int64_t lo,
                                     int64_t hi) {
    std::optional<int64_t> value = evalAs<int64_t>(expr, frame);
    if (!value)
      return std::nullopt;
    if (*value < lo || *value > hi)
      return fail(expr.loc, what + " must be between " + llvm::Twine(lo) +
                                " and " + llvm::Twine(hi) + ", got " +
                                llvm::Twine(*value));
    return static_cast<int32_t>(*value);
  }

  Flow execCollective(const CollectiveDecl &decl) {
    Args args = bind(decl.args);
    auto arg = [&](CollectiveArg which) {
      return args[static_cast<size_t>(which)];
    };
    std::optional<int32_t> ranks = evalBounded(
        *arg(CollectiveArg::Ranks), globals, "ranks", 1, limits::MaxRanks);
    if (!ranks)
      return Flow::Fail;
    bool inplace = false;
    if (const Expr *e = arg(CollectiveArg::Inplace)) {
      std::optional<bool> value = evalAs<bool>(*e, globals);
      if (!value)
        return Flow::Fail;
      inplace = *value;
    }
    inplace = overrides.inplace.value_or(inplace);
    // A custom collective lists its postcondition chunk by chunk.
    int64_t maxPerRank = limits::MaxCustomChunks / *ranks;

    CollectiveSpec spec;
    if (decl.kind == ir::Collective::Custom) {
      std::optional<int32_t> input = evalBounded(
          *arg(CollectiveArg::Input), globals, "input", 1, maxPerRank);
      std::optional<int32_t> output =
          input ? evalBounded(*arg(CollectiveArg::Output), globals, "output", 1,
                              maxPerRank)
                : std::nullopt;
      if (!output)
        return Flow::Fail;
      if (inplace && *input != *output)
        return fail(decl.kindLoc,
                    "an in-place custom collective needs input = output "
                    "(output chunk i is input chunk i)");
      spec.nranks = *ranks;
      spec.inputChunks = *input;
      spec.outputChunks = *output;
      spec.chunksPerBlock = std::max(*input, *output);
      spec.inplace = inplace;
      spec.inputDefined.assign(*ranks, std::vector<bool>(*input, !decl.pre));
      spec.expected.assign(*ranks,
                           std::vector<std::vector<ContribId>>(*output));
    } else {
      ir::CollectiveInfo info = ir::collectiveInfo(decl.kind);
      int64_t n = *ranks;
      // Chunks of a buffer over all ranks, per chunk of a block, must stay
      // within the limit (a built-in postcondition is a rule, not a list).
      int64_t perChunk = info.inputPerRank || info.outputPerRank ? n * n : n;
      static_assert(limits::MaxRanks * limits::MaxRanks <=
                        limits::MaxBufferChunks,
                    "every rank count allows one chunk");
      int64_t maxChunks = limits::MaxBufferChunks / perChunk;
      int32_t chunks = 1;
      if (const Expr *e = arg(CollectiveArg::Chunks)) {
        std::optional<int32_t> value =
            evalBounded(*e, globals, "chunks", 1, maxChunks);
        if (!value)
          return Flow::Fail;
        chunks = *value;
      }
      int32_t root = 0;
      if (const Expr *e = arg(CollectiveArg::Root)) {
        std::optional<int64_t> value = evalAs<int64_t>(*e, globals);
        if (!value)
          return Flow::Fail;
        if (*value < 0 || *value >= *ranks)
          return fail(e->loc, "root " + llvm::Twine(*value) +
                                  " is out of range (program has " +
                                  llvm::Twine(*ranks) + " ranks)");
        root = static_cast<int32_t>(*value);
      }
      spec = makeBuiltinSpec(decl.kind, *ranks, chunks, root, inplace);
    }
    spec.loc = decl.loc;
    tracer.declare(std::move(spec));
    for (auto [block, phaseOfBlock] : {std::pair(&decl.pre, Phase::Pre),
                                       std::pair(&decl.post, Phase::Post)}) {
      if (!*block)
        continue;
      phase = phaseOfBlock;
      Flow flow = execBlock(**block, globals);
      phase = Phase::Body;
      if (flow == Flow::Fail)
        return flow;
    }
    return Flow::Next;
  }

  bool execOption(const OptionDecl &decl) {
    for (const OptionDecl::Item &item : decl.items) {
      const Expr &value = *item.value;
      switch (item.kind) {
      case OptionKind::Protocol:
        options.protocol = ir::parseProtocol(llvm::cast<NameExpr>(value).name);
        continue;
      case OptionKind::Threadblocks:
        options.manualThreadblocks =
            llvm::cast<NameExpr>(value).name == "manual";
        continue;
      case OptionKind::Fusion: {
        std::optional<bool> fusion = evalAs<bool>(value, globals);
        if (!fusion)
          return false;
        options.fusion = *fusion;
        continue;
      }
      case OptionKind::Name: {
        std::optional<std::string> name = evalAs<std::string>(value, globals);
        if (!name)
          return false;
        // The name becomes an XML attribute, which cannot hold control
        // characters (XML 1.0 has no way to write most of them).
        auto control = llvm::find_if(*name, [](char c) {
          return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
        });
        if (control != name->end()) {
          char hex[3];
          std::snprintf(hex, sizeof hex, "%02X",
                        static_cast<unsigned char>(*control));
          fail(value.loc,
               "the algorithm name may not contain control characters (byte "
               "0x" +
                   llvm::Twine(hex) + " at offset " +
                   llvm::Twine(control - name->begin()) + ")");
          return false;
        }
        options.name = std::move(*name);
        continue;
      }
      case OptionKind::Instances: {
        std::optional<int32_t> n =
            evalBounded(value, globals, "instances", 1, INT32_MAX);
        if (!n)
          return false;
        options.instances = *n;
        continue;
      }
      case OptionKind::MinBytes:
      case OptionKind::MaxBytes: {
        std::optional<int64_t> bytes = evalAs<int64_t>(value, globals);
        if (!bytes)
          return false;
        if (*bytes < 0) {
          diags.error(value.loc, item.name + " must not be negative, got " +
                                     llvm::Twine(*bytes));
          return false;
        }
        (item.kind == OptionKind::MinBytes ? options.minBytes
                                           : options.maxBytes) =
            static_cast<uint64_t>(*bytes);
        if (options.maxBytes != 0 && options.minBytes > options.maxBytes) {
          diags.error(value.loc, "min_bytes (" + llvm::Twine(options.minBytes) +
                                     ") is larger than max_bytes (" +
                                     llvm::Twine(options.maxBytes) + ")");
          return false;
        }
        continue;
      }
      }
    }
    return true;
  }

  //===--------------------------------------------------------------------===//
  // Expressions
  //===--------------------------------------------------------------------===//

  template <typename T>
  std::optional<T> evalAs(const Expr &expr, Frame &frame) {
    std::optional<Value> value = eval(expr, frame);
    if (!value)
      return std::nullopt;
    if (const T *typed = value->get<T>())
      return *typed;
    return fail(expr.loc,
                "expected " + typeName<T>() + ", got " + typeName(*value));
  }

  std::optional<Value> eval(const Expr &expr, Frame &frame) {
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

  std::optional<Value> evalUnary(const UnaryExpr &unary, Frame &frame) {
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

  std::optional<Value> evalBinary(const BinaryExpr &binary, Frame &frame) {
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

  std::optional<Value> evalCall(const CallExpr &call, Frame &frame,
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

  std::optional<Value> evalBuiltin(Builtin builtin, const CallExpr &call,
                                   Frame &frame, bool wantValue) {
    Args args = bind(call.args);
    bool returnsValue = builtin != Builtin::Assert &&
                        builtin != Builtin::Provide &&
                        builtin != Builtin::Expect;
    if (wantValue && !returnsValue)
      return fail(call.loc, "'" + call.callee + "' returns no value");
    switch (builtin) {
    case Builtin::Chunk: {
      if (phase != Phase::Body)
        return fail(call.loc,
                    "chunk operations are not allowed in pre and post blocks");
      if (!tracer.declared()) {
        diags.error(call.loc,
                    "'chunk' is used before the collective is declared");
        if (collective)
          diags.note(collective->loc, "the collective is declared here");
        return std::nullopt;
      }
      std::optional<int32_t> rank = evalRank(*args[0], frame);
      std::optional<BufferId> buffer =
          rank ? evalAs<BufferId>(*args[1], frame) : std::nullopt;
      std::optional<int64_t> index =
          buffer ? evalAs<int64_t>(*args[2], frame) : std::nullopt;
      if (!index)
        return std::nullopt;
      int64_t size = 1;
      if (args[3]) {
        std::optional<int64_t> value = evalAs<int64_t>(*args[3], frame);
        if (!value)
          return std::nullopt;
        if (*value < 1)
          return fail(args[3]->loc,
                      "size must be at least 1, got " + llvm::Twine(*value));
        size = *value;
      }
      std::optional<SlotRange> ref = makeRef(*rank, *buffer, *index, size,
                                             *args[2], /*destination=*/false);
      return ref ? std::optional<Value>(Value(*ref)) : std::nullopt;
    }
    case Builtin::Scratch: {
      // A name or an integer key (`scratch(3)` is `scratch("3")`), so that
      // programs can compute buffer names.
      std::optional<Value> key = eval(*args[0], frame);
      if (!key)
        return std::nullopt;
      std::optional<std::string> name;
      if (const int64_t *number = key->get<int64_t>())
        name = std::to_string(*number);
      else if (const std::string *text = key->get<std::string>())
        name = *text;
      else
        return fail(args[0]->loc, "a scratch buffer is named by a string or "
                                  "an integer, got " +
                                      typeName(*key));
      if (name->empty())
        return fail(args[0]->loc, "a scratch buffer needs a non-empty name");
      return Value(tracer.scratch(*name));
    }
    case Builtin::Len: {
      std::optional<ListPtr> list = evalAs<ListPtr>(*args[0], frame);
      return list ? std::optional<Value>(Value(int64_t((*list)->size())))
                  : std::nullopt;
    }
    case Builtin::Assert: {
      std::optional<bool> cond = evalAs<bool>(*args[0], frame);
      if (!cond)
        return std::nullopt;
      std::string message;
      if (args[1]) {
        std::optional<std::string> text = evalAs<std::string>(*args[1], frame);
        if (!text)
          return std::nullopt;
        message = ": " + *text;
      }
      if (!*cond)
        return fail(call.loc, "assertion failed" + message);
      return Value();
    }
    case Builtin::Provide:
    case Builtin::Expect: {
      bool provide = builtin == Builtin::Provide;
      if (phase != (provide ? Phase::Pre : Phase::Post))
        return fail(call.loc, "'" + call.callee +
                                  "' may only be called in the " +
                                  (provide ? "pre" : "post") +
                                  " block of a custom collective");
      const CollectiveSpec &spec = tracer.spec();
      std::optional<int32_t> rank = evalRank(*args[0], frame);
      std::optional<int32_t> index =
          rank ? evalIndex(*args[1], frame, provide ? "input" : "output",
                           provide ? spec.inputChunks : spec.outputChunks)
               : std::nullopt;
      if (!index)
        return std::nullopt;
      if (provide) {
        tracer.provide(*rank, *index);
        return Value();
      }
      std::optional<Contribution> contrib =
          evalAs<Contribution>(*args[2], frame);
      if (!contrib ||
          !tracer.expect(*rank, *index,
                         contrib->rank * spec.inputChunks + contrib->index,
                         call.loc))
        return std::nullopt;
      return Value();
    }
    case Builtin::Contrib: {
      if (!tracer.declared())
        return fail(call.loc,
                    "'contrib' is used before the collective is declared");
      std::optional<int32_t> rank = evalRank(*args[0], frame);
      std::optional<int32_t> index =
          rank ? evalIndex(*args[1], frame, "input", tracer.spec().inputChunks)
               : std::nullopt;
      if (!index)
        return std::nullopt;
      return Value(Contribution{*rank, *index});
    }
    }
    return std::nullopt;
  }

  std::optional<int32_t> evalRank(const Expr &expr, Frame &frame) {
    std::optional<int64_t> rank = evalAs<int64_t>(expr, frame);
    if (!rank)
      return std::nullopt;
    int32_t nranks = tracer.spec().nranks;
    if (*rank < 0 || *rank >= nranks)
      return fail(expr.loc, "rank " + llvm::Twine(*rank) +
                                " is out of range (program has " +
                                llvm::Twine(nranks) + " ranks)");
    return static_cast<int32_t>(*rank);
  }

  std::optional<int32_t> evalIndex(const Expr &expr, Frame &frame,
                                   llvm::StringRef buffer, int32_t chunks) {
    std::optional<int64_t> index = evalAs<int64_t>(expr, frame);
    if (!index)
      return std::nullopt;
    if (*index < 0 || *index >= chunks)
      return fail(expr.loc, "index " + llvm::Twine(*index) +
                                " is out of range (" + buffer + " has " +
                                llvm::Twine(chunks) + " chunks)");
    return static_cast<int32_t>(*index);
  }

  /// Checks that `size` chunks from `index` exist in `buffer` (scratch
  /// buffers grow up to MaxScratchChunks); errors point at `indexExpr`.
  std::optional<SlotRange> makeRef(int32_t rank, BufferId buffer, int64_t index,
                                   int64_t size, const Expr &indexExpr,
                                   bool destination) {
    const CollectiveSpec &spec = tracer.spec();
    bool scratch = buffer.kind == ir::BufferKind::Scratch;
    int64_t chunks = scratch ? limits::MaxScratchChunks
                     : buffer.kind == ir::BufferKind::Input ? spec.inputChunks
                                                            : spec.outputChunks;
    std::string bound = formatBuffer(buffer, tracer.scratchNames()) +
                        (scratch ? " has at most " : " has ") +
                        std::to_string(chunks) + " chunks)";
    std::string what = destination ? "destination " : "";
    if (index < 0 || index >= chunks)
      return fail(indexExpr.loc, what + "index " + llvm::Twine(index) +
                                     " is out of range (" + bound);
    if (size > chunks - index) {
      int64_t end;
      std::string range = __builtin_add_overflow(index, size, &end)
                              ? "size " + std::to_string(size) + " is"
                              : "chunks " + std::to_string(index) + ".." +
                                    std::to_string(end) + " are";
      return fail(indexExpr.loc, what + range + " out of range (" + bound);
    }
    if (!tick(indexExpr.loc, static_cast<uint64_t>(size)))
      return std::nullopt;
    return SlotRange{rank, buffer, static_cast<int32_t>(index),
                     static_cast<int32_t>(size)};
  }

  /// A scheduling hint: -1 when absent.
  std::optional<int32_t> evalHint(const Expr *expr, Frame &frame,
                                  llvm::StringRef name) {
    if (!expr)
      return -1;
    std::optional<Value> value = eval(*expr, frame);
    if (!value)
      return std::nullopt;
    if (value->get<AutoHint>())
      return -1;
    const int64_t *hint = value->get<int64_t>();
    if (!hint)
      return fail(expr->loc, name + " must be an integer or auto, got " +
                                 typeName(*value));
    if (*hint < 0 || *hint > INT32_MAX)
      return fail(expr->loc, name + " must be between 0 and " +
                                 llvm::Twine(INT32_MAX) + " (or auto), got " +
                                 llvm::Twine(*hint));
    return static_cast<int32_t>(*hint);
  }

  std::optional<Value> evalMethod(const MethodExpr &method, Frame &frame) {
    std::optional<SlotRange> self = evalAs<SlotRange>(*method.receiver, frame);
    if (!self)
      return std::nullopt;
    Args args = bind(method.args);
    const Signature &sig = signature(method.method);
    switch (method.method) {
    case Method::Copy:
    case Method::Reduce:
    case Method::Put:
    case Method::Get:
    case Method::GetReduce: {
      bool copy = method.method == Method::Copy || method.method == Method::Put;
      ChunkOp op;
      op.kind = method.method == Method::Reduce ||
                        method.method == Method::GetReduce
                    ? OpKind::Reduce
                    : OpKind::Copy;
      op.direct = method.method == Method::Put ? Direct::Put
                  : method.method == Method::Get ||
                          method.method == Method::GetReduce
                      ? Direct::Get
                      : Direct::None;
      op.loc = method.nameLoc;
      op.call = currentCall();
      op.parallel = parallel;
      Tracer::Sites sites{method.nameLoc, {}, {}};
      if (copy) {
        std::optional<int32_t> rank = evalRank(*args[0], frame);
        std::optional<BufferId> buffer =
            rank ? evalAs<BufferId>(*args[1], frame) : std::nullopt;
        // Without an index a copy to a scratch buffer appends to it.
        std::optional<int64_t> index;
        if (buffer && args[2])
          index = evalAs<int64_t>(*args[2], frame);
        else if (buffer && buffer->kind == ir::BufferKind::Scratch)
          index = tracer.scratchEnd(*rank, *buffer);
        else if (buffer)
          return fail(method.nameLoc,
                      llvm::Twine(copy && op.direct == Direct::Put ? "put"
                                                                    : "copy") +
                          " needs an index into " +
                          llvm::Twine(buffer->kind == ir::BufferKind::Input
                                          ? "input"
                                          : "output") +
                          " (only a " +
                          (op.direct == Direct::Put ? "put" : "copy") +
                          " to a scratch buffer may leave it out, to "
                          "append)");
        std::optional<SlotRange> dst =
            index ? makeRef(*rank, *buffer, *index, self->size,
                            args[2] ? *args[2] : *args[1],
                            /*destination=*/true)
                  : std::nullopt;
        if (!dst)
          return std::nullopt;
        op.src = *self;
        op.dst = *dst;
        sites.src = method.receiver->loc;
        sites.dst = args[1]->loc;
      } else {
        std::optional<SlotRange> other = evalAs<SlotRange>(*args[0], frame);
        if (!other)
          return std::nullopt;
        if (other->size != self->size)
          return fail(method.nameLoc,
                      llvm::Twine("size mismatch: cannot ") +
                          (op.direct == Direct::Get ? "get " : "reduce ") +
                                          llvm::Twine(other->size) +
                                          " chunks into " +
                                          llvm::Twine(self->size));
        op.src = *other;
        op.dst = *self;
        sites.src = args[0]->loc;
        sites.dst = method.receiver->loc;
      }
      if (op.direct != Direct::None && op.src.rank == op.dst.rank)
        return fail(method.nameLoc,
                    llvm::Twine(method.method == Method::Put   ? "put"
                                : method.method == Method::Get ? "get"
                                                               : "get_reduce") +
                        " reaches another rank's memory, but " +
                        describe(op.src) + " and " + describe(op.dst) +
                        " are both on rank " + llvm::Twine(op.src.rank) +
                        ": use " + (op.kind == OpKind::Copy ? "copy" : "reduce"));
      const unsigned hint = sig.numPositional;
      std::optional<int32_t> channel = evalHint(args[hint], frame, "ch");
      if (!channel)
        return std::nullopt;
      op.channel = *channel;
      if (op.direct != Direct::None) {
        // `tb=` names the tb of the rank that runs the operation.
        std::optional<int32_t> tb = evalHint(args[hint + 1], frame, "tb");
        if (!tb)
          return std::nullopt;
        (op.direct == Direct::Put ? op.sendTb : op.recvTb) = *tb;
      } else {
        std::optional<int32_t> sendTb =
            evalHint(args[hint + 1], frame, "sendtb");
        std::optional<int32_t> recvTb =
            sendTb ? evalHint(args[hint + 2], frame, "recvtb") : std::nullopt;
        if (!recvTb)
          return std::nullopt;
        op.sendTb = *sendTb;
        op.recvTb = *recvTb;
      }
      SlotRange result = op.dst;
      if (!tracer.record(std::move(op), sites))
        return std::nullopt;
      return Value(result);
    }
    case Method::Split: {
      std::optional<int64_t> parts = evalAs<int64_t>(*args[0], frame);
      if (!parts)
        return std::nullopt;
      if (*parts < 1 || self->size % *parts != 0)
        return fail(args[0]->loc, "cannot split " + llvm::Twine(self->size) +
                                      (self->size == 1 ? " chunk" : " chunks") +
                                      " into " + llvm::Twine(*parts) +
                                      " equal parts");
      if (!tick(method.nameLoc, static_cast<uint64_t>(*parts)))
        return std::nullopt;
      auto list = std::make_shared<std::vector<Value>>();
      int32_t partSize = self->size / static_cast<int32_t>(*parts);
      for (int32_t i = 0; i < *parts; ++i)
        list->push_back(Value(SlotRange{self->rank, self->buffer,
                                        self->index + i * partSize, partSize}));
      return Value(ListPtr(std::move(list)));
    }
    case Method::Group: {
      std::optional<SlotRange> other = evalAs<SlotRange>(*args[0], frame);
      if (!other)
        return std::nullopt;
      SlotRange next{self->rank, self->buffer, self->index + self->size, 1};
      if (other->rank != next.rank || other->buffer != next.buffer ||
          other->index != next.index)
        return fail(args[0]->loc,
                    "cannot group " + describe(*self) + " with " +
                        describe(*other) +
                        ": the second must start where the first ends, at " +
                        describe(next));
      return Value(SlotRange{self->rank, self->buffer, self->index,
                             self->size + other->size});
    }
    }
    return std::nullopt;
  }

  std::optional<Value> evalMember(const MemberExpr &member, Frame &frame) {
    std::optional<SlotRange> self = evalAs<SlotRange>(*member.receiver, frame);
    if (!self)
      return std::nullopt;
    llvm::StringRef name = member.name;
    int32_t inputChunks = tracer.spec().inputChunks;
    switch (member.property) {
    case Property::Rank: return Value(int64_t(self->rank));
    case Property::Index: return Value(int64_t(self->index));
    case Property::Size: return Value(int64_t(self->size));
    case Property::OriginRank:
    case Property::OriginIndex: {
      std::optional<ContribId> id = tracer.origin(*self, name, member.nameLoc);
      if (!id)
        return std::nullopt;
      return Value(int64_t(member.property == Property::OriginRank
                               ? *id / inputChunks
                               : *id % inputChunks));
    }
    case Property::DestRank:
    case Property::DestIndex: {
      std::optional<ContribId> id = tracer.origin(*self, name, member.nameLoc);
      std::optional<SlotRange> dest =
          id ? tracer.destination(*id, name, member.nameLoc) : std::nullopt;
      if (!dest)
        return std::nullopt;
      return Value(int64_t(
          member.property == Property::DestRank ? dest->rank : dest->index));
    }
    }
    return std::nullopt;
  }

  std::string describe(const SlotRange &range) const {
    return formatSlots(range, tracer.scratchNames());
  }

  const Program &program;
  const Overrides &overrides;
  DiagnosticEngine &diags;
  Tracer tracer;
  const CollectiveDecl *collective = nullptr;
  std::vector<std::string> paramNames;
  ProgramOptions options;

  Frame globals;
  /// Frames of returned calls, empty but with their memory, for the next
  /// calls: a call allocates nothing once its depth was reached before.
  std::vector<Frame> spareFrames;
  Frame takeFrame(size_t slots) {
    if (spareFrames.empty())
      return Frame(slots);
    Frame frame = std::move(spareFrames.back());
    spareFrames.pop_back();
    frame.resize(slots);
    return frame;
  }
  void releaseFrame(Frame frame) {
    frame.clear();
    spareFrames.push_back(std::move(frame));
  }
  Value returnValue;
  Phase phase = Phase::Body;
  int32_t parallel = 1;
  uint64_t steps = 0;
  /// The evaluation budget before any chunk is traced.
  const uint64_t baseSteps =
      overrides.maxSteps ? overrides.maxSteps : limits::MaxSteps;
  unsigned depth = 0, callDepth = 0;
  /// The user-function calls in progress, outermost first: each one's call
  /// site and its ChunkDag::calls entry once an operation needed it (so that
  /// calls that trace nothing cost no entry).
  struct ActiveCall {
    llvm::SMLoc loc;
    uint32_t entry = ChunkOp::NoCall;
  };
  std::vector<ActiveCall> activeCalls;

  /// The entry of the innermost call in progress, recording the chain of
  /// calls that lead to it where it is not recorded yet.
  uint32_t currentCall() {
    uint32_t parent = ChunkOp::NoCall;
    for (ActiveCall &active : activeCalls) {
      if (active.entry == ChunkOp::NoCall)
        active.entry = tracer.call(active.loc, parent);
      parent = active.entry;
    }
    return parent;
  }
  uintptr_t stackBase = 0; ///< where evaluation started; the stack grows down
};

} // namespace

bool coll::lang::addDefine(Overrides &overrides, llvm::StringRef text,
                           DiagnosticEngine &diags) {
  auto [name, value] = text.split('=');
  bool isIdentifier =
      !name.empty() && !llvm::isDigit(name.front()) &&
      llvm::all_of(name, [](char c) { return llvm::isAlnum(c) || c == '_'; });
  if (!text.contains('=') || !isIdentifier) {
    diags.error(llvm::SMLoc(), "-D " + text + ": expected NAME=VALUE");
    return false;
  }
  int64_t number = 0;
  if (value == "true" || value == "false")
    overrides.params[name.str()] = value == "true";
  else if (!value.getAsInteger(10, number))
    overrides.params[name.str()] = number;
  else {
    diags.error(llvm::SMLoc(),
                "-D " + text + ": the value must be an integer, true or false");
    return false;
  }
  return true;
}

std::optional<ChunkDag> coll::lang::traceProgram(const Program &program,
                                                 const Overrides &overrides,
                                                 DiagnosticEngine &diags) {
  // Evaluate on a thread of our own so that the stack the recursion limits
  // were sized for does not depend on the caller's thread.
  std::optional<ChunkDag> dag;
  llvm::thread evaluator(llvm::Optional<unsigned>(EvalStackSize), [&] {
    dag = Interp(program, overrides, diags).run();
  });
  evaluator.join();
  return dag;
}

std::optional<ChunkDag> coll::lang::compileToDag(unsigned bufferId,
                                                 const Overrides &overrides,
                                                 DiagnosticEngine &diags) {
  std::unique_ptr<Program> program = parseProgram(bufferId, diags);
  if (!program)
    return std::nullopt;
  return traceProgram(*program, overrides, diags);
}
