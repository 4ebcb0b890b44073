//===- Device.h - Collectives on a GPU or on its CPU emulation ---*- C++ -*-===//
//
// The runtime's device path (docs/RUNTIME.md "Device buffers"): which memory
// a call's buffers are, and the device backend that runs one rank's
// executor per plan (interp::DeviceBackend), on a GPU or on the CPU
// emulation of one.
//
// The GPU backend lives in libcoll_cuda.so, a plugin loaded with dlopen the
// first time a call passes device memory, so that libcoll.so itself never
// links the CUDA runtime: a CPU job loads no CUDA at all. The emulated
// backend (COLL_EMULATED_DEVICE) is linked into libcoll.so.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_RUNTIME_DEVICE_H
#define COLL_RUNTIME_DEVICE_H

#include "coll/interpreter/DeviceExecutor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace coll::rt {

/// The CUDA device ordinal of the memory at `p`; -1 for host memory (pinned
/// host memory included) and whenever the process has not loaded the CUDA
/// driver: a program that never touched CUDA has no device memory, and
/// asking would load it. Managed memory counts as device memory.
int deviceOfPointer(const void *p);
/// deviceOfPointer of both (a call's sendbuff and recvbuff), with one look
/// at what the loader has loaded where there are two.
std::pair<int, int> devicesOfPointers(const void *a, const void *b);

/// The calling thread's CUDA device (the runtime's cudaGetDevice where a
/// shared CUDA runtime is loaded, else the driver's current context), or -1
/// with `why`; never loads CUDA. About 20 ns when CUDA is not loaded.
int currentCudaDevice(std::string &why);
/// Waits for the work on `stream` (a cudaStream_t) where the process has
/// loaded CUDA; nothing otherwise. Returns CUDA's result (0: success), e.g.
/// an error for a stream being captured into a CUDA graph.
int synchronizeCudaStream(void *stream);
/// cudaMemcpy(dst, src, bytes, cudaMemcpyDefault) of the CUDA runtime the
/// process has loaded (else the driver's cuMemcpy): synchronous, either
/// side host or device memory. Returns CUDA's result, -1 where the process
/// has not loaded CUDA.
int copyCudaMemory(void *dst, const void *src, size_t bytes);

/// The PCI bus id ("0000:06:00.0", lower case) of CUDA device `ordinal`, or
/// with -1 of the calling thread's current CUDA device; empty (and `why`)
/// when the process has not loaded the CUDA driver or has no such device.
std::string pciBusIdOfDevice(int ordinal, std::string &why);

/// The CPU emulation linked into this library (interp::emulatedBackend());
/// an error in builds without it.
llvm::Expected<interp::DeviceBackend *> emulatedBackend();
/// The GPU, through libcoll_cuda.so (interp::loadDeviceBackend):
/// COLL_CUDA_PLUGIN names the file, else it is looked for beside
/// libcoll.so, then on the loader's path; usable only where the CUDA
/// runtime finds a device. Loaded once; the error says what was tried and
/// why it failed. For tests, COLL_CUDA_PLUGIN=emulated is emulatedBackend():
/// "device memory" of a stand-in CUDA runtime (host memory) served by the
/// emulation.
llvm::Expected<interp::DeviceBackend *> gpuBackend();

} // namespace coll::rt

#endif // COLL_RUNTIME_DEVICE_H
