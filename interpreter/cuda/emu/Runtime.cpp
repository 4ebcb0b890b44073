//===- Runtime.cpp - The CUDA runtime calls, on the CPU -------------------===//

#include "Runtime.h"

#include "Simt.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <mutex>
#include <shared_mutex>
#include <sstream>
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
  uint64_t owner = 0; ///< the device that owns it (deviceKey), or HostOwner
};

/// Who owns memory, for the scope checker: an emulated GPU's key or the host.
constexpr uint64_t HostOwner = ~0ull;
/// Keys of shared GPUs (EmulatedDevices::shared): the same in every process.
constexpr uint64_t SharedKey = 1ull << 62;

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

/// COLL_EMULATED_SMS=N (1 to 1024): the emulated GPU's SM count, so that
/// tests can make a launch that does not fit (the executor's residency
/// check) without a real GPU's limits.
DeviceDescription describedFromEnvironment() {
  DeviceDescription d;
  if (const char *v = std::getenv("COLL_EMULATED_SMS"); v && *v) {
    char *end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end || n < 1 || n > 1024)
      std::fprintf(stderr, "coll (CUDA emulation): COLL_EMULATED_SMS=%s is not a number from 1 "
                           "to 1024; ignored\n", v);
    else {
      d.smCount = static_cast<int>(n);
      d.name = "CPU emulation (" + std::to_string(n) + " SMs, COLL_EMULATED_SMS, blocks of at "
                                                       "most 64 threads)";
    }
  }
  return d;
}

State &state() {
  static State s;
  static const bool described = (s.device = describedFromEnvironment(), true);
  (void)described;
  return s;
}

//===----------------------------------------------------------------------===//
// Emulated devices and who owns memory
//===----------------------------------------------------------------------===//

std::mutex devicesMutex;
EmulatedDevices *configured = nullptr; ///< devicesMutex
/// Bumped by configureEmulatedDevices: a thread whose current device was
/// chosen under an older configuration starts again from `first`.
std::atomic<uint64_t> devicesEpoch{1};
thread_local int currentDevice = -1;
thread_local uint64_t currentEpoch = 0;

EmulatedDevices fromEnvironment() {
  EmulatedDevices d;
  auto number = [](const char *name, int &out) {
    const char *v = std::getenv(name);
    if (!v || !*v)
      return false;
    char *end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (*end || n < 0 || n > 64) {
      std::fprintf(stderr, "coll (CUDA emulation): %s=%s is not a number from 0 to 64; ignored\n",
                   name, v);
      return false;
    }
    out = static_cast<int>(n);
    return true;
  };
  int count = 0, first = 0;
  const bool haveCount = number("COLL_EMULATED_GPUS", count) && count > 0;
  const bool haveFirst = number("COLL_EMULATED_GPU", first);
  if (haveCount || haveFirst) {
    d.shared = true;
    d.count = std::max(haveCount ? count : 1, haveFirst ? first + 1 : 1);
    d.first = haveFirst ? first : 0;
  }
  d.p2p.assign(d.count, std::vector<bool>(d.count, true));
  if (const char *v = std::getenv("COLL_EMULATED_P2P"); v && !parsePeerPairs(v, d.count, d.p2p))
    std::fprintf(stderr,
                 "coll (CUDA emulation): COLL_EMULATED_P2P=%s is not on, off or pairs like "
                 "0-1,2-3 of devices below %d; every pair has P2P\n",
                 v, d.count);
  return d;
}

const EmulatedDevices &devices() {
  std::lock_guard<std::mutex> lock(devicesMutex);
  if (!configured)
    configured = new EmulatedDevices(fromEnvironment());
  return *configured;
}

/// The calling thread's current device.
int current() {
  const uint64_t epoch = devicesEpoch.load(std::memory_order_acquire);
  if (currentDevice < 0 || currentEpoch != epoch) {
    currentDevice = devices().first;
    currentEpoch = epoch;
  }
  return currentDevice;
}

