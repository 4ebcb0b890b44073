//===- HostRank.cpp - One rank of a plan on the host ----------------------===//

#include "coll/interpreter/host/Rank.h"

#include "HostData.h"
#include "coll/interpreter/Protocol.h"
#include "coll/interpreter/ReduceOps.h"
#include "coll/interpreter/StepSemantics.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace coll::interp::host {

using ir::Protocol;

//===----------------------------------------------------------------------===//
// Connections and stopping
//===----------------------------------------------------------------------===//

llvm::Expected<FifoShape> FifoShape::of(Protocol protocol, uint64_t slotBytes) {
  if (slotBytes < 8 || slotBytes % 8 != 0 || slotBytes > (64u << 20))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "FIFO slot size %llu is not a multiple of 8 in [8, 64 MiB]",
                                   static_cast<unsigned long long>(slotBytes));
  FifoShape shape;
  shape.protocol = protocol;
  shape.slotBytes = slotBytes;
  if (protocol == Protocol::LL)
    shape.slotWords = llLines(slotBytes) * (LLLineBytes / 8);
  else if (protocol == Protocol::LL128)
    shape.slotWords = ll128Lines(slotBytes) * LL128LineWords;
  return shape;
}

uint64_t FifoShape::totalBytes() const {
  uint64_t fifo = protocol == Protocol::Simple ? FifoDepth * slotBytes : FifoDepth * slotWords * 8;
  uint64_t total = sizeof(ConnectionControl) + fifo;
  return (total + CacheLine - 1) / CacheLine * CacheLine;
}

ConnectionEnd ConnectionEnd::bind(void *memory, const FifoShape &shape, Doorbell *peerBell,
                                  int32_t sender, int32_t receiver, int32_t channel) {
  ConnectionEnd end;
  end.control = static_cast<ConnectionControl *>(memory);
  end.fifo = static_cast<std::byte *>(memory) + sizeof(ConnectionControl);
  end.shape = shape;
  end.peerBell = peerBell;
  end.sender = sender;
  end.receiver = receiver;
  end.channel = channel;
  return end;
}

void LocalStop::stall(std::string text) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (report.empty())
      report = std::move(text);
  }
  flag.store(1, std::memory_order_seq_cst);
  for (Doorbell *bell : bells)
    bell->ring();
}

std::string LocalStop::takeReport() {
  std::lock_guard<std::mutex> lock(mutex);
  std::string text = std::move(report);
  report.clear();
  flag.store(0, std::memory_order_relaxed);
  return text;
}

std::string describeTbPosition(const Plan &plan, int32_t globalTb, uint64_t iteration,
                               const PlanStep *step) {
  const PlanTb &ptb = plan.tbs[globalTb];
  std::string where =
      llvm::formatv("rank {0} tb {1} (channel {2})", ptb.rank, ptb.tb, ptb.channel);
  if (step)
    where += llvm::formatv(" step {0} ({1}) iteration {2}", step->irStep,
                           ir::stepTypeName(static_cast<ir::StepType>(step->type)), iteration)
                 .str();
  return where;
}

//===----------------------------------------------------------------------===//
// RankRunner state
//===----------------------------------------------------------------------===//

namespace {

/// 64-byte aligned, zero-initialised storage of `bytes` bytes.
struct AlignedBuffer {
  struct Free {
    void operator()(void *p) const { std::free(p); }
  };
  std::unique_ptr<void, Free> ptr;
  size_t bytes = 0;

  /// Makes room for `need` bytes; false when memory is exhausted.
  [[nodiscard]] bool reserve(size_t need) {
    if (need <= bytes && ptr)
      return true;
    size_t rounded = (std::max<size_t>(need, 1) + CacheLine - 1) / CacheLine * CacheLine;
    ptr.reset(std::aligned_alloc(CacheLine, rounded));
    bytes = ptr ? rounded : 0;
    if (ptr)
      std::memset(ptr.get(), 0, rounded);
    return ptr != nullptr;
  }
  template <class T> T *as() const { return static_cast<T *>(ptr.get()); }
};

} // namespace

