//===- CudaExecutor.cpp - The host side of the CUDA backend ---------------===//
//
// Plain C++ over the CUDA runtime API: kernels are launched through
// cudaLaunchKernel with the entry points from Kernels.h, so no CUDA type
// crosses into DeviceExecutor.h and no LLVM header reaches nvcc.
//
// Device memory per executor: the plan's tbs and steps (uploaded once), the
// device state (DeviceTypes.h; zeroed once, and again after a watchdog
// stop), the resolved slices (re-uploaded when the count changes), the rank
// table and the scratch buffers (per call, uploaded only when they change),
// and the watchdog report in host-mapped memory, which finish() reads
// without a copy.
//
//===----------------------------------------------------------------------===//

#include "coll/interpreter/DeviceExecutor.h"

#include "CudaError.h"
#include "DeviceTypes.h"
#include "HostSupport.h"
#include "Kernels.h"
#if COLL_CUDA_EMULATION
#include "emu/Simt.h"
#endif

#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// One of CollCuda and CollCudaEmu per program (DeviceExecutor.h): linking
// both defines this twice.
extern "C" __attribute__((visibility("hidden"))) const int collCudaBackendLinkedOnce =
    COLL_CUDA_EMULATION;

namespace coll::interp::cuda {
llvm::Error cudaFailure(cudaError_t error, const char *expr, const char *file, int line) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 llvm::formatv("CUDA error {0} ({1}) in {2} at {3}:{4}",
                                               cudaGetErrorName(error), cudaGetErrorString(error),
                                               expr, llvm::sys::path::filename(file), line));
}
} // namespace coll::interp::cuda

namespace coll::interp {

using namespace cuda;

static_assert(static_cast<uint8_t>(ir::Protocol::Simple) == static_cast<uint8_t>(Proto::Simple) &&
                  static_cast<uint8_t>(ir::Protocol::LL) == static_cast<uint8_t>(Proto::LL) &&
                  static_cast<uint8_t>(ir::Protocol::LL128) == static_cast<uint8_t>(Proto::LL128),
              "Proto mirrors ir::Protocol");
static_assert(sizeof(PlanStep) % 4 == 0, "steps are copied to shared memory as is");

namespace {

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// A device allocation that grows on demand (contents are not kept).
/// Stream-ordered (cudaMallocAsync/cudaFreeAsync on the executor's stream)
/// unless it is exported with CUDA IPC, which needs cudaMalloc: cudaMalloc
/// and cudaFree may wait for every kernel on the device, and a rank that
/// waits for a peer's kernel that waits for it never returns.
class DeviceMemory {
public:
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory &) = delete;
  DeviceMemory &operator=(const DeviceMemory &) = delete;
  ~DeviceMemory() { release(); }

  /// Stream-ordered on `s` from now on (null: cudaMalloc).
  void orderOn(cudaStream_t s) { stream = s; }
  llvm::Error reserve(size_t bytes) {
    if (ptr && bytes <= capacity)
      return llvm::Error::success();
    release();
    if (stream)
      COLL_CUDA_TRY(cudaMallocAsync(&ptr, std::max<size_t>(bytes, 1), stream));
    else
      COLL_CUDA_TRY(cudaMalloc(&ptr, std::max<size_t>(bytes, 1)));
    capacity = bytes;
    return llvm::Error::success();
  }
  void release() {
    if (ptr && stream)
      cudaFreeAsync(ptr, stream);
    else if (ptr)
      cudaFree(ptr);
    ptr = nullptr;
    capacity = 0;
  }
  template <class T> T *as() const { return static_cast<T *>(ptr); }

private:
  void *ptr = nullptr;
  size_t capacity = 0;
  cudaStream_t stream = nullptr;
};

/// Uploads `n` records to `memory` on `stream`, after the launches
/// enqueued there (which may read the old contents), and waits: the
/// source is pageable host memory.
template <class T>
llvm::Error upload(DeviceMemory &memory, const T *data, size_t n, cudaStream_t stream) {
  COLL_CUDA_TRY(cudaStreamSynchronize(stream));
  if (llvm::Error err = memory.reserve(n * sizeof(T)))
    return err;
  if (n)
    COLL_CUDA_TRY(
        cudaMemcpyAsync(memory.as<void>(), data, n * sizeof(T), cudaMemcpyHostToDevice, stream));
  COLL_CUDA_TRY(cudaStreamSynchronize(stream));
  return llvm::Error::success();
}

/// Calls `once` (which enqueues work on `stream`) `warmup` times, then
/// `iters` times between two events each, back to back; waits and returns
/// the seconds between each pair of events.
template <class Once>
llvm::Expected<std::vector<double>> timeOnStream(cudaStream_t stream, unsigned warmup,
                                                 unsigned iters, Once &&once) {
  for (unsigned i = 0; i < warmup; ++i)
    if (llvm::Error err = once())
      return err;
  std::vector<cudaEvent_t> events(2 * size_t(iters), nullptr);
  auto destroy = llvm::make_scope_exit([&] {
    for (cudaEvent_t e : events)
      if (e)
        cudaEventDestroy(e);
  });
  for (cudaEvent_t &e : events)
    COLL_CUDA_TRY(cudaEventCreate(&e));
  for (unsigned i = 0; i < iters; ++i) {
    COLL_CUDA_TRY(cudaEventRecord(events[2 * i], stream));
    if (llvm::Error err = once())
      return err;
    COLL_CUDA_TRY(cudaEventRecord(events[2 * i + 1], stream));
  }
  COLL_CUDA_TRY(cudaStreamSynchronize(stream));
  std::vector<double> seconds;
  for (unsigned i = 0; i < iters; ++i) {
    float ms = 0;
    COLL_CUDA_TRY(cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]));
    seconds.push_back(ms * 1e-3);
  }
  return seconds;
}

static_assert(cuda::MaxReferenceRanks == interp::MaxReferenceRanks);

/// collbench's one-launch references (device/References.cuh): allocates,
/// fills the inputs, runs the kernel once and checks its result, then times
/// `q.iters` launches after `q.warmup`.
llvm::Expected<std::vector<double>> runReference(const ReferenceRequest &q) {
  const bool reduces = q.kind == ReferenceKind::ReduceOnce || q.kind == ReferenceKind::Exchange;
  const char *name = referenceName(q.kind);
  auto bad = [&](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   llvm::Twine("the ") + name + " reference: " + why);
  };
  if (q.bytes == 0)
    return bad("no bytes to move");
  if (q.threads == 0 || q.threads % 32 != 0 || q.threads > 1024)
    return bad(llvm::formatv("{0} threads per block (a multiple of 32, at most 1024)", q.threads));
  if (reduces && (q.nranks < 1 || q.nranks > interp::MaxReferenceRanks))
    return bad(llvm::formatv("{0} ranks (1 to {1})", q.nranks, interp::MaxReferenceRanks));
  if (reduces && q.bytes % sizeof(float) != 0)
    return bad(llvm::formatv("{0} bytes is not a whole number of fp32 elements", q.bytes));
  if (q.kind == ReferenceKind::Exchange && q.bytes > MaxExchangeReferenceBytes)
    return bad(llvm::formatv("{0} bytes per rank is above its {1}", q.bytes,
                             MaxExchangeReferenceBytes));
  if (q.kind == ReferenceKind::Fifo && (q.slotBytes == 0 || q.slotBytes > (64u << 20)))
    return bad(llvm::formatv("a slot of {0} bytes (1 to 64 MiB, as the executor's FIFOs)",
                             q.slotBytes));
  const bool counted = q.kind == ReferenceKind::Steps || q.kind == ReferenceKind::Hops;
  // Each launch's hops take flags of their own, never 0: all of the run's
  // must fit 32 bits.
  const uint64_t launchesInAll = uint64_t(q.warmup) + q.iters + 1;
  if (counted && (q.steps == 0 || q.steps > MaxReferenceSteps))
    return bad(llvm::formatv("{0} steps (1 to {1})", q.steps, MaxReferenceSteps));
  if (q.kind == ReferenceKind::Steps && (q.bytes + q.steps - 1) / q.steps > (64u << 20))
    return bad(llvm::formatv("steps of {0} bytes (at most 64 MiB, as the kernel's)",
                             (q.bytes + q.steps - 1) / q.steps));
  if (q.kind == ReferenceKind::Hops && (q.bytes % 4 != 0 || q.bytes > MaxExchangeReferenceBytes))
    return bad(llvm::formatv("a message of {0} bytes (a multiple of 4, at most {1}: LL words "
                             "of 4 data bytes)",
                             q.bytes, MaxExchangeReferenceBytes));
  if (q.kind == ReferenceKind::Hops && launchesInAll * q.steps >= 0xffffffffull)
    return bad(llvm::formatv("{0} launches of {1} hops (their flags must fit 32 bits)",
                             launchesInAll, q.steps));
  const int32_t nbuf = reduces ? q.nranks : 1;
  const uint64_t n = q.bytes / sizeof(float);
  std::vector<void *> allocations;
  cudaStream_t stream = nullptr;
  auto release = llvm::make_scope_exit([&] {
    if (stream)
      cudaStreamSynchronize(stream);
    for (void *p : allocations)
      cudaFree(p);
    if (stream)
      cudaStreamDestroy(stream);
  });
  auto alloc = [&](uint64_t bytes, void *&p) -> llvm::Error {
    COLL_CUDA_TRY(cudaMalloc(&p, std::max<uint64_t>(bytes, 1)));
    allocations.push_back(p);
    COLL_CUDA_TRY(cudaMemset(p, 0, bytes));
    return llvm::Error::success();
  };
  cuda::ReferenceRanks ranks{};
  std::vector<std::vector<unsigned char>> inputs(nbuf);
  for (int32_t r = 0; r < nbuf; ++r) {
    void *in = nullptr, *out = nullptr;
    if (llvm::Error err = alloc(q.bytes, in))
      return err;
    if (llvm::Error err = alloc(q.bytes, out))
      return err;
    ranks.in[r] = static_cast<const float *>(in);
    ranks.out[r] = static_cast<float *>(out);
    // Copies: bytes of a hash of the offset, so that no shift of the
    // message reproduces it (a pattern of period 256 hid one).
    // Reductions: small integers, whose every fp32 sum is exact in any order.
    inputs[r].resize(q.bytes);
    for (uint64_t i = 0; i < q.bytes; ++i) {
      uint64_t x = i + uint64_t(r) * 0x9e3779b97f4a7c15ull;
      x = (x ^ (x >> 33)) * 0xff51afd7ed558ccdull;
      inputs[r][i] = static_cast<unsigned char>(x ^ (x >> 33));
    }
    if (reduces)
      for (uint64_t i = 0; i < n; ++i) {
        const float v = float((r + 1) * (i % 13 + 1));
        std::memcpy(&inputs[r][i * sizeof(float)], &v, sizeof v);
      }
    COLL_CUDA_TRY(cudaMemcpy(in, inputs[r].data(), q.bytes, cudaMemcpyHostToDevice));
  }
  void *stalled = nullptr, *lines = nullptr, *slots = nullptr, *counters = nullptr;
  if (llvm::Error err = alloc(sizeof(uint32_t), stalled))
    return err;
  if (q.kind == ReferenceKind::Exchange)
    if (llvm::Error err = alloc(uint64_t(q.nranks) * q.nranks * n * sizeof(uint64_t), lines))
      return err;
  if (q.kind == ReferenceKind::Fifo) {
    if (llvm::Error err = alloc(FifoDepth * q.slotBytes, slots))
      return err;
    if (llvm::Error err = alloc(2 * PollStride, counters))
      return err;
  }
  if (q.kind == ReferenceKind::Hops) // two inboxes of bytes / 4 words
    if (llvm::Error err = alloc(2 * (q.bytes / 4) * sizeof(uint64_t), lines))
      return err;
  COLL_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int device = 0, sms = 1;
  COLL_CUDA_TRY(cudaGetDevice(&device));
  COLL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));

  const void *kernel = nullptr;
  switch (q.kind) {
  case ReferenceKind::ReduceOnce: kernel = cuda::referenceKernel(cuda::ReferenceKernel::ReduceOnce); break;
  case ReferenceKind::Exchange: kernel = cuda::referenceKernel(cuda::ReferenceKernel::Exchange); break;
  case ReferenceKind::BlockCopy: kernel = cuda::referenceKernel(cuda::ReferenceKernel::BlockCopy); break;
  case ReferenceKind::Fifo: kernel = cuda::referenceKernel(cuda::ReferenceKernel::Fifo); break;
  case ReferenceKind::Steps: kernel = cuda::referenceKernel(cuda::ReferenceKernel::Steps); break;
  case ReferenceKind::Hops: kernel = cuda::referenceKernel(cuda::ReferenceKernel::Hops); break;
  }
  if (!kernel) // a kind of a later build's (the request crosses the plugin boundary)
    return bad(llvm::formatv("reference kind {0} is unknown to this build", int(q.kind)));
  int32_t nranks = nbuf;
  uint32_t flag = 0;
  uint64_t launches = 0, bytes = q.bytes;
  auto *stalledFlag = static_cast<uint32_t *>(stalled);
  auto *lineWords = static_cast<uint64_t *>(lines);
  const auto *src = reinterpret_cast<const unsigned char *>(ranks.in[0]);
  auto *dst = reinterpret_cast<unsigned char *>(ranks.out[0]);
  cuda::ReferenceFifo fifo{};
  fifo.src = src;
  fifo.dst = dst;
  fifo.slots = static_cast<unsigned char *>(slots);
  fifo.head = static_cast<uint64_t *>(counters);
  fifo.tail = fifo.head ? fifo.head + PollStride / sizeof(uint64_t) : nullptr;
  fifo.bytes = q.bytes;
  fifo.slotBytes = q.slotBytes;
  fifo.stalled = stalledFlag;
  const uint64_t nslots = q.slotBytes ? (q.bytes + q.slotBytes - 1) / q.slotBytes : 0;
  cuda::ReferenceSteps stepped{};
  stepped.src = src;
  stepped.dst = dst;
  stepped.bytes = q.bytes;
  stepped.steps = q.steps;
  stepped.inbox[0] = lineWords;
  stepped.inbox[1] = lineWords ? lineWords + q.bytes / 4 : nullptr;
  stepped.flag = 1;
  stepped.stalled = stalledFlag;
  auto once = [&]() -> llvm::Error {
    void *reduceArgs[] = {&ranks, &nranks, const_cast<uint64_t *>(&n)};
    void *exchangeArgs[] = {&ranks, &nranks, const_cast<uint64_t *>(&n), &lineWords, &flag,
                            &stalledFlag};
    void *copyArgs[] = {&src, &dst, &bytes};
    void *fifoArgs[] = {&fifo};
    void *steppedArgs[] = {&stepped};
    dim3 grid(1);
    void **args = copyArgs;
    switch (q.kind) {
    case ReferenceKind::ReduceOnce:
      grid = dim3(static_cast<uint32_t>(
          std::clamp<uint64_t>((n + q.threads - 1) / q.threads, 1, uint64_t(sms) * 4)));
      args = reduceArgs;
      break;
    case ReferenceKind::Exchange:
      ++flag; // a launch's words are told from the last one's by their flag
      grid = dim3(static_cast<uint32_t>(nranks));
      args = exchangeArgs;
      break;
    case ReferenceKind::BlockCopy: break;
    case ReferenceKind::Fifo:
      fifo.base = launches * nslots;
      grid = dim3(2);
      args = fifoArgs;
      break;
    case ReferenceKind::Steps: args = steppedArgs; break;
    case ReferenceKind::Hops:
      stepped.flag = static_cast<uint32_t>(1 + launches * q.steps);
      grid = dim3(2);
      args = steppedArgs;
      break;
    }
    ++launches;
    // The blocks of exchange, fifo and hops wait for each other: cooperative, so
    // that all are resident at once (or the launch is refused), as for the
    // persistent kernel.
    cudaLaunchAttribute cooperative{};
    cooperative.id = cudaLaunchAttributeCooperative;
    cooperative.val.cooperative = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = dim3(q.threads);
    config.stream = stream;
    const bool together = q.kind == ReferenceKind::Exchange || q.kind == ReferenceKind::Fifo ||
                          q.kind == ReferenceKind::Hops;
    config.attrs = together ? &cooperative : nullptr;
    config.numAttrs = together ? 1 : 0;
    COLL_CUDA_TRY(cudaLaunchKernelExC(&config, kernel, args));
    return llvm::Error::success();
  };
  auto stalledNow = [&]() -> llvm::Expected<bool> {
    uint32_t s = 0;
    COLL_CUDA_TRY(cudaStreamSynchronize(stream));
    COLL_CUDA_TRY(cudaMemcpy(&s, stalled, sizeof s, cudaMemcpyDeviceToHost));
    return s != 0;
  };
  // Once, checked.
  if (llvm::Error err = once())
    return err;
  auto stuck = stalledNow();
  if (!stuck)
    return stuck.takeError();
  if (*stuck)
    return bad("a wait did not end (its watchdog stopped it)");
  std::vector<unsigned char> got(q.bytes);
  for (int32_t r = 0; r < nbuf; ++r) {
    COLL_CUDA_TRY(cudaMemcpy(got.data(), ranks.out[r], q.bytes, cudaMemcpyDeviceToHost));
    for (uint64_t i = 0; i < (reduces ? n : q.bytes); ++i) {
      if (reduces) {
        float want = 0, v = 0;
        for (int32_t k = 0; k < nbuf; ++k) {
          float x = 0;
          std::memcpy(&x, &inputs[k][i * sizeof(float)], sizeof x);
          want += x;
        }
        std::memcpy(&v, &got[i * sizeof(float)], sizeof v);
        if (v != want)
          return bad(llvm::formatv("rank {0}'s element {1} is {2}, not {3}", r, i, v, want));
      } else if (got[i] != inputs[0][i]) {
        return bad(llvm::formatv("byte {0} is {1}, not {2}", i, int(got[i]), int(inputs[0][i])));
      }
    }
  }
  auto seconds = timeOnStream(stream, q.warmup, q.iters, once);
  if (!seconds)
    return seconds.takeError();
  stuck = stalledNow();
  if (!stuck)
    return stuck.takeError();
  if (*stuck)
    return bad("a wait did not end (its watchdog stopped it)");
  return seconds;
}

} // namespace