uint64_t deviceKey(int device) {
  if (devices().shared)
    return SharedKey | static_cast<uint64_t>(device);
  return (static_cast<uint64_t>(getpid()) << 8) | static_cast<uint64_t>(device);
}

std::string describeOwner(uint64_t owner) {
  if (owner == HostOwner)
    return "host memory";
  if (owner & SharedKey)
    return "emulated GPU " + std::to_string(owner & 0xff);
  return "the emulated GPU of process " + std::to_string(owner >> 8);
}

bool peerReachable(uint64_t from, uint64_t to) {
  if (from == to)
    return true;
  if ((from & SharedKey) && (to & SharedKey)) {
    const EmulatedDevices &d = devices();
    const uint64_t a = from & 0xff, b = to & 0xff;
    return a < d.p2p.size() && b < d.p2p.size() && d.p2p[a][b];
  }
  return true; // GPUs of processes' own: CUDA IPC maps them
}

/// Address ranges and their owners: allocations and IPC mappings.
struct Range {
  uintptr_t end;
  uint64_t owner;
};
std::shared_mutex ownersMutex;
std::map<uintptr_t, Range> &owners() {
  static std::map<uintptr_t, Range> m;
  return m;
}
void own(const void *p, size_t bytes, uint64_t owner) {
  std::unique_lock<std::shared_mutex> lock(ownersMutex);
  owners()[reinterpret_cast<uintptr_t>(p)] = Range{reinterpret_cast<uintptr_t>(p) + bytes, owner};
}
void disown(const void *p) {
  std::unique_lock<std::shared_mutex> lock(ownersMutex);
  owners().erase(reinterpret_cast<uintptr_t>(p));
}
/// Memory that no allocation of this runtime holds is the host's.
uint64_t ownerOf(const void *address) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(address);
  std::shared_lock<std::shared_mutex> lock(ownersMutex);
  auto &m = owners();
  auto it = m.upper_bound(a);
  if (it == m.begin())
    return HostOwner;
  --it;
  return a < it->second.end ? it->second.owner : HostOwner;
}

/// The scope checker's rule (Simt.h, "Scopes").
std::string scopeRule(const void *address, uint64_t device, bool sys) {
  const uint64_t owner = ownerOf(address);
  if (owner == device)
    return {};
  std::ostringstream why;
  why << "the word at " << address << " is " << describeOwner(owner) << " and the kernel runs on "
      << describeOwner(device);
  if (!sys) {
    why << ": a .gpu access does not synchronise with the threads of another GPU or the host "
           "(the connection needs .sys)";
    return why.str();
  }
  if (owner != HostOwner && !peerReachable(device, owner)) {
    why << ", which has no peer access to it (P2P off)";
    return why.str();
  }
  return {};
}

const bool scopeRuleInstalled = [] {
  simt::setScopeRule(&scopeRule);
  return true;
}();

thread_local std::string launchFailure;

/// A planted fault: COLL_EMULATED_GPU_LOST=1, read at every kernel launch
/// (a test sets it mid-run), loses this process's emulated GPU from that
/// launch on, as a GPU that falls off the bus or is reset under a running
/// job. That launch and every later use of a device (stream work,
/// synchronization, allocation) fail with cudaErrorLaunchFailure, sticky as
/// CUDA's errors after a device fault are. Frees still return the memory,
/// so that a test leaks nothing of the machine's.
std::atomic<bool> gpuLost{false};

bool lostNow() {
  if (!gpuLost.load(std::memory_order_acquire))
    return false;
  launchFailure = "the emulated GPU was lost (COLL_EMULATED_GPU_LOST=1): every use of it fails";
  return true;
}

size_t pageBytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

