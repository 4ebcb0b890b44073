//===- Tagged.cpp - Point-to-point with tags, any source, any order -------===//
//
// Tagged.h says what travels and how messages match.
//
//===----------------------------------------------------------------------===//

#include "Tagged.h"

#include "coll/interpreter/Protocol.h"

#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <cstring>

namespace coll::rt {

using interp::FifoDepth;
using interp::host::ConnectionEnd;

/// The header of every frame.
struct TaggedEngine::Frame {
  enum Kind : uint32_t { Eager = 0x45414752, Rts = 0x52545320, Cts = 0x43545320, Data = 0x44415441 };
  uint32_t kind = 0;
  int32_t tag = 0;
  uint64_t id = 0;
  uint64_t bytes = 0;  ///< the whole message's
  uint64_t offset = 0; ///< DATA: where its payload goes
};
static_assert(sizeof(uint32_t) + sizeof(int32_t) + 3 * sizeof(uint64_t) ==
              TaggedEngine::HeaderBytes);

TaggedEngine::TaggedEngine(int rank, int nranks, uint64_t slotBytes, Ends ends, Failed failed)
    : rank(rank), nranks(nranks), slotBytes(slotBytes), ends(std::move(ends)),
      failed(std::move(failed)) {
  thread = std::thread([this] { run(); });
}

TaggedEngine::~TaggedEngine() { shutdown("the communicator was destroyed"); }

void TaggedEngine::shutdown(const std::string &why) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (quit)
      return;
    quit = true;
    failAll(collInvalidUsage, why);
  }
  changed.notify_all();
  if (thread.joinable())
    thread.join();
}

bool TaggedEngine::fits(const TaggedRequest &recv, int source, int tag) const {
  return (recv.peer == COLL_ANY_SOURCE || recv.peer == source) &&
         (recv.tag == COLL_ANY_TAG || recv.tag == tag);
}

void TaggedEngine::complete(TaggedRequest &r, collResult_t result, std::string error) {
  if (r.done)
    return;
  r.done = true;
  r.result = result;
  r.error = std::move(error);
  --pending;
  changed.notify_all();
}

void TaggedEngine::failAll(collResult_t result, const std::string &why) {
  for (auto &[peer, p] : peers) {
    for (auto &r : p.sends)
      complete(*r, result, why);
    p.sends.clear();
    p.clears.clear();
  }
  for (auto &r : posted)
    complete(*r, result, why);
  posted.clear();
  for (auto &[key, in] : incoming)
    complete(*in.recv, result, why);
  incoming.clear();
}

void TaggedEngine::deliver(TaggedRequest &recv, int source, int tag, uint64_t bytes) {
  recv.source = source;
  recv.gotTag = tag;
  recv.gotBytes = bytes;
  recv.truncated = bytes > recv.bytes;
}

/// A receive's error when its message does not fit its buffer (MPI's
/// MPI_ERR_TRUNCATE): nothing of the message is written.
static std::string truncation(const TaggedRequest &recv, int me) {
  return llvm::formatv("rank {0} sent {1} B with tag {2} to rank {3}, whose receive has room for "
                       "{4} B ({5} x {6}); nothing was written",
                       recv.source, recv.gotBytes, recv.gotTag, me, recv.bytes,
                       recv.bytes / interp::dataTypeSize(recv.type),
                       interp::dataTypeName(recv.type));
}

void TaggedEngine::arrived(int source, int tag, uint64_t id, uint64_t bytes,
                           const std::byte *eager, bool isEager) {
  std::shared_ptr<TaggedRequest> recv;
  for (auto it = posted.begin(); it != posted.end(); ++it)
    if (fits(**it, source, tag)) {
      recv = *it;
      posted.erase(it);
      break;
    }
  if (!recv) {
    Waiting w;
    w.source = source;
    w.tag = tag;
    w.id = id;
    w.bytes = bytes;
    w.eager = isEager;
    if (isEager && bytes)
      w.data.assign(eager, eager + bytes);
    waiting.push_back(std::move(w));
    return;
  }
  deliver(*recv, source, tag, bytes);
  if (isEager) {
    if (recv->truncated)
      return complete(*recv, collInvalidUsage, truncation(*recv, rank));
    if (bytes)
      std::memcpy(recv->to, eager, bytes);
    return complete(*recv);
  }
  peers[source].clears.push_back(id);
  incoming[{source, id}] = Incoming{recv, bytes};
}

