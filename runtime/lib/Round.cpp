//===- Round.cpp - Calls that run together ----------------------------------===//

#include "CommImpl.h"

#include "coll/ir/Geometry.h"

#include <cerrno>
#include <fstream>

#include <poll.h>
#include <signal.h>

namespace coll::rt {

namespace {

bool processGone(int pidfd, int pid) {
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }
  if (pid <= 0)
    return false;
  if (::kill(pid, 0) != 0 && errno == ESRCH)
    return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  size_t close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z';
}

} // namespace

llvm::Error Communicator::Impl::checkDevices(bool wait) {
  llvm::Error first = llvm::Error::success();
  for (auto &[plan, runner] : devices) {
    auto ended = runner->poll(wait);
    if (ended || first) {
      if (!ended)
        llvm::consumeError(ended.takeError());
      continue;
    }
    // A kernel stopped at its watchdog: the FIFOs it shares with the other
    // ranks are mid-transfer, so this communicator cannot go on. A peer
    // process found dead is the likely cause, and is named.
    std::string text = llvm::toString(ended.takeError());
    pollPeers();
    const bool watchdog = text.find("watchdog:") != std::string::npos;
    const std::string kernel =
        (backend && backend->emulated() ? "emulated device: " : "GPU: ") + text;
    first = kernelFailure(watchdog ? collTimeout : collUnhandledCudaError, kernel, watchdog);
    std::string message;
    collResult_t result = takeResult(std::move(first), message);
    breakWith(result, message);
    {
      std::lock_guard<std::mutex> lock(errorMutex);
      lastError = message;
    }
    first = collError(result, message);
  }
  return first;
}

llvm::Error Communicator::Impl::kernelFailure(collResult_t kind, const std::string &kernel,
                                              bool watchdog) {
  // A device that failed (lost, reset, a fault of the kernel) ends the
  // kernels of the host's other ranks through the stop word, where they
  // would otherwise wait for it until their watchdogs.
  const bool first = !watchdog && !stop->raised();
  if (first)
    stop->fail(kind, llvm::formatv("rank {0}'s device failed: {1}", rank, kernel));
  if (first || !stop->stopping())
    return collError(kind, kernel);
  std::string cause;
  collResult_t result = takeResult(stop->error(), cause);
  return collError(result, cause + "; the kernel's report: " + kernel);
}

void Communicator::Impl::publishCall(const Op &op) {
  // Only the calling thread writes it: a plain increment, published.
  const uint64_t seq = callSeq.load(std::memory_order_relaxed) + 1;
  callSeq.store(seq, std::memory_order_relaxed);
  transport::CallDescriptor &d =
      transport->slot(transport->myLocalIndex()).calls[seq % transport::CallRing];
  d.seq.store(0, std::memory_order_relaxed);
  d.kind.store(static_cast<uint32_t>(op.kind), std::memory_order_relaxed);
  d.type.store(static_cast<uint32_t>(op.type), std::memory_order_relaxed);
  d.op.store(static_cast<uint32_t>(op.op), std::memory_order_relaxed);
  d.root.store(op.root, std::memory_order_relaxed);
  d.count.store(op.count, std::memory_order_relaxed);
  d.seq.store(seq, std::memory_order_release);
  // What a failure on another rank reads to tell whether this rank has
  // reached the failed call (SharedStop); then catchUp(), after prepare.
  transport->slot(transport->myLocalIndex()).current.store(seq, std::memory_order_seq_cst);
}

