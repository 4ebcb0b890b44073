//===- NetProxy.cpp - Connections to ranks on other hosts, over UCX -------===//

#include "coll/transport/NetProxy.h"

#include "coll/interpreter/Protocol.h"

#include "llvm/Support/FormatVariadic.h"

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include <linux/futex.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#if COLL_HAVE_UCX
#include <ucp/api/ucp.h>
#endif

namespace coll::transport {

using interp::FifoDepth;
using interp::host::ConnectionControl;
using interp::host::ConnectionEnd;
using interp::host::Doorbell;
using interp::host::FifoShape;
using Clock = std::chrono::steady_clock;

namespace {

llvm::Error netError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "UCX: " + message.str());
}

constexpr int MaxRanks = 1 << 14;
constexpr int MaxChannels = 1 << 8;
constexpr uint64_t KindData = 0, KindBye = 1, KindDevice = 2;
constexpr uint32_t MaxDevicePrograms = 1 << 10;

uint64_t tagOf(uint64_t kind, ir::Protocol protocol, int channel, int sender, int receiver,
               uint64_t seq) {
  return kind << 62 | (static_cast<uint64_t>(protocol) & 3) << 60 |
         (static_cast<uint64_t>(channel) & 0xFF) << 52 |
         (static_cast<uint64_t>(sender) & 0x3FFF) << 38 |
         (static_cast<uint64_t>(receiver) & 0x3FFF) << 24 | (seq & 0xFFFFFF);
}

/// A device connection's tag: the program (its executor) in place of the
/// protocol, which the program implies, and 16 bits of slot number (at most
/// FifoDepth slots of a connection are ever in flight).
uint64_t deviceTagOf(uint32_t program, int channel, int sender, int receiver, uint64_t seq) {
  return KindDevice << 62 | (static_cast<uint64_t>(program) & 0x3FF) << 52 |
         (static_cast<uint64_t>(channel) & 0xFF) << 44 |
         (static_cast<uint64_t>(sender) & 0x3FFF) << 30 |
         (static_cast<uint64_t>(receiver) & 0x3FFF) << 16 | (seq & 0xFFFF);
}

/// Bytes of a slot on the wire: the data and, for LL and LL128, its lines.
uint64_t wireBytes(ir::Protocol protocol, uint64_t dataBytes) {
  switch (protocol) {
  case ir::Protocol::LL: return interp::llLines(dataBytes) * interp::LLLineBytes;
  case ir::Protocol::LL128: return interp::ll128Lines(dataBytes) * interp::LL128LineWords * 8;
  default: return dataBytes;
  }
}

uint64_t slotStride(const FifoShape &shape) {
  return shape.protocol == ir::Protocol::Simple ? shape.slotBytes : shape.slotWords * 8;
}

} // namespace

#if COLL_HAVE_UCX

namespace {

/// One UCP context per process, shared by the workers of its communicators.
struct SharedContext {
  std::mutex mutex;
  ucp_context_h context = nullptr;
  int users = 0;
  uint64_t memoryTypes = 0;
};
SharedContext &sharedContext() {
  static SharedContext c;
  return c;
}

llvm::Expected<ucp_context_h> acquireContext() {
  SharedContext &c = sharedContext();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (!c.context) {
    ucp_config_t *config = nullptr;
    if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK)
      return netError(llvm::Twine("reading the configuration (UCX_* variables): ") +
                      ucs_status_string(s));
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    params.mt_workers_shared = 1;
    ucs_status_t s = ucp_init(&params, config, &c.context);
    ucp_config_release(config);
    if (s != UCS_OK)
      return netError(llvm::Twine("initialising: ") + ucs_status_string(s));
    ucp_context_attr_t attr{};
    attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    if (ucp_context_query(c.context, &attr) == UCS_OK)
      c.memoryTypes = attr.memory_types;
  }
  ++c.users;
  return c.context;
}

