//===- ThreadblockTest.cpp - Automatic and manual tb assignment -----------===//

#include "CompilerTest.h"
#include "TestPrograms.h"

using namespace coll;
using namespace coll::compiler;
using namespace coll::compiler::test;
using ir::StepType;

namespace {

/// "send/recv/chan" of every tb of a rank.
std::string tbs(const ir::Algorithm &alg, int32_t rank) {
  std::string text;
  for (const ir::ThreadBlock &tb : alg.gpus[rank].tbs)
    text += (text.empty() ? "" : " ") + std::to_string(tb.sendPeer) + "/" +
            std::to_string(tb.recvPeer) + "/" + std::to_string(tb.channel);
  return text;
}

const char *const AllPairs = R"(
param N = 4
collective alltoall(ranks = N, chunks = 1)
for src in 0..N {
    for dst in 0..N {
        chunk(src, input, dst).copy(dst, output, src)
    }
}
)";

TEST(AutoThreadblocks, OneTbPerPeerPairsSendAndReceive) {
  Compilation c(AllPairs);
  ASSERT_TRUE(c.ok()) << c.text();
  // The local copy has no producer or consumer: a tb of its own.
  EXPECT_EQ(tbs(c.alg(), 0), "-1/-1/0 1/1/0 2/2/0 3/3/0");
  EXPECT_EQ(tbs(c.alg(), 2), "0/0/0 1/1/0 -1/-1/0 3/3/0");
  for (const ir::ThreadBlock &tb : c.alg().gpus[1].tbs)
    if (tb.sendPeer >= 0) {
      ASSERT_EQ(tb.steps.size(), 2u);
      EXPECT_EQ(tb.steps[0].type, StepType::Send) << "sends go first";
    }
}

TEST(AutoThreadblocks, RingUsesOneTbPerRank) {
  // On one channel (without the hint every chunk gets its own).
  Compilation c(R"(
param N = 4
collective allgather(ranks = N, chunks = 1)
for r in 0..N {
    let c = chunk(r, input, 0).copy(r, output, r)
    for k in 1..N { c = c.copy((r + k) % N, output, r, ch = 0) }
}
)");
  ASSERT_TRUE(c.ok()) << c.text();
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(tbs(c.alg(), r), std::to_string((r + 1) % 4) + "/" +
                                   std::to_string((r + 3) % 4) + "/0");
  // The initial copy runs in the ring tb, before the send that reads it.
  const std::vector<ir::Step> &steps = c.alg().gpus[0].tbs[0].steps;
  EXPECT_EQ(steps[0].type, StepType::Copy);
  EXPECT_EQ(steps[1].type, StepType::Send);
  EXPECT_FALSE(steps[1].hasDependency());
}

TEST(AutoThreadblocks, LocalReduceJoinsItsLatestProducer) {
  Compilation ok(R"(
collective allreduce(ranks = 3, chunks = 3, inplace = true)
for r in 0..3 {
    for p in 0..3 { if p != r { chunk(p, input, r).copy(r, scratch, p) } }
}
for r in 0..3 {
    for p in 0..3 { if p != r { chunk(r, input, r).reduce(chunk(r, scratch, p)) } }
}
for r in 0..3 {
    for p in 0..3 { if p != r { chunk(r, input, r).copy(p, input, r) } }
}
)");
  ASSERT_TRUE(ok.ok()) << ok.text();
  // Rank 0: one tb per peer; the two `re` are one fused group, which
  // carries the dependencies of both and joins the later receive it reads.
  const ir::Gpu &gpu = ok.alg().gpus[0];
  ASSERT_EQ(gpu.tbs.size(), 2u);
  EXPECT_EQ(stepTypes(ok.alg(), 0), "s:4 r:4 re:2");
  EXPECT_EQ(stepTypesOf(gpu.tbs[0]), "s r s r");
  const std::vector<ir::Step> &second = gpu.tbs[1].steps;
  EXPECT_EQ(stepTypesOf(gpu.tbs[1]), "s r re re s r");
  EXPECT_TRUE(second[2].hasDependency()) << "waits for the other receive";
  EXPECT_EQ(second[2].depTb, 0);
  EXPECT_FALSE(second[3].hasDependency());
  EXPECT_FALSE(second[2].hasDep);
  EXPECT_TRUE(second[3].hasDep);
}