void Communicator::Impl::pollPeers(bool processes) {
  if (stop->stopping())
    return;
  for (const Watched &w : processes ? llvm::ArrayRef<Watched>(watched) : llvm::ArrayRef<Watched>())
    if (processGone(w.pidfd, w.pid)) {
      stop->fail(collRemoteError,
                 llvm::formatv("rank {0} (process {1} on {2}) exited while rank {3} waited for "
                               "it",
                               w.rank, w.pid, peers[w.rank].hostname, rank));
      return;
    }
  // A peer that started a different call as the same call number.
  const transport::CallDescriptor &mine =
      transport->slot(transport->myLocalIndex()).calls[callSeq % transport::CallRing];
  if (mine.seq.load(std::memory_order_acquire) != callSeq)
    return;
  auto describe = [](const transport::CallDescriptor &d) {
    auto kind = static_cast<OpKind>(d.kind.load(std::memory_order_relaxed));
    std::string text = llvm::formatv("{0} of {1} {2}", opKindName(kind),
                                     d.count.load(std::memory_order_relaxed),
                                     interp::dataTypeName(static_cast<DataType>(
                                         d.type.load(std::memory_order_relaxed))))
                           .str();
    if (kind == OpKind::AllReduce || kind == OpKind::Reduce || kind == OpKind::ReduceScatter)
      text += std::string(" ") +
              interp::reduceOpName(static_cast<ReduceOp>(d.op.load(std::memory_order_relaxed)))
                  .str();
    if (ir::collectiveInfo(collectiveOf(kind)).hasRoot)
      text += " root " + std::to_string(d.root.load(std::memory_order_relaxed));
    return text;
  };
  // What makes two calls the same, read without building their descriptions
  // (this runs after every call).
  auto fields = [](const transport::CallDescriptor &d) {
    auto kind = static_cast<OpKind>(d.kind.load(std::memory_order_relaxed));
    const bool reduces =
        kind == OpKind::AllReduce || kind == OpKind::Reduce || kind == OpKind::ReduceScatter;
    return std::make_tuple(d.kind.load(std::memory_order_relaxed),
                           d.count.load(std::memory_order_relaxed),
                           d.type.load(std::memory_order_relaxed),
                           reduces ? d.op.load(std::memory_order_relaxed) : uint32_t{0},
                           ir::collectiveInfo(collectiveOf(kind)).hasRoot
                               ? d.root.load(std::memory_order_relaxed)
                               : int32_t{0});
  };
  const auto myFields = fields(mine);
  for (int i = 0; i < static_cast<int>(transport->localRanks().size()); ++i) {
    if (i == transport->myLocalIndex())
      continue;
    const transport::CallDescriptor &theirs =
        transport->slot(i).calls[callSeq % transport::CallRing];
    if (theirs.seq.load(std::memory_order_acquire) != callSeq)
      continue;
    if (fields(theirs) == myFields)
      continue;
    const std::string myCall = describe(mine);
    std::string theirCall = describe(theirs);
    if (theirs.seq.load(std::memory_order_acquire) == callSeq && theirCall != myCall) {
      stop->fail(collInvalidUsage,
                 llvm::formatv("mismatched calls: as call {0} on this communicator rank {1} "
                               "called {2} and rank {3} called {4}",
                               callSeq.load(), rank, myCall, transport->localRanks()[i].rank,
                               theirCall));
      return;
    }
  }
}

void Communicator::Impl::breakWith(collResult_t result, const std::string &message) {
  int expected = collSuccess;
  asyncError.compare_exchange_strong(expected, result);
  if (!stop->stopping())
    stop->fail(result, llvm::formatv("rank {0}: {1}", rank, message));
}

llvm::Error Communicator::Impl::retirement() {
  const int broken = asyncError.load(std::memory_order_acquire);
  if (broken == collSuccess && !stop->raised())
    return llvm::Error::success();
  if (!stop->raised()) {
    // Broken with no stop raised on the host: a lost rank found between
    // calls (Liveness.cpp), whose report is the last error.
    std::string report;
    {
      std::lock_guard<std::mutex> lock(errorMutex);
      report = lastError;
    }
    auto e = std::make_unique<CollError>(
        static_cast<collResult_t>(broken),
        llvm::formatv("the communicator retired at an earlier failure: {0}", report).str());
    e->retired = true;
    return llvm::Error(std::move(e));
  }
  // The first failure of the host (breakWith raises the stop for this
  // rank's own).
  const uint64_t failed = stop->failedCall(), reached = callSeq.load(std::memory_order_relaxed);
  if (broken == collSuccess && failed > reached + 1)
    return llvm::Error::success(); // behind: the peers completed this call, which runs
  std::string report;
  collResult_t result = takeResult(stop->error(), report);
  if (broken == collSuccess && failed == reached + 1)
    return collError(result, report); // the peers failed the call this rank is about to make
  auto e = std::make_unique<CollError>(
      broken != collSuccess ? static_cast<collResult_t>(broken) : result,
      llvm::formatv("the communicator retired at an earlier failure: {0}", report).str());
  e->retired = true;
  return llvm::Error(std::move(e));
}

