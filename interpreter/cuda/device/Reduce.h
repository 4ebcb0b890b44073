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

} // namespace coll::interp::cuda

#endif // COLL_INTERPRETER_CUDA_DEVICE_REDUCE_H
