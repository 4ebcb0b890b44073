//===- Sweep.cpp - Sizes x modes on one backend, checked and timed --------===//

#include "Sweep.h"
#include "Progress.h"

#include "coll/cuda/Backend.h"
#include "coll/interpreter/HostExecutor.h"
#include "coll/ir/Geometry.h"
#include "coll/support/Bytes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdlib>

namespace coll::tools {

using namespace interp;

namespace cl = llvm::cl;

RunOptions::RunOptions(const char *tool, const char *overview, const Defaults &defaults)
    : categoryName(std::string(tool) + " options"),
      sizesHelp(std::string("Message sizes in bytes, as nccl-tests defines them (K, M, G "
                            "suffixes are powers of 1024); default ") +
                defaults.sizes),
      category(categoryName),
      inputFile(cl::Positional, cl::Required, cl::desc("<algorithm.xml>"), cl::cat(category)),
      sizes("size", cl::CommaSeparated,
            cl::desc(sizesHelp),
            cl::cat(category)),
      dtypeName("dtype", cl::init("fp32"),
                cl::desc("int8, uint8, int32, uint32, int64, uint64, fp16, bf16, fp32 or fp64"),
                cl::cat(category)),
      opName("op", cl::init("sum"), cl::desc("sum, prod, min, max or avg"), cl::cat(category)),
      modeName("mode", cl::init(""),
               cl::desc("inplace or outofplace (default: every mode the algorithm supports)"),
               cl::cat(category)),
      iters("iters", cl::init(defaults.iters), cl::desc(defaults.itersHelp), cl::cat(category)),
      seed("seed", cl::init(1), cl::desc("Seed of the random input data"), cl::cat(category)),
      watchdogMs("watchdog-ms", cl::init(0), cl::desc(defaults.watchdogHelp), cl::cat(category)),
      slotBytes("slot-bytes", cl::init(0),
                cl::desc("Data bytes per FIFO slot, the pipeline slice (default: the backend's "
                         "choice for the protocol)"),
                cl::cat(category)),
      noCheck("no-check", cl::init(false),
              cl::desc("Run the file without first checking it for races, deadlocks and a "
                       "wrong result (collir --check)"),
              cl::cat(category)),
      maxWarnings("max-warnings", cl::init(5),
                  cl::desc("Warnings about the file to print at most"), cl::cat(category)),
      plotFile("plot", cl::value_desc("FILE.svg"),
               cl::desc("Also draw time per call and bus bandwidth against size, with the "
                        "references of the run, as SVG"),
               cl::cat(category)),
      reportFile("report", cl::value_desc("FILE.html"),
                 cl::desc("Also write the run on one page: the command, algorithm, backend, "
                          "machine and commit, the plot, the table, the timeline's link"),
                 cl::cat(category)),
      defaultSizes(defaults.sizes), tool(tool), overview(overview) {}

RunRequest RunOptions::parseCommandLine(int argc, char **argv) {
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, overview);
  std::string error;
  std::optional<RunRequest> parsed = request(error);
  if (!parsed)
    std::exit(fail(tool, BadInput, error));
  return *parsed;
}

RunInput RunOptions::input(const RunRequest &request, SizesFromOptions sizes) const {
  RunInput input;
  std::string error;
  std::optional<std::vector<uint64_t>> bytes = sizes ? sizes(error) : byteSizes(error);
  if (!bytes) {
    input.exitCode = fail(tool, BadInput, error);
    return input;
  }
  input.sizes = std::move(*bytes);
  std::optional<LoadedAlgorithm> loaded = loadAlgorithm(inputFile, maxWarnings, !noCheck);
  if (!loaded) {
    input.exitCode = BadInput;
    return input;
  }
  ModeSelection selection = selectModes(tool, *loaded, request);
  if (selection.modes.empty()) {
    input.exitCode = selection.exitCode;
    return input;
  }
  input.loaded = std::move(loaded);
  input.modes = std::move(selection.modes);
  return input;
}

std::optional<RunRequest> RunOptions::request(std::string &error) const {
  std::optional<RunRequest> request = parseRunRequest(dtypeName, opName, modeName, error);
  if (request && iters == 0) {
    error = "--iters must be at least 1";
    return std::nullopt;
  }
  return request;
}

std::optional<std::vector<uint64_t>> RunOptions::byteSizes(std::string &error) const {
  std::vector<std::string> texts(sizes.begin(), sizes.end());
  if (texts.empty()) {
    llvm::SmallVector<llvm::StringRef, 4> parts;
    llvm::SplitString(defaultSizes, parts, ",");
    for (llvm::StringRef part : parts)
      texts.push_back(part.str());
  }
  return parseSizes(texts, error);
}

