//===- MscclppTranslate.cpp - MSCCL++ plans into Coll's IR ----------------===//
//
// docs/IR.md, "MSCCL++ plans". A plan's rank is an Algorithm's gpu, its
// threadblock the tb of the same index, and each op becomes the Coll steps
// that do exactly what the v0.10 executor does (execution_kernel.hpp), or an
// error naming the op's JSON path and what Coll's IR lacks.
//
// Two facts of the executor shape the rules below. First, an op runs on all
// threads of its tb at once and nothing orders two ops of one tb but a `nop`
// (__syncthreads): signals and waits are done by thread i for channel i
// only. So a tb's ops are in Coll's order (one step after another) only where
// a nop separates them, and the translation requires one wherever the order
// matters. Second, a memory channel's semaphore pairs rank r's k-th memory
// channel to rank p with rank p's k-th memory channel to r (executor.cc,
// setupConnections: one connection tag per peer, counted in channel order);
// a signal on one bumps the counter that a wait on the other reads.
//
//===----------------------------------------------------------------------===//

#include "MscclppTranslator.h"

#include <algorithm>
#include <map>
#include <functional>
#include <numeric>
#include <set>

namespace coll::ir::mscclpp {
namespace detail {

llvm::Expected<Algorithm> Translator::run() {
  nranks = static_cast<int32_t>(plan.gpus.size());
  header();
  flattenChannels();
  alg.gpus.resize(plan.gpus.size());
  for (int32_t r = 0; r < nranks; ++r) {
    const Gpu &gpu = plan.gpus[r];
    Gpu2 &out = state[r];
    alg.gpus[r].inputChunks = gpu.inputChunks;
    alg.gpus[r].outputChunks = gpu.outputChunks;
    alg.gpus[r].scratchChunks = gpu.scratchChunks;
    alg.gpus[r].tbs.resize(gpu.threadblocks.size());
    out.tbs.resize(gpu.threadblocks.size());
    for (size_t t = 0; t < gpu.threadblocks.size(); ++t)
      threadblock(r, static_cast<int32_t>(t));
  }
  splitStreams();
  pairBarriers();
  pairSemaphores();
  pairSignals();
  if (diags.hasErrors())
    return diags.takeErrors();
  return std::move(alg);
}

void Translator::header() {
  alg.name = plan.name;
  alg.protocol = plan.protocol;
  alg.inplace = plan.inplace;
  alg.outofplace = !plan.inplace;
  // MSCCL++ checks the message size (the output's for allgather, else the
  // input's, which is always the larger side) against the inclusive range
  // [min_message_size, max_message_size]; Coll's minBytes and maxBytes bound
  // the larger side too, with 0 for "no limit".
  alg.minBytes = plan.minMessageSize;
  // The DSL writes 2^64-1 for "no limit"; LLVM 14's JSON parser reads
  // integers above 2^63-1 as 2^63-1, so anything from there on is read as
  // no limit (8 EiB is none in practice).
  alg.maxBytes = plan.maxMessageSize >= uint64_t(INT64_MAX) ? 0 : plan.maxMessageSize;
  if (plan.maxMessageSize == 0)
    error("max_message_size", "0 admits no message that carries data");
  if (plan.reuseResources)
    unsupported("reuse_resources",
                "reuse_resources: scratch offsets then wrap around a fixed scratch size "
                "(execution_plan.cc, getOffset), so scratch chunks alias one another "
                "depending on the message size; Coll's scratch chunks never alias");
  // use_double_scratch_buffer gives each call one half of a scratch buffer
  // twice the size, alternating between calls; within one call the plan
  // sees one scratch buffer, as in Coll.

  std::optional<Collective> coll = parseCollective(plan.collective);
  if (coll && *coll != Collective::Custom && collectiveInfo(*coll).hasRoot) {
    error("collective", "'" + plan.collective +
                            "' is a rooted collective, and a plan names no root");
    return;
  }
  knownCollective = coll && *coll != Collective::Custom;
  alg.collective = knownCollective ? *coll : Collective::Custom;
  alg.collectiveSpelling = knownCollective ? collectiveName(*coll).str() : plan.collective;
  if (plan.gpus.empty())
    return;

  // Every rank's buffers are cut alike: the executor sizes a chunk as
  // inputSize / input_chunks (or outputSize / output_chunks) of the rank
  // and requires equal chunks, as Coll's geometry has them for the sizes
  // MSCCL++ accepts.
  const Gpu &first = plan.gpus[0];
  for (int32_t r = 1; r < nranks; ++r) {
    const Gpu &g = plan.gpus[r];
    if (g.inputChunks != first.inputChunks || g.outputChunks != first.outputChunks)
      error(g.path, "input_chunks " + std::to_string(g.inputChunks) + " and output_chunks " +
                        std::to_string(g.outputChunks) + " differ from gpu 0's " +
                        std::to_string(first.inputChunks) + " and " +
                        std::to_string(first.outputChunks) +
                        ": Coll cuts every rank's buffers alike");
  }
  int64_t in = first.inputChunks, out = first.outputChunks, n = nranks;
  std::string where = "gpus[0]";
  auto expect = [&](bool ok, const std::string &field, const std::string &want) {
    if (!ok)
      error(where + "." + field, plan.collective + " over " + std::to_string(n) +
                                     " ranks needs " + want + " (input_chunks " +
                                     std::to_string(in) + ", output_chunks " +
                                     std::to_string(out) + ")");
    return ok;
  };
  int64_t chunks = std::max<int64_t>({1, in, out});
  if (knownCollective) {
    switch (*coll) {
    case Collective::AllReduce:
      expect(in >= 1 && out == in, "output_chunks", "as many output chunks as input chunks, at least 1");
      chunks = in;
      break;
    case Collective::AllGather:
      expect(in >= 1 && out == n * in, "output_chunks", "ranks times input_chunks output chunks");
      chunks = out;
      break;
    case Collective::ReduceScatter:
      expect(out >= 1 && in == n * out, "input_chunks", "ranks times output_chunks input chunks");
      chunks = in;
      break;
    case Collective::AllToAll:
      expect(in >= 1 && out == in && in % n == 0, "input_chunks",
             "equal input and output chunks, a multiple of the ranks");
      chunks = in;
      break;
    default:
      break;
    }
  }
  // A collective Coll does not know is read as a custom one without a
  // condition: the check proves it free of races and deadlocks and warns
  // that its result is not checked.
  alg.nchunksPerLoop = static_cast<int32_t>(std::min<int64_t>(chunks, INT32_MAX));
}

/// Where chunk `index` of `buffer` of `rank` lies, with in-place aliasing
/// resolved as NCCL (and MSCCL++, whose in-place calls pass aliased
/// pointers) defines it.
Region Translator::region(int32_t rank, BufferKind buffer, int64_t index, int64_t size) const {
  Region r{rank, buffer, index, index + size};
  if (!plan.inplace || buffer == BufferKind::Scratch || plan.gpus.empty())
    return r;
  int64_t in = plan.gpus[0].inputChunks, out = plan.gpus[0].outputChunks;
  switch (alg.collective) {
  case Collective::AllGather:
    if (buffer == BufferKind::Input)
      r = {rank, BufferKind::Output, rank * in + index, rank * in + index + size};
    break;
  case Collective::ReduceScatter:
    if (buffer == BufferKind::Output)
      r = {rank, BufferKind::Input, rank * out + index, rank * out + index + size};
    break;
  default: // the same memory
    r.buffer = BufferKind::Output;
    break;
  }
  return r;
}

void Translator::flattenChannels() {
  state.resize(plan.gpus.size());
  // Memory channels to each peer, per rank, for the unpaired count.
  std::vector<std::map<int32_t, int32_t>> memTo(plan.gpus.size());
  for (int32_t r = 0; r < nranks; ++r)
    for (const Channel &c : plan.gpus[r].channels)
      if (c.type == ChannelType::Memory)
        for (int32_t p : c.connectedTo)
          ++memTo[r][p];
  for (int32_t r = 0; r < nranks; ++r) {
    std::map<int32_t, int32_t> tags;
    for (const Channel &c : plan.gpus[r].channels)
      if (c.type == ChannelType::Memory)
        for (int32_t p : c.connectedTo)
          state[r].memConns.push_back(Conn{r, p, tags[p], false, tags[p]++});
    // executor.cc, setupConnections: one tag count per peer, over the
    // memory channels, then as many more as the peer has memory channels
    // to this rank beyond this rank's to it (getUnpairedChannelInfos),
    // then the port channels. Both ends of a peer pair start their port
    // channels at the larger of their memory-channel counts, so the k-th
    // port channel of each to the other share a tag.
    std::map<int32_t, int32_t> portTags;
    for (const Channel &c : plan.gpus[r].channels)
      if (c.type == ChannelType::Port)
        for (int32_t p : c.connectedTo) {
          const int32_t base = std::max(memTo[r][p], memTo[p][r]);
          if (!portTags.count(p))
            portTags[p] = base;
          state[r].portConnList.push_back(Conn{r, p, portTags[p], true, portTags[p] - base});
          ++portTags[p];
          ++state[r].portConns;
        }
  }
}

/// The tb's lists of channels and remote buffers, with every id checked.
void Translator::tbLists(int32_t r, int32_t t) {
  const Threadblock &tb = plan.gpus[r].threadblocks[t];
  Tb2 &out = state[r].tbs[t];
  for (const IdList &l : tb.channels) {
    if (l.type != ChannelType::Memory && l.type != ChannelType::Port)
      continue;
    bool memory = l.type == ChannelType::Memory;
    size_t limit = memory ? state[r].memConns.size() : size_t(state[r].portConns);
    for (size_t i = 0; i < l.ids.size(); ++i) {
      if (size_t(l.ids[i]) >= limit) {
        error(l.path + ".channel_ids[" + std::to_string(i) + "]",
              "channel " + std::to_string(l.ids[i]) + " is out of range: gpu " +
                  std::to_string(r) + " has " + std::to_string(limit) + " " +
                  channelTypeName(l.type) + " channels");
        continue;
      }
      (memory ? out.memChannels : out.portChannels).push_back(l.ids[i]);
    }
  }
  const std::vector<RemoteBuffer> &remotes = plan.gpus[r].remoteBuffers;
  for (const IdList &l : tb.remoteBufferRefs) {
    if (l.type != ChannelType::Memory && l.type != ChannelType::Port)
      continue;
    for (size_t i = 0; i < l.ids.size(); ++i) {
      std::string ipath = l.path + ".remote_buffer_ids[" + std::to_string(i) + "]";
      if (size_t(l.ids[i]) >= remotes.size()) {
        error(ipath, "remote buffer " + std::to_string(l.ids[i]) + " is out of range: gpu " +
                         std::to_string(r) + " has " + std::to_string(remotes.size()));
        continue;
      }
      const RemoteBuffer &rb = remotes[l.ids[i]];
      if (std::find(rb.accessChannelTypes.begin(), rb.accessChannelTypes.end(), l.type) ==
          rb.accessChannelTypes.end()) {
        // The executor would look it up in a map that has no such entry
        // and silently take the first buffer of that channel type.
        error(ipath, "remote buffer " + std::to_string(l.ids[i]) +
                         " is not registered for " + channelTypeName(l.type) +
                         " channels (its access_channel_types do not list it)");
        continue;
      }
      (l.type == ChannelType::Memory ? out.memRemote : out.portRemote).push_back(l.ids[i]);
    }
  }
}

void Translator::threadblock(int32_t r, int32_t t) {
  tbLists(r, t);
  const Threadblock &tb = plan.gpus[r].threadblocks[t];
  Epoch epoch;
  std::string firstData, firstWait; // anywhere earlier in the tb
  for (const Op &op : tb.ops) {
    if (op.kind == OpKind::Pipeline)
      pipeline(r, t, op, epoch, firstData, firstWait);
    else
      oneOp(r, t, op, epoch, firstData, firstWait, nullptr);
  }
}

/// One op of a tb, after what `epoch`, `firstData` and `firstWait` say
/// came before it. In a pipeline's body, `body` records what the op is
/// for the check of the body's end against its start (pipeline).
void Translator::oneOp(int32_t r, int32_t t, const Op &op, Epoch &epoch, std::string &firstData,
                       std::string &firstWait, std::vector<BodyOp> *body) {
  std::string name = opName(op.kind).str();
  if (op.tbg && op.tbg->tbgSize > 1) { // refineForGroups takes those outside pipelines
    unsupported(op.path + ".tbg_info",
                "a threadblock group (tbg_size " + std::to_string(op.tbg->tbgSize) +
                    ") in a pipeline: each of its tbs runs its slice of every unit");
    return;
  }
  switch (op.kind) {
  case OpKind::Nop:
    epoch = Epoch();
    if (body)
      body->push_back(BodyOp{BodyOp::Nop, false, {}, op.path, name});
    return;
  case OpKind::Barrier: // begins and ends with __syncthreads, as a nop
    barrierOp(r, t, op, epoch, firstWait);
    if (body)
      body->push_back(BodyOp{BodyOp::Nop, false, {}, op.path, name});
    return;
  case OpKind::Pipeline: // the reader refuses one inside another
    error(op.path + ".name", "a pipeline inside a pipeline");
    return;
  case OpKind::PutPackets:
  case OpKind::ReadPutPackets:
  case OpKind::ReduceSendPackets:
  case OpKind::ReduceCopySendPackets:
    unsupported(op.path + ".name",
                "LL packets into a peer's window (" + name +
                    ") — Coll's IR has no such step");
    return;
  case OpKind::CopyPackets:
  case OpKind::UnpackPackets:
  case OpKind::ReducePackets:
  case OpKind::ReduceCopyPackets:
    unsupported(op.path + ".name",
                "LL packets (" + name + ": data and flags interleaved in a buffer) — "
                "Coll's IR has no such step");
    return;
  case OpKind::PutWithSignal:
  case OpKind::PutWithSignalFlush:
  case OpKind::Flush:
    portOp(r, t, op, epoch, firstWait);
    return;
  case OpKind::Put:
  case OpKind::Signal:
  case OpKind::Wait:
  case OpKind::RelaxedSignal:
  case OpKind::RelaxedWait:
    if (op.channelType && *op.channelType == ChannelType::Port) {
      portOp(r, t, op, epoch, firstWait);
      return;
    }
    break;
  default:
    break;
  }
  if (op.channelType && *op.channelType == ChannelType::Port) {
    unsupported(op.path + ".channel_type",
                "port channels (" + name + "): a host proxy carries the op out after "
                "it returns — Coll's steps complete where they stand");
    return;
  }
  if (op.channelType && *op.channelType == ChannelType::Switch) {
    error(op.path + ".channel_type", "switch (NVLS) channels: Coll has no multicast step");
    return;
  }

  switch (op.kind) {
  case OpKind::Signal:
  case OpKind::RelaxedSignal: {
    bool relaxed = op.kind == OpKind::RelaxedSignal;
    if (!afterNop(op, name, epoch,
                  "thread i signals channel i as soon as its own part of that op is done, so "
                  "the signal releases only that part, while Coll's signal releases "
                  "everything its tb did",
                  "thread i signals channel i whether or not the other threads' waits are "
                  "over, so the signal does not pass on what they acquired, while Coll's "
                  "signal would"))
      break;
    if (relaxed && !firstData.empty()) {
      unsupported(op.path, "relaxed signal after " + firstData +
                               ": it orders none of the data before it, while Coll's "
                               "signal releases everything its tb did");
      break;
    }
    if (relaxed && !firstWait.empty()) {
      unsupported(op.path, "relaxed signal after " + firstWait +
                               ": it does not pass on what that wait acquired, while "
                               "Coll's signal would");
      break;
    }
    syncOp(r, t, op, /*signal=*/true, relaxed);
    if (body)
      body->push_back(BodyOp{BodyOp::Release, relaxed, {}, op.path, name});
    break;
  }
  case OpKind::SemRelease:
    // Thread i releases semaphore i: like a signal, it covers the
    // other threads' work only after a nop.
    if (!epoch.dataOps.empty() || !epoch.lastWait.empty()) {
      unsupported(op.path, "'sem_release' after " +
                               (epoch.dataOps.empty() ? epoch.lastWait
                                                      : epoch.dataOps.back().second) +
                               " with no nop between them: thread i releases semaphore "
                               "i as soon as its own part is done, so the release does "
                               "not cover the other threads' part, while Coll's "
                               "dependency would");
      break;
    }
    semaphoreOp(r, t, op, /*release=*/true);
    if (body)
      body->push_back(BodyOp{BodyOp::Release, false, {}, op.path, name});
    break;
  case OpKind::SemAcquire:
    semaphoreOp(r, t, op, /*release=*/false);
    epoch.lastWait = op.path;
    if (firstWait.empty())
      firstWait = op.path;
    if (body)
      body->push_back(BodyOp{BodyOp::Wait, false, {}, op.path, name});
    break;
  case OpKind::Wait:
  case OpKind::RelaxedWait:
    syncOp(r, t, op, /*signal=*/false, op.kind == OpKind::RelaxedWait);
    epoch.lastWait = op.path;
    if (op.kind == OpKind::Wait && firstWait.empty())
      firstWait = op.path;
    if (body)
      body->push_back(BodyOp{BodyOp::Wait, false, {}, op.path, name});
    break;
  default: {
    // In a pipeline the executor moves unit i of every operand in
    // iteration i, for as many units as the pipeline's chunks hold: an
    // operand of fewer chunks is overrun, one of more is left partly
    // unmoved.
    if (currentPipe && !pipeSized(op, name))
      break;
    std::vector<Access> accesses;
    if (!dataOp(r, t, op, accesses))
      break;
    if (!epoch.lastWait.empty()) {
      unsupported(op.path, "'" + name + "' after the wait " + epoch.lastWait +
                               " with no nop between them: only thread i waits, for "
                               "channel or semaphore i, so the other threads may start "
                               "on this op "
                               "before the wait is over, while in Coll every step "
                               "after a wait follows it");
      break;
    }
    for (const auto &[other, otherPath] : epoch.dataOps)
      if (auto clash = conflict(accesses, other)) {
        unsupported(op.path, "'" + name + "' and " + otherPath +
                                 " both access " + *clash +
                                 ", one writing it, with no nop between them: the "
                                 "threads of one tb run them at once, while Coll's tb "
                                 "runs its steps in order");
        break;
      }
    if (body)
      body->push_back(BodyOp{BodyOp::Data, false, accesses, op.path, name});
    epoch.dataOps.emplace_back(std::move(accesses), op.path);
    if (firstData.empty())
      firstData = op.path;
    break;
  }
  }
}

/// Whether `op`, done by thread i alone (a signal, a proxy request), has no
/// data op or wait before it in its run of ops; else it is refused, saying
/// why with `afterData` or `afterWait`.
bool Translator::afterNop(const Op &op, const std::string &name, const Epoch &epoch,
                          llvm::StringRef afterData, llvm::StringRef afterWait) {
  if (!epoch.dataOps.empty())
    unsupported(op.path, "'" + name + "' after " + epoch.dataOps.back().second +
                             " with no nop between them: " + afterData);
  else if (!epoch.lastWait.empty())
    unsupported(op.path, "'" + name + "' after the wait " + epoch.lastWait +
                             " with no nop between them: " + afterWait);
  else
    return true;
  return false;
}

/// Where the op being translated runs (its at and of are set when its
/// pipeline's ops are done: pipeline).
PipePlace Translator::pipePlace() const {
  PipePlace p;
  if (currentPipe) {
    p.unit = currentPipe->unitSize;
    p.chunks = currentPipe->numChunks;
  }
  return p;
}

std::string Translator::describePlace(const PipePlace &p) {
  if (p.chunks == 0)
    return "outside any pipeline";
  return "in a pipeline of " + std::to_string(p.chunks) + " chunks in units of " +
         std::to_string(p.unit) + " bytes, as use " + std::to_string(p.at) + " of " +
         std::to_string(p.of) + " in each iteration";
}

/// Whether every operand of a data op in the current pipeline has the
/// pipeline's chunks (the executor moves unit i of each operand in
/// iteration i, as many units as the pipeline's chunks hold).
bool Translator::pipeSized(const Op &op, const std::string &name) {
  for (const auto *refs : {&op.src, &op.dst})
    for (const BufferRef &ref : *refs)
      if (ref.size != currentPipe->numChunks) {
        error(ref.path + ".size",
              "'" + name + "' moves " + std::to_string(ref.size) + " chunks in a pipeline of " +
                  std::to_string(currentPipe->numChunks) + " (" + currentPipe->path +
                  ".iter_context.num_chunks): the executor moves a unit of every operand in "
                  "each iteration, as many units as the pipeline's chunks hold, so it would " +
                  (ref.size < currentPipe->numChunks ? "run past the operand"
                                                     : "leave part of the operand unmoved"));
        return false;
      }
  return true;
}

/// A `pipeline`: the executor runs its ops once per unit of its chunks,
/// each op on unit i of its operands in iteration i (handlePipeline).
/// Coll's tbs already run their steps per slice of every chunk, each
/// slice its own iteration of the whole tb, so the ops become steps of
/// the tb where the pipeline stands, once. That is exact where
/// - every data op's operands have the pipeline's chunks (pipeSized), so
///   that iteration i moves unit i of each, and all of it is moved;
/// - the rules for one run of ops (oneOp) hold across the end of one
///   iteration and the start of the next, the ops after the body's last
///   nop followed by those before its first;
/// - a relaxed signal in the body follows no data op or wait of it (from
///   the second iteration on it would);
/// - each signal and its wait, and each release and its acquire, run at
///   the same place of pipelines alike (the same chunks and unit, the
///   same use of the channel or semaphore among an iteration's), so that
///   the executor pairs them as Coll does at every size (pairSignals,
///   pairSemaphores).
void Translator::pipeline(int32_t r, int32_t t, const Op &pipe, Epoch &epoch, std::string &firstData,
                          std::string &firstWait) {
  std::map<Conn, size_t> sigBefore, waitBefore;
  std::map<std::pair<int32_t, int32_t>, size_t> relBefore, acqBefore;
  for (const auto &[c, uses] : signals)
    sigBefore[c] = uses.size();
  for (const auto &[c, uses] : waits)
    waitBefore[c] = uses.size();
  for (const auto &[k, uses] : releases)
    relBefore[k] = uses.size();
  for (const auto &[k, uses] : acquires)
    acqBefore[k] = uses.size();
  std::vector<BodyOp> body;
  currentPipe = &pipe;
  for (const Op &op : pipe.ops)
    oneOp(r, t, op, epoch, firstData, firstWait, &body);
  currentPipe = nullptr;
  // This pipeline's uses of each channel and semaphore: their places.
  auto number = [](auto &map, auto &before) {
    for (auto &[key, uses] : map) {
      auto b = before.find(key);
      size_t from = b == before.end() ? 0 : b->second;
      for (size_t i = from; i < uses.size(); ++i) {
        uses[i].place.at = static_cast<int32_t>(i - from);
        uses[i].place.of = static_cast<int32_t>(uses.size() - from);
      }
    }
  };
  number(signals, sigBefore);
  number(waits, waitBefore);
  number(releases, relBefore);
  number(acquires, acqBefore);

  // The end of one iteration against the start of the next.
  auto isNop = [](const BodyOp &b) { return b.kind == BodyOp::Nop; };
  auto firstNop = std::find_if(body.begin(), body.end(), isNop);
  auto lastNop = std::find_if(body.rbegin(), body.rend(), isNop);
  // Without a nop the whole body is one run, the same op in two
  // iterations moving different units.
  const bool anyNop = firstNop != body.end();
  std::vector<const BodyOp *> tail, head;
  for (auto it = anyNop ? lastNop.base() : body.begin(); it != body.end(); ++it)
    tail.push_back(&*it);
  for (auto it = body.begin(); it != firstNop; ++it)
    head.push_back(&*it);
  const std::string where = "at the start of " + pipe.path + "'s ops, which in every "
                            "iteration after the first follow ";
  for (const BodyOp *h : head) {
    bool reported = false;
    for (const BodyOp *e : tail) {
      if (reported || (!anyNop && e == h))
        continue;
      if (h->kind == BodyOp::Release && (e->kind == BodyOp::Data || e->kind == BodyOp::Wait)) {
        unsupported(h->path, "'" + h->name + "' " + where + e->path +
                                 " at their end with no nop between them: thread i "
                                 "signals or releases as soon as its own part is done, "
                                 "while Coll's signal releases everything its tb did");
        reported = true;
      } else if (h->kind == BodyOp::Data && e->kind == BodyOp::Wait) {
        unsupported(h->path, "'" + h->name + "' " + where + "the wait " + e->path +
                                 " at their end with no nop between them: only thread i "
                                 "waits, so the other threads may start on this op "
                                 "before the wait is over");
        reported = true;
      } else if (h->kind == BodyOp::Data && e->kind == BodyOp::Data) {
        if (auto clash = conflict(h->accesses, e->accesses)) {
          unsupported(h->path, "'" + h->name + "' " + where + e->path +
                                   " at their end, both accessing " + *clash +
                                   ", one writing it, with no nop between them: the "
                                   "threads of one tb run them at once");
          reported = true;
        }
      }
    }
  }
  // A relaxed signal orders nothing, and from the second iteration on
  // it follows every op of the body.
  for (const BodyOp &b : body)
    if (b.kind == BodyOp::Release && b.relaxed)
      for (const BodyOp &o : body)
        if (o.kind == BodyOp::Data || o.kind == BodyOp::Wait) {
          unsupported(b.path, "relaxed signal in a pipeline whose ops also include " +
                                  o.path + ": from the second iteration on it follows "
                                  "that op and orders none of it, while Coll's signal "
                                  "would");
          break;
        }
}

std::string Translator::describe(const Region &r) const {
  return "gpu " + std::to_string(r.rank) + " " + bufferName(r.buffer).str() + "[" +
         std::to_string(r.begin) + ":" + std::to_string(r.end) + ")";
}

std::optional<std::string> Translator::conflict(const std::vector<Access> &a,
                                                const std::vector<Access> &b) const {
  for (const Access &x : a)
    for (const Access &y : b)
      if ((x.write || y.write) && x.region.overlaps(y.region))
        return describe(x.region.begin <= y.region.begin ? y.region : x.region);
  return std::nullopt;
}

/// A local operand (`type`), checked against the rank's chunks.
std::optional<Operand> Translator::local(int32_t r, const BufferRef &ref) {
  if (!ref.local) {
    error(ref.path, "expected a local buffer ('type') here");
    return std::nullopt;
  }
  return checked(Operand{r, *ref.local, ref.index, ref.size, ref.path});
}

/// A peer's operand (`buffer_id`, through the tb's memory-channel remote
/// buffers).
std::optional<Operand> Translator::remote(int32_t r, int32_t t, const BufferRef &ref,
                                         ChannelType through) {
  if (ref.remoteBufferId < 0) {
    error(ref.path, "expected a peer's buffer ('buffer_id') here");
    return std::nullopt;
  }
  const Tb2 &tb = state[r].tbs[t];
  const std::vector<int32_t> &list = through == ChannelType::Port ? tb.portRemote : tb.memRemote;
  if (size_t(ref.remoteBufferId) >= list.size()) {
    error(ref.path + ".buffer_id", "remote buffer " + std::to_string(ref.remoteBufferId) +
                                       " is out of range: the tb has " +
                                       std::to_string(list.size()) + " " +
                                       channelTypeName(through).str() +
                                       "-channel remote buffers");
    return std::nullopt;
  }
  const RemoteBuffer &rb = plan.gpus[r].remoteBuffers[list[ref.remoteBufferId]];
  if (rb.rank == r) {
    unsupported(ref.path + ".buffer_id",
                "a remote buffer of the tb's own rank: Coll's direct steps reach another rank");
    return std::nullopt;
  }
  return checked(Operand{rb.rank, rb.type, ref.index, ref.size, ref.path});
}

std::optional<Operand> Translator::checked(Operand o) {
  const Gpu &g = plan.gpus[o.rank];
  int64_t have = o.buffer == BufferKind::Input    ? g.inputChunks
                 : o.buffer == BufferKind::Output ? g.outputChunks
                                                  : g.scratchChunks;
  if (int64_t(o.index) + o.size > have) {
    error(o.path, "index " + std::to_string(o.index) + " + size " + std::to_string(o.size) +
                      " exceeds the " + std::to_string(have) + " " +
                      bufferName(o.buffer).str() + " chunks of gpu " + std::to_string(o.rank));
    return std::nullopt;
  }
  return o;
}

void Translator::emit(int32_t r, int32_t t, StepType type, const Operand &src, const Operand &dst,
                      int32_t peer) {
  Step step;
  step.type = type;
  step.srcBuf = src.buffer;
  step.srcOff = src.index;
  step.dstBuf = dst.buffer;
  step.dstOff = dst.index;
  step.count = dst.size;
  step.peer = peer;
  alg.gpus[r].tbs[t].steps.push_back(step);
}

bool Translator::sameSizes(const Op &op, const std::vector<const Operand *> &all) {
  for (const Operand *o : all)
    if (o->size != all.front()->size) {
      error(o->path + ".size", "size " + std::to_string(o->size) + " differs from the " +
                                   std::to_string(all.front()->size) +
                                   " chunks of the op's first operand: the executor "
                                   "moves the first operand's size everywhere");
      return false;
    }
  (void)op;
  return true;
}

/// The data ops. Appends their steps and their accesses (for the nop
/// rule); false when the op is refused.
bool Translator::dataOp(int32_t r, int32_t t, const Op &op, std::vector<Access> &accesses) {
  std::string name = opName(op.kind).str();
  bool reduces = op.kind == OpKind::Reduce || op.kind == OpKind::ReduceSend ||
                 op.kind == OpKind::ReadReduce || op.kind == OpKind::ReadReduceSend;
  if (reduces && op.reduceOp != "sum") {
    unsupported(op.path + ".reduce_op",
                "reduce_op '" + op.reduceOp + "': Coll's reductions are the call's own op, "
                "and a plan that fixes one is not yet read");
    return false;
  }
  bool reachesPeers = op.kind == OpKind::Put || op.kind == OpKind::Get ||
                      op.kind == OpKind::ReduceSend || op.kind == OpKind::ReadReduce ||
                      op.kind == OpKind::ReadReduceSend;
  if (reachesPeers && (!op.channelType || *op.channelType != ChannelType::Memory)) {
    // execution_plan.cc looks a peer's buffer up by the op's channel type
    // and refuses any other than memory and port (port is refused above).
    error(op.path + ".channel_type",
          "'" + name + "' on a channel of type '" +
              channelTypeName(op.channelType.value_or(ChannelType::None)) +
              "': the executor reaches a peer's buffer only through a memory or port "
              "channel");
    return false;
  }
  auto needCount = [&](const std::vector<BufferRef> &refs, const char *field, size_t want) {
    if (refs.size() == want)
      return true;
    error(op.path + "." + field, "'" + name + "' takes " + std::to_string(want) +
                                     " entries here, not " + std::to_string(refs.size()));
    return false;
  };
  auto read = [&](const Operand &o) { accesses.push_back({regionOf(o), false}); };
  auto write = [&](const Operand &o) { accesses.push_back({regionOf(o), true}); };

  switch (op.kind) {
  case OpKind::Copy: {
    // handleCopy: src_buff[0] into dst_buff[0], src's size.
    if (!needCount(op.src, "src_buff", 1) || !needCount(op.dst, "dst_buff", 1))
      return false;
    auto s = local(r, op.src[0]), d = local(r, op.dst[0]);
    if (!s || !d || !sameSizes(op, {&*s, &*d}))
      return false;
    if (regionOf(*s).overlaps(regionOf(*d)) && !(regionOf(*s) == regionOf(*d))) {
      unsupported(op.path, "a copy whose source and destination partly overlap");
      return false;
    }
    emit(r, t, StepType::Copy, *s, *d, -1);
    read(*s);
    write(*d);
    return true;
  }
  case OpKind::Put:
  case OpKind::Get: {
    // handlePut on a memory channel: for each i, src_buff[i]'s offset in
    // src_buff[0]'s buffer to the peer's dst_buff[i], dst's size.
    // handleGet: for each i, the peer's src_buff[i] into dst_buff[i]. It
    // computes the local address from the source's offset and the remote
    // one from the destination's, so it does what the plan says only
    // where the two indices are equal.
    bool put = op.kind == OpKind::Put;
    if (op.src.size() != op.dst.size()) {
      error(op.path + ".src_buff", "'" + name + "' pairs src_buff and dst_buff entry by "
                                   "entry: " + std::to_string(op.src.size()) + " and " +
                                       std::to_string(op.dst.size()) + " entries");
      return false;
    }
    std::vector<std::pair<Operand, Operand>> pairs;
    for (size_t i = 0; i < op.src.size(); ++i) {
      auto s = put ? local(r, op.src[i]) : remote(r, t, op.src[i]);
      auto d = put ? remote(r, t, op.dst[i]) : local(r, op.dst[i]);
      if (!s || !d || !sameSizes(op, {put ? &*d : &*s, put ? &*s : &*d}))
        return false;
      if (put && s->buffer != *op.src[0].local) {
        unsupported(op.src[i].path + ".type",
                    "a put whose sources lie in different buffers: the executor takes "
                    "every source from src_buff[0]'s buffer");
        return false;
      }
      if (!put && s->index != d->index) {
        unsupported(op.dst[i].path + ".index",
                    "a get from index " + std::to_string(s->index) + " to index " +
                        std::to_string(d->index) +
                        ": MSCCL++ v0.10's executor (handleGet) reads the peer at the "
                        "destination's offset and writes at the source's, so what runs is "
                        "not what the plan says");
        return false;
      }
      pairs.emplace_back(*s, *d);
    }
    for (const auto &[s, d] : pairs) {
      emit(r, t, put ? StepType::Put : StepType::Get, s, d, put ? d.rank : s.rank);
      read(s);
      write(d);
    }
    return true;
  }
  case OpKind::Reduce:
  case OpKind::ReduceSend:
  case OpKind::ReadReduce:
  case OpKind::ReadReduceSend: {
    // handleReduceSend (re, res) and handleReadReduceSend (rre, rres):
    // dst_buff[0] = src_buff[0] + src_buff[1..], element by element, where
    // src_buff[1..] are local (re, res) or the peers' (rre, rres); res and
    // rres then write the result to the peers' dst_buff[1..] as well.
    bool remoteSrcs = op.kind == OpKind::ReadReduce || op.kind == OpKind::ReadReduceSend;
    bool sends = op.kind == OpKind::ReduceSend || op.kind == OpKind::ReadReduceSend;
    if (!sends && !needCount(op.dst, "dst_buff", 1))
      return false;
    if (op.src.size() > 64) {
      error(op.path + ".src_buff", "more than 64 entries");
      return false;
    }
    auto first = local(r, op.src[0]);
    auto dst = local(r, op.dst[0]);
    if (!first || !dst)
      return false;
    std::vector<Operand> more, outs;
    for (size_t i = 1; i < op.src.size(); ++i) {
      auto o = remoteSrcs ? remote(r, t, op.src[i]) : local(r, op.src[i]);
      if (!o)
        return false;
      more.push_back(*o);
    }
    for (size_t i = 1; i < op.dst.size(); ++i) {
      auto o = remote(r, t, op.dst[i]);
      if (!o)
        return false;
      outs.push_back(*o);
    }
    std::vector<const Operand *> all{&*first, &*dst};
    for (const Operand &o : more)
      all.push_back(&o);
    for (const Operand &o : outs)
      all.push_back(&o);
    if (!sameSizes(op, all))
      return false;
    // The destination either is one of the local sources (the sum
    // accumulates there) or lies apart from all of them: a partial overlap
    // would have threads read what others already wrote.
    Region dr = regionOf(*dst);
    std::vector<Operand> srcs{*first};
    srcs.insert(srcs.end(), more.begin(), more.end());
    int accumulator = -1;
    for (size_t i = 0; i < srcs.size(); ++i) {
      Region sr = regionOf(srcs[i]);
      if (sr == dr) {
        if (accumulator < 0)
          accumulator = static_cast<int>(i);
      } else if (sr.overlaps(dr)) {
        unsupported(srcs[i].path, "a reduction whose destination partly overlaps this "
                                  "source");
        return false;
      }
    }
    if (accumulator < 0) {
      emit(r, t, StepType::Copy, srcs[0], *dst, -1);
      accumulator = 0;
    }
    for (size_t i = 0; i < srcs.size(); ++i) {
      if (static_cast<int>(i) == accumulator)
        continue;
      bool fromPeer = srcs[i].rank != r;
      emit(r, t, fromPeer ? StepType::GetReduce : StepType::Reduce, srcs[i], *dst,
           fromPeer ? srcs[i].rank : -1);
    }
    for (const Operand &o : outs)
      emit(r, t, StepType::Put, *dst, o, o.rank);
    for (const Operand &o : srcs)
      read(o);
    write(*dst);
    for (const Operand &o : outs)
      write(o);
    return true;
  }
  default:
    unsupported(op.path + ".name", "'" + name + "'");
    return false;
  }
}

/// Threadblock groups (execution_plan.cc: calcOffset and calcSize): an op
/// with `tbg_info` {tb_id k, tbg_size g} moves the k-th of g near-equal
/// slices of each operand, in units of `buffer_alignment` bytes, where the
/// g tbs of the group each hold the op. Coll's steps move whole chunks, so
/// a plan with groups is read at a finer grain: each of its chunks becomes
/// G of Coll's, G the least common multiple of its group sizes, and the
/// op's slice k of an operand of s chunks is Coll's chunks
/// [index * G + k * s * G / g, ... + s * G / g). That is the executor's
/// slice exactly where the operand's units divide by g, as they do at
/// every size whose chunks are equal and a multiple of g units; the plan's
/// other ops take their chunks times G. A group inside a pipeline stays
/// refused (oneOp). Returns G, 1 where the plan has no group of several.
int32_t refineForGroups(Plan &plan, DiagnosticList &diags) {
  int64_t g = 1;
  std::function<void(const std::vector<Op> &)> sizes = [&](const std::vector<Op> &ops) {
    for (const Op &op : ops) {
      if (op.tbg && op.tbg->tbgSize > 1)
        g = std::lcm(g, int64_t(op.tbg->tbgSize));
      sizes(op.ops);
      g = std::min<int64_t>(g, 1 << 20);
    }
  };
  for (const Gpu &gpu : plan.gpus)
    for (const Threadblock &tb : gpu.threadblocks)
      sizes(tb.ops);
  if (g == 1)
    return 1;
  constexpr int64_t MaxGrain = 1024;
  if (g > MaxGrain) {
    diags.error(0, StepRef{},
                "not yet supported: threadblock groups whose sizes' least common multiple is " +
                    std::to_string(g) + ": Coll reads such a plan with each chunk split in that "
                    "many, and takes at most " + std::to_string(MaxGrain));
    return 0;
  }
  const int32_t G = static_cast<int32_t>(g);
  bool fits = true;
  auto scale = [&](int32_t &n, int64_t by, const std::string &path) {
    int64_t v = int64_t(n) * by;
    if (v > INT32_MAX) {
      diags.error(0, StepRef{},
                  path + ": " + std::to_string(n) + " chunks split in " + std::to_string(by) +
                      " for the plan's threadblock groups are too many");
      fits = false;
      return;
    }
    n = static_cast<int32_t>(v);
  };
  std::function<void(std::vector<Op> &, bool)> refine = [&](std::vector<Op> &ops,
                                                            bool inPipeline) {
    for (Op &op : ops) {
      const bool group = op.tbg && op.tbg->tbgSize > 1 && !inPipeline;
      for (auto *refs : {&op.src, &op.dst})
        for (BufferRef &b : *refs) {
          scale(b.index, G, b.path + ".index");
          scale(b.size, G, b.path + ".size");
          if (group) {
            const int32_t slice = b.size / op.tbg->tbgSize;
            b.index += op.tbg->tbId * slice;
            b.size = slice;
          }
        }
      if (group)
        op.tbg.reset();
      if (op.kind == OpKind::Pipeline && op.numChunks * G <= INT32_MAX)
        op.numChunks *= G;
      refine(op.ops, inPipeline || op.kind == OpKind::Pipeline);
    }
  };
  for (Gpu &gpu : plan.gpus) {
    scale(gpu.inputChunks, G, gpu.path + ".input_chunks");
    scale(gpu.outputChunks, G, gpu.path + ".output_chunks");
    scale(gpu.scratchChunks, G, gpu.path + ".scratch_chunks");
    for (Threadblock &tb : gpu.threadblocks)
      refine(tb.ops, false);
  }
  return fits ? G : 0;
}

} // namespace detail

llvm::Expected<Algorithm> translatePlan(const Plan &plan, DiagnosticList &diags) {
  Plan refined = plan;
  const int32_t grain = detail::refineForGroups(refined, diags);
  if (grain == 0)
    return diags.takeErrors();
  return detail::Translator(grain > 1 ? refined : plan, diags).run();
}

} // namespace coll::ir::mscclpp
