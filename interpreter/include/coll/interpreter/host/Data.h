//===- Data.h - The host backend's data path --------------------*- C++ -*-===//
//
// The loops that move and combine elements on the host, written so that the
// compiler vectorises them for every element type whose arithmetic allows
// (Release builds are -O3), and the LL/LL128 framing of whole slots. The
// host backend's primitives (interpreter/lib/host/Prims*.h) and the
// benchmarks' copy floor (tests/benchmarks/HostBenchmark.cpp) use them.
//
// Aliasing: a FIFO slot or staging buffer never overlaps user memory, so
// those pointers are __restrict. A step's local source and destination are
// chunks of the user's buffers, which are either the very same chunk (a
// reduction into place) or disjoint, never partially overlapping: each
// loop has a version for the identical case so that neither version needs
// a run-time overlap check that would fall back to scalar code.
//
// Operand order is the one every backend uses (op(received, local)), so the
// results are bit-identical to the CUDA backend's.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_HOST_DATA_H
#define COLL_INTERPRETER_HOST_DATA_H

#include "coll/interpreter/Protocol.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

namespace coll::interp::host::data {

template <class T> inline void copy(T *__restrict dst, const T *__restrict src, uint64_t n) {
  std::memcpy(dst, src, n * sizeof(T));
}

template <class T> inline void move(T *dst, const T *src, uint64_t n) {
  if (dst != src)
    std::memmove(dst, src, n * sizeof(T));
}

/// dst[i] = out[i] = in[i], reading `in` once.
template <class T>
inline void copy2(T *__restrict dst, T *__restrict out, const T *__restrict in, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    T v = in[i];
    dst[i] = v;
    out[i] = v;
  }
}

/// dst[i] = op(in[i], src[i]); dst and src are identical or disjoint.
template <class T, class Op>
inline void combine(T *dst, const T *__restrict in, const T *src, uint64_t n, Op op) {
  if (dst == src) {
    T *__restrict d = dst;
    for (uint64_t i = 0; i < n; ++i)
      d[i] = op(in[i], d[i]);
    return;
  }
  T *__restrict d = dst;
  const T *__restrict s = src;
  for (uint64_t i = 0; i < n; ++i)
    d[i] = op(in[i], s[i]);
}

/// dst[i] = out[i] = op(in[i], src[i]); dst and src are identical or
/// disjoint, `out` is a FIFO slot.
template <class T, class Op>
inline void combine2(T *dst, T *__restrict out, const T *__restrict in, const T *src, uint64_t n,
                     Op op) {
  if (dst == src) {
    T *__restrict d = dst;
    for (uint64_t i = 0; i < n; ++i) {
      T v = op(in[i], d[i]);
      d[i] = v;
      out[i] = v;
    }
    return;
  }
  T *__restrict d = dst;
  const T *__restrict s = src;
  for (uint64_t i = 0; i < n; ++i) {
    T v = op(in[i], s[i]);
    d[i] = v;
    out[i] = v;
  }
}

/// dst[i] = op(srcs[K-1][i], ... op(srcs[0][i], dst[i])) for K of 1 to 4
/// sources, none of which overlaps dst: one pass, which the compiler
/// vectorizes.
template <int K, class T, class Op>
inline void reduceApart(T *__restrict d, const T *__restrict a, const T *__restrict b,
                        const T *__restrict c, const T *__restrict e, uint64_t n, Op op) {
  for (uint64_t i = 0; i < n; ++i) {
    T acc = op(a[i], d[i]);
    if constexpr (K > 1)
      acc = op(b[i], acc);
    if constexpr (K > 2)
      acc = op(c[i], acc);
    if constexpr (K > 3)
      acc = op(e[i], acc);
    d[i] = acc;
  }
}

