//===- collbench.cpp - Time an algorithm on the GPU -----------------------===//
//
//   collbench ALGO.xml [--size S[,S...] | --sweep MIN:MAX] [--dtype T] [--op O]
//                      [--mode inplace|outofplace] [--iters N] [--warmup N]
//                      [--graph] [--threads N] [--slot-bytes B]
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
cl::opt<std::string> inputFile(cl::Positional, cl::Required, cl::desc("<algorithm.xml>"),
                               cl::cat(category));
cl::list<std::string> sizes("size", cl::CommaSeparated,
                            cl::desc("Message sizes in bytes, as nccl-tests defines them (K, M, "
                                     "G suffixes are powers of 1024); default 1M"),
                            cl::cat(category));
cl::opt<std::string> sweep("sweep",
                           cl::desc("MIN:MAX: every power-of-two multiple of MIN up "
                                    "to MAX (like nccl-tests -b MIN -e MAX -f 2)"),
                           cl::cat(category));
cl::opt<std::string> dtypeName("dtype", cl::init("fp32"),
                               cl::desc("int8, uint8, int32, uint32, int64, uint64, fp16, "
                                        "bf16, fp32 or fp64"),
                               cl::cat(category));
cl::opt<std::string> opName("op", cl::init("sum"), cl::desc("sum, prod, min, max or avg"),
                            cl::cat(category));
cl::opt<std::string> modeName("mode", cl::init(""),
                              cl::desc("inplace or outofplace (default: every mode the "
                                       "algorithm supports)"),
                              cl::cat(category));
cl::opt<unsigned> iters("iters", cl::init(20),
                        cl::desc("Timed launches per size (the median is reported)"),
                        cl::cat(category));
cl::opt<unsigned> warmup("warmup", cl::init(5), cl::desc("Untimed launches before them"),
                         cl::cat(category));
cl::opt<bool> graph("graph", cl::desc("Time replays of a CUDA graph captured from the call"),
                    cl::cat(category));
cl::opt<unsigned> threads("threads", cl::init(0),
                          cl::desc("Threads per block: a multiple of 32, at most 512 (default: "
                                   "the largest power of two at which all blocks fit)"),
                          cl::cat(category));
cl::opt<unsigned> slotBytes("slot-bytes", cl::init(0),
                            cl::desc("Data bytes per FIFO slot (default: the backend's choice "
                                     "for the protocol)"),
                            cl::cat(category));
cl::opt<unsigned> watchdogMs("watchdog-ms", cl::init(0),
                             cl::desc("Stop a launch whose waits make no progress for this "
                                      "long (default: COLL_WATCHDOG_MS, else 10000)"),
                             cl::cat(category));
cl::opt<uint64_t> seed("seed", cl::init(1), cl::desc("Seed of the random input data"),
                       cl::cat(category));

/// The requested message sizes, or an error message.
std::optional<std::vector<uint64_t>> requestedSizes(std::string &error) {
  std::vector<uint64_t> result;
  if (!sweep.empty()) {
    if (!sizes.empty()) {
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
  return parseSizes(sizes.empty() ? std::vector<std::string>{"1M"}
                                  : std::vector<std::string>(sizes.begin(), sizes.end()),
                    error);
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
  std::optional<RunRequest> request = parseRunRequest(dtypeName, opName, modeName, error);
  if (!request)
    return fail("collbench", BadInput, error);
  if (iters == 0)
    return fail("collbench", BadInput, "--iters must be at least 1");
  std::optional<std::vector<uint64_t>> byteSizes = requestedSizes(error);
  if (!byteSizes)
    return fail("collbench", BadInput, error);

#if !COLL_HAVE_CUDA
  return fail("collbench", BadInput, "this build has no CUDA backend (it was configured without nvcc, "
                        "with COLL_ENABLE_CUDA=OFF or with sanitizers)");
#else
  DeviceBackend &backend = cudaBackend();
  auto device = backend.currentDevice();
  if (!device)
    return fail("collbench", BadInput, llvm::toString(device.takeError()));

  std::optional<LoadedAlgorithm> loaded = loadAlgorithm(inputFile, 5);
  if (!loaded)
    return BadInput;
  ModeSelection selection = selectModes("collbench", *loaded, *request);
  if (selection.modes.empty())
    return selection.exitCode;
  const ir::Algorithm *alg = &loaded->alg;
  const Plan *plan = &loaded->plan;

  CudaOptions options;
  options.watchdogMs = watchdogMs;
  options.threadsPerBlock = threads;
  options.setSlotBytes(slotBytes);
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

  llvm::outs() << llvm::formatv(
      "# collbench {0}\n# {1} \"{2}\": {3} ranks, {4}, {5} chunks per loop, {6} channels, {7} "
      "tbs\n# {8} ({9} SMs), {10} threads per block, {11} slot bytes\n"
      "# median of {12} launches after {13} warm-up launches, CUDA events{14}\n"
      "# d2d copy: cudaMemcpyAsync of the same size on the same GPU; its GB/s counts bytes "
      "read + written\n",
      inputFile, ir::collectiveName(plan->collective), plan->name, plan->nranks,
      ir::protocolName(plan->protocol), alg->nchunksPerLoop, alg->nchannels, plan->tbs.size(),
      device->name, device->smCount, threads ? std::to_string(threads) : std::string("auto"),
      sliceBytes, iters, warmup, graph ? ", CUDA graph replays" : "");
  SweepOptions sweep("collbench", *byteSizes, *request, selection.modes, iters, seed);
  sweep.referenceName = "d2d";
  sweep.reference = [&](uint64_t bytes) -> llvm::Expected<std::pair<double, double>> {
    auto copy = backend.timeDeviceCopy(bytes, warmup, iters);
    if (!copy)
      return copy.takeError();
    const double seconds = median(std::move(*copy));
    return std::make_pair(seconds, seconds > 0 ? 2.0 * double(bytes) / seconds / 1e9 : 0.0);
  };
  SweepOutcome outcome = runSweep(*plan, sweep, *target, llvm::outs());
  if (launch)
    outcome.notes.insert(outcome.notes.begin(),
                         llvm::formatv("launch: {0} blocks of {1} threads, {2} bytes of dynamic "
                                       "shared memory; {3} blocks per SM fit",
                                       launch->blocks, launch->threads, launch->sharedBytes,
                                       launch->blocksPerSm)
                             .str());
  for (const std::string &note : outcome.notes)
    llvm::outs() << "# " << note << "\n";
  llvm::outs() << llvm::formatv("# verified {0} of {1}\n", outcome.verified, outcome.rows);
  return outcome.failed() ? Failed : Verified;
#endif
}
