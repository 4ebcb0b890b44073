//===- PassesTest.cpp - Refinement, lowering, dependencies, fusion, nops --===//

#include "CompilerTest.h"
#include "TestPrograms.h"

using namespace coll;
using namespace coll::compiler;
using namespace coll::compiler::test;
using coll::test::ringAllReduceProgram;
using ir::BufferKind;
using ir::StepType;

namespace {

const std::string Ring = ringAllReduceProgram();

/// A copy of two chunks from rank 0 to rank 1, then one of them onwards.
const char *const Aggregated = R"(
collective custom(ranks = 3, input = 2, output = 2) {
    post { expect(1, 0, contrib(0, 0)) expect(1, 1, contrib(0, 1))
           expect(2, 1, contrib(0, 1)) }
}
chunk(0, input, 0, size = 2).copy(1, output, 0)
chunk(1, output, 1).copy(2, output, 1)
)";

Config withInstances(int32_t n) {
  Config setup;
  setup.edit = [n](lang::ChunkDag &dag) { dag.options.instances = n; };
  return setup;
}

//===----------------------------------------------------------------------===//
// Layout and lowering
//===----------------------------------------------------------------------===//

TEST(Layout, InstancesRefineChunksAndAddLanes) {
  Compilation c(Aggregated, withInstances(2));
  ASSERT_TRUE(c.dag) << c.text();
  c.dag->options.instances = 2;
  auto prog = lowered(*c.dag, c.diags);
  ASSERT_TRUE(prog);
  EXPECT_EQ(prog->layout.refinement, 2);
  EXPECT_EQ(prog->lanes, 2);
  EXPECT_EQ(prog->layout.chunksPerBlock, 4);
  EXPECT_EQ(prog->layout.inputChunks, 4);
  // Op 0 (two chunks = four refined ones) in two contiguous parts on two
  // channels; op 1 (one chunk) in two halves.
  ASSERT_EQ(prog->instrs.size(), 8u);
  const Instr &s0 = prog->instrs[0], &s1 = prog->instrs[2];
  EXPECT_EQ(s0.type, StepType::Send);
  EXPECT_EQ(s0.src, (Slot{BufferKind::Input, 0}));
  EXPECT_EQ(s0.count, 2);
  EXPECT_EQ(s0.channel, 0);
  EXPECT_EQ(s1.src, (Slot{BufferKind::Input, 2}));
  EXPECT_EQ(s1.channel, 1);
  EXPECT_EQ(s1.lane, 1);
  const Instr &fwd1 = prog->instrs[6];
  EXPECT_EQ(fwd1.src, (Slot{BufferKind::Output, 3}));
  EXPECT_EQ(fwd1.count, 1);
  // Refined dependencies: the forward's second half reads what the second
  // part of op 0 wrote, not the first.
  EXPECT_EQ(fwd1.deps, (llvm::SmallVector<InstrId, 2>{3}));
  EXPECT_EQ(prog->instrs[4].deps, (llvm::SmallVector<InstrId, 2>{3}));
}

TEST(Layout, ParallelFactorsUseTheirLcm) {
  Compilation c(R"(
collective allgather(ranks = 2, chunks = 1)
parallelize(2) { chunk(0, input, 0).copy(0, output, 0) }
parallelize(3) { chunk(0, input, 0).copy(1, output, 0) }
chunk(1, input, 0).copy(1, output, 1)
chunk(1, input, 0).copy(0, output, 1)
)");
  ASSERT_TRUE(c.ok()) << c.text();
  auto prog = lowered(*c.dag, c.diags);
  EXPECT_EQ(prog->layout.refinement, 6);
  EXPECT_EQ(prog->lanes, 3);
  EXPECT_EQ(c.schedule->refinement, 6);
  EXPECT_EQ(c.alg().nchunksPerLoop, 12); // 6 refined chunks x 2 blocks
  EXPECT_EQ(c.alg().nchannels, 3);
  // parallelize(3): three sends of two refined chunks on channels 0, 1, 2.
  int sends = 0;
  for (const ir::ThreadBlock &tb : c.alg().gpus[0].tbs)
    for (const ir::Step &step : tb.steps)
      if (step.type == StepType::Send) {
        EXPECT_EQ(step.count, 2);
        EXPECT_EQ(step.srcOff, 2 * tb.channel);
        ++sends;
      }
  EXPECT_EQ(sends, 3);
}

