//===- VerifierTest.cpp - One test per verifier rule ----------------------===//
//
// Each rule is broken in a copy of one small valid algorithm (a two-rank
// allreduce ring plus a local tb that waits for it), so that the expected
// diagnostic can name the line of the element that breaks it.
//
//===----------------------------------------------------------------------===//

#include "IRTestUtil.h"

#include "llvm/ADT/StringExtras.h"

namespace coll::ir {
namespace {

using test::verifyDiagnostics;
using Strings = std::vector<std::string>;

// Line numbers matter: the tests below name them.
constexpr const char *Ring =
    R"(<algo name="ring" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allreduce" inplace="1" outofplace="0" minBytes="0" maxBytes="0">
  <gpu id="0" i_chunks="2" o_chunks="0" s_chunks="1">
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="rrc" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="1"/>
      <step s="2" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="3" type="r" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="1" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="0" deps="1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="0" s_chunks="0">
    <tb id="0" send="0" recv="0" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="rrc" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="s" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="3" type="r" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>)";

class VerifierTest : public ::testing::Test {
protected:
  void SetUp() override { alg = test::parseValid(Ring); }

  ThreadBlock &tb(int g, int t) { return alg.gpus[g].tbs[t]; }
  Step &step(int g, int t, int s) { return tb(g, t).steps[s]; }
  Strings errors(const RuntimeLimits &limits = {}) {
    return verifyDiagnostics(alg, Severity::Error, limits);
  }

