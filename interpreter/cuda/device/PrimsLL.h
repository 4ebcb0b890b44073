//===- PrimsLL.h - The LL protocol's primitives ---------------------*- CUDA -*-===//
//
// LL: 16-byte lines of two 8-byte halves, each {4 data bytes, 4-byte flag}
// (Protocol.h's llWord), stored and polled as one volatile 16-byte vector
// access; a half whose flag matches carries its own data, so no fence is
// needed, and the tail is stored only for the report and the next launch
// (docs/CUDA.md, "Protocols and why their ordering is right").
//
//===----------------------------------------------------------------------===//
#ifndef COLL_INTERPRETER_CUDA_DEVICE_PRIMSLL_H
#define COLL_INTERPRETER_CUDA_DEVICE_PRIMSLL_H

#include "device/Prims.h"

namespace coll::interp::cuda {

/// Any thread, LL: until both halves of `line` carry `flag`.
template <class T, Proto P, bool CrossGpu>
__device__ bool Prims<T, P, CrossGpu>::waitLLLine(const uint64_t *line, uint32_t flag, uint64_t index,
                                              uint64_t &w0, uint64_t &w1) {
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
        r.tail = ptx::ldRelaxed(recvTail, recvScope());
      },
      1);
}

/// LL: thread t moves lines t, t + nthreads, ... (8 data bytes each).
template <class T, Proto P, bool CrossGpu>
template <bool Recv, bool Src, bool Dst, bool Send, class Op>
__device__ bool Prims<T, P, CrossGpu>::moveLL(const T *src, T *dst, uint32_t n, Op op) {
  constexpr int E = LLDataBytesPerLine / sizeof(T);
  const uint32_t lines = static_cast<uint32_t>(llLines(uint64_t(n) * sizeof(T)));
  const uint64_t *in = Recv ? slot<const uint64_t>(recvFifo, recvSeq) : nullptr;
  uint64_t *out = Send ? slot<uint64_t>(sendFifo, sendSeq) : nullptr;
  const uint32_t inFlag = llFlag(recvSeq), outFlag = llFlag(sendSeq);
  for (uint32_t l = tid; l < lines; l += nthreads) {
    const uint32_t first = l * E, cnt = minU32(E, n - first);
    T v[E];
    if constexpr (Recv) {
      uint64_t w0, w1;
      if (!waitLLLine(in + 2 * l, inFlag, l, w0, w1))
        return false;
      uint64_t data = (w0 & 0xffffffffu) | (w1 << 32);
      memcpy(v, &data, sizeof data);
    }
    combine<T, E, Recv, Src>(v, src, first, cnt, op);
    // The line for the next peer first: in a chain of hops, its store is
    // what the next block waits for; the local one is not.
    if constexpr (Send) {
      uint64_t data;
      memcpy(&data, v, sizeof data);
      ptx::stVolatile2(out + 2 * l, llWord(static_cast<uint32_t>(data), outFlag),
                       llWord(static_cast<uint32_t>(data >> 32), outFlag));
    }
    if constexpr (Dst)
      storeFirst(dst + first, v, cnt);
  }
  return true;
}

} // namespace coll::interp::cuda

#endif // COLL_INTERPRETER_CUDA_DEVICE_PRIMSLL_H
