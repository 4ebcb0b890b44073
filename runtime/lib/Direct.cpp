//===- Direct.cpp - Direct steps across the processes of a host ------------===//
//
// A program with direct steps (put, get, getre, signal, wait) reads and
// writes its peers' buffers. In a job the peers are other processes, whose
// buffers are their own: each rank gets a shared area (DirectArea in
// CommImpl.h), a memfd that every rank of the host maps, and a call runs in
// it: the rank copies its sendbuff into the area's input region, the program
// runs on the area's input, output and scratch regions, and the result is
// copied out to recvbuff (adaptBuffers, Collective.cpp). Each rank publishes
// the offsets of its call's buffers in its area's header before the call
// runs; a peer reads them only after it has taken a signal of this call
// from the rank (the compiler puts a start handshake before any first
// access to a peer's memory, docs/COMPILER.md "Signals"), so the release of
// that signal makes them visible. The end handshake keeps the area the
// rank's until every peer is done with it.
//
// Peers map an area through /proc/PID/fd/FD of its owner, checked by inode,
// as the emulated device's IPC does; all of it happens at the first program
// with direct steps, collectively, and every failure is agreed, so either
// every rank has its peers' areas or none runs the program.
//
//===----------------------------------------------------------------------===//

#include "CommImpl.h"
#include "Selection.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace coll::rt {

namespace {
size_t pageBytes() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
/// Where process `pid`'s GPU allocation at `address` is mapped here (below).
llvm::Expected<std::byte *> openPeerShared(interp::DeviceBackend &backend, int32_t pid,
                                           uint64_t address, const interp::SharedHandle &handle,
                                           int gpu);
} // namespace

DirectArea::~DirectArea() {
  for (std::byte *p : mapped)
    if (p)
      munmap(p, Bytes);
  if (fd >= 0)
    ::close(fd);
}

namespace {

/// What a rank tells the others about its area.
struct AreaExport {
  int32_t pid = 0;
  int32_t fd = -1;
  uint64_t inode = 0, device = 0;
};

llvm::Error systemError(const std::string &what, int e) {
  return collError(collSystemError, what + ": " + std::strerror(e));
}

/// This rank's area: a memfd of DirectArea::Bytes, nothing allocated yet.
llvm::Error makeArea(DirectArea &area, AreaExport &mine) {
  area.fd = memfd_create("coll-direct-area", MFD_CLOEXEC);
  if (area.fd < 0)
    return systemError("memfd_create", errno);
  if (ftruncate(area.fd, static_cast<off_t>(DirectArea::Bytes)) != 0)
    return systemError("sizing the area", errno);
  struct stat st;
  if (fstat(area.fd, &st) != 0)
    return systemError("fstat", errno);
  // The header and the counters: written from the first call on.
  if (fallocate(area.fd, 0, 0, DirectArea::HeaderBytes + DirectArea::CounterBytes) != 0)
    return systemError("allocating its header and signal counters", errno);
  mine.pid = static_cast<int32_t>(getpid());
  mine.fd = area.fd;
  mine.inode = st.st_ino;
  mine.device = st.st_dev;
  return llvm::Error::success();
}

/// Maps [offset, offset + bytes) of the memfd `fd` of process `pid`
/// (checked by inode and device), read and write; `what` names it in errors.
/// The mapping starts at the page holding `offset`: its start and length
/// are for munmap, `at` is `offset`'s address.
struct PeerMapping {
  void *start = nullptr;
  size_t length = 0;
  std::byte *at = nullptr;
};
llvm::Expected<PeerMapping> mapPeerFile(int32_t pid, int32_t fd, uint64_t inode, uint64_t device,
                                        uint64_t offset, uint64_t bytes, int flags,
                                        const std::string &what) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const int mine = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (mine < 0)
    return systemError(llvm::formatv("opening {0} ({1}; ptrace rules may forbid it)", what, path),
                       errno);
  struct stat st;
  if (fstat(mine, &st) != 0 || st.st_ino != inode || st.st_dev != device) {
    ::close(mine);
    return collError(collSystemError,
                     llvm::formatv("{0}: {1} is not the file it exported", what, path));
  }
  const uint64_t page = pageBytes();
  const uint64_t start = offset / page * page;
  PeerMapping m;
  m.length = static_cast<size_t>(offset + bytes - start);
  m.start = mmap(nullptr, m.length, PROT_READ | PROT_WRITE, MAP_SHARED | flags, mine,
                 static_cast<off_t>(start));
  const int e = errno;
  ::close(mine);
  if (m.start == MAP_FAILED)
    return systemError("mapping " + what, e);
  m.at = static_cast<std::byte *>(m.start) + (offset - start);
  return m;
}

} // namespace

