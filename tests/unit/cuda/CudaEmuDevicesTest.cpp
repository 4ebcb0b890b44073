//===- CudaEmuDevicesTest.cpp - Several emulated GPUs and the scope checker ===//
//
// Ranks placed on several emulated GPUs of one process (rt::EmulatedDevices,
// docs/CUDA.md "Emulated devices"), one executor per rank as a job has, and
// the scope checker (emu/Simt.h, "Scopes") that fails a launch whose
// synchronising access has a scope too narrow for the memory it touches.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"
#include "TestAlgorithms.h"
#include "TimeScale.h"

#include "device/Hardware.h"
#include "emu/Runtime.h"
#include "emu/Simt.h"

#include <gtest/gtest.h>

#include "llvm/ADT/ScopeExit.h"

#include <functional>
#include <thread>

using namespace coll;
using namespace coll::interp;
using coll::testing::planOf;
namespace rt = coll::interp::cuda::rt;

namespace {

/// `count` shared emulated GPUs with P2P as `p2p` says, for one test.
class Gpus {
public:
  explicit Gpus(int count, const std::string &p2p = "on") : saved(rt::emulatedDevices()) {
    rt::EmulatedDevices d;
    d.count = count;
    d.shared = true;
    d.first = 0;
    EXPECT_TRUE(rt::parsePeerPairs(p2p, count, d.p2p)) << p2p;
    rt::configureEmulatedDevices(d);
  }
  ~Gpus() { rt::configureEmulatedDevices(saved); }

private:
  rt::EmulatedDevices saved;
};

std::pair<HostOptions, CudaOptions> options() {
  HostOptions host;
  CudaOptions gpu;
  host.watchdogMs = gpu.watchdogMs = uint32_t(coll::testing::scaledMs(20000));
  host.simpleSlotBytes = host.llSlotBytes = host.ll128SlotBytes = 512;
  gpu.simpleSlotBytes = gpu.llSlotBytes = gpu.ll128SlotBytes = 512;
  return {host, gpu};
}

/// One executor per rank, rank r's created on GPU deviceOf[r], connected as
/// a job's ranks are, the launches at once on one thread per rank; one call,
/// every rank's output compared with the host backend's. `tamper` may
/// change the exports before every rank reads them. Returns "" or what went
/// wrong.
std::string runPlaced(const Plan &plan, const std::vector<int> &deviceOf, DataType type,
                      ReduceOp op, uint64_t count, bool inplace,
                      const coll::testing::ExportTamper &tamper = {}) {
  auto [hostOptions, gpuOptions] = options();
  auto host = HostExecutor::create(plan, hostOptions);
  if (!host)
    return "host: " + llvm::toString(host.takeError());
  coll::testing::RankExecutors ranks;
  for (int32_t r = 0; r < plan.nranks; ++r) {
    if (rt::cudaSetDevice(deviceOf[r]) != rt::cudaSuccess)
      return "cudaSetDevice(" + std::to_string(deviceOf[r]) + ") failed";
    CudaOptions o = gpuOptions;
    o.rank = r;
    auto gpu = coll::testing::deviceBackend().create(plan, o);
    if (!gpu)
      return "rank " + std::to_string(r) + ": " + llvm::toString(gpu.takeError());
    ranks.push_back(std::move(*gpu));
  }
  rt::cudaSetDevice(0);
  if (llvm::Error err = coll::testing::connectRanks(ranks, tamper))
    return llvm::toString(std::move(err));
  CollectiveDesc desc = CollectiveDesc::of(plan);
  CheckedCall reference(desc, type, op, count, inplace, 11);
  if (auto done = (*host)->run(reference.args()); !done)
    return "host: " + llvm::toString(done.takeError());
  CheckedCall call(desc, type, op, count, inplace, 11);
  // Direct steps: every rank's scratch on its GPU, and the peers' buffers.
  std::vector<void *> scratch;
  auto freeScratch = llvm::make_scope_exit([&] {
    for (void *p : scratch)
      rt::cudaFree(p);
  });
  if (!plan.stepPeers.empty()) {
    auto layout = resolveCall(plan, count);
    if (!layout)
      return llvm::toString(layout.takeError());
    for (int32_t r = 0; r < plan.nranks; ++r) {
      void *p = nullptr;
      rt::cudaSetDevice(deviceOf[r]);
      if (rt::cudaMalloc(&p, std::max<uint64_t>(layout->scratchElems[r], 1) *
                                 dataTypeSize(type)) != rt::cudaSuccess)
        return "cudaMalloc of rank " + std::to_string(r) + "'s scratch failed";
      scratch.push_back(p);
    }
    rt::cudaSetDevice(0);
  }
  llvm::Error err = coll::testing::runOnDevice(call, type, [&](const CallArgs &a) -> llvm::Error {
    if (!scratch.empty())
      if (llvm::Error e = coll::testing::givePeerBuffers(ranks, a, scratch))
        return e;
    return coll::testing::runRanks(ranks, a);
  });
  if (err)
    return llvm::toString(std::move(err));
  const uint64_t es = dataTypeSize(type);
  for (int32_t r = 0; r < plan.nranks; ++r)
    if (std::memcmp(reference.args().output[r], call.args().output[r], call.outputElems() * es))
      return "rank " + std::to_string(r) + "'s output differs from the host backend's";
  return "";
}

std::string describe(const Plan &plan, const std::vector<int> &deviceOf) {
  std::string s = plan.fileName + " " + ir::collectiveName(plan.collective).str() + " " +
                  std::string(ir::protocolName(plan.protocol)) + ", GPUs of the ranks:";
  for (int d : deviceOf)
    s += " " + std::to_string(d);
  return s;
}

/// A test program of every collective for `n` ranks, per protocol.
std::vector<std::function<ir::Algorithm(ir::Protocol)>> everyCollective(int n) {
  return {
      [n](ir::Protocol p) { return coll::testing::ringAllReduce(n, p); },
      [n](ir::Protocol p) { return coll::testing::allPairsAllReduce(n, p); },
      [n](ir::Protocol p) { return coll::testing::ringAllGather(n, p); },
      [n](ir::Protocol p) { return coll::testing::ringReduceScatter(n, p); },
      [n](ir::Protocol p) { return coll::testing::directAllToAll(n, p); },
      [n](ir::Protocol p) { return coll::testing::chainBroadcast(n, n - 1, 2, p); },
      [n](ir::Protocol p) { return coll::testing::chainReduce(n, 0, 2, p); },
      [n](ir::Protocol p) { return coll::testing::directGather(n, 1, p); },
      [n](ir::Protocol p) { return coll::testing::directScatter(n, 0, p); },
  };
}

// Every collective of the test programs and every protocol, on 2 to 4 GPUs
// with 1 to 4 ranks each, placed in blocks and round robin: every rank
// matches the host backend and the scope checker finds nothing (a connection
// between two GPUs must run at .sys, and does).
TEST(EmuMultiDevice, EveryCollectiveAndProtocolOnTwoToFourGpus) {
  Gpus gpus(4);
  const std::vector<std::vector<int>> placements = {
      {0, 1}, {0, 0, 1, 1}, {0, 1, 2}, {0, 1, 2, 3}, {0, 1, 2, 3, 0, 1, 2, 3}, {0, 0, 0, 0, 1, 1, 1, 1}};
  const ir::Protocol protocols[] = {ir::Protocol::Simple, ir::Protocol::LL, ir::Protocol::LL128};
  for (size_t i = 0; i < placements.size(); ++i) {
    const std::vector<int> &deviceOf = placements[i];
    const int n = static_cast<int>(deviceOf.size());
    const std::vector<std::function<ir::Algorithm(ir::Protocol)>> algorithms =
        everyCollective(n);
    // Each placement runs every algorithm, the protocols in turn, so that
    // every (algorithm, protocol) pair runs on two placements.
    for (size_t a = 0; a < algorithms.size(); ++a) {
      const ir::Protocol proto = protocols[(i + a) % 3];
      const Plan plan = planOf(algorithms[a](proto));
      const DataType type = a % 2 ? DataType::Float32 : DataType::Int32;
      EXPECT_EQ(runPlaced(plan, deviceOf, type, ReduceOp::Sum, 1500 + 37 * i, a % 3 == 0), "")
          << describe(plan, deviceOf);
    }
  }
}

// Direct steps between GPUs: each rank loads and stores its peers' buffers
// on other GPUs with peer access and signals them at .sys, on 2 to 4 GPUs,
// the scope checker watching; ranks that share a GPU signal at .gpu. Without
// peer access, every rank refuses at placement, naming the peer and why.
TEST(EmuMultiDevice, DirectStepsBetweenGpus) {
  Gpus gpus(4);
  const std::vector<std::vector<int>> placements = {{0, 1}, {0, 1, 2}, {0, 0, 1, 1}, {0, 1, 2, 3}};
  for (const std::vector<int> &deviceOf : placements) {
    const int n = static_cast<int>(deviceOf.size());
    for (const ir::Algorithm &alg : coll::testing::peerAllReduces(n)) {
      const Plan plan = planOf(alg);
      const uint64_t before = cuda::simt::sysScopedAccesses.load();
      EXPECT_EQ(runPlaced(plan, deviceOf, DataType::Float32, ReduceOp::Sum, 2001,
                          !plan.outofplace),
                "")
          << describe(plan, deviceOf);
      EXPECT_GT(cuda::simt::sysScopedAccesses.load(), before) << describe(plan, deviceOf);
    }
  }
  const Plan plan = planOf(coll::testing::peerTwoShotAllReduce(3));
  const uint64_t before = cuda::simt::sysScopedAccesses.load();
  EXPECT_EQ(runPlaced(plan, {2, 2, 2}, DataType::Int32, ReduceOp::Max, 999, false), "");
  EXPECT_EQ(cuda::simt::sysScopedAccesses.load(), before) << "ranks of one GPU ran .sys accesses";
}

TEST(EmuNoP2P, DirectStepsNeedPeerAccess) {
  Gpus gpus(2, "off");
  const Plan plan = planOf(coll::testing::peerTwoShotAllReduce(2));
  const std::string refused =
      runPlaced(plan, {0, 1}, DataType::Float32, ReduceOp::Sum, 100, false);
  EXPECT_NE(refused.find("direct steps reach rank 1"), std::string::npos) << refused;
  EXPECT_NE(refused.find("their GPUs have no peer access"), std::string::npos) << refused;
  ::setenv("COLL_P2P_DISABLE", "1", 1);
  const std::string disabled =
      runPlaced(plan, {0, 0}, DataType::Float32, ReduceOp::Sum, 100, false);
  ::unsetenv("COLL_P2P_DISABLE");
  EXPECT_NE(disabled.find("COLL_P2P_DISABLE=1"), std::string::npos) << disabled;
  EXPECT_EQ(runPlaced(plan, {1, 1}, DataType::Float32, ReduceOp::Sum, 100, false), "");
}

// The scope follows from the placement: ranks that share a GPU connect at
// .gpu and run no .sys access at all; ranks on two GPUs connect at .sys.
TEST(EmuMultiDevice, ConnectionsWithinOneGpuRunNoSysAccess) {
  Gpus gpus(2);
  const Plan plan = planOf(coll::testing::ringAllReduce(4, ir::Protocol::Simple));
  const uint64_t before = cuda::simt::sysScopedAccesses.load();
  EXPECT_EQ(runPlaced(plan, {1, 1, 1, 1}, DataType::Float32, ReduceOp::Sum, 3000, false), "");
  EXPECT_EQ(cuda::simt::sysScopedAccesses.load(), before) << "ranks of one GPU ran .sys accesses";
  EXPECT_EQ(runPlaced(plan, {0, 0, 1, 1}, DataType::Float32, ReduceOp::Sum, 3000, false), "");
  EXPECT_GT(cuda::simt::sysScopedAccesses.load(), before)
      << "the connections between GPU 0 and GPU 1 ran no .sys access";
}

// The mistake the checker exists for, planted: rank 2 says it shares GPU 0
// with ranks 0 and 1 (its export carries GPU 0's UUID) while it runs on
// GPU 1, so the connections between them are given .gpu. The checker
// catches the first such access and the call fails, naming it.
TEST(EmuScope, PlantedGpuScopeOnACrossGpuConnectionIsCaught) {
  Gpus gpus(2);
  for (ir::Protocol proto : {ir::Protocol::Simple, ir::Protocol::LL, ir::Protocol::LL128}) {
    const Plan plan = planOf(coll::testing::ringAllReduce(3, proto));
    std::string failure = runPlaced(plan, {0, 0, 1}, DataType::Float32, ReduceOp::Sum, 3000, false,
                                    [](std::vector<ConnectionExport> &exports) {
                                      std::memcpy(exports[2].deviceUuid, exports[0].deviceUuid,
                                                  sizeof exports[2].deviceUuid);
                                    });
    EXPECT_NE(failure.find("scope error"), std::string::npos)
        << ir::protocolName(proto).str() << ": " << failure;
    EXPECT_NE(failure.find(".gpu"), std::string::npos) << failure;
    // Told the truth, the same placement passes.
    EXPECT_EQ(runPlaced(plan, {0, 0, 1}, DataType::Float32, ReduceOp::Sum, 3000, false), "");
  }
}

// The checker's rule, on single accesses of a one-thread kernel.
void scopedStore(uint64_t *word, uint32_t sys) {
  using namespace coll::interp::cuda;
  if (threadIdx.x == 0)
    ptx::stRelease(word, 1, sys ? Scope::Sys : Scope::Gpu);
}

std::string storeFromGpu(int gpu, uint64_t *word, bool sys) {
  uint32_t s = sys;
  void *args[] = {&word, &s};
  EXPECT_EQ(rt::cudaSetDevice(gpu), rt::cudaSuccess);
  rt::cudaError_t err = rt::cudaLaunchKernel(COLL_KERNEL_HANDLE(scopedStore), rt::dim3(1),
                                             rt::dim3(32), args, 0, nullptr);
  rt::cudaSetDevice(0);
  return err == rt::cudaSuccess ? "" : rt::lastLaunchFailure();
}

TEST(EmuScope, GpuScopeReachesItsOwnGpuOnly) {
  Gpus gpus(3);
  void *onGpu1 = nullptr;
  ASSERT_EQ(rt::cudaSetDevice(1), rt::cudaSuccess);
  ASSERT_EQ(rt::cudaMalloc(&onGpu1, 4096), rt::cudaSuccess);
  ASSERT_EQ(rt::cudaSetDevice(0), rt::cudaSuccess);
  auto *word = static_cast<uint64_t *>(onGpu1) + 100;
  EXPECT_EQ(storeFromGpu(1, word, false), "");
  EXPECT_EQ(storeFromGpu(1, word, true), "");
  const std::string wrong = storeFromGpu(2, word, false);
  EXPECT_NE(wrong.find("scope error: st.release.gpu"), std::string::npos) << wrong;
  EXPECT_NE(wrong.find("emulated GPU 1"), std::string::npos) << wrong;
  EXPECT_NE(wrong.find("emulated GPU 2"), std::string::npos) << wrong;
  EXPECT_EQ(storeFromGpu(2, word, true), "");
  EXPECT_EQ(rt::cudaFree(onGpu1), rt::cudaSuccess);
}

TEST(EmuScope, GpuScopeOnHostMemoryIsAnError) {
  Gpus gpus(1);
  void *pinned = nullptr;
  ASSERT_EQ(rt::cudaHostAlloc(&pinned, 4096, rt::cudaHostAllocMapped), rt::cudaSuccess);
  const std::string wrong = storeFromGpu(0, static_cast<uint64_t *>(pinned), false);
  EXPECT_NE(wrong.find("host memory"), std::string::npos) << wrong;
  EXPECT_EQ(storeFromGpu(0, static_cast<uint64_t *>(pinned), true), "");
  EXPECT_EQ(rt::cudaFreeHost(pinned), rt::cudaSuccess);
}

TEST(EmuScope, SysScopeNeedsPeerAccessNoP2P) {
  Gpus gpus(3, "0-1");
  int can = -1;
  EXPECT_EQ(rt::cudaDeviceCanAccessPeer(&can, 0, 1), rt::cudaSuccess);
  EXPECT_EQ(can, 1);
  EXPECT_EQ(rt::cudaDeviceCanAccessPeer(&can, 2, 0), rt::cudaSuccess);
  EXPECT_EQ(can, 0);
  ASSERT_EQ(rt::cudaSetDevice(2), rt::cudaSuccess);
  EXPECT_EQ(rt::cudaDeviceEnablePeerAccess(0, 0), rt::cudaErrorPeerAccessUnsupported);
  ASSERT_EQ(rt::cudaSetDevice(1), rt::cudaSuccess);
  EXPECT_EQ(rt::cudaDeviceEnablePeerAccess(0, 0), rt::cudaSuccess);
  EXPECT_EQ(rt::cudaDeviceEnablePeerAccess(0, 0), rt::cudaErrorPeerAccessAlreadyEnabled);
  ASSERT_EQ(rt::cudaSetDevice(0), rt::cudaSuccess);
  void *onGpu0 = nullptr;
  ASSERT_EQ(rt::cudaMalloc(&onGpu0, 4096), rt::cudaSuccess);
  auto *word = static_cast<uint64_t *>(onGpu0);
  EXPECT_EQ(storeFromGpu(1, word, true), "");
  const std::string wrong = storeFromGpu(2, word, true);
  EXPECT_NE(wrong.find("P2P off"), std::string::npos) << wrong;
  EXPECT_EQ(rt::cudaFree(onGpu0), rt::cudaSuccess);
}

// GPUs without P2P (docs/RUNTIME.md, "Where a connection's ranks run"):
// a FIFO between two of them lies in pinned host memory, one within a GPU
// in the GPU's; every collective matches the host backend, under the scope
// checker (host memory takes .sys). `hosted` counts the FIFOs the ranks put
// in host memory.
std::string runCounted(const Plan &plan, const std::vector<int> &deviceOf, uint64_t count,
                       uint32_t &hosted) {
  hosted = 0;
  return runPlaced(plan, deviceOf, DataType::Float32, ReduceOp::Sum, count, false,
                   [&](std::vector<ConnectionExport> &exports) {
                     for (const ConnectionExport &e : exports)
                       hosted += e.hostConnections;
                   });
}

TEST(EmuNoP2P, EveryCollectiveOnTwoToFourGpus) {
  Gpus gpus(4, "off");
  const std::vector<std::vector<int>> placements = {
      {0, 1}, {0, 0, 1, 1}, {0, 1, 2}, {0, 1, 2, 3, 0, 1, 2, 3}};
  const ir::Protocol protocols[] = {ir::Protocol::Simple, ir::Protocol::LL};
  for (size_t i = 0; i < placements.size(); ++i) {
    const std::vector<int> &deviceOf = placements[i];
    const int n = static_cast<int>(deviceOf.size());
    const std::vector<std::function<ir::Algorithm(ir::Protocol)>> algorithms =
        everyCollective(n);
    for (size_t a = 0; a < algorithms.size(); ++a) {
      const Plan plan = planOf(algorithms[a](protocols[(i + a) % 2]));
      uint32_t hosted = 0;
      EXPECT_EQ(runCounted(plan, deviceOf, 1500 + 37 * i, hosted), "") << describe(plan, deviceOf);
      EXPECT_GT(hosted, 0u) << describe(plan, deviceOf) << ": no FIFO in host memory";
    }
  }
}

// Which FIFOs go to host memory follows the pairs: with P2P between GPUs 0
// and 1 and between 2 and 3 only, a ring over 0, 1, 2, 3 puts the FIFOs
// from 1 to 2 and from 3 to 0 (one per channel) in host memory and the
// others in GPU memory; with P2P everywhere none.
TEST(EmuNoP2P, OnlyPairsWithoutP2PGoThroughHostMemory) {
  const Plan plan = planOf(coll::testing::ringAllReduce(4, ir::Protocol::Simple));
  uint32_t hosted = 0;
  {
    Gpus gpus(4, "0-1,2-3");
    EXPECT_EQ(runCounted(plan, {0, 1, 2, 3}, 3000, hosted), "");
  }
  uint32_t sent = 0, betweenPairs = 0;
  for (const PlanConnection &c : plan.connections) {
    ++sent;
    betweenPairs += (c.sender < 2) != (c.receiver < 2);
  }
  EXPECT_EQ(hosted, betweenPairs);
  EXPECT_LT(hosted, sent);
  {
    Gpus gpus(4, "on");
    EXPECT_EQ(runCounted(plan, {0, 1, 2, 3}, 3000, hosted), "");
    EXPECT_EQ(hosted, 0u);
  }
}

// COLL_P2P_DISABLE=1 puts every FIFO between two ranks in host memory, on
// one GPU too (the way to run this path on a machine with one GPU); the
// connections then run at .sys. A value other than 0 or 1 is refused.
TEST(EmuNoP2P, P2PDisableMovesEveryFifoToHostMemory) {
  Gpus gpus(1);
  ::setenv("COLL_P2P_DISABLE", "1", 1);
  for (ir::Protocol proto : {ir::Protocol::Simple, ir::Protocol::LL}) {
    const Plan plan = planOf(coll::testing::allPairsAllReduce(4, proto));
    uint32_t hosted = 0;
    const uint64_t before = cuda::simt::sysScopedAccesses.load();
    EXPECT_EQ(runCounted(plan, {0, 0, 0, 0}, 2500, hosted), "") << ir::protocolName(proto).str();
    EXPECT_EQ(hosted, plan.connections.size());
    EXPECT_GT(cuda::simt::sysScopedAccesses.load(), before);
  }
  ::setenv("COLL_P2P_DISABLE", "yes", 1);
  uint32_t hosted = 0;
  const std::string refused = runCounted(
      planOf(coll::testing::ringAllReduce(2, ir::Protocol::Simple)), {0, 0}, 100, hosted);
  ::unsetenv("COLL_P2P_DISABLE");
  EXPECT_NE(refused.find("COLL_P2P_DISABLE=yes"), std::string::npos) << refused;
}

// LL128 is not run through host memory (its 128-byte lines arrive whole
// over NVLink only): both ends refuse, naming the connection and why; the
// runtime then chooses another program (runtime-mpirun-no-p2p-*).
TEST(EmuNoP2P, LL128ThroughHostMemoryIsRefused) {
  Gpus gpus(2, "off");
  uint32_t hosted = 0;
  const std::string refused = runCounted(
      planOf(coll::testing::ringAllReduce(2, ir::Protocol::LL128)), {0, 1}, 1000, hosted);
  EXPECT_NE(refused.find("LL128"), std::string::npos) << refused;
  EXPECT_NE(refused.find("host memory"), std::string::npos) << refused;
  EXPECT_NE(refused.find("NVLink"), std::string::npos) << refused;
  // Within one GPU, LL128 runs.
  EXPECT_EQ(runCounted(planOf(coll::testing::ringAllReduce(2, ir::Protocol::LL128)), {1, 1},
                       1000, hosted),
            "");
  EXPECT_EQ(hosted, 0u);
}

TEST(EmuMultiDevice, PeerPairsParse) {
  std::vector<std::vector<bool>> m;
  EXPECT_TRUE(rt::parsePeerPairs("off", 3, m));
  EXPECT_FALSE(m[0][1]);
  EXPECT_TRUE(rt::parsePeerPairs("on", 3, m));
  EXPECT_TRUE(m[2][0]);
  EXPECT_TRUE(rt::parsePeerPairs("0-2", 3, m));
  EXPECT_TRUE(m[2][0] && m[0][2]);
  EXPECT_FALSE(m[0][1]);
  for (const char *bad : {"0-3", "1-1", "0_1", "0-1,", "x", "0-1-2"})
    EXPECT_FALSE(rt::parsePeerPairs(bad, 3, m)) << bad;
}

} // namespace