TEST(Layout, ChannelHintsRepeatPerLane) {
  Compilation c(R"(
collective broadcast(ranks = 2, chunks = 1, root = 0)
chunk(0, input, 0).copy(0, output, 0)
chunk(0, output, 0).copy(1, output, 0, ch = 2)
)",
                withInstances(2));
  ASSERT_TRUE(c.ok()) << c.text();
  // Channels 0..2 for lane 0, 3..5 for lane 1.
  EXPECT_EQ(c.alg().nchannels, 6);
  std::vector<int32_t> channels;
  for (const ir::ThreadBlock &tb : c.alg().gpus[1].tbs)
    channels.push_back(tb.channel);
  EXPECT_EQ(channels, (std::vector<int32_t>{2, 5}));
}

TEST(Layout, NamedScratchBuffersAreConsecutive) {
  Compilation c(R"(
collective allgather(ranks = 2, chunks = 1)
for r in 0..2 {
    chunk(r, input, 0).copy(r, scratch("a"), 0)
    chunk(r, scratch("a"), 0).copy(r, scratch, 1)
    chunk(r, scratch, 1).copy(1 - r, scratch("b"), 0)
    chunk(1 - r, scratch("b"), 0).copy(1 - r, output, r)
    chunk(r, scratch, 1).copy(r, output, r)
}
)");
  ASSERT_TRUE(c.ok()) << c.text();
  // scratch (2 chunks), then "a" (1), then "b" (1).
  EXPECT_EQ(c.alg().gpus[0].scratchChunks, 4);
  EXPECT_NE(c.dump().find("cpy   src=s[2+1] dst=s[1+1]"), std::string::npos)
      << c.dump();
  EXPECT_NE(c.dump().find("r     src=s[3+1] dst=s[3+1]"), std::string::npos)
      << c.dump();
}

TEST(Lowering, InPlaceReadsUntouchedInputAndWritesOutput) {
  Compilation c(Ring);
  ASSERT_TRUE(c.ok()) << c.text();
  const ir::Algorithm &alg = c.alg();
  EXPECT_TRUE(alg.inplace);
  EXPECT_TRUE(alg.outofplace);
  // The first send of each rank reads its own untouched chunk from i; the
  // final receive writes o.
  const std::vector<ir::Step> &steps = alg.gpus[0].tbs[0].steps;
  EXPECT_EQ(steps.front().type, StepType::Send);
  EXPECT_EQ(steps.front().srcBuf, BufferKind::Input);
  EXPECT_EQ(steps.back().type, StepType::Recv);
  EXPECT_EQ(steps.back().dstBuf, BufferKind::Output);
  for (const ir::Step &step : steps) {
    if (ir::stepTypeInfo(step.type).receives) {
      EXPECT_EQ(step.srcOff, step.dstOff) << "srcoff names the local slot";
    }
  }
}

