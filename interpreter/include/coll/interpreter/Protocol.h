//===- Protocol.h - Connection FIFOs and protocol framing -------*- C++ -*-===//
//
// A connection (sender, receiver, channel) is a FIFO of FifoDepth slots in
// receiver-visible memory (docs/ARCHITECTURE.md §4). The sender counts slots it has
// filled, the receiver slots it has freed (`head`); a sender may fill slot
// number n only once n - head < FifoDepth. How the receiver learns that a
// slot holds data depends on the protocol:
//
//  Simple  the slot holds raw data; the sender publishes the number of filled
//          slots (`tail`) with release semantics after writing the data.
//  LL      the slot is a sequence of 16-byte lines, each carrying 8 bytes of
//          data as two 8-byte words {4 data bytes, 4-byte flag}. The flag is
//          the slot's sequence number + 1, so a word whose flag matches holds
//          fresh data: no fence, no tail.
//  LL128   the slot is a sequence of 128-byte lines of 16 words: 15 data
//          words and a flag word (the last) written after them with release
//          semantics (on the GPU: by the same warp, in one 128-byte store).
//
// Slots are re-used every FifoDepth sends and never cleared: flags of older
// uses are always smaller than the current one.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_PROTOCOL_H
#define COLL_INTERPRETER_PROTOCOL_H

#include "coll/interpreter/Config.h"

#include <cstdint>

namespace coll::interp {

inline constexpr uint64_t FifoDepth = 8;

// LL: 16-byte lines, 8 data bytes each.
inline constexpr uint64_t LLLineBytes = 16;
inline constexpr uint64_t LLDataBytesPerLine = 8;

/// The flag of the n-th slot a connection carries (n from 0).
COLL_HOST_DEVICE COLL_INLINE uint32_t llFlag(uint64_t slotSeq) {
  return static_cast<uint32_t>(slotSeq + 1);
}
/// One 8-byte LL word: 4 data bytes in the low half, the flag in the high.
COLL_HOST_DEVICE COLL_INLINE uint64_t llWord(uint32_t data, uint32_t flag) {
  return (static_cast<uint64_t>(flag) << 32) | data;
}
COLL_HOST_DEVICE COLL_INLINE bool llWordReady(uint64_t word, uint32_t flag) {
  return static_cast<uint32_t>(word >> 32) == flag;
}
COLL_HOST_DEVICE COLL_INLINE uint32_t llWordData(uint64_t word) {
  return static_cast<uint32_t>(word);
}
/// Lines needed for `bytes` bytes of data.
COLL_HOST_DEVICE COLL_INLINE uint64_t llLines(uint64_t bytes) {
  return (bytes + LLDataBytesPerLine - 1) / LLDataBytesPerLine;
}

// LL128: 128-byte lines, 120 data bytes each, flag in the last word.
inline constexpr uint64_t LL128LineWords = 16;
inline constexpr uint64_t LL128DataWords = 15;
inline constexpr uint64_t LL128FlagWord = 15;
inline constexpr uint64_t LL128DataBytesPerLine = LL128DataWords * 8;

COLL_HOST_DEVICE COLL_INLINE uint64_t ll128Flag(uint64_t slotSeq) { return slotSeq + 1; }
COLL_HOST_DEVICE COLL_INLINE uint64_t ll128Lines(uint64_t bytes) {
  return (bytes + LL128DataBytesPerLine - 1) / LL128DataBytesPerLine;
}

} // namespace coll::interp

#endif // COLL_INTERPRETER_PROTOCOL_H
