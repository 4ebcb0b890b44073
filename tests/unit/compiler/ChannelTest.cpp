//===- ChannelTest.cpp - Channels for operations without a hint -----------===//

#include "CompilerTest.h"
#include "TestPrograms.h"

#include <set>

using namespace coll;
using namespace coll::compiler;
using namespace coll::compiler::test;

namespace {

/// The channels of a rank's tbs that send, in tb order.
std::vector<int32_t> sendChannels(const ir::Algorithm &alg, int32_t rank) {
  std::vector<int32_t> channels;
  for (const ir::ThreadBlock &tb : alg.gpus[rank].tbs)
    if (tb.sendPeer >= 0)
      channels.push_back(tb.channel);
  return channels;
}

TEST(Channels, RingFlowsGetChannelsOfTheirOwn) {
  // Every chunk travels around the ring at the same time as the others: a
  // channel per flow. Each rank forwards N-1 of the N flows (the one that
  // ends there does not leave it).
  Compilation c(coll::test::ringAllGatherProgram(4));
  ASSERT_TRUE(c.ok()) << c.text();
  EXPECT_EQ(c.alg().nchannels, 4);
  for (int32_t r = 0; r < 4; ++r) {
    std::vector<int32_t> channels = sendChannels(c.alg(), r);
    EXPECT_EQ(std::set<int32_t>(channels.begin(), channels.end()).size(), 3u);
    for (const ir::ThreadBlock &tb : c.alg().gpus[r].tbs) {
      if (tb.sendPeer >= 0) {
        EXPECT_EQ(tb.sendPeer, (r + 1) % 4);
      }
    }
  }
}

TEST(Channels, PhasesThatFollowEachOtherShareChannels) {
  // All-pairs allreduce: the reduce-scatter's transfers finish before the
  // allgather's start, and every pair has its own connection: one channel.
  Compilation c(R"(
param N = 3
collective allreduce(ranks = N, chunks = N, inplace = true)
for r in 0..N {
    for p in 0..N {
        if p != r { chunk(p, input, r).copy(r, scratch, p) }
    }
    for p in 0..N {
        if p != r { chunk(r, input, r).reduce(chunk(r, scratch, p)) }
    }
    for p in 0..N {
        if p != r { chunk(r, input, r).copy(p, input, r) }
    }
}
)");
  ASSERT_TRUE(c.ok()) << c.text();
  EXPECT_EQ(c.alg().nchannels, 1);
}

TEST(Channels, HintsAndNamedTbsKeepTheirChannel) {
  // Three flows on one connection at the same time: the one with `ch = 1`
  // keeps it, the one whose tb the program names stays on channel 0, and
  // the unhinted one takes a channel of its own.
  Compilation c(R"(
collective broadcast(ranks = 2, chunks = 3, root = 0, inplace = true)
chunk(0, input, 0).copy(1, input, 0, ch = 1)
chunk(0, input, 1).copy(1, input, 1)
chunk(0, input, 2).copy(1, input, 2, sendtb = 5)
)");
  ASSERT_TRUE(c.ok()) << c.text();
  std::vector<int32_t> channels = sendChannels(c.alg(), 0);
  EXPECT_EQ(std::set<int32_t>(channels.begin(), channels.end()),
            (std::set<int32_t>{0, 1, 2}));
  EXPECT_EQ(c.alg().nchannels, 3);
  for (const ir::ThreadBlock &tb : c.alg().gpus[0].tbs)
    if (tb.sendPeer >= 0 && tb.channel == 0) {
      ASSERT_EQ(tb.steps.size(), 1u);
      EXPECT_EQ(tb.steps[0].srcOff, 2) << "the op with sendtb = 5";
    }
}

TEST(Channels, AutomaticChannelsStayWithinTheLimit) {
  // 40 chunk flows around one ring, 4 instances: 32 channels in all.
  Compilation c(coll::test::ringAllGatherProgram(40) +
                "option instances = 4\n");
  ASSERT_TRUE(c.ok()) << c.text();
  EXPECT_EQ(c.alg().nchannels, 32);
}

} // namespace
