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
//   bool waitDependency(int32_t tb, uint64_t iteration, int32_t irStep);
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
//   void reduce(T *dst, const T *const *srcs, int nsrc, uint64_t n);
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
//       // getre: PlanStepPeer::members); null: stop (reported)
//   void signal(const PlanStep &step);
//   bool waitSignal(const PlanStep &step, uint64_t iteration);
//
// (The peer, signal pair and ordinal are in Plan::stepPeers, which the
// backend finds from the step.)
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
template <class T, bool HoldSteps = false, class Prims>
COLL_HOST_DEVICE bool runThreadBlock(Prims &prims, const PlanStep *steps, int32_t nSteps,
                                     const CallSlice *slices, int32_t sliceBase,
                                     RankBuffers<T> buffers, uint64_t iterations,
                                     uint64_t sliceElems) {
  for (uint64_t it = 0; it < iterations; ++it) {
    const uint64_t lo = it * sliceElems;
    for (int32_t i = 0; i < nSteps; ++i) {
      std::conditional_t<HoldSteps, const PlanStep, const PlanStep &> step = steps[i];
      prims.at(it, i, step);
      if (step.depTb >= 0 && !prims.waitDependency(step.depTb, it, step.depStep))
        return false;
      if constexpr (HasDirectSteps<Prims>::value) {
        if (step.type == StepKind::Signal)
          prims.signal(step);
        else if (step.type == StepKind::Wait && !prims.waitSignal(step, it))
          return false;
      }
      T *src = buffers[step.srcBuf];
      T *dst = buffers[step.dstBuf];
      // Direct steps: one operand is the peer's buffer of this call, at the
      // same slice offsets; the data moves as a copy or reduction does, so
      // that they add no code of their own to the chunk loop.
      if constexpr (HasDirectSteps<Prims>::value) {
        const bool put = step.type == StepKind::Put;
        if (put || step.type == StepKind::Get || step.type == StepKind::GetReduce) {
          T *peer = prims.peerBase(step, put ? step.dstBuf : step.srcBuf, 0);
          if (!peer)
            return false; // the backend reported why (a peer's window not found)
          (put ? dst : src) = peer;
        }
      }
      for (int32_t c = 0; c < step.count; ++c) {
        // Non-negative and below the tb's slice count: unsigned 32-bit, so
        // that the device forms the address in one multiply-add.
        const CallSlice *slice =
            slices + static_cast<uint32_t>(step.sliceBegin - sliceBase + c * step.nsrc);
        if (slice->nelem <= lo)
          continue;
        uint64_t n = slice->nelem - lo < sliceElems ? slice->nelem - lo : sliceElems;
        T *s = src + slice->src + lo;
        T *d = dst + slice->dst + lo;
        bool ok = true;
        switch (step.type) {
        case StepKind::Send: ok = prims.send(s, n); break;
        case StepKind::Recv: ok = prims.recv(d, n); break;
        case StepKind::RecvCopySend: ok = prims.recvCopySend(d, n); break;
        case StepKind::RecvReduceSend: ok = prims.recvReduceSend(s, n); break;
        case StepKind::RecvReduceCopy: ok = prims.recvReduceCopy(s, d, n); break;
        case StepKind::RecvReduceCopySend: ok = prims.recvReduceCopySend(s, d, n); break;
        case StepKind::Put:
        case StepKind::Get:
        case StepKind::Copy: prims.copy(s, d, n); break;
        case StepKind::GetReduce:
        case StepKind::Reduce: {
          const T *srcs[MaxReduceSources];
          for (int r = 0; r < step.nsrc; ++r) {
            const T *base = src;
            // A fused getre: source r lies in its own peer's buffer.
            if constexpr (HasDirectSteps<Prims>::value)
              if (r > 0 && step.type == StepKind::GetReduce &&
                  !(base = prims.peerBase(step, step.srcBuf, r)))
                return false;
            srcs[r] = base + slice[r].src + lo;
          }
          prims.reduce(d, srcs, step.nsrc, n);
          break;
        }
        case StepKind::Nop: break;
        case StepKind::Signal: // count 0: no chunks
        case StepKind::Wait: break;
        }
        if (!ok)
          return false;
      }
      if (step.hasDep)
        prims.publish(it, step.irStep);
    }
  }
  return true;
}

} // namespace coll::interp

#endif // COLL_INTERPRETER_STEPSEMANTICS_H