llvm::Expected<DeviceBackend *> gpuBackendPlugin(const char *argv0) {
  std::vector<std::string> paths;
  if (const char *named = std::getenv("COLL_CUDA_PLUGIN"); named && *named) {
    paths.push_back(named);
  } else {
    llvm::SmallString<256> lib(llvm::sys::path::parent_path(llvm::sys::path::parent_path(
        llvm::sys::fs::getMainExecutable(argv0, reinterpret_cast<void *>(&gpuBackendPlugin)))));
    llvm::sys::path::append(lib, "lib", "libcoll_cuda.so");
    paths.push_back(std::string(lib));
    paths.push_back("libcoll_cuda.so");
  }
  return loadDeviceBackend(paths);
}

SweepTarget::~SweepTarget() = default;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

bool SweepOutcome::failed() const {
  return verified != rows || std::any_of(notes.begin(), notes.end(), [](const std::string &n) {
           return llvm::StringRef(n).startswith("error");
         });
}

namespace {

class HostTarget final : public SweepTarget {
public:
  HostTarget(const Plan &plan, const HostOptions &options, Timeline *timeline)
      : plan(plan), options(options), timeline(timeline) {}
  llvm::Expected<CallResult> run(CheckedCall &call, bool) override {
    return executor->run(call.args());
  }
  llvm::Expected<std::vector<double>> time(CheckedCall &call, unsigned iters) override {
    std::vector<double> seconds;
    for (unsigned i = 0; i < iters; ++i) {
      call.reset();
      auto timed = executor->run(call.args());
      if (!timed)
        return timed.takeError();
      seconds.push_back(timed->seconds);
    }
    return seconds;
  }
  /// A host executor is unusable after a watchdog stop (its FIFOs are
  /// mid-transfer): a new one.
  llvm::Error recover() override {
    auto fresh = HostExecutor::create(plan, options);
    if (!fresh)
      return fresh.takeError();
    executor = std::move(*fresh);
    executor->setTimeline(timeline);
    return llvm::Error::success();
  }

private:
  const Plan &plan;
  HostOptions options;
  Timeline *timeline;
  std::unique_ptr<Executor> executor;
};

class DeviceTarget final : public SweepTarget {
public:
  DeviceTarget(DeviceBackend &backend, std::unique_ptr<DeviceExecutor> executor,
               DeviceTiming timing)
      : backend(backend), executor(std::move(executor)), timing(std::move(timing)) {}

  llvm::Expected<CallResult> run(CheckedCall &call, bool fresh) override {
    if (fresh || !buffers) {
      buffers.reset();
      const uint64_t es = dataTypeSize(call.args().type);
      auto made = backend.stage(call.args(), call.inputElems() * es, call.outputElems() * es);
      if (!made)
        return made.takeError();
      buffers = std::move(*made);
    }
    if (llvm::Error err = buffers->upload())
      return err;
    auto result = executor->run(buffers->args());
    if (!result)
      return result.takeError();
    if (llvm::Error err = buffers->download())
      return err;
    return result;
  }

  llvm::Expected<std::vector<double>> time(CheckedCall &call, unsigned iters) override {
    if (!timing.launches) {
      std::vector<double> seconds;
      for (unsigned i = 0; i < iters; ++i) {
        call.reset();
        auto timed = run(call, false);
        if (!timed)
          return timed.takeError();
        seconds.push_back(timed->seconds);
      }
      return seconds;
    }
    // Launch after launch on the original inputs (in place, every launch
    // overwrites them again; the time does not depend on the values).
    call.reset();
    if (llvm::Error err = buffers->upload())
      return err;
    auto prepared = executor->prepare(buffers->args());
    if (!prepared)
      return prepared.takeError();
    if (timing.onPrepared)
      timing.onPrepared(executor->launchShape());
    return executor->timeLaunches(timing.warmup, iters, timing.graph);
  }

private:
  DeviceBackend &backend;
  std::unique_ptr<DeviceExecutor> executor;
  DeviceTiming timing;
  std::unique_ptr<DeviceBuffers> buffers;
};

} // namespace

std::unique_ptr<SweepTarget> hostTarget(const Plan &plan, const HostOptions &options,
                                        Timeline *timeline, llvm::Error &err) {
  auto target = std::make_unique<HostTarget>(plan, options, timeline);
  err = target->recover();
  return target;
}