void releaseContext() {
  SharedContext &c = sharedContext();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (--c.users == 0) {
    ucp_cleanup(c.context);
    c.context = nullptr;
  }
}

void futexWait(std::atomic<uint32_t> &word, uint32_t seen, std::chrono::milliseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000),
              static_cast<long>(timeout.count() % 1000) * 1000000};
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAIT_PRIVATE, seen, &ts, nullptr,
          0);
}
void futexWake(std::atomic<uint32_t> &word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr,
          0);
}

} // namespace

class NetProxy::Impl {
public:
  struct Conn;
  /// What a completion callback needs: the connection and the slot.
  struct Pending {
    Conn *conn = nullptr;
    uint64_t seq = 0;
  };
  struct Conn {
    Impl *self = nullptr;
    int peer = -1;
    ConnectionEnd end; ///< a host end (null `control` for a device end)
    /// What the proxy reads and writes, in one shape for both kinds of end:
    /// a device end as given (device()), a host end's ConnectionControl
    /// and FIFO seen through the same fields (viewHostEnd()).
    NetProxy::DeviceEnd view;
    bool device = false;
    void viewHostEnd(bool outbound) {
      view.head = &end.control->head;
      view.tail = &end.control->tail;
      view.sizes = end.control->sizes;
      view.fifo = end.fifo;
      view.slotStride = slotStride(end.shape);
      view.protocol = end.shape.protocol;
      view.sender = end.sender;
      view.receiver = end.receiver;
      view.channel = end.channel;
      view.outbound = outbound;
    }
    uint64_t tag(uint64_t seq) const {
      const auto &v = view;
      return device ? deviceTagOf(v.program, v.channel, v.sender, v.receiver, seq)
                    : tagOf(KindData, v.protocol, v.channel, v.sender, v.receiver, seq);
    }
    void *mapping = nullptr; ///< outbound: the staging FIFO
    size_t mappingBytes = 0;
    std::vector<std::byte> bounce; ///< inbound LL/LL128: FifoDepth slots
    uint64_t posted = 0;    ///< sends or receives posted
    uint64_t published = 0; ///< head (outbound) or tail (inbound) published
    std::array<bool, FifoDepth> complete{};
    std::array<Pending, FifoDepth> pending{};
    std::array<void *, FifoDepth> requests{}; ///< to cancel at shutdown
    std::array<bool, FifoDepth> inFlight{};
  };
  struct Peer {
    Impl *self = nullptr;
    int rank = -1;
    ucp_ep_h ep = nullptr;
    bool byeReceived = false;
    void *byeRequest = nullptr;
    uint64_t byeWord = 0;
    Clock::time_point erroredAt{};
    ucs_status_t error = UCS_OK;
    bool reported = false;
  };

  Options opts;
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  int efd = -1;
  std::vector<uint8_t> address;
  std::vector<Peer> peers; ///< per rank
  std::vector<std::string> lanes;

  std::mutex connMutex;
  std::vector<std::unique_ptr<Conn>> added; ///< registered, not yet seen by the proxy
  std::atomic<bool> haveAdded{false};
  std::vector<std::unique_ptr<Conn>> conns; ///< the proxy thread's

  Doorbell bell; ///< the proxy's: local ends ring it
  std::atomic<uint32_t> armed{0};
  std::atomic<bool> quit{false};
  /// Outbound ends' (head, tail), for drain(), under connMutex.
  std::vector<std::pair<std::atomic<uint64_t> *, std::atomic<uint64_t> *>> outCounters;
  /// Device ends exist: the GPU does not ring the doorbell, so the proxy
  /// polls (proxyLoop).
  std::atomic<bool> polling{false};
  std::thread proxy, waker;
  bool failed = false;

  ~Impl() { shutdown(false); }

  //===--- Completions (called from ucp_worker_progress) ------------------===//

