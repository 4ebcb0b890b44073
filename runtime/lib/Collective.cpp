//===- Collective.cpp - A collective of one rank, ready to run --------------===//

#include "CommImpl.h"

#include "coll/ir/Geometry.h"

#include <cstring>

namespace coll::rt {

namespace {

/// Never dereferenced: stands for a buffer a plan does not use on a rank.
alignas(64) unsigned char unusedBuffer[64];

} // namespace

/// Whether `rank`'s tbs read or write its input, output and scratch.
std::array<bool, 3> buffersUsed(const interp::Plan &plan, int rank) {
  std::array<bool, 3> uses{};
  for (int32_t t = plan.rankTbBegin[rank]; t < plan.rankTbBegin[rank + 1]; ++t) {
    const interp::PlanTb &tb = plan.tbs[t];
    for (int32_t s = tb.stepBegin; s < tb.stepBegin + tb.nSteps; ++s) {
      const interp::PlanStep &step = plan.steps[s];
      ir::StepTypeInfo info = ir::stepTypeInfo(static_cast<ir::StepType>(step.type));
      if (info.readsSrc && step.srcBuf < 3)
        uses[step.srcBuf] = true;
      if (info.writesDst && step.dstBuf < 3)
        uses[step.dstBuf] = true;
    }
  }
  return uses;
}

/// The call number (low 32 bits) and a hash of what makes two calls the
/// same, as the senders store it in their connections.
uint64_t callTag(uint64_t seq, const Op &op) {
  const ir::CollectiveInfo info = ir::collectiveInfo(collectiveOf(op.kind));
  // A multiply-xorshift mix of the fields (every call pays for it; equal
  // calls must agree across processes, so nothing seeded per process).
  uint64_t h = op.count * 0x9e3779b97f4a7c15ull;
  for (uint64_t field : {uint64_t(op.kind), uint64_t(op.type),
                         uint64_t(info.reduces ? static_cast<int>(op.op) + 1 : 0),
                         uint64_t(info.hasRoot ? op.root + 1 : 0)}) {
    h = (h ^ field) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  return (seq << 32) | (h & 0xffffffffu);
}

llvm::Expected<Communicator::Impl::RunnerEntry *>
Communicator::Impl::runnerFor(const std::shared_ptr<const Compiled> &compiled) {
  auto found = runners.find(compiled.get());
  if (found != runners.end())
    return &found->second;
  const interp::Plan &plan = compiled->plan;
  std::vector<ConnectionEnd> ends(plan.connections.size());
  RunnerEntry entry;
  for (size_t c = 0; c < plan.connections.size(); ++c) {
    const interp::PlanConnection &info = plan.connections[c];
    if (info.sender != rank && info.receiver != rank)
      continue;
    // On this host, a FIFO's slots are committed as far as calls fill them
    // (prepareCollective): with many peers and small messages, memory
    // follows the messages rather than the slot size.
    const bool shared = hostOf[info.sender] == hostOf[info.receiver];
    auto end = connectionEnd(info.sender, info.receiver, info.channel, plan.protocol,
                             shared ? 0 : UINT64_MAX);
    if (!end)
      return collError(collSystemError, llvm::toString(end.takeError()));
    ends[c] = *end;
    if (shared)
      entry.sharedConnections.push_back({info.sender, info.receiver, info.channel});
  }
  interp::host::RankOptions options;
  options.watchdog = std::chrono::milliseconds(config.watchdogMs);
  options.slotBytes = config.slotBytes[static_cast<int>(plan.protocol)];
  // Direct steps reach the peers' buffers in the host's shared areas:
  // collective, as every rank makes its runner for the plan at one call.
  if (!plan.signals.empty()) {
    auto table = directTableFor(plan);
    if (!table)
      return table.takeError();
    entry.direct = std::move(*table);
  }
  auto runner = RankRunner::create(plan, rank, ends, transport->myDoorbell(), *stop, options,
                                   entry.direct.get());
  if (!runner)
    return collError(collSystemError, llvm::toString(runner.takeError()));
  entry.runner = std::move(*runner);
  entry.uses = buffersUsed(plan, rank);
  keepAlive.push_back(compiled);
  return &runners.emplace(compiled.get(), std::move(entry)).first->second;
}

llvm::Expected<DeviceExecutor *>
Communicator::Impl::deviceFor(const std::shared_ptr<const Compiled> &compiled, int device) {
  auto found = devices.find(compiled.get());
  if (found != devices.end())
    return found->second.get();
  // Collective: every rank selects the same plan for the same call, so all
  // of them get here together. Each makes its executor and shares where
  // its receiving FIFOs are; then each maps the ones it sends on.
  llvm::Error chosen = llvm::Error::success();
  if (!backend) {
    auto b = device >= 0 ? gpuBackend() : emulatedBackend();
    if (b)
      backend = *b;
    else
      chosen = b.takeError();
  }
  const std::string where = backend ? backend->describe(device) : std::string("GPU");
  const std::string what = where + ", " + compiled->plan.fileName;
  std::unique_ptr<DeviceExecutor> created;
  // Direct steps need the peers' buffers mapped: for calls on GPU buffers,
  // the ranks' areas and windows of GPU memory (at the call:
  // ensureDeviceArea); on the emulated device with host buffers, whose
  // kernels run on host memory, the host's shared areas and windows, as for
  // host calls (below).
  const bool direct = !compiled->plan.signals.empty(); // the same on every rank
  if (!chosen) {
    interp::CudaOptions options;
    options.rank = rank;
    options.watchdogMs = config.watchdogMs;
    // The host's stop word: a failure on another rank of this host ends
    // this rank's kernels too, not only its host tasks.
    options.hostStop = stop->stopWord();
    options.simpleSlotBytes = static_cast<uint32_t>(config.slotBytes[0]);
    options.llSlotBytes = static_cast<uint32_t>(config.slotBytes[1]);
    options.ll128SlotBytes = static_cast<uint32_t>(config.slotBytes[2]);
    options.copyEngineBytes = config.copyEngineBytes;
    auto made = backend->create(compiled->plan, options, device);
    if (made) {
      created = std::move(*made);
      if (trace) // COLL_TRACE: its kernels record a timeline (runRound collects it)
        created->traceEnqueued(true);
    } else {
      chosen = made.takeError();
    }
  }
  // A refusal every rank learns at once (below): the caller may serve the
  // call with another program (prepareCollective).
  deviceRefusal = false;
  const bool haveBackend = backend != nullptr;
  bool together = false;
  if (llvm::Error err = agree(std::move(chosen), what + ": executor", &together)) {
    deviceRefusal = together && haveBackend;
    return err;
  }
  // Twice: first each rank's GPU, from which a receiver places each FIFO
  // in its GPU's memory or, from a GPU without peer access, in pinned host
  // memory; then where they are.
  std::vector<interp::ConnectionExport> all(static_cast<size_t>(nranks));
  for (int round = 0; round < 2; ++round) {
    all[rank] = created->exportConnections();
    if (llvm::Error err = boot->allgather(all.data(), sizeof(interp::ConnectionExport)))
      return collError(collRemoteError,
                       llvm::formatv("{0}: lost contact with the other ranks: {1}", what,
                                     llvm::toString(std::move(err))));
    // Ranks on other hosts: through the network proxy, never mapped.
    for (int r = 0; r < nranks; ++r)
      all[r].remote = hostOf[r] != hostOf[rank];
    if (round == 0)
      if (llvm::Error err =
              agree(created->placeConnections(all), what + ": placing FIFOs", &together)) {
        deviceRefusal = together;
        return err;
      }
  }
  uint32_t inHost = 0;
  for (const interp::ConnectionExport &e : all)
    inHost += e.hostConnections;
  // Every rank sees the same exports, so all of them turn away from LL128
  // at this call, and its caller selects again (prepareCollective).
  if (inHost && compiled->plan.protocol == ir::Protocol::LL128) {
    avoidLL128.store(true, std::memory_order_relaxed);
    selectionEpoch.fetch_add(1, std::memory_order_acq_rel);
    COLL_LOG(Info, Init, rank,
             llvm::formatv("{0}: {1} FIFOs of the job would be in host memory (other hosts, or GPUs without "
                           "P2P); LL128 is not used from here on",
                           what, inHost));
    return collError(collInvalidUsage, what + ": LL128 through host memory");
  }
  if (llvm::Error err = agree(created->importConnections(all), what + ": mapping FIFOs",
                              &together)) {
    deviceRefusal = together;
    return err;
  }
  // Connections with ranks on other hosts: their ends here, in this rank's
  // pinned host memory, go to the network proxy, which moves their slots.
  const std::vector<interp::ProxiedConnection> proxied = created->proxiedConnections();
  llvm::Error netted = llvm::Error::success();
  if (!proxied.empty() && !net)
    netted = collError(collInternalError, what + ": connections to other hosts, and no network "
                                                 "proxy");
  for (const interp::ProxiedConnection &p : proxied) {
    if (netted)
      break;
    NetProxy::DeviceEnd end;
    end.head = reinterpret_cast<std::atomic<uint64_t> *>(p.head);
    end.tail = reinterpret_cast<std::atomic<uint64_t> *>(p.tail);
    end.sizes = reinterpret_cast<std::atomic<uint32_t> *>(p.sizes);
    end.fifo = reinterpret_cast<std::byte *>(p.fifo);
    end.slotStride = p.slotStride;
    end.protocol = static_cast<ir::Protocol>(p.protocol);
    end.sender = p.sender;
    end.receiver = p.receiver;
    end.channel = p.channel;
    end.program = deviceProgramsAcrossHosts;
    end.outbound = p.outbound != 0;
    netted = net->device(end);
  }
  if (llvm::Error err = agree(std::move(netted), what + ": connections to other hosts"))
    return err;
  if (shape.nodes > 1)
    ++deviceProgramsAcrossHosts;
  // Direct steps on the emulated device: the shared areas (collective, at
  // the first such program) and every rank's windows, where each call's
  // buffers lie wherever this rank put them (its kernel publishes where).
  if (direct && device < 0) {
    if (llvm::Error err = makeDirectAreas(what + ": direct steps"))
      return err;
    if (llvm::Error err = agree(giveDeviceWindows(*created, false), what + ": windows"))
      return err;
  }
  COLL_LOG(Info, Init, rank,
           llvm::formatv("{0}: this rank's {1} tbs on {2}; {3}{4}", what,
                         compiled->plan.tbCount(rank),
                         backend->emulated() ? "the CPU emulation of a GPU" : "the GPU",
                         inHost ? llvm::formatv("{0} of the job's FIFOs in pinned host memory "
                                                "({1} received here: from another host, from a "
                                                "GPU without P2P to the receiver's, or with "
                                                "COLL_P2P_DISABLE=1), the others in GPU memory "
                                                "shared with CUDA IPC",
                                                inHost, all[rank].hostConnections)
                                      .str()
                                : std::string("FIFOs in GPU memory shared with CUDA IPC"),
                         proxied.empty()
                             ? std::string()
                             : llvm::formatv("; {0} of this rank's connections go to other hosts "
                                             "through the network proxy, from pinned host memory",
                                             proxied.size())
                                   .str()));
  keepAlive.push_back(compiled);
  std::lock_guard<std::mutex> lock(devicesMapMutex);
  return devices.emplace(compiled.get(), std::move(created)).first->second.get();
}

llvm::Expected<const interp::CallLayout *> Communicator::Impl::layoutFor(const Compiled &compiled,
                                                                          uint64_t count) {
  auto key = std::make_pair(&compiled, count);
  auto found = layouts.find(key);
  if (found != layouts.end())
    return &found->second;
  auto resolved = interp::resolveCall(compiled.plan, count);
  if (!resolved)
    return collError(collInvalidUsage, llvm::toString(resolved.takeError()));
  if (layouts.size() > 256)
    layouts.clear();
  return &layouts.emplace(key, std::move(*resolved)).first->second;
}

namespace {

/// A collective on a communicator of one rank: recvbuff gets sendbuff's
/// count elements (every collective of one rank leaves them there, as
/// NCCL's do). Device buffers: a copy enqueued on the caller's stream, as
/// NCCL does for one rank; no kernel.
llvm::Error runLocally(Communicator::Impl &c, const Op &op, uint64_t bytes) {
  const uint64_t n = op.count * interp::dataTypeSize(op.type);
  if (op.send != op.recv) {
    if (op.device >= 0) {
      if (!c.backend) {
        auto b = gpuBackend();
        if (!b)
          return collError(collUnhandledCudaError,
                           llvm::formatv("{0} on one rank's device buffers: {1}",
                                         opKindName(op.kind), llvm::toString(b.takeError())));
        c.backend = *b;
      }
      if (llvm::Error err = c.backend->copyOnStream(op.recv, op.send, n, op.stream, op.device))
        return collError(collUnhandledCudaError,
                         llvm::formatv("{0} on one rank's device buffers: copying sendbuff to "
                                       "recvbuff: {1}",
                                       opKindName(op.kind), llvm::toString(std::move(err))));
    } else {
      std::memmove(op.recv, op.send, n);
    }
  }
  COLL_LOG(Trace, Coll, c.rank,
           llvm::formatv("{0} of {1} B on one rank: {2}", opKindName(op.kind), bytes,
                         op.send == op.recv ? "in place, nothing to do"
                         : op.device >= 0   ? "copied on the stream"
                                            : "copied"));
  return llvm::Error::success();
}

constexpr const char *SharedAreaAdaptation = "run in the shared area: buffers copied in and out";
constexpr const char *WindowAdaptation = "buffers in registered windows: not copied";

/// Where a plan reads its input and writes its output on this rank.
struct PlanBuffers {
  std::byte *in = nullptr, *out = nullptr;
  bool userInPlace = false; ///< the caller's buffers alias as NCCL's in place
  /// What was done to fit the plan's mode, if anything (a literal: set on
  /// every call, so it allocates nothing).
  const char *adaptation = nullptr;
  bool windowed = false; ///< and WindowAdaptation, after it
};

/// The plan wants its input and output aliased as its mode says; the caller
/// gave theirs by NCCL's rules. Adapts locally (docs/RUNTIME.md): a copy
/// into the in-place position, or a temporary buffer, of the runner's on a
/// device (copies then enqueued around the kernel, in order on its stream).
/// `uses`: which of its buffers this rank's tbs touch.
///
/// `shared`: the plan has direct steps (Direct.cpp), so its buffers must be
/// where the peers reach them: the caller's, when they lie in windows of
/// the communicator; else this rank's shared area, sendbuff copied in
/// before and recvbuff copied out after. Temporaries are in the area.
llvm::Expected<PlanBuffers> adaptBuffers(Communicator::Impl &c, const Op &op,
                                         const interp::Plan &plan, std::array<bool, 3> uses,
                                         DeviceExecutor *device, PreparedCollective &out,
                                         bool shared, bool gpuArea = false, bool alike = false) {
  const ir::CollectiveInfo info = ir::collectiveInfo(collectiveOf(op.kind));
  const size_t es = interp::dataTypeSize(op.type);
  const uint64_t n = static_cast<uint64_t>(c.nranks);
  // What this rank's sendbuff and recvbuff hold for the caller (not a
  // broadcast's sendbuff off the root, not a reduce's recvbuff off it).
  const bool inMeaningful = op.readsSend(c.rank);
  const bool outMeaningful = op.writesRecv(c.rank);
  const uint64_t inElems = info.inputPerRank ? n * op.count : op.count;
  const uint64_t outElems = info.outputPerRank ? n * op.count : op.count;
  const ir::InPlaceOffsets off = ir::inPlaceOffsets(plan.shape, c.rank, op.count);
  auto *userIn = static_cast<const std::byte *>(op.send);
  auto *userOut = static_cast<std::byte *>(op.recv);
  PlanBuffers b;
  if (inMeaningful && outMeaningful) {
    if (off.inputInOutput)
      b.userInPlace = userIn == userOut + off.inputInOutput * es;
    else if (off.outputInInput)
      b.userInPlace = userOut == userIn + off.outputInInput * es;
    else
      b.userInPlace = userIn == userOut;
    if (!b.userInPlace && userIn < userOut + outElems * es && userOut < userIn + inElems * es)
      return collError(collInvalidArgument,
                       llvm::formatv("{0}: sendbuff and recvbuff overlap without being in place "
                                     "(in place means {1})",
                                     opKindName(op.kind),
                                     off.inputInOutput   ? "sendbuff == recvbuff + rank*count"
                                     : off.outputInInput ? "recvbuff == sendbuff + rank*count"
                                                         : "sendbuff == recvbuff"));
  }
  // `alike` (copy engines, decided alike on every rank): every rank's call
  // goes through its area in the same mode, out of place where the plan
  // has it, whatever the caller's buffers, so that each rank's host can
  // name its peers' (CallArgs::peersAlike).
  const bool inPlace = alike ? !plan.outofplace
                       : inMeaningful && outMeaningful
                           ? (b.userInPlace ? plan.inplace : !plan.outofplace)
                           : plan.inplace;
  // Direct steps on buffers the peers cannot reach: through the area.
  const bool windowed = !alike && shared && (inMeaningful || outMeaningful) &&
                        (!inMeaningful || c.windowSlotOf(userIn, inElems * es)) &&
                        (!outMeaningful || c.windowSlotOf(userOut, outElems * es));
  const bool copies = shared && !windowed;
  auto temporary = [&](int which, uint64_t bytes) -> llvm::Expected<std::byte *> {
    if (shared && gpuArea) // sized for the call (ensureDeviceArea)
      return c.deviceArea->own + c.deviceArea->regionOffset(which);
    if (shared)
      return c.directRegion(which, bytes);
    auto t = device ? device->temporary(which, bytes) : c.temp[which].get(bytes);
    if (!t)
      return t.takeError();
    return static_cast<std::byte *>(*t);
  };
  auto copyBefore = [&](void *dst, const void *src, uint64_t bytes) {
    if (device)
      out.before.push_back({dst, src, bytes});
    else
      std::memmove(dst, src, bytes);
  };
  if (inPlace) {
    const bool bigIsInput = info.inputPerRank && !info.outputPerRank;
    std::byte *big = nullptr;
    if (b.userInPlace && !copies) {
      big = bigIsInput ? const_cast<std::byte *>(userIn) : userOut;
    } else if (outMeaningful && !bigIsInput && !copies) {
      big = userOut;
      if (inMeaningful) {
        copyBefore(big + off.inputInOutput * es, userIn, inElems * es);
        b.adaptation = "in-place algorithm: sendbuff copied into recvbuff first";
      }
    } else {
      auto t = temporary(0, std::max(inElems, outElems) * es);
      if (!t)
        return t.takeError();
      big = *t;
      if (inMeaningful)
        copyBefore(big + off.inputInOutput * es, userIn, inElems * es);
      if (outMeaningful) {
        out.postDst = userOut;
        out.postSrc = big + off.outputInInput * es;
        out.postBytes = outElems * es;
      }
      b.adaptation = copies ? SharedAreaAdaptation : "in-place algorithm run in a temporary buffer";
    }
    b.in = big + off.inputInOutput * es;
    b.out = big + off.outputInInput * es;
    b.windowed = windowed;
    return b;
  }
  if (inMeaningful && !b.userInPlace && !copies) {
    b.in = const_cast<std::byte *>(userIn);
  } else if (inMeaningful || uses[0] || copies) {
    auto t = temporary(0, inElems * es);
    if (!t)
      return t.takeError();
    b.in = *t;
    if (inMeaningful) {
      copyBefore(b.in, userIn, inElems * es);
      b.adaptation = "out-of-place algorithm: sendbuff copied to a temporary buffer first";
    }
  } else {
    b.in = reinterpret_cast<std::byte *>(unusedBuffer);
  }
  if (outMeaningful && !copies) {
    b.out = userOut;
  } else if (uses[1] || copies) {
    auto t = temporary(1, outElems * es);
    if (!t)
      return t.takeError();
    b.out = *t;
    if (outMeaningful) {
      out.postDst = userOut;
      out.postSrc = b.out;
      out.postBytes = outElems * es;
    }
  } else {
    b.out = reinterpret_cast<std::byte *>(unusedBuffer);
  }
  if (copies)
    b.adaptation = SharedAreaAdaptation;
  else
    b.windowed = windowed;
  return b;
}

} // namespace

void Communicator::Impl::sayCopyEngines(const Op &op, const std::string &algo, uint64_t bytes,
                                        uint32_t copies) {
  if (!logEnabled(Level::Info, Coll)) // nothing on a call's path below INFO
    return;
  bool first;
  {
    std::lock_guard<std::mutex> lock(refusedMutex);
    first = copyEnginesSaid.emplace(algo, bytes).second;
  }
  if (!first && !logEnabled(Level::Trace, Coll))
    return;
  log(first ? Level::Info : Level::Trace, Coll, rank,
      llvm::formatv("{0} of {1} B: {2}'s copies on the copy engines ({3} cudaMemcpyAsync between "
                    "a kernel of its signals before them and one of those after; every rank's "
                    "buffers staged in its area; COLL_COPY_ENGINE={4})",
                    opKindName(op.kind), bytes, algo, copies, config.copyEngineBytes));
}

namespace {

/// At COLL_DEBUG=TRACE: the call, what serves it, and how its buffers fit.
void logCall(const Communicator::Impl &c, const Op &op, const Choice &choice,
             const interp::Plan &plan, const PlanBuffers &b, bool onDevice) {
  if (!logEnabled(Level::Trace, Coll))
    return;
  const ir::CollectiveInfo info = ir::collectiveInfo(collectiveOf(op.kind));
  log(Level::Trace, Coll, c.rank,
      llvm::formatv("{0} of {1} B ({2} x {3}{4}{5}) {6} -> {7} ({8}; {9}){10}{11}",
                    opKindName(op.kind), op.selectionBytes(c.nranks), op.count,
                    interp::dataTypeName(op.type),
                    info.reduces ? " " + interp::reduceOpName(op.op).str() : std::string(),
                    info.hasRoot ? " root " + std::to_string(op.root) : std::string(),
                    b.userInPlace ? "in place" : "out of place", choice.algo->name,
                    ir::protocolName(plan.protocol), choice.why,
                    std::string(b.adaptation ? "; " : "") + (b.adaptation ? b.adaptation : "") +
                        (b.windowed ? "; " : "") + (b.windowed ? WindowAdaptation : ""),
                    !onDevice               ? ""
                    : c.backend->emulated() ? "; on the emulated device"
                                            : "; on GPU " + std::to_string(op.device)));
}

} // namespace

namespace {

/// An alltoall as grouped sends and receives (Choice::p2p), as NCCL runs
/// it: block q of the input to rank q, block q of the output from it, over
/// the point-to-point connections (PointToPoint.cpp).
llvm::Error prepareAllToAllP2P(Communicator::Impl &c, const Op &op, PreparedCollective &out,
                               llvm::SmallVectorImpl<Task> &tasks,
                               std::vector<std::unique_ptr<P2PTask>> &p2p) {
  const size_t block = op.count * interp::dataTypeSize(op.type);
  const auto *src = static_cast<const std::byte *>(op.send);
  if (op.send == op.recv) {
    // In place: the blocks that arrive overwrite what is still to be sent.
    out.staged.assign(src, src + block * static_cast<size_t>(c.nranks));
    src = out.staged.data();
  }
  out.p2pOps.clear();
  out.p2pOps.reserve(2 * static_cast<size_t>(c.nranks));
  for (int q = 0; q < c.nranks; ++q) {
    Op send = makeOp(OpKind::Send, src + block * q, nullptr, op.count, q);
    Op recv = makeOp(OpKind::Recv, nullptr, static_cast<std::byte *>(op.recv) + block * q,
                     op.count, q);
    send.type = recv.type = op.type;
    out.p2pOps.push_back(send);
    out.p2pOps.push_back(recv);
  }
  return prepareP2P(c, out.p2pOps, p2p, tasks);
}

} // namespace

llvm::Error prepareCollective(Communicator::Impl &c, const Op &op, PreparedCollective &out,
                              llvm::SmallVectorImpl<Task> &tasks,
                              std::vector<std::unique_ptr<P2PTask>> &p2p) {
  out.comm = &c;
  out.op = &op;
  if (op.count == 0) {
    COLL_LOG(Trace, Coll, c.rank,
             llvm::formatv("{0} of 0 elements: nothing to do", opKindName(op.kind)));
    return llvm::Error::success();
  }
  const ir::Collective coll = collectiveOf(op.kind);
  const uint64_t bytes = op.selectionBytes(c.nranks);
  const bool onDevice = op.device >= 0 || c.config.emulatedDevice;
  // Host buffers in registered windows of one host's ranks: the built-in
  // rules for windows come first (Selection.h). Every rank must pass
  // buffers in windows, or none (as NCCL's symmetric windows): each decides
  // alone. The window must hold the call's larger side (selectionBytes).
  // Device calls on a communicator of one host that holds windows of their
  // buffers' kind (GPU memory; host memory on the emulated device): the
  // rules for device calls with windows, which every rank agrees on
  // (buffers outside the windows go through the rank's area).
  const bool windowed =
      c.shape.nodes == 1 && !c.windows.empty() &&
      (onDevice ? c.windowsRegistered(op.device >= 0)
                : (!op.readsSend(c.rank) || c.windowSlotOf(op.send, bytes)) &&
                      (!op.writesRecv(c.rank) || c.windowSlotOf(op.recv, bytes)));
  auto chosen = c.select(coll, bytes, ir::collectiveInfo(coll).hasRoot ? op.root : 0, onDevice,
                         windowed, /*compile=*/true);
  if (!chosen) {
    // The same answer on every rank (the same algorithms, rules and
    // refusals): the call may go to a library underneath (CollError::agreed).
    return llvm::handleErrors(chosen.takeError(), [](std::unique_ptr<CollError> e) {
      e->agreed = true;
      return llvm::Error(std::move(e));
    });
  }
  const Choice &choice = **chosen;
  if (choice.local)
    return runLocally(c, op, bytes);
  if (choice.p2p)
    return prepareAllToAllP2P(c, op, out, tasks, p2p);
  if (!choice.algo)
    return collError(collInvalidUsage,
                     llvm::formatv("{0} of {1} B: {2} sends it to the library '{3}', which the "
                                   "caller must run",
                                   opKindName(op.kind), bytes, choice.why, choice.library));
  // By reference: a copy of the shared pointer is an atomic round trip per call.
  const std::shared_ptr<const Compiled> &program = choice.program;
  const interp::Plan &plan = program->plan;

  // The executor: this rank's on a device, or its host runner.
  DeviceExecutor *device = nullptr;
  Communicator::Impl::RunnerEntry *entry = nullptr;
  std::array<bool, 3> uses{};
  if (onDevice) {
    auto d = c.deviceFor(program, op.device);
    if (!d && plan.protocol == ir::Protocol::LL128 && c.avoidLL128.load()) {
      // FIFOs in host memory: the same call again, whose selection now
      // passes over LL128 programs.
      llvm::consumeError(d.takeError());
      return prepareCollective(c, op, out, tasks, p2p);
    }
    if (!d && c.deviceRefusal) {
      // Every rank failed to make this program's executor (or to connect
      // it) at the same call: none of them runs it from now on, and the
      // call is served by the next program the selection finds, or fails
      // naming why each could not serve it (a drop-in then hands it to the
      // library underneath).
      std::string why;
      takeResult(d.takeError(), why);
      COLL_LOG(Info, Coll, c.rank,
               llvm::formatv("{0} ({1}) cannot run on this communicator's devices, choosing "
                             "again: {2}",
                             choice.algo->name, choice.algo->origin, why));
      {
        std::lock_guard<std::mutex> lock(c.refusedMutex);
        c.refusedOnDevice[choice.algo] = why;
      }
      c.selectionEpoch.fetch_add(1, std::memory_order_acq_rel);
      return prepareCollective(c, op, out, tasks, p2p);
    }
    if (!d)
      return d.takeError();
    device = *d;
    uses = buffersUsed(plan, c.rank);
  } else {
    auto e = c.runnerFor(program);
    if (!e)
      return e.takeError();
    entry = *e;
    uses = entry->uses;
  }
  auto layout = c.layoutFor(*program, op.count);
  if (!layout)
    return layout.takeError();
  interp::host::DirectTable *direct = entry ? entry->direct.get() : nullptr;
  // Direct steps on a device: the peers read this rank's buffers in its
  // area or its windows (on the GPU's memory for GPU buffers; the host's
  // for the emulated device's host buffers), as on the host.
  const bool deviceDirect = device && !plan.signals.empty();
  const bool gpuArea = deviceDirect && op.device >= 0;
  if (gpuArea) {
    // Regions for the call's input, output and every rank's scratch: the
    // same on every rank, so that all grow the areas at the same call.
    const uint64_t es = interp::dataTypeSize(op.type);
    uint64_t need = std::max((*layout)->inputElems, (*layout)->outputElems) * es;
    for (uint64_t e : (*layout)->scratchElems)
      need = std::max(need, e * es);
    if (llvm::Error err = c.ensureDeviceArea((need + 255) / 256 * 256, op.device,
                                             plan.fileName + ": direct steps on GPU buffers"))
      return err;
  }
  // Copy engines (COLL_COPY_ENGINE; docs/RUNTIME.md): a call large enough
  // on a program that splits (the same on every rank: the plan, the count
  // and the agreed setting) stages every rank's buffers in its area.
  const uint64_t callBytes =
      std::max((*layout)->inputElems, (*layout)->outputElems) * interp::dataTypeSize(op.type);
  const bool engines = deviceDirect && c.config.copyEngineBytes &&
                       callBytes >= c.config.copyEngineBytes && !plan.copyBegin.empty() &&
                       plan.protocol == ir::Protocol::Simple;
  auto buffers =
      adaptBuffers(c, op, plan, uses, device, out, direct || deviceDirect, gpuArea, engines);
  if (!buffers)
    return buffers.takeError();
  logCall(c, op, choice, plan, *buffers, device != nullptr);
  out.plan = &plan;

  if (device) {
    interp::CallArgs args;
    args.type = op.type;
    args.op = op.op;
    args.count = op.count;
    args.input.assign(static_cast<size_t>(c.nranks), nullptr);
    args.output.assign(static_cast<size_t>(c.nranks), nullptr);
    args.input[c.rank] = buffers->in;
    args.output[c.rank] = buffers->out;
    if (deviceDirect) {
      // Windows registered since, or areas made again: the executor takes
      // them again. Its scratch is this rank's area's, allocated (on the
      // host) as far as the call needs.
      auto given = c.deviceWindowsEpoch.find(device);
      if (given == c.deviceWindowsEpoch.end() || given->second != c.windowsEpoch)
        if (llvm::Error err = c.giveDeviceWindows(*device, gpuArea))
          return collError(collInternalError, llvm::toString(std::move(err)));
      if (!gpuArea) {
        auto region =
            c.directRegion(2, (*layout)->scratchElems[c.rank] * interp::dataTypeSize(op.type));
        if (!region)
          return region.takeError();
      }
    }
    args.peersAlike = engines;
    auto prepared = device->prepare(args);
    if (!prepared)
      return collError(collInvalidUsage, llvm::toString(prepared.takeError()));
    if (prepared->copyEngineCopies)
      c.sayCopyEngines(op, choice.algo->name, callBytes, prepared->copyEngineCopies);
    if (out.postBytes) {
      out.after.push_back({out.postDst, out.postSrc, out.postBytes});
      out.postBytes = 0;
    }
    c.publishCall(op);
    out.device = device;
    return llvm::Error::success();
  }

  // The FIFO bytes per slot this call fills: one slice of a chunk.
  const uint64_t es = interp::dataTypeSize(op.type);
  const uint64_t payload =
      std::min<uint64_t>(c.config.slotBytes[static_cast<int>(plan.protocol)],
                         (*layout)->maxChunkElems * es);
  if (payload > entry->committedBytes) {
    for (const auto &[sender, receiver, channel] : entry->sharedConnections)
      if (llvm::Error err = c.transport->commit(sender, receiver, channel, plan.protocol, payload))
        return collError(collSystemError, llvm::toString(std::move(err)));
    entry->committedBytes = payload;
  }
  void *scratch = nullptr;
  if (direct) {
    // Scratch in the area too, and the call's offsets published there
    // before any signal of the call (Direct.cpp).
    auto region = c.directRegion(2, (*layout)->scratchElems[c.rank] * es);
    if (!region)
      return region.takeError();
    scratch = *region;
    c.publishDirectBuffers({buffers->in, buffers->out, scratch});
    out.direct = direct;
  }
  if (llvm::Error err =
          entry->runner->bind(**layout, op.type, op.op, buffers->in, buffers->out, scratch))
    return collError(collSystemError, llvm::toString(std::move(err)));
  c.publishCall(op);
  out.tag = callTag(c.callSeq, op);
  entry->runner->tagSends(out.tag);
  out.runner = entry->runner.get();
  if (c.trace) {
    out.traces.assign(static_cast<size_t>(plan.tbCount(c.rank)), {});
    out.runner->setTrace(&out.traces);
  } else {
    out.runner->setTrace(nullptr);
  }
  out.runner->appendTasks(tasks);
  return llvm::Error::success();
}

} // namespace coll::rt
