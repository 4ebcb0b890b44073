//===- Bootstrap.cpp - Finding the other ranks -------------------------------===//

#include "coll/runtime/Bootstrap.h"

#include "coll/runtime/Debug.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

namespace coll::rt {

namespace {

constexpr char IdMagic[8] = {'C', 'O', 'L', 'L', 'U', 'I', 'D', '1'};
constexpr uint32_t HelloMagic = 0xc0115eedu;

struct Hello {
  uint32_t magic = HelloMagic;
  int32_t nranks = 0;
  uint64_t nonce = 0;
  PeerInfo info;
};

struct Reply {
  int32_t status = 0; ///< 0: the table follows; else an error
  char message[256] = {};
};

/// The first message on a ring connection.
struct RingHello {
  uint32_t magic = HelloMagic;
  int32_t rank = 0;
  uint64_t nonce = 0;
};

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Where rank `me` of the communicator being shrunk stands among the
/// survivors: its new rank.
llvm::Expected<int> survivorIndex(const std::vector<int> &survivors, int me) {
  auto at = std::find(survivors.begin(), survivors.end(), me);
  if (at == survivors.end())
    return fail(llvm::formatv("rank {0} is not among the survivors", me));
  return static_cast<int>(at - survivors.begin());
}

Deadline deadlineIn(std::chrono::milliseconds ms) { return std::chrono::steady_clock::now() + ms; }

SockAddr ringAddress(const PeerInfo &info) {
  SockAddr addr;
  if (info.ringFamily == 4) {
    auto *in = reinterpret_cast<sockaddr_in *>(&addr.storage);
    in->sin_family = AF_INET;
    std::memcpy(&in->sin_addr, info.ringAddr, 4);
    addr.length = sizeof(sockaddr_in);
  } else {
    auto *in6 = reinterpret_cast<sockaddr_in6 *>(&addr.storage);
    in6->sin6_family = AF_INET6;
    std::memcpy(&in6->sin6_addr, info.ringAddr, 16);
    addr.length = sizeof(sockaddr_in6);
  }
  addr.setPort(info.ringPort);
  return addr;
}

void setRingAddress(PeerInfo &info, const SockAddr &addr) {
  if (addr.storage.ss_family == AF_INET) {
    info.ringFamily = 4;
    std::memcpy(info.ringAddr, &reinterpret_cast<const sockaddr_in *>(&addr.storage)->sin_addr, 4);
  } else {
    info.ringFamily = 6;
    std::memcpy(info.ringAddr, &reinterpret_cast<const sockaddr_in6 *>(&addr.storage)->sin6_addr,
                16);
  }
  info.ringPort = addr.port();
}

/// Serves one communicator's bootstrap, then returns.
void serveRoot(Socket listener, uint64_t nonce) {
  const Deadline deadline = deadlineIn(bootstrapTimeout());
  int nranks = -1;
  std::vector<PeerInfo> table;
  std::vector<Socket> conns;
  std::vector<bool> seen;
  int arrived = 0;
  auto refuse = [&](const Socket &s, const std::string &why) {
    Reply reply;
    reply.status = 1;
    std::snprintf(reply.message, sizeof reply.message, "%s", why.c_str());
    llvm::consumeError(s.sendAll(&reply, sizeof reply, deadlineIn(std::chrono::seconds(5))));
  };
  while (nranks < 0 || arrived < nranks) {
    auto conn = listener.accept(deadline);
    if (!conn) {
      COLL_LOG(Warn, Init, -1,
               llvm::formatv("bootstrap root: {0} of {1} ranks arrived before the timeout "
                             "(COLL_BOOTSTRAP_TIMEOUT_MS); giving up",
                             arrived, nranks < 0 ? 0 : nranks));
      llvm::consumeError(conn.takeError());
      for (size_t r = 0; r < conns.size(); ++r)
        if (conns[r].valid())
          refuse(conns[r], llvm::formatv("only {0} of {1} ranks joined within the bootstrap "
                                         "timeout",
                                         arrived, nranks)
                               .str());
      return;
    }
    Hello hello;
    if (llvm::Error err = conn->recvAll(&hello, sizeof hello, deadlineIn(std::chrono::seconds(10)))) {
      llvm::consumeError(std::move(err));
      continue;
    }
    if (hello.magic != HelloMagic || hello.nonce != nonce) {
      refuse(*conn, "this id belongs to another communicator");
      continue;
    }
    if (nranks < 0) {
      nranks = hello.nranks;
      table.assign(nranks, PeerInfo{});
      conns.resize(nranks);
      seen.assign(nranks, false);
    }
    if (hello.nranks != nranks) {
      refuse(*conn, llvm::formatv("rank {0} says the communicator has {1} ranks; rank(s) before "
                                  "it said {2}",
                                  hello.info.rank, hello.nranks, nranks)
                        .str());
      continue;
    }
    int r = hello.info.rank;
    if (r < 0 || r >= nranks || seen[r]) {
      refuse(*conn, llvm::formatv("rank {0} joined twice or is out of range (nranks {1})", r,
                                  nranks)
                        .str());
      continue;
    }
    seen[r] = true;
    table[r] = hello.info;
    conns[r] = std::move(*conn);
    ++arrived;
  }
  Reply ok;
  for (int r = 0; r < nranks; ++r) {
    Deadline d = deadlineIn(std::chrono::seconds(30));
    if (llvm::Error err = conns[r].sendAll(&ok, sizeof ok, d))
      llvm::consumeError(std::move(err));
    else if (llvm::Error err = conns[r].sendAll(table.data(), table.size() * sizeof(PeerInfo), d))
      llvm::consumeError(std::move(err));
  }
}

/// Sends `out` to `to` while receiving `in` from `from`, without deadlock
/// for any size.
llvm::Error exchange(const Socket &to, const void *out, const Socket &from, void *in, size_t bytes,
                     Deadline deadline) {
  size_t sent = 0, got = 0;
  const char *o = static_cast<const char *>(out);
  char *i = static_cast<char *>(in);
  while (sent < bytes || got < bytes) {
    pollfd fds[2] = {{to.get(), short(sent < bytes ? POLLOUT : 0), 0},
                     {from.get(), short(got < bytes ? POLLIN : 0), 0}};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0)
      return fail("timed out in a bootstrap exchange with the neighbouring ranks");
    int rc = ::poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000)));
    if (rc < 0 && errno != EINTR)
      return fail(llvm::Twine("poll failed in the bootstrap: ") + std::strerror(errno));
    if (sent < bytes && (fds[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t n = ::send(to.get(), o + sent, bytes - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0)
        sent += static_cast<size_t>(n);
      else if (n < 0 && errno != EAGAIN && errno != EINTR)
        return fail("the next rank in the bootstrap ring closed its connection");
    }
    if (got < bytes && (fds[1].revents & (POLLIN | POLLERR | POLLHUP))) {
      ssize_t n = ::recv(from.get(), i + got, bytes - got, MSG_DONTWAIT);
      if (n > 0)
        got += static_cast<size_t>(n);
      else if (n == 0 || (errno != EAGAIN && errno != EINTR))
        return fail("the previous rank in the bootstrap ring closed its connection");
    }
  }
  return llvm::Error::success();
}

