//===- Prims.h - The data movement of one tb on the host ------------*- C++ -*-===//
//
// Prims<T, Proto>: what a tb of the host backend does for the
// interpreter loop (StepSemantics.h), the host side of the kernel's
// primitives (interpreter/cuda/device/Prims.h): dependency flags, local
// copies and reductions, waiting with the watchdog, and the FIFO steps
// (send, receive and their fused forms). Each protocol's own part is in a
// file of its own, as the kernel's are: PrimsSimple.h, PrimsLL.h,
// PrimsLL128.h. Memory ordering per protocol: coll/interpreter/host/Rank.h.
//
// Only HostRank.cpp includes these headers, and they give Prims internal
// linkage (an unnamed namespace), as it had when it lived in that file: GCC
// then inlines the interpreter loop, the waits' fast paths and the
// protocols' members (declared `inline`, as members defined in the class
// are) as it does functions called once. With external linkage a 1 KiB
// allreduce of 8 emulated ranks cost up to 12 % more per call for the same
// instructions (docs/performance/host.md, 2026-11-27).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_LIB_HOST_PRIMS_H
#define COLL_INTERPRETER_LIB_HOST_PRIMS_H

#include "coll/interpreter/host/Data.h"
#include "host/State.h"

#include "coll/interpreter/Protocol.h"
#include "coll/interpreter/ReduceOps.h"

#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <string>

namespace coll::interp::host {
namespace {

using ir::Protocol;

inline int64_t traceNow() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             Clock::now().time_since_epoch())
      .count();
}

/// Calls `f` with the operator object of `op` for elements of type T. The
/// operator is a value of the call, switched on once per primitive (a slot
/// or a chunk), not a template parameter of Prims: only the element loops
/// are compiled once per operator, not the interpreter loop and the
/// protocols around them (a quarter of the instantiations; the host runners
/// were the longest compiles of every build).
template <class T, class F> inline void withOp(ReduceOp op, F &&f) {
  switch (op) {
  case ReduceOp::Sum:
  case ReduceOp::Avg: f(OpSum<T>{}); return; // Avg: the sum, scaled at the end
  case ReduceOp::Prod: f(OpProd<T>{}); return;
  case ReduceOp::Min: f(OpMin<T>{}); return;
  case ReduceOp::Max: f(OpMax<T>{}); return;
  }
}

