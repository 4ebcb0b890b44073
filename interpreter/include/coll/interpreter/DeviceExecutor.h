//===- DeviceExecutor.h - Running a plan on a device -------------*- C++ -*-===//
//
// The CUDA backend (docs/CUDA.md): a persistent kernel with one block per
// <tb>, over connection FIFOs in device memory with the real framing of the
// plan's protocol. It runs the same step semantics (StepSemantics.h) as the
// host backend, in the same order, so its results are bit-identical to the
// host backend's. A device is a GPU, or the CPU emulation of one: the same
// kernel source on a SIMT launcher (docs/CUDA.md, "On the CPU").
//
// A DeviceBackend makes executors and stages buffers. Two libraries of
// interpreter/cuda implement it, CollCuda (cudaBackend(): a GPU, built with
// nvcc) and CollCudaEmu (emulatedBackend(): every build). They compile the
// same sources, so a program links at most one of them; it reaches the GPU
// backend otherwise as a plugin, libcoll_cuda.so (loadDeviceBackend), as
// libcoll.so and collrun do. Those entry points are declared where they
// are defined, in coll/cuda/Backend.h.
//
// A call is prepare() (host work: resolve the count, check the buffers,
// upload tables, check that every block can be resident) followed by
// launch() (kernels only, so it can be captured in a CUDA graph and replayed
// without the host) and finish() (wait, then turn a watchdog stop into an
// error). run() does all three and times the launch with CUDA events.
//
// This header has no CUDA types, so host code can include it; streams are
// passed as `void *` (a cudaStream_t; null is the legacy default stream).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_DEVICEEXECUTOR_H
#define COLL_INTERPRETER_DEVICEEXECUTOR_H

#include "coll/interpreter/Executor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace coll::interp {

struct CudaOptions : ExecutorOptions {
  /// Threads per block: a multiple of 32, at most 512; 0 picks the largest
  /// power of two from 512 down to 32 at which every block of the plan can be
  /// resident at once (see launchShape()).
  uint32_t threadsPerBlock = 0;
  /// -1: the executor runs every rank of the plan on this device. Otherwise
  /// it runs that one rank's tbs, as one process of a job does: the FIFOs of
  /// the connections it receives on are its own (exportConnections()), and
  /// the others' are mapped with CUDA IPC (importConnections()) before the
  /// first call. Calls pass buffers for this rank only; with direct steps,
  /// the peers' come from setPeerBuffers().
  int32_t rank = -1;
  /// A 32-bit word in host memory, shared by the processes of the job's
  /// ranks on this host (the runtime's stop word), or null. Nonzero ends
  /// every wait of the executor's launches (the call fails with a report of
  /// where it stood) instead of their waiting for the watchdog. The executor
  /// maps its page for the GPU (cudaHostRegister, counted per process);
  /// where that fails it runs without it.
  const void *hostStop = nullptr;
  /// Copy engines (docs/CUDA.md, "Copy engines"): an executor of every rank
  /// whose plan splits (copyEnginePhases) runs the copies of a call of at
  /// least this many bytes (a rank's larger buffer) as cudaMemcpyAsync on
  /// the call's stream, between a kernel of the signals before them and one
  /// of those after; 0: never (the default).
  uint64_t copyEngineBytes = 0;
};

/// What an executor of one rank tells the executors of the other ranks so
/// that they can reach the FIFOs it receives on: plain bytes, to be
/// exchanged between processes as they are.
struct ConnectionExport {
  char ipcHandle[64] = {}; ///< cudaIpcMemHandle_t of the allocation
  int32_t pid = 0;         ///< the exporting process
  int32_t rank = -1;
  uint64_t address = 0; ///< the allocation in the exporting process
  uint64_t bytes = 0;   ///< 0: this rank receives on no connection and waits on no signal
  uint64_t stride = 0;  ///< bytes per connection (the FIFO slot size agrees)
  /// Direct steps: after the FIFOs, at this offset, the flags of the signal
  /// pairs this rank waits on (in Plan::signals order, 128 bytes apart).
  uint64_t signalsOffset = 0;
  uint32_t signals = 0;
  char deviceUuid[16] = {}; ///< the exporter's GPU, whatever its ordinal there
  int32_t device = -1;      ///< its ordinal in the exporting process
  uint32_t tbs = 0;         ///< blocks its launches run
  /// After placeConnections(): the FIFOs it receives on from GPUs that cannot
  /// reach its GPU, in pinned host memory (docs/RUNTIME.md, "Where a
  /// connection's ranks run"): a memfd of the exporting process that the
  /// senders map through /proc, headed by a table that says, per connection
  /// it receives on, where that connection's FIFO is (HostFifoHeader).
  int32_t hostFd = -1; ///< -1: none
  uint32_t hostConnections = 0; ///< FIFOs in it
  uint64_t hostBytes = 0;       ///< its size
  uint64_t hostAddress = 0;     ///< its mapping in the exporting process
  uint64_t hostInode = 0, hostDevice = 0; ///< fstat of the memfd, checked on opening it
  /// Set by the caller before placeConnections and importConnections: this
  /// rank runs on another host. Its connections with this rank go through
  /// the caller's network proxy (proxiedConnections()), never mapped.
  uint32_t remote = 0;
};