/// Connects this rank into a ring: to `nextInfo`'s listener (saying it is
/// `myRank` of the ring `nonce`), and accepts on `listener` the connection
/// of `prevRank` of the same ring. Connections that are not that one (a
/// stale attempt, another ring) are dropped.
llvm::Expected<Bootstrap::LivenessLinks> joinRing(const Socket &listener, const PeerInfo &nextInfo,
                                                  int myRank, int prevRank, uint64_t nonce,
                                                  Deadline deadline) {
  Bootstrap::LivenessLinks links;
  auto out = Socket::connect(ringAddress(nextInfo), deadline);
  if (!out)
    return fail(llvm::formatv("cannot connect to rank {0} at {1}: {2}", nextInfo.rank,
                              ringAddress(nextInfo).str(), llvm::toString(out.takeError()))
                    .str());
  RingHello mine;
  mine.rank = myRank;
  mine.nonce = nonce;
  if (llvm::Error err = out->sendAll(&mine, sizeof mine, deadline))
    return err;
  links.next = std::move(*out);
  while (!links.prev.valid()) {
    auto in = listener.accept(deadline);
    if (!in)
      return fail(llvm::formatv("rank {0} did not connect to this rank ({1}) in time: {2}",
                                prevRank, myRank, llvm::toString(in.takeError()))
                      .str());
    RingHello theirs;
    if (llvm::Error err = in->recvAll(&theirs, sizeof theirs, deadline)) {
      llvm::consumeError(std::move(err));
      continue;
    }
    if (theirs.magic == HelloMagic && theirs.nonce == nonce && theirs.rank == prevRank)
      links.prev = std::move(*in);
  }
  return links;
}

