//===- NetProxy.h - Connections to ranks on other hosts, over UCX -*- C++ -*-===//
//
// A connection whose two ranks are on different hosts has two FIFOs of the
// same shape (coll/interpreter/host/Connection.h): the sender fills one in its own process's memory
// (the staging FIFO), and the receiver drains its usual FIFO in its host's
// shared memory. Each rank with peers on other hosts runs a proxy thread, as
// NCCL's network proxy does, that moves slots between the two over UCX:
//
//  - outbound: when the sender publishes a slot (`tail`, with the slot's size
//    in `sizes`), the proxy sends its bytes as one UCX tagged message and,
//    once UCX is done with them, frees the slot (`head`) for the sender;
//  - inbound: the proxy keeps a receive posted for every free slot of the
//    receiver's FIFO (Simple: straight into the slot; LL and LL128: into a
//    bounce slot, then copied with the protocol's own stores, so the
//    receiver's flag checks keep their meaning), and publishes `tail`.
//
// Slot numbers are the same on both FIFOs, so LL and LL128 flags (the slot
// number + 1) travel unchanged. A tag names the connection and the slot:
// kind (2 bits) | protocol (2) | channel (8) | sender (14) | receiver (14) |
// slot number (24).
//
// The proxy sleeps when nothing moves: the local ends ring its doorbell,
// and a second thread waits on UCX's event descriptor and rings it too.
// Device buffers: a GPU executor's connections with ranks on other hosts
// have their ends in pinned host memory, in the device layout (head, tail,
// slot sizes, FIFO); the GPU writes them directly (as NCCL's kernels write
// host buffers where GPUDirect RDMA is missing) and the proxy moves their
// slots the same way, polling, since a GPU rings no doorbell.
//
// A peer whose endpoint fails without having said goodbye (a message every
// proxy sends before it closes) ends this rank's calls through `peerLost`.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_TRANSPORT_NETPROXY_H
#define COLL_TRANSPORT_NETPROXY_H

#include "coll/interpreter/host/Connection.h"
#include "coll/interpreter/host/Sync.h"

#include "llvm/Support/Error.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace coll::transport {

class NetProxy {
public:
  struct Options {
    int rank = 0, nranks = 1;
    /// Per rank: whether it is on another host.
    std::vector<bool> remote;
    /// Per rank, for messages.
    std::vector<std::string> hostnames;
    /// The doorbell of this rank's engine: rung after the proxy frees a
    /// staging slot or fills a receive slot.
    interp::host::Doorbell *engineBell = nullptr;
    /// Stops this rank's calls (and its host's): a peer was lost; the
    /// report says which and why.
    std::function<void(const std::string &report)> peerLost;
  };

  /// Whether this build has UCX.
  static bool available();
  /// Creates the UCX worker; connect() starts the proxy.
  static llvm::Expected<std::unique_ptr<NetProxy>> create(Options options);
  ~NetProxy();

  /// This rank's worker address (network transports only), for the others.
  const std::vector<uint8_t> &address() const;
  /// Connects to every remote rank's address (indexed by rank; entries of
  /// local ranks are ignored) and starts the proxy threads.
  llvm::Error connect(const std::vector<std::vector<uint8_t>> &addresses);

  /// The sending end of (this rank -> `receiver`, `channel`) for `shape`:
  /// a staging FIFO the proxy forwards.
  llvm::Expected<interp::host::ConnectionEnd> outbound(int receiver, int channel,
                                                       const interp::host::FifoShape &shape);
  /// Registers the receiving end `end` (from the host transport, its
  /// peerBell this proxy's doorbell()) of a connection from a remote rank.
  llvm::Error inbound(const interp::host::ConnectionEnd &end);
  interp::host::Doorbell &doorbell();

  /// An end of a connection of a GPU executor (DeviceExecutor's
  /// ProxiedConnection): its counters and FIFO in the device layout, in
  /// pinned host memory that the GPU reads and writes. A GPU rings no
  /// doorbell, so from the first such end the proxy polls (every 50 us
  /// once idle). `program` tells the executors of one communicator apart
  /// on the wire (at most 1024).
  struct DeviceEnd {
    std::atomic<uint64_t> *head = nullptr, *tail = nullptr;
    std::atomic<uint32_t> *sizes = nullptr;
    std::byte *fifo = nullptr;
    uint64_t slotStride = 0;
    ir::Protocol protocol = ir::Protocol::Simple;
    int sender = -1, receiver = -1, channel = -1;
    uint32_t program = 0;
    bool outbound = false; ///< this rank sends: the proxy forwards its slots
  };
  llvm::Error device(const DeviceEnd &end);

  /// Waits until every slot this rank published has left (the data are on
  /// their way or delivered), at most `timeout`; false on timeout.
  bool drain(std::chrono::milliseconds timeout);

  /// Stops the proxy and closes the connections. `graceful` (this rank is
  /// healthy): peers are told first, so the close is not taken for a lost
  /// rank. The destructor closes ungracefully if close() was not called.
  void close(bool graceful);

  /// What carries the connection to `peer` (UCX's lanes), after connect().
  std::string describePeer(int peer) const;
  /// The UCX version and what memory it can move.
  std::string describe() const;

  class Impl;

private:
  explicit NetProxy(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace coll::transport

#endif // COLL_TRANSPORT_NETPROXY_H