llvm::Error Communicator::Impl::makeDirectAreas(const std::string &what) {
  if (!directArea) {
    auto area = std::make_unique<DirectArea>();
    std::vector<AreaExport> all(static_cast<size_t>(nranks));
    llvm::Error made = makeArea(*area, all[rank]);
    if (llvm::Error err = agree(std::move(made), what + ": this rank's shared area"))
      return err;
    if (llvm::Error err = boot->allgather(all.data(), sizeof(AreaExport)))
      return collError(collRemoteError,
                       llvm::formatv("{0}: lost contact with the other ranks: {1}", what,
                                     llvm::toString(std::move(err))));
    area->mapped.assign(static_cast<size_t>(nranks), nullptr);
    llvm::Error mapped = llvm::Error::success();
    for (int r = 0; r < nranks && !mapped; ++r) {
      if (hostOf[r] != hostOf[rank])
        continue;
      const AreaExport &e = all[r];
      auto m = mapPeerFile(e.pid, e.fd, e.inode, e.device, 0, DirectArea::Bytes, MAP_NORESERVE,
                           llvm::formatv("rank {0}'s area", r));
      if (m)
        area->mapped[r] = m->at;
      else
        mapped = m.takeError();
    }
    if (llvm::Error err = agree(std::move(mapped), what + ": mapping the peers' areas"))
      return err;
    const size_t here = static_cast<size_t>(
        std::count_if(area->mapped.begin(), area->mapped.end(), [](std::byte *p) { return p; }));
    slotBases[0] = area->mapped;
    directArea = std::move(area);
    COLL_LOG(Info, Init, rank,
             llvm::formatv("{0}: this rank's shared area is mapped by the {1} ranks of its host; "
                           "calls run in it, copying their buffers in and out",
                           what, here));
  }
  return llvm::Error::success();
}