/// Device memory is shared memory (a memfd), so that cudaIpcGetMemHandle can
/// hand it to another process as CUDA IPC does; page aligned (cudaMalloc
/// promises 256 bytes) between two inaccessible guard pages, and the slack
/// after the requested size poisoned for AddressSanitizer, so out-of-bounds
/// accesses by a kernel are still caught.
cudaError_t allocate(void **ptr, size_t bytes, uint64_t owner) {
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
  s.allocations[p] = Allocation{bytes, body, fd, owner};
  own(p, body, owner);
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
  disown(ptr);
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
  uint64_t owner; ///< the exporter's device (deviceKey)
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

cudaError_t cudaGetDeviceCount(int *count) {
  if (!count)
    return cudaErrorInvalidValue;
  *count = devices().count;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device) {
  if (!device)
    return cudaErrorInvalidValue;
  *device = current();
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= devices().count)
    return cudaErrorInvalidDevice;
  current();
  currentDevice = device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *props, int device) {
  if (!props)
    return cudaErrorInvalidValue;
  if (device < 0 || device >= devices().count)
    return cudaErrorInvalidDevice;
  const DeviceDescription &d = describedDevice();
  *props = cudaDeviceProp{};
  std::strncpy(props->name, d.name.c_str(), sizeof props->name - 1);
  if (devices().shared) {
    // GPU k of the machine, the same in every process.
    std::memcpy(props->uuid.bytes, "coll-emulated-gpu", 15);
    props->uuid.bytes[15] = static_cast<char>(device);
  } else {
    // One emulated device per process: the pid and the boot time tell it apart.
    const uint64_t pid = static_cast<uint64_t>(getpid());
    static const uint64_t born = static_cast<uint64_t>(Clock::now().time_since_epoch().count());
    std::memcpy(props->uuid.bytes, &pid, 8);
    std::memcpy(props->uuid.bytes + 8, &born, 8);
  }
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
  if (device < 0 || device >= devices().count)
    return cudaErrorInvalidDevice;
  const DeviceDescription &d = describedDevice();
  switch (attr) {
  case cudaDevAttrMaxThreadsPerBlock: *value = d.maxThreadsPerBlock; return cudaSuccess;
  case cudaDevAttrMultiProcessorCount: *value = d.smCount; return cudaSuccess;
  case cudaDevAttrMaxBlocksPerMultiprocessor: *value = d.maxBlocksPerSm; return cudaSuccess;
  case cudaDevAttrMaxSharedMemoryPerBlockOptin:
    *value = static_cast<int>(d.sharedPerBlockOptin);
    return cudaSuccess;
  }
  return cudaErrorInvalidValue;
}

cudaError_t cudaDeviceSynchronize() {
  waitForDeviceIdle();
  return lostNow() ? cudaErrorLaunchFailure : cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int *canAccess, int device, int peer) {
  const EmulatedDevices &d = devices();
  if (!canAccess)
    return cudaErrorInvalidValue;
  if (device < 0 || device >= d.count || peer < 0 || peer >= d.count)
    return cudaErrorInvalidDevice;
  *canAccess = device != peer && d.p2p[device][peer];
  return cudaSuccess;
}
namespace {
std::set<std::pair<int, int>> peersEnabled; ///< devicesMutex
thread_local cudaError_t lastError = cudaSuccess;
} // namespace
cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags) {
  const int device = current();
  int can = 0;
  if (flags != 0)
    return lastError = cudaErrorInvalidValue;
  if (cudaError_t err = cudaDeviceCanAccessPeer(&can, device, peer); err != cudaSuccess)
    return lastError = err;
  if (!can)
    return lastError = device == peer ? cudaErrorInvalidDevice : cudaErrorPeerAccessUnsupported;
  std::lock_guard<std::mutex> lock(devicesMutex);
  if (!peersEnabled.insert({device, peer}).second)
    return lastError = cudaErrorPeerAccessAlreadyEnabled;
  return cudaSuccess;
}
cudaError_t cudaGetLastError() {
  cudaError_t err = lastError;
  lastError = cudaSuccess;
  return err;
}

