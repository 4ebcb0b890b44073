//===- Runtime.cpp - The CUDA runtime calls, on the CPU -------------------===//

#include "Runtime.h"

#include "Simt.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <fcntl.h>
#include <sanitizer/asan_interface.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace coll::interp::cuda::rt {

namespace {

using Clock = std::chrono::steady_clock;

struct Allocation {
  size_t bytes = 0;  ///< as asked for
  size_t mapped = 0; ///< whole pages
  int fd = -1;       ///< the memfd behind it
};

struct State {
  std::mutex mutex;
  DeviceDescription device;
  std::unordered_map<void *, Allocation> allocations;    ///< cudaMalloc and cudaHostAlloc
  std::unordered_map<void *, size_t> opened;             ///< cudaIpcOpenMemHandle: mapped bytes
  std::unordered_map<const void *, int> maxDynamicShared; ///< per kernel, when raised
  // Work running now (cudaStreamCreate's header comment), by kind of stream.
  std::condition_variable idle;
  int runningLegacy = 0, runningBlocking = 0, runningNonBlocking = 0;
};

State &state() {
  static State s;
  return s;
}

thread_local std::string launchFailure;

size_t pageBytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

/// Device memory is shared memory (a memfd), so that cudaIpcGetMemHandle can
/// hand it to another process as CUDA IPC does; page aligned (cudaMalloc
/// promises 256 bytes) between two inaccessible guard pages, and the slack
/// after the requested size poisoned for AddressSanitizer, so out-of-bounds
/// accesses by a kernel are still caught.
cudaError_t allocate(void **ptr, size_t bytes) {
  if (!ptr)
    return cudaErrorInvalidValue;
  const size_t page = pageBytes();
  const size_t body = (std::max<size_t>(bytes, 1) + page - 1) / page * page;
  const int fd = memfd_create("coll-emulated-device", MFD_CLOEXEC);
  if (fd < 0)
    return cudaErrorMemoryAllocation;
  if (ftruncate(fd, static_cast<off_t>(body)) != 0) {
    ::close(fd);
    return cudaErrorMemoryAllocation;
  }
  void *area = mmap(nullptr, body + 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                    -1, 0);
  if (area == MAP_FAILED) {
    ::close(fd);
    return cudaErrorMemoryAllocation;
  }
  void *p = mmap(static_cast<char *>(area) + page, body, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_FIXED, fd, 0);
  if (p == MAP_FAILED) {
    munmap(area, body + 2 * page);
    ::close(fd);
    return cudaErrorMemoryAllocation;
  }
  ASAN_POISON_MEMORY_REGION(static_cast<char *>(p) + bytes, body - bytes);
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.allocations[p] = Allocation{bytes, body, fd};
  *ptr = p;
  return cudaSuccess;
}

cudaError_t release(void *ptr) {
  if (!ptr)
    return cudaSuccess;
  State &s = state();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto found = s.allocations.find(ptr);
    if (found == s.allocations.end())
      return cudaErrorInvalidValue;
    a = found->second;
    s.allocations.erase(found);
  }
  const size_t page = pageBytes();
  ASAN_UNPOISON_MEMORY_REGION(ptr, a.mapped);
  munmap(static_cast<char *>(ptr) - page, a.mapped + 2 * page);
  ::close(a.fd);
  return cudaSuccess;
}

/// What an emulated cudaIpcMemHandle_t holds: the exporting process and its
/// memfd, identified by inode so that a reused descriptor number is noticed.
struct IpcHandle {
  uint32_t magic;
  int32_t pid;
  int32_t fd;
  uint32_t pad;
  uint64_t bytes; ///< mapped size
  uint64_t inode, device;
};
static_assert(sizeof(IpcHandle) <= sizeof(cudaIpcMemHandle_t), "fits CUDA's 64 bytes");
constexpr uint32_t IpcMagic = 0xc011e11du;

} // namespace

/// Work of a stream, or a node of a captured graph.
using Operation = std::function<cudaError_t()>;

