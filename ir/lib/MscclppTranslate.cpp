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

#include "coll/ir/Mscclpp.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace coll::ir::mscclpp {
namespace {

/// A region of one rank's memory, with in-place aliasing resolved: `buffer`
/// is the buffer that holds it (input chunks of an in-place call are named as
/// the output chunks they are, and so on).
struct Region {
  int32_t rank = 0;
  BufferKind buffer = BufferKind::Input;
  int64_t begin = 0, end = 0; ///< chunks [begin, end)

  bool overlaps(const Region &o) const {
    return rank == o.rank && buffer == o.buffer && begin < o.end && o.begin < end;
  }
  bool operator==(const Region &o) const {
    return rank == o.rank && buffer == o.buffer && begin == o.begin && end == o.end;
  }
};

struct Access {
  Region region;
  bool write = false;
};

/// One operand of a data op, resolved: which rank's buffer, and where.
struct Operand {
  int32_t rank = 0;
  BufferKind buffer = BufferKind::Input;
  int32_t index = 0, size = 0;
  std::string path;
};

/// A memory channel: rank `rank`'s channel to `peer` with connection tag `tag`.
struct Conn {
  int32_t rank = 0, peer = 0, tag = 0;
  bool operator<(const Conn &o) const {
    return std::tie(rank, peer, tag) < std::tie(o.rank, o.peer, o.tag);
  }
};

/// Where a signal, wait, release or acquire runs: outside any pipeline
/// (chunks 0), or in a pipeline of `chunks` chunks in units of `unit`
/// bytes, as the at-th of the `of` uses of its channel or semaphore in one
/// iteration of that pipeline's ops.
struct PipePlace {
  int64_t unit = 0, chunks = 0;
  int32_t at = 0, of = 1;
  bool operator==(const PipePlace &o) const {
    return unit == o.unit && chunks == o.chunks && at == o.at && of == o.of;
  }
  bool operator!=(const PipePlace &o) const { return !(*this == o); }
};

/// One signal or wait on a memory channel, in its tb's program order.
struct SyncUse {
  int32_t tb = 0;
  bool relaxed = false;
  uint64_t order = 0; ///< program order within the tb
  std::string path;
  PipePlace place;
  int32_t step = -1; ///< its Coll step in tb `tb`
};

class Translator {
public:
  Translator(const Plan &plan, DiagnosticList &diags) : plan(plan), diags(diags) {}

