//===- CommImpl.h - Inside a communicator ----------------------------*- C++ -*-===//
//
// What the sections of a communicator share (Comm.h is its face): the
// Impl, the stop word its host shares, its trace file, and what a prepared
// call is. Each section is a file of its own:
//
//   Config.cpp        collConfig_t and the environment
//   Setup.cpp         ranks, hosts, shared memory, the network, the engine
//   Synthesis.cpp     COLL_TOPO_FILE: programs for the job's GPUs
//   Selection.cpp     which algorithm (or library) serves a call, and why
//   Collective.cpp    a collective of one rank, ready to run: its program,
//                     buffers, host runner or device executor
//   Direct.cpp        the shared areas where direct steps reach the
//                     buffers of ranks in other processes
//   PointToPoint.cpp  sends and receives
//   Round.cpp         calls that run together; mismatches and dead peers
//   Trace.cpp         COLL_TRACE files
//   Liveness.cpp      lost ranks: the liveness watch, revoke, shrink, grow
//   Comm.cpp          creation, split, finalize, abort, errors
//
//===----------------------------------------------------------------------===//

#ifndef COLL_RUNTIME_COMMIMPL_H
#define COLL_RUNTIME_COMMIMPL_H

#include "coll/runtime/Comm.h"
#include "coll/runtime/Debug.h"
#include "coll/runtime/Device.h"

#include "Selection.h"
#include "Tagged.h"

#include "coll/interpreter/HostExecutor.h"
#include "coll/interpreter/Timeline.h"
#include "coll/interpreter/host/Engine.h"
#include "coll/interpreter/host/Rank.h"
#include "coll/transport/HostTransport.h"
#include "coll/transport/NetProxy.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace coll::rt {

using interp::DataType;
using interp::DeviceExecutor;
using interp::ReduceOp;
using interp::host::ConnectionEnd;
using interp::host::Doorbell;
using interp::host::Engine;
using interp::host::FifoShape;
using interp::host::RankRunner;
using interp::host::Task;
using transport::HostTransport;
using transport::NetProxy;

/// Aligned scratch memory that grows.
struct TempBuffer {
  struct Free {
    void operator()(void *p) const { std::free(p); }
  };
  std::unique_ptr<void, Free> ptr;
  size_t bytes = 0;
  llvm::Expected<void *> get(size_t need) {
    if (need <= bytes && ptr)
      return ptr.get();
    size_t rounded = (std::max<size_t>(need, 64) + 63) / 64 * 64;
    ptr.reset(std::aligned_alloc(64, rounded));
    bytes = ptr ? rounded : 0;
    if (!ptr)
      return collError(collSystemError,
                       llvm::formatv("out of memory allocating {0} bytes of temporary space",
                                     rounded));
    return ptr.get();
  }
};


/// Where the ranks of one host run direct steps (docs/RUNTIME.md, "Direct
/// steps"): each rank's area is a memfd mapped by every rank of the host,
/// made at the first program with direct steps (collectively). Its layout:
///   [0, HeaderBytes)      where the bound call's input, output and scratch
///                         are: three offsets, then the three slots they
///                         are in (0 this area, k window k), atomic words
///   [HeaderBytes, +CounterBytes)  signal counters: each program takes a
///                         slice for all its signal pairs, and a pair's
///                         counter is the one in its waiting rank's area
///   then three regions of RegionBytes: input (or the in-place buffer),
///   output, scratch; a call copies its buffers in and out of them.
/// Only what calls use is allocated (fallocate, grown as calls need).
struct DirectArea {
  static constexpr uint64_t HeaderBytes = 4096;
  /// In the header, where an emulated device's kernel publishes the call's
  /// buffers (interp::cuda::WindowDescriptor, docs/CUDA.md "Windows"); the
  /// host runners' words are at its start.
  static constexpr uint64_t DescriptorOffset = 512;
  static constexpr uint64_t CounterBytes = 1u << 20;
  static constexpr uint64_t RegionBytes = 16ull << 30;
  static constexpr uint64_t Bytes = HeaderBytes + CounterBytes + 3 * RegionBytes;

  int fd = -1;
  std::vector<std::byte *> mapped; ///< per rank: its area here (this rank's own too)
  std::array<uint64_t, 3> allocated{}; ///< per region: bytes fallocated so far
  uint64_t countersUsed = 0;           ///< counters handed to programs so far