class TcpBootstrap final : public Bootstrap {
public:
  TcpBootstrap(int rank, int nranks, std::vector<PeerInfo> peers, Socket next, Socket prev,
               std::shared_ptr<Socket> listener)
      : next(std::move(next)), prev(std::move(prev)), listener(std::move(listener)) {
    myRank = rank;
    numRanks = nranks;
    table = std::move(peers);
  }

  llvm::Error allgather(void *data, size_t bytes) override {
    auto *base = static_cast<char *>(data);
    const Deadline deadline = deadlineIn(bootstrapTimeout());
    for (int s = 0; s < numRanks - 1; ++s) {
      int sendBlock = (myRank - s + numRanks) % numRanks;
      int recvBlock = (myRank - s - 1 + numRanks) % numRanks;
      if (llvm::Error err = exchange(next, base + size_t(sendBlock) * bytes, prev,
                                     base + size_t(recvBlock) * bytes, bytes, deadline))
        return err;
    }
    return llvm::Error::success();
  }

  llvm::Expected<LivenessLinks> connectLiveness(uint64_t nonce) override {
    if (numRanks == 1)
      return LivenessLinks{};
    return joinRing(*listener, table[(myRank + 1) % numRanks], myRank,
                    (myRank - 1 + numRanks) % numRanks, nonce, deadlineIn(bootstrapTimeout()));
  }

  llvm::Expected<std::unique_ptr<Bootstrap>> shrink(const std::vector<int> &survivors,
                                                    uint64_t nonce, PeerInfo self) override {
    const int n = static_cast<int>(survivors.size());
    auto found = survivorIndex(survivors, myRank);
    if (!found)
      return found.takeError();
    const int mine = *found;
    std::vector<PeerInfo> peers;
    for (int r : survivors)
      peers.push_back(table[static_cast<size_t>(r)]);
    LivenessLinks ring;
    if (n > 1) {
      // Each survivor names itself by its rank here, which its new
      // neighbour knows; the ring carries the new table.
      auto joined = joinRing(*listener, table[survivors[(mine + 1) % n]], myRank,
                             survivors[(mine - 1 + n) % n], nonce,
                             deadlineIn(bootstrapTimeout()));
      if (!joined)
        return joined.takeError();
      ring = std::move(*joined);
    }
    // The ring fields stay: the new communicator listens where this one does.
    self.rank = mine;
    self.ringFamily = table[myRank].ringFamily;
    std::memcpy(self.ringAddr, table[myRank].ringAddr, sizeof self.ringAddr);
    self.ringPort = table[myRank].ringPort;
    for (int i = 0; i < n; ++i)
      peers[static_cast<size_t>(i)].rank = i;
    peers[static_cast<size_t>(mine)] = self;
    auto boot = std::make_unique<TcpBootstrap>(mine, n, std::move(peers), std::move(ring.next),
                                               std::move(ring.prev), listener);
    std::vector<PeerInfo> fresh = boot->table;
    if (llvm::Error err = boot->allgather(fresh.data(), sizeof(PeerInfo)))
      return err;
    boot->table = std::move(fresh);
    return std::unique_ptr<Bootstrap>(std::move(boot));
  }

private:
  Socket next, prev;
  /// This rank's ring listener, kept for the liveness ring and for the
  /// rings of shrunk communicators, which share it.
  std::shared_ptr<Socket> listener;
};

} // namespace

void encodeUniqueId(const UniqueId &id, char out[128]) {
  std::memset(out, 0, 128);
  std::memcpy(out, IdMagic, 8);
  std::memcpy(out + 8, &id.nonce, 8);
  PeerInfo carrier;
  setRingAddress(carrier, id.root);
  out[16] = static_cast<char>(carrier.ringFamily);
  std::memcpy(out + 17, carrier.ringAddr, 16);
  std::memcpy(out + 33, &carrier.ringPort, 2);
}

llvm::Expected<UniqueId> decodeUniqueId(const char in[128]) {
  if (std::memcmp(in, IdMagic, 8) != 0)
    return fail("the unique id was not made by collGetUniqueId (or was not copied whole to "
                "every rank)");
  UniqueId id;
  std::memcpy(&id.nonce, in + 8, 8);
  PeerInfo carrier;
  carrier.ringFamily = static_cast<uint8_t>(in[16]);
  if (carrier.ringFamily != 4 && carrier.ringFamily != 6)
    return fail("the unique id holds no root address");
  std::memcpy(carrier.ringAddr, in + 17, 16);
  std::memcpy(&carrier.ringPort, in + 33, 2);
  id.root = ringAddress(carrier);
  return id;
}

