//===- CudaHostTest.cpp - The CUDA backend's host-side logic, no GPU ------===//
//
// What the kernel and its host agree on (flag encoding, device-state
// layout, LL128 lane segments), the watchdog report's wording, option checks
// and how DeviceBuffers mirrors host buffers. None of it needs a GPU.
//
//===----------------------------------------------------------------------===//

#include "device/DeviceTypes.h"
#include "lib/HostSupport.h"
#include "TestAlgorithms.h"

#include "coll/interpreter/Plan.h"
#include "coll/ir/Verifier.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

using namespace coll;
using namespace coll::interp;
using namespace coll::interp::cuda;

namespace {

TEST(DependencyFlags, EncodeGenerationAndProgress) {
  const uint32_t span = 7;
  EXPECT_EQ(flagProgress(0, span, 0), 1u);
  EXPECT_EQ(flagProgress(2, span, 3), 2u * 7 + 3 + 1);
  uint64_t flag = makeFlag(5, flagProgress(2, span, 3));
  EXPECT_EQ(flag >> 32, 5u);
  // Reached: same generation and at least the goal (a later step also counts).
  EXPECT_TRUE(flagReached(flag, 5, flagProgress(2, span, 3)));
  EXPECT_TRUE(flagReached(flag, 5, flagProgress(1, span, 6)));
  EXPECT_FALSE(flagReached(flag, 5, flagProgress(2, span, 4)));
  // A flag left by an earlier launch never satisfies a wait, however far it got.
  EXPECT_FALSE(flagReached(makeFlag(4, UINT32_MAX), 5, 1));
  // Nor one from before the generation wrapped.
  EXPECT_FALSE(flagReached(makeFlag(UINT32_MAX, 100), 0, 1));
  EXPECT_TRUE(flagReached(makeFlag(0, 100), 0, 1));
  // The zeroed state: generation 0, nothing published.
  EXPECT_FALSE(flagReached(0, 0, 1));
}

TEST(DependencyFlags, IterationLimitKeepsProgressIn32Bits) {
  for (uint32_t span : {1u, 3u, 64u, 1000u}) {
    uint64_t maxIt = maxFlagIterations(span);
    uint64_t last = (maxIt - 1) * span + (span - 1) + 1; // progress of the last step
    EXPECT_LE(last, UINT32_MAX) << span;
    EXPECT_GT(maxIt * span + span, uint64_t(UINT32_MAX)) << span;
  }
}

TEST(DeviceLayout, SlotsHoldAFullSliceAndStay128ByteAligned) {
  for (uint64_t bytes : {8ull, 24ull, 64ull, 248ull, 120ull * 256, 16ull << 10, 128ull << 10}) {
    ConnectionLayout simple = ConnectionLayout::of(Proto::Simple, bytes);
    ConnectionLayout ll = ConnectionLayout::of(Proto::LL, bytes);
    ConnectionLayout ll128 = ConnectionLayout::of(Proto::LL128, bytes);
    for (const ConnectionLayout &c : {simple, ll, ll128}) {
      EXPECT_EQ(c.slotStride % PollStride, 0u) << bytes;
      EXPECT_EQ(c.stride, ConnectionLayout::FifoOffset + FifoDepth * c.slotStride) << bytes;
    }
    EXPECT_GE(simple.slotStride, bytes);
    EXPECT_GE(ll.slotStride, llLines(bytes) * LLLineBytes);
    EXPECT_GE(ll128.slotStride, ll128Lines(bytes) * LL128LineWords * 8);
  }
  ConnectionLayout c = ConnectionLayout::of(Proto::LL, 24);
  StateLayout s = StateLayout::of(3, 2, c);
  EXPECT_EQ(s.flagsOffset, PollStride); // after DeviceControl
  EXPECT_GE(s.flagsOffset, sizeof(DeviceControl));
  EXPECT_EQ(s.connectionsOffset, PollStride + 3 * PollStride);
  EXPECT_EQ(s.bytes, s.connectionsOffset + 2 * c.stride);
}

TEST(LL128Lanes, EightLanesCoverTheDataWordsOnce) {
  std::vector<int> covered(LL128DataBytesPerLine, 0);
  for (uint32_t j = 0; j < LL128LanesPerLine; ++j) {
    LaneSegment seg = ll128Segment(j);
    EXPECT_EQ(seg.begin % 8, 0u);
    for (uint32_t b = seg.begin; b < seg.begin + seg.bytes; ++b)
      ++covered.at(b);
  }
  for (size_t b = 0; b < covered.size(); ++b)
    EXPECT_EQ(covered[b], 1) << "byte " << b;
  // Lane 7 ends with data word 14; word 15 is the flag it stores last.
  LaneSegment last = ll128Segment(LL128LanesPerLine - 1);
  EXPECT_EQ((last.begin + last.bytes) / 8, LL128FlagWord);
  EXPECT_EQ(LL128LanesPerLine * LL128LinesPerWarp, 32u);
}

TEST(LLFraming, WordsCarryDataLowAndFlagHigh) {
  // The device packs 8 data bytes d into {llWord(d low, f), llWord(d high, f)}
  // and unpacks them as (w0 & 0xffffffff) | (w1 << 32).
  uint64_t data = 0x0123456789abcdefull;
  uint32_t flag = llFlag(41);
  uint64_t w0 = llWord(static_cast<uint32_t>(data), flag);
  uint64_t w1 = llWord(static_cast<uint32_t>(data >> 32), flag);
  EXPECT_TRUE(llWordReady(w0, 42) && llWordReady(w1, 42));
  EXPECT_EQ((w0 & 0xffffffffu) | (w1 << 32), data);
}

Plan deadlockPlan(ir::Protocol proto) {
  ir::Algorithm alg = coll::testing::fifoDeadlock(proto);
  ir::DiagnosticList diags("deadlock.xml");
  auto analysis = ir::verify(alg, diags);
  EXPECT_TRUE(static_cast<bool>(analysis));
  auto plan = buildPlan(alg, *analysis, "deadlock.xml");
  EXPECT_TRUE(static_cast<bool>(plan));
  return std::move(*plan);
}

WatchdogReport reportAt(int32_t tb, int32_t step, WaitKind kind) {
  WatchdogReport r{};
  r.valid = 1;
  r.kind = kind;
  r.tb = tb;
  r.step = step;
  r.connection = -1;
  r.depTb = -1;
  r.depStep = -1;
  return r;
}

TEST(WatchdogReport, IsWordedAsTheHostBackendsReport) {
  Plan plan = deadlockPlan(ir::Protocol::Simple);
  const std::string at = "watchdog: no progress for 200 ms at rank 0 tb 0 (channel 0) ";

  WatchdogReport r = reportAt(0, 0, WaitKind::FreeSlot);
  r.connection = plan.tbs[0].sendConn;
  r.slot = r.tail = 8;
  r.head = 0;
  EXPECT_EQ(describeWatchdogReport(plan, r, 200),
            at + "step 0 (s) iteration 0: waiting for a free slot to send on (the FIFO of 8 "
                 "slots is full); connection 0->1 channel 0: sender filled 8 slots, receiver "
                 "freed 0");

  r = reportAt(0, 1, WaitKind::SimpleData);
  r.connection = plan.tbs[0].recvConn;
  r.iteration = 3;
  r.slot = r.head = 5;
  r.tail = 5;
  EXPECT_EQ(describeWatchdogReport(plan, r, 200),
            at + "step 1 (r) iteration 3: waiting for data to receive (slot 5); connection 1->0 "
                 "channel 0: sender filled 5 slots, receiver freed 5");

  r.kind = WaitKind::LLLine;
  r.line = 2;
  r.expected = 6;
  r.observed = (uint64_t(6) << 32) | 5;
  EXPECT_EQ(describeWatchdogReport(plan, r, 200),
            at + "step 1 (r) iteration 3: waiting for data to receive (LL line 2 of slot 5: "
                 "flags 0x5 and 0x6, expected 0x6); connection 1->0 channel 0: sender filled 5 "
                 "slots, receiver freed 5");

  r.kind = WaitKind::LL128Line;
  r.observed = 5;
  EXPECT_EQ(describeWatchdogReport(plan, r, 200),
            at + "step 1 (r) iteration 3: waiting for data to receive (LL128 line 2 of slot 5: "
                 "flag 5, expected 6); connection 1->0 channel 0: sender filled 5 slots, "
                 "receiver freed 5");
}

// A direct step on windows whose peer published no window for the buffer
// (docs/CUDA.md, "Windows"): not a watchdog stop, and worded so.
TEST(WatchdogReport, DescribesAPeerBufferInNoWindow) {
  Plan plan = deadlockPlan(ir::Protocol::Simple);
  WatchdogReport r = reportAt(0, 1, WaitKind::Window);
  r.iteration = 2;
  r.depTb = 1;
  r.depStep = 1;
  r.observed = 0;
  const std::string text = describeWatchdogReport(plan, r, 200);
  EXPECT_EQ(text.find("watchdog"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 0 tb 0 (channel 0) step 1 (r) iteration 2: rank 1 published no "
                      "window holding its output buffer of this call (descriptor 0x0)"),
            std::string::npos)
      << text;
}

TEST(WatchdogReport, DescribesDependencies) {
  Plan plan = [] {
    ir::Algorithm alg = coll::testing::allPairsAllReduce(3, ir::Protocol::LL);
    ir::DiagnosticList diags("<test>");
    auto analysis = ir::verify(alg, diags);
    return std::move(*buildPlan(alg, *analysis, "<test>"));
  }();
  // The local tb of rank 0 (its last) waits on the peer tbs' receives
  // (step 1), all at once; the thread polling the first reports it.
  const int32_t local = plan.rankTbBegin[1] - 1;
  const PlanTb &tb = plan.tbs[local];
  int32_t waiting = -1;
  for (int32_t i = 0; i < tb.nSteps; ++i)
    if (plan.steps[tb.stepBegin + i].depTb != -1 && waiting < 0)
      waiting = i;
  ASSERT_GE(waiting, 0);
  const PlanStep &step = plan.steps[tb.stepBegin + waiting];
  ASSERT_EQ(step.depTb, -2);
  const PlanDep dep = plan.deps[step.depStep];
  const uint32_t span = static_cast<uint32_t>(plan.maxIrSteps);

  WatchdogReport r = reportAt(local, waiting, WaitKind::Dependency);
  r.iteration = 2;
  r.depTb = dep.tb;
  r.depStep = dep.step;
  r.expected = flagProgress(2, span, dep.step);
  r.observed = 0;
  std::string text = describeWatchdogReport(plan, r, 1000);
  EXPECT_NE(text.find("waiting for tb " + std::to_string(plan.tbs[dep.tb].tb) + " step " +
                      std::to_string(dep.step) +
                      " of iteration 2; that tb has published nothing yet"),
            std::string::npos)
      << text;
  r.observed = flagProgress(1, span, 0);
  text = describeWatchdogReport(plan, r, 1000);
  EXPECT_NE(text.find("that tb has published step 0 of iteration 1"), std::string::npos) << text;
}

TEST(CudaOptions, RejectsWhatTheKernelCannotRun) {
  CudaOptions options;
  EXPECT_FALSE(static_cast<bool>(checkOptions(options, Proto::Simple)));
  for (uint32_t threads : {16u, 33u, 1024u}) {
    options.threadsPerBlock = threads;
    llvm::Error err = checkOptions(options, Proto::LL128);
    ASSERT_TRUE(static_cast<bool>(err)) << threads;
    EXPECT_NE(llvm::toString(std::move(err)).find("threads per block"), std::string::npos);
  }
  options = CudaOptions{};
  options.llSlotBytes = 12;
  llvm::Error err = checkOptions(options, Proto::LL);
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("FIFO slot size 12"), std::string::npos);
  EXPECT_FALSE(static_cast<bool>(checkOptions(options, Proto::Simple))); // not its slot
}

