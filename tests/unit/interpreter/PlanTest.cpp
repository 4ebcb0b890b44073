//===- PlanTest.cpp - Plan building and per-call resolution ---------------===//

#include "TestAlgorithms.h"

#include "coll/interpreter/Plan.h"
#include "coll/ir/Verifier.h"

#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

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

TEST(Plan, NopsStayAndReductionsFuse) {
  // allPairsAllReduce(8): the local tb is cpy, 6 nops, then 7 `re` that fuse.
  Plan plan = planOf(coll::testing::allPairsAllReduce(8, ir::Protocol::LL));
  const PlanTb &tb = plan.tbs[plan.rankTbBegin[0] + 7];
  ASSERT_EQ(tb.nSteps, 8);
  const PlanStep *steps = &plan.steps[tb.stepBegin];
  EXPECT_EQ(steps[0].type, StepKind::Copy);
  for (int i = 1; i <= 6; ++i) {
    EXPECT_EQ(steps[i].type, StepKind::Nop);
    EXPECT_EQ(steps[i].count, 0);
    EXPECT_GE(steps[i].depTb, 0);
  }
  EXPECT_EQ(steps[7].type, StepKind::Reduce);
  EXPECT_EQ(steps[7].nsrc, 7);
  EXPECT_EQ(steps[7].irStep, 13); // publishes as the last fused step
  EXPECT_EQ(steps[7].hasDep, 1);
  EXPECT_EQ(steps[7].depStep, 1);
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
  EXPECT_EQ(plan.steps[0].hasDep, 1);
  EXPECT_EQ(plan.steps[0].irStep, 1);
  EXPECT_EQ(plan.steps[1].nsrc, 1);
  EXPECT_EQ(plan.steps[2].nsrc, 2);

  // Different cnt or src buffer: no fusion.
  steps = {re(0), step(StepType::Reduce, BufferKind::Output, 1, BufferKind::Input, 0, 2),
           step(StepType::Reduce, BufferKind::Input, 1, BufferKind::Input, 0)};
  plan = planOf(local(steps, 24));
  EXPECT_EQ(plan.tbs[0].nSteps, 3);
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
