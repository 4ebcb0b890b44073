//===- Memory.h - Chunk slots and in-place aliasing -------------*- C++ -*-===//
//
// The chunk-granular view of a rank's memory that the static checks share
// (races, symbolic execution): a slot is a buffer and a chunk offset, and in
// place two slots of different buffers may be the same memory, as NCCL
// aliases input and output (Geometry.h, inPlaceOffsets).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_IR_MEMORY_H
#define COLL_IR_MEMORY_H

#include "coll/ir/Algorithm.h"

#include <cstdint>

namespace coll::ir {

/// A chunk of a buffer as the IR names it: `i`, `o` or `s`, and an offset in
/// chunks.
struct Slot {
  BufferKind buf = BufferKind::Input;
  int32_t off = 0;
  friend bool operator==(const Slot &, const Slot &) = default;
};

/// In place, the buffer that owns the memory of `slot` and the slot there:
/// allgather and gather keep the input as block `rank` of the output,
/// reducescatter and scatter the output as block `rank` of the input, the
/// other collectives share one buffer (owned by the input). The identity for
/// scratch. `chunksPerBlock` is BlockShape::chunksPerBlock.
inline Slot inPlaceOwner(Collective kind, int32_t rank, int32_t chunksPerBlock,
                         Slot slot) {
  switch (kind) {
  case Collective::AllGather:
  case Collective::Gather:
    if (slot.buf == BufferKind::Input)
      return {BufferKind::Output, rank * chunksPerBlock + slot.off};
    break;
  case Collective::ReduceScatter:
  case Collective::Scatter:
    if (slot.buf == BufferKind::Output)
      return {BufferKind::Input, rank * chunksPerBlock + slot.off};
    break;
  default:
    if (slot.buf == BufferKind::Output)
      return {BufferKind::Input, slot.off};
    break;
  }
  return slot;
}

} // namespace coll::ir

#endif // COLL_IR_MEMORY_H