  /// Releases a completed request; the slot's pending entry when it
  /// succeeded, null when it was cancelled (shutdown) or failed (the peer
  /// is reported lost).
  static Pending *finish(void *request, ucs_status_t status, void *user) {
    auto *p = static_cast<Pending *>(user);
    Conn &c = *p->conn;
    const size_t idx = p->seq % FifoDepth;
    c.requests[idx] = nullptr;
    c.inFlight[idx] = false;
    ucp_request_free(request);
    if (status == UCS_OK)
      return p;
    if (status != UCS_ERR_CANCELED)
      c.self->lose(c.peer, status);
    return nullptr;
  }

  /// Marks slot `seq` done and publishes, in slot order, every done slot
  /// to `counter` (the sender's head, or the receiver's tail).
  static void publish(Conn &c, uint64_t seq, std::atomic<uint64_t> &counter) {
    c.complete[seq % FifoDepth] = true;
    while (c.complete[c.published % FifoDepth] && c.published < c.posted) {
      c.complete[c.published % FifoDepth] = false;
      ++c.published;
    }
    counter.store(c.published, std::memory_order_release);
    c.self->opts.engineBell->ring();
  }

  static void sendDone(void *request, ucs_status_t status, void *user) {
    if (Pending *p = finish(request, status, user))
      publish(*p->conn, p->seq, *p->conn->view.head);
  }

  static void recvDone(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                       void *user) {
    if (Pending *p = finish(request, status, user)) {
      deliver(*p->conn, p->seq, info->length);
      publish(*p->conn, p->seq, *p->conn->view.tail);
    }
  }

  /// Puts a received slot where the receiver looks for it, with the stores
  /// its protocol promises.
  static void deliver(Conn &c, uint64_t seq, size_t length) {
    const size_t idx = seq % FifoDepth;
    std::byte *slot = c.view.fifo + idx * c.view.slotStride;
    if (c.view.protocol == ir::Protocol::Simple) {
      c.view.sizes[idx].store(static_cast<uint32_t>(length), std::memory_order_relaxed);
      return; // received in place; `tail` publishes it
    }
    const auto *from = reinterpret_cast<const uint64_t *>(c.bounce.data() + idx * c.view.slotStride);
    auto *to = reinterpret_cast<std::atomic<uint64_t> *>(slot);
    const size_t words = length / 8;
    if (c.view.protocol == ir::Protocol::LL) {
      for (size_t w = 0; w < words; ++w)
        to[w].store(from[w], std::memory_order_relaxed);
    } else {
      for (size_t line = 0; line < words / interp::LL128LineWords; ++line) {
        const size_t base = line * interp::LL128LineWords;
        for (size_t w = 0; w < interp::LL128DataWords; ++w)
          to[base + w].store(from[base + w], std::memory_order_relaxed);
        to[base + interp::LL128FlagWord].store(from[base + interp::LL128FlagWord],
                                               std::memory_order_release);
      }
    }
  }

  static void byeDone(void *request, ucs_status_t status, const ucp_tag_recv_info_t *,
                      void *user) {
    auto *peer = static_cast<Peer *>(user);
    peer->byeRequest = nullptr;
    ucp_request_free(request);
    if (status == UCS_OK)
      peer->byeReceived = true;
  }

  static void epError(void *arg, ucp_ep_h, ucs_status_t status) {
    auto *peer = static_cast<Peer *>(arg);
    if (peer->error == UCS_OK) {
      peer->error = status;
      peer->erroredAt = Clock::now();
    }
  }

  //===--- The proxy loop --------------------------------------------------===//

