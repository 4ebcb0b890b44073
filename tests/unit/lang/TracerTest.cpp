//===- TracerTest.cpp - Tracing chunk operations into the ChunkDag --------===//

#include "LangTest.h"
#include "TestPrograms.h"

using namespace coll;
using namespace coll::lang;
using namespace coll::lang::test;
using coll::test::ringAllReduceProgram;

namespace {

constexpr BufferId Input{ir::BufferKind::Input, 0};
constexpr BufferId Output{ir::BufferKind::Output, 0};
constexpr BufferId Scratch{ir::BufferKind::Scratch, 0};

llvm::SmallVector<uint32_t, 2> deps(std::initializer_list<uint32_t> ids) {
  return llvm::SmallVector<uint32_t, 2>(ids);
}

const std::string RingAllReduce = ringAllReduceProgram();

TEST(TracerTest, RingAllReduce) {
  ChunkDag dag = traceOk(RingAllReduce);
  const CollectiveSpec &spec = dag.collective;
  EXPECT_EQ(spec.kind, ir::Collective::AllReduce);
  EXPECT_EQ(spec.nranks, 4);
  EXPECT_EQ(spec.chunksPerBlock, 4);
  EXPECT_EQ(spec.inputChunks, 4);
  EXPECT_EQ(spec.outputChunks, 4);
  EXPECT_TRUE(spec.inplace);
  EXPECT_EQ(spec.wantIds(2, 1), (std::vector<ContribId>{1, 5, 9, 13}));
  ASSERT_EQ(dag.ops.size(), 24u);
  // Chunk 0 is reduced along 0 -> 1 -> 2 -> 3, then sent from 3 to 0, 1, 2.
  const ChunkOp &first = dag.ops[0];
  EXPECT_EQ(first.kind, OpKind::Reduce);
  EXPECT_EQ(first.src, (SlotRange{0, Input, 0, 1}));
  EXPECT_EQ(first.dst, (SlotRange{1, Input, 0, 1}));
  EXPECT_EQ(first.deps, deps({}));
  EXPECT_EQ(dag.ops[2].deps, deps({1}));
  // Reads 3:input[0] (written by %2) and overwrites 0:input[0], which %0 read.
  EXPECT_EQ(dag.ops[3].kind, OpKind::Copy);
  EXPECT_EQ(dag.ops[3].deps, deps({0, 2}));
  EXPECT_EQ(dag.ops[4].deps, deps({0, 1, 3}));
  EXPECT_EQ(dag.scratchNames, std::vector<std::string>{"scratch"});
  EXPECT_EQ(dag.scratchChunks, std::vector<std::vector<int32_t>>(4, {0}));
}

TEST(TracerTest, CopyOntoItselfRecordsNothing) {
  // "Copy the input to the output, then work in the output": in place the
  // copies are chunks onto themselves and vanish; out of place they stay.
  const char *program = R"(
collective allreduce(ranks = 2, chunks = 2, inplace = true)
for r in 0..2 { chunk(r, input, 0, size = 2).copy(r, output, 0) }
chunk(1, output, 0).reduce(chunk(0, output, 0))
chunk(1, output, 0).copy(0, output, 0)
chunk(0, output, 1).reduce(chunk(1, output, 1))
chunk(0, output, 1).copy(1, output, 1)
)";
  ChunkDag inplace = traceOk(program);
  EXPECT_EQ(inplace.ops.size(), 4u);
  Overrides outofplace;
  outofplace.inplace = false;
  ChunkDag copied = traceOk(program, outofplace);
  ASSERT_EQ(copied.ops.size(), 6u);
  EXPECT_EQ(copied.ops[0].kind, OpKind::Copy);
  EXPECT_EQ(copied.ops[0].dst, (SlotRange{0, Output, 0, 2}));
}