/// A connection of an executor of one rank whose other end is on another
/// host: this rank's end in its pinned host memory, in the device layout
/// (head, tail and slot sizes, then FifoDepth slots; docs/CUDA.md), for a
/// network proxy to forward. The GPU writes the sizes and the tail of an
/// outbound end and the head of an inbound one; the proxy the others.
struct ProxiedConnection {
  uint64_t head = 0, tail = 0, sizes = 0, fifo = 0; ///< addresses in this process
  uint64_t slotStride = 0;                          ///< bytes between slots
  int32_t connection = -1, sender = -1, receiver = -1, channel = -1;
  uint32_t outbound = 0; ///< 1: this rank sends on it (a staging FIFO); 0: receives
  uint32_t protocol = 0; ///< ir::Protocol
};

/// Where a peer's buffers of the next calls are, for an executor of one
/// rank with direct steps (DeviceExecutor::setPeerBuffers): addresses in
/// this process, on the peer's GPU (mapped with CUDA IPC, or the peer's own
/// pointers where it runs in this process). Null: not reachable.
struct PeerBuffers {
  void *input = nullptr;
  void *output = nullptr;
  /// The peer's scratch, of at least resolveCall(plan, count).scratchElems
  /// elements. In the executor's own entry: the scratch it runs on, shared
  /// with the peers, instead of its own allocation (null: its own).
  void *scratch = nullptr;
};

/// A window of a rank as mapped in this process (DeviceExecutor::setPeerWindows).
struct WindowRange {
  void *base = nullptr;
  uint64_t bytes = 0;
};

/// Direct steps on windows (DeviceExecutor::setPeerWindows): where a rank's
/// windows and its call descriptor are, as mapped in this process. Every
/// rank has the same number of windows (they are registered collectively);
/// a rank's buffers of a call may lie in any of its windows, at any offset,
/// independently of its peers'.
struct PeerWindows {
  /// The rank's descriptor (interp::cuda::WindowDescriptor, 24 bytes,
  /// 8-byte aligned), in memory its GPU and this one reach: before each of
  /// its signals the rank stores there where its buffers of the call lie,
  /// and a peer reads it after taking a signal of the call from it.
  void *descriptor = nullptr;
  /// By slot, in registration order. A rank this one never reaches (of
  /// another host) has neither descriptor nor windows.
  std::vector<WindowRange> windows;
  /// In the executor's own entry: the scratch it runs on (in one of its
  /// windows where peers reach it); null: its own allocation.
  void *scratch = nullptr;
  /// The descriptor and windows are host memory (mapped for the GPU, or the
  /// emulated device's shared areas): the launches take the CrossGpu build,
  /// whose signals and descriptors are stored and read at .sys.
  bool hostMemory = false;
};

/// The current CUDA device; fails with "no CUDA device: ..." when there is
/// none (or no driver).
struct CudaDeviceInfo {
  int device = 0;
  std::string name;
  int smCount = 0;
  std::array<char, 16> uuid{}; ///< cudaDeviceProp::uuid
};

/// A copy enqueued around a launch (CudaExecutor::enqueue): device or
/// host memory, cudaMemcpyDefault.
struct DeviceCopy {
  void *dst = nullptr;
  const void *src = nullptr;
  uint64_t bytes = 0;
};

/// How the prepared call launches.
struct LaunchShape {
  uint32_t blocks = 0;      ///< one per tb of every rank (or of CudaOptions::rank)
  uint32_t threads = 0;     ///< per block
  uint32_t sharedBytes = 0; ///< dynamic shared memory per block
  int blocksPerSm = 0;      ///< resident blocks per SM the occupancy API allows
  int smCount = 0;
  bool wide = false; ///< the kernels' wide build (128 registers), else the narrow (64)
};