struct Graph {
  std::vector<Operation> nodes;
};

struct Stream {
  Graph *capture = nullptr; ///< recording instead of running
  cudaError_t captureError = cudaSuccess;
  bool nonBlocking = false; ///< cudaStreamNonBlocking
  int running = 0;          ///< work of this stream running now (State::mutex)
};

struct Event {
  Clock::time_point time{};
  bool recorded = false;
};

namespace {

/// Runs `op` now, or records it when `stream` is capturing. Work on the
/// legacy stream and on blocking streams first waits for each other.
cudaError_t enqueue(cudaStream_t stream, Operation op) {
  if (stream && stream->capture) {
    stream->capture->nodes.push_back(std::move(op));
    return cudaSuccess;
  }
  State &s = state();
  int State::*mine = !stream               ? &State::runningLegacy
                     : stream->nonBlocking ? &State::runningNonBlocking
                                           : &State::runningBlocking;
  {
    std::unique_lock<std::mutex> lock(s.mutex);
    if (!stream) // the legacy stream is one stream: its work runs one at a time
      s.idle.wait(lock, [&] { return s.runningBlocking == 0 && s.runningLegacy == 0; });
    else if (!stream->nonBlocking)
      s.idle.wait(lock, [&] { return s.runningLegacy == 0; });
    ++(s.*mine);
    if (stream)
      ++stream->running;
  }
  cudaError_t result = op();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    --(s.*mine);
    if (stream)
      --stream->running;
  }
  s.idle.notify_all();
  return result;
}

/// cudaMalloc, cudaFree, cudaDeviceSynchronize...: until no work runs.
void waitForDeviceIdle() {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mutex);
  s.idle.wait(lock, [&] {
    return s.runningLegacy == 0 && s.runningBlocking == 0 && s.runningNonBlocking == 0;
  });
}

} // namespace

const char *cudaGetErrorName(cudaError_t error) {
  switch (error) {
  case cudaSuccess: return "cudaSuccess";
  case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
  case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
  case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
  case cudaErrorNoDevice: return "cudaErrorNoDevice";
  case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
  case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
  case cudaErrorNotReady:
    return "cudaErrorNotReady";
  case cudaErrorPeerAccessAlreadyEnabled:
    return "cudaErrorPeerAccessAlreadyEnabled";
  case cudaErrorInvalidContext: return "cudaErrorInvalidContext";
  case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
  case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  case cudaErrorCooperativeLaunchTooLarge: return "cudaErrorCooperativeLaunchTooLarge";
  case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
  }
  return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess: return "no error";
  case cudaErrorInvalidValue: return "invalid argument";
  case cudaErrorMemoryAllocation: return "out of memory";
  case cudaErrorInvalidConfiguration: return "invalid configuration argument";
  case cudaErrorNoDevice: return "no CUDA-capable device is detected";
  case cudaErrorInvalidDevice: return "invalid device ordinal";
  case cudaErrorInvalidResourceHandle: return "invalid resource handle";
  case cudaErrorNotReady:
    return "device not ready";
  case cudaErrorPeerAccessAlreadyEnabled:
    return "peer access is already enabled";
  case cudaErrorInvalidContext: return "invalid device context";
  case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
  case cudaErrorLaunchFailure:
    // What the launcher said, when it said something on this thread.
    return launchFailure.empty() ? "the CPU launcher could not run the kernel"
                                 : launchFailure.c_str();
  case cudaErrorCooperativeLaunchTooLarge:
    return "too many blocks in cooperative launch";
  case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
  }
  return "unknown error";
}

