//===- Compiler.h - From a traced program to verified MSCCL IR --*- C++ -*-===//
//
// The compiler turns the ChunkDag that the front end traced into an
// ir::Algorithm (docs/ARCHITECTURE.md §1, docs/COMPILER.md):
//
//   layout      chunk refinement (instances x parallel factors), lanes,
//               channels, buffer views
//   lower       every operation part -> instructions (s + r/rrc, cpy, re)
//   depend      dependencies recomputed on the refined chunk slots
//   fuse        r+s -> rcs, rrc+s -> rrcs, dead rrcs -> rrs
//   assign      threadblocks: manual ids kept, the rest automatic
//   order       list scheduling with bounded FIFOs (program order fallback)
//   emit        cross-tb dependencies with nops, the IR
//   verify      ir::verify, a FIFO-aware deadlock check, symbolic execution
//               against the postcondition and a race check in each mode,
//               runtime limits
//
// Every problem is a located diagnostic at the .coll operation that caused
// it; nothing unverified is returned.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_COMPILER_COMPILER_H
#define COLL_COMPILER_COMPILER_H

#include "coll/ir/Algorithm.h"
#include "coll/ir/Verifier.h"
#include "coll/lang/ChunkDag.h"
#include "coll/lang/Diagnostics.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace coll::compiler {

/// The runtime the IR is for; it decides the limits the IR must respect.
enum class Target : uint8_t {
  Coll,  ///< Coll's interpreter: no step, tb or cnt limits
  Msccl, ///< the MSCCL executor (ir::mscclLimits())
};

llvm::StringRef targetName(Target target);
ir::RuntimeLimits runtimeLimits(Target target);

struct CompileOptions {
  Target target = Target::Coll;
};

inline constexpr uint32_t NoOp = ~uint32_t(0);

/// The traced operation(s) an IR step was made from.
struct StepOrigin {
  uint32_t op = NoOp; ///< the ChunkOp (a fused step: the one it receives)
  /// A fused step (rcs, rrcs, rrs): the ChunkOp whose send it performs.
  uint32_t forwardedOp = NoOp;
  /// Which part of the operation: instance * maxParallel + parallel part.
  int32_t lane = 0;
};

/// How the compiler ordered each threadblock's steps.
enum class Ordering : uint8_t {
  Simulated,    ///< list scheduling of a simulated execution
  ProgramOrder, ///< one global priority derived from program order
};

/// A compiled and verified program, with the provenance of every step.
struct Schedule {
  ir::Algorithm algorithm;
  /// origins[gpu][tb][step]: where each step came from (nops: the step they
  /// precede).
  std::vector<std::vector<std::vector<StepOrigin>>> origins;
  int32_t refinement = 1; ///< refined chunks per traced chunk
  int32_t lanes = 1;      ///< parts per operation: instances * max parallel
  bool fused = true;      ///< fusion was applied (not retried without)
  /// Dependencies were computed with input and output aliased as in place,
  /// so that both modes are race-free (always so for in-place traces).
  bool inPlaceDependencies = false;
  Ordering ordering = Ordering::Simulated;
};

/// Compiles `dag` (options such as instances and protocol come from
/// dag.options). Reports every problem through `diags` and returns nothing
/// when there was any.
std::optional<Schedule> compileSchedule(const lang::ChunkDag &dag,
                                        const CompileOptions &options,
                                        lang::DiagnosticEngine &diags);

/// compileSchedule, keeping only the algorithm.
std::optional<ir::Algorithm> compile(const lang::ChunkDag &dag,
                                     const CompileOptions &options,
                                     lang::DiagnosticEngine &diags);

/// The call modes a schedule supports.
struct Modes {
  bool inplace = false, outofplace = false;
};

/// Re-verifies `schedule` against `dag`: ir::verify, a deadlock check with
/// 8-slot FIFOs, every operation scheduled exactly once, symbolic execution
/// against the postcondition and a race check in the traced mode (and in the
/// other one, which decides whether it is supported), then the target's
/// limits. Failures are located at the operations involved. Returns the
/// supported modes.
std::optional<Modes> verifySchedule(const Schedule &schedule,
                                    const lang::ChunkDag &dag,
                                    const CompileOptions &options,
                                    lang::DiagnosticEngine &diags);

/// One operation a step came from and its place in the program.
struct SourcePlace {
  uint32_t op = NoOp;
  int32_t lane = 0;
  llvm::StringRef file; ///< the name of the buffer holding the program
  unsigned line = 0, column = 0;
};

/// Where step `ref` of `schedule` came from: the operation it performs and,
/// for a fused step, then the one whose send it performs. What
/// `--emit=schedule` prints after each step's `;` and `--emit=svg` puts in
/// each step's tooltip.
llvm::SmallVector<SourcePlace, 2> stepSources(const Schedule &schedule,
                                              const lang::ChunkDag &dag,
                                              const llvm::SourceMgr &srcMgr,
                                              ir::StepRef ref);

/// `collc --emit=schedule`: per rank and tb, the steps in order with their
/// slots, dependencies and the place of the operation they came from.
void dumpSchedule(const Schedule &schedule, const lang::ChunkDag &dag,
                  const llvm::SourceMgr &srcMgr, llvm::raw_ostream &os);

/// `collc --emit=dot`: the operation DAG for Graphviz.
void dumpDot(const lang::ChunkDag &dag, const llvm::SourceMgr &srcMgr,
             llvm::raw_ostream &os);

} // namespace coll::compiler

#endif // COLL_COMPILER_COMPILER_H