namespace {

llvm::Expected<CudaDeviceInfo> currentCudaDevice() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess)
    return fail(llvm::Twine("no CUDA device: ") + cudaGetErrorString(err));
  if (count == 0)
    return fail("no CUDA device: cudaGetDeviceCount found none");
  CudaDeviceInfo info;
  COLL_CUDA_TRY(cudaGetDevice(&info.device));
  cudaDeviceProp props;
  COLL_CUDA_TRY(cudaGetDeviceProperties(&props, info.device));
  info.name = props.name;
  info.smCount = props.multiProcessorCount;
  static_assert(sizeof props.uuid == sizeof info.uuid, "a device UUID is 16 bytes");
  std::memcpy(info.uuid.data(), &props.uuid, sizeof info.uuid);
  return info;
}

/// Makes an executor's device current for the scope of a call and gives
/// the caller's back (a GPU; the emulation has one device).
class DeviceScope {
public:
  explicit DeviceScope(int device) {
#if COLL_CUDA_EMULATION
    // A program's device the emulation does not have (it emulates fewer
    // GPUs than the program's CUDA runtime reports): its current one.
    int count = 0;
    if (device >= 0 && (cudaGetDeviceCount(&count) != cudaSuccess || device >= count))
      device = -1;
#endif
    if (device >= 0 && cudaGetDevice(&saved) == cudaSuccess && saved != device)
      status = cudaSetDevice(device);
    else
      saved = -1;
  }
  ~DeviceScope() {
    if (saved >= 0)
      cudaSetDevice(saved);
  }
  llvm::Error check(int device) const {
    if (status == cudaSuccess)
      return llvm::Error::success();
    return fail(llvm::formatv("cannot use CUDA device {0}: {1} ({2})", device,
                              cudaGetErrorName(status), cudaGetErrorString(status)));
  }

private:
  int saved = -1;
  cudaError_t status = cudaSuccess;
};

/// The backend's executor: Impl's work, each call on the executor's device.
class CudaExecutor final : public DeviceExecutor {
public:
  class Impl;
  explicit CudaExecutor(std::unique_ptr<Impl> impl);
  ~CudaExecutor() override;

  const Plan &plan() const override;
  uint64_t sliceElems(DataType type) const override;
  llvm::Expected<CallResult> run(const CallArgs &args) override;
  void setTimeline(Timeline *timeline) override;
  llvm::Expected<CallResult> prepare(const CallArgs &args) override;
  llvm::Error launch(void *stream) override;
  llvm::Error finish(void *stream) override;
  llvm::Error enqueue(void *stream, llvm::ArrayRef<DeviceCopy> before,
                      llvm::ArrayRef<DeviceCopy> after) override;
  llvm::Error join(void *stream) override;
  llvm::Expected<bool> poll(bool wait) override;
  llvm::Expected<void *> temporary(int which, uint64_t bytes) override;
  llvm::Error abort() override;
  const CudaDeviceInfo &device() const override;
  void traceEnqueued(bool on) override;
  llvm::Error collectEnqueued(Timeline &timeline, DataType type,
                              std::chrono::steady_clock::time_point t0,
                              std::chrono::steady_clock::time_point t1) override;
  llvm::Expected<std::vector<double>> timeLaunches(unsigned warmup, unsigned iters,
                                                   bool graph) override;
  ConnectionExport exportConnections() const override;
  llvm::Error placeConnections(const std::vector<ConnectionExport> &ranks) override;
  llvm::Error importConnections(const std::vector<ConnectionExport> &ranks) override;
  llvm::Error setPeerBuffers(llvm::ArrayRef<PeerBuffers> ranks) override;
  llvm::Error setPeerWindows(llvm::ArrayRef<PeerWindows> ranks) override;
  std::vector<ProxiedConnection> proxiedConnections() const override;
  LaunchShape launchShape() const override;

private:
  DeviceScope scope() const;
  std::unique_ptr<Impl> impl;
};

} // namespace

//===----------------------------------------------------------------------===//
// Impl
//===----------------------------------------------------------------------===//

class CudaExecutor::Impl {
public:
  Impl(Plan plan, const CudaOptions &options)
      : plan(std::move(plan)), options(options), proto(static_cast<Proto>(this->plan.protocol)) {}
  ~Impl();

  llvm::Error start();
  llvm::Expected<CallResult> prepare(const CallArgs &args);
  llvm::Error launch(cudaStream_t stream);
  llvm::Error finish(cudaStream_t stream);
  llvm::Error enqueue(cudaStream_t after, llvm::ArrayRef<DeviceCopy> before,
                      llvm::ArrayRef<DeviceCopy> afterwards);
  llvm::Error join(cudaStream_t caller);
  llvm::Expected<bool> poll(bool wait);
  llvm::Expected<void *> temporary(int which, uint64_t bytes);
  llvm::Error abort();
  llvm::Expected<CallResult> run(const CallArgs &args);
  llvm::Error collectEnqueued(Timeline &out, DataType type,
                              std::chrono::steady_clock::time_point t0,
                              std::chrono::steady_clock::time_point t1);
  llvm::Expected<std::vector<double>> timeLaunches(unsigned warmup, unsigned iters, bool graph);
  llvm::Error placeConnections(const std::vector<ConnectionExport> &ranks);
  llvm::Error importConnections(const std::vector<ConnectionExport> &ranks);
  llvm::Error setPeerBuffers(llvm::ArrayRef<PeerBuffers> ranks);
  llvm::Error setPeerWindows(llvm::ArrayRef<PeerWindows> ranks);
  std::vector<ProxiedConnection> proxiedConnections() const;

  Plan plan;
  Timeline *timeline = nullptr;
  bool traceEnqueues = false; ///< traceEnqueued()
  bool enqueueArmed = false;  ///< the last enqueue() records a timeline
  CudaOptions options;
  Proto proto;
  LaunchShape shape;
  ConnectionExport exported; ///< one rank: the FIFOs it receives on

private:
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
  llvm::Error resetState();
  /// Where each connection's memory lies (connPointers), uploaded.
  llvm::Error uploadConnections();
  bool oneRank() const { return options.rank >= 0; }

public:
  const CudaDeviceInfo &deviceInfo() const { return device; }

private:
  CudaDeviceInfo device;
  uint32_t watchdogMs = 0;
  ConnectionLayout connection;
  StateLayout stateLayout;

  DeviceMemory tbs, steps, state, slices, ranks, scratch;
  DeviceMemory deps; ///< Plan::deps: steps that wait on several
  /// Direct steps (Plan::stepPeers, Plan::memberPeers, Plan::signals).
  DeviceMemory stepPeers, memberPeers, signals;
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
  llvm::Error uploadSignals() {
    return upload(signalTable, signalPointers.data(), signalPointers.size(), stream);
  }
  DeviceMemory traceEvents, traceCounts; ///< run() with a timeline
  uint32_t traceCapacity = 0;            ///< events per block
  /// Stores the timeline's buffers in the device state (null: none).
  llvm::Error setTraceBuffers(DeviceTraceEvent *events, uint32_t *counts, uint32_t capacity);
  /// Arms params for a timeline of the prepared call; after it, hands the
  /// events of the call that ran from t0 to t1 to `timeline`.
  llvm::Error armTimeline();
  llvm::Error collectTimeline(Timeline &out, DataType type,
                              std::chrono::steady_clock::time_point t0,
                              std::chrono::steady_clock::time_point t1);
  DeviceMemory temp[2]; ///< temporary()
  /// One rank: the connections it receives on, in Plan::connections order.
  DeviceMemory received;
  DeviceMemory connTable;
  std::vector<unsigned char *> connPointers; ///< per connection; null: not reached yet
  /// Per connection: the scope of its synchronising accesses (Scope::Gpu
  /// until importConnections finds its other end on another GPU), uploaded.
  std::vector<Scope> connScopes;
  DeviceMemory scopeTable;
  /// A connection of this executor's launches runs at .sys: they take the
  /// CrossGpu build (Kernels.h).
  bool crossGpu = false;
  bool forceSys = false; ///< COLL_CUDA_SCOPE=sys
  std::vector<uint64_t> indexAtReceiver;     ///< per connection
  std::vector<void *> opened;                ///< IPC mappings of other processes
  /// Per connection: its FIFO lies in pinned host memory (placeConnections
  /// at the receiver; importConnections at the sender).
  std::vector<uint8_t> viaHost;
  /// Per connection in this rank's own host memory: its address here (for
  /// a network proxy: proxiedConnections()).
  std::vector<unsigned char *> hostPointers;
  /// Per rank: on another host (ConnectionExport::remote, placeConnections).
  std::vector<uint8_t> remotePeer;
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
  HostArea own;
  std::vector<HostArea> mappedAreas;
  uint64_t ownHeaderBytes = 0;
  static void releaseArea(HostArea &area);
  int32_t firstTb = 0, launchTbs = 0;        ///< the tbs a launch runs
  WatchdogReport *report = nullptr; ///< host-mapped
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

namespace {
/// The pages of host stop words (CudaOptions::hostStop) this process has
/// registered with CUDA, and how many executors use each: one page may
/// hold the stop word of several communicators' executors, and CUDA
/// refuses a range registered twice.
struct HostStopPages {
  std::mutex mutex;
  std::map<uintptr_t, uint32_t> users;
};
HostStopPages &hostStopPages() {
  static HostStopPages *pages = new HostStopPages(); // used until exit
  return *pages;
}
uintptr_t pageOf(const void *p) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return reinterpret_cast<uintptr_t>(p) & ~(page - 1);
}
/// The device's address of `word`, its page registered; null where CUDA
/// will not map it (the executor then runs without it).
const uint32_t *mapHostStop(const void *word) {
  HostStopPages &pages = hostStopPages();
  std::lock_guard<std::mutex> lock(pages.mutex);
  const uintptr_t page = pageOf(word);
  uint32_t &users = pages.users[page];
  if (users == 0 &&
      cudaHostRegister(reinterpret_cast<void *>(page), static_cast<size_t>(sysconf(_SC_PAGESIZE)),
                       cudaHostRegisterPortable | cudaHostRegisterMapped) != cudaSuccess) {
    cudaGetLastError(); // not sticky: clear it
    pages.users.erase(page);
    return nullptr;
  }
  void *device = nullptr;
  if (cudaHostGetDevicePointer(&device, const_cast<void *>(word), 0) != cudaSuccess) {
    cudaGetLastError();
    if (users == 0) {
      cudaHostUnregister(reinterpret_cast<void *>(page));
      pages.users.erase(page);
    }
    return nullptr;
  }
  ++users;
  return static_cast<const uint32_t *>(device);
}
void unmapHostStop(const void *word) {
  HostStopPages &pages = hostStopPages();
  std::lock_guard<std::mutex> lock(pages.mutex);
  auto it = pages.users.find(pageOf(word));
  if (it == pages.users.end() || --it->second > 0)
    return;
  cudaHostUnregister(reinterpret_cast<void *>(it->first));
  pages.users.erase(it);
}
} // namespace

