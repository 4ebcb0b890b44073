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

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace coll::rt {

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

/// Maps `peer`'s area (this process's own, or another's through /proc).
llvm::Expected<std::byte *> mapArea(const AreaExport &peer, int peerRank, int ownFd) {
  int fd = ownFd;
  bool opened = false;
  if (peer.pid != getpid() || peer.fd != ownFd) {
    const std::string path = "/proc/" + std::to_string(peer.pid) + "/fd/" + std::to_string(peer.fd);
    fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0)
      return systemError(llvm::formatv("opening rank {0}'s area ({1}; ptrace rules may forbid "
                                       "it)",
                                       peerRank, path),
                         errno);
    opened = true;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_ino != peer.inode || st.st_dev != peer.device) {
      ::close(fd);
      return collError(collSystemError,
                       llvm::formatv("rank {0}'s area: {1} is not the file it exported", peerRank,
                                     path));
    }
  }
  void *p = mmap(nullptr, DirectArea::Bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
                 fd, 0);
  const int e = errno;
  if (opened)
    ::close(fd);
  if (p == MAP_FAILED)
    return systemError(llvm::formatv("mapping rank {0}'s area", peerRank), e);
  return static_cast<std::byte *>(p);
}

} // namespace

llvm::Expected<std::unique_ptr<interp::host::DirectTable>>
Communicator::Impl::directTableFor(const interp::Plan &plan) {
  const std::string what = plan.fileName + ": direct steps";
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
      auto m = mapArea(all[r], r, area->fd);
      if (m)
        area->mapped[r] = *m;
      else
        mapped = m.takeError();
    }
    if (llvm::Error err = agree(std::move(mapped), what + ": mapping the peers' areas"))
      return err;
    const size_t here = static_cast<size_t>(
        std::count_if(area->mapped.begin(), area->mapped.end(), [](std::byte *p) { return p; }));
    directArea = std::move(area);
    COLL_LOG(Info, Init, rank,
             llvm::formatv("{0}: this rank's shared area is mapped by the {1} ranks of its host; "
                           "calls run in it, copying their buffers in and out",
                           what, here));
  }
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
  }
  table->areas = area.mapped;
  for (std::byte *base : area.mapped)
    table->offsets.push_back(reinterpret_cast<const std::atomic<uint64_t> *>(base));
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

} // namespace coll::rt
