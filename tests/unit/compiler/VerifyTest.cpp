//===- VerifyTest.cpp - Verification, limits, modes, determinism ----------===//

#include "CompilerTest.h"
#include "TestPrograms.h"

using namespace coll;
using namespace coll::compiler;
using namespace coll::compiler::test;
using coll::test::ringAllGatherProgram;
using coll::test::ringAllReduceProgram;
using ir::StepType;

namespace {

Config msccl() {
  Config setup;
  setup.options.target = Target::Msccl;
  return setup;
}

//===----------------------------------------------------------------------===//
// Modes
//===----------------------------------------------------------------------===//

TEST(Modes, InPlaceRingIsAlsoRightOutOfPlace) {
  Compilation c(ringAllReduceProgram(4));
  ASSERT_TRUE(c.ok()) << c.text();
  EXPECT_TRUE(c.alg().inplace);
  EXPECT_TRUE(c.alg().outofplace);
  EXPECT_TRUE(c.schedule->inPlaceDependencies);
}

TEST(Modes, AllPairsAlltoallInPlaceDependsOnTheTbs) {
  // In program order the program is wrong in place (a block is overwritten
  // before it is sent), so no extra dependencies are made for that mode.
  // Yet one tb per peer sends block p before it receives into it: right in
  // place too, and nothing races.
  const char *program = R"(
collective alltoall(ranks = 3, chunks = 1)
for s in 0..3 { for d in 0..3 { chunk(s, input, d).copy(d, output, s%0) } }
)";
  std::string paired = program, apart = program;
  paired.replace(paired.find("%0"), 2, "");
  apart.replace(apart.find("%0"), 2, ", ch = (d - s) % 3");
  Compilation c(paired);
  ASSERT_TRUE(c.ok()) << c.text();
  EXPECT_FALSE(c.schedule->inPlaceDependencies);
  EXPECT_TRUE(c.alg().inplace);
  EXPECT_TRUE(c.alg().outofplace);
  // With the send to and the receive from a peer on different channels,
  // hence tbs, the receive may overwrite a block before it is sent.
  Compilation d(apart);
  ASSERT_TRUE(d.ok()) << d.text();
  EXPECT_FALSE(d.alg().inplace);
  EXPECT_TRUE(d.alg().outofplace);
}

TEST(Modes, InPlaceReduceScatterWritesItsInput) {
  Compilation c(R"(
param N = 3
collective reducescatter(ranks = N, chunks = 1, inplace = true)
for c in 0..N {
    let acc = chunk((c + 1) % N, input, c)
    for k in 2..N+1 { acc = chunk((c + k) % N, input, c).reduce(acc) }
}
)");
  ASSERT_TRUE(c.ok()) << c.text();
  EXPECT_TRUE(c.alg().inplace);
  EXPECT_FALSE(c.alg().outofplace);
}

TEST(Modes, OutOfPlaceAllgatherIsAlsoRightInPlace) {
  Compilation c(ringAllGatherProgram(3));
  ASSERT_TRUE(c.ok()) << c.text();
  EXPECT_TRUE(c.alg().inplace);
  EXPECT_TRUE(c.alg().outofplace);
  EXPECT_TRUE(c.schedule->inPlaceDependencies);
}

//===----------------------------------------------------------------------===//
// Limits
//===----------------------------------------------------------------------===//

TEST(Limits, StepsPerTb) {
  // 33 ranks: 2*33-1 = 65 steps in every rank's one tb.
  Compilation c(ringAllReduceProgram(33), msccl());
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.firstLine(),
            "test.coll:9:15: error: target msccl: rank 0 tb 0: over the limit "
            "of 64 steps per tb: the tb has 65 steps, 1 too many");
  EXPECT_NE(c.text().find("23 more steps or tbs are over the limits of "
                          "target msccl"),
            std::string::npos)
      << c.text();
  // The interpreter has no such limit.
  EXPECT_TRUE(Compilation(ringAllReduceProgram(33)).ok());
}

TEST(Limits, Count) {
  Compilation c(R"(
collective broadcast(ranks = 2, chunks = 80, root = 0)
chunk(0, input, 0, size = 80).copy(0, output, 0)
chunk(0, output, 0, size = 80).copy(1, output, 0)
)",
                msccl());
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.firstLine(),
            "test.coll:3:31: error: target msccl: rank 0 tb 0 step 0: cnt 80 "
            "is over the limit: cnt must be below 72 (9 too many)");
}

TEST(Limits, TbsPerChannel) {
  Compilation c(R"(
param N = 34
collective gather(ranks = N, chunks = 1, root = 0)
for r in 0..N { chunk(r, input, 0).copy(0, output, r) }
)",
                msccl());
  EXPECT_FALSE(c.ok());
  EXPECT_NE(c.firstLine().find(
                "error: target msccl: rank 0 tb 33: over the limit of 32 tbs "
                "receiving on one channel: 33 tbs receive on channel 0, 1 too "
                "many"),
            std::string::npos)
      << c.text();
}

//===----------------------------------------------------------------------===//
// Re-verification of edited schedules
//===----------------------------------------------------------------------===//

TEST(Reverify, CompiledSchedulesVerify) {
  Compilation c(ringAllReduceProgram(4));
  ASSERT_TRUE(c.ok()) << c.text();
  std::optional<Modes> modes = c.reverify(*c.schedule);
  ASSERT_TRUE(modes);
  EXPECT_TRUE(modes->inplace && modes->outofplace);
}

