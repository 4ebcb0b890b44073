//===- StepSemantics.h - The interpreter loop, host and device --*- C++ -*-===//
//
// What one tb does, written once for every backend (docs/ARCHITECTURE.md §4): for each
// pipeline iteration, for each step: wait for the step's dependency, move the
// iteration's slice of every chunk the step names, then publish completion if
// other tbs wait on the step.
//
// Iteration `it` covers elements [it*S, (it+1)*S) of every chunk, S being
// the backend's slice size (one FIFO slot of the protocol). Chunks shorter
// than that range contribute nothing in that iteration, on both ends of a
// connection alike, because both ends compute the same chunk size.
//
// The backend supplies `Prims`, which owns memory ordering, thread
// cooperation and waiting:
//
//   bool waitDependency(int32_t depTb, uint64_t iteration, int32_t depStep);
//       // the step's PlanStep::depTb and depStep (not -1): one tb's IR step,
//       // or several dependencies (Plan::deps), all of them met
//   void publish(uint64_t iteration, int32_t irStep);
//   void at(uint64_t iteration, int32_t index, const PlanStep &step);
//       // watchdog context; index: the step's in the tb (steps[index])
//   bool send(const T *src, uint64_t n);
//   bool recv(T *dst, uint64_t n);
//   bool recvCopySend(T *dst, uint64_t n);
//   bool recvReduceSend(const T *src, uint64_t n);
//   bool recvReduceCopy(const T *src, T *dst, uint64_t n);
//   bool recvReduceCopySend(const T *src, T *dst, uint64_t n);
//   void copy(const T *src, T *dst, uint64_t n);
//       // with HoldSteps (the device's wide build): copy<true>(src, dst, n),
//       // its pack loop's first pass untested (device/Reduce.h)
//   void reduce(T *dst, const T *const *srcs, int nsrc, uint64_t n, bool from);
//       // dst = srcs[nsrc-1] ⊕ (… ⊕ (srcs[0] ⊕ dst)); from: the same
//       // without dst (… ⊕ srcs[0]), which is not read (a fused getre with
//       // a folded copy, FoldedCopy)
//
// Waiting operations return false when the call is being aborted (watchdog);
// the loop then stops.
//
// A backend that runs direct steps (docs/IR.md, "Direct steps") also
// supplies these; the loop runs direct steps only where they exist (the
// host backend's Prims), and plans reach other backends without them:
//
//   T *peerBase(const PlanStep &step, uint8_t buffer, int member);
//       // the buffer of the step's peer (of source `member`'s peer in a fused
//       // getre, of destination `member`'s in a fused put:
//       // PlanStepPeer::members); null: stop (reported)
//   void copyMany(const T *src, T *const *dsts, int ndst, uint64_t n);
//       // a fused put: src read once, stored to each of dsts
//   bool foldedCopy(const PlanStep &step);
//       // a fused getre's first source, or a fused put's first
//       // destination, is this rank's own (FoldedCopy)
//   void signal(const PlanStep &step);
//   bool waitSignal(const PlanStep &step, uint64_t iteration);
//
// (The peer, signal pair and ordinal are in Plan::stepPeers, which the
// backend finds from the step.)
//
// A backend whose at() does not record its timeline supplies the record
// apart (TracesSteps: the device's, whose steps then test once for all that
// a plain step skips):
//
//   bool tracingSteps() const;
//   void traceStep(uint64_t elems);
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_STEPSEMANTICS_H
#define COLL_INTERPRETER_STEPSEMANTICS_H

#include "coll/interpreter/Config.h"
#include "coll/interpreter/PlanTypes.h"

#include <cstdint>
#include <type_traits>

