//===- RuntimeState.h - What the emulated runtime's files share -*- C++ -*-===//
//
// The emulated CUDA runtime (Runtime.h) is two files:
//
//   Memory.cpp   devices (how many, which is current, P2P between them),
//                memory (device allocations as shared memory, pinned and
//                registered host memory, who owns each address for the
//                scope checker) and CUDA IPC between processes
//   Runtime.cpp  streams, events, graphs, copies and sets, error names,
//                kernel attributes, the occupancy query and launches
//
// This header is what they share: the process's state, the current device,
// the planted loss of the GPU, and the allocator.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CUDA_EMU_RUNTIMESTATE_H
#define COLL_INTERPRETER_CUDA_EMU_RUNTIMESTATE_H

#include "Runtime.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace coll::interp::cuda::rt::detail {

struct Allocation {
  size_t bytes = 0;   ///< as asked for
  size_t mapped = 0;  ///< whole pages
  int fd = -1;        ///< the memfd behind it
  uint64_t owner = 0; ///< the device that owns it (deviceKey), or HostOwner
};

/// Who owns memory, for the scope checker: an emulated GPU's key or the host.
constexpr uint64_t HostOwner = ~0ull;

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

/// The process's state (Memory.cpp).
State &state();

/// The calling thread's current device (Memory.cpp).
int current();
/// The key of `device` in the ownership of memory: the same in every
/// process for shared GPUs (EmulatedDevices::shared), else this process's.
uint64_t deviceKey(int device);

/// The planted loss of the GPU (COLL_EMULATED_GPU_LOST=1, Runtime.cpp's
/// launch): from then on every use of the device fails.
extern std::atomic<bool> gpuLost;
/// Whether the GPU is lost; if so, says why in launchFailure.
bool lostNow();
/// What the last failed launch on this thread said (cudaGetErrorString).
extern thread_local std::string launchFailure;

/// `bytes` of device memory (or host memory, owner HostOwner) between
/// guard pages; release() gives it back (Memory.cpp).
cudaError_t allocate(void **ptr, size_t bytes, uint64_t owner);
cudaError_t release(void *ptr);

/// Until no work runs on any stream (Runtime.cpp): cudaMalloc, cudaFree,
/// cudaDeviceSynchronize.
void waitForDeviceIdle();

} // namespace coll::interp::cuda::rt::detail

#endif // COLL_INTERPRETER_CUDA_EMU_RUNTIMESTATE_H
