//===- Device.h - Collectives on a GPU or on its CPU emulation ---*- C++ -*-===//
//
// The runtime's device path (docs/RUNTIME.md "Device buffers"): one rank's
// CUDA executor per plan, behind one interface whether it runs on a GPU or
// on the CPU emulation of one.
//
// The GPU backend lives in libcoll_cuda.so, a plugin loaded with dlopen the
// first time a call passes device memory, so that libcoll.so itself never
// links the CUDA runtime: a CPU job loads no CUDA at all. The emulated
// backend (COLL_EMULATED_DEVICE) is linked into libcoll.so.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_RUNTIME_DEVICE_H
#define COLL_RUNTIME_DEVICE_H

#include "coll/interpreter/CudaExecutor.h"

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
/// loaded CUDA; nothing otherwise.
void synchronizeCudaStream(void *stream);

/// The PCI bus id ("0000:06:00.0", lower case) of CUDA device `ordinal`, or
/// with -1 of the calling thread's current CUDA device; empty (and `why`)
/// when the process has not loaded the CUDA driver or has no such device.
std::string pciBusIdOfDevice(int ordinal, std::string &why);

/// One rank's executor of one plan (interp::CudaExecutor with
/// CudaOptions::rank). Every call keeps the caller's CUDA device current.
class DeviceRunner {
public:
  virtual ~DeviceRunner();
  virtual interp::ConnectionExport exportConnections() = 0;
  virtual llvm::Error importConnections(const std::vector<interp::ConnectionExport> &all) = 0;
  virtual llvm::Error prepare(const interp::CallArgs &args) = 0;
  /// Enqueues after `stream`'s work: the copies `before`, the kernel, the
  /// copies `after` (CudaExecutor::enqueue). On the emulation this returns
  /// when the kernel has ended.
  virtual llvm::Error enqueue(void *stream, llvm::ArrayRef<interp::DeviceCopy> before,
                              llvm::ArrayRef<interp::DeviceCopy> after) = 0;
  /// Makes `stream` wait for the last enqueue().
  virtual llvm::Error join(void *stream) = 0;
  /// Whether everything enqueued has ended (`wait`: waits); a watchdog
  /// stop is an error naming where the kernel waited.
  virtual llvm::Expected<bool> poll(bool wait) = 0;
  /// Device memory ordered with enqueue()'s work (buffer 0 or 1).
  virtual llvm::Expected<void *> temporary(int which, uint64_t bytes) = 0;
  /// Stops the kernels in flight and waits for them (CudaExecutor::abort).
  virtual llvm::Error abort() = 0;
  /// CudaExecutor::traceEnqueued and collectEnqueued (COLL_TRACE).
  virtual llvm::Error traceEnqueued(bool on) = 0;
  virtual llvm::Error collectTrace(interp::Timeline &timeline, interp::DataType type,
                                   std::chrono::steady_clock::time_point t0,
                                   std::chrono::steady_clock::time_point t1) = 0;
};

class DeviceBackend {
public:
  virtual ~DeviceBackend();
  /// This rank's executor of `plan` (options.rank set) on CUDA device
  /// `device` (ignored by the emulation, which has one device).
  virtual llvm::Expected<std::unique_ptr<DeviceRunner>>
  create(const interp::Plan &plan, const interp::CudaOptions &options, int device) = 0;
  virtual bool emulated() const = 0;
  /// For logs: "the CPU emulation of a GPU", "NVIDIA H100 80GB HBM3 (CUDA device 0)".
  virtual std::string describe(int device) = 0;
};

/// The CPU emulation linked into this library; an error in builds without it.
llvm::Expected<DeviceBackend *> emulatedBackend();
/// The GPU, through libcoll_cuda.so: COLL_CUDA_PLUGIN names the file, else
/// it is looked for beside libcoll.so, then on the loader's path. Loaded
/// once; the error says what was tried and why it failed. For tests,
/// COLL_CUDA_PLUGIN=emulated is emulatedBackend(): "device memory" of a
/// stand-in CUDA runtime (host memory) served by the emulation.
llvm::Expected<DeviceBackend *> gpuBackend();

} // namespace coll::rt

#endif // COLL_RUNTIME_DEVICE_H
