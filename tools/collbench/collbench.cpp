//===- collbench.cpp - Time an algorithm on the GPU -----------------------===//
//
//   collbench ALGO.xml [--size S[,S...] | --sweep MIN:MAX] [--dtype T] [--op O]
//                      [--mode inplace|outofplace] [--iters N] [--warmup N]
//                      [--graph] [--threads N] [--slot-bytes B] [--no-check]
//                      [--references auto|none|NAME[,NAME...]] [--reference-steps K]
//                      [--backend cuda|cuda-emu] [--traffic] [--against F[,F...]]
//
// Runs an MSCCL XML algorithm with every rank on the current GPU and prints
// an nccl-tests-style table (tools/support/Sweep.h, shared with collrun):
// per size, a line per reference timed in the same run (docs/CUDA.md,
// "References": d2d, a device-to-device cudaMemcpyAsync of the same number
// of bytes, its bandwidth counting bytes read and written; exchange and
// reduce, one-launch allreduces; block and fifo, one block copying and one
// FIFO connection; steps and hops, the floors of K steps that wait for
// nothing and of K hops between two blocks) and, per mode, the median time
// of --iters launches after --warmup ones (CUDA events around each launch, or around each replay of a
// CUDA graph of the call with --graph), algbw, busbw and per reference the
// time over the reference's. Each size's result is checked once
// (interp::CheckedCall) before it is timed, and each reference's once
// before it is timed.
//
// --backend cuda-emu runs the same on the CPU emulation of the CUDA backend
// (its times are the emulation's, not a GPU's), where --traffic counts the
// global-memory bytes of one call of each size and mode and of one launch of
// each kernel reference (docs/CUDA.md, "Traffic"): the call's report ends
// "traffic: B bytes per element, reference R, ratio X" as collrun's does, and
// each reference's "traffic: reference NAME at S bytes: B bytes per element".
//
// --against times other programs of the same call (collective and ranks) as
// references of the same run, per size and mode, each checked first.
//
// Exit status: 0 every result verified; 1 a wrong result or a failed call;
// 2 bad usage, an unreadable or invalid file, or no CUDA backend or device;
// 3 the file does not apply (collective that cannot be checked, or
// unsupported mode).
//
//===----------------------------------------------------------------------===//

#include "Sweep.h"
#include "ToolSupport.h"
#if COLL_HAVE_CUDA_EMU
#include "Traffic.h"
#endif

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
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>
#include <optional>

using namespace coll;
using namespace coll::interp;
using namespace coll::tools;
namespace cl = llvm::cl;