TEST(Lowering, RemoteReduceIsSendAndRrc) {
  Compilation c(R"(
collective reduce(ranks = 2, chunks = 1, root = 1)
chunk(1, input, 0).copy(1, output, 0)
chunk(1, output, 0).reduce(chunk(0, input, 0))
)");
  ASSERT_TRUE(c.ok()) << c.text();
  EXPECT_EQ(stepTypes(c.alg(), 0), "s:1");
  EXPECT_EQ(stepTypes(c.alg(), 1), "rrc:1 cpy:1");
  const ir::Step &rrc = c.alg().gpus[1].tbs[0].steps.back();
  EXPECT_EQ(rrc.type, StepType::RecvReduceCopy);
  EXPECT_EQ(rrc.srcBuf, BufferKind::Output);
  EXPECT_EQ(rrc.srcOff, 0);
  EXPECT_EQ(rrc.dstOff, 0);
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

TEST(Fusion, RingAllReduceBecomesRrsRrcsRcs) {
  Compilation c(Ring);
  ASSERT_TRUE(c.ok()) << c.text();
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(stepTypes(c.alg(), r), "s:1 r:1 rcs:2 rrs:2 rrcs:1") << r;
  EXPECT_TRUE(c.schedule->fused);
  // One tb per rank, in the classic ring order.
  std::string dump = c.dump();
  EXPECT_NE(dump.find("  tb 0: send=1 recv=3 chan=0\n"
                      "    0: s     src=i[0+1] dst=o[0+1] ; %0 @6:42\n"
                      "    1: rrs   src=i[3+1] dst=i[3+1] ; %18 @6:42 then "
                      "%19 @6:42\n"),
            std::string::npos)
      << dump;
}

TEST(Fusion, CanBeTurnedOff) {
  Config setup;
  setup.edit = [](lang::ChunkDag &dag) { dag.options.fusion = false; };
  Compilation c(Ring, setup);
  ASSERT_TRUE(c.ok()) << c.text();
  EXPECT_FALSE(c.schedule->fused);
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(stepTypes(c.alg(), r), "s:6 r:3 rrc:3") << r;
}

TEST(Fusion, OnlyOneForwardOfAReceiveFuses) {
  Compilation c(R"(
collective broadcast(ranks = 4, chunks = 1, root = 0)
chunk(0, input, 0).copy(0, output, 0)
let c = chunk(0, output, 0).copy(1, output, 0)
c.copy(2, output, 0)
c.copy(3, output, 0)
)");
  ASSERT_TRUE(c.ok()) << c.text();
  EXPECT_EQ(stepTypes(c.alg(), 1), "s:1 rcs:1");
}

TEST(Fusion, ForwardOnAnotherChannelStaysSeparate) {
  Compilation c(R"(
collective broadcast(ranks = 3, chunks = 1, root = 0)
chunk(0, input, 0).copy(0, output, 0)
chunk(0, output, 0).copy(1, output, 0).copy(2, output, 0, ch = 1)
)");
  ASSERT_TRUE(c.ok()) << c.text();
  EXPECT_EQ(stepTypes(c.alg(), 1), "s:1 r:1");
}

TEST(Fusion, ReceiveThatWouldOvertakeItsDependenciesStaysSeparate) {
  // Rank 2 reads scratch[0] (op 2) before the forwarded copy (op 3)
  // overwrites it; fused, that receive would be ordered with op 0, before
  // op 2, so op 3's send stays separate.
  Compilation c(R"(
collective broadcast(ranks = 3, chunks = 1, root = 0)
chunk(0, input, 0).copy(1, output, 0)
chunk(0, input, 0).copy(2, scratch, 0)
chunk(2, scratch, 0).copy(2, output, 0)
chunk(1, output, 0).copy(2, scratch, 0)
chunk(0, input, 0).copy(0, output, 0)
)");
  ASSERT_TRUE(c.ok()) << c.text();
  EXPECT_EQ(stepTypes(c.alg(), 1), "s:1 r:1");
}

TEST(Fusion, DeadStoreOnlyWhereNothingNeedsIt) {
  // A reduce chain 0 -> 1 -> 2: rank 1's partial sum is read by nothing
  // but its own forward (rrs), the root's is the result (rrc).
  const char *chain = R"(
collective reduce(ranks = 3, chunks = 1, root = 2, inplace = true)
let acc = chunk(0, input, 0)
acc = chunk(1, input, 0).reduce(acc)
acc = chunk(2, input, 0).reduce(acc)
)";
  Compilation c(chain);
  ASSERT_TRUE(c.ok()) << c.text();
  EXPECT_EQ(stepTypes(c.alg(), 1), "rrs:1");
  EXPECT_EQ(stepTypes(c.alg(), 2), "rrc:1");
  // Once something else reads the partial sum, it is stored.
  Compilation kept(R"(
collective reduce(ranks = 3, chunks = 1, root = 2, inplace = true)
let acc = chunk(0, input, 0)
acc = chunk(1, input, 0).reduce(acc)
acc.copy(1, scratch, 0)
acc = chunk(2, input, 0).reduce(acc)
)");
  ASSERT_TRUE(kept.ok()) << kept.text();
  EXPECT_EQ(stepTypes(kept.alg(), 1), "rrcs:1 cpy:1");
}

