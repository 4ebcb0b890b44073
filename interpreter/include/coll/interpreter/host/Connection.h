//===- Connection.h - A connection's memory, as both ends see it -*- C++ -*-===//
//
// The layout every host-side end of a connection shares, whatever carries
// it: the counters (head, tail, slot sizes, the sender's call tag) and the
// FIFO of FifoDepth slots that follows them, in memory of this process
// (HostExecutor), shared between the processes of a host (the runtime's
// transport) or staged by a network proxy. The ordering rules of each
// protocol are in Rank.h.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_HOST_CONNECTION_H
#define COLL_INTERPRETER_HOST_CONNECTION_H

#include "coll/interpreter/Protocol.h"
#include "coll/ir/Algorithm.h"
#include "coll/interpreter/host/Sync.h"

#include "llvm/Support/Error.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace coll::interp::host {

constexpr size_t CacheLine = 64;

/// The counters of one connection, written by both ends; plain data, so it
/// can live in memory shared between processes. The FIFO follows it.
struct alignas(CacheLine) ConnectionControl {
  std::atomic<uint64_t> tail; ///< slots the sender filled
  /// Data bytes the sender put in each slot, stored before `tail`: what a
  /// network proxy forwards (NetProxy.h); the receivers do not read it.
  std::atomic<uint32_t> sizes[FifoDepth];
  /// The sender's tag of the call its slots belong to, stored with each
  /// `tail`: in the line a Simple receiver reads anyway, so that it can tell
  /// a mismatched call from its own without another cache miss
  /// (RankRunner::tagSends/receivedTags; 0 when nobody sets it). LL128
  /// receivers find the tag's hash in each line's flag word instead
  /// (HostRank.cpp, hostLl128Flag); LL receivers do not check.
  std::atomic<uint64_t> call;
  char pad0[CacheLine - 2 * sizeof(std::atomic<uint64_t>) -
            FifoDepth * sizeof(std::atomic<uint32_t>)];
  std::atomic<uint64_t> head; ///< slots the receiver freed
  char pad1[CacheLine - sizeof(std::atomic<uint64_t>)];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "connections in shared memory need lock-free 64-bit atomics");

/// The memory one connection needs for a protocol and slot size.
struct FifoShape {
  ir::Protocol protocol = ir::Protocol::Simple;
  uint64_t slotBytes = 0; ///< data bytes per slot: the pipeline slice
  uint64_t slotWords = 0; ///< LL/LL128: 8-byte words per slot (lines included)

  /// Fails unless `slotBytes` is a multiple of 8 in [8, 64 MiB].
  static llvm::Expected<FifoShape> of(ir::Protocol protocol, uint64_t slotBytes);
  /// Control block and FifoDepth slots, rounded up to a cache line.
  uint64_t totalBytes() const;
  /// Bytes from one slot's start to the next's.
  uint64_t slotSpan() const;
  /// Bytes at the start of a slot that a transfer of `payload` data bytes
  /// uses (LL and LL128 lines with their flags), at most slotSpan().
  uint64_t slotBytesFor(uint64_t payload) const;
};

/// One end of a connection, as the tb that drives it sees it. `memory`
/// (totalBytes() bytes, zeroed before either end uses it) is the same for
/// both ends, mapped wherever each end's process maps it.
struct ConnectionEnd {
  ConnectionControl *control = nullptr;
  std::byte *fifo = nullptr;
  FifoShape shape;
  /// Rung after this end moves its counter: the doorbell of the process
  /// that runs the other end.
  Doorbell *peerBell = nullptr;
  int32_t sender = -1, receiver = -1, channel = -1; ///< for reports
  /// The sender's copy of `control->head` as it last read it (never ahead
  /// of it): the sender reads the receiver's line only when the FIFO looks
  /// full by this count, so that line stays in the receiver's cache.
  uint64_t headSeen = 0;

  static ConnectionEnd bind(void *memory, const FifoShape &shape, Doorbell *peerBell,
                            int32_t sender, int32_t receiver, int32_t channel);
  bool valid() const { return control != nullptr; }
  /// Sender side: whether slot `seq` is free (the receiver has freed slot
  /// seq - FifoDepth), reading the receiver's `head` only when `headSeen`
  /// does not already say so; acquire, so the receiver's reads of the slot
  /// happen before the sender overwrites it.
  bool slotFree(uint64_t seq) {
    if (seq - headSeen < FifoDepth)
      return true;
    headSeen = control->head.load(std::memory_order_acquire);
    return seq - headSeen < FifoDepth;
  }
};

} // namespace coll::interp::host

#endif // COLL_INTERPRETER_HOST_CONNECTION_H