struct TbState {
  RankRunner::Impl *owner = nullptr;
  int32_t globalTb = 0;
  ConnectionEnd send, recv;
  alignas(CacheLine) std::atomic<uint64_t> flag{0};
  alignas(CacheLine) std::atomic<uint64_t> iteration{0};
  std::atomic<const PlanStep *> step{nullptr};
  AlignedBuffer stageIn, stageOut;
  TbTrace *trace = nullptr;
  bool ok = false;
  /// ConnectionControl::call: what sendEnd stores with each slot, and what
  /// the Simple recvBegin saw last (in the line it reads anyway).
  uint64_t sendTag = 0, seenTag = 0;
};

class RankRunner::Impl {
public:
  using Runner = bool (*)(TbState &);

  Impl(const Plan &plan, int32_t rank, Doorbell &bell, StopControl &stop,
       const RankOptions &options)
      : plan(plan), rank(rank), bell(bell), stop(stop), options(options) {
    for (int32_t t = plan.rankTbBegin[rank]; t < plan.rankTbBegin[rank + 1]; ++t)
      steps += static_cast<uint64_t>(plan.tbs[t].nSteps);
  }

  const Plan &plan;
  const int32_t rank;
  uint64_t steps = 0; ///< this rank's steps in the plan
  Doorbell &bell;
  StopControl &stop;
  RankOptions options;
  std::vector<std::unique_ptr<TbState>> tbs;
  AlignedBuffer scratch;
  std::vector<TbTrace> *traces = nullptr;

  // The bound call.
  Runner runner = nullptr;
  const CallLayout *layout = nullptr;
  DataType type = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  void *input = nullptr, *output = nullptr;
  uint64_t iterations = 0, sliceElems = 0;

  TbState &localTb(int32_t globalTb) { return *tbs[globalTb - plan.rankTbBegin[rank]]; }
  uint64_t span() const { return static_cast<uint64_t>(std::max(plan.maxIrSteps, 1)); }
  uint64_t flagValue(uint64_t iteration, int32_t irStep) const {
    return iteration * span() + static_cast<uint64_t>(irStep) + 1;
  }
};

namespace {

/// The host's LL128 flag word: the slot's sequence number (+1, so that
/// never-written memory is not ready) in the low half, and the low half of
/// the sender's call tag (a hash of the call, RankRunner::tagSends) in the
/// high half, so that a receiver learns which call the data belong to
/// without reading the connection's control line (Simple's `call`). Slots
/// are reused every FifoDepth sequence numbers, so 32 bits tell a line of
/// this use of the slot from one of its last. Forwarded verbatim by the
/// network proxy; the CUDA kernel's lines (ll128Flag) never meet these.
constexpr uint64_t LL128SeqHalf = 0xffffffffu; ///< hostLl128Flag's sequence half
uint64_t hostLl128Flag(uint64_t seq, uint64_t tag) {
  return ((seq + 1) & LL128SeqHalf) | (tag << 32);
}

int64_t traceNow() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             Clock::now().time_since_epoch())
      .count();
}

//===----------------------------------------------------------------------===//
// Prims: the data movement of one tb, per element type, operator, protocol
//===----------------------------------------------------------------------===//

