//===- collbench.cpp - Time an algorithm on the GPU -----------------------===//
//
//   collbench ALGO.xml [--size S[,S...] | --sweep MIN:MAX] [--dtype T] [--op O]
//                      [--mode inplace|outofplace] [--iters N] [--warmup N]
//                      [--graph] [--threads N] [--slot-bytes B] [--no-check]
//
// Runs an MSCCL XML algorithm with every rank on the current GPU and prints
// an nccl-tests-style table (tools/support/Sweep.h, shared with collrun):
// per size, a reference line (a device-to-device cudaMemcpyAsync of the same
// number of bytes on the same GPU, its bandwidth counting bytes read and
// written) and, per mode, the median time of --iters launches after
// --warmup ones (CUDA events around each launch, or around each replay of a
// CUDA graph of the call with --graph), algbw, busbw and busbw as a
// fraction of the copy's bandwidth. Each size's result is checked once
// (interp::CheckedCall) before it is timed.
//
// Exit status: 0 every result verified; 1 a wrong result or a failed call;
// 2 bad usage, an unreadable or invalid file, or no CUDA backend or device;
// 3 the file does not apply (collective that cannot be checked, or
// unsupported mode).
//
//===----------------------------------------------------------------------===//

#include "Sweep.h"
#include "ToolSupport.h"

#include "coll/support/Bytes.h"

#include "coll/interpreter/Check.h"
#include "coll/interpreter/DeviceExecutor.h"
#include "coll/interpreter/Plan.h"
#include "coll/ir/Verifier.h"
#include "coll/ir/XML.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <optional>

using namespace coll;
using namespace coll::interp;
using namespace coll::tools;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory category("collbench options");
RunOptions run(category, {"1M", 20, "Timed launches per size (the median is reported)",
                         "Stop a launch whose waits make no progress for this long (default: "
                         "COLL_WATCHDOG_MS, else 10000)"});
cl::opt<std::string> sweep("sweep",
                           cl::desc("MIN:MAX: every power-of-two multiple of MIN up "
                                    "to MAX (like nccl-tests -b MIN -e MAX -f 2)"),
                           cl::cat(category));
cl::opt<unsigned> warmup("warmup", cl::init(5), cl::desc("Untimed launches before them"),
                         cl::cat(category));
cl::opt<bool> graph("graph", cl::desc("Time replays of a CUDA graph captured from the call"),
                    cl::cat(category));
cl::opt<unsigned> threads("threads", cl::init(0),
                          cl::desc("Threads per block: a multiple of 32, at most 512 (default: "
                                   "the largest power of two at which all blocks fit)"),
                          cl::cat(category));

