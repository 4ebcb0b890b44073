//===- PlanTest.cpp - Plan building and per-call resolution ---------------===//

#include "TestAlgorithms.h"

#include "coll/interpreter/Plan.h"
#include "coll/ir/Verifier.h"

#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <limits>

#include <sys/resource.h>

using namespace coll;
using namespace coll::interp;
using ir::BufferKind;
using ir::StepType;

namespace {

/// The plan of `alg`; a broken test fixture stops the test binary.
Plan planOf(const ir::Algorithm &alg) {
  ir::DiagnosticList diags("<test>");
  auto analysis = ir::verify(alg, diags);
  if (!analysis)
    llvm::report_fatal_error(llvm::Twine("fixture does not verify: ") +
                             llvm::toString(analysis.takeError()));
  auto plan = buildPlan(alg, *analysis, "test.xml");
  if (!plan)
    llvm::report_fatal_error(llvm::Twine("fixture does not plan: ") +
                             llvm::toString(plan.takeError()));
  return std::move(*plan);
}

std::string planError(const ir::Algorithm &alg) {
  ir::DiagnosticList diags("<test>");
  auto analysis = ir::verify(alg, diags);
  if (!analysis)
    return "verify: " + llvm::toString(analysis.takeError());
  auto plan = buildPlan(alg, *analysis, "test.xml");
  return plan ? std::string() : llvm::toString(plan.takeError());
}

ir::Step step(StepType type, BufferKind sb, int so, BufferKind db, int dof, int cnt = 1) {
  ir::Step s;
  s.type = type;
  s.srcBuf = sb;
  s.srcOff = so;
  s.dstBuf = db;
  s.dstOff = dof;
  s.count = cnt;
  return s;
}

/// One rank, one tb: a local program.
ir::Algorithm local(std::vector<ir::Step> steps, int chunks = 4, int scratch = 20) {
  ir::Algorithm alg;
  alg.collective = ir::Collective::AllReduce;
  alg.collectiveSpelling = "allreduce";
  alg.nchunksPerLoop = chunks;
  alg.gpus.resize(1);
  alg.gpus[0].inputChunks = alg.gpus[0].outputChunks = chunks;
  alg.gpus[0].scratchChunks = scratch;
  alg.gpus[0].tbs.resize(1);
  alg.gpus[0].tbs[0].steps = std::move(steps);
  return alg;
}

/// Step `i` of tb `t` (global index) of `plan`.
const PlanStep &stepOf(const Plan &plan, int32_t t, int32_t i) {
  return plan.steps[plan.tbs[t].stepBegin + i];
}

/// What `s` waits for, as "tb.step" pairs of global tb indices.
std::vector<std::string> waitsOf(const Plan &plan, const PlanStep &s) {
  std::vector<std::string> out;
  for (const PlanDep &d : plan.dependencies(s))
    out.push_back(std::to_string(d.tb) + "." + std::to_string(d.step));
  return out;
}

using Waits = std::vector<std::string>;

TEST(Plan, NopsJoinTheNextStepAndReductionsFuse) {
  // allPairsAllReduce(8): the local tb is cpy, 6 nops, then 7 `re` that
  // fuse; the nops' dependencies join the fused step's, which waits on the
  // seven receives at once.
  Plan plan = planOf(coll::testing::allPairsAllReduce(8, ir::Protocol::LL));
  const PlanTb &tb = plan.tbs[plan.rankTbBegin[0] + 7];
  ASSERT_EQ(tb.nSteps, 2);
  const PlanStep *steps = &plan.steps[tb.stepBegin];
  EXPECT_EQ(steps[0].type, StepKind::Copy);
  EXPECT_EQ(steps[0].depTb, -1);
  EXPECT_EQ(steps[1].type, StepKind::Reduce);
  EXPECT_EQ(steps[1].nsrc, 7);
  EXPECT_EQ(steps[1].irStep, 13); // publishes as the last fused step
  EXPECT_EQ(steps[1].hasDep, 1);
  EXPECT_EQ(steps[1].depTb, -7);
  EXPECT_EQ(waitsOf(plan, steps[1]), (Waits{"0.1", "1.1", "2.1", "3.1", "4.1", "5.1", "6.1"}));
  // Each receive waited on publishes; the peers' tbs' sends wait on the
  // reduction alone.
  for (int32_t t = 0; t < 7; ++t) {
    EXPECT_EQ(stepOf(plan, t, 1).hasDep, 1);
    EXPECT_EQ(waitsOf(plan, stepOf(plan, t, 2)), (Waits{"7.13"}));
  }
}

/// One rank: tb t's steps are `tbs[t]` (the local algorithm of `local`, with
/// more tbs).
ir::Algorithm localTbs(std::vector<std::vector<ir::Step>> tbs, int chunks = 4) {
  ir::Algorithm alg = local({}, chunks, 40);
  alg.gpus[0].tbs.resize(tbs.size());
  for (size_t t = 0; t < tbs.size(); ++t)
    alg.gpus[0].tbs[t].steps = std::move(tbs[t]);
  return alg;
}

ir::Step waiting(ir::Step s, int tb, int step, bool hasDep = false) {
  s.depTb = tb;
  s.depStep = step;
  s.hasDep = hasDep;
  return s;
}

ir::Step nop() { return step(StepType::Nop, BufferKind::Input, 0, BufferKind::Input, 0, 0); }

TEST(Plan, WaitsThroughAChainOfNopsBecomeDirect) {
  // The chain "Spreading waits" makes (docs/COMPILER.md): tb k copies, then
  // a nop waits for tb k-1's nop (tb 1's, for tb 0's copy); tb 3 waits for
  // tb 2's nop, so for all three copies, two flag trips later.
  auto cpy = [](int c) {
    ir::Step s = step(StepType::Copy, BufferKind::Input, c, BufferKind::Output, c);
    s.hasDep = true;
    return s;
  };
  ir::Step re = step(StepType::Reduce, BufferKind::Output, 0, BufferKind::Output, 3);
  Plan plan = planOf(localTbs({{cpy(0)},
                               {cpy(1), waiting(nop(), 0, 0, true)},
                               {cpy(2), waiting(nop(), 1, 1, true)},
                               {waiting(re, 2, 1)}}));
  // tb 3 waits on the three copies themselves; nobody waits on the nops,
  // which ended their tbs, so they are gone.
  EXPECT_EQ(waitsOf(plan, stepOf(plan, 3, 0)), (Waits{"0.0", "1.0", "2.0"}));
  for (int32_t t = 0; t < 3; ++t) {
    ASSERT_EQ(plan.tbs[t].nSteps, 1) << "tb " << t;
    EXPECT_EQ(stepOf(plan, t, 0).type, StepKind::Copy);
    EXPECT_EQ(stepOf(plan, t, 0).hasDep, 1);
  }
  EXPECT_EQ(stepOf(plan, 3, 0).hasDep, 0);
  EXPECT_FALSE(checkPlanIndices(plan));

  // A nop another step waits on, first on its tb: waits are direct through
  // it, and it stays (it publishes nothing now: the wait on it is direct).
  plan = planOf(localTbs({{cpy(0)},
                          {waiting(nop(), 0, 0, true), cpy(1)},
                          {waiting(re, 1, 0)}}));
  EXPECT_EQ(waitsOf(plan, stepOf(plan, 2, 0)), (Waits{"0.0"}));
  ASSERT_EQ(plan.tbs[1].nSteps, 1); // the nop joined the copy after it
  EXPECT_EQ(waitsOf(plan, stepOf(plan, 1, 0)), (Waits{"0.0"}));
  EXPECT_EQ(stepOf(plan, 1, 0).irStep, 1);
}

TEST(Plan, AWaitThatAnotherImpliesIsDropped) {
  // tb 2's nop waits for tb 0's copy and joins tb 2's copy, which waits
  // for tb 1's reduction, which itself waited for tb 0's copy: tb 2's copy
  // waits for the reduction alone, and tb 0's copy publishes for tb 1.
  ir::Step cpy = step(StepType::Copy, BufferKind::Input, 0, BufferKind::Output, 0);
  cpy.hasDep = true;
  ir::Step re = step(StepType::Reduce, BufferKind::Input, 1, BufferKind::Output, 1);
  ir::Step cpy2 = step(StepType::Copy, BufferKind::Input, 2, BufferKind::Output, 2);
  Plan plan = planOf(localTbs({{cpy}, {waiting(re, 0, 0, true)},
                               {waiting(nop(), 0, 0), waiting(cpy2, 1, 0)}}));
  ASSERT_EQ(plan.tbs[2].nSteps, 1);
  EXPECT_EQ(waitsOf(plan, stepOf(plan, 2, 0)), (Waits{"1.0"}));
  EXPECT_EQ(waitsOf(plan, stepOf(plan, 1, 0)), (Waits{"0.0"}));
  EXPECT_EQ(stepOf(plan, 0, 0).hasDep, 1);
  EXPECT_EQ(stepOf(plan, 1, 0).hasDep, 1);
}

TEST(Plan, AWaitOnALaterStepOfTheSameTbIsKept) {
  // As above, but tb 2's nop waits for tb 0's second copy, which tb 1's
  // reduction (waiting for tb 0's first) does not imply: tb 2's copy waits
  // on both.
  ir::Step cpy = step(StepType::Copy, BufferKind::Input, 0, BufferKind::Output, 0);
  cpy.hasDep = true;
  ir::Step cpy1 = step(StepType::Copy, BufferKind::Input, 3, BufferKind::Output, 3);
  cpy1.hasDep = true;
  ir::Step re = step(StepType::Reduce, BufferKind::Input, 1, BufferKind::Output, 1);
  ir::Step cpy2 = step(StepType::Copy, BufferKind::Input, 2, BufferKind::Output, 2);
  Plan plan = planOf(localTbs({{cpy, cpy1}, {waiting(re, 0, 0, true)},
                               {waiting(nop(), 0, 1), waiting(cpy2, 1, 0)}}));
  ASSERT_EQ(plan.tbs[2].nSteps, 1);
  EXPECT_EQ(waitsOf(plan, stepOf(plan, 2, 0)), (Waits{"0.1", "1.0"}));
  EXPECT_EQ(waitsOf(plan, stepOf(plan, 1, 0)), (Waits{"0.0"}));
}

TEST(Plan, AStepWaitsOnAtMostMaxStepDependencies) {
  // 40 tbs copy; tb 40 runs a nop for each, then a copy of its own.
  std::vector<std::vector<ir::Step>> tbs;
  std::vector<ir::Step> last;
  for (int t = 0; t < 40; ++t) {
    ir::Step c = step(StepType::Copy, BufferKind::Input, 0, BufferKind::Scratch, t);
    c.hasDep = true;
    tbs.push_back({c});
    last.push_back(waiting(nop(), t, 0));
  }
  last.push_back(step(StepType::Copy, BufferKind::Input, 1, BufferKind::Output, 1));
  tbs.push_back(last);
  Plan plan = planOf(localTbs(tbs));
  // The first 32 nops become one that waits on 32 flags; the copy waits on
  // the other 8.
  const int32_t t = 40;
  ASSERT_EQ(plan.tbs[t].nSteps, 2);
  EXPECT_EQ(stepOf(plan, t, 0).type, StepKind::Nop);
  EXPECT_EQ(stepOf(plan, t, 0).depTb, -MaxStepDependencies);
  EXPECT_EQ(stepOf(plan, t, 0).irStep, 31);
  EXPECT_EQ(stepOf(plan, t, 1).type, StepKind::Copy);
  EXPECT_EQ(stepOf(plan, t, 1).depTb, -8);
  EXPECT_EQ(waitsOf(plan, stepOf(plan, t, 1)).front(), "32.0");
  EXPECT_FALSE(checkPlanIndices(plan));
}

TEST(Plan, ARanksSliceKeepsItsDependencies) {
  Plan whole = planOf(coll::testing::allPairsAllReduce(4, ir::Protocol::Simple));
  for (int32_t r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    Plan mine = slicePlan(whole, r);
    ASSERT_FALSE(checkPlanIndices(mine));
    const int32_t first = mine.rankTbBegin[r]; // 0: a rank's plan numbers its tbs from 0
    EXPECT_EQ(first, 0);
    const PlanStep &reduce = stepOf(mine, first + 3, 1);
    EXPECT_EQ(reduce.type, StepKind::Reduce);
    EXPECT_EQ(waitsOf(mine, reduce), (Waits{std::to_string(first) + ".1",
                                            std::to_string(first + 1) + ".1",
                                            std::to_string(first + 2) + ".1"}));
  }
  // A damaged list of dependencies is found.
  Plan damaged = slicePlan(whole, 1);
  damaged.deps[1].tb = damaged.rankTbBegin[2]; // past rank 1's tbs
  EXPECT_TRUE(static_cast<bool>(checkPlanIndices(damaged)));
  llvm::consumeError(checkPlanIndices(damaged));
  damaged = slicePlan(whole, 1);
  damaged.deps.pop_back();
  llvm::Error err = checkPlanIndices(damaged);
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("the plan is damaged"), std::string::npos);
}

