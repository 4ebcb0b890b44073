//===- AlgorithmTest.cpp - Names and properties of the closed sets --------===//

#include "coll/ir/Algorithm.h"

#include <gtest/gtest.h>

namespace coll::ir {
namespace {

TEST(AlgorithmTest, StepTypeNamesRoundTrip) {
  const char *names[] = {"s",   "r",   "rcs",   "rrs",    "rrc",
                         "rrcs", "cpy", "re",   "nop",   "put",
                         "get", "getre", "signal", "wait"};
  ASSERT_EQ(std::size(names), NumStepTypes);
  for (unsigned i = 0; i < NumStepTypes; ++i) {
    auto type = static_cast<StepType>(i);
    EXPECT_EQ(stepTypeName(type), names[i]);
    EXPECT_EQ(parseStepType(names[i]), type);
  }
  EXPECT_EQ(parseStepType("S"), std::nullopt);
  EXPECT_EQ(parseStepType(""), std::nullopt);
  EXPECT_EQ(parseStepType("rrcs "), std::nullopt);
}

TEST(AlgorithmTest, StepTypeInfo) {
  StepTypeInfo rrcs = stepTypeInfo(StepType::RecvReduceCopySend);
  EXPECT_TRUE(rrcs.receives && rrcs.sends && rrcs.readsSrc && rrcs.reduces &&
              rrcs.writesDst);
  StepTypeInfo send = stepTypeInfo(StepType::Send);
  EXPECT_TRUE(send.sends && send.readsSrc);
  EXPECT_FALSE(send.receives || send.writesDst);
  StepTypeInfo recv = stepTypeInfo(StepType::Recv);
  EXPECT_TRUE(recv.receives && recv.writesDst);
  EXPECT_FALSE(recv.readsSrc || recv.sends);
  StepTypeInfo rrs = stepTypeInfo(StepType::RecvReduceSend);
  EXPECT_FALSE(rrs.writesDst);
  StepTypeInfo nop = stepTypeInfo(StepType::Nop);
  EXPECT_FALSE(nop.receives || nop.sends || nop.readsSrc || nop.writesDst);
  EXPECT_FALSE(nop.hasPeer() || rrcs.hasPeer());
  // Direct steps: one operand in the peer's memory, or a signal.
  StepTypeInfo put = stepTypeInfo(StepType::Put);
  EXPECT_TRUE(put.readsSrc && put.writesDst && put.direct == DirectRole::RemoteDst);
  StepTypeInfo getre = stepTypeInfo(StepType::GetReduce);
  EXPECT_TRUE(getre.reduces && getre.direct == DirectRole::RemoteSrc);
  EXPECT_FALSE(getre.receives || getre.sends);
  StepTypeInfo wait = stepTypeInfo(StepType::Wait);
  EXPECT_TRUE(wait.hasPeer() && !wait.readsSrc && !wait.writesDst);
}

TEST(AlgorithmTest, CollectiveNames) {
  struct Case {
    const char *name;
    Collective coll;
  } cases[] = {{"allreduce", Collective::AllReduce},
               {"allgather", Collective::AllGather},
               {"reducescatter", Collective::ReduceScatter},
               {"alltoall", Collective::AllToAll},
               {"broadcast", Collective::Broadcast},
               {"reduce", Collective::Reduce},
               {"gather", Collective::Gather},
               {"scatter", Collective::Scatter},
               {"custom", Collective::Custom}};
  for (const Case &c : cases) {
    EXPECT_EQ(collectiveName(c.coll), c.name);
    EXPECT_EQ(parseCollective(c.name), c.coll);
  }
  // The alias other tools write reads as the canonical collective.
  EXPECT_EQ(parseCollective("reduce_scatter"), Collective::ReduceScatter);
  EXPECT_EQ(parseCollective("AllReduce"), std::nullopt);
}

TEST(AlgorithmTest, CollectiveInfo) {
  CollectiveInfo allgather = collectiveInfo(Collective::AllGather);
  EXPECT_FALSE(allgather.inputPerRank);
  EXPECT_TRUE(allgather.outputPerRank);
  EXPECT_FALSE(allgather.hasRoot);
  CollectiveInfo scatter = collectiveInfo(Collective::Scatter);
  EXPECT_TRUE(scatter.hasRoot && scatter.inputPerRank);
  EXPECT_FALSE(scatter.outputPerRank);
  CollectiveInfo allreduce = collectiveInfo(Collective::AllReduce);
  EXPECT_TRUE(allreduce.reduces);
  EXPECT_EQ(allreduce.busMulN, 2);
  EXPECT_EQ(allreduce.busOffset, -2);
}

TEST(AlgorithmTest, ProtocolAndBufferNames) {
  for (Protocol proto : {Protocol::Simple, Protocol::LL, Protocol::LL128})
    EXPECT_EQ(parseProtocol(protocolName(proto)), proto);
  EXPECT_EQ(protocolName(Protocol::LL128), "LL128");
  EXPECT_EQ(parseProtocol("simple"), std::nullopt);
  for (BufferKind buffer :
       {BufferKind::Input, BufferKind::Output, BufferKind::Scratch})
    EXPECT_EQ(parseBuffer(bufferName(buffer)), buffer);
  EXPECT_EQ(bufferName(BufferKind::Scratch), "s");
  EXPECT_EQ(parseBuffer("input"), std::nullopt);
}

TEST(AlgorithmTest, CollectiveAttribute) {
  Algorithm alg;
  alg.collective = Collective::AllGather; // spelling left at "custom"
  EXPECT_EQ(collectiveAttribute(alg), "allgather");
  alg.collective = Collective::Custom;
  alg.collectiveSpelling = "allpairs_thing";
  EXPECT_EQ(collectiveAttribute(alg), "allpairs_thing");
}

TEST(AlgorithmTest, EqualityIgnoresLines) {
  Algorithm a;
  a.gpus.resize(1);
  a.gpus[0].tbs.resize(1);
  a.gpus[0].tbs[0].steps.resize(2);
  Algorithm b = a;
  b.line = 3;
  b.gpus[0].line = 4;
  b.gpus[0].tbs[0].line = 5;
  b.gpus[0].tbs[0].steps[1].line = 6;
  EXPECT_EQ(a, b);
  b.gpus[0].tbs[0].steps[1].hasDep = true;
  EXPECT_FALSE(a == b);
}

TEST(AlgorithmTest, HashFollowsEquality) {
  Algorithm a;
  a.name = "x";
  a.gpus.resize(2);
  a.gpus[0].tbs.resize(1);
  a.gpus[0].tbs[0].steps.resize(2);
  Algorithm b = a;
  b.line = 3;
  b.gpus[0].tbs[0].steps[1].line = 6;
  EXPECT_EQ(hashAlgorithm(a), hashAlgorithm(b)); // lines are not values
  // Any value differing changes it.
  auto differs = [&](auto change) {
    Algorithm c = a;
    change(c);
    EXPECT_FALSE(c == a);
    return hashAlgorithm(c) != hashAlgorithm(a);
  };
  EXPECT_TRUE(differs([](Algorithm &c) { c.name = "y"; }));
  EXPECT_TRUE(differs([](Algorithm &c) { c.protocol = Protocol::LL; }));
  EXPECT_TRUE(differs([](Algorithm &c) { c.gpus[1].scratchChunks = 1; }));
  EXPECT_TRUE(differs([](Algorithm &c) { c.gpus[0].tbs[0].channel = 1; }));
  EXPECT_TRUE(differs([](Algorithm &c) { c.gpus[0].tbs[0].steps[1].depStep = 0; }));
  EXPECT_TRUE(differs([](Algorithm &c) { c.gpus[0].tbs[0].steps[0].count = 2; }));
  // Steps moved between tbs or ranks are another algorithm.
  EXPECT_TRUE(differs([](Algorithm &c) {
    c.gpus[0].tbs.resize(2);
    c.gpus[0].tbs[1].steps.push_back(c.gpus[0].tbs[0].steps.back());
    c.gpus[0].tbs[0].steps.pop_back();
  }));
  EXPECT_TRUE(differs([](Algorithm &c) { c.condition = Definition(); }));
  EXPECT_TRUE(differs([](Algorithm &c) {
    c.gpus[0].tbs[0].steps[0].type = StepType::Put;
    c.gpus[0].tbs[0].steps[0].peer = 1;
  }));
  Algorithm direct = a, other = a;
  direct.gpus[0].tbs[0].steps[0].type = other.gpus[0].tbs[0].steps[0].type = StepType::Put;
  direct.gpus[0].tbs[0].steps[0].peer = 1;
  EXPECT_TRUE(direct.hasDirectSteps());
  EXPECT_FALSE(a.hasDirectSteps());
  EXPECT_FALSE(direct == other);
  EXPECT_NE(hashAlgorithm(direct), hashAlgorithm(other));
}

} // namespace
} // namespace coll::ir