TEST(AutoThreadblocks, UnfusedLocalReduceJoinsItsLatestProducer) {
  Config unfused;
  unfused.edit = [](lang::ChunkDag &dag) { dag.options.fusion = false; };
  Compilation ok(R"(
collective allreduce(ranks = 3, chunks = 3, inplace = true)
for r in 0..3 {
    for p in 0..3 { if p != r { chunk(p, input, r).copy(r, scratch, p) } }
}
for r in 0..3 {
    for p in 0..3 { if p != r { chunk(r, input, r).reduce(chunk(r, scratch, p)) } }
}
for r in 0..3 {
    for p in 0..3 { if p != r { chunk(r, input, r).copy(p, input, r) } }
}
)",
                 unfused);
  ASSERT_TRUE(ok.ok()) << ok.text();
  // Rank 0: one tb per peer; the first `re` joins the receive it reads, the
  // second follows it there (its latest producer is the first `re`).
  const ir::Gpu &gpu = ok.alg().gpus[0];
  ASSERT_EQ(gpu.tbs.size(), 2u);
  EXPECT_EQ(stepTypes(ok.alg(), 0), "s:4 r:4 re:2");
  const std::vector<ir::Step> &first = gpu.tbs[0].steps;
  EXPECT_EQ(first[2].type, StepType::Reduce);
  EXPECT_EQ(first[3].type, StepType::Reduce);
  EXPECT_TRUE(first[3].hasDependency()) << "waits for the other receive";
}

//===----------------------------------------------------------------------===//
// Manual threadblocks
//===----------------------------------------------------------------------===//

TEST(ManualThreadblocks, ProgramIdsKeepTheirOrderAndBecomeDense) {
  Compilation c(R"(
collective allgather(ranks = 2, chunks = 1)
option threadblocks = manual
chunk(0, input, 0).copy(0, output, 0, sendtb = 3)
chunk(1, input, 0).copy(1, output, 1, sendtb = 0)
chunk(0, input, 0).copy(1, output, 0, sendtb = 2, recvtb = 1)
chunk(1, input, 0).copy(0, output, 1, sendtb = 1, recvtb = 2)
)");
  ASSERT_TRUE(c.ok()) << c.text();
  // Rank 0: program tb 2 both sends to and receives from rank 1, tb 3
  // copies; ids 0 and 1 are unused and do not become empty tbs.
  EXPECT_EQ(tbs(c.alg(), 0), "1/1/0 -1/-1/0");
  EXPECT_EQ(c.alg().gpus[0].tbs[1].steps.size(), 1u);
  EXPECT_EQ(tbs(c.alg(), 1), "-1/-1/0 0/0/0");
}

TEST(ManualThreadblocks, InstancesOffsetTheIds) {
  Config setup;
  setup.edit = [](lang::ChunkDag &dag) { dag.options.instances = 2; };
  Compilation c(R"(
collective broadcast(ranks = 2, chunks = 1, root = 0)
chunk(0, input, 0).copy(0, output, 0, sendtb = 0)
chunk(0, output, 0).copy(1, output, 0, sendtb = 1, recvtb = 0)
)",
                setup);
  ASSERT_TRUE(c.ok()) << c.text();
  // Lane 1 adds 2 (rank 0's largest id + 1) to the ids, 1 to the channel.
  EXPECT_EQ(tbs(c.alg(), 0), "-1/-1/0 1/-1/0 -1/-1/1 1/-1/1");
  EXPECT_EQ(tbs(c.alg(), 1), "-1/0/0 -1/0/1");
}

TEST(AutoThreadblocks, ConflictingTbHintsYield) {
  // The programs of the manual tests below, with threadblocks = auto: the
  // hints that conflict yield, and each compiles and verifies.
  for (const char *source : {R"(
collective broadcast(ranks = 3, chunks = 1, root = 0)
chunk(0, input, 0).copy(0, output, 0)
chunk(0, output, 0).copy(1, output, 0, sendtb = 0, recvtb = 0)
chunk(0, output, 0).copy(2, output, 0, sendtb = 0, recvtb = 0)
)",
                             R"(
collective broadcast(ranks = 3, chunks = 1, root = 0)
chunk(0, input, 0).copy(0, output, 0)
chunk(0, output, 0).copy(1, output, 0, sendtb = 0, recvtb = 0, ch = 0)
chunk(1, output, 0).copy(2, output, 0, sendtb = 0, recvtb = 0, ch = 1)
)"}) {
    Compilation c(source);
    EXPECT_TRUE(c.ok()) << c.text();
    EXPECT_EQ(c.text(), "");
  }
  // Rank 0 sends to ranks 1 and 2: two tbs, whatever the hints said.
  Compilation c(R"(
collective broadcast(ranks = 3, chunks = 1, root = 0)
chunk(0, input, 0).copy(0, output, 0)
chunk(0, output, 0).copy(1, output, 0, sendtb = 0, recvtb = 0)
chunk(0, output, 0).copy(2, output, 0, sendtb = 0, recvtb = 0)
)");
  ASSERT_TRUE(c.ok());
  int sending = 0;
  for (const ir::ThreadBlock &tb : c.alg().gpus[0].tbs)
    sending += tb.sendPeer >= 0;
  EXPECT_EQ(sending, 2);
}

