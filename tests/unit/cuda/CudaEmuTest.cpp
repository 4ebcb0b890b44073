//===- CudaEmuTest.cpp - Tests only the CPU emulation can run -------------===//
//
// The kernel on the CPU SIMT launcher, at the places where a protocol or the
// executor's bookkeeping is fragile, and the launcher itself. (The shared
// tests of CudaExecutorTest.cpp and CudaCorpusTest.cpp run here too.)
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"
#include "TestAlgorithms.h"

#include "emu/Runtime.h"
#include "emu/Simt.h"

#include <gtest/gtest.h>

#include <atomic>

using namespace coll;
using namespace coll::interp;
using coll::testing::expectSameAsHost;
using coll::testing::makeExecutors;
using coll::testing::planOf;

namespace {

std::pair<HostOptions, CudaOptions> slots(uint32_t bytes) {
  HostOptions host;
  CudaOptions gpu;
  host.watchdogMs = gpu.watchdogMs = 20000;
  host.simpleSlotBytes = host.llSlotBytes = host.ll128SlotBytes = bytes;
  gpu.simpleSlotBytes = gpu.llSlotBytes = gpu.ll128SlotBytes = bytes;
  return {host, gpu};
}

TEST(SimtLauncher, BarriersSeeEveryThreadsWrites) {
  // Each thread writes its slot, then reads its neighbours' after a barrier;
  // __syncthreads_or and __any_sync report a predicate of one thread.
  constexpr uint32_t Threads = 64, Blocks = 3;
  std::vector<uint32_t> data(Threads * Blocks, 0);
  std::atomic<uint32_t> wrong{0}, orSeen{0}, anySeen{0};
  auto kernel = [&] {
    using namespace coll::interp::cuda::simt;
    ThreadContext &t = self();
    uint32_t *mine = data.data() + t.blockIdx.x * Threads;
    for (uint32_t round = 1; round <= 20; ++round) {
      mine[t.linear] = round * 1000 + t.linear;
      syncThreads(0);
      uint32_t next = (t.linear + 1) % Threads;
      if (mine[next] != round * 1000 + next)
        wrong.fetch_add(1);
      if (syncThreads(t.linear == round % Threads))
        orSeen.fetch_add(1);
      if (syncWarp(0xffffffffu, t.linear % 32 == 5))
        anySeen.fetch_add(1);
    }
  };
  std::string failure =
      coll::interp::cuda::simt::launch(kernel, {Blocks, 1, 1}, {Threads, 1, 1}, 0);
  ASSERT_EQ(failure, "");
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_EQ(orSeen.load(), 20u * Threads * Blocks);
  EXPECT_EQ(anySeen.load(), 20u * Threads * Blocks);
}

TEST(SimtLauncher, RefusesBadShapes) {
  auto nothing = [] {};
  EXPECT_NE(coll::interp::cuda::simt::launch(nothing, {1, 1, 1}, {2048, 1, 1}, 0).find(
                "a block of 2048 threads"),
            std::string::npos);
  EXPECT_NE(coll::interp::cuda::simt::launch(nothing, {0, 1, 1}, {32, 1, 1}, 0).find(
                "a grid of 0 blocks"),
            std::string::npos);
}

// LL128 lines at slot sizes just below, at and above one and two lines, with
// the narrowest and widest types over many iterations (tiny slots wrap the
// FIFO hundreds of times).
TEST(EmuFragile, LL128SlotsAroundLineBoundaries) {
  for (uint32_t bytes : {120u, 128u, 248u}) {
    auto [host, gpu] = slots(bytes);
    auto ex = makeExecutors(planOf(coll::testing::ringAllReduce(4, ir::Protocol::LL128)), host, gpu);
    for (DataType type : {DataType::Int8, DataType::Float64})
      expectSameAsHost(ex, type, ReduceOp::Sum, 3001, false,
                       "LL128 slot " + std::to_string(bytes) + " " + dataTypeName(type).str());
  }
}

// Simple with 40-byte slots: every count from 1 to 40, buffers misaligned
// alike (odd element offsets give every pointer the same misalignment), in
// place too, where a reduction's destination is also its source.
TEST(EmuFragile, SimpleTinySlotsEveryCount) {
  auto [host, gpu] = slots(40);
  auto ring = makeExecutors(planOf(coll::testing::ringAllReduce(3, ir::Protocol::Simple)), host, gpu);
  auto pairs =
      makeExecutors(planOf(coll::testing::allPairsAllReduce(3, ir::Protocol::Simple)), host, gpu);
  for (uint64_t count = 1; count <= 40; ++count) {
    expectSameAsHost(ring, DataType::Float32, ReduceOp::Sum, count, true,
                     "ring in place count=" + std::to_string(count));
    expectSameAsHost(pairs, DataType::Int8, ReduceOp::Max, count, false,
                     "allpairs count=" + std::to_string(count));
  }
}

// Three calls of different counts on one executor: each starts where the
// previous left the FIFO counters, so slots are reused across calls.
TEST(EmuFragile, CallsReuseSlotsOfEarlierCalls) {
  auto [host, gpu] = slots(64);
  auto ex = makeExecutors(planOf(coll::testing::ringAllReduce(4, ir::Protocol::LL)), host, gpu);
  for (uint64_t count : {13ull, 1000ull, 77ull})
    expectSameAsHost(ex, DataType::Int32, ReduceOp::Sum, count, false,
                     "call of " + std::to_string(count));
}

// Many back-to-back launches of one executor: the generation counter
// advances on the device, and dependency flags of earlier launches must
// never satisfy a wait.
TEST(EmuFragile, RepeatedLaunchesAdvanceTheGeneration) {
  auto [host, gpu] = slots(256);
  auto ex =
      makeExecutors(planOf(coll::testing::chainReduce(3, 1, 3, ir::Protocol::Simple)), host, gpu);
  for (int i = 0; i < 12; ++i)
    expectSameAsHost(ex, DataType::Float32, ReduceOp::Sum, 300 + i, false,
                     "launch " + std::to_string(i), /*seed=*/i + 1);
}

// The occupancy check against a described device: a plan with exactly as
// many tbs as fit is accepted, one with more is refused with both numbers.
TEST(EmuFragile, OccupancyAtTheResidentLimit) {
  using namespace coll::interp::cuda::rt;
  Plan fits = planOf(coll::testing::directAllToAll(4, ir::Protocol::Simple));
  Plan tooMany = planOf(coll::testing::directAllToAll(5, ir::Protocol::Simple));
  const int limit = static_cast<int>(fits.tbs.size());
  ASSERT_GT(tooMany.tbs.size(), fits.tbs.size());
  ASSERT_LE(limit, 16); // what the register file allows at 64 threads
  const DeviceDescription saved = describedDevice();
  DeviceDescription small = saved;
  small.smCount = 1;
  small.maxBlocksPerSm = limit;
  describeDevice(small);
  CudaOptions options;
  options.threadsPerBlock = 64;
  options.watchdogMs = 20000;
  for (Plan *plan : {&fits, &tooMany}) {
    auto gpu = CudaExecutor::create(*plan, options);
    ASSERT_TRUE(static_cast<bool>(gpu)) << llvm::toString(gpu.takeError());
    CheckedCall call(CollectiveDesc::of(*plan), DataType::Float32, ReduceOp::Sum,
                     uint64_t(plan->nranks) * 3, false, 1);
    llvm::Error err =
        coll::testing::runOnDevice(call, DataType::Float32, [&](const CallArgs &a) -> llvm::Error {
          auto result = (*gpu)->run(a);
          return result ? llvm::Error::success() : result.takeError();
        });
    if (plan == &fits) {
      EXPECT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
      EXPECT_EQ(call.check().wrong, 0u);
      EXPECT_EQ((*gpu)->launchShape().blocksPerSm, limit);
    } else {
      ASSERT_TRUE(static_cast<bool>(err)) << plan->tbs.size() << " tbs were accepted";
      std::string message = llvm::toString(std::move(err));
      EXPECT_NE(message.find("the plan's " + std::to_string(plan->tbs.size()) +
                             " thread blocks must all be resident at once, but only " +
                             std::to_string(limit) + " fit"),
                std::string::npos)
          << message;
    }
  }
  describeDevice(saved);
}

} // namespace