TEST(MirrorLayout, KeepsInPlaceAliasingAndSeparatesTheRest) {
  std::vector<std::byte> memory(1000);
  std::byte *base = memory.data();
  CallArgs args;
  // Rank 0: allreduce in place (same memory). Rank 1: allgather in place
  // (input inside output). Rank 2: out of place. Rank 3: empty.
  args.input = {base, base + 300, base + 400, nullptr};
  args.output = {base, base + 200, base + 600, nullptr};
  MirrorLayout layout = mirrorLayout(args, 100, 200);
  ASSERT_EQ(layout.input.size(), 4u);
  ASSERT_EQ(layout.ranges.size(), 4u);
  EXPECT_EQ(layout.input[0].range, layout.output[0].range);
  EXPECT_EQ(layout.ranges[layout.input[0].range].bytes, 200u);
  EXPECT_EQ(layout.input[1].range, layout.output[1].range);
  EXPECT_EQ(layout.input[1].offset, 100u);
  EXPECT_EQ(layout.output[1].offset, 0u);
  EXPECT_EQ(layout.ranges[layout.input[1].range].begin, base + 200);
  EXPECT_NE(layout.input[2].range, layout.output[2].range);
  EXPECT_EQ(layout.ranges[layout.input[2].range].bytes, 100u);
  EXPECT_EQ(layout.ranges[layout.output[2].range].bytes, 200u);
  EXPECT_EQ(layout.input[3].range, -1);
  EXPECT_EQ(layout.output[3].range, -1);
}

} // namespace
