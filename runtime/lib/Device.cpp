//===- Device.cpp - Collectives on a GPU or on its CPU emulation ----------===//

#include "coll/runtime/Device.h"

#include "coll/cuda/Backend.h"


#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <dlfcn.h>
#include <link.h>

namespace coll::rt {

namespace {

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

} // namespace

//===----------------------------------------------------------------------===//
// Which memory a pointer is
//===----------------------------------------------------------------------===//

namespace {

/// How many objects the dynamic loader has loaded so far (dl_iterate_phdr's
/// dlpi_adds): about 20 ns to read, and it changes when a program loads
/// CUDA, which a dlopen(RTLD_NOLOAD) per call (16 us) would notice too late
/// or too dearly.
unsigned long long loaderAdds() {
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t size, void *data) {
        if (size >= offsetof(dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
          *static_cast<unsigned long long *>(data) = info->dlpi_adds;
        return 1;
      },
      &adds);
  return adds;
}

using DriverAttributes = int (*)(unsigned, int *, void **, unsigned long long);
using RuntimeAttributes = int (*)(void *, const void *);
using GetDevice = int (*)(int *);
using StreamSynchronize = int (*)(void *);
using RuntimeMemcpy = int (*)(void *, const void *, size_t, int);
using DriverMemcpy = int (*)(unsigned long long, unsigned long long, size_t);

/// The CUDA entry points the drop-ins need (telling memory apart, the
/// calling thread's device, waiting for a stream), from the driver or a
/// runtime the process has loaded; looked up again whenever the loader has
/// loaded something since: a program may load CUDA after its first call on
/// host memory.
struct PointerQueries {
  std::mutex mutex;
  std::atomic<unsigned long long> seen{~0ull};
  std::atomic<DriverAttributes> driver{nullptr};
  std::atomic<RuntimeAttributes> runtime{nullptr};
  std::atomic<GetDevice> driverDevice{nullptr}, runtimeDevice{nullptr};
  std::atomic<StreamSynchronize> driverSync{nullptr}, runtimeSync{nullptr};
  std::atomic<RuntimeMemcpy> runtimeCopy{nullptr};
  std::atomic<DriverMemcpy> driverCopy{nullptr};

  void refresh() {
    if (driver.load(std::memory_order_acquire))
      return; // the driver, once loaded, stays
    const unsigned long long adds = loaderAdds();
    if (adds == seen.load(std::memory_order_acquire))
      return;
    std::lock_guard<std::mutex> lock(mutex);
    if (adds == seen.load(std::memory_order_relaxed))
      return;
    // The driver API: every CUDA program has libcuda.so.1 loaded, whether
    // it links the CUDA runtime statically (nvcc's default) or not.
    if (void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
      // cuCtxGetDevice: the device of the thread's current context, which
      // the runtime makes current; CUstream and cudaStream_t are one handle.
      driverDevice.store(reinterpret_cast<GetDevice>(dlsym(lib, "cuCtxGetDevice")),
                         std::memory_order_release);
      driverSync.store(reinterpret_cast<StreamSynchronize>(dlsym(lib, "cuStreamSynchronize")),
                       std::memory_order_release);
      driverCopy.store(reinterpret_cast<DriverMemcpy>(dlsym(lib, "cuMemcpy")),
                       std::memory_order_release);
      driver.store(reinterpret_cast<DriverAttributes>(dlsym(lib, "cuPointerGetAttributes")),
                   std::memory_order_release);
    }
    // A CUDA runtime loaded as a shared library (or a stand-in for one).
    if (!runtime.load(std::memory_order_relaxed))
      for (const char *name : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"})
        if (void *lib = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) {
          runtimeDevice.store(reinterpret_cast<GetDevice>(dlsym(lib, "cudaGetDevice")),
                              std::memory_order_release);
          runtimeSync.store(
              reinterpret_cast<StreamSynchronize>(dlsym(lib, "cudaStreamSynchronize")),
              std::memory_order_release);
          runtimeCopy.store(reinterpret_cast<RuntimeMemcpy>(dlsym(lib, "cudaMemcpy")),
                            std::memory_order_release);
          runtime.store(reinterpret_cast<RuntimeAttributes>(
                            dlsym(lib, "cudaPointerGetAttributes")),
                        std::memory_order_release);
          break;
        }
    seen.store(adds, std::memory_order_release);
  }
};

PointerQueries &cudaQueries() {
  static PointerQueries queries;
  queries.refresh();
  return queries;
}

} // namespace

int currentCudaDevice(std::string &why) {
  PointerQueries &q = cudaQueries();
  // The runtime's answer where it is loaded (it names device 0 before any
  // context exists); else the driver's for a statically linked runtime.
  GetDevice get = q.runtimeDevice.load(std::memory_order_acquire);
  if (!get)
    get = q.driverDevice.load(std::memory_order_acquire);
  if (!get) {
    why = "the process has not loaded CUDA";
    return -1;
  }
  int device = -1;
  if (int err = get(&device); err != 0) {
    why = "the calling thread has no CUDA device (error " + std::to_string(err) + ")";
    return -1;
  }
  return device;
}

int copyCudaMemory(void *dst, const void *src, size_t bytes) {
  PointerQueries &q = cudaQueries();
  if (RuntimeMemcpy copy = q.runtimeCopy.load(std::memory_order_acquire))
    return copy(dst, src, bytes, /*cudaMemcpyDefault=*/4);
  if (DriverMemcpy copy = q.driverCopy.load(std::memory_order_acquire))
    return copy(reinterpret_cast<unsigned long long>(dst),
                reinterpret_cast<unsigned long long>(src), bytes);
  return -1;
}

int synchronizeCudaStream(void *stream) {
  PointerQueries &q = cudaQueries();
  if (StreamSynchronize sync = q.runtimeSync.load(std::memory_order_acquire))
    return sync(stream);
  if (StreamSynchronize sync = q.driverSync.load(std::memory_order_acquire))
    return sync(stream);
  return 0;
}

namespace {

int deviceOfPointer(PointerQueries &queries, const void *p) {
  if (!p)
    return -1;
  if (DriverAttributes driver = queries.driver.load(std::memory_order_acquire)) {
    // The plural call answers host memory with zeros rather than an error
    // (which tools such as compute-sanitizer would report).
    int names[] = {2, 8, 9}; // CU_POINTER_ATTRIBUTE_MEMORY_TYPE, _IS_MANAGED, _DEVICE_ORDINAL
    unsigned type = 0;
    int managed = 0, ordinal = -1; // IS_MANAGED writes a bool into the low byte
    void *data[] = {&type, &managed, &ordinal};
    if (driver(3, names, data, reinterpret_cast<unsigned long long>(p)) != 0)
      return -1;
    constexpr unsigned TypeDevice = 2; // CU_MEMORYTYPE_DEVICE
    if (type != TypeDevice && (managed & 0xff) == 0)
      return -1;
    return ordinal >= 0 ? ordinal : 0;
  }
  RuntimeAttributes runtime = queries.runtime.load(std::memory_order_acquire);
  if (!runtime)
    return -1;
  struct {
    int type;
    int device;
    void *devicePointer;
    void *hostPointer;
  } attributes{};
  if (runtime(&attributes, p) != 0)
    return -1;
  // cudaMemoryTypeDevice, cudaMemoryTypeManaged
  return attributes.type == 2 || attributes.type == 3 ? std::max(attributes.device, 0) : -1;
}

} // namespace

int deviceOfPointer(const void *p) { return p ? deviceOfPointer(cudaQueries(), p) : -1; }

std::pair<int, int> devicesOfPointers(const void *a, const void *b) {
  if (!a && !b)
    return {-1, -1};
  PointerQueries &queries = cudaQueries();
  return {deviceOfPointer(queries, a), deviceOfPointer(queries, b)};
}

std::string pciBusIdOfDevice(int ordinal, std::string &why) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) {
    why = "the process has not loaded CUDA";
    return {};
  }
  auto ctxDevice = reinterpret_cast<int (*)(int *)>(dlsym(lib, "cuCtxGetDevice"));
  auto deviceGet = reinterpret_cast<int (*)(int *, int)>(dlsym(lib, "cuDeviceGet"));
  auto busId = reinterpret_cast<int (*)(char *, int, int)>(dlsym(lib, "cuDeviceGetPCIBusId"));
  if (!ctxDevice || !deviceGet || !busId) {
    why = "the CUDA driver lacks cuDeviceGetPCIBusId";
    return {};
  }
  int device = 0;
  if (ordinal < 0) {
    if (ctxDevice(&device) != 0) {
      why = "the thread has no current CUDA device";
      return {};
    }
  } else if (deviceGet(&device, ordinal) != 0) {
    why = llvm::formatv("there is no CUDA device {0}", ordinal).str();
    return {};
  }
  char text[32] = {};
  if (busId(text, sizeof text, device) != 0) {
    why = "cuDeviceGetPCIBusId failed";
    return {};
  }
  return llvm::StringRef(text).lower();
}