  Algorithm alg;
};

TEST_F(VerifierTest, ValidAlgorithm) {
  DiagnosticList diags("t.xml");
  llvm::Expected<Analysis> analysis = verify(alg, diags);
  ASSERT_TRUE(bool(analysis)) << llvm::toString(analysis.takeError());
  EXPECT_EQ(diags.all().size(), 0u);

  ASSERT_EQ(analysis->connections.size(), 2u);
  const Connection &c01 = analysis->connections[0];
  EXPECT_EQ(c01.sender, 0);
  EXPECT_EQ(c01.receiver, 1);
  EXPECT_EQ(c01.channel, 0);
  EXPECT_EQ(c01.sendTb, 0);
  EXPECT_EQ(c01.recvTb, 0);
  EXPECT_EQ(std::vector<int32_t>(c01.sendSteps.begin(), c01.sendSteps.end()), (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(std::vector<int32_t>(c01.recvSteps.begin(), c01.recvSteps.end()), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(analysis->connections[1].sender, 1);
  EXPECT_EQ(analysis->sendConnection,
            (std::vector<std::vector<int32_t>>{{0, -1}, {1}}));
  EXPECT_EQ(analysis->recvConnection,
            (std::vector<std::vector<int32_t>>{{1, -1}, {0}}));

  // Every step once, each after its tb predecessor, dependency and send.
  const std::vector<StepRef> &order = analysis->topologicalOrder;
  ASSERT_EQ(order.size(), 9u);
  auto position = [&](StepRef ref) {
    return std::find(order.begin(), order.end(), ref) - order.begin();
  };
  for (StepRef ref : order) {
    if (ref.step > 0) {
      EXPECT_LT(position({ref.gpu, ref.tb, ref.step - 1}), position(ref));
    }
  }
  EXPECT_LT(position({0, 0, 1}), position({0, 1, 0}));
  EXPECT_LT(position({0, 0, 0}), position({1, 0, 1}));
  EXPECT_LT(position({1, 0, 2}), position({0, 0, 3}));
}

TEST_F(VerifierTest, PeerOutOfRange) {
  tb(0, 1).sendPeer = 2;
  tb(0, 1).recvPeer = -2;
  EXPECT_EQ(errors(),
            (Strings{"t.xml:9: error: gpu 0 tb 1: send peer 2 is out of "
                     "range [-1, 2)",
                     "t.xml:9: error: gpu 0 tb 1: recv peer -2 is out of "
                     "range [-1, 2)"}));
}

TEST_F(VerifierTest, PeerIsOwnRank) {
  tb(0, 1).recvPeer = 0;
  EXPECT_EQ(errors(), Strings{"t.xml:9: error: gpu 0 tb 1: recv peer 0 is "
                              "the tb's own rank"});
}

TEST_F(VerifierTest, SendWithoutSendPeer) {
  step(0, 1, 0).type = StepType::Send;
  EXPECT_EQ(errors(), Strings{"t.xml:10: error: gpu 0 tb 1 step 0: 's' "
                              "sends, but the tb has no send peer (send=-1)"});
}

TEST_F(VerifierTest, ReceiveWithoutReceivePeer) {
  step(0, 1, 0).type = StepType::RecvReduceCopy;
  EXPECT_EQ(errors(),
            Strings{"t.xml:10: error: gpu 0 tb 1 step 0: 'rrc' receives, but "
                    "the tb has no receive peer (recv=-1)"});
}

TEST_F(VerifierTest, SourceRange) {
  step(0, 1, 0).srcOff = 1;
  step(0, 1, 0).count = 2;
  step(0, 1, 0).dstOff = -1;
  step(1, 0, 0).srcOff = 2;
  EXPECT_EQ(errors(),
            (Strings{"t.xml:10: error: gpu 0 tb 1 step 0: srcoff 1 + cnt 2 "
                     "exceeds i_chunks 2",
                     "t.xml:10: error: gpu 0 tb 1 step 0: dstoff -1 is "
                     "negative",
                     "t.xml:15: error: gpu 1 tb 0 step 0: srcoff 2 + cnt 1 "
                     "exceeds i_chunks 2"}));
}

TEST_F(VerifierTest, DestinationRange) {
  step(0, 1, 0).dstOff = 1;
  step(1, 0, 3).dstBuf = BufferKind::Output;
  EXPECT_EQ(errors(),
            (Strings{"t.xml:10: error: gpu 0 tb 1 step 0: dstoff 1 + cnt 1 "
                     "exceeds s_chunks 1",
                     "t.xml:18: error: gpu 1 tb 0 step 3: dstoff 0 + cnt 1 "
                     "exceeds o_chunks 0"}));
}

TEST_F(VerifierTest, UnusedOperandsAreNotChecked) {
  step(0, 0, 0).dstOff = 99; // the remote slot of a send: informational
  step(0, 0, 0).dstBuf = BufferKind::Output;
  step(0, 0, 3).srcOff = -5; // the src of a plain receive is not read
  Step &nop = step(0, 1, 0);
  step(0, 1, 0).type = StepType::Nop; // nops may have cnt 0 and offset -1
  nop.srcOff = nop.dstOff = -1;
  nop.count = 0;
  tb(0, 1).steps.push_back(tb(0, 0).steps[2]); // a real step after the nop
  tb(0, 1).steps.back().type = StepType::Copy;
  tb(0, 1).steps.back().dstBuf = BufferKind::Scratch;
  EXPECT_EQ(errors(), Strings{});
}

TEST_F(VerifierTest, CountAtLeastOne) {
  step(0, 1, 0).count = 0;
  step(1, 0, 0).count = -3; // and its matching receive, so that they match
  step(0, 0, 1).count = -3;
  EXPECT_EQ(errors(), (Strings{"t.xml:5: error: gpu 0 tb 0 step 1: cnt -3 "
                               "must be at least 1",
                               "t.xml:10: error: gpu 0 tb 1 step 0: cnt 0 "
                               "must be at least 1",
                               "t.xml:15: error: gpu 1 tb 0 step 0: cnt -3 "
                               "must be at least 1"}));
}

TEST_F(VerifierTest, ChannelOutOfRange) {
  tb(0, 1).channel = 1;
  EXPECT_EQ(errors(), Strings{"t.xml:9: error: gpu 0 tb 1: chan 1 is out of "
                              "range [0, 1) given by nchannels"});
  tb(0, 1).channel = -1;
  alg.nchannels = 0;
  EXPECT_EQ(errors(),
            (Strings{"t.xml:1: error: nchannels 0 must be at least 1",
                     "t.xml:3: error: gpu 0 tb 0: chan 0 is out of range [0, "
                     "0) given by nchannels",
                     "t.xml:9: error: gpu 0 tb 1: chan -1 is out of range [0, "
                     "0) given by nchannels",
                     "t.xml:14: error: gpu 1 tb 0: chan 0 is out of range [0, "
                     "0) given by nchannels"}));
}

TEST_F(VerifierTest, ChunksPerLoop) {
  alg.nchunksPerLoop = 0;
  EXPECT_EQ(errors(), Strings{"t.xml:1: error: nchunksperloop 0 must be at "
                              "least 1"});
  alg.collective = Collective::AllGather;
  alg.nchunksPerLoop = 3;
  EXPECT_EQ(errors(), Strings{"t.xml:1: error: nchunksperloop 3 is not a "
                              "multiple of ngpus 2, as allgather requires"});
  alg.collective = Collective::Custom; // no such requirement
  EXPECT_EQ(errors(), Strings{});
}

TEST_F(VerifierTest, BufferLargerThanTheCollective) {
  alg.gpus[1].inputChunks = 3;
  alg.gpus[1].outputChunks = 3;
  EXPECT_EQ(errors(),
            (Strings{"t.xml:13: error: gpu 1: i_chunks 3 is larger than the 2 "
                     "chunks of the input of this allreduce",
                     "t.xml:13: error: gpu 1: o_chunks 3 is larger than the 2 "
                     "chunks of the output of this allreduce"}));
  // An allgather of 2 chunks has one chunk of input per rank.
  alg.gpus[1].inputChunks = 2;
  alg.gpus[1].outputChunks = 0;
  alg.collective = Collective::AllGather;
  EXPECT_EQ(errors(),
            (Strings{"t.xml:2: error: gpu 0: i_chunks 2 is larger than the 1 "
                     "chunks of the input of this allgather",
                     "t.xml:13: error: gpu 1: i_chunks 2 is larger than the 1 "
                     "chunks of the input of this allgather"}));
  alg.collective = Collective::Custom;
  alg.gpus[0].inputChunks = 100;
  alg.gpus[1].scratchChunks = 100; // scratch has no limit
  EXPECT_EQ(errors(), Strings{});
  alg.gpus[1].scratchChunks = -1;
  EXPECT_EQ(errors(), Strings{"t.xml:13: error: gpu 1: s_chunks -1 is "
                              "negative"});
}

// Declarations the checks could not hold a cell per chunk of (an 8 GiB
// table, or a bad_alloc abort, before): one error, and nothing more is
// checked.
TEST_F(VerifierTest, DeclaredChunksInAll) {
  alg.gpus[1].scratchChunks = 2147483647;
  EXPECT_EQ(errors(), Strings{"t.xml:1: error: the gpus' buffers declare 2147483652 chunks in "
                              "all (per gpu the larger of nchunksperloop, i_chunks and "
                              "o_chunks, plus s_chunks), over the limit of 67108864"});
  alg.gpus[1].scratchChunks = 0;
  alg.nchunksPerLoop = 2147483646;
  EXPECT_EQ(errors().size(), 1u);
  // At the limit: no error of its own (the chunks of the collective then
  // disagree with i_chunks, which is another error).
  alg.nchunksPerLoop = 2;
  alg.gpus[1].scratchChunks = int32_t(MaxDeclaredChunks) - 2 - 3;
  EXPECT_EQ(errors(), Strings{});
  alg.gpus[1].scratchChunks += 1;
  EXPECT_EQ(errors().size(), 1u);
}

TEST_F(VerifierTest, Root) {
  alg.collective = Collective::Broadcast;
  alg.root = 2;
  EXPECT_EQ(errors(), Strings{"t.xml:1: error: root 2 is out of range [0, 2)"});
  alg.root = 1;
  EXPECT_EQ(errors(), Strings{});
  alg.collective = Collective::AllReduce;
  EXPECT_EQ(errors(), Strings{"t.xml:1: error: root 1 given, but allreduce "
                              "has no root (root must be -1)"});
}

TEST_F(VerifierTest, ByteRange) {
  alg.minBytes = 10;
  alg.maxBytes = 5;
  EXPECT_EQ(errors(), Strings{"t.xml:1: error: minBytes 10 is larger than "
                              "maxBytes 5"});
  alg.maxBytes = 0; // no upper limit
  EXPECT_EQ(errors(), Strings{});
}

TEST_F(VerifierTest, DependencyOnMissingTb) {
  step(0, 1, 0).depTb = 5;
  EXPECT_EQ(errors(), Strings{"t.xml:10: error: gpu 0 tb 1 step 0: "
                              "dependency on tb 5, but the gpu has only 2 "
                              "tbs"});
}

TEST_F(VerifierTest, DependencyOnMissingStep) {
  step(0, 1, 0).depStep = 4;
  EXPECT_EQ(errors(), Strings{"t.xml:10: error: gpu 0 tb 1 step 0: "
                              "dependency on tb 0 step 4, but that tb has "
                              "only 4 steps"});
}

TEST_F(VerifierTest, HalfADependency) {
  step(0, 1, 0).depStep = -1;
  step(1, 0, 0).depTb = -1;
  step(1, 0, 0).depStep = 0;
  step(1, 0, 1).depTb = -7;
  EXPECT_EQ(errors(),
            (Strings{"t.xml:10: error: gpu 0 tb 1 step 0: depid 0 and deps "
                     "-1: both must be -1, or both must name a step",
                     "t.xml:15: error: gpu 1 tb 0 step 0: depid -1 and deps "
                     "0: both must be -1, or both must name a step",
                     "t.xml:16: error: gpu 1 tb 0 step 1: depid -7 and deps "
                     "-1: both must be -1, or both must name a step"}));
}

TEST_F(VerifierTest, DependencyOnStepWithoutHasDep) {
  step(0, 0, 1).hasDep = false;
  EXPECT_EQ(errors(),
            Strings{"t.xml:10: error: gpu 0 tb 1 step 0: dependency on tb 0 "
                    "step 1, which has hasdep=0: it never signals, so this "
                    "step would wait forever"});
}

TEST_F(VerifierTest, LocalDependencyCycle) {
  step(0, 0, 0).depTb = 1;
  step(0, 0, 0).depStep = 0;
  step(0, 1, 0).hasDep = true;
  EXPECT_EQ(errors(),
            Strings{"t.xml:4: error: dependency cycle: gpu 0 tb 0 step 0 -> "
                    "gpu 0 tb 0 step 1 -> gpu 0 tb 1 step 0 -> gpu 0 tb 0 "
                    "step 0"});
}

TEST_F(VerifierTest, CycleThroughConnections) {
  // Both ranks receive before they send: each waits for the other.
  std::swap(tb(0, 0).steps[0], tb(0, 0).steps[1]);
  std::swap(tb(1, 0).steps[0], tb(1, 0).steps[1]);
  step(0, 1, 0).depStep = 0; // follow the rrc
  EXPECT_EQ(errors(),
            Strings{"t.xml:5: error: dependency cycle: gpu 0 tb 0 step 0 -> "
                    "gpu 0 tb 0 step 1 -> gpu 1 tb 0 step 0 -> gpu 1 tb 0 "
                    "step 1 -> gpu 0 tb 0 step 0"});
}

TEST_F(VerifierTest, SelfDependencyAndRunsInCycles) {
  step(0, 0, 1).depTb = 0;
  step(0, 0, 1).depStep = 1;
  EXPECT_EQ(errors(), Strings{"t.xml:5: error: dependency cycle: gpu 0 tb 0 "
                              "step 1 -> gpu 0 tb 0 step 1"});
  // A run of consecutive steps of one tb is shown by its ends.
  step(0, 0, 1).depTb = step(0, 0, 1).depStep = -1;
  step(0, 0, 0).depTb = 0;
  step(0, 0, 0).depStep = 3;
  step(0, 0, 3).hasDep = true;
  EXPECT_EQ(errors(), Strings{"t.xml:4: error: dependency cycle: gpu 0 tb 0 "
                              "step 0 -> gpu 0 tb 0 step 3 -> gpu 0 tb 0 "
                              "step 0"});
}

TEST_F(VerifierTest, LongCycleIsFoundIteratively) {
  // 10^5 steps in one tb whose first step waits for its last: deep enough
  // to overflow a recursive search.
  Algorithm big;
  big.collective = Collective::AllReduce;
  big.gpus.resize(1);
  big.gpus[0].inputChunks = 1;
  ThreadBlock chain;
  Step copy;
  copy.type = StepType::Copy;
  chain.steps.assign(100000, copy);
  chain.steps.back().hasDep = true;
  chain.steps.front().depTb = 0;
  chain.steps.front().depStep = 99999;
  big.gpus[0].tbs.push_back(chain);
  EXPECT_EQ(verifyDiagnostics(big),
            Strings{"t.xml: error: dependency cycle: gpu 0 tb 0 step 0 -> "
                    "gpu 0 tb 0 step 99999 -> gpu 0 tb 0 step 0"});
  big.gpus[0].tbs[0].steps.front().depTb = -1;
  big.gpus[0].tbs[0].steps.front().depStep = -1;
  EXPECT_EQ(verifyDiagnostics(big), Strings{});
}

TEST_F(VerifierTest, TrailingNop) {
  step(0, 1, 0).type = StepType::Nop;
  EXPECT_EQ(errors(), Strings{"t.xml:10: error: gpu 0 tb 1 step 0: nop at "
                              "the end of its tb: no later step carries its "
                              "dependency"});
  // A run of nops is reported once, at its first.
  tb(0, 0).steps[2].type = StepType::Nop; // keep the ring's matching intact
  tb(0, 0).steps[3].type = StepType::Nop;
  Strings reported = errors();
  EXPECT_EQ(reported[0], "t.xml:6: error: gpu 0 tb 0 step 2: nop at the end "
                         "of its tb: no later step carries its dependency");
}

TEST_F(VerifierTest, TrailingNopThatAnotherTbWaitsFor) {
  // Gpu 0 tb 1 ends with a nop that waits for tb 0 step 1; tb 0 step 2
  // waits for the nop. Coll's runtimes run nops as steps, so the nop hands
  // its wait on by publishing; MSCCL folds nops into the next real step,
  // and there is none.
  step(0, 1, 0).type = StepType::Nop;
  step(0, 1, 0).hasDep = true;
  step(0, 0, 2).depTb = 1;
  step(0, 0, 2).depStep = 0;
  EXPECT_EQ(errors(), Strings{});
  EXPECT_EQ(errors(mscclLimits()),
            Strings{"t.xml:10: error: gpu 0 tb 1 step 0: nop at the end of "
                    "its tb: no later step carries its dependency"});
  // Without hasdep nobody learns what it waited for.
  step(0, 0, 2).depTb = step(0, 0, 2).depStep = -1;
  step(0, 1, 0).hasDep = false;
  EXPECT_EQ(errors().size(), 1u);
}

TEST_F(VerifierTest, TwoTbsDriveOneDirection) {
  tb(0, 1).sendPeer = 1;
  EXPECT_EQ(errors(), Strings{"t.xml:9: error: gpu 0 tb 1: tb 0 and tb 1 "
                              "both send to gpu 1 on channel 0"});
  tb(0, 1).sendPeer = -1;
  tb(0, 1).recvPeer = 1;
  EXPECT_EQ(errors(), Strings{"t.xml:9: error: gpu 0 tb 1: tb 0 and tb 1 "
                              "both receive from gpu 1 on channel 0"});
}

TEST_F(VerifierTest, ConnectionWithoutPartner) {
  alg.nchannels = 2;
  tb(0, 0).channel = 1;
  EXPECT_EQ(
      errors(),
      (Strings{"t.xml:14: error: gpu 1 tb 0: receives from gpu 0 on channel "
               "0, but no tb of gpu 0 sends to gpu 1 on channel 0",
               "t.xml:3: error: gpu 0 tb 0: sends to gpu 1 on channel 1, but "
               "no tb of gpu 1 receives from gpu 0 on channel 1",
               "t.xml:14: error: gpu 1 tb 0: sends to gpu 0 on channel 0, but "
               "no tb of gpu 0 receives from gpu 1 on channel 0",
               "t.xml:3: error: gpu 0 tb 0: receives from gpu 1 on channel 1, "
               "but no tb of gpu 1 sends to gpu 0 on channel 1"}));
}

TEST_F(VerifierTest, DeclaredButUnusedPeerNeedsNoPartner) {
  alg.nchannels = 2;
  tb(0, 1).sendPeer = 1;
  tb(0, 1).channel = 1;
  EXPECT_EQ(errors(), Strings{});
}

TEST_F(VerifierTest, SendAndReceiveCountsDiffer) {
  step(0, 0, 2).count = 2;
  EXPECT_EQ(errors(),
            Strings{"t.xml:6: error: gpu 0 tb 0 step 2: send 1 to gpu 1 on "
                    "channel 0 has cnt 2, but the matching receive (gpu 1 tb "
                    "0 step 3) has cnt 1"});
}

TEST_F(VerifierTest, MoreSendsThanReceives) {
  step(1, 0, 3).type = StepType::Copy;
  EXPECT_EQ(errors(),
            Strings{"t.xml:6: error: gpu 0 tb 0 step 2: send 1 to gpu 1 on "
                    "channel 0 has no matching receive: gpu 1 tb 0 receives "
                    "only 1 time"});
}

TEST_F(VerifierTest, MoreReceivesThanSends) {
  step(0, 0, 2).type = StepType::Copy;
  EXPECT_EQ(errors(),
            Strings{"t.xml:18: error: gpu 1 tb 0 step 3: receive 1 from gpu 0 "
                    "on channel 0 has no matching send: gpu 0 tb 0 sends only "
                    "1 time"});
}

TEST_F(VerifierTest, StepsPerTbLimit) {
  RuntimeLimits limits;
  limits.maxStepsPerTb = 3;
  EXPECT_EQ(errors(limits),
            (Strings{"t.xml:3: error: gpu 0 tb 0: over the limit of 3 steps "
                     "per tb: the tb has 4 steps, 1 too many",
                     "t.xml:14: error: gpu 1 tb 0: over the limit of 3 steps "
                     "per tb: the tb has 4 steps, 1 too many"}));
  limits.maxStepsPerTb = 4;
  EXPECT_EQ(errors(limits), Strings{});
}

TEST_F(VerifierTest, CountLimit) {
  RuntimeLimits limits;
  limits.maxCount = 2;
  alg.gpus[0].scratchChunks = 4;
  step(0, 1, 0).count = 4;
  step(0, 1, 0).srcOff = -2; // every error of the step is reported
  EXPECT_EQ(errors(limits),
            (Strings{"t.xml:10: error: gpu 0 tb 1 step 0: cnt 4 is over the "
                     "limit: cnt must be below 2 (3 too many)",
                     "t.xml:10: error: gpu 0 tb 1 step 0: srcoff -2 is "
                     "negative"}));
}

constexpr const char *Star =
    R"(<algo name="star" proto="LL" nchannels="1" nchunksperloop="3" ngpus="3" coll="allreduce" inplace="1">
  <gpu id="0" i_chunks="3" o_chunks="0" s_chunks="0">
    <tb id="0" send="1" recv="1" chan="0"/>
    <tb id="1" send="2" recv="2" chan="0"/>
  </gpu>
  <gpu id="1" i_chunks="3" o_chunks="0" s_chunks="0"/>
  <gpu id="2" i_chunks="3" o_chunks="0" s_chunks="0"/>
</algo>)";

TEST(VerifierLimitsTest, TbsPerChannelDirection) {
  Algorithm alg = test::parseValid(Star);
  RuntimeLimits limits;
  limits.maxTbsPerChannelDirection = 1;
  EXPECT_EQ(verifyDiagnostics(alg, Severity::Error, limits),
            (Strings{"t.xml:4: error: gpu 0 tb 1: over the limit of 1 tbs "
                     "sending on one channel: 2 tbs send on channel 0, 1 too "
                     "many",
                     "t.xml:4: error: gpu 0 tb 1: over the limit of 1 tbs "
                     "receiving on one channel: 2 tbs receive on channel 0, 1 "
                     "too many"}));
  limits.maxTbsPerChannelDirection = 2;
  EXPECT_EQ(verifyDiagnostics(alg, Severity::Error, limits), Strings{});
}

TEST(VerifierLimitsTest, TbsPerGpu) {
  Algorithm alg = test::parseValid(Star);
  RuntimeLimits limits;
  limits.maxTbsPerGpu = 1;
  EXPECT_EQ(verifyDiagnostics(alg, Severity::Error, limits),
            Strings{"t.xml:4: error: gpu 0 tb 1: over the limit of 1 tbs per "
                    "gpu: the gpu has 2 tbs, 1 too many"});
}

TEST_F(VerifierTest, ReceiveOffsetsDifferIsAWarning) {
  step(0, 0, 3).srcOff = 0;
  EXPECT_EQ(errors(), Strings{});
  EXPECT_EQ(verifyDiagnostics(alg, Severity::Warning),
            Strings{"t.xml:7: warning: gpu 0 tb 0 step 3: 'r' has srcoff 0 "
                    "but dstoff 1: srcoff is unused here, but receiving steps name "
                    "their local operand there"});
}

// A reducing receive whose local operand and destination are in different
// buffers names two places (an out-of-place reduce-scatter's last hop reads
// input block r and writes output block 0): its offsets differ by right. In
// one buffer, differing offsets are still worth a warning.
TEST_F(VerifierTest, ReducingReceiveAcrossBuffersMayDifferInOffset) {
  step(0, 0, 1).srcOff = 1;
  step(0, 0, 1).dstBuf = BufferKind::Scratch;
  step(0, 0, 1).dstOff = 0;
  EXPECT_EQ(errors(), Strings{});
  EXPECT_EQ(verifyDiagnostics(alg, Severity::Warning), Strings{});
  step(0, 0, 1).dstBuf = BufferKind::Input;
  EXPECT_EQ(verifyDiagnostics(alg, Severity::Warning),
            Strings{"t.xml:5: warning: gpu 0 tb 0 step 1: 'rrc' has srcoff 1 "
                    "but dstoff 0: srcoff is the local operand it reduces with"});
}

TEST_F(VerifierTest, NoGpus) {
  alg.gpus.clear();
  EXPECT_EQ(errors(), Strings{"t.xml:1: error: the algorithm has no gpus"});
}

TEST_F(VerifierTest, ReportsEveryViolation) {
  tb(0, 1).recvPeer = 0;
  step(0, 1, 0).count = 0;
  step(0, 0, 1).hasDep = false;
  alg.minBytes = 2;
  alg.maxBytes = 1;
  Strings reported = errors();
  EXPECT_EQ(reported.size(), 4u);
  DiagnosticList diags("t.xml");
  llvm::Expected<Analysis> analysis = verify(alg, diags);
  ASSERT_FALSE(bool(analysis));
  EXPECT_EQ(llvm::toString(analysis.takeError()),
            llvm::join(reported.begin(), reported.end(), "\n"));
}

} // namespace
} // namespace coll::ir
