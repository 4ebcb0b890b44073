//===- collrun.cpp - Run an algorithm on emulated ranks and verify it -----===//
//
//   collrun ALGO.xml [--size S[,S...]] [--dtype T] [--op O]
//                    [--mode inplace|outofplace] [--iters N] [--seed K]
//                    [--backend host|cuda|cuda-emu] [--trace FILE.json] [--threads N]
//                    [--no-check]
//
// Reads, verifies and checks (collir --check) an MSCCL XML algorithm, runs it
// on the host backend (every rank in this process), on the current GPU (every
// rank on it, its buffers copied in and out around each call) or on the CPU
// emulation of the GPU (the CUDA backend's own kernel on the SIMT launcher),
// checks every rank's output
// against the collective's definition, and prints an nccl-tests-style table.
//
// Exit status: 0 every size verified; 1 a result was wrong or a call failed;
// 2 bad usage, an unreadable/invalid file or one that fails its check, or --backend cuda without a CUDA
// backend or device; 3 the file does not apply (its collective cannot be
// checked, or it does not support the requested mode).
//
//===----------------------------------------------------------------------===//

#include "DeviceRunner.h"
#include "ToolSupport.h"

#include "coll/interpreter/Check.h"
#include "coll/interpreter/HostExecutor.h"
#include "coll/interpreter/Plan.h"
#include "coll/ir/Verifier.h"
#include "coll/ir/XML.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <functional>
#include <optional>

using namespace coll;
using namespace coll::interp;
using namespace coll::tools;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory category("collrun options");
cl::opt<std::string> inputFile(cl::Positional, cl::Required, cl::desc("<algorithm.xml>"),
                               cl::cat(category));
cl::list<std::string> sizes("size", cl::CommaSeparated,
                            cl::desc("Message sizes in bytes, as nccl-tests defines them "
                                     "(K, M, G suffixes are powers of 1024); default 1K,1M"),
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
cl::opt<unsigned> iters("iters", cl::init(5), cl::desc("Timed runs per size (median reported)"),
                        cl::cat(category));
cl::opt<uint64_t> seed("seed", cl::init(1), cl::desc("Seed of the random input data"),
                       cl::cat(category));
cl::opt<unsigned> watchdogMs("watchdog-ms", cl::init(0),
                             cl::desc("Fail a call whose waits make no progress for this "
                                      "long (default: COLL_WATCHDOG_MS, else 30000)"),
                             cl::cat(category));
cl::opt<unsigned> slotBytes("slot-bytes", cl::init(0),
                            cl::desc("Data bytes per FIFO slot, the pipeline slice (default: "
                                     "the host backend's choice for the protocol)"),
                            cl::cat(category));
cl::opt<std::string> backendName("backend", cl::init("host"),
                                 cl::desc("host (ranks are CPU threads), cuda (every rank on "
                                          "the current GPU; times are CUDA-event times) or "
                                          "cuda-emu (the CUDA backend on the CPU emulation)"),
                                 cl::cat(category));
cl::opt<std::string> tracePath("trace", cl::init(""),
                               cl::desc("Write a timeline of every call (Chrome trace / Perfetto "
                                        "JSON: a track per rank and tb, a slice per step) to "
                                        "this file (every backend; on the CUDA ones from the "
                                        "GPU's clock)"),
                               cl::cat(category));
cl::opt<unsigned> threads("threads", cl::init(0),
                          cl::desc("Most threads that run the tbs on the host backend, the "
                                   "calling one included (default: one per CPU, or "
                                   "COLL_HOST_THREADS; a call that moves little runs on one)"),
                          cl::cat(category));
cl::opt<bool> noCheck("no-check", cl::init(false),
                      cl::desc("Run the file without first checking it for races, deadlocks "
                               "and a wrong result (collir --check)"),
                      cl::cat(category));
cl::opt<unsigned> maxWarnings("max-warnings", cl::init(5),
                              cl::desc("Warnings about the file to print at most"),
                              cl::cat(category));

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "Runs an MSCCL XML algorithm on emulated ranks and verifies every rank's output.\n\n"
      "Exit status: 0 all sizes verified, 1 wrong results or a failed call, 2 bad usage, an\n"
      "unreadable or invalid file or one that fails its check, or --backend cuda without a CUDA backend or device, 3 the\n"
      "file does not apply (collective that cannot be checked, or unsupported mode).\n");

  std::string error;
  std::optional<RunRequest> request = parseRunRequest(dtypeName, opName, modeName, error);
  if (!request)
    return fail("collrun", BadInput, error);
  if (iters == 0)
    return fail("collrun", BadInput, "--iters must be at least 1");
  if (backendName != "host" && backendName != "cuda" && backendName != "cuda-emu")
    return fail("collrun", BadInput,
                "--backend must be host, cuda or cuda-emu, not '" + backendName + "'");
