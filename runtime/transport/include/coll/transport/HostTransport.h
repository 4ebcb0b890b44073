//===- HostTransport.h - Connections between the ranks of a host --*- C++ -*-===//
//
// The memory a communicator's ranks on one host share:
//  - one control segment (created by the host's first rank): the stop word
//    every wait checks, the first failure's report, one Doorbell per process
//    and, per rank, its pid and the descriptors of its last calls (so a rank
//    that waits can tell a mismatched call from a slow peer);
//  - one receive segment per rank, created by that rank: the FIFOs of every
//    connection it receives on, for every (protocol, channel, sender).
// Offsets are computed, not exchanged: every rank derives the same layout
// from the communicator's size, channel count and slot sizes.
//
// Set-up is three phases with a bootstrap step between them so that nobody
// maps a segment before it exists or unlinks it before everyone has mapped
// it: create() makes this rank's segments, attach() maps the others',
// unlinkNames() removes the names.
//
// When every rank of the communicator lives in this process the segments are
// anonymous memory found through a table in this process (no /dev/shm).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_TRANSPORT_HOSTTRANSPORT_H
#define COLL_TRANSPORT_HOSTTRANSPORT_H

#include "coll/transport/SharedMemory.h"

#include "coll/interpreter/host/Rank.h"
#include "coll/interpreter/host/Sync.h"

#include "coll/ir/Algorithm.h"

#include "llvm/Support/Error.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace coll::transport {

/// What a rank started as call number `seq` on a communicator.
/// One per cache line: a rank reads its peers' while they publish their next.
struct alignas(64) CallDescriptor {
  std::atomic<uint64_t> seq{0}; ///< 0: empty; published last
  std::atomic<uint32_t> kind{0}, type{0}, op{0};
  std::atomic<int32_t> root{0};
  std::atomic<uint64_t> count{0};
};

inline constexpr int CallRing = 8;

struct alignas(64) RankSlot {
  int32_t rank = -1, proc = -1, pid = 0, pad = 0;
  CallDescriptor calls[CallRing];
  /// This rank's stop word, which its waits and kernels poll: raised by a
  /// failure of the call it runs or of an earlier one (ControlHeader::
  /// stopSeq at most `current`), not of a call it has yet to reach.
  alignas(64) std::atomic<uint32_t> stop{0};
  /// The number of the call this rank runs, or ran last.
  std::atomic<uint64_t> current{0};
  /// Raised when the rank destroys its communicator: its process may exit
  /// after that without being a lost rank (runtime/lib/Liveness.cpp).
  std::atomic<uint32_t> left{0};
};

struct alignas(64) ControlHeader {
  uint64_t magic = 0;
  int32_t nlocal = 0, nprocs = 0;
  alignas(64) std::atomic<uint32_t> stop{0}; ///< raised: some rank of the host failed
  std::atomic<int32_t> stopRank{-1};
  std::atomic<int32_t> stopResult{0};
  std::atomic<uint32_t> reportReady{0};
  /// The reporter's call number (on this communicator) when it raised the
  /// stop: which call failed, so that a rank that completed that call
  /// knows at its next one that the communicator has retired.
  std::atomic<uint64_t> stopSeq{0};
  char report[2048] = {};
};

/// Where each connection lives.
struct FifoLayout {
  int nranks = 1;
  int channels = 1;
  std::array<uint64_t, 3> slotBytes{}; ///< per protocol (Simple, LL, LL128)
  std::array<bool, 3> used{};          ///< protocols with FIFOs

  uint64_t connectionBytes(ir::Protocol p) const;
  uint64_t segmentBytes() const;
  uint64_t offset(ir::Protocol p, int channel, int sender) const;
};

struct LocalRank {
  int rank = -1;
  int proc = -1; ///< index of its process among the host's processes
  int pid = 0;
};

class HostTransport {
public:
  /// Phase 1: this rank's receive segment, and the control segment when
  /// this rank is the host's first. `local` lists the host's ranks in rank
  /// order; `me` is this rank's index in it.
  static llvm::Expected<std::unique_ptr<HostTransport>>
  create(uint64_t nonce, const FifoLayout &layout, std::vector<LocalRank> local, int me,
         int nprocs, bool inProcess);
  ~HostTransport();

  /// Phase 2: maps the control segment and every other local rank's receive
  /// segment.
  llvm::Error attach();
  /// Phase 3: removes this rank's segment names (the memory stays mapped).
  void unlinkNames();
  /// After a failed set-up on any rank of this host: removes every name the
  /// host's ranks may have created.
  static void removeNames(uint64_t nonce, const std::vector<LocalRank> &local);

  /// The end of connection (sender -> receiver, channel, protocol) that this
  /// rank drives; both must be on this host, and one of them this rank.
  /// Commits the pages of its control block and of the first `payloadBytes`
  /// of every slot (every slot whole by default) first; commit() adds more.
  llvm::Expected<interp::host::ConnectionEnd> end(int sender, int receiver, int channel,
                                                  ir::Protocol protocol,
                                                  uint64_t payloadBytes = UINT64_MAX);
  /// Commits the pages that transfers of up to `payloadBytes` data bytes
  /// per slot use in a connection's FIFO, so that a full /dev/shm is an
  /// error naming it rather than a SIGBUS. A FIFO's memory then follows the
  /// calls' slices rather than the slot size: what a job of many peers and
  /// small messages needs.
  llvm::Error commit(int sender, int receiver, int channel, ir::Protocol protocol,
                     uint64_t payloadBytes);
  /// The receiving end of a connection from `sender` on another host to
  /// this rank: the FIFO in this rank's segment, which a network proxy fills
  /// (NetProxy.h); the receiver rings `proxyBell` when it frees a slot.
  llvm::Expected<interp::host::ConnectionEnd> inboundEnd(int sender, int channel,
                                                         ir::Protocol protocol,
                                                         interp::host::Doorbell &proxyBell);
  bool isLocal(int rank) const;

  interp::host::Doorbell &doorbell(int proc);
  interp::host::Doorbell &myDoorbell() { return doorbell(local[me].proc); }
  ControlHeader &control();
  RankSlot &slot(int localIndex);
  int localIndexOf(int rank) const;
  const std::vector<LocalRank> &localRanks() const { return local; }
  int myLocalIndex() const { return me; }
  const FifoLayout &fifoLayout() const { return layout; }
  bool sharedMemory() const { return !inProcess; }

  class Job;

private:
  HostTransport() = default;
  static std::string segmentName(uint64_t nonce, int rank);
  static std::string controlName(uint64_t nonce);
  static size_t controlBytes(int nlocal, int nprocs);
  llvm::Expected<interp::host::ConnectionEnd> bindEnd(int sender, int receiver, int channel,
                                                      ir::Protocol protocol,
                                                      interp::host::Doorbell *peerBell,
                                                      uint64_t payloadBytes);
  void *receiveBase(int localIndex) const;
  const Segment *receiveSegment(int localIndex) const;

  uint64_t nonce = 0;
  FifoLayout layout;
  std::vector<LocalRank> local;
  int me = 0;
  int nprocs = 1;
  bool inProcess = false;
  Segment controlSeg;
  std::vector<Segment> receive; ///< per local rank (shared memory)
  std::shared_ptr<Job> job;     ///< in-process segments
};

} // namespace coll::transport

#endif // COLL_TRANSPORT_HOSTTRANSPORT_H
