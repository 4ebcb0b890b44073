//===- DeviceKernel.cuh - The persistent kernel and its prims ---*- CUDA -*-===//
//
// One CUDA block per <tb> of every rank, all in one launch (DESIGN.md §4).
// Each block copies its tb's steps into shared memory and runs the shared
// interpreter loop (StepSemantics.h) with DevicePrims, which owns the memory
// ordering, the cooperation of the block's threads and the waiting. Only the
// __global__ entry reads threadIdx/blockIdx.
//
// Memory model (PTX ISA, "Memory Consistency Model"; every rank lives on one
// GPU, so every synchronising access has .gpu scope):
//
//  * Waits poll with strong relaxed loads and, once satisfied, execute
//    fence.acq_rel.gpu: a relaxed load that observes a release store,
//    followed by an acquire fence, is the ISA's acquire pattern. Publishing
//    is st.release.gpu. Only thread 0 of a block waits on counters and
//    dependency flags; bar.sync/bar.red (__syncthreads, __syncthreads_or)
//    synchronise the block's threads with it, and causality order is
//    transitive through barriers, so the data stores of every thread of the
//    producing block happen before the data loads of every thread of the
//    consuming block.
//  * Every prim ends with a block barrier. So a step's loads and stores all
//    precede thread 0's release of the FIFO counters and of the tb's
//    dependency flag, and the next step never reads what another thread of
//    the same block has not finished writing.
//  * Simple: the receiver frees a slot by releasing `head` after a barrier,
//    the sender acquires `head` before overwriting the slot, so the data
//    accesses of successive uses of a slot never race.
//  * LL: each 8-byte half of a 16-byte line is {4 data bytes, 4-byte flag}
//    (Protocol.h's llWord). Lines are stored with st.volatile.v2.u64 and
//    polled with ld.volatile.v2.u64. The ISA treats a vector access as one
//    access per element, and an aligned 64-bit element access is
//    single-copy atomic between strong (volatile) operations, so a half
//    whose flag matches carries its own data; no fence is needed.
//  * LL128: lanes 0-6 of an 8-lane group store their 16 data bytes, lane 7
//    stores data word 14; __syncwarp() then orders all eight lanes' stores
//    before lane 7's st.release.gpu of the flag word 15 (the CUDA
//    Programming Guide: "the call to __syncwarp(mask) strongly happens
//    before any warp thread named in mask is unblocked from the wait"; PTX
//    bar.warp.sync "guarantees memory ordering among threads participating
//    in barrier"). The receiver's lane 7 acquires the flag word, and
//    __syncwarp() orders that before the other lanes' loads of the line. The
//    data words therefore need no atomicity of the 128-byte store, which the
//    ISA does not promise.
//
// The hardware is reached only through DevicePrims.h (PTX under nvcc, host
// C++ for the CPU SIMT launcher otherwise), so this very source also runs on
// the CPU (docs/CUDA.md).
//
// Waiting is bounded: every spin polls the launch's abort flag and, after
// the watchdog period (read from %globaltimer), claims the report, writes it
// into host-mapped memory, raises the abort flag and returns false; the
// interpreter loop then stops and the block exits.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CUDA_DEVICEKERNEL_CUH
#define COLL_INTERPRETER_CUDA_DEVICEKERNEL_CUH

#include "DevicePrims.h"
#include "DeviceTypes.h"

#include "coll/interpreter/Float16.h"
#include "coll/interpreter/ReduceOps.h"
#include "coll/interpreter/StepSemantics.h"

#include <cstdint>
#include <cstring>