cudaError_t cudaGetDeviceCount(int *count) {
  if (!count)
    return cudaErrorInvalidValue;
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device) {
  if (!device)
    return cudaErrorInvalidValue;
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *props, int device) {
  if (!props)
    return cudaErrorInvalidValue;
  if (device != 0)
    return cudaErrorInvalidDevice;
  const DeviceDescription &d = describedDevice();
  *props = cudaDeviceProp{};
  std::strncpy(props->name, d.name.c_str(), sizeof props->name - 1);
  // One emulated device per process: the pid and the boot time tell it apart.
  const uint64_t pid = static_cast<uint64_t>(getpid());
  static const uint64_t born = static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  std::memcpy(props->uuid.bytes, &pid, 8);
  std::memcpy(props->uuid.bytes + 8, &born, 8);
  props->multiProcessorCount = d.smCount;
  props->maxThreadsPerBlock = d.maxThreadsPerBlock;
  props->maxThreadsPerMultiProcessor = d.maxThreadsPerSm;
  props->sharedMemPerBlock = d.sharedPerBlock;
  props->sharedMemPerMultiprocessor = d.sharedPerSm;
  props->regsPerMultiprocessor = d.registersPerSm;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
  if (!value)
    return cudaErrorInvalidValue;
  if (device != 0)
    return cudaErrorInvalidDevice;
  const DeviceDescription &d = describedDevice();
  switch (attr) {
  case cudaDevAttrMaxThreadsPerBlock: *value = d.maxThreadsPerBlock; return cudaSuccess;
  case cudaDevAttrMultiProcessorCount: *value = d.smCount; return cudaSuccess;
  case cudaDevAttrMaxSharedMemoryPerBlockOptin:
    *value = static_cast<int>(d.sharedPerBlockOptin);
    return cudaSuccess;
  }
  return cudaErrorInvalidValue;
}

cudaError_t cudaDeviceSynchronize() {
  waitForDeviceIdle();
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int, unsigned) { return cudaErrorInvalidDevice; }
cudaError_t cudaGetLastError() { return cudaSuccess; }

cudaError_t cudaMalloc(void **ptr, size_t bytes) {
  waitForDeviceIdle();
  return allocate(ptr, bytes);
}
cudaError_t cudaFree(void *ptr) {
  waitForDeviceIdle();
  return release(ptr);
}
cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned) {
  waitForDeviceIdle();
  return allocate(ptr, bytes);
}
cudaError_t cudaFreeHost(void *ptr) {
  waitForDeviceIdle();
  return release(ptr);
}
cudaError_t cudaMallocAsync(void **ptr, size_t bytes, cudaStream_t stream) {
  if (stream && stream->capture)
    return cudaErrorStreamCaptureUnsupported; // allocation nodes are not emulated
  return allocate(ptr, bytes);
}
cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream) {
  if (stream && stream->capture)
    return cudaErrorStreamCaptureUnsupported;
  return release(ptr);
}
cudaError_t cudaHostGetDevicePointer(void **device, void *host, unsigned flags) {
  if (!device || !host || flags != 0)
    return cudaErrorInvalidValue;
  *device = host;
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind,
                            cudaStream_t stream) {
  if (bytes && (!dst || !src))
    return cudaErrorInvalidValue;
  return enqueue(stream, [=] {
    if (bytes)
      std::memmove(dst, src, bytes);
    return cudaSuccess;
  });
}
cudaError_t cudaMemset(void *ptr, int value, size_t bytes) {
  return cudaMemsetAsync(ptr, value, bytes, nullptr);
}
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream) {
  if (bytes && !ptr)
    return cudaErrorInvalidValue;
  return enqueue(stream, [=] {
    if (bytes)
      std::memset(ptr, value, bytes);
    return cudaSuccess;
  });
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
  if (!stream || (flags & ~cudaStreamNonBlocking))
    return cudaErrorInvalidValue;
  *stream = new Stream();
  (*stream)->nonBlocking = flags & cudaStreamNonBlocking;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream)
    return cudaErrorInvalidResourceHandle;
  delete stream->capture;
  delete stream;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (stream && stream->capture)
    return cudaErrorStreamCaptureUnsupported;
  // Work ran when it was enqueued, unless another thread's still runs.
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mutex);
  s.idle.wait(lock, [&] { return stream ? stream->running == 0 : s.runningLegacy == 0; });
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (stream && stream->capture)
    return cudaErrorStreamCaptureUnsupported;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return (stream ? stream->running : s.runningLegacy) ? cudaErrorNotReady : cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  if (!event || flags != 0)
    return cudaErrorInvalidValue;
  if (stream && stream->capture)
    return cudaErrorStreamCaptureUnsupported; // event nodes are not emulated
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags) {
  if (!event || (flags & ~cudaEventDisableTiming))
    return cudaErrorInvalidValue;
  *event = new Event();
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event)
    return cudaErrorInvalidResourceHandle;
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event)
    return cudaErrorInvalidResourceHandle;
  if (stream && stream->capture)
    return cudaErrorStreamCaptureUnsupported; // event nodes are not emulated
  event->time = Clock::now();
  event->recorded = true;
  return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms)
    return cudaErrorInvalidValue;
  if (!start || !end || !start->recorded || !end->recorded)
    return cudaErrorInvalidResourceHandle;
  *ms = std::chrono::duration<float, std::milli>(end->time - start->time).count();
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value) {
  const DeviceDescription &d = describedDevice();
  if (!func || attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      static_cast<size_t>(value) + d.staticSharedPerKernel > d.sharedPerBlockOptin)
    return cudaErrorInvalidValue;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.maxDynamicShared[func] = value;
  return cudaSuccess;
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *attributes, const void *func) {
  if (!attributes || !func)
    return cudaErrorInvalidValue;
  attributes->sharedSizeBytes = describedDevice().staticSharedPerKernel;
  return cudaSuccess;
}