TEST(ManualThreadblocks, TwoSendPeersInOneTb) {
  Compilation c(R"(
collective broadcast(ranks = 3, chunks = 1, root = 0)
option threadblocks = manual
chunk(0, input, 0).copy(0, output, 0)
chunk(0, output, 0).copy(1, output, 0, sendtb = 0, recvtb = 0)
chunk(0, output, 0).copy(2, output, 0, sendtb = 0, recvtb = 0)
)");
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.text(),
            "test.coll:6:21: error: tb 0 of rank 0 would need two send peers: "
            "it would send to rank 2 here and rank 1 at line 5:21; a tb has "
            "one send peer\n"
            "chunk(0, output, 0).copy(2, output, 0, sendtb = 0, recvtb = 0)\n"
            "                    ^\n"
            "test.coll:5:21: note: the other operation is here\n"
            "chunk(0, output, 0).copy(1, output, 0, sendtb = 0, recvtb = 0)\n"
            "                    ^\n");
}

TEST(ManualThreadblocks, TwoTbsOnOneConnectionDirection) {
  Compilation c(R"(
collective allgather(ranks = 2, chunks = 2)
option threadblocks = manual
for j in 0..2 {
    chunk(0, input, j).copy(0, output, j)
    chunk(1, input, j).copy(1, output, 2 + j)
    chunk(1, input, j).copy(0, output, 2 + j, sendtb = 2, recvtb = 2)
    chunk(0, input, j).copy(1, output, j, sendtb = j, recvtb = 0)
}
)");
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.firstLine(),
            "test.coll:8:24: error: rank 0 sends to rank 1 on channel 0 from "
            "tb 1 here but from tb 0 at line 8:24: one tb per rank drives "
            "each direction of a connection");
  EXPECT_NE(c.text().find("note: the other operation is here"),
            std::string::npos);
}

TEST(ManualThreadblocks, TwoChannelsInOneTb) {
  Compilation c(R"(
collective broadcast(ranks = 3, chunks = 1, root = 0)
option threadblocks = manual
chunk(0, input, 0).copy(0, output, 0)
chunk(0, output, 0).copy(1, output, 0, sendtb = 0, recvtb = 0, ch = 0)
chunk(1, output, 0).copy(2, output, 0, sendtb = 0, recvtb = 0, ch = 1)
)");
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.firstLine(),
            "test.coll:6:21: error: tb 0 of rank 1 would need two channels: "
            "channel 1 here and channel 0 at line 5:21; a tb has one channel");
}

TEST(ManualThreadblocks, LocalOperationOnTwoTbs) {
  Compilation c(R"(
collective allreduce(ranks = 1, chunks = 2)
chunk(0, input, 0, size = 2).copy(0, output, 0, sendtb = 0, recvtb = 1)
)");
  // It runs on its sendtb, with a warning (once per operation).
  ASSERT_TRUE(c.ok()) << c.text();
  EXPECT_EQ(c.firstLine(), "test.coll:3:30: warning: a local operation runs "
                           "on one tb: this one runs on its sendtb=0; "
                           "recvtb=1 is ignored");
  EXPECT_EQ(c.alg().gpus[0].tbs.size(), 1u);
}

TEST(ManualThreadblocks, ReceiveAndForwardInOneTbFuse) {
  const char *source = R"(
collective broadcast(ranks = 3, chunks = 1, root = 0)
option threadblocks = manual
chunk(0, input, 0).copy(0, output, 0, sendtb = 0)
chunk(0, output, 0).copy(1, output, 0, sendtb = 0, recvtb = 0)
  .copy(2, output, 0, sendtb = %0, recvtb = 0)
)";
  std::string together = source, apart = source;
  together.replace(together.find("%0"), 2, "0");
  apart.replace(apart.find("%0"), 2, "1");
  Compilation fused(together), separate(apart);
  ASSERT_TRUE(fused.ok()) << fused.text();
  ASSERT_TRUE(separate.ok()) << separate.text();
  EXPECT_EQ(stepTypes(fused.alg(), 1), "rcs:1");
  EXPECT_EQ(stepTypes(separate.alg(), 1), "s:1 r:1");
  EXPECT_EQ(tbs(separate.alg(), 1), "-1/0/0 2/-1/0");
}

} // namespace