CudaExecutor::Impl::~Impl() {
  if (stream)
    cudaStreamSynchronize(stream);
  // Stream-ordered memory goes back on the stream, before it is destroyed.
  for (DeviceMemory *m : {&tbs, &steps, &state, &slices, &ranks, &scratch, &connTable, &scopeTable, &temp[0],
                          &temp[1], &traceEvents, &traceCounts, &stepPeers, &memberPeers, &signals, &signalTable, &deps,
                          &windowDescriptorTable, &windowBaseTable})
    m->release();
  if (stream)
    cudaStreamSynchronize(stream);
  for (void *p : opened)
    cudaIpcCloseMemHandle(p);
  for (HostArea &a : mappedAreas)
    releaseArea(a);
  releaseArea(own);
  if (abortStream)
    cudaStreamDestroy(abortStream);
  if (callerReady)
    cudaEventDestroy(callerReady);
  if (launched)
    cudaEventDestroy(launched);
  if (startEvent)
    cudaEventDestroy(startEvent);
  if (stopEvent)
    cudaEventDestroy(stopEvent);
  if (stream)
    cudaStreamDestroy(stream);
  if (report)
    cudaFreeHost(report);
  if (deviceHostStop)
    unmapHostStop(options.hostStop);
}

/// COLL_CUDA_SCOPE (docs/CUDA.md, "Scopes"): "sys" runs every connection at
/// .sys in the CrossGpu build, a diagnostic of what a connection between
/// GPUs pays for its ordering, measurable on one GPU (.sys covers .gpu);
/// unset, empty or "auto": each connection's own scope.
static llvm::Expected<bool> forcedSysScope() {
  const char *v = std::getenv("COLL_CUDA_SCOPE");
  if (!v || !*v || std::strcmp(v, "auto") == 0)
    return false;
  if (std::strcmp(v, "sys") == 0)
    return true;
  return fail(llvm::formatv("COLL_CUDA_SCOPE={0}: auto (each connection's scope) or sys", v));
}

/// The threads a block needs to move a step of `bytes` in one pass of its
/// loop (issue 27): Simple one 16-byte pack each, LL one line (8 data bytes),
/// LL128 eight lanes a line; at least 128, at most MaxThreadsPerBlock.
/// Every warp of a block runs each step's path, elements or not: on an H200
/// a step of 1 KiB cost 10-15 % less at 128 threads than at 512, and LL's
/// hops more at 64 than at 128 (docs/performance/gpu.md, "scopes and
/// block sizes").
static uint32_t threadsForStep(Proto proto, uint64_t bytes) {
  const uint64_t want = proto == Proto::Simple ? (bytes + 15) / 16
                        : proto == Proto::LL   ? llLines(bytes)
                                               : LL128LanesPerLine * ll128Lines(bytes);
  uint32_t threads = 128;
  while (threads < MaxThreadsPerBlock && threads < want)
    threads *= 2;
  return threads;
}

llvm::Error CudaExecutor::Impl::start() {
  if (llvm::Error err = checkOptions(options, proto))
    return err;
  auto info = currentCudaDevice();
  if (!info)
    return info.takeError();
  device = *info;
  watchdogMs = resolveWatchdogMs(options.watchdogMs);

  if (oneRank() && options.rank >= plan.nranks)
    return fail(llvm::formatv("{0}: rank {1} of a plan of {2} ranks", plan.fileName, options.rank,
                              plan.nranks));
  if (oneRank() ? !plan.holds(options.rank) : plan.planRank >= 0)
    return fail(llvm::formatv("{0}: the plan holds rank {1}'s steps only", plan.fileName,
                              plan.planRank));
  // Direct steps reach the peers' buffers: an executor of every rank has
  // them all (one GPU, one process); one of a single rank is given them
  // (setPeerBuffers), and shares the flags of the signals it waits on as
  // it shares its FIFOs.
  direct = oneRank() ? plan.hasDirectSteps(options.rank) : !plan.stepPeers.empty();
  if (oneRank() && direct) {
    for (int32_t t = plan.rankTbBegin[options.rank]; t < plan.rankTbBegin[options.rank + 1]; ++t)
      for (int32_t i = 0; i < plan.tbs[t].nSteps; ++i) {
        const PlanStep &step = plan.steps[size_t(plan.tbs[t].stepBegin + i)];
        const PlanStepPeer d = plan.stepPeer(size_t(plan.tbs[t].stepBegin + i));
        if (d.peer < 0)
          continue;
        const bool loads = step.type == StepKind::Get || step.type == StepKind::GetReduce;
        // Every source's peer of a fused getre.
        for (int r = 0; r < (d.members < 0 ? 1 : step.nsrc); ++r) {
          const int32_t peer = d.members < 0 ? d.peer : plan.memberPeers[size_t(d.members + r)];
          directPeers.push_back(peer);
          if (loads || step.type == StepKind::Put)
            peerBuffersUsed.emplace_back(peer, loads ? step.srcBuf : step.dstBuf);
        }
      }
    for (const PlanSignal &pair : plan.signals)
      if (pair.sender == options.rank || pair.receiver == options.rank)
        directPeers.push_back(pair.sender == options.rank ? pair.receiver : pair.sender);
    llvm::sort(directPeers);
    directPeers.erase(std::unique(directPeers.begin(), directPeers.end()), directPeers.end());
    llvm::sort(peerBuffersUsed);
    peerBuffersUsed.erase(std::unique(peerBuffersUsed.begin(), peerBuffersUsed.end()),
                          peerBuffersUsed.end());
  }
  firstTb = oneRank() ? plan.rankTbBegin[options.rank] : 0;
  launchTbs = oneRank() ? plan.rankTbBegin[options.rank + 1] - firstTb
                        : static_cast<int32_t>(plan.tbs.size());

  COLL_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (DeviceMemory *m : {&tbs, &steps, &state, &slices, &ranks, &scratch, &connTable, &scopeTable, &temp[0],
                          &temp[1], &traceEvents, &traceCounts, &stepPeers, &memberPeers, &signals, &signalTable, &deps,
                          &windowDescriptorTable, &windowBaseTable})
    m->orderOn(stream);
  connection = ConnectionLayout::of(proto, slotBytes(options, proto));
  // One rank: the connections live with their receivers, not in the state.
  stateLayout = StateLayout::of(plan.tbs.size(), oneRank() ? 0 : plan.connections.size(),
                                connection, oneRank() ? 0 : plan.signals.size());
  if (llvm::Error err = upload(tbs, plan.tbs.data(), plan.tbs.size(), stream))
    return err;
  if (llvm::Error err = upload(steps, plan.steps.data(), plan.steps.size(), stream))
    return err;
  if (llvm::Error err = upload(deps, plan.deps.data(), plan.deps.size(), stream))
    return err;
  if (direct) {
    if (llvm::Error err = upload(stepPeers, plan.stepPeers.data(), plan.stepPeers.size(), stream))
      return err;
    if (llvm::Error err =
            upload(memberPeers, plan.memberPeers.data(), plan.memberPeers.size(), stream))
      return err;
    if (llvm::Error err = upload(signals, plan.signals.data(), plan.signals.size(), stream))
      return err;
  }
  if (llvm::Error err = state.reserve(stateLayout.bytes))
    return err;
  COLL_CUDA_TRY(cudaMemsetAsync(state.as<void>(), 0, stateLayout.bytes, stream));
  connPointers.assign(plan.connections.size(), nullptr);
  auto forced = forcedSysScope();
  if (!forced)
    return forced.takeError();
  forceSys = *forced;
  connScopes.assign(plan.connections.size(), forceSys ? Scope::Sys : Scope::Gpu);
  crossGpu = forceSys;
  indexAtReceiver.assign(plan.connections.size(), 0);
  viaHost.assign(plan.connections.size(), 0);
  hostPointers.assign(plan.connections.size(), nullptr);
  signalPointers.assign(direct ? plan.signals.size() : 0, nullptr);
  if (!oneRank()) {
    for (size_t c = 0; c < plan.connections.size(); ++c)
      connPointers[c] = state.as<unsigned char>() + stateLayout.connectionsOffset +
                        c * connection.stride;
    for (size_t g = 0; g < signalPointers.size(); ++g)
      signalPointers[g] = reinterpret_cast<uint64_t *>(state.as<unsigned char>() +
                                                       stateLayout.signalsOffset + g * PollStride);
  } else {
    // Each FIFO's place among its receiver's, from the whole plan (a
    // rank's plan holds only its own connections).
    for (size_t c = 0; c < plan.connections.size(); ++c)
      indexAtReceiver[c] = static_cast<uint64_t>(plan.connections[c].atReceiver);
    const uint64_t fifoBytes =
        static_cast<uint64_t>(plan.connectionsInto[options.rank]) * connection.stride;
    // The flags of the signals it waits on, after them: every rank numbers
    // each receiver's signals alike, from the whole plan's list.
    uint32_t signalsInto = 0;
    if (direct) {
      std::vector<uint64_t> into(plan.nranks, 0);
      signalAtReceiver.resize(plan.signals.size());
      for (size_t g = 0; g < plan.signals.size(); ++g)
        signalAtReceiver[g] = into[plan.signals[g].receiver]++;
      signalsInto = static_cast<uint32_t>(into[options.rank]);
    }
    const uint64_t bytes = fifoBytes + uint64_t(signalsInto) * PollStride;
    exported.signalsOffset = fifoBytes;
    exported.signals = signalsInto;
    exported.pid = static_cast<int32_t>(getpid());
    exported.rank = options.rank;
    exported.device = device.device;
    exported.tbs = static_cast<uint32_t>(launchTbs);
    std::memcpy(exported.deviceUuid, device.uuid.data(), sizeof exported.deviceUuid);
    exported.stride = connection.stride;
    if (bytes) {
      if (llvm::Error err = received.reserve(bytes))
        return err;
      COLL_CUDA_TRY(cudaMemsetAsync(received.as<void>(), 0, bytes, stream));
      cudaIpcMemHandle_t handle;
      COLL_CUDA_TRY(cudaIpcGetMemHandle(&handle, received.as<void>()));
      static_assert(sizeof handle == sizeof exported.ipcHandle, "CUDA's IPC handle is 64 bytes");
      std::memcpy(exported.ipcHandle, &handle, sizeof handle);
      exported.address = reinterpret_cast<uintptr_t>(received.as<void>());
      exported.bytes = bytes;
    }
    for (size_t c = 0; c < plan.connections.size(); ++c)
      if (plan.connections[c].receiver == options.rank)
        connPointers[c] = received.as<unsigned char>() + indexAtReceiver[c] * connection.stride;
    for (size_t g = 0; g < signalPointers.size(); ++g)
      if (plan.signals[g].receiver == options.rank)
        signalPointers[g] = reinterpret_cast<uint64_t *>(received.as<unsigned char>() + fifoBytes +
                                                         signalAtReceiver[g] * PollStride);
  }
  if (llvm::Error err = uploadConnections())
    return err;
  if (direct)
    if (llvm::Error err = uploadSignals())
      return err;
  COLL_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void **>(&report), sizeof(WatchdogReport),
                              cudaHostAllocMapped));
  std::memset(report, 0, sizeof(WatchdogReport));
  COLL_CUDA_TRY(cudaHostGetDevicePointer(reinterpret_cast<void **>(&deviceReport), report, 0));
  if (options.hostStop)
    deviceHostStop = mapHostStop(options.hostStop);
  COLL_CUDA_TRY(cudaEventCreate(&startEvent));
  COLL_CUDA_TRY(cudaEventCreate(&stopEvent));
  COLL_CUDA_TRY(cudaEventCreateWithFlags(&callerReady, cudaEventDisableTiming));
  COLL_CUDA_TRY(cudaEventCreateWithFlags(&launched, cudaEventDisableTiming));
  COLL_CUDA_TRY(cudaStreamSynchronize(stream));
  return llvm::Error::success();
}