std::chrono::milliseconds bootstrapTimeout() {
  if (const char *env = std::getenv("COLL_BOOTSTRAP_TIMEOUT_MS")) {
    char *end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v > 0)
      return std::chrono::milliseconds(v);
  }
  return std::chrono::milliseconds(300000);
}

llvm::Expected<UniqueId> startRoot(const SockAddr &address, uint64_t nonce) {
  SockAddr bound;
  auto listener = Socket::listen(address, bound);
  if (!listener)
    return listener.takeError();
  UniqueId id;
  std::random_device device;
  id.nonce = nonce ? nonce
                   : (uint64_t(device()) << 32) ^ device() ^
                         uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  id.root = bound;
  std::thread(serveRoot, std::move(*listener), id.nonce).detach();
  return id;
}

std::string hostName() {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0)
    return "unknown";
  return name;
}

uint64_t hostHash() {
  if (const char *env = std::getenv("COLL_HOSTID"); env && *env)
    return llvm::hash_value(llvm::StringRef(env)) | 1;
  std::string boot;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, boot);
  return llvm::hash_combine(hostName(), boot) | 1;
}

llvm::Error Bootstrap::barrier() {
  std::vector<char> bytes(static_cast<size_t>(numRanks), 0);
  return allgather(bytes.data(), 1);
}

llvm::Expected<std::unique_ptr<Bootstrap>> Bootstrap::shrink(const std::vector<int> &, uint64_t,
                                                             PeerInfo) {
  return fail("this communicator's ranks found each other through another library, which "
              "cannot leave ranks out");
}

llvm::Expected<std::unique_ptr<Bootstrap>> connectBootstrap(const UniqueId &id, int nranks,
                                                            int rank, PeerInfo self) {
  const Deadline deadline = deadlineIn(bootstrapTimeout());
  // This rank's ring listener, on the interface that reaches the root.
  auto local = bootstrapAddress();
  if (!local)
    return local.takeError();
  SockAddr listenOn = *local;
  if (listenOn.storage.ss_family != id.root.storage.ss_family) {
    // Prefer an address of the root's family.
    for (const Interface &iface : selectInterfaces(std::getenv("COLL_SOCKET_IFNAME")
                                                       ? std::getenv("COLL_SOCKET_IFNAME")
                                                       : ""))
      if (iface.address.storage.ss_family == id.root.storage.ss_family) {
        listenOn = iface.address;
        break;
      }
  }
  SockAddr bound;
  auto ringListener = Socket::listen(listenOn, bound);
  if (!ringListener)
    return ringListener.takeError();
  setRingAddress(self, bound);
  self.rank = rank;

  auto root = Socket::connect(id.root, deadline);
  if (!root)
    return fail("cannot reach the bootstrap root at " + id.root.str() + " (rank 0's "
                "collGetUniqueId): " + llvm::toString(root.takeError()));
  Hello hello;
  hello.nranks = nranks;
  hello.nonce = id.nonce;
  hello.info = self;
  if (llvm::Error err = root->sendAll(&hello, sizeof hello, deadline))
    return err;
  Reply reply;
  if (llvm::Error err = root->recvAll(&reply, sizeof reply, deadline))
    return fail("the bootstrap root at " + id.root.str() + " did not answer: " +
                llvm::toString(std::move(err)));
  if (reply.status != 0) {
    reply.message[sizeof reply.message - 1] = 0;
    return fail(llvm::Twine("the bootstrap root refused rank ") + llvm::Twine(rank) + ": " +
                reply.message);
  }
  std::vector<PeerInfo> peers(static_cast<size_t>(nranks));
  if (llvm::Error err = root->recvAll(peers.data(), peers.size() * sizeof(PeerInfo), deadline))
    return err;

  auto listener = std::make_shared<Socket>(std::move(*ringListener));
  Bootstrap::LivenessLinks ring;
  if (nranks > 1) {
    auto joined = joinRing(*listener, peers[(rank + 1) % nranks], rank,
                           (rank - 1 + nranks) % nranks, id.nonce, deadline);
    if (!joined)
      return joined.takeError();
    ring = std::move(*joined);
  }
  return std::unique_ptr<Bootstrap>(new TcpBootstrap(rank, nranks, std::move(peers),
                                                     std::move(ring.next), std::move(ring.prev),
                                                     std::move(listener)));
}

//===----------------------------------------------------------------------===//
// In-process bootstrap
//===----------------------------------------------------------------------===//

class LocalBootstrapGroup::Impl {
public:
  explicit Impl(int nranks) : nranks(nranks), table(static_cast<size_t>(nranks)) {}