/// The data movement of one tb, per element type and protocol; each
/// protocol's own part is in its file (PrimsSimple.h, PrimsLL.h,
/// PrimsLL128.h).
template <class T, Protocol Proto> class Prims {
public:
  explicit Prims(TbState &s)
      : s(s), ex(*s.owner), op(ex.op), send_(s.send.valid() ? &s.send : nullptr),
        recv_(s.recv.valid() ? &s.recv : nullptr), stageIn(s.stageIn.as<T>()),
        stageOut(s.stageOut.as<T>()) {}

  ~Prims() {
    ringOwed();
    if (s.trace && open)
      s.trace->events[openIndex].end = traceNow();
  }

  void at(uint64_t iteration, int32_t, const PlanStep &step) {
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

  /// One tb's IR step, or several (depTb -n: Plan::deps from depStep), all
  /// of them published; the report names the first one that is not.
  bool waitDependency(int32_t depTb, uint64_t iteration, int32_t depStep) {
    const StepDependencies deps = ex.plan.dependencies(depTb, depStep);
    auto unmet = [&]() -> const PlanDep * {
      for (const PlanDep &d : deps)
        if (ex.localTb(d.tb).flag.load(std::memory_order_acquire) <
            ex.flagValue(iteration, d.step))
          return &d;
      return nullptr;
    };
    return await([&] { return unmet() == nullptr; },
                 [&] {
                   const PlanDep *d = unmet();
                   if (!d) // met since the deadline passed
                     return std::string("waiting for dependencies that are now published");
                   uint64_t v = ex.localTb(d->tb).flag.load(std::memory_order_relaxed);
                   return llvm::formatv(
                              "waiting for tb {0} step {1} of iteration {2}; that tb has "
                              "published {3}",
                              ex.plan.tbs[d->tb].tb, d->step, iteration,
                              v == 0 ? std::string("nothing yet")
                                     : llvm::formatv("step {0} of iteration {1}",
                                                     (v - 1) % ex.span(), (v - 1) / ex.span())
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
    withOp<T>(op, [&](auto o) { data::combine(out, in, src, n, o); });
    sendEnd(n);
    recvEnd(n);
    return true;
  }

  bool recvReduceCopy(const T *src, T *dst, uint64_t n) {
    const T *in;
    if (!recvBegin(in, n))
      return false;
    withOp<T>(op, [&](auto o) { data::combine(dst, in, src, n, o); });
    recvEnd(n);
    return true;
  }

  bool recvReduceCopySend(const T *src, T *dst, uint64_t n) {
    const T *in;
    T *out;
    if (!recvBegin(in, n) || !sendBegin(out))
      return false;
    withOp<T>(op, [&](auto o) { data::combine2(dst, out, in, src, n, o); });
    sendEnd(n);
    recvEnd(n);
    return true;
  }

  void copy(const T *src, T *dst, uint64_t n) {
    traceElems(n);
    data::move(dst, src, n);
  }

  static constexpr bool FusedPuts = true;
  /// A fused put: a copy to each destination, one after another, while
  /// the source is still in the cache (the host's copies are memcpy).
  void copyMany(const T *src, T *const *dsts, int ndst, uint64_t n) {
    traceElems(n);
    for (int j = 0; j < ndst; ++j)
      data::move(dsts[j], src, n);
  }

  /// dst = srcs[nsrc-1] ⊕ (… ⊕ (srcs[0] ⊕ dst)); `from` (a fused getre
  /// with a folded copy): the copy of srcs[0], then the others onto it.
  void reduce(T *dst, const T *const *srcs, int nsrc, uint64_t n, bool from) {
    traceElems(n);
    if (from) {
      data::move(dst, srcs[0], n);
      ++srcs;
      --nsrc;
    }
    withOp<T>(op, [&](auto o) { data::reduceInto(dst, srcs, nsrc, n, o); });
  }

  bool foldedCopy(const PlanStep &step) const { return peerOf(step).ordinal == FoldedCopy; }

  // Direct steps (StepSemantics.h): the peers' buffers and the signal
  // counters are the executor's (DirectTable). A signal releases what this
  // tb did and learned before it; the wait that takes it acquires.
  T *peerBase(const PlanStep &step, uint8_t buffer, int member) const {
    const PlanStepPeer d = peerOf(step);
    const int32_t peer = member == 0 ? d.peer : ex.plan.memberPeers[d.members + member];
    return static_cast<T *>(ex.direct->address(peer, buffer));
  }

  // A fused signal or wait (nsrc > 1) is each of its members' in turn
  // (Plan::memberSignals): a signal after all the tb did before the step,
  // a wait before all it does after.
  void signal(const PlanStep &step) {
    const PlanStepPeer d = peerOf(step);
    for (int32_t r = 0; r < step.nsrc; ++r) {
      const int32_t pair = r == 0 ? d.signal : ex.plan.memberSignals[d.members + r].signal;
      ex.direct->sent[pair]->fetch_add(1, std::memory_order_release);
      owe(ex.direct->wake.empty() ? ex.bell : *ex.direct->wake[pair]);
    }
  }

  bool waitSignal(const PlanStep &step, uint64_t iteration) {
    const PlanStepPeer d = peerOf(step);
    for (int32_t r = 0; r < step.nsrc; ++r) {
      const PlanMemberSignal m =
          r == 0 ? PlanMemberSignal{d.signal, d.ordinal} : ex.plan.memberSignals[d.members + r];
      const PlanSignal &pair = ex.plan.signals[m.signal];
      std::atomic<uint64_t> &sent = *ex.direct->sent[m.signal];
      uint64_t target = ex.direct->base[m.signal] +
                        iteration * static_cast<uint64_t>(pair.perIteration) +
                        static_cast<uint64_t>(m.ordinal) + 1;
      if (!await([&] { return sent.load(std::memory_order_acquire) >= target; },
                 [&] {
                   return llvm::formatv("waiting for signal {0} of iteration {1} from rank {2} "
                                        "on channel {3}; rank {2} has sent {4} in this call",
                                        m.ordinal, iteration, pair.sender, pair.channel,
                                        sent.load(std::memory_order_relaxed) -
                                            ex.direct->base[m.signal])
                       .str();
                 },
                 3))
        return false;
    }
    return true;
  }

private:
  /// The direct-step record of `step`, one of the plan's steps.
  PlanStepPeer peerOf(const PlanStep &step) const {
    return ex.plan.stepPeers[static_cast<size_t>(&step - ex.plan.steps.data())];
  }

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
      storeLL(c, seq, bytes);
    else if constexpr (Proto == Protocol::LL128)
      storeLL128(c, seq, bytes);
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
    if constexpr (Proto == Protocol::Simple)
      return recvSimple(c, seq, in);
    else if constexpr (Proto == Protocol::LL)
      return recvLL(c, seq, bytes, noData, in);
    else
      return recvLL128(c, seq, bytes, noData, in);
  }

  void recvEnd(uint64_t) {
    ConnectionEnd &c = *recv_;
    c.control->head.store(c.control->head.load(std::memory_order_relaxed) + 1,
                          std::memory_order_release);
    owe(*c.peerBell);
  }

  // Each protocol's own part (PrimsSimple.h, PrimsLL.h, PrimsLL128.h):
  // storing a slot (LL, LL128: from the staging buffer, with flags) and
  // receiving one (Simple: in place; LL, LL128: line by line into the
  // staging buffer), `noData` wording a stall.
  bool recvSimple(ConnectionEnd &c, uint64_t seq, const T *&in);
  void storeLL(ConnectionEnd &c, uint64_t seq, uint64_t bytes);
  template <class NoData>
  bool recvLL(ConnectionEnd &c, uint64_t seq, uint64_t bytes, NoData &&noData, const T *&in);
  void storeLL128(ConnectionEnd &c, uint64_t seq, uint64_t bytes);
  template <class NoData>
  bool recvLL128(ConnectionEnd &c, uint64_t seq, uint64_t bytes, NoData &&noData, const T *&in);

  TbState &s;
  RankRunner::Impl &ex;
  const ReduceOp op;
  ConnectionEnd *send_ = nullptr;
  ConnectionEnd *recv_ = nullptr;
  T *stageIn = nullptr;
  T *stageOut = nullptr;
  bool open = false;
  size_t openIndex = 0;
  Doorbell *owed[4];
  unsigned nOwed = 0;
};

} // namespace
} // namespace coll::interp::host

#endif // COLL_INTERPRETER_LIB_HOST_PRIMS_H
