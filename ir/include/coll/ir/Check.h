//===- Check.h - Proving an algorithm right without running it --*- C++ -*-===//
//
// `collir --check` (docs/IR.md, "Checking"): after the verifier has accepted
// an algorithm, three static checks decide whether every run of it, on any
// runtime that follows docs/ARCHITECTURE.md §4 and for every call size, computes its
// collective:
//
//  - races: two accesses of a rank to the same chunk, at least one a write,
//    that tb order and dependencies leave unordered (Races.h);
//  - deadlock: the tbs run their step lists with 8-slot connection FIFOs
//    (Simulation.h); a run that gets stuck is reported as the cycle of tbs
//    waiting for each other, with their steps and connections;
//  - result: symbolic execution on sets of input chunks, compared with the
//    collective's definition (or a custom collective's own), in place and
//    out of place as the header declares.
//
// The checks work on chunks, whose sizes scale with the call, so one answer
// covers every size.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_IR_CHECK_H
#define COLL_IR_CHECK_H

#include "coll/ir/Algorithm.h"
#include "coll/ir/Diagnostics.h"
#include "coll/ir/Verifier.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace coll::ir {

/// The definition of a built-in collective (not Custom) over `nranks` ranks
/// whose count-element blocks are cut into `chunksPerBlock` chunks; `root`
/// only for rooted collectives.
Definition builtinDefinition(Collective kind, int32_t nranks,
                             int32_t chunksPerBlock, int32_t root);

/// The definition `alg` must implement: the built-in one for its header, or
/// the condition a custom collective carries (none when it carries none).
std::optional<Definition> definitionOf(const Algorithm &alg);

/// One tb of a deadlock cycle: the step it waits at and what it waits for.
struct DeadlockWait {
  StepRef step;
  std::string waitsFor; ///< "data from rank 1 tb 0 step 3 on connection 1->0 channel 0"
};

/// A run with bounded FIFOs that got stuck.
struct Deadlock {
  /// Every step an unfinished tb waits at, in (rank, tb) order.
  std::vector<StepRef> stuck;
  /// A cycle of tbs among them, each waiting for the next (the last for the
  /// first). Empty when the IR breaks the contract so that no cycle could be
  /// told (the verifier reports why).
  std::vector<DeadlockWait> cycle;
};

/// Runs every tb's steps in order with `fifoSlots`-slot connection FIFOs.
/// Works on any IR the reader accepts (dependencies or connections that the
/// verifier would reject are left out), so that it can also locate the
/// cycles the verifier only detects.
std::optional<Deadlock> findDeadlock(const Algorithm &alg,
                                     int32_t fifoSlots = 8);

/// A wrong result found by symbolic execution.
struct WrongResult {
  bool inplace = false;
  /// The message is about a final output chunk (else about the first
  /// writer's step).
  bool output = false;
  /// The step that failed, or that last wrote the wrong output chunk (none
  /// when nothing wrote it), then the steps its data came through, newest
  /// first (at most 8).
  std::vector<StepRef> writers;
  std::string message;
};

/// Symbolic execution (Symbolic.h) of `alg` in `analysis.topologicalOrder`
/// with the memory of one call mode; out of place, the input must stay
/// unchanged. Meaningful only for race-free algorithms (then every order
/// computes the same). `definition` must be for alg.ngpus() ranks.
/// `strictReads`: reading data nobody defined fails (the compiler checks
/// its own output so); otherwise only a wrong output does.
std::optional<WrongResult> executeSymbolically(const Algorithm &alg,
                                               const Analysis &analysis,
                                               const Definition &definition,
                                               bool inplace, bool strictReads = false);

struct CheckOptions {
  int32_t fifoSlots = 8;
  /// The definition of a custom collective, in place of the one the file
  /// carries; ignored for built-in ones. A custom collective without either
  /// is checked for races and deadlocks only, with a warning.
  const Definition *custom = nullptr;
};

/// Runs the three checks on a verified algorithm and reports each failure,
/// located at the step that shows it, into `diags`. True when all pass.
bool check(const Algorithm &alg, const Analysis &analysis,
           DiagnosticList &diags, const CheckOptions &options = {});

/// "rank 1 tb 0 step 3 ('r' from rank 0)".
std::string describeStep(const Algorithm &alg, StepRef ref);

} // namespace coll::ir

#endif // COLL_IR_CHECK_H
