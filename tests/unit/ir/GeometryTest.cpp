//===- GeometryTest.cpp - Chunk offsets and sizes -------------------------===//

#include "coll/ir/Geometry.h"

#include <gtest/gtest.h>

namespace coll::ir {
namespace {

Algorithm algorithm(Collective coll, int32_t ngpus, int32_t nchunksPerLoop) {
  Algorithm alg;
  alg.collective = coll;
  alg.nchunksPerLoop = nchunksPerLoop;
  alg.gpus.resize(static_cast<size_t>(ngpus));
  return alg;
}

TEST(GeometryTest, BlockShapeOfWholeBufferCollective) {
  BlockShape shape = blockShape(algorithm(Collective::AllReduce, 8, 16));
  EXPECT_EQ(shape.nranks, 8);
  EXPECT_EQ(shape.chunksPerBlock, 16);
  EXPECT_EQ(shape.chunks(BufferKind::Input), 16);
  EXPECT_EQ(shape.chunks(BufferKind::Output), 16);
}

TEST(GeometryTest, BlockShapeOfPerRankBuffers) {
  BlockShape allgather = blockShape(algorithm(Collective::AllGather, 4, 8));
  EXPECT_EQ(allgather.chunksPerBlock, 2);
  EXPECT_EQ(allgather.chunks(BufferKind::Input), 2);
  EXPECT_EQ(allgather.chunks(BufferKind::Output), 8);
  EXPECT_EQ(allgather.chunkClass(5), 1);

  BlockShape reducescatter =
      blockShape(algorithm(Collective::ReduceScatter, 4, 4));
  EXPECT_EQ(reducescatter.chunks(BufferKind::Input), 4);
  EXPECT_EQ(reducescatter.chunks(BufferKind::Output), 1);

  BlockShape alltoall = blockShape(algorithm(Collective::AllToAll, 2, 6));
  EXPECT_EQ(alltoall.blocks(BufferKind::Input), 2);
  EXPECT_EQ(alltoall.blocks(BufferKind::Output), 2);
  EXPECT_EQ(alltoall.blocks(BufferKind::Scratch), 1);
  EXPECT_EQ(alltoall.chunksPerBlock, 3);
}

TEST(GeometryTest, UnevenChunksDifferByAtMostOne) {
  // 10 elements in 4 chunks: 3 3 2 2, larger ones first.
  ChunkLayout layout(blockShape(algorithm(Collective::AllReduce, 2, 4)), 10);
  uint64_t sizes[] = {3, 3, 2, 2}, offsets[] = {0, 3, 6, 8};
  for (int32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(layout.chunkSize(BufferKind::Input, i), sizes[i]) << i;
    EXPECT_EQ(layout.chunkOffset(BufferKind::Output, i), offsets[i]) << i;
  }
  EXPECT_EQ(layout.bufferElems(BufferKind::Input), 10u);
}

TEST(GeometryTest, FewerElementsThanChunks) {
  ChunkLayout layout(blockShape(algorithm(Collective::AllReduce, 2, 8)), 3);
  EXPECT_EQ(layout.chunkSize(BufferKind::Input, 2), 1u);
  EXPECT_EQ(layout.chunkSize(BufferKind::Input, 3), 0u);
  EXPECT_EQ(layout.chunkOffset(BufferKind::Input, 7), 3u);
  EXPECT_EQ(layout.scratchSlotSize(), 1u);
}

TEST(GeometryTest, PerRankBlocksAreSplitAlike) {
  // Allgather, 3 ranks, 2 chunks per block, 5 elements per block: each
  // block is 3 + 2, so output chunk r*2+j is exactly input chunk j of rank r.
  ChunkLayout layout(blockShape(algorithm(Collective::AllGather, 3, 6)), 5);
  for (int32_t r = 0; r < 3; ++r) {
    for (int32_t j = 0; j < 2; ++j) {
      int32_t out = r * 2 + j;
      EXPECT_EQ(layout.chunkSize(BufferKind::Output, out),
                layout.chunkSize(BufferKind::Input, j));
      EXPECT_EQ(layout.chunkOffset(BufferKind::Output, out),
                uint64_t(r) * 5 + layout.chunkOffset(BufferKind::Input, j));
    }
  }
  EXPECT_EQ(layout.chunkOffset(BufferKind::Output, 3), 8u);
  EXPECT_EQ(layout.bufferElems(BufferKind::Output), 15u);
  EXPECT_EQ(layout.bufferElems(BufferKind::Input), 5u);
}

TEST(GeometryTest, ScratchSlotsHoldTheLargestChunk) {
  ChunkLayout layout(blockShape(algorithm(Collective::AllReduce, 2, 4)), 9);
  EXPECT_EQ(layout.scratchSlotSize(), 3u);
  EXPECT_EQ(layout.chunkOffset(BufferKind::Scratch, 2), 6u);
  EXPECT_EQ(layout.bufferElems(BufferKind::Scratch, 5), 15u);

  ChunkLayout even(blockShape(algorithm(Collective::AllReduce, 2, 4)), 8);
  EXPECT_EQ(even.scratchSlotSize(), 2u);
}

TEST(GeometryTest, CountForBytes) {
  BlockShape allreduce = blockShape(algorithm(Collective::AllReduce, 4, 4));
  EXPECT_EQ(countForBytes(allreduce, 1000, 4), 250u);
  EXPECT_EQ(countForBytes(allreduce, 1001, 4), 250u);
  EXPECT_EQ(bytesForCount(allreduce, 250, 4), 1000u);

  // The larger side holds all ranks' blocks.
  BlockShape allgather = blockShape(algorithm(Collective::AllGather, 4, 4));
  EXPECT_EQ(countForBytes(allgather, 1000, 4), 62u);
  EXPECT_EQ(bytesForCount(allgather, 62, 4), 992u);
}

TEST(GeometryTest, InPlaceOffsets) {
  BlockShape allgather = blockShape(algorithm(Collective::AllGather, 4, 4));
  InPlaceOffsets ag = inPlaceOffsets(allgather, 2, 10);
  EXPECT_EQ(ag.inputInOutput, 20u);
  EXPECT_EQ(ag.outputInInput, 0u);

  BlockShape reducescatter =
      blockShape(algorithm(Collective::ReduceScatter, 4, 4));
  InPlaceOffsets rs = inPlaceOffsets(reducescatter, 3, 10);
  EXPECT_EQ(rs.inputInOutput, 0u);
  EXPECT_EQ(rs.outputInInput, 30u);

  for (Collective coll : {Collective::AllReduce, Collective::AllToAll}) {
    InPlaceOffsets same =
        inPlaceOffsets(blockShape(algorithm(coll, 4, 4)), 1, 10);
    EXPECT_EQ(same.inputInOutput, 0u);
    EXPECT_EQ(same.outputInInput, 0u);
  }
}

} // namespace
} // namespace coll::ir