namespace {

// COLL_CUDA_SCOPE=sys: every connection of one GPU at .sys, in the CrossGpu
// build (a diagnostic of what the ordering between GPUs costs): the results
// are the host's, the launches run .sys accesses; a wrong value is refused.
TEST(EmuScope, ForcedSysScopeRunsEveryConnectionAtSys) {
  auto [hostOptions, gpuOptions] = options();
  ::setenv("COLL_CUDA_SCOPE", "sys", 1);
  for (ir::Protocol proto : {ir::Protocol::Simple, ir::Protocol::LL, ir::Protocol::LL128}) {
    const Plan plan = planOf(coll::testing::ringAllReduce(4, proto));
    auto ex = coll::testing::makeExecutors(plan, hostOptions, gpuOptions);
    const uint64_t before = cuda::simt::sysScopedAccesses.load();
    coll::testing::expectSameAsHost(ex, DataType::Float32, ReduceOp::Sum, 2000, false,
                                    "COLL_CUDA_SCOPE=sys " + ir::protocolName(proto).str());
    EXPECT_GT(cuda::simt::sysScopedAccesses.load(), before);
  }
  ::setenv("COLL_CUDA_SCOPE", "cta", 1);
  auto refused = coll::testing::deviceBackend().create(
      planOf(coll::testing::ringAllReduce(2, ir::Protocol::Simple)), gpuOptions);
  ::unsetenv("COLL_CUDA_SCOPE");
  ASSERT_FALSE(static_cast<bool>(refused));
  EXPECT_NE(llvm::toString(refused.takeError()).find("COLL_CUDA_SCOPE=cta"), std::string::npos);
}

} // namespace