llvm::Error CudaExecutor::Impl::uploadConnections() {
  if (llvm::Error err = upload(scopeTable, connScopes.data(), connScopes.size(), stream))
    return err;
  return upload(connTable, connPointers.data(), connPointers.size(), stream);
}

/// COLL_P2P_DISABLE=1 (as NCCL_P2P_DISABLE): every FIFO between two ranks
/// in pinned host memory, the GPUs' peer access or not; a way to run the
/// host-memory path on one GPU.
static llvm::Expected<bool> p2pDisabled() {
  const char *v = std::getenv("COLL_P2P_DISABLE");
  if (!v || !*v || std::strcmp(v, "0") == 0)
    return false;
  if (std::strcmp(v, "1") == 0)
    return true;
  return fail(llvm::formatv("COLL_P2P_DISABLE={0}: 1 (FIFOs in host memory) or 0", v));
}

/// The table at the head of a rank's host-memory FIFOs: per connection it
/// receives on (in the order of indexAtReceiver), 0 where the FIFO is in its
/// GPU's memory, k + 1 where it is the k-th FIFO after the table.
static uint64_t hostHeaderBytes(uint64_t receivedConnections) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return (receivedConnections * sizeof(uint32_t) + page - 1) / page * page;
}

void CudaExecutor::Impl::releaseArea(HostArea &a) {
  if (a.registered)
    cudaHostUnregister(a.base);
  if (a.mapped)
    munmap(a.base, a.bytes);
  if (a.fd >= 0)
    ::close(a.fd);
  a = HostArea{};
}

llvm::Error CudaExecutor::Impl::placeConnections(const std::vector<ConnectionExport> &all) {
  if (!oneRank())
    return fail("CudaExecutor::placeConnections: the executor runs every rank itself");
  if (all.size() != static_cast<size_t>(plan.nranks))
    return fail(llvm::formatv("CudaExecutor::placeConnections: {0} entries for {1} ranks",
                              all.size(), plan.nranks));
  if (own.base || exported.hostFd >= 0)
    return fail("CudaExecutor::placeConnections: the FIFOs are placed already");
  auto disabled = p2pDisabled();
  if (!disabled)
    return disabled.takeError();
  COLL_CUDA_TRY(cudaSetDevice(device.device));
  int visible = 0;
  COLL_CUDA_TRY(cudaGetDeviceCount(&visible));
  // Whether the sender's GPU reaches this one's memory: the same GPU, or
  // peer access where this process sees both GPUs. A GPU this process does
  // not see is left to CUDA IPC, which maps it when the two can (and says
  // so when they cannot, in importConnections).
  auto reaches = [&](const ConnectionExport &sender) -> llvm::Expected<bool> {
    if (std::memcmp(sender.deviceUuid, device.uuid.data(), sizeof sender.deviceUuid) == 0)
      return true;
    int ordinal = -1;
    if (sender.pid == static_cast<int32_t>(getpid())) {
      ordinal = sender.device;
    } else {
      for (int d = 0; d < visible && ordinal < 0; ++d) {
        cudaDeviceProp props{};
        COLL_CUDA_TRY(cudaGetDeviceProperties(&props, d));
        if (std::memcmp(props.uuid.bytes, sender.deviceUuid, sizeof sender.deviceUuid) == 0)
          ordinal = d;
      }
    }
    if (ordinal < 0)
      return true;
    int can = 0;
    COLL_CUDA_TRY(cudaDeviceCanAccessPeer(&can, ordinal, device.device));
    return can != 0;
  };
  uint64_t receivedConnections = 0;
  std::vector<uint32_t> table;
  uint32_t inHost = 0;
  for (size_t c = 0; c < plan.connections.size(); ++c) {
    const PlanConnection &info = plan.connections[c];
    if (info.receiver != options.rank)
      continue;
    ++receivedConnections;
    table.resize(receivedConnections, 0);
    if (info.sender == options.rank)
      continue;
    // From another host, through this process's network proxy.
    bool host = *disabled || all[info.sender].remote;
    if (!host) {
      auto reached = reaches(all[info.sender]);
      if (!reached)
        return reached.takeError();
      host = !*reached;
    }
    if (host) {
      table[indexAtReceiver[c]] = ++inHost;
      viaHost[c] = 1;
    }
  }
  remotePeer.assign(plan.nranks, 0);
  for (int32_t r = 0; r < plan.nranks; ++r)
    remotePeer[r] = all[r].remote != 0;
  // Direct steps load and store the peers' memory and signal into it: the
  // peers must be on this GPU or on one with peer access to it.
  for (int32_t peer : directPeers) {
    if (peer == options.rank)
      continue;
    const char *why = nullptr;
    if (all[peer].remote) {
      why = "it runs on another host";
    } else if (*disabled) {
      why = "COLL_P2P_DISABLE=1";
    } else {
      auto reached = reaches(all[peer]);
      if (!reached)
        return reached.takeError();
      if (!*reached)
        why = "their GPUs have no peer access";
    }
    if (why)
      return fail(llvm::formatv("{0}: rank {1}'s direct steps reach rank {2}, whose memory it "
                                "cannot load and store: {3} (direct steps need the peers on one "
                                "GPU or on GPUs with P2P)",
                                plan.fileName, options.rank, peer, why));
  }
  // To another host: a staging FIFO of this rank's, which its network
  // proxy forwards, after the FIFOs it receives on.
  uint32_t staged = 0;
  std::vector<uint32_t> stagingSlot(plan.connections.size(), 0);
  for (size_t c = 0; c < plan.connections.size(); ++c) {
    const PlanConnection &info = plan.connections[c];
    if (info.sender == options.rank && info.receiver != options.rank && all[info.receiver].remote) {
      stagingSlot[c] = ++staged;
      viaHost[c] = 1;
    }
  }
  if (!inHost && !staged)
    return llvm::Error::success();
  ownHeaderBytes = hostHeaderBytes(receivedConnections);
  own.bytes = ownHeaderBytes + static_cast<uint64_t>(inHost + staged) * connection.stride;
  own.fd = memfd_create("coll-host-fifos", MFD_CLOEXEC);
  if (own.fd < 0)
    return fail(llvm::formatv("{0}: rank {1}: memfd_create for its host-memory FIFOs: {2}",
                              plan.fileName, options.rank, std::strerror(errno)));
  if (ftruncate(own.fd, static_cast<off_t>(own.bytes)) != 0) {
    const int e = errno;
    releaseArea(own);
    return fail(llvm::formatv("{0}: rank {1}: {2} bytes of host-memory FIFOs: {3}", plan.fileName,
                              options.rank, ownHeaderBytes, std::strerror(e)));
  }
  void *p = mmap(nullptr, own.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, own.fd, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    releaseArea(own);
    return fail(llvm::formatv("{0}: rank {1}: mapping its host-memory FIFOs: {2}", plan.fileName,
                              options.rank, std::strerror(e)));
  }
  own.base = static_cast<unsigned char *>(p);
  own.mapped = true;
  std::memcpy(own.base, table.data(), table.size() * sizeof(uint32_t));
  // Portable: the executors of other GPUs in this process use it as it is.
  if (cudaError_t err =
          cudaHostRegister(own.base, own.bytes, cudaHostRegisterPortable | cudaHostRegisterMapped);
      err != cudaSuccess) {
    releaseArea(own);
    return fail(llvm::formatv("{0}: rank {1}: pinning its host-memory FIFOs: {2} ({3})",
                              plan.fileName, options.rank, cudaGetErrorName(err),
                              cudaGetErrorString(err)));
  }
  own.registered = true;
  void *onDevice = nullptr;
  COLL_CUDA_TRY(cudaHostGetDevicePointer(&onDevice, own.base, 0));
  for (size_t c = 0; c < plan.connections.size(); ++c) {
    uint64_t at = 0;
    if (viaHost[c] && plan.connections[c].receiver == options.rank)
      at = table[indexAtReceiver[c]] - 1;
    else if (stagingSlot[c])
      at = inHost + stagingSlot[c] - 1;
    else
      continue;
    connPointers[c] = static_cast<unsigned char *>(onDevice) + ownHeaderBytes + at * connection.stride;
    hostPointers[c] = own.base + ownHeaderBytes + at * connection.stride;
  }
  struct stat st {};
  if (fstat(own.fd, &st) != 0)
    return fail(llvm::formatv("{0}: rank {1}: fstat of its host-memory FIFOs: {2}", plan.fileName,
                              options.rank, std::strerror(errno)));
  exported.hostFd = own.fd;
  exported.hostConnections = inHost;
  exported.hostBytes = ownHeaderBytes + static_cast<uint64_t>(inHost) * connection.stride;
  exported.hostAddress = reinterpret_cast<uintptr_t>(own.base);
  exported.hostInode = static_cast<uint64_t>(st.st_ino);
  exported.hostDevice = static_cast<uint64_t>(st.st_dev);
  return llvm::Error::success();
}

llvm::Error CudaExecutor::Impl::setPeerBuffers(llvm::ArrayRef<PeerBuffers> all) {
  if (!oneRank())
    return fail("CudaExecutor::setPeerBuffers: the executor runs every rank itself, with the "
                "buffers of its calls");
  if (all.size() != static_cast<size_t>(plan.nranks))
    return fail(llvm::formatv("CudaExecutor::setPeerBuffers: {0} entries for {1} ranks",
                              all.size(), plan.nranks));
  peerBuffers.assign(all.begin(), all.end());
  peerWindows.clear();
  return llvm::Error::success();
}

llvm::Error CudaExecutor::Impl::setPeerWindows(llvm::ArrayRef<PeerWindows> all) {
  if (!oneRank())
    return fail("CudaExecutor::setPeerWindows: the executor runs every rank itself, with the "
                "buffers of its calls");
  if (all.size() != static_cast<size_t>(plan.nranks))
    return fail(llvm::formatv("CudaExecutor::setPeerWindows: {0} entries for {1} ranks",
                              all.size(), plan.nranks));
  const size_t slots = all[options.rank].windows.size();
  if (slots == 0)
    return fail("CudaExecutor::setPeerWindows: no windows");
  for (size_t r = 0; r < all.size(); ++r) {
    if (!all[r].descriptor && all[r].windows.empty())
      continue; // a rank this one never reaches (another host's)
    if (all[r].windows.size() != slots)
      return fail(llvm::formatv("CudaExecutor::setPeerWindows: rank {0} has {1} windows and "
                                "rank {2} {3}; every rank registers the same windows",
                                r, all[r].windows.size(), options.rank, slots));
    if (!all[r].descriptor || reinterpret_cast<uintptr_t>(all[r].descriptor) % 8 != 0)
      return fail(llvm::formatv("CudaExecutor::setPeerWindows: rank {0}'s descriptor is {1}",
                                r, all[r].descriptor ? "not 8-byte aligned" : "null"));
    for (size_t w = 0; w < slots; ++w)
      if (all[r].windows[w].bytes >= (uint64_t(1) << WindowOffsetBits))
        return fail(llvm::formatv("CudaExecutor::setPeerWindows: rank {0}'s window {1} of {2} "
                                  "bytes is larger than descriptors address (2^{3})",
                                  r, w, all[r].windows[w].bytes, WindowOffsetBits));
  }
  // Allocated here (stream-ordered, as every table), not at the call.
  COLL_CUDA_TRY(cudaSetDevice(device.device));
  if (llvm::Error err = windowDescriptorTable.reserve(all.size() * sizeof(WindowDescriptor *)))
    return err;
  if (llvm::Error err = windowBaseTable.reserve(all.size() * slots * sizeof(unsigned char *)))
    return err;
  peerWindows.assign(all.begin(), all.end());
  windowsInHost = std::any_of(all.begin(), all.end(),
                              [](const PeerWindows &w) { return w.hostMemory; });
  peerBuffers.clear();
  windowTablesUploaded = false;
  return llvm::Error::success();
}

std::vector<ProxiedConnection> CudaExecutor::Impl::proxiedConnections() const {
  std::vector<ProxiedConnection> out;
  for (size_t c = 0; c < plan.connections.size(); ++c) {
    const PlanConnection &info = plan.connections[c];
    const int32_t other = info.sender == options.rank ? info.receiver : info.sender;
    if (!hostPointers[c] || other == options.rank || !remotePeer[other])
      continue;
    unsigned char *base = hostPointers[c];
    ProxiedConnection p;
    p.head = reinterpret_cast<uintptr_t>(base + ConnectionLayout::HeadOffset);
    p.tail = reinterpret_cast<uintptr_t>(base + ConnectionLayout::TailOffset);
    p.sizes = reinterpret_cast<uintptr_t>(base + ConnectionLayout::SizesOffset);
    p.fifo = reinterpret_cast<uintptr_t>(base + ConnectionLayout::FifoOffset);
    p.slotStride = connection.slotStride;
    p.connection = static_cast<int32_t>(c);
    p.sender = info.sender;
    p.receiver = info.receiver;
    p.channel = info.channel;
    p.outbound = info.sender == options.rank;
    p.protocol = static_cast<uint32_t>(plan.protocol);
    out.push_back(p);
  }
  return out;
}