TEST(Reverify, CycleIsLocatedAtTheOperations) {
  // Two ranks exchange a chunk: each tb sends, then receives. Receiving
  // first on both ranks makes each wait for the other.
  Compilation c(R"(
collective alltoall(ranks = 2, chunks = 1)
chunk(0, input, 0).copy(0, output, 0)
chunk(1, input, 1).copy(1, output, 1)
chunk(0, input, 1).copy(1, output, 0)
chunk(1, input, 0).copy(0, output, 1)
)");
  ASSERT_TRUE(c.ok()) << c.text();
  Schedule edited = *c.schedule;
  for (int g = 0; g < 2; ++g)
    for (size_t t = 0; t < edited.algorithm.gpus[g].tbs.size(); ++t) {
      auto &steps = edited.algorithm.gpus[g].tbs[t].steps;
      auto &origins = edited.origins[g][t];
      if (steps.size() == 2) {
        std::swap(steps[0], steps[1]);
        std::swap(origins[0], origins[1]);
      }
    }
  c.text();
  size_t before = c.diagText.size();
  EXPECT_FALSE(c.reverify(edited));
  std::string report = c.text().substr(before);
  EXPECT_NE(report.find("test.coll:6:20: error: deadlock: rank 0 tb 1 step 0 "
                        "('r' from rank 1) waits forever, and so does 1 other "
                        "step"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("test.coll:5:20: note: rank 1 tb 1 step 0 ('r' from "
                        "rank 0) waits here"),
            std::string::npos)
      << report;
}

TEST(Reverify, WrongDataIsACompilerBug) {
  Compilation c(ringAllReduceProgram(3));
  ASSERT_TRUE(c.ok()) << c.text();
  Schedule edited = *c.schedule;
  ir::Step &last = edited.algorithm.gpus[1].tbs[0].steps.back();
  ASSERT_EQ(last.type, StepType::Recv);
  last.dstOff = (last.dstOff + 1) % 3; // lands in the wrong chunk
  last.srcOff = last.dstOff;
  c.text();
  size_t before = c.diagText.size();
  EXPECT_FALSE(c.reverify(edited));
  EXPECT_NE(c.text().substr(before).find(
                "error: internal compiler error: the compiled IR does not "
                "implement the collective in place"),
            std::string::npos)
      << c.text().substr(before);
}

TEST(Reverify, MissingDependencyIsARace) {
  // Rank 0 receives two chunks in two tbs and sends both from a third; without
  // the send's own dependency, one receive may still be writing what it
  // sends (the symbolic execution alone, in one order, would not notice).
  Compilation c(R"(
collective custom(ranks = 4, input = 1, output = 2) {
    post { expect(3, 0, contrib(1, 0)) expect(3, 1, contrib(2, 0)) }
}
chunk(1, input, 0).copy(0, scratch, 0)
chunk(2, input, 0).copy(0, scratch, 1)
chunk(0, scratch, 0, size = 2).copy(3, output, 0)
)");
  ASSERT_TRUE(c.ok()) << c.text();
  Schedule edited = *c.schedule;
  // The send waits for the tb of the second receive, whose nop waits for
  // the first: without the nop's wait, nothing orders the first receive.
  ASSERT_EQ(edited.algorithm.gpus[0].tbs[2].steps[0].type, StepType::Send);
  ir::Step &nop = edited.algorithm.gpus[0].tbs[1].steps[1];
  ASSERT_EQ(nop.type, StepType::Nop);
  nop.depTb = nop.depStep = -1;
  c.text();
  size_t before = c.diagText.size();
  EXPECT_FALSE(c.reverify(edited));
  EXPECT_NE(c.text().substr(before).find(
                "test.coll:7:32: error: internal compiler error: nothing "
                "orders rank 0 tb 2 step 0 ('s' to rank 3) after rank 0 tb 0 "
                "step 0 ('r' from rank 1), which both access s[0]"),
            std::string::npos)
      << c.text().substr(before);
}

//===----------------------------------------------------------------------===//
// Retrying without fusion
//===----------------------------------------------------------------------===//

TEST(Retry, BigForwardBackToItsSenderIsUnfused) {
  // Rank 0 sends 20 chunks to rank 1, which forwards them back: fused, the
  // forward cannot finish before rank 0 receives, which it cannot before
  // its own send finishes (8-slot FIFOs). Unfused, rank 1 receives all of
  // it first.
  Compilation c(R"(
collective custom(ranks = 2, input = 20, output = 20) {
    post { for j in 0..20 { expect(0, j, contrib(0, j)) } }
}
chunk(0, input, 0, size = 20).copy(1, scratch, 0).copy(0, output, 0)
)");
  ASSERT_TRUE(c.ok()) << c.text();
  EXPECT_FALSE(c.schedule->fused);
  EXPECT_EQ(stepTypes(c.alg(), 1), "s:1 r:1");
}

//===----------------------------------------------------------------------===//
// Determinism
//===----------------------------------------------------------------------===//

TEST(Determinism, SameInputSameBytes) {
  const char *hierarchical = R"(
param G = 2
param L = 3
collective alltoall(ranks = G * L, chunks = 2)
fn group(r) { return r / L }
fn local(r) { return r % L }
for src in 0..G * L {
    for dst in 0..G * L {
        for j in 0..2 {
            let c = chunk(src, input, dst * 2 + j)
            let gate = group(c.dest_rank) * L + local(src)
            if gate != src { c = c.copy(gate, scratch, src * 2 + j) }
            c.copy(c.dest_rank, output, c.dest_index)
        }
    }
}
)";
  Config setup;
  setup.edit = [](lang::ChunkDag &dag) { dag.options.instances = 2; };
  Compilation a(hierarchical, setup), b(hierarchical, setup);
  ASSERT_TRUE(a.ok()) << a.text();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a.xml(), b.xml());
  EXPECT_EQ(a.dump(), b.dump());
}

} // namespace