  std::byte *own(int rank) const { return mapped[static_cast<size_t>(rank)]; }
  static uint64_t regionOffset(int region) {
    return HeaderBytes + CounterBytes + static_cast<uint64_t>(region) * RegionBytes;
  }
  ~DirectArea();
};

/// Another process's GPU allocation as this process maps it, by the owner's
/// pid and its address there (openPeerShared in Direct.cpp).
using SharedKey = std::pair<int32_t, uint64_t>;

/// A window registered with a communicator (collCommWindowRegister): the
/// buffer here and where every rank's is mapped; its destructor unmaps the
/// peers' and gives the memory back to collMemFree.
struct RegisteredWindow {
  std::byte *base = nullptr;
  uint64_t bytes = 0;
  const void *memory = nullptr; ///< the collMemAlloc or collMemAllocDevice block it lies in
  bool onGpu = false;           ///< device memory (collMemAllocDevice)
  std::vector<std::byte *> at;  ///< per rank: its buffer, mapped here
  std::vector<std::pair<void *, size_t>> mappings; ///< the peers' mappings, to unmap
  std::vector<SharedKey> opened;                   ///< on a GPU: the peers' allocations opened
  ~RegisteredWindow();
};

/// For direct steps on GPU buffers: this rank's area in its GPU's memory,
/// shared with the processes of its host (CUDA IPC), and its peers', mapped
/// here: the descriptor its kernel publishes (docs/CUDA.md, "Windows"), then
/// three regions (input, output, scratch) of `regionBytes` each, which a
/// call copies its buffers into where they are in no window. Made at the
/// first such call and made again, larger, at a call that needs more (the
/// same call on every rank: the need follows from the call).
struct DeviceArea {
  static constexpr uint64_t HeaderBytes = 256;
  interp::DeviceBackend *backend = nullptr;
  int gpu = -1;
  std::byte *own = nullptr;
  uint64_t regionBytes = 0;
  std::vector<std::byte *> mapped; ///< per rank; null: another host's
  std::vector<SharedKey> opened;
  uint64_t bytes() const { return HeaderBytes + 3 * regionBytes; }
  uint64_t regionOffset(int region) const {
    return HeaderBytes + static_cast<uint64_t>(region) * regionBytes;
  }
  ~DeviceArea();
};

/// The timeline of one trace file. Every communicator of this process that
/// traces to the same file adds to it; the file is rewritten whenever one of
/// them is destroyed, so that it holds every call made so far.
struct TraceFile {
  std::mutex mutex;
  std::string path;
  interp::Timeline timeline;

  /// Writes the whole timeline; a failure is a warning.
  void write(int rank);
};


/// `pattern` with %h, %p and %r expanded; without %p or %r, ".rRANK" is
/// added before the extension so that the processes of a job do not
/// overwrite each other's file.
std::string tracePath(llvm::StringRef pattern, int commRank);
/// The trace file of `path`, shared by the communicators of this process.
std::shared_ptr<TraceFile> traceFileFor(const std::string &path);

/// The StopControl of a communicator. The first report of a failure lives
/// in the host's control segment, with the number of the call that failed;
/// each local rank polls a stop word of its own (RankSlot::stop), which a
/// failure raises for every rank of the host that has reached that call
/// (RankSlot::current), so that their calls end at once. A rank still
/// behind runs the calls in between, which its peers completed, and learns
/// of the failure when it reaches it (Impl::retirement, docs/RUNTIME.md
/// "Retiring").
class SharedStop final : public interp::host::StopControl {
public:
  /// `seq`: the rank's call number (Impl::callSeq), recorded with the first
  /// report.
  SharedStop(HostTransport &t, int rank, const std::atomic<uint64_t> &seq)
      : t(t), rank(rank), seq(seq) {
    word = &t.slot(t.myLocalIndex()).stop;
  }

  void stall(std::string report) override { fail(collTimeout, std::move(report)); }

  /// This rank's call failed: records the report if it is the first, and
  /// stops this rank and every local rank at or past the failed call.
  void fail(collResult_t kind, const std::string &report) { raise(kind, report, false); }
  /// Stops every call of the host's ranks (collCommAbort). `subject`: the
  /// rank the report is about when another than this one (a lost rank,
  /// one that revoked), which the others' errors name.
  void failAll(collResult_t kind, const std::string &report, int subject = -1) {
    raise(kind, report, true, subject);
  }

  /// Some rank of the host failed (this one's word may be down: it is
  /// behind that call).
  bool raised() const {
    return t.control().stopRank.load(std::memory_order_seq_cst) != -1;
  }