/// An executor of a plan on a device: Executor's run() and more, for the
/// runtime's enqueued calls, CUDA graphs and benchmarks.
class DeviceExecutor : public Executor {
public:
  /// Host work for one call on device buffers `args` (per rank, as for the
  /// host backend): resolves the count, checks the buffers, uploads the
  /// tables the kernel reads and checks that all blocks can be resident at
  /// once. Where a table changes, waits for this executor's earlier
  /// launches on its own stream (enqueue() and run() use it); launches on
  /// other streams must be finished first. Returns the mode and the
  /// iteration count (seconds is 0).
  virtual llvm::Expected<CallResult> prepare(const CallArgs &args) = 0;
  /// Enqueues the prepared call on `stream`: kernel launches only, so it may
  /// be captured in a CUDA graph; replays repeat the prepared call.
  virtual llvm::Error launch(void *stream = nullptr) = 0;
  /// Waits for `stream`, then reports a watchdog stop of any launch since
  /// the last finish() as an error (worded as the host backend's), after
  /// clearing the device state so that the executor can be used again.
  virtual llvm::Error finish(void *stream = nullptr) = 0;
  /// Enqueues the prepared call on the executor's own stream (made with
  /// cudaStreamNonBlocking) after the work `stream` holds now: the copies
  /// `before`, the launch, the copies `after`. It returns at once; join()
  /// makes `stream` wait for all of it, poll() says whether it has ended.
  /// Ranks that share a GPU thus run side by side whatever streams their
  /// callers pass, provided every rank's enqueue() comes before any rank's
  /// join() on a stream that another rank's enqueue() waits for. On the
  /// emulation, `stream` must be null (a caller's stream is not the
  /// emulation's) and the launch has ended when enqueue() returns.
  virtual llvm::Error enqueue(void *stream, llvm::ArrayRef<DeviceCopy> before = {},
                              llvm::ArrayRef<DeviceCopy> after = {}) = 0;
  /// Makes `stream` wait for the last enqueue().
  virtual llvm::Error join(void *stream) = 0;
  /// Whether the work enqueued so far on the executor's stream has ended
  /// (`wait`: waits until it has). A watchdog stop is an error, as from
  /// finish(), and resets the device state.
  virtual llvm::Expected<bool> poll(bool wait) = 0;
  /// Device memory of at least `bytes` (buffer 0 or 1), ordered on the
  /// executor's stream: valid for the copies and launches of enqueue()
  /// until the next call that asks for more.
  virtual llvm::Expected<void *> temporary(int which, uint64_t bytes) = 0;
  /// Stops the launches in flight at their next poll (as a watchdog stop
  /// does, without a report), waits for them to end and clears the device
  /// state: their outputs are undefined. The FIFOs of other ranks' executors
  /// that this one sent on are mid-transfer too: they are usable again once
  /// every rank has aborted (as the runtime's communicators never are).
  virtual llvm::Error abort() = 0;
  /// The device the executor was created on.
  virtual const CudaDeviceInfo &device() const = 0;

  /// The same for enqueue() as setTimeline() for run(): with `on`, the
  /// following calls launch the kernels that record a timeline, and
  /// collectEnqueued() adds the last enqueued call's to `timeline` once
  /// poll() has seen it end (`t0`, `t1`: the call as the host saw it, for
  /// the clock shift).
  virtual void traceEnqueued(bool on) = 0;
  virtual llvm::Error collectEnqueued(Timeline &timeline, DataType type,
                                      std::chrono::steady_clock::time_point t0,
                                      std::chrono::steady_clock::time_point t1) = 0;

  /// Times the prepared call: `warmup` launches, then `iters` launches each
  /// between two CUDA events, enqueued back to back; with `graph`, every
  /// launch is a replay of a CUDA graph captured from launch(). Returns the
  /// seconds of each timed launch.
  virtual llvm::Expected<std::vector<double>> timeLaunches(unsigned warmup, unsigned iters,
                                                           bool graph) = 0;

