//===- Comm.cpp - A communicator: one rank of a job ---------------------------===//

#include "coll/runtime/Comm.h"
#include "Selection.h"

#include "coll/runtime/Debug.h"
#include "coll/transport/HostTransport.h"
#include "coll/transport/NetProxy.h"

#include "coll/runtime/Device.h"
#include "coll/interpreter/host/Engine.h"
#include "coll/interpreter/host/Rank.h"
#include "coll/interpreter/HostExecutor.h"
#if COLL_RUNTIME_HAVE_LANG
#include "coll/synth/Detect.h"
#include "coll/synth/Tune.h"
#endif
#include "coll/interpreter/CudaExecutor.h"
#include "coll/support/Bytes.h"
#include "coll/interpreter/Protocol.h"
#include "coll/interpreter/Timeline.h"
#include "coll/ir/Geometry.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <dlfcn.h>
#include <unistd.h>

namespace coll::rt {

using interp::DataType;
using interp::ReduceOp;
using interp::host::ConnectionEnd;
using interp::host::FifoShape;
using interp::host::Doorbell;
using interp::host::Engine;
using interp::host::RankRunner;
using interp::host::Task;
using transport::HostTransport;
using transport::NetProxy;

char CollError::ID = 0;

llvm::Error collError(collResult_t result, const llvm::Twine &message) {
  return llvm::make_error<CollError>(result, message.str());
}

collResult_t takeResult(llvm::Error err, std::string &message, collResult_t otherwise) {
  collResult_t result = collSuccess;
  llvm::handleAllErrors(
      std::move(err),
      [&](const CollError &e) {
        result = e.result;
        message = e.message;
      },
      [&](const llvm::ErrorInfoBase &e) {
        result = otherwise;
        message = e.message();
      });
  return result;
}

std::optional<interp::DataType> dataTypeOf(collDataType_t t) {
  switch (t) {
  case collInt8: return interp::DataType::Int8;
  case collUint8: return interp::DataType::Uint8;
  case collInt32: return interp::DataType::Int32;
  case collUint32: return interp::DataType::Uint32;
  case collInt64: return interp::DataType::Int64;
  case collUint64: return interp::DataType::Uint64;
  case collFloat16: return interp::DataType::Float16;
  case collFloat32: return interp::DataType::Float32;
  case collFloat64: return interp::DataType::Float64;
  case collBfloat16: return interp::DataType::BFloat16;
  default: return std::nullopt;
  }
}

std::optional<interp::ReduceOp> reduceOpOf(collRedOp_t op) {
  switch (op) {
  case collSum: return interp::ReduceOp::Sum;
  case collProd: return interp::ReduceOp::Prod;
  case collMax: return interp::ReduceOp::Max;
  case collMin: return interp::ReduceOp::Min;
  case collAvg: return interp::ReduceOp::Avg;
  default: return std::nullopt;
  }
}

const char *opKindName(OpKind kind) {
  switch (kind) {
  case OpKind::AllReduce: return "allreduce";
  case OpKind::AllGather: return "allgather";
  case OpKind::ReduceScatter: return "reducescatter";
  case OpKind::AllToAll: return "alltoall";
  case OpKind::Broadcast: return "broadcast";
  case OpKind::Reduce: return "reduce";
  case OpKind::Gather: return "gather";
  case OpKind::Scatter: return "scatter";
  case OpKind::Send: return "send";
  case OpKind::Recv: return "recv";
  }
  return "?";
}

namespace {

ir::Collective collectiveOf(OpKind kind) {
  switch (kind) {
  case OpKind::AllReduce: return ir::Collective::AllReduce;
  case OpKind::AllGather: return ir::Collective::AllGather;
  case OpKind::ReduceScatter: return ir::Collective::ReduceScatter;
  case OpKind::AllToAll: return ir::Collective::AllToAll;
  case OpKind::Broadcast: return ir::Collective::Broadcast;
  case OpKind::Reduce: return ir::Collective::Reduce;
  case OpKind::Gather: return ir::Collective::Gather;
  case OpKind::Scatter: return ir::Collective::Scatter;
  default: return ir::Collective::Custom;
  }
}

std::optional<uint64_t> envUnsigned(const char *name, std::string &error) {
  const char *text = std::getenv(name);
  if (!text || !*text)
    return std::nullopt;
  char *end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno || !end || *end || text[0] == '-') {
    error = llvm::formatv("{0}={1} is not a non-negative integer", name, text).str();
    return std::nullopt;
  }
  return v;
}

/// A byte count such as 65536 or 64K (parseBytes).
std::optional<uint64_t> envBytes(const char *name, std::string &error) {
  const char *text = std::getenv(name);
  if (!text || !*text)
    return std::nullopt;
  std::optional<uint64_t> v = parseBytes(text);
  if (!v)
    error = llvm::formatv("{0}={1} is not a byte count (digits, optionally followed by K, M or G)",
                          name, text)
                .str();
  return v;
}

std::string envString(const char *name) {
  const char *text = std::getenv(name);
  return text ? text : "";
}

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

/// Never dereferenced: stands for a buffer a plan does not use on a rank.
alignas(64) unsigned char unusedBuffer[64];

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

//===----------------------------------------------------------------------===//
// Config
//===----------------------------------------------------------------------===//

uint64_t Config::agreedHash() const {
  return llvm::hash_combine(slotBytes[0], slotBytes[1], slotBytes[2], builtin, emulatedDevice);
}

llvm::Expected<Config> resolveConfig(const collConfig_t *cfg) {
  Config c;
  std::string error;
  if (auto v = envUnsigned("COLL_WATCHDOG_MS", error); v && *v > 0 && *v < (1u << 31))
    c.watchdogMs = static_cast<uint32_t>(*v);
  if (auto v = envUnsigned("COLL_HOST_THREADS", error))
    c.hostThreads = static_cast<unsigned>(std::min<uint64_t>(*v, 256));
  const char *slotVars[3] = {"COLL_SIMPLE_SLOT_BYTES", "COLL_LL_SLOT_BYTES",
                             "COLL_LL128_SLOT_BYTES"};
  for (int p = 0; p < 3; ++p)
    if (auto v = envBytes(slotVars[p], error)) {
      if (*v < 8 || *v % 8 != 0 || *v > (64u << 20))
        return collError(collInvalidArgument,
                         llvm::formatv("{0}={1}: a slot size must be a multiple of 8 in "
                                       "[8, 64M]",
                                       slotVars[p], std::getenv(slotVars[p])));
      c.slotBytes[p] = *v;
    }
  if (!error.empty())
    return collError(collInvalidArgument, error);
  c.algoDir = envString("COLL_ALGO_DIR");
  c.algoFiles = envString("COLL_ALGO_FILES");
  c.tuningFile = envString("COLL_TUNING_FILE");
  c.traceFile = envString("COLL_TRACE");
  c.topoFile = envString("COLL_TOPO_FILE");
  c.topoGpus = envString("COLL_TOPO_GPUS");
  if (auto v = envUnsigned("COLL_EMULATED_DEVICE", error)) {
    if (*v > 1)
      return collError(collInvalidArgument,
                       llvm::formatv("COLL_EMULATED_DEVICE={0}: 0 (host) or 1 (the CUDA kernel "
                                     "on the CPU emulation)",
                                     *v));
    c.emulatedDevice = *v == 1;
  }
  if (!error.empty())
    return collError(collInvalidArgument, error);
  if (!cfg)
    return c;
  if (cfg->magic != 0xc011c0f1u || cfg->size < offsetof(collConfig_t, hostThreads) + sizeof(int))
    return collError(collInvalidArgument,
                     "the collConfig_t was not initialised with COLL_CONFIG_INITIALIZER");
  if (cfg->watchdogMs != COLL_CONFIG_UNDEF_INT) {
    if (cfg->watchdogMs <= 0)
      return collError(collInvalidArgument,
                       llvm::formatv("config watchdogMs {0} must be positive", cfg->watchdogMs));
    c.watchdogMs = static_cast<uint32_t>(cfg->watchdogMs);
  }
  if (cfg->algoDir)
    c.algoDir = cfg->algoDir;
  if (cfg->algoFiles)
    c.algoFiles = cfg->algoFiles;
  if (cfg->tuningFile)
    c.tuningFile = cfg->tuningFile;
  if (cfg->debugLevel != COLL_CONFIG_UNDEF_INT) {
    if (cfg->debugLevel < 0 || cfg->debugLevel > 4)
      return collError(collInvalidArgument,
                       llvm::formatv("config debugLevel {0} is not 0..4", cfg->debugLevel));
    setLevel(static_cast<Level>(cfg->debugLevel));
  }
  if (cfg->embeddedAlgorithms != COLL_CONFIG_UNDEF_INT)
    c.builtin = cfg->embeddedAlgorithms != 0;
  if (cfg->size >= offsetof(collConfig_t, libraries) + sizeof(const char *) && cfg->libraries) {
    llvm::SmallVector<llvm::StringRef, 4> names;
    llvm::StringRef(cfg->libraries).split(names, ',', -1, false);
    for (llvm::StringRef n : names)
      if (!n.trim().empty())
        c.underneath.push_back(n.trim().lower());
  }
  if (cfg->hostThreads != COLL_CONFIG_UNDEF_INT) {
    if (cfg->hostThreads < 0)
      return collError(collInvalidArgument, "config hostThreads must not be negative");
    c.hostThreads = static_cast<unsigned>(std::min(cfg->hostThreads, 256));
  }
  if (cfg->size >= offsetof(collConfig_t, emulatedDevice) + sizeof(int) &&
      cfg->emulatedDevice != COLL_CONFIG_UNDEF_INT) {
    if (cfg->emulatedDevice != 0 && cfg->emulatedDevice != 1)
      return collError(collInvalidArgument,
                       llvm::formatv("config emulatedDevice {0} is not 0 or 1",
                                     cfg->emulatedDevice));
    c.emulatedDevice = cfg->emulatedDevice == 1;
  }
#if !COLL_RUNTIME_HAVE_EMU
  if (c.emulatedDevice)
    return collError(collInvalidUsage, "the emulated device was asked for, but this libcoll was "
                                       "built without it (COLL_ENABLE_CUDA_EMU=OFF)");
#endif
  return c;
}

//===----------------------------------------------------------------------===//
// COLL_TRACE: one timeline per file, shared by the ranks of this process
//===----------------------------------------------------------------------===//

namespace {

/// The timeline of one trace file. Every communicator of this process that
/// traces to the same file adds to it; the file is rewritten whenever one of
/// them is destroyed, so that it holds every call made so far.
struct TraceFile {
  std::mutex mutex;
  std::string path;
  interp::Timeline timeline;