namespace {

/// One round: for each communicator it involves, one collective or the
/// point-to-point operations of a group, run in one engine launch (and on
/// devices side by side).
class Round {
public:
  /// `impls[u]`: the Impl of `units[u].comm`.
  Round(llvm::ArrayRef<Communicator::Unit> units, llvm::ArrayRef<Communicator::Impl *> impls)
      : units(units), impls(impls), runs(units.size(), false) {
    // Made in place: SmallVector's (size) constructor copies a default one.
    prepared.resize(units.size());
    deviceErrors.resize(units.size());
  }

  llvm::Error run() {
    begin();
    prepare();
    for (Communicator::Impl *c : comms)
      c->stop->catchUp();
    if (!first) {
      const auto t0 = anyTracing() ? std::chrono::steady_clock::now()
                                   : std::chrono::steady_clock::time_point{};
      launch();
      checkMismatches();
      finish(t0);
    }
    for (Communicator::Impl *c : comms)
      c->inCall.fetch_sub(1, std::memory_order_acq_rel);
    return std::move(first);
  }

private:
  Communicator::Impl &impl(size_t u) const { return *impls[u]; }

  /// Records a failure as the communicator's last error; the round returns
  /// the first one (with its CollError flags: a drop-in may still hand the
  /// call on). A call refused on a retired communicator is no new failure:
  /// it is said at INFO, not WARN.
  collResult_t record(Communicator::Impl &c, llvm::Error err) {
    std::unique_ptr<CollError> e;
    llvm::handleAllErrors(
        std::move(err), [&](std::unique_ptr<CollError> ce) { e = std::move(ce); },
        [&](const llvm::ErrorInfoBase &other) {
          e = std::make_unique<CollError>(collSystemError, other.message());
        });
    const collResult_t result = e->result;
    {
      std::lock_guard<std::mutex> lock(c.errorMutex);
      c.lastError = e->message;
    }
    if (e->retired && !e->begun)
      COLL_LOG(Info, Coll, c.rank, e->message);
    else
      COLL_LOG(Warn, Coll, c.rank,
               llvm::formatv("{0}: {1}", collGetErrorString(result), e->message));
    if (!first)
      first = llvm::Error(std::move(e));
    return result;
  }

  /// Records a failure that breaks `c` (and raises its host's stop word).
  void breakOn(Communicator::Impl &c, llvm::Error err) {
    collResult_t result = record(c, std::move(err));
    std::string message;
    {
      std::lock_guard<std::mutex> lock(c.errorMutex);
      message = c.lastError;
    }
    c.breakWith(result, message);
  }

  /// Marks each communicator in a call and holds its device runners; a
  /// broken communicator does not run.
  void begin() {
    for (size_t u = 0; u < units.size(); ++u) {
      Communicator::Impl &c = impl(u);
      c.inCall.fetch_add(1, std::memory_order_acq_rel);
      comms.push_back(&c);
      // Device runners are held for the call (checkAsyncError() keeps off
      // them): those the communicator has, or makes for this unit. A call
      // on host buffers of a communicator without any touches none, and
      // skips the lock.
      const bool deviceUnit =
          c.config.emulatedDevice ||
          llvm::any_of(units[u].ops, [](const Op &op) { return op.device >= 0; });
      if (deviceUnit || !c.devices.empty())
        deviceLocks.emplace_back(c.deviceMutex);
      // Kernels of earlier calls on a GPU end after their call returned:
      // one stopped by its watchdog breaks the communicator now.
      if (!c.devices.empty() && c.backend && !c.backend->emulated())
        if (llvm::Error err = c.checkDevices(false))
          llvm::consumeError(std::move(err)); // recorded below, as the broken communicator
      // A communicator that retired at an earlier failure (this rank's, or
      // a peer's of this host) runs nothing; nor does a call a peer has
      // already failed. Neither touches a buffer.
      if (llvm::Error retired = c.retirement()) {
        breakOn(c, std::move(retired));
        continue;
      }
      runs[u] = true;
      anyOnDevice = anyOnDevice || c.config.emulatedDevice || units[u].ops.front().device >= 0;
      // The first program with direct steps makes the host's shared areas,
      // collectively, and a built-in is compiled at its first use, with the
      // other ranks (compileOnFirstUse): until then, ranks driven by one
      // thread prepare side by side too.
      anyCollectiveSetup = anyCollectiveSetup || (!c.directArea && c.hasDirectPrograms()) ||
                           (c.registry && c.registry->anyPending());
    }
  }

