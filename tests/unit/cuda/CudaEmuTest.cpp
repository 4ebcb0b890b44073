//===- CudaEmuTest.cpp - Tests only the CPU emulation can run -------------===//
//
// The kernel on the CPU SIMT launcher, at the places where a protocol or the
// executor's bookkeeping is fragile, and the launcher itself. (The shared
// tests of CudaExecutorTest.cpp and CudaCorpusTest.cpp run here too.)
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"
#include "TestAlgorithms.h"
#include "TimeScale.h"

#include "emu/Runtime.h"
#include "emu/Simt.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>

#include <sys/wait.h>
#include <unistd.h>

using namespace coll;
using namespace coll::interp;
using coll::testing::expectSameAsHost;
using coll::testing::makeExecutors;
using coll::testing::planOf;

namespace {

std::pair<HostOptions, CudaOptions> slots(uint32_t bytes) {
  HostOptions host;
  CudaOptions gpu;
  host.watchdogMs = gpu.watchdogMs = uint32_t(coll::testing::scaledMs(20000));
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

// CUDA IPC on the CPU: device memory exported by one process and mapped by
// another (the runtime's device path across processes). A process cannot
// open its own handle, as in CUDA; a handle of a process that has exited
// is refused, not mapped.
TEST(EmuIpc, AnotherProcessMapsExportedMemory) {
  using namespace coll::interp::cuda::rt;
  int toParent[2], toChild[2];
  ASSERT_EQ(pipe(toParent), 0);
  ASSERT_EQ(pipe(toChild), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    void *p = nullptr;
    cudaIpcMemHandle_t handle;
    if (cudaMalloc(&p, 10000) != cudaSuccess)
      _exit(2);
    std::memset(p, 0x5a, 10000);
    if (cudaIpcGetMemHandle(&handle, p) != cudaSuccess)
      _exit(3);
    void *inside = static_cast<char *>(p) + 256;
    cudaIpcMemHandle_t other;
    if (cudaIpcGetMemHandle(&other, inside) != cudaErrorInvalidValue)
      _exit(4);
    void *self = nullptr;
    if (cudaIpcOpenMemHandle(&self, handle, cudaIpcMemLazyEnablePeerAccess) !=
        cudaErrorInvalidContext)
      _exit(5);
    if (write(toParent[1], &handle, sizeof handle) != static_cast<ssize_t>(sizeof handle))
      _exit(6);
    char done = 0;
    if (read(toChild[0], &done, 1) != 1)
      _exit(7);
    // The parent wrote through its mapping.
    _exit(static_cast<unsigned char *>(p)[9999] == 0xa5 ? 0 : 8);
  }
  cudaIpcMemHandle_t handle;
  ASSERT_EQ(read(toParent[0], &handle, sizeof handle), static_cast<ssize_t>(sizeof handle));
  void *mapped = nullptr;
  ASSERT_EQ(cudaIpcOpenMemHandle(&mapped, handle, cudaIpcMemLazyEnablePeerAccess), cudaSuccess);
  auto *bytes = static_cast<unsigned char *>(mapped);
  EXPECT_EQ(bytes[0], 0x5a);
  EXPECT_EQ(bytes[9999], 0x5a);
  bytes[9999] = 0xa5;
  EXPECT_EQ(cudaIpcCloseMemHandle(mapped), cudaSuccess);
  EXPECT_EQ(cudaIpcCloseMemHandle(mapped), cudaErrorInvalidValue);
  char done = 1;
  ASSERT_EQ(write(toChild[1], &done, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  void *again = nullptr;
  EXPECT_EQ(cudaIpcOpenMemHandle(&again, handle, cudaIpcMemLazyEnablePeerAccess),
            cudaErrorInvalidResourceHandle);
  for (int fd : {toParent[0], toParent[1], toChild[0], toChild[1]})
    close(fd);
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

// A watchdog stop, then graph replays of a plan with a cross-tb dependency,
// then a plain call, on one executor: the reset after the stop leaves the
// generation, the dependency flags and the FIFO counters consistent for
// launches the host does not drive.
TEST(EmuFragile, WatchdogThenGraphReplayThenPlainCall) {
  using namespace coll::interp::cuda::rt;
  for (ir::Protocol proto : {ir::Protocol::Simple, ir::Protocol::LL, ir::Protocol::LL128}) {
    HostOptions host;
    CudaOptions gpu;
    gpu.watchdogMs = uint32_t(coll::testing::scaledMs(200));
    auto ex = makeExecutors(planOf(coll::testing::fifoDeadlockWithDependency(proto)), host, gpu);
    const std::string what = ir::protocolName(proto).str();
    const Plan &plan = ex.gpu->plan();
    CollectiveDesc desc = CollectiveDesc::of(plan);
    {
      CheckedCall stalls(desc, DataType::Float32, ReduceOp::Sum, 64, false, 1);
      std::string message;
      llvm::Error err = coll::testing::runOnDevice(
          stalls, DataType::Float32, [&](const CallArgs &a) -> llvm::Error {
            auto result = ex.gpu->run(a);
            if (!result)
              message = llvm::toString(result.takeError());
            return llvm::Error::success();
          });
      ASSERT_FALSE(static_cast<bool>(err)) << what << ": " << llvm::toString(std::move(err));
      ASSERT_NE(message.find("watchdog: no progress for " + std::to_string(gpu.watchdogMs) + " ms"),
                std::string::npos)
          << what << ": " << message;
    }
    const uint64_t count = 4; // fits in the FIFO
    CheckedCall reference(desc, DataType::Float32, ReduceOp::Sum, count, false, 3);
    ASSERT_TRUE(static_cast<bool>(ex.host->run(reference.args())));
    CheckedCall call(desc, DataType::Float32, ReduceOp::Sum, count, false, 3);
    coll::testing::expectGraphReplaysMatch(*ex.gpu, reference, call, 4, what);
    expectSameAsHost(ex, DataType::Float32, ReduceOp::Sum, count, false,
                     what + ": a plain call after the replays", 9, /*checkDefinition=*/false);
  }
}

// 40000 elements with the matrix's tiny slots (thousands of pipeline
// iterations; the matrix stops at 1001 elements there to stay fast).
TEST(EmuFragile, TinySlotsAtFortyThousandElements) {
  const std::pair<ir::Protocol, uint32_t> cases[] = {
      {ir::Protocol::Simple, 64}, {ir::Protocol::LL, 24}, {ir::Protocol::LL128, 248}};
  for (auto [proto, bytes] : cases) {
    auto [host, gpu] = slots(bytes);
    auto ex = makeExecutors(planOf(coll::testing::ringAllReduce(4, proto)), host, gpu);
    expectSameAsHost(ex, DataType::Float32, ReduceOp::Sum, 40000, false,
                     ir::protocolName(proto).str() + " slot " + std::to_string(bytes));
  }
}

/// An fp32 sum of 3 elements per rank of `plan`'s collective.
CheckedCall smallCall(const Plan &plan) {
  return CheckedCall(CollectiveDesc::of(plan), DataType::Float32, ReduceOp::Sum,
                     uint64_t(plan.nranks) * 3, false, 1);
}
/// `call` once on `gpu`, through device buffers.
llvm::Error runOnce(DeviceExecutor &gpu, CheckedCall &call) {
  return coll::testing::runOnDevice(call, DataType::Float32, [&](const CallArgs &a) -> llvm::Error {
    auto result = gpu.run(a);
    return result ? llvm::Error::success() : result.takeError();
  });
}

// The kernels' two builds (device/Kernel.cuh): the wide one (128 registers)
// while its blocks get as many threads as the narrow one's (64 registers)
// would, the narrow one beyond. On one SM of 65536 registers, 64-thread
// blocks: 8 of the wide build fit, 16 of the narrow.
TEST(EmuFragile, WideBuildForSmallLaunchesNarrowForLargeOnes) {
  using namespace coll::interp::cuda::rt;
  Plan small = planOf(coll::testing::directAllToAll(2, ir::Protocol::Simple)); // 4 tbs
  Plan large = planOf(coll::testing::directAllToAll(3, ir::Protocol::Simple)); // 9 tbs
  ASSERT_LE(small.tbs.size(), 8u);
  ASSERT_GT(large.tbs.size(), 8u);
  ASSERT_LE(large.tbs.size(), 16u);
  const DeviceDescription saved = describedDevice();
  DeviceDescription one = saved;
  one.smCount = 1;
  describeDevice(one);
  CudaOptions options;
  options.watchdogMs = uint32_t(coll::testing::scaledMs(20000));
  for (Plan *plan : {&small, &large}) {
    auto gpu = coll::testing::deviceBackend().create(*plan, options);
    ASSERT_TRUE(static_cast<bool>(gpu)) << llvm::toString(gpu.takeError());
    CheckedCall call = smallCall(*plan);
    llvm::Error err = runOnce(**gpu, call);
    ASSERT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
    EXPECT_EQ(call.check().wrong, 0u);
    const LaunchShape shape = (*gpu)->launchShape();
    EXPECT_EQ(shape.threads, 64u) << plan->tbs.size() << " tbs";
    EXPECT_EQ(shape.wide, plan == &small) << plan->tbs.size() << " tbs";
    EXPECT_EQ(shape.blocksPerSm, plan == &small ? 8 : 16) << plan->tbs.size() << " tbs";
  }
  describeDevice(saved);
}

// Automatic block sizes (lib/Call.cpp, threadsForStep): no more threads
// than a step of the call moves in one pass, at least 128. On a device of
// 512-thread blocks: a call whose steps move 1 KiB runs 128-thread blocks in
// every protocol (Simple 64 packs, LL 128 lines, LL128 9 lines of 8 lanes);
// 16 KiB steps (Simple 1024 packs) and a call of several iterations (full
// slots) run 512; the result is the host's either way.
TEST(EmuFragile, SmallStepsLaunchFewerThreads) {
  using namespace coll::interp::cuda::rt;
  const DeviceDescription saved = describedDevice();
  DeviceDescription wide = saved;
  wide.residentThreads = 512;
  describeDevice(wide);
  auto [host, gpu] = slots(64 << 10);
  struct Case {
    ir::Protocol proto;
    uint64_t stepBytes;
    uint32_t threads;
  };
  for (const Case &c : {Case{ir::Protocol::Simple, 1024, 128}, Case{ir::Protocol::LL, 1024, 128},
                        Case{ir::Protocol::LL128, 1024, 128},
                        Case{ir::Protocol::Simple, 4096, 256},
                        Case{ir::Protocol::Simple, 16384, 512},
                        Case{ir::Protocol::Simple, 1 << 20, 512}}) {
    const Plan plan = planOf(coll::testing::ringAllReduce(2, c.proto));
    auto ex = makeExecutors(plan, host, gpu);
    // A 2-rank ring moves chunks of half the buffer: count floats per rank.
    const uint64_t count = 2 * c.stepBytes / 4;
    expectSameAsHost(ex, DataType::Float32, ReduceOp::Sum, count, false,
                     std::string(ir::protocolName(c.proto)) + " " + std::to_string(c.stepBytes));
    EXPECT_EQ(ex.gpu->launchShape().threads, c.threads)
        << ir::protocolName(c.proto).str() << ", steps of " << c.stepBytes << " bytes";
  }
  describeDevice(saved);
}

// collbench's references (docs/CUDA.md, "References") on the emulation:
// each runs once on known inputs and checks its result before it is timed,
// so a reference that computed a wrong result, or whose waits never end,
// fails here. The FIFO's 9 slots wrap its 8, and its counters carry over
// from launch to launch. The steps' 4099 bytes split into shares of 820
// and a shorter last one; the hops' 5 end in block 1, their flags carry on
// from launch to launch.
TEST(EmuReferences, EveryReferenceChecksItsResultBeforeItIsTimed) {
  for (ReferenceKind kind :
       {ReferenceKind::ReduceOnce, ReferenceKind::Exchange, ReferenceKind::BlockCopy,
        ReferenceKind::Fifo, ReferenceKind::Steps, ReferenceKind::Hops}) {
    ReferenceRequest q;
    q.kind = kind;
    q.nranks = 8; // more blocks that wait for each other than a plain launch runs at once
    q.bytes = kind == ReferenceKind::BlockCopy || kind == ReferenceKind::Fifo ||
                      kind == ReferenceKind::Steps
                  ? 4099
                  : 4000;
    q.slotBytes = 512;
    q.steps = 5;
    q.threads = 64;
    q.warmup = 1;
    q.iters = 3;
    auto seconds = coll::testing::deviceBackend().timeReference(q);
    ASSERT_TRUE(static_cast<bool>(seconds)) << referenceName(kind) << ": "
                                            << llvm::toString(seconds.takeError());
    EXPECT_EQ(seconds->size(), 3u) << referenceName(kind);
  }
}

TEST(EmuReferences, RequestsOutsideTheirShapeAreRefused) {
  auto refused = [](ReferenceRequest q) {
    q.threads = 64;
    q.iters = 1;
    auto seconds = coll::testing::deviceBackend().timeReference(q);
    return seconds ? std::string("accepted") : llvm::toString(seconds.takeError());
  };
  ReferenceRequest q;
  q.kind = ReferenceKind::Exchange;
  q.bytes = MaxExchangeReferenceBytes + 4;
  EXPECT_NE(refused(q).find("the exchange reference: 1048580 bytes per rank is above"),
            std::string::npos)
      << refused(q);
  q.kind = ReferenceKind::ReduceOnce;
  q.bytes = 64;
  q.nranks = MaxReferenceRanks + 1;
  EXPECT_NE(refused(q).find("17 ranks (1 to 16)"), std::string::npos) << refused(q);
  q.nranks = 2;
  q.bytes = 6;
  EXPECT_NE(refused(q).find("not a whole number of fp32 elements"), std::string::npos)
      << refused(q);
  q.kind = ReferenceKind::Fifo;
  q.bytes = 64;
  q.slotBytes = 0;
  EXPECT_NE(refused(q).find("the fifo reference: a slot of 0 bytes (1 to 64 MiB"),
            std::string::npos)
      << refused(q);
  // Its copy loop counts a slot's bytes in 32 bits, as the kernels count a step's.
  q.slotBytes = (64u << 20) + 8;
  EXPECT_NE(refused(q).find("a slot of 67108872 bytes (1 to 64 MiB"), std::string::npos)
      << refused(q);
  q.kind = ReferenceKind::Steps;
  q.steps = 0;
  EXPECT_NE(refused(q).find("the steps reference: 0 steps (1 to 65536)"), std::string::npos)
      << refused(q);
  q.steps = MaxReferenceSteps + 1;
  EXPECT_NE(refused(q).find("65537 steps (1 to 65536)"), std::string::npos) << refused(q);
  q.steps = 1;
  q.bytes = (64u << 20) + 1;
  EXPECT_NE(refused(q).find("steps of 67108865 bytes (at most 64 MiB"), std::string::npos)
      << refused(q);
  q.kind = ReferenceKind::Hops;
  q.bytes = 6;
  EXPECT_NE(refused(q).find("the hops reference: a message of 6 bytes (a multiple of 4"),
            std::string::npos)
      << refused(q);
  q.bytes = MaxExchangeReferenceBytes + 4;
  EXPECT_NE(refused(q).find("a message of 1048580 bytes"), std::string::npos) << refused(q);
  // Every launch's hops take flags of their own, 32 bits in all.
  q.bytes = 64;
  q.steps = MaxReferenceSteps;
  q.warmup = 100000;
  EXPECT_NE(refused(q).find("100002 launches of 65536 hops"), std::string::npos)
      << refused(q);
}

// The occupancy check against a described device: a plan with exactly as
// many tbs as fit is accepted, one with more is refused with both numbers.
TEST(EmuFragile, OccupancyAtTheResidentLimit) {
  using namespace coll::interp::cuda::rt;
  Plan fits = planOf(coll::testing::directAllToAll(2, ir::Protocol::Simple));
  Plan tooMany = planOf(coll::testing::directAllToAll(3, ir::Protocol::Simple));
  const int limit = static_cast<int>(fits.tbs.size());
  ASSERT_GT(tooMany.tbs.size(), fits.tbs.size());
  ASSERT_LE(limit, 8); // what the register file allows at 64 threads of 128 registers
  const DeviceDescription saved = describedDevice();
  DeviceDescription small = saved;
  small.smCount = 1;
  small.maxBlocksPerSm = limit;
  describeDevice(small);
  CudaOptions options;
  options.threadsPerBlock = 64;
  options.watchdogMs = uint32_t(coll::testing::scaledMs(20000));
  for (Plan *plan : {&fits, &tooMany}) {
    auto gpu = coll::testing::deviceBackend().create(*plan, options);
    ASSERT_TRUE(static_cast<bool>(gpu)) << llvm::toString(gpu.takeError());
    CheckedCall call = smallCall(*plan);
    llvm::Error err = runOnce(**gpu, call);
    if (plan == &fits) {
      EXPECT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
      EXPECT_EQ(call.check().wrong, 0u);
      EXPECT_EQ((*gpu)->launchShape().blocksPerSm, limit);
    } else {
      ASSERT_TRUE(static_cast<bool>(err)) << plan->tbs.size() << " tbs were accepted";
      std::string message = llvm::toString(std::move(err));
      EXPECT_NE(message.find("the launch's " + std::to_string(plan->tbs.size()) +
                             " thread blocks must all be resident at once, but only " +
                             std::to_string(limit) + " fit"),
                std::string::npos)
          << message;
    }
  }
  describeDevice(saved);
}

} // namespace
