//===- HostExecutor.cpp - The host backend ---------------------------------===//
//
// Memory ordering on the host, per protocol (see Protocol.h for the framing):
//  - Simple: the sender writes the slot with plain stores, then stores
//    `tail` with release; the receiver acquires `tail` before reading.
//  - LL: every 8-byte word carries its own flag and is stored and loaded as
//    one relaxed atomic, so a word whose flag matches holds its data; `tail`
//    is kept for the watchdog's report only.
//  - LL128: data words are stored relaxed, then the line's flag word with
//    release; the receiver acquires the flag word before reading the data.
//  In every protocol the receiver frees a slot by storing `head` with
//  release, and the sender acquires `head` before re-using the slot.
// Dependencies: a tb stores its flag (iteration, step) with release after a
// `hasdep` step; waiters acquire it.
//
//===----------------------------------------------------------------------===//

#include "coll/interpreter/HostExecutor.h"

#include "HostSync.h"
#include "coll/interpreter/Protocol.h"
#include "coll/interpreter/ReduceOps.h"
#include "coll/interpreter/StepSemantics.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace coll::interp {

using host::Bell;
using ir::Protocol;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t CacheLine = 64;

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

/// The shared state of one connection.
struct Connection {
  alignas(CacheLine) std::atomic<uint64_t> tail{0}; ///< slots the sender filled
  alignas(CacheLine) std::atomic<uint64_t> head{0}; ///< slots the receiver freed
  Bell dataBell;  ///< rung by the sender after filling a slot
  Bell spaceBell; ///< rung by the receiver after freeing one
  uint64_t slotBytes = 0; ///< data bytes per slot
  uint64_t slotWords = 0; ///< LL/LL128: 8-byte words per slot
  AlignedBuffer simple;   ///< Simple: FifoDepth * slotBytes
  std::unique_ptr<std::atomic<uint64_t>[]> words; ///< LL/LL128: FifoDepth * slotWords
  PlanConnection info{};
};

struct TbFlag {
  alignas(CacheLine) std::atomic<uint64_t> value{0};
  Bell bell;
};

/// Untyped buffers of one rank for the current call.
struct RankPointers {
  void *input = nullptr, *output = nullptr, *scratch = nullptr;
};

} // namespace

class HostExecutor::Impl {
public:
  using Runner = bool (*)(Impl &, int32_t tb);

  Impl(Plan plan, const HostOptions &options);
  ~Impl();

  llvm::Error start();
  llvm::Expected<CallResult> run(const CallArgs &args);
  uint64_t slotBytes() const;

  /// Records the first stall report and wakes every waiter so the call winds
  /// down.
  void stall(std::string report);
  bool stopping() const { return aborting.load(std::memory_order_relaxed); }
  std::string describeTb(int32_t tb, uint64_t iteration, const PlanStep *step) const;

  Plan plan;
  HostOptions options;
  std::chrono::milliseconds watchdog{30000};
  std::vector<std::unique_ptr<Connection>> connections;
  std::vector<std::unique_ptr<TbFlag>> flags; ///< per global tb

  /// Per-tb staging for LL/LL128 (data gathered from or for the line
  /// framing) and the watchdog's view of where the tb is.
  struct TbState {
    AlignedBuffer stageIn, stageOut;
    std::atomic<uint64_t> iteration{0};
    std::atomic<const PlanStep *> step{nullptr};
  };
  std::vector<std::unique_ptr<TbState>> tbState;

  // The current call, written by run() before it bumps `generation`.
  Runner runner = nullptr;
  const CallLayout *layout = nullptr;
  std::vector<RankPointers> ranks;
  uint64_t iterations = 0, sliceElems = 0;

private:
  void workerMain(int32_t tb);
  void applyAverage(const CallArgs &args) const;

  std::optional<CallLayout> cachedLayout;
  uint64_t cachedCount = 0;
  std::vector<AlignedBuffer> scratch; ///< per rank

  std::vector<std::thread> workers;
  std::atomic<uint64_t> generation{0};
  Bell startBell;
  std::atomic<int64_t> remaining{0};
  Bell doneBell;
  std::atomic<bool> shutdown{false};

  std::atomic<bool> aborting{false};
  std::mutex reportMutex;
  std::string report;
  bool broken = false;
};

