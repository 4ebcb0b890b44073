//===- Liveness.cpp - Finding a lost rank, revoke and shrink ----------------===//
//
// docs/RUNTIME.md, "Lost ranks". Each communicator whose ranks live in more
// than one process watches them from a thread of its own:
//   - the other processes of this host through pidfds, which become
//     readable when the process exits;
//   - its two neighbours on the liveness ring (connections made at
//     creation that carry nothing but 8-byte notices): a process that dies
//     closes its sockets, so the end of stream arrives without the goodbye
//     that a destroy sends first.
// Whoever sees a loss first breaks its communicator and passes the notice
// on both ways around the ring; each rank acts on a notice once. A revoke
// and an abort travel the same way.
//
//===----------------------------------------------------------------------===//

#include "CommImpl.h"

#include "llvm/ADT/Hashing.h"

#include <cerrno>
#include <csignal>
#include <cstring>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace coll::rt {

namespace {

struct Notice {
  char kind = 0;
  char pad[3] = {};
  int32_t rank = -1;
};
static_assert(sizeof(Notice) == 8, "a notice is 8 bytes on the wire");

} // namespace

Liveness::Liveness(Communicator::Impl &c, Bootstrap::LivenessLinks ring, int next, int prev)
    : c(c) {
  links[0].socket = std::move(ring.next);
  links[0].rank = next;
  links[1].socket = std::move(ring.prev);
  links[1].rank = prev;
  wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread = std::thread([this] { run(); });
}

Liveness::~Liveness() {
  sendBoth(Goodbye, c.rank);
  if (wake >= 0) {
    uint64_t one = 1;
    if (::write(wake, &one, sizeof one) < 0)
      COLL_LOG(Warn, Coll, c.rank, "destroy: cannot wake the liveness watch");
  }
  if (thread.joinable())
    thread.join();
  if (wake >= 0)
    ::close(wake);
}