namespace coll::interp::cuda {

/// Blocks of MaxThreadsPerBlock threads that must fit on one SM: bounds the
/// registers per thread so that large plans stay co-resident.
inline constexpr int MinBlocksPerSm = 2;
/// Polls between two looks at the abort flag and the clock.
inline constexpr uint32_t SpinsPerCheck = 64;

//===----------------------------------------------------------------------===//
// Element-wise work
//===----------------------------------------------------------------------===//

__device__ __forceinline__ uint64_t minU64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/// Calls fn(op functor) for the run-time operator, once, so that the element
/// loops inside fn are specialised and the switch stays outside them. avg
/// reduces with sum (the division comes after the collective).
template <class T, class Fn> __device__ __forceinline__ void withOp(DeviceOp op, Fn &&fn) {
  switch (op) {
  case DeviceOp::Prod: fn(OpProd<T>{}); break;
  case DeviceOp::Min: fn(OpMin<T>{}); break;
  case DeviceOp::Max: fn(OpMax<T>{}); break;
  case DeviceOp::Sum:
  case DeviceOp::Avg: fn(OpSum<T>{}); break;
  }
}

template <class T> struct alignas(16) Pack { T e[16 / sizeof(T)]; };

/// For i in [0, n): acc = in[0][i]; acc = op(in[k][i], acc) for k = 1..;
/// out[j][i] = acc for every output. This is the host's operand order: the
/// received value (or a fused reduction's source) is the left operand.
/// NIn = 0 takes the input count from `nin`. Every thread reads and writes
/// only its own elements, so an output may be an input (in place); pointers
/// into the same buffer are either equal or disjoint (chunks never overlap
/// partially). When every pointer has the same offset within 16 bytes, a
/// short scalar head aligns them and the body moves 16-byte packs, several
/// in flight per thread.
template <class T, int NIn, int NOut, class Op>
__device__ void transform(const T *const *in, int nin, T *const *out, uint64_t n, uint32_t tid,
                          uint32_t nthreads, Op op) {
  if constexpr (NIn > 0)
    nin = NIn;
  auto scalar = [&](uint64_t i) {
    T acc = in[0][i];
    for (int k = 1; k < nin; ++k)
      acc = op(in[k][i], acc);
    for (int j = 0; j < NOut; ++j)
      out[j][i] = acc;
  };
  const uintptr_t mis = reinterpret_cast<uintptr_t>(out[0]) % 16;
  bool aligned = true;
  for (int k = 0; k < nin; ++k)
    aligned &= reinterpret_cast<uintptr_t>(in[k]) % 16 == mis;
  for (int j = 1; j < NOut; ++j)
    aligned &= reinterpret_cast<uintptr_t>(out[j]) % 16 == mis;
  const uint64_t head = aligned ? minU64(n, (16 - mis) % 16 / sizeof(T)) : n;
  for (uint64_t i = tid; i < head; i += nthreads)
    scalar(i);
  if (!aligned)
    return;

  constexpr int E = 16 / sizeof(T);
  constexpr int Unroll = NIn == 1 ? 4 : sizeof(T) >= 4 ? 2 : 1;
  const uint64_t packs = (n - head) / E;
  using P = Pack<T>;
  for (uint64_t first = tid; first < packs; first += uint64_t(nthreads) * Unroll) {
    P acc[Unroll];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      uint64_t idx = first + uint64_t(u) * nthreads;
      if (idx < packs)
        acc[u] = reinterpret_cast<const P *>(in[0] + head)[idx];
    }
    for (int k = 1; k < nin; ++k) {
#pragma unroll
      for (int u = 0; u < Unroll; ++u) {
        uint64_t idx = first + uint64_t(u) * nthreads;
        if (idx < packs) {
          P v = reinterpret_cast<const P *>(in[k] + head)[idx];
#pragma unroll
          for (int e = 0; e < E; ++e)
            acc[u].e[e] = op(v.e[e], acc[u].e[e]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      uint64_t idx = first + uint64_t(u) * nthreads;
      if (idx < packs)
        for (int j = 0; j < NOut; ++j)
          reinterpret_cast<P *>(out[j] + head)[idx] = acc[u];
    }
  }
  for (uint64_t i = head + packs * E + tid; i < n; i += nthreads)
    scalar(i);
}

/// Combines a line's worth of elements: v holds what was received (if
/// Recv); the first `cnt` elements become op(received, src[first + k]) or
/// src[first + k]. Past `cnt`, received padding is forwarded as is and local
/// padding is zero.
template <class T, int E, bool Recv, bool Src, class Op>
__device__ __forceinline__ void combine(T (&v)[E], const T *src, uint64_t first, uint64_t cnt,
                                        Op op) {
  if constexpr (Src) {
#pragma unroll
    for (int k = 0; k < E; ++k) {
      if (uint64_t(k) < cnt) {
        T s = src[first + k];
        v[k] = Recv ? op(v[k], s) : s;
      } else if (!Recv) {
        v[k] = T{};
      }
    }
  }
}

template <class T, int E>
__device__ __forceinline__ void storeFirst(T *dst, const T (&v)[E], uint64_t cnt) {
#pragma unroll
  for (int k = 0; k < E; ++k)
    if (uint64_t(k) < cnt)
      dst[k] = v[k];
}

//===----------------------------------------------------------------------===//
// DevicePrims
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Timelines (KernelParams::traceEvents), by each block's thread 0
//===----------------------------------------------------------------------===//

// Only in the kernels instantiated with Trace (collectiveKernelFor), which
// find the buffers in the device state (DeviceControl) and keep their own
// state there too (traceCounts: per block the events so far and 1 + the
// open step's, 0 for none).

namespace timeline {

/// Adds an event (counted even when it does not fit); `open`: it is the
/// step whose elements follow.
static __device__ void add(const DeviceControl &c, uint64_t begin, uint64_t end, uint64_t iteration,
                           int32_t step, uint32_t kind, bool open) {
  uint32_t *state = c.traceCounts + 2 * uint64_t(blockIdx.x);
  const uint32_t index = state[0]++;
  if (index < c.traceCapacity) {
    DeviceTraceEvent &e = c.traceEvents[uint64_t(blockIdx.x) * c.traceCapacity + index];
    e.begin = begin;
    e.end = end;
    e.iteration = iteration;
    e.elems = 0;
    e.step = step;
    e.kind = kind;
  }
  if (open)
    state[1] = index + 1;
}

/// Ends the open step at `now`.
static __device__ void close(const DeviceControl &c, uint64_t now) {
  uint32_t *state = c.traceCounts + 2 * uint64_t(blockIdx.x);
  if (state[1] != 0 && state[1] - 1 < c.traceCapacity)
    c.traceEvents[uint64_t(blockIdx.x) * c.traceCapacity + state[1] - 1].end = now;
  state[1] = 0;
}

/// A step starts: the previous one ends.
static __device__ void step(const DeviceControl &c, uint64_t iteration, int32_t step) {
  const uint64_t now = ptx::globalTimer();
  close(c, now);
  add(c, now, now, iteration, step, 0, true);
}

static __device__ void elems(const DeviceControl &c, uint64_t n) {
  const uint32_t *state = c.traceCounts + 2 * uint64_t(blockIdx.x);
  if (state[1] != 0 && state[1] - 1 < c.traceCapacity)
    c.traceEvents[uint64_t(blockIdx.x) * c.traceCapacity + state[1] - 1].elems += n;
}

static __device__ void finish(const DeviceControl &c) { close(c, ptx::globalTimer()); }

} // namespace timeline

/// The data movement of one block for the interpreter loop. Every method is
/// called by all threads of the block with the same arguments.
template <class T, Proto P, bool Trace> class DevicePrims {
public:
  __device__ DevicePrims(const KernelParams &p, const PlanTb &tb, int32_t tbIndex,
                         uint32_t generation, const PlanStep *steps, uint32_t tid,
                         uint32_t nthreads)
      : p(p), tb(tb), tbIndex(tbIndex), generation(generation), steps(steps), tid(tid),
        nthreads(nthreads), control(reinterpret_cast<DeviceControl *>(p.state)) {
    if (tb.sendConn >= 0) {
      unsigned char *c = connection(tb.sendConn);
      sendHead = reinterpret_cast<uint64_t *>(c + ConnectionLayout::HeadOffset);
      sendTail = reinterpret_cast<uint64_t *>(c + ConnectionLayout::TailOffset);
      sendFifo = c + ConnectionLayout::FifoOffset;
      // Only this tb writes the tail; the previous launch's last store is
      // visible at the kernel boundary.
      sendSeq = ptx::ldVolatile(sendTail);
    }
    if (tb.recvConn >= 0) {
      unsigned char *c = connection(tb.recvConn);
      recvHead = reinterpret_cast<uint64_t *>(c + ConnectionLayout::HeadOffset);
      recvTail = reinterpret_cast<uint64_t *>(c + ConnectionLayout::TailOffset);
      recvFifo = c + ConnectionLayout::FifoOffset;
      recvSeq = ptx::ldVolatile(recvHead);
    }
  }

  __device__ void at(uint64_t it, const PlanStep &step) {
    iteration = it;
    stepIndex = static_cast<int32_t>(&step - steps);
    if constexpr (Trace)
      if (control->traceEvents && tid == 0)
        timeline::step(*control, it, stepIndex);
  }

  /// At the end of the launch: closes the timeline's open step.
  __device__ void traceFinish() {
    if constexpr (Trace)
      if (control->traceEvents && tid == 0)
        timeline::finish(*control);
  }

  __device__ bool waitDependency(int32_t depTb, uint64_t it, int32_t irStep) {
    bool fail = false;
    if (tid == 0) {
      const uint64_t *flag = tbFlag(depTb);
      const uint32_t goal = flagProgress(it, p.span, irStep);
      uint64_t seen = 0;
      fail = !spin([&] { return flagReached(seen = ptx::ldRelaxed(flag), generation, goal); },
                   [&](WatchdogReport &r) {
                     r.kind = WaitKind::Dependency;
                     r.depTb = depTb;
                     r.depStep = irStep;
                     r.expected = goal;
                     r.observed = static_cast<uint32_t>(seen >> 32) == generation
                                      ? static_cast<uint32_t>(seen)
                                      : 0;
                   },
                   3);
      if (!fail)
        ptx::fenceAcquire();
    }
    return !__syncthreads_or(fail);
  }

  /// Every prim ends with a block barrier, so all of the step's accesses
  /// precede this release.
  __device__ void publish(uint64_t it, int32_t irStep) {
    if (tid == 0)
      ptx::stRelease(tbFlag(tbIndex), makeFlag(generation, flagProgress(it, p.span, irStep)));
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

  __device__ void copy(const T *src, T *dst, uint64_t n) {
    traceElems(n);
    transform<T, 1, 1>(&src, 1, &dst, n, tid, nthreads, OpSum<T>{});
    __syncthreads();
  }

  /// dst = srcs[nsrc-1] ⊕ (… ⊕ (srcs[0] ⊕ dst)), as the host computes it.
  __device__ void reduce(T *dst, const T *const *srcs, int nsrc, uint64_t n) {
    traceElems(n);
    const T *in[MaxReduceSources + 1];
    in[0] = dst;
    for (int r = 0; r < nsrc; ++r)
      in[r + 1] = srcs[r];
    withOp<T>(p.op, [&](auto op) { transform<T, 0, 1>(in, nsrc + 1, &dst, n, tid, nthreads, op); });
    __syncthreads();
  }

private:
  __device__ unsigned char *connection(int32_t c) const {
    return p.connections[c];
  }
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
    for (uint32_t spins = 1;; ++spins) {
      ptx::spinPause();
      if (ready()) {
        if constexpr (Trace)
          if (control->traceEvents && tid == 0)
            timeline::add(*control, start, ptx::globalTimer(), iteration, stepIndex, traceKind,
                          false);
        return true;
      }
      if (spins % SpinsPerCheck != 0)
        continue;
      if (ptx::ldVolatile(&control->abort))
        return false;
      if (ptx::globalTimer() - start >= p.watchdogNs) {
        report(fill);
        return false;
      }
    }
  }

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
    bool ok = spin([&] { return sendSeq - (sendHeadSeen = ptx::ldRelaxed(sendHead)) < FifoDepth; },
                   [&](WatchdogReport &r) {
                     r.kind = WaitKind::FreeSlot;
                     r.connection = tb.sendConn;
                     r.slot = sendSeq;
                     r.head = sendHeadSeen;
                     r.tail = sendSeq;
                   },
                   2);
    if (ok)
      ptx::fenceAcquire();
    return ok;
  }

  /// Thread 0, Simple: until the sender has filled slot recvSeq.
  __device__ bool waitSimpleData() {
    if (recvTailSeen > recvSeq)
      return true; // acquired by an earlier wait
    bool ok = spin([&] { return (recvTailSeen = ptx::ldRelaxed(recvTail)) > recvSeq; },
                   [&](WatchdogReport &r) {
                     r.kind = WaitKind::SimpleData;
                     r.connection = tb.recvConn;
                     r.slot = recvSeq;
                     r.head = recvSeq;
                     r.tail = recvTailSeen;
                   },
                   1);
    if (ok)
      ptx::fenceAcquire();
    return ok;
  }

  /// Any thread, LL: until both halves of `line` carry `flag`.
  __device__ bool waitLLLine(const uint64_t *line, uint32_t flag, uint64_t index, uint64_t &w0,
                             uint64_t &w1) {
    return spin(
        [&] {
          ptx::ldVolatile2(line, w0, w1);
          return llWordReady(w0, flag) && llWordReady(w1, flag);
        },
        [&](WatchdogReport &r) {
          r.kind = WaitKind::LLLine;
          r.connection = tb.recvConn;
          r.slot = recvSeq;
          r.line = static_cast<uint32_t>(index);
          r.expected = flag;
          r.observed = (w1 >> 32 << 32) | (w0 >> 32);
          r.head = recvSeq;
          r.tail = ptx::ldRelaxed(recvTail);
        },
        1);
  }

  /// Lane 7 of a group, LL128: until the line's flag word is `flag`.
  __device__ bool waitLL128Line(const uint64_t *line, uint64_t flag, uint64_t index) {
    uint64_t seen = 0;
    bool ok = spin([&] { return (seen = ptx::ldRelaxed(line + LL128FlagWord)) == flag; },
                   [&](WatchdogReport &r) {
                     r.kind = WaitKind::LL128Line;
                     r.connection = tb.recvConn;
                     r.slot = recvSeq;
                     r.line = static_cast<uint32_t>(index);
                     r.expected = flag;
                     r.observed = seen;
                     r.head = recvSeq;
                     r.tail = ptx::ldRelaxed(recvTail);
                   },
                   1);
    if (ok)
      ptx::fenceAcquire();
    return ok;
  }

  /// One FIFO step: receive from the receive peer (Recv), combine with the
  /// local src (Src), store to the local dst (Dst), send on (Send).
  template <bool Recv, bool Src, bool Dst, bool Send>
  __device__ bool move(const T *src, T *dst, uint64_t n) {
    traceElems(n);
    // Thread 0 waits for what guards the whole slot: for Simple the receive
    // slot's data (LL and LL128 data carry flags), and a free send slot. In
    // the host backend's order — the received data first (for LL and LL128
    // its first line), then the free slot — so that a stall is reported as
    // the host reports it.
    if constexpr (Send || (Recv && P == Proto::Simple)) {
      bool fail = false;
      if (tid == 0) {
        if constexpr (Recv && P == Proto::Simple) {
          fail = !waitSimpleData();
        } else if constexpr (Recv && P == Proto::LL) {
          uint64_t w0, w1;
          if (llLines(n * sizeof(T)) > 0)
            fail = !waitLLLine(slot<const uint64_t>(recvFifo, recvSeq), llFlag(recvSeq), 0, w0, w1);
        } else if constexpr (Recv && P == Proto::LL128) {
          if (ll128Lines(n * sizeof(T)) > 0)
            fail = !waitLL128Line(slot<const uint64_t>(recvFifo, recvSeq), ll128Flag(recvSeq), 0);
        }
        if constexpr (Send)
          fail = fail || !waitFreeSlot();
      }
      if (__syncthreads_or(fail))
        return false;
    }
    bool ok = true;
    if constexpr (Recv && Src)
      withOp<T>(p.op, [&](auto op) { ok = moveData<Recv, Src, Dst, Send>(src, dst, n, op); });
    else
      ok = moveData<Recv, Src, Dst, Send>(src, dst, n, OpSum<T>{});
    // Everyone is done with both slots before thread 0 hands them over.
    if (__syncthreads_or(!ok))
      return false;
    if (tid == 0) {
      if constexpr (Send) {
        if constexpr (P == Proto::Simple)
          ptx::stRelease(sendTail, sendSeq + 1);
        else // the lines carry their own flags; the tail is for the report and the next launch
          ptx::stRelaxed(sendTail, sendSeq + 1);
      }
      if constexpr (Recv)
        ptx::stRelease(recvHead, recvSeq + 1);
    }
    if constexpr (Send)
      ++sendSeq;
    if constexpr (Recv)
      ++recvSeq;
    return true;
  }

  template <bool Recv, bool Src, bool Dst, bool Send, class Op>
  __device__ bool moveData(const T *src, T *dst, uint64_t n, Op op) {
    if constexpr (P == Proto::Simple) {
      constexpr int NIn = int(Recv) + int(Src), NOut = int(Dst) + int(Send);
      const T *in[NIn];
      T *out[NOut];
      int i = 0, o = 0;
      if constexpr (Src)
        in[i++] = src; // the local operand first: acc = op(received, src)
      if constexpr (Recv)
        in[i++] = slot<const T>(recvFifo, recvSeq);
      if constexpr (Dst)
        out[o++] = dst;
      if constexpr (Send)
        out[o++] = slot<T>(sendFifo, sendSeq);
      transform<T, NIn, NOut>(in, NIn, out, n, tid, nthreads, op);
      return true;
    } else if constexpr (P == Proto::LL) {
      return moveLL<Recv, Src, Dst, Send>(src, dst, n, op);
    } else {
      return moveLL128<Recv, Src, Dst, Send>(src, dst, n, op);
    }
  }

  /// LL: thread t moves lines t, t + nthreads, ... (8 data bytes each).
  template <bool Recv, bool Src, bool Dst, bool Send, class Op>
  __device__ bool moveLL(const T *src, T *dst, uint64_t n, Op op) {
    constexpr int E = LLDataBytesPerLine / sizeof(T);
    const uint64_t lines = llLines(n * sizeof(T));
    const uint64_t *in = Recv ? slot<const uint64_t>(recvFifo, recvSeq) : nullptr;
    uint64_t *out = Send ? slot<uint64_t>(sendFifo, sendSeq) : nullptr;
    const uint32_t inFlag = llFlag(recvSeq), outFlag = llFlag(sendSeq);
    for (uint64_t l = tid; l < lines; l += nthreads) {
      const uint64_t first = l * E, cnt = minU64(E, n - first);
      T v[E];
      if constexpr (Recv) {
        uint64_t w0, w1;
        if (!waitLLLine(in + 2 * l, inFlag, l, w0, w1))
          return false;
        uint64_t data = (w0 & 0xffffffffu) | (w1 << 32);
        memcpy(v, &data, sizeof data);
      }
      combine<T, E, Recv, Src>(v, src, first, cnt, op);
      if constexpr (Dst)
        storeFirst(dst + first, v, cnt);
      if constexpr (Send) {
        uint64_t data;
        memcpy(&data, v, sizeof data);
        ptx::stVolatile2(out + 2 * l, llWord(static_cast<uint32_t>(data), outFlag),
                         llWord(static_cast<uint32_t>(data >> 32), outFlag));
      }
    }
    return true;
  }

  /// LL128: each warp moves four lines at a time, eight lanes per line.
  template <bool Recv, bool Src, bool Dst, bool Send, class Op>
  __device__ bool moveLL128(const T *src, T *dst, uint64_t n, Op op) {
    constexpr int E = 16 / sizeof(T);
    constexpr uint64_t LineElems = LL128DataBytesPerLine / sizeof(T);
    constexpr uint32_t FlagLane = LL128LanesPerLine - 1;
    const uint32_t lane = tid % 32, warp = tid / 32, nwarps = nthreads / 32;
    const uint32_t j = lane % LL128LanesPerLine;
    const LaneSegment seg = ll128Segment(j);
    const uint64_t lines = ll128Lines(n * sizeof(T));
    const uint64_t *in = Recv ? slot<const uint64_t>(recvFifo, recvSeq) : nullptr;
    uint64_t *out = Send ? slot<uint64_t>(sendFifo, sendSeq) : nullptr;
    const uint64_t inFlag = ll128Flag(recvSeq), outFlag = ll128Flag(sendSeq);
    // The loop bound is the same for all lanes of a warp, so every lane
    // reaches every __syncwarp.
    for (uint64_t base = uint64_t(warp) * LL128LinesPerWarp; base < lines;
         base += uint64_t(nwarps) * LL128LinesPerWarp) {
      const uint64_t l = base + lane / LL128LanesPerLine;
      const bool active = l < lines;
      const uint64_t first = l * LineElems + seg.begin / sizeof(T);
      const uint64_t cnt = active && first < n ? minU64(seg.bytes / sizeof(T), n - first) : 0;
      uint64_t w[2] = {0, 0};
      if constexpr (Recv) {
        const uint64_t *line = in + l * LL128LineWords;
        bool ok = !(active && j == FlagLane) || waitLL128Line(line, inFlag, l);
        const bool anyFailed = __any_sync(0xffffffffu, !ok);
        __syncwarp(); // lane 7's acquire of the flag before the lanes' loads
        if (anyFailed)
          return false;
        if (active) {
          if (j == FlagLane)
            w[0] = ptx::ldVolatile(line + 2 * j);
          else
            ptx::ldVolatile2(line + 2 * j, w[0], w[1]);
        }
      }
      T v[E];
      memcpy(v, w, sizeof w);
      combine<T, E, Recv, Src>(v, src, first, cnt, op);
      if constexpr (Dst)
        storeFirst(dst + first, v, cnt);
      if constexpr (Send) {
        uint64_t *line = out + l * LL128LineWords;
        memcpy(w, v, sizeof w);
        if (active) {
          if (j == FlagLane)
            ptx::stVolatile(line + 2 * j, w[0]);
          else
            ptx::stVolatile2(line + 2 * j, w[0], w[1]);
        }
        __syncwarp(); // every lane's data before lane 7's flag
        if (active && j == FlagLane)
          ptx::stRelease(line + LL128FlagWord, outFlag);
      }
    }
    return true;
  }

  const KernelParams &p;
  const PlanTb &tb;
  const int32_t tbIndex;
  const uint32_t generation;
  const PlanStep *const steps;
  const uint32_t tid, nthreads;
  DeviceControl *const control;

  uint64_t *sendHead = nullptr, *sendTail = nullptr, *recvHead = nullptr, *recvTail = nullptr;
  unsigned char *sendFifo = nullptr, *recvFifo = nullptr;
  uint64_t sendSeq = 0, recvSeq = 0; ///< slots this tb has sent / received, ever
  uint64_t sendHeadSeen = 0;         ///< thread 0: the receiver's head, last acquired
  uint64_t recvTailSeen = 0;         ///< thread 0, Simple: the sender's tail, last acquired

  uint64_t iteration = 0; ///< where the block is, for the watchdog's report
  int32_t stepIndex = 0;

  __device__ void traceElems(uint64_t n) {
    if constexpr (Trace)
      if (control->traceEvents && tid == 0)
        timeline::elems(*control, n);
  }
};

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// One block per tb of every rank (or of one rank, from p.firstTb): gridDim.x
/// == number of tbs launched,
/// dynamic shared memory == p.maxSteps * sizeof(PlanStep).
template <class T, Proto P, bool Trace>
__global__ void __launch_bounds__(MaxThreadsPerBlock, MinBlocksPerSm)
    collectiveKernel(const KernelParams p) {
  PlanStep *const sharedSteps = dynamicShared<PlanStep>();
  __shared__ PlanTb tb;
  __shared__ uint32_t generation;
  const uint32_t tid = threadIdx.x, nthreads = blockDim.x;
  const int32_t tbIndex = p.firstTb + static_cast<int32_t>(blockIdx.x);
  auto *control = reinterpret_cast<DeviceControl *>(p.state);

  if (tid == 0) {
    tb = p.tbs[tbIndex];
    // The last block of the previous launch advanced it before that launch
    // ended; no block of this launch advances it before all have read it.
    generation = ptx::ldVolatile(&control->generation);
  }
  __syncthreads();
  for (int32_t i = static_cast<int32_t>(tid); i < tb.nSteps; i += static_cast<int32_t>(nthreads))
    sharedSteps[i] = p.steps[tb.stepBegin + i];
  __syncthreads();

  {
    DevicePrims<T, P, Trace> prims(p, tb, tbIndex, generation, sharedSteps, tid, nthreads);
    const RankPointers &rank = p.ranks[tb.rank];
    RankBuffers<T> buffers{static_cast<T *>(rank.input), static_cast<T *>(rank.output),
                           static_cast<T *>(rank.scratch)};
    runThreadBlock<T>(prims, sharedSteps, tb.nSteps, p.slices, buffers, p.iterations, p.sliceElems);
    prims.traceFinish();
  }

  __syncthreads();
  // acq_rel: every other block's increment (and its read of `generation`
  // before it) happens before the last block's plain stores below. With a
  // relaxed atomicAdd those stores raced with the other blocks' accesses in
  // the PTX memory model (ThreadSanitizer found it on the CPU emulation).
  if (tid == 0 && ptx::atomicAddAcqRel(&control->finished, 1u) == gridDim.x - 1) {
    control->finished = 0;
    control->generation = generation + 1;
  }
}

/// avg: divides the reduced outputs by the rank count after the collective,
/// as the host backend does. blockIdx.y picks the rank (from firstRank).
template <class T>
__global__ void averageKernel(const RankPointers *ranks, int32_t firstRank, int32_t nranks,
                              uint64_t elems) {
  T *out = static_cast<T *>(ranks[firstRank + static_cast<int32_t>(blockIdx.y)].output);
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < elems;
       i += uint64_t(gridDim.x) * blockDim.x)
    out[i] = Arith<T>::divide(out[i], nranks);
}

/// The kernels of protocol P, indexed by DataType's value; `trace`: the
/// ones that record a timeline (separate kernels, so that the others keep
/// their registers).
template <Proto P> const void *collectiveKernelFor(uint8_t type, bool trace) {
  static const void *const plain[] = {
#define COLL_DATA_TYPE(Enum, Name, CType, Kind)                                                    \
  COLL_KERNEL_HANDLE(collectiveKernel<CType, P, false>),
#include "coll/interpreter/DataTypes.def"
  };
  static const void *const traced[] = {
#define COLL_DATA_TYPE(Enum, Name, CType, Kind)                                                    \
  COLL_KERNEL_HANDLE(collectiveKernel<CType, P, true>),
#include "coll/interpreter/DataTypes.def"
  };
  return trace ? traced[type] : plain[type];
}

} // namespace coll::interp::cuda

#endif // COLL_INTERPRETER_CUDA_DEVICEKERNEL_CUH