  /// After this rank published its call (RankSlot::current): raises its
  /// word when a failure of this call or an earlier one was recorded
  /// meanwhile, which the reporter may not have seen it reach.
  void catchUp() {
    if (raised() && failedCall() <= seq.load(std::memory_order_relaxed))
      word->store(1, std::memory_order_seq_cst);
  }

  /// The error this rank's failed call returns.
  llvm::Error error() {
    transport::ControlHeader &h = t.control();
    waitForReport();
    int32_t who = h.stopRank.load(std::memory_order_acquire);
    std::string text = h.reportReady.load(std::memory_order_acquire) ? h.report : "(no report)";
    if (who == rank)
      return collError(static_cast<collResult_t>(h.stopResult.load(std::memory_order_relaxed)),
                       text);
    if (llvm::StringRef(text).startswith(llvm::formatv("rank {0} ", who).str()))
      return collError(collRemoteError, text); // a report about that rank (a loss, a revoke)
    return collError(collRemoteError,
                     llvm::formatv("rank {0} failed, which stopped this call: {1}", who, text));
  }

  /// The first report recorded on the host (once raised()).
  std::string firstReport() const {
    waitForReport();
    const transport::ControlHeader &h = t.control();
    return h.reportReady.load(std::memory_order_acquire) ? std::string(h.report) : std::string();
  }

  /// The reporter's call number when it raised the stop (once raised()).
  uint64_t failedCall() const {
    waitForReport();
    return t.control().stopSeq.load(std::memory_order_seq_cst);
  }

private:
  /// The reporter writes its report right after winning; waits for it.
  void waitForReport() const {
    const transport::ControlHeader &h = t.control();
    for (int i = 0; i < 100000 && !h.reportReady.load(std::memory_order_acquire); ++i)
      std::this_thread::yield();
  }

public:
  /// Records `report` as the host's first failure if none is, without
  /// raising any rank's word: calls in flight go on, a call that starts
  /// later stops (catchUp). A lost rank found between calls
  /// (Liveness.cpp), which a later failure must not replace as the cause.
  void record(collResult_t kind, const std::string &report, int subject = -1) {
    transport::ControlHeader &h = t.control();
    int32_t expected = -1;
    if (h.stopRank.compare_exchange_strong(expected, subject >= 0 ? subject : rank,
                                           std::memory_order_seq_cst)) {
      std::snprintf(h.report, sizeof h.report, "%s", report.c_str());
      h.stopResult.store(kind, std::memory_order_relaxed);
      h.stopSeq.store(seq.load(std::memory_order_relaxed), std::memory_order_seq_cst);
      h.reportReady.store(1, std::memory_order_release);
    }
  }

private:
  void raise(collResult_t kind, const std::string &report, bool all, int subject = -1) {
    transport::ControlHeader &h = t.control();
    record(kind, report, subject);
    h.stop.store(1, std::memory_order_seq_cst);
    word->store(1, std::memory_order_seq_cst);
    const uint64_t failed = failedCall();
    for (int i = 0; i < static_cast<int>(t.localRanks().size()); ++i) {
      transport::RankSlot &s = t.slot(i);
      if (all || s.current.load(std::memory_order_seq_cst) >= failed)
        s.stop.store(1, std::memory_order_seq_cst);
    }
    for (int p = 0; p < t.control().nprocs; ++p)
      t.doorbell(p).ring();
  }

  HostTransport &t;
  int rank;
  const std::atomic<uint64_t> &seq;
};


/// A communicator's liveness watch (docs/RUNTIME.md, "Lost ranks"): a
/// thread that waits on the other processes of this host (pidfds) and on
/// the liveness ring's two connections (Bootstrap::connectLiveness). A
/// process that dies closes its connections, so its ring neighbours see
/// the end of stream without a goodbye at once; whoever sees a death, a
/// revoke or an abort first breaks its communicator (Impl::lose) and
/// passes the notice on around the ring both ways, so that every rank has
/// it within a few hops' latency, inside a call or not.
class Liveness {
public:
  /// What travels on the ring: a kind and the rank it is about.
  enum Kind : char { Goodbye = 'B', Death = 'D', Revoke = 'R', Abort = 'A' };
  /// How long a call in flight when a death is noticed may go on before
  /// the stop word ends it (it may need nothing more of the dead rank).
  static constexpr int DeathGraceMs = 200;
  /// `next`, `prev`: the ranks at the ends of the links.
  Liveness(Communicator::Impl &c, Bootstrap::LivenessLinks links, int next, int prev);
  /// Says goodbye on both links (this rank leaves on purpose), then stops.
  ~Liveness();
  /// Tells every rank, around the ring, that `rank` revoked or aborted.
  void announce(Kind kind, int rank);

private:
  struct Link {
    Socket socket;
    int rank = -1;
    char buffer[8] = {};
    size_t got = 0;
    bool leaving = false; ///< it said goodbye: its end of stream is no death
  };
  void run();
  /// Acts on a notice once (the first of its kind and rank), passing it on.
  void notice(Kind kind, int rank, const std::string &why);
  void sendBoth(Kind kind, int rank);
  /// Every rank of process `pid` on this host destroyed its communicator
  /// before the process exited.
  bool leftOnPurpose(int pid) const;

