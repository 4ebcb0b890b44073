//===- Plan.h - The flat program the backends execute -----------*- C++ -*-===//
//
// buildPlan turns a verified ir::Algorithm into flat arrays of fixed-size
// records (docs/ARCHITECTURE.md §4): per tb its steps, per step its chunk slices. The
// records are POD so the CUDA backend can copy them to device memory as is.
//
// A plan does not depend on the element count. resolveCall maps every slice
// to element offsets and sizes for one count (ir::ChunkLayout), because
// chunk sizes may differ by one element.
//
// Chunk classes. Every input/output chunk has a class (its index within its
// block, ir/Geometry.h) that determines its size; scratch slots hold whatever
// was last written to them. To know how many elements a step moves through a
// scratch slot, buildPlan follows the data in the verifier's topological
// order: a scratch slot takes the class of what is written into it, a send
// carries its class to the matching receive. Steps that combine or move data
// of two different classes are recorded as size conflicts; resolveCall
// rejects a count for which the two sizes differ, rather than moving the
// wrong number of elements.
//
// Nops stay in the plan: they wait for their dependency and publish their
// flag like any step, but move nothing. Consecutive `re` steps into the same
// destination fuse into one multi-source reduction, as MSCCL runtimes do
// (same dst buffer and offset, same src buffer and cnt, no dependency of
// their own, no `hasdep` before the last, at most 16 sources). Consecutive
// `getre` steps fuse the same way, each source its own peer's
// (PlanStepPeer::members), and so do consecutive `put` steps of one source
// chunk range to the same chunks of different peers, each destination its
// own peer's (a put to several peers from one read of the source: the
// backends' copyMany), except that members may have dependencies: the
// fused step waits for the last member's, and a nop before it for each
// earlier member's that no later member's dependency implies (one on the
// same tb at that step or later). The group then reads every peer after
// all of their dependencies are met, not each after its own. That orders
// nothing new: no member but the last has `hasdep`, so no step of any rank
// waits for an earlier member's completion except through the last; every
// ordering the verifier proved still holds (docs/IR.md, "Direct steps").
// Consecutive waits for different peers' signals fuse the same way (the
// step waits for all its members' signals at once), and so do consecutive
// signals to different peers, except that a signal after the first must
// have no dependency of its own: the group would wait for it before
// raising the earlier members' signals, and that dependency may itself be
// waiting (through a peer) for one of them. Each member keeps its own pair
// and ordinal (Plan::memberSignals), so that each pair's flag still has one
// writer and its waits are taken in order.
//
// A copy that nothing waits for folds into the fused group right after it
// as its first member (PlanStepPeer::ordinal FoldedCopy): a copy into a
// `getre` group's destination from the src buffer the group reads in its
// peers becomes the sum's own first source, so the destination is written
// once and never read; a copy from the chunks a `put` group reads into
// the place the puts store them becomes the group's own first destination
// (Simple plans, whose kernels fuse puts), so the source is read once for
// the copy and every put. The copy ran on the same tb just before the
// group, so folding it in orders nothing new.
//
// Dependencies. The IR gives a step one dependency; a step that needs
// several waits for a nop, or for a chain of nops through other tbs
// (docs/COMPILER.md, "Spreading waits"), and each link of a chain is one
// more flag trip. buildPlan makes the waits direct: a nop's completion
// implies that of the step before it on its tb and whatever its own
// dependencies imply (flags are monotone, waiting is transitive), so a step
// waits on those steps themselves, up to MaxStepDependencies flags, which
// the backends poll at once (PlanStep::depTb < -1: Plan::deps). Of a
// step's dependencies, one that another of them waits on itself is
// dropped (it is implied). A step publishes where some step waits on it,
// and only there. A nop nobody waits on then runs no step of its own: its
// dependencies join those of the next step of its tb, and one at the end
// of its tb is dropped (what it waited for orders nothing after it in its
// iteration; iterations move disjoint elements of every chunk, and their
// FIFO slots, flags and signals count by iteration). So a getre group's
// member nops join the group's step.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_PLAN_H
#define COLL_INTERPRETER_PLAN_H

#include "coll/ir/Algorithm.h"
#include "coll/ir/Geometry.h"
#include "coll/ir/Verifier.h"
#include "coll/interpreter/PlanTypes.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace coll::interp {

/// The dependencies of one step (PlanStep::depTb, depStep): none, its one,
/// or its entries of Plan::deps; iterable.
struct StepDependencies {
  const PlanDep *list = nullptr; ///< several: in Plan::deps; else null
  PlanDep one{-1, -1};
  int32_t n = 0;
  const PlanDep *begin() const { return list ? list : &one; }
  const PlanDep *end() const { return begin() + n; }
  int32_t size() const { return n; }
};

struct PlanConnection {
  int32_t sender, receiver, channel;
  /// Tb indices in Plan::tbs (global in a whole plan); in a rank's plan,
  /// -1 on the side of another rank.
  int32_t sendTb, recvTb;
  /// Its place among the receiver's connections, in the whole plan's
  /// order: where the receiver's executor puts its FIFO.
  int32_t atReceiver;
};

