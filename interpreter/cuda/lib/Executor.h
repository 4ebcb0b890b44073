//===- Executor.h - Inside the CUDA backend's executor ----------*- C++ -*-===//
//
// The executor of a plan on a device (DeviceExecutor.h is its face): what
// its parts share. Plain C++ over the CUDA runtime API: kernels are
// launched through cudaLaunchKernel with the entry points of
// device/Kernels.h, so no CUDA type crosses into DeviceExecutor.h and no
// LLVM header reaches nvcc. Each part is a file of its own:
//
//   Executor.cpp     creation: the plan's tables and the device state on
//                    the device, the FIFOs a rank receives on, the host stop
//                    word; teardown
//   Connections.cpp  where each FIFO and signal flag lies: on this GPU,
//                    another GPU, in host memory, on another host; the
//                    peers' buffers and windows
//   Call.cpp         a call: preparation (tables, block size, kernel
//                    build), launch, enqueue, finish, poll, abort, timing
//   Timeline.cpp     the device's timeline of a call
//   CopyEngines.cpp  a call's copies on copy engines between two kernels
//
// and beside it, Device.h (allocations, uploads, timing, the current
// device), TimeReference.cpp (collbench's reference kernels) and
// Backend.cpp (the backend object that makes executors).
//
// Device memory per executor: the plan's tbs and steps (uploaded once), the
// device state (device/DeviceTypes.h; zeroed once, and again after a
// watchdog stop), the resolved slices (re-uploaded when the count changes),
// the rank table and the scratch buffers (per call, uploaded only when they
// change), and the watchdog report in host-mapped memory, which finish()
// reads without a copy.
//
// Every call of the face makes the executor's device current for its
// duration (DeviceScope) and gives the caller's back.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CUDA_LIB_EXECUTOR_H
#define COLL_INTERPRETER_CUDA_LIB_EXECUTOR_H

#include "Device.h"
#include "HostSupport.h"

#include "device/DeviceTypes.h"
#include "device/Kernels.h"