  Communicator::Impl &c;
  Link links[2];
  int wake = -1; ///< an eventfd: the destructor wakes the thread
  std::mutex sendMutex;
  std::set<std::pair<char, int>> seen; ///< the thread's and announce()'s, under sendMutex
  std::thread thread;
};

class Communicator::Impl {
public:
  int rank = 0, nranks = 1;
  Config config;
  uint64_t nonce = 0;
  std::unique_ptr<Bootstrap> boot;
  std::vector<PeerInfo> peers;
  Shape shape;
  std::vector<int> hostOf; ///< per rank: index of its host
  int nprocs = 1;          ///< processes on this host
  std::optional<Registry> registry;
  std::vector<TuningRule> userRules;
  long onlineCpus = 0;      ///< this host's
  bool hostCrowded = false; ///< this host runs more processes than it has CPUs
  /// Some host of the job is crowded: the built-in rules for crowded hosts
  /// come first (the same on every rank).
  bool crowded = false;
  std::unique_ptr<HostTransport> transport;
  std::unique_ptr<SharedStop> stop;
  std::unique_ptr<Engine> engine;
  /// Connections to ranks on other hosts (null on one host); destroyed
  /// first, while the doorbells and segments it uses still exist.
  std::unique_ptr<NetProxy> net;
  /// Network connection ends by (sender, receiver, channel, protocol): one
  /// staging FIFO per connection, whatever plans share it.
  std::map<std::tuple<int, int, int, int>, ConnectionEnd> netEnds;
  int p2pChannel = 0;
  /// Programs on device buffers made so far on a communicator that spans
  /// hosts: each one's number tells its connections apart on the wire
  /// (NetProxy::DeviceEnd::program).
  uint32_t deviceProgramsAcrossHosts = 0;
  /// Other processes of this host whose death this rank watches.
  struct Watched {
    int pid = 0;
    int pidfd = -1;
    int rank = -1;
  };
  std::vector<Watched> watched;