llvm::Error TaggedEngine::post(const std::shared_ptr<TaggedRequest> &r) {
  // The connections first, outside the lock (making them may map memory
  // or reach the network proxy): a pair's both directions at once, for a
  // large message's CTS comes back on the other.
  std::vector<int> need;
  if (!r->send && r->peer == COLL_ANY_SOURCE) {
    for (int p = 0; p < nranks; ++p)
      if (p != rank)
        need.push_back(p);
  } else if (r->peer != rank) {
    need.push_back(r->peer);
  }
  for (int p : need) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (peers.count(p) && peers[p].ready)
        continue;
    }
    ConnectionEnd out, in;
    if (llvm::Error err = ends(p, out, in))
      return err;
    std::lock_guard<std::mutex> lock(mutex);
    Peer &peer = peers[p];
    if (!peer.ready) {
      peer.out = out;
      peer.in = in;
      peer.ready = true;
    }
  }
  std::unique_lock<std::mutex> lock(mutex);
  if (quit)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the communicator is being destroyed");
  ++pending;
  if (r->send) {
    r->id = nextId++;
    if (r->peer == rank) { // to itself: it arrives at once
      arrived(rank, r->tag, r->id, r->bytes, r->from, true);
      complete(*r);
      return llvm::Error::success();
    }
    peers[r->peer].sends.push_back(r);
  } else {
    auto found = waiting.begin();
    while (found != waiting.end() && !fits(*r, found->source, found->tag))
      ++found;
    if (found == waiting.end()) {
      posted.push_back(r);
    } else {
      Waiting w = std::move(*found);
      waiting.erase(found);
      deliver(*r, w.source, w.tag, w.bytes);
      if (w.eager) {
        if (r->truncated)
          complete(*r, collInvalidUsage, truncation(*r, rank));
        else {
          if (w.bytes)
            std::memcpy(r->to, w.data.data(), w.bytes);
          complete(*r);
        }
      } else {
        peers[w.source].clears.push_back(w.id);
        incoming[{w.source, w.id}] = Incoming{r, w.bytes};
      }
    }
  }
  changed.notify_all();
  return llvm::Error::success();
}

bool TaggedEngine::test(const TaggedRequest &r) {
  std::lock_guard<std::mutex> lock(mutex);
  return r.done;
}

void TaggedEngine::wait(const TaggedRequest &r) {
  std::unique_lock<std::mutex> lock(mutex);
  changed.wait(lock, [&] { return r.done; });
}

bool TaggedEngine::readFrom(int source, Peer &p) {
  ConnectionEnd &in = p.in;
  const uint64_t slot = in.shape.slotBytes;
  bool moved = false;
  for (;;) {
    const uint64_t seq = in.control->head.load(std::memory_order_relaxed);
    if (in.control->tail.load(std::memory_order_acquire) <= seq)
      return moved;
    const std::byte *s = in.fifo + (seq % FifoDepth) * slot;
    const uint64_t size = in.control->sizes[seq % FifoDepth].load(std::memory_order_relaxed);
    Frame f;
    bool good = size >= HeaderBytes && size <= slot;
    if (good)
      std::memcpy(&f, s, HeaderBytes);
    const uint64_t n = good ? size - HeaderBytes : 0;
    const std::byte *payload = s + HeaderBytes;
    if (good) {
      switch (f.kind) {
      case Frame::Eager:
        good = n == f.bytes;
        if (good)
          arrived(source, f.tag, f.id, f.bytes, payload, true);
        break;
      case Frame::Rts:
        good = n == 0;
        if (good)
          arrived(source, f.tag, f.id, f.bytes, nullptr, false);
        break;
      case Frame::Cts:
        for (auto &r : p.sends)
          if (r->id == f.id)
            r->cleared = true;
        break;
      case Frame::Data: {
        auto found = incoming.find({source, f.id});
        if (found == incoming.end())
          break; // its receive failed meanwhile
        Incoming &msg = found->second;
        TaggedRequest &recv = *msg.recv;
        good = f.offset + n <= msg.bytes && f.bytes == msg.bytes;
        if (!good)
          break;
        if (!recv.truncated && n)
          std::memcpy(recv.to + f.offset, payload, n);
        recv.received += n;
        if (recv.received == msg.bytes) {
          if (recv.truncated)
            complete(recv, collInvalidUsage, truncation(recv, rank));
          else
            complete(recv);
          incoming.erase(found);
        }
        break;
      }
      default:
        good = false;
      }
    }
    if (!good) {
      failAll(collInternalError,
              llvm::formatv("rank {0}: a malformed frame from rank {1} on the tagged "
                            "point-to-point connection (size {2}); every request fails",
                            rank, source, size));
      return true;
    }
    in.control->head.store(seq + 1, std::memory_order_release);
    in.peerBell->ring();
    moved = true;
  }
}