llvm::Error Communicator::Impl::ensureDeviceArea(uint64_t need, int gpu,
                                                 const std::string &what) {
  if (deviceArea && deviceArea->regionBytes >= need)
    return llvm::Error::success();
  uint64_t region = uint64_t(1) << 20;
  while (region < need)
    region *= 2;
  // The same on every rank (the need follows from the call). Every rank's
  // kernels on the areas they replace end before any is freed.
  if (deviceArea) {
    if (llvm::Error err = checkDevices(true))
      return err;
    int32_t done = 1;
    std::vector<int32_t> all(static_cast<size_t>(nranks), 0);
    all[rank] = done;
    if (llvm::Error err = boot->allgather(all.data(), sizeof(int32_t)))
      return collError(collRemoteError,
                       llvm::formatv("{0}: lost contact with the other ranks: {1}", what,
                                     llvm::toString(std::move(err))));
    deviceArea.reset();
  }
  struct AreaExport {
    int32_t pid = 0;
    int32_t gpu = -1;
    uint64_t address = 0;
    interp::SharedHandle handle{};
  };
  auto area = std::make_unique<DeviceArea>();
  area->backend = backend;
  area->gpu = gpu;
  area->regionBytes = region;
  std::vector<AreaExport> all(static_cast<size_t>(nranks));
  llvm::Error made = llvm::Error::success();
  if (auto p = backend->allocateShared(area->bytes(), gpu)) {
    area->own = static_cast<std::byte *>(*p);
    all[rank] = {static_cast<int32_t>(getpid()), gpu, reinterpret_cast<uint64_t>(area->own), {}};
    if (auto h = backend->exportShared(area->own, gpu))
      all[rank].handle = *h;
    else
      made = h.takeError();
  } else {
    made = collError(collUnhandledCudaError,
                     llvm::formatv("{0} bytes of GPU memory: {1}", area->bytes(),
                                   llvm::toString(p.takeError())));
  }
  if (llvm::Error err = agree(std::move(made), what + ": this rank's area on its GPU"))
    return err;
  if (llvm::Error err = boot->allgather(all.data(), sizeof(AreaExport)))
    return collError(collRemoteError, llvm::formatv("{0}: lost contact with the other ranks: {1}",
                                                    what, llvm::toString(std::move(err))));
  area->mapped.assign(static_cast<size_t>(nranks), nullptr);
  llvm::Error mapped = llvm::Error::success();
  for (int r = 0; r < nranks && !mapped; ++r) {
    if (hostOf[r] != hostOf[rank])
      continue;
    if (all[r].pid == all[rank].pid) {
      area->mapped[r] = reinterpret_cast<std::byte *>(all[r].address);
      continue;
    }
    auto m = openPeerShared(*backend, all[r].pid, all[r].address, all[r].handle, gpu);
    if (!m) {
      mapped = collError(collUnhandledCudaError,
                         llvm::formatv("mapping rank {0}'s area (CUDA IPC): {1}", r,
                                       llvm::toString(m.takeError())));
      break;
    }
    area->opened.push_back({all[r].pid, all[r].address});
    area->mapped[r] = *m;
  }
  if (llvm::Error err = agree(std::move(mapped), what + ": mapping the peers' areas"))
    return err;
  deviceArea = std::move(area);
  ++windowsEpoch; // the executors take the new areas at their next call
  COLL_LOG(Info, Init, rank,
           llvm::formatv("{0}: this rank's area on CUDA device {1} ({2} bytes: 3 regions of {3}) "
                         "is mapped by the ranks of its host (CUDA IPC); calls on buffers in no "
                         "window copy them in and out",
                         what, gpu, deviceArea->bytes(), region));
  return llvm::Error::success();
}

