//===- HostBenchmark.cpp - Host backend throughput ------------------------===//
//
// Not a test: numbers go to docs/performance/host.md with the command that made
// them. Measures single-thread memcpy bandwidth (the machine's reference),
// one core's share of a 2-process allreduce through shared memory done with
// the host backend's own loops and nothing else (the floor a FIFO-based
// allreduce can reach), and the host backend on 8-rank ring and all-pairs
// allreduce.
//
//   build/bin/HostBenchmark --benchmark_min_time=2
//
//===----------------------------------------------------------------------===//

#include "TestAlgorithms.h"

#include "coll/interpreter/host/Data.h"

#include "coll/interpreter/Check.h"
#include "coll/interpreter/HostExecutor.h"
#include "coll/interpreter/Plan.h"
#include "coll/interpreter/ReduceOps.h"
#include "coll/ir/Verifier.h"

#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

using namespace coll;
using namespace coll::interp;

namespace {

constexpr uint64_t Bytes = 64ull << 20;

/// Single-thread memcpy of 64 MiB; bytes processed counts read + written.
void memcpyBandwidth(benchmark::State &state) {
  std::vector<char> src(Bytes, 1), dst(Bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), Bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(Bytes) * 2);
}
BENCHMARK(memcpyBandwidth)->Unit(benchmark::kMillisecond)->UseRealTime();

/// One process's memory work in a 2-process fp32 sum allreduce of
/// state.range(0) bytes where every byte crossing processes goes through
/// shared memory (written once by its sender, read once by its receiver), on
/// buffers already in cache and with no second process: copy the first half
/// of the input out, reduce the peer's second half into the output and out
/// again in one pass (the ring's fused `rrcs`), copy the peer's reduced first
/// half in. 16 bytes read or written per 4 of the call; no exchange with
/// another core, no waiting. bytes processed counts the call's size.
void twoCopyAllreduceFloor(benchmark::State &state) {
  const uint64_t half = static_cast<uint64_t>(state.range(0)) / 2 / sizeof(float);
  std::vector<float> in(2 * half, 1.0f), out(2 * half, 0.0f);
  std::vector<float> toPeer(half), fromPeer(half, 2.0f), reducedOut(half), reducedIn(half, 3.0f);
  for (auto _ : state) {
    host::data::copy(toPeer.data(), in.data(), half);
    host::data::combine2(out.data() + half, reducedOut.data(), fromPeer.data(), in.data() + half,
                         half, OpSum<float>());
    host::data::copy(out.data(), reducedIn.data(), half);
    benchmark::DoNotOptimize(out.data());
    benchmark::DoNotOptimize(reducedOut.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * state.range(0));
}
BENCHMARK(twoCopyAllreduceFloor)
    ->Arg(4 << 20)
    ->Arg(16 << 20)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

/// One 64 MiB fp32 sum allreduce of `alg` per iteration, in place; reports
/// algbw and busbw (nccl-tests' definitions) as counters.
void allreduce(benchmark::State &state, const ir::Algorithm &alg) {
  ir::DiagnosticList diags("<bench>");
  auto analysis = ir::verify(alg, diags);
  auto plan = analysis ? buildPlan(alg, *analysis, "<bench>")
                       : llvm::Expected<Plan>(analysis.takeError());
  if (!plan) {
    state.SkipWithError(llvm::toString(plan.takeError()).c_str());
    return;
  }
  CollectiveDesc desc = CollectiveDesc::of(*plan);
  auto executor = HostExecutor::create(std::move(*plan));
  if (!executor) {
    state.SkipWithError(llvm::toString(executor.takeError()).c_str());
    return;
  }
  uint64_t count = ir::countForBytes(desc.shape, Bytes, sizeof(float));
  CheckedCall call(desc, DataType::Float32, ReduceOp::Sum, count, true, 1);
  double seconds = 0;
  for (auto _ : state) {
    auto result = (*executor)->run(call.args());
    if (!result) {
      state.SkipWithError(llvm::toString(result.takeError()).c_str());
      return;
    }
    seconds += result->seconds;
    state.SetIterationTime(result->seconds);
  }
  int n = desc.nranks();
  double algbw = double(Bytes) * double(state.iterations()) / seconds / 1e9;
  state.counters["algbw_GBps"] = algbw;
  state.counters["busbw_GBps"] = algbw * 2.0 * (n - 1) / n;
}

void registerAll() {
  for (ir::Protocol proto : {ir::Protocol::Simple, ir::Protocol::LL, ir::Protocol::LL128}) {
    std::string p = ir::protocolName(proto).str();
    benchmark::RegisterBenchmark(("ring_allreduce_8ranks_64MiB/" + p).c_str(),
                                 [proto](benchmark::State &s) {
                                   allreduce(s, coll::testing::ringAllReduce(8, proto));
                                 })
        ->Unit(benchmark::kMillisecond)
        ->UseManualTime();
    benchmark::RegisterBenchmark(("allpairs_allreduce_8ranks_64MiB/" + p).c_str(),
                                 [proto](benchmark::State &s) {
                                   allreduce(s, coll::testing::allPairsAllReduce(8, proto));
                                 })
        ->Unit(benchmark::kMillisecond)
        ->UseManualTime();
  }
}

} // namespace

int main(int argc, char **argv) {
  registerAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv))
    return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