bool TaggedEngine::writeTo(int, Peer &p) {
  ConnectionEnd &out = p.out;
  const uint64_t slot = out.shape.slotBytes;
  bool moved = false;
  uint64_t seq = 0;
  auto claim = [&]() -> std::byte * {
    seq = out.control->tail.load(std::memory_order_relaxed);
    return out.slotFree(seq) ? out.fifo + (seq % FifoDepth) * slot : nullptr;
  };
  auto publish = [&](std::byte *s, const Frame &f, const std::byte *payload, uint64_t n) {
    std::memcpy(s, &f, HeaderBytes);
    if (n)
      std::memcpy(s + HeaderBytes, payload, n);
    out.control->sizes[seq % FifoDepth].store(static_cast<uint32_t>(HeaderBytes + n),
                                              std::memory_order_relaxed);
    out.control->tail.store(seq + 1, std::memory_order_release);
    out.peerBell->ring();
    moved = true;
  };
  while (!p.clears.empty()) {
    std::byte *s = claim();
    if (!s)
      return moved;
    Frame f;
    f.kind = Frame::Cts;
    f.id = p.clears.front();
    publish(s, f, nullptr, 0);
    p.clears.pop_front();
  }
  const uint64_t room = slot - HeaderBytes;
  for (auto it = p.sends.begin(); it != p.sends.end();) {
    TaggedRequest &r = **it;
    Frame f;
    f.tag = r.tag;
    f.id = r.id;
    f.bytes = r.bytes;
    if (!r.announced) {
      std::byte *s = claim();
      if (!s)
        return moved;
      r.announced = true;
      if (r.bytes <= room) {
        f.kind = Frame::Eager;
        publish(s, f, r.from, r.bytes);
        complete(r);
        it = p.sends.erase(it);
        continue;
      }
      f.kind = Frame::Rts;
      publish(s, f, nullptr, 0);
    }
    if (r.cleared) {
      while (r.sent < r.bytes) {
        std::byte *s = claim();
        if (!s)
          return moved;
        const uint64_t n = std::min(room, r.bytes - r.sent);
        f.kind = Frame::Data;
        f.offset = r.sent;
        publish(s, f, r.from + r.sent, n);
        r.sent += n;
      }
      complete(r);
      it = p.sends.erase(it);
      continue;
    }
    ++it; // waits for its CTS; the sends after it are announced meanwhile
  }
  return moved;
}

bool TaggedEngine::pass() {
  bool moved = false;
  for (auto &[peer, p] : peers) {
    if (!p.ready)
      continue;
    moved |= readFrom(peer, p);
    moved |= writeTo(peer, p);
  }
  return moved;
}

void TaggedEngine::run() {
  std::unique_lock<std::mutex> lock(mutex);
  unsigned idle = 0;
  while (!quit) {
    collResult_t kind = collSuccess;
    std::string why;
    if (pending && failed(kind, why))
      failAll(kind, why);
    if (pending && pass()) {
      idle = 0;
      continue;
    }
    // Nothing moved: spin a little (yielding the lock to posting threads),
    // then sleep in short naps while requests wait, long ones otherwise
    // (a post wakes the thread at once).
    if (pending && ++idle < 256) {
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    } else {
      changed.wait_for(lock, pending ? std::chrono::microseconds(50)
                                     : std::chrono::microseconds(20000));
    }
  }
}

} // namespace coll::rt