llvm::Error Communicator::Impl::giveDeviceWindows(DeviceExecutor &executor, bool onGpu) {
  std::vector<interp::PeerWindows> all(static_cast<size_t>(nranks));
  if (onGpu) {
    // Slot 0: the ranks' areas on their GPUs; then the windows of GPU
    // memory (host windows cannot hold a GPU call's buffers).
    DeviceArea &area = *deviceArea;
    for (int r = 0; r < nranks; ++r) {
      if (!area.mapped[r])
        continue;
      all[r].descriptor = area.mapped[r];
      all[r].windows.push_back({area.mapped[r], area.bytes()});
      for (const auto &w : windows)
        all[r].windows.push_back(w && w->onGpu ? interp::WindowRange{w->at[r], w->bytes}
                                               : interp::WindowRange{});
    }
    all[rank].scratch = area.own + area.regionOffset(2);
    if (llvm::Error err = executor.setPeerWindows(all))
      return err;
    deviceWindowsEpoch[&executor] = windowsEpoch;
    return llvm::Error::success();
  }
  DirectArea &area = *directArea;
  for (int r = 0; r < nranks; ++r) {
    // A rank of another host: never reached (placeConnections refuses
    // direct steps to it).
    if (!area.mapped[r])
      continue;
    all[r].descriptor = area.mapped[r] + DirectArea::DescriptorOffset;
    all[r].hostMemory = true; // memfds of the host's processes
    all[r].windows.push_back({area.mapped[r], DirectArea::Bytes});
    for (const auto &w : windows)
      all[r].windows.push_back(w && !w->onGpu ? interp::WindowRange{w->at[r], w->bytes}
                                              : interp::WindowRange{});
  }
  all[rank].scratch = area.own(rank) + DirectArea::regionOffset(2);
  if (llvm::Error err = executor.setPeerWindows(all))
    return err;
  deviceWindowsEpoch[&executor] = windowsEpoch;
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<interp::host::DirectTable>>
Communicator::Impl::directTableFor(const interp::Plan &plan) {
  const std::string what = plan.fileName + ": direct steps";
  if (llvm::Error err = makeDirectAreas(what))
    return err;
  DirectArea &area = *directArea;
  llvm::Error spanning = llvm::Error::success();
  for (const interp::PlanSignal &pair : plan.signals)
    if (!area.mapped[pair.sender] || !area.mapped[pair.receiver]) {
      spanning = collError(collInvalidUsage,
                           llvm::formatv("{0}: ranks {1} and {2} are on different hosts", what,
                                         pair.sender, pair.receiver));
      break;
    }
  const uint64_t first = area.countersUsed;
  if (!spanning && first + plan.signals.size() > DirectArea::CounterBytes / sizeof(uint64_t))
    spanning = collError(collInvalidUsage,
                         llvm::formatv("{0}: its {1} signal pairs do not fit in the {2} counters "
                                       "left of the shared areas",
                                       what, plan.signals.size(),
                                       DirectArea::CounterBytes / sizeof(uint64_t) - first));
  // The same on every rank (the same plans in the same order), so no agreement.
  if (spanning)
    return spanning;
  area.countersUsed += plan.signals.size();
  auto table = std::make_unique<interp::host::DirectTable>(plan, nullptr);
  for (size_t p = 0; p < plan.signals.size(); ++p) {
    std::byte *counter = area.own(plan.signals[p].receiver) + DirectArea::HeaderBytes +
                         (first + p) * sizeof(uint64_t);
    table->sent.push_back(reinterpret_cast<std::atomic<uint64_t> *>(counter));
    // The waiter sleeps on its process's doorbell.
    const int waiter = transport->localIndexOf(plan.signals[p].receiver);
    table->wake.push_back(&transport->doorbell(transport->localRanks()[waiter].proc));
  }
  table->slots = &slotBases;
  for (std::byte *base : area.mapped)
    table->published.push_back(reinterpret_cast<const std::atomic<uint64_t> *>(base));
  return table;
}

llvm::Expected<std::byte *> Communicator::Impl::directRegion(int region, uint64_t bytes) {
  DirectArea &area = *directArea;
  if (bytes > DirectArea::RegionBytes)
    return collError(collInvalidUsage,
                     llvm::formatv("a program with direct steps runs in the shared area, whose "
                                   "buffers hold {0} bytes; this call needs {1}",
                                   DirectArea::RegionBytes, bytes));
  const uint64_t offset = DirectArea::regionOffset(region);
  if (bytes > area.allocated[region]) {
    const uint64_t grown = std::max<uint64_t>((bytes + 4095) / 4096 * 4096, 4096);
    if (fallocate(area.fd, 0, static_cast<off_t>(offset), static_cast<off_t>(grown)) != 0)
      return systemError(llvm::formatv("allocating {0} bytes of this rank's shared area", grown),
                         errno);
    area.allocated[region] = grown;
  }
  return area.own(rank) + offset;
}

//===----------------------------------------------------------------------===//
// Windows: collMemAlloc's memory, registered with a communicator
//===----------------------------------------------------------------------===//

namespace {

/// A block of collMemAlloc: a memfd of this process, mapped whole.
struct WindowMemory {
  size_t bytes = 0;
  int fd = -1;
  uint64_t inode = 0, device = 0;
  int registered = 0; ///< windows over it, on any communicator
};

std::mutex memoryMutex;
std::map<const std::byte *, WindowMemory> memoryBlocks; ///< by start; memoryMutex

/// A block of collMemAllocDevice: an allocation of its own on a GPU.
struct DeviceWindowMemory {
  size_t bytes = 0;
  int gpu = -1;
  interp::DeviceBackend *backend = nullptr;
  int registered = 0; ///< windows over it, on any communicator
};
std::map<const std::byte *, DeviceWindowMemory> deviceBlocks; ///< by start; memoryMutex

/// Other processes' GPU allocations mapped here (CUDA IPC maps each once
/// per process), counted by the windows and areas that use them.
struct OpenedShared {
  std::byte *mapped = nullptr;
  int gpu = -1;
  interp::DeviceBackend *backend = nullptr;
  int refs = 0;
};
std::map<SharedKey, OpenedShared> openedShared; ///< memoryMutex

/// Where process `pid`'s allocation at `address` (its handle `handle`) is
/// mapped here for `gpu`, opened at its first use.
llvm::Expected<std::byte *> openPeerShared(interp::DeviceBackend &backend, int32_t pid,
                                           uint64_t address, const interp::SharedHandle &handle,
                                           int gpu) {
  std::lock_guard<std::mutex> lock(memoryMutex);
  OpenedShared &o = openedShared[{pid, address}];
  if (!o.mapped) {
    auto p = backend.openShared(handle, gpu);
    if (!p) {
      openedShared.erase({pid, address});
      return p.takeError();
    }
    o.mapped = static_cast<std::byte *>(*p);
    o.gpu = gpu;
    o.backend = &backend;
  }
  ++o.refs;
  return o.mapped;
}

void closePeerShared(const SharedKey &key) {
  std::lock_guard<std::mutex> lock(memoryMutex);
  auto it = openedShared.find(key);
  if (it == openedShared.end() || --it->second.refs > 0)
    return;
  llvm::consumeError(it->second.backend->closeShared(it->second.mapped, it->second.gpu));
  openedShared.erase(it);
}

/// The block of `blocks` (memoryBlocks or deviceBlocks, keyed by start)
/// holding [p, p + bytes), or blocks.end(); under memoryMutex.
template <class Block>
typename std::map<const std::byte *, Block>::iterator
blockIn(std::map<const std::byte *, Block> &blocks, const void *p, size_t bytes) {
  auto *b = static_cast<const std::byte *>(p);
  auto it = blocks.upper_bound(b);
  if (it == blocks.begin())
    return blocks.end();
  --it;
  if (b + bytes > it->first + it->second.bytes)
    return blocks.end();
  return it;
}

/// What a rank tells the others about its window.
struct WindowExport {
  int32_t pid = 0;
  int32_t fd = -1;
  uint64_t inode = 0, device = 0;
  uint64_t offset = 0; ///< of the buffer in the memfd, or in the GPU allocation
  uint64_t bytes = 0;
  int32_t onGpu = 0;   ///< collMemAllocDevice memory
  int32_t gpu = -1;
  uint64_t address = 0; ///< on a GPU: the allocation's start in its process
  interp::SharedHandle handle{};
};

} // namespace

llvm::Expected<void *> allocateWindowMemory(size_t bytes) {
  if (bytes == 0)
    return collError(collInvalidArgument, "collMemAlloc: size is 0");
  const size_t page = pageBytes();
  if (bytes > (size_t(1) << 46))
    return collError(collInvalidArgument,
                     llvm::formatv("collMemAlloc: {0} bytes is more than this host has", bytes));
  const size_t rounded = (bytes + page - 1) / page * page;
  WindowMemory m;
  m.bytes = rounded;
  m.fd = memfd_create("coll-window-memory", MFD_CLOEXEC);
  if (m.fd < 0)
    return systemError("collMemAlloc: memfd_create", errno);
  struct stat st;
  // Allocated now, so that memory that runs out is this error rather than
  // a fault when a peer touches it.
  if (ftruncate(m.fd, static_cast<off_t>(rounded)) != 0 ||
      fallocate(m.fd, 0, 0, static_cast<off_t>(rounded)) != 0 || fstat(m.fd, &st) != 0) {
    const int e = errno;
    ::close(m.fd);
    return systemError(llvm::formatv("collMemAlloc: {0} bytes of shared memory", rounded), e);
  }
  m.inode = st.st_ino;
  m.device = st.st_dev;
  void *p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    ::close(m.fd);
    return systemError("collMemAlloc: mapping it", e);
  }
  std::lock_guard<std::mutex> lock(memoryMutex);
  memoryBlocks.emplace(static_cast<const std::byte *>(p), m);
  return p;
}