template <class T, class Op, Protocol Proto> class HostPrims {
public:
  explicit HostPrims(TbState &s)
      : s(s), ex(*s.owner), send_(s.send.valid() ? &s.send : nullptr),
        recv_(s.recv.valid() ? &s.recv : nullptr), stageIn(s.stageIn.as<T>()),
        stageOut(s.stageOut.as<T>()) {}

  ~HostPrims() {
    ringOwed();
    if (s.trace && open)
      s.trace->events[openIndex].end = traceNow();
  }

  void at(uint64_t iteration, const PlanStep &step) {
    s.iteration.store(iteration, std::memory_order_relaxed);
    s.step.store(&step, std::memory_order_relaxed);
    if (s.trace) {
      int64_t now = traceNow();
      if (open)
        s.trace->events[openIndex].end = now;
      openIndex = s.trace->events.size();
      s.trace->events.push_back(TraceEvent{now, now, iteration, &step, 0, 0});
      open = true;
    }
  }

  bool waitDependency(int32_t depTb, uint64_t iteration, int32_t irStep) {
    TbState &other = ex.localTb(depTb);
    uint64_t target = ex.flagValue(iteration, irStep);
    return await(
        [&] { return other.flag.load(std::memory_order_acquire) >= target; },
        [&] {
          uint64_t v = other.flag.load(std::memory_order_relaxed);
          return llvm::formatv(
                     "waiting for tb {0} step {1} of iteration {2}; that tb has published {3}",
                     ex.plan.tbs[depTb].tb, irStep, iteration,
                     v == 0 ? std::string("nothing yet")
                            : llvm::formatv("step {0} of iteration {1}", (v - 1) % ex.span(),
                                            (v - 1) / ex.span())
                                  .str())
              .str();
        },
        3);
  }

  void publish(uint64_t iteration, int32_t irStep) {
    s.flag.store(ex.flagValue(iteration, irStep), std::memory_order_release);
    owe(ex.bell);
  }

  bool send(const T *src, uint64_t n) {
    traceElems(n);
    T *out;
    if (!sendBegin(out))
      return false;
    data::copy(out, src, n);
    sendEnd(n);
    return true;
  }

  bool recv(T *dst, uint64_t n) {
    const T *in;
    if (!recvBegin(in, n))
      return false;
    data::move(dst, in, n);
    recvEnd(n);
    return true;
  }

  bool recvCopySend(T *dst, uint64_t n) {
    const T *in;
    T *out;
    if (!recvBegin(in, n) || !sendBegin(out))
      return false;
    data::copy2(dst, out, in, n);
    sendEnd(n);
    recvEnd(n);
    return true;
  }

  bool recvReduceSend(const T *src, uint64_t n) {
    const T *in;
    T *out;
    if (!recvBegin(in, n) || !sendBegin(out))
      return false;
    data::combine(out, in, src, n, op);
    sendEnd(n);
    recvEnd(n);
    return true;
  }

  bool recvReduceCopy(const T *src, T *dst, uint64_t n) {
    const T *in;
    if (!recvBegin(in, n))
      return false;
    data::combine(dst, in, src, n, op);
    recvEnd(n);
    return true;
  }

  bool recvReduceCopySend(const T *src, T *dst, uint64_t n) {
    const T *in;
    T *out;
    if (!recvBegin(in, n) || !sendBegin(out))
      return false;
    data::combine2(dst, out, in, src, n, op);
    sendEnd(n);
    recvEnd(n);
    return true;
  }

  void copy(const T *src, T *dst, uint64_t n) {
    traceElems(n);
    data::move(dst, src, n);
  }

  void reduce(T *dst, const T *const *srcs, int nsrc, uint64_t n) {
    traceElems(n);
    data::reduceInto(dst, srcs, nsrc, n, op);
  }

private:
  /// Doorbells this tb has changed state for and not rung yet (host/Sync.h).
  void owe(Doorbell &bell) {
    for (unsigned i = 0; i < nOwed; ++i)
      if (owed[i] == &bell)
        return;
    if (nOwed == std::size(owed))
      ringOwed();
    owed[nOwed++] = &bell;
  }
  void ringOwed() {
    if (nOwed == 0)
      return;
    Doorbell::fence();
    for (unsigned i = 0; i < nOwed; ++i)
      owed[i]->ringFenced();
    nOwed = 0;
  }

  void traceElems(uint64_t n) {
    if (s.trace && open)
      s.trace->events[openIndex].elems += n;
  }

  /// Waits for `ready`; on a stall, reports and returns false. `kind` is the
  /// trace event kind of the wait.
  template <class Ready, class Describe>
  bool await(Ready &&ready, Describe &&describe, uint8_t kind) {
    if (ready())
      return true;
    ringOwed(); // before a partner could sleep waiting for this tb
    int64_t begin = s.trace ? traceNow() : 0;
    WaitResult r = waitUntil(ready, [&] { return ex.stop.stopping(); }, ex.options.watchdog);
    if (s.trace)
      s.trace->events.push_back(TraceEvent{begin, traceNow(),
                                           s.iteration.load(std::memory_order_relaxed),
                                           s.step.load(std::memory_order_relaxed), kind, 0});
    if (r == WaitResult::Ready)
      return true;
    if (r == WaitResult::TimedOut)
      ex.stop.stall(llvm::formatv("watchdog: no progress for {0} ms at {1}: {2}",
                                  ex.options.watchdog.count(),
                                  describeTbPosition(ex.plan, s.globalTb,
                                                     s.iteration.load(std::memory_order_relaxed),
                                                     s.step.load(std::memory_order_relaxed)),
                                  describe())
                        .str());
    return false;
  }

  static std::string connectionCounters(const ConnectionEnd &c) {
    return llvm::formatv("connection {0}->{1} channel {2}: sender filled {3} slots, "
                         "receiver freed {4}",
                         c.sender, c.receiver, c.channel,
                         c.control->tail.load(std::memory_order_relaxed),
                         c.control->head.load(std::memory_order_relaxed))
        .str();
  }

  std::atomic<uint64_t> *words(const ConnectionEnd &c, uint64_t seq) const {
    return reinterpret_cast<std::atomic<uint64_t> *>(c.fifo) + (seq % FifoDepth) * c.shape.slotWords;
  }

  bool sendBegin(T *&out) {
    ConnectionEnd &c = *send_;
    uint64_t seq = c.control->tail.load(std::memory_order_relaxed); // only this tb writes it
    if (!await([&] { return c.slotFree(seq); },
               [&] {
                 return "waiting for a free slot to send on (the FIFO of " +
                        std::to_string(FifoDepth) + " slots is full); " + connectionCounters(c);
               },
               2))
      return false;
    out = Proto == Protocol::Simple
              ? reinterpret_cast<T *>(c.fifo + (seq % FifoDepth) * c.shape.slotBytes)
              : stageOut;
    return true;
  }

  void sendEnd(uint64_t n) {
    ConnectionEnd &c = *send_;
    uint64_t seq = c.control->tail.load(std::memory_order_relaxed);
    uint64_t bytes = n * sizeof(T);
    if constexpr (Proto == Protocol::LL)
      data::llStore(words(c, seq), stageOut, bytes, llFlag(seq));
    else if constexpr (Proto == Protocol::LL128)
      data::ll128Store(words(c, seq), stageOut, bytes, hostLl128Flag(seq, s.sendTag));
    // Release in every protocol: a network proxy reads the slot after `tail`.
    c.control->sizes[seq % FifoDepth].store(static_cast<uint32_t>(bytes), std::memory_order_relaxed);
    c.control->call.store(s.sendTag, std::memory_order_relaxed);
    c.control->tail.store(seq + 1, std::memory_order_release);
    owe(*c.peerBell);
  }

  bool recvBegin(const T *&in, uint64_t n) {
    traceElems(n);
    ConnectionEnd &c = *recv_;
    uint64_t seq = c.control->head.load(std::memory_order_relaxed); // only this tb writes it
    uint64_t bytes = n * sizeof(T);
    auto noData = [&](const std::string &what) {
      return "waiting for data to receive (" + what + "); " + connectionCounters(c);
    };
    if constexpr (Proto == Protocol::Simple) {
      if (!await([&] { return c.control->tail.load(std::memory_order_acquire) > seq; },
                 [&] { return noData("slot " + std::to_string(seq)); }, 1))
        return false;
      s.seenTag = c.control->call.load(std::memory_order_relaxed);
      in = reinterpret_cast<const T *>(c.fifo + (seq % FifoDepth) * c.shape.slotBytes);
    } else if constexpr (Proto == Protocol::LL) {
      std::atomic<uint64_t> *line = words(c, seq);
      auto *to = reinterpret_cast<unsigned char *>(stageIn);
      const uint32_t flag = llFlag(seq);
      for (uint64_t l = 0, lines = llLines(bytes); l < lines;) {
        // Take every line that is already there, then wait for the next.
        l = data::llLoadReady(line, to, l, lines, flag);
        if (l == lines)
          break;
        std::atomic<uint64_t> *w = line + 2 * l;
        if (!await(
                [&] {
                  return llWordReady(w[0].load(std::memory_order_relaxed), flag) &&
                         llWordReady(w[1].load(std::memory_order_relaxed), flag);
                },
                [&] {
                  return noData(llvm::formatv("LL line {0} of slot {1}: flags {2:x} and {3:x}, "
                                              "expected {4:x}",
                                              l, seq,
                                              uint32_t(w[0].load(std::memory_order_relaxed) >> 32),
                                              uint32_t(w[1].load(std::memory_order_relaxed) >> 32),
                                              flag)
                                    .str());
                },
                1))
          return false;
      }
      in = stageIn;
    } else {
      std::atomic<uint64_t> *line = words(c, seq);
      auto *to = reinterpret_cast<unsigned char *>(stageIn);
      const uint64_t flag = hostLl128Flag(seq, 0), mask = LL128SeqHalf;
      for (uint64_t l = 0, lines = ll128Lines(bytes); l < lines;) {
        l = data::ll128LoadReady(line, to, l, lines, flag, mask);
        if (l == lines)
          break;
        std::atomic<uint64_t> *f = line + l * LL128LineWords + LL128FlagWord;
        if (!await([&] { return (f->load(std::memory_order_acquire) & mask) == flag; },
                   [&] {
                     return noData(llvm::formatv("LL128 line {0} of slot {1}: flag {2}, "
                                                 "expected {3}",
                                                 l, seq, f->load(std::memory_order_relaxed),
                                                 flag)
                                       .str());
                   },
                   1))
          return false;
      }
      // The sender's call, as Simple's `call` tells it, from the flag's
      // other half (the line is still in this core's cache).
      s.seenTag =
          (s.sendTag & ~LL128SeqHalf) | (line[LL128FlagWord].load(std::memory_order_relaxed) >> 32);
      in = stageIn;
    }
    return true;
  }

  void recvEnd(uint64_t) {
    ConnectionEnd &c = *recv_;
    c.control->head.store(c.control->head.load(std::memory_order_relaxed) + 1,
                          std::memory_order_release);
    owe(*c.peerBell);
  }

  TbState &s;
  RankRunner::Impl &ex;
  ConnectionEnd *send_ = nullptr;
  ConnectionEnd *recv_ = nullptr;
  T *stageIn = nullptr;
  T *stageOut = nullptr;
  Op op;
  bool open = false;
  size_t openIndex = 0;
  Doorbell *owed[4];
  unsigned nOwed = 0;
};

