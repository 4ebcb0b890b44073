//===- Sweep.cpp - Sizes x modes on one backend, checked and timed --------===//

#include "Sweep.h"

#include "coll/interpreter/HostExecutor.h"
#include "coll/ir/Geometry.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace coll::tools {

using namespace interp;

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
  const bool hasReference = static_cast<bool>(options.reference);
  printTableHeader(os, hasReference ? "bus/" + options.referenceName : "");
  SweepOutcome out;
  for (uint64_t requested : options.sizes) {
    const uint64_t count = ir::countForBytes(plan.shape, requested, es);
    const uint64_t bytes = ir::bytesForCount(plan.shape, count, es);
    double referenceBw = 0;
    if (hasReference) {
      auto ref = options.reference(bytes);
      if (!ref) {
        out.notes.push_back(llvm::formatv("error: {0} bytes: {1}: {2}", bytes,
                                          options.referenceName,
                                          llvm::toString(ref.takeError())));
        continue;
      }
      referenceBw = ref->second;
      os << llvm::formatv("  {0,-12} {1,12} {2,12} {3,6} {4,6} {5,10:f1} {6,8:f2} {7,8} {8,8}\n",
                          options.referenceName, bytes, "-", "-", "-", ref->first * 1e6,
                          ref->second, "-", "-");
    }
    for (bool inplace : options.modes) {
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
      auto first = target.run(call, true);
      if (!first) {
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
      const double algbw = seconds > 0 ? double(bytes) / seconds / 1e9 : 0.0;
      const double busbw = algbw * busFactor;
      if (hasReference)
        os << prefix
           << llvm::formatv(" {0,10:f1} {1,8:f2} {2,8:f2} {3,8:f3}\n", seconds * 1e6, algbw,
                            busbw, referenceBw > 0 ? busbw / referenceBw : 0.0);
      else
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

} // namespace coll::tools
