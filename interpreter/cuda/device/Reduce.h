//===- Reduce.h - The kernel's element-wise work ------------------*- CUDA -*-===//
//
// Copies and reductions of a block's elements, by each thread on its own
// elements: the 16-byte pack loop of copies, receives and local reductions
// (transform), and the line-sized pieces of LL and LL128 (combine,
// storeFirst). Operands are combined in the host backend's order, so the
// results equal the host's bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CUDA_DEVICE_REDUCE_H
#define COLL_INTERPRETER_CUDA_DEVICE_REDUCE_H

#include "device/Hardware.h"

#include "DeviceTypes.h"

#include "coll/interpreter/Float16.h"
#include "coll/interpreter/ReduceOps.h"

#include <cstdint>

namespace coll::interp::cuda {

__device__ __forceinline__ uint64_t minU64(uint64_t a, uint64_t b) { return a < b ? a : b; }
__device__ __forceinline__ uint32_t minU32(uint32_t a, uint32_t b) { return a < b ? a : b; }

/// The elements of a step's slice as the element loops count them: a slice
/// is at most one FIFO slot (HostSupport.cpp refuses slots over 64 MiB), so
/// it fits 32 bits, and the loops' indices are 32-bit (transform).
__device__ __forceinline__ uint32_t sliceCount(uint64_t n) { return static_cast<uint32_t>(n); }

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
///
/// n is at most one FIFO slot's elements (a step's slice: at most 64 MiB,
/// HostSupport.cpp's bound on slot sizes), so indices are 32-bit: on the GPU
/// a 64-bit index costs two instructions per add and compare and four per
/// address where a 32-bit one costs one (issue 27: a step's path is
/// latency-bound, one warp per scheduler).
///
/// Untested: the loop's first pass runs without a test (below).
template <class T, int NIn, int NOut, class Op, bool Untested = false>
__device__ void transform(const T *const *in, int nin, T *const *out, uint32_t n, uint32_t tid,
                          uint32_t nthreads, Op op) {
  if constexpr (NIn > 0)
    nin = NIn;
#if COLL_CUDA_EMULATION
  // The emulation's traffic counters (docs/CUDA.md, "Traffic"): every
  // operand's bytes, once for the block.
  if (tid == 0) {
    for (int k = 0; k < nin; ++k)
      ptx::traffic(in[k], uint64_t(n) * sizeof(T), false);
    for (int j = 0; j < NOut; ++j)
      ptx::traffic(out[j], uint64_t(n) * sizeof(T), true);
  }
#endif
  auto scalar = [&](uint32_t i) {
    T acc = in[0][i];
    for (int k = 1; k < nin; ++k)
      acc = op(in[k][i], acc);
    for (int j = 0; j < NOut; ++j)
      out[j][i] = acc;
  };
  // f(address) for every input: unrolled for a count known at compile
  // time; rolled for a reduction's run-time count, since unrolled its
  // remainder was computed on every step's path (a copy's too).
  auto eachIn = [&](auto &&f) {
    if constexpr (NIn > 0) {
#pragma unroll
      for (int k = 0; k < NIn; ++k)
        f(reinterpret_cast<uintptr_t>(in[k]));
    } else {
#pragma unroll 1
      for (int k = 0; k < nin; ++k)
        f(reinterpret_cast<uintptr_t>(in[k]));
    }
  };
  constexpr int E = 16 / sizeof(T);
  // A step's usual slice: every operand 16-byte aligned and the elements
  // whole packs, so no scalar head or tail. One test says so; only when it
  // fails are the head and tail worked out and run (docs/CUDA.md, "Step
  // paths": each test costs a step's path ~20 cycles).
  // 32-bit: only the low bits count, and a 64-bit test was two.
  uint32_t any = n % E;
  eachIn([&](uintptr_t a) { any |= static_cast<uint32_t>(a) % 16; });
#pragma unroll
  for (int j = 0; j < NOut; ++j)
    any |= static_cast<uint32_t>(reinterpret_cast<uintptr_t>(out[j])) % 16;
  uint32_t head = 0, packs = n / E;
  if (any != 0) {
    // Aligned when every operand is as far from a 16-byte boundary as the
    // first output: a scalar head reaches it. Unaligned: all of it scalar,
    // as the head, and no packs. Each thread's elements are its own, so
    // the order of head, tail and packs does not matter.
    const uint32_t mis = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(out[0]) % 16);
    bool aligned = true;
    eachIn([&](uintptr_t a) { aligned &= a % 16 == mis; });
#pragma unroll
    for (int j = 1; j < NOut; ++j)
      aligned &= reinterpret_cast<uintptr_t>(out[j]) % 16 == mis;
    const uint32_t toAlign = (16 - mis) % 16 / uint32_t(sizeof(T));
    head = aligned ? (n < toAlign ? n : toAlign) : n;
    packs = (n - head) / E;
    for (uint32_t i = tid; i < head; i += nthreads)
      scalar(i);
    for (uint32_t i = head + packs * E + tid; i < n; i += nthreads)
      scalar(i);
  }