/// dst[i] = op(srcs[nsrc-1][i], ... op(srcs[0][i], dst[i])). A source may be
/// the destination itself: every source is read before the destination is
/// written, block by block, as on the GPU.
template <class T, class Op>
inline void reduceInto(T *dst, const T *const *srcs, int nsrc, uint64_t n, Op op) {
  // Sources apart from the destination (a small call's usual `re`, a fused
  // `re` or `getre`): in place, four sources a pass, without the block
  // copies below (the same operand order: each pass folds its sources into
  // what the passes before left in dst). Twice as fast as the blocks for
  // three sources of 64 KiB.
  const auto apart = [n](const T *a, const T *b) {
    const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
    return x + n * sizeof(T) <= y || y + n * sizeof(T) <= x;
  };
  bool allApart = true;
  for (int r = 0; r < nsrc && allApart; ++r)
    allApart = apart(srcs[r], dst);
  if (allApart) {
    for (int r = 0; r < nsrc; r += 4) {
      const T *const *s = srcs + r;
      switch (nsrc - r) {
      case 1: reduceApart<1>(dst, s[0], s[0], s[0], s[0], n, op); break;
      case 2: reduceApart<2>(dst, s[0], s[1], s[1], s[1], n, op); break;
      case 3: reduceApart<3>(dst, s[0], s[1], s[2], s[2], n, op); break;
      default: reduceApart<4>(dst, s[0], s[1], s[2], s[3], n, op); break;
      }
    }
    return;
  }
  constexpr uint64_t Block = 512;
  alignas(64) T acc[Block];
  for (uint64_t base = 0; base < n; base += Block) {
    const uint64_t len = std::min(Block, n - base);
    std::memcpy(acc, dst + base, len * sizeof(T));
    for (int r = 0; r < nsrc; ++r) {
      const T *s = srcs[r] + base;
      for (uint64_t i = 0; i < len; ++i)
        acc[i] = op(s[i], acc[i]);
    }
    std::memcpy(dst + base, acc, len * sizeof(T));
  }
}

//===----------------------------------------------------------------------===//
// LL and LL128 framing of one slot (Protocol.h)
//===----------------------------------------------------------------------===//

/// Writes `bytes` bytes of `from` (whole lines of it: the staging buffer
/// holds whole lines, and padding is ignored by the receiver) as LL lines
/// with `flag`.
inline void llStore(std::atomic<uint64_t> *line, const void *from, uint64_t bytes,
                    uint32_t flag) {
  const auto *data = static_cast<const unsigned char *>(from);
  for (uint64_t l = 0, lines = llLines(bytes); l < lines; ++l, line += 2) {
    uint32_t half[2];
    std::memcpy(half, data + l * LLDataBytesPerLine, sizeof half);
    line[0].store(llWord(half[0], flag), std::memory_order_relaxed);
    line[1].store(llWord(half[1], flag), std::memory_order_relaxed);
  }
}

/// Copies the data of lines [l, lines) of a slot into `to` for as long as
/// both words of a line carry `flag`; returns the first line that does not.
inline uint64_t llLoadReady(std::atomic<uint64_t> *slot, unsigned char *to, uint64_t l,
                            uint64_t lines, uint32_t flag) {
  for (; l < lines; ++l) {
    uint64_t w0 = slot[2 * l].load(std::memory_order_relaxed);
    uint64_t w1 = slot[2 * l + 1].load(std::memory_order_relaxed);
    if (!llWordReady(w0, flag) || !llWordReady(w1, flag))
      break;
    uint32_t half[2] = {llWordData(w0), llWordData(w1)};
    std::memcpy(to + l * LLDataBytesPerLine, half, sizeof half);
  }
  return l;
}

/// Writes `bytes` bytes of `from` (whole lines) as LL128 lines: 15 data
/// words, then the flag word with release.
inline void ll128Store(std::atomic<uint64_t> *line, const void *from, uint64_t bytes,
                       uint64_t flag) {
  const auto *data = static_cast<const unsigned char *>(from);
  for (uint64_t l = 0, lines = ll128Lines(bytes); l < lines; ++l, line += LL128LineWords) {
    const unsigned char *src = data + l * LL128DataBytesPerLine;
    for (uint64_t w = 0; w < LL128DataWords; ++w) {
      uint64_t word;
      std::memcpy(&word, src + w * 8, 8);
      line[w].store(word, std::memory_order_relaxed);
    }
    line[LL128FlagWord].store(flag, std::memory_order_release);
  }
}

/// Copies lines [l, lines) of an LL128 slot into `to` for as long as their
/// flag word (acquired), masked by `mask`, is `flag`; returns the first line
/// that is not ready.
inline uint64_t ll128LoadReady(std::atomic<uint64_t> *slot, unsigned char *to, uint64_t l,
                               uint64_t lines, uint64_t flag, uint64_t mask = ~uint64_t(0)) {
  for (; l < lines; ++l) {
    std::atomic<uint64_t> *line = slot + l * LL128LineWords;
    if ((line[LL128FlagWord].load(std::memory_order_acquire) & mask) != flag)
      break;
    unsigned char *dst = to + l * LL128DataBytesPerLine;
    for (uint64_t w = 0; w < LL128DataWords; ++w) {
      uint64_t word = line[w].load(std::memory_order_relaxed);
      std::memcpy(dst + w * 8, &word, 8);
    }
  }
  return l;
}

} // namespace coll::interp::host::data

#endif // COLL_INTERPRETER_HOST_DATA_H
