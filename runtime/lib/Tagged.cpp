//===- Tagged.cpp - Point-to-point with tags, any source, any order -------===//
//
// Tagged.h says what travels and how messages match.
//
//===----------------------------------------------------------------------===//

#include "Tagged.h"

#include "coll/interpreter/Protocol.h"

#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>

#include <sys/uio.h>
#include <unistd.h>

namespace coll::rt {

using interp::FifoDepth;
using interp::host::ConnectionEnd;

/// The header of every frame.
struct TaggedEngine::Frame {
  enum Kind : uint32_t {
    Eager = 0x45414752,
    Rts = 0x52545320,
    Cts = 0x43545320,
    Data = 0x44415441,
    Done = 0x444f4e45, ///< a single copy read the message: the send is complete
  };
  uint32_t kind = 0;
  int32_t tag = 0;
  uint64_t id = 0;
  uint64_t bytes = 0;  ///< the whole message's
  uint64_t offset = 0; ///< DATA: where its payload goes
};
static_assert(sizeof(uint32_t) + sizeof(int32_t) + 3 * sizeof(uint64_t) ==
              TaggedEngine::HeaderBytes);

TaggedEngine::TaggedEngine(int rank, int nranks, uint64_t slotBytes, Ends ends, Failed failed)
    : rank(rank), nranks(nranks), slotBytes(slotBytes), singleCopyOn([] {
        const char *v = std::getenv("COLL_P2P_SINGLE_COPY");
        return !v || std::strcmp(v, "0") != 0;
      }()),
      ends(std::move(ends)), failed(std::move(failed)) {
  std::random_device random;
  cookie = (uint64_t(random()) << 32) ^ random() ^ uint64_t(getpid());
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
  work.notify_all();
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
  if (napping)
    changed.notify_all();
}

void TaggedEngine::failAll(collResult_t result, const std::string &why) {
  for (auto &[peer, p] : peers) {
    for (auto &r : p.sends)
      complete(*r, result, why);
    p.sends.clear();
    p.clears.clear();
    p.dones.clear();
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

/// Reads `bytes` at `offer.address` in the offering process into `to`,
/// once the cookie there is the one offered: whether it did.
static bool readAcross(const TaggedEngine::Offer &offer, std::byte *to, uint64_t bytes) {
  const pid_t pid = static_cast<pid_t>(offer.pid);
  uint64_t seen = 0;
  iovec local{&seen, sizeof seen};
  iovec remote{reinterpret_cast<void *>(offer.cookieAddress), sizeof seen};
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != ssize_t(sizeof seen) ||
      seen != offer.cookie)
    return false; // not this host's process, or not allowed to read it
  for (uint64_t done = 0; done < bytes;) {
    iovec l{to + done, bytes - done};
    iovec r{reinterpret_cast<void *>(offer.address + done), bytes - done};
    const ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n <= 0)
      return false;
    done += uint64_t(n);
  }
  return true;
}

void TaggedEngine::pull(const std::shared_ptr<TaggedRequest> &recv, int source, uint64_t id,
                        uint64_t bytes, const Offer *offer) {
  Peer &p = peers[source];
  if (offer && singleCopyOn && !p.noSingleCopy) {
    if (recv->truncated) { // nothing is read; the send completes
      p.dones.push_back(id);
      return complete(*recv, collInvalidUsage, truncation(*recv, rank));
    }
    if (readAcross(*offer, recv->to, bytes)) {
      p.dones.push_back(id);
      return complete(*recv);
    }
    p.noSingleCopy = true; // and through the FIFO from now on
  }
  p.clears.push_back(id);
  incoming[{source, id}] = Incoming{recv, bytes};
}

void TaggedEngine::arrived(int source, int tag, uint64_t id, uint64_t bytes,
                           const std::byte *eager, bool isEager, const Offer *offer) {
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
    if (offer) {
      w.offered = true;
      w.offer = *offer;
    }
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
  pull(recv, source, id, bytes, offer);
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
    Peer &to = peers[r->peer];
    to.sends.push_back(r);
    writeTo(r->peer, to); // at once where there is room (an eager send completes)
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
        pull(r, w.source, w.id, w.bytes, w.offered ? &w.offer : nullptr);
        writeTo(w.source, peers[w.source]); // its CTS or DONE at once
      }
    }
  }
  return llvm::Error::success();
}

bool TaggedEngine::progress() {
  if (!pending || quit)
    return false;
  collResult_t kind = collSuccess;
  std::string why;
  if (failed(kind, why)) {
    failAll(kind, why);
    return true;
  }
  return pass();
}

bool TaggedEngine::test(const TaggedRequest &r) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!r.done)
    progress();
  return r.done;
}

/// How long a thread that moved nothing spins (yielding) before it naps.
static constexpr auto SpinFor = std::chrono::microseconds(2000);
static constexpr auto Nap = std::chrono::microseconds(50);
/// How soon the progress thread takes up requests nobody waits for.
static constexpr auto Idle = std::chrono::microseconds(1000);

void TaggedEngine::wait(const TaggedRequest &r) {
  std::unique_lock<std::mutex> lock(mutex);
  ++drivers;
  auto lastMoved = std::chrono::steady_clock::now();
  while (!r.done) {
    if (progress()) {
      lastMoved = std::chrono::steady_clock::now();
      continue;
    }
    if (std::chrono::steady_clock::now() - lastMoved < SpinFor) {
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    } else {
      ++napping;
      changed.wait_for(lock, Nap);
      --napping;
    }
  }
  --drivers;
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
      case Frame::Rts: {
        good = n == 0 || n == sizeof(Offer);
        Offer offer;
        if (n == sizeof(Offer))
          std::memcpy(&offer, payload, sizeof offer);
        if (good)
          arrived(source, f.tag, f.id, f.bytes, nullptr, false, n ? &offer : nullptr);
        break;
      }
      case Frame::Cts:
        for (auto &r : p.sends)
          if (r->id == f.id)
            r->cleared = true;
        break;
      case Frame::Done:
        for (auto it = p.sends.begin(); it != p.sends.end(); ++it)
          if ((*it)->id == f.id) {
            complete(**it);
            p.sends.erase(it);
            break;
          }
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
  for (auto [queue, kind] : {std::pair{&p.clears, Frame::Cts}, std::pair{&p.dones, Frame::Done}})
    while (!queue->empty()) {
      std::byte *s = claim();
      if (!s)
        return moved;
      Frame f;
      f.kind = kind;
      f.id = queue->front();
      publish(s, f, nullptr, 0);
      queue->pop_front();
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
      if (singleCopyOn) { // the receiver may read it straight from here
        Offer offer{uint64_t(getpid()), reinterpret_cast<uint64_t>(r.from),
                    reinterpret_cast<uint64_t>(&cookie), cookie};
        publish(s, f, reinterpret_cast<const std::byte *>(&offer), sizeof offer);
      } else {
        publish(s, f, nullptr, 0);
      }
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
    // Posts and waits do not wake the thread (a wake costs the poster a
    // system call and the peer a core): it looks again within Idle.
    if (drivers || !pending) { // a waiting thread moves everything meanwhile
      work.wait_for(lock, Idle);
      idle = 0;
      continue;
    }
    if (progress()) {
      idle = 0;
      continue;
    }
    // Nothing moved: spin a little (yielding the lock to posting threads),
    // then sleep in short naps while requests wait for a peer.
    if (++idle < 256) {
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    } else {
      work.wait_for(lock, Nap);
    }
  }
}

} // namespace coll::rt
