//===- Runtime.cpp - The CUDA runtime calls, on the CPU -------------------===//
//
// Streams, events, graphs, copies and sets, error names, kernel attributes,
// the occupancy query and launches of the emulated CUDA runtime. Devices and
// memory are Memory.cpp's; what the two share is in RuntimeState.h.
//
//===----------------------------------------------------------------------===//

#include "RuntimeState.h"

#include "Simt.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

namespace coll::interp::cuda::rt {

namespace detail {

thread_local std::string launchFailure;

} // namespace detail

using namespace detail;

namespace {
using Clock = std::chrono::steady_clock;
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
  if (lostNow())
    return cudaErrorLaunchFailure;
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


} // namespace

namespace detail {

void waitForDeviceIdle() {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mutex);
  s.idle.wait(lock, [&] {
    return s.runningLegacy == 0 && s.runningBlocking == 0 && s.runningNonBlocking == 0;
  });
}

} // namespace detail

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
  case cudaErrorPeerAccessUnsupported: return "cudaErrorPeerAccessUnsupported";
  case cudaErrorMapBufferObjectFailed: return "cudaErrorMapBufferObjectFailed";
  case cudaErrorHostMemoryAlreadyRegistered: return "cudaErrorHostMemoryAlreadyRegistered";
  case cudaErrorHostMemoryNotRegistered: return "cudaErrorHostMemoryNotRegistered";
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
  case cudaErrorPeerAccessUnsupported: return "peer access is not supported between these two devices";
  case cudaErrorMapBufferObjectFailed: return "mapping of buffer object failed";
  case cudaErrorHostMemoryAlreadyRegistered: return "part or all of the requested memory range is already mapped";
  case cudaErrorHostMemoryNotRegistered: return "pointer does not correspond to a registered memory region";
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

cudaError_t cudaDeviceSynchronize() {
  waitForDeviceIdle();
  return lostNow() ? cudaErrorLaunchFailure : cudaSuccess;
}

cudaError_t cudaMallocAsync(void **ptr, size_t bytes, cudaStream_t stream) {
  if (stream && stream->capture)
    return cudaErrorStreamCaptureUnsupported; // allocation nodes are not emulated
  return allocate(ptr, bytes, deviceKey(current()));
}
cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream) {
  if (stream && stream->capture)
    return cudaErrorStreamCaptureUnsupported;
  return release(ptr);
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
  return lostNow() ? cudaErrorLaunchFailure : cudaSuccess;
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
  if (const char *v = std::getenv("COLL_EMULATED_GPU_LOST"); v && std::strcmp(v, "1") == 0)
    gpuLost.store(true, std::memory_order_release);
  // On the current device, as CUDA launches (a captured launch too).
  const uint64_t device = deviceKey(current());
  return enqueue(stream, [kernel = std::move(kernel), g, b, sharedBytes, cooperative, device] {
    std::string failure = simt::launch(kernel, g, b, sharedBytes, cooperative, device);
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

std::string lastLaunchFailure() { return launchFailure; }

} // namespace coll::interp::cuda::rt