namespace {

//===----------------------------------------------------------------------===//
// Prims: the data movement of one tb, per element type, operator, protocol
//===----------------------------------------------------------------------===//

template <class T, class Op, Protocol Proto> class HostPrims {
public:
  HostPrims(HostExecutor::Impl &ex, int32_t tb)
      : ex(ex), tb(tb), self(*ex.flags[tb]), state(*ex.tbState[tb]) {
    const PlanTb &ptb = ex.plan.tbs[tb];
    sendConn = ptb.sendConn >= 0 ? ex.connections[ptb.sendConn].get() : nullptr;
    recvConn = ptb.recvConn >= 0 ? ex.connections[ptb.recvConn].get() : nullptr;
    stageIn = state.stageIn.as<T>();
    stageOut = state.stageOut.as<T>();
  }

  void at(uint64_t iteration, const PlanStep &step) {
    state.iteration.store(iteration, std::memory_order_relaxed);
    state.step.store(&step, std::memory_order_relaxed);
  }

  bool waitDependency(int32_t depTb, uint64_t iteration, int32_t irStep) {
    TbFlag &flag = *ex.flags[depTb];
    uint64_t target = flagValue(iteration, irStep);
    return await(flag.bell, [&] { return flag.value.load(std::memory_order_acquire) >= target; },
                 [&] {
                   uint64_t v = flag.value.load(std::memory_order_relaxed);
                   return llvm::formatv(
                              "waiting for tb {0} step {1} of iteration {2}; that tb has "
                              "published {3}",
                              ex.plan.tbs[depTb].tb, irStep, iteration,
                              v == 0 ? std::string("nothing yet")
                                     : llvm::formatv("step {0} of iteration {1}",
                                                     (v - 1) % span(), (v - 1) / span())
                                           .str())
                       .str();
                 });
  }

  void publish(uint64_t iteration, int32_t irStep) {
    self.value.store(flagValue(iteration, irStep), std::memory_order_release);
    self.bell.ring();
  }

  bool send(const T *src, uint64_t n) {
    T *out;
    if (!sendBegin(out))
      return false;
    std::memcpy(out, src, n * sizeof(T));
    sendEnd(n);
    return true;
  }

  bool recv(T *dst, uint64_t n) {
    const T *in;
    if (!recvBegin(in, n))
      return false;
    std::memmove(dst, in, n * sizeof(T));
    recvEnd();
    return true;
  }

  bool recvCopySend(T *dst, uint64_t n) {
    const T *in;
    T *out;
    if (!recvBegin(in, n) || !sendBegin(out))
      return false;
    std::memmove(dst, in, n * sizeof(T));
    std::memcpy(out, in, n * sizeof(T));
    sendEnd(n);
    recvEnd();
    return true;
  }

  bool recvReduceSend(const T *src, uint64_t n) {
    const T *in;
    T *out;
    if (!recvBegin(in, n) || !sendBegin(out))
      return false;
    for (uint64_t i = 0; i < n; ++i)
      out[i] = op(in[i], src[i]);
    sendEnd(n);
    recvEnd();
    return true;
  }

  bool recvReduceCopy(const T *src, T *dst, uint64_t n) {
    const T *in;
    if (!recvBegin(in, n))
      return false;
    for (uint64_t i = 0; i < n; ++i)
      dst[i] = op(in[i], src[i]);
    recvEnd();
    return true;
  }

  bool recvReduceCopySend(const T *src, T *dst, uint64_t n) {
    const T *in;
    T *out;
    if (!recvBegin(in, n) || !sendBegin(out))
      return false;
    for (uint64_t i = 0; i < n; ++i) {
      T v = op(in[i], src[i]);
      dst[i] = v;
      out[i] = v;
    }
    sendEnd(n);
    recvEnd();
    return true;
  }

  void copy(const T *src, T *dst, uint64_t n) { std::memmove(dst, src, n * sizeof(T)); }

  void reduce(T *dst, const T *const *srcs, int nsrc, uint64_t n) {
    // Accumulate in registers, block by block, so that a source aliasing the
    // destination is read before the destination is written, as on the GPU.
    constexpr uint64_t Block = 256;
    T acc[Block];
    for (uint64_t base = 0; base < n; base += Block) {
      uint64_t len = std::min(Block, n - base);
      std::memcpy(acc, dst + base, len * sizeof(T));
      for (int r = 0; r < nsrc; ++r)
        for (uint64_t i = 0; i < len; ++i)
          acc[i] = op(srcs[r][base + i], acc[i]);
      std::memcpy(dst + base, acc, len * sizeof(T));
    }
  }

private:
  uint64_t span() const { return static_cast<uint64_t>(std::max(ex.plan.maxIrSteps, 1)); }
  uint64_t flagValue(uint64_t iteration, int32_t irStep) const {
    return iteration * span() + static_cast<uint64_t>(irStep) + 1;
  }

  /// Waits on `bell` for `ready`; on a stall, reports and returns false.
  template <class Ready, class Describe>
  bool await(Bell &bell, Ready &&ready, Describe &&describe) {
    Bell::Result r = bell.wait(ready, [&] { return ex.stopping(); }, ex.watchdog);
    if (r == Bell::Result::Ready)
      return true;
    if (r == Bell::Result::TimedOut)
      ex.stall(llvm::formatv("watchdog: no progress for {0} ms at {1}: {2}",
                             ex.watchdog.count(),
                             ex.describeTb(tb, state.iteration.load(std::memory_order_relaxed),
                                           state.step.load(std::memory_order_relaxed)),
                             describe())
                   .str());
    return false;
  }

  std::string connectionCounters(const Connection &c) const {
    return llvm::formatv("connection {0}->{1} channel {2}: sender filled {3} slots, "
                         "receiver freed {4}",
                         c.info.sender, c.info.receiver, c.info.channel,
                         c.tail.load(std::memory_order_relaxed),
                         c.head.load(std::memory_order_relaxed))
        .str();
  }

  bool sendBegin(T *&out) {
    Connection &c = *sendConn;
    uint64_t seq = c.tail.load(std::memory_order_relaxed); // only this tb writes it
    if (!await(c.spaceBell,
               [&] { return seq - c.head.load(std::memory_order_acquire) < FifoDepth; },
               [&] {
                 return "waiting for a free slot to send on (the FIFO of " +
                        std::to_string(FifoDepth) + " slots is full); " + connectionCounters(c);
               }))
      return false;
    out = Proto == Protocol::Simple
              ? reinterpret_cast<T *>(c.simple.as<std::byte>() + (seq % FifoDepth) * c.slotBytes)
              : stageOut;
    return true;
  }

  void sendEnd(uint64_t n) {
    Connection &c = *sendConn;
    uint64_t seq = c.tail.load(std::memory_order_relaxed);
    uint64_t bytes = n * sizeof(T);
    if constexpr (Proto == Protocol::Simple) {
      c.tail.store(seq + 1, std::memory_order_release);
    } else if constexpr (Proto == Protocol::LL) {
      std::atomic<uint64_t> *line = c.words.get() + (seq % FifoDepth) * c.slotWords;
      const auto *data = reinterpret_cast<const unsigned char *>(stageOut);
      uint32_t flag = llFlag(seq);
      // The staging buffer holds whole lines: padding past `bytes` is sent
      // as is and ignored by the receiver.
      for (uint64_t l = 0, lines = llLines(bytes); l < lines; ++l, line += 2) {
        uint32_t half[2];
        std::memcpy(half, data + l * LLDataBytesPerLine, sizeof half);
        line[0].store(llWord(half[0], flag), std::memory_order_relaxed);
        line[1].store(llWord(half[1], flag), std::memory_order_relaxed);
      }
      c.tail.store(seq + 1, std::memory_order_relaxed);
    } else {
      std::atomic<uint64_t> *line = c.words.get() + (seq % FifoDepth) * c.slotWords;
      const auto *data = reinterpret_cast<const unsigned char *>(stageOut);
      uint64_t flag = ll128Flag(seq);
      for (uint64_t l = 0, lines = ll128Lines(bytes); l < lines; ++l, line += LL128LineWords) {
        const unsigned char *from = data + l * LL128DataBytesPerLine;
        for (uint64_t w = 0; w < LL128DataWords; ++w) {
          uint64_t word;
          std::memcpy(&word, from + w * 8, 8);
          line[w].store(word, std::memory_order_relaxed);
        }
        line[LL128FlagWord].store(flag, std::memory_order_release);
      }
      c.tail.store(seq + 1, std::memory_order_relaxed);
    }
    c.dataBell.ring();
  }

  bool recvBegin(const T *&in, uint64_t n) {
    Connection &c = *recvConn;
    uint64_t seq = c.head.load(std::memory_order_relaxed); // only this tb writes it
    uint64_t bytes = n * sizeof(T);
    auto noData = [&](const std::string &what) {
      return "waiting for data to receive (" + what + "); " + connectionCounters(c);
    };
    if constexpr (Proto == Protocol::Simple) {
      if (!await(c.dataBell, [&] { return c.tail.load(std::memory_order_acquire) > seq; },
                 [&] { return noData("slot " + std::to_string(seq)); }))
        return false;
      in = reinterpret_cast<const T *>(c.simple.as<std::byte>() +
                                       (seq % FifoDepth) * c.slotBytes);
    } else if constexpr (Proto == Protocol::LL) {
      std::atomic<uint64_t> *line = c.words.get() + (seq % FifoDepth) * c.slotWords;
      auto *data = reinterpret_cast<unsigned char *>(stageIn);
      uint32_t flag = llFlag(seq);
      for (uint64_t l = 0, lines = llLines(bytes); l < lines; ++l, line += 2) {
        uint64_t w0 = 0, w1 = 0;
        auto ready = [&] {
          w0 = line[0].load(std::memory_order_relaxed);
          w1 = line[1].load(std::memory_order_relaxed);
          return llWordReady(w0, flag) && llWordReady(w1, flag);
        };
        if (!ready() &&
            !await(c.dataBell, ready, [&] {
              return noData(llvm::formatv("LL line {0} of slot {1}: flags {2:x} and {3:x}, "
                                          "expected {4:x}",
                                          l, seq, uint32_t(w0 >> 32), uint32_t(w1 >> 32), flag)
                                .str());
            }))
          return false;
        uint32_t half[2] = {llWordData(w0), llWordData(w1)};
        std::memcpy(data + l * LLDataBytesPerLine, half, sizeof half);
      }
      in = stageIn;
    } else {
      std::atomic<uint64_t> *line = c.words.get() + (seq % FifoDepth) * c.slotWords;
      auto *data = reinterpret_cast<unsigned char *>(stageIn);
      uint64_t flag = ll128Flag(seq);
      for (uint64_t l = 0, lines = ll128Lines(bytes); l < lines; ++l, line += LL128LineWords) {
        auto ready = [&] {
          return line[LL128FlagWord].load(std::memory_order_acquire) == flag;
        };
        if (!ready() && !await(c.dataBell, ready, [&] {
              return noData(llvm::formatv("LL128 line {0} of slot {1}: flag {2}, expected {3}",
                                          l, seq,
                                          line[LL128FlagWord].load(std::memory_order_relaxed),
                                          flag)
                                .str());
            }))
          return false;
        unsigned char *to = data + l * LL128DataBytesPerLine;
        for (uint64_t w = 0; w < LL128DataWords; ++w) {
          uint64_t word = line[w].load(std::memory_order_relaxed);
          std::memcpy(to + w * 8, &word, 8);
        }
      }
      in = stageIn;
    }
    return true;
  }

  void recvEnd() {
    Connection &c = *recvConn;
    c.head.store(c.head.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    c.spaceBell.ring();
  }

  HostExecutor::Impl &ex;
  int32_t tb;
  TbFlag &self;
  HostExecutor::Impl::TbState &state;
  Connection *sendConn = nullptr;
  Connection *recvConn = nullptr;
  T *stageIn = nullptr;
  T *stageOut = nullptr;
  Op op;
};

template <class T, class Op, Protocol Proto>
bool runTb(HostExecutor::Impl &ex, int32_t tb) {
  const PlanTb &ptb = ex.plan.tbs[tb];
  const RankPointers &p = ex.ranks[ptb.rank];
  RankBuffers<T> buffers{static_cast<T *>(p.input), static_cast<T *>(p.output),
                         static_cast<T *>(p.scratch)};
  HostPrims<T, Op, Proto> prims(ex, tb);
  return runThreadBlock<T>(prims, ex.plan.steps.data() + ptb.stepBegin, ptb.nSteps,
                           ex.layout->slices.data(), buffers, ex.iterations, ex.sliceElems);
}

template <class T, class Op> HostExecutor::Impl::Runner pickRunner(Protocol proto) {
  switch (proto) {
  case Protocol::Simple: return &runTb<T, Op, Protocol::Simple>;
  case Protocol::LL: return &runTb<T, Op, Protocol::LL>;
  case Protocol::LL128: return &runTb<T, Op, Protocol::LL128>;
  }
  return nullptr;
}

HostExecutor::Impl::Runner pickRunner(DataType type, ReduceOp op, Protocol proto) {
  return visitDataType(type, [&](auto tag) -> HostExecutor::Impl::Runner {
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

} // namespace

llvm::Expected<bool> checkCallBuffers(const Plan &plan, const CallLayout &call,
                                      const CallArgs &args) {
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

//===----------------------------------------------------------------------===//
// Impl
//===----------------------------------------------------------------------===//

HostExecutor::Impl::Impl(Plan plan, const HostOptions &options)
    : plan(std::move(plan)), options(options) {
  uint32_t ms = options.watchdogMs;
  if (ms == 0) {
    ms = 30000;
    if (const char *env = std::getenv("COLL_WATCHDOG_MS")) {
      char *end = nullptr;
      unsigned long v = std::strtoul(env, &end, 10);
      if (end != env && *end == '\0' && v > 0 && v < (1ul << 31))
        ms = static_cast<uint32_t>(v);
    }
  }
  watchdog = std::chrono::milliseconds(ms);
}

HostExecutor::Impl::~Impl() {
  shutdown.store(true, std::memory_order_release);
  startBell.ring();
  for (std::thread &t : workers)
    t.join();
}

uint64_t HostExecutor::Impl::slotBytes() const {
  switch (plan.protocol) {
  case Protocol::Simple: return options.simpleSlotBytes;
  case Protocol::LL: return options.llSlotBytes;
  case Protocol::LL128: return options.ll128SlotBytes;
  }
  return options.simpleSlotBytes;
}

llvm::Error HostExecutor::Impl::start() {
  uint64_t bytes = slotBytes();
  if (bytes < 8 || bytes % 8 != 0 || bytes > (64u << 20))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "FIFO slot size %llu is not a multiple of 8 in [8, 64 MiB]",
                                   static_cast<unsigned long long>(bytes));
  uint64_t slotWords = 0;
  if (plan.protocol == Protocol::LL)
    slotWords = llLines(bytes) * (LLLineBytes / 8);
  else if (plan.protocol == Protocol::LL128)
    slotWords = ll128Lines(bytes) * LL128LineWords;
  auto outOfMemory = [] {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "out of memory allocating connection FIFOs");
  };

  for (const PlanConnection &info : plan.connections) {
    auto c = std::make_unique<Connection>();
    c->info = info;
    c->slotBytes = bytes;
    c->slotWords = slotWords;
    if (plan.protocol == Protocol::Simple) {
      if (!c->simple.reserve(FifoDepth * bytes))
        return outOfMemory();
    } else {
      c->words = std::make_unique<std::atomic<uint64_t>[]>(FifoDepth * slotWords);
      for (uint64_t i = 0; i < FifoDepth * slotWords; ++i)
        c->words[i].store(0, std::memory_order_relaxed);
    }
    connections.push_back(std::move(c));
  }
  for (size_t t = 0; t < plan.tbs.size(); ++t) {
    flags.push_back(std::make_unique<TbFlag>());
    auto state = std::make_unique<TbState>();
    // Staging holds whole lines, so that framing never handles partial ones.
    uint64_t stageBytes = plan.protocol == Protocol::LL128
                              ? ll128Lines(bytes) * LL128DataBytesPerLine
                              : llLines(bytes) * LLDataBytesPerLine;
    if (plan.protocol != Protocol::Simple &&
        (!state->stageIn.reserve(stageBytes) || !state->stageOut.reserve(stageBytes)))
      return outOfMemory();
    tbState.push_back(std::move(state));
  }
  scratch.resize(plan.nranks);
  ranks.resize(plan.nranks);
  for (size_t t = 0; t < plan.tbs.size(); ++t)
    workers.emplace_back([this, t] { workerMain(static_cast<int32_t>(t)); });
  return llvm::Error::success();
}

void HostExecutor::Impl::workerMain(int32_t tb) {
  uint64_t seen = 0;
  for (;;) {
    while (startBell.wait(
               [&] {
                 return generation.load(std::memory_order_acquire) != seen ||
                        shutdown.load(std::memory_order_acquire);
               },
               [] { return false; }, std::chrono::hours(1)) != Bell::Result::Ready) {
    }
    if (shutdown.load(std::memory_order_acquire))
      return;
    seen = generation.load(std::memory_order_acquire);
    runner(*this, tb);
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1)
      doneBell.ring();
  }
}

std::string HostExecutor::Impl::describeTb(int32_t tb, uint64_t iteration,
                                           const PlanStep *step) const {
  const PlanTb &ptb = plan.tbs[tb];
  std::string where = llvm::formatv("rank {0} tb {1} (channel {2})", ptb.rank, ptb.tb,
                                    ptb.channel);
  if (step)
    where += llvm::formatv(" step {0} ({1}) iteration {2}", step->irStep,
                           ir::stepTypeName(static_cast<ir::StepType>(step->type)), iteration)
                 .str();
  return where;
}

void HostExecutor::Impl::stall(std::string text) {
  {
    std::lock_guard<std::mutex> lock(reportMutex);
    if (report.empty())
      report = std::move(text);
  }
  aborting.store(true, std::memory_order_seq_cst);
  for (auto &c : connections) {
    c->dataBell.ring();
    c->spaceBell.ring();
  }
  for (auto &f : flags)
    f->bell.ring();
}

void HostExecutor::Impl::applyAverage(const CallArgs &args) const {
  ir::CollectiveInfo info = ir::collectiveInfo(plan.collective);
  if (args.op != ReduceOp::Avg || !info.reduces)
    return;
  visitDataType(args.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int32_t r = 0; r < plan.nranks; ++r) {
      if (plan.collective == ir::Collective::Reduce && r != plan.root)
        continue;
      T *out = static_cast<T *>(args.output[r]);
      for (uint64_t i = 0; i < cachedLayout->outputElems; ++i)
        out[i] = Arith<T>::divide(out[i], plan.nranks);
    }
  });
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