llvm::Expected<void *> allocateDeviceWindowMemory(size_t bytes, int device) {
  if (bytes == 0)
    return collError(collInvalidArgument, "collMemAllocDevice: size is 0");
  auto backend = gpuBackend();
  if (!backend)
    return collError(collInvalidUsage,
                     "collMemAllocDevice: no GPU backend: " + llvm::toString(backend.takeError()));
  if (device < 0) {
    auto current = (*backend)->currentDevice();
    if (!current)
      return collError(collInvalidUsage,
                       "collMemAllocDevice: " + llvm::toString(current.takeError()));
    device = current->device;
  }
  auto p = (*backend)->allocateShared(bytes, device);
  if (!p)
    return collError(collUnhandledCudaError,
                     llvm::formatv("collMemAllocDevice: {0} bytes on CUDA device {1}: {2}", bytes,
                                   device, llvm::toString(p.takeError())));
  std::lock_guard<std::mutex> lock(memoryMutex);
  deviceBlocks[static_cast<const std::byte *>(*p)] = {bytes, device, *backend, 0};
  return *p;
}

llvm::Error freeWindowMemory(void *ptr) {
  std::lock_guard<std::mutex> lock(memoryMutex);
  auto it = memoryBlocks.find(static_cast<const std::byte *>(ptr));
  if (it == memoryBlocks.end()) {
    auto d = deviceBlocks.find(static_cast<const std::byte *>(ptr));
    if (d == deviceBlocks.end())
      return collError(collInvalidArgument,
                       llvm::formatv("collMemFree: {0} is not a block of collMemAlloc or "
                                     "collMemAllocDevice",
                                     ptr));
    if (d->second.registered)
      return collError(collInvalidUsage,
                       llvm::formatv("collMemFree: {0} is still registered ({1} window(s)); "
                                     "collCommWindowDeregister them first",
                                     ptr, d->second.registered));
    if (llvm::Error err = d->second.backend->freeShared(ptr, d->second.gpu))
      return collError(collUnhandledCudaError,
                       llvm::formatv("collMemFree: {0}: {1}", ptr, llvm::toString(std::move(err))));
    deviceBlocks.erase(d);
    return llvm::Error::success();
  }
  if (it->second.registered)
    return collError(collInvalidUsage,
                     llvm::formatv("collMemFree: {0} is still registered ({1} window(s)); "
                                   "collCommWindowDeregister them first",
                                   ptr, it->second.registered));
  munmap(ptr, it->second.bytes);
  ::close(it->second.fd);
  memoryBlocks.erase(it);
  return llvm::Error::success();
}

