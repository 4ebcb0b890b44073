//===- Prims.h - The data movement of one block ------------------*- CUDA -*-===//
//
// Prims<T, P, CrossGpu>: what a block of the kernel does for the interpreter
// loop (StepSemantics.h) under protocol P. This file holds what every
// protocol shares: the block's connections and dependency flags, local
// copies and reductions, the wait loop with its watchdog, and the skeleton
// of a FIFO step (move), which hands the data to its protocol. Each
// protocol's own waits and data movement are in a file of its own, as
// NCCL's are: PrimsSimple.h, PrimsLL.h, PrimsLL128.h (Kernel.cuh includes
// all three). They are members of this one class template, defined out of
// line, so that the kernel compiles to the code it always has.
//
// Memory model and the protocols' ordering: Kernel.cuh and docs/CUDA.md.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CUDA_DEVICE_PRIMS_H
#define COLL_INTERPRETER_CUDA_DEVICE_PRIMS_H

#include "device/Hardware.h"
#include "device/Reduce.h"
#include "device/Timeline.h"

#include "DeviceTypes.h"

#include "coll/interpreter/ReduceOps.h"

#include <cstdint>

namespace coll::interp::cuda {

/// Polls between two looks at the abort flag and the clock.
inline constexpr uint32_t SpinsPerCheck = 64;

/// What thread 0 of a block has acquired of its connections' counters, as
/// of the block's last barrier. In shared memory, so that every thread of
/// the block knows whether a FIFO step needs thread 0 to wait, and a barrier
/// after it, before the step's data (Prims::move).
struct FifoSeen {
  uint64_t sendHead; ///< the receiver's head, last acquired (0: none yet)
  uint64_t recvTail; ///< Simple: the sender's tail, last acquired (0: none yet)
};

/// The data movement of one block for the interpreter loop. Every method is
/// called by all threads of the block with the same arguments. CrossGpu:
/// the build for launches with connections to other GPUs (or through host
/// memory), whose accesses to each connection take its scope
/// (KernelParams::connectionScopes); the others' are .gpu, constants, so that the
/// scope costs a launch within one GPU nothing (docs/CUDA.md, "Scopes").
template <class T, Proto P, bool CrossGpu> class Prims {
public:
  /// `seen`: the block's shared FifoSeen, zero as the block starts.
  __device__ Prims(const KernelParams &p, const PlanTb &tb, int32_t tbIndex,
                         uint32_t generation, FifoSeen *seen,
                         uint32_t tid, uint32_t nthreads)
      : p(p), tb(tb), tbIndex(tbIndex), generation(generation), seen(seen),
        tid(tid), nthreads(nthreads), control(reinterpret_cast<DeviceControl *>(p.state)),
        tracing(tid == 0 && control->traceEvents != nullptr) {
    if (tb.sendConn >= 0) {
      unsigned char *c = p.connections[tb.sendConn];
      if constexpr (CrossGpu)
        sendScopeOfLaunch = p.connectionScopes[tb.sendConn];
      sendHead = reinterpret_cast<uint64_t *>(c + ConnectionLayout::HeadOffset);
      sendTail = reinterpret_cast<uint64_t *>(c + ConnectionLayout::TailOffset);
      sendFifo = c + ConnectionLayout::FifoOffset;
      // Only this tb writes the tail; the previous launch's last store is
      // visible at the kernel boundary.
      sendSeq = ptx::ldVolatile(sendTail);
    }
    if (tb.recvConn >= 0) {
      unsigned char *c = p.connections[tb.recvConn];
      if constexpr (CrossGpu)
        recvScopeOfLaunch = p.connectionScopes[tb.recvConn];
      recvHead = reinterpret_cast<uint64_t *>(c + ConnectionLayout::HeadOffset);
      recvTail = reinterpret_cast<uint64_t *>(c + ConnectionLayout::TailOffset);
      recvFifo = c + ConnectionLayout::FifoOffset;
      recvSeq = ptx::ldVolatile(recvHead);
    }
  }

  /// Where the block is, for the watchdog's report and the timeline: two
  /// registers. The timeline's record (traceStep) is on the steps' slow
  /// path (StepSemantics.h: TracesSteps), so that a launch without one
  /// pays no branch for it.
  __device__ void at(uint64_t it, int32_t index, const PlanStep &step) {
    iteration = it;
    stepIndex = index;
    ptx::noteStep(static_cast<uint32_t>(P), static_cast<uint32_t>(step.type));
  }

  __device__ bool tracingSteps() const { return tracing; }
  /// Thread 0 of a launch that records: the step at() named starts, and
  /// the previous one ends; `elems`: what its chunks move (stepElems).
  __device__ void traceStep(uint64_t elems) {
    timeline::step(*control, block(), iteration, stepIndex);
    timeline::elems(*control, block(), elems);
  }

  /// At the end of the launch: closes the timeline's open step.
  __device__ void traceFinish() {
    if (tracing)
      timeline::finish(*control, block());
  }

  /// The step's dependency (depTb >= 0), or its -depTb dependencies
  /// (Plan::deps from depStep): thread k polls the k-th, all at once, and
  /// the barrier after orders each acquire before every thread's step, as
  /// thread 0's alone did (docs/CUDA.md, "Several dependencies").
  __device__ bool waitDependency(int32_t depTb, uint64_t it, int32_t depStep) {
    bool fail = false;
    const uint32_t n = depTb >= 0 ? 1u : static_cast<uint32_t>(-depTb);
    if (tid < n) {
      int32_t tb = depTb, irStep = depStep;
      if (depTb < 0) {
        const PlanDep d = p.deps[depStep + tid];
        tb = d.tb;
        irStep = d.step;
      }
      const uint64_t *flag = tbFlag(tb);
      const uint32_t goal = flagProgress(it, p.span, irStep);
      uint64_t seen = 0;
      fail = !spin([&] { return flagReached(seen = ptx::ldAcquire(flag, Scope::Gpu), generation, goal); },
                   [&](WatchdogReport &r) {
                     r.kind = WaitKind::Dependency;
                     r.depTb = tb;
                     r.depStep = irStep;
                     r.expected = goal;
                     r.observed = static_cast<uint32_t>(seen >> 32) == generation
                                      ? static_cast<uint32_t>(seen)
                                      : 0;
                   },
                   3);
    }
    return !__syncthreads_or(fail);
  }

  /// Every prim ends with a block barrier, so all of the step's accesses
  /// precede this release. Dependency flags connect blocks of one launch:
  /// .gpu.
  __device__ void publish(uint64_t it, int32_t irStep) {
    if (tid == 0)
      ptx::stRelease(tbFlag(tbIndex), makeFlag(generation, flagProgress(it, p.span, irStep)),
                     Scope::Gpu);
  }

  __device__ bool send(const T *src, uint64_t n) {
    return move<false, true, false, true>(src, nullptr, n);
  }
  __device__ bool recv(T *dst, uint64_t n) {
    return move<true, false, true, false>(nullptr, dst, n);
  }
  __device__ bool recvCopySend(T *dst, uint64_t n) {
    return move<true, false, true, true>(nullptr, dst, n);
  }
  __device__ bool recvReduceSend(const T *src, uint64_t n) {
    return move<true, true, false, true>(src, nullptr, n);
  }
  __device__ bool recvReduceCopy(const T *src, T *dst, uint64_t n) {
    return move<true, true, true, false>(src, dst, n);
  }
  __device__ bool recvReduceCopySend(const T *src, T *dst, uint64_t n) {
    return move<true, true, true, true>(src, dst, n);
  }

  /// A copy onto itself (a program valid in both modes whose first copy is
  /// from input to output, run in place) moves nothing, as on the host.
  /// Untested: the pack loop's first pass runs without its entry test
  /// (transform), which the interpreter loop asks of the wide build only.
  template <bool Untested = false> __device__ void copy(const T *src, T *dst, uint64_t n) {
    // A select, not a branch: no elements where the copy is onto itself.
    transform<T, 1, 1, OpSum<T>, Untested>(&src, 1, &dst, src != dst ? sliceCount(n) : 0u, tid,
                                           nthreads, OpSum<T>{});
    __syncthreads();
  }

  /// Fused puts (StepSemantics.h) in the Simple kernels only, whose
  /// programs the plan fuses them in (buildPlan): src read once, stored to
  /// each of dsts.
  static constexpr bool FusedPuts = P == Proto::Simple;
  __device__ void copyMany(const T *src, T *const *dsts, int ndst, uint64_t n) {
    spread<T>(src, dsts, ndst, sliceCount(n), tid, nthreads);
    __syncthreads();
  }

  __device__ bool foldedCopy(const PlanStep &) const { return stepPeer().ordinal == FoldedCopy; }

  /// dst = srcs[nsrc-1] ⊕ (… ⊕ (srcs[0] ⊕ dst)), as the host computes it;
  /// `from` (a fused getre with a folded copy, FoldedCopy): dst =
  /// srcs[nsrc-1] ⊕ (… ⊕ srcs[0]), dst not read. One call of the element
  /// loop for both: two made every kernel's local loads twice as many
  /// (scripts/cuda-resources.sh).
  __device__ void reduce(T *dst, const T *const *srcs, int nsrc, uint64_t n, bool from) {
    const T *in[MaxReduceSources + 1];
    int nin = 0;
    if (!from)
      in[nin++] = dst;
#pragma unroll 1 // unrolled, its remainder was computed on every step's path
    for (int r = 0; r < nsrc; ++r)
      in[nin++] = srcs[r];
    withOp<T>(p.op, [&](auto op) {
      transform<T, 0, 1>(in, nin, &dst, sliceCount(n), tid, nthreads, op);
    });
    __syncthreads();
  }

  // Direct steps (StepSemantics.h; docs/CUDA.md, "Direct steps"): the
  // peers' buffers are p.ranks' (for an executor of one rank, mapped by its
  // caller: setPeerBuffers), and each signal pair has a flag
  // (p.signalFlags: in the device state for an executor of every rank, in
  // the waiting rank's memory for one of one rank). One tb per rank signals
  // a peer on a channel (the IR's rule), so each flag has one writer, which
  // stores (generation << 32) | (iteration * perIteration + ordinal + 1) in
  // order, compared in order (signalReached). A signal releases at .gpu,
  // or at .sys in the CrossGpu build (a launch with a peer on another GPU):
  // every prim and every wait ends with a block barrier, so whatever the tb
  // did and learned before it precedes the store. The wait acquires at the
  // same scope, then releases its block with a barrier. Inlined: out of
  // line (__noinline__) they cost every kernel a call frame, twice the
  // stack and eight times the local stores of the wide builds
  // (scripts/cuda-resources.sh), far more than the few spill stores that
  // inlining them costs the narrow builds.
  //
  // On windows (p.windowDescriptors: an executor of one rank given
  // setPeerWindows), a peer's buffers of the call are wherever it placed
  // them in its windows: each signal first stores this rank's descriptor
  // (relaxed; several tbs store the same words), which the release then
  // carries; a direct step reads its peer's after the waits that ordered it
  // after a signal of the peer's call (the compiler's start signal at
  // least), and the peer rewrites it only in a later call, after this
  // rank's end signal of this one.
  __device__ T *peerBase(const PlanStep &, uint8_t buffer, int member) {
    const PlanStepPeer d = stepPeer();
    const int32_t rank = member == 0 ? d.peer : p.memberPeers[d.members + member];
    if (p.windowDescriptors) {
      const uint64_t at = ptx::ldRelaxed(&p.windowDescriptors[rank]->at[buffer], signalScope());
      const uint64_t slot = at >> WindowOffsetBits;
      if (slot == 0 || slot > p.windowSlots) {
        windowFault(rank, buffer, at);
        return nullptr;
      }
      return reinterpret_cast<T *>(p.windowBases[uint64_t(rank) * p.windowSlots + slot - 1] +
                                   (at & ((uint64_t(1) << WindowOffsetBits) - 1)));
    }
    const RankPointers &peer = p.ranks[rank];
    return static_cast<T *>(buffer == 0 ? peer.input : buffer == 1 ? peer.output : peer.scratch);
  }
  //
  // A fused signal or wait (nsrc > 1, at most MaxReduceSources members,
  // fewer than any block's threads) is one step: thread r signals or waits
  // for member r (Plan::memberSignals), all at once, so that a rank raises
  // or waits on its peers' signals in one step instead of one per peer.
  // Each signalling thread stores the descriptor itself, so that its own
  // release carries it.
  __device__ void signal(const PlanStep &step) {
    if (tid < step.nsrc) {
      const PlanMemberSignal m = memberSignal(tid);
      if (p.windowDescriptors) {
        uint64_t *own = p.windowDescriptors[p.windowRank]->at;
        for (int b = 0; b < 3; ++b)
          ptx::stRelaxed(own + b, p.windowOwn.at[b], signalScope());
      }
      ptx::stRelease(signalFlag(m.signal),
                     makeFlag(generation, signalProgress(m, iteration)), signalScope());
    }
  }
  __device__ bool waitSignal(const PlanStep &step, uint64_t it) {
    bool fail = false;
    if (tid < step.nsrc) {
      const PlanMemberSignal m = memberSignal(tid);
      const uint64_t *flag = signalFlag(m.signal);
      const uint32_t goal = signalProgress(m, it);
      uint64_t seen = 0;
      fail = !spin([&] { return signalReached(seen = ptx::ldAcquire(flag, signalScope()), generation, goal); },
                   [&](WatchdogReport &r) {
                     r.kind = WaitKind::Signal;
                     r.depTb = m.signal;
                     r.expected = goal;
                     r.observed = static_cast<uint32_t>(seen >> 32) == generation
                                      ? static_cast<uint32_t>(seen)
                                      : 0;
                   },
                   3);
    }
    return !__syncthreads_or(fail);
  }

private:
  /// The direct-step record of the step the block is at (at() was called
  /// with it): by the loop's index, since the address of the step's shared
  /// copy costs every step a special-register read and a division.
  __device__ PlanStepPeer stepPeer() const {
    return p.stepPeers[tb.stepBegin + stepIndex];
  }
  /// Member r's pair and ordinal of the signal or wait the block is at.
  __device__ PlanMemberSignal memberSignal(int r) const {
    const PlanStepPeer d = stepPeer();
    return r == 0 ? PlanMemberSignal{d.signal, d.ordinal} : p.memberSignals[d.members + r];
  }
  __device__ uint64_t *signalFlag(int32_t signal) const { return p.signalFlags[signal]; }
  __device__ Scope signalScope() const {
    if constexpr (CrossGpu)
      return Scope::Sys;
    else
      return Scope::Gpu;
  }
  /// What the flag holds once signal `d.ordinal` of iteration `it` is sent.
  __device__ uint32_t signalProgress(const PlanMemberSignal &d, uint64_t it) const {
    return static_cast<uint32_t>(it * static_cast<uint64_t>(p.signals[d.signal].perIteration) +
                                 static_cast<uint64_t>(d.ordinal) + 1);
  }
  /// The block's index in its launch (the kernel entry's blockIdx.x).
  __device__ uint32_t block() const { return static_cast<uint32_t>(tbIndex - p.firstTb); }
  __device__ uint64_t *tbFlag(int32_t t) const {
    return reinterpret_cast<uint64_t *>(p.state + p.flagsOffset) + t * FlagStrideWords;
  }
  template <class U> __device__ U *slot(unsigned char *fifo, uint64_t seq) const {
    return reinterpret_cast<U *>(fifo + (seq % FifoDepth) * p.connection.slotStride);
  }

  /// Spins until ready() holds. Gives up when the launch is aborted, or after
  /// the watchdog period, when it reports (fill() adds what was waited for)
  /// and aborts the launch.
  /// `traceKind`: the wait's kind in a timeline (host::TraceEvent's).
  template <class Ready, class Fill>
  __device__ bool spin(Ready &&ready, Fill &&fill, uint32_t traceKind) {
    if (ready())
      return true;
    const uint64_t start = ptx::globalTimer();
    const ptx::RetryScope retries; // the emulation counts the first poll only
    for (uint32_t spins = 1;; ++spins) {
      ptx::spinPause();
      if (ready()) {
        if (tracing)
          timeline::add(*control, block(), start, ptx::globalTimer(), iteration, stepIndex,
                        traceKind, false);
        return true;
      }
      if (spins % SpinsPerCheck != 0)
        continue;
      if (ptx::ldVolatile(&control->abort))
        return false;
      if (p.hostStop && ptx::ldVolatile(p.hostStop)) {
        stopped();
        return false;
      }
      if (ptx::globalTimer() - start >= p.watchdogNs) {
        report(fill);
        return false;
      }
    }
  }

  /// A fault the host reads only after the launch has ended: the first
  /// block to meet one writes the report, as report() does but without its
  /// system fence, which would put a .sys instruction into every kernel;
  /// every block that meets one raises abort.
  __device__ void fault(WaitKind kind, int32_t depTb, int32_t depStep, uint64_t observed) {
    if (atomicCAS(&control->claimed, 0u, 1u) == 0u) {
      WatchdogReport *r = p.report;
      r->kind = kind;
      r->tb = tbIndex;
      r->step = stepIndex;
      r->iteration = iteration;
      r->connection = -1;
      r->depTb = depTb;
      r->depStep = depStep;
      r->observed = observed;
      r->valid = 1u; // plain: a volatile store is a .sys one in SASS
    }
    atomicExch(&control->abort, 1u);
  }

  /// A peer's descriptor names no window (peerBase).
  __device__ void windowFault(int32_t rank, uint8_t buffer, uint64_t at) {
    if (tid == 0)
      fault(WaitKind::Window, rank, buffer, at);
  }

  /// The host's stop word is raised (KernelParams::hostStop): where this
  /// block stood.
  __device__ void stopped() { fault(WaitKind::Stopped, -1, -1, 0); }

  /// The first block to time out writes the report; every one raises abort.
  template <class Fill> __device__ void report(Fill &fill) {
    if (atomicCAS(&control->claimed, 0u, 1u) == 0u) {
      WatchdogReport r{};
      r.tb = tbIndex;
      r.step = stepIndex;
      r.iteration = iteration;
      r.connection = -1;
      r.depTb = -1;
      r.depStep = -1;
      fill(r);
      *p.report = r;
      __threadfence_system();
      ptx::stVolatile(&p.report->valid, 1u);
    }
    atomicExch(&control->abort, 1u);
  }

  /// Thread 0: until slot sendSeq is free (the receiver freed sendSeq - 7).
  __device__ bool waitFreeSlot() {
    if (sendSeq - sendHeadSeen < FifoDepth)
      return true; // acquired by an earlier wait
    bool ok = spin([&] { return sendSeq - (sendHeadSeen = ptx::ldAcquire(sendHead, sendScope())) < FifoDepth; },
                   [&](WatchdogReport &r) {
                     r.kind = WaitKind::FreeSlot;
                     r.connection = tb.sendConn;
                     r.slot = sendSeq;
                     r.head = sendHeadSeen;
                     r.tail = sendSeq;
                   },
                   2);
    return ok;
  }

  /// Thread 0, Simple: until the sender has filled slot recvSeq (PrimsSimple.h).
  __device__ bool waitSimpleData();

  /// Any thread, LL: until both halves of `line` carry `flag` (PrimsLL.h).
  __device__ bool waitLLLine(const uint64_t *line, uint32_t flag, uint64_t index, uint64_t &w0,
                             uint64_t &w1);

  /// Lane 7 of a group, LL128: until the line's flag word is `flag` (PrimsLL128.h).
  __device__ bool waitLL128Line(const uint64_t *line, uint64_t flag, uint64_t index);

  /// One FIFO step: receive from the receive peer (Recv), combine with the
  /// local src (Src), store to the local dst (Dst), send on (Send).
  template <bool Recv, bool Src, bool Dst, bool Send>
  __device__ bool move(const T *src, T *dst, uint64_t n) {
    // Thread 0 waits for what guards the whole slot: for Simple the receive
    // slot's data (LL and LL128 data carry flags), and a free send slot. In
    // the host backend's order — the received data first (for LL and LL128
    // its first line), then the free slot — so that a stall is reported as
    // the host reports it. Then a barrier orders its acquires before the
    // block's accesses to the slots. Both only where an acquire is needed:
    // where what thread 0 acquired in an earlier step (`seen`, as of the
    // block's last barrier) already covers the slots, that acquire happened
    // before that barrier, which orders it before every thread's accesses
    // here, and the step goes straight to its data (docs/CUDA.md, "Protocols
    // and why their ordering is right").
    if constexpr (Send || (Recv && P == Proto::Simple)) {
      // The same shared values for every thread: all take the same branch.
      bool needed = false;
      if constexpr (Recv && P == Proto::Simple)
        needed = seen->recvTail <= recvSeq;
      if constexpr (Send)
        needed = needed || sendSeq - seen->sendHead >= FifoDepth;
      if (needed) {
        bool fail = false;
        if (tid == 0) {
          if constexpr (Recv && P == Proto::Simple) {
            fail = !waitSimpleData();
          } else if constexpr (Recv && P == Proto::LL) {
            uint64_t w0, w1;
            if (llLines(n * sizeof(T)) > 0)
              fail = !waitLLLine(slot<const uint64_t>(recvFifo, recvSeq), llFlag(recvSeq), 0,
                                 w0, w1);
          } else if constexpr (Recv && P == Proto::LL128) {
            if (ll128Lines(n * sizeof(T)) > 0)
              fail = !waitLL128Line(slot<const uint64_t>(recvFifo, recvSeq), ll128Flag(recvSeq), 0);
          }
          if constexpr (Send)
            fail = fail || !waitFreeSlot();
        }
        if (__syncthreads_or(fail))
          return false;
        // Every thread has read `seen` for this step; the barrier that ends
        // the step publishes the new values to the next.
        if (tid == 0)
          *seen = FifoSeen{sendHeadSeen, recvTailSeen};
      }
    }
    bool ok = true;
    const uint32_t count = sliceCount(n);
    if constexpr (Recv && Src)
      withOp<T>(p.op, [&](auto op) { ok = moveData<Recv, Src, Dst, Send>(src, dst, count, op); });
    else
      ok = moveData<Recv, Src, Dst, Send>(src, dst, count, OpSum<T>{});
    // Everyone is done with both slots before they are handed over.
    if (__syncthreads_or(!ok))
      return false;
    if (tid == 0) {
      if constexpr (Send) {
        if constexpr (CrossGpu) {
          // A connection between GPUs may end at a network proxy, which
          // forwards what a slot holds: its size, then the tail that
          // publishes both (ConnectionLayout::SizesOffset).
          reinterpret_cast<uint32_t *>(sendTail + 1)[sendSeq % FifoDepth] =
              static_cast<uint32_t>(n * sizeof(T));
          ptx::stRelease(sendTail, sendSeq + 1, sendScope());
        } else if constexpr (P == Proto::Simple) {
          ptx::stRelease(sendTail, sendSeq + 1, sendScope());
        } else { // the lines carry their own flags; the tail is for the report and the next launch
          ptx::stRelaxed(sendTail, sendSeq + 1, sendScope());
        }
      }
    }
    // The block's last thread frees the receive slot, so that its release
    // (a MEMBAR, which waits for the thread's own stores to land) runs
    // beside thread 0's tail rather than after it: after a step that moves
    // less than the block, the last thread stored nothing. The barrier
    // above orders every thread's reads of the slot before it, as it did
    // for thread 0 (docs/CUDA.md, "Protocols and why their ordering is
    // right").
    if constexpr (Recv)
      if (tid == nthreads - 1)
        ptx::stRelease(recvHead, recvSeq + 1, recvScope());
    if constexpr (Send)
      ++sendSeq;
    if constexpr (Recv)
      ++recvSeq;
    return true;
  }

  template <bool Recv, bool Src, bool Dst, bool Send, class Op>
  __device__ bool moveData(const T *src, T *dst, uint32_t n, Op op) {
    if constexpr (P == Proto::Simple) {
      return moveSimple<Recv, Src, Dst, Send>(src, dst, n, op);
    } else if constexpr (P == Proto::LL) {
      return moveLL<Recv, Src, Dst, Send>(src, dst, n, op);
    } else {
      return moveLL128<Recv, Src, Dst, Send>(src, dst, n, op);
    }
  }

  /// Simple: the block's pack loop over the slots and the local buffers
  /// (PrimsSimple.h).
  template <bool Recv, bool Src, bool Dst, bool Send, class Op>
  __device__ bool moveSimple(const T *src, T *dst, uint32_t n, Op op);

  /// LL: thread t moves lines t, t + nthreads, ... (8 data bytes each) (PrimsLL.h).
  template <bool Recv, bool Src, bool Dst, bool Send, class Op>
  __device__ bool moveLL(const T *src, T *dst, uint32_t n, Op op);

  /// LL128: each warp moves four lines at a time, eight lanes per line (PrimsLL128.h).
  template <bool Recv, bool Src, bool Dst, bool Send, class Op>
  __device__ bool moveLL128(const T *src, T *dst, uint32_t n, Op op);

  const KernelParams &p;
  const PlanTb &tb;
  const int32_t tbIndex;
  const uint32_t generation;
  FifoSeen *const seen;
  const uint32_t tid, nthreads;
  DeviceControl *const control;
  /// Thread 0 of a launch that records a timeline (KernelParams' state has
  /// its buffers): a register, so that a launch without one pays a branch.
  const bool tracing;

  uint64_t *sendHead = nullptr, *sendTail = nullptr, *recvHead = nullptr, *recvTail = nullptr;
  unsigned char *sendFifo = nullptr, *recvFifo = nullptr;
  /// The connections' scopes (KernelParams::connectionScopes), in the
  /// CrossGpu build:
  /// every access that synchronises with the other end of a connection has
  /// its connection's scope.
  Scope sendScopeOfLaunch = Scope::Gpu, recvScopeOfLaunch = Scope::Gpu;
  __device__ Scope sendScope() const {
    if constexpr (CrossGpu)
      return sendScopeOfLaunch;
    else
      return Scope::Gpu;
  }
  __device__ Scope recvScope() const {
    if constexpr (CrossGpu)
      return recvScopeOfLaunch;
    else
      return Scope::Gpu;
  }
  uint64_t sendSeq = 0, recvSeq = 0; ///< slots this tb has sent / received, ever
  /// Thread 0: the receiver's head and (Simple) the sender's tail, last
  /// acquired; `seen` has them as of the block's last barrier. 0 is a bound
  /// that holds without an acquire: the first FifoDepth slots a connection
  /// ever carries are free, and a launch sees what earlier launches wrote.
  uint64_t sendHeadSeen = 0;
  uint64_t recvTailSeen = 0;

  uint64_t iteration = 0; ///< where the block is, for the watchdog's report
  /// The step the block is at (the loop's index: a pointer difference
  /// would divide by sizeof(PlanStep) at every step).
  int32_t stepIndex = 0;
};


} // namespace coll::interp::cuda

#endif // COLL_INTERPRETER_CUDA_DEVICE_PRIMS_H