  llvm::Expected<Algorithm> run() {
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

private:
  const Plan &plan;
  DiagnosticList &diags;
  Algorithm alg;
  int32_t nranks = 0;
  /// Whether the plan names a collective Coll knows (else it is read as a
  /// custom one without a condition).
  bool knownCollective = false;

  struct Tb2 {
    std::vector<int32_t> memChannels;   ///< the tb's memory channels: ids into Gpu2::memConns
    std::vector<int32_t> portChannels;  ///< the same for port channels
    std::vector<int32_t> memRemote;     ///< memory-channel remote buffers: ids into remote_buffers
    std::vector<int32_t> portRemote;
  };
  struct Gpu2 {
    std::vector<Conn> memConns;  ///< the executor's memoryChannels, in order
    int32_t portConns = 0;       ///< how many port channels
    std::vector<Tb2> tbs;
  };
  std::vector<Gpu2> state;
  /// Signals and waits per memory channel, in program order.
  std::map<Conn, std::vector<SyncUse>> signals, waits;
  /// Releases and acquires of each semaphore (rank, id), in program order:
  /// the tb, the Coll step (-1 for an acquire that the initial value
  /// satisfies) and the op's path.
  struct SemUse {
    int32_t tb = 0, step = -1;
    std::string path;
    PipePlace place;
  };
  std::map<std::pair<int32_t, int32_t>, std::vector<SemUse>> releases, acquires;
  uint64_t nextOrder = 0;
  /// Each barrier's uses per (rank, barrier_id), per tb in program order:
  /// its arrive nop and the nops after it that wait for the other tbs'
  /// (their dependencies set by pairBarriers).
  struct BarrierUse {
    int32_t arrive = -1; ///< the arrive nop's step
    int32_t count = 0;   ///< num_threadblocks
    std::string path;
  };
  std::map<std::pair<int32_t, int32_t>, std::map<int32_t, std::vector<BarrierUse>>> barriers;
  /// The pipeline whose ops are being translated, if any.
  const Op *currentPipe = nullptr;

  void error(const std::string &path, const llvm::Twine &message) {
    diags.error(0, StepRef{}, path.empty() ? message : path + ": " + message);
  }
  void unsupported(const std::string &path, const llvm::Twine &what) {
    error(path, "not yet supported: " + what);
  }

  //===--------------------------------------------------------------------===//
  // The header: collective, modes and chunks
  //===--------------------------------------------------------------------===//

  void header() {
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
  Region region(int32_t rank, BufferKind buffer, int64_t index, int64_t size) const {
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

  //===--------------------------------------------------------------------===//
  // Channels
  //===--------------------------------------------------------------------===//

  void flattenChannels() {
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
      for (const Channel &c : plan.gpus[r].channels) {
        if (c.type == ChannelType::Memory)
          for (int32_t p : c.connectedTo)
            state[r].memConns.push_back(Conn{r, p, tags[p]++});
        else if (c.type == ChannelType::Port)
          state[r].portConns += static_cast<int32_t>(c.connectedTo.size());
      }
    }
  }

  /// The tb's lists of channels and remote buffers, with every id checked.
  void tbLists(int32_t r, int32_t t) {
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

  //===--------------------------------------------------------------------===//
  // Ops
  //===--------------------------------------------------------------------===//

  /// What the current run of ops since the last nop has done.
  struct Epoch {
    std::vector<std::pair<std::vector<Access>, std::string>> dataOps;
    std::string lastWait;   ///< path of a wait in this run, if any
  };

  /// What an op of a pipeline's body is, for the check of the body's end
  /// against its start (pipeline).
  struct BodyOp {
    enum Kind { Nop, Release, Wait, Data } kind = Nop;
    bool relaxed = false; ///< a relaxed signal
    std::vector<Access> accesses;
    std::string path, name;
  };

  void threadblock(int32_t r, int32_t t) {
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
  void oneOp(int32_t r, int32_t t, const Op &op, Epoch &epoch, std::string &firstData,
             std::string &firstWait, std::vector<BodyOp> *body) {
    std::string name = opName(op.kind).str();
    if (op.tbg && op.tbg->tbgSize > 1) {
      unsupported(op.path + ".tbg_info",
                  "threadblock groups (tbg_size " + std::to_string(op.tbg->tbgSize) +
                      "): one op shared by several tbs, each doing a slice of the data — "
                      "Coll's IR has no such step");
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
      unsupported(op.path + ".name",
                  "port channels (" + name + "): a host proxy carries the op out after "
                  "it returns — Coll's steps complete where they stand");
      return;
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
      if (!epoch.dataOps.empty()) {
        unsupported(op.path, "'" + name + "' after " + epoch.dataOps.back().second +
                                 " with no nop between them: thread i signals channel "
                                 "i as soon as its own part of that op is done, so the "
                                 "signal releases only that part, while Coll's signal "
                                 "releases everything its tb did");
        break;
      }
      if (!epoch.lastWait.empty()) {
        unsupported(op.path, "'" + name + "' after the wait " + epoch.lastWait +
                                 " with no nop between them: thread i signals channel i "
                                 "whether or not the other threads' waits are over, so "
                                 "the signal does not pass on what they acquired, while "
                                 "Coll's signal would");
        break;
      }
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

  /// A tb of its own on rank r, after the plan's tbs: it carries signals
  /// or waits of another tb (splitStreams).
  int32_t helperTb(int32_t r) {
    alg.gpus[r].tbs.emplace_back();
    state[r].tbs.emplace_back();
    return static_cast<int32_t>(alg.gpus[r].tbs.size()) - 1;
  }

  /// A Coll channel carries the signals of one tb of a rank to a peer,
  /// taken by one tb of the peer; MSCCL++'s tb may signal a peer on memory
  /// channels that different tbs of the peer wait on (or wait on channels
  /// that different tbs signal). Those channels' signals (waits) move to a
  /// tb of their own, one per tb at the other end beyond the first:
  /// - a moved signal leaves a nop where it stood, and in the new tb it
  ///   depends on that nop, so that it follows everything the first tb
  ///   did and learned before it, which is what it releases there;
  /// - a moved wait stays as a nop that depends on the wait, now in the
  ///   new tb, so that what the wait acquires comes before everything the
  ///   first tb does after it.
  /// The new tb adds no order the plan lacks, and it lets the first tb go
  /// on while it signals; the checker proves the program with it.
  void splitStreams() {
    if (diags.hasErrors())
      return;
    // The tb of each channel's uses, where they are all in one (pairSignals
    // reports the others).
    auto tbOf = [](const std::vector<SyncUse> &uses) {
      for (const SyncUse &u : uses)
        if (u.tb != uses.front().tb)
          return -1;
      return uses.empty() ? -1 : uses.front().tb;
    };
    for (bool signalSide : {true, false}) {
      auto &mine = signalSide ? signals : waits;
      auto &theirs = signalSide ? waits : signals;
      // (rank, tb, peer) -> the tb of the peer at the other end -> channels.
      std::map<std::tuple<int32_t, int32_t, int32_t>, std::map<int32_t, std::vector<Conn>>> groups;
      for (const auto &[c, uses] : mine) {
        auto other = theirs.find(Conn{c.peer, c.rank, c.tag});
        const int32_t t = tbOf(uses);
        const int32_t u = other == theirs.end() ? -1 : tbOf(other->second);
        if (t >= 0 && u >= 0)
          groups[{c.rank, t, c.peer}][u].push_back(c);
      }
      for (const auto &[key, byOther] : groups) {
        const auto &[r, t, peer] = key;
        (void)peer;
        for (auto it = std::next(byOther.begin()); it != byOther.end(); ++it) {
          const int32_t h = helperTb(r);
          std::vector<SyncUse *> moved;
          for (const Conn &c : it->second)
            for (SyncUse &u : mine[c])
              moved.push_back(&u);
          std::sort(moved.begin(), moved.end(),
                    [](const SyncUse *a, const SyncUse *b) { return a->order < b->order; });
          for (SyncUse *u : moved) {
            std::vector<Step> &from = alg.gpus[r].tbs[t].steps;
            std::vector<Step> &to = alg.gpus[r].tbs[h].steps;
            Step step = from[u->step];
            const int32_t at = static_cast<int32_t>(to.size());
            from[u->step] = Step{}; // a nop
            if (signalSide) {
              step.depTb = t;
              step.depStep = u->step;
            } else {
              from[u->step].depTb = h;
              from[u->step].depStep = at;
            }
            to.push_back(step);
            u->tb = h;
            u->step = at;
          }
        }
      }
    }
  }

  /// `barrier` (handleBarrier: DeviceSyncer::sync of num_threadblocks
  /// blocks, between two __syncthreads): the k-th barrier of each tb that
  /// uses barrier_id meets the k-th of every other. In Coll, a nop that
  /// each other tb's nops for that barrier depend on, and a nop after it
  /// for each other tb that depends on that tb's (pairBarriers). Its
  /// __syncthreads end the run of ops (a nop's rules), and what it
  /// acquires counts as a wait's for a relaxed signal after it.
  void barrierOp(int32_t r, int32_t t, const Op &op, Epoch &epoch, std::string &firstWait) {
    epoch = Epoch();
    if (op.numThreadblocks == 1)
      return; // __syncthreads only
    if (currentPipe) {
      unsupported(op.path, "a barrier of several tbs in a pipeline");
      return;
    }
    // deviceSyncers[MAX_DEVICE_SYNCERS] (execution_common.hpp: 16).
    if (op.barrierId >= 16) {
      error(op.path + ".barrier_id", "barrier " + std::to_string(op.barrierId) +
                                         " is out of range: the executor has 16 "
                                         "(MAX_DEVICE_SYNCERS)");
      return;
    }
    std::vector<Step> &steps = alg.gpus[r].tbs[t].steps;
    BarrierUse use{static_cast<int32_t>(steps.size()), op.numThreadblocks, op.path};
    for (int32_t k = 0; k < op.numThreadblocks; ++k)
      steps.push_back(Step{}); // the arrive nop, then one per other tb
    barriers[{r, op.barrierId}][t].push_back(use);
    if (firstWait.empty())
      firstWait = op.path;
  }

  void pairBarriers() {
    if (diags.hasErrors())
      return;
    for (const auto &[key, perTb] : barriers) {
      const auto &[r, id] = key;
      const std::string name = "barrier " + std::to_string(id) + " of gpu " + std::to_string(r);
      const std::vector<BarrierUse> &first = perTb.begin()->second;
      const int32_t count = first.front().count;
      bool ok = true;
      for (const auto &[t, uses] : perTb)
        for (const BarrierUse &u : uses)
          if (ok && u.count != count) {
            error(u.path + ".num_threadblocks",
                  name + " is for " + std::to_string(u.count) + " tbs here and for " +
                      std::to_string(count) + " at " + first.front().path +
                      ": the executor's count would never reach one of them");
            ok = false;
          }
      if (ok && static_cast<int32_t>(perTb.size()) != count) {
        error(first.front().path,
              name + " is for " + std::to_string(count) + " tbs, and " +
                  std::to_string(perTb.size()) + " tbs use it: " +
                  (static_cast<int32_t>(perTb.size()) < count
                       ? "the executor would wait for the others forever"
                       : "the executor would let tbs through before every one has arrived"));
        ok = false;
      }
      for (const auto &[t, uses] : perTb)
        if (ok && uses.size() != first.size()) {
          error(uses.size() > first.size() ? uses[first.size()].path
                                           : first[uses.size()].path,
                name + " is met " + std::to_string(first.size()) + " times by tb " +
                    std::to_string(perTb.begin()->first) + " and " +
                    std::to_string(uses.size()) + " times by tb " + std::to_string(t) +
                    ": a barrier that some tbs never reach waits forever");
          ok = false;
        }
      if (!ok)
        continue;
      // Tb t's k-th barrier: after its arrive nop, one nop per other tb u
      // that depends on u's arrive nop of the same barrier.
      for (size_t k = 0; k < first.size(); ++k)
        for (const auto &[t, uses] : perTb) {
          int32_t at = uses[k].arrive + 1;
          for (const auto &[u, others] : perTb) {
            if (u == t)
              continue;
            Step &wait = alg.gpus[r].tbs[t].steps[at++];
            wait.depTb = u;
            wait.depStep = others[k].arrive;
          }
        }
    }
  }

  /// Where the op being translated runs (its at and of are set when its
  /// pipeline's ops are done: pipeline).
  PipePlace pipePlace() const {
    PipePlace p;
    if (currentPipe) {
      p.unit = currentPipe->unitSize;
      p.chunks = currentPipe->numChunks;
    }
    return p;
  }

  static std::string describePlace(const PipePlace &p) {
    if (p.chunks == 0)
      return "outside any pipeline";
    return "in a pipeline of " + std::to_string(p.chunks) + " chunks in units of " +
           std::to_string(p.unit) + " bytes, as use " + std::to_string(p.at) + " of " +
           std::to_string(p.of) + " in each iteration";
  }

  /// Whether every operand of a data op in the current pipeline has the
  /// pipeline's chunks (the executor moves unit i of each operand in
  /// iteration i, as many units as the pipeline's chunks hold).
  bool pipeSized(const Op &op, const std::string &name) {
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
  void pipeline(int32_t r, int32_t t, const Op &pipe, Epoch &epoch, std::string &firstData,
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

  std::string describe(const Region &r) const {
    return "gpu " + std::to_string(r.rank) + " " + bufferName(r.buffer).str() + "[" +
           std::to_string(r.begin) + ":" + std::to_string(r.end) + ")";
  }

  std::optional<std::string> conflict(const std::vector<Access> &a,
                                      const std::vector<Access> &b) const {
    for (const Access &x : a)
      for (const Access &y : b)
        if ((x.write || y.write) && x.region.overlaps(y.region))
          return describe(x.region.begin <= y.region.begin ? y.region : x.region);
    return std::nullopt;
  }

  /// A signal or wait: one Coll step per channel of the op.
  void syncOp(int32_t r, int32_t t, const Op &op, bool signal, bool relaxed) {
    if (!op.channelType || *op.channelType != ChannelType::Memory) {
      error(op.path + ".channel_type", "'" + opName(op.kind) + "' needs a memory channel here");
      return;
    }
    const Tb2 &tb = state[r].tbs[t];
    for (size_t i = 0; i < op.channelIds.size(); ++i) {
      int32_t id = op.channelIds[i];
      std::string path = op.path + ".channel_ids[" + std::to_string(i) + "]";
      if (size_t(id) >= tb.memChannels.size()) {
        error(path, "channel " + std::to_string(id) + " is out of range: the tb has " +
                        std::to_string(tb.memChannels.size()) + " memory channels");
        continue;
      }
      const Conn &conn = state[r].memConns[tb.memChannels[id]];
      if (conn.peer == r) {
        unsupported(path, "a signal or wait on a memory channel to the tb's own rank: "
                          "Coll's signals reach another rank");
        continue;
      }
      Step step;
      step.type = signal ? StepType::Signal : StepType::Wait;
      step.count = 0;
      step.peer = conn.peer;
      alg.gpus[r].tbs[t].steps.push_back(step);
      (signal ? signals : waits)[conn].push_back(SyncUse{
          t, relaxed, nextOrder++, op.path, pipePlace(),
          static_cast<int32_t>(alg.gpus[r].tbs[t].steps.size()) - 1});
    }
  }

  /// A local operand (`type`), checked against the rank's chunks.
  std::optional<Operand> local(int32_t r, const BufferRef &ref) {
    if (!ref.local) {
      error(ref.path, "expected a local buffer ('type') here");
      return std::nullopt;
    }
    return checked(Operand{r, *ref.local, ref.index, ref.size, ref.path});
  }
  /// A peer's operand (`buffer_id`, through the tb's memory-channel remote
  /// buffers).
  std::optional<Operand> remote(int32_t r, int32_t t, const BufferRef &ref) {
    if (ref.remoteBufferId < 0) {
      error(ref.path, "expected a peer's buffer ('buffer_id') here");
      return std::nullopt;
    }
    const Tb2 &tb = state[r].tbs[t];
    if (size_t(ref.remoteBufferId) >= tb.memRemote.size()) {
      error(ref.path + ".buffer_id", "remote buffer " + std::to_string(ref.remoteBufferId) +
                                         " is out of range: the tb has " +
                                         std::to_string(tb.memRemote.size()) +
                                         " memory-channel remote buffers");
      return std::nullopt;
    }
    const RemoteBuffer &rb = plan.gpus[r].remoteBuffers[tb.memRemote[ref.remoteBufferId]];
    if (rb.rank == r) {
      unsupported(ref.path + ".buffer_id",
                  "a remote buffer of the tb's own rank: Coll's direct steps reach another rank");
      return std::nullopt;
    }
    return checked(Operand{rb.rank, rb.type, ref.index, ref.size, ref.path});
  }
  std::optional<Operand> checked(Operand o) {
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
  Region regionOf(const Operand &o) const { return region(o.rank, o.buffer, o.index, o.size); }

  void emit(int32_t r, int32_t t, StepType type, const Operand &src, const Operand &dst,
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

  bool sameSizes(const Op &op, const std::vector<const Operand *> &all) {
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
  bool dataOp(int32_t r, int32_t t, const Op &op, std::vector<Access> &accesses) {
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

  //===--------------------------------------------------------------------===//
  // Signals and channels
  //===--------------------------------------------------------------------===//

  /// sem_release and sem_acquire: device semaphores between the tbs of one
  /// rank (concurrency_device.hpp, DeviceSemaphore: release adds one with
  /// release order; acquire takes one with acquire order, waiting while
  /// there is none). With one tb releasing a semaphore and one acquiring it,
  /// the k-th acquire completes exactly when the (k - init_value)-th release
  /// has happened: in Coll, a nop that depends on the nop of that release.
  void semaphoreOp(int32_t r, int32_t t, const Op &op, bool release) {
    const std::vector<int64_t> &inits = plan.gpus[r].semaphoreInitValues;
    for (size_t i = 0; i < op.semaphoreIds.size(); ++i) {
      int32_t id = op.semaphoreIds[i];
      std::string path = op.path + ".semaphore_ids[" + std::to_string(i) + "]";
      if (size_t(id) >= inits.size()) {
        error(path, "semaphore " + std::to_string(id) + " is out of range: gpu " +
                        std::to_string(r) + " has " + std::to_string(inits.size()));
        continue;
      }
      std::vector<SemUse> &uses = (release ? releases : acquires)[{r, id}];
      std::vector<Step> &steps = alg.gpus[r].tbs[t].steps;
      SemUse use{t, -1, op.path, pipePlace()};
      // The first init_value acquires wait for nothing.
      if (release || int64_t(uses.size()) >= inits[id]) {
        use.step = static_cast<int32_t>(steps.size());
        steps.push_back(Step{}); // a nop; its dependency is set by pairSemaphores
      }
      uses.push_back(use);
    }
  }

  void pairSemaphores() {
    // As for signals: after a refused op, the counts would only repeat it.
    if (diags.hasErrors())
      return;
    std::set<std::pair<int32_t, int32_t>> ids;
    for (const auto &kv : releases)
      ids.insert(kv.first);
    for (const auto &kv : acquires)
      ids.insert(kv.first);
    for (const auto &key : ids) {
      const std::vector<SemUse> &rel = releases[key], &acq = acquires[key];
      std::string name = "semaphore " + std::to_string(key.second) + " of gpu " +
                         std::to_string(key.first);
      bool ok = true;
      for (const auto *uses : {&rel, &acq})
        for (const SemUse &u : *uses)
          if (u.tb != uses->front().tb && ok) {
            unsupported(u.path, "tbs " + std::to_string(uses->front().tb) + " and " +
                                    std::to_string(u.tb) + " both " +
                                    (uses == &rel ? "release " : "acquire ") + name +
                                    ": which release lets which acquire through then depends "
                                    "on timing, and a Coll dependency names one step");
            ok = false;
          }
      if (!ok)
        continue;
      if (rel.size() != acq.size()) {
        // Acquires beyond the releases wait forever; releases left over
        // change the value the next call starts from.
        error(rel.size() < acq.size() ? acq[rel.size()].path : rel[acq.size()].path,
              name + " is released " + std::to_string(rel.size()) + " times and acquired " +
                  std::to_string(acq.size()) +
                  " times: a call must leave it at its initial value");
        continue;
      }
      int64_t init = plan.gpus[key.first].semaphoreInitValues[key.second];
      // In a pipeline, the executor's k-th acquire takes the release of an
      // earlier iteration where the semaphore starts above 0, and releases
      // and acquires at different places of their pipelines pair
      // differently at each size.
      bool piped = false;
      for (const auto *uses : {&rel, &acq})
        for (const SemUse &u : *uses)
          piped |= u.place.chunks != 0;
      if (piped && init != 0) {
        unsupported(rel.empty() ? acq.front().path : rel.front().path,
                    name + " starts at " + std::to_string(init) +
                        " and is used in a pipeline: each iteration's acquire would take an "
                        "earlier iteration's release, which a Coll dependency (a step of "
                        "the same slice) does not say");
        continue;
      }
      bool placed = true;
      for (size_t k = 0; k < acq.size() && placed; ++k)
        if (rel[k].place != acq[k].place) {
          error(acq[k].path, name + ": acquire " + std::to_string(k) + " runs " +
                                 describePlace(acq[k].place) + ", and the release it takes (" +
                                 rel[k].path + ") " + describePlace(rel[k].place) +
                                 ": the executor runs a pipeline's ops once per unit, so the "
                                 "two sides would release and acquire different numbers of "
                                 "times or in another order");
          placed = false;
        }
      if (!placed)
        continue;
      for (size_t k = 0; k < acq.size(); ++k) {
        if (acq[k].step < 0)
          continue;
        const SemUse &from = rel[k - static_cast<size_t>(init)];
        Step &step = alg.gpus[key.first].tbs[acq[k].tb].steps[acq[k].step];
        step.depTb = from.tb;
        step.depStep = from.step;
      }
    }
    // A nop that no step after it in its tb carries, and that no other tb
    // waits for, orders nothing: a release that nobody in this call
    // acquires, an acquire at the end of a tb. The verifier refuses such a
    // nop, so it is left out; leaving out an acquire may leave its release
    // without a dependent, so this repeats until nothing changes. (Only the
    // semaphores' nops are nops or have hasdep here.)
    for (bool changed = true; changed;) {
      changed = false;
      for (ir::Gpu &gpu : alg.gpus)
        for (ir::ThreadBlock &tb : gpu.tbs)
          for (Step &step : tb.steps)
            step.hasDep = false;
      for (ir::Gpu &gpu : alg.gpus)
        for (ir::ThreadBlock &tb : gpu.tbs)
          for (const Step &step : tb.steps)
            if (step.hasDependency())
              gpu.tbs[step.depTb].steps[step.depStep].hasDep = true;
      for (ir::Gpu &gpu : alg.gpus)
        for (ir::ThreadBlock &tb : gpu.tbs)
          while (!tb.steps.empty() && tb.steps.back().type == StepType::Nop &&
                 !tb.steps.back().hasDep) {
            tb.steps.pop_back();
            changed = true;
          }
    }
  }

  /// Pairs the k-th wait on each memory channel with the k-th signal of its
  /// partner, and gives each tb the Coll channel its signals and waits need:
  /// Coll pairs the signals of one tb to a peer on a channel with the waits
  /// of one tb of the peer on the same channel.
  void pairSignals() {
    // An op refused above leaves its signals and waits out: pairing what is
    // left would only repeat that error.
    if (diags.hasErrors())
      return;
    // Tbs are nodes (rank, tb); a channel's signalling tb and its partner's
    // waiting tb must share a Coll channel.
    using Node = std::pair<int32_t, int32_t>;
    std::map<Node, Node> parent;
    auto find = [&](Node x) {
      Node root = x;
      for (auto it = parent.find(root); it != parent.end(); it = parent.find(root))
        root = it->second;
      // Point the whole path at the root, so that later finds are short.
      for (auto it = parent.find(x); it != parent.end() && it->second != root;
           it = parent.find(x)) {
        x = it->second;
        it->second = root;
      }
      return root;
    };
    auto unite = [&](Node a, Node b) {
      a = find(a);
      b = find(b);
      if (a != b)
        parent[std::max(a, b)] = std::min(a, b);
    };

    auto singleTb = [&](const std::vector<SyncUse> &uses, const Conn &c, const char *what) {
      for (const SyncUse &u : uses)
        if (u.tb != uses.front().tb) {
          unsupported(u.path, "tbs " + std::to_string(uses.front().tb) + " and " +
                                  std::to_string(u.tb) + " of gpu " + std::to_string(c.rank) +
                                  " both " + what + " on its memory channel to gpu " +
                                  std::to_string(c.peer) +
                                  ": on a Coll channel, one tb per rank " +
                                  (llvm::StringRef(what) == "signal" ? "signals a peer"
                                                                     : "waits for a peer"));
          return false;
        }
      return true;
    };
    bool ok = true;
    for (const auto &[c, uses] : signals)
      ok &= singleTb(uses, c, "signal");
    for (const auto &[c, uses] : waits)
      ok &= singleTb(uses, c, "wait");
    if (!ok)
      return;

    // Each channel's signals must all be taken by its partner's waits, as
    // Coll's verifier requires of its own channels: a wait with no signal
    // waits forever, and a signal left over would release a wait of the next
    // call early.
    auto memoryChannelName = [&](const Conn &c) {
      return "gpu " + std::to_string(c.rank) + "'s memory channel " + std::to_string(c.tag) +
             " to gpu " + std::to_string(c.peer);
    };
    for (const auto &[c, uses] : signals) {
      auto w = waits.find(Conn{c.peer, c.rank, c.tag});
      size_t taken = w == waits.end() ? 0 : w->second.size();
      if (taken < uses.size())
        error(uses[taken].path,
              "signal " + std::to_string(taken) + " on " + memoryChannelName(c) +
                  " is never waited for: gpu " + std::to_string(c.peer) + " waits on its partner "
                  "channel only " + std::to_string(taken) +
                  " times, and a signal left over would release a wait of the next call early");
    }
    for (const auto &[c, uses] : waits) {
      auto sg = signals.find(Conn{c.peer, c.rank, c.tag});
      size_t given = sg == signals.end() ? 0 : sg->second.size();
      if (given < uses.size())
        error(uses[given].path,
              "wait " + std::to_string(given) + " on " + memoryChannelName(c) +
                  " has no matching signal: gpu " + std::to_string(c.peer) +
                  " signals on its partner channel only " + std::to_string(given) +
                  " times, so this wait waits forever");
    }
    if (diags.hasErrors())
      return;
    // (A memory channel's partner is the peer's memory channel to this rank
    // with the same connection tag: executor.cc, setupConnections.)

    // The wait side of each signalling channel: rank p's channel to r with
    // the same tag.
    for (const auto &[c, uses] : signals) {
      Conn partner{c.peer, c.rank, c.tag};
      auto w = waits.find(partner);
      if (w == waits.end())
        continue; // no waits: the verifier reports the signals left over
      unite({c.rank, uses.front().tb}, {partner.rank, w->second.front().tb});
      // A relaxed wait does not acquire what a signal releases.
      size_t n = std::min(uses.size(), w->second.size());
      // The executor pairs signals and waits by count: alike only where each
      // runs at the same place of pipelines alike (pipeline).
      for (size_t k = 0; k < n; ++k)
        if (uses[k].place != w->second[k].place) {
          error(w->second[k].path,
                "wait " + std::to_string(k) + " on " + memoryChannelName(partner) + " runs " +
                    describePlace(w->second[k].place) + ", and the signal it takes (" +
                    uses[k].path + ") " + describePlace(uses[k].place) +
                    ": the executor runs a pipeline's ops once per unit, so the two sides "
                    "would signal and wait different numbers of times or in another order");
          break;
        }
      for (size_t k = 0; k < n; ++k)
        if (w->second[k].relaxed && !uses[k].relaxed)
          unsupported(w->second[k].path,
                      "a relaxed wait (rlxwait) that takes the signal " + uses[k].path +
                          ", which releases data: the relaxed wait does not acquire it, "
                          "while Coll's wait would");
    }

    // Within a component, the signals from r to p on all its memory channels
    // form one count in Coll, taken by the waits in order. That is exact
    // where one tb of r does all the signals, one tb of p all the waits, and
    // the channels of the signals come in the same order as those of the
    // waits: then the k-th wait of each channel still takes the k-th signal
    // of that channel.
    struct Stream {
      std::vector<std::pair<uint64_t, int32_t>> signalTags, waitTags; // (order, tag)
      std::set<int32_t> signalTbs, waitTbs;
      std::string path;
    };
    using Key = std::pair<int32_t, int32_t>; // (signaller, waiter)
    std::map<Node, std::map<Key, Stream>> pairsOf;
    for (const auto &[c, uses] : signals) {
      Stream &s = pairsOf[find({c.rank, uses.front().tb})][{c.rank, c.peer}];
      for (const SyncUse &u : uses)
        s.signalTags.emplace_back(u.order, c.tag);
      s.signalTbs.insert(uses.front().tb);
      if (s.path.empty())
        s.path = uses.front().path;
    }
    for (const auto &[c, uses] : waits) {
      Stream &s = pairsOf[find({c.rank, uses.front().tb})][{c.peer, c.rank}];
      for (const SyncUse &u : uses)
        s.waitTags.emplace_back(u.order, c.tag);
      s.waitTbs.insert(uses.front().tb);
      if (s.path.empty())
        s.path = uses.front().path;
    }
    for (auto &[root, streams] : pairsOf)
      for (auto &[key, s] : streams) {
        std::string pair = "gpu " + std::to_string(key.first) + "'s signals to gpu " +
                           std::to_string(key.second);
        if (s.signalTbs.size() > 1 || s.waitTbs.size() > 1) {
          auto tbs = [](size_t n) { return std::to_string(n) + (n == 1 ? " tb" : " tbs"); };
          unsupported(s.path, pair + " go through several memory channels, sent by " +
                                  tbs(s.signalTbs.size()) + " and waited for by " +
                                  tbs(s.waitTbs.size()) +
                                  ": a Coll tb has one channel, and on a channel one tb per "
                                  "rank signals a peer and one tb of the peer waits");
          continue;
        }
        std::sort(s.signalTags.begin(), s.signalTags.end());
        std::sort(s.waitTags.begin(), s.waitTags.end());
        std::vector<int32_t> st, wt;
        for (const auto &x : s.signalTags)
          st.push_back(x.second);
        for (const auto &x : s.waitTags)
          wt.push_back(x.second);
        std::set<int32_t> tags(st.begin(), st.end());
        tags.insert(wt.begin(), wt.end());
        if (tags.size() > 1 && st != wt)
          unsupported(s.path, pair + " on its " + std::to_string(tags.size()) +
                                  " memory channels are not waited for in the order they are "
                                  "signalled: Coll, which counts them as one, would pair "
                                  "them differently");
      }

    std::vector<std::set<std::pair<int32_t, int32_t>>> used;
    std::map<std::pair<int32_t, int32_t>, int32_t> channelOf;
    for (const auto &[root, pairs] : pairsOf) {
      (void)root;
      size_t c = 0;
      for (; c < used.size(); ++c) {
        bool clash = false;
        for (const auto &kv : pairs)
          clash |= used[c].count(kv.first) != 0;
        if (!clash)
          break;
      }
      if (c == used.size())
        used.emplace_back();
      for (const auto &kv : pairs)
        used[c].insert(kv.first);
      channelOf[root] = static_cast<int32_t>(c);
    }
    alg.nchannels = std::max<int32_t>(1, static_cast<int32_t>(used.size()));
    for (int32_t r = 0; r < nranks; ++r)
      for (size_t t = 0; t < alg.gpus[r].tbs.size(); ++t) {
        auto it = channelOf.find(find({r, static_cast<int32_t>(t)}));
        alg.gpus[r].tbs[t].channel = it == channelOf.end() ? 0 : it->second;
      }
  }
};

} // namespace

llvm::Expected<Algorithm> translatePlan(const Plan &plan, DiagnosticList &diags) {
  return Translator(plan, diags).run();
}

} // namespace coll::ir::mscclpp