std::unique_ptr<SweepTarget> deviceTarget(DeviceBackend &backend,
                                          std::unique_ptr<DeviceExecutor> executor,
                                          DeviceTiming timing) {
  return std::make_unique<DeviceTarget>(backend, std::move(executor), std::move(timing));
}

SweepOutcome runSweep(const Plan &plan, const SweepOptions &options, SweepTarget &target,
                      llvm::raw_ostream &os) {
  const CollectiveDesc desc = CollectiveDesc::of(plan);
  const double busFactor = busBandwidthFactor(plan);
  const size_t es = dataTypeSize(options.request.type);
  const bool referenceRows = !options.references.empty() && options.referencesInTable;
  std::vector<std::string> extra;
  if (referenceRows)
    for (const SweepReference &r : options.references)
      extra.push_back("t/" + r.name);
  printTableHeader(os, extra);
  // On a terminal: the size and mode (or reference) running, and the time
  // left, each weighing its bytes plus a fixed cost (as if it moved 64 KiB
  // more).
  constexpr double FixedCost = 64 << 10;
  size_t perSize = options.modes.size();
  for (const SweepReference &r : options.references)
    perSize += r.timeInMode ? options.modes.size() : 1;
  double work = 0;
  for (uint64_t requested : options.sizes)
    work += double(perSize) *
            (FixedCost + double(ir::bytesForCount(
                             plan.shape, ir::countForBytes(plan.shape, requested, es), es)));
  Progress progress(options.tool, options.sizes.size() * perSize, work);
  SweepOutcome out;
  for (uint64_t requested : options.sizes) {
    const uint64_t count = ir::countForBytes(plan.shape, requested, es);
    const uint64_t bytes = ir::bytesForCount(plan.shape, count, es);
    const std::string size = formatBytes(bytes);
    // Per reference, its seconds at this size (0: none); those timed per
    // mode are timed, and their rows printed, before each mode's row.
    std::vector<double> referenceSeconds(options.references.size(), 0.0);
    auto timeReference = [&](size_t k, std::optional<bool> inplace) {
      const SweepReference &r = options.references[k];
      referenceSeconds[k] = 0;
      os.flush();
      progress.step((size + " bytes " + r.name).c_str(), FixedCost + double(bytes));
      auto ref = inplace ? r.timeInMode(bytes, *inplace) : r.time(bytes);
      progress.clear();
      if (!ref) {
        out.notes.push_back(llvm::formatv("error: {0} bytes{1}: {2}: {3}", bytes,
                                          inplace ? (*inplace ? " in-place" : " out-of-place")
                                                  : "",
                                          r.name, llvm::toString(ref.takeError())));
        return;
      }
      if (!*ref)
        return;
      const auto [seconds, gbps] = **ref;
      referenceSeconds[k] = seconds;
      out.points.push_back({r.name, true, bytes, seconds, gbps});
      if (referenceRows)
        os << llvm::formatv("  {0,-12} {1,12} {2,12} {3,6} {4,6} {5,10:f1} {6,8:f2} {7,8}\n",
                            r.name, bytes, "-", "-", "-", seconds * 1e6, gbps, "-");
    };
    for (size_t k = 0; k < options.references.size(); ++k)
      if (!options.references[k].timeInMode)
        timeReference(k, std::nullopt);
    for (bool inplace : options.modes) {
      for (size_t k = 0; k < options.references.size(); ++k)
        if (options.references[k].timeInMode)
          timeReference(k, inplace);
      ++out.rows;
      const char *place = inplace ? "in-place" : "out-of-place";
      const std::string prefix = rowPrefix(inplace, bytes, count, options.request);
      if ((plan.minBytes && bytes < plan.minBytes) || (plan.maxBytes && bytes > plan.maxBytes))
        out.notes.push_back(llvm::formatv("note: {0} bytes is outside the algorithm's range "
                                          "[{1}, {2}]; a runtime would not select it for this "
                                          "size",
                                          bytes, plan.minBytes,
                                          plan.maxBytes ? std::to_string(plan.maxBytes) : "inf")
                                .str());
      CheckedCall call(desc, options.request.type, options.request.op, count, inplace,
                       options.seed);
      os.flush();
      progress.step((size + " bytes " + place).c_str(), FixedCost + double(bytes));
      auto first = target.run(call, true);
      if (!first) {
        progress.clear();
        std::string msg = llvm::toString(first.takeError());
        os << prefix << "   failed: see below\n";
        out.notes.push_back("error: " + std::to_string(bytes) + " bytes " + place + ": " + msg);
        if (llvm::StringRef(msg).contains("watchdog"))
          if (llvm::Error err = target.recover())
            out.notes.push_back("error: after the watchdog stop: " +
                                llvm::toString(std::move(err)));
        continue;
      }
      const CheckResult result = call.check();
      double seconds = first->seconds;
      auto timed = target.time(call, options.iters);
      if (!timed)
        out.notes.push_back("error: timed run: " + llvm::toString(timed.takeError()));
      else if (!timed->empty())
        seconds = median(std::move(*timed));
      progress.clear();
      const double algbw = seconds > 0 ? double(bytes) / seconds / 1e9 : 0.0;
      const double busbw = algbw * busFactor;
      out.points.push_back({place, false, bytes, seconds, busbw});
      if (referenceRows) {
        os << prefix << llvm::formatv(" {0,10:f1} {1,8:f2} {2,8:f2}", seconds * 1e6, algbw, busbw);
        for (double ref : referenceSeconds)
          os << (ref > 0 ? llvm::formatv(" {0,9:f2}", seconds / ref).str()
                         : llvm::formatv(" {0,9}", "-").str());
        os << "\n";
      } else
        os << prefix
           << llvm::formatv(" {0,10:f1} {1,8:f2} {2,8:f2} {3,8}\n", seconds * 1e6, algbw, busbw,
                            result.wrong);
      if (result.wrong)
        out.notes.push_back(llvm::formatv("error: {0} bytes {1}: {2} of {3} elements wrong; "
                                          "first: {4}",
                                          bytes, place, result.wrong, result.checked,
                                          result.firstWrong)
                                .str());
      else
        ++out.verified;
      if (result.crossRankDiffs) {
        out.crossRankDiffs = true;
        out.notes.push_back(llvm::formatv("warning: {0} bytes {1}: {2} elements differ in their "
                                          "bits between ranks (the algorithm reduces in a "
                                          "different order on different ranks)",
                                          bytes, place, result.crossRankDiffs)
                                .str());
      }
    }
  }
  return out;
}