  /// Posts slot `seq` of `c` with `start` (a send or a receive, given the
  /// request parameters); false when UCX refused it.
  template <class Start> bool postSlot(Conn &c, uint64_t seq, Start &&start) {
    const size_t idx = seq % FifoDepth;
    c.pending[idx] = {&c, seq};
    ucp_request_param_t param{};
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    if (c.view.outbound)
      param.cb.send = &sendDone;
    else
      param.cb.recv = &recvDone;
    param.user_data = &c.pending[idx];
    // Counted before the call: UCX may complete it (and call back) inside.
    ++c.posted;
    c.inFlight[idx] = true;
    ucs_status_ptr_t r = start(c.tag(seq), param);
    if (UCS_PTR_IS_ERR(r)) {
      lose(c.peer, UCS_PTR_STATUS(r));
      return false;
    }
    if (c.inFlight[idx])
      c.requests[idx] = r;
    return true;
  }

  /// Sends every slot the sender published; posts a receive for every free
  /// slot of the receiver's FIFO.
  bool post(Conn &c) {
    bool moved = false;
    const uint64_t stride = c.view.slotStride;
    if (c.view.outbound) {
      const uint64_t tail = c.view.tail->load(std::memory_order_acquire);
      while (c.posted < tail) {
        const size_t idx = c.posted % FifoDepth;
        const uint64_t bytes =
            wireBytes(c.view.protocol, c.view.sizes[idx].load(std::memory_order_relaxed));
        if (!postSlot(c, c.posted, [&](uint64_t tag, const ucp_request_param_t &param) {
              return ucp_tag_send_nbx(peers[c.peer].ep, c.view.fifo + idx * stride, bytes, tag,
                                      &param);
            }))
          return moved;
        moved = true;
      }
    } else {
      const uint64_t head = c.view.head->load(std::memory_order_acquire);
      while (c.posted < head + FifoDepth) {
        const size_t idx = c.posted % FifoDepth;
        std::byte *buffer = c.view.protocol == ir::Protocol::Simple
                                ? c.view.fifo + idx * stride
                                : c.bounce.data() + idx * stride;
        if (!postSlot(c, c.posted, [&](uint64_t tag, const ucp_request_param_t &param) {
              return ucp_tag_recv_nbx(worker, buffer, stride, tag, ~uint64_t(0), &param);
            }))
          return moved;
        moved = true;
      }
    }
    return moved;
  }

  /// A transfer with `peer` failed: reported like an endpoint error.
  void lose(int peer, ucs_status_t status) {
    Peer &p = peers[peer];
    if (p.error == UCS_OK) {
      p.error = status;
      p.erroredAt = Clock::now();
    }
  }

  /// Reports peers whose endpoint failed without a goodbye. A goodbye and
  /// the close that follows it arrive in order, but give the goodbye's
  /// completion a moment to be seen.
  void checkPeers() {
    for (Peer &p : peers) {
      if (p.error == UCS_OK || p.byeReceived || p.reported)
        continue;
      if (Clock::now() - p.erroredAt < std::chrono::milliseconds(200))
        continue;
      p.reported = true;
      failed = true;
      opts.peerLost(llvm::formatv("lost rank {0} on host {1}: the UCX connection from rank {2} "
                                  "failed ({3})",
                                  p.rank, opts.hostnames[p.rank], opts.rank,
                                  ucs_status_string(p.error))
                        .str());
    }
  }

  bool pump() {
    bool moved = false;
    if (haveAdded.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(connMutex);
      for (auto &c : added)
        conns.push_back(std::move(c));
      added.clear();
      haveAdded.store(false, std::memory_order_relaxed);
    }
    for (auto &c : conns)
      if (peers[c->peer].error == UCS_OK)
        moved |= post(*c);
    while (ucp_worker_progress(worker) != 0)
      moved = true;
    checkPeers();
    return moved;
  }