/// The lengths of the runs of `re` steps of a tb that the runtimes execute
/// as one reduction (docs/INTERPRETER.md, "Fusion"), as "1 16 ...".
std::string reduceGroups(const ir::ThreadBlock &tb) {
  std::string text;
  int run = 0;
  auto flush = [&] {
    if (run)
      text += (text.empty() ? "" : " ") + std::to_string(run);
    run = 0;
  };
  for (size_t s = 0; s < tb.steps.size(); ++s) {
    const ir::Step &step = tb.steps[s];
    const ir::Step *prev = s ? &tb.steps[s - 1] : nullptr;
    bool joins = run && step.type == StepType::Reduce &&
                 prev->type == StepType::Reduce && !prev->hasDep &&
                 !step.hasDependency() && step.dstBuf == prev->dstBuf &&
                 step.dstOff == prev->dstOff && step.srcBuf == prev->srcBuf &&
                 step.count == prev->count && run < 16;
    if (!joins)
      flush();
    if (step.type == StepType::Reduce)
      ++run;
  }
  flush();
  return text;
}

TEST(Fusion, ReductionsIntoOneDestinationFuseUpToSixteenSources) {
  // One-shot allreduce over 18 ranks: rank 0 adds 17 received buffers into
  // its own, in one tb; the first 16 are one group, the 17th waits on its
  // own.
  Compilation c(R"(
param N = 18
collective allreduce(ranks = N, chunks = 1, inplace = true)
for r in 0..N { for p in 0..N { if p != r {
    chunk(p, input, 0).copy(r, scratch, (p - r - 1) % N)
} } }
for r in 0..N { for p in 0..N { if p != r {
    chunk(r, input, 0).reduce(chunk(r, scratch, (p - r - 1) % N))
} } }
)");
  ASSERT_TRUE(c.ok()) << c.text();
  std::string groups;
  for (const ir::ThreadBlock &tb : c.alg().gpus[0].tbs)
    if (!reduceGroups(tb).empty())
      groups += (groups.empty() ? "" : "; ") + reduceGroups(tb);
  EXPECT_EQ(groups, "16 1");
}

TEST(Fusion, ReductionGroupsStopAtWhatTheyCannotHoist) {
  // Rank 0 adds in(1), in(2) and in(0)'s second chunk into its first
  // chunk. The partial sum after in(1) is sent to rank 1, so the group
  // ends there; the local input is another source buffer, so it ends again.
  Compilation c(R"(
collective custom(ranks = 3, input = 2, output = 2) {
    post {
        expect(0, 0, contrib(0, 0)) expect(0, 0, contrib(1, 0))
        expect(0, 0, contrib(2, 0)) expect(0, 0, contrib(0, 1))
        expect(1, 1, contrib(0, 0)) expect(1, 1, contrib(1, 0))
    }
}
chunk(1, input, 0).copy(0, scratch, 0)
chunk(2, input, 0).copy(0, scratch, 1)
chunk(0, input, 0).copy(0, scratch, 2)
let acc = chunk(0, scratch, 2)
acc.reduce(chunk(0, scratch, 0))
acc.copy(1, output, 1)
acc.reduce(chunk(0, scratch, 1))
acc.reduce(chunk(0, input, 1))
acc.copy(0, output, 0)
)");
  ASSERT_TRUE(c.ok()) << c.text();
  std::string groups;
  for (const ir::ThreadBlock &tb : c.alg().gpus[0].tbs)
    if (!reduceGroups(tb).empty())
      groups += (groups.empty() ? "" : "; ") + reduceGroups(tb);
  EXPECT_EQ(stepTypes(c.alg(), 0), "s:1 r:2 cpy:2 re:3");
  EXPECT_EQ(groups, "1 1; 1") << "nothing fuses";
}

TEST(Fusion, ReductionsFuseIntoOneWait) {
  // All-pairs reduce-scatter on 3 ranks: each rank's two `re` are one group
  // whose first step carries the only wait; off, each waits on its own.
  const char *program = R"(
collective reducescatter(ranks = 3, chunks = 1, inplace = true)
for r in 0..3 { for p in 0..3 { if p != r {
    chunk(p, input, r).copy(r, scratch, p)
} } }
for r in 0..3 { for p in 0..3 { if p != r {
    chunk(r, input, r).reduce(chunk(r, scratch, p))
} } }
)";
  Compilation c(program);
  ASSERT_TRUE(c.ok()) << c.text();
  Config unfused;
  unfused.edit = [](lang::ChunkDag &dag) { dag.options.fusion = false; };
  Compilation off(program, unfused);
  ASSERT_TRUE(off.ok()) << off.text();
  for (int32_t r = 0; r < 3; ++r) {
    std::string fused, apart;
    for (const ir::ThreadBlock &tb : c.alg().gpus[r].tbs)
      fused += reduceGroups(tb);
    for (const ir::ThreadBlock &tb : off.alg().gpus[r].tbs)
      apart += reduceGroups(tb);
    EXPECT_EQ(fused, "2") << "rank " << r;
    EXPECT_EQ(apart, "1 1") << "rank " << r;
  }
}