TEST(Plan, FusionRules) {
  auto re = [](int src, int dst = 0) {
    return step(StepType::Reduce, BufferKind::Output, src, BufferKind::Input, dst);
  };
  // 20 fusable reductions: groups of 16 and 4.
  std::vector<ir::Step> steps;
  for (int i = 0; i < 20; ++i)
    steps.push_back(re(i));
  Plan plan = planOf(local(steps, 24));
  ASSERT_EQ(plan.tbs[0].nSteps, 2);
  EXPECT_EQ(plan.steps[0].nsrc, 16);
  EXPECT_EQ(plan.steps[1].nsrc, 4);
  EXPECT_EQ(plan.slices[15].srcChunk, 15);
  EXPECT_EQ(plan.slices[16].srcChunk, 16);

  // A step with hasdep ends its group; a different destination starts a new one.
  steps = {re(0), re(1), re(2), re(3, 1), re(4, 1)};
  steps[1].hasDep = true;
  plan = planOf(local(steps, 24));
  ASSERT_EQ(plan.tbs[0].nSteps, 3);
  EXPECT_EQ(plan.steps[0].nsrc, 2);
  EXPECT_EQ(plan.steps[0].hasDep, 0); // no step waits on it: it publishes nothing
  EXPECT_EQ(plan.steps[0].irStep, 1);
  EXPECT_EQ(plan.steps[1].nsrc, 1);
  EXPECT_EQ(plan.steps[2].nsrc, 2);

  // Different cnt or src buffer: no fusion.
  steps = {re(0), step(StepType::Reduce, BufferKind::Output, 1, BufferKind::Input, 0, 2),
           step(StepType::Reduce, BufferKind::Input, 1, BufferKind::Input, 0)};
  plan = planOf(local(steps, 24));
  EXPECT_EQ(plan.tbs[0].nSteps, 3);
}