RegisteredWindow::~RegisteredWindow() {
  for (auto [p, n] : mappings)
    munmap(p, n);
  for (const SharedKey &k : opened)
    closePeerShared(k);
  std::lock_guard<std::mutex> lock(memoryMutex);
  auto it = memoryBlocks.find(static_cast<const std::byte *>(memory));
  if (it != memoryBlocks.end() && it->second.registered > 0)
    --it->second.registered;
  auto d = deviceBlocks.find(static_cast<const std::byte *>(memory));
  if (d != deviceBlocks.end() && d->second.registered > 0)
    --d->second.registered;
}

DeviceArea::~DeviceArea() {
  for (const SharedKey &k : opened)
    closePeerShared(k);
  if (own)
    llvm::consumeError(backend->freeShared(own, gpu));
}

uint64_t Communicator::Impl::windowSlotOf(const void *p, uint64_t bytes) const {
  auto *b = static_cast<const std::byte *>(p);
  for (size_t k = 0; k < windows.size(); ++k)
    if (const RegisteredWindow *w = windows[k].get())
      if (b >= w->base && b + bytes <= w->base + w->bytes)
        return k + 1;
  return 0;
}

void Communicator::Impl::publishDirectBuffers(const std::array<const void *, 3> &buffers) {
  std::byte *area = directArea->own(rank);
  auto *words = reinterpret_cast<std::atomic<uint64_t> *>(area);
  for (int k = 0; k < 3; ++k) {
    auto *p = static_cast<const std::byte *>(buffers[k]);
    uint64_t slot = 0, offset = 0;
    if (p >= area && p < area + DirectArea::Bytes) {
      offset = static_cast<uint64_t>(p - area);
    } else if ((slot = windowSlotOf(p, 0)) != 0) {
      offset = static_cast<uint64_t>(p - windows[slot - 1]->base);
    } // else a buffer the plan does not use: nobody reads it
    words[k].store(offset, std::memory_order_relaxed);
    words[3 + k].store(slot, std::memory_order_relaxed);
  }
}

