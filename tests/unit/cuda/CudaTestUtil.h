//===- CudaTestUtil.h - GPU test fixture and host comparison ----*- C++ -*-===//
//
// CudaTest skips every test when no CUDA device (or driver) is present; the
// CPU emulation (COLL_CUDA_EMULATION=1) always has one.
// expectSameAsHost runs one call on the host backend and on the GPU with the
// same seeded inputs and expects bit-identical outputs on every rank.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_TESTS_UNIT_CUDA_CUDATESTUTIL_H
#define COLL_TESTS_UNIT_CUDA_CUDATESTUTIL_H

#include "lib/CudaRuntime.h"

#include "coll/interpreter/Check.h"
#include "coll/cuda/Backend.h"
#include "coll/interpreter/DeviceExecutor.h"
#include "coll/interpreter/HostExecutor.h"
#include "coll/interpreter/Plan.h"
#include "coll/ir/Verifier.h"

#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace coll::testing {

using namespace coll::interp::cuda::rt; // the CUDA runtime calls (CudaRuntime.h)

/// The device backend this test binary links: the GPU's (CudaTests) or the
/// CPU emulation's (CudaEmuTests).
inline interp::DeviceBackend &deviceBackend() {
#if COLL_CUDA_EMULATION
  return interp::emulatedBackend();
#else
  return interp::cudaBackend();
#endif
}

/// An executor of `plan` on the device; a broken fixture stops the test binary.
inline std::unique_ptr<interp::DeviceExecutor> makeDeviceExecutor(const interp::Plan &plan,
                                                                  const interp::CudaOptions &options) {
  auto made = deviceBackend().create(plan, options);
  if (!made)
    llvm::report_fatal_error(llvm::Twine("device executor: ") + llvm::toString(made.takeError()));
  return std::move(*made);
}

using RankExecutors = std::vector<std::unique_ptr<interp::DeviceExecutor>>;
/// May change the exports before the ranks read them (in both rounds).
using ExportTamper = std::function<void(std::vector<interp::ConnectionExport> &)>;

/// Connects executors of one rank each (ranks[r] is rank r) as a job's
/// ranks do (runtime/lib/Collective.cpp): the exports, the placement of the
/// FIFOs, the exports again, the imports.
inline llvm::Error connectRanks(RankExecutors &ranks, const ExportTamper &tamper = {}) {
  std::vector<interp::ConnectionExport> exports;
  for (int round = 0; round < 2; ++round) {
    exports.clear();
    for (auto &r : ranks)
      exports.push_back(r->exportConnections());
    if (tamper)
      tamper(exports);
    for (size_t r = 0; r < ranks.size(); ++r)
      if (llvm::Error err = round == 0 ? ranks[r]->placeConnections(exports)
                                       : ranks[r]->importConnections(exports))
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "rank " + std::to_string(r) +
                                           (round == 0 ? " places: " : " imports: ") +
                                           llvm::toString(std::move(err)));
  }
  return llvm::Error::success();
}

/// Runs `args` on every rank's executor at once, one thread per rank, as
/// the processes of a job would; `check` may add a failure of its own per
/// rank after a successful run. Fails naming the first rank that failed.
inline llvm::Error runRanks(
    RankExecutors &ranks, const interp::CallArgs &args,
    const std::function<std::string(size_t rank)> &check = {}) {
  std::vector<std::string> failures(ranks.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks.size(); ++r)
    threads.emplace_back([&, r] {
      auto result = ranks[r]->run(args);
      if (!result)
        failures[r] = llvm::toString(result.takeError());
      else if (check)
        failures[r] = check(r);
    });
  for (std::thread &t : threads)
    t.join();
  for (size_t r = 0; r < ranks.size(); ++r)
    if (!failures[r].empty())
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "rank " + std::to_string(r) + ": " + failures[r]);
  return llvm::Error::success();
}

/// For executors of one rank with direct steps: gives each the other
/// ranks' buffers of `args` and every rank's `scratch` (one process: the
/// pointers are valid in all).
inline llvm::Error givePeerBuffers(RankExecutors &ranks, const interp::CallArgs &args,
                                   const std::vector<void *> &scratch = {}) {
  std::vector<interp::PeerBuffers> peers(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r)
    peers[r] = {args.input[r], args.output[r], r < scratch.size() ? scratch[r] : nullptr};
  for (auto &executor : ranks)
    if (llvm::Error err = executor->setPeerBuffers(peers))
      return err;
  return llvm::Error::success();
}

class CudaTest : public ::testing::Test {
protected:
  void SetUp() override {
    int devices = 0;
    cudaError_t err = cudaGetDeviceCount(&devices);
    if (err != cudaSuccess || devices == 0)
      GTEST_SKIP() << "no CUDA device: "
                   << (err != cudaSuccess ? cudaGetErrorString(err)
                                          : "cudaGetDeviceCount returned 0");
  }
};

/// The plan of a test algorithm; a broken fixture stops the test binary.
inline interp::Plan planOf(const ir::Algorithm &alg, llvm::StringRef name = "<test>") {
  ir::DiagnosticList diags(name.str());
  auto analysis = ir::verify(alg, diags);
  if (!analysis)
    llvm::report_fatal_error(llvm::Twine("fixture does not verify: ") +
                             llvm::toString(analysis.takeError()));
  auto plan = interp::buildPlan(alg, *analysis, name);
  if (!plan)
    llvm::report_fatal_error(llvm::Twine("fixture does not plan: ") +
                             llvm::toString(plan.takeError()));
  return std::move(*plan);
}