TEST(TracerTest, OperationsAndDependencies) {
  ChunkDag dag = traceOk(R"(collective allreduce(ranks = 2)
chunk(1, input, 0).copy(0, scratch, 0, ch = 1, sendtb = 2, recvtb = 3)
chunk(0, input, 0).copy(0, output, 0)
chunk(0, output, 0).reduce(chunk(0, scratch, 0))
chunk(0, output, 0).copy(1, output, 0)
chunk(0, input, 0).copy(0, scratch, 0)
)");
  ASSERT_EQ(dag.ops.size(), 5u);
  const ChunkOp &send = dag.ops[0];
  EXPECT_EQ(send.kind, OpKind::Copy);
  EXPECT_EQ(send.src, (SlotRange{1, Input, 0, 1}));
  EXPECT_EQ(send.dst, (SlotRange{0, Scratch, 0, 1}));
  EXPECT_EQ(send.channel, 1);
  EXPECT_EQ(send.sendTb, 2);
  EXPECT_EQ(send.recvTb, 3);
  EXPECT_EQ(send.parallel, 1);
  EXPECT_EQ(dag.ops[1].channel, -1);
  // The reduction reads scratch (RAW on %0) and its destination (RAW on %1).
  EXPECT_EQ(dag.ops[2].kind, OpKind::Reduce);
  EXPECT_EQ(dag.ops[2].src, (SlotRange{0, Scratch, 0, 1}));
  EXPECT_EQ(dag.ops[2].dst, (SlotRange{0, Output, 0, 1}));
  EXPECT_EQ(dag.ops[2].deps, deps({0, 1}));
  EXPECT_EQ(dag.ops[3].deps, deps({2}));
  // Overwriting scratch waits for its last writer (WAW) and reader (WAR).
  EXPECT_EQ(dag.ops[4].deps, deps({0, 2}));
  EXPECT_EQ(dag.scratchChunks, (std::vector<std::vector<int32_t>>{{1}, {0}}));
}

TEST(TracerTest, Locations) {
  Session s("collective allreduce(ranks = 1)\n  chunk(0, input, 0).copy(0, "
            "output, 0)\n");
  std::optional<ChunkDag> dag = compileToDag(s.bufferId, {}, s.diags);
  ASSERT_TRUE(dag) << s.text();
  EXPECT_EQ(s.diags.lineAndColumn(dag->ops[0].loc), std::make_pair(2u, 22u));
  EXPECT_EQ(s.diags.lineAndColumn(dag->collective.loc), std::make_pair(1u, 1u));
}

TEST(TracerTest, NamedScratchBuffers) {
  ChunkDag dag = traceOk(R"(collective allreduce(ranks = 2, inplace = true)
let tmp = scratch("tmp")
chunk(0, input, 0).copy(1, tmp, 3)
chunk(1, input, 0).reduce(chunk(1, scratch("tmp"), 3))
chunk(1, input, 0).copy(0, input, 0)
)");
  EXPECT_EQ(dag.scratchNames, (std::vector<std::string>{"scratch", "tmp"}));
  EXPECT_EQ(dag.scratchChunks,
            (std::vector<std::vector<int32_t>>{{0, 0}, {0, 4}}));
  EXPECT_EQ(dag.ops[0].dst,
            (SlotRange{1, (BufferId{ir::BufferKind::Scratch, 1}), 3, 1}));
}

