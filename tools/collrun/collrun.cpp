//===- collrun.cpp - Run an algorithm on emulated ranks and verify it -----===//
//
//   collrun ALGO.xml [--size S[,S...]] [--dtype T] [--op O]
//                    [--mode inplace|outofplace] [--iters N] [--seed K]
//                    [--backend host|cuda|cuda-emu] [--trace FILE.json] [--threads N]
//                    [--step-costs] [--traffic] [--copy-engine] [--no-check]
//
// Reads, verifies and checks (collir --check) an MSCCL XML algorithm, runs it
// on the host backend (every rank in this process), on the current GPU (every
// rank on it, its buffers copied in and out around each call; the GPU
// backend is libcoll_cuda.so, loaded as libcoll.so loads it) or on the CPU
// emulation of the GPU (the CUDA backend's own kernel on the SIMT launcher),
// checks every rank's output against the collective's definition, and prints
// an nccl-tests-style table (tools/support/Sweep.h, shared with collbench).
//
// Exit status: 0 every size verified; 1 a result was wrong or a call failed;
// 2 bad usage, an unreadable/invalid file or one that fails its check, or --backend cuda without a CUDA
// backend or device; 3 the file does not apply (its collective cannot be
// checked, or it does not support the requested mode).
//
//===----------------------------------------------------------------------===//

#include "Sweep.h"
#include "ToolSupport.h"
#if COLL_HAVE_CUDA_EMU
#include "Traffic.h"
#endif

#include "coll/cuda/Backend.h"
#include "coll/interpreter/Check.h"
#include "coll/interpreter/DeviceExecutor.h"
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
#include <optional>

using namespace coll;
using namespace coll::interp;
using namespace coll::tools;
namespace cl = llvm::cl;

