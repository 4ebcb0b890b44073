//===- Tagged.h - Point-to-point with tags, any source, any order -*- C++ -*-===//
//
// docs/RUNTIME.md, "Tagged point-to-point". MPI's matching rules on Coll's
// connections: collIsend and collIrecv post requests that a progress thread
// of the communicator moves, whatever order the ranks post them in.
//
// Each pair of ranks has one Simple connection per direction of its own
// (the channel after the grouped sends' and receives'), which carries
// frames of one slot each: a 32-byte header and a payload.
//  - EAGER: a whole message that fits in one frame.
//  - RTS: a larger message's announcement (its id, tag and size); the
//    receiver answers with a CTS once a receive matches it, and the sender
//    then sends its DATA frames (id, offset, bytes).
//  - Single copy: an RTS may offer the sender's process id, the message's
//    address and a cookie (a random word and where the sender holds it).
//    The receiver that matches it reads the cookie, then the message,
//    straight from the sender's memory (process_vm_readv, Linux's
//    cross-memory attach, which Open MPI's shared-memory transport uses
//    too) and answers DONE, which completes the send. Where the read is
//    refused or the cookie differs (another host, another PID namespace,
//    ptrace rules), it answers CTS instead and stops trying with that
//    peer. COLL_P2P_SINGLE_COPY=0 turns it off.
// A receiver reads every frame of a peer as it arrives, whether a receive
// matches it or not (an eager message waits in memory, an announcement
// without its data), so no message holds up another: posting order never
// deadlocks. Who moves the frames: a thread in collWait (as an MPI_Wait
// does, so a blocking round trip crosses no thread), else the progress
// thread (requests nobody waits for: an isend never waited on, computation
// meanwhile); a post writes its frame at once where the connection has room.
// Matching follows MPI: an arriving message takes the first
// posted receive (in posting order) whose source and tag it fits (or
// COLL_ANY_SOURCE, COLL_ANY_TAG); a posted receive takes the first waiting
// message, in arrival order, that fits it. Messages from one sender arrive
// in the order it posted them, so two that fit the same receive are never
// reordered.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_RUNTIME_TAGGED_H
#define COLL_RUNTIME_TAGGED_H

#include "coll.h"

#include "coll/interpreter/DataType.h"
#include "coll/interpreter/host/Connection.h"

#include "llvm/Support/Error.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace coll::rt {

class Communicator;

/// One posted send or receive.
struct TaggedRequest {
  bool send = false;
  int peer = 0; ///< the destination, or the source (COLL_ANY_SOURCE)
  int tag = 0;  ///< or COLL_ANY_TAG for a receive
  interp::DataType type = interp::DataType::Float32;
  const std::byte *from = nullptr; ///< a send's data
  std::byte *to = nullptr;         ///< a receive's buffer
  uint64_t bytes = 0;              ///< a send's size, a receive's capacity

  // The engine's, under its mutex.
  uint64_t id = 0;          ///< a send's message id on the wire
  bool announced = false;   ///< a send: its EAGER or RTS frame is written
  bool cleared = false;     ///< a large send: its CTS arrived
  uint64_t sent = 0;        ///< a large send: payload bytes written
  uint64_t received = 0;    ///< a large receive: payload bytes arrived
  bool truncated = false;   ///< a receive too small for its message
  bool done = false;
  collResult_t result = collSuccess;
  std::string error;
  int source = -1, gotTag = -1; ///< a receive's status
  uint64_t gotBytes = 0;
};

class TaggedEngine {
public:
  /// `ends(peer, out, in)` makes this rank's ends of the tagged connections
  /// with `peer`; called in the posting thread, under no lock of the engine.
  using Ends = std::function<llvm::Error(int peer, interp::host::ConnectionEnd &out,
                                         interp::host::ConnectionEnd &in)>;
  /// `failed` gives the communicator's failure, if any: its kind and report.
  using Failed = std::function<bool(collResult_t &, std::string &)>;

  TaggedEngine(int rank, int nranks, uint64_t slotBytes, Ends ends, Failed failed);
  ~TaggedEngine();

