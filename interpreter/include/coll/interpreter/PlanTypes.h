//===- PlanTypes.h - POD records of a plan, host and device -----*- C++ -*-===//
//
// The fixed-size records the backends execute (see Plan.h for how they are
// built). This header depends on nothing but <cstdint> and the step-type
// list, so device code can include it.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_PLANTYPES_H
#define COLL_INTERPRETER_PLANTYPES_H

#include <cstdint>

namespace coll::interp {

/// The IR step types, in ir::StepType's order (checked in Plan.cpp).
enum class StepKind : uint8_t {
#define COLL_STEP_TYPE(Enum, XmlName, Recv, Send, ReadsSrc, Red, WritesDst, Direct) Enum,
#include "coll/ir/StepTypes.def"
};

/// Most sources one fused `re` may have.
inline constexpr int MaxReduceSources = 16;

/// Most dependencies one step may wait on (PlanStep::depTb): one lane of a
/// block's first warp polls each.
inline constexpr int MaxStepDependencies = 32;

/// One tb of one rank.
struct PlanTb {
  int32_t rank;
  int32_t tb;        ///< index within its rank
  int32_t channel;
  int32_t sendConn;  ///< index into Plan::connections, or -1
  int32_t recvConn;  ///< index into Plan::connections, or -1
  int32_t stepBegin; ///< first of nSteps entries in Plan::steps
  int32_t nSteps;
  int32_t sliceBegin; ///< first of nSlices entries in the slice arrays: the tb's steps' slices
  int32_t nSlices;
};

/// One step as the interpreter runs it.
struct PlanStep {
  StepKind type;
  uint8_t srcBuf;     ///< ir::BufferKind: 0 input, 1 output, 2 scratch
  uint8_t dstBuf;     ///< ir::BufferKind
  uint8_t nsrc;       ///< sources of a fused `re` or `getre`, destinations of a fused `put` (1..MaxReduceSources); else 1
  int32_t count;      ///< chunks (the IR's cnt); 0 for nops
  int32_t sliceBegin; ///< first of count*nsrc entries in the slice arrays
  /// What the step waits for before it runs: -1 nothing; a global tb index
  /// t >= 0: tb t's IR step depStep; -n for n >= 2 dependencies: the n
  /// entries of Plan::deps from index depStep (Plan.h, "Dependencies").
  int32_t depTb;
  int32_t depStep; ///< IR step index of depTb waited for; with several, their first in Plan::deps
  int32_t irStep;     ///< IR step index this step publishes as (last of a fused group)
  /// Publish completion after this step. In the kernel's copy of a tb's
  /// steps in shared memory: the step's stepFlags (StepSemantics.h), whose
  /// bit 0 is this.
  int32_t hasDep;
};

/// One of the dependencies of a step that waits on several (Plan::deps).
struct PlanDep {
  int32_t tb;   ///< global tb index waited for
  int32_t step; ///< IR step index of that tb
};

/// What a direct step (docs/IR.md, "Direct steps") needs beyond its
/// PlanStep, in Plan::stepPeers beside it: kept out of PlanStep, which the
/// kernel copies into shared memory per step of the longest tb.
struct PlanStepPeer {
  int32_t peer;    ///< direct steps: the rank of the remote operand or signal; else -1
  int32_t signal;  ///< signal, wait: index into Plan::signals; else -1
  /// signal, wait: which of its pair's signals or waits in one iteration,
  /// from 0 (a fused one: its first member's); a fused getre or put:
  /// FoldedCopy or 0; else 0.
  int32_t ordinal;
  /// A fused `getre` (nsrc > 1): source r is the peer Plan::memberPeers[members
  /// + r] (the first is `peer`; with FoldedCopy source r + 1); a fused `put`:
  /// destination r (with FoldedCopy destination r + 1); a fused `signal` or `wait`: the peer of member r, whose
  /// pair and ordinal are Plan::memberSignals[members + r] (the first's are
  /// `signal` and `ordinal`); else -1.
  int32_t members;
};

/// Member r of a fused `signal` or `wait` (Plan::memberSignals, beside
/// Plan::memberPeers): its pair and its ordinal among the pair's signals or
/// waits. {-1, 0} for the members of fused `put` and `getre` steps.
struct PlanMemberSignal {
  int32_t signal;
  int32_t ordinal;
};

/// PlanStepPeer::ordinal of a fused step that folds in the copy just
/// before it (Plan.h):
/// - a `getre` whose first source is this rank's own, in its src buffer (a
///   copy into the group's destination), so that the sum is stored once and
///   the destination never read; its peers are sources 1 .. nsrc-1;
/// - a `put` (Simple plans) whose first destination is this rank's own, in
///   its dst buffer (a copy of what the puts send, to where they store it),
///   so that the source is read once for all; its peers are destinations
///   1 .. nsrc-1. In place the own copy is onto itself and is left out.
inline constexpr int32_t FoldedCopy = 1;

/// The peers of a direct step's record: one, or a fused step's members.
inline int32_t stepPeerCount(const PlanStepPeer &d, int32_t nsrc) {
  return d.members < 0 ? 1 : d.signal < 0 && d.ordinal == FoldedCopy ? nsrc - 1 : nsrc;
}

/// Signals from one rank to another on one channel (ir::SignalPair): the
/// counter a `signal` step bumps and a `wait` step polls.
struct PlanSignal {
  int32_t sender, receiver, channel;
  int32_t perIteration; ///< signals (and waits) in one pipeline iteration
};

/// One chunk of a step, before sizes are known: for a fused `re`, entry
/// c*nsrc + r is source r of chunk c (all with the same dstChunk).
struct PlanSlice {
  int32_t srcChunk; ///< chunk index in the step's src buffer
  int32_t dstChunk; ///< chunk index in the step's dst buffer
  int32_t cls;      ///< class of the data moved: its size is classSize(cls)
};

/// One PlanSlice resolved for a call.
struct CallSlice {
  uint64_t src;   ///< element offset in the src buffer (0 if unused)
  uint64_t dst;   ///< element offset in the dst buffer (0 if unused)
  uint64_t nelem; ///< elements of the chunk
};

} // namespace coll::interp

#endif // COLL_INTERPRETER_PLANTYPES_H