//===----------------------------------------------------------------------===//
// The backends
//===----------------------------------------------------------------------===//

llvm::Expected<interp::DeviceBackend *> emulatedBackend() {
#if COLL_RUNTIME_HAVE_EMU
  return &interp::emulatedBackend();
#else
  return fail("this libcoll was built without the CUDA emulation (COLL_ENABLE_CUDA_EMU=OFF)");
#endif
}

namespace {

/// Where libcoll.so (this code) was loaded from.
std::string thisLibraryDir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void *>(&deviceOfPointer), &info) == 0 || !info.dli_fname)
    return {};
  return llvm::sys::path::parent_path(info.dli_fname).str();
}

llvm::Expected<interp::DeviceBackend *> loadGpuBackend() {
  std::vector<std::string> candidates;
  if (const char *named = std::getenv("COLL_CUDA_PLUGIN"); named && *named) {
    candidates.push_back(named);
  } else {
    const std::string dir = thisLibraryDir();
    if (!dir.empty())
      candidates.push_back(dir + "/libcoll_cuda.so");
    candidates.push_back("libcoll_cuda.so");
  }
  auto backend = interp::loadDeviceBackend(candidates);
  if (!backend)
    return backend.takeError();
  // Loaded: usable only where the CUDA runtime finds a device.
  if (auto device = (*backend)->currentDevice(); !device)
    return fail("Coll's GPU backend finds no CUDA device: " + llvm::toString(device.takeError()));
  return *backend;
}

} // namespace

llvm::Expected<interp::DeviceBackend *> gpuBackend() {
  // For tests without a GPU: "device memory" of a stand-in CUDA runtime
  // (host memory it calls device memory) served by the emulation.
  if (const char *named = std::getenv("COLL_CUDA_PLUGIN");
      named && llvm::StringRef(named) == "emulated")
    return emulatedBackend();
  static std::mutex mutex;
  static interp::DeviceBackend *backend = nullptr;
  static std::string failure;
  std::lock_guard<std::mutex> lock(mutex);
  if (backend)
    return backend;
  if (!failure.empty())
    return fail(failure);
  auto loaded = loadGpuBackend();
  if (!loaded) {
    failure = llvm::toString(loaded.takeError());
    return fail(failure);
  }
  backend = *loaded;
  return backend;
}

} // namespace coll::rt