  /// Posts a request (checked by the caller); its ends are made first.
  llvm::Error post(const std::shared_ptr<TaggedRequest> &r);
  /// Whether `r` is complete, after one round of progress (as MPI_Test).
  bool test(const TaggedRequest &r);
  /// Waits until `r` is complete, moving every request meanwhile in the
  /// calling thread (the progress thread steps aside while one waits).
  void wait(const TaggedRequest &r);
  /// Stops the progress thread and completes every request not yet
  /// complete with `why`: before the connections go (destroy).
  void shutdown(const std::string &why);

  /// Whether large messages on one host are read straight from the
  /// sender's memory (COLL_P2P_SINGLE_COPY, default 1).
  bool singleCopy() const { return singleCopyOn; }
  /// The largest message sent in one frame.
  uint64_t eagerBytes() const { return slotBytes - HeaderBytes; }
  static constexpr uint64_t HeaderBytes = 32;
  /// What an RTS offers for a single copy (its payload).
  struct Offer {
    uint64_t pid = 0, address = 0, cookieAddress = 0, cookie = 0;
  };

private:
  struct Frame;
  struct Peer {
    interp::host::ConnectionEnd out, in;
    bool ready = false;
    std::deque<std::shared_ptr<TaggedRequest>> sends; ///< in posting order
    std::deque<uint64_t> clears; ///< CTS frames to write: message ids
    std::deque<uint64_t> dones;  ///< DONE frames to write: message ids
    bool noSingleCopy = false;   ///< a read from it failed once
  };
  /// A message that arrived before a receive fits it.
  struct Waiting {
    int source = 0, tag = 0;
    uint64_t id = 0, bytes = 0;
    std::vector<std::byte> data; ///< an eager message's
    bool eager = false;
    bool offered = false; ///< a large one's RTS offered `offer`
    Offer offer;
  };
  /// A large message being received: where its DATA frames go.
  struct Incoming {
    std::shared_ptr<TaggedRequest> recv;
    uint64_t bytes = 0;
  };

  void run();
  bool progress(); ///< under the mutex: the failure check, then pass()
  void failAll(collResult_t result, const std::string &why); ///< under the mutex
  bool pass(); ///< one round over the peers; whether anything moved
  bool readFrom(int peer, Peer &p);
  bool writeTo(int peer, Peer &p);
  void arrived(int source, int tag, uint64_t id, uint64_t bytes, const std::byte *eager,
               bool isEager, const Offer *offer = nullptr);
  /// A receive matched to a large message: read it in one copy where
  /// `offer` allows, else ask for its DATA frames.
  void pull(const std::shared_ptr<TaggedRequest> &recv, int source, uint64_t id,
            uint64_t bytes, const Offer *offer);
  void deliver(TaggedRequest &recv, int source, int tag, uint64_t bytes);
  void complete(TaggedRequest &r, collResult_t result = collSuccess, std::string error = "");
  bool fits(const TaggedRequest &recv, int source, int tag) const;

  const int rank, nranks;
  const uint64_t slotBytes;
  const bool singleCopyOn;
  uint64_t cookie = 0; ///< this rank's, read by a peer before a single copy
  Ends ends;
  Failed failed;
  std::mutex mutex;
  std::condition_variable changed; ///< a request completed (for napping waiters)
  std::condition_variable work;    ///< the progress thread has requests to move
  unsigned napping = 0;            ///< waiters asleep on `changed`
  std::map<int, Peer> peers;
  std::deque<std::shared_ptr<TaggedRequest>> posted; ///< receives, in posting order
  std::deque<Waiting> waiting;                       ///< in arrival order
  std::map<std::pair<int, uint64_t>, Incoming> incoming; ///< by (source, id)
  uint64_t nextId = 1;
  uint64_t pending = 0; ///< requests not complete
  unsigned drivers = 0; ///< threads in wait(), which move the requests
  bool quit = false;
  std::thread thread;
};

} // namespace coll::rt

#endif // COLL_RUNTIME_TAGGED_H