  void write(int rank) {
    std::lock_guard<std::mutex> lock(mutex);
    if (llvm::Error err = timeline.writeJson(path))
      COLL_LOG(Warn, Coll, rank,
               "COLL_TRACE: cannot write " + path + ": " + llvm::toString(std::move(err)));
    else
      COLL_LOG(Info, Coll, rank,
               llvm::formatv("COLL_TRACE: wrote {0} calls, {1} step slices to {2}",
                             timeline.calls(), timeline.stepSlices(), path));
  }
};

/// `pattern` with %h, %p and %r expanded; without %p or %r, ".rRANK" is
/// added before the extension so that the processes of a job do not
/// overwrite each other's file.
std::string tracePath(llvm::StringRef pattern, int commRank) {
  // The rank of the first communicator this process traces names its files
  // (usually the job's rank), so that communicators from splits agree.
  static std::atomic<int> first{-1};
  int expected = -1;
  first.compare_exchange_strong(expected, commRank);
  const int rank = first.load();
  std::string out;
  bool distinct = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char k = pattern[i + 1];
      if (k == 'h') {
        out += hostName();
        ++i;
        continue;
      }
      if (k == 'p' || k == 'r') {
        out += std::to_string(k == 'p' ? static_cast<long>(getpid()) : static_cast<long>(rank));
        distinct = true;
        ++i;
        continue;
      }
    }
    out += pattern[i];
  }
  if (!distinct) {
    size_t dot = out.rfind('.');
    size_t slash = out.rfind('/');
    std::string suffix = ".r" + std::to_string(rank);
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
      out += suffix;
    else
      out.insert(dot, suffix);
  }
  return out;
}

std::shared_ptr<TraceFile> traceFileFor(const std::string &path) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<TraceFile>> files;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto existing = files[path].lock())
    return existing;
  auto made = std::make_shared<TraceFile>();
  made->path = path;
  files[path] = made;
  return made;
}

} // namespace

//===----------------------------------------------------------------------===//
// Stopping across the processes of a host
//===----------------------------------------------------------------------===//

namespace {

/// The StopControl of a communicator: the stop word and the first report
/// live in the host's control segment, so a failure on one rank ends the
/// calls of every local rank at once.
class SharedStop final : public interp::host::StopControl {
public:
  SharedStop(HostTransport &t, int rank) : t(t), rank(rank) { word = &t.control().stop; }

  void stall(std::string report) override { fail(collTimeout, std::move(report)); }

  void fail(collResult_t kind, const std::string &report) {
    transport::ControlHeader &h = t.control();
    int32_t expected = -1;
    if (h.stopRank.compare_exchange_strong(expected, rank, std::memory_order_acq_rel)) {
      std::snprintf(h.report, sizeof h.report, "%s", report.c_str());
      h.stopResult.store(kind, std::memory_order_relaxed);
      h.reportReady.store(1, std::memory_order_release);
    }
    h.stop.store(1, std::memory_order_seq_cst);
    for (int p = 0; p < t.control().nprocs; ++p)
      t.doorbell(p).ring();
  }

  /// The error this rank's failed call returns.
  llvm::Error error() {
    transport::ControlHeader &h = t.control();
    // The reporter writes its report right after winning; wait for it.
    for (int i = 0; i < 100000 && !h.reportReady.load(std::memory_order_acquire); ++i)
      std::this_thread::yield();
    int32_t who = h.stopRank.load(std::memory_order_acquire);
    std::string text = h.reportReady.load(std::memory_order_acquire) ? h.report : "(no report)";
    if (who == rank)
      return collError(static_cast<collResult_t>(h.stopResult.load(std::memory_order_relaxed)),
                       text);
    return collError(collRemoteError,
                     llvm::formatv("rank {0} failed, which stopped this call: {1}", who, text));
  }

private:
  HostTransport &t;
  int rank;
};

} // namespace

//===----------------------------------------------------------------------===//
// Impl
//===----------------------------------------------------------------------===//

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
  };
  std::map<const Compiled *, RunnerEntry> runners;
  /// Per plan, this rank's executor on its GPU (device buffers) or on the
  /// CPU emulation of one (Config::emulatedDevice), its FIFOs shared with
  /// the other ranks' (CUDA IPC). One backend per communicator.
  std::map<const Compiled *, std::unique_ptr<DeviceRunner>> devices;
  DeviceBackend *backend = nullptr;
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
  std::map<std::tuple<int, uint64_t, int>, Choice> choices;
  std::mutex choicesMutex;
  /// Tells this communicator from one made later at the same address (the
  /// calling thread's last choice, select()).
  const uint64_t serial = nextSerial.fetch_add(1, std::memory_order_relaxed);
  static inline std::atomic<uint64_t> nextSerial{1};
  std::map<int, std::pair<ConnectionEnd, ConnectionEnd>> p2pEnds; ///< peer -> (send, recv)
  TempBuffer temp[2];
  uint64_t callSeq = 0;
  std::atomic<int> asyncError{collSuccess};
  std::atomic<int> inCall{0};
  std::mutex errorMutex;
  std::string lastError;

  std::shared_ptr<TraceFile> trace; ///< COLL_TRACE, or null

  ~Impl() {
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

  llvm::Error setup();
  llvm::Error setupNetwork(const std::vector<transport::LocalRank> &local, bool allInProcess);
  /// The end of (sender -> receiver, channel, protocol) this rank drives:
  /// shared memory on one host, the network proxy across hosts.
  llvm::Expected<ConnectionEnd> connectionEnd(int sender, int receiver, int channel,
                                              ir::Protocol protocol);
  llvm::Error agree(llvm::Error local, llvm::StringRef what);
  /// COLL_TOPO_FILE: programs synthesized for the GPUs of this job join the
  /// registry, with rules from the cost model. Collective.
  llvm::Error synthesizeForJob();
  void logSelection();
  bool applies(const LoadedAlgorithm &a, uint64_t bytes, int root, std::string &reason) const;
  /// The choice for a call, from the cache (valid until the next select).
  llvm::Expected<const Choice *> select(ir::Collective coll, uint64_t bytes, int root);
  llvm::Expected<RunnerEntry *> runnerFor(const std::shared_ptr<const Compiled> &compiled);
  llvm::Expected<DeviceRunner *> deviceFor(const std::shared_ptr<const Compiled> &compiled,
                                           int device);
  /// Polls every device runner (`wait`: until its work has ended); the
  /// first watchdog stop breaks the communicator and is returned.
  llvm::Error checkDevices(bool wait);
  llvm::Expected<const interp::CallLayout *> layoutFor(const Compiled &compiled, uint64_t count);
  void publishCall(const Op &op);
  /// Stops the call when a peer process died (`processes`) or a peer made a
  /// different call as the same call number.
  void pollPeers(bool processes = true);
  void breakWith(collResult_t result);
};

namespace {

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

/// A collective of one rank, ready to run.
struct PreparedCollective {
  Communicator::Impl *comm = nullptr;
  const Op *op = nullptr;
  RankRunner *runner = nullptr;
  DeviceRunner *device = nullptr;                ///< the call runs on a GPU or on the emulation
  std::vector<interp::DeviceCopy> before, after; ///< device: copies around the kernel
  const interp::Plan *plan = nullptr;
  std::vector<interp::host::TbTrace> traces; ///< COLL_TRACE
  void *postDst = nullptr;
  const void *postSrc = nullptr;
  size_t postBytes = 0;
  uint64_t tag = 0; ///< host: callTag() of the call, stored in the FIFOs it sends on
};

/// The call number (low 32 bits) and a hash of what makes two calls the
/// same, as the senders store it in their connections.
uint64_t callTag(uint64_t seq, const Op &op) {
  const ir::CollectiveInfo info = ir::collectiveInfo(collectiveOf(op.kind));
  const size_t hash = llvm::hash_combine(static_cast<int>(op.kind), op.count,
                                         static_cast<int>(op.type),
                                         info.reduces ? static_cast<int>(op.op) : -1,
                                         info.hasRoot ? op.root : -1);
  return (seq << 32) | (static_cast<uint64_t>(hash) & 0xffffffffu);
}

/// Point-to-point operations of one rank with one peer in one direction.
struct P2PTask {
  Communicator::Impl *comm = nullptr;
  ConnectionEnd end;
  bool sending = false;
  int peer = -1;
  std::vector<const Op *> ops;
  bool ok = false;
};

} // namespace