namespace {

RunOptions run(
    "collbench",
    "Times an MSCCL XML algorithm with every rank on the current GPU, against a\n"
    "device-to-device copy of the same size, after checking its result.\n\n"
    "Exit status: 0 all results verified, 1 a wrong result or a failed call, 2 bad usage,\n"
    "an unreadable or invalid file, or no CUDA backend or device, 3 the file does not\n"
    "apply (collective that cannot be checked, or unsupported mode).\n",
    {"1M", 20, "Timed launches per size (the median is reported)",
     "Stop a launch whose waits make no progress for this long (default: "
     "COLL_WATCHDOG_MS, else 30000)"});
cl::opt<std::string> sweep("sweep",
                           cl::desc("MIN:MAX: every power-of-two multiple of MIN up "
                                    "to MAX (like nccl-tests -b MIN -e MAX -f 2)"),
                           cl::cat(run.category));
cl::opt<unsigned> warmup("warmup", cl::init(5), cl::desc("Untimed launches before them"),
                         cl::cat(run.category));
cl::opt<bool> graph("graph", cl::desc("Time replays of a CUDA graph captured from the call"),
                    cl::cat(run.category));
cl::opt<std::string> references(
    "references", cl::init("auto"),
    cl::desc("References timed beside the algorithm: auto (d2d; exchange and reduce for an "
             "allreduce; block and fifo for a 2-rank broadcast), none, or a list of d2d, "
             "exchange, reduce, block, fifo, steps, hops"),
    cl::cat(run.category));
cl::opt<unsigned> referenceSteps(
    "reference-steps", cl::init(0),
    cl::desc("K of the steps and hops references: steps copy the message in K steps, hops "
             "bounce it K times (default: the steps of the plan's longest tb)"),
    cl::cat(run.category));
cl::opt<unsigned> threads("threads", cl::init(0),
                          cl::desc("Threads per block: a multiple of 32, at most 512 (default: "
                                   "the largest power of two at which all blocks fit)"),
                          cl::cat(run.category));
cl::opt<std::string> backendName("backend", cl::init("cuda"),
                                 cl::desc("cuda (the current GPU) or cuda-emu (the CUDA "
                                          "backend on the CPU emulation: the emulation's times, "
                                          "for --traffic)"),
                                 cl::cat(run.category));
cl::opt<bool> traffic("traffic", cl::init(false),
                      cl::desc("cuda-emu only: count the global-memory bytes of one call of "
                               "each size and mode, and of one launch of each kernel "
                               "reference, and print them after the table: "
                               "'traffic: B bytes per element, reference R, ratio X' per call, "
                               "'traffic: reference NAME at S bytes: B bytes per element' per "
                               "reference (docs/CUDA.md, \"Traffic\")"),
                      cl::cat(run.category));

cl::opt<bool> copyEngine("copy-engine", cl::init(false),
                         cl::desc("Run the copies of a program whose copies split from its "
                                  "signals on the copy engines (cudaMemcpyAsync) between two "
                                  "kernels of its signals, as collrun --copy-engine "
                                  "(docs/CUDA.md, \"Copy engines\")"),
                         cl::cat(run.category));
cl::list<std::string> against(
    "against", cl::CommaSeparated,
    cl::desc("Other programs of the same collective and rank count (MSCCL XML or MSCCL++ "
             "plans), each checked and timed at each size and mode in the same run as a "
             "reference named after its file: the column t/NAME is this program's time over "
             "that one's; with --traffic, 'traffic: against NAME at S bytes MODE: B bytes "
             "per element, reference R, ratio X' per call"),
    cl::cat(run.category));

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

/// The kernel references, by the names referenceName gives them (d2d, a
/// copy of the runtime's, is collbench's own).
constexpr ReferenceKind KernelReferences[] = {ReferenceKind::Exchange, ReferenceKind::ReduceOnce,
                                              ReferenceKind::BlockCopy, ReferenceKind::Fifo,
                                              ReferenceKind::Steps, ReferenceKind::Hops};
std::optional<ReferenceKind> kernelReference(llvm::StringRef name) {
  for (ReferenceKind kind : KernelReferences)
    if (name == referenceName(kind))
      return kind;
  return std::nullopt;
}

/// The references --references names for `plan`, or an error message.
std::optional<std::vector<std::string>> chosenReferences(const Plan &plan, std::string &error) {
  const bool allreduce = plan.collective == ir::Collective::AllReduce;
  if (referenceSteps > MaxReferenceSteps) {
    error = llvm::formatv("--reference-steps: {0} is above {1}", referenceSteps.getValue(),
                          MaxReferenceSteps)
                .str();
    return std::nullopt;
  }
  if (references == "none")
    return std::vector<std::string>{};
  if (references == "auto") {
    std::vector<std::string> out{"d2d"};
    if (allreduce && plan.nranks <= MaxReferenceRanks) {
      out.push_back("exchange");
      out.push_back("reduce");
    }
    if (plan.collective == ir::Collective::Broadcast && plan.nranks == 2) {
      out.push_back("block");
      out.push_back("fifo");
    }
    return out;
  }
  llvm::SmallVector<llvm::StringRef, 5> names;
  llvm::StringRef(references).split(names, ',');
  std::vector<std::string> out;
  for (llvm::StringRef name : names) {
    if (name != "d2d" && !kernelReference(name)) {
      error = "--references: unknown reference '" + name.str() + "' (auto, none, or d2d";
      for (ReferenceKind kind : KernelReferences)
        error += std::string(", ") + referenceName(kind);
      error += ")";
      return std::nullopt;
    }
    if ((name == "exchange" || name == "reduce") &&
        (!allreduce || plan.nranks > MaxReferenceRanks)) {
      error = llvm::formatv("--references: {0} is an allreduce of at most {1} ranks; this "
                            "program is {2} over {3} ranks",
                            name, MaxReferenceRanks, ir::collectiveName(plan.collective),
                            plan.nranks)
                  .str();
      return std::nullopt;
    }
    if (llvm::is_contained(out, name.str())) {
      error = "--references: '" + name.str() + "' is named twice";
      return std::nullopt;
    }
    out.push_back(name.str());
  }
  return out;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  const RunRequest request = run.parseCommandLine(argc, argv);
  if (backendName != "cuda" && backendName != "cuda-emu")
    return fail("collbench", BadInput,
                "--backend must be cuda or cuda-emu, not '" + backendName + "'");
#if !COLL_HAVE_CUDA_EMU
  if (backendName == "cuda-emu")
    return fail("collbench", BadInput,
                "this build has no CUDA emulation (it was configured with "
                "COLL_ENABLE_CUDA_EMU=OFF)");
#endif
  if (traffic && backendName != "cuda-emu")
    return fail("collbench", BadInput,
                "--traffic counts on the CPU emulation only: use --backend cuda-emu");
  // The file first: what is wrong with it is worth saying on any machine.
  RunInput input = run.input(request, requestedSizes);
  if (!input.loaded)
    return input.exitCode;
  const ir::Algorithm *alg = &input.loaded->alg;
  const Plan *plan = &input.loaded->plan;
  std::string error;
  std::optional<std::vector<std::string>> refs = chosenReferences(*plan, error);
  if (!refs)
    return fail("collbench", BadInput, error);
  // The programs timed against this one: the same call, so the same
  // collective and rank count.
  struct Against {
    std::string name, file;
    LoadedAlgorithm loaded;
    std::unique_ptr<SweepTarget> target;
  };
  std::vector<Against> others;
  for (const std::string &file : against) {
    std::optional<LoadedAlgorithm> other = loadAlgorithm(file, run.maxWarnings, !run.noCheck);
    if (!other)
      return fail("collbench", BadInput, "--against " + file + ": not read (above)");
    const Plan &o = other->plan;
    if (o.collective != plan->collective || o.nranks != plan->nranks)
      return fail("collbench", BadInput,
                  llvm::formatv("--against {0}: its call is {1} over {2} ranks, {3}'s is "
                                "{4} over {5}: only programs of the same call compare",
                                file, ir::collectiveName(o.collective), o.nranks,
                                run.inputFile, ir::collectiveName(plan->collective),
                                plan->nranks));
    std::string name = llvm::sys::path::stem(file).str();
    for (const Against &a : others)
      if (a.name == name)
        return fail("collbench", BadInput,
                    "--against: two programs named '" + name + "' (" + a.file + ", " + file +
                        ")");
    if (llvm::is_contained(*refs, name))
      return fail("collbench", BadInput,
                  "--against " + file + ": '" + name + "' is also a kernel reference's name");
    others.push_back({name, file, std::move(*other), nullptr});
  }

  // The GPU backend as the plugin libcoll_cuda.so, as collrun and libcoll.so
  // reach it, or the emulation linked in.
  llvm::Expected<DeviceBackend *> plugin =
#if COLL_HAVE_CUDA_EMU
      backendName == "cuda-emu" ? &emulatedBackend() :
#endif
                                gpuBackendPlugin(argv[0]);
  if (!plugin)
    return fail("collbench", BadInput, llvm::toString(plugin.takeError()));
  DeviceBackend &backend = **plugin;
  auto device = backend.currentDevice();
  if (!device)
    return fail("collbench", BadInput, llvm::toString(device.takeError()));

  CudaOptions options = run.backendOptions<CudaOptions>();
  options.threadsPerBlock = threads;
  std::string copyEngineNote;
  if (copyEngine) {
    if (traffic)
      return fail("collbench", BadInput,
                  "--traffic counts what the kernels read and write; with --copy-engine the "
                  "copies run outside them: use one or the other");
    options.copyEngineBytes = 1;
    auto split = copyEnginePhases(*plan);
    copyEngineNote = split ? llvm::formatv("copy engines: {0} copy steps per call as "
                                           "cudaMemcpyAsync between two kernels of the signals",
                                           split->copies.size())
                                 .str()
                           : "copy engines: not used: " + llvm::toString(split.takeError());
  }
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
#if COLL_HAVE_CUDA_EMU
  if (traffic)
    target = std::make_unique<CountingTarget>(std::move(target));
  // Each kernel reference's bytes at each size, counted before it is timed.
  std::vector<std::string> referenceTraffics;
#endif

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
      "# median of {12} launches after {13} warm-up launches, CUDA events{14}{15}\n",
      run.inputFile, ir::collectiveName(plan->collective), plan->name, plan->nranks,
      ir::protocolName(plan->protocol), alg->nchunksPerLoop, alg->nchannels, plan->tbs.size(),
      device->name, device->smCount, threads ? std::to_string(threads) : std::string("auto"),
      sliceBytes, run.iters, warmup, graph ? ", CUDA graph replays" : "",
      backendName == "cuda-emu" ? "\n# the CPU emulation of the CUDA backend: its times are the "
                                  "emulation's, not a GPU's"
                                : "");
  if (!copyEngineNote.empty())
    out << "# " << copyEngineNote << "\n";
  // A plot that cannot be written is known before the run, not after it.
  if (!run.plotFile.empty())
    if (llvm::Error err = writePlotFile(run.plotFile, "", {}))
      return fail("collbench", BadInput, "--plot: " + llvm::toString(std::move(err)));
  SweepOptions sweep("collbench", input.sizes, request, input.modes, run.iters, run.seed);
  using Timed = llvm::Expected<std::optional<std::pair<double, double>>>;
  auto timedAs = [](llvm::Expected<std::vector<double>> seconds, uint64_t bytes,
                    double bytesCounted) -> Timed {
    if (!seconds)
      return seconds.takeError();
    const double s = median(std::move(*seconds));
    return std::optional<std::pair<double, double>>(
        std::make_pair(s, s > 0 ? bytesCounted * double(bytes) / s / 1e9 : 0.0));
  };
  // What each reference is: docs/CUDA.md, "References".
  static const std::map<std::string, std::string> meaning = {
      {"d2d", "cudaMemcpyAsync of the same size on the same GPU; GB/s counts bytes read + "
              "written"},
      {"exchange", "one launch, one block per rank: each writes its buffer into every peer's "
                   "slot as LL words (4 data bytes, 4 flag bytes), then adds up what arrives; "
                   "fp32 sum, up to 1 MiB per rank"},
      {"reduce", "one launch that reads every rank's buffer once and writes every output "
                 "once; fp32 sum"},
      {"block", "one block copying the message"},
      {"fifo", "one Simple connection: a sender and a receiver block, 8 slots of the run's "
               "slot size"},
      {"steps", "one block copying the message in K steps, each its share with the kernel's "
                "pack loop and a block barrier: the floor of K steps that wait for nothing"},
      {"hops", "two blocks bouncing the message K times as LL words (4 data bytes, 4 flag "
               "bytes), a block barrier per hop: the floor of K steps that each wait on "
               "another block"}};
  const unsigned refThreads = threads ? threads.getValue() : MaxReferenceThreads;
  // K of steps and hops: as told, else the longest tb's steps.
  uint32_t longestTb = 0;
  for (const PlanTb &tb : plan->tbs)
    longestTb = std::max(longestTb, static_cast<uint32_t>(tb.nSteps));
  const uint32_t stepsK = referenceSteps ? referenceSteps.getValue() : std::max(longestTb, 1u);
  for (const std::string &name : *refs) {
    if (name == "steps" || name == "hops")
      out << llvm::formatv("# {0}: {1}; K = {2}\n", name, meaning.at(name), stepsK);
    else
      out << llvm::formatv("# {0}: {1}\n", name, meaning.at(name));
    ReferenceRequest base;
    base.nranks = plan->nranks;
    base.slotBytes = sliceBytes;
    base.threads = refThreads;
    base.warmup = warmup;
    base.iters = run.iters;
    base.steps = stepsK;
    SweepReference r;
    r.name = name;
    if (name == "d2d")
      r.time = [&, timedAs](uint64_t bytes) -> Timed {
        return timedAs(backend.timeDeviceCopy(bytes, warmup, run.iters), bytes, 2.0);
      };
    else
      r.time = [&, timedAs, base, name](uint64_t bytes) -> Timed {
        ReferenceRequest q = base;
        q.bytes = bytes;
        q.kind = *kernelReference(name);
        if ((q.kind == ReferenceKind::Exchange || q.kind == ReferenceKind::Hops) &&
            bytes > MaxExchangeReferenceBytes)
          return std::nullopt;
        if ((q.kind == ReferenceKind::Exchange || q.kind == ReferenceKind::ReduceOnce ||
             q.kind == ReferenceKind::Hops) &&
            bytes % 4 != 0)
          return std::nullopt;
#if COLL_HAVE_CUDA_EMU
        if (traffic) {
          auto counted = referenceTraffic(backend, q);
          if (!counted)
            return counted.takeError();
          const uint64_t elems = bytes / dataTypeSize(request.type);
          referenceTraffics.push_back(
              llvm::formatv("traffic: reference {0} at {1} bytes: {2} bytes per element", name,
                            bytes, shortNumber(elems ? double(*counted) / double(elems) : 0))
                  .str());
        }
#endif
        return timedAs(backend.timeReference(q), bytes, 1.0);
      };
    sweep.references.push_back(std::move(r));
  }
  // The programs against this one: each call checked once, then timed as
  // this one is (its own executor and buffers, the same element count).
  for (Against &a : others) {
    auto otherExecutor = backend.create(a.loaded.plan, options);
    if (!otherExecutor) {
      llvm::logAllUnhandledErrors(otherExecutor.takeError(), llvm::errs(),
                                  "collbench: --against " + a.file + ": ");
      return Failed;
    }
    DeviceTiming otherTiming = timing;
    otherTiming.onPrepared = nullptr;
    a.target = deviceTarget(backend, std::move(*otherExecutor), otherTiming);
#if COLL_HAVE_CUDA_EMU
    if (traffic)
      a.target = std::make_unique<CountingTarget>(std::move(a.target));
#endif
    out << llvm::formatv("# {0}: {1} \"{2}\" ({3}, {4} tbs), the same call\n", a.name, a.file,
                         a.loaded.plan.name, ir::protocolName(a.loaded.plan.protocol),
                         a.loaded.plan.tbs.size());
    SweepReference r;
    r.name = a.name;
    const size_t es = dataTypeSize(request.type);
    const double busFactor = busBandwidthFactor(a.loaded.plan);
    r.timeInMode = [&a, &request, &sweep, es, busFactor](uint64_t bytes, bool inplace) -> Timed {
      const Plan &o = a.loaded.plan;
      if (inplace ? !o.inplace : !o.outofplace)
        return std::nullopt; // not a mode it runs in
      const uint64_t count = ir::countForBytes(o.shape, bytes, es);
      if (ir::bytesForCount(o.shape, count, es) != bytes)
        return std::nullopt; // not a size it takes
      CheckedCall call(CollectiveDesc::of(o), request.type, request.op, count, inplace,
                       sweep.seed);
      auto first = a.target->run(call, true);
      if (!first)
        return first.takeError();
      const CheckResult result = call.check();
      if (result.wrong)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            llvm::formatv("{0} of {1} elements wrong; first: {2}", result.wrong,
                          result.checked, result.firstWrong));
      auto seconds = a.target->time(call, sweep.iters);
      if (!seconds)
        return seconds.takeError();
      if (seconds->empty())
        return std::optional<std::pair<double, double>>(std::make_pair(first->seconds, 0.0));
      const double s = median(std::move(*seconds));
      return std::optional<std::pair<double, double>>(
          std::make_pair(s, s > 0 ? double(bytes) / s / 1e9 * busFactor : 0.0));
    };
    sweep.references.push_back(std::move(r));
  }
  SweepOutcome outcome = runSweep(*plan, sweep, *target, out);
  if (launch)
    outcome.notes.insert(outcome.notes.begin(),
                         llvm::formatv("launch: {0} blocks of {1} threads, {2} bytes of dynamic "
                                       "shared memory; {3} blocks per SM fit; the kernel's {4} "
                                       "build",
                                       launch->blocks, launch->threads, launch->sharedBytes,
                                       launch->blocksPerSm,
                                       launch->wide ? "wide (128 registers)" : "narrow (64 registers)")
                             .str());
  for (const std::string &note : outcome.notes)
    out << "# " << note << "\n";
  out << llvm::formatv("# verified {0} of {1}\n", outcome.verified, outcome.rows);