#include "coll/interpreter/DeviceExecutor.h"

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace coll::interp::cuda {

class CudaExecutor final : public DeviceExecutor {
public:
  CudaExecutor(Plan plan, const CudaOptions &options)
      : plan_(std::move(plan)), options(options), proto(static_cast<Proto>(plan_.protocol)) {}
  ~CudaExecutor() override;

  /// Sets the executor up on the current device (Executor.cpp).
  llvm::Error start();

  // DeviceExecutor.
  const Plan &plan() const override { return plan_; }
  uint64_t sliceElems(DataType type) const override {
    return slotBytes(options, proto) / dataTypeSize(type);
  }
  llvm::Expected<CallResult> run(const CallArgs &args) override;
  void setTimeline(Timeline *t) override { timeline = t; }
  llvm::Expected<CallResult> prepare(const CallArgs &args) override;
  llvm::Error launch(void *stream) override;
  llvm::Error finish(void *stream) override;
  llvm::Error enqueue(void *stream, llvm::ArrayRef<DeviceCopy> before,
                      llvm::ArrayRef<DeviceCopy> after) override;
  llvm::Error join(void *stream) override;
  llvm::Expected<bool> poll(bool wait) override;
  llvm::Expected<void *> temporary(int which, uint64_t bytes) override;
  llvm::Error abort() override;
  const CudaDeviceInfo &device() const override { return deviceInfo; }
  void traceEnqueued(bool on) override { traceEnqueues = on; }
  llvm::Error collectEnqueued(Timeline &timeline, DataType type,
                              std::chrono::steady_clock::time_point t0,
                              std::chrono::steady_clock::time_point t1) override;
  llvm::Expected<std::vector<double>> timeLaunches(unsigned warmup, unsigned iters,
                                                   bool graph) override;
  ConnectionExport exportConnections() const override { return exported; }
  llvm::Error placeConnections(const std::vector<ConnectionExport> &ranks) override;
  llvm::Error importConnections(const std::vector<ConnectionExport> &ranks) override;
  llvm::Error setPeerBuffers(llvm::ArrayRef<PeerBuffers> ranks) override;
  llvm::Error setPeerWindows(llvm::ArrayRef<PeerWindows> ranks) override;
  std::vector<ProxiedConnection> proxiedConnections() const override;
  LaunchShape launchShape() const override { return shape; }

private:
  DeviceScope scope() const { return DeviceScope(deviceInfo.device); }
  bool oneRank() const { return options.rank >= 0; }

  //--- Executor.cpp ---------------------------------------------------------
  /// Which peers the direct steps of this one rank reach, and which of
  /// their buffers (directPeers, peerBuffersUsed).
  void findDirectPeers();
  /// Where the connections and signal flags of this executor lie at
  /// creation: in the device state (every rank), or this rank's own
  /// allocation of what it receives on, exported (one rank).
  llvm::Error placeOwnConnections();
  /// Where each connection's memory lies (connPointers), uploaded.
  llvm::Error uploadConnections();
  llvm::Error uploadSignals() {
    return upload(signalTable, signalPointers.data(), signalPointers.size(), stream);
  }
  /// Zeroes the device state, the FIFOs this rank receives on and the
  /// watchdog report: after a stop, every counter starts afresh.
  llvm::Error resetState();
  /// Everything the executor holds on the device and in the host (the
  /// destructor, on the executor's device).
  void releaseAll();
  /// The allocations ordered on the executor's stream (start() orders them,
  /// releaseAll() returns them before the stream is destroyed): one list,
  /// so that none is left to its destructor after the stream is gone.
  std::array<DeviceMemory *, 24> streamMemory() {
    return {&tbs,         &steps,      &state,         &slices,         &ranks,
            &scratch,     &connTable,  &scopeTable,    &temp[0],        &temp[1],
            &traceEvents, &traceCounts, &stepPeers,    &memberPeers,    &memberSignals,
            &signals,     &signalTable, &deps,         &windowDescriptorTable, &windowBaseTable,
            &preTbs,      &postTbs,    &postSteps,     &postDeps};
  }

  //--- Connections.cpp ------------------------------------------------------
  /// Pinned host memory shared between processes: this rank's FIFOs from
  /// GPUs without peer access to its own (`own`), and the other ranks' such
  /// FIFOs that it sends on, mapped from their processes.
  struct HostArea {
    int fd = -1; ///< own: the memfd
    unsigned char *base = nullptr;
    uint64_t bytes = 0;
    bool mapped = false;     ///< munmap at the end (not another executor's in this process)
    bool registered = false; ///< cudaHostUnregister at the end
  };
  static void releaseArea(HostArea &area);

  //--- Call.cpp -------------------------------------------------------------
  /// How a kernel launches: its block size and resident blocks per SM.
  struct Residency {
    const void *kernel;
    uint32_t threads;
    int blocksPerSm;
    uint32_t cap; ///< the most threads it was allowed (threadsForStep)
  };
  /// Sets up `kernel` for `sharedBytes` of dynamic shared memory and picks
  /// its block size (options.threadsPerBlock, or for 0 the largest of 512,
  /// 256, ..., 32 that fits) such that every block of a launch can be
  /// resident at once: persistent blocks that wait for blocks that never
  /// start deadlock.
  llvm::Expected<Residency> chooseResidency(const void *kernel, uint32_t sharedBytes,
                                            uint32_t cap);
  /// The rank table of the call (RankPointers per rank) and, on windows,
  /// where this rank's buffers lie in its windows; uploaded when changed.
  llvm::Error uploadRankTable(const CallArgs &args, bool onWindows,
                              WindowDescriptor &own);
  /// The kernel build and block size of the prepared call (`kernel`,
  /// `shape`), for `sharedBytes` and at most `cap` threads.
  llvm::Error chooseKernel(uint8_t type, bool onWindows, uint32_t cap);
  /// The prepared call's kernels on `s`, without the executor's scope.
  llvm::Error launchOn(cudaStream_t s);
  /// The collective kernel with `p`, cooperatively, at the prepared shape.
  llvm::Error launchKernel(const KernelParams &p, cudaStream_t s);
  /// Waits for `s`; a watchdog stop becomes the error.
  llvm::Error finishOn(cudaStream_t s);
  /// The watchdog's report of a stopped launch as an error, the state
  /// reset; success where no launch stopped.
  llvm::Error takeWatchdogReport();
#if COLL_CUDA_EMULATION
  /// Tells the emulation's traffic counters what each range of the
  /// prepared call's memory is (docs/CUDA.md, "Traffic").
  void describeTraffic(const CallArgs &args) const;
#endif

  /// Copy engines: the plan's split (start), and for the prepared call
  /// the copies (prepare) that launchOn runs between its two kernels.
  llvm::Error startCopyEngines();
  llvm::Error prepareCopyEngines(const CallArgs &args, const WindowDescriptor &own,
                                 CallResult &result);
  llvm::Error launchCopyEngines(cudaStream_t s);

  //--- Timeline.cpp ---------------------------------------------------------
  /// Stores the timeline's buffers in the device state (null: none).
  llvm::Error setTraceBuffers(DeviceTraceEvent *events, uint32_t *counts, uint32_t capacity);
  /// Arms params for a timeline of the prepared call; after it, hands the
  /// events of the call that ran from t0 to t1 to `timeline`.
  llvm::Error armTimeline();
  llvm::Error collectTimeline(Timeline &out, DataType type,
                              std::chrono::steady_clock::time_point t0,
                              std::chrono::steady_clock::time_point t1);

  //--- State ----------------------------------------------------------------
  Plan plan_;
  Timeline *timeline = nullptr;
  bool traceEnqueues = false; ///< traceEnqueued()
  bool enqueueArmed = false;  ///< the last enqueue() records a timeline
  CudaOptions options;
  Proto proto;
  LaunchShape shape;
  ConnectionExport exported; ///< one rank: the FIFOs it receives on

  CudaDeviceInfo deviceInfo;
  uint32_t watchdogMs = 0;
  ConnectionLayout connection;
  StateLayout stateLayout;

  DeviceMemory tbs, steps, state, slices, ranks, scratch;
  DeviceMemory deps; ///< Plan::deps: steps that wait on several
  /// Direct steps (Plan::stepPeers, Plan::memberPeers, Plan::memberSignals,
  /// Plan::signals).
  DeviceMemory stepPeers, memberPeers, memberSignals, signals;
  /// Direct steps: where each signal pair's flag lies (KernelParams::signalFlags).
  DeviceMemory signalTable;
  std::vector<uint64_t *> signalPointers; ///< as uploaded; null: not reached (one rank)
  /// One rank with direct steps: per signal pair, its place among the
  /// flags of its receiver (ConnectionExport::signals).
  std::vector<uint64_t> signalAtReceiver;
  /// One rank: whether its steps are direct ones, the peers they reach (the
  /// ranks of their operands and signals), the peers' buffers they load or
  /// store (rank, buffer: 0 input, 1 output, 2 scratch) and the caller's
  /// setPeerBuffers.
  bool direct = false;
  std::vector<int32_t> directPeers;
  std::vector<std::pair<int32_t, uint8_t>> peerBuffersUsed;
  std::vector<PeerBuffers> peerBuffers;
  /// setPeerWindows: every rank's windows (empty: setPeerBuffers' way),
  /// and the tables the kernel reads (KernelParams::windowDescriptors,
  /// windowBases), uploaded when they change.
  std::vector<PeerWindows> peerWindows;
  bool windowsInHost = false; ///< a PeerWindows::hostMemory: the CrossGpu build
  DeviceMemory windowDescriptorTable, windowBaseTable;
  bool windowTablesUploaded = false;
  DeviceMemory traceEvents, traceCounts; ///< run() with a timeline
  uint32_t traceCapacity = 0;            ///< events per block
  DeviceMemory temp[2];                  ///< temporary()
  /// One rank: the connections it receives on, in Plan::connections order.
  DeviceMemory received;
  DeviceMemory connTable;
  std::vector<unsigned char *> connPointers; ///< per connection; null: not reached yet
  /// Per connection: the scope of its synchronising accesses (Scope::Gpu
  /// until importConnections finds its other end on another GPU), uploaded.
  std::vector<Scope> connScopes;
  DeviceMemory scopeTable;
  /// A connection of this executor's launches runs at .sys: they take the
  /// CrossGpu build (device/Kernels.h).
  bool crossGpu = false;
  bool forceSys = false; ///< COLL_CUDA_SCOPE=sys
  std::vector<uint64_t> indexAtReceiver; ///< per connection
  std::vector<void *> opened;            ///< IPC mappings of other processes
  /// Per connection: its FIFO lies in pinned host memory (placeConnections
  /// at the receiver; importConnections at the sender).
  std::vector<uint8_t> viaHost;
  /// Per connection in this rank's own host memory: its address here (for
  /// a network proxy: proxiedConnections()).
  std::vector<unsigned char *> hostPointers;
  /// Per rank: on another host (ConnectionExport::remote, placeConnections).
  std::vector<uint8_t> remotePeer;
  HostArea own;
  std::vector<HostArea> mappedAreas;
  uint64_t ownHeaderBytes = 0;
  int32_t firstTb = 0, launchTbs = 0; ///< the tbs a launch runs
  WatchdogReport *report = nullptr;   ///< host-mapped
  WatchdogReport *deviceReport = nullptr;
  /// CudaOptions::hostStop as the device reaches it (mapHostStop), or null.
  const uint32_t *deviceHostStop = nullptr;
  /// The executor's own stream (non-blocking: it never waits for the
  /// legacy default stream): uploads, run(), timeLaunches(), enqueue().
  cudaStream_t stream = nullptr;
  cudaEvent_t startEvent = nullptr, stopEvent = nullptr;
  cudaEvent_t callerReady = nullptr, launched = nullptr; ///< enqueue() and join()
  cudaStream_t abortStream = nullptr;                    ///< abort(): beside `stream`
  /// Blocks of other executors that share this GPU and run at the same
  /// time (importConnections): they must be resident together.
  uint64_t coResidentTbs = 0;

  /// Copy engines (CudaOptions::copyEngineBytes): the plan's split, and
  /// the tbs of its first and last runs, and the steps and dependencies of
  /// the last (those on copies dropped), on the device.
  std::optional<CopyPhases> copyPhases;
  DeviceMemory preTbs, postTbs, postSteps, postDeps;
  /// The prepared call runs its copies on copy engines: these, in order.
  struct EngineCopy {
    void *dst;
    const void *src;
    uint64_t bytes;
  };
  std::vector<EngineCopy> engineCopies;
  bool copyEngineCall = false;

  std::optional<CallLayout> layout;
  uint64_t layoutCount = 0;
  std::vector<RankPointers> rankTable; ///< as uploaded
  std::vector<Residency> residencies;  ///< per kernel used so far

  bool prepared = false;
  const void *kernel = nullptr;
  KernelParams params{};
  /// avg: the division after the collective.
  const void *averageKernel = nullptr;
  int32_t averageFirstRank = 0, averageRanks = 0;
  uint64_t averageElems = 0;
};

} // namespace coll::interp::cuda

#endif // COLL_INTERPRETER_CUDA_LIB_EXECUTOR_H
