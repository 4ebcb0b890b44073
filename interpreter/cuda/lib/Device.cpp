//===- Device.cpp - The host side's helpers for the device ----------------===//

#include "Device.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <cstring>

namespace coll::interp::cuda {

llvm::Error cudaFailure(cudaError_t error, const char *expr, const char *file, int line) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 llvm::formatv("CUDA error {0} ({1}) in {2} at {3}:{4}",
                                               cudaGetErrorName(error), cudaGetErrorString(error),
                                               expr, llvm::sys::path::filename(file), line));
}

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

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

DeviceScope::DeviceScope(int device) {
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

DeviceScope::~DeviceScope() {
  if (saved >= 0)
    cudaSetDevice(saved);
}

llvm::Error DeviceScope::check(int device) const {
  if (status == cudaSuccess)
    return llvm::Error::success();
  return fail(llvm::formatv("cannot use CUDA device {0}: {1} ({2})", device,
                            cudaGetErrorName(status), cudaGetErrorString(status)));
}

} // namespace coll::interp::cuda