  void proxyLoop() {
    int idle = 0;
    while (!quit.load(std::memory_order_acquire)) {
      if (pump()) {
        idle = 0;
        continue;
      }
      if (++idle < 256) {
        interp::host::cpuRelax();
        continue;
      }
      if (polling.load(std::memory_order_relaxed)) {
        // A GPU fills and frees device ends without a doorbell: look again
        // soon (a slot waits at most this long once the proxy is idle).
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        continue;
      }
      const uint32_t seen = bell.enter();
      bool moved = pump();
      if (!moved && !quit.load(std::memory_order_acquire)) {
        ucs_status_t s = ucp_worker_arm(worker);
        if (s == UCS_OK) {
          armed.fetch_add(1, std::memory_order_release);
          futexWake(armed);
          // Sleep in slices: a peer's error grace period must end.
          bell.sleep(seen, std::chrono::milliseconds(50));
        }
      }
      bell.leave();
      idle = 0;
    }
  }

  void wakerLoop() {
    uint32_t last = armed.load(std::memory_order_acquire);
    while (!quit.load(std::memory_order_acquire)) {
      const uint32_t now = armed.load(std::memory_order_acquire);
      if (now == last) {
        futexWait(armed, now, std::chrono::milliseconds(50));
        continue;
      }
      pollfd p{efd, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) {
        last = now;
        bell.ring();
      }
    }
  }

  //===--- Shutdown --------------------------------------------------------===//

  /// Progresses until every request of `requests` is done or `deadline`
  /// passes, then releases them all (UCX frees one still in flight when it
  /// ends, which a forced close makes happen).
  void settle(std::vector<ucs_status_ptr_t> &requests, Clock::time_point deadline) {
    for (;;) {
      bool busy = false;
      for (ucs_status_ptr_t r : requests)
        if (r && !UCS_PTR_IS_ERR(r) && ucp_request_check_status(r) == UCS_INPROGRESS)
          busy = true;
      if (!busy || Clock::now() > deadline)
        break;
      ucp_worker_progress(worker);
    }
    for (ucs_status_ptr_t r : requests)
      if (r && !UCS_PTR_IS_ERR(r))
        ucp_request_free(r);
    requests.clear();
  }

  /// Stops the threads and closes every endpoint. `graceful`: this rank is
  /// healthy, so peers get a goodbye (delivered: the endpoint is flushed)
  /// before the close, and can tell it from a crash. Otherwise the close is
  /// immediate and the peers see a lost rank.
  void shutdown(bool graceful) {
    if (!worker)
      return;
    if (proxy.joinable()) {
      quit.store(true, std::memory_order_release);
      bell.ring();
      futexWake(armed);
      ucp_worker_signal(worker);
      proxy.join();
      waker.join();
    }
    graceful = graceful && !failed;
    std::vector<ucs_status_ptr_t> requests;
    if (graceful) {
      static const uint64_t word = 0;
      for (Peer &p : peers) {
        if (!p.ep || p.error != UCS_OK)
          continue;
        ucp_request_param_t param{};
        requests.push_back(ucp_tag_send_nbx(
            p.ep, &word, sizeof word,
            tagOf(KindBye, ir::Protocol::Simple, 0, opts.rank, p.rank, 0), &param));
        ucp_request_param_t flush{};
        requests.push_back(ucp_ep_flush_nbx(p.ep, &flush));
      }
      settle(requests, Clock::now() + std::chrono::seconds(2));
    }
    // A forced close never waits for the peer; what is still in flight on
    // the endpoint completes as cancelled.
    for (Peer &p : peers) {
      if (!p.ep)
        continue;
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_EP_CLOSE_FLAG_FORCE;
      requests.push_back(ucp_ep_close_nbx(p.ep, &param));
      p.ep = nullptr;
    }
    settle(requests, Clock::now() + std::chrono::seconds(1));
    // Receives still posted (slots and goodbyes) are cancelled: their
    // callbacks see UCS_ERR_CANCELED and free them.
    for (auto &c : conns)
      for (size_t i = 0; i < FifoDepth; ++i)
        if (c->inFlight[i] && c->requests[i])
          ucp_request_cancel(worker, c->requests[i]);
    for (Peer &p : peers)
      if (p.byeRequest)
        ucp_request_cancel(worker, p.byeRequest);
    for (int i = 0; i < 100; ++i)
      ucp_worker_progress(worker);
    for (auto &c : conns)
      if (c->mapping)
        ::munmap(c->mapping, c->mappingBytes);
    {
      std::lock_guard<std::mutex> lock(connMutex);
      for (auto &c : added)
        if (c->mapping)
          ::munmap(c->mapping, c->mappingBytes);
    }
    ucp_worker_destroy(worker);
    worker = nullptr;
    releaseContext();
  }
};

