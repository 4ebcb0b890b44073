//===- VerifyTest.cpp - Verification, limits, modes, determinism ----------===//

#include "CompilerTest.h"
#include "TestPrograms.h"

#include <map>
#include <set>
#include <tuple>

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

// The in-place ring reduce-scatter's last hop receives into block c of the
// owner's input, which in place is its output: the receive reduces with the
// input under its read name and stores under its write name (output block
// 0), so out of place it reads the input and writes the output, and the
// program is right in both modes.
TEST(Modes, InPlaceRingReduceScatterIsRightOutOfPlaceToo) {
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
  EXPECT_TRUE(c.alg().outofplace);
  int lastHops = 0;
  for (int g = 0; g < 3; ++g)
    for (const ir::ThreadBlock &tb : c.alg().gpus[g].tbs)
      for (const ir::Step &st : tb.steps)
        if (st.type == ir::StepType::RecvReduceCopy) {
          ++lastHops;
          EXPECT_EQ(st.srcBuf, ir::BufferKind::Input);
          EXPECT_EQ(st.srcOff, g);
          EXPECT_EQ(st.dstBuf, ir::BufferKind::Output);
          EXPECT_EQ(st.dstOff, 0);
        }
  EXPECT_EQ(lastHops, 3);
}

// Where the last hop is a local reduction into the owner's input block
// (received into scratch first), in place it adds into the output, out of
// place into an output nothing wrote: right in place only.
TEST(Modes, InPlaceReduceScatterAddingIntoItsInputIsInPlaceOnly) {
  Compilation c(R"(
param N = 3
collective reducescatter(ranks = N, chunks = 1, inplace = true)
for c in 0..N {
    let acc = chunk((c + 1) % N, input, c)
    for k in 2..N { acc = chunk((c + k) % N, input, c).reduce(acc) }
    chunk(c, input, c).reduce(acc.copy(c, scratch, 0))
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
// Direct operations: the signals and waits the compiler adds
//===----------------------------------------------------------------------===//

const std::string DirectTwoShot = coll::test::directTwoShotProgram(3);
const std::string DirectPutRing = coll::test::directPutRingProgram(3);

bool isSync(StepType type) {
  return type == StepType::Signal || type == StepType::Wait;
}

TEST(Direct, SignalsAndWaitsPairUp) {
  for (const std::string &program : {DirectTwoShot, DirectPutRing}) {
    Compilation c(program);
    ASSERT_TRUE(c.ok()) << c.text();
    EXPECT_TRUE(c.alg().hasDirectSteps());
    // Per (sender, receiver, channel): as many signals as waits, each on
    // one tb of its rank.
    std::map<std::tuple<int, int, int>, int> signals, waits;
    std::map<std::tuple<int, int, int>, std::set<int>> signalTbs, waitTbs;
    for (int g = 0; g < c.alg().ngpus(); ++g)
      for (size_t t = 0; t < c.alg().gpus[g].tbs.size(); ++t) {
        const ir::ThreadBlock &tb = c.alg().gpus[g].tbs[t];
        for (const ir::Step &step : tb.steps) {
          if (step.type == StepType::Signal) {
            ++signals[{g, step.peer, tb.channel}];
            signalTbs[{g, step.peer, tb.channel}].insert(int(t));
          } else if (step.type == StepType::Wait) {
            ++waits[{step.peer, g, tb.channel}];
            waitTbs[{step.peer, g, tb.channel}].insert(int(t));
          }
        }
      }
    EXPECT_FALSE(signals.empty());
    EXPECT_EQ(signals, waits);
    for (auto &[key, tbs] : signalTbs)
      EXPECT_EQ(tbs.size(), 1u);
    for (auto &[key, tbs] : waitTbs)
      EXPECT_EQ(tbs.size(), 1u);
  }
}

TEST(Direct, EveryOrderingTheCompilerAddsIsNeeded) {
  // Mutants: each dependency to or from a signal or wait dropped, and each
  // signal with its wait turned into nops. Re-verification must refuse
  // every one (a race with a peer's access, or with the call's start or
  // end), so none of them is decoration: the pairs that the tb order made
  // redundant (in DirectPutRing, a start signal implied by a later data
  // signal from the same peer) are pruned (docs/COMPILER.md, "Signals").
  const std::string oneShot = R"(
param N = 3
collective allreduce(ranks = N, chunks = 1)
for r in 0..N {
    let acc = chunk(r, input, 0).copy(r, output, 0)
    for p in 0..N { if p != r { acc.get_reduce(chunk(p, input, 0)) } }
}
)";
  for (const std::string &program : {DirectTwoShot, oneShot, DirectPutRing}) {
    Compilation c(program);
    ASSERT_TRUE(c.ok()) << c.text();
    const ir::Algorithm &alg = c.alg();
    int mutants = 0;
    std::string survivors;
    auto check = [&](Schedule &edited, const std::string &what) {
      for (ir::Gpu &gpu : edited.algorithm.gpus) {
        for (ir::ThreadBlock &tb : gpu.tbs)
          for (ir::Step &step : tb.steps)
            step.hasDep = false;
        for (ir::ThreadBlock &tb : gpu.tbs)
          for (ir::Step &step : tb.steps)
            if (step.hasDependency())
              gpu.tbs[step.depTb].steps[step.depStep].hasDep = true;
      }
      ++mutants;
      if (c.reverify(edited))
        survivors += what + "\n";
    };
    for (int g = 0; g < alg.ngpus(); ++g)
      for (size_t t = 0; t < alg.gpus[g].tbs.size(); ++t)
        for (size_t s = 0; s < alg.gpus[g].tbs[t].steps.size(); ++s) {
          const ir::Step &step = alg.gpus[g].tbs[t].steps[s];
          std::string at = "rank " + std::to_string(g) + " tb " +
                           std::to_string(t) + " step " + std::to_string(s);
          if (step.hasDependency() &&
              (isSync(step.type) ||
               isSync(alg.gpus[g].tbs[step.depTb].steps[step.depStep].type))) {
            Schedule edited = *c.schedule;
            ir::Step &e = edited.algorithm.gpus[g].tbs[t].steps[s];
            e.depTb = e.depStep = -1;
            check(edited, "without the dependency of " + at);
          }
          if (step.type == StepType::Wait) {
            // Its signal: the same ordinal among the peer's signals to g on
            // this channel.
            int channel = alg.gpus[g].tbs[t].channel, ordinal = 0;
            for (size_t k = 0; k < s; ++k)
              ordinal += alg.gpus[g].tbs[t].steps[k].type == StepType::Wait &&
                         alg.gpus[g].tbs[t].steps[k].peer == step.peer;
            Schedule edited = *c.schedule;
            ir::Gpu &peer = edited.algorithm.gpus[step.peer];
            bool found = false;
            for (ir::ThreadBlock &tb : peer.tbs)
              for (ir::Step &sig : tb.steps)
                if (!found && tb.channel == channel &&
                    sig.type == StepType::Signal && sig.peer == g &&
                    ordinal-- == 0) {
                  sig.type = StepType::Nop;
                  sig.peer = -1;
                  found = true;
                }
            ASSERT_TRUE(found) << at;
            ir::Step &e = edited.algorithm.gpus[g].tbs[t].steps[s];
            e.type = StepType::Nop;
            e.peer = -1;
            check(edited, "without the signal of " + at);
          }
        }
    EXPECT_GT(mutants, 10);
    EXPECT_EQ(survivors, "") << mutants << " mutants";
  }
}

TEST(Direct, MscclTargetRefusesAtTheOperation) {
  Compilation c(DirectTwoShot, msccl());
  EXPECT_FALSE(c.ok());
  EXPECT_NE(c.firstLine().find("test.coll:3:64:"), std::string::npos)
      << c.text();
  EXPECT_NE(c.text().find("is a direct step, which MSCCL XML does not have"),
            std::string::npos)
      << c.text();
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