  /// For an executor of one rank (CudaOptions::rank): its receiving FIFOs.
  /// The ranks of a job exchange their exports twice: first to learn each
  /// other's GPUs (placeConnections), then where the FIFOs are
  /// (importConnections).
  virtual ConnectionExport exportConnections() const = 0;
  /// For an executor of one rank, from every rank's first export (indexed
  /// by rank): decides where each FIFO it receives on lies. In its GPU's
  /// memory when the sender runs on the same GPU or its GPU has peer access
  /// to this one (cudaDeviceCanAccessPeer), else in pinned host memory
  /// (or always, between different ranks, with COLL_P2P_DISABLE=1). LL128
  /// is refused through host memory: its lines are only whole over NVLink.
  virtual llvm::Error placeConnections(const std::vector<ConnectionExport> &ranks) = 0;
  /// For an executor of one rank: maps the FIFOs it sends on, from every
  /// rank's second export (after placeConnections; indexed by rank; in this
  /// process too). Until it has, prepare() fails.
  virtual llvm::Error importConnections(const std::vector<ConnectionExport> &ranks) = 0;
  /// For an executor of one rank whose plan has direct steps (docs/CUDA.md,
  /// "Direct steps"): every rank's buffers for the following calls (indexed
  /// by rank; of this rank's own entry only the scratch counts: its call
  /// passes the others), as the peers pass them to their own calls of the
  /// same collective and count. Kept until the next setPeerBuffers. prepare() fails while a
  /// buffer that this rank's direct steps load or store is null. The peers
  /// must be on this GPU or on one with peer access to it, on this host
  /// (placeConnections refuses others).
  virtual llvm::Error setPeerBuffers(llvm::ArrayRef<PeerBuffers> ranks) = 0;
  /// For an executor of one rank whose plan has direct steps, instead of
  /// setPeerBuffers (docs/CUDA.md, "Windows"): every rank's windows and
  /// descriptor (indexed by rank), kept until the next setPeerWindows or
  /// setPeerBuffers. Each call's buffers that peers reach must then lie in
  /// one of this rank's windows (prepare() fails otherwise, naming the
  /// buffer); the kernel publishes where in its descriptor, and finds each
  /// peer's buffers from the peer's. Every rank of the job must run its
  /// direct calls this way.
  virtual llvm::Error setPeerWindows(llvm::ArrayRef<PeerWindows> ranks) = 0;
  /// After placeConnections: this rank's ends of its connections with ranks
  /// on other hosts (ConnectionExport::remote).
  virtual std::vector<ProxiedConnection> proxiedConnections() const = 0;
  /// The prepared call's launch.
  virtual LaunchShape launchShape() const = 0;
};

/// Device buffers shaped like a host call's, for running a call prepared on
/// the host (interp::CheckedCall) on the device: per rank, an input and an
/// output that overlap on the host (in place) share one allocation at the
/// same relative offsets, so the device call is in place exactly when the
/// host one is.
class DeviceBuffers {
public:
  virtual ~DeviceBuffers();
  /// The host call's arguments with device pointers.
  virtual const CallArgs &args() const = 0;
  /// Copies every host buffer to the device (inputs and poisoned outputs).
  virtual llvm::Error upload() = 0;
  /// Copies every device buffer back, so that the host can check outputs and
  /// that out-of-place inputs are unchanged.
  virtual llvm::Error download() = 0;
};

/// collbench's one-launch references (docs/CUDA.md, "References"):
/// kernels that do what a collective does with every rank on one GPU.
enum class ReferenceKind : uint8_t {
  ReduceOnce, ///< allreduce reading each rank's buffer once, writing each output once (fp32)
  Exchange,   ///< LL-style all-pairs allreduce, one block per rank (fp32)
  BlockCopy,  ///< one block copying the message
  Fifo,       ///< one Simple connection: a sender and a receiver block, FifoDepth slots
  Steps,      ///< one block, `steps` steps each copying its share and meeting a barrier
  Hops,       ///< two blocks bouncing the message `steps` times as LL words, a barrier a hop
};
/// The most ranks of ReduceOnce and Exchange.
inline constexpr int32_t MaxReferenceRanks = 16;
/// The largest message per rank of Exchange (its slots hold nranks² words per element).
inline constexpr uint64_t MaxExchangeReferenceBytes = uint64_t(1) << 20;
/// The threads per block of a reference unless told.
inline constexpr unsigned MaxReferenceThreads = 512;
/// The most steps of Steps and Hops.
inline constexpr uint32_t MaxReferenceSteps = 1u << 16;
struct ReferenceRequest {
  ReferenceKind kind = ReferenceKind::BlockCopy;
  int32_t nranks = 2;     ///< ReduceOnce, Exchange
  uint64_t bytes = 0;     ///< per rank; a multiple of 4 for the reductions and Hops
  uint64_t slotBytes = 0; ///< Fifo
  unsigned threads = MaxReferenceThreads; ///< per block
  unsigned warmup = 5, iters = 20;
  /// Steps: the steps the message is split over; Hops: the hops. In what
  /// was the struct's tail padding, so that its size and the offsets of the
  /// other fields are those of the plugins built before it (a comparison
  /// plugin of an earlier build refuses the two kinds it does not know).
  uint32_t steps = 0;
};
static_assert(sizeof(ReferenceRequest) == 40, "ReferenceRequest crosses the plugin boundary");
/// "exchange", "reduce", "block", "fifo", "steps", "hops".
const char *referenceName(ReferenceKind kind);