namespace coll::interp {

/// Whether a backend's Prims run direct steps (they have `signal`).
template <class P, class = void> struct HasDirectSteps : std::false_type {};
template <class P>
struct HasDirectSteps<P, std::void_t<decltype(&P::signal)>> : std::true_type {};

/// Whether a backend's Prims run fused puts (PlanStep::nsrc > 1 on a put:
/// copyMany): `static constexpr bool FusedPuts = true`.
template <class P, class = void> struct FusesPuts : std::false_type {};
template <class P>
struct FusesPuts<P, std::void_t<decltype(P::FusedPuts)>> : std::bool_constant<P::FusedPuts> {};

/// Whether a backend's Prims record a step in a timeline apart from at():
/// the device's, whose at() only notes where the block is. They have
///   bool tracingSteps() const;    // this thread records a timeline
///   void traceStep(uint64_t elems); // a step starts, of `elems` elements
/// and the loop calls traceStep on the steps' slow path (runThreadBlock).
template <class P, class = void> struct TracesSteps : std::false_type {};
template <class P>
struct TracesSteps<P, std::void_t<decltype(&P::traceStep)>> : std::true_type {};

// StepTypes.def's order, which the kind tests below count on: the FIFO
// kinds, then copy and reduce, nop, and the direct kinds last.
static_assert(static_cast<int>(StepKind::Copy) == 6 && static_cast<int>(StepKind::Reduce) == 7 &&
                  static_cast<int>(StepKind::Nop) == 8 && static_cast<int>(StepKind::Put) == 9 &&
                  static_cast<int>(StepKind::Get) == 10 &&
                  static_cast<int>(StepKind::GetReduce) == 11 &&
                  static_cast<int>(StepKind::Signal) == 12 &&
                  static_cast<int>(StepKind::Wait) == 13,
              "the step kind tests of StepSemantics.h follow StepTypes.def's order");

/// put, get, getre, signal, wait: what a step does before its data that
/// only direct steps do.
COLL_HOST_DEVICE COLL_INLINE constexpr bool isDirectKind(StepKind k) {
  return k >= StepKind::Put;
}
/// The kinds whose chunks move within the tb's reach without a FIFO (copy,
/// reduce, put, get, getre) that copy: copy, put, get.
COLL_HOST_DEVICE COLL_INLINE constexpr bool isCopyKind(StepKind k) {
  return (1u << static_cast<unsigned>(k)) & 0x640u;
}
/// And those that reduce: reduce, getre.
COLL_HOST_DEVICE COLL_INLINE constexpr bool isReduceKind(StepKind k) {
  return (1u << static_cast<unsigned>(k)) & 0x880u;
}

/// The slice of chunk `c` of a step (its first source's, for a fused
/// reduction). Non-negative and below the tb's slice count: unsigned
/// 32-bit, so that the device forms the address in one multiply-add.
COLL_HOST_DEVICE COLL_INLINE const CallSlice *chunkSlice(const PlanStep &step,
                                                         const CallSlice *slices,
                                                         int32_t sliceBase, int32_t c) {
  return slices + static_cast<uint32_t>(step.sliceBegin - sliceBase + c * step.nsrc);
}

/// What iteration `lo / sliceElems` moves of a chunk of `nelem` elements,
/// which has more than `lo`.
COLL_HOST_DEVICE COLL_INLINE uint64_t chunkShare(uint64_t nelem, uint64_t lo,
                                                 uint64_t sliceElems) {
  return nelem - lo < sliceElems ? nelem - lo : sliceElems;
}

/// The elements a step moves in iteration `lo / sliceElems` (what its
/// chunks' prims count): a timeline's record of the step.
COLL_HOST_DEVICE inline uint64_t stepElems(const PlanStep &step, const CallSlice *slices,
                                           int32_t sliceBase, uint64_t lo,
                                           uint64_t sliceElems) {
  uint64_t total = 0;
  for (int32_t c = 0; c < step.count; ++c) {
    const uint64_t nelem = chunkSlice(step, slices, sliceBase, c)->nelem;
    if (nelem > lo)
      total += chunkShare(nelem, lo, sliceElems);
  }
  return total;
}

/// One rank's buffers for one call, in elements of T. In-place calls pass
/// aliasing pointers (ir::inPlaceOffsets).
template <class T> struct RankBuffers {
  T *input;
  T *output;
  T *scratch;

  COLL_HOST_DEVICE COLL_INLINE T *operator[](uint8_t buffer) const {
    return buffer == 0 ? input : buffer == 1 ? output : scratch;
  }
};

/// What the interpreter loop tests of a step, one bit each, so that on the
/// device each test is one instruction from the step's word to its branch
/// (docs/CUDA.md, "Step paths"). The loop works them out from the step's
/// fields (stepFlags), or, with FlaggedSteps, finds them in PlanStep::hasDep:
/// the device's copy of a tb's steps in shared memory holds them there,
/// worked out once per launch (Kernel.cuh). Publishes is hasDep's own
/// meaning.
namespace step_flag {
/// Publish completion after the step (other tbs wait on it).
inline constexpr int32_t Publishes = 1;
/// What only some steps do before their data: the step waits on a tb, is a
/// direct kind (where the backend runs them), or has no chunks (nop,
/// signal, wait).
inline constexpr int32_t Slow = 2;
/// After its chunk the loop goes straight to the next step: one chunk, no
/// publish, and not the tb's last step.
inline constexpr int32_t Straight = 4;
} // namespace step_flag

/// The step_flag bits of `step`, the `index`th of `nSteps`. directSteps:
/// the backend runs direct steps (HasDirectSteps).
COLL_HOST_DEVICE COLL_INLINE int32_t stepFlags(const PlanStep &step, bool directSteps,
                                               int32_t index, int32_t nSteps) {
  int32_t f = step.hasDep ? step_flag::Publishes : 0;
  if (step.depTb != -1 || step.count <= 0 || (directSteps && isDirectKind(step.type)))
    f |= step_flag::Slow;
  if (step.count == 1 && !step.hasDep && index + 1 < nSteps)
    f |= step_flag::Straight;
  return f;
}

/// Runs the steps [steps, steps + nSteps) of one tb for a whole call. A
/// step's slices are slices[step.sliceBegin - sliceBase ...]: the whole
/// call's (sliceBase 0), or a copy of the tb's own (sliceBase: the tb's
/// first, PlanTb::sliceBegin). Returns false if a wait was aborted.
///
/// HoldSteps: each step is read into registers once, all its fields at a
/// time. Through a reference, every block barrier and every "memory"
/// clobber of the device's step path makes the compiler read the fields it
/// still needs again, and a step pays a dependent round trip to shared
/// memory for each (its dependency, its kind, its buffers, its kind again,
/// its chunk count, its slice index, its kind again at the dispatch): the
/// kernel build with registers to spare holds them (Kernel.cuh); the others
/// would spill them.
///
/// FlaggedSteps: each step's hasDep holds its stepFlags (the device's
/// shared copy); otherwise the loop works them out.
template <class T, bool HoldSteps = false, bool FlaggedSteps = false, class Prims>
COLL_HOST_DEVICE bool runThreadBlock(Prims &prims, const PlanStep *steps, int32_t nSteps,
                                     const CallSlice *slices, int32_t sliceBase,
                                     RankBuffers<T> buffers, uint64_t iterations,
                                     uint64_t sliceElems) {
  if (nSteps <= 0)
    return true;
  for (uint64_t it = 0; it < iterations; ++it) {
    const uint64_t lo = it * sliceElems;
    // The step through a pointer of its own, one add per step: indexed, the
    // device's address of steps[i] was the shared window's base plus 28 i,
    // and ptxas made the base again on every step (a special register's
    // read and two dependent instructions before the step's first load,
    // docs/CUDA.md "Step paths").
    const PlanStep *next = steps;
    int32_t i = 0;
    // One step. A step that goes straight on (step_flag::Straight) comes
    // back here from its chunk: one test, where the end of the chunk loop
    // and of the step loop were two.
  step:
    {
      std::conditional_t<HoldSteps, const PlanStep, const PlanStep &> step = *next;
      const int32_t flags = FlaggedSteps
                                ? step.hasDep
                                : stepFlags(step, HasDirectSteps<Prims>::value, i, nSteps);
      prims.at(it, i, step);
      T *src = buffers[step.srcBuf];
      T *dst = buffers[step.dstBuf];
      // What only some steps do before their data, behind one test, so
      // that a step that waits for nothing pays one branch for all of it
      // (on the device each test costs a step's path ~20 cycles: the
      // predicate's latency to its branch, docs/CUDA.md "Step paths").
      // A step with no chunks (nop, signal, wait) is one too, so that the
      // chunk loop below needs no test before its first chunk.
      bool slow = (flags & step_flag::Slow) != 0;
      // A fused getre's first source, or a fused put's first destination,
      // is this rank's own (FoldedCopy).
      bool folded = false;
      if constexpr (TracesSteps<Prims>::value)
        slow |= prims.tracingSteps();
      if (slow) {
        if constexpr (TracesSteps<Prims>::value)
          if (prims.tracingSteps())
            prims.traceStep(stepElems(step, slices, sliceBase, lo, sliceElems));
        if (step.depTb != -1 && !prims.waitDependency(step.depTb, it, step.depStep))
          return false;
        if constexpr (HasDirectSteps<Prims>::value) {
          if (step.type == StepKind::Signal)
            prims.signal(step);
          else if (step.type == StepKind::Wait && !prims.waitSignal(step, it))
            return false;
          // Direct steps: one operand is the peer's buffer of this call, at
          // the same slice offsets; the data moves as a copy or reduction
          // does, so that they add no code of their own to the chunk loop.
          // A fused getre or put with a folded copy keeps its own buffer as
          // its first source or destination (FoldedCopy).
          const bool put = step.type == StepKind::Put;
          if (put || step.type == StepKind::GetReduce)
            folded = prims.foldedCopy(step);
          if (!folded &&
              (put || step.type == StepKind::Get || step.type == StepKind::GetReduce)) {
            T *peer = prims.peerBase(step, put ? step.dstBuf : step.srcBuf, 0);
            if (!peer)
              return false; // the backend reported why (a peer's window not found)
            (put ? dst : src) = peer;
          }
        }
        if (step.count <= 0) {
          if (flags & step_flag::Publishes)
            prims.publish(it, step.irStep);
          goto done;
        }
      }
      int32_t c = 0;
      for (;;) {
        const CallSlice *slice = chunkSlice(step, slices, sliceBase, c);
        // A chunk shorter than this iteration's start moves nothing. A local
        // kind then moves 0 elements (a select, and all of the slice's
        // fields load at once, where a branch on the size came between
        // them); a FIFO kind skips the chunk, as its peer does. Such a
        // chunk's operands start at the chunk itself (`at` 0), not past it.
        const bool moves = slice->nelem > lo;
        const uint64_t n = moves ? chunkShare(slice->nelem, lo, sliceElems) : 0;
        const uint64_t at = moves ? lo : 0;
        T *s = src + slice->src + at;
        T *d = dst + slice->dst + at;
        // Copies first, in one test (copy, put, get): the local steps that
        // need no ordering are mostly copies (the step-cost benchmark's
        // are). Then the local reductions, then the FIFO kinds.
        // A fused put's destinations, or a fused reduction's sources: one
        // array for both, so that a kernel's stack holds one.
        T *ptrs[MaxReduceSources];
        if (isCopyKind(step.type)) {
          bool many = false;
          if constexpr (FusesPuts<Prims>::value)
            many = step.nsrc > 1; // a fused put: one read, a store to each peer
          if (many) {
            if constexpr (FusesPuts<Prims>::value) {
              // With a folded copy, destination 0 is this rank's own and r
              // is peer r - 1's. In place, the own copy is onto itself
              // (the source is the output's own block) and is left out.
              ptrs[0] = d;
              COLL_NO_UNROLL
              for (int r = 1; r < step.nsrc; ++r) {
                T *base = prims.peerBase(step, step.dstBuf, folded ? r - 1 : r);
                if (!base)
                  return false;
                ptrs[r] = base + slice[r].dst + at;
              }
              const int skip = folded && d == s ? 1 : 0;
              prims.copyMany(s, ptrs + skip, step.nsrc - skip, n);
            }
          } else if constexpr (HoldSteps) {
            prims.template copy<true>(s, d, n);
          } else {
            prims.copy(s, d, n);
          }
        } else if (isReduceKind(step.type)) {
          const T **srcs = const_cast<const T **>(ptrs);
          // Rolled: unrolled, its remainder's arithmetic was hoisted onto
          // every step's path, copies' too.
          COLL_NO_UNROLL
          for (int r = 0; r < step.nsrc; ++r) {
            const T *base = src;
            // A fused getre: source r lies in its own peer's buffer (with a
            // folded copy, source 0 in this rank's and r in peer r - 1's).
            if constexpr (HasDirectSteps<Prims>::value)
              if (r > 0 && step.type == StepKind::GetReduce &&
                  !(base = prims.peerBase(step, step.srcBuf, folded ? r - 1 : r)))
                return false;
            srcs[r] = base + slice[r].src + at;
          }
          prims.reduce(d, srcs, step.nsrc, n, folded);
        } else if (moves) {
          bool ok = true;
          switch (step.type) {
          case StepKind::Send: ok = prims.send(s, n); break;
          case StepKind::Recv: ok = prims.recv(d, n); break;
          case StepKind::RecvCopySend: ok = prims.recvCopySend(d, n); break;
          case StepKind::RecvReduceSend: ok = prims.recvReduceSend(s, n); break;
          case StepKind::RecvReduceCopy: ok = prims.recvReduceCopy(s, d, n); break;
          case StepKind::RecvReduceCopySend: ok = prims.recvReduceCopySend(s, d, n); break;
          default: break; // nop, signal, wait: count 0, no chunks
          }
          if (!ok)
            return false;
        }
        if (flags & step_flag::Straight) {
          ++i;
          ++next;
          goto step;
        }
        if (++c < step.count)
          continue;
        if (flags & step_flag::Publishes)
          prims.publish(it, step.irStep);
        break;
      }
    }
  done:
    if (++i < nSteps) {
      ++next;
      goto step;
    }
  }
  return true;
}

} // namespace coll::interp

#endif // COLL_INTERPRETER_STEPSEMANTICS_H
