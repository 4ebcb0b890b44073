//===- PrimsSimple.h - The Simple protocol's primitives -------------*- CUDA -*-===//
//
// Simple: slots of plain data, moved by the block's pack loop (Reduce.h's
// transform, in Prims::moveData). The sender fills a slot, then thread 0
// releases the tail; the receiver's thread 0 acquires the tail before the
// block reads the slot (docs/CUDA.md, "Protocols and why their ordering is
// right").
//
//===----------------------------------------------------------------------===//
#ifndef COLL_INTERPRETER_CUDA_DEVICE_PRIMSSIMPLE_H
#define COLL_INTERPRETER_CUDA_DEVICE_PRIMSSIMPLE_H

#include "device/Prims.h"

namespace coll::interp::cuda {

/// Thread 0, Simple: until the sender has filled slot recvSeq.
template <class T, Proto P, bool CrossGpu> __device__ bool Prims<T, P, CrossGpu>::waitSimpleData() {
  if (recvTailSeen > recvSeq)
    return true; // acquired by an earlier wait
  bool ok = spin([&] { return (recvTailSeen = ptx::ldAcquire(recvTail, recvScope())) > recvSeq; },
                 [&](WatchdogReport &r) {
                   r.kind = WaitKind::SimpleData;
                   r.connection = tb.recvConn;
                   r.slot = recvSeq;
                   r.head = recvSeq;
                   r.tail = recvTailSeen;
                 },
                 1);
  return ok;
}

template <class T, Proto P, bool CrossGpu>
template <bool Recv, bool Src, bool Dst, bool Send, class Op>
__device__ bool Prims<T, P, CrossGpu>::moveSimple(const T *src, T *dst, uint32_t n, Op op) {
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
}

} // namespace coll::interp::cuda

#endif // COLL_INTERPRETER_CUDA_DEVICE_PRIMSSIMPLE_H