llvm::Error CudaExecutor::Impl::importConnections(const std::vector<ConnectionExport> &all) {
  if (!oneRank())
    return fail("CudaExecutor::importConnections: the executor runs every rank itself");
  if (all.size() != static_cast<size_t>(plan.nranks))
    return fail(llvm::formatv("CudaExecutor::importConnections: {0} entries for {1} ranks",
                              all.size(), plan.nranks));
  COLL_CUDA_TRY(cudaSetDevice(device.device));
  // Ranks on this same GPU run their blocks beside ours.
  coResidentTbs = 0;
  for (const ConnectionExport &peer : all)
    if (peer.rank != options.rank &&
        std::memcmp(peer.deviceUuid, device.uuid.data(), sizeof peer.deviceUuid) == 0)
      coResidentTbs += peer.tbs;
  residencies.clear();
  std::vector<uint64_t> receivedBy(plan.connectionsInto.begin(), plan.connectionsInto.end());
  std::vector<unsigned char *> base(plan.nranks, nullptr), hostBase(plan.nranks, nullptr),
      hostOnDevice(plan.nranks, nullptr);
  // Peer access to the GPU of rank r, an executor of this process on
  // another device, for reaching its `what`.
  auto enablePeer = [&](int32_t r, const char *what) -> llvm::Error {
    const ConnectionExport &peer = all[r];
    if (peer.device == device.device)
      return llvm::Error::success();
    cudaError_t err = cudaDeviceEnablePeerAccess(peer.device, 0);
    if (err == cudaErrorPeerAccessAlreadyEnabled)
      (void)cudaGetLastError();
    else if (err != cudaSuccess)
      return fail(llvm::formatv("{0}: rank {1} on device {2} cannot reach rank {3}'s {4} on "
                                "device {5}: {6} ({7})",
                                plan.fileName, options.rank, device.device, r, what, peer.device,
                                cudaGetErrorName(err), cudaGetErrorString(err)));
    return llvm::Error::success();
  };
  // The receiver's memory of FIFOs and signal flags, mapped once.
  auto mapReceiver = [&](int32_t r) -> llvm::Error {
    if (base[r])
      return llvm::Error::success();
    const ConnectionExport &peer = all[r];
    if (peer.pid == static_cast<int32_t>(getpid())) {
      // Another executor of this process: its pointer is valid here, on
      // another GPU once peer access is on.
      if (llvm::Error err = enablePeer(r, "FIFOs"))
        return err;
      base[r] = reinterpret_cast<unsigned char *>(peer.address);
    } else {
      cudaIpcMemHandle_t handle;
      std::memcpy(&handle, peer.ipcHandle, sizeof handle);
      void *mapped = nullptr;
      cudaError_t err = cudaIpcOpenMemHandle(&mapped, handle, cudaIpcMemLazyEnablePeerAccess);
      if (err != cudaSuccess)
        return fail(llvm::formatv("{0}: cannot map rank {1}'s FIFOs (process {2}): {3} ({4})",
                                  plan.fileName, r, peer.pid,
                                  cudaGetErrorName(err), cudaGetErrorString(err)));
      opened.push_back(mapped);
      base[r] = static_cast<unsigned char *>(mapped);
    }
    return llvm::Error::success();
  };
  for (size_t c = 0; c < plan.connections.size(); ++c) {
    const PlanConnection &info = plan.connections[c];
    if (info.sender != options.rank || info.receiver == options.rank)
      continue;
    const ConnectionExport &peer = all[info.receiver];
    if (peer.remote) {
      // On another host: this rank's staging FIFO (placeConnections).
      if (!hostPointers[c])
        return fail(llvm::formatv("{0}: rank {1} sends to rank {2} on another host, and has no "
                                  "staging FIFO for it (placeConnections first)",
                                  plan.fileName, options.rank, info.receiver));
      continue;
    }
    // The receiver's host-memory FIFOs, where it placed some.
    if (peer.hostFd >= 0 && !hostBase[info.receiver]) {
      const uint64_t header = hostHeaderBytes(receivedBy[info.receiver]);
      if (peer.rank != info.receiver || peer.stride != connection.stride ||
          peer.hostBytes != header + uint64_t(peer.hostConnections) * connection.stride)
        return fail(llvm::formatv(
            "{0}: rank {1} exported {2} bytes of host-memory FIFOs for {3} connections ({4} per "
            "connection) as rank {5}; rank {6} expects {7} per connection after a {8}-byte "
            "table: the ranks disagree on the plan or the slot size",
            plan.fileName, info.receiver, peer.hostBytes, peer.hostConnections, peer.stride,
            peer.rank, options.rank, connection.stride, header));
      HostArea area;
      if (peer.pid == static_cast<int32_t>(getpid())) {
        // Another executor of this process: registered portable there.
        area.base = reinterpret_cast<unsigned char *>(peer.hostAddress);
        area.bytes = peer.hostBytes;
      } else {
        const std::string path =
            "/proc/" + std::to_string(peer.pid) + "/fd/" + std::to_string(peer.hostFd);
        const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
        struct stat st {};
        const bool same = fd >= 0 && fstat(fd, &st) == 0 &&
                          static_cast<uint64_t>(st.st_ino) == peer.hostInode &&
                          static_cast<uint64_t>(st.st_dev) == peer.hostDevice &&
                          static_cast<uint64_t>(st.st_size) >= peer.hostBytes;
        const int e = fd < 0 ? errno : 0;
        void *p = same ? mmap(nullptr, peer.hostBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                       : MAP_FAILED;
        if (fd >= 0)
          ::close(fd);
        if (p == MAP_FAILED)
          return fail(llvm::formatv(
              "{0}: cannot map rank {1}'s host-memory FIFOs (process {2}, {3}): {4}",
              plan.fileName, info.receiver, peer.pid, path,
              e ? std::strerror(e) : same ? "mmap failed" : "not the memory it exported"));
        area.base = static_cast<unsigned char *>(p);
        area.bytes = peer.hostBytes;
        area.mapped = true;
        if (cudaError_t err = cudaHostRegister(area.base, area.bytes,
                                               cudaHostRegisterPortable | cudaHostRegisterMapped);
            err != cudaSuccess) {
          releaseArea(area);
          return fail(llvm::formatv("{0}: pinning rank {1}'s host-memory FIFOs: {2} ({3})",
                                    plan.fileName, info.receiver, cudaGetErrorName(err),
                                    cudaGetErrorString(err)));
        }
        area.registered = true;
        mappedAreas.push_back(area);
      }
      void *onDevice = nullptr;
      COLL_CUDA_TRY(cudaHostGetDevicePointer(&onDevice, area.base, 0));
      hostBase[info.receiver] = area.base;
      hostOnDevice[info.receiver] = static_cast<unsigned char *>(onDevice);
    }
    if (hostBase[info.receiver]) {
      uint32_t slot = 0;
      std::memcpy(&slot, hostBase[info.receiver] + indexAtReceiver[c] * sizeof(uint32_t),
                  sizeof slot);
      if (slot > all[info.receiver].hostConnections)
        return fail(llvm::formatv("{0}: rank {1}'s table of host-memory FIFOs names FIFO {2} of "
                                  "{3}",
                                  plan.fileName, info.receiver, slot,
                                  all[info.receiver].hostConnections));
      if (slot) {
        viaHost[c] = 1;
        connPointers[c] = hostOnDevice[info.receiver] +
                          hostHeaderBytes(receivedBy[info.receiver]) +
                          (slot - 1) * connection.stride;
        continue;
      }
    }
    const uint64_t need = (indexAtReceiver[c] + 1) * connection.stride;
    if (peer.rank != info.receiver || peer.stride != connection.stride || peer.bytes < need)
      return fail(llvm::formatv(
          "{0}: rank {1} exported {2} bytes of FIFOs ({3} per connection) as rank {4}; rank {5} "
          "needs {6} ({7} per connection): the ranks disagree on the plan or the slot size",
          plan.fileName, info.receiver, peer.bytes, peer.stride, peer.rank, options.rank, need,
          connection.stride));
    if (llvm::Error err = mapReceiver(info.receiver))
      return err;
    connPointers[c] = base[info.receiver] + indexAtReceiver[c] * connection.stride;
  }
  // Direct steps: the flags of the signals this rank sends, in their
  // receivers' memory; and peer access to the GPUs of peers in this process
  // whose buffers the steps load or store.
  for (size_t g = 0; g < signalPointers.size(); ++g) {
    const PlanSignal &pair = plan.signals[g];
    if (pair.sender != options.rank || pair.receiver == options.rank)
      continue;
    const ConnectionExport &peer = all[pair.receiver];
    if (peer.rank != pair.receiver || signalAtReceiver[g] >= peer.signals ||
        peer.signalsOffset + peer.signals * PollStride > peer.bytes)
      return fail(llvm::formatv(
          "{0}: rank {1} exported {2} signal flags at {3} of {4} bytes as rank {5}; rank {6} "
          "signals its flag {7}: the ranks disagree on the plan",
          plan.fileName, pair.receiver, peer.signals, peer.signalsOffset, peer.bytes, peer.rank,
          options.rank, signalAtReceiver[g]));
    if (llvm::Error err = mapReceiver(pair.receiver))
      return err;
    signalPointers[g] = reinterpret_cast<uint64_t *>(base[pair.receiver] + peer.signalsOffset +
                                                     signalAtReceiver[g] * PollStride);
  }
  for (int32_t peer : directPeers)
    if (peer != options.rank && all[peer].pid == static_cast<int32_t>(getpid()))
      if (llvm::Error err = enablePeer(peer, "buffers"))
        return err;
  if (direct)
    if (llvm::Error err = uploadSignals())
      return err;
  // Blocks that wait for each other must all be resident (chooseResidency
  // picks their size per call); more than the GPU can ever hold, whatever
  // their size, is refused here, where every rank learns of it at once.
  int blocksPerSm = 0;
  COLL_CUDA_TRY(
      cudaDeviceGetAttribute(&blocksPerSm, cudaDevAttrMaxBlocksPerMultiprocessor, device.device));
  const uint64_t most = static_cast<uint64_t>(blocksPerSm) * device.smCount;
  if (static_cast<uint64_t>(launchTbs) + coResidentTbs > most)
    return fail(llvm::formatv(
        "{0}: rank {1}'s {2} thread blocks and the {3} of the other ranks on this GPU must all "
        "be resident at once, but {4} holds at most {5} ({6} per SM x {7} SMs) whatever their "
        "size; use an algorithm with fewer tbs",
        plan.fileName, options.rank, launchTbs, coResidentTbs, device.name, most, blocksPerSm,
        device.smCount));
  if (proto == Proto::LL128)
    for (size_t c = 0; c < plan.connections.size(); ++c) {
      const PlanConnection &info = plan.connections[c];
      if (viaHost[c] && (info.sender == options.rank || info.receiver == options.rank))
        return fail(llvm::formatv(
            "{0}: the FIFO from rank {1} to rank {2} is in host memory (their GPUs have no "
            "peer access, or COLL_P2P_DISABLE=1); LL128 needs its 128-byte lines to arrive "
            "whole, which only NVLink promises (NCCL uses LL128 over NVLink only): use an LL "
            "or Simple program between GPUs without P2P",
            plan.fileName, info.sender, info.receiver));
    }
  // Scopes by construction (docs/CUDA.md, "Scopes"): a connection whose
  // other end runs on another GPU, or whose FIFO is in host memory,
  // synchronises at .sys, at both ends; one within this GPU at .gpu.
  auto sameGpu = [&](int32_t rank) {
    return std::memcmp(all[rank].deviceUuid, device.uuid.data(), sizeof all[rank].deviceUuid) == 0;
  };
  crossGpu = forceSys;
  for (size_t c = 0; c < plan.connections.size(); ++c) {
    const PlanConnection &info = plan.connections[c];
    if (info.sender == options.rank || info.receiver == options.rank) {
      connScopes[c] =
          !forceSys && !viaHost[c] &&
                  sameGpu(info.sender == options.rank ? info.receiver : info.sender)
              ? Scope::Gpu
              : Scope::Sys;
      crossGpu = crossGpu || connScopes[c] == Scope::Sys;
    }
  }
  // Direct steps with a peer on another GPU: their signals at .sys.
  for (int32_t peer : directPeers)
    crossGpu = crossGpu || !sameGpu(peer);
  return uploadConnections();
}

llvm::Expected<CudaExecutor::Impl::Residency>
CudaExecutor::Impl::chooseResidency(const void *k, uint32_t sharedBytes, uint32_t cap) {
  int optin = 0;
  COLL_CUDA_TRY(
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device.device));
  // The opt-in limit covers static and dynamic shared memory together.
  cudaFuncAttributes attributes{};
  COLL_CUDA_TRY(cudaFuncGetAttributes(&attributes, k));
  const int64_t dynamicMax =
      static_cast<int64_t>(optin) - static_cast<int64_t>(attributes.sharedSizeBytes);
  if (static_cast<int64_t>(sharedBytes) > dynamicMax)
    return fail(llvm::formatv("{0}: a tb of {1} steps needs {2} bytes of shared memory; "
                              "{3} allows {4} per block beside the kernel's {5} static bytes",
                              plan.fileName, params.maxSteps, sharedBytes, device.name,
                              std::max<int64_t>(dynamicMax, 0), attributes.sharedSizeBytes));
  // The attribute belongs to the kernel, not to this executor: always the
  // device's maximum, so that no executor lowers it under another's launch.
  COLL_CUDA_TRY(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(dynamicMax)));
  const bool automatic = options.threadsPerBlock == 0;
  Residency r{k, automatic ? std::min(cap, MaxThreadsPerBlock) : options.threadsPerBlock, 0, cap};
  for (;; r.threads /= 2) {
    COLL_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &r.blocksPerSm, k, static_cast<int>(r.threads), sharedBytes));
    const uint64_t resident = static_cast<uint64_t>(r.blocksPerSm) * device.smCount;
    if (resident >= static_cast<uint64_t>(launchTbs) + coResidentTbs)
      return r;
    if (automatic && r.threads > 32)
      continue;
    const std::string others =
        coResidentTbs
            ? llvm::formatv(" (with the {0} of the other ranks on this GPU)", coResidentTbs).str()
            : std::string();
    return fail(llvm::formatv(
        "{0}: the launch's {1} thread blocks{9} must all be resident at once, but only {2} fit "
        "on {3} ({4} per SM x {5} SMs with {6} threads and {7} bytes of shared memory per "
        "block); {8}",
        plan.fileName, launchTbs + coResidentTbs, resident, device.name, r.blocksPerSm,
        device.smCount, r.threads, sharedBytes,
        automatic ? "use an algorithm with fewer tbs"
                  : "use fewer threads per block or an algorithm with fewer tbs",
        others));
  }
}