llvm::Error Communicator::Impl::agree(llvm::Error local, llvm::StringRef what) {
  struct Status {
    int32_t failed = 0;
    char message[244] = {};
  };
  std::vector<Status> all(static_cast<size_t>(nranks));
  std::string mine;
  if (local) {
    all[rank].failed = 1;
    mine = llvm::toString(std::move(local));
    std::snprintf(all[rank].message, sizeof all[rank].message, "%s", mine.c_str());
  }
  if (llvm::Error err = boot->allgather(all.data(), sizeof(Status)))
    return collError(collRemoteError,
                     llvm::formatv("{0}: lost contact with the other ranks: {1}", what,
                                   llvm::toString(std::move(err))));
  for (int r = 0; r < nranks; ++r)
    if (all[r].failed) {
      all[r].message[sizeof all[r].message - 1] = 0;
      if (r == rank)
        return collError(collSystemError, what + ": " + mine);
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
                                     "(COLL_*_SLOT_BYTES or the built-in algorithm set)",
                                     rank, p.rank));

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

  // This host's ranks and processes.
  std::vector<transport::LocalRank> local;
  std::vector<uint64_t> procs;
  int myIndex = 0;
  bool allInProcess = true;
  for (int r = 0; r < nranks; ++r) {
    if (peers[r].processHash != me.processHash)
      allInProcess = false;
    if (peers[r].hostHash != me.hostHash)
      continue;
    auto it = std::find(procs.begin(), procs.end(), peers[r].processHash);
    int proc = static_cast<int>(it - procs.begin());
    if (it == procs.end())
      procs.push_back(peers[r].processHash);
    if (r == rank)
      myIndex = static_cast<int>(local.size());
    local.push_back({r, proc, peers[r].pid});
  }
  nprocs = static_cast<int>(procs.size());
  COLL_LOG(Info, Init, rank,
           llvm::formatv("rank {0} of {1}: host {2} ({3} hosts; {4} ranks and {5} processes on "
                         "this host); node shape {6}",
                         rank, nranks, me.hostname, shape.nodes, local.size(), nprocs,
                         shape.gpus ? llvm::formatv("{0} x {1}", shape.nodes, shape.gpus).str()
                                    : std::string("irregular")));

  // The algorithms.
  RegistryOptions ro;
  ro.algoDir = config.algoDir;
  ro.algoFiles = config.algoFiles;
  ro.builtin = config.builtin;
  auto loaded = Registry::load(ro, shape);
  if (!loaded)
    return agree(collError(collInvalidArgument, llvm::toString(loaded.takeError())),
                 "loading algorithms");
  registry = std::move(*loaded);
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
                                     "(COLL_ALGO_DIR, COLL_ALGO_FILES and the files must be the "
                                     "same on every rank)",
                                     r, rank));
  // Whether some host runs more processes than it has CPUs, agreed by all
  // ranks, since it changes which algorithm the built-in rules pick.
  {
    onlineCpus = sysconf(_SC_NPROCESSORS_ONLN);
    hostCrowded = onlineCpus > 0 && nprocs > onlineCpus;
    std::vector<uint64_t> crowdedAt(static_cast<size_t>(nranks));
    crowdedAt[rank] = hostCrowded;
    if (llvm::Error err = boot->allgather(crowdedAt.data(), sizeof(uint64_t)))
      return collError(collRemoteError,
                       "comparing the hosts' CPUs: " + llvm::toString(std::move(err)));
    crowded = std::any_of(crowdedAt.begin(), crowdedAt.end(), [](uint64_t c) { return c; });
  }
  if (!config.tuningFile.empty()) {
    auto rules = synth::readTuningFile(config.tuningFile);
    if (!rules)
      return agree(collError(collInvalidArgument, llvm::toString(rules.takeError())),
                   "reading the tuning file");
    userRules = std::move(*rules);
  }
  if (llvm::Error err = agree(llvm::Error::success(), "reading the tuning file"))
    return err;
  if (!config.topoFile.empty())
    if (llvm::Error err = synthesizeForJob())
      return err;

  // Connections: every (protocol, channel, sender) into every local rank.
  transport::FifoLayout layout;
  layout.nranks = nranks;
  p2pChannel = registry->maxChannel() + 1;
  layout.channels = p2pChannel + 1;
  layout.slotBytes = config.slotBytes;
  layout.used[static_cast<int>(ir::Protocol::Simple)] = true; // point to point
  for (const LoadedAlgorithm &a : registry->algorithms())
    layout.used[static_cast<int>(a.protocol)] = true;
  // Segment names carry the host: "hosts" of one machine (COLL_HOSTID,
  // network namespaces) share /dev/shm.
  const uint64_t hostNonce = llvm::hash_combine(nonce, me.hostHash);
  auto created = HostTransport::create(hostNonce, layout, local, myIndex, nprocs, allInProcess);
  llvm::Error err = agree(created ? llvm::Error::success() : created.takeError(),
                          "creating shared memory");
  if (!err) {
    transport = std::move(*created);
    err = agree(transport->attach(), "mapping shared memory");
  }
  if (err) {
    HostTransport::removeNames(hostNonce, local);
    return err;
  }
  transport->unlinkNames();
  COLL_LOG(Info, Shm, rank,
           llvm::formatv("connections: {0} per host in {1}, {2} channels, {3} MiB of address "
                         "space per receiving rank (pages committed on first use)",
                         allInProcess ? "process memory" : "shared memory",
                         allInProcess ? "this process" : "/dev/shm (names removed)",
                         layout.channels, layout.segmentBytes() >> 20));

  stop = std::make_unique<SharedStop>(*transport, rank);
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
  if (llvm::Error err = setupNetwork(local, allInProcess))
    return err;

  // Watch the other processes of this host.
  std::set<int> seenPids;
  for (const transport::LocalRank &l : local) {
    if (l.proc == local[myIndex].proc || !seenPids.insert(l.pid).second)
      continue;
    Watched w;
    w.pid = l.pid;
    w.rank = l.rank;
    w.pidfd = static_cast<int>(syscall(SYS_pidfd_open, l.pid, 0));
    watched.push_back(w);
  }
  if (rank == 0)
    logSelection();
  return llvm::Error::success();
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
                                                                ir::Protocol protocol) {
  if (hostOf[sender] == hostOf[receiver])
    return transport->end(sender, receiver, channel, protocol);
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

//===----------------------------------------------------------------------===//
// Selection
//===----------------------------------------------------------------------===//

bool Communicator::Impl::applies(const LoadedAlgorithm &a, uint64_t bytes, int root,
                                 std::string &reason) const {
  const interp::Plan &plan = a.compiled->plan;
  if (plan.minBytes && bytes < plan.minBytes) {
    reason = llvm::formatv("{0} B is below its minBytes {1}", bytes, plan.minBytes);
    return false;
  }
  if (plan.maxBytes && bytes > plan.maxBytes) {
    reason = llvm::formatv("{0} B is above its maxBytes {1}", bytes, plan.maxBytes);
    return false;
  }
  if (ir::collectiveInfo(a.collective).hasRoot && !a.anyRoot &&
      std::max(plan.root, 0) != root) {
    reason = llvm::formatv("it is written for root {0}", std::max(plan.root, 0));
    return false;
  }
  return true;
}

llvm::Expected<const Choice *> Communicator::Impl::select(ir::Collective coll, uint64_t bytes,
                                                          int root) {
  // A loop of one call is the common case: the calling thread's last
  // answer, without the lock (entries of `choices` are never erased).
  struct Last {
    uint64_t serial = 0, bytes = 0;
    int coll = -1, root = 0;
    const Choice *choice = nullptr;
  };
  thread_local Last last;
  if (last.serial == serial && last.bytes == bytes && last.coll == static_cast<int>(coll) &&
      last.root == root)
    return last.choice;
  auto key = std::make_tuple(static_cast<int>(coll), bytes, root);
  std::lock_guard<std::mutex> lock(choicesMutex);
  if (auto found = choices.find(key); found != choices.end()) {
    last = Last{serial, bytes, static_cast<int>(coll), root, &found->second};
    return &found->second;
  }

  std::vector<std::string> rejections;
  auto remember = [&](Choice c) {
    if (choices.size() >= 4096) {
      // Full: this thread's own copy, valid until its next select.
      thread_local Choice overflow;
      overflow = std::move(c);
      return &overflow;
    }
    Choice &kept = choices[key];
    kept = std::move(c);
    return &kept;
  };
  if (nranks == 1)
    return remember(Choice{nullptr, "", "one rank: recvbuff gets sendbuff", true});
  const auto &algos = registry->algorithms();
  auto candidates = [&](auto &&accept) -> const LoadedAlgorithm * {
    for (const LoadedAlgorithm &a : algos) {
      if (a.collective != coll || !accept(a))
        continue;
      std::string reason;
      if (applies(a, bytes, root, reason))
        return &a;
    }
    return nullptr;
  };
  auto tryRules = [&](const std::vector<TuningRule> &rules, bool user) -> std::optional<Choice> {
    for (size_t i = 0; i < rules.size(); ++i) {
      const TuningRule &rule = rules[i];
      if (!rule.matches(coll, nranks, bytes))
        continue;
      std::string why = user ? "tuning rule " + rule.origin + " (" + rule.text + ")"
                        : isCrowdedRule(rule)
                            ? "built-in rule for crowded hosts \"" + rule.text + "\""
                            : "built-in rule \"" + rule.text + "\"";
      switch (rule.kind) {
      case TuningRule::Target::Library:
        if (std::find(config.underneath.begin(), config.underneath.end(), rule.target) !=
            config.underneath.end())
          return Choice{nullptr, rule.target, why};
        rejections.push_back(llvm::formatv("{0}: no library '{1}' underneath Coll here", why,
                                           rule.target));
        break;
      case TuningRule::Target::Protocol:
        if (const LoadedAlgorithm *a =
                candidates([&](const LoadedAlgorithm &x) { return x.protocol == rule.protocol; }))
          return Choice{a, "", why};
        rejections.push_back(why + ": no loaded algorithm of that protocol applies");
        break;
      case TuningRule::Target::Algorithm: {
        bool named = false;
        for (const LoadedAlgorithm &a : algos) {
          if (a.name != rule.target)
            continue;
          named = true;
          std::string reason;
          if (a.collective != coll)
            reason = "it is a " + ir::collectiveName(a.collective).str();
          else if (applies(a, bytes, root, reason))
            return Choice{&a, "", why};
          rejections.push_back(llvm::formatv("{0}: {1} ({2}) does not apply: {3}", why, a.name,
                                             a.origin, reason));
        }
        if (!named)
          rejections.push_back(why + ": no algorithm '" + rule.target + "' is loaded");
        break;
      }
      }
    }
    return std::nullopt;
  };

  if (auto c = tryRules(userRules, true))
    return remember(*c);
  if (const LoadedAlgorithm *a = candidates([](const LoadedAlgorithm &x) { return !x.builtin; }))
    return remember(Choice{a, "", "the first user algorithm that applies (" + a->origin + ")"});
  if (auto c = tryRules(builtinTuningRules(crowded), false))
    return remember(*c);
  if (const LoadedAlgorithm *a = candidates([](const LoadedAlgorithm &x) { return x.builtin; }))
    return remember(Choice{a, "", "the first built-in algorithm that applies"});

  // Nothing: say why about every candidate.
  std::string message = llvm::formatv("no algorithm serves {0} of {1} B (root {2}) on {3} ranks",
                                      ir::collectiveName(coll), bytes, root, nranks);
  for (const LoadedAlgorithm &a : algos) {
    if (a.collective != coll)
      continue;
    std::string reason;
    applies(a, bytes, root, reason);
    message += "\n  " + a.name + " (" + a.origin + "): " + reason;
  }
  for (const Rejection &r : registry->rejections())
    message += "\n  " + r.name + " (" + r.origin + "): not loaded: " + r.reason;
  for (const std::string &r : rejections)
    message += "\n  " + r;
  if (registry->algorithms().empty() && registry->rejections().empty())
    message += "\n  (no algorithm is loaded: set COLL_ALGO_DIR or COLL_ALGO_FILES, or keep the "
               "built-in set)";
  return collError(collInvalidUsage, message);
}

llvm::Error Communicator::Impl::synthesizeForJob() {
  // Every rank finds its GPU in the topology, then all compare; whatever
  // cannot apply is said at INFO and the communicator goes on without.
  struct Mine {
    int32_t gpu = -1;
    char why[244] = {};
  };
  Mine mine;
  std::string why;
#if COLL_RUNTIME_HAVE_LANG
  auto topo = synth::readTopologyFile(config.topoFile);
  if (!topo) {
    why = llvm::toString(topo.takeError());
  } else if (!config.topoGpus.empty()) {
    llvm::SmallVector<llvm::StringRef, 16> parts;
    llvm::StringRef(config.topoGpus).split(parts, ',', -1, false);
    int32_t g = -1;
    if (parts.size() != static_cast<size_t>(nranks))
      why = llvm::formatv("COLL_TOPO_GPUS={0} names {1} GPUs for {2} ranks", config.topoGpus,
                          parts.size(), nranks);
    else if (parts[rank].trim().getAsInteger(10, g) || g < 0 || g >= topo->numRanks())
      why = llvm::formatv("COLL_TOPO_GPUS entry '{0}' of rank {1} is not a GPU of {2} (0..{3})",
                          parts[rank].trim(), rank, config.topoFile, topo->numRanks() - 1);
    else
      mine.gpu = g;
  } else if (hostOf.size() && *std::max_element(hostOf.begin(), hostOf.end()) > 0) {
    why = "the job spans hosts: name each rank's GPU with COLL_TOPO_GPUS";
  } else {
    // The GPU of this rank's CUDA device, by PCI bus id.
    std::string busWhy;
    const std::string bus = pciBusIdOfDevice(gpu, busWhy);
    if (bus.empty()) {
      why = "rank " + std::to_string(rank) + "'s GPU is not known at creation (" + busWhy +
            "): name it with COLL_TOPO_GPUS";
    } else {
      for (int32_t g = 0; g < topo->numRanks(); ++g)
        if (llvm::StringRef(topo->nodes[topo->gpus[g]].name).equals_insensitive("gpu@" + bus))
          mine.gpu = g;
      if (mine.gpu < 0)
        why = "rank " + std::to_string(rank) + "'s GPU " + bus + " is not in " + config.topoFile;
    }
  }
#else
  why = "this libcoll was built without the .coll compiler (COLL_ENABLE_LANG=OFF)";
#endif
  std::snprintf(mine.why, sizeof mine.why, "%s", why.c_str());
  std::vector<Mine> all(static_cast<size_t>(nranks));
  all[rank] = mine;
  if (llvm::Error err = boot->allgather(all.data(), sizeof(Mine)))
    return collError(collRemoteError, "synthesis: lost contact with the other ranks: " +
                                          llvm::toString(std::move(err)));
  std::string skipped;
  std::vector<int32_t> gpus;
  for (int r = 0; r < nranks && skipped.empty(); ++r) {
    if (all[r].gpu < 0)
      skipped = all[r].why;
    else if (std::find(gpus.begin(), gpus.end(), all[r].gpu) != gpus.end())
      skipped = llvm::formatv("ranks share GPU {0} of {1}; synthesis assumes one rank per GPU",
                              all[r].gpu, config.topoFile);
    gpus.push_back(all[r].gpu);
  }
  if (skipped.empty() && nranks < 2)
    skipped = "one rank: nothing to synthesize";
  if (!skipped.empty()) {
    if (rank == 0)
      COLL_LOG(Info, Tuning, rank,
               "COLL_TOPO_FILE=" + config.topoFile + ": no synthesis: " + skipped);
    return llvm::Error::success();
  }
#if COLL_RUNTIME_HAVE_LANG
  // Every rank computes the same programs and rules from the same input.
  std::string gpuList;
  for (int32_t g : gpus)
    gpuList += (gpuList.empty() ? "" : ",") + std::to_string(g);
  const std::string origin = "synthesized for " + config.topoFile + " GPUs " + gpuList;
  auto restricted = synth::restrictTopology(*topo, gpus);
  llvm::Expected<synth::TuneResult> tuned =
      restricted ? synth::tuneTopology(*restricted, {}) : restricted.takeError();
  std::vector<TuningRule> rules;
  std::string failure;
  if (!tuned) {
    failure = llvm::toString(tuned.takeError());
  } else {
    std::vector<bool> used(tuned->candidates.size(), false);
    for (const synth::TunedRange &range : tuned->ranges)
      used[range.candidate] = true;
    for (size_t i = 0; i < tuned->candidates.size() && failure.empty(); ++i)
      if (used[i])
        if (llvm::Error err = registry->addSynthesized(tuned->candidates[i].alg, origin))
          failure = llvm::toString(std::move(err));
    rules = synth::tunedRules(*tuned, nranks, origin);
  }
  if (llvm::Error err =
          agree(failure.empty() ? llvm::Error::success() : collError(collInternalError, failure),
                "synthesis for COLL_TOPO_FILE"))
    return err;
  // After the user's own table (which wins), before the built-in rules.
  userRules.insert(userRules.end(), rules.begin(), rules.end());
  if (rank == 0)
    COLL_LOG(
        Info, Tuning, rank,
        llvm::formatv("COLL_TOPO_FILE={0}: {1} programs {2}, {3} rules", config.topoFile,
                      std::count_if(registry->algorithms().begin(), registry->algorithms().end(),
                                    [&](const LoadedAlgorithm &a) { return a.origin == origin; }),
                      origin, rules.size()));
  return llvm::Error::success();
#else
  return llvm::Error::success();
#endif
}

void Communicator::Impl::logSelection() {
  if (!logEnabled(Level::Info, Tuning))
    return;
  std::string source =
      config.tuningFile.empty() ? std::string() : "tuning file " + config.tuningFile;
  if (std::any_of(userRules.begin(), userRules.end(), [](const TuningRule &r) {
        return llvm::StringRef(r.origin).startswith("synthesized for ");
      }))
    source += (source.empty() ? "" : ", ") + std::string("rules synthesized for COLL_TOPO_FILE");
  if (source.empty())
    source = "built-in rules";
  if (crowded)
    source += "; a host runs more processes than it has CPUs, so the built-in rules for crowded "
              "hosts come first";
  std::string out = llvm::formatv("algorithm selection for {0} ranks ({1}):", nranks, source).str();
  std::set<const LoadedAlgorithm *> used;
  for (int c = 0; c < static_cast<int>(ir::Collective::Custom); ++c) {
    auto coll = static_cast<ir::Collective>(c);
    // Size boundaries where the choice may change.
    std::set<uint64_t> cuts = {0};
    for (const std::vector<TuningRule> *rules :
         std::array<const std::vector<TuningRule> *, 2>{&userRules, &builtinTuningRules(crowded)})
      for (const TuningRule &r : *rules)
        if (!r.collective || *r.collective == coll) {
          cuts.insert(r.minBytes);
          if (r.maxBytes != UINT64_MAX)
            cuts.insert(r.maxBytes);
        }
    for (const LoadedAlgorithm &a : registry->algorithms())
      if (a.collective == coll) {
        cuts.insert(a.compiled->plan.minBytes);
        if (a.compiled->plan.maxBytes)
          cuts.insert(a.compiled->plan.maxBytes + 1);
      }
    std::vector<uint64_t> bounds(cuts.begin(), cuts.end());
    std::string last;
    uint64_t from = 0;
    auto flush = [&](uint64_t to) {
      if (!last.empty())
        out += llvm::formatv("\n  {0,-13} [{1}, {2})  {3}", ir::collectiveName(coll),
                             formatBytes(from), formatBytes(to), last)
                   .str();
    };
    for (size_t i = 0; i < bounds.size(); ++i) {
      auto chosen = select(coll, bounds[i], 0);
      const Choice *choice = chosen ? *chosen : nullptr;
      std::string text;
      if (!chosen) {
        llvm::consumeError(chosen.takeError());
        text = "(nothing applies)";
      } else if (choice->local) {
        text = "local copy: " + choice->why;
      } else if (choice->algo) {
        used.insert(choice->algo);
        text = llvm::formatv("{0} ({1}, {2}): {3}", choice->algo->name,
                             ir::protocolName(choice->algo->protocol), choice->algo->origin,
                             choice->why)
                   .str();
      } else {
        text = "library " + choice->library + ": " + choice->why;
      }
      if (text != last) {
        flush(bounds[i]);
        last = text;
        from = bounds[i];
      }
    }
    if (last != "(nothing applies)")
      flush(UINT64_MAX);
  }
  for (const LoadedAlgorithm &a : registry->algorithms())
    if (!used.count(&a))
      out += llvm::formatv("\n  not chosen for any size: {0} ({1}, {2}): another algorithm comes "
                           "first for every size (rules, then user files, then built-in)",
                           a.name, ir::collectiveName(a.collective), a.origin)
                 .str();
  for (const Rejection &r : registry->rejections())
    out += llvm::formatv("\n  not loaded: {0} ({1}): {2}", r.name, r.origin, r.reason).str();
  log(Level::Info, Tuning, rank, out);
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

llvm::Expected<Communicator::Impl::RunnerEntry *>
Communicator::Impl::runnerFor(const std::shared_ptr<const Compiled> &compiled) {
  auto found = runners.find(compiled.get());
  if (found != runners.end())
    return &found->second;
  const interp::Plan &plan = compiled->plan;
  std::vector<ConnectionEnd> ends(plan.connections.size());
  for (size_t c = 0; c < plan.connections.size(); ++c) {
    const interp::PlanConnection &info = plan.connections[c];
    if (info.sender != rank && info.receiver != rank)
      continue;
    auto end = connectionEnd(info.sender, info.receiver, info.channel, plan.protocol);
    if (!end)
      return collError(collSystemError, llvm::toString(end.takeError()));
    ends[c] = *end;
  }
  interp::host::RankOptions options;
  options.watchdog = std::chrono::milliseconds(config.watchdogMs);
  options.slotBytes = config.slotBytes[static_cast<int>(plan.protocol)];
  auto runner = RankRunner::create(plan, rank, ends, transport->myDoorbell(), *stop, options);
  if (!runner)
    return collError(collSystemError, llvm::toString(runner.takeError()));
  RunnerEntry entry;
  entry.runner = std::move(*runner);
  entry.uses = buffersUsed(plan, rank);
  keepAlive.push_back(compiled);
  return &runners.emplace(compiled.get(), std::move(entry)).first->second;
}

llvm::Expected<DeviceRunner *>
Communicator::Impl::deviceFor(const std::shared_ptr<const Compiled> &compiled, int device) {
  auto found = devices.find(compiled.get());
  if (found != devices.end())
    return found->second.get();
  // Collective: every rank selects the same plan for the same call, so all
  // of them get here together. Each makes its executor and shares where
  // its receiving FIFOs are; then each maps the ones it sends on.
  llvm::Error chosen = llvm::Error::success();
  // Every rank knows the shape, so all refuse together.
  if (shape.nodes > 1)
    return collError(collInvalidUsage,
                     llvm::formatv("device buffers on a communicator that spans {0} hosts: the "
                                   "network proxy carries host memory only (CUDA IPC joins the "
                                   "ranks of one host); pass host buffers",
                                   shape.nodes));
  if (!backend) {
    auto b = device >= 0 ? gpuBackend() : emulatedBackend();
    if (b)
      backend = *b;
    else
      chosen = b.takeError();
  }
  const std::string where = backend ? backend->describe(device) : std::string("GPU");
  const std::string what = where + ", " + compiled->plan.fileName;
  std::unique_ptr<DeviceRunner> created;
  if (!chosen) {
    interp::CudaOptions options;
    options.rank = rank;
    options.watchdogMs = config.watchdogMs;
    options.simpleSlotBytes = static_cast<uint32_t>(config.slotBytes[0]);
    options.llSlotBytes = static_cast<uint32_t>(config.slotBytes[1]);
    options.ll128SlotBytes = static_cast<uint32_t>(config.slotBytes[2]);
    auto made = backend->create(compiled->plan, options, device);
    if (made) {
      created = std::move(*made);
      if (trace) // COLL_TRACE: its kernels record a timeline (runRound collects it)
        chosen = created->traceEnqueued(true);
    } else {
      chosen = made.takeError();
    }
  }
  if (llvm::Error err = agree(std::move(chosen), what + ": executor"))
    return err;
  std::vector<interp::ConnectionExport> all(static_cast<size_t>(nranks));
  all[rank] = created->exportConnections();
  if (llvm::Error err = boot->allgather(all.data(), sizeof(interp::ConnectionExport)))
    return collError(collRemoteError, llvm::formatv("{0}: lost contact with the other ranks: {1}",
                                                    what, llvm::toString(std::move(err))));
  if (llvm::Error err = agree(created->importConnections(all), what + ": mapping FIFOs"))
    return err;
  COLL_LOG(Info, Init, rank,
           llvm::formatv("{0}: this rank's {1} tbs on {2}, FIFOs shared with CUDA IPC", what,
                         compiled->plan.tbCount(rank),
                         backend->emulated() ? "the CPU emulation of a GPU" : "the GPU"));
  keepAlive.push_back(compiled);
  std::lock_guard<std::mutex> lock(devicesMapMutex);
  return devices.emplace(compiled.get(), std::move(created)).first->second.get();
}

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
    first = collError(watchdog ? collTimeout : collUnhandledCudaError, kernel);
    if (stop->stopping()) {
      llvm::consumeError(std::move(first));
      std::string cause;
      collResult_t result = takeResult(stop->error(), cause);
      first = collError(result, cause + "; the kernel's report: " + kernel);
    }
    std::string message;
    collResult_t result = takeResult(std::move(first), message);
    breakWith(result);
    {
      std::lock_guard<std::mutex> lock(errorMutex);
      lastError = message;
    }
    first = collError(result, message);
  }
  return first;
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

void Communicator::Impl::publishCall(const Op &op) {
  ++callSeq;
  transport::CallDescriptor &d =
      transport->slot(transport->myLocalIndex()).calls[callSeq % transport::CallRing];
  d.seq.store(0, std::memory_order_relaxed);
  d.kind.store(static_cast<uint32_t>(op.kind), std::memory_order_relaxed);
  d.type.store(static_cast<uint32_t>(op.type), std::memory_order_relaxed);
  d.op.store(static_cast<uint32_t>(op.op), std::memory_order_relaxed);
  d.root.store(op.root, std::memory_order_relaxed);
  d.count.store(op.count, std::memory_order_relaxed);
  d.seq.store(callSeq, std::memory_order_release);
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
                               callSeq, rank, myCall, transport->localRanks()[i].rank, theirCall));
      return;
    }
  }
}