TEST(TracerTest, InPlaceSlotsAreCanonical) {
  // allreduce: output(r, i) is input(r, i).
  ChunkDag ar = traceOk(R"(collective allreduce(ranks = 2, inplace = true)
chunk(1, output, 0).reduce(chunk(0, output, 0))
chunk(1, output, 0).copy(0, output, 0)
)");
  EXPECT_EQ(ar.ops[0].src, (SlotRange{0, Input, 0, 1}));
  EXPECT_EQ(ar.ops[0].dst, (SlotRange{1, Input, 0, 1}));
  EXPECT_EQ(ar.ops[1].deps, deps({0}));

  // allgather: input(r, j) is output(r, r*K + j).
  ChunkDag ag =
      traceOk(R"(collective allgather(ranks = 3, chunks = 2, inplace = true)
for r in 0..3 {
    for a in 0..3 {
        if a != r { chunk(a, input, 0, size = 2).copy(r, output, 2 * a) }
    }
}
)");
  EXPECT_EQ(ag.ops[0].src, (SlotRange{1, Output, 2, 2}));
  EXPECT_EQ(ag.ops[0].dst, (SlotRange{0, Output, 2, 2}));

  // reducescatter: output(r, j) is input(r, r*K + j).
  ChunkDag rs = traceOk(R"(collective reducescatter(ranks = 2, inplace = true)
chunk(1, output, 0).reduce(chunk(0, input, 1))
chunk(0, output, 0).reduce(chunk(1, input, 0))
)");
  EXPECT_EQ(rs.ops[0].dst, (SlotRange{1, Input, 1, 1}));
  EXPECT_EQ(rs.ops[1].dst, (SlotRange{0, Input, 0, 1}));
}

/// Every built-in collective, each with a small correct program.
TEST(TracerTest, BuiltinPostconditions) {
  ChunkDag ag = traceOk(R"(collective allgather(ranks = 3, chunks = 2)
for r in 0..3 { for a in 0..3 { chunk(a, input, 0, size = 2).copy(r, output, 2 * a) } }
)");
  EXPECT_EQ(ag.collective.inputChunks, 2);
  EXPECT_EQ(ag.collective.outputChunks, 6);
  EXPECT_EQ(ag.collective.wantIds(0, 3), std::vector<ContribId>{3}); // in(1,1)

  ChunkDag rs = traceOk(R"(collective reducescatter(ranks = 3, chunks = 2)
for r in 0..3 {
    chunk(r, input, 2 * r, size = 2).copy(r, output, 0)
    for a in 0..3 {
        if a != r { chunk(r, output, 0, size = 2).reduce(chunk(a, input, 2 * r, size = 2)) }
    }
}
)");
  EXPECT_EQ(rs.collective.inputChunks, 6);
  EXPECT_EQ(rs.collective.outputChunks, 2);
  EXPECT_EQ(rs.collective.wantIds(1, 1), (std::vector<ContribId>{3, 9, 15}));

  ChunkDag a2a = traceOk(R"(collective alltoall(ranks = 3, chunks = 2)
for s in 0..3 { for d in 0..3 { chunk(s, input, 2 * d, size = 2).copy(d, output, 2 * s) } }
)");
  EXPECT_EQ(a2a.collective.wantIds(2, 1),
            std::vector<ContribId>{5}); // in(0,5)

  ChunkDag bc = traceOk(R"(collective broadcast(ranks = 3, chunks = 2, root = 1)
let c = chunk(1, input, 0, size = 2).copy(1, output, 0)
for k in 1..3 { c = c.copy((1 + k) % 3, output, 0) }
)");
  EXPECT_EQ(bc.collective.root, 1);
  EXPECT_FALSE(bc.collective.inputDefined[0][0]);
  EXPECT_TRUE(bc.collective.inputDefined[1][1]);
  EXPECT_EQ(bc.collective.wantIds(2, 1), std::vector<ContribId>{3}); // in(1,1)

  ChunkDag red = traceOk(R"(collective reduce(ranks = 3, root = 2)
chunk(2, input, 0).copy(2, output, 0)
chunk(2, output, 0).reduce(chunk(0, input, 0))
chunk(2, output, 0).reduce(chunk(1, input, 0))
)");
  EXPECT_EQ(red.collective.wantIds(2, 0), (std::vector<ContribId>{0, 1, 2}));
  EXPECT_TRUE(red.collective.wantIds(0, 0).empty());

  ChunkDag ga = traceOk(R"(collective gather(ranks = 3)
for a in 0..3 { chunk(a, input, 0).copy(0, output, a) }
)");
  EXPECT_EQ(ga.collective.outputChunks, 3);
  EXPECT_TRUE(ga.collective.wantIds(1, 0).empty());

  ChunkDag sc = traceOk(R"(collective scatter(ranks = 3, root = 1)
for r in 0..3 { chunk(1, input, r).copy(r, output, 0) }
)");
  EXPECT_EQ(sc.collective.inputChunks, 3);
  EXPECT_EQ(sc.collective.wantIds(2, 0), std::vector<ContribId>{5}); // in(1,2)
  EXPECT_FALSE(sc.collective.inputDefined[0][0]);

  traceOk(RingAllReduce);
}