bool writeRunFiles(const RunOptions &run, const Plan &plan, const ir::Algorithm &alg,
                   const SweepOutcome &outcome, const RunDescription &what) {
  auto failed = [&](llvm::Error err) {
    llvm::logAllUnhandledErrors(std::move(err), llvm::errs(), std::string(what.tool) + ": ");
    return false;
  };
  if (!run.plotFile.empty()) {
    std::string title = llvm::formatv("{0} ({1}, {2} ranks, {3}) on {4}", plan.name,
                                      ir::collectiveName(plan.collective), plan.nranks,
                                      ir::protocolName(plan.protocol), what.where)
                            .str();
    if (llvm::Error err = writePlotFile(run.plotFile, title, outcome.points))
      return failed(std::move(err));
    llvm::outs() << "# plot written to " << run.plotFile << "\n";
  }
  if (!run.reportFile.empty()) {
    ReportInfo report;
    report.tool = what.tool;
    for (int a = 0; a < what.argc; ++a)
      report.commandLine += (a ? " " : "") + std::string(what.argv[a]);
    report.file = run.inputFile;
    report.algorithm = llvm::formatv("{0}: {1} over {2} ranks, {3}, {4} channels, {5} tbs",
                                     plan.name, ir::collectiveName(plan.collective), plan.nranks,
                                     ir::protocolName(plan.protocol), alg.nchannels,
                                     plan.tbs.size())
                           .str();
    report.backend = what.backend;
    report.table = what.printed;
    report.points = outcome.points;
    report.plotTitle = report.algorithm + " on " + what.where;
    report.timeline = what.timeline;
    if (llvm::Error err = writeReport(run.reportFile, report))
      return failed(std::move(err));
    llvm::outs() << "# report written to " << run.reportFile << "\n";
  }
  return true;
}

llvm::Expected<std::pair<double, double>> hostCopyReference(uint64_t bytes, unsigned iters) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::vector<double> seconds;
  for (unsigned i = 0; i <= std::max(iters, 1u); ++i) { // the first warms the buffers up
    auto start = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    asm volatile("" : : "r"(dst.data()) : "memory"); // the copy is not optimised away
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (i > 0)
      seconds.push_back(s);
  }
  double t = median(std::move(seconds));
  return std::make_pair(t, t > 0 ? double(bytes) / t / 1e9 : 0.0);
}

} // namespace coll::tools