namespace {

RunOptions run(
    "collrun",
    "Runs an MSCCL XML algorithm (or an MSCCL++ execution plan) on emulated ranks and verifies every rank's output.\n\n"
    "Exit status: 0 all sizes verified, 1 wrong results or a failed call, 2 bad usage, an\n"
    "unreadable or invalid file or one that fails its check, or --backend cuda without a\n"
    "CUDA backend or device, 3 the file does not apply (collective that cannot be checked,\n"
    "or unsupported mode).\n",
    {"1K,1M", 5, "Timed runs per size (median reported)",
     "Fail a call whose waits make no progress for this long (default: "
     "COLL_WATCHDOG_MS, else 30000)"});
cl::opt<std::string> backendName("backend", cl::init("host"),
                                 cl::desc("host (ranks are CPU threads), cuda (every rank on "
                                          "the current GPU; times are CUDA-event times) or "
                                          "cuda-emu (the CUDA backend on the CPU emulation)"),
                                 cl::cat(run.category));
cl::opt<std::string> tracePath("trace", cl::init(""),
                               cl::desc("Write a timeline of every call (Chrome trace / Perfetto "
                                        "JSON: a track per rank and tb, a slice per step) to "
                                        "this file (every backend; on the CUDA ones from the "
                                        "GPU's clock)"),
                               cl::cat(run.category));
cl::opt<bool> stepCosts("step-costs", cl::init(false),
                        cl::desc("cuda-emu only: count, per step kind and protocol, the block "
                                 "barriers, fences, release stores and the strong loads, stores "
                                 "and atomics of the busiest thread (the waiting one), over "
                                 "every call of the run, and print them per step execution "
                                 "(docs/CUDA.md, \"Step costs\")"),
                        cl::cat(run.category));
cl::opt<bool> traffic("traffic", cl::init(false),
                      cl::desc("cuda-emu only: count the global-memory bytes that one call of "
                               "each size and mode reads and writes, per rank and step kind, "
                               "in the ranks' own buffers, the peers', FIFO slots and flags, and "
                               "print them after the table, each call's last line "
                               "'traffic: B bytes per element, reference R, ratio X' "
                               "(docs/CUDA.md, \"Traffic\")"),
                      cl::cat(run.category));
cl::opt<bool> copyEngine("copy-engine", cl::init(false),
                         cl::desc("cuda and cuda-emu: run the copies of a program whose "
                                  "copies split from its signals as cudaMemcpyAsync on the "
                                  "copy engines, between a kernel of the signals before them "
                                  "and one of those after (docs/CUDA.md, \"Copy engines\"); "
                                  "says whether the program splits, and why not"),
                         cl::cat(run.category));
cl::opt<unsigned> threads("threads", cl::init(0),
                          cl::desc("Most threads that run the tbs on the host backend, the "
                                   "calling one included (default: one per CPU, or "
                                   "COLL_HOST_THREADS; a call that moves little runs on one)"),
                          cl::cat(run.category));

#if COLL_HAVE_CUDA_EMU
/// `sum / n` with up to two decimals, as short as it is exact.
std::string perExecution(uint64_t sum, uint64_t n) {
  if (n == 0)
    return "-";
  if (sum % n == 0)
    return std::to_string(sum / n);
  return llvm::formatv("{0:F2}", double(sum) / double(n)).str();
}

/// The --step-costs table: a row per protocol and step kind, each count
/// per execution, then each protocol's totals.
void printStepCosts(const std::vector<EmulatedStepCost> &costs, llvm::raw_ostream &os) {
  os << "# step costs per step execution (cuda-emu): barriers, fences and strong global accesses "
        "of a block's busiest thread, waits' first poll only\n";
  os << llvm::formatv(
      "# {0,-6} {1,-6} {2,8} {3,6} {4,6} {5,6} {6,6} {7,7} {8,6} {9,6} {10,6} {11,6}\n", "proto",
      "step", "execs", "bar", "warp", "fence", "sysfen", "st.rel", "ld.acq", "ld", "st", "atom");
  auto row = [&](const EmulatedStepCost &c) {
    const uint64_t n = c.executions;
    os << llvm::formatv(
        "# {0,-6} {1,-6} {2,8} {3,6} {4,6} {5,6} {6,6} {7,7} {8,6} {9,6} {10,6} {11,6}\n",
        c.protocol, c.step, n, perExecution(c.barriers, n), perExecution(c.warpBarriers, n),
        perExecution(c.fences, n), perExecution(c.sysFences, n), perExecution(c.releases, n),
        perExecution(c.acquires, n), perExecution(c.loads, n), perExecution(c.stores, n),
        perExecution(c.atomics, n));
  };
  for (size_t i = 0; i < costs.size();) {
    EmulatedStepCost total;
    total.protocol = costs[i].protocol;
    total.step = "total";
    uint64_t steps = 0;
    for (; i < costs.size() && costs[i].protocol == total.protocol; ++i) {
      const EmulatedStepCost &c = costs[i];
      row(c);
      if (c.step != "launch")
        steps += c.executions;
      total.barriers += c.barriers;
      total.warpBarriers += c.warpBarriers;
      total.fences += c.fences;
      total.sysFences += c.sysFences;
      total.releases += c.releases;
      total.acquires += c.acquires;
      total.loads += c.loads;
      total.stores += c.stores;
      total.atomics += c.atomics;
    }
    os << llvm::formatv("# {0} totals over {1} step executions and the launches: {2} barriers, {3} "
                        "warp barriers, {4} fence.acq_rel, {5} fence.sys, {6} st.release, {7} "
                        "ld.acquire, {8} loads, {9} stores, {10} atomics\n",
                        total.protocol, steps, total.barriers, total.warpBarriers, total.fences,
                        total.sysFences, total.releases, total.acquires, total.loads,
                        total.stores, total.atomics);
  }
  if (costs.empty())
    os << "# no step was counted\n";
}

#endif

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  const RunRequest request = run.parseCommandLine(argc, argv);
  if (backendName != "host" && backendName != "cuda" && backendName != "cuda-emu")
    return fail("collrun", BadInput,
                "--backend must be host, cuda or cuda-emu, not '" + backendName + "'");
#if !COLL_HAVE_CUDA_EMU
  if (backendName == "cuda-emu")
    return fail("collrun", BadInput,
                "this build has no CUDA emulation (it was configured with "
                "COLL_ENABLE_CUDA_EMU=OFF); use --backend host");
#endif
  if (stepCosts && backendName != "cuda-emu")
    return fail("collrun", BadInput,
                "--step-costs counts on the CPU emulation only: use --backend cuda-emu, not '" +
                    backendName + "'");
  if (traffic && backendName != "cuda-emu")
    return fail("collrun", BadInput,
                "--traffic counts on the CPU emulation only: use --backend cuda-emu, not '" +
                    backendName + "'");
  if (copyEngine && backendName == "host")
    return fail("collrun", BadInput,
                "--copy-engine runs copies on a GPU's copy engines: use --backend cuda or "
                "cuda-emu, not 'host'");
  if (copyEngine && traffic)
    return fail("collrun", BadInput,
                "--traffic counts what the kernels read and write; with --copy-engine the "
                "copies run outside them: use one or the other");
#if !COLL_HAVE_CUDA
  if (backendName == "cuda")
    return fail("collrun", BadInput,
                "this build has no CUDA backend (it was configured without nvcc, with "
                "COLL_ENABLE_CUDA=OFF or with sanitizers); use --backend host");
#endif
  RunInput input = run.input(request);
  if (!input.loaded)
    return input.exitCode;
  const ir::Algorithm *alg = &input.loaded->alg;
  const Plan *plan = &input.loaded->plan;

