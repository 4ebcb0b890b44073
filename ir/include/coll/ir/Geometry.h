//===- Geometry.h - How a call's buffers are cut into chunks ----*- C++ -*-===//
//
// docs/ARCHITECTURE.md §3, "Chunks": a collective's buffer is viewed as nchunksperloop
// chunks; the element count need not divide evenly. Each `count`-element
// *block* (the whole buffer of allreduce/broadcast/reduce, one rank's part of
// an allgather output, of a reducescatter input, of an alltoall buffer, ...)
// is cut into `chunksPerBlock` chunks whose sizes differ by at most one
// element, the larger ones first, the same way in every block and on every
// rank. So output chunk r*k+j of an allgather is exactly input chunk j of rank
// r, and a chunk's size depends only on its *class* (its index in its block).
//
// Scratch chunks have no class of their own: every scratch slot is as large as
// the largest chunk, and holds whichever chunk was last written into it.
//
// `count` is the number of elements per block, derived from a message size as
// nccl-tests does: size is the byte size of the larger (all-ranks) side.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_IR_GEOMETRY_H
#define COLL_IR_GEOMETRY_H

#include "coll/ir/Algorithm.h"

#include <cassert>
#include <cstdint>

namespace coll::ir {

/// The count-independent shape of an algorithm's buffers.
struct BlockShape {
  int32_t nranks = 1;
  int32_t chunksPerBlock = 1; ///< k: chunks per `count`-element block
  bool inputPerRank = false;  ///< input holds nranks blocks
  bool outputPerRank = false; ///< output holds nranks blocks

  int32_t blocks(BufferKind buffer) const {
    bool perRank = buffer == BufferKind::Input    ? inputPerRank
                   : buffer == BufferKind::Output ? outputPerRank
                                                  : false;
    return perRank ? nranks : 1;
  }
  /// Chunks the collective defines for an input or output buffer.
  int32_t chunks(BufferKind buffer) const {
    return blocks(buffer) * chunksPerBlock;
  }
  /// The class (index within its block) of chunk `index` of an input or
  /// output buffer. Two chunks of the same class always have the same size.
  int32_t chunkClass(int32_t index) const { return index % chunksPerBlock; }
};

/// The shape of `alg`'s buffers. Requires nchunksPerLoop to be a multiple of
/// ngpus when a buffer is per-rank (the verifier checks this).
inline BlockShape blockShape(const Algorithm &alg) {
  CollectiveInfo info = collectiveInfo(alg.collective);
  BlockShape shape;
  shape.nranks = alg.ngpus() > 0 ? alg.ngpus() : 1;
  shape.inputPerRank = info.inputPerRank;
  shape.outputPerRank = info.outputPerRank;
  int32_t divisor = (info.inputPerRank || info.outputPerRank) ? shape.nranks : 1;
  shape.chunksPerBlock = alg.nchunksPerLoop / divisor;
  if (shape.chunksPerBlock < 1)
    shape.chunksPerBlock = 1;
  return shape;
}

/// Element offsets and sizes of chunks for one call with `count` elements
/// per block.
struct ChunkLayout {
  BlockShape shape;
  uint64_t count = 0; ///< elements per block
  uint64_t base = 0;  ///< count / k
  uint64_t extra = 0; ///< count % k: classes [0, extra) have base+1 elements

  ChunkLayout() = default;
  ChunkLayout(const BlockShape &shape, uint64_t count)
      : shape(shape), count(count),
        base(count / static_cast<uint64_t>(shape.chunksPerBlock)),
        extra(count % static_cast<uint64_t>(shape.chunksPerBlock)) {}

  /// Elements in a chunk of class `cls`.
  uint64_t classSize(int32_t cls) const {
    return base + (static_cast<uint64_t>(cls) < extra ? 1 : 0);
  }
  /// Offset of a chunk of class `cls` within its block.
  uint64_t classOffset(int32_t cls) const {
    uint64_t c = static_cast<uint64_t>(cls);
    return c * base + (c < extra ? c : extra);
  }
  /// Elements in one scratch slot: the largest chunk.
  uint64_t scratchSlotSize() const { return base + (extra ? 1 : 0); }

  /// Element offset of chunk `index` of `buffer` from the buffer's start.
  uint64_t chunkOffset(BufferKind buffer, int32_t index) const {
    if (buffer == BufferKind::Scratch)
      return static_cast<uint64_t>(index) * scratchSlotSize();
    int32_t block = index / shape.chunksPerBlock;
    return static_cast<uint64_t>(block) * count +
           classOffset(shape.chunkClass(index));
  }
  /// Elements in chunk `index` of an input or output buffer.
  uint64_t chunkSize(BufferKind buffer, int32_t index) const {
    assert(buffer != BufferKind::Scratch && "scratch slots have no class");
    return classSize(shape.chunkClass(index));
  }

  /// Elements of the whole input, output or scratch buffer of one rank.
  uint64_t bufferElems(BufferKind buffer, int32_t scratchChunks = 0) const {
    if (buffer == BufferKind::Scratch)
      return static_cast<uint64_t>(scratchChunks) * scratchSlotSize();
    return static_cast<uint64_t>(shape.blocks(buffer)) * count;
  }
};

/// Elements per block for a message of `bytes` bytes of `elemSize`-byte
/// elements, as nccl-tests sizes it: `bytes` is the size of the larger side,
/// rounded down to whole elements and, for per-rank buffers, to a multiple of
/// nranks blocks.
inline uint64_t countForBytes(const BlockShape &shape, uint64_t bytes,
                              uint64_t elemSize) {
  uint64_t elems = bytes / elemSize;
  bool perRank = shape.inputPerRank || shape.outputPerRank;
  return perRank ? elems / static_cast<uint64_t>(shape.nranks) : elems;
}

/// The byte size nccl-tests reports for a call: the larger side.
inline uint64_t bytesForCount(const BlockShape &shape, uint64_t count,
                              uint64_t elemSize) {
  bool perRank = shape.inputPerRank || shape.outputPerRank;
  return count * elemSize * (perRank ? static_cast<uint64_t>(shape.nranks) : 1);
}

/// In-place aliasing, as NCCL defines it: where rank `rank`'s input starts,
/// in elements from the start of its output buffer, and vice versa. Exactly
/// one of the two is non-zero for allgather/gather (input inside output) and
/// reducescatter/scatter (output inside input); for the other collectives
/// input and output are the same memory.
struct InPlaceOffsets {
  uint64_t inputInOutput = 0;
  uint64_t outputInInput = 0;
};
inline InPlaceOffsets inPlaceOffsets(const BlockShape &shape, int32_t rank,
                                     uint64_t count) {
  InPlaceOffsets off;
  if (shape.outputPerRank && !shape.inputPerRank)
    off.inputInOutput = static_cast<uint64_t>(rank) * count;
  else if (shape.inputPerRank && !shape.outputPerRank)
    off.outputInInput = static_cast<uint64_t>(rank) * count;
  return off;
}

} // namespace coll::ir

#endif // COLL_IR_GEOMETRY_H