bool parsePeerPairs(const std::string &text, int count, std::vector<std::vector<bool>> &p2p) {
  std::vector<std::vector<bool>> m(count, std::vector<bool>(count, false));
  if (text.empty() || text == "on") {
    for (auto &row : m)
      row.assign(count, true);
  } else if (text != "off") {
    if (text.back() == ',')
      return false;
    std::stringstream in(text);
    std::string pair;
    while (std::getline(in, pair, ',')) {
      int a = -1, b = -1;
      char dash = 0, extra = 0;
      std::istringstream one(pair);
      if (!(one >> a >> dash >> b) || dash != '-' || (one >> extra) || a < 0 || b < 0 ||
          a >= count || b >= count || a == b)
        return false;
      m[a][b] = m[b][a] = true;
    }
  }
  p2p = std::move(m);
  return true;
}

const EmulatedDevices &emulatedDevices() { return devices(); }

void configureEmulatedDevices(const EmulatedDevices &d) {
  {
    std::lock_guard<std::mutex> lock(devicesMutex);
    delete configured;
    configured = new EmulatedDevices(d);
    if (configured->p2p.size() != static_cast<size_t>(d.count))
      configured->p2p.assign(d.count, std::vector<bool>(d.count, true));
    peersEnabled.clear();
  }
  devicesEpoch.fetch_add(1, std::memory_order_acq_rel);
}

cudaError_t cudaMalloc(void **ptr, size_t bytes) {
  waitForDeviceIdle();
  if (lostNow())
    return cudaErrorLaunchFailure;
  return allocate(ptr, bytes, deviceKey(current()));
}
cudaError_t cudaFree(void *ptr) {
  waitForDeviceIdle();
  return release(ptr);
}
cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned) {
  waitForDeviceIdle();
  if (lostNow())
    return cudaErrorLaunchFailure;
  return allocate(ptr, bytes, HostOwner);
}
cudaError_t cudaFreeHost(void *ptr) {
  waitForDeviceIdle();
  return release(ptr);
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
cudaError_t cudaHostGetDevicePointer(void **device, void *host, unsigned flags) {
  if (!device || !host || flags != 0)
    return cudaErrorInvalidValue;
  *device = host;
  return cudaSuccess;
}

namespace {
std::map<uintptr_t, uintptr_t> registeredHost; ///< start to end; devicesMutex
} // namespace
cudaError_t cudaHostRegister(void *ptr, size_t bytes, unsigned flags) {
  if (!ptr || !bytes || (flags & ~(cudaHostRegisterPortable | cudaHostRegisterMapped)))
    return lastError = cudaErrorInvalidValue;
  if (ownerOf(ptr) != HostOwner)
    return lastError = cudaErrorInvalidValue; // device memory
  const uintptr_t a = reinterpret_cast<uintptr_t>(ptr), e = a + bytes;
  std::lock_guard<std::mutex> lock(devicesMutex);
  auto next = registeredHost.lower_bound(a);
  if ((next != registeredHost.end() && next->first < e) ||
      (next != registeredHost.begin() && std::prev(next)->second > a))
    return lastError = cudaErrorHostMemoryAlreadyRegistered;
  registeredHost[a] = e;
  return cudaSuccess;
}
cudaError_t cudaHostUnregister(void *ptr) {
  std::lock_guard<std::mutex> lock(devicesMutex);
  if (registeredHost.erase(reinterpret_cast<uintptr_t>(ptr)) == 0)
    return lastError = cudaErrorHostMemoryNotRegistered;
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
  IpcHandle h{IpcMagic,
              static_cast<int32_t>(getpid()),
              found->second.fd,
              0,
              found->second.mapped,
              static_cast<uint64_t>(st.st_ino),
              static_cast<uint64_t>(st.st_dev),
              found->second.owner};
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
  // A planted fault: the peer's memory cannot be mapped.
  if (const char *v = std::getenv("COLL_EMULATED_IPC"); v && std::strcmp(v, "fail") == 0)
    return cudaErrorMapBufferObjectFailed;
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
  // As CUDA: another GPU's memory needs peer access to that GPU.
  if (!peerReachable(deviceKey(current()), h.owner)) {
    ::close(fd);
    return cudaErrorPeerAccessUnsupported;
  }
  void *p = mmap(nullptr, h.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED)
    return cudaErrorMemoryAllocation;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.opened[p] = h.bytes;
  own(p, h.bytes, h.owner);
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
  disown(ptr);
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