#if !COLL_HAVE_CUDA_EMU
  if (backendName == "cuda-emu")
    return fail("collrun", BadInput,
                "this build has no CUDA emulation (it was configured with "
                "COLL_ENABLE_CUDA_EMU=OFF); use --backend host");
#endif
#if !COLL_HAVE_CUDA
  if (backendName == "cuda")
    return fail("collrun", BadInput,
                "this build has no CUDA backend (it was configured without nvcc, with "
                "COLL_ENABLE_CUDA=OFF or with sanitizers); use --backend host");
#endif
  std::optional<std::vector<uint64_t>> byteSizes = parseSizes(
      sizes.empty() ? std::vector<std::string>{"1K", "1M"}
                    : std::vector<std::string>(sizes.begin(), sizes.end()),
      error);
  if (!byteSizes)
    return fail("collrun", BadInput, error);

  std::optional<LoadedAlgorithm> loaded = loadAlgorithm(inputFile, maxWarnings, !noCheck);
  if (!loaded)
    return BadInput;
  ModeSelection selection = selectModes("collrun", *loaded, *request);
  if (selection.modes.empty())
    return selection.exitCode;
  const ir::Algorithm *alg = &loaded->alg;
  const Plan *plan = &loaded->plan;
  const DataType *type = &request->type;

  // The backend: runCall runs a CheckedCall (`fresh` on its first run) and
  // recover makes the backend usable again after a watchdog stop.
  std::function<llvm::Expected<CallResult>(CheckedCall &, bool fresh)> runCall;
  std::function<llvm::Error()> recover;
  std::string backendNote = "host backend";
  std::unique_ptr<HostExecutor> hostExecutor;
  Timeline timeline;
  if (backendName == "host") {
    HostOptions options;
    options.watchdogMs = watchdogMs;
    options.threads = threads;
    if (slotBytes)
      options.simpleSlotBytes = options.llSlotBytes = options.ll128SlotBytes = slotBytes;
    recover = [&, options]() -> llvm::Error {
      auto fresh = HostExecutor::create(*plan, options);
      if (!fresh)
        return fresh.takeError();
      hostExecutor = std::move(*fresh);
      if (!tracePath.empty())
        hostExecutor->setTimeline(&timeline);
      return llvm::Error::success();
    };
    runCall = [&](CheckedCall &call, bool) { return hostExecutor->run(call.args()); };
    if (llvm::Error err = recover()) {
      llvm::logAllUnhandledErrors(std::move(err), llvm::errs());
      return Failed;
    }
  }
  if (backendName == "cuda" || backendName == "cuda-emu") {
    auto makeRunner = [&]() -> llvm::Expected<DeviceRunner> {
#if COLL_HAVE_CUDA
      if (backendName == "cuda")
        return makeGpuRunner(*plan, *type, watchdogMs, slotBytes,
                             tracePath.empty() ? nullptr : &timeline);
#endif
#if COLL_HAVE_CUDA_EMU
      if (backendName == "cuda-emu")
        return makeEmulatedRunner(*plan, *type, watchdogMs, slotBytes,
                                  tracePath.empty() ? nullptr : &timeline);
#endif
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "no CUDA device: this build has no " + backendName +
                                         " backend");
    };
    auto made = makeRunner();
    if (!made) {
      std::string message = llvm::toString(made.takeError());
      if (llvm::StringRef(message).startswith("no CUDA device"))
        return fail("collrun", BadInput, "--backend " + backendName + ": " + message);
      llvm::errs() << message << "\n";
      return Failed;
    }
    backendNote = made->note;
    runCall = std::move(made->run);
    // The executor clears its own device state after a watchdog stop.
    recover = [] { return llvm::Error::success(); };
  }

  const CollectiveDesc desc = CollectiveDesc::of(*plan);
  const double busFactor = busBandwidthFactor(*plan);
  const size_t es = dataTypeSize(*type);

  llvm::outs() << llvm::formatv("# collrun {0}\n# {1} \"{2}\": {3} ranks, {4}, {5} chunks per "
                                "loop, {6} channels, {7} tbs; {8}\n",
                                inputFile, ir::collectiveName(plan->collective), plan->name,
                                plan->nranks, ir::protocolName(plan->protocol),
                                alg->nchunksPerLoop, alg->nchannels, plan->tbs.size(),
                                backendNote);
  printTableHeader(llvm::outs());

  unsigned rows = 0, verified = 0;
  std::vector<std::string> notes;
  for (uint64_t requested : *byteSizes) {
    uint64_t count = ir::countForBytes(plan->shape, requested, es);
    uint64_t bytes = ir::bytesForCount(plan->shape, count, es);
    for (bool inplace : selection.modes) {
      ++rows;
      const char *place = inplace ? "in-place" : "out-of-place";
      const std::string prefix = rowPrefix(inplace, bytes, count, *request);
      if ((plan->minBytes && bytes < plan->minBytes) || (plan->maxBytes && bytes > plan->maxBytes))
        notes.push_back(llvm::formatv("note: {0} bytes is outside the algorithm's range "
                                      "[{1}, {2}]; a runtime would not select it for this size",
                                      bytes, plan->minBytes,
                                      plan->maxBytes ? std::to_string(plan->maxBytes) : "inf")
                            .str());
      CheckedCall call(desc, request->type, request->op, count, inplace, seed);
      auto first = runCall(call, true);
      if (!first) {
        std::string msg = llvm::toString(first.takeError());
        llvm::outs() << prefix << "   failed: see below\n";
        notes.push_back("error: " + std::to_string(bytes) + " bytes " + place + ": " + msg);
        if (llvm::StringRef(msg).contains("watchdog")) {
          if (llvm::Error err = recover()) {
            llvm::logAllUnhandledErrors(std::move(err), llvm::errs());
            return Failed;
          }
        }
        continue;
      }
      CheckResult result = call.check();
      std::vector<double> times;
      for (unsigned i = 0; i < iters; ++i) {
        call.reset();
        auto timed = runCall(call, false);
        if (!timed) {
          notes.push_back("error: timed run: " + llvm::toString(timed.takeError()));
          break;
        }
        times.push_back(timed->seconds);
      }
      std::sort(times.begin(), times.end());
      double seconds = times.empty() ? first->seconds : times[times.size() / 2];
      double algbw = seconds > 0 ? double(bytes) / seconds / 1e9 : 0.0;
      llvm::outs() << prefix
                   << llvm::formatv(" {0,10:f1} {1,8:f2} {2,8:f2} {3,8}\n", seconds * 1e6,
                                    algbw, algbw * busFactor, result.wrong);
      if (result.wrong)
        notes.push_back(llvm::formatv("error: {0} bytes {1}: {2} of {3} elements wrong; first: "
                                      "{4}",
                                      bytes, place, result.wrong, result.checked,
                                      result.firstWrong)
                            .str());
      else
        ++verified;
      if (result.crossRankDiffs)
        notes.push_back(llvm::formatv("warning: {0} bytes {1}: {2} elements differ in their "
                                      "bits between ranks (the algorithm reduces in a "
                                      "different order on different ranks)",
                                      bytes, place, result.crossRankDiffs)
                            .str());
    }
  }
  for (const std::string &note : notes)
    llvm::outs() << "# " << note << "\n";
  if (plan->collective == ir::Collective::AllReduce &&
      std::none_of(notes.begin(), notes.end(),
                   [](const std::string &s) { return llvm::StringRef(s).contains("differ in"); }))
    llvm::outs() << "# all ranks hold bit-identical results\n";
  llvm::outs() << llvm::formatv("# verified {0} of {1}\n", verified, rows);
  if (!tracePath.empty()) {
    if (llvm::Error err = timeline.writeJson(tracePath)) {
      llvm::logAllUnhandledErrors(std::move(err), llvm::errs(), "collrun: ");
      return Failed;
    }
    llvm::outs() << llvm::formatv("# timeline: {0} call slices, {1} step slices, written to {2}\n",
                                  timeline.calls(), timeline.stepSlices(), tracePath);
  }
  return verified == rows ? Verified : Failed;
}