TEST(Plan, ScratchDeclaredButUnusedCostsNothing) {
  // The plan builder tracks only the scratch slots the steps name (it kept
  // a table of every declared slot: 8 GiB for 2^31 - 1, which XmlFuzzer
  // found). The verifier now refuses such a declaration
  // (ir::MaxDeclaredChunks); the builder does not rely on that.
  ir::Algorithm alg = local({step(StepType::Copy, BufferKind::Input, 0, BufferKind::Scratch, 3),
                             step(StepType::Copy, BufferKind::Scratch, 3, BufferKind::Output, 0)},
                            4, 4);
  ir::DiagnosticList diags("<test>");
  auto analysis = ir::verify(alg, diags);
  ASSERT_TRUE(static_cast<bool>(analysis)) << llvm::toString(analysis.takeError());
  alg.gpus[0].scratchChunks = std::numeric_limits<int32_t>::max();
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  auto plan = buildPlan(alg, *analysis, "test.xml");
  getrusage(RUSAGE_SELF, &after);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 256 * 1024) << "KiB of peak memory more";
  EXPECT_EQ(plan->scratchChunks[0], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(plan->sliceClasses, (std::vector<int32_t>{0}));
  EXPECT_FALSE(checkPlanIndices(*plan));
}

TEST(Plan, ResolvesUnevenChunks) {
  Plan plan = planOf(coll::testing::ringAllReduce(4, ir::Protocol::Simple));
  auto call = resolveCall(plan, 10); // 4 chunks of 3, 3, 2, 2 elements
  ASSERT_TRUE(static_cast<bool>(call)) << llvm::toString(call.takeError());
  EXPECT_EQ(call->maxChunkElems, 3u);
  EXPECT_EQ(call->inputElems, 10u);
  // Rank 0's first step sends chunk 3: offset 8, 2 elements.
  const PlanStep &first = plan.steps[plan.tbs[0].stepBegin];
  const CallSlice &slice = call->slices[first.sliceBegin];
  EXPECT_EQ(plan.slices[first.sliceBegin].srcChunk, 3);
  EXPECT_EQ(slice.src, 8u);
  EXPECT_EQ(slice.nelem, 2u);
}