bool NetProxy::available() { return true; }

llvm::Expected<std::unique_ptr<NetProxy>> NetProxy::create(Options options) {
  if (options.nranks > MaxRanks)
    return netError(llvm::formatv("{0} ranks: the network proxy's tags name at most {1}",
                                  options.nranks, MaxRanks));
  auto impl = std::make_unique<Impl>();
  impl->opts = std::move(options);
  auto context = acquireContext();
  if (!context)
    return context.takeError();
  impl->context = *context;
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  if (ucs_status_t s = ucp_worker_create(impl->context, &wp, &impl->worker); s != UCS_OK) {
    releaseContext();
    return netError(llvm::Twine("creating a worker: ") + ucs_status_string(s));
  }
  // From here the Impl's destructor releases what exists.
  if (ucs_status_t s = ucp_worker_get_efd(impl->worker, &impl->efd); s != UCS_OK)
    return netError(llvm::Twine("the worker's event descriptor: ") + ucs_status_string(s));
  ucp_worker_attr_t wa{};
  wa.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS | UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS;
  wa.address_flags = UCP_WORKER_ADDRESS_FLAG_NET_ONLY; // shared memory never reaches a peer
  if (ucs_status_t s = ucp_worker_query(impl->worker, &wa); s != UCS_OK)
    return netError(llvm::Twine("the worker's address: ") + ucs_status_string(s));
  const auto *bytes = reinterpret_cast<const uint8_t *>(wa.address);
  impl->address.assign(bytes, bytes + wa.address_length);
  ucp_worker_release_address(impl->worker, wa.address);
  impl->peers.resize(static_cast<size_t>(impl->opts.nranks));
  impl->lanes.resize(static_cast<size_t>(impl->opts.nranks));
  for (int r = 0; r < impl->opts.nranks; ++r) {
    impl->peers[r].self = impl.get();
    impl->peers[r].rank = r;
  }
  return std::unique_ptr<NetProxy>(new NetProxy(std::move(impl)));
}