/// A step that moves data of class `a` into (or combines it with) a chunk of
/// class `b`; harmless for counts where the two classes have equal sizes.
struct SizeConflict {
  int32_t rank, tb, irStep;
  int32_t a, b;
  uint32_t line;
};

struct Plan {
  std::string fileName; ///< for diagnostics
  std::string name;
  ir::Collective collective = ir::Collective::Custom;
  ir::Protocol protocol = ir::Protocol::Simple;
  int32_t nranks = 0;
  int32_t root = -1;
  bool inplace = false, outofplace = true;
  uint64_t minBytes = 0, maxBytes = 0;
  ir::BlockShape shape;
  /// A custom collective's pre- and postcondition, when its file carries
  /// one (for checking results; the backends do not read it).
  std::shared_ptr<const ir::Definition> condition;
  /// Steps of the longest tb in the IR (nops and fused steps included): the
  /// span of one iteration in dependency flags.
  int32_t maxIrSteps = 0;

  std::vector<int32_t> scratchChunks; ///< per rank
  std::vector<int32_t> rankTbBegin;   ///< rank r owns tbs [rankTbBegin[r], rankTbBegin[r+1])
  std::vector<PlanTb> tbs;
  std::vector<PlanStep> steps;
  /// Per step, its peer, signal pair and ordinal (PlanStepPeer): as long as
  /// `steps` when the plan has direct steps, else empty.
  std::vector<PlanStepPeer> stepPeers;
  /// The peers of fused steps' members (PlanStepPeer::members): `getre`
  /// sources, `put` destinations, `signal` and `wait` peers; the whole
  /// job's, in a rank's plan too.
  std::vector<int32_t> memberPeers;
  /// Beside memberPeers, as long: a fused signal's or wait's members' pairs
  /// and ordinals; {-1, 0} for the other fused steps' members.
  std::vector<PlanMemberSignal> memberSignals;
  /// The dependencies of steps that wait on several (PlanStep::depTb < -1),
  /// each step's together, in step order.
  std::vector<PlanDep> deps;
  std::vector<PlanSlice> slices;
  std::vector<PlanConnection> connections;
  /// Signal pairs of direct steps (docs/IR.md, "Direct steps"), in the
  /// verifier's order; PlanStep::signal indexes it. The whole job's, in a
  /// rank's plan too.
  std::vector<PlanSignal> signals;
  std::vector<SizeConflict> conflicts;
  /// Per rank, the connections it receives on (in the whole plan).
  std::vector<int32_t> connectionsInto;
  /// The classes the slices of every rank move, sorted and distinct: a
  /// call's largest chunk (and so its pipeline iterations) is the same on
  /// every rank, whether its plan holds the whole job or one rank.
  std::vector<int32_t> sliceClasses;
  /// Copy engines (copyEnginePhases): per tb, the first step of its copies
  /// and the first after them, when the whole job splits (buildPlan works
  /// it out on every rank's steps; a rank's plan keeps its tbs'); empty
  /// when it does not.
  std::vector<int32_t> copyBegin, copyEnd;
  /// The rank whose tbs, steps and slices this plan holds, or -1 when it
  /// holds every rank's. A rank's plan (slicePlan; the program cache) holds
  /// that rank's tbs (numbered from 0: rankTbBegin gives every other rank
  /// none) and the connections it sends or receives on, and the job's
  /// per-rank tables (scratch sizes, connections into each rank), size
  /// conflicts and chunk classes, so that it runs and resolves calls
  /// exactly as the whole plan does on that rank.
  int32_t planRank = -1;

  int32_t tbCount(int32_t rank) const {
    return rankTbBegin[rank + 1] - rankTbBegin[rank];
  }
  /// Whether this plan holds `rank`'s steps.
  bool holds(int32_t rank) const { return planRank < 0 || planRank == rank; }
  /// Whether `rank`'s steps include direct ones (put, get, getre, signal,
  /// wait), which reach other ranks' memory: only an executor that has
  /// every rank's buffers runs them so far (HostExecutor).
  bool hasDirectSteps(int32_t rank) const;
  /// The direct-step record of steps[index] (peer -1 when none).
  PlanStepPeer stepPeer(size_t index) const {
    return index < stepPeers.size() ? stepPeers[index] : PlanStepPeer{-1, -1, 0, -1};
  }
  /// The pairs and ordinals of a signal or wait at steps[index]: its own,
  /// or a fused one's members', in member order; empty for other steps.
  std::vector<PlanMemberSignal> stepSignals(size_t index) const {
    const PlanStepPeer d = stepPeer(index);
    if (d.signal < 0)
      return {};
    if (d.members < 0)
      return {PlanMemberSignal{d.signal, d.ordinal}};
    const auto first = memberSignals.begin() + d.members;
    return std::vector<PlanMemberSignal>(first, first + steps[index].nsrc);
  }
  /// What a step with these PlanStep::depTb and depStep waits for.
  StepDependencies dependencies(int32_t depTb, int32_t depStep) const {
    if (depTb >= 0)
      return StepDependencies{nullptr, PlanDep{depTb, depStep}, 1};
    if (depTb == -1)
      return StepDependencies{};
    return StepDependencies{deps.data() + depStep, PlanDep{-1, -1}, -depTb};
  }
  StepDependencies dependencies(const PlanStep &step) const {
    return dependencies(step.depTb, step.depStep);
  }
};

