//===- Runtime.h - The CUDA runtime calls, on the CPU -----------*- C++ -*-===//
//
// The few CUDA runtime API calls the backend's host side and its tests make,
// with CUDA's names, types and error codes, implemented on the CPU: device
// memory is shared host memory (so that CUDA IPC works between processes), a
// launch runs the kernel on the SIMT launcher (Simt.h) before returning,
// streams execute their work in order as it is enqueued (so every
// synchronisation is immediate), events record the time, and a stream in
// capture mode records launches, copies and sets into a graph that
// cudaGraphLaunch replays in order.
//
// The device is described, not measured: DeviceDescription gives the SM
// count, the block size limit and the per-SM limits the occupancy query
// computes with (the defaults are an H100's, except that blocks have at most
// 64 threads, to keep the CPU fast). Only lib/CudaRuntime.h includes this file;
// everything lives in coll::interp::cuda::rt so that the real runtime can be
// linked into the same program.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CUDA_EMU_RUNTIME_H
#define COLL_INTERPRETER_CUDA_EMU_RUNTIME_H

#include <cstddef>
#include <string>
#include <vector>

namespace coll::interp::cuda::rt {

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidContext = 201,
  cudaErrorMapBufferObjectFailed = 205,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorPeerAccessUnsupported = 217,
  cudaErrorPeerAccessAlreadyEnabled = 704,
  cudaErrorHostMemoryAlreadyRegistered = 712,
  cudaErrorHostMemoryNotRegistered = 713,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorLaunchFailure = 719,
  cudaErrorCooperativeLaunchTooLarge = 720,
  cudaErrorStreamCaptureUnsupported = 900,
};

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x = 1, unsigned y = 1, unsigned z = 1) : x(x), y(y), z(z) {}
};

struct Stream;
struct Event;
struct Graph;
using cudaStream_t = Stream *;
using cudaEvent_t = Event *;
using cudaGraph_t = Graph *;
using cudaGraphExec_t = Graph *;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
  cudaDevAttrMaxBlocksPerMultiprocessor = 106,
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
inline constexpr unsigned cudaStreamDefault = 0;
inline constexpr unsigned cudaStreamNonBlocking = 1;
inline constexpr unsigned cudaEventDefault = 0;
inline constexpr unsigned cudaEventDisableTiming = 2;
inline constexpr unsigned cudaHostAllocDefault = 0;
inline constexpr unsigned cudaHostAllocMapped = 2;
inline constexpr unsigned cudaHostRegisterPortable = 1;
inline constexpr unsigned cudaHostRegisterMapped = 2;

enum cudaLaunchAttributeID { cudaLaunchAttributeCooperative = 2 };
union cudaLaunchAttributeValue {
  int cooperative;
  char pad[64];
};
struct cudaLaunchAttribute {
  cudaLaunchAttributeID id;
  cudaLaunchAttributeValue val;
};
struct cudaLaunchConfig_t {
  dim3 gridDim;
  dim3 blockDim;
  size_t dynamicSmemBytes;
  cudaStream_t stream;
  cudaLaunchAttribute *attrs;
  unsigned numAttrs;
};

/// What cudaFuncGetAttributes reports; only the field the executor reads.
struct cudaFuncAttributes {
  size_t sharedSizeBytes; ///< static shared memory per block
};

struct cudaUUID_t {
  char bytes[16];
};

struct cudaDeviceProp {
  char name[256];
  cudaUUID_t uuid; ///< here: this process's emulated device
  int multiProcessorCount;
  int maxThreadsPerBlock;
  int maxThreadsPerMultiProcessor;
  size_t sharedMemPerBlock;
  size_t sharedMemPerMultiprocessor;
  int regsPerMultiprocessor;
};

/// CUDA IPC: device memory of one process mapped by another. The handle is
/// CUDA's 64 opaque bytes; here it names the exporter's memfd (device memory
/// is shared memory on the CPU), and the importer maps it through /proc.
struct cudaIpcMemHandle_t {
  char reserved[64];
};
inline constexpr unsigned cudaIpcMemLazyEnablePeerAccess = 1;

const char *cudaGetErrorName(cudaError_t error);
const char *cudaGetErrorString(cudaError_t error);

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *props, int device);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceSynchronize();
/// Whether `device` can map `peer`'s memory (emulatedDevices()' P2P pairs).
cudaError_t cudaDeviceCanAccessPeer(int *canAccess, int device, int peer);
/// From the current device to `peer`: cudaErrorPeerAccessUnsupported where
/// the pair has no P2P, cudaErrorPeerAccessAlreadyEnabled the second time.
cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned flags);
/// The last error of a call on this thread, reset (only peer access sets it).
cudaError_t cudaGetLastError();

cudaError_t cudaMalloc(void **ptr, size_t bytes);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned flags);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaHostGetDevicePointer(void **device, void *host, unsigned flags);
/// Pins host memory the program allocated (here: checks that it is not
/// device memory and that no registered range overlaps it); it stays the
/// host's for the scope checker.
cudaError_t cudaHostRegister(void *ptr, size_t bytes, unsigned flags);
cudaError_t cudaHostUnregister(void *ptr);
/// `ptr` must be the start of a cudaMalloc allocation. Opening a handle of
/// this same process fails (cudaErrorInvalidContext), as in CUDA. With
/// COLL_EMULATED_IPC=fail every open of a valid handle fails with
/// cudaErrorMapBufferObjectFailed: a peer GPU whose memory cannot be mapped.
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *ptr);
cudaError_t cudaIpcOpenMemHandle(void **ptr, cudaIpcMemHandle_t handle, unsigned flags);
cudaError_t cudaIpcCloseMemHandle(void *ptr);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void *ptr, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream = nullptr);