  struct RunnerEntry {
    std::unique_ptr<RankRunner> runner;
    std::array<bool, 3> uses{}; ///< the plan reads or writes input/output/scratch here
    /// This rank's connections with ranks of this host, (sender, receiver,
    /// channel): their FIFOs' pages are committed as calls need them.
    std::vector<std::array<int32_t, 3>> sharedConnections;
    uint64_t committedBytes = 0; ///< per slot, committed for every one of them
    /// The plan has direct steps: its peers' buffers and its signals, in
    /// the host's shared areas (Direct.cpp).
    std::unique_ptr<interp::host::DirectTable> direct;
  };
  /// This rank's shared area and its peers', once a program with direct
  /// steps ran (null before).
  std::unique_ptr<DirectArea> directArea;
  /// Windows by slot (slot k is windows[k - 1]; null once deregistered),
  /// and per slot the ranks' bases that direct steps address (slot 0: the
  /// areas): DirectTable::slots.
  std::vector<std::unique_ptr<RegisteredWindow>> windows;
  std::vector<std::vector<std::byte *>> slotBases = std::vector<std::vector<std::byte *>>(1);
  /// Whether a loaded program with direct steps may serve calls off
  /// windows (the built-ins for windows serve calls on windows only unless
  /// a user's rule names them, and registering a window makes the areas):
  /// computed once.
  bool hasDirectPrograms() {
    if (directPrograms < 0) {
      directPrograms = 0;
      if (registry)
        for (const LoadedAlgorithm &a : registry->algorithms())
          if (a.compiled && !a.compiled->plan.signals.empty()) {
            bool offWindows = !(a.builtin && isWindowOnlyBuiltin(a.name));
            for (const TuningRule &r : userRules) // a user's rule may name one
              offWindows = offWindows ||
                           (r.kind == TuningRule::Target::Algorithm && r.target == a.name);
            if (offWindows)
              directPrograms = 1;
          }
    }
    return directPrograms == 1;
  }
  int directPrograms = -1;
  /// Direct steps on GPU buffers (null before the first).
  std::unique_ptr<DeviceArea> deviceArea;
  /// Whether a window of GPU memory (`onGpu`, collMemAllocDevice) or of
  /// host memory (collMemAlloc) is registered: the same answer on every
  /// rank, since registering and deregistering are collective.
  bool windowsRegistered(bool onGpu) const {
    return std::any_of(windows.begin(), windows.end(),
                       [&](const auto &w) { return w && w->onGpu == onGpu; });
  }
  /// Bumped by every window registered or deregistered: a device executor
  /// with direct steps takes the windows again at its next call.
  uint64_t windowsEpoch = 0;
  /// Per device executor with direct steps, the windowsEpoch it was given.
  std::map<const DeviceExecutor *, uint64_t> deviceWindowsEpoch;
  std::map<const Compiled *, RunnerEntry> runners;
  /// Per plan, this rank's executor on its GPU (device buffers) or on the
  /// CPU emulation of one (Config::emulatedDevice), its FIFOs shared with
  /// the other ranks' (CUDA IPC). One backend per communicator.
  std::map<const Compiled *, std::unique_ptr<DeviceExecutor>> devices;
  interp::DeviceBackend *backend = nullptr;
  int gpu = -1; ///< the CUDA device of this rank's device buffers, once known
  /// Held while device runners are used: a call, or checkAsyncError()
  /// from another thread.
  std::mutex deviceMutex;
  /// Held while `devices` changes, and by abort(), which must not wait for
  /// a call in flight (whose kernel it stops).
  std::mutex devicesMapMutex;
  std::vector<std::shared_ptr<const Compiled>> keepAlive; ///< plans compiled per root
  std::map<std::pair<const Compiled *, uint64_t>, interp::CallLayout> layouts;
  /// Choices made so far, never erased (select hands out pointers into it);
  /// the mutex: bindings ask (collCommQueryChoice) on one thread while
  /// another runs calls.
  std::map<std::tuple<int, uint64_t, int, uint64_t, bool, bool>, Choice> choices;
  /// Set on every rank at once by the device call that finds FIFOs of an
  /// LL128 program in host memory (GPUs without P2P, other hosts;
  /// deviceFor): from then on no LL128 program is chosen, as NCCL uses
  /// LL128 over NVLink only.
  std::atomic<bool> avoidLL128{false};
  /// Algorithms whose executor could not be made on this communicator's
  /// devices, with why (every rank learns it at the same call, through
  /// agree(); deviceFor): the selection passes over them from then on.
  /// Copy engines (COLL_COPY_ENGINE): says at COLL_DEBUG=INFO, once per
  /// program and size, that a call runs its copies on the copy engines
  /// (every call at TRACE).
  void sayCopyEngines(const Op &op, const std::string &algo, uint64_t bytes, uint32_t copies);
  std::set<std::pair<std::string, uint64_t>> copyEnginesSaid; ///< refusedMutex
  std::map<const LoadedAlgorithm *, std::string> refusedOnDevice; ///< refusedMutex
  mutable std::mutex refusedMutex;
  /// Bumped whenever the selection's answers may change (avoidLL128,
  /// refusedOnDevice): part of the key of `choices`.
  std::atomic<uint64_t> selectionEpoch{0};
  /// deviceFor's last failure was agreed by every rank before the call ran
  /// (making the executor, placing or mapping its FIFOs): the program is
  /// refused, and the call may be served by another.
  bool deviceRefusal = false;
  std::mutex choicesMutex;
  /// Tells this communicator from one made later at the same address (the
  /// calling thread's last choice, select()).
  const uint64_t serial = nextSerial.fetch_add(1, std::memory_order_relaxed);
  static inline std::atomic<uint64_t> nextSerial{1};
  std::map<int, std::pair<ConnectionEnd, ConnectionEnd>> p2pEnds; ///< peer -> (send, recv)
  TempBuffer temp[2];
  /// The number of the last call this rank published (publishCall); read by
  /// another thread's abort() (SharedStop::fail).
  std::atomic<uint64_t> callSeq{0};
  std::atomic<int> asyncError{collSuccess};
  std::atomic<int> inCall{0};
  std::mutex errorMutex;
  std::string lastError;