template <class T, class Op, Protocol Proto> bool runTb(TbState &s) {
  RankRunner::Impl &ex = *s.owner;
  const PlanTb &ptb = ex.plan.tbs[s.globalTb];
  RankBuffers<T> buffers{static_cast<T *>(ex.input), static_cast<T *>(ex.output),
                         ex.scratch.as<T>()};
  HostPrims<T, Op, Proto> prims(s);
  return runThreadBlock<T>(prims, ex.plan.steps.data() + ptb.stepBegin, ptb.nSteps,
                           ex.layout->slices.data(), buffers, ex.iterations, ex.sliceElems);
}

template <class T, class Op> RankRunner::Impl::Runner pickRunner(Protocol proto) {
  switch (proto) {
  case Protocol::Simple: return &runTb<T, Op, Protocol::Simple>;
  case Protocol::LL: return &runTb<T, Op, Protocol::LL>;
  case Protocol::LL128: return &runTb<T, Op, Protocol::LL128>;
  }
  return nullptr;
}

RankRunner::Impl::Runner pickRunner(DataType type, ReduceOp op, Protocol proto) {
  return visitDataType(type, [&](auto tag) -> RankRunner::Impl::Runner {
    using T = typename decltype(tag)::type;
    switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return pickRunner<T, OpSum<T>>(proto);
    case ReduceOp::Prod: return pickRunner<T, OpProd<T>>(proto);
    case ReduceOp::Min: return pickRunner<T, OpMin<T>>(proto);
    case ReduceOp::Max: return pickRunner<T, OpMax<T>>(proto);
    }
    return nullptr;
  });
}