TEST(TracerTest, CustomCollective) {
  ChunkDag dag =
      traceOk(R"(collective custom(ranks = 2, input = 2, output = 4) {
    pre { for r in 0..2 { provide(r, 0) provide(r, 1) } }
    post { for r in 0..2 { for a in 0..2 { for j in 0..2 { expect(r, a*2 + j, contrib(a, j)) } } } }
}
for r in 0..2 { for a in 0..2 { chunk(a, input, 0, size = 2).copy(r, output, 2 * a) } }
)");
  EXPECT_EQ(dag.collective.kind, ir::Collective::Custom);
  EXPECT_EQ(dag.collective.inputChunks, 2);
  EXPECT_EQ(dag.collective.outputChunks, 4);
  EXPECT_EQ(dag.collective.wantIds(1, 3), std::vector<ContribId>{3});

  // Several expects on a slot mean a reduction; unmentioned slots are free.
  ChunkDag sum =
      traceOk(R"(collective custom(ranks = 2, input = 1, output = 2) {
    post { expect(0, 0, contrib(0, 0)) expect(0, 0, contrib(1, 0)) }
}
chunk(0, input, 0).copy(0, output, 0)
chunk(0, output, 0).reduce(chunk(1, input, 0))
)");
  EXPECT_EQ(sum.collective.wantIds(0, 0), (std::vector<ContribId>{0, 1}));
  EXPECT_TRUE(sum.collective.wantIds(0, 1).empty());
  EXPECT_TRUE(sum.collective.inputDefined[1][0]); // no pre block: all defined

  EXPECT_EQ(firstLine(traceError(
                R"(collective custom(ranks = 2, input = 1, output = 1) {
    pre { provide(0, 0) }
    post { expect(0, 0, contrib(1, 0)) }
})")),
            "test.coll:3:12: error: in(1,0) is expected in an output chunk but "
            "the pre "
            "block does not provide it");
  EXPECT_EQ(firstLine(traceError(
                R"(collective custom(ranks = 1, input = 1, output = 1) {
    post { expect(0, 0, contrib(0, 0)) expect(0, 0, contrib(0, 0)) }
})")),
            "test.coll:2:40: error: output chunk 0:output[0] is expected to "
            "hold in(0,0) twice");
  EXPECT_EQ(firstLine(traceError(
                R"(collective custom(ranks = 2, input = 1, output = 1) {
    pre { provide(0, 0) }
    post { expect(1, 0, contrib(0, 0)) }
}
chunk(1, input, 0).copy(1, output, 0)
)")),
            "test.coll:5:1: error: chunk 1:input[0] holds no data: the "
            "collective's pre block "
            "does not provide it");
  EXPECT_EQ(run("provide(0, 0)"), "test.coll:2:1: error: 'provide' may only be "
                                  "called in the pre block of a custom "
                                  "collective");
  EXPECT_EQ(
      firstLine(traceError("collective custom(ranks = 1, input = 1, output = "
                           "1) { post { chunk(0, input, 0) } }")),
      "test.coll:1:62: error: chunk operations are not allowed in pre and post "
      "blocks");
  EXPECT_EQ(firstLine(traceError("collective custom(ranks = 1, input = 1, "
                                 "output = 2, inplace = true) { post { } }")),
            "test.coll:1:12: error: an in-place custom collective needs input "
            "= output (output "
            "chunk i is input chunk i)");
  // In place, output chunk i is input chunk i.
  ChunkDag inplace = traceOk(
      R"(collective custom(ranks = 2, input = 1, output = 1, inplace = true) {
    post { expect(1, 0, contrib(0, 0)) }
}
chunk(0, input, 0).copy(1, output, 0)
)");
  EXPECT_EQ(inplace.ops[0].dst, (SlotRange{1, Input, 0, 1}));
}