  std::shared_ptr<TraceFile> trace; ///< COLL_TRACE, or null
  /// The liveness watch (null where there is nothing to watch: ranks of one
  /// process); stopped first at destroy.
  std::unique_ptr<Liveness> liveness;
  /// Tagged sends and receives (Tagged.h): null before the first; shut
  /// down first at destroy, while its connections are there.
  std::shared_ptr<TaggedEngine> taggedEngine;
  std::mutex taggedMutex;
  /// The channel of the tagged connections: after the grouped sends'.
  int taggedChannel() const { return p2pChannel + 1; }
  /// Shrinks made from this communicator so far: part of each new one's
  /// nonce, the same on every survivor.
  uint64_t shrinks = 0;

  ~Impl() {
    if (taggedEngine)
      taggedEngine->shutdown("the communicator was destroyed");
    // This rank leaves on purpose: its process's exit is no loss to the
    // host's liveness watches, and its ring neighbours get a goodbye.
    if (transport)
      transport->slot(transport->myLocalIndex()).left.store(1, std::memory_order_release);
    liveness.reset();
    // Kernels enqueued on a GPU read the FIFOs and tables the runners own.
    if (!devices.empty())
      if (llvm::Error err = checkDevices(true))
        COLL_LOG(Warn, Coll, rank, "destroy: " + llvm::toString(std::move(err)));
    // What this rank sent must leave before the proxy closes its endpoints.
    if (net && stop && !stop->stopping() && !net->drain(std::chrono::milliseconds(config.watchdogMs)))
      COLL_LOG(Warn, Net, rank, "destroy: slots to other hosts still unsent after the watchdog "
                                "period; closing anyway");
    if (net)
      net->close(stop && !stop->stopping());
    net.reset();
    for (Watched &w : watched)
      if (w.pidfd >= 0)
        ::close(w.pidfd);
    if (trace)
      trace->write(rank);
  }