void runTask(void *arg) {
  TbState &s = *static_cast<TbState *>(arg);
  s.ok = s.owner->runner(s);
}

} // namespace

//===----------------------------------------------------------------------===//
// RankRunner
//===----------------------------------------------------------------------===//

llvm::Expected<std::unique_ptr<RankRunner>>
RankRunner::create(const Plan &plan, int32_t rank, llvm::ArrayRef<ConnectionEnd> ends,
                   Doorbell &bell, StopControl &stop, const RankOptions &options) {
  auto impl = std::make_unique<Impl>(plan, rank, bell, stop, options);
  auto shape = FifoShape::of(plan.protocol, options.slotBytes);
  if (!shape)
    return shape.takeError();
  // Staging holds whole lines, so that framing never handles partial ones.
  const uint64_t stageBytes = plan.protocol == Protocol::LL128
                                  ? ll128Lines(shape->slotBytes) * LL128DataBytesPerLine
                                  : llLines(shape->slotBytes) * LLDataBytesPerLine;
  for (int32_t t = plan.rankTbBegin[rank]; t < plan.rankTbBegin[rank + 1]; ++t) {
    auto state = std::make_unique<TbState>();
    state->owner = impl.get();
    state->globalTb = t;
    const PlanTb &ptb = plan.tbs[t];
    if (ptb.sendConn >= 0) {
      if (static_cast<size_t>(ptb.sendConn) >= ends.size() || !ends[ptb.sendConn].valid())
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "rank %d tb %d: no memory for its send connection", rank,
                                       ptb.tb);
      state->send = ends[ptb.sendConn];
    }
    if (ptb.recvConn >= 0) {
      if (static_cast<size_t>(ptb.recvConn) >= ends.size() || !ends[ptb.recvConn].valid())
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "rank %d tb %d: no memory for its receive connection",
                                       rank, ptb.tb);
      state->recv = ends[ptb.recvConn];
    }
    if (plan.protocol != Protocol::Simple &&
        (!state->stageIn.reserve(stageBytes) || !state->stageOut.reserve(stageBytes)))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "out of memory allocating staging buffers");
    impl->tbs.push_back(std::move(state));
  }
  return std::unique_ptr<RankRunner>(new RankRunner(std::move(impl)));
}