  Timeline timeline;
  Timeline *recording = tracePath.empty() ? nullptr : &timeline;
  std::unique_ptr<SweepTarget> target;
  std::string backendNote = "host backend";
  std::string copyEngineNote; // --copy-engine: whether the plan splits
  if (backendName == "host") {
    HostOptions options = run.backendOptions<HostOptions>();
    options.threads = threads;
    llvm::Error err = llvm::Error::success();
    target = hostTarget(*plan, options, recording, err);
    if (err) {
      llvm::logAllUnhandledErrors(std::move(err), llvm::errs());
      return Failed;
    }
  } else {
    llvm::Expected<DeviceBackend *> backend =
#if COLL_HAVE_CUDA_EMU
        backendName == "cuda-emu" ? &emulatedBackend() :
#endif
                                  gpuBackendPlugin(argv[0]);
    if (!backend)
      return fail("collrun", BadInput,
                  "--backend " + backendName + ": " + llvm::toString(backend.takeError()));
    auto device = (*backend)->currentDevice();
    if (!device)
      return fail("collrun", BadInput,
                  "--backend " + backendName + ": " + llvm::toString(device.takeError()));
    CudaOptions options = run.backendOptions<CudaOptions>();
    if (copyEngine) {
      options.copyEngineBytes = 1; // every call
      auto split = copyEnginePhases(*plan);
      if (split)
        copyEngineNote = llvm::formatv("copy engines: {0} copy steps per call as cudaMemcpyAsync, "
                                       "between a kernel of the signals before them and one of "
                                       "those after",
                                       split->copies.size());
      else
        copyEngineNote = "copy engines: not used: " + llvm::toString(split.takeError());
    }
    auto executor = (*backend)->create(*plan, options);
    if (!executor) {
      llvm::errs() << llvm::toString(executor.takeError()) << "\n";
      return Failed;
    }
    (*executor)->setTimeline(recording);
    // The executor clears its own device state after a watchdog stop.
    target = deviceTarget(**backend, std::move(*executor));
#if COLL_HAVE_CUDA_EMU
    if (traffic)
      target = std::make_unique<CountingTarget>(std::move(target));
#endif
    backendNote = backendName + " backend on " + device->name;
  }

