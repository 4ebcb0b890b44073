//===- SharedMemory.cpp - Segments shared by the processes of a host --------===//

#include "coll/transport/SharedMemory.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace coll::transport {

namespace {

llvm::Error sysError(const std::string &what, int err) {
  return llvm::createStringError(std::error_code(err, std::generic_category()), "%s: %s",
                                 what.c_str(), std::strerror(err));
}

std::string shmSpace() {
  struct statvfs st {};
  if (statvfs("/dev/shm", &st) != 0)
    return "";
  unsigned long long total = (unsigned long long)st.f_blocks * st.f_frsize;
  unsigned long long avail = (unsigned long long)st.f_bavail * st.f_frsize;
  return " (/dev/shm has " + std::to_string(avail >> 20) + " MiB free of " +
         std::to_string(total >> 20) + " MiB)";
}

} // namespace

Segment::Segment(Segment &&other) noexcept { *this = std::move(other); }

Segment &Segment::operator=(Segment &&other) noexcept {
  if (this != &other) {
    release();
    base = other.base;
    bytes = other.bytes;
    fd = other.fd;
    segmentName = std::move(other.segmentName);
    owner = other.owner;
    other.base = nullptr;
    other.bytes = 0;
    other.fd = -1;
    other.owner = false;
  }
  return *this;
}

Segment::~Segment() { release(); }

void Segment::release() {
  if (base)
    munmap(base, bytes);
  if (fd >= 0)
    ::close(fd);
  if (owner)
    shm_unlink(segmentName.c_str());
  base = nullptr;
  fd = -1;
  owner = false;
}

llvm::Expected<Segment> Segment::create(const std::string &name, size_t size) {
  Segment s;
  s.segmentName = name;
  s.fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (s.fd < 0)
    return sysError("cannot create the shared-memory segment " + name, errno);
  s.owner = true;
  s.bytes = size;
  if (ftruncate(s.fd, static_cast<off_t>(size)) != 0)
    return sysError("cannot size the shared-memory segment " + name + shmSpace(), errno);
  void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd, 0);
  if (p == MAP_FAILED)
    return sysError("cannot map the shared-memory segment " + name, errno);
  s.base = p;
  return s;
}

llvm::Expected<Segment> Segment::open(const std::string &name, size_t size) {
  Segment s;
  s.segmentName = name;
  s.fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (s.fd < 0)
    return sysError("cannot open the shared-memory segment " + name, errno);
  struct stat st {};
  if (fstat(s.fd, &st) != 0)
    return sysError("cannot inspect the shared-memory segment " + name, errno);
  if (static_cast<size_t>(st.st_size) < size)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the shared-memory segment %s has %lld bytes, expected %zu "
                                   "(ranks disagree about its layout)",
                                   name.c_str(), (long long)st.st_size, size);
  s.bytes = size;
  void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd, 0);
  if (p == MAP_FAILED)
    return sysError("cannot map the shared-memory segment " + name, errno);
  s.base = p;
  return s;
}

llvm::Expected<Segment> Segment::anonymous(size_t size) {
  Segment s;
  s.segmentName = "<anonymous>";
  s.bytes = size;
  void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED)
    return sysError("cannot map " + std::to_string(size) + " bytes", errno);
  s.base = p;
  return s;
}

llvm::Error Segment::commit(size_t offset, size_t size) const {
  if (fd < 0 || size == 0)
    return llvm::Error::success();
  int rc = posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(size));
  if (rc == 0)
    return llvm::Error::success();
  if (rc == ENOSPC)
    return llvm::createStringError(std::make_error_code(std::errc::no_space_on_device),
                                   "no room in /dev/shm for %zu more bytes of connection FIFOs%s; "
                                   "enlarge /dev/shm (e.g. docker --shm-size) or lower "
                                   "COLL_SIMPLE_SLOT_BYTES",
                                   size, shmSpace().c_str());
  return sysError("cannot commit memory of the shared-memory segment " + segmentName, rc);
}

void Segment::unlink() {
  if (owner) {
    shm_unlink(segmentName.c_str());
    owner = false;
  }
}

void unlinkSegment(const std::string &name) { shm_unlink(name.c_str()); }

} // namespace coll::transport
