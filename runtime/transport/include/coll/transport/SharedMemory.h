//===- SharedMemory.h - Segments shared by the processes of a host -*- C++ -*-===//
//
// The transport between processes of one host (docs/ARCHITECTURE.md §7): a connection's
// FIFO lives in a segment its receiver creates (shm_open under /dev/shm) and
// its sender maps. A segment's name is removed as soon as every process that
// needs it has mapped it, so nothing is left in /dev/shm when a process
// crashes afterwards; creators also remove their names when set-up fails.
//
// Segments are sparse: pages are committed (posix_fallocate) only for the
// ranges a connection really uses, before either end touches them, so a
// full /dev/shm is an error at set-up ("enlarge /dev/shm") instead of a
// SIGBUS in the middle of a call.
//
// Ranks in one process use anonymous memory with the same interface.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_TRANSPORT_SHAREDMEMORY_H
#define COLL_TRANSPORT_SHAREDMEMORY_H

#include "llvm/Support/Error.h"

#include <cstddef>
#include <string>

namespace coll::transport {

class Segment {
public:
  Segment() = default;
  Segment(Segment &&other) noexcept;
  Segment &operator=(Segment &&other) noexcept;
  ~Segment();

  /// Creates `name` (e.g. "/coll-1a2b-r3") of `bytes` bytes, zeroed; fails if
  /// it exists.
  static llvm::Expected<Segment> create(const std::string &name, size_t bytes);
  /// Maps an existing segment created with `bytes` bytes.
  static llvm::Expected<Segment> open(const std::string &name, size_t bytes);
  /// Private anonymous memory (ranks of one process).
  static llvm::Expected<Segment> anonymous(size_t bytes);

  /// Commits the pages of [offset, offset + bytes), zeroed, or fails with
  /// a message about /dev/shm's size. Anonymous segments commit on touch.
  llvm::Error commit(size_t offset, size_t bytes) const;
  /// Removes the name (creator); the memory lives on while mapped.
  void unlink();

  void *data() const { return base; }
  size_t size() const { return bytes; }
  const std::string &name() const { return segmentName; }
  bool valid() const { return base != nullptr; }

private:
  void release();

  void *base = nullptr;
  size_t bytes = 0;
  int fd = -1;
  std::string segmentName;
  bool owner = false; ///< created it and its name still exists
};

/// Removes a segment name, ignoring a name that does not exist.
void unlinkSegment(const std::string &name);

} // namespace coll::transport

#endif // COLL_TRANSPORT_SHAREDMEMORY_H