#if COLL_HAVE_CUDA_EMU
  if (traffic) {
    printTraffic(static_cast<CountingTarget &>(*target).calls, plan->collective, plan->nranks, out);
    if (llvm::is_contained(*refs, "d2d"))
      out << "# d2d: a copy of the runtime's, not a kernel: not counted\n";
    for (const std::string &line : referenceTraffics)
      out << line << "\n";
    for (const Against &a : others)
      for (const CountedCall &c : static_cast<CountingTarget &>(*a.target).calls) {
        const double elems = c.count ? double(c.count) : 1.0;
        const double b = double(countedBytes(c)) / elems;
        const double ref =
            double(referenceBytes(a.loaded.plan.collective, a.loaded.plan.nranks, c)) / elems;
        out << llvm::formatv("traffic: against {0} at {1} bytes {2}: {3} bytes per element, "
                             "reference {4}, ratio {5:F2}\n",
                             a.name,
                             ir::bytesForCount(a.loaded.plan.shape, c.count,
                                               dataTypeSize(request.type)),
                             c.inplace ? "in place" : "out of place", shortNumber(b),
                             shortNumber(ref), ref > 0 ? b / ref : 0.0);
      }
  }
#endif
  RunDescription what;
  what.tool = "collbench";
  what.argc = argc;
  what.argv = argv;
  what.where = device->name;
  what.backend = backendName + " backend on " + device->name;
  what.printed = printed;
  if (!writeRunFiles(run, *plan, *alg, outcome, what))
    return Failed;
  return outcome.failed() ? Failed : Verified;
}