  const uint64_t es = dataTypeSize(args.type);
  for (int32_t r = 0; r < plan.nranks; ++r) {
    if (!scratch[r].reserve(cachedLayout->scratchElems[r] * es))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "out of memory allocating scratch buffers");
    ranks[r] = RankPointers{args.input[r], args.output[r], scratch[r].ptr.get()};
  }
  for (auto &f : flags)
    f->value.store(0, std::memory_order_relaxed);
  runner = pickRunner(args.type, args.op, plan.protocol);
  layout = &*cachedLayout;
  sliceElems = slotBytes() / es;
  iterations = iterationCount(*cachedLayout, sliceElems);
  result.iterations = iterations;

  Clock::time_point t0 = Clock::now();
  if (iterations > 0 && !workers.empty()) {
    remaining.store(static_cast<int64_t>(workers.size()), std::memory_order_relaxed);
    generation.fetch_add(1, std::memory_order_release);
    startBell.ring();
    while (doneBell.wait([&] { return remaining.load(std::memory_order_acquire) == 0; },
                         [] { return false; }, std::chrono::hours(1)) != Bell::Result::Ready) {
    }
  }
  if (aborting.load(std::memory_order_acquire)) {
    broken = true;
    std::lock_guard<std::mutex> lock(reportMutex);
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s: %s",
                                   plan.fileName.c_str(), report.c_str());
  }
  applyAverage(args);
  result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return result;
}

//===----------------------------------------------------------------------===//
// HostExecutor
//===----------------------------------------------------------------------===//

HostExecutor::HostExecutor(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
HostExecutor::~HostExecutor() = default;

llvm::Expected<std::unique_ptr<HostExecutor>> HostExecutor::create(Plan plan,
                                                                   const HostOptions &options) {
  auto impl = std::make_unique<Impl>(std::move(plan), options);
  if (llvm::Error err = impl->start())
    return err;
  return std::unique_ptr<HostExecutor>(new HostExecutor(std::move(impl)));
}

llvm::Expected<CallResult> HostExecutor::run(const CallArgs &args) { return impl->run(args); }

const Plan &HostExecutor::plan() const { return impl->plan; }

uint64_t HostExecutor::sliceElems(DataType type) const {
  return impl->slotBytes() / dataTypeSize(type);
}

} // namespace coll::interp
