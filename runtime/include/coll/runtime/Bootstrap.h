//===- Bootstrap.h - Finding the other ranks ----------------------*- C++ -*-===//
//
// NCCL's bootstrap, in Coll's words: collGetUniqueId starts a root listener
// thread in the calling process and puts its address and a random job nonce
// in the id; every rank connects to the root with its own PeerInfo; when all
// ranks have arrived the root sends everyone the whole table and exits. The
// ranks then connect into a ring of TCP connections (each to the next), used
// for small collectives during set-up, split and finalize. Data never goes
// over these sockets.
//
// Ranks created together in one process (collCommInitAll) use an in-process
// bootstrap with the same interface.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_RUNTIME_BOOTSTRAP_H
#define COLL_RUNTIME_BOOTSTRAP_H

#include "coll/runtime/Socket.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace coll::rt {

/// What each rank tells the others at init. Plain data.
struct PeerInfo {
  int32_t rank = -1;
  int32_t pid = 0;
  uint64_t hostHash = 0;
  uint64_t processHash = 0; ///< host hash and pid: which ranks share a process
  uint64_t configHash = 0;  ///< settings every rank must agree on
  uint8_t ringFamily = 0;   ///< the ring listener (IPv4 or IPv6)
  uint8_t ringAddr[16] = {};
  uint16_t ringPort = 0;
  char hostname[64] = {};
};

/// The decoded contents of a collUniqueId.
struct UniqueId {
  uint64_t nonce = 0;
  SockAddr root;
};

/// Encodes/decodes the 128 bytes of a collUniqueId.
void encodeUniqueId(const UniqueId &id, char out[128]);
llvm::Expected<UniqueId> decodeUniqueId(const char in[128]);

/// Starts the root listener on `address` (port 0: any free port) in a
/// thread of this process and returns the id to share. The thread serves
/// one communicator and exits once it has, or after COLL_BOOTSTRAP_TIMEOUT_MS.
/// `nonce` 0 draws a random one.
llvm::Expected<UniqueId> startRoot(const SockAddr &address, uint64_t nonce = 0);

/// This host's identity: a hash of the host name and the kernel's boot id,
/// as NCCL computes it; COLL_HOSTID replaces it (tests make "hosts" that
/// share a machine).
uint64_t hostHash();
std::string hostName();

/// This process's PeerInfo (rank and ring fields are set by the bootstrap).
PeerInfo selfPeerInfo(uint64_t configHash);

/// How long bootstrap steps wait for peers: COLL_BOOTSTRAP_TIMEOUT_MS, else
/// 300 s.
std::chrono::milliseconds bootstrapTimeout();

class Bootstrap {
public:
  virtual ~Bootstrap() = default;
  int rank() const { return myRank; }
  int nranks() const { return numRanks; }
  const std::vector<PeerInfo> &peers() const { return table; }

  /// `data` holds nranks blocks of `bytes` bytes; this rank's block is
  /// filled in; on return every block is.
  virtual llvm::Error allgather(void *data, size_t bytes) = 0;
  llvm::Error barrier();

  /// The liveness ring (docs/RUNTIME.md, "Lost ranks"): a connection to the
  /// next rank and one from the previous, which carry nothing but notices
  /// (a goodbye, a death, a revoke), so that a process that dies is seen by
  /// its neighbours at once. Collective; `nonce` tells this communicator's
  /// from others'. Ranks of one process (the in-process bootstrap) have
  /// none: both sockets invalid.
  struct LivenessLinks {
    Socket next, prev;
  };
  virtual llvm::Expected<LivenessLinks> connectLiveness(uint64_t nonce) {
    (void)nonce;
    return LivenessLinks{};
  }

  /// The bootstrap of the ranks `survivors` (ranks of this one, ascending,
  /// this rank among them), renumbered densely in that order, made without
  /// a new unique id: over the listeners the ranks opened at creation
  /// (collCommShrink). Called by the survivors only; `self` is this rank's
  /// PeerInfo for the new table; `nonce` tells the new ring from others.
  /// By default an error: a bootstrap over another library (the MPI
  /// drop-in's) cannot leave ranks out.
  virtual llvm::Expected<std::unique_ptr<Bootstrap>>
  shrink(const std::vector<int> &survivors, uint64_t nonce, PeerInfo self);

protected:
  int myRank = 0, numRanks = 1;
  std::vector<PeerInfo> table;
};

/// Joins the communicator of `id` as rank `rank` of `nranks`; `self` is this
/// rank's PeerInfo (its ring fields are filled in here).
llvm::Expected<std::unique_ptr<Bootstrap>> connectBootstrap(const UniqueId &id, int nranks,
                                                            int rank, PeerInfo self);

/// Every rank of a communicator in this process: create one group, then
/// each rank's thread calls join().
class LocalBootstrapGroup {
public:
  explicit LocalBootstrapGroup(int nranks);
  ~LocalBootstrapGroup();
  /// Rank `rank`'s bootstrap; blocks until every rank has joined.
  llvm::Expected<std::unique_ptr<Bootstrap>> join(int rank, const PeerInfo &self);

  class Impl;

private:
  std::shared_ptr<Impl> impl;
};

} // namespace coll::rt

#endif // COLL_RUNTIME_BOOTSTRAP_H