TEST(Plan, ScratchCarriesTheClassOfWhatWasWrittenToIt) {
  // Chunk 1 goes through scratch slot 3 and back into chunk 1: no conflict.
  Plan plan = planOf(local({step(StepType::Copy, BufferKind::Input, 1, BufferKind::Scratch, 3),
                            step(StepType::Reduce, BufferKind::Scratch, 3, BufferKind::Input, 1)}));
  EXPECT_TRUE(plan.conflicts.empty());
  EXPECT_EQ(plan.slices[1].cls, 1);
  auto call = resolveCall(plan, 7); // sizes 2, 2, 2, 1
  ASSERT_TRUE(static_cast<bool>(call)) << llvm::toString(call.takeError());
  EXPECT_EQ(call->slices[1].nelem, 2u);
  EXPECT_EQ(call->slices[1].src, 6u); // slot 3 of size 2
}

TEST(Plan, SizeConflictsOnlyMatterWhenSizesDiffer) {
  // Chunk 0 is reduced into chunk 3: fine when they have the same size.
  ir::Algorithm alg =
      local({step(StepType::Copy, BufferKind::Input, 0, BufferKind::Scratch, 0),
             step(StepType::Reduce, BufferKind::Scratch, 0, BufferKind::Input, 3)});
  alg.gpus[0].tbs[0].steps[1].line = 42;
  Plan plan = planOf(alg);
  ASSERT_EQ(plan.conflicts.size(), 1u);
  EXPECT_TRUE(static_cast<bool>(resolveCall(plan, 8)));
  auto bad = resolveCall(plan, 9); // sizes 3, 2, 2, 2
  ASSERT_FALSE(static_cast<bool>(bad));
  std::string message = llvm::toString(bad.takeError());
  EXPECT_NE(message.find("test.xml:42: error: gpu 0 tb 0 step 1: combines chunks of classes 0 "
                         "and 3, which hold 3 and 2 elements"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("multiple of 4"), std::string::npos) << message;
}

TEST(Plan, RejectsReadingUnwrittenScratch) {
  ir::Algorithm alg =
      local({step(StepType::Reduce, BufferKind::Scratch, 2, BufferKind::Input, 0)});
  alg.gpus[0].tbs[0].steps[0].line = 7;
  EXPECT_EQ(planError(alg),
            "test.xml:7: error: gpu 0 tb 0 step 0: reads scratch chunk 2, which no earlier "
            "step writes");
}

TEST(Plan, RejectsAbsurdCounts) {
  Plan plan = planOf(coll::testing::ringAllReduce(2, ir::Protocol::Simple));
  auto call = resolveCall(plan, uint64_t(1) << 50);
  ASSERT_FALSE(static_cast<bool>(call));
  EXPECT_NE(llvm::toString(call.takeError()).find("is too large"), std::string::npos);
}

} // namespace
