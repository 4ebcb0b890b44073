//===- Interp.h - The evaluator of .coll programs ---------------*- C++ -*-===//
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
// The evaluator is one class, Interp, whose work is in four files:
// Interp.cpp runs a program (its budget, frames and call chain, and the
// entry points of coll/lang/Frontend.h), InterpStmt.cpp executes statements
// and declarations, InterpExpr.cpp evaluates expressions and calls of user
// functions, and InterpBuiltins.cpp the built-in functions and the methods
// and properties of chunk references.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_LANG_INTERP_H
#define COLL_LANG_INTERP_H

#include "Limits.h"
#include "Sema.h"
#include "Tracer.h"

#include "coll/lang/Frontend.h"

#include "llvm/Support/Compiler.h"

#include <array>
#include <cassert>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace coll::lang {

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
inline llvm::StringRef typeName(size_t alternative) {
  static const char *const names[] = {
      "nothing",  "an integer",        "a boolean",      "a string",
      "a buffer", "a chunk reference", "a contribution", "a list",
      "auto"};
  static_assert(std::size(names) == std::variant_size_v<ValueData>);
  return names[alternative];
}
inline llvm::StringRef typeName(const Value &value) {
  return typeName(value.data.index());
}
template <typename T, size_t I = 0> llvm::StringRef typeName() {
  if constexpr (std::is_same_v<std::variant_alternative_t<I, ValueData>, T>)
    return typeName(I);
  else
    return typeName<T, I + 1>();
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

/// The evaluator of one program: run() evaluates it once and returns what
/// it traced.
class Interp {
public:
  Interp(const ast::Program &program, const Overrides &overrides,
         DiagnosticEngine &diags);

  std::optional<ChunkDag> run();

private:
  using Frame = std::vector<Value>;
  enum class Flow : uint8_t { Next, Return, Fail };
  /// Which part of the program is running: chunk operations only happen in
  /// the body, the pre/post blocks of a custom collective state conditions.
  enum class Phase : uint8_t { Body, Pre, Post };
  using Args = std::array<const ast::Expr *, 6>;

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
                                          uintptr_t stackUse);

  Value &slot(const ast::Binding &binding, Frame &frame) {
    assert(binding.kind == ast::Binding::Kind::Global ||
           binding.kind == ast::Binding::Kind::Local);
    return binding.kind == ast::Binding::Kind::Global ? globals[binding.slot]
                                                      : frame[binding.slot];
  }

  static Args bind(const std::vector<ast::Arg> &args) {
    Args bound{};
    for (const ast::Arg &arg : args) {
      assert(arg.param < bound.size() &&
             "more parameters than any built-in has");
      bound[arg.param] = arg.value.get();
    }
    return bound;
  }

  //===--------------------------------------------------------------------===//
  // Statements (InterpStmt.cpp)
  //===--------------------------------------------------------------------===//

  Flow execBlock(const ast::Block &block, Frame &frame);
  Flow exec(const ast::Stmt &stmt, Frame &frame);
  Flow execFor(const ast::ForStmt &loop, Frame &frame);
  bool execParam(const ast::ParamDecl &param);
  /// An integer argument in [lo, hi], reported as `what`.
  std::optional<int32_t> evalBounded(const ast::Expr &expr, Frame &frame,
                                     llvm::StringRef what, int64_t lo,
                                     int64_t hi);
  Flow execCollective(const ast::CollectiveDecl &decl);
  bool execOption(const ast::OptionDecl &decl);

  //===--------------------------------------------------------------------===//
  // Expressions (InterpExpr.cpp)
  //===--------------------------------------------------------------------===//

  template <typename T>
  std::optional<T> evalAs(const ast::Expr &expr, Frame &frame) {
    std::optional<Value> value = eval(expr, frame);
    if (!value)
      return std::nullopt;
    if (const T *typed = value->get<T>())
      return *typed;
    return fail(expr.loc,
                "expected " + typeName<T>() + ", got " + typeName(*value));
  }
  std::optional<Value> eval(const ast::Expr &expr, Frame &frame);
  std::optional<Value> evalUnary(const ast::UnaryExpr &unary, Frame &frame);
  std::optional<Value> evalBinary(const ast::BinaryExpr &binary, Frame &frame);
  std::optional<Value> evalCall(const ast::CallExpr &call, Frame &frame,
                                bool wantValue);

  //===--------------------------------------------------------------------===//
  // Built-in functions, chunk methods and properties (InterpBuiltins.cpp)
  //===--------------------------------------------------------------------===//

  std::optional<Value> evalBuiltin(ast::Builtin builtin,
                                   const ast::CallExpr &call, Frame &frame,
                                   bool wantValue);
  std::optional<int32_t> evalRank(const ast::Expr &expr, Frame &frame);
  std::optional<int32_t> evalIndex(const ast::Expr &expr, Frame &frame,
                                   llvm::StringRef buffer, int32_t chunks);
  /// Checks that `size` chunks from `index` exist in `buffer` (scratch
  /// buffers grow up to MaxScratchChunks); errors point at `indexExpr`.
  std::optional<SlotRange> makeRef(int32_t rank, BufferId buffer, int64_t index,
                                   int64_t size, const ast::Expr &indexExpr,
                                   bool destination);
  /// A scheduling hint: -1 when absent.
  std::optional<int32_t> evalHint(const ast::Expr *expr, Frame &frame,
                                  llvm::StringRef name);
  std::optional<Value> evalMethod(const ast::MethodExpr &method, Frame &frame);
  std::optional<Value> evalMember(const ast::MemberExpr &member, Frame &frame);
  std::string describe(const SlotRange &range) const;

  //===--------------------------------------------------------------------===//
  // State (frames and the call chain: Interp.cpp)
  //===--------------------------------------------------------------------===//

  const ast::Program &program;
  const Overrides &overrides;
  DiagnosticEngine &diags;
  Tracer tracer;
  const ast::CollectiveDecl *collective = nullptr;
  std::vector<std::string> paramNames;
  ProgramOptions options;

  Frame globals;
  /// Frames of returned calls, empty but with their memory, for the next
  /// calls: a call allocates nothing once its depth was reached before.
  std::vector<Frame> spareFrames;
  Frame takeFrame(size_t slots);
  void releaseFrame(Frame frame);
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
  uint32_t currentCall();
  uintptr_t stackBase = 0; ///< where evaluation started; the stack grows down
};

} // namespace coll::lang

#endif // COLL_LANG_INTERP_H