void Liveness::sendBoth(Kind kind, int rank) {
  std::lock_guard<std::mutex> lock(sendMutex);
  Notice n;
  n.kind = kind;
  n.rank = rank;
  // 8 bytes into a socket that carries a handful: never blocks. A link
  // whose peer is gone fails, which is no news.
  for (Link &l : links)
    if (l.socket.valid())
      (void)::send(l.socket.get(), &n, sizeof n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void Liveness::announce(Kind kind, int rank) {
  {
    std::lock_guard<std::mutex> lock(sendMutex);
    if (!seen.insert({kind, rank}).second)
      return;
  }
  sendBoth(kind, rank);
}

void Liveness::notice(Kind kind, int rank, const std::string &why) {
  {
    std::lock_guard<std::mutex> lock(sendMutex);
    if (!seen.insert({kind, rank}).second)
      return;
  }
  COLL_LOG(Info, Coll, c.rank, "rank " + std::to_string(c.rank) + ": " + why);
  if (kind != Death) {
    c.lose(collRemoteError, why, rank);
    sendBoth(kind, rank);
    return;
  }
  // A death: the communicator breaks at once (no call starts on it, and
  // collCommGetAsyncError says so), and the notice goes on. A call in
  // flight may still complete: the dead rank may have done its part of it
  // before it died (its data are in shared memory), as NCCL's kernels
  // complete then. A call that waits for it ends at its own check (a dead
  // process of this host, a lost connection), or, at the latest, when the
  // grace period is over, at the stop word.
  c.stop->record(collRemoteError, why, rank);
  c.breakFor(collRemoteError, why);
  sendBoth(kind, rank);
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(DeathGraceMs);
  while (c.inCall.load(std::memory_order_acquire) != 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (c.inCall.load(std::memory_order_acquire) != 0)
    c.lose(collRemoteError, why, rank);
}

bool Liveness::leftOnPurpose(int pid) const {
  // Every rank of the process destroyed its communicator first.
  if (!c.transport)
    return false;
  const auto &local = c.transport->localRanks();
  bool any = false;
  for (size_t i = 0; i < local.size(); ++i)
    if (local[i].pid == pid) {
      any = true;
      if (!c.transport->slot(static_cast<int>(i)).left.load(std::memory_order_acquire))
        return false;
    }
  return any;
}

void Liveness::run() {
  auto describe = [&](int rank) {
    const PeerInfo &p = c.peers[static_cast<size_t>(rank)];
    return llvm::formatv("rank {0} (process {1} on {2})", rank, p.pid, p.hostname).str();
  };
  std::vector<bool> gone(c.watched.size(), false);
  std::vector<pollfd> fds;
  std::vector<int> what; // -1 the wake, -2 - i link i, else watched[k]
  for (;;) {
    fds.clear();
    what.clear();
    fds.push_back({wake, POLLIN, 0});
    what.push_back(-1);
    for (int i = 0; i < 2; ++i)
      if (links[i].socket.valid()) {
        fds.push_back({links[i].socket.get(), POLLIN, 0});
        what.push_back(-2 - i);
      }
    bool polling = false; // a process without a pidfd: looked at every 100 ms
    for (size_t k = 0; k < c.watched.size(); ++k) {
      if (gone[k])
        continue;
      if (c.watched[k].pidfd >= 0) {
        fds.push_back({c.watched[k].pidfd, POLLIN, 0});
        what.push_back(static_cast<int>(k));
      } else {
        polling = true;
      }
    }
    int rc = ::poll(fds.data(), fds.size(), polling ? 100 : -1);
    if (rc < 0 && errno != EINTR) {
      COLL_LOG(Warn, Coll, c.rank,
               std::string("the liveness watch stops: poll failed: ") + std::strerror(errno));
      return;
    }
    if (rc > 0 && fds[0].revents)
      return;
    for (size_t f = 1; rc > 0 && f < fds.size(); ++f) {
      if (!fds[f].revents)
        continue;
      if (what[f] >= 0) {
        const auto k = static_cast<size_t>(what[f]);
        gone[k] = true;
        if (!leftOnPurpose(c.watched[k].pid))
          notice(Death, c.watched[k].rank, describe(c.watched[k].rank) + " exited");
        continue;
      }
      Link &l = links[-2 - what[f]];
      for (;;) {
        ssize_t n = ::recv(l.socket.get(), l.buffer + l.got, sizeof l.buffer - l.got, MSG_DONTWAIT);
        if (n > 0) {
          l.got += static_cast<size_t>(n);
          if (l.got < sizeof l.buffer)
            continue;
          l.got = 0;
          Notice got;
          std::memcpy(&got, l.buffer, sizeof got);
          if (got.rank < 0 || got.rank >= c.nranks)
            continue;
          switch (got.kind) {
          case Goodbye:
            l.leaving = true;
            break;
          case Death:
            notice(Death, got.rank, describe(got.rank) + " exited (seen by another rank)");
            break;
          case Revoke:
            notice(Revoke, got.rank,
                   llvm::formatv("rank {0} revoked the communicator", got.rank).str());
            break;
          case Abort:
            notice(Abort, got.rank,
                   llvm::formatv("rank {0} aborted the communicator", got.rank).str());
            break;
          default:
            break;
          }
          continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
          break;
        // The end of the stream: a goodbye before it is a destroy.
        const bool leaving = l.leaving;
        const int rank = l.rank;
        {
          std::lock_guard<std::mutex> lock(sendMutex);
          l.socket = Socket();
        }
        if (!leaving)
          notice(Death, rank,
                 describe(rank) + " exited: its liveness connection closed without a goodbye "
                                  "(the process died, or its host is unreachable)");
        break;
      }
    }
    if (polling)
      for (size_t k = 0; k < c.watched.size(); ++k)
        if (!gone[k] && c.watched[k].pidfd < 0 && c.watched[k].pid > 0 &&
            ::kill(c.watched[k].pid, 0) != 0 && errno == ESRCH) {
          gone[k] = true;
          if (!leftOnPurpose(c.watched[k].pid))
            notice(Death, c.watched[k].rank, describe(c.watched[k].rank) + " exited");
        }
  }
}

void Communicator::Impl::lose(collResult_t result, const std::string &why, int subject) {
  // Kernels in flight, on a GPU or the emulation, poll the host's stop
  // word (KernelParams::hostStop) and stop at it. (Not the runners'
  // abort(), which collCommAbort uses: it writes a flag the kernel reads
  // from another thread, which the emulation does with a plain memset.)
  stop->failAll(result, why, subject);
  breakFor(result, why);
}

void Communicator::Impl::breakFor(collResult_t result, const std::string &why) {
  // The host's first failure is the cause (a peer's abort that follows a
  // death, say, is not), as every rank of the host reports it. The message
  // is in place before the error is: a thread that sees the error and asks
  // for the last error (under errorMutex) gets it.
  const std::string first = stop->raised() ? stop->firstReport() : std::string();
  std::lock_guard<std::mutex> lock(errorMutex);
  if (asyncError.load(std::memory_order_acquire) != collSuccess)
    return;
  std::string before = std::move(lastError);
  lastError = first.empty() ? why : first;
  int expected = collSuccess;
  if (!asyncError.compare_exchange_strong(expected, result))
    lastError = std::move(before); // another failure broke it first
}

llvm::Error Communicator::Impl::startLiveness() {
  auto links = boot->connectLiveness(llvm::hash_combine(nonce, 0x11feu) | 1);
  if (!links)
    return collError(collRemoteError,
                     "the liveness ring: " + llvm::toString(links.takeError()));
  if (!links->next.valid() && !links->prev.valid() && watched.empty())
    return llvm::Error::success(); // nothing to watch
  liveness = std::make_unique<Liveness>(*this, std::move(*links), (rank + 1) % nranks,
                                        (rank - 1 + nranks) % nranks);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Revoke, abort, shrink, grow
//===----------------------------------------------------------------------===//

void Communicator::revoke() {
  const std::string why = llvm::formatv("rank {0} revoked the communicator", impl->rank);
  impl->lose(collRemoteError, why, impl->rank);
  if (impl->liveness)
    impl->liveness->announce(Liveness::Revoke, impl->rank);
  // A call in flight on another thread sees the stop word at once.
  for (int i = 0; impl->inCall.load(std::memory_order_acquire) != 0 && i < 100000; ++i)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
}

llvm::Expected<std::unique_ptr<Communicator>>
Communicator::shrink(const std::vector<int> &exclude, const Config &config, bool abortFirst) {
  Impl &c = *impl;
  if (abortFirst) {
    c.lose(collRemoteError,
           llvm::formatv("rank {0} shrank the communicator, ending the calls in flight", c.rank),
           c.rank);
    for (int i = 0; c.inCall.load(std::memory_order_acquire) != 0 && i < 100000; ++i)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  std::vector<int> survivors;
  for (int r = 0; r < c.nranks; ++r)
    if (std::find(exclude.begin(), exclude.end(), r) == exclude.end())
      survivors.push_back(r);
  uint64_t nonce = llvm::hash_combine(c.nonce, ++c.shrinks, survivors.size());
  for (int r : survivors)
    nonce = llvm::hash_combine(nonce, r);
  nonce |= 1;
  PeerInfo self = c.peers[static_cast<size_t>(c.rank)];
  self.configHash = config.agreedHash();
  auto boot = c.boot->shrink(survivors, nonce, self);
  if (!boot)
    return collError(collRemoteError, llvm::formatv("shrink to {0} ranks: {1}", survivors.size(),
                                                    llvm::toString(boot.takeError())));
  return create(std::move(*boot), config, nonce);
}

llvm::Expected<std::unique_ptr<Communicator>> Communicator::grow(int nranks, const char *id,
                                                                 const Config &config) {
  Impl &c = *impl;
  // The root's id reaches every rank of this communicator; the others'
  // blocks stay zero.
  std::vector<std::array<char, 128>> ids(static_cast<size_t>(c.nranks));
  for (auto &block : ids)
    block.fill(0);
  if (id)
    std::memcpy(ids[static_cast<size_t>(c.rank)].data(), id, 128);
  if (llvm::Error err = c.boot->allgather(ids.data(), 128))
    return collError(collRemoteError, "grow: " + llvm::toString(std::move(err)));
  int root = -1;
  for (int r = 0; r < c.nranks; ++r)
    if (std::any_of(ids[r].begin(), ids[r].end(), [](char b) { return b != 0; })) {
      if (root >= 0)
        return collError(collInvalidUsage,
                         llvm::formatv("grow: ranks {0} and {1} both passed a unique id; only "
                                       "the root passes one",
                                       root, r));
      root = r;
    }
  if (root < 0)
    return collError(collInvalidUsage, "grow: no rank passed the unique id (the root, which "
                                       "made it with collCommGetUniqueId, passes it)");
  auto decoded = decodeUniqueId(ids[static_cast<size_t>(root)].data());
  if (!decoded)
    return collError(collInvalidArgument, "grow: " + llvm::toString(decoded.takeError()));
  PeerInfo self = c.peers[static_cast<size_t>(c.rank)];
  self.configHash = config.agreedHash();
  auto boot = connectBootstrap(*decoded, nranks, c.rank, self);
  if (!boot)
    return collError(collRemoteError, "grow: " + llvm::toString(boot.takeError()));
  return create(std::move(*boot), config, decoded->nonce);
}

} // namespace coll::rt