TEST(TracerTest, Provenance) {
  // A two-hop alltoall that routes each chunk through the next rank's
  // scratch, asking the chunk where it must go.
  ChunkDag dag = traceOk(R"(collective alltoall(ranks = 4)
for src in 0..4 {
    for dst in 0..4 {
        let c = chunk(src, input, dst)
        assert(c.origin_rank == src && c.origin_index == dst)
        assert(c.dest_rank == dst && c.dest_index == src)
        let hop = c.copy((src + 1) % 4, scratch, 4 * src + dst)
        assert(hop.origin_rank == src && hop.dest_rank == dst && hop.dest_index == src)
        hop.copy(hop.dest_rank, output, hop.dest_index)
    }
}
)");
  EXPECT_EQ(dag.ops.size(), 32u);

  EXPECT_EQ(
      run("chunk(0, input, 0).reduce(chunk(0, input, 0).copy(0, scratch, 0))\n"
          "let o = chunk(0, input, 0).origin_rank"),
      "test.coll:2:20: error: duplicated contribution: the reduction adds "
      "in(0,0) to "
      "0:input[0], which already holds it");
  EXPECT_EQ(
      firstLine(traceError(R"(collective allreduce(ranks = 2, inplace = true)
let c = chunk(1, input, 0).reduce(chunk(0, input, 0))
let o = c.origin_rank
)")),
      "test.coll:3:11: error: 'origin_rank' needs a chunk holding one "
      "contribution, but "
      "1:input[0] holds a reduction of 2 contributions (in(0,0), in(1,0))");
  EXPECT_EQ(run("let o = chunk(0, scratch, 0).origin_index"),
            "test.coll:2:30: error: 'origin_index' needs a chunk holding one "
            "contribution, but "
            "0:scratch[0] holds nothing");
  EXPECT_EQ(firstLine(traceError("collective allgather(ranks = 2)\n"
                                 "let d = chunk(0, input, 0).dest_rank")),
            "test.coll:2:28: error: 'dest_rank' is undefined: in(0,0) is the "
            "sole content of "
            "several output chunks");
  EXPECT_EQ(
      firstLine(traceError("collective allreduce(ranks = 2, inplace = true)\n"
                           "let d = chunk(0, input, 0).dest_index")),
      "test.coll:2:28: error: 'dest_index' is undefined: in(0,0) is not the "
      "sole content "
      "of any output chunk");
}

TEST(TracerTest, SplitAndGroup) {
  ChunkDag dag =
      traceOk(R"(collective allgather(ranks = 2, chunks = 4, inplace = true)
let parts = chunk(0, input, 0, size = 4).split(2)
assert(len(parts) == 2 && parts[1].index == 2 && parts[1].size == 2 && parts[1].rank == 0)
let whole = parts[0].group(parts[1])
assert(whole.size == 4 && whole.index == 0)
parts[0].copy(1, output, 0)
parts[1].copy(1, output, 2)
chunk(1, input, 0, size = 4).copy(0, output, 4)
)");
  EXPECT_EQ(dag.ops[1].src, (SlotRange{0, Output, 2, 2}));
  EXPECT_EQ(run("let p = chunk(0, input, 0).split(2)"),
            "test.coll:2:34: error: cannot split 1 chunk into 2 equal parts");
  EXPECT_EQ(run("let p = chunk(0, input, 0).split(0)"),
            "test.coll:2:34: error: cannot split 1 chunk into 0 equal parts");
  EXPECT_EQ(run("let g = chunk(0, input, 0).group(chunk(0, output, 0))"),
            "test.coll:2:34: error: cannot group 0:input[0] with 0:output[0]: "
            "the second must "
            "start where the first ends, at 0:input[1]");
}

TEST(TracerTest, Parallelize) {
  ChunkDag dag = traceOk(R"(collective allreduce(ranks = 2, inplace = true)
parallelize(2) {
    chunk(1, input, 0).reduce(chunk(0, input, 0))
    parallelize(3) { chunk(1, input, 0).copy(0, input, 0) }
}
chunk(1, input, 0).copy(0, scratch, 0)
)");
  EXPECT_EQ(dag.ops[0].parallel, 2);
  EXPECT_EQ(dag.ops[1].parallel, 6);
  EXPECT_EQ(dag.ops[2].parallel, 1);
  EXPECT_EQ(
      run("parallelize(0) { }"),
      "test.coll:2:13: error: parallelize needs a factor of at least 1, got 0");
}

TEST(TracerTest, ReferenceErrors) {
  EXPECT_EQ(
      run("let c = chunk(1, input, 0)"),
      "test.coll:2:15: error: rank 1 is out of range (program has 1 ranks)");
  EXPECT_EQ(
      run("let c = chunk(0, input, 1)"),
      "test.coll:2:25: error: index 1 is out of range (input has 1 chunks)");
  EXPECT_EQ(run("let c = chunk(0, output, 0, size = 2)"),
            "test.coll:2:26: error: chunks 0..2 are out of range (output has 1 "
            "chunks)");
  EXPECT_EQ(run("let c = chunk(0, input, 0, size = 0)"),
            "test.coll:2:35: error: size must be at least 1, got 0");
  EXPECT_EQ(run("let c = chunk(0, input, 0, size = 9223372036854775807)"),
            "test.coll:2:25: error: chunks 0..9223372036854775807 are out of "
            "range (input has 1 "
            "chunks)");
  EXPECT_EQ(run("let c = chunk(0, scratch, 5, size = 9223372036854775807)"),
            "test.coll:2:27: error: size 9223372036854775807 is out of range "
            "(scratch has at most "
            "65536 chunks)");
  EXPECT_EQ(run("let c = chunk(0, scratch, -1)"),
            "test.coll:2:27: error: index -1 is out of range (scratch has at "
            "most 65536 chunks)");
  EXPECT_EQ(run("let c = chunk(0, scratch(\"t\"), 65535, size = 2)"),
            "test.coll:2:32: error: chunks 65535..65537 are out of range "
            "(scratch(\"t\") has at "
            "most 65536 chunks)");
  EXPECT_EQ(run("let c = chunk(0, scratch, 9223372036854775807)"),
            "test.coll:2:27: error: index 9223372036854775807 is out of range "
            "(scratch has at "
            "most 65536 chunks)");
  EXPECT_EQ(run("let c = chunk(0, 1, 0)"),
            "test.coll:2:18: error: expected a buffer, got an integer");
  EXPECT_EQ(
      run("chunk(0, input, 0).copy(0, input, 0, ch = -1)"),
      "test.coll:2:43: error: ch must be between 0 and 2147483647 (or auto), "
      "got -1");
  EXPECT_EQ(run("let s = scratch(\"\")"),
            "test.coll:2:17: error: a scratch buffer needs a non-empty name");
}

TEST(TracerTest, OperationErrors) {
  const char *header = "collective allreduce(ranks = 2, chunks = 2)\n";
  auto first = [&](llvm::StringRef body) {
    return firstLine(traceError(header + body.str()));
  };
  EXPECT_EQ(
      first("chunk(0, input, 0).copy(2, output, 0)"),
      "test.coll:2:25: error: rank 2 is out of range (program has 2 ranks)");
  EXPECT_EQ(first("chunk(0, input, 0, size = 2).copy(1, output, 1)"),
            "test.coll:2:46: error: destination chunks 1..3 are out of range "
            "(output has 2 chunks)");
  EXPECT_EQ(
      first("chunk(0, output, 0).reduce(chunk(0, input, 0, size = 2))"),
      "test.coll:2:21: error: size mismatch: cannot reduce 2 chunks into 1");
  EXPECT_EQ(first("chunk(1, scratch, 0).copy(0, output, 0)"),
            "test.coll:2:1: error: chunk 1:scratch[0] is read before anything "
            "is written to it");
  EXPECT_EQ(first("chunk(1, output, 0).reduce(chunk(0, input, 0))"),
            "test.coll:2:1: error: chunk 1:output[0] is read before anything "
            "is written to it");
  EXPECT_EQ(first("chunk(0, input, 0).copy(1, input, 0)"),
            "test.coll:2:20: error: cannot write to 1:input[0]: the input of "
            "an out-of-place "
            "collective is read-only");
  // A reduction is located at `.reduce`, not at the reference it writes.
  EXPECT_EQ(first("chunk(1, input, 0).reduce(chunk(0, input, 0))"),
            "test.coll:2:20: error: cannot write to 1:input[0]: the input of "
            "an out-of-place collective is read-only");
  EXPECT_EQ(first("chunk(0, input, 0).copy(0, scratch, 0)\n"
                  "chunk(0, scratch, 0).reduce(chunk(0, input, 0))"),
            "test.coll:3:22: error: duplicated contribution: the reduction "
            "adds in(0,0) to "
            "0:scratch[0], which already holds it");
  EXPECT_EQ(first("chunk(0, input, 0, size = 2).copy(0, scratch, 0)\n"
                  "chunk(0, scratch, 0, size = 2).copy(0, scratch, 1)"),
            "test.coll:3:32: error: source 0:scratch[0:2] and destination "
            "0:scratch[1:3] overlap");
  EXPECT_EQ(firstLine(traceError("collective broadcast(ranks = 2, root = 1)\n"
                                 "chunk(0, input, 0).copy(1, output, 0)")),
            "test.coll:2:1: error: chunk 0:input[0] holds no data: broadcast "
            "defines only the "
            "input of root 1");
  std::string before =
      traceError("let c = chunk(0, input, 0)\ncollective allreduce(ranks = 2)");
  EXPECT_EQ(firstLine(before), "test.coll:1:9: error: 'chunk' is used before "
                               "the collective is declared");
  EXPECT_NE(before.find("test.coll:2:1: note: the collective is declared here"),
            std::string::npos);
}

TEST(TracerTest, CollectiveErrors) {
  auto first = [](llvm::StringRef source) {
    return firstLine(traceError(source));
  };
  EXPECT_EQ(first("collective allreduce(ranks = 0)"),
            "test.coll:1:30: error: ranks must be between 1 and 4096, got 0");
  EXPECT_EQ(
      first("collective broadcast(ranks = 2, root = 2)"),
      "test.coll:1:40: error: root 2 is out of range (program has 2 ranks)");
  EXPECT_EQ(
      first("collective allreduce(ranks = 2, chunks = 0)"),
      "test.coll:1:42: error: chunks must be between 1 and 8388608, got 0");
  // 4096 ranks of 4096 chunks: a 4096-rank allreduce may have as many
  // chunks as ranks; an alltoall's buffers hold ranks x chunks.
  EXPECT_EQ(first("collective allreduce(ranks = 4096, chunks = 4097)"),
            "test.coll:1:45: error: chunks must be between 1 and 4096, got "
            "4097");
  EXPECT_EQ(first("collective alltoall(ranks = 4096, chunks = 2)"),
            "test.coll:1:44: error: chunks must be between 1 and 1, got 2");
  // A custom collective lists its postcondition: 2^20 chunks over all ranks.
  EXPECT_EQ(first("collective custom(ranks = 4096, input = 257, output = 1) "
                  "{ post { expect(0, 0, contrib(0, 0)) } }"),
            "test.coll:1:41: error: input must be between 1 and 256, got 257");
  EXPECT_EQ(first("collective allreduce(ranks = 2, inplace = 1)"),
            "test.coll:1:43: error: expected a boolean, got an integer");
}

TEST(TracerTest, PostconditionErrors) {
  // The reduction stops one rank short, so the chain misses a contribution.
  std::string missing =
      traceError(R"(collective allreduce(ranks = 3, inplace = true)
let c = chunk(0, input, 0)
for k in 1..2 { c = chunk(k, input, 0).reduce(c) }
for k in 0..2 { c = c.copy(k, input, 0) }
)");
  EXPECT_EQ(firstLine(missing),
            "test.coll:4:23: error: output chunk 0:output[0] is missing 1 of "
            "its 3 contributions: in(2,0)");
  // Nothing wrote rank 2's chunk: the error points at the declaration.
  EXPECT_NE(missing.find("test.coll:1:1: error: output chunk 2:output[0] is "
                         "missing 2 of its 3 "
                         "contributions: in(0,0), in(1,0)"),
            std::string::npos);

  EXPECT_EQ(firstLine(traceError(R"(collective allgather(ranks = 2)
for r in 0..2 { for a in 0..2 { chunk(a, input, 0).copy(r, output, a) } }
chunk(0, output, 1).reduce(chunk(0, input, 0))
)")),
            "test.coll:3:21: error: output chunk 0:output[1] holds 1 "
            "unexpected contribution: "
            "in(0,0)");
  EXPECT_EQ(firstLine(traceError(R"(collective allgather(ranks = 2)
chunk(0, input, 0).copy(0, output, 0)
chunk(1, input, 0).copy(1, output, 1)
chunk(0, input, 0).copy(1, output, 0)
chunk(0, output, 0).copy(0, output, 1)
)")),
            "test.coll:5:21: error: output chunk 0:output[1] is missing 1 of "
            "its 1 contribution "
            "(in(1,0)) and holds 1 unexpected contribution (in(0,0))");
  EXPECT_EQ(firstLine(traceError("collective broadcast(ranks = 2)")),
            "test.coll:1:1: error: output chunk 0:output[0] is never written "
            "(it must hold in(0,0))");

  // At most ten slots are reported, then a note counts the rest.
  std::string many = traceError("collective alltoall(ranks = 4)");
  EXPECT_NE(many.find("note: 6 more output chunks do not hold what the "
                      "postcondition requires"),
            std::string::npos);
}

TEST(TracerTest, ManualThreadblocks) {
  EXPECT_EQ(
      firstLine(traceError(R"(collective allreduce(ranks = 2, inplace = true)
option threadblocks = manual
chunk(1, input, 0).reduce(chunk(0, input, 0), sendtb = 0, recvtb = 0)
chunk(1, input, 0).copy(0, input, 0, sendtb = 0)
)")),
      "test.coll:4:20: error: with `threadblocks = manual`, an operation "
      "between ranks "
      "must name sendtb and recvtb");
}

TEST(TracerTest, Scale) {
  ChunkDag dag = traceOk(R"(param N = 128
collective alltoall(ranks = N)
for s in 0..N { for d in 0..N { chunk(s, input, d).copy(d, output, s) } }
)");
  EXPECT_EQ(dag.ops.size(), 128u * 128u);
  Overrides big;
  big.params["N"] = int64_t(64);
  EXPECT_EQ(traceOk(RingAllReduce, big).ops.size(), 64u * 126u);
}

} // namespace