RankRunner::RankRunner(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
RankRunner::~RankRunner() = default;

llvm::Error RankRunner::bind(const CallLayout &layout, DataType type, ReduceOp op, void *input,
                             void *output) {
  Impl &i = *impl;
  const uint64_t es = dataTypeSize(type);
  if (!i.scratch.reserve(layout.scratchElems[i.rank] * es))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "out of memory allocating scratch buffers");
  i.layout = &layout;
  i.type = type;
  i.op = op;
  i.input = input;
  i.output = output;
  i.runner = pickRunner(type, op, i.plan.protocol);
  i.sliceElems = i.options.slotBytes / es;
  i.iterations = iterationCount(layout, i.sliceElems);
  for (auto &tb : i.tbs) {
    tb->flag.store(0, std::memory_order_relaxed);
    tb->ok = false;
  }
  return llvm::Error::success();
}

void RankRunner::appendTasks(llvm::SmallVectorImpl<Task> &tasks) {
  Impl &i = *impl;
  if (i.iterations == 0)
    return;
  for (size_t t = 0; t < i.tbs.size(); ++t) {
    TbState &s = *i.tbs[t];
    s.trace = i.traces && t < i.traces->size() ? &(*i.traces)[t] : nullptr;
    tasks.push_back(Task{&runTask, &s});
  }
}

void RankRunner::tagSends(uint64_t tag) const {
  for (const auto &tb : impl->tbs) {
    tb->sendTag = tag;
    tb->seenTag = 0;
  }
}

llvm::SmallVector<std::pair<int32_t, uint64_t>, 4> RankRunner::receivedTags() const {
  llvm::SmallVector<std::pair<int32_t, uint64_t>, 4> tags;
  for (const auto &tb : impl->tbs)
    if (tb->recv.valid() && tb->seenTag)
      tags.emplace_back(tb->recv.sender, tb->seenTag);
  return tags;
}

bool RankRunner::completed() const {
  if (impl->iterations == 0)
    return true;
  return std::all_of(impl->tbs.begin(), impl->tbs.end(),
                     [](const std::unique_ptr<TbState> &s) { return s->ok; });
}

void RankRunner::finishAverage() const {
  const Impl &i = *impl;
  ir::CollectiveInfo info = ir::collectiveInfo(i.plan.collective);
  if (i.op != ReduceOp::Avg || !info.reduces || !i.layout)
    return;
  if (i.plan.collective == ir::Collective::Reduce && i.rank != i.plan.root)
    return;
  visitDataType(i.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *out = static_cast<T *>(i.output);
    for (uint64_t e = 0; e < i.layout->outputElems; ++e)
      out[e] = Arith<T>::divide(out[e], i.plan.nranks);
  });
}

uint64_t RankRunner::iterations() const { return impl->iterations; }

uint64_t RankRunner::work() const {
  const Impl &i = *impl;
  if (!i.layout || i.iterations == 0)
    return 0;
  return i.steps * i.layout->maxChunkElems * dataTypeSize(i.type);
}

uint64_t RankRunner::sliceElems(DataType type) const {
  return impl->options.slotBytes / dataTypeSize(type);
}

void RankRunner::setTrace(std::vector<TbTrace> *traces) { impl->traces = traces; }

} // namespace coll::interp::host
