//===- HostExecutor.cpp - The host backend ---------------------------------===//
//
// Every rank of the plan runs in this process: one RankRunner per rank over
// connections in one anonymous mapping, their tbs run as tasks of one
// Engine (coll/interpreter/host/Engine.h), whose idle threads sleep on the executor's doorbell.
//
//===----------------------------------------------------------------------===//

#include "coll/interpreter/HostExecutor.h"

#include "coll/interpreter/host/Engine.h"
#include "coll/interpreter/host/Rank.h"

#include "llvm/Support/FormatVariadic.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <sys/mman.h>

namespace coll::interp {

using namespace host;

Executor::~Executor() = default;

uint32_t watchdogFromEnv(uint32_t ms) {
  if (ms != 0)
    return ms;
  if (const char *env = std::getenv("COLL_WATCHDOG_MS")) {
    char *end = nullptr;
    unsigned long v = std::strtoul(env, &end, 10);
    if (end != env && *end == '\0' && v > 0 && v < (1ul << 31))
      return static_cast<uint32_t>(v);
  }
  return DefaultWatchdogMs;
}

llvm::Expected<bool> checkCallBuffers(const Plan &plan, const CallLayout &call,
                                      const CallArgs &args, int32_t onlyRank) {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  if (args.input.size() != static_cast<size_t>(plan.nranks) ||
      args.output.size() != static_cast<size_t>(plan.nranks))
    return fail(llvm::formatv("the call passes {0} input and {1} output buffers for {2} ranks",
                              args.input.size(), args.output.size(), plan.nranks));
  const uint64_t es = dataTypeSize(args.type);
  const uint64_t inBytes = call.inputElems * es;
  const uint64_t outBytes = call.outputElems * es;
  if (args.count == 0) {
    // Nothing moves, and empty buffers alias ambiguously: a no-op, as in NCCL.
    return false;
  }
  int places[2] = {0, 0}; // ranks out of place, in place
  for (int32_t r = 0; r < plan.nranks; ++r) {
    if (onlyRank >= 0 && r != onlyRank)
      continue;
    auto *in = static_cast<const std::byte *>(args.input[r]);
    auto *out = static_cast<const std::byte *>(args.output[r]);
    if ((!in && inBytes) || (!out && outBytes))
      return fail(llvm::formatv("rank {0}: a buffer is null", r));
    ir::InPlaceOffsets off = ir::inPlaceOffsets(plan.shape, r, args.count);
    bool aliased = off.inputInOutput ? in == out + off.inputInOutput * es
                                     : out == in + off.outputInInput * es;
    if (!aliased && in && out && in < out + outBytes && out < in + inBytes)
      return fail(llvm::formatv("rank {0}: input and output overlap without being in place", r));
    ++places[aliased];
  }
  if (places[0] && places[1])
    return fail("some ranks call in place and others out of place");
  const bool inplace = places[1] != 0;
  if (inplace && !plan.inplace)
    return fail(llvm::formatv("{0}: the algorithm does not support in-place calls",
                              plan.fileName));
  if (!inplace && !plan.outofplace)
    return fail(llvm::formatv("{0}: the algorithm does not support out-of-place calls",
                              plan.fileName));
  return inplace;
}

namespace {

/// Zeroed anonymous memory, released with the executor.
class Mapping {
public:
  ~Mapping() {
    if (base)
      munmap(base, bytes);
  }
  llvm::Error map(size_t size) {
    if (size == 0)
      return llvm::Error::success();
    void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return llvm::createStringError(std::error_code(errno, std::generic_category()),
                                     "cannot map %zu bytes for connection FIFOs: %s", size,
                                     std::strerror(errno));
    base = p;
    bytes = size;
    return llvm::Error::success();
  }
  std::byte *at(size_t offset) const { return static_cast<std::byte *>(base) + offset; }

private:
  void *base = nullptr;
  size_t bytes = 0;
};

} // namespace

class HostExecutor::Impl {
public:
  Impl(Plan plan, const HostOptions &options)
      : plan(std::move(plan)), options(options), stop({&bell}) {}

  llvm::Error start();
  llvm::Expected<CallResult> run(const CallArgs &args);