  /// Each unit's tasks (host) or enqueued work (device). A unit on a device
  /// may first make its executor, which is collective (the ranks exchange
  /// IPC handles): with several ranks driven by this thread (collCommInitAll
  /// and a group), each prepares on a thread of its own.
  void prepare() {
    llvm::SmallVector<llvm::Error, 1> errors;
    llvm::SmallVector<llvm::SmallVector<Task, 4>, 1> unitTasks(units.size());
    llvm::SmallVector<std::vector<std::unique_ptr<P2PTask>>, 1> unitP2P;
    unitP2P.resize(units.size());
    for (size_t u = 0; u < units.size(); ++u)
      errors.push_back(llvm::Error::success());
    auto prepareOne = [&](size_t u) {
      Communicator::Impl &c = impl(u);
      errors[u] = units[u].ops.front().pointToPoint()
                      ? prepareP2P(c, units[u].ops, unitP2P[u], unitTasks[u])
                      : prepareCollective(c, units[u].ops.front(), prepared[u], unitTasks[u],
                                          unitP2P[u]);
    };
    if ((anyOnDevice || anyCollectiveSetup) && units.size() > 1) {
      std::vector<std::thread> threads;
      for (size_t u = 0; u < units.size(); ++u)
        if (runs[u])
          threads.emplace_back(prepareOne, u);
      for (std::thread &t : threads)
        t.join();
    } else {
      for (size_t u = 0; u < units.size(); ++u)
        if (runs[u])
          prepareOne(u);
    }
    for (size_t u = 0; u < units.size(); ++u) {
      if (errors[u])
        record(impl(u), std::move(errors[u]));
      for (Task &t : unitTasks[u])
        tasks.push_back(std::move(t));
      for (auto &t : unitP2P[u])
        p2p.push_back(std::move(t));
    }
  }

  bool anyTracing() const {
    return llvm::any_of(comms, [](const Communicator::Impl *c) { return c->trace != nullptr; });
  }

  /// Runs the round. On a GPU every unit's work is enqueued before any
  /// caller's stream is made to wait for it, so that ranks of this process
  /// sharing a GPU run side by side; the call returns without waiting. On
  /// the emulation an enqueue returns when the kernel has ended, so the
  /// ranks of this round launch at once, one thread each when there is more
  /// than one thing to run. The host tasks run on the engine meanwhile.
  void launch() {
    llvm::SmallVector<size_t, 1> onGpu, onEmulation;
    for (size_t u = 0; u < units.size(); ++u)
      if (prepared[u].device)
        (prepared[u].comm->backend->emulated() ? onEmulation : onGpu).push_back(u);
    auto enqueueOne = [&](size_t u) {
      PreparedCollective &p = prepared[u];
      // A caller's stream is not the emulation's: it orders nothing there.
      const bool emulated = p.comm->backend->emulated();
      llvm::Error err = p.device->enqueue(emulated ? nullptr : p.op->stream, p.before, p.after);
      if (!err && emulated) {
        auto ended = p.device->poll(true);
        if (!ended)
          err = ended.takeError();
      }
      if (err)
        deviceErrors[u] = llvm::toString(std::move(err));
    };
    for (size_t u : onGpu)
      enqueueOne(u);
    for (size_t u : onGpu)
      if (deviceErrors[u].empty())
        if (llvm::Error err = prepared[u].device->join(prepared[u].op->stream))
          deviceErrors[u] = llvm::toString(std::move(err));
    // With COLL_TRACE a call on a GPU waits for its kernel, whose timeline
    // is collected in finish() (on the emulation it has ended when enqueue
    // returns).
    for (size_t u : onGpu)
      if (deviceErrors[u].empty() && prepared[u].comm->trace)
        if (auto ended = prepared[u].device->poll(true); !ended)
          deviceErrors[u] = llvm::toString(ended.takeError());
    std::vector<std::thread> deviceThreads;
    const bool alone = tasks.empty() && onEmulation.size() == 1;
    for (size_t u : onEmulation) {
      if (alone)
        enqueueOne(u);
      else
        deviceThreads.emplace_back(enqueueOne, u);
    }
    runHostTasks();
    for (std::thread &t : deviceThreads)
      t.join();
  }