/// A handle to device memory for another process of the host
/// (cudaIpcMemHandle_t's bytes).
struct SharedHandle {
  char bytes[64];
};

/// A GPU, or the CPU emulation of one.
class DeviceBackend {
public:
  virtual ~DeviceBackend();
  virtual bool emulated() const = 0;
  /// The calling thread's current device; fails with "no CUDA device: ..."
  /// when there is none (or no driver).
  virtual llvm::Expected<CudaDeviceInfo> currentDevice() = 0;
  /// For logs: "the CPU emulation of a GPU", "NVIDIA H100 80GB HBM3 (CUDA
  /// device 0)".
  virtual std::string describe(int device) = 0;
  /// An executor of `plan` on CUDA device `device` (-1: the calling thread's
  /// current one), uploaded with its FIFOs allocated; every call on it makes
  /// that device current for its work and gives the caller's back. The
  /// emulation has one device and ignores `device`.
  virtual llvm::Expected<std::unique_ptr<DeviceExecutor>>
  create(const Plan &plan, const CudaOptions &options, int device = -1) = 0;
  /// Device buffers shaped like `host`'s (DeviceBuffers): `inputBytes` and
  /// `outputBytes` per rank.
  virtual llvm::Expected<std::unique_ptr<DeviceBuffers>>
  stage(const CallArgs &host, uint64_t inputBytes, uint64_t outputBytes) = 0;
  /// Times device-to-device copies of `bytes` bytes on the current device
  /// (cudaMemcpyAsync, as for timeLaunches): seconds per timed copy.
  virtual llvm::Expected<std::vector<double>> timeDeviceCopy(uint64_t bytes, unsigned warmup,
                                                             unsigned iters) = 0;
  /// Enqueues a copy of `bytes` from `src` to `dst` (memory of CUDA device
  /// `device`, or host memory) on `stream` (a cudaStream_t; null: the
  /// legacy default stream) and returns: what a communicator of one rank
  /// does with device buffers. The emulation copies at once (its device
  /// memory is host memory, and its calls have ended when they return).
  virtual llvm::Error copyOnStream(void *dst, const void *src, uint64_t bytes, void *stream,
                                   int device) = 0;
  /// Runs reference `q` on the current device once on known inputs and
  /// checks its result, then times `q.iters` launches after `q.warmup`
  /// (CUDA events around each): seconds per launch. An error says what
  /// was wrong with the request, or the result, or that a wait did not end.
  virtual llvm::Expected<std::vector<double>> timeReference(const ReferenceRequest &q) = 0;

  // Memory the processes of a host share (windows, the direct steps'
  // areas: docs/RUNTIME.md). Each function makes `device` current for its
  // work (-1: the calling thread's current device) and gives the caller's
  // back.
  /// `bytes` of device memory, zeroed: an allocation of its own
  /// (cudaMalloc), so that its handle covers it alone.
  virtual llvm::Expected<void *> allocateShared(uint64_t bytes, int device) = 0;
  virtual llvm::Error freeShared(void *base, int device) = 0;
  /// The handle of allocation `base` of allocateShared (cudaIpcGetMemHandle).
  virtual llvm::Expected<SharedHandle> exportShared(void *base, int device) = 0;
  /// Maps another process's allocation for `device` (cudaIpcOpenMemHandle,
  /// with peer access where the GPUs differ); closeShared unmaps it. A
  /// process maps each allocation once.
  virtual llvm::Expected<void *> openShared(const SharedHandle &handle, int device) = 0;
  virtual llvm::Error closeShared(void *mapped, int device) = 0;
};

} // namespace coll::interp

#endif // COLL_INTERPRETER_DEVICEEXECUTOR_H