  /// Every rank deposits `bytes` at its block; all return with every block.
  llvm::Error allgather(int rank, void *data, size_t bytes) {
    std::unique_lock<std::mutex> lock(mutex);
    const uint64_t round = generation;
    if (arrived == 0)
      buffer.assign(size_t(nranks) * bytes, 0);
    std::memcpy(buffer.data() + size_t(rank) * bytes, static_cast<char *>(data) + size_t(rank) * bytes,
                bytes);
    if (++arrived == nranks) {
      result = buffer;
      arrived = 0;
      ++generation;
      cv.notify_all();
    } else if (!cv.wait_for(lock, bootstrapTimeout(), [&] { return generation != round; })) {
      return fail("timed out waiting for the other ranks of this process");
    }
    std::memcpy(data, result.data(), size_t(nranks) * bytes);
    return llvm::Error::success();
  }

  const int nranks;
  std::vector<PeerInfo> table;
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<char> buffer, result;
  int arrived = 0;
  uint64_t generation = 0;
};

namespace {
class LocalBootstrap final : public Bootstrap {
public:
  LocalBootstrap(std::shared_ptr<LocalBootstrapGroup::Impl> group, int rank)
      : group(std::move(group)) {
    myRank = rank;
    numRanks = this->group->nranks;
  }
  llvm::Error allgather(void *data, size_t bytes) override {
    return group->allgather(myRank, data, bytes);
  }
  void setTable(std::vector<PeerInfo> peers) { table = std::move(peers); }

  /// The survivors meet in a group of their own, which the first to arrive
  /// makes (by `nonce`, which they share).
  llvm::Expected<std::unique_ptr<Bootstrap>> shrink(const std::vector<int> &survivors,
                                                    uint64_t nonce, PeerInfo self) override {
    const int n = static_cast<int>(survivors.size());
    auto found = survivorIndex(survivors, myRank);
    if (!found)
      return found.takeError();
    const int mine = *found;
    std::shared_ptr<LocalBootstrapGroup::Impl> shrunk;
    {
      static std::mutex mutex;
      static std::map<uint64_t, std::pair<std::shared_ptr<LocalBootstrapGroup::Impl>, int>> meeting;
      std::lock_guard<std::mutex> lock(mutex);
      auto &entry = meeting[nonce];
      if (!entry.first)
        entry.first = std::make_shared<LocalBootstrapGroup::Impl>(n);
      shrunk = entry.first;
      if (++entry.second == n)
        meeting.erase(nonce);
    }
    auto boot = std::make_unique<LocalBootstrap>(shrunk, mine);
    std::vector<PeerInfo> peers(static_cast<size_t>(n));
    peers[static_cast<size_t>(mine)] = self;
    peers[static_cast<size_t>(mine)].rank = mine;
    if (llvm::Error err = boot->allgather(peers.data(), sizeof(PeerInfo)))
      return err;
    boot->setTable(std::move(peers));
    return std::unique_ptr<Bootstrap>(std::move(boot));
  }

private:
  std::shared_ptr<LocalBootstrapGroup::Impl> group;
};
} // namespace

LocalBootstrapGroup::LocalBootstrapGroup(int nranks) : impl(std::make_shared<Impl>(nranks)) {}
LocalBootstrapGroup::~LocalBootstrapGroup() = default;

llvm::Expected<std::unique_ptr<Bootstrap>> LocalBootstrapGroup::join(int rank,
                                                                     const PeerInfo &self) {
  auto boot = std::make_unique<LocalBootstrap>(impl, rank);
  std::vector<PeerInfo> peers(static_cast<size_t>(impl->nranks));
  peers[rank] = self;
  peers[rank].rank = rank;
  if (llvm::Error err = boot->allgather(peers.data(), sizeof(PeerInfo)))
    return err;
  boot->setTable(std::move(peers));
  return std::unique_ptr<Bootstrap>(std::move(boot));
}

PeerInfo selfPeerInfo(uint64_t configHash) {
  PeerInfo info;
  info.pid = static_cast<int32_t>(getpid());
  info.hostHash = hostHash();
  info.processHash = llvm::hash_combine(info.hostHash, info.pid);
  info.configHash = configHash;
  // With COLL_HOSTID (tests: "hosts" of one machine) the name carries it.
  const char *hostId = std::getenv("COLL_HOSTID");
  std::snprintf(info.hostname, sizeof info.hostname, "%s%s%s", hostName().c_str(),
                hostId && *hostId ? "/" : "", hostId && *hostId ? hostId : "");
  return info;
}

} // namespace coll::rt
