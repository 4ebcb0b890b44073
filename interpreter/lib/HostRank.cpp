//===- HostRank.cpp - One rank of a plan on the host ----------------------===//

#include "coll/interpreter/host/Rank.h"

#include "host/Runners.h"
#include "host/State.h"

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
  uint64_t total = sizeof(ConnectionControl) + FifoDepth * slotSpan();
  return (total + CacheLine - 1) / CacheLine * CacheLine;
}

uint64_t FifoShape::slotSpan() const {
  return protocol == Protocol::Simple ? slotBytes : slotWords * 8;
}

uint64_t FifoShape::slotBytesFor(uint64_t payload) const {
  uint64_t bytes = payload;
  if (protocol == Protocol::LL)
    bytes = llLines(payload) * LLLineBytes;
  else if (protocol == Protocol::LL128)
    bytes = ll128Lines(payload) * LL128LineWords * 8;
  return std::min(bytes, slotSpan());
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
// The tbs' task
//===----------------------------------------------------------------------===//

namespace {

/// The tb task of the call's type and the plan's protocol
/// (host/Runners.h: each protocol's are compiled in their own file).
RankRunner::Impl::Runner runnerOf(DataType type, Protocol proto) {
  switch (proto) {
  case Protocol::Simple: return pickRunner<Protocol::Simple>(type);
  case Protocol::LL: return pickRunner<Protocol::LL>(type);
  case Protocol::LL128: return pickRunner<Protocol::LL128>(type);
  }
  return nullptr;
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
                   Doorbell &bell, StopControl &stop, const RankOptions &options,
                   DirectTable *direct) {
  if (rank < 0 || rank >= plan.nranks || !plan.holds(rank))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   llvm::formatv("{0}: no steps of rank {1} in the plan (it has "
                                                 "{2} ranks; rank {3}'s steps only)",
                                                 plan.fileName, rank, plan.nranks, plan.planRank)
                                       .str());
  if (!direct && plan.hasDirectSteps(rank))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("{0}: rank {1} has direct steps (put, get, getre, signal, wait), and "
                      "no table of its peers' buffers and signals to run them with",
                      plan.fileName, rank)
            .str());
  auto impl = std::make_unique<Impl>(plan, rank, bell, stop, options);
  impl->direct = direct;
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
                             void *output, void *scratch) {
  Impl &i = *impl;
  const uint64_t es = dataTypeSize(type);
  i.scratchGiven = scratch;
  if (!scratch && !i.scratch.reserve(layout.scratchElems[i.rank] * es))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "out of memory allocating scratch buffers");
  i.layout = &layout;
  i.type = type;
  i.op = op;
  i.input = input;
  i.output = output;
  i.runner = runnerOf(type, i.plan.protocol);
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

void RankRunner::rewindConnections() {
  if (impl->plan.protocol != Protocol::Simple)
    return;
  for (const auto &tb : impl->tbs) {
    if (tb->send.valid()) {
      tb->send.control->tail.store(0, std::memory_order_relaxed);
      tb->send.headSeen = 0;
    }
    if (tb->recv.valid())
      tb->recv.control->head.store(0, std::memory_order_relaxed);
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

void *RankRunner::scratch() const {
  return impl->scratchGiven ? impl->scratchGiven : impl->scratch.ptr.get();
}

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
