//===- Device.h - The host side's helpers for the device --------*- C++ -*-===//
//
// What every file of the host side uses to talk to the device, beside
// COLL_CUDA_TRY (CudaError.h): errors in words, allocations that grow,
// uploads, timing work on a stream with events, and the current device.
// Plain C++ over the CUDA runtime API (CudaRuntime.h), so that the same code
// runs against a GPU (CollCuda) and against the CPU emulation (CollCudaEmu).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CUDA_LIB_DEVICE_H
#define COLL_INTERPRETER_CUDA_LIB_DEVICE_H

#include "CudaError.h"

#include "coll/interpreter/DeviceExecutor.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace coll::interp::cuda {

/// An error with `message` as its text.
llvm::Error fail(const llvm::Twine &message);

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

/// The calling thread's current device: ordinal, name, SMs, UUID.
llvm::Expected<CudaDeviceInfo> currentCudaDevice();

/// Makes `device` current for a scope and gives the caller's back (a GPU;
/// the emulation has one device). -1: the current one.
class DeviceScope {
public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope &) = delete;
  DeviceScope &operator=(const DeviceScope &) = delete;
  /// Why `device` could not be made current, if it could not.
  llvm::Error check(int device) const;

private:
  int saved = -1;
  cudaError_t status = cudaSuccess;
};

/// DeviceBackend::timeReference (TimeReference.cpp): collbench's
/// one-launch references, checked once, then timed.
llvm::Expected<std::vector<double>> runReference(const ReferenceRequest &q);

} // namespace coll::interp::cuda

#endif // COLL_INTERPRETER_CUDA_LIB_DEVICE_H