  /// The host tasks of every unit in one engine launch; a small round runs
  /// on this thread alone (EngineOptions::soloWork).
  void runHostTasks() {
    if (tasks.empty())
      return;
    uint64_t work = 0;
    for (size_t u = 0; u < units.size(); ++u)
      if (prepared[u].runner && !prepared[u].device)
        work += prepared[u].runner->work();
    for (const auto &t : p2p)
      for (const Op *op : t->ops)
        work += op->count * interp::dataTypeSize(op->type);
    interp::host::IdlePoll poll;
    poll.poll = [](void *arg) {
      for (Communicator::Impl *c : *static_cast<llvm::SmallVectorImpl<Communicator::Impl *> *>(arg))
        c->pollPeers();
    };
    poll.arg = &comms;
    Communicator::Impl &lead = impl(0);
    if (llvm::Error err = lead.engine->run(tasks, poll, work))
      record(lead, collError(collSystemError, llvm::toString(std::move(err))));
  }

  /// A mismatched call can complete when the data happen to fit. On the
  /// host, each sender's tag in the connections this rank received on says
  /// which call the data belonged to (no extra cache miss); a differing one
  /// is looked up in the peers' call descriptors for the report. After a
  /// kernel, the descriptors are compared, and a dead peer process gives the
  /// watchdog's report its cause.
  void checkMismatches() {
    if (anyOnDevice) {
      for (Communicator::Impl *c : comms)
        c->pollPeers(true);
      return;
    }
    for (const PreparedCollective &p : prepared) {
      if (!p.runner || p.comm->stop->stopping())
        continue;
      for (const auto &[sender, tag] : p.runner->receivedTags()) {
        if (tag >> 32 != p.tag >> 32 || tag == p.tag)
          continue; // another call's (or nobody's) tag, or ours
        p.comm->pollPeers(false);
        if (!p.comm->stop->stopping())
          p.comm->stop->fail(collInvalidUsage,
                             llvm::formatv("mismatched calls: as call {0} on this communicator "
                                           "rank {1} received data from rank {2} for a different "
                                           "call",
                                           p.tag >> 32, p.comm->rank, sender));
        break;
      }
    }
  }

