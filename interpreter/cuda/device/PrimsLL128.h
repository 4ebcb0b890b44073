//===- PrimsLL128.h - The LL128 protocol's primitives ---------------*- CUDA -*-===//
//
// LL128: 128-byte lines of 120 data bytes and a flag word, moved by eight
// lanes of a warp each; lane 7 releases the flag after a __syncwarp(), and
// the receiver's lane 7 acquires it (docs/CUDA.md, "Protocols and why their
// ordering is right").
//
//===----------------------------------------------------------------------===//
#ifndef COLL_INTERPRETER_CUDA_DEVICE_PRIMSLL128_H
#define COLL_INTERPRETER_CUDA_DEVICE_PRIMSLL128_H

#include "device/Prims.h"

namespace coll::interp::cuda {

/// Lane 7 of a group, LL128: until the line's flag word is `flag`.
template <class T, Proto P, bool CrossGpu>
__device__ bool Prims<T, P, CrossGpu>::waitLL128Line(const uint64_t *line, uint64_t flag,
                                                 uint64_t index) {
  uint64_t seen = 0;
  bool ok = spin([&] { return (seen = ptx::ldAcquire(line + LL128FlagWord, recvScope())) == flag; },
                 [&](WatchdogReport &r) {
                   r.kind = WaitKind::LL128Line;
                   r.connection = tb.recvConn;
                   r.slot = recvSeq;
                   r.line = static_cast<uint32_t>(index);
                   r.expected = flag;
                   r.observed = seen;
                   r.head = recvSeq;
                   r.tail = ptx::ldRelaxed(recvTail, recvScope());
                 },
                 1);
  return ok;
}

/// LL128: each warp moves four lines at a time, eight lanes per line.
template <class T, Proto P, bool CrossGpu>
template <bool Recv, bool Src, bool Dst, bool Send, class Op>
__device__ bool Prims<T, P, CrossGpu>::moveLL128(const T *src, T *dst, uint32_t n, Op op) {
  constexpr int E = 16 / sizeof(T);
  constexpr uint32_t LineElems = LL128DataBytesPerLine / sizeof(T);
  constexpr uint32_t FlagLane = LL128LanesPerLine - 1;
  const uint32_t lane = tid % 32, warp = tid / 32, nwarps = nthreads / 32;
  const uint32_t j = lane % LL128LanesPerLine;
  const LaneSegment seg = ll128Segment(j);
  const uint32_t lines = static_cast<uint32_t>(ll128Lines(uint64_t(n) * sizeof(T)));
  const uint64_t *in = Recv ? slot<const uint64_t>(recvFifo, recvSeq) : nullptr;
  uint64_t *out = Send ? slot<uint64_t>(sendFifo, sendSeq) : nullptr;
  const uint64_t inFlag = ll128Flag(recvSeq), outFlag = ll128Flag(sendSeq);
  // The loop bound is the same for all lanes of a warp, so every lane
  // reaches every __syncwarp.
  for (uint32_t base = warp * LL128LinesPerWarp; base < lines; base += nwarps * LL128LinesPerWarp) {
    const uint32_t l = base + lane / LL128LanesPerLine;
    const bool active = l < lines;
    const uint32_t first = l * LineElems + seg.begin / uint32_t(sizeof(T));
    const uint32_t cnt =
        active && first < n ? minU32(seg.bytes / uint32_t(sizeof(T)), n - first) : 0;
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
    // The line for the next peer first, and its flag: the flag's release
    // then waits for none of the local stores (a MEMBAR waits for the
    // warp's own), and the next block waits for it; the local ones are not
    // waited for until the step's barrier.
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
        ptx::stRelease(line + LL128FlagWord, outFlag, sendScope());
    }
    if constexpr (Dst)
      storeFirst(dst + first, v, cnt);
  }
  return true;
}

} // namespace coll::interp::cuda

#endif // COLL_INTERPRETER_CUDA_DEVICE_PRIMSLL128_H