NetProxy::NetProxy(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
NetProxy::~NetProxy() = default;

const std::vector<uint8_t> &NetProxy::address() const { return impl->address; }
Doorbell &NetProxy::doorbell() { return impl->bell; }

llvm::Error NetProxy::connect(const std::vector<std::vector<uint8_t>> &addresses) {
  Impl &m = *impl;
  for (int r = 0; r < m.opts.nranks; ++r) {
    if (!m.opts.remote[r])
      continue;
    Impl::Peer &p = m.peers[r];
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t *>(addresses[r].data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = &Impl::epError;
    ep.err_handler.arg = &p;
    if (ucs_status_t s = ucp_ep_create(m.worker, &ep, &p.ep); s != UCS_OK)
      return netError(llvm::formatv("connecting rank {0} to rank {1} on host {2}: {3}",
                                    m.opts.rank, r, m.opts.hostnames[r], ucs_status_string(s)));
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                         UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = &Impl::byeDone;
    param.user_data = &p;
    ucs_status_ptr_t bye = ucp_tag_recv_nbx(
        m.worker, &p.byeWord, sizeof p.byeWord,
        tagOf(KindBye, ir::Protocol::Simple, 0, r, m.opts.rank, 0), ~uint64_t(0), &param);
    if (UCS_PTR_IS_ERR(bye))
      return netError(llvm::Twine("posting a receive: ") + ucs_status_string(UCS_PTR_STATUS(bye)));
    p.byeRequest = bye;
    // What carries it, for COLL_DEBUG: the lanes UCX chose.
    char *text = nullptr;
    size_t size = 0;
    if (FILE *f = open_memstream(&text, &size)) {
      ucp_ep_print_info(p.ep, f);
      std::fclose(f);
      std::string lanes;
      for (llvm::StringRef line : llvm::split(llvm::StringRef(text, size), '\n')) {
        // "#   lane[0]:  8:tcp/eth0.0 md[4] ... "
        size_t at = line.find("lane[");
        if (at == llvm::StringRef::npos)
          continue;
        llvm::StringRef rest = line.substr(at).split(':').second.trim();
        rest = rest.split(' ').first;
        rest = rest.substr(rest.find(':') + 1);
        if (!rest.empty() && lanes.find(rest.str()) == std::string::npos)
          lanes += (lanes.empty() ? "" : ", ") + rest.str();
      }
      std::free(text);
      m.lanes[r] = lanes.empty() ? "UCX (lanes not yet chosen)" : "UCX " + lanes;
    }
  }
  m.proxy = std::thread([&m] { m.proxyLoop(); });
  m.waker = std::thread([&m] { m.wakerLoop(); });
  return llvm::Error::success();
}

llvm::Expected<ConnectionEnd> NetProxy::outbound(int receiver, int channel,
                                                 const FifoShape &shape) {
  Impl &m = *impl;
  if (receiver < 0 || receiver >= m.opts.nranks || !m.opts.remote[receiver])
    return netError(llvm::formatv("rank {0} is not on another host", receiver));
  if (channel < 0 || channel >= MaxChannels)
    return netError(llvm::formatv("channel {0}: the network proxy's tags name at most {1}",
                                  channel, MaxChannels));
  auto c = std::make_unique<Impl::Conn>();
  c->self = &m;
  c->peer = receiver;
  c->mappingBytes = shape.totalBytes();
  void *memory = ::mmap(nullptr, c->mappingBytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED)
    return netError(llvm::formatv("{0} B for a staging FIFO: {1}", c->mappingBytes,
                                  std::strerror(errno)));
  c->mapping = memory;
  c->end = ConnectionEnd::bind(memory, shape, &m.bell, m.opts.rank, receiver, channel);
  c->viewHostEnd(/*outbound=*/true);
  ConnectionEnd end = c->end;
  std::lock_guard<std::mutex> lock(m.connMutex);
  m.outCounters.push_back({c->view.head, c->view.tail});
  m.added.push_back(std::move(c));
  m.haveAdded.store(true, std::memory_order_release);
  m.bell.ring();
  return end;
}

llvm::Error NetProxy::inbound(const ConnectionEnd &end) {
  Impl &m = *impl;
  if (end.sender < 0 || end.sender >= m.opts.nranks || !m.opts.remote[end.sender])
    return netError(llvm::formatv("rank {0} is not on another host", end.sender));
  if (end.channel < 0 || end.channel >= MaxChannels)
    return netError(llvm::formatv("channel {0}: the network proxy's tags name at most {1}",
                                  end.channel, MaxChannels));
  auto c = std::make_unique<Impl::Conn>();
  c->self = &m;
  c->peer = end.sender;
  c->end = end;
  c->viewHostEnd(/*outbound=*/false);
  if (end.shape.protocol != ir::Protocol::Simple)
    c->bounce.resize(FifoDepth * slotStride(end.shape));
  std::lock_guard<std::mutex> lock(m.connMutex);
  m.added.push_back(std::move(c));
  m.haveAdded.store(true, std::memory_order_release);
  m.bell.ring();
  return llvm::Error::success();
}

llvm::Error NetProxy::device(const DeviceEnd &end) {
  Impl &m = *impl;
  const int peer = end.outbound ? end.receiver : end.sender;
  if (peer < 0 || peer >= m.opts.nranks || !m.opts.remote[peer])
    return netError(llvm::formatv("rank {0} is not on another host", peer));
  if (end.channel < 0 || end.channel >= MaxChannels)
    return netError(llvm::formatv("channel {0}: the network proxy's tags name at most {1}",
                                  end.channel, MaxChannels));
  if (end.program >= MaxDevicePrograms)
    return netError(llvm::formatv("a communicator's {0}th program on device buffers across "
                                  "hosts: the network proxy's tags name at most {1}",
                                  end.program + 1, MaxDevicePrograms));
  if (end.protocol == ir::Protocol::LL128)
    return netError("LL128 does not cross hosts (its FIFOs are in host memory)");
  auto c = std::make_unique<Impl::Conn>();
  c->self = &m;
  c->peer = peer;
  c->view = end;
  c->device = true;
  // What this end's counters say already (an executor reused after a stop
  // starts from them).
  c->posted = c->published = end.outbound ? c->view.head->load() : c->view.tail->load();
  if (!end.outbound && end.protocol != ir::Protocol::Simple)
    c->bounce.resize(FifoDepth * end.slotStride);
  std::lock_guard<std::mutex> lock(m.connMutex);
  if (end.outbound)
    m.outCounters.push_back({c->view.head, c->view.tail});
  m.added.push_back(std::move(c));
  m.haveAdded.store(true, std::memory_order_release);
  m.polling.store(true, std::memory_order_relaxed);
  m.bell.ring();
  return llvm::Error::success();
}

bool NetProxy::drain(std::chrono::milliseconds timeout) {
  Impl &m = *impl;
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    bool drained = true;
    {
      std::lock_guard<std::mutex> lock(m.connMutex);
      for (auto [head, tail] : m.outCounters)
        if (head->load(std::memory_order_acquire) != tail->load(std::memory_order_acquire))
          drained = false;
    }
    if (drained)
      return true;
    if (Clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void NetProxy::close(bool graceful) { impl->shutdown(graceful); }

std::string NetProxy::describePeer(int peer) const { return impl->lanes[peer]; }

std::string NetProxy::describe() const {
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  const bool cuda = sharedContext().memoryTypes & UCS_BIT(UCS_MEMORY_TYPE_CUDA);
  return llvm::formatv("UCX {0}.{1}.{2}, {3}", major, minor, release,
                       cuda ? "with CUDA memory support"
                            : "host memory only (built without CUDA support: device buffers "
                              "would be staged through host memory)")
      .str();
}

#else // !COLL_HAVE_UCX

class NetProxy::Impl {};

bool NetProxy::available() { return false; }
llvm::Expected<std::unique_ptr<NetProxy>> NetProxy::create(Options) {
  return netError("this build of Coll has no UCX (install libucx-dev and rebuild): ranks on "
                  "other hosts cannot be reached");
}
NetProxy::NetProxy(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
NetProxy::~NetProxy() = default;
const std::vector<uint8_t> &NetProxy::address() const {
  static const std::vector<uint8_t> none;
  return none;
}
llvm::Error NetProxy::connect(const std::vector<std::vector<uint8_t>> &) {
  return netError("no UCX in this build");
}
llvm::Expected<ConnectionEnd> NetProxy::outbound(int, int, const FifoShape &) {
  return netError("no UCX in this build");
}
llvm::Error NetProxy::inbound(const ConnectionEnd &) { return netError("no UCX in this build"); }
llvm::Error NetProxy::device(const DeviceEnd &) { return netError("no UCX in this build"); }
Doorbell &NetProxy::doorbell() {
  static Doorbell none;
  return none;
}
bool NetProxy::drain(std::chrono::milliseconds) { return true; }
void NetProxy::close(bool) {}
std::string NetProxy::describePeer(int) const { return "no UCX in this build"; }
std::string NetProxy::describe() const { return "no UCX in this build"; }

#endif // COLL_HAVE_UCX

} // namespace coll::transport