void Communicator::Impl::breakWith(collResult_t result) {
  int expected = collSuccess;
  asyncError.compare_exchange_strong(expected, result);
}

namespace {

llvm::Error prepareCollective(Communicator::Impl &c, const Op &op, PreparedCollective &out,
                              llvm::SmallVectorImpl<Task> &tasks) {
  out.comm = &c;
  out.op = &op;
  if (op.count == 0) {
    COLL_LOG(Trace, Coll, c.rank, llvm::formatv("{0} of 0 elements: nothing to do", opKindName(op.kind)));
    return llvm::Error::success();
  }
  const ir::Collective coll = collectiveOf(op.kind);
  const ir::CollectiveInfo info = ir::collectiveInfo(coll);
  const size_t es = interp::dataTypeSize(op.type);
  const uint64_t n = static_cast<uint64_t>(c.nranks);
  const uint64_t perRank = info.inputPerRank || info.outputPerRank ? n : 1;
  const uint64_t bytes = op.count * es * perRank;
  const int root = info.hasRoot ? op.root : 0;

  auto chosen = c.select(coll, bytes, root);
  if (!chosen)
    return chosen.takeError();
  const Choice *choice = *chosen;
  if (choice->local) {
    // Every collective of one rank leaves sendbuff's count elements in
    // recvbuff (allgather, reduce-scatter and alltoall of one rank too).
    if (op.device >= 0)
      return collError(collInvalidUsage,
                       llvm::formatv("{0}: a communicator of one rank runs no kernel, and device "
                                     "buffers of one rank are not supported yet: copy sendbuff "
                                     "to recvbuff on the stream (cudaMemcpyAsync)",
                                     opKindName(op.kind)));
    if (op.send != op.recv)
      std::memmove(op.recv, op.send, op.count * es);
    COLL_LOG(Trace, Coll, c.rank,
             llvm::formatv("{0} of {1} B on one rank: {2}", opKindName(op.kind), bytes,
                           op.send == op.recv ? "in place, nothing to do" : "copied"));
    return llvm::Error::success();
  }
  if (!choice->algo)
    return collError(collInvalidUsage,
                     llvm::formatv("{0} of {1} B: {2} sends it to the library '{3}', which the "
                                   "caller must run",
                                   opKindName(op.kind), bytes, choice->why, choice->library));
  // The algorithm's own program serves its root without a copy of the
  // shared pointer (an atomic round trip per call); another root compiles.
  const std::shared_ptr<const Compiled> *compiledFor = &choice->algo->compiled;
  std::shared_ptr<const Compiled> otherRoot;
  if (const int planRoot = choice->algo->compiled->plan.root;
      planRoot != root && !(planRoot < 0 && root == 0)) {
    auto compiled = c.registry->forRoot(*choice->algo, root);
    if (!compiled)
      return collError(collInvalidUsage,
                       llvm::formatv("{0} ({1}) cannot serve root {2}: {3}", choice->algo->name,
                                     choice->algo->origin, root,
                                     llvm::toString(compiled.takeError())));
    otherRoot = std::move(*compiled);
    compiledFor = &otherRoot;
  }
  const std::shared_ptr<const Compiled> &compiled = *compiledFor;
  const interp::Plan &plan = compiled->plan;
  // Which of its buffers this rank's tbs touch (for the adaptation below).
  std::array<bool, 3> uses{};
  DeviceRunner *device = nullptr;
  if (op.device >= 0 || c.config.emulatedDevice) {
    auto d = c.deviceFor(compiled, op.device);
    if (!d)
      return d.takeError();
    device = *d;
    uses = buffersUsed(plan, c.rank);
  }
  const bool onHost = device == nullptr;
  Communicator::Impl::RunnerEntry *entry = nullptr;
  if (onHost) {
    auto e = c.runnerFor(compiled);
    if (!e)
      return e.takeError();
    entry = *e;
    uses = entry->uses;
  }
  auto layout = c.layoutFor(*compiled, op.count);
  if (!layout)
    return layout.takeError();

  // Buffers: the plan wants input and output buffers aliased as its mode
  // says; the user gave theirs per NCCL's rules. Adapt locally (DESIGN §7):
  // a copy into the in-place position, or a temporary buffer.
  const bool inMeaningful =
      !(op.kind == OpKind::Broadcast || op.kind == OpKind::Scatter) || c.rank == root;
  const bool outMeaningful =
      !(op.kind == OpKind::Reduce || op.kind == OpKind::Gather) || c.rank == root;
  const uint64_t inElems = info.inputPerRank ? n * op.count : op.count;
  const uint64_t outElems = info.outputPerRank ? n * op.count : op.count;
  const ir::InPlaceOffsets off = ir::inPlaceOffsets(plan.shape, c.rank, op.count);
  auto *userIn = static_cast<const std::byte *>(op.send);
  auto *userOut = static_cast<std::byte *>(op.recv);
  bool userInPlace = false;
  if (inMeaningful && outMeaningful) {
    if (off.inputInOutput)
      userInPlace = userIn == userOut + off.inputInOutput * es;
    else if (off.outputInInput)
      userInPlace = userOut == userIn + off.outputInInput * es;
    else
      userInPlace = userIn == userOut;
    if (!userInPlace && userIn < userOut + outElems * es && userOut < userIn + inElems * es)
      return collError(collInvalidArgument,
                       llvm::formatv("{0}: sendbuff and recvbuff overlap without being in place "
                                     "(in place means {1})",
                                     opKindName(op.kind),
                                     off.inputInOutput   ? "sendbuff == recvbuff + rank*count"
                                     : off.outputInInput ? "recvbuff == sendbuff + rank*count"
                                                         : "sendbuff == recvbuff"));
  }
  bool inPlace = inMeaningful && outMeaningful ? (userInPlace ? plan.inplace : !plan.outofplace)
                                               : plan.inplace;
  std::byte *planIn = nullptr, *planOut = nullptr;
  std::string adaptation;
  // On a device, temporary buffers are the runner's and copies are
  // enqueued around the kernel, in order on its stream.
  auto temporary = [&](int which, uint64_t bytes) -> llvm::Expected<void *> {
    if (device)
      return device->temporary(which, bytes);
    return c.temp[which].get(bytes);
  };
  auto copyBefore = [&](void *dst, const void *src, uint64_t bytes) {
    if (device)
      out.before.push_back({dst, src, bytes});
    else
      std::memmove(dst, src, bytes);
  };
  if (inPlace) {
    const bool bigIsInput = info.inputPerRank && !info.outputPerRank;
    const uint64_t bigElems = std::max(inElems, outElems);
    std::byte *big = nullptr;
    if (userInPlace) {
      big = bigIsInput ? const_cast<std::byte *>(userIn) : userOut;
    } else if (outMeaningful && !bigIsInput) {
      big = userOut;
      if (inMeaningful) {
        copyBefore(big + off.inputInOutput * es, userIn, inElems * es);
        adaptation = "in-place algorithm: sendbuff copied into recvbuff first";
      }
    } else {
      auto t = temporary(0, bigElems * es);
      if (!t)
        return t.takeError();
      big = static_cast<std::byte *>(*t);
      if (inMeaningful)
        copyBefore(big + off.inputInOutput * es, userIn, inElems * es);
      if (outMeaningful) {
        out.postDst = userOut;
        out.postSrc = big + off.outputInInput * es;
        out.postBytes = outElems * es;
      }
      adaptation = "in-place algorithm run in a temporary buffer";
    }
    planIn = big + off.inputInOutput * es;
    planOut = big + off.outputInInput * es;
  } else {
    if (inMeaningful && !userInPlace) {
      planIn = const_cast<std::byte *>(userIn);
    } else if (inMeaningful || uses[0]) {
      auto t = temporary(0, inElems * es);
      if (!t)
        return t.takeError();
      planIn = static_cast<std::byte *>(*t);
      if (inMeaningful) {
        copyBefore(planIn, userIn, inElems * es);
        adaptation = "out-of-place algorithm: sendbuff copied to a temporary buffer first";
      }
    } else {
      planIn = reinterpret_cast<std::byte *>(unusedBuffer);
    }
    if (outMeaningful) {
      planOut = userOut;
    } else if (uses[1]) {
      auto t = temporary(1, outElems * es);
      if (!t)
        return t.takeError();
      planOut = static_cast<std::byte *>(*t);
    } else {
      planOut = reinterpret_cast<std::byte *>(unusedBuffer);
    }
  }

  if (logEnabled(Level::Trace, Coll))
    log(Level::Trace, Coll, c.rank,
        llvm::formatv("{0} of {1} B ({2} x {3}{4}{5}) {6} -> {7} ({8}; {9}){10}{11}",
                      opKindName(op.kind), bytes, op.count, interp::dataTypeName(op.type),
                      info.reduces ? " " + interp::reduceOpName(op.op).str() : std::string(),
                      info.hasRoot ? " root " + std::to_string(root) : std::string(),
                      userInPlace ? "in place" : "out of place", choice->algo->name,
                      ir::protocolName(plan.protocol), choice->why,
                      adaptation.empty() ? std::string() : "; " + adaptation,
                      onHost                  ? ""
                      : c.backend->emulated() ? "; on the emulated device"
                                              : "; on GPU " + std::to_string(op.device)));

  if (device) {
    interp::CallArgs args;
    args.type = op.type;
    args.op = op.op;
    args.count = op.count;
    args.input.assign(static_cast<size_t>(c.nranks), nullptr);
    args.output.assign(static_cast<size_t>(c.nranks), nullptr);
    args.input[c.rank] = planIn;
    args.output[c.rank] = planOut;
    if (llvm::Error err = device->prepare(args))
      return collError(collInvalidUsage, llvm::toString(std::move(err)));
    if (out.postBytes) {
      out.after.push_back({out.postDst, out.postSrc, out.postBytes});
      out.postBytes = 0;
    }
    c.publishCall(op);
    out.device = device;
    out.plan = &plan;
    return llvm::Error::success();
  }

  if (llvm::Error err = entry->runner->bind(**layout, op.type, op.op, planIn, planOut))
    return collError(collSystemError, llvm::toString(std::move(err)));
  c.publishCall(op);
  out.tag = callTag(c.callSeq, op);
  entry->runner->tagSends(out.tag);
  out.runner = entry->runner.get();
  out.plan = &plan;
  if (c.trace) {
    out.traces.assign(static_cast<size_t>(plan.tbCount(c.rank)), {});
    out.runner->setTrace(&out.traces);
  } else {
    out.runner->setTrace(nullptr);
  }
  out.runner->appendTasks(tasks);
  return llvm::Error::success();
}

void runP2P(void *arg) {
  P2PTask &t = *static_cast<P2PTask *>(arg);
  Communicator::Impl &c = *t.comm;
  ConnectionEnd &e = t.end;
  const auto watchdog = std::chrono::milliseconds(c.config.watchdogMs);
  auto stopping = [&] { return c.stop->stopping(); };
  const uint64_t slot = e.shape.slotBytes;
  constexpr uint64_t Header = 16;
  auto wait = [&](auto &&ready, const char *what) {
    auto r = interp::host::waitUntil(ready, stopping, watchdog);
    if (r == interp::host::WaitResult::TimedOut)
      c.stop->stall(llvm::formatv("watchdog: no progress for {0} ms: rank {1} {2} rank {3} "
                                  "(point to point; sender filled {4} slots, receiver freed {5})",
                                  c.config.watchdogMs, c.rank, what, t.peer,
                                  e.control->tail.load(std::memory_order_relaxed),
                                  e.control->head.load(std::memory_order_relaxed)));
    return r == interp::host::WaitResult::Ready;
  };
  for (const Op *op : t.ops) {
    const uint64_t bytes = op->count * interp::dataTypeSize(op->type);
    uint64_t done = 0;
    bool first = true;
    while (first || done < bytes) {
      if (t.sending) {
        uint64_t seq = e.control->tail.load(std::memory_order_relaxed);
        if (!wait([&] { return e.slotFree(seq); }, "sending to"))
          return;
        std::byte *s = e.fifo + (seq % interp::FifoDepth) * slot;
        uint64_t room = first ? slot - Header : slot;
        uint64_t n = std::min(room, bytes - done);
        if (first) {
          uint64_t header[2] = {bytes, static_cast<uint64_t>(op->type)};
          std::memcpy(s, header, Header);
          s += Header;
        }
        std::memcpy(s, static_cast<const std::byte *>(op->send) + done, n);
        done += n;
        e.control->sizes[seq % interp::FifoDepth].store(
            static_cast<uint32_t>(first ? n + Header : n), std::memory_order_relaxed);
        e.control->tail.store(seq + 1, std::memory_order_release);
        e.peerBell->ring();
      } else {
        uint64_t seq = e.control->head.load(std::memory_order_relaxed);
        if (!wait([&] { return e.control->tail.load(std::memory_order_acquire) > seq; },
                  "receiving from"))
          return;
        const std::byte *s = e.fifo + (seq % interp::FifoDepth) * slot;
        uint64_t room = first ? slot - Header : slot;
        if (first) {
          uint64_t header[2];
          std::memcpy(header, s, Header);
          if (header[0] != bytes) {
            c.stop->fail(collInvalidUsage,
                         llvm::formatv("rank {0} sent {1} B to rank {2}, which posted a receive "
                                       "of {3} B ({4} x {5}); counts and types must match",
                                       t.peer, header[0], c.rank, bytes, op->count,
                                       interp::dataTypeName(op->type)));
            return;
          }
          s += Header;
        }
        uint64_t n = std::min(room, bytes - done);
        std::memcpy(static_cast<std::byte *>(op->recv) + done, s, n);
        done += n;
        e.control->head.store(seq + 1, std::memory_order_release);
        e.peerBell->ring();
      }
      first = false;
    }
  }
  t.ok = true;
}

llvm::Error prepareP2P(Communicator::Impl &c, llvm::ArrayRef<Op> ops,
                       std::vector<std::unique_ptr<P2PTask>> &p2p,
                       llvm::SmallVectorImpl<Task> &tasks) {
  std::map<int, std::vector<const Op *>> sends, recvs;
  for (const Op &op : ops)
    (op.kind == OpKind::Send ? sends : recvs)[op.root].push_back(&op);
  // To itself: match in order and copy.
  auto &selfSends = sends[c.rank];
  auto &selfRecvs = recvs[c.rank];
  if (selfSends.size() != selfRecvs.size())
    return collError(collInvalidUsage,
                     llvm::formatv("rank {0} posted {1} sends and {2} receives to itself in one "
                                   "group; they must pair up",
                                   c.rank, selfSends.size(), selfRecvs.size()));
  for (size_t i = 0; i < selfSends.size(); ++i) {
    uint64_t sb = selfSends[i]->count * interp::dataTypeSize(selfSends[i]->type);
    uint64_t rb = selfRecvs[i]->count * interp::dataTypeSize(selfRecvs[i]->type);
    if (sb != rb)
      return collError(collInvalidUsage,
                       llvm::formatv("rank {0} sends {1} B to itself but receives {2} B", c.rank,
                                     sb, rb));
    if (sb)
      std::memmove(selfRecvs[i]->recv, selfSends[i]->send, sb);
  }
  sends.erase(c.rank);
  recvs.erase(c.rank);
  for (int direction = 0; direction < 2; ++direction) {
    auto &byPeer = direction == 0 ? sends : recvs;
    for (auto &[peer, list] : byPeer) {
      auto found = c.p2pEnds.find(peer);
      if (found == c.p2pEnds.end()) {
        auto out = c.connectionEnd(c.rank, peer, c.p2pChannel, ir::Protocol::Simple);
        if (!out)
          return collError(collInvalidUsage, llvm::toString(out.takeError()));
        auto in = c.connectionEnd(peer, c.rank, c.p2pChannel, ir::Protocol::Simple);
        if (!in)
          return collError(collInvalidUsage, llvm::toString(in.takeError()));
        found = c.p2pEnds.emplace(peer, std::make_pair(*out, *in)).first;
      }
      auto task = std::make_unique<P2PTask>();
      task->comm = &c;
      task->sending = direction == 0;
      task->peer = peer;
      task->end = direction == 0 ? found->second.first : found->second.second;
      task->ops = list;
      tasks.push_back(Task{&runP2P, task.get()});
      COLL_LOG(Trace, P2P, c.rank,
               llvm::formatv("{0} {1} message(s) {2} rank {3}", task->sending ? "send" : "receive",
                             list.size(), task->sending ? "to" : "from", peer));
      p2p.push_back(std::move(task));
    }
  }
  return llvm::Error::success();
}

} // namespace