  Plan plan;
  HostOptions options;
  uint64_t slotBytes = 0; ///< the FIFOs' slot (budgetedSlotBytes)
  Doorbell bell;
  LocalStop stop;
  std::unique_ptr<Engine> engine;
  Mapping connections;
  std::vector<std::unique_ptr<RankRunner>> ranks;
  llvm::SmallVector<Task, 16> tasks;
  std::optional<CallLayout> cachedLayout;
  uint64_t cachedCount = 0;
  bool broken = false;
  Timeline *timeline = nullptr;
  std::vector<std::vector<TbTrace>> traces; ///< per rank, per tb
  /// Direct steps' buffers and signals, when the plan has any.
  std::unique_ptr<DirectTable> direct;
};

uint64_t budgetedSlotBytes(const HostOptions &options, ir::Protocol protocol,
                           uint64_t connections) {
  uint64_t slot = options.slotBytes(protocol);
  if (options.slotBytesGiven || !options.fifoBudgetBytes || !connections)
    return slot;
  // 0 for a slot FifoShape refuses: the loop stops, and start() reports it.
  auto bytes = [&](uint64_t s) -> uint64_t {
    auto shape = FifoShape::of(protocol, s);
    if (!shape) {
      llvm::consumeError(shape.takeError());
      return 0;
    }
    return shape->totalBytes();
  };
  while (slot / 2 >= MinBudgetSlotBytes && (slot / 2) % 8 == 0 &&
         bytes(slot) > options.fifoBudgetBytes / connections)
    slot /= 2;
  return slot;
}

llvm::Error HostExecutor::Impl::start() {
  slotBytes = budgetedSlotBytes(options, plan.protocol, plan.connections.size());
  auto shape = FifoShape::of(plan.protocol, slotBytes);
  if (!shape)
    return shape.takeError();
  const size_t stride = shape->totalBytes();
  if (llvm::Error err = connections.map(stride * plan.connections.size()))
    return err;
  std::vector<ConnectionEnd> ends;
  for (size_t c = 0; c < plan.connections.size(); ++c) {
    const PlanConnection &info = plan.connections[c];
    ends.push_back(ConnectionEnd::bind(connections.at(c * stride), *shape, &bell, info.sender,
                                       info.receiver, info.channel));
  }
  RankOptions rankOptions;
  rankOptions.watchdog = std::chrono::milliseconds(watchdogFromEnv(options.watchdogMs));
  rankOptions.slotBytes = shape->slotBytes;
  if (!plan.stepPeers.empty())
    direct = std::make_unique<DirectTable>(plan);
  for (int32_t r = 0; r < plan.nranks; ++r) {
    auto runner = RankRunner::create(plan, r, ends, bell, stop, rankOptions, direct.get());
    if (!runner)
      return runner.takeError();
    ranks.push_back(std::move(*runner));
  }
  EngineOptions engineOptions = engineOptionsFromEnv();
  if (options.threads)
    engineOptions.threads = options.threads;
  auto created = Engine::create(bell, engineOptions);
  if (!created)
    return created.takeError();
  engine = std::move(*created);
  return llvm::Error::success();
}

llvm::Expected<CallResult> HostExecutor::Impl::run(const CallArgs &args) {
  if (broken)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "this executor was stopped by its watchdog; create a new one");
  if (!cachedLayout || cachedCount != args.count) {
    auto resolved = resolveCall(plan, args.count);
    if (!resolved)
      return resolved.takeError();
    cachedLayout = std::move(*resolved);
    cachedCount = args.count;
  }
  auto inplace = checkCallBuffers(plan, *cachedLayout, args);
  if (!inplace)
    return inplace.takeError();
  CallResult result;
  result.inplace = *inplace;

  tasks.clear();
  if (timeline)
    traces.assign(plan.nranks, {});
  // Every rank ran the last call to its end (engine->run returned): each
  // Simple connection starts again at slot 0.
  for (auto &rank : ranks)
    rank->rewindConnections();
  for (int32_t r = 0; r < plan.nranks; ++r) {
    if (llvm::Error err =
            ranks[r]->bind(*cachedLayout, args.type, args.op, args.input[r], args.output[r]))
      return err;
    if (timeline)
      traces[r].resize(plan.tbCount(r));
    ranks[r]->setTrace(timeline ? &traces[r] : nullptr);
    ranks[r]->appendTasks(tasks);
  }
  result.iterations = ranks.empty() ? 0 : ranks[0]->iterations();
  // Direct steps address every rank's buffers of this call.
  if (direct)
    for (int32_t r = 0; r < plan.nranks; ++r)
      direct->buffers[r] = {args.input[r], args.output[r], ranks[r]->scratch()};

  uint64_t work = 0;
  for (auto &rank : ranks)
    work += rank->work();
  Clock::time_point t0 = Clock::now();
  if (llvm::Error err = engine->run(tasks, {}, work))
    return err;
  Clock::time_point t1 = Clock::now();
  if (stop.stopping()) {
    broken = true;
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s: %s",
                                   plan.fileName.c_str(), stop.takeReport().c_str());
  }
  // Every rank ended the call: its signals are the next call's base.
  if (direct)
    direct->advance(plan, result.iterations);
  for (auto &rank : ranks)
    rank->finishAverage();
  result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (timeline)
    for (int32_t r = 0; r < plan.nranks; ++r)
      timeline->addCall(plan, r, args.type, t0, t1, traces[r]);
  return result;
}

//===----------------------------------------------------------------------===//
// HostExecutor
//===----------------------------------------------------------------------===//

HostExecutor::HostExecutor(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
HostExecutor::~HostExecutor() = default;

llvm::Expected<std::unique_ptr<HostExecutor>> HostExecutor::create(Plan plan,
                                                                   const HostOptions &options) {
  if (plan.planRank >= 0)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   plan.fileName + ": the plan holds rank " +
                                       std::to_string(plan.planRank) +
                                       "'s steps only; the host executor runs every rank");
  auto impl = std::make_unique<Impl>(std::move(plan), options);
  if (llvm::Error err = impl->start())
    return err;
  return std::unique_ptr<HostExecutor>(new HostExecutor(std::move(impl)));
}

llvm::Expected<CallResult> HostExecutor::run(const CallArgs &args) { return impl->run(args); }

const Plan &HostExecutor::plan() const { return impl->plan; }

uint64_t HostExecutor::sliceElems(DataType type) const {
  return impl->slotBytes / dataTypeSize(type);
}

unsigned HostExecutor::threads() const { return impl->engine->threads(); }

void HostExecutor::setTimeline(Timeline *timeline) { impl->timeline = timeline; }

} // namespace coll::interp