  // With --report, everything printed from here is kept for the page too.
  std::string printed;
  TeeStream tee(llvm::outs(), printed);
  llvm::raw_ostream &out = run.reportFile.empty() ? static_cast<llvm::raw_ostream &>(llvm::outs()) : tee;
  out << llvm::formatv("# collrun {0}\n# {1} \"{2}\": {3} ranks, {4}, {5} chunks per "
                                "loop, {6} channels, {7} tbs; {8}\n",
                                run.inputFile, ir::collectiveName(plan->collective), plan->name,
                                plan->nranks, ir::protocolName(plan->protocol),
                                alg->nchunksPerLoop, alg->nchannels, plan->tbs.size(),
                                backendNote);
  if (!copyEngineNote.empty())
    out << "# " << copyEngineNote << "\n";
  // A plot or report that cannot be written is known before the run, not
  // after it.
  if (!run.plotFile.empty())
    if (llvm::Error err = writePlotFile(run.plotFile, "", {}))
      return fail("collrun", BadInput, "--plot: " + llvm::toString(std::move(err)));
  if (!run.reportFile.empty())
    if (llvm::Error err = writeReport(run.reportFile, {}))
      return fail("collrun", BadInput, "--report: " + llvm::toString(std::move(err)));
  SweepOptions sweep("collrun", input.sizes, request, input.modes, run.iters, run.seed);
  if ((!run.plotFile.empty() || !run.reportFile.empty()) && backendName == "host") {
    // The host's copy floor, for the plot: one thread copying a buffer of
    // the call's size, as the backend's own loops move data.
    sweep.referencesInTable = false;
    sweep.references.push_back(
        {"memcpy",
         [&](uint64_t bytes) -> llvm::Expected<std::optional<std::pair<double, double>>> {
           auto copy = hostCopyReference(bytes, run.iters);
           if (!copy)
             return copy.takeError();
           return std::optional<std::pair<double, double>>(*copy);
         }});
  }
#if COLL_HAVE_CUDA_EMU
  if (stepCosts) {
    emulatedStepCosts(/*reset=*/true);
    countEmulatedStepCosts(true);
  }
#endif
  SweepOutcome outcome = runSweep(*plan, sweep, *target, out);
#if COLL_HAVE_CUDA_EMU
  if (stepCosts) {
    countEmulatedStepCosts(false);
    printStepCosts(emulatedStepCosts(), out);
  }
#endif
  for (const std::string &note : outcome.notes)
    out << "# " << note << "\n";
  // Said only of results that were all compared: a call that failed
  // compared nothing.
  if (plan->collective == ir::Collective::AllReduce && !outcome.crossRankDiffs &&
      outcome.rows > 0 && outcome.verified == outcome.rows)
    out << "# all ranks hold bit-identical results\n";
  out << llvm::formatv("# verified {0} of {1}\n", outcome.verified, outcome.rows);
  if (!tracePath.empty()) {
    if (llvm::Error err = timeline.writeJson(tracePath)) {
      llvm::logAllUnhandledErrors(std::move(err), llvm::errs(), "collrun: ");
      return Failed;
    }
    llvm::outs() << llvm::formatv("# timeline: {0} call slices, {1} step slices, written to {2}\n",
                                  timeline.calls(), timeline.stepSlices(), tracePath);
  }
#if COLL_HAVE_CUDA_EMU
  if (traffic)
    printTraffic(static_cast<CountingTarget &>(*target).calls, plan->collective, plan->nranks,
                 out);
#endif
  RunDescription what;
  what.tool = "collrun";
  what.argc = argc;
  what.argv = argv;
  what.where = "the " + backendNote;
  what.backend = backendNote;
  what.printed = printed;
  what.timeline = tracePath;
  if (!writeRunFiles(run, *plan, *alg, outcome, what))
    return Failed;
  return outcome.verified == outcome.rows ? Verified : Failed;
}