llvm::Expected<int> Communicator::Impl::registerWindow(void *buff, size_t bytes) {
  const std::string what = "collCommWindowRegister";
  std::vector<WindowExport> all(static_cast<size_t>(nranks));
  const void *block = nullptr;
  int gpuOfWindows = -1;
  interp::DeviceBackend *windowBackend = nullptr;
  llvm::Error local = llvm::Error::success();
  if (!buff || bytes == 0) {
    local = collError(collInvalidArgument, "buff is NULL or size is 0");
  } else {
    std::unique_lock<std::mutex> lock(memoryMutex);
    auto it = blockIn(memoryBlocks, buff, bytes);
    auto d = blockIn(deviceBlocks, buff, bytes);
    if (it != memoryBlocks.end()) {
      block = it->first;
      all[rank].pid = static_cast<int32_t>(getpid());
      all[rank].fd = it->second.fd;
      all[rank].inode = it->second.inode;
      all[rank].device = it->second.device;
      all[rank].offset = static_cast<uint64_t>(static_cast<std::byte *>(buff) - it->first);
      all[rank].bytes = bytes;
    } else if (d != deviceBlocks.end()) {
      block = d->first;
      const DeviceWindowMemory m = d->second;
      lock.unlock();
      all[rank].pid = static_cast<int32_t>(getpid());
      all[rank].offset = static_cast<uint64_t>(static_cast<std::byte *>(buff) - d->first);
      all[rank].bytes = bytes;
      all[rank].onGpu = 1;
      all[rank].gpu = m.gpu;
      all[rank].address = reinterpret_cast<uint64_t>(block);
      auto h = m.backend->exportShared(const_cast<void *>(block), m.gpu);
      if (h)
        all[rank].handle = *h;
      else
        local = collError(collUnhandledCudaError, "sharing it (CUDA IPC): " +
                                                      llvm::toString(h.takeError()));
      gpuOfWindows = m.gpu;
      windowBackend = m.backend;
    } else {
      local = collError(collInvalidArgument,
                        llvm::formatv("[{0}, +{1}) is not within one block of collMemAlloc or "
                                      "collMemAllocDevice, whose memory is the only kind the other "
                                      "processes can map",
                                      buff, bytes));
    }
  }
  if (!local)
    for (const auto &w : windows)
      if (w && static_cast<std::byte *>(buff) < w->base + w->bytes &&
          w->base < static_cast<std::byte *>(buff) + bytes) {
        local = collError(collInvalidUsage,
                          llvm::formatv("[{0}, +{1}) overlaps a window already registered with "
                                        "this communicator",
                                        buff, bytes));
        break;
      }
  if (!local && inCall.load() > 0)
    local = collError(collInvalidUsage, "a call is running on this communicator");
  if (llvm::Error err = agree(std::move(local), what))
    return err;
  if (llvm::Error err = boot->allgather(all.data(), sizeof(WindowExport)))
    return collError(collRemoteError, llvm::formatv("{0}: lost contact with the other ranks: {1}",
                                                    what, llvm::toString(std::move(err))));
  // The same on every rank: no agreement needed.
  for (int r = 0; r < nranks; ++r) {
    if (all[r].bytes != all[0].bytes)
      return collError(collInvalidArgument,
                       llvm::formatv("{0}: rank {1} registers {2} bytes and rank 0 {3}: a window "
                                     "has the same size on every rank",
                                     what, r, all[r].bytes, all[0].bytes));
    if (all[r].onGpu != all[0].onGpu)
      return collError(collInvalidArgument,
                       llvm::formatv("{0}: rank {1} registers {2} memory and rank 0 {3}: a window "
                                     "is GPU memory on every rank (collMemAllocDevice) or host "
                                     "memory on every rank (collMemAlloc)",
                                     what, r, all[r].onGpu ? "GPU" : "host",
                                     all[0].onGpu ? "GPU" : "host"));
  }
  auto window = std::make_unique<RegisteredWindow>();
  window->base = static_cast<std::byte *>(buff);
  window->bytes = bytes;
  window->onGpu = all[rank].onGpu != 0;
  window->at.assign(static_cast<size_t>(nranks), nullptr);
  llvm::Error mapped = llvm::Error::success();
  for (int r = 0; r < nranks && !mapped; ++r) {
    if (r == rank) {
      window->at[r] = window->base;
      continue;
    }
    if (hostOf[r] != hostOf[rank])
      continue;
    const WindowExport &e = all[r];
    if (window->onGpu) {
      // Ranks of this process: their pointer; of others: CUDA IPC, for
      // this rank's GPU.
      if (e.pid == all[rank].pid) {
        window->at[r] = reinterpret_cast<std::byte *>(e.address) + e.offset;
        continue;
      }
      auto m = openPeerShared(*windowBackend, e.pid, e.address, e.handle, gpuOfWindows);
      if (!m) {
        mapped = collError(collUnhandledCudaError,
                           llvm::formatv("mapping rank {0}'s window (CUDA IPC): {1}", r,
                                         llvm::toString(m.takeError())));
        break;
      }
      window->opened.push_back({e.pid, e.address});
      window->at[r] = *m + e.offset;
      continue;
    }
    auto m = mapPeerFile(e.pid, e.fd, e.inode, e.device, e.offset, e.bytes, 0,
                         llvm::formatv("rank {0}'s window", r));
    if (!m) {
      mapped = m.takeError();
      break;
    }
    window->mappings.emplace_back(m->start, m->length);
    window->at[r] = m->at;
  }
  if (!mapped) {
    // Counted before it can be destroyed (which uncounts it).
    std::lock_guard<std::mutex> lock(memoryMutex);
    window->memory = block;
    if (window->onGpu)
      deviceBlocks[static_cast<const std::byte *>(block)].registered++;
    else
      memoryBlocks[static_cast<const std::byte *>(block)].registered++;
  }
  if (llvm::Error err = agree(std::move(mapped), llvm::formatv("{0}: mapping the peers' windows",
                                                               what)
                                                     .str()))
    return err;
  slotBases.push_back(window->at);
  windows.push_back(std::move(window));
  ++windowsEpoch;
  // The programs the rules for windows choose make their runners here, every
  // rank together (their areas and tables are collective): a call on
  // windows then sets up nothing collective, so that ranks that pass
  // windows where others do not (and so run another program) are stopped
  // by their watchdogs rather than waiting in each other's setup.
  auto setUp = [&](const TuningRule &, const Choice &choice) -> llvm::Error {
    if (!choice.program || choice.program->plan.signals.empty())
      return llvm::Error::success();
    auto runner = runnerFor(choice.program);
    return runner ? llvm::Error::success() : runner.takeError();
  };
  if (shape.nodes == 1)
    if (llvm::Error err = forWindowChoices(setUp))
      return err;
  COLL_LOG(Info, Init, rank,
           llvm::formatv("window {0}: {1} bytes at {2}{3}, mapped by the ranks of this host; "
                         "calls whose buffers lie in windows run programs with direct steps on "
                         "them, without copies",
                         windows.size(), bytes, buff,
                         gpuOfWindows >= 0
                             ? llvm::formatv(" on CUDA device {0} (CUDA IPC)", gpuOfWindows).str()
                             : std::string()));
  return static_cast<int>(windows.size());
}

llvm::Error Communicator::Impl::deregisterWindow(int id) {
  llvm::Error local = llvm::Error::success();
  if (id < 1 || static_cast<size_t>(id) > windows.size() || !windows[id - 1])
    local = collError(collInvalidArgument,
                      llvm::formatv("window {0} is not registered with this communicator", id));
  else if (inCall.load() > 0)
    local = collError(collInvalidUsage, "a call is running on this communicator");
  if (llvm::Error err = agree(std::move(local), "collCommWindowDeregister"))
    return err;
  windows[id - 1].reset();
  std::fill(slotBases[id].begin(), slotBases[id].end(), nullptr);
  ++windowsEpoch;
  COLL_LOG(Info, Init, rank, llvm::formatv("window {0} deregistered", id));
  return llvm::Error::success();
}

} // namespace coll::rt