//===----------------------------------------------------------------------===//
// Dependencies and nops
//===----------------------------------------------------------------------===//

const char *const TwoIntoOne = R"(
collective custom(ranks = 4, input = 1, output = 2) {
    post { expect(3, 0, contrib(1, 0)) expect(3, 1, contrib(2, 0)) }
}
chunk(1, input, 0).copy(0, scratch, 0)
chunk(2, input, 0).copy(0, scratch, 1)
chunk(0, scratch, 0, size = 2).copy(3, output, 0)
)";

TEST(Dependencies, ExtraOnesGoOnNops) {
  // For MSCCL, whose nops only hand their dependency to the next real step
  // (no spreading).
  Config msccl;
  msccl.options.target = Target::Msccl;
  Compilation c(TwoIntoOne, msccl);
  ASSERT_TRUE(c.ok()) << c.text();
  // Rank 0: receives from 1 and 2 in their own tbs; the send to 3 waits
  // for both: a nop carries one dependency, the send the other.
  const ir::Gpu &gpu = c.alg().gpus[0];
  ASSERT_EQ(gpu.tbs.size(), 3u);
  const ir::ThreadBlock &sender = gpu.tbs[2];
  EXPECT_EQ(sender.sendPeer, 3);
  ASSERT_EQ(sender.steps.size(), 2u);
  EXPECT_EQ(sender.steps[0].type, StepType::Nop);
  EXPECT_EQ(sender.steps[0].depTb, 0);
  EXPECT_EQ(sender.steps[0].depStep, 0);
  EXPECT_EQ(sender.steps[1].type, StepType::Send);
  EXPECT_EQ(sender.steps[1].depTb, 1);
  EXPECT_EQ(sender.steps[1].depStep, 0);
  EXPECT_TRUE(gpu.tbs[0].steps[0].hasDep);
  EXPECT_TRUE(gpu.tbs[1].steps[0].hasDep);
  EXPECT_EQ(c.schedule->origins[0][2][0].op, 2u) << "a nop is its step's";
}

TEST(Dependencies, WaitsOnSeveralTbsSpreadOverThem) {
  // The same program for Coll's runtimes: the send waits for the receive
  // from 2 only; that tb, which has nothing left to do, runs a nop after
  // its receive that waits for the receive from 1 and publishes (the chain
  // runs up the tb ids).
  Compilation c(TwoIntoOne);
  ASSERT_TRUE(c.ok()) << c.text();
  const ir::Gpu &gpu = c.alg().gpus[0];
  ASSERT_EQ(gpu.tbs.size(), 3u);
  EXPECT_EQ(stepTypesOf(gpu.tbs[0]), "r");
  EXPECT_TRUE(gpu.tbs[0].steps[0].hasDep);
  const ir::ThreadBlock &helper = gpu.tbs[1];
  ASSERT_EQ(stepTypesOf(helper), "r nop");
  EXPECT_FALSE(helper.steps[0].hasDep);
  EXPECT_EQ(helper.steps[1].depTb, 0);
  EXPECT_EQ(helper.steps[1].depStep, 0);
  EXPECT_TRUE(helper.steps[1].hasDep);
  const ir::ThreadBlock &sender = gpu.tbs[2];
  ASSERT_EQ(stepTypesOf(sender), "s");
  EXPECT_EQ(sender.steps[0].depTb, 1);
  EXPECT_EQ(sender.steps[0].depStep, 1);
  EXPECT_EQ(c.schedule->origins[0][1][1].op, 2u)
      << "a helper nop is the operation's that waits";
}