  constexpr int Unroll = NIn == 1 ? 4 : sizeof(T) >= 4 ? 2 : 1;
  using P = Pack<T>;
  // The packs of each operand, from its first aligned element.
  auto inPacks = [&](int k) { return reinterpret_cast<const P *>(in[k] + head); };
  auto outPacks = [&](int j) { return reinterpret_cast<P *>(out[j] + head); };
  // One pass of the loop: Unroll packs per thread, from `first`.
  auto pass = [&](uint32_t first) {
    P acc[Unroll];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      const uint32_t idx = first + u * nthreads;
      if (idx < packs)
        acc[u] = inPacks(0)[idx];
    }
    for (int k = 1; k < nin; ++k) {
#pragma unroll
      for (int u = 0; u < Unroll; ++u) {
        const uint32_t idx = first + u * nthreads;
        if (idx < packs) {
          P v = inPacks(k)[idx];
#pragma unroll
          for (int e = 0; e < E; ++e)
            acc[u].e[e] = op(v.e[e], acc[u].e[e]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      const uint32_t idx = first + u * nthreads;
      if (idx < packs)
        for (int j = 0; j < NOut; ++j)
          outPacks(j)[idx] = acc[u];
    }
  };
  if constexpr (Untested) {
    // The first pass without a test: each access tests its own index,
    // so a thread with no packs does nothing in it (the test cost a
    // step's path ~20 cycles, docs/CUDA.md "Step paths"). Only where
    // asked (the wide kernels' local copies): in every loop it made
    // the narrow builds spill.
    uint32_t first = tid;
    do {
      pass(first);
      first += nthreads * Unroll;
    } while (first < packs);
  } else {
    for (uint32_t first = tid; first < packs; first += nthreads * Unroll)
      pass(first);
  }
}

/// A fused put's element loop (StepSemantics.h): out[j][i] = in[i] for each
/// of the `nout` outputs, `in` read once. Lean, one 16-byte pack in flight
/// per thread and no scalar path but the unaligned one, as every Simple
/// kernel carries it and only fused puts run it (the pointers come from a
/// run-time count, so they live in local memory: scripts/cuda-resources.sh).
template <class T>
__device__ void spread(const T *in, T *const *out, int nout, uint32_t n, uint32_t tid,
                       uint32_t nthreads) {
#if COLL_CUDA_EMULATION
  if (tid == 0) { // docs/CUDA.md, "Traffic"
    ptx::traffic(in, uint64_t(n) * sizeof(T), false);
    for (int j = 0; j < nout; ++j)
      ptx::traffic(out[j], uint64_t(n) * sizeof(T), true);
  }
#endif
  constexpr uint32_t E = 16 / sizeof(T);
  const uint32_t mis = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(in) % 16);
  bool aligned = true;
#pragma unroll 1
  for (int j = 0; j < nout; ++j)
    aligned &= reinterpret_cast<uintptr_t>(out[j]) % 16 == mis;
  const uint32_t toAlign = (16 - mis) % 16 / uint32_t(sizeof(T));
  const uint32_t head = aligned ? (n < toAlign ? n : toAlign) : n;
  const uint32_t packs = (n - head) / E;
  auto scalar = [&](uint32_t i) {
    const T v = in[i];
#pragma unroll 1
    for (int j = 0; j < nout; ++j)
      out[j][i] = v;
  };
  for (uint32_t i = tid; i < head; i += nthreads)
    scalar(i);
  for (uint32_t i = head + packs * E + tid; i < n; i += nthreads)
    scalar(i);
  const Pack<T> *from = reinterpret_cast<const Pack<T> *>(in + head);
  for (uint32_t i = tid; i < packs; i += nthreads) {
    const Pack<T> v = from[i];
#pragma unroll 1
    for (int j = 0; j < nout; ++j)
      reinterpret_cast<Pack<T> *>(out[j] + head)[i] = v;
  }
}

/// Combines a line's worth of elements: v holds what was received (if
/// Recv); the first `cnt` elements become op(received, src[first + k]) or
/// src[first + k]. Past `cnt`, received padding is forwarded as is and local
/// padding is zero.
template <class T, int E, bool Recv, bool Src, class Op>
__device__ __forceinline__ void combine(T (&v)[E], const T *src, uint32_t first, uint32_t cnt,
                                        Op op) {
  if constexpr (Src) {
#if COLL_CUDA_EMULATION
    ptx::traffic(src + first, uint64_t(cnt) * sizeof(T), false); // "Traffic"
#endif
#pragma unroll
    for (int k = 0; k < E; ++k) {
      if (uint32_t(k) < cnt) {
        T s = src[first + k];
        v[k] = Recv ? op(v[k], s) : s;
      } else if (!Recv) {
        v[k] = T{};
      }
    }
  }
}

template <class T, int E>
__device__ __forceinline__ void storeFirst(T *dst, const T (&v)[E], uint32_t cnt) {
#if COLL_CUDA_EMULATION
  ptx::traffic(dst, uint64_t(cnt) * sizeof(T), true); // docs/CUDA.md, "Traffic"
#endif
#pragma unroll
  for (int k = 0; k < E; ++k)
    if (uint32_t(k) < cnt)
      dst[k] = v[k];
}

} // namespace coll::interp::cuda

#endif // COLL_INTERPRETER_CUDA_DEVICE_REDUCE_H