  /// Collective: the steps of creation, in order (Setup.cpp).
  llvm::Error setup();
  /// Hosts in order of their first rank; the node shape.
  void findShape();
  /// This host's ranks and processes.
  struct LocalRanks {
    std::vector<transport::LocalRank> ranks;
    int myIndex = 0;
    bool allInProcess = true; ///< every rank of the job is in this process
  };
  LocalRanks findLocalRanks();
  /// The registry; every rank must load the same algorithms.
  llvm::Error loadAlgorithms();
  /// Whether some host runs more processes than it has CPUs, agreed by all
  /// ranks, since it changes which algorithm the built-in rules pick.
  llvm::Error agreeOnCrowding();
  /// COLL_TUNING_FILE, then COLL_TOPO_FILE's synthesis.
  llvm::Error readTuningRules();
  /// Connections: every (protocol, channel, sender) into every local rank.
  llvm::Error createTransport(const LocalRanks &here);
  /// The stop word and the engine that runs this rank's tbs.
  llvm::Error createEngine();
  /// Watches the other processes of this host, to stop when one dies.
  void watchLocalProcesses(const LocalRanks &here);
  llvm::Error setupNetwork(const std::vector<transport::LocalRank> &local, bool allInProcess);
  /// The end of (sender -> receiver, channel, protocol) this rank drives:
  /// shared memory on one host, the network proxy across hosts.
  llvm::Expected<ConnectionEnd> connectionEnd(int sender, int receiver, int channel,
                                              ir::Protocol protocol,
                                              uint64_t payloadBytes = UINT64_MAX);
  llvm::Error agree(llvm::Error local, llvm::StringRef what, bool *together = nullptr);
  /// COLL_TOPO_FILE: programs synthesized for the GPUs of this job join the
  /// registry, with rules from the cost model. Collective.
  llvm::Error synthesizeForJob();
  void logSelection();
  bool applies(const LoadedAlgorithm &a, uint64_t bytes, int root, bool device,
               std::string &reason) const;
  /// The choice for a call, from the cache (valid until the next select).
  /// `device`: for a call on device buffers, which also passes over what
  /// the devices refused (avoidLL128, refusedOnDevice). `windowed`: for a
  /// host call, its buffers lie in registered windows (on one host), where
  /// the built-in rules for windows come first (windowTuningRules); for a
  /// device call, the communicator (of one host) holds windows of its
  /// buffers' kind (deviceWindowsRegistered), where deviceWindowTuningRules
  /// come first.
  /// `compile`: for a call, which every rank makes (prepareCollective): a
  /// built-in not compiled yet that it would choose is compiled first
  /// (compileOnFirstUse); otherwise, a query, such a choice is given
  /// without its program.
  llvm::Expected<const Choice *> select(ir::Collective coll, uint64_t bytes, int root,
                                        bool device = false, bool windowed = false,
                                        bool compile = false);
  /// One pass of select(); with `pending`, a choice of a program not
  /// compiled yet is not made: *pending names it instead.
  llvm::Expected<const Choice *> selectOnce(ir::Collective coll, uint64_t bytes, int root,
                                            bool device, bool windowed,
                                            const LoadedAlgorithm **pending);
  /// Collective, from a call: compiles a deferred built-in on every rank
  /// (the first rank of each host first, with a program cache), and the
  /// ranks agree on the outcome and compare the programs. A program that
  /// does not compile on some rank serves nothing on any; the error is
  /// only for a rank that cannot reach the others.
  llvm::Error compileOnFirstUse(const LoadedAlgorithm &algo);
  /// Calls `f` with each built-in rule for buffers in windows (`device`:
  /// for device calls with windows) and what it chooses (an algorithm) for
  /// a call at its smallest size; stops at the first error `f` returns.
  llvm::Error forWindowChoices(
      llvm::function_ref<llvm::Error(const TuningRule &, const Choice &)> f,
      bool device = false);
  llvm::Expected<RunnerEntry *> runnerFor(const std::shared_ptr<const Compiled> &compiled);
  /// Collective, for a plan with direct steps: the shared areas (made and
  /// mapped at the first), and the plan's table over them (Direct.cpp).
  llvm::Expected<std::unique_ptr<interp::host::DirectTable>>
  directTableFor(const interp::Plan &plan);
  /// Collective: the shared areas, made and mapped at the first call
  /// (`what` names the program in errors).
  llvm::Error makeDirectAreas(const std::string &what);
  /// For a device executor with direct steps (the emulated device): every
  /// rank's descriptor and windows as mapped here (slot 0 its area, slot k
  /// windows[k - 1]) and this rank's scratch region (docs/RUNTIME.md,
  /// "Direct steps"); records the epoch.
  llvm::Error giveDeviceWindows(DeviceExecutor &executor, bool onGpu);
  /// Collective, for a call of a program with direct steps on GPU buffers
  /// of CUDA device `gpu`: the device areas, with regions of at least
  /// `regionBytes` (made, or made again larger, when they have less).
  llvm::Error ensureDeviceArea(uint64_t regionBytes, int gpu, const std::string &what);
  /// Region `region` of this rank's area, at least `bytes` of it allocated.
  llvm::Expected<std::byte *> directRegion(int region, uint64_t bytes);
  /// The slot of the window of this rank holding [p, p + bytes) (0: none).
  uint64_t windowSlotOf(const void *p, uint64_t bytes) const;
  /// Publishes where the bound call's input, output and scratch are, in
  /// this rank's area (each in the area, or in a window).
  void publishDirectBuffers(const std::array<const void *, 3> &buffers);
  llvm::Expected<int> registerWindow(void *buff, size_t bytes);
  llvm::Error deregisterWindow(int id);
  llvm::Expected<DeviceExecutor *> deviceFor(const std::shared_ptr<const Compiled> &compiled,
                                           int device);
  /// Polls every device runner (`wait`: until its work has ended); the
  /// first watchdog stop breaks the communicator and is returned.
  llvm::Error checkDevices(bool wait);
  /// The error of a kernel that failed (`kernel`: its report, prefixed with
  /// where it ran; `watchdog`: it timed out): the first failure on the host
  /// raises the stop word with it; one that followed another rank's stop
  /// carries that cause, then the kernel's report.
  llvm::Error kernelFailure(collResult_t kind, const std::string &kernel, bool watchdog);
  llvm::Expected<const interp::CallLayout *> layoutFor(const Compiled &compiled, uint64_t count);
  void publishCall(const Op &op);
  /// Stops the call when a peer process died (`processes`) or a peer made a
  /// different call as the same call number.
  void pollPeers(bool processes = true);
  /// Breaks this communicator (asyncError) and raises the host's stop word
  /// with `message` unless it is raised: the peers learn of the failure
  /// (retirement()).
  void breakWith(collResult_t result, const std::string &message);
  /// A rank was lost, or the communicator revoked or aborted (`why`): ends
  /// every call in flight of the host's ranks, host and device (the stop
  /// word, which kernels poll too), and breaks this communicator with `why` as
  /// its last error. From any thread (the liveness watch's).
  void lose(collResult_t result, const std::string &why, int subject);
  /// Breaks this communicator with `result` unless it is broken, its last
  /// error the host's first failure, else `why`: set before the error, so
  /// that whoever sees the error reads its message.
  void breakFor(collResult_t result, const std::string &why);
  /// Starts the liveness watch (collective: the ring's connections).
  llvm::Error startLiveness();
  /// Whether this communicator has retired (docs/RUNTIME.md, "Retiring"):
  /// a call this rank made failed, here or on a peer of its host (the stop
  /// word, raised for a call up to callSeq); then the first failure's
  /// error (CollError::retired set), else success. Raised for a later call
  /// (a peer failed the call this rank is about to make): that error, with
  /// `retired` clear.
  llvm::Error retirement();
};


