//===- Memory.cpp - Emulated devices and memory, on the CPU ---------------===//
//
// The devices of the emulated CUDA runtime (how many, which is current on a
// thread, P2P between them), its memory (device allocations as shared
// memory between guard pages, pinned and registered host memory, and who
// owns each address, for the scope checker of Simt.h) and CUDA IPC between
// processes. What Runtime.cpp shares with it is in RuntimeState.h.
//
//===----------------------------------------------------------------------===//

#include "RuntimeState.h"

#include "Simt.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <shared_mutex>
#include <sstream>
#include <vector>

#include <fcntl.h>
#include <sanitizer/asan_interface.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace coll::interp::cuda::rt {

namespace detail {

namespace {

using Clock = std::chrono::steady_clock;

/// Keys of shared GPUs (EmulatedDevices::shared): the same in every process.
constexpr uint64_t SharedKey = 1ull << 62;

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

} // namespace

State &state() {
  static State s;
  static const bool described = (s.device = describedFromEnvironment(), true);
  (void)described;
  return s;
}

namespace {

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

} // namespace

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

namespace {

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

} // namespace

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

namespace {
size_t pageBytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

} // namespace

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
namespace {

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

} // namespace detail

using namespace detail;

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

} // namespace coll::interp::cuda::rt