/// The requested message sizes, or an error message.
std::optional<std::vector<uint64_t>> requestedSizes(std::string &error) {
  std::vector<uint64_t> result;
  if (!sweep.empty()) {
    if (!run.sizes.empty()) {
      error = "give --size or --sweep, not both";
      return std::nullopt;
    }
    auto [lo, hi] = llvm::StringRef(sweep).split(':');
    std::optional<uint64_t> min = parseBytes(lo, MaxSize), max = parseBytes(hi, MaxSize);
    if (!min || !max || *min == 0 || *min > *max) {
      error = "bad --sweep '" + sweep + "' (MIN:MAX, 0 < MIN <= MAX)";
      return std::nullopt;
    }
    for (uint64_t s = *min; s <= *max; s *= 2)
      result.push_back(s);
    return result;
  }
  return run.byteSizes(error);
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "Times an MSCCL XML algorithm with every rank on the current GPU, against a\n"
      "device-to-device copy of the same size, after checking its result.\n\n"
      "Exit status: 0 all results verified, 1 a wrong result or a failed call, 2 bad usage,\n"
      "an unreadable or invalid file, or no CUDA backend or device, 3 the file does not\n"
      "apply (collective that cannot be checked, or unsupported mode).\n");

  std::string error;
  std::optional<RunRequest> request = run.request(error);
  if (!request)
    return fail("collbench", BadInput, error);
  std::optional<std::vector<uint64_t>> byteSizes = requestedSizes(error);
  if (!byteSizes)
    return fail("collbench", BadInput, error);

  // The file first: what is wrong with it is worth saying on any machine.
  std::optional<LoadedAlgorithm> loaded = run.load();
  if (!loaded)
    return BadInput;
  ModeSelection selection = selectModes("collbench", *loaded, *request);
  if (selection.modes.empty())
    return selection.exitCode;
  const ir::Algorithm *alg = &loaded->alg;
  const Plan *plan = &loaded->plan;

  // The GPU backend as the plugin libcoll_cuda.so, as collrun and libcoll.so
  // reach it.
  auto plugin = gpuBackendPlugin(argv[0]);
  if (!plugin)
    return fail("collbench", BadInput, llvm::toString(plugin.takeError()));
  DeviceBackend &backend = **plugin;
  auto device = backend.currentDevice();
  if (!device)
    return fail("collbench", BadInput, llvm::toString(device.takeError()));

  CudaOptions options = run.backendOptions<CudaOptions>();
  options.threadsPerBlock = threads;
  auto executor = backend.create(*plan, options);
  if (!executor) {
    llvm::logAllUnhandledErrors(executor.takeError(), llvm::errs());
    return Failed;
  }
  const uint64_t sliceBytes = (*executor)->sliceElems(DataType::Uint8);
  std::optional<LaunchShape> launch;
  DeviceTiming timing;
  timing.launches = true;
  timing.warmup = warmup;
  timing.graph = graph;
  timing.onPrepared = [&](const LaunchShape &shape) {
    if (!launch)
      launch = shape;
  };
  std::unique_ptr<SweepTarget> target = deviceTarget(backend, std::move(*executor), timing);

  if (!run.reportFile.empty())
    if (llvm::Error err = writeReport(run.reportFile, {}))
      return fail("collbench", BadInput, "--report: " + llvm::toString(std::move(err)));
  // With --report, everything printed from here is kept for the page too.
  std::string printed;
  TeeStream tee(llvm::outs(), printed);
  llvm::raw_ostream &out = run.reportFile.empty() ? static_cast<llvm::raw_ostream &>(llvm::outs()) : tee;
  out << llvm::formatv(
      "# collbench {0}\n# {1} \"{2}\": {3} ranks, {4}, {5} chunks per loop, {6} channels, {7} "
      "tbs\n# {8} ({9} SMs), {10} threads per block, {11} slot bytes\n"
      "# median of {12} launches after {13} warm-up launches, CUDA events{14}\n"
      "# d2d copy: cudaMemcpyAsync of the same size on the same GPU; its GB/s counts bytes "
      "read + written\n",
      run.inputFile, ir::collectiveName(plan->collective), plan->name, plan->nranks,
      ir::protocolName(plan->protocol), alg->nchunksPerLoop, alg->nchannels, plan->tbs.size(),
      device->name, device->smCount, threads ? std::to_string(threads) : std::string("auto"),
      sliceBytes, run.iters, warmup, graph ? ", CUDA graph replays" : "");
  // A plot that cannot be written is known before the run, not after it.
  if (!run.plotFile.empty())
    if (llvm::Error err = writePlotFile(run.plotFile, "", {}))
      return fail("collbench", BadInput, "--plot: " + llvm::toString(std::move(err)));
  SweepOptions sweep("collbench", *byteSizes, *request, selection.modes, run.iters, run.seed);
  sweep.referenceName = "d2d";
  sweep.reference = [&](uint64_t bytes) -> llvm::Expected<std::pair<double, double>> {
    auto copy = backend.timeDeviceCopy(bytes, warmup, run.iters);
    if (!copy)
      return copy.takeError();
    const double seconds = median(std::move(*copy));
    return std::make_pair(seconds, seconds > 0 ? 2.0 * double(bytes) / seconds / 1e9 : 0.0);
  };
  SweepOutcome outcome = runSweep(*plan, sweep, *target, out);
  if (launch)
    outcome.notes.insert(outcome.notes.begin(),
                         llvm::formatv("launch: {0} blocks of {1} threads, {2} bytes of dynamic "
                                       "shared memory; {3} blocks per SM fit",
                                       launch->blocks, launch->threads, launch->sharedBytes,
                                       launch->blocksPerSm)
                             .str());
  for (const std::string &note : outcome.notes)
    out << "# " << note << "\n";
  out << llvm::formatv("# verified {0} of {1}\n", outcome.verified, outcome.rows);
  RunDescription what;
  what.tool = "collbench";
  what.argc = argc;
  what.argv = argv;
  what.where = device->name;
  what.backend = "cuda backend on " + device->name;
  what.printed = printed;
  if (!writeRunFiles(run, *plan, *alg, outcome, what))
    return Failed;
  return outcome.failed() ? Failed : Verified;
}