namespace {
size_t dynamicSharedLimit(const void *func) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.maxDynamicShared.find(func);
  return it == s.maxDynamicShared.end() ? s.device.sharedPerBlock : static_cast<size_t>(it->second);
}
} // namespace

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, const void *func,
                                                          int blockSize, size_t dynamicSharedBytes) {
  if (!blocks || !func || blockSize <= 0)
    return cudaErrorInvalidValue;
  const DeviceDescription &d = describedDevice();
  if (blockSize > d.maxThreadsPerBlock || blockSize > d.residentThreads ||
      dynamicSharedBytes > dynamicSharedLimit(func)) {
    *blocks = 0;
    return cudaSuccess;
  }
  const int warps = (blockSize + 31) / 32;
  int n = d.maxBlocksPerSm;
  n = std::min(n, d.maxThreadsPerSm / (warps * 32));
  n = std::min(n, d.registersPerSm /
                     (simt::kernelRegisters(func, d.registersPerThread) * warps * 32));
  n = std::min<int>(n, static_cast<int>(d.sharedPerSm /
                                        (dynamicSharedBytes + d.sharedReservedPerBlock)));
  *blocks = std::max(n, 0);
  return cudaSuccess;
}

namespace {
cudaError_t launchOn(const void *func, dim3 grid, dim3 block, void **args, size_t sharedBytes,
                     cudaStream_t stream, bool cooperative) {
  if (!func)
    return cudaErrorInvalidValue;
  const DeviceDescription &d = describedDevice();
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  const unsigned long long blocks = 1ull * grid.x * grid.y * grid.z;
  if (threads == 0 || threads > static_cast<unsigned>(d.maxThreadsPerBlock) || blocks == 0)
    return cudaErrorInvalidConfiguration;
  if (sharedBytes > dynamicSharedLimit(func))
    return cudaErrorInvalidValue;
  if (cooperative) {
    int perSm = 0;
    if (cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &perSm, func, static_cast<int>(threads), sharedBytes);
        err != cudaSuccess)
      return err;
    if (blocks > 1ull * perSm * d.smCount)
      return cudaErrorCooperativeLaunchTooLarge;
  }
  // Parameters are copied when the launch is enqueued, as CUDA does.
  auto kernel = static_cast<const simt::KernelHandle *>(func)->bind(args);
  simt::Dim3 g{grid.x, grid.y, grid.z}, b{block.x, block.y, block.z};
  return enqueue(stream, [kernel = std::move(kernel), g, b, sharedBytes, cooperative] {
    std::string failure = simt::launch(kernel, g, b, sharedBytes, cooperative);
    if (failure.empty())
      return cudaSuccess;
    launchFailure = std::move(failure);
    return cudaErrorLaunchFailure;
  });
}
} // namespace

cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
                             size_t sharedBytes, cudaStream_t stream) {
  return launchOn(func, grid, block, args, sharedBytes, stream, /*cooperative=*/false);
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args) {
  if (!config || (config->numAttrs && !config->attrs))
    return cudaErrorInvalidValue;
  bool cooperative = false;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id != cudaLaunchAttributeCooperative)
      return cudaErrorInvalidValue; // no other attribute is emulated
    cooperative = config->attrs[i].val.cooperative != 0;
  }
  return launchOn(func, config->gridDim, config->blockDim, args, config->dynamicSmemBytes,
                  config->stream, cooperative);
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  if (!stream || stream->capture)
    return cudaErrorInvalidValue; // the legacy stream cannot be captured
  stream->capture = new Graph();
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
  if (!stream || !graph || !stream->capture)
    return cudaErrorInvalidValue;
  *graph = stream->capture;
  stream->capture = nullptr;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long) {
  if (!exec || !graph)
    return cudaErrorInvalidValue;
  *exec = new Graph(*graph);
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec)
    return cudaErrorInvalidResourceHandle;
  return enqueue(stream, [exec] {
    for (const Operation &op : exec->nodes)
      if (cudaError_t err = op(); err != cudaSuccess)
        return err;
    return cudaSuccess;
  });
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *ptr) {
  if (!handle || !ptr)
    return cudaErrorInvalidValue;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto found = s.allocations.find(ptr);
  if (found == s.allocations.end())
    return cudaErrorInvalidValue; // not the base of a cudaMalloc allocation
  struct stat st {};
  if (fstat(found->second.fd, &st) != 0)
    return cudaErrorInvalidValue;
  IpcHandle h{IpcMagic, static_cast<int32_t>(getpid()), found->second.fd, 0,
              found->second.mapped, static_cast<uint64_t>(st.st_ino),
              static_cast<uint64_t>(st.st_dev)};
  std::memset(handle, 0, sizeof *handle);
  std::memcpy(handle->reserved, &h, sizeof h);
  return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void **ptr, cudaIpcMemHandle_t handle, unsigned flags) {
  if (!ptr || flags != cudaIpcMemLazyEnablePeerAccess)
    return cudaErrorInvalidValue;
  IpcHandle h;
  std::memcpy(&h, handle.reserved, sizeof h);
  if (h.magic != IpcMagic || h.bytes == 0)
    return cudaErrorInvalidResourceHandle;
  // As CUDA: a process does not open its own handles.
  if (h.pid == getpid())
    return cudaErrorInvalidContext;
  const std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return cudaErrorInvalidResourceHandle; // the exporter is gone (or freed it)
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_ino) != h.inode ||
      static_cast<uint64_t>(st.st_dev) != h.device ||
      static_cast<uint64_t>(st.st_size) < h.bytes) {
    ::close(fd);
    return cudaErrorInvalidResourceHandle;
  }
  void *p = mmap(nullptr, h.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED)
    return cudaErrorMemoryAllocation;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.opened[p] = h.bytes;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void *ptr) {
  State &s = state();
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto found = s.opened.find(ptr);
    if (found == s.opened.end())
      return cudaErrorInvalidValue;
    bytes = found->second;
    s.opened.erase(found);
  }
  munmap(ptr, bytes);
  return cudaSuccess;
}

void describeDevice(const DeviceDescription &description) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.device = description;
}
const DeviceDescription &describedDevice() { return state().device; }

std::string lastLaunchFailure() { return launchFailure; }

} // namespace coll::interp::cuda::rt