/// Implicit synchronization, as the CUDA Programming Guide describes it
/// (launches and copies run when enqueued here, but several host threads
/// can have work running at once): work on the legacy default stream (null;
/// cudaMemcpy and cudaMemset too) waits until no work of a blocking stream
/// (cudaStreamCreate, or flags cudaStreamDefault) is running, and such work
/// waits for running legacy work; a stream made with cudaStreamNonBlocking
/// waits for neither. cudaMalloc, cudaHostAlloc, cudaFree, cudaFreeHost and
/// cudaDeviceSynchronize wait until no work of any stream is running.
/// cudaMallocAsync and cudaFreeAsync are stream-ordered and wait for nothing.
cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaMallocAsync(void **ptr, size_t bytes, cudaStream_t stream);
cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
/// Work has run by the time it is enqueued, unless another thread's work on
/// the stream still runs: synchronizing waits for that, a query says
/// cudaErrorNotReady, and waiting for an event never waits.
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags);
cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);

/// As on a GPU, the dynamic shared-memory maximum may be at most the
/// opt-in limit less the kernel's static shared memory.
cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value);
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *attributes, const void *func);
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, const void *func,
                                                          int blockSize, size_t dynamicSharedBytes);
/// Blocks of an ordinary launch run as resources free up (here: a few at a
/// time); a cooperative one runs with every block co-resident, and is
/// refused (cudaErrorCooperativeLaunchTooLarge) when the occupancy query says
/// they do not all fit.
cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
                             size_t sharedBytes, cudaStream_t stream);
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args);

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

/// The emulated device's limits: by default 16 SMs of an H100. A kernel's
/// registers per thread are what its build's launch bound lets ptxas use
/// (device/Kernel.cuh describes each: 128 for the wide build, 64 for the
/// narrow; `registersPerThread` for a kernel never described), so the
/// occupancy query gives what the register file allows. `residentThreads`
/// is the CPU's own limit: the occupancy query finds no room for larger
/// blocks, so the executor's automatic block size is 64 threads here (the
/// wide build up to 128 tbs, the narrow one up to 256), and 32 for plans of
/// more than 256 tbs, up to 512 (a larger explicit size is refused as on a
/// GPU where it does not fit). Every GPU thread is a fiber with a stack, so
/// 16 SMs keep launches within what the CPU holds.
struct DeviceDescription {
  std::string name = "CPU emulation (16 SMs of an H100, blocks of at most 64 threads)";
  int smCount = 16;
  int maxThreadsPerBlock = 1024;
  int residentThreads = 64;
  int maxThreadsPerSm = 2048;
  int maxBlocksPerSm = 32;
  int registersPerSm = 65536;
  int registersPerThread = 128;
  size_t sharedPerSm = 228 << 10;
  size_t sharedPerBlock = 48 << 10;       ///< without the opt-in attribute
  size_t sharedPerBlockOptin = 227 << 10; ///< the most cudaFuncSetAttribute allows
  size_t sharedReservedPerBlock = 1 << 10;
  /// Static shared memory of every kernel: what ptxas reports for the
  /// collective kernels (resources.expected), which are the ones that ask for
  /// dynamic shared memory.
  size_t staticSharedPerKernel = 32;
};
/// The emulated GPUs (docs/CUDA.md, "Emulated devices"). By default a
/// process has one GPU of its own (device 0, its UUID made of the pid), as
/// the emulation always had. With `shared`, the machine has `count` GPUs
/// that every process sees alike: GPU k has the same UUID everywhere, so
/// ranks of several processes can share one, and allocations of GPU k in
/// any process belong to the same device. `p2p[a][b]`: whether GPU a can
/// map GPU b's memory (cudaDeviceCanAccessPeer).
///
/// The environment configures it when the process first asks:
/// COLL_EMULATED_GPUS=N makes N shared GPUs; COLL_EMULATED_GPU=k makes k the
/// first current device of every thread (as CUDA_VISIBLE_DEVICES picks one;
/// it implies shared GPUs, at least k + 1); COLL_EMULATED_P2P is "on" (every
/// pair, the default), "off" (none) or pairs that have it, "0-1,2-3". (The
/// runtime's COLL_EMULATED_DEVICE=1 chooses the emulation as a
/// communicator's device; these place the ranks of a job on its GPUs.)
struct EmulatedDevices {
  int count = 1;
  bool shared = false;
  int first = 0; ///< every thread's current device until cudaSetDevice
  std::vector<std::vector<bool>> p2p{{true}};
};
/// Parses COLL_EMULATED_P2P's syntax for `count` devices; "" is "on".
/// Returns false (and leaves `p2p` alone) on anything else.
bool parsePeerPairs(const std::string &text, int count, std::vector<std::vector<bool>> &p2p);
/// The configuration (from the environment, the first time).
const EmulatedDevices &emulatedDevices();
/// Replaces it (tests); no allocation or executor may be live. The calling
/// thread's current device becomes `devices.first`, other threads' too the
/// next time they ask.
void configureEmulatedDevices(const EmulatedDevices &devices);

/// The description every later call uses (for tests of the occupancy check).
void describeDevice(const DeviceDescription &description);
const DeviceDescription &describedDevice();
/// Why the last failed launch on this thread failed.
std::string lastLaunchFailure();

} // namespace coll::interp::cuda::rt

#endif // COLL_INTERPRETER_CUDA_EMU_RUNTIME_H