/// Host and GPU executors of one plan.
struct ExecutorPair {
  std::unique_ptr<interp::HostExecutor> host;
  std::unique_ptr<interp::DeviceExecutor> gpu;
};

inline ExecutorPair makeExecutors(const interp::Plan &plan, const interp::HostOptions &host,
                                  const interp::CudaOptions &gpu) {
  ExecutorPair pair;
  auto h = interp::HostExecutor::create(plan, host);
  if (!h)
    llvm::report_fatal_error(llvm::Twine("host executor: ") + llvm::toString(h.takeError()));
  pair.host = std::move(*h);
  pair.gpu = makeDeviceExecutor(plan, gpu);
  return pair;
}

/// Copies a CheckedCall's buffers to the device, runs `run(deviceArgs)`
/// and copies them back.
template <class Run>
llvm::Error runOnDevice(interp::CheckedCall &call, interp::DataType type, Run &&run) {
  const uint64_t es = interp::dataTypeSize(type);
  auto buffers =
      deviceBackend().stage(call.args(), call.inputElems() * es, call.outputElems() * es);
  if (!buffers)
    return buffers.takeError();
  if (llvm::Error err = (*buffers)->upload())
    return err;
  if (llvm::Error err = run((*buffers)->args()))
    return err;
  return (*buffers)->download();
}

/// Runs one call on both backends with the same inputs and expects every
/// rank's output bit for bit equal, and, with `checkDefinition`, correct
/// where the collective can be checked.
inline void expectSameAsHost(ExecutorPair &ex, interp::DataType type, interp::ReduceOp op,
                             uint64_t count, bool inplace, const std::string &what,
                             uint64_t seed = 1, bool checkDefinition = true) {
  const interp::Plan &plan = ex.gpu->plan();
  interp::CollectiveDesc desc = interp::CollectiveDesc::of(plan);
  interp::CheckedCall onHost(desc, type, op, count, inplace, seed);
  auto hostResult = ex.host->run(onHost.args());
  ASSERT_TRUE(static_cast<bool>(hostResult))
      << what << ": host: " << llvm::toString(hostResult.takeError());

  interp::CheckedCall onGpu(desc, type, op, count, inplace, seed);
  llvm::Error err = runOnDevice(onGpu, type, [&](const interp::CallArgs &args) -> llvm::Error {
    auto result = ex.gpu->run(args);
    if (!result)
      return result.takeError();
    // A call of 0 elements is a no-op that classifies nothing (as on the host).
    if (count > 0) {
      EXPECT_EQ(result->inplace, inplace) << what;
    }
    EXPECT_EQ(result->iterations > 0, count > 0) << what;
    return llvm::Error::success();
  });
  ASSERT_FALSE(static_cast<bool>(err)) << what << ": GPU: " << llvm::toString(std::move(err));

  const uint64_t es = interp::dataTypeSize(type);
  const interp::CallArgs h = onHost.args(), g = onGpu.args();
  for (int32_t r = 0; r < plan.nranks; ++r) {
    const auto *a = static_cast<const unsigned char *>(h.output[r]);
    const auto *b = static_cast<const unsigned char *>(g.output[r]);
    if (count == 0 || std::memcmp(a, b, onHost.outputElems() * es) == 0)
      continue;
    uint64_t e = 0;
    while (std::memcmp(a + e * es, b + e * es, es) == 0)
      ++e;
    ADD_FAILURE() << what << ": rank " << r << " output element " << e << " of "
                  << onHost.outputElems() << " differs from the host backend's";
    return;
  }
  if (checkDefinition && interp::CheckedCall::canCheck(plan.collective)) {
    interp::CheckResult check = onGpu.check();
    EXPECT_EQ(check.wrong, 0u) << what << ": " << check.firstWrong;
  }
}

/// Runs `call` (the same arguments as `reference`, which ran on the host) as
/// a launch of `gpu` captured once in a CUDA graph and replayed three times,
/// each replay from freshly uploaded inputs; every replay's outputs must
/// equal the reference's.
inline void expectGraphReplaysMatch(interp::DeviceExecutor &gpu, const interp::CheckedCall &reference,
                                    interp::CheckedCall &call, uint64_t elemBytes,
                                    const std::string &what) {
  const interp::Plan &plan = gpu.plan();
  auto staged = deviceBackend().stage(call.args(), call.inputElems() * elemBytes,
                                      call.outputElems() * elemBytes);
  ASSERT_TRUE(static_cast<bool>(staged)) << llvm::toString(staged.takeError());
  interp::DeviceBuffers *buffers = staged->get();
  ASSERT_FALSE(static_cast<bool>(buffers->upload()));
  auto prepared = gpu.prepare(buffers->args());
  ASSERT_TRUE(static_cast<bool>(prepared)) << llvm::toString(prepared.takeError());
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  llvm::Error launched = gpu.launch(stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_FALSE(static_cast<bool>(launched)) << llvm::toString(std::move(launched));
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) {
    call.reset(); // poisons the outputs again
    ASSERT_FALSE(static_cast<bool>(buffers->upload()));
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    llvm::Error finished = gpu.finish(stream);
    ASSERT_FALSE(static_cast<bool>(finished))
        << what << " replay " << replay << ": " << llvm::toString(std::move(finished));
    ASSERT_FALSE(static_cast<bool>(buffers->download()));
    for (int32_t r = 0; r < plan.nranks; ++r)
      EXPECT_EQ(std::memcmp(reference.args().output[r], call.args().output[r],
                            call.outputElems() * elemBytes),
                0)
          << what << " replay " << replay << " rank " << r;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

} // namespace coll::testing

#endif // COLL_TESTS_UNIT_CUDA_CUDATESTUTIL_H