TEST(Dependencies, HelperNopsNeverDelayTheirTb) {
  // As above, but rank 0 then receives from 1 again (one channel), which
  // does not depend on the send: a nop after the first receive from 1 would
  // hold the second up. The chain ends there instead: the tb receiving from
  // 2 has nothing left and waits for it.
  Compilation c(R"(
collective custom(ranks = 4, input = 2, output = 2) {
    post {
        expect(3, 0, contrib(1, 0)) expect(3, 1, contrib(2, 0))
        expect(0, 1, contrib(1, 1))
    }
}
chunk(1, input, 0).copy(0, scratch, 0, ch = 0)
chunk(2, input, 0).copy(0, scratch, 1, ch = 0)
chunk(0, scratch, 0, size = 2).copy(3, output, 0, ch = 0)
chunk(1, input, 1).copy(0, output, 1, ch = 0)
)");
  ASSERT_TRUE(c.ok()) << c.text();
  const ir::Gpu &gpu = c.alg().gpus[0];
  ASSERT_EQ(gpu.tbs.size(), 3u);
  EXPECT_EQ(gpu.tbs[0].recvPeer, 1);
  EXPECT_EQ(stepTypesOf(gpu.tbs[0]), "r r");
  EXPECT_EQ(gpu.tbs[1].recvPeer, 2);
  EXPECT_EQ(stepTypesOf(gpu.tbs[1]), "r nop");
  EXPECT_EQ(gpu.tbs[1].steps[1].depTb, 0);
  EXPECT_EQ(gpu.tbs[1].steps[1].depStep, 0);
  EXPECT_EQ(gpu.tbs[2].sendPeer, 3);
  EXPECT_EQ(stepTypesOf(gpu.tbs[2]), "s");
  EXPECT_EQ(gpu.tbs[2].steps[0].depTb, 1);
  EXPECT_EQ(gpu.tbs[2].steps[0].depStep, 1);
}

TEST(Dependencies, KnownOnesAreDropped) {
  // Both sends from rank 0 read what one receive wrote; the second send
  // follows the first in its tb, which has already waited.
  Config unfused;
  unfused.edit = [](lang::ChunkDag &dag) { dag.options.fusion = false; };
  Compilation c(R"(
collective custom(ranks = 3, input = 1, output = 1) {
    post { expect(2, 0, contrib(1, 0)) }
}
chunk(1, input, 0).copy(0, scratch, 0)
chunk(0, scratch, 0).copy(2, scratch, 0)
chunk(0, scratch, 0).copy(2, output, 0)
)",
                unfused);
  ASSERT_TRUE(c.ok()) << c.text();
  int waits = 0;
  for (const ir::ThreadBlock &tb : c.alg().gpus[0].tbs)
    for (const ir::Step &step : tb.steps)
      waits += step.hasDependency();
  EXPECT_EQ(waits, 1) << c.dump();
}

TEST(Dependencies, ImpliedThroughAnotherTbAreDropped) {
  // Rank 0: B receives into scratch[0] (tb 0), A sends it on (tb 1, waits
  // for B), C overwrites it (tb 2): C needs both A and B done, but waiting
  // for A implies B.
  Config unfused;
  unfused.edit = [](lang::ChunkDag &dag) { dag.options.fusion = false; };
  Compilation c(R"(
collective custom(ranks = 4, input = 1, output = 1) {
    post { expect(2, 0, contrib(1, 0)) }
}
chunk(1, input, 0).copy(0, scratch, 0)
chunk(0, scratch, 0).copy(2, output, 0)
chunk(3, input, 0).copy(0, scratch, 0)
)",
                unfused);
  ASSERT_TRUE(c.ok()) << c.text();
  const ir::Gpu &gpu = c.alg().gpus[0];
  ASSERT_EQ(gpu.tbs.size(), 3u);
  EXPECT_EQ(gpu.tbs[1].steps.size(), 1u);
  EXPECT_EQ(gpu.tbs[1].steps[0].depTb, 0);
  ASSERT_EQ(gpu.tbs[2].steps.size(), 1u) << "no nop: " << c.dump();
  EXPECT_EQ(gpu.tbs[2].steps[0].type, StepType::Recv);
  EXPECT_EQ(gpu.tbs[2].steps[0].depTb, 1);
}

} // namespace
