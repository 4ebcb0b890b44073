//===- CudaExecutorTest.cpp - The CUDA backend against the host backend ---===//
//
// Every test runs on the GPU and skips without one. Results are compared
// with the host backend's bit for bit: both run the same step semantics in
// the same order, so floating-point results agree exactly too.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"
#include "device/DeviceTypes.h"
#include "TestAlgorithms.h"
#include "TimeScale.h"

#include "coll/interpreter/Check.h"
#include "coll/interpreter/DeviceExecutor.h"

#include <gtest/gtest.h>


#include "llvm/ADT/ScopeExit.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include <sys/mman.h>

using namespace coll;
using namespace coll::interp;
using namespace coll::interp::cuda::rt;
using coll::testing::CudaTest;
using coll::testing::expectSameAsHost;
using coll::testing::makeExecutors;
using coll::testing::planOf;

namespace {

std::string protoName(ir::Protocol p) { return ir::protocolName(p).str(); }

/// Host and GPU options with the same slot size (0: each backend's default).
std::pair<HostOptions, CudaOptions> optionsWithSlots(uint32_t slotBytes) {
  HostOptions host;
  CudaOptions gpu;
  host.watchdogMs = gpu.watchdogMs = uint32_t(coll::testing::scaledMs(20000));
  if (slotBytes) {
    host.simpleSlotBytes = host.llSlotBytes = host.ll128SlotBytes = slotBytes;
    gpu.simpleSlotBytes = gpu.llSlotBytes = gpu.ll128SlotBytes = slotBytes;
  }
  return {host, gpu};
}

// Every test algorithm x protocol x sizes from one element to several
// pipeline iterations, in each mode it supports; tiny slots make small calls
// take many iterations and wrap the FIFOs many times.
using coll::testing::MatrixCase;

class GpuMatrix : public CudaTest, public ::testing::WithParamInterface<MatrixCase> {};

TEST_P(GpuMatrix, EveryAlgorithmMatchesTheHost) {
  auto [hostOptions, gpuOptions] = optionsWithSlots(GetParam().slotBytes);
  for (int n : {2, 4, 8}) {
    for (auto &[name, alg] : coll::testing::allTestAlgorithms(n, GetParam().proto)) {
      Plan plan = planOf(alg);
      auto ex = makeExecutors(plan, hostOptions, gpuOptions);
      for (uint64_t count : {1ull, 7ull, 100ull, 1001ull, 40000ull}) {
#if COLL_CUDA_EMULATION && COLL_TEST_SANITIZER
        // Tiny slots make 40000 elements thousands of iterations: 100 s of
        // CPU in a plain build, several times that under a sanitizer, which
        // keeps EmuFragile.TinySlotsAtFortyThousandElements instead.
        if (count == 40000 && GetParam().slotBytes)
          continue;
#endif
        for (bool inplace : {false, true}) {
          if (inplace ? !plan.inplace : !plan.outofplace)
            continue;
          expectSameAsHost(ex, DataType::Float32, ReduceOp::Sum, count, inplace,
                           name + " n=" + std::to_string(n) + " " + protoName(GetParam().proto) +
                               " count=" + std::to_string(count) +
                               (inplace ? " in-place" : " out-of-place"));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Protocols, GpuMatrix,
    ::testing::ValuesIn(coll::testing::protocolMatrix()),
    [](const auto &info) { return coll::testing::matrixCaseName(info.param); });

class GpuExecutor : public CudaTest {};

TEST_F(GpuExecutor, EveryTypeAndOperator) {
  auto [hostOptions, gpuOptions] = optionsWithSlots(40);
  struct Case {
    ir::Algorithm alg;
    uint64_t count;
    bool inplace;
  };
  Case cases[] = {{coll::testing::ringAllReduce(3, ir::Protocol::LL), 37, false},
                  {coll::testing::allPairsAllReduce(5, ir::Protocol::Simple), 37, true},
                  {coll::testing::ringReduceScatter(4, ir::Protocol::LL128), 11, false},
                  {coll::testing::chainReduce(3, 1, 3, ir::Protocol::Simple), 1000, false}};
  for (Case &c : cases) {
    Plan plan = planOf(c.alg);
    auto ex = makeExecutors(plan, hostOptions, gpuOptions);
    for (int t = 0; t <= static_cast<int>(DataType::Float64); ++t) {
      for (int o = 0; o <= static_cast<int>(ReduceOp::Avg); ++o) {
        auto type = static_cast<DataType>(t);
        auto op = static_cast<ReduceOp>(o);
        expectSameAsHost(ex, type, op, c.count, c.inplace,
                         plan.name + " " + dataTypeName(type).str() + " " + reduceOpName(op).str());
      }
    }
  }
}

// Direct steps (docs/CUDA.md, "Direct steps"): an executor of every rank
// loads and stores the peers' buffers itself and passes signals through
// flags in its state. Many calls on one executor, from one element to many
// pipeline iterations of tiny slots, so the flags' generations and
// per-iteration numbering carry from launch to launch; every rank matches
// the host backend bit for bit.
TEST_F(GpuExecutor, DirectStepsMatchTheHost) {
  auto [hostOptions, gpuOptions] = optionsWithSlots(64);
#if COLL_TEST_SANITIZER
  // The TSan stage of scripts/test.sh runs this test: fewer iterations.
  const std::vector<int> rankCounts = {2, 3};
  const std::vector<uint64_t> counts = {1, 7, 1001};
#else
  const std::vector<int> rankCounts = {2, 3, 5};
  const std::vector<uint64_t> counts = {1, 7, 1001, 20000};
#endif
  for (int n : rankCounts) {
    // The allreduces, and an allgather whose own copy folds into its puts.
    std::vector<ir::Algorithm> algs = coll::testing::peerAllReduces(n);
    algs.push_back(coll::testing::peerCopyPutAllGather(n));
    for (const ir::Algorithm &alg : algs) {
      Plan plan = planOf(alg);
      auto ex = makeExecutors(plan, hostOptions, gpuOptions);
      for (uint64_t count : counts)
        for (bool inplace : {false, true}) {
          if (inplace ? !plan.inplace : !plan.outofplace)
            continue;
          expectSameAsHost(ex, DataType::Float32, ReduceOp::Sum, count, inplace,
                           plan.name + " n=" + std::to_string(n) +
                               " count=" + std::to_string(count) +
                               (inplace ? " in-place" : " out-of-place"));
        }
      expectSameAsHost(ex, DataType::Int32, ReduceOp::Max, 333, !plan.outofplace,
                       plan.name + " int32 max");
    }
  }
}

// Copy engines (docs/CUDA.md, "Copy engines"): an executor of every rank
// whose plan splits runs a call's copies as cudaMemcpyAsync between a
// kernel of the signals before them and one of those after; the results
// equal the host's, call after call (each call takes two generations of
// the device state), below the size the option names the kernel moves the
// data, and a plan that does not split keeps its kernel.
TEST_F(GpuExecutor, CopyEnginesRunTheCopiesBetweenTwoKernels) {
  auto [hostOptions, gpuOptions] = optionsWithSlots(64);
  gpuOptions.copyEngineBytes = 4096;
  for (int n : {2, 3, 5})
    for (const ir::Algorithm &alg :
         {coll::testing::peerAllGather(n), coll::testing::peerAllGatherOnTbs(n),
          coll::testing::peerCopyPutAllGather(n)}) {
      Plan plan = planOf(alg);
      auto ex = makeExecutors(plan, hostOptions, gpuOptions);
      for (uint64_t count : {1, 1001, 1024, 20000, 3}) {
        const std::string what =
            plan.name + " n=" + std::to_string(n) + " count=" + std::to_string(count);
        expectSameAsHost(ex, DataType::Float32, ReduceOp::Sum, count, false, what);
        // The same call once more, to see which way it ran.
        CollectiveDesc desc = CollectiveDesc::of(plan);
        CheckedCall call(desc, DataType::Float32, ReduceOp::Sum, count, false, 7);
        uint32_t copies = 0;
        llvm::Error err = coll::testing::runOnDevice(
            call, DataType::Float32, [&](const CallArgs &args) -> llvm::Error {
              auto result = ex.gpu->run(args);
              if (!result)
                return result.takeError();
              copies = result->copyEngineCopies;
              return llvm::Error::success();
            });
        ASSERT_FALSE(static_cast<bool>(err)) << what << ": " << llvm::toString(std::move(err));
        EXPECT_EQ(call.check().wrong, 0u) << what;
        // Each rank's copy and its puts to n-1 peers, where the call's
        // output (n blocks of `count` floats) reaches 4096 bytes.
        const bool engines = count * n * sizeof(float) >= 4096;
        EXPECT_EQ(copies, engines ? uint32_t(n * n) : 0u) << what;
      }
    }
  // The two-shot reduces: its kernel moves the data.
  Plan twoShot = planOf(coll::testing::peerTwoShotAllReduce(3));
  auto ex = makeExecutors(twoShot, hostOptions, gpuOptions);
  expectSameAsHost(ex, DataType::Float32, ReduceOp::Sum, 20000, false, "two-shot");
}

/// Every rank's scratch for a float call of `count` elements on `plan`, in
/// device memory of this process (which the other ranks' executors reach).
struct SharedScratch {
  std::vector<void *> ranks;
  SharedScratch(const Plan &plan, uint64_t count) : ranks(plan.nranks, nullptr) {
    auto layout = resolveCall(plan, count);
    if (!layout) {
      ADD_FAILURE() << llvm::toString(layout.takeError());
      return;
    }
    for (int32_t r = 0; r < plan.nranks; ++r)
      EXPECT_EQ(cudaMalloc(&ranks[r], std::max<uint64_t>(layout->scratchElems[r], 1) * sizeof(float)),
                cudaSuccess);
  }
  ~SharedScratch() {
    for (void *p : ranks)
      if (p)
        cudaFree(p);
  }
};

/// One executor of one rank per rank of `plan` on the current device,
/// connected as a job's ranks are.
static coll::testing::RankExecutors oneRankEach(const Plan &plan, CudaOptions options) {
  coll::testing::RankExecutors ranks;
  for (int32_t r = 0; r < plan.nranks; ++r) {
    options.rank = r;
    auto gpu = coll::testing::deviceBackend().create(plan, options);
    if (!gpu) {
      ADD_FAILURE() << "rank " << r << ": " << llvm::toString(gpu.takeError());
      return {};
    }
    ranks.push_back(std::move(*gpu));
  }
  if (llvm::Error err = coll::testing::connectRanks(ranks)) {
    ADD_FAILURE() << llvm::toString(std::move(err));
    return {};
  }
  return ranks;
}

/// The ranks, counts and calls back to back of the tests of direct steps
/// on executors of one rank (fewer under the sanitizers).
struct DirectSweep {
  std::vector<int> rankCounts;
  std::vector<uint64_t> counts;
  int backToBack;
};
static DirectSweep directSweep() {
#if COLL_TEST_SANITIZER
  return {{2, 3}, {1, 1001}, 10};
#else
  return {{2, 3, 4}, {1, 7, 1001, 20000}, 25};
#endif
}

// Direct steps on executors of one rank each, as a job's processes run
// them: each is given its peers' buffers (setPeerBuffers) and signals into
// flags in the waiting rank's memory, which it maps as it maps FIFOs. The
// executors count their own launches, so many calls in a row, from one
// element to many pipeline iterations, check that a signal of the next
// call never hides one of the call before; every rank matches the host
// backend bit for bit.
TEST_F(GpuExecutor, DirectStepsOnExecutorsOfOneRank) {
  auto [hostOptions, gpuOptions] = optionsWithSlots(64);
  const DirectSweep sweep = directSweep();
  const int backToBack = sweep.backToBack;
  for (int n : sweep.rankCounts) {
    for (const ir::Algorithm &alg : coll::testing::peerAllReduces(n)) {
      Plan plan = planOf(alg);
      auto host = HostExecutor::create(plan, hostOptions);
      ASSERT_TRUE(static_cast<bool>(host)) << llvm::toString(host.takeError());
      coll::testing::RankExecutors ranks = oneRankEach(plan, gpuOptions);
      ASSERT_EQ(ranks.size(), static_cast<size_t>(n));
      for (uint64_t count : sweep.counts)
        for (bool inplace : {false, true}) {
          if (inplace ? !plan.inplace : !plan.outofplace)
            continue;
          const std::string what = plan.name + " n=" + std::to_string(n) + " count=" +
                                   std::to_string(count) + (inplace ? " in-place" : " out-of-place");
          CollectiveDesc desc = CollectiveDesc::of(plan);
          CheckedCall reference(desc, DataType::Float32, ReduceOp::Sum, count, inplace, 5);
          auto done = (*host)->run(reference.args());
          ASSERT_TRUE(static_cast<bool>(done)) << what << ": " << llvm::toString(done.takeError());
          CheckedCall call(desc, DataType::Float32, ReduceOp::Sum, count, inplace, 5);
          // Every rank's scratch where the peers reach it (the two-shot
          // puts into the peers' scratch).
          SharedScratch scratch(plan, count);
          llvm::Error err = coll::testing::runOnDevice(
              call, DataType::Float32, [&](const CallArgs &a) -> llvm::Error {
                if (llvm::Error e = coll::testing::givePeerBuffers(ranks, a, scratch.ranks))
                  return e;
                return coll::testing::runRanks(ranks, a);
              });
          ASSERT_FALSE(static_cast<bool>(err)) << what << ": " << llvm::toString(std::move(err));
          for (int32_t r = 0; r < n; ++r)
            EXPECT_EQ(std::memcmp(reference.args().output[r], call.args().output[r],
                                  call.outputElems() * sizeof(float)),
                      0)
                << what << ": rank " << r << "'s output differs from the host backend's";
        }
      // Calls back to back, each rank at its own pace: a rank may signal
      // in its next call while a peer still waits in the call before. Max
      // is idempotent, so repeating an in-place call keeps the result.
      const bool inplace = !plan.outofplace;
      const std::string what = plan.name + " n=" + std::to_string(n) + " back to back";
      CollectiveDesc desc = CollectiveDesc::of(plan);
      CheckedCall reference(desc, DataType::Float32, ReduceOp::Max, 1001, inplace, 9);
      auto done = (*host)->run(reference.args());
      ASSERT_TRUE(static_cast<bool>(done)) << what << ": " << llvm::toString(done.takeError());
      CheckedCall call(desc, DataType::Float32, ReduceOp::Max, 1001, inplace, 9);
      SharedScratch scratch(plan, 1001);
      llvm::Error err = coll::testing::runOnDevice(
          call, DataType::Float32, [&](const CallArgs &a) -> llvm::Error {
            if (llvm::Error e = coll::testing::givePeerBuffers(ranks, a, scratch.ranks))
              return e;
            std::vector<std::string> failures(n);
            std::vector<std::thread> threads;
            for (int32_t r = 0; r < n; ++r)
              threads.emplace_back([&, r] {
                for (int k = 0; k < backToBack && failures[r].empty(); ++k)
                  if (auto result = ranks[r]->run(a); !result)
                    failures[r] = "call " + std::to_string(k) + ": " +
                                  llvm::toString(result.takeError());
              });
            for (std::thread &t : threads)
              t.join();
            for (int32_t r = 0; r < n; ++r)
              if (!failures[r].empty())
                return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                               "rank " + std::to_string(r) + ": " + failures[r]);
            return llvm::Error::success();
          });
      ASSERT_FALSE(static_cast<bool>(err)) << what << ": " << llvm::toString(std::move(err));
      for (int32_t r = 0; r < n; ++r)
        EXPECT_EQ(std::memcmp(reference.args().output[r], call.args().output[r],
                              call.outputElems() * sizeof(float)),
                  0)
            << what << ": rank " << r << "'s output differs from the host backend's";
    }
  }
}

/// Windows for direct steps on executors of one rank (setPeerWindows): per
/// rank two windows and a descriptor, device memory of this one process
/// (valid in every executor). Each rank places its buffers of call k in its
/// windows at places of its own, which differ between ranks and calls:
/// input (or the in-place span) in one window, output and scratch in the
/// other, at offsets that are multiples of 4 bytes but not of 16.
struct RankWindows {
  std::vector<PeerWindows> ranks;
  std::vector<void *> allocations;
  uint64_t bytes;
  RankWindows(int n, uint64_t bytes) : ranks(n), bytes(bytes) {
    for (int r = 0; r < n; ++r) {
      for (int w = 0; w < 2; ++w) {
        void *p = nullptr;
        EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
        allocations.push_back(p);
        ranks[r].windows.push_back({p, bytes});
      }
      void *d = nullptr;
      EXPECT_EQ(cudaMalloc(&d, sizeof(cuda::WindowDescriptor)), cudaSuccess);
      EXPECT_EQ(cudaMemset(d, 0, sizeof(cuda::WindowDescriptor)), cudaSuccess);
      allocations.push_back(d);
      ranks[r].descriptor = d;
    }
  }
  ~RankWindows() {
    for (void *p : allocations)
      cudaFree(p);
  }
  struct Place {
    unsigned char *span, *output, *scratch; ///< span: the input, or the in-place span
  };
  Place place(int r, int k) const {
    const int w = (r + k) % 2;
    auto *first = static_cast<unsigned char *>(ranks[r].windows[w].base);
    auto *second = static_cast<unsigned char *>(ranks[r].windows[1 - w].base);
    const uint64_t a = 4 * uint64_t((r * 7 + k * 3) % 61 + 1);
    const uint64_t b = 4 * uint64_t((r * 5 + k * 11) % 53 + 1);
    return {first + a, second + b, second + bytes / 2 + a};
  }
};

/// Moves rank r's staged buffers of `a` (device memory, as runOnDevice
/// stages them) to or from `to`; returns the rank's arguments there. On a
/// stream of its own that does not wait for the legacy stream (nor makes
/// it wait), since the peers' kernels may be running and waiting for this
/// rank.
static std::pair<void *, void *> moveRank(const CallArgs &a, int32_t r, bool inplace,
                                          uint64_t inBytes, uint64_t outBytes,
                                          const RankWindows::Place &to, bool back) {
  auto *in = static_cast<unsigned char *>(a.input[r]);
  auto *out = static_cast<unsigned char *>(a.output[r]);
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  auto destroy = llvm::make_scope_exit([&] { cudaStreamDestroy(stream); });
  auto copy = [&](void *dst, const void *src, uint64_t n) {
    EXPECT_EQ(cudaMemcpyAsync(back ? const_cast<void *>(src) : dst, back ? dst : src, n,
                              cudaMemcpyDeviceToDevice, stream),
              cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  };
  if (inplace) {
    unsigned char *lo = std::min(in, out);
    unsigned char *hi = std::max(in + inBytes, out + outBytes);
    copy(to.span, lo, uint64_t(hi - lo));
    return {to.span + (in - lo), to.span + (out - lo)};
  }
  copy(to.span, in, inBytes);
  copy(to.output, out, outBytes);
  return {to.span, to.output};
}

// Direct steps on windows (setPeerWindows), as a job's processes run them
// on registered memory: each rank's buffers of a call lie where it put
// them in its windows, at a place of its own that changes with every call;
// the kernel publishes it in the rank's descriptor and reads its peers'.
// Calls in lockstep and 25 back to back at each rank's own pace, every rank
// matching the host backend bit for bit.
TEST_F(GpuExecutor, DirectStepsOnPeerWindows) {
  auto [hostOptions, gpuOptions] = optionsWithSlots(64);
  const DirectSweep sweep = directSweep();
  const int backToBack = sweep.backToBack;
  for (int n : sweep.rankCounts) {
    for (const ir::Algorithm &alg : coll::testing::peerAllReduces(n)) {
      Plan plan = planOf(alg);
      auto host = HostExecutor::create(plan, hostOptions);
      ASSERT_TRUE(static_cast<bool>(host)) << llvm::toString(host.takeError());
      coll::testing::RankExecutors ranks = oneRankEach(plan, gpuOptions);
      ASSERT_EQ(ranks.size(), static_cast<size_t>(n));
      RankWindows windows(n, 2 * (20000 * 4 * 2 + 4096));
      CollectiveDesc desc = CollectiveDesc::of(plan);
      auto runCall = [&](uint64_t count, bool inplace, ReduceOp op, int calls,
                         const std::string &what) {
        CheckedCall reference(desc, DataType::Float32, op, count, inplace, 5);
        auto done = (*host)->run(reference.args());
        ASSERT_TRUE(static_cast<bool>(done)) << what << ": " << llvm::toString(done.takeError());
        CheckedCall call(desc, DataType::Float32, op, count, inplace, 5);
        const uint64_t inBytes = call.inputElems() * 4, outBytes = call.outputElems() * 4;
        llvm::Error err = coll::testing::runOnDevice(
            call, DataType::Float32, [&](const CallArgs &a) -> llvm::Error {
              for (int32_t r = 0; r < n; ++r) {
                std::vector<PeerWindows> all = windows.ranks;
                all[r].scratch = windows.place(r, 0).scratch;
                if (llvm::Error e = ranks[r]->setPeerWindows(all))
                  return e;
              }
              std::vector<std::string> failures(n);
              std::vector<std::thread> threads;
              for (int32_t r = 0; r < n; ++r)
                threads.emplace_back([&, r] {
                  RankWindows::Place at = windows.place(r, 0);
                  CallArgs mine = a;
                  std::tie(mine.input[r], mine.output[r]) =
                      moveRank(a, r, inplace, inBytes, outBytes, at, false);
                  for (int k = 0; k < calls && failures[r].empty(); ++k) {
                    if (k > 0) { // the result so far moves to the call's place
                      RankWindows::Place next = windows.place(r, k);
                      CallArgs moved = mine;
                      std::tie(moved.input[r], moved.output[r]) =
                          moveRank(mine, r, inplace, inBytes, outBytes, next, false);
                      mine = moved;
                      at = next;
                      std::vector<PeerWindows> all = windows.ranks;
                      all[r].scratch = at.scratch;
                      if (llvm::Error e = ranks[r]->setPeerWindows(all)) {
                        failures[r] = llvm::toString(std::move(e));
                        break;
                      }
                    }
                    if (auto result = ranks[r]->run(mine); !result)
                      failures[r] = "call " + std::to_string(k) + ": " +
                                    llvm::toString(result.takeError());
                  }
                  RankWindows::Place last{static_cast<unsigned char *>(mine.input[r]),
                                          static_cast<unsigned char *>(mine.output[r]), nullptr};
                  if (inplace)
                    last.span = std::min(last.span, last.output);
                  moveRank(a, r, inplace, inBytes, outBytes, last, true);
                });
              for (std::thread &t : threads)
                t.join();
              std::string failed;
              for (int32_t r = 0; r < n; ++r)
                if (!failures[r].empty())
                  failed += "rank " + std::to_string(r) + ": " + failures[r] + "\n";
              if (!failed.empty())
                return llvm::createStringError(llvm::inconvertibleErrorCode(), failed);
              return llvm::Error::success();
            });
        ASSERT_FALSE(static_cast<bool>(err)) << what << ": " << llvm::toString(std::move(err));
        for (int32_t r = 0; r < n; ++r)
          EXPECT_EQ(std::memcmp(reference.args().output[r], call.args().output[r],
                                call.outputElems() * sizeof(float)),
                    0)
              << what << ": rank " << r << "'s output differs from the host backend's";
      };
      for (uint64_t count : sweep.counts)
        for (bool inplace : {false, true}) {
          if (inplace ? !plan.inplace : !plan.outofplace)
            continue;
          runCall(count, inplace, ReduceOp::Sum, 1,
                  plan.name + " n=" + std::to_string(n) + " count=" + std::to_string(count) +
                      (inplace ? " in-place" : " out-of-place"));
        }
      // Max is idempotent: repeating an in-place call keeps the result.
      if (plan.inplace)
        runCall(1001, true, ReduceOp::Max, backToBack,
                plan.name + " n=" + std::to_string(n) + " back to back");
    }
  }
}

// Copy engines on executors of one rank each, as a job's processes run
// them: with CallArgs::peersAlike every rank's buffers lie at the same
// places of its window slot 0 (as the runtime stages them in its area), so
// each rank's host names its peers' and enqueues its own copies; results
// match the host backend's. Buffers outside slot 0 are refused by name,
// and without peersAlike the kernel moves the data.
TEST_F(GpuExecutor, CopyEnginesOnExecutorsOfOneRank) {
  auto [hostOptions, gpuOptions] = optionsWithSlots(64);
  gpuOptions.copyEngineBytes = 1;
  gpuOptions.watchdogMs = static_cast<uint32_t>(coll::testing::scaledMs(20000));
  const uint64_t count = 1001;
  for (int n : {2, 3}) {
    Plan plan = planOf(coll::testing::peerAllGatherOnTbs(n));
    auto host = HostExecutor::create(plan, hostOptions);
    ASSERT_TRUE(static_cast<bool>(host)) << llvm::toString(host.takeError());
    coll::testing::RankExecutors ranks = oneRankEach(plan, gpuOptions);
    ASSERT_EQ(ranks.size(), static_cast<size_t>(n));
    RankWindows windows(n, 2 * (count * n * 4 + 4096));
    CollectiveDesc desc = CollectiveDesc::of(plan);
    for (int mode = 0; mode < 3; ++mode) { // 0: alike; 1: not said; 2: in slot 1
      const std::string what = "n=" + std::to_string(n) + " mode " + std::to_string(mode);
      CheckedCall reference(desc, DataType::Float32, ReduceOp::Sum, count, false, 5);
      auto done = (*host)->run(reference.args());
      ASSERT_TRUE(static_cast<bool>(done)) << llvm::toString(done.takeError());
      CheckedCall call(desc, DataType::Float32, ReduceOp::Sum, count, false, 5);
      const uint64_t inBytes = call.inputElems() * 4, outBytes = call.outputElems() * 4;
      std::vector<std::string> failures(n);
      std::vector<uint32_t> copies(n, 0);
      llvm::Error err = coll::testing::runOnDevice(
          call, DataType::Float32, [&](const CallArgs &a) -> llvm::Error {
            for (int32_t r = 0; r < n; ++r) {
              std::vector<PeerWindows> all = windows.ranks;
              all[r].scratch = static_cast<unsigned char *>(windows.ranks[r].windows[1].base) +
                               windows.bytes / 2;
              if (llvm::Error e = ranks[r]->setPeerWindows(all))
                return e;
            }
            std::vector<std::thread> threads;
            for (int32_t r = 0; r < n; ++r)
              threads.emplace_back([&, r] {
                auto *slot = static_cast<unsigned char *>(
                    windows.ranks[r].windows[mode == 2 ? 1 : 0].base);
                RankWindows::Place at{slot, slot + (inBytes + 255) / 256 * 256, nullptr};
                CallArgs mine = a;
                std::tie(mine.input[r], mine.output[r]) =
                    moveRank(a, r, false, inBytes, outBytes, at, false);
                mine.peersAlike = mode != 1;
                if (auto result = ranks[r]->run(mine); !result)
                  failures[r] = llvm::toString(result.takeError());
                else
                  copies[r] = result->copyEngineCopies;
                moveRank(a, r, false, inBytes, outBytes, at, true);
              });
            for (std::thread &t : threads)
              t.join();
            return llvm::Error::success();
          });
      ASSERT_FALSE(static_cast<bool>(err)) << what << ": " << llvm::toString(std::move(err));
      for (int32_t r = 0; r < n; ++r) {
        if (mode == 2) {
          EXPECT_NE(failures[r].find("copy engines: rank " + std::to_string(r) +
                                     "'s output buffer is in its window slot 1, not in slot 0"),
                    std::string::npos)
              << what << ": " << failures[r];
          continue;
        }
        ASSERT_TRUE(failures[r].empty()) << what << ": rank " << r << ": " << failures[r];
        // Its copy and its puts to n-1 peers, or the kernel's.
        EXPECT_EQ(copies[r], mode == 0 ? uint32_t(n) : 0u) << what << ": rank " << r;
        EXPECT_EQ(std::memcmp(reference.args().output[r], call.args().output[r], outBytes), 0)
            << what << ": rank " << r << "'s output differs from the host backend's";
      }
    }
  }
}

// On windows, a peer that published no window holding a buffer the
// kernel reaches stops the call with a report naming the rank and the
// buffer, not a fault; the wrong number of entries is refused at once.
TEST_F(GpuExecutor, DirectStepsOnPeerWindowsNeedEveryBufferInAWindow) {
  auto [hostOptions, gpuOptions] = optionsWithSlots(64);
  gpuOptions.watchdogMs = static_cast<uint32_t>(coll::testing::scaledMs(2000));
  Plan plan = planOf(coll::testing::peerTwoShotAllReduce(2));
  coll::testing::RankExecutors ranks = oneRankEach(plan, gpuOptions);
  ASSERT_EQ(ranks.size(), 2u);
  RankWindows windows(2, 1 << 16);
  CheckedCall call(CollectiveDesc::of(plan), DataType::Float32, ReduceOp::Sum, 100, false, 1);
  std::vector<std::string> failures(2);
  llvm::Error err = coll::testing::runOnDevice(
      call, DataType::Float32, [&](const CallArgs &a) -> llvm::Error {
        // Rank 1's buffers stay where runOnDevice put them: in no window.
        for (int32_t r = 0; r < 2; ++r)
          if (llvm::Error e = ranks[r]->setPeerWindows(windows.ranks))
            return e;
        std::vector<std::thread> threads;
        for (int32_t r = 0; r < 2; ++r)
          threads.emplace_back([&, r] {
            CallArgs mine = a;
            if (r == 0)
              std::tie(mine.input[0], mine.output[0]) =
                  moveRank(a, 0, false, 400, 400, windows.place(0, 0), false);
            if (auto result = ranks[r]->run(mine); !result)
              failures[r] = llvm::toString(result.takeError());
          });
        for (std::thread &t : threads)
          t.join();
        return llvm::Error::success();
      });
  ASSERT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
  EXPECT_NE(failures[0].find("rank 1 published no window holding its"), std::string::npos)
      << failures[0];
  EXPECT_NE(failures[0].find("(setPeerWindows)"), std::string::npos) << failures[0];
  std::vector<PeerWindows> one(1);
  std::string message = llvm::toString(ranks[0]->setPeerWindows(one));
  EXPECT_NE(message.find("1 entries for 2 ranks"), std::string::npos) << message;
  std::vector<PeerWindows> uneven = windows.ranks;
  uneven[1].windows.pop_back();
  message = llvm::toString(ranks[0]->setPeerWindows(uneven));
  EXPECT_NE(message.find("rank 1 has 1 windows and rank 0 2"), std::string::npos) << message;
}

// An executor of one rank that was not given the peers' buffers says so at
// the call, naming the buffer; one of every rank takes none.
TEST_F(GpuExecutor, DirectStepsNeedThePeersBuffers) {
  auto [hostOptions, gpuOptions] = optionsWithSlots(64);
  Plan plan = planOf(coll::testing::peerTwoShotAllReduce(3));
  coll::testing::RankExecutors ranks = oneRankEach(plan, gpuOptions);
  ASSERT_EQ(ranks.size(), 3u);
  CheckedCall call(CollectiveDesc::of(plan), DataType::Float32, ReduceOp::Sum, 100, false, 1);
  llvm::Error err = coll::testing::runOnDevice(
      call, DataType::Float32, [&](const CallArgs &a) -> llvm::Error {
        auto prepared = ranks[1]->prepare(a);
        if (prepared)
          return llvm::createStringError(llvm::inconvertibleErrorCode(), "prepared");
        return prepared.takeError();
      });
  ASSERT_TRUE(static_cast<bool>(err));
  std::string message = llvm::toString(std::move(err));
  EXPECT_NE(message.find("rank 1's direct steps reach rank 0's output buffer"), std::string::npos)
      << message;
  EXPECT_NE(message.find("(setPeerBuffers)"), std::string::npos) << message;
  // The wrong number of entries, and an executor of every rank.
  std::vector<PeerBuffers> two(2);
  message = llvm::toString(ranks[0]->setPeerBuffers(two));
  EXPECT_NE(message.find("2 entries for 3 ranks"), std::string::npos) << message;
  auto every = coll::testing::deviceBackend().create(plan, gpuOptions);
  ASSERT_TRUE(static_cast<bool>(every)) << llvm::toString(every.takeError());
  message = llvm::toString((*every)->setPeerBuffers(std::vector<PeerBuffers>(3)));
  EXPECT_NE(message.find("runs every rank itself"), std::string::npos) << message;
}

TEST_F(GpuExecutor, ManyRanksOnOneGpu) {
  auto [hostOptions, gpuOptions] = optionsWithSlots(256);
  auto ring = makeExecutors(planOf(coll::testing::ringAllReduce(16, ir::Protocol::Simple)),
                            hostOptions, gpuOptions);
  expectSameAsHost(ring, DataType::Int32, ReduceOp::Sum, 4099, true, "ring n=16");
  auto pairs = makeExecutors(planOf(coll::testing::allPairsAllReduce(8, ir::Protocol::LL)),
                             hostOptions, gpuOptions);
  expectSameAsHost(pairs, DataType::Float16, ReduceOp::Max, 999, false, "allpairs n=8");
}

TEST_F(GpuExecutor, ReusedAcrossCallsOfDifferentShapes) {
  auto [hostOptions, gpuOptions] = optionsWithSlots(120 * 2);
  auto ex = makeExecutors(planOf(coll::testing::ringAllReduce(4, ir::Protocol::LL128, 2)),
                          hostOptions, gpuOptions);
  struct Call {
    DataType type;
    uint64_t count;
    bool inplace;
  };
  for (Call c : {Call{DataType::Float32, 5, false}, Call{DataType::Uint8, 1000, true},
                 Call{DataType::Float64, 333, false}, Call{DataType::Float32, 5, true},
                 Call{DataType::BFloat16, 70001, true}})
    expectSameAsHost(ex, c.type, ReduceOp::Sum, c.count, c.inplace,
                     dataTypeName(c.type).str() + " count=" + std::to_string(c.count));
}

TEST_F(GpuExecutor, ZeroCountIsANoOp) {
  auto [hostOptions, gpuOptions] = optionsWithSlots(0);
  auto ex = makeExecutors(planOf(coll::testing::ringAllReduce(2, ir::Protocol::LL)), hostOptions,
                          gpuOptions);
  CheckedCall call(CollectiveDesc::of(ex.gpu->plan()), DataType::Float32, ReduceOp::Sum, 0, false,
                   1);
  // A call of 0 elements touches no memory, so host pointers will do.
  auto result = ex.gpu->run(call.args());
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  EXPECT_EQ(result->iterations, 0u);
}

TEST_F(GpuExecutor, RejectsBadBuffersAsTheHostDoes) {
  auto ex = makeExecutors(planOf(coll::testing::directAllToAll(2, ir::Protocol::Simple)), {}, {});
  CheckedCall call(CollectiveDesc::of(ex.gpu->plan()), DataType::Float32, ReduceOp::Sum, 8, true,
                   1);
  llvm::Error err =
      coll::testing::runOnDevice(call, DataType::Float32, [&](const CallArgs &a) -> llvm::Error {
        auto result = ex.gpu->run(a);
        return result ? llvm::Error::success() : result.takeError();
      });
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("does not support in-place"), std::string::npos);
}

// Launch captured once, replayed three times without the host: the
// generation counter and FIFO counters advance on the device.
TEST_F(GpuExecutor, GraphReplaysMatchTheHost) {
  for (ir::Protocol proto : {ir::Protocol::Simple, ir::Protocol::LL, ir::Protocol::LL128}) {
    auto [hostOptions, gpuOptions] = optionsWithSlots(256);
    auto ex =
        makeExecutors(planOf(coll::testing::allPairsAllReduce(4, proto)), hostOptions, gpuOptions);
    const std::string what = "allpairs " + protoName(proto);
    const Plan &plan = ex.gpu->plan();
    CollectiveDesc desc = CollectiveDesc::of(plan);
    const uint64_t count = 3001;
    CheckedCall reference(desc, DataType::Float32, ReduceOp::Sum, count, false, 7);
    ASSERT_TRUE(static_cast<bool>(ex.host->run(reference.args())));

    CheckedCall call(desc, DataType::Float32, ReduceOp::Sum, count, false, 7);
    coll::testing::expectGraphReplaysMatch(*ex.gpu, reference, call, 4, what);

    // Ordinary launches continue after the replays.
    expectSameAsHost(ex, DataType::Float32, ReduceOp::Sum, 77, true, what + " after replays");
  }
}

// One executor per rank, as the processes of a job have (CudaOptions::rank):
// each launches only its rank's blocks, receives on FIFOs of its own and
// sends on the receivers' (same process here, so their pointers; across
// processes by CUDA IPC, which the runtime's tests run). The launches run at
// once, one thread per rank, and every rank matches the host backend.
TEST_F(GpuExecutor, OneExecutorPerRankMatchesTheHost) {
  struct Case {
    ir::Algorithm alg;
    DataType type;
    ReduceOp op;
    uint64_t count;
    bool inplace;
  };
  std::vector<Case> cases;
  for (ir::Protocol proto : {ir::Protocol::Simple, ir::Protocol::LL, ir::Protocol::LL128}) {
    cases.push_back({coll::testing::ringAllReduce(4, proto), DataType::Float32, ReduceOp::Sum,
                     3001, false});
    cases.push_back({coll::testing::ringAllReduce(3, proto), DataType::Int8, ReduceOp::Avg, 500,
                     true});
  }
  cases.push_back({coll::testing::allPairsAllReduce(4, ir::Protocol::Simple), DataType::Float64,
                   ReduceOp::Max, 1001, false});
  cases.push_back({coll::testing::chainReduce(3, 1, 3, ir::Protocol::LL), DataType::Float32,
                   ReduceOp::Avg, 700, false});
  cases.push_back({coll::testing::directAllToAll(3, ir::Protocol::LL128), DataType::Int32,
                   ReduceOp::Sum, 99, false});
  for (Case &c : cases) {
    auto [hostOptions, gpuOptions] = optionsWithSlots(512);
    const Plan plan = planOf(c.alg);
    const std::string what = plan.fileName + " " + ir::collectiveName(plan.collective).str() +
                             " " + protoName(plan.protocol) + " of " +
                             std::to_string(plan.nranks) + " ranks";
    auto host = HostExecutor::create(plan, hostOptions);
    ASSERT_TRUE(static_cast<bool>(host)) << llvm::toString(host.takeError());
    coll::testing::RankExecutors ranks;
    for (int32_t r = 0; r < plan.nranks; ++r) {
      CudaOptions options = gpuOptions;
      options.rank = r;
      auto gpu = coll::testing::deviceBackend().create(plan, options);
      ASSERT_TRUE(static_cast<bool>(gpu)) << what << ": " << llvm::toString(gpu.takeError());
      ranks.push_back(std::move(*gpu));
    }
    // Not connected yet: a clear refusal, not a crash.
    CollectiveDesc desc = CollectiveDesc::of(plan);
    CheckedCall call(desc, c.type, c.op, c.count, c.inplace, 5);
    {
      llvm::Error err =
          coll::testing::runOnDevice(call, c.type, [&](const CallArgs &a) -> llvm::Error {
            auto prepared = ranks[0]->prepare(a);
            return prepared ? llvm::Error::success() : prepared.takeError();
          });
      ASSERT_TRUE(static_cast<bool>(err)) << what;
      EXPECT_NE(llvm::toString(std::move(err)).find("whose FIFOs are not mapped"),
                std::string::npos);
    }
    {
      llvm::Error err = coll::testing::connectRanks(ranks);
      ASSERT_FALSE(static_cast<bool>(err)) << what << ": " << llvm::toString(std::move(err));
    }
    CheckedCall reference(desc, c.type, c.op, c.count, c.inplace, 5);
    ASSERT_TRUE(static_cast<bool>((*host)->run(reference.args())));
    for (int repeat = 0; repeat < 2; ++repeat) {
      call.reset();
      llvm::Error err =
          coll::testing::runOnDevice(call, c.type, [&](const CallArgs &a) -> llvm::Error {
            return coll::testing::runRanks(ranks, a, [&](size_t r) -> std::string {
              const uint32_t blocks = ranks[r]->launchShape().blocks;
              return blocks == static_cast<uint32_t>(plan.tbCount(static_cast<int32_t>(r)))
                         ? ""
                         : "launched " + std::to_string(blocks) + " blocks";
            });
          });
      ASSERT_FALSE(static_cast<bool>(err)) << what << ": " << llvm::toString(std::move(err));
      const uint64_t es = dataTypeSize(c.type);
      for (int32_t r = 0; r < plan.nranks; ++r)
        EXPECT_EQ(std::memcmp(reference.args().output[r], call.args().output[r],
                              call.outputElems() * es),
                  0)
            << what << " call " << repeat << " rank " << r;
    }
  }
}

/// A launch that waits for a rank that never comes, and what ends it: a
/// 2-rank Simple ring, an executor of one rank each (given `hostStop`),
/// connected, with a watchdog of a minute. waitThen() runs rank 0 alone
/// (it waits for rank 1) and calls `interrupt` 300 ms (scaled) later;
/// bothMatchTheHost() then checks that once both have aborted, a call of
/// both ranks equals the host backend's.
struct WaitingRank {
  const void *hostStop = nullptr;
  Plan plan = planOf(coll::testing::ringAllReduce(2, ir::Protocol::Simple));
  coll::testing::RankExecutors ranks;

  llvm::Error connect() {
    CudaOptions gpuOptions = optionsWithSlots(512).second;
    gpuOptions.watchdogMs = uint32_t(coll::testing::scaledMs(60000));
    for (int32_t r = 0; r < 2; ++r) {
      CudaOptions options = gpuOptions;
      options.rank = r;
      options.hostStop = hostStop;
      auto gpu = coll::testing::deviceBackend().create(plan, options);
      if (!gpu)
        return gpu.takeError();
      ranks.push_back(std::move(*gpu));
    }
    return coll::testing::connectRanks(ranks);
  }

  /// How long rank 0's call took, and its error ("" if none).
  std::pair<long long, std::string> waitThen(const std::function<llvm::Error()> &interrupt) {
    CheckedCall call(CollectiveDesc::of(plan), DataType::Float32, ReduceOp::Sum, 100000, false, 3);
    long long ms = 0;
    std::string failure;
    llvm::Error err =
        coll::testing::runOnDevice(call, DataType::Float32, [&](const CallArgs &a) -> llvm::Error {
          const auto start = std::chrono::steady_clock::now();
          std::thread waiting([&] {
            auto result = ranks[0]->run(a);
            if (!result)
              failure = llvm::toString(result.takeError());
          });
          std::this_thread::sleep_for(std::chrono::milliseconds(coll::testing::scaledMs(300)));
          llvm::Error interrupted = interrupt();
          waiting.join();
          ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - start)
                   .count();
          return interrupted;
        });
    EXPECT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
    return {ms, failure};
  }

  /// Rank 0 wrote into rank 1's FIFOs before it stopped: once every rank
  /// has aborted, they start afresh together.
  void bothMatchTheHost(const char *after) {
    for (auto &rank : ranks) {
      llvm::Error err = rank->abort();
      ASSERT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
    }
    const CollectiveDesc desc = CollectiveDesc::of(plan);
    auto host = HostExecutor::create(plan, optionsWithSlots(512).first);
    ASSERT_TRUE(static_cast<bool>(host)) << llvm::toString(host.takeError());
    CheckedCall reference(desc, DataType::Float32, ReduceOp::Sum, 100000, false, 4);
    ASSERT_TRUE(static_cast<bool>((*host)->run(reference.args())));
    CheckedCall again(desc, DataType::Float32, ReduceOp::Sum, 100000, false, 4);
    llvm::Error err = coll::testing::runOnDevice(
        again, DataType::Float32, [&](const CallArgs &a) { return coll::testing::runRanks(ranks, a); });
    ASSERT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
    for (int r = 0; r < 2; ++r)
      EXPECT_EQ(std::memcmp(reference.args().output[r], again.args().output[r],
                            again.outputElems() * 4),
                0)
          << "rank " << r << " after " << after;
  }
};

// abort() stops a launch that waits for a rank that never comes, long
// before its watchdog; once every rank's executor has aborted they are
// usable again: the next call of both ranks matches the host backend.
TEST_F(GpuExecutor, AbortStopsAWaitingLaunch) {
  WaitingRank pair;
  llvm::Error err = pair.connect();
  ASSERT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
  auto [ms, failure] = pair.waitThen([&] { return pair.ranks[0]->abort(); });
  EXPECT_LT(ms, coll::testing::scaledMs(10000)) << "the launch ran on after abort()";
  EXPECT_EQ(failure, "") << "an aborted launch ends without a watchdog report";
  pair.bothMatchTheHost("abort()");
}

// CudaOptions::hostStop: rank 0's launch waits for rank 1, which never
// runs; raising the word (as another process of the host would raise the
// runtime's stop word) ends it long before its watchdog, with a report of
// where it stood. Lowered again, the executors run correct calls.
TEST_F(GpuExecutor, RaisedHostStopEndsAWaitingLaunch) {
  // A page of its own, shared as the runtime's control segment is.
  void *page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  auto unmap = llvm::make_scope_exit([&] { munmap(page, 4096); });
  auto *word = new (static_cast<char *>(page) + 64) std::atomic<uint32_t>(0);
  {
    WaitingRank pair;
    pair.hostStop = word;
    llvm::Error err = pair.connect();
    ASSERT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
    auto [ms, failure] = pair.waitThen([&] {
      word->store(1, std::memory_order_seq_cst);
      return llvm::Error::success();
    });
    EXPECT_LT(ms, coll::testing::scaledMs(10000)) << "the launch waited on after the stop";
    EXPECT_NE(failure.find("stopped at rank 0 tb "), std::string::npos) << failure;
    EXPECT_NE(failure.find("the stop word of this host's ranks was raised"), std::string::npos)
        << failure;
    word->store(0, std::memory_order_seq_cst);
    pair.bothMatchTheHost("the stop");
  } // the executors unregister the page before it is unmapped
}

TEST_F(GpuExecutor, TimesLaunchesAndGraphReplays) {
  auto ex = makeExecutors(planOf(coll::testing::ringAllReduce(4, ir::Protocol::LL)), {}, {});
  CheckedCall call(CollectiveDesc::of(ex.gpu->plan()), DataType::Float32, ReduceOp::Sum, 2048, true,
                   1);
  llvm::Error err =
      coll::testing::runOnDevice(call, DataType::Float32, [&](const CallArgs &a) -> llvm::Error {
        auto prepared = ex.gpu->prepare(a);
        if (!prepared)
          return prepared.takeError();
        for (bool graph : {false, true}) {
          auto seconds = ex.gpu->timeLaunches(2, 5, graph);
          if (!seconds)
            return seconds.takeError();
          EXPECT_EQ(seconds->size(), 5u);
          for (double s : *seconds)
            EXPECT_GT(s, 0.0);
        }
        return llvm::Error::success();
      });
  ASSERT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
  auto copy = coll::testing::deviceBackend().timeDeviceCopy(1 << 20, 1, 3);
  ASSERT_TRUE(static_cast<bool>(copy)) << llvm::toString(copy.takeError());
  EXPECT_EQ(copy->size(), 3u);
}

class GpuWatchdog : public CudaTest, public ::testing::WithParamInterface<ir::Protocol> {};

TEST_P(GpuWatchdog, ReportsAStallAndRecovers) {
  HostOptions hostOptions;
  CudaOptions gpuOptions;
  gpuOptions.watchdogMs = uint32_t(coll::testing::scaledMs(200));
  auto ex = makeExecutors(planOf(coll::testing::fifoDeadlock(GetParam())), hostOptions, gpuOptions);
  CheckedCall call(CollectiveDesc::of(ex.gpu->plan()), DataType::Float32, ReduceOp::Sum, 64, false,
                   1);
  std::string message;
  llvm::Error err =
      coll::testing::runOnDevice(call, DataType::Float32, [&](const CallArgs &a) -> llvm::Error {
        auto result = ex.gpu->run(a);
        if (result)
          return llvm::Error::success();
        message = llvm::toString(result.takeError());
        return llvm::Error::success();
      });
  ASSERT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
  EXPECT_NE(message.find("watchdog: no progress for " + std::to_string(gpuOptions.watchdogMs) +
                         " ms"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("tb 0 (channel 0) step 0 (s) iteration 0"), std::string::npos) << message;
  EXPECT_NE(message.find("the FIFO of 8 slots is full"), std::string::npos) << message;
  EXPECT_NE(message.find("sender filled 8 slots, receiver freed 0"), std::string::npos) << message;
  // Word for word the host backend's report of the same stall (the
  // device waits in the host's order).
  HostOptions hostStall;
  hostStall.watchdogMs = gpuOptions.watchdogMs;
  auto host = HostExecutor::create(ex.gpu->plan(), hostStall);
  ASSERT_TRUE(static_cast<bool>(host)) << llvm::toString(host.takeError());
  CheckedCall onHost(CollectiveDesc::of(ex.gpu->plan()), DataType::Float32, ReduceOp::Sum, 64,
                     false, 1);
  auto hostResult = (*host)->run(onHost.args());
  ASSERT_FALSE(static_cast<bool>(hostResult));
  // The fixture is symmetric: whichever rank's wait times out first reports.
  auto mirrored = [](std::string m) {
    for (auto [from, to] : {std::pair<const char *, const char *>{"rank 0 ", "rank # "},
                            {"rank 1 ", "rank 0 "}, {"rank # ", "rank 1 "},
                            {"0->1", "#"}, {"1->0", "0->1"}, {"#", "1->0"}})
      if (size_t at = m.find(from); at != std::string::npos)
        m.replace(at, std::strlen(from), to);
    return m;
  };
  const std::string hostMessage = llvm::toString(hostResult.takeError());
  EXPECT_TRUE(hostMessage == message || hostMessage == mirrored(message))
      << "host: " << hostMessage << "\ndevice: " << message;

  // The device state was cleared: 4 elements make 4 one-element sends, which
  // fit in the FIFO, and the results match a host executor that never stalled.
  // (The program swaps chunks; it is no allreduce, so only the host compares.)
  expectSameAsHost(ex, DataType::Float32, ReduceOp::Sum, 4, false, "after the watchdog", 1,
                   /*checkDefinition=*/false);
}

INSTANTIATE_TEST_SUITE_P(Protocols, GpuWatchdog,
                         ::testing::Values(ir::Protocol::Simple, ir::Protocol::LL,
                                           ir::Protocol::LL128),
                         [](const auto &info) { return protoName(info.param); });

TEST_F(GpuExecutor, RefusesPlansWhoseBlocksCannotAllBeResident) {
#if COLL_CUDA_EMULATION
  // A described device of 4 SMs, so that the plan below has tens of blocks,
  // not hundreds (each of the CPU's GPU threads is a fiber with a stack).
  const DeviceDescription saved = describedDevice();
  DeviceDescription small = saved;
  small.smCount = 4;
  describeDevice(small);
  auto restore = llvm::make_scope_exit([&] { describeDevice(saved); });
#endif
  int device = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
  // At most 2048 threads per SM on any GPU this builds for: 4 blocks of 512.
  CudaOptions options;
  options.threadsPerBlock = 512;
  options.simpleSlotBytes = 64;
  int n = static_cast<int>(std::ceil(std::sqrt(4.0 * sms + 1)));
  Plan plan = planOf(coll::testing::directAllToAll(n, ir::Protocol::Simple)); // n*n tbs
  ASSERT_GT(plan.tbs.size(), static_cast<size_t>(4 * sms));
  auto gpu = coll::testing::deviceBackend().create(plan, options);
  ASSERT_TRUE(static_cast<bool>(gpu)) << llvm::toString(gpu.takeError());
  CheckedCall call(CollectiveDesc::of(plan), DataType::Float32, ReduceOp::Sum, n, false, 1);
  llvm::Error err =
      coll::testing::runOnDevice(call, DataType::Float32, [&](const CallArgs &a) -> llvm::Error {
        auto result = (*gpu)->prepare(a);
        return result ? llvm::Error::success() : result.takeError();
      });
  ASSERT_TRUE(static_cast<bool>(err));
  std::string message = llvm::toString(std::move(err));
  EXPECT_NE(message.find("the launch's " + std::to_string(plan.tbs.size()) +
                         " thread blocks must all be resident at once"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("x " + std::to_string(sms) + " SMs with 512 threads"), std::string::npos)
      << message;

  // By default the executor takes smaller blocks until all of them fit.
  options.threadsPerBlock = 0;
  auto automatic = coll::testing::deviceBackend().create(plan, options);
  ASSERT_TRUE(static_cast<bool>(automatic)) << llvm::toString(automatic.takeError());
  err = coll::testing::runOnDevice(call, DataType::Float32, [&](const CallArgs &a) -> llvm::Error {
    auto result = (*automatic)->run(a);
    return result ? llvm::Error::success() : result.takeError();
  });
  ASSERT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
  LaunchShape shape = (*automatic)->launchShape();
  EXPECT_LT(shape.threads, 512u);
  EXPECT_GE(uint64_t(shape.blocksPerSm) * shape.smCount, plan.tbs.size());
  EXPECT_EQ(call.check().wrong, 0u);
}

} // namespace
