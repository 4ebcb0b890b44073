//===- InterpStmt.cpp - Statements and declarations -----------------------===//
//
// Interp's statements: blocks, bindings, loops, branches, returns and
// parallelize, and the declarations a program makes as it runs (its
// parameters, its collective with its pre and post blocks, its options).
//
//===----------------------------------------------------------------------===//

#include "Interp.h"

#include "llvm/ADT/STLExtras.h"

#include <cstdio>

using namespace coll;
using namespace coll::lang;
using namespace coll::lang::ast;

Interp::Flow Interp::execBlock(const Block &block, Frame &frame) {
  for (const StmtPtr &stmt : block)
    if (Flow flow = exec(*stmt, frame); flow != Flow::Next)
      return flow;
  return Flow::Next;
}

Interp::Flow Interp::exec(const Stmt &stmt, Frame &frame) {
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

Interp::Flow Interp::execFor(const ForStmt &loop, Frame &frame) {
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

bool Interp::execParam(const ParamDecl &param) {
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

std::optional<int32_t> Interp::evalBounded(const Expr &expr, Frame &frame,
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

Interp::Flow Interp::execCollective(const CollectiveDecl &decl) {
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

bool Interp::execOption(const OptionDecl &decl) {
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
