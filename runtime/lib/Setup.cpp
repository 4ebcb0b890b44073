//===- Setup.cpp - Making a communicator ------------------------------------===//
//
// Collective: every rank of the job runs it at once. Each failure is agreed
// on (agree()), so that all ranks fail together with the first cause.
//
//===----------------------------------------------------------------------===//

#include "CommImpl.h"

#include "llvm/ADT/Hashing.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>

#include <sys/syscall.h>
#include <unistd.h>

namespace coll::rt {

llvm::Error Communicator::Impl::agree(llvm::Error local, llvm::StringRef what, bool *together) {
  // `together`: set when the ranks exchanged their outcomes and some failed
  // (so every rank returns an error here), not when the exchange failed.
  if (together)
    *together = false;
  struct Status {
    int32_t failed = 0;
    char message[244] = {};
  };
  std::vector<Status> all(static_cast<size_t>(nranks));
  std::string mine;
  // A rank that failed returns its own error of its own kind (a wrong
  // argument stays one; a cause without a kind is a system error); the
  // others learn which rank failed first and why.
  collResult_t kind = collSuccess;
  const bool failedHere = static_cast<bool>(local);
  if (failedHere) {
    all[rank].failed = 1;
    kind = takeResult(std::move(local), mine);
    std::snprintf(all[rank].message, sizeof all[rank].message, "%s", mine.c_str());
  }
  if (llvm::Error err = boot->allgather(all.data(), sizeof(Status)))
    return collError(collRemoteError,
                     llvm::formatv("{0}: lost contact with the other ranks: {1}", what,
                                   llvm::toString(std::move(err))));
  if (failedHere) {
    if (together)
      *together = true;
    return collError(kind, what + ": " + mine);
  }
  for (int r = 0; r < nranks; ++r)
    if (all[r].failed) {
      if (together)
        *together = true;
      all[r].message[sizeof all[r].message - 1] = 0;
      return collError(collRemoteError,
                       llvm::formatv("{0}: rank {1} failed: {2}", what, r, all[r].message));
    }
  return llvm::Error::success();
}

llvm::Error Communicator::Impl::setup() {
  peers = boot->peers();
  rank = boot->rank();
  nranks = boot->nranks();
  if (!config.traceFile.empty()) {
    trace = traceFileFor(tracePath(config.traceFile, rank));
    std::lock_guard<std::mutex> lock(trace->mutex);
    trace->timeline.setRankLabel(
        rank, llvm::formatv("rank {0} (pid {1}, {2})", rank, getpid(), hostName()).str());
  }
  const PeerInfo &me = peers[rank];
  for (const PeerInfo &p : peers)
    if (p.configHash != me.configHash)
      return collError(collInvalidUsage,
                       llvm::formatv("rank {0} and rank {1} run with different settings "
                                     "(COLL_*_SLOT_BYTES, COLL_COPY_ENGINE, "
                                     "COLL_EMULATED_DEVICE, COLL_COMPILE_ON_FIRST_USE or the "
                                     "built-in algorithm set)",
                                     rank, p.rank));
  findShape();
  const LocalRanks here = findLocalRanks();
  // The tuning file first: the built-ins only a tuning table picks are
  // compiled when it names them (Selection.h).
  if (llvm::Error err = readTuningRules())
    return err;
  if (llvm::Error err = loadAlgorithms())
    return err;
  if (llvm::Error err = agreeOnCrowding())
    return err;
  if (!config.topoFile.empty())
    if (llvm::Error err = synthesizeForJob())
      return err;
  if (llvm::Error err = createTransport(here))
    return err;
  if (llvm::Error err = createEngine())
    return err;
  if (llvm::Error err = setupNetwork(here.ranks, here.allInProcess))
    return err;
  watchLocalProcesses(here);
  if (llvm::Error err = startLiveness())
    return err;
  if (rank == 0)
    logSelection();
  return llvm::Error::success();
}

void Communicator::Impl::findShape() {
  // Hosts in order of their first rank; the node shape.
  std::vector<uint64_t> hosts;
  hostOf.assign(nranks, 0);
  for (int r = 0; r < nranks; ++r) {
    auto it = std::find(hosts.begin(), hosts.end(), peers[r].hostHash);
    hostOf[r] = static_cast<int>(it - hosts.begin());
    if (it == hosts.end())
      hosts.push_back(peers[r].hostHash);
  }
  shape.nranks = nranks;
  shape.nodes = static_cast<int>(hosts.size());
  const int perHost = nranks / shape.nodes;
  bool regular = perHost * shape.nodes == nranks;
  for (int r = 0; r < nranks && regular; ++r)
    regular = hostOf[r] == r / perHost;
  shape.gpus = regular ? perHost : 0;
}

Communicator::Impl::LocalRanks Communicator::Impl::findLocalRanks() {
  LocalRanks here;
  std::vector<uint64_t> procs;
  const PeerInfo &me = peers[rank];
  for (int r = 0; r < nranks; ++r) {
    if (peers[r].processHash != me.processHash)
      here.allInProcess = false;
    if (peers[r].hostHash != me.hostHash)
      continue;
    auto it = std::find(procs.begin(), procs.end(), peers[r].processHash);
    int proc = static_cast<int>(it - procs.begin());
    if (it == procs.end())
      procs.push_back(peers[r].processHash);
    if (r == rank)
      here.myIndex = static_cast<int>(here.ranks.size());
    here.ranks.push_back({r, proc, peers[r].pid});
  }
  nprocs = static_cast<int>(procs.size());
  COLL_LOG(Info, Init, rank,
           llvm::formatv("rank {0} of {1}: host {2} ({3} hosts; {4} ranks and {5} processes on "
                         "this host); node shape {6}",
                         rank, nranks, me.hostname, shape.nodes, here.ranks.size(), nprocs,
                         shape.gpus ? llvm::formatv("{0} x {1}", shape.nodes, shape.gpus).str()
                                    : std::string("irregular")));
  return here;
}

llvm::Error Communicator::Impl::loadAlgorithms() {
  RegistryOptions ro;
  ro.algoDir = config.algoDir;
  ro.algoFiles = config.algoFiles;
  ro.builtin = config.builtin;
  ro.cacheDir = config.cacheDir;
  ro.rank = rank; // a plan read from the program cache: this rank's only
  ro.deferBuiltins = config.compileOnFirstUse == 1 ||
                     (config.compileOnFirstUse < 0 && nranks > FirstUseCompileRanks);
  for (const TuningRule &r : userRules)
    if (r.kind == TuningRule::Target::Algorithm)
      ro.namedByRules.push_back(r.target);
  // With a program cache, the first rank of each host loads first: it
  // compiles what the cache lacks and stores it, while the host's other
  // ranks wait, then read their own plans. A job of a new shape compiles
  // each program once per host rather than once per rank, and one rank of
  // a host, not all of them, holds the whole job's program meanwhile.
  const bool hostLeader =
      std::find(hostOf.begin(), hostOf.end(), hostOf[rank]) - hostOf.begin() == rank;
  const bool staged = !config.cacheDir.empty();
  std::optional<llvm::Expected<Registry>> first;
  if (staged && hostLeader)
    first.emplace(Registry::load(ro, shape));
  if (staged)
    if (llvm::Error err = agree(llvm::Error::success(),
                                "waiting for the first rank of each host to compile the programs")) {
      if (first && !*first)
        llvm::consumeError(first->takeError());
      return err;
    }
  llvm::Expected<Registry> loaded = first ? std::move(*first) : Registry::load(ro, shape);
  if (!loaded)
    return agree(collError(collInvalidArgument, llvm::toString(loaded.takeError())),
                 "loading algorithms");
  registry = std::move(*loaded);
  COLL_LOG(Info, Init, rank,
           registry->cacheDirectory().empty()
               ? llvm::formatv("{0} programs compiled for this shape (no program cache)",
                               registry->programsCompiled())
                     .str()
               : llvm::formatv("{0} programs compiled for this shape, {1} read from the "
                               "program cache {2}; {3} parsed for their parameters",
                               registry->programsCompiled(), registry->programsFromCache(),
                               registry->cacheDirectory(), registry->programsInspected())
                     .str());
  if (registry->programsDeferred())
    COLL_LOG(Info, Init, rank,
             llvm::formatv("{0} built-in programs are compiled at their first use by a call "
                           "(COLL_COMPILE_ON_FIRST_USE{1})",
                           registry->programsDeferred(),
                           config.compileOnFirstUse == 1
                               ? "=1"
                               : llvm::formatv(" unset, and more than {0} ranks",
                                               FirstUseCompileRanks)
                                     .str()));
  if (llvm::Error err = agree(llvm::Error::success(), "loading algorithms"))
    return err;
  std::vector<uint64_t> prints(static_cast<size_t>(nranks));
  prints[rank] = registry->fingerprint();
  if (llvm::Error err = boot->allgather(prints.data(), sizeof(uint64_t)))
    return collError(collRemoteError, "comparing algorithms: " + llvm::toString(std::move(err)));
  for (int r = 0; r < nranks; ++r)
    if (prints[r] != prints[rank])
      return collError(collInvalidUsage,
                       llvm::formatv("rank {0} loaded different algorithms than rank {1} "
                                     "(COLL_ALGO_DIR, COLL_ALGO_FILES, COLL_TUNING_FILE and the "
                                     "files must be the same on every rank)",
                                     r, rank));
  return llvm::Error::success();
}

llvm::Error Communicator::Impl::compileOnFirstUse(const LoadedAlgorithm &algo) {
  const std::string what =
      llvm::formatv("compiling {0} ({1}) for {2} ranks at its first use", algo.name, algo.origin,
                    nranks)
          .str();
  const auto start = std::chrono::steady_clock::now();
  // As at creation (loadAlgorithms): with a program cache, the first rank
  // of each host compiles and stores the program while the host's other
  // ranks wait, then they read their own plans.
  const bool hostLeader =
      std::find(hostOf.begin(), hostOf.end(), hostOf[rank]) - hostOf.begin() == rank;
  const bool staged = !config.cacheDir.empty();
  std::optional<llvm::Expected<std::shared_ptr<const Compiled>>> first;
  if (staged && hostLeader)
    first.emplace(registry->compileDeferred(algo));
  if (staged)
    if (llvm::Error err = agree(llvm::Error::success(),
                                "waiting for the first rank of each host: " + what)) {
      if (first && !*first)
        llvm::consumeError(first->takeError());
      return err;
    }
  llvm::Expected<std::shared_ptr<const Compiled>> mine =
      first ? std::move(*first) : registry->compileDeferred(algo);
  std::shared_ptr<const Compiled> program;
  llvm::Error local = llvm::Error::success();
  if (mine)
    program = *mine;
  else
    local = mine.takeError();
  // The same program on every rank, or none: the outcomes, then the IR's
  // hashes (as loadAlgorithms compares the registries).
  bool together = false;
  if (llvm::Error err = agree(std::move(local), what, &together)) {
    if (!together) // the ranks could not compare: nothing is settled
      return err;
    std::string message;
    takeResult(std::move(err), message);
    COLL_LOG(Info, Init, rank, message + "; it serves nothing on this communicator");
    Registry::settle(algo, nullptr, message);
    return llvm::Error::success();
  }
  std::vector<uint64_t> hashes(static_cast<size_t>(nranks));
  hashes[rank] = program->hash;
  if (llvm::Error err = boot->allgather(hashes.data(), sizeof(uint64_t)))
    return collError(collRemoteError, llvm::formatv("{0}: lost contact with the other ranks: {1}",
                                                    what, llvm::toString(std::move(err))));
  for (int r = 0; r < nranks; ++r)
    if (hashes[r] != hashes[rank]) {
      std::string message = llvm::formatv("{0}: rank {1} compiled another program than rank {2} "
                                          "(the same build of Coll must run on every rank)",
                                          what, r, rank);
      COLL_LOG(Info, Init, rank, message);
      Registry::settle(algo, nullptr, message);
      return llvm::Error::success();
    }
  Registry::settle(algo, program, "");
  COLL_LOG(Info, Init, rank,
           llvm::formatv("{0}: {1:f3} s, {2} plan steps held", what,
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                             .count(),
                         program->plan.steps.size()));
  return llvm::Error::success();
}

llvm::Error Communicator::Impl::agreeOnCrowding() {
  onlineCpus = sysconf(_SC_NPROCESSORS_ONLN);
  hostCrowded = onlineCpus > 0 && nprocs > onlineCpus;
  std::vector<uint64_t> crowdedAt(static_cast<size_t>(nranks));
  crowdedAt[rank] = hostCrowded;
  if (llvm::Error err = boot->allgather(crowdedAt.data(), sizeof(uint64_t)))
    return collError(collRemoteError,
                     "comparing the hosts' CPUs: " + llvm::toString(std::move(err)));
  crowded = std::any_of(crowdedAt.begin(), crowdedAt.end(), [](uint64_t c) { return c; });
  return llvm::Error::success();
}

llvm::Error Communicator::Impl::readTuningRules() {
  if (!config.tuningFile.empty()) {
    auto rules = synth::readTuningFile(config.tuningFile);
    if (!rules)
      return agree(collError(collInvalidArgument, llvm::toString(rules.takeError())),
                   "reading the tuning file");
    userRules = std::move(*rules);
  }
  return agree(llvm::Error::success(), "reading the tuning file");
}

llvm::Error Communicator::Impl::createTransport(const LocalRanks &here) {
  transport::FifoLayout layout;
  layout.nranks = nranks;
  p2pChannel = registry->maxChannel() + 1;
  layout.channels = p2pChannel + 2; // the grouped sends', then the tagged ones
  layout.slotBytes = config.slotBytes;
  layout.used[static_cast<int>(ir::Protocol::Simple)] = true; // point to point
  for (const LoadedAlgorithm &a : registry->algorithms())
    layout.used[static_cast<int>(a.protocol)] = true;
  // Segment names carry the host: "hosts" of one machine (COLL_HOSTID,
  // network namespaces) share /dev/shm.
  const uint64_t hostNonce = llvm::hash_combine(nonce, peers[rank].hostHash);
  auto created = HostTransport::create(hostNonce, layout, here.ranks, here.myIndex, nprocs,
                                       here.allInProcess);
  llvm::Error err = agree(created ? llvm::Error::success() : created.takeError(),
                          "creating shared memory");
  if (!err) {
    transport = std::move(*created);
    err = agree(transport->attach(), "mapping shared memory");
  }
  if (err) {
    HostTransport::removeNames(hostNonce, here.ranks);
    return err;
  }
  transport->unlinkNames();
  COLL_LOG(Info, Shm, rank,
           llvm::formatv("connections: {0} per host in {1}, {2} channels, {3} MiB of address "
                         "space per receiving rank (pages committed on first use)",
                         here.allInProcess ? "process memory" : "shared memory",
                         here.allInProcess ? "this process" : "/dev/shm (names removed)",
                         layout.channels, layout.segmentBytes() >> 20));
  return llvm::Error::success();
}

llvm::Error Communicator::Impl::createEngine() {
  stop = std::make_unique<SharedStop>(*transport, rank, callSeq);
  // More processes on this host than CPUs: a waiting process that spins holds
  // the CPU its peer needs to deliver, so every hand-off would cost a whole
  // spin period. Yield at once instead, as Open MPI does when oversubscribed
  // (mpi_yield_when_idle); COLL_SPIN_US still overrides.
  interp::host::EngineOptions base;
  if (hostCrowded)
    base.spin = std::chrono::nanoseconds(0);
  interp::host::EngineOptions eo = interp::host::engineOptionsFromEnv(base);
  if (hostCrowded)
    COLL_LOG(Info, Init, rank,
             llvm::formatv("{0} processes share this host's {1} CPUs: idle waits yield after "
                           "{2} us of spinning (COLL_SPIN_US)",
                           nprocs, onlineCpus,
                           std::chrono::duration_cast<std::chrono::microseconds>(eo.spin).count()));
  eo.threads = config.hostThreads
                   ? config.hostThreads
                   : std::max(1u, interp::host::availableCpus() / static_cast<unsigned>(nprocs));
  auto eng = Engine::create(transport->myDoorbell(), eo);
  if (!eng)
    return collError(collSystemError, llvm::toString(eng.takeError()));
  engine = std::move(*eng);
  return llvm::Error::success();
}

void Communicator::Impl::watchLocalProcesses(const LocalRanks &here) {
  std::set<int> seenPids;
  for (const transport::LocalRank &l : here.ranks) {
    if (l.proc == here.ranks[here.myIndex].proc || !seenPids.insert(l.pid).second)
      continue;
    Watched w;
    w.pid = l.pid;
    w.rank = l.rank;
    w.pidfd = static_cast<int>(syscall(SYS_pidfd_open, l.pid, 0));
    watched.push_back(w);
  }
}

llvm::Error Communicator::Impl::setupNetwork(const std::vector<transport::LocalRank> &local,
                                             bool allInProcess) {
  const char *localKind = allInProcess ? "process memory" : "shared memory";
  if (shape.nodes == 1) {
    if (local.size() > 1)
      COLL_LOG(Info, Net, rank,
               llvm::formatv("rank {0}: every peer is on this host ({1})", rank, localKind));
    return llvm::Error::success();
  }
  NetProxy::Options no;
  no.rank = rank;
  no.nranks = nranks;
  no.remote.resize(nranks);
  no.hostnames.resize(nranks);
  for (int r = 0; r < nranks; ++r) {
    no.remote[r] = hostOf[r] != hostOf[rank];
    no.hostnames[r] = peers[r].hostname;
  }
  no.engineBell = &transport->myDoorbell();
  no.peerLost = [this](const std::string &report) { stop->fail(collRemoteError, report); };
  auto created = NetProxy::create(std::move(no));
  llvm::Error err = created ? llvm::Error::success() : created.takeError();
  if (err)
    err = collError(collSystemError,
                    llvm::formatv("ranks on {0} hosts: {1}", shape.nodes, llvm::toString(std::move(err))));
  if (llvm::Error agreed = agree(std::move(err), "connecting hosts"))
    return agreed;
  net = std::move(*created);

  // Worker addresses, one fixed-size record per rank.
  struct Record {
    uint32_t length = 0;
    uint8_t bytes[4092] = {};
  };
  std::vector<Record> records(static_cast<size_t>(nranks));
  const std::vector<uint8_t> &mine = net->address();
  llvm::Error tooLong = llvm::Error::success();
  if (mine.size() > sizeof records[rank].bytes)
    tooLong = collError(collSystemError,
                        llvm::formatv("UCX worker address of {0} B exceeds {1} B (set UCX_TLS or "
                                      "UCX_NET_DEVICES to fewer transports)",
                                      mine.size(), sizeof records[rank].bytes));
  else {
    records[rank].length = static_cast<uint32_t>(mine.size());
    std::memcpy(records[rank].bytes, mine.data(), mine.size());
  }
  if (llvm::Error agreed = agree(std::move(tooLong), "connecting hosts"))
    return agreed;
  if (llvm::Error e = boot->allgather(records.data(), sizeof(Record)))
    return collError(collRemoteError,
                     "exchanging UCX addresses: lost contact with the other ranks: " +
                         llvm::toString(std::move(e)));
  std::vector<std::vector<uint8_t>> addresses(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r)
    addresses[r].assign(records[r].bytes, records[r].bytes + std::min<uint32_t>(records[r].length, sizeof records[r].bytes));
  llvm::Error connected = net->connect(addresses);
  if (connected)
    connected = collError(collSystemError, llvm::toString(std::move(connected)));
  if (llvm::Error agreed = agree(std::move(connected), "connecting hosts"))
    return agreed;
  COLL_LOG(Info, Net, rank, llvm::formatv("rank {0}: network: {1}", rank, net->describe()));
  for (int r = 0; r < nranks; ++r) {
    if (r == rank)
      continue;
    bool remote = hostOf[r] != hostOf[rank];
    COLL_LOG(Info, Net, rank,
             llvm::formatv("rank {0} <-> rank {1} (host {2}): {3}", rank, r, peers[r].hostname,
                           remote ? net->describePeer(r) : std::string(localKind)));
  }
  return llvm::Error::success();
}

llvm::Expected<ConnectionEnd> Communicator::Impl::connectionEnd(int sender, int receiver,
                                                                int channel,
                                                                ir::Protocol protocol,
                                                                uint64_t payloadBytes) {
  if (hostOf[sender] == hostOf[receiver])
    return transport->end(sender, receiver, channel, protocol, payloadBytes);
  auto key = std::make_tuple(sender, receiver, channel, static_cast<int>(protocol));
  if (auto found = netEnds.find(key); found != netEnds.end())
    return found->second;
  if (!net)
    return collError(collInternalError, "a connection to another host, but no network proxy");
  auto make = [&]() -> llvm::Expected<ConnectionEnd> {
    if (sender == rank) {
      auto shape = FifoShape::of(protocol, config.slotBytes[static_cast<int>(protocol)]);
      if (!shape)
        return shape.takeError();
      return net->outbound(receiver, channel, *shape);
    }
    auto in = transport->inboundEnd(sender, channel, protocol, net->doorbell());
    if (!in)
      return in.takeError();
    if (llvm::Error err = net->inbound(*in))
      return err;
    return *in;
  };
  auto end = make();
  if (!end)
    return end.takeError();
  COLL_LOG(Trace, Net, rank,
           llvm::formatv("connection {0}->{1} channel {2} ({3}) over the network", sender,
                         receiver, channel, ir::protocolName(protocol)));
  netEnds.emplace(key, *end);
  return *end;
}

} // namespace coll::rt
