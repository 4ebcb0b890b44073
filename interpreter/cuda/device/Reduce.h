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
template <class T, int NIn, int NOut, class Op>
__device__ void transform(const T *const *in, int nin, T *const *out, uint32_t n, uint32_t tid,
                          uint32_t nthreads, Op op) {
  if constexpr (NIn > 0)
    nin = NIn;
  auto scalar = [&](uint32_t i) {
    T acc = in[0][i];
    for (int k = 1; k < nin; ++k)
      acc = op(in[k][i], acc);
    for (int j = 0; j < NOut; ++j)
      out[j][i] = acc;
  };
  const uint32_t mis = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(out[0]) % 16);
  bool aligned = true;
  if constexpr (NIn > 0) {
#pragma unroll
    for (int k = 0; k < NIn; ++k)
      aligned &= reinterpret_cast<uintptr_t>(in[k]) % 16 == mis;
  } else {
    // A reduction's run-time count of sources: rolled, since unrolled its
    // remainder was computed on every step's path (a copy's too).
#pragma unroll 1
    for (int k = 0; k < nin; ++k)
      aligned &= reinterpret_cast<uintptr_t>(in[k]) % 16 == mis;
  }
  for (int j = 1; j < NOut; ++j)
    aligned &= reinterpret_cast<uintptr_t>(out[j]) % 16 == mis;
  constexpr int E = 16 / sizeof(T);
  const uint32_t toAlign = (16 - mis) % 16 / uint32_t(sizeof(T));
  // Unaligned: all of it scalar, as the head, and no packs.
  const uint32_t head = aligned ? (n < toAlign ? n : toAlign) : n;
  const uint32_t packs = (n - head) / E;
  const uint32_t body = head + packs * E;
  // The scalar head and tail, behind one test: where the operands are
  // aligned and the elements whole packs (a step's usual slice), the step
  // pays one branch for both, where each loop's own test cost one
  // (docs/CUDA.md, "Step paths"). Each thread's elements are its own, so
  // their order does not matter.
  if (head != 0 || body != n) {
    for (uint32_t i = tid; i < head; i += nthreads)
      scalar(i);
    for (uint32_t i = body + tid; i < n; i += nthreads)
      scalar(i);
  }

  constexpr int Unroll = NIn == 1 ? 4 : sizeof(T) >= 4 ? 2 : 1;
  using P = Pack<T>;
  // The packs of each operand, from its first aligned element.
  auto inPacks = [&](int k) { return reinterpret_cast<const P *>(in[k] + head); };
  auto outPacks = [&](int j) { return reinterpret_cast<P *>(out[j] + head); };
  for (uint32_t first = tid; first < packs; first += nthreads * Unroll) {
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
#pragma unroll
  for (int k = 0; k < E; ++k)
    if (uint32_t(k) < cnt)
      dst[k] = v[k];
}

} // namespace coll::interp::cuda

#endif // COLL_INTERPRETER_CUDA_DEVICE_REDUCE_H