/// A collective of one rank, ready to run.
struct PreparedCollective {
  Communicator::Impl *comm = nullptr;
  const Op *op = nullptr;
  RankRunner *runner = nullptr;
  interp::host::DirectTable *direct = nullptr; ///< the runner's plan has direct steps
  DeviceExecutor *device = nullptr;                ///< the call runs on a GPU or on the emulation
  std::vector<interp::DeviceCopy> before, after; ///< device: copies around the kernel
  const interp::Plan *plan = nullptr;
  std::vector<interp::host::TbTrace> traces; ///< COLL_TRACE
  void *postDst = nullptr;
  const void *postSrc = nullptr;
  size_t postBytes = 0;
  uint64_t tag = 0; ///< host: callTag() of the call, stored in the FIFOs it sends on
  /// An alltoall run as grouped sends and receives (Choice::p2p): the
  /// sends and receives, and, in place, a copy of the input they send from.
  std::vector<Op> p2pOps;
  std::vector<std::byte> staged;
};


/// Point-to-point operations of one rank with one peer in one direction.
struct P2PTask {
  Communicator::Impl *comm = nullptr;
  ConnectionEnd end;
  bool sending = false;
  int peer = -1;
  std::vector<const Op *> ops;
  bool ok = false;
};


/// Whether `rank`'s tbs read or write its input, output and scratch.
std::array<bool, 3> buffersUsed(const interp::Plan &plan, int rank);
/// The call number (low 32 bits) and a hash of what makes two calls the
/// same, as the senders store it in their connections.
uint64_t callTag(uint64_t seq, const Op &op);
/// Makes `op` (a collective) ready to run on this rank: its host tasks
/// join `tasks`, or `out.device` is the executor it is enqueued on.
llvm::Error prepareCollective(Communicator::Impl &c, const Op &op, PreparedCollective &out,
                              llvm::SmallVectorImpl<Task> &tasks,
                              std::vector<std::unique_ptr<P2PTask>> &p2p);
/// Makes this rank's sends and receives of one group ready to run: one task
/// per peer and direction.
llvm::Error prepareP2P(Communicator::Impl &c, llvm::ArrayRef<Op> ops,
                       std::vector<std::unique_ptr<P2PTask>> &p2p,
                       llvm::SmallVectorImpl<Task> &tasks);

/// Sends and receives on device buffers, staged through host memory: each
/// caller's stream is synchronized, a send's data copied into a host buffer
/// and a receive given one, the round runs them as host calls, and each
/// receive's data are copied back to its device after it (docs/RUNTIME.md,
/// "Device buffers"). The call so completes on return, as a host call does.
class DeviceP2PStaging {
public:
  /// `units` with every device send and receive on its host buffer; itself
  /// when there are none.
  llvm::Expected<llvm::ArrayRef<Communicator::Unit>>
  stageIn(llvm::ArrayRef<Communicator::Unit> units);
  /// The receives' data to their devices, after a round that succeeded.
  llvm::Error stageOut();

private:
  struct Copy {
    void *device = nullptr; ///< the receive's device buffer
    int ordinal = -1;
    void *stream = nullptr;
    std::vector<std::byte> host;
  };
  std::vector<std::vector<Op>> ops;
  std::vector<Communicator::Unit> units;
  std::vector<std::unique_ptr<Copy>> copies; ///< stable: ops point into them
};

} // namespace coll::rt

#endif // COLL_RUNTIME_COMMIMPL_H
