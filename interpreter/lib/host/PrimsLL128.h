//===- PrimsLL128.h - The LL128 protocol on the host ---------------*- C++ -*-===//
//
// LL128: data words are stored relaxed, then each line's flag word with
// release; the receiver acquires a line's flag word before its data. The
// flag also carries the sender's call (hostLl128Flag).
//
//===----------------------------------------------------------------------===//
#ifndef COLL_INTERPRETER_LIB_HOST_PRIMSLL128_H
#define COLL_INTERPRETER_LIB_HOST_PRIMSLL128_H

#include "host/Prims.h"

namespace coll::interp::host {
namespace {

/// The host's LL128 flag word: the slot's sequence number (+1, so that
/// never-written memory is not ready) in the low half, and the low half of
/// the sender's call tag (a hash of the call, RankRunner::tagSends) in the
/// high half, so that a receiver learns which call the data belong to
/// without reading the connection's control line (Simple's `call`). Slots
/// are reused every FifoDepth sequence numbers, so 32 bits tell a line of
/// this use of the slot from one of its last. Forwarded verbatim by the
/// network proxy; the CUDA kernel's lines (ll128Flag) never meet these.
inline constexpr uint64_t LL128SeqHalf = 0xffffffffu; ///< hostLl128Flag's sequence half
inline uint64_t hostLl128Flag(uint64_t seq, uint64_t tag) {
  return ((seq + 1) & LL128SeqHalf) | (tag << 32);
}

template <class T, Protocol Proto>
inline void Prims<T, Proto>::storeLL128(ConnectionEnd &c, uint64_t seq, uint64_t bytes) {
  data::ll128Store(words(c, seq), stageOut, bytes, hostLl128Flag(seq, s.sendTag));
}

template <class T, Protocol Proto>
template <class NoData>
inline bool Prims<T, Proto>::recvLL128(ConnectionEnd &c, uint64_t seq, uint64_t bytes,
                                    NoData &&noData, const T *&in) {
    std::atomic<uint64_t> *line = words(c, seq);
    auto *to = reinterpret_cast<unsigned char *>(stageIn);
    const uint64_t flag = hostLl128Flag(seq, 0), mask = LL128SeqHalf;
    for (uint64_t l = 0, lines = ll128Lines(bytes); l < lines;) {
      l = data::ll128LoadReady(line, to, l, lines, flag, mask);
      if (l == lines)
        break;
      std::atomic<uint64_t> *f = line + l * LL128LineWords + LL128FlagWord;
      if (!await([&] { return (f->load(std::memory_order_acquire) & mask) == flag; },
                 [&] {
                   return noData(llvm::formatv("LL128 line {0} of slot {1}: flag {2}, "
                                               "expected {3}",
                                               l, seq, f->load(std::memory_order_relaxed),
                                               flag)
                                     .str());
                 },
                 1))
        return false;
    }
    // The sender's call, as Simple's `call` tells it, from the flag's
    // other half (the line is still in this core's cache).
    s.seenTag =
        (s.sendTag & ~LL128SeqHalf) | (line[LL128FlagWord].load(std::memory_order_relaxed) >> 32);
    in = stageIn;
  return true;
}

} // namespace
} // namespace coll::interp::host

#endif // COLL_INTERPRETER_LIB_HOST_PRIMSLL128_H