llvm::Expected<CallResult> CudaExecutor::Impl::prepare(const CallArgs &args) {
  prepared = false;
  COLL_CUDA_TRY(cudaSetDevice(device.device));
  // The tables below are in use until this executor's earlier launches end:
  // each upload waits for the stream first (launches on other streams must
  // have ended; see the header).
  if (!layout || layoutCount != args.count) {
    auto resolved = resolveCall(plan, args.count);
    if (!resolved)
      return resolved.takeError();
    layout = std::move(*resolved);
    layoutCount = args.count;
    if (llvm::Error err = upload(slices, layout->slices.data(), layout->slices.size(), stream))
      return err;
  }
  auto inplace = checkCallBuffers(plan, *layout, args, options.rank);
  if (!inplace)
    return inplace.takeError();
  if (oneRank())
    for (size_t c = 0; c < connPointers.size(); ++c)
      if (!connPointers[c] && plan.connections[c].sender == options.rank)
        return fail(llvm::formatv("{0}: rank {1} sends to rank {2}, whose FIFOs are not mapped "
                                  "(importConnections)",
                                  plan.fileName, options.rank, plan.connections[c].receiver));
  if (oneRank() && direct) {
    for (size_t g = 0; g < signalPointers.size(); ++g) {
      const PlanSignal &pair = plan.signals[g];
      if (!signalPointers[g] && pair.sender == options.rank)
        return fail(llvm::formatv("{0}: rank {1} signals rank {2}, whose flags are not mapped "
                                  "(importConnections)",
                                  plan.fileName, options.rank, pair.receiver));
    }
    for (const auto &[peer, buffer] : peerBuffersUsed) {
      if (peer == options.rank || !peerWindows.empty())
        continue; // on windows: the peer's descriptor says where (setPeerWindows)
      const PeerBuffers *given =
          static_cast<size_t>(peer) < peerBuffers.size() ? &peerBuffers[peer] : nullptr;
      const bool known = given && (buffer == 0   ? given->input
                                   : buffer == 1 ? given->output
                                                 : given->scratch);
      if (!known)
        return fail(llvm::formatv("{0}: rank {1}'s direct steps reach rank {2}'s {3} buffer, "
                                  "which it was not given (setPeerBuffers)",
                                  plan.fileName, options.rank, peer,
                                  buffer == 0 ? "input" : buffer == 1 ? "output" : "scratch"));
    }
  }

  const uint64_t es = dataTypeSize(args.type);
  const uint64_t sliceElems = slotBytes(options, proto) / es;
  const uint32_t span = static_cast<uint32_t>(std::max(plan.maxIrSteps, 1));
  CallResult result;
  result.inplace = *inplace;
  result.iterations = args.count ? iterationCount(*layout, sliceElems) : 0;
  if (result.iterations > maxFlagIterations(span))
    return fail(llvm::formatv("{0}: the call takes {1} pipeline iterations of {2} steps, more "
                              "than the dependency flags count (2^32 - 1 steps); use larger "
                              "FIFO slots",
                              plan.fileName, result.iterations, span));

  // Scratch: one allocation, each rank's part 256-byte aligned.
  std::vector<uint64_t> scratchAt(plan.nranks);
  uint64_t scratchBytes = 0;
  for (int32_t r = 0; r < plan.nranks; ++r) {
    scratchAt[r] = scratchBytes;
    if (!oneRank() || r == options.rank)
      scratchBytes += (layout->scratchElems[r] * es + 255) / 256 * 256;
  }
  if (llvm::Error err = scratch.reserve(scratchBytes))
    return err;
  std::vector<RankPointers> table(plan.nranks);
  for (int32_t r = 0; r < plan.nranks; ++r)
    if (!oneRank() || r == options.rank)
      table[r] = {args.input[r], args.output[r], scratch.as<unsigned char>() + scratchAt[r]};
    else if (direct && static_cast<size_t>(r) < peerBuffers.size())
      table[r] = {peerBuffers[r].input, peerBuffers[r].output, peerBuffers[r].scratch};
  // A scratch shared with the peers (setPeerBuffers, setPeerWindows), in
  // place of its own.
  if (oneRank() && direct && static_cast<size_t>(options.rank) < peerBuffers.size() &&
      peerBuffers[options.rank].scratch)
    table[options.rank].scratch = peerBuffers[options.rank].scratch;
  const bool onWindows = oneRank() && direct && !peerWindows.empty();
  WindowDescriptor own{};
  if (onWindows) {
    const PeerWindows &mine = peerWindows[options.rank];
    if (mine.scratch)
      table[options.rank].scratch = mine.scratch;
    // Where this rank's buffers lie in its windows; a buffer in none is
    // published as 0, and a peer that reaches it stops there, naming it.
    const uint64_t bytes[3] = {layout->inputElems * es, layout->outputElems * es,
                               layout->scratchElems[options.rank] * es};
    const RankPointers &at = table[options.rank];
    const void *buffers[3] = {at.input, at.output, at.scratch};
    for (int b = 0; b < 3; ++b) {
      const auto *p = static_cast<const unsigned char *>(buffers[b]);
      for (size_t w = 0; p && w < mine.windows.size(); ++w) {
        const auto *base = static_cast<const unsigned char *>(mine.windows[w].base);
        if (p >= base && p + bytes[b] <= base + mine.windows[w].bytes) {
          own.at[b] = windowPlace(static_cast<uint32_t>(w), static_cast<uint64_t>(p - base));
          break;
        }
      }
    }
    if (!windowTablesUploaded) {
      std::vector<WindowDescriptor *> descriptors(plan.nranks);
      std::vector<unsigned char *> bases;
      for (int32_t r = 0; r < plan.nranks; ++r) {
        descriptors[r] = static_cast<WindowDescriptor *>(peerWindows[r].descriptor);
        for (size_t w = 0; w < peerWindows[options.rank].windows.size(); ++w)
          bases.push_back(w < peerWindows[r].windows.size()
                              ? static_cast<unsigned char *>(peerWindows[r].windows[w].base)
                              : nullptr);
      }
      if (llvm::Error err =
              upload(windowDescriptorTable, descriptors.data(), descriptors.size(), stream))
        return err;
      if (llvm::Error err = upload(windowBaseTable, bases.data(), bases.size(), stream))
        return err;
      windowTablesUploaded = true;
    }
  }
  if (table.size() != rankTable.size() ||
      std::memcmp(table.data(), rankTable.data(), table.size() * sizeof(RankPointers)) != 0) {
    if (llvm::Error err = upload(ranks, table.data(), table.size(), stream))
      return err;
    rankTable = std::move(table);
  }

  int32_t maxSteps = 1, maxSlices = 0;
  for (int32_t t = firstTb; t < firstTb + launchTbs; ++t) {
    maxSteps = std::max(maxSteps, plan.tbs[t].nSteps);
    maxSlices = std::max(maxSlices, plan.tbs[t].nSlices);
  }
  // Each block's slices beside its steps in shared memory, where they fit
  // in a budget that leaves the occupancy alone; else read from the call's.
  const uint64_t sliceOffset = sharedSliceOffset(static_cast<uint32_t>(maxSteps));
  if (sliceOffset + uint64_t(maxSlices) * sizeof(CallSlice) > MaxSharedSliceBytes)
    maxSlices = 0;
  const uint8_t type = static_cast<uint8_t>(args.type);
  // A launch records a timeline when run() or enqueue() armed one (the
  // device state holds its buffers), in the same kernels.
  auto build = [&](KernelBuild b) {
    return proto == Proto::Simple ? kernelSimple(type, b)
           : proto == Proto::LL   ? kernelLL(type, b)
                                  : kernelLL128(type, b);
  };
  params = KernelParams{};
  params.tbs = tbs.as<PlanTb>();
  params.steps = steps.as<PlanStep>();
  params.deps = deps.as<PlanDep>();
  params.slices = slices.as<CallSlice>();
  params.ranks = ranks.as<RankPointers>();
  params.state = state.as<unsigned char>();
  params.connections = connTable.as<unsigned char *const>();
  params.connectionScopes = scopeTable.as<const Scope>();
  params.firstTb = firstTb;
  params.report = deviceReport;
  params.flagsOffset = stateLayout.flagsOffset;
  params.stepPeers = stepPeers.as<PlanStepPeer>();
  params.memberPeers = memberPeers.as<int32_t>();
  params.signals = signals.as<PlanSignal>();
  params.signalFlags = signalTable.as<uint64_t *const>();
  if (onWindows) {
    params.windowDescriptors = windowDescriptorTable.as<WindowDescriptor *const>();
    params.windowBases = windowBaseTable.as<unsigned char *const>();
    params.windowOwn = own;
    params.windowSlots = static_cast<uint32_t>(peerWindows[options.rank].windows.size());
    params.windowRank = options.rank;
  }
  params.connection = connection;
  params.iterations = result.iterations;
  params.sliceElems = sliceElems;
  params.watchdogNs = uint64_t(watchdogMs) * 1000000;
  params.hostStop = deviceHostStop;
  params.span = span;
  params.maxSteps = static_cast<uint32_t>(maxSteps);
  params.maxSlices = static_cast<uint32_t>(maxSlices);
  params.op = static_cast<DeviceOp>(args.op);

  shape.blocks = static_cast<uint32_t>(launchTbs);
  shape.sharedBytes = static_cast<uint32_t>(
      maxSlices ? sliceOffset + uint64_t(maxSlices) * sizeof(CallSlice) : maxSteps * sizeof(PlanStep));
  shape.smCount = device.smCount;
  // Automatic block sizes: no more threads than a step of this call moves
  // in one pass.
  const uint32_t cap = threadsForStep(
      proto, result.iterations > 1 ? sliceElems * es : layout->maxChunkElems * es);
  auto residencyOf = [&](const void *k) -> llvm::Expected<Residency> {
    auto known = std::find_if(residencies.begin(), residencies.end(),
                              [&](const Residency &r) { return r.kernel == k && r.cap == cap; });
    if (known != residencies.end())
      return *known;
    auto chosen = chooseResidency(k, shape.sharedBytes, cap);
    if (chosen)
      residencies.push_back(*chosen);
    return chosen;
  };
  // The wide build (128 registers) where its blocks get as many threads as
  // the narrow build's would; else the narrow one (device/Kernel.cuh). With
  // a connection to another GPU, the CrossGpu build.
  Residency chosen{};
  // Windows in host memory: their descriptors are stored and read at .sys.
  if (crossGpu || (onWindows && windowsInHost)) {
    auto cross = residencyOf(build(KernelBuild::CrossGpu));
    if (!cross)
      return cross.takeError();
    chosen = *cross;
  } else {
    auto wide = residencyOf(build(KernelBuild::Wide));
    auto narrow = residencyOf(build(KernelBuild::Narrow));
    if (!wide && !narrow) {
      llvm::consumeError(wide.takeError());
      return narrow.takeError();
    }
    const bool useWide = wide && (!narrow || wide->threads >= narrow->threads);
    chosen = useWide ? *wide : *narrow;
    if (!wide)
      llvm::consumeError(wide.takeError());
    if (!narrow)
      llvm::consumeError(narrow.takeError());
  }
  kernel = chosen.kernel;
  shape.threads = chosen.threads;
  shape.blocksPerSm = chosen.blocksPerSm;
  shape.wide = chosen.kernel == build(KernelBuild::Wide);

  averageKernel = nullptr;
  if (args.op == ReduceOp::Avg && ir::collectiveInfo(plan.collective).reduces) {
    averageKernel = averageKernelFor(type);
    const bool rootOnly = plan.collective == ir::Collective::Reduce;
    averageFirstRank = rootOnly ? plan.root : oneRank() ? options.rank : 0;
    averageRanks = rootOnly || oneRank() ? 1 : plan.nranks;
    averageElems = layout->outputElems;
    if (rootOnly && oneRank() && options.rank != plan.root)
      averageKernel = nullptr; // only the root's output holds the result
  }
  prepared = true;
  return result;
}