/// `whole` (a plan of every rank) reduced to what `rank` runs: its own
/// tbs, connections, steps and slices, renumbered from 0, and the job's
/// tables, as Plan::planRank says.
/// `ofRank`, when given, lists the connections `rank` sends or receives
/// on (connectionsByRank), so that slicing every rank in turn does not scan
/// every connection each time.
Plan slicePlan(const Plan &whole, int32_t rank, const std::vector<int32_t> *ofRank = nullptr);

/// Per rank, the indices of the connections it sends or receives on, in
/// plan order.
std::vector<std::vector<int32_t>> connectionsByRank(const Plan &whole);

/// Checks that every index of `plan` is in range (tbs, steps, slices,
/// connections, dependencies, enumerations), for plans read from outside
/// the process (the program cache). It does not prove the program: that is
/// ir::verify and ir::check's work, done before the plan was stored.
llvm::Error checkPlanIndices(const Plan &plan);

/// Builds the plan of a verified algorithm. `analysis` is what ir::verify
/// returned for it. Fails (with file:line) when a step reads a scratch slot
/// that nothing wrote before it.
llvm::Expected<Plan> buildPlan(const ir::Algorithm &alg, const ir::Analysis &analysis,
                               llvm::StringRef fileName);

/// Copy engines (docs/CUDA.md, "Copy engines"): a plan whose copies can run
/// as copies of the GPU's copy engines (cudaMemcpyAsync), with kernels for
/// its signals only. Each tb's steps split in three runs: what comes before
/// its copies (signals, waits, nops), its copies (cpy, put, get and nops:
/// no reduction, no FIFO), and what comes after them (signals, waits,
/// nops). A step's run is the latest of its tb's previous step's and of
/// its dependencies' (a signal, wait or nop after a copy is after the
/// copies), and a signal and the wait that takes it (one ordinal of one
/// signal pair) are in one run.
/// A plan splits when every copy is then in the middle run.
///
/// Run so, a call is: a kernel of every tb's first run, then the copies in
/// an order that keeps each after the copies it depends on, then a kernel
/// of the last runs, where a dependency on a copy (done, by the stream's
/// order) is dropped. That is a schedule the program allows: the first
/// runs are closed under what they wait for (their dependencies and the
/// signals their waits take are in them), so they complete as they would in the whole
/// program; everything a copy waits for is done before it, and everything
/// that waits for a copy comes after it. The checker's proof of the
/// program (no race, no deadlock, the result) holds for it.
struct CopyPhases {
  /// Per tb of the plan: its middle run is steps [begin, end) of the tb.
  std::vector<int32_t> begin, end;
  /// The steps of the middle runs that move data (not nops): the global tb
  /// and the index into Plan::steps, in an order that keeps each after
  /// every copy it depends on.
  struct Copy {
    int32_t tb, step;
  };
  std::vector<Copy> copies;
};

/// The copy-engine split of `plan` (which holds every rank: planRank < 0,
/// as buildPlan has it); an error naming the first step that prevents it
/// (and why) otherwise.
llvm::Expected<CopyPhases> copyEnginePhases(const Plan &plan);

/// The step that publishes what dependency `d` waits for: the first of its
/// tb at or past the IR step (a tb's flags count up through its steps), as
/// an index into Plan::steps; -1 past the tb's end.
int32_t publishingStep(const Plan &plan, const PlanDep &d);

/// The split buildPlan stored (Plan::copyBegin, copyEnd) for the tbs `plan`
/// holds, every rank's or one's, with their copies in order; none when the
/// job does not split.
std::optional<CopyPhases> storedCopyPhases(const Plan &plan);

/// A plan resolved for one element count.
struct CallLayout {
  ir::ChunkLayout layout;
  std::vector<CallSlice> slices; ///< parallel to Plan::slices
  uint64_t maxChunkElems = 0;    ///< the largest nelem of any slice
  uint64_t inputElems = 0, outputElems = 0; ///< per rank
  std::vector<uint64_t> scratchElems;       ///< per rank
};

/// Resolves `plan` for `count` elements per block. Fails when a size
/// conflict matters for this count.
llvm::Expected<CallLayout> resolveCall(const Plan &plan, uint64_t count);

/// Number of pipeline iterations for slices of at most `sliceElems` elements.
inline uint64_t iterationCount(const CallLayout &call, uint64_t sliceElems) {
  return (call.maxChunkElems + sliceElems - 1) / sliceElems;
}

} // namespace coll::interp

#endif // COLL_INTERPRETER_PLAN_H