llvm::Error Communicator::runRound(llvm::ArrayRef<Unit> units) {
  // A call of one communicator is the common case: its bookkeeping stays on
  // the stack (every allocation here costs a few percent of a small call).
  llvm::SmallVector<Task, 4> tasks;
  llvm::SmallVector<PreparedCollective, 1> prepared(units.size());
  std::vector<std::unique_ptr<P2PTask>> p2p;
  llvm::SmallVector<Impl *, 1> comms;
  llvm::Error first = llvm::Error::success();
  auto record = [&](Impl &c, llvm::Error err) {
    std::string message;
    collResult_t result = takeResult(std::move(err), message);
    {
      std::lock_guard<std::mutex> lock(c.errorMutex);
      c.lastError = message;
    }
    COLL_LOG(Warn, Coll, c.rank, llvm::formatv("{0}: {1}", collGetErrorString(result), message));
    if (!first)
      first = collError(result, message);
    else
      llvm::consumeError(collError(result, message)); // keep the first
    return result;
  };

  llvm::SmallVector<bool, 1> runs(units.size(), false);
  bool anyOnDevice = false;
  // Device runners are this round's (checkAsyncError() keeps off them).
  llvm::SmallVector<std::unique_lock<std::mutex>, 1> deviceLocks;
  for (size_t u = 0; u < units.size(); ++u) {
    Impl &c = *units[u].comm->impl;
    c.inCall.fetch_add(1, std::memory_order_acq_rel);
    comms.push_back(&c);
    deviceLocks.emplace_back(c.deviceMutex);
    // Kernels of earlier calls on a GPU end after their call returned:
    // one stopped by its watchdog breaks the communicator now.
    if (!c.devices.empty() && c.backend && !c.backend->emulated())
      if (llvm::Error err = c.checkDevices(false))
        llvm::consumeError(std::move(err)); // recorded below, as the broken communicator
    if (int broken = c.asyncError.load(std::memory_order_acquire); broken != collSuccess) {
      record(c, collError(static_cast<collResult_t>(broken),
                          llvm::formatv("the communicator is broken by an earlier error ({0}); "
                                        "abort or destroy it",
                                        collGetErrorString(static_cast<collResult_t>(broken)))));
      continue;
    }
    runs[u] = true;
    anyOnDevice = anyOnDevice || c.config.emulatedDevice || units[u].ops.front().device >= 0;
  }
  llvm::SmallVector<llvm::Error, 1> errors;
  llvm::SmallVector<llvm::SmallVector<Task, 4>, 1> unitTasks(units.size());
  std::vector<std::vector<std::unique_ptr<P2PTask>>> unitP2P(units.size());
  for (size_t u = 0; u < units.size(); ++u)
    errors.push_back(llvm::Error::success());
  auto prepare = [&](size_t u) {
    Impl &c = *units[u].comm->impl;
    errors[u] = units[u].ops.front().pointToPoint()
                    ? prepareP2P(c, units[u].ops, unitP2P[u], unitTasks[u])
                    : prepareCollective(c, units[u].ops.front(), prepared[u], unitTasks[u]);
  };
  if (anyOnDevice && units.size() > 1) {
    // A unit on a device may first make its executor, which is
    // collective (the ranks exchange IPC handles): with several ranks
    // driven by this thread (collCommInitAll and a group), each prepares
    // on a thread of its own.
    std::vector<std::thread> threads;
    for (size_t u = 0; u < units.size(); ++u)
      if (runs[u])
        threads.emplace_back(prepare, u);
    for (std::thread &t : threads)
      t.join();
  } else {
    for (size_t u = 0; u < units.size(); ++u)
      if (runs[u])
        prepare(u);
  }
  for (size_t u = 0; u < units.size(); ++u) {
    if (errors[u])
      record(*units[u].comm->impl, std::move(errors[u]));
    for (Task &t : unitTasks[u])
      tasks.push_back(std::move(t));
    for (auto &t : unitP2P[u])
      p2p.push_back(std::move(t));
  }
  if (first) {
    for (Impl *c : comms)
      c->inCall.fetch_sub(1, std::memory_order_acq_rel);
    return first;
  }

  interp::host::IdlePoll poll;
  poll.poll = [](void *arg) {
    for (Impl *c : *static_cast<llvm::SmallVectorImpl<Impl *> *>(arg))
      c->pollPeers();
  };
  poll.arg = &comms;
  Impl &lead = *units.front().comm->impl;
  const bool tracing = llvm::any_of(comms, [](const Impl *c) { return c->trace != nullptr; });
  const auto t0 =
      tracing ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  // Calls on a device. On a GPU every unit's work is enqueued before any
  // caller's stream is made to wait for it, so that ranks of this process
  // sharing a GPU run side by side; the call returns without waiting. On
  // the emulation an enqueue returns when the kernel has ended, so the
  // ranks of this round launch at once, one thread each when there is more
  // than one thing to run.
  llvm::SmallVector<size_t, 1> onGpu, onEmulation;
  for (size_t u = 0; u < units.size(); ++u)
    if (prepared[u].device)
      (prepared[u].comm->backend->emulated() ? onEmulation : onGpu).push_back(u);
  llvm::SmallVector<std::string, 1> deviceErrors(units.size());
  auto enqueueOne = [&](size_t u) {
    PreparedCollective &p = prepared[u];
    llvm::Error err = p.device->enqueue(p.op->stream, p.before, p.after);
    if (!err && p.comm->backend->emulated()) {
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
  // With COLL_TRACE a call on a GPU waits for its kernel, whose timeline is
  // collected below (on the emulation it has ended when enqueue returns).
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
  // What the host tasks move at most: a small round runs on this thread
  // alone (EngineOptions::soloWork).
  uint64_t work = 0;
  for (size_t u = 0; u < units.size(); ++u)
    if (prepared[u].runner && !prepared[u].device)
      work += prepared[u].runner->work();
  for (const auto &t : p2p)
    for (const Op *op : t->ops)
      work += op->count * interp::dataTypeSize(op->type);
  if (!tasks.empty())
    if (llvm::Error err = lead.engine->run(tasks, poll, work))
      record(lead, collError(collSystemError, llvm::toString(std::move(err))));
  for (std::thread &t : deviceThreads)
    t.join();
  // A mismatched call can complete when the data happen to fit. On the
  // host, each sender's tag in the connections this rank received on says
  // which call the data belonged to (no extra cache miss); a differing one
  // is looked up in the peers' call descriptors for the report. After a
  // kernel, the descriptors are compared, and a dead peer process gives the
  // watchdog's report its cause.
  if (anyOnDevice) {
    for (Impl *c : comms)
      c->pollPeers(true);
  } else {
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

  for (size_t u = 0; u < units.size(); ++u) {
    Impl &c = *units[u].comm->impl;
    if (!deviceErrors[u].empty()) {
      // The FIFOs shared with the other ranks are mid-transfer: this
      // communicator cannot run another call. A peer found dead (pollPeers
      // above) is the cause; the kernel's report says where it waited.
      const bool emulated = c.backend && c.backend->emulated();
      const std::string kernel = (emulated ? "emulated device: " : "GPU: ") + deviceErrors[u];
      const bool watchdog = deviceErrors[u].find("watchdog:") != std::string::npos;
      llvm::Error err = collError(watchdog   ? collTimeout
                                  : emulated ? collSystemError
                                             : collUnhandledCudaError,
                                  kernel);
      if (c.stop->stopping()) {
        llvm::consumeError(std::move(err));
        std::string cause;
        collResult_t result = takeResult(c.stop->error(), cause);
        err = collError(result, cause + "; the kernel's report: " + kernel);
      }
      c.breakWith(record(c, std::move(err)));
      continue;
    }
    if (c.stop->stopping()) {
      collResult_t result = record(c, c.stop->error());
      c.breakWith(result);
      continue;
    }
    PreparedCollective &p = prepared[u];
    if (p.runner)
      p.runner->finishAverage();
    if (p.runner && c.trace) {
      std::lock_guard<std::mutex> lock(c.trace->mutex);
      c.trace->timeline.addCall(*p.plan, c.rank, p.op->type, t0,
                                std::chrono::steady_clock::now(), p.traces);
    } else if (p.device && c.trace) {
      // The kernel's timeline: it has ended (above).
      std::lock_guard<std::mutex> lock(c.trace->mutex);
      if (llvm::Error err = p.device->collectTrace(c.trace->timeline, p.op->type, t0,
                                                   std::chrono::steady_clock::now())) {
        c.breakWith(record(c, collError(collSystemError, llvm::toString(std::move(err)))));
        continue;
      }
    }
    if (p.postBytes)
      std::memcpy(p.postDst, p.postSrc, p.postBytes);
  }
  for (Impl *c : comms)
    c->inCall.fetch_sub(1, std::memory_order_acq_rel);
  return first;
}

//===----------------------------------------------------------------------===//
// Communicator
//===----------------------------------------------------------------------===//

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
Communicator::~Communicator() = default;

llvm::Expected<std::unique_ptr<Communicator>>
Communicator::create(std::unique_ptr<Bootstrap> boot, const Config &config, uint64_t nonce) {
  auto impl = std::make_unique<Impl>();
  impl->boot = std::move(boot);
  impl->config = config;
  impl->nonce = nonce;
  if (llvm::Error err = impl->setup())
    return err;
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

int Communicator::rank() const { return impl->rank; }
int Communicator::nranks() const { return impl->nranks; }
const Config &Communicator::config() const { return impl->config; }

llvm::Expected<const Choice *> Communicator::select(ir::Collective coll, uint64_t bytes,
                                                    int root) {
  return impl->select(coll, bytes, root);
}

collResult_t Communicator::asyncError() const {
  return static_cast<collResult_t>(impl->asyncError.load(std::memory_order_acquire));
}

collResult_t Communicator::checkAsyncError() {
  std::unique_lock<std::mutex> lock(impl->deviceMutex, std::try_to_lock);
  if (lock.owns_lock() && !impl->devices.empty() && impl->backend && !impl->backend->emulated())
    llvm::consumeError(impl->checkDevices(false)); // breaks the communicator, records the message
  return asyncError();
}

int Communicator::boundDevice() const { return impl->gpu; }

llvm::Error Communicator::waitDevice() {
  std::lock_guard<std::mutex> lock(impl->deviceMutex);
  return impl->checkDevices(true);
}
void Communicator::bindDevice(int device) { impl->gpu = device; }

const char *Communicator::lastError() {
  std::lock_guard<std::mutex> lock(impl->errorMutex);
  return impl->lastError.c_str();
}

void Communicator::setLastError(const std::string &message) {
  std::lock_guard<std::mutex> lock(impl->errorMutex);
  impl->lastError = message;
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

llvm::Error Communicator::finalize() {
  {
    // Kernels this rank enqueued on a GPU end first (the watchdog bounds them).
    std::lock_guard<std::mutex> lock(impl->deviceMutex);
    if (!impl->devices.empty())
      if (llvm::Error err = impl->checkDevices(true))
        return err;
  }
  if (impl->net && !impl->stop->stopping() &&
      !impl->net->drain(std::chrono::milliseconds(impl->config.watchdogMs)))
    return collError(collTimeout,
                     llvm::formatv("finalize: rank {0}'s data for other hosts did not leave within "
                                   "the watchdog period ({1} ms)",
                                   impl->rank, impl->config.watchdogMs));
  if (llvm::Error err = impl->boot->barrier())
    return collError(collRemoteError,
                     "finalize: lost contact with the other ranks: " + llvm::toString(std::move(err)));
  return llvm::Error::success();
}

void Communicator::abort() {
  impl->stop->fail(collRemoteError,
                   llvm::formatv("rank {0} aborted the communicator", impl->rank));
  impl->breakWith(collRemoteError);
  {
    // Kernels in flight on a device stop at their next poll instead of
    // running on until their watchdog.
    std::lock_guard<std::mutex> lock(impl->devicesMapMutex);
    for (auto &[plan, runner] : impl->devices)
      if (llvm::Error err = runner->abort())
        COLL_LOG(Warn, Coll, impl->rank, "abort: " + llvm::toString(std::move(err)));
  }
  // A call in flight on another thread sees the stop word at once; wait for
  // it to leave before the caller frees the communicator.
  for (int i = 0; impl->inCall.load(std::memory_order_acquire) != 0 && i < 100000; ++i)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
}

llvm::Expected<std::unique_ptr<Communicator>>
Communicator::split(int color, int key, const Config &config) {
  Impl &c = *impl;
  struct Entry {
    int32_t color, key, rank, pad;
  };
  std::vector<Entry> all(static_cast<size_t>(c.nranks));
  all[c.rank] = {color, key, c.rank, 0};
  if (llvm::Error err = c.boot->allgather(all.data(), sizeof(Entry)))
    return collError(collRemoteError, "split: " + llvm::toString(std::move(err)));
  std::vector<Entry> mine;
  for (const Entry &e : all)
    if (color != COLL_SPLIT_NOCOLOR && e.color == color)
      mine.push_back(e);
  std::stable_sort(mine.begin(), mine.end(), [](const Entry &a, const Entry &b) {
    return a.key != b.key ? a.key < b.key : a.rank < b.rank;
  });
  // Each new communicator's first rank starts a root and shares its id.
  std::vector<std::array<char, 128>> ids(static_cast<size_t>(c.nranks));
  llvm::Error rootError = llvm::Error::success();
  if (!mine.empty() && mine.front().rank == c.rank) {
    auto address = bootstrapAddress();
    if (!address) {
      rootError = std::move(address.takeError());
    } else if (auto root = startRoot(*address)) {
      encodeUniqueId(*root, ids[c.rank].data());
    } else {
      rootError = root.takeError();
    }
  }
  if (llvm::Error err = c.agree(std::move(rootError), "split"))
    return err;
  if (llvm::Error err = c.boot->allgather(ids.data(), 128))
    return collError(collRemoteError, "split: " + llvm::toString(std::move(err)));
  if (color == COLL_SPLIT_NOCOLOR)
    return nullptr;
  int newRank = 0;
  for (size_t i = 0; i < mine.size(); ++i)
    if (mine[i].rank == c.rank)
      newRank = static_cast<int>(i);
  auto id = decodeUniqueId(ids[mine.front().rank].data());
  if (!id)
    return collError(collInternalError, llvm::toString(id.takeError()));
  PeerInfo self = c.peers[c.rank];
  self.configHash = config.agreedHash();
  auto boot = connectBootstrap(*id, static_cast<int>(mine.size()), newRank, self);
  if (!boot)
    return collError(collRemoteError, "split: " + llvm::toString(boot.takeError()));
  return create(std::move(*boot), config, id->nonce);
}

// Whether `p` is CUDA device memory (Comm.h).
bool isDevicePointer(const void *p) { return deviceOfPointer(p) >= 0; }

} // namespace coll::rt