llvm::Error CudaExecutor::Impl::launch(cudaStream_t s) {
  if (!prepared)
    return fail("CudaExecutor::launch: no call is prepared");
  COLL_CUDA_TRY(cudaSetDevice(device.device));
  if (params.iterations == 0 || shape.blocks == 0)
    return llvm::Error::success();
  void *args[] = {&params};
  // Cooperative: the driver refuses a grid whose blocks cannot all be
  // resident at once, which the persistent blocks need (they wait for each
  // other), instead of relying on the occupancy query alone.
  cudaLaunchAttribute cooperative{};
  cooperative.id = cudaLaunchAttributeCooperative;
  cooperative.val.cooperative = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(shape.blocks);
  config.blockDim = dim3(shape.threads);
  config.dynamicSmemBytes = shape.sharedBytes;
  config.stream = s;
  config.attrs = &cooperative;
  config.numAttrs = 1;
  COLL_CUDA_TRY(cudaLaunchKernelExC(&config, kernel, args));
  if (averageKernel) {
    constexpr uint32_t Threads = 256;
    const uint64_t blocks = std::clamp<uint64_t>((averageElems + Threads - 1) / Threads, 1, 1024);
    const RankPointers *table = ranks.as<RankPointers>();
    int32_t nranks = plan.nranks;
    void *avgArgs[] = {&table, &averageFirstRank, &nranks, &averageElems};
    COLL_CUDA_TRY(cudaLaunchKernel(
        averageKernel, dim3(static_cast<uint32_t>(blocks), static_cast<uint32_t>(averageRanks)),
        dim3(Threads), avgArgs, 0, s));
  }
  return llvm::Error::success();
}

llvm::Error CudaExecutor::Impl::resetState() {
  COLL_CUDA_TRY(cudaMemsetAsync(state.as<void>(), 0, stateLayout.bytes, stream));
  // One rank: its receiving FIFOs too. The senders' ends (in other
  // executors) are mid-transfer as well; a job does not go on after a stop.
  if (exported.bytes)
    COLL_CUDA_TRY(cudaMemsetAsync(received.as<void>(), 0, exported.bytes, stream));
  COLL_CUDA_TRY(cudaStreamSynchronize(stream));
  if (own.base)
    std::memset(own.base + ownHeaderBytes, 0, own.bytes - ownHeaderBytes);
  std::memset(report, 0, sizeof(WatchdogReport));
  return llvm::Error::success();
}

llvm::Error CudaExecutor::Impl::finish(cudaStream_t s) {
  COLL_CUDA_TRY(cudaSetDevice(device.device));
  COLL_CUDA_TRY(cudaStreamSynchronize(s));
  // The reporting block fenced its writes at system scope before `valid`,
  // and the kernel has completed.
  if (!reinterpret_cast<volatile WatchdogReport *>(report)->valid)
    return llvm::Error::success();
  std::string text = describeWatchdogReport(plan, *report, watchdogMs);
  // The FIFOs and flags are mid-transfer: start every counter afresh.
  if (llvm::Error err = resetState())
    return err;
  return fail(plan.fileName + ": " + text);
}

llvm::Error CudaExecutor::Impl::enqueue(cudaStream_t caller, llvm::ArrayRef<DeviceCopy> before,
                                        llvm::ArrayRef<DeviceCopy> afterwards) {
  if (!prepared)
    return fail("CudaExecutor::enqueue: no call is prepared");
  COLL_CUDA_TRY(cudaSetDevice(device.device));
  enqueueArmed = traceEnqueues && params.iterations > 0 && launchTbs > 0;
  if (enqueueArmed)
    if (llvm::Error err = armTimeline())
      return err;
  COLL_CUDA_TRY(cudaEventRecord(callerReady, caller));
  COLL_CUDA_TRY(cudaStreamWaitEvent(stream, callerReady, 0));
  for (const DeviceCopy &c : before)
    if (c.bytes)
      COLL_CUDA_TRY(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDefault, stream));
  if (llvm::Error err = launch(stream))
    return err;
  for (const DeviceCopy &c : afterwards)
    if (c.bytes)
      COLL_CUDA_TRY(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDefault, stream));
  COLL_CUDA_TRY(cudaEventRecord(launched, stream));
  return llvm::Error::success();
}

llvm::Error CudaExecutor::Impl::join(cudaStream_t caller) {
  COLL_CUDA_TRY(cudaSetDevice(device.device));
  COLL_CUDA_TRY(cudaStreamWaitEvent(caller, launched, 0));
  return llvm::Error::success();
}

llvm::Expected<bool> CudaExecutor::Impl::poll(bool wait) {
  COLL_CUDA_TRY(cudaSetDevice(device.device));
  if (wait) {
    COLL_CUDA_TRY(cudaStreamSynchronize(stream));
  } else {
    cudaError_t status = cudaStreamQuery(stream);
    if (status == cudaErrorNotReady)
      return false;
    COLL_CUDA_TRY(status);
  }
  if (!reinterpret_cast<volatile WatchdogReport *>(report)->valid)
    return true;
  std::string text = describeWatchdogReport(plan, *report, watchdogMs);
  if (llvm::Error err = resetState())
    return err;
  return fail(plan.fileName + ": " + text);
}

llvm::Error CudaExecutor::Impl::abort() {
  COLL_CUDA_TRY(cudaSetDevice(device.device));
  if (!abortStream)
    COLL_CUDA_TRY(cudaStreamCreateWithFlags(&abortStream, cudaStreamNonBlocking));
  // The flag every wait polls (as a watchdog stop raises it), written from
  // a stream of its own while the launches run on `stream`.
  COLL_CUDA_TRY(cudaMemsetAsync(state.as<unsigned char>() + offsetof(DeviceControl, abort), 1,
                                sizeof(uint32_t), abortStream));
  COLL_CUDA_TRY(cudaStreamSynchronize(abortStream));
  COLL_CUDA_TRY(cudaStreamSynchronize(stream));
  return resetState();
}

llvm::Expected<void *> CudaExecutor::Impl::temporary(int which, uint64_t bytes) {
  COLL_CUDA_TRY(cudaSetDevice(device.device));
  if (llvm::Error err = temp[which].reserve(bytes))
    return err;
  return temp[which].as<void>();
}

llvm::Error CudaExecutor::Impl::armTimeline() {
  // Events per block: per iteration and step, the step itself, a wait for a
  // dependency, and per chunk a wait for data and one for a free slot.
  uint64_t perIteration = 0;
  for (int32_t b = 0; b < launchTbs; ++b) {
    const PlanTb &tb = plan.tbs[firstTb + b];
    uint64_t events = 0;
    for (int32_t i = 0; i < tb.nSteps; ++i)
      events += 2 + 2 * uint64_t(std::max(plan.steps[tb.stepBegin + i].count, 0));
    perIteration = std::max(perIteration, events);
  }
  // At most 256 MiB of events: a longer call keeps its first ones.
  const uint64_t blocks = std::max<uint64_t>(uint64_t(launchTbs), 1);
  const uint64_t limit = (256ull << 20) / sizeof(DeviceTraceEvent) / blocks;
  const uint64_t capacity = std::min<uint64_t>(
      {perIteration * std::max<uint64_t>(params.iterations, 1), limit, uint64_t(UINT32_MAX)});
  if (llvm::Error err = traceEvents.reserve(blocks * capacity * sizeof(DeviceTraceEvent)))
    return err;
  if (llvm::Error err = traceCounts.reserve(2 * blocks * sizeof(uint32_t)))
    return err;
  COLL_CUDA_TRY(cudaMemsetAsync(traceCounts.as<void>(), 0, 2 * blocks * sizeof(uint32_t), stream));
  traceCapacity = static_cast<uint32_t>(capacity);
  return setTraceBuffers(traceEvents.as<DeviceTraceEvent>(), traceCounts.as<uint32_t>(),
                         traceCapacity);
}

llvm::Error CudaExecutor::Impl::setTraceBuffers(DeviceTraceEvent *events, uint32_t *counts,
                                                uint32_t capacity) {
  // The kernels record a timeline while the device state's control block
  // holds its buffers (null: none); pageable source, so the copy is done when it returns.
  struct {
    DeviceTraceEvent *events;
    uint32_t *counts;
    uint32_t capacity;
  } fields{events, counts, capacity};
  static_assert(offsetof(DeviceControl, traceCounts) ==
                    offsetof(DeviceControl, traceEvents) + sizeof(void *) &&
                offsetof(DeviceControl, traceCapacity) ==
                    offsetof(DeviceControl, traceCounts) + sizeof(void *));
  COLL_CUDA_TRY(cudaMemcpyAsync(state.as<unsigned char>() + offsetof(DeviceControl, traceEvents),
                                &fields,
                                offsetof(DeviceControl, traceCapacity) -
                                    offsetof(DeviceControl, traceEvents) + sizeof(uint32_t),
                                cudaMemcpyHostToDevice, stream));
  COLL_CUDA_TRY(cudaStreamSynchronize(stream));
  return llvm::Error::success();
}

llvm::Error CudaExecutor::Impl::collectTimeline(Timeline &out, DataType type,
                                                std::chrono::steady_clock::time_point t0,
                                                std::chrono::steady_clock::time_point t1) {
  const uint32_t capacity = traceCapacity;
  if (llvm::Error err = setTraceBuffers(nullptr, nullptr, 0))
    return err;
  const size_t blocks = static_cast<size_t>(std::max(launchTbs, 0));
  std::vector<uint32_t> state(2 * blocks), counts(blocks);
  std::vector<DeviceTraceEvent> events(blocks * capacity);
  if (blocks) {
    COLL_CUDA_TRY(cudaMemcpyAsync(state.data(), traceCounts.as<void>(),
                                  2 * blocks * sizeof(uint32_t), cudaMemcpyDeviceToHost, stream));
    COLL_CUDA_TRY(cudaMemcpyAsync(events.data(), traceEvents.as<void>(),
                                  events.size() * sizeof(DeviceTraceEvent), cudaMemcpyDeviceToHost,
                                  stream));
    COLL_CUDA_TRY(cudaStreamSynchronize(stream));
  }
  for (size_t b = 0; b < blocks; ++b)
    counts[b] = state[2 * b];
  // The GPU's clock and the host's steady clock have different origins:
  // where the events do not fall within the call as the host saw it (on a
  // GPU; the emulation's clock is the steady clock), the first is moved to
  // the call's start.
  const int64_t hostBegin =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count();
  const int64_t hostEnd =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t1.time_since_epoch()).count();
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (size_t b = 0; b < blocks; ++b)
    for (uint32_t i = 0; i < std::min(counts[b], capacity); ++i) {
      first = std::min(first, int64_t(events[b * capacity + i].begin));
      last = std::max(last, int64_t(events[b * capacity + i].end));
    }
  const int64_t shift =
      first == INT64_MAX || (first >= hostBegin && last <= hostEnd) ? 0 : hostBegin - first;
  std::vector<std::vector<host::TbTrace>> perRank(static_cast<size_t>(plan.nranks));
  for (size_t b = 0; b < blocks; ++b) {
    const int32_t globalTb = firstTb + static_cast<int32_t>(b);
    const PlanTb &tb = plan.tbs[globalTb];
    auto &traces = perRank[static_cast<size_t>(tb.rank)];
    traces.resize(static_cast<size_t>(plan.tbCount(tb.rank)));
    host::TbTrace &trace = traces[static_cast<size_t>(globalTb - plan.rankTbBegin[tb.rank])];
    for (uint32_t i = 0; i < std::min(counts[b], capacity); ++i) {
      const DeviceTraceEvent &e = events[b * capacity + i];
      if (e.step < 0 || e.step >= tb.nSteps)
        continue;
      trace.events.push_back(host::TraceEvent{int64_t(e.begin) + shift, int64_t(e.end) + shift,
                                              e.iteration, &plan.steps[tb.stepBegin + e.step],
                                              static_cast<uint8_t>(e.kind), e.elems});
    }
  }
  for (int32_t r = 0; r < plan.nranks; ++r)
    if (!perRank[static_cast<size_t>(r)].empty())
      out.addCall(plan, r, type, t0, t1, perRank[static_cast<size_t>(r)]);
  return llvm::Error::success();
}

llvm::Error CudaExecutor::Impl::collectEnqueued(Timeline &out, DataType type,
                                                std::chrono::steady_clock::time_point t0,
                                                std::chrono::steady_clock::time_point t1) {
  if (!enqueueArmed)
    return llvm::Error::success();
  enqueueArmed = false;
  return collectTimeline(out, type, t0, t1);
}

llvm::Expected<CallResult> CudaExecutor::Impl::run(const CallArgs &args) {
  auto result = prepare(args);
  if (!result)
    return result.takeError();
  const bool tracing = timeline && params.iterations > 0 && launchTbs > 0;
  if (tracing)
    if (llvm::Error err = armTimeline())
      return err;
  const auto t0 = std::chrono::steady_clock::now();
  COLL_CUDA_TRY(cudaEventRecord(startEvent, stream));
  if (llvm::Error err = launch(stream))
    return err;
  COLL_CUDA_TRY(cudaEventRecord(stopEvent, stream));
  if (llvm::Error err = finish(stream))
    return err;
  const auto t1 = std::chrono::steady_clock::now();
  float ms = 0;
  COLL_CUDA_TRY(cudaEventElapsedTime(&ms, startEvent, stopEvent));
  result->seconds = ms * 1e-3;
  if (tracing)
    if (llvm::Error err = collectTimeline(*timeline, args.type, t0, t1))
      return err;
  return result;
}