  /// Each unit's outcome: a failed kernel or a stop breaks its
  /// communicator; otherwise averages, timelines and copies out.
  void finish(std::chrono::steady_clock::time_point t0) {
    for (size_t u = 0; u < units.size(); ++u) {
      Communicator::Impl &c = impl(u);
      if (!deviceErrors[u].empty()) {
        // The FIFOs shared with the other ranks are mid-transfer: this
        // communicator cannot run another call. A peer found dead
        // (checkMismatches) is the cause; the kernel's report says where it
        // waited.
        const bool emulated = c.backend && c.backend->emulated();
        const std::string kernel = (emulated ? "emulated device: " : "GPU: ") + deviceErrors[u];
        const bool watchdog = deviceErrors[u].find("watchdog:") != std::string::npos;
        // What the CUDA runtime reported (the emulation's too: it plays
        // CUDA's part) is NCCL's ncclUnhandledCudaError.
        const bool cuda = deviceErrors[u].find("CUDA error cuda") != std::string::npos;
        const collResult_t kind = watchdog              ? collTimeout
                                  : cuda || !emulated ? collUnhandledCudaError
                                                      : collSystemError;
        breakOn(c, c.kernelFailure(kind, kernel, watchdog));
        continue;
      }
      if (c.stop->stopping()) {
        llvm::Error stopped = c.stop->error();
        if (c.stop->failedCall() < c.callSeq) {
          // A failure of an earlier call, which this rank had completed:
          // the communicator had retired when this call began.
          stopped = llvm::handleErrors(std::move(stopped), [](std::unique_ptr<CollError> e) {
            e->retired = e->begun = true;
            return llvm::Error(std::move(e));
          });
        }
        breakOn(c, std::move(stopped));
        continue;
      }
      PreparedCollective &p = prepared[u];
      if (p.runner)
        p.runner->finishAverage();
      if (p.direct) // this rank's signals of the call: the next call's base
        p.direct->advance(*p.plan, p.runner->iterations());
      if (p.runner && c.trace) {
        std::lock_guard<std::mutex> lock(c.trace->mutex);
        c.trace->timeline.addCall(*p.plan, c.rank, p.op->type, t0,
                                  std::chrono::steady_clock::now(), p.traces);
      } else if (p.device && c.trace) {
        // The kernel's timeline: it has ended (launch()).
        std::lock_guard<std::mutex> lock(c.trace->mutex);
        if (llvm::Error err = p.device->collectEnqueued(c.trace->timeline, p.op->type, t0,
                                                     std::chrono::steady_clock::now())) {
          breakOn(c, collError(collSystemError, llvm::toString(std::move(err))));
          continue;
        }
      }
      if (p.postBytes)
        std::memcpy(p.postDst, p.postSrc, p.postBytes);
    }
  }

  llvm::ArrayRef<Communicator::Unit> units;
  llvm::ArrayRef<Communicator::Impl *> impls;
  // A call of one communicator is the common case: its bookkeeping stays on
  // the stack (every allocation here costs a few percent of a small call).
  llvm::SmallVector<PreparedCollective, 1> prepared;
  llvm::SmallVector<bool, 1> runs;
  llvm::SmallVector<std::string, 1> deviceErrors;
  llvm::SmallVector<Task, 4> tasks;
  std::vector<std::unique_ptr<P2PTask>> p2p;
  llvm::SmallVector<Communicator::Impl *, 1> comms;
  llvm::SmallVector<std::unique_lock<std::mutex>, 1> deviceLocks;
  bool anyOnDevice = false;
  bool anyCollectiveSetup = false;
  llvm::Error first = llvm::Error::success();
};

} // namespace

llvm::Error Communicator::runRound(llvm::ArrayRef<Unit> given) {
  DeviceP2PStaging staging;
  auto units = staging.stageIn(given);
  if (!units)
    return units.takeError();
  llvm::SmallVector<Impl *, 1> impls;
  for (const Unit &u : *units)
    impls.push_back(u.comm->impl.get());
  if (llvm::Error err = Round(*units, impls).run())
    return err;
  return staging.stageOut();
}

llvm::Error Communicator::runQueued(llvm::ArrayRef<std::pair<Communicator *, Op>> ops) {
  std::vector<Communicator *> order;
  std::vector<std::vector<std::vector<Op>>> units;
  for (const auto &[comm, op] : ops) {
    size_t idx = std::find(order.begin(), order.end(), comm) - order.begin();
    if (idx == order.size()) {
      order.push_back(comm);
      units.emplace_back();
    }
    auto &list = units[idx];
    if (!list.empty() && op.pointToPoint() && list.back().front().pointToPoint())
      list.back().push_back(op);
    else
      list.push_back({op});
  }
  for (size_t round = 0;; ++round) {
    std::vector<Unit> batch;
    for (size_t i = 0; i < order.size(); ++i)
      if (round < units[i].size())
        batch.push_back({order[i], units[i][round]});
    if (batch.empty())
      return llvm::Error::success();
    if (llvm::Error err = runRound(batch))
      return err;
  }
}

} // namespace coll::rt