llvm::Expected<std::vector<double>> CudaExecutor::Impl::timeLaunches(unsigned warmup,
                                                                     unsigned iters, bool graph) {
  if (!prepared)
    return fail("CudaExecutor::timeLaunches: no call is prepared");
  COLL_CUDA_TRY(cudaSetDevice(device.device));
  cudaGraph_t captured = nullptr;
  cudaGraphExec_t exec = nullptr;
  auto destroy = llvm::make_scope_exit([&] {
    if (exec)
      cudaGraphExecDestroy(exec);
    if (captured)
      cudaGraphDestroy(captured);
  });
  if (graph) {
    COLL_CUDA_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    llvm::Error err = launch(stream);
    cudaError_t ended = cudaStreamEndCapture(stream, &captured);
    if (err)
      return err;
    COLL_CUDA_TRY(ended);
    COLL_CUDA_TRY(cudaGraphInstantiate(&exec, captured, 0));
  }
  auto seconds = timeOnStream(stream, warmup, iters, [&]() -> llvm::Error {
    if (!graph)
      return launch(stream);
    COLL_CUDA_TRY(cudaGraphLaunch(exec, stream));
    return llvm::Error::success();
  });
  if (llvm::Error err = finish(stream))
    return err;
  return seconds;
}

//===----------------------------------------------------------------------===//
// CudaExecutor
//===----------------------------------------------------------------------===//

CudaExecutor::CudaExecutor(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
CudaExecutor::~CudaExecutor() {
  DeviceScope onDevice = scope();
  impl.reset();
}

DeviceScope CudaExecutor::scope() const { return DeviceScope(impl->deviceInfo().device); }

llvm::Expected<CallResult> CudaExecutor::prepare(const CallArgs &args) {
  DeviceScope onDevice = scope();
  return impl->prepare(args);
}
llvm::Error CudaExecutor::launch(void *stream) {
  DeviceScope onDevice = scope();
  return impl->launch(static_cast<cudaStream_t>(stream));
}
llvm::Error CudaExecutor::finish(void *stream) {
  DeviceScope onDevice = scope();
  return impl->finish(static_cast<cudaStream_t>(stream));
}
llvm::Expected<CallResult> CudaExecutor::run(const CallArgs &args) {
  DeviceScope onDevice = scope();
  return impl->run(args);
}
void CudaExecutor::setTimeline(Timeline *timeline) { impl->timeline = timeline; }
void CudaExecutor::traceEnqueued(bool on) { impl->traceEnqueues = on; }
llvm::Error CudaExecutor::collectEnqueued(Timeline &timeline, DataType type,
                                          std::chrono::steady_clock::time_point t0,
                                          std::chrono::steady_clock::time_point t1) {
  DeviceScope onDevice = scope();
  return impl->collectEnqueued(timeline, type, t0, t1);
}
llvm::Expected<std::vector<double>> CudaExecutor::timeLaunches(unsigned warmup, unsigned iters,
                                                               bool graph) {
  DeviceScope onDevice = scope();
  return impl->timeLaunches(warmup, iters, graph);
}
llvm::Error CudaExecutor::enqueue(void *stream, llvm::ArrayRef<DeviceCopy> before,
                                  llvm::ArrayRef<DeviceCopy> after) {
  DeviceScope onDevice = scope();
  return impl->enqueue(static_cast<cudaStream_t>(stream), before, after);
}
llvm::Error CudaExecutor::join(void *stream) {
  DeviceScope onDevice = scope();
  return impl->join(static_cast<cudaStream_t>(stream));
}
llvm::Expected<bool> CudaExecutor::poll(bool wait) {
  DeviceScope onDevice = scope();
  return impl->poll(wait);
}
llvm::Expected<void *> CudaExecutor::temporary(int which, uint64_t bytes) {
  if (which < 0 || which > 1)
    return fail("DeviceExecutor::temporary: buffer 0 or 1");
  DeviceScope onDevice = scope();
  return impl->temporary(which, bytes);
}
llvm::Error CudaExecutor::abort() {
  DeviceScope onDevice = scope();
  return impl->abort();
}
const CudaDeviceInfo &CudaExecutor::device() const { return impl->deviceInfo(); }
ConnectionExport CudaExecutor::exportConnections() const { return impl->exported; }
std::vector<ProxiedConnection> CudaExecutor::proxiedConnections() const {
  return impl->proxiedConnections();
}
llvm::Error CudaExecutor::setPeerBuffers(llvm::ArrayRef<PeerBuffers> ranks) {
  return impl->setPeerBuffers(ranks);
}

llvm::Error CudaExecutor::setPeerWindows(llvm::ArrayRef<PeerWindows> ranks) {
  return impl->setPeerWindows(ranks);
}
llvm::Error CudaExecutor::placeConnections(const std::vector<ConnectionExport> &ranks) {
  DeviceScope onDevice = scope();
  return impl->placeConnections(ranks);
}
llvm::Error CudaExecutor::importConnections(const std::vector<ConnectionExport> &ranks) {
  DeviceScope onDevice = scope();
  return impl->importConnections(ranks);
}
const Plan &CudaExecutor::plan() const { return impl->plan; }
uint64_t CudaExecutor::sliceElems(DataType type) const {
  return slotBytes(impl->options, impl->proto) / dataTypeSize(type);
}
LaunchShape CudaExecutor::launchShape() const { return impl->shape; }

//===----------------------------------------------------------------------===//
// The backend: executors, staged buffers, copies
//===----------------------------------------------------------------------===//

namespace {

class StagedBuffers final : public DeviceBuffers {
public:
  ~StagedBuffers() override {
    for (const Region &region : regions)
      cudaFree(region.device);
  }
  static llvm::Expected<std::unique_ptr<DeviceBuffers>> create(const CallArgs &host,
                                                               uint64_t inputBytes,
                                                               uint64_t outputBytes) {
    MirrorLayout layout = mirrorLayout(host, inputBytes, outputBytes);
    auto buffers = std::make_unique<StagedBuffers>();
    buffers->device = host;
    for (const MirrorLayout::Range &range : layout.ranges) {
      void *ptr = nullptr;
      COLL_CUDA_TRY(cudaMalloc(&ptr, range.bytes));
      buffers->regions.push_back({range.begin, ptr, range.bytes});
    }
    auto place = [&](const MirrorLayout::Place &p) -> void * {
      return p.range < 0 ? nullptr
                         : static_cast<std::byte *>(buffers->regions[p.range].device) + p.offset;
    };
    for (size_t r = 0; r < layout.input.size(); ++r) {
      buffers->device.input[r] = place(layout.input[r]);
      buffers->device.output[r] = place(layout.output[r]);
    }
    return std::unique_ptr<DeviceBuffers>(std::move(buffers));
  }
  const CallArgs &args() const override { return device; }
  llvm::Error upload() override {
    for (const Region &region : regions)
      COLL_CUDA_TRY(cudaMemcpy(region.device, region.host, region.bytes, cudaMemcpyHostToDevice));
    return llvm::Error::success();
  }
  llvm::Error download() override {
    for (const Region &region : regions)
      COLL_CUDA_TRY(cudaMemcpy(region.host, region.device, region.bytes, cudaMemcpyDeviceToHost));
    return llvm::Error::success();
  }

private:
  struct Region {
    std::byte *host;
    void *device;
    uint64_t bytes;
  };
  std::vector<Region> regions;
  CallArgs device;
};

class Backend final : public DeviceBackend {
public:
  bool emulated() const override { return COLL_CUDA_EMULATION != 0; }
  llvm::Expected<CudaDeviceInfo> currentDevice() override { return currentCudaDevice(); }
  std::string describe(int device) override {
#if COLL_CUDA_EMULATION
    return device >= 0
               ? llvm::formatv("the CPU emulation of a GPU, for CUDA device {0}", device).str()
               : std::string("the CPU emulation of a GPU");
#else
    cudaDeviceProp props;
    if (device < 0 && cudaGetDevice(&device) != cudaSuccess)
      return "a CUDA device";
    if (cudaGetDeviceProperties(&props, device) != cudaSuccess)
      return llvm::formatv("CUDA device {0}", device).str();
    return llvm::formatv("{0} (CUDA device {1})", props.name, device).str();
#endif
  }
  llvm::Expected<std::unique_ptr<DeviceExecutor>> create(const Plan &plan,
                                                         const CudaOptions &options,
                                                         int device) override {
    DeviceScope onDevice(device);
    if (llvm::Error err = onDevice.check(device))
      return err;
    auto impl = std::make_unique<CudaExecutor::Impl>(plan, options);
    if (llvm::Error err = impl->start())
      return err;
    return std::make_unique<CudaExecutor>(std::move(impl));
  }
  llvm::Expected<std::unique_ptr<DeviceBuffers>> stage(const CallArgs &host, uint64_t inputBytes,
                                                       uint64_t outputBytes) override {
    return StagedBuffers::create(host, inputBytes, outputBytes);
  }
  llvm::Expected<std::vector<double>> timeReference(const ReferenceRequest &q) override {
    return runReference(q);
  }
  llvm::Error copyOnStream(void *dst, const void *src, uint64_t bytes, void *stream,
                           int device) override {
#if COLL_CUDA_EMULATION
    (void)stream;
    (void)device;
    std::memmove(dst, src, bytes);
#else
    DeviceScope onDevice(device);
    if (llvm::Error err = onDevice.check(device))
      return err;
    COLL_CUDA_TRY(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)));
#endif
    return llvm::Error::success();
  }
  llvm::Expected<void *> allocateShared(uint64_t bytes, int device) override {
    DeviceScope onDevice(device);
    if (llvm::Error err = onDevice.check(device))
      return err;
    void *p = nullptr;
    COLL_CUDA_TRY(cudaMalloc(&p, std::max<uint64_t>(bytes, 1)));
    if (cudaError_t e = cudaMemset(p, 0, bytes); e != cudaSuccess) {
      cudaFree(p);
      COLL_CUDA_TRY(e);
    }
    return p;
  }
  llvm::Error freeShared(void *base, int device) override {
    DeviceScope onDevice(device);
    if (llvm::Error err = onDevice.check(device))
      return err;
    COLL_CUDA_TRY(cudaFree(base));
    return llvm::Error::success();
  }
  llvm::Expected<SharedHandle> exportShared(void *base, int device) override {
    DeviceScope onDevice(device);
    if (llvm::Error err = onDevice.check(device))
      return err;
    cudaIpcMemHandle_t handle;
    COLL_CUDA_TRY(cudaIpcGetMemHandle(&handle, base));
    SharedHandle out;
    static_assert(sizeof handle == sizeof out.bytes, "CUDA's handle is 64 bytes");
    std::memcpy(out.bytes, &handle, sizeof out.bytes);
    return out;
  }
  llvm::Expected<void *> openShared(const SharedHandle &handle, int device) override {
    DeviceScope onDevice(device);
    if (llvm::Error err = onDevice.check(device))
      return err;
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle.bytes, sizeof h);
    void *p = nullptr;
    COLL_CUDA_TRY(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess));
    return p;
  }
  llvm::Error closeShared(void *mapped, int device) override {
    DeviceScope onDevice(device);
    if (llvm::Error err = onDevice.check(device))
      return err;
    COLL_CUDA_TRY(cudaIpcCloseMemHandle(mapped));
    return llvm::Error::success();
  }
  llvm::Expected<std::vector<double>> timeDeviceCopy(uint64_t bytes, unsigned warmup,
                                                     unsigned iters) override {
    void *src = nullptr, *dst = nullptr;
    cudaStream_t stream = nullptr;
    auto release = llvm::make_scope_exit([&] {
      if (src)
        cudaFree(src);
      if (dst)
        cudaFree(dst);
      if (stream)
        cudaStreamDestroy(stream);
    });
    COLL_CUDA_TRY(cudaMalloc(&src, std::max<uint64_t>(bytes, 1)));
    COLL_CUDA_TRY(cudaMalloc(&dst, std::max<uint64_t>(bytes, 1)));
    COLL_CUDA_TRY(cudaMemset(src, 1, bytes));
    COLL_CUDA_TRY(cudaStreamCreate(&stream));
    return timeOnStream(stream, warmup, iters, [&]() -> llvm::Error {
      COLL_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
      return llvm::Error::success();
    });
  }
};

} // namespace

#if COLL_CUDA_EMULATION
void countEmulatedStepCosts(bool on) { cuda::simt::countStepCosts(on); }

std::vector<EmulatedStepCost> emulatedStepCosts(bool reset) {
  static const char *const protocols[] = {"Simple", "LL", "LL128"};
  static const char *const kinds[] = {
#define COLL_STEP_TYPE(Enum, XmlName, Recv, Send, ReadsSrc, Red, WritesDst, Direct) XmlName,
#include "coll/ir/StepTypes.def"
  };
  std::vector<EmulatedStepCost> out;
  // The table's order: protocol, then kind (NoStep, 0xff, last).
  for (const auto &[key, c] : cuda::simt::stepCosts(reset)) {
    EmulatedStepCost e;
    e.protocol = key.first < std::size(protocols) ? protocols[key.first] : "?";
    e.step = key.second == cuda::simt::NoStep ? "launch"
             : key.second < std::size(kinds)  ? kinds[key.second]
                                              : "?";
    e.executions = c.executions;
    e.barriers = c.counts[cuda::simt::BlockBarrier];
    e.warpBarriers = c.counts[cuda::simt::WarpBarrier];
    e.fences = c.counts[cuda::simt::FenceGpu];
    e.sysFences = c.counts[cuda::simt::FenceSys];
    e.releases = c.counts[cuda::simt::ReleaseStore];
    e.loads = c.counts[cuda::simt::StrongLoad];
    e.acquires = c.counts[cuda::simt::AcquireLoad];
    e.stores = c.counts[cuda::simt::StrongStore];
    e.atomics = c.counts[cuda::simt::AtomicRmw];
    out.push_back(std::move(e));
  }
  return out;
}

DeviceBackend &emulatedBackend() {
#else
DeviceBackend &cudaBackend() {
#endif
  static Backend backend;
  return backend;
}

} // namespace coll::interp
