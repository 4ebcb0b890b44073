//===- PointToPoint.cpp - Sends and receives --------------------------------===//
//
// A group's sends and receives between two ranks share one Simple
// connection per direction (the channel after the algorithms' channels): a
// message is a 16-byte header (bytes, type) and its data, slot by slot.
//
//===----------------------------------------------------------------------===//

#include "CommImpl.h"

#include <cstring>

namespace coll::rt {

namespace {

void runP2P(void *arg) {
  P2PTask &t = *static_cast<P2PTask *>(arg);
  Communicator::Impl &c = *t.comm;
  ConnectionEnd &e = t.end;
  const auto watchdog = std::chrono::milliseconds(c.config.watchdogMs);
  auto stopping = [&] { return c.stop->stopping(); };
  const uint64_t slot = e.shape.slotBytes;
  constexpr uint64_t Header = 16;
  auto wait = [&](auto &&ready, const char *what) {
    auto r = interp::host::waitUntil(ready, stopping, watchdog);
    if (r == interp::host::WaitResult::TimedOut)
      c.stop->stall(llvm::formatv("watchdog: no progress for {0} ms: rank {1} {2} rank {3} "
                                  "(point to point; sender filled {4} slots, receiver freed {5})",
                                  c.config.watchdogMs, c.rank, what, t.peer,
                                  e.control->tail.load(std::memory_order_relaxed),
                                  e.control->head.load(std::memory_order_relaxed)));
    return r == interp::host::WaitResult::Ready;
  };
  for (const Op *op : t.ops) {
    const uint64_t bytes = op->count * interp::dataTypeSize(op->type);
    uint64_t done = 0;
    bool first = true;
    while (first || done < bytes) {
      if (t.sending) {
        uint64_t seq = e.control->tail.load(std::memory_order_relaxed);
        if (!wait([&] { return e.slotFree(seq); }, "sending to"))
          return;
        std::byte *s = e.fifo + (seq % interp::FifoDepth) * slot;
        uint64_t room = first ? slot - Header : slot;
        uint64_t n = std::min(room, bytes - done);
        if (first) {
          uint64_t header[2] = {bytes, static_cast<uint64_t>(op->type)};
          std::memcpy(s, header, Header);
          s += Header;
        }
        std::memcpy(s, static_cast<const std::byte *>(op->send) + done, n);
        done += n;
        e.control->sizes[seq % interp::FifoDepth].store(
            static_cast<uint32_t>(first ? n + Header : n), std::memory_order_relaxed);
        e.control->tail.store(seq + 1, std::memory_order_release);
        e.peerBell->ring();
      } else {
        uint64_t seq = e.control->head.load(std::memory_order_relaxed);
        if (!wait([&] { return e.control->tail.load(std::memory_order_acquire) > seq; },
                  "receiving from"))
          return;
        const std::byte *s = e.fifo + (seq % interp::FifoDepth) * slot;
        uint64_t room = first ? slot - Header : slot;
        if (first) {
          uint64_t header[2];
          std::memcpy(header, s, Header);
          if (header[0] != bytes) {
            c.stop->fail(collInvalidUsage,
                         llvm::formatv("rank {0} sent {1} B to rank {2}, which posted a receive "
                                       "of {3} B ({4} x {5}); counts and types must match",
                                       t.peer, header[0], c.rank, bytes, op->count,
                                       interp::dataTypeName(op->type)));
            return;
          }
          s += Header;
        }
        uint64_t n = std::min(room, bytes - done);
        std::memcpy(static_cast<std::byte *>(op->recv) + done, s, n);
        done += n;
        e.control->head.store(seq + 1, std::memory_order_release);
        e.peerBell->ring();
      }
      first = false;
    }
  }
  t.ok = true;
}

} // namespace

llvm::Error prepareP2P(Communicator::Impl &c, llvm::ArrayRef<Op> ops,
                       std::vector<std::unique_ptr<P2PTask>> &p2p,
                       llvm::SmallVectorImpl<Task> &tasks) {
  std::map<int, std::vector<const Op *>> sends, recvs;
  for (const Op &op : ops)
    (op.kind == OpKind::Send ? sends : recvs)[op.root].push_back(&op);
  // To itself: match in order and copy.
  auto &selfSends = sends[c.rank];
  auto &selfRecvs = recvs[c.rank];
  if (selfSends.size() != selfRecvs.size())
    return collError(collInvalidUsage,
                     llvm::formatv("rank {0} posted {1} sends and {2} receives to itself in one "
                                   "group; they must pair up",
                                   c.rank, selfSends.size(), selfRecvs.size()));
  for (size_t i = 0; i < selfSends.size(); ++i) {
    uint64_t sb = selfSends[i]->count * interp::dataTypeSize(selfSends[i]->type);
    uint64_t rb = selfRecvs[i]->count * interp::dataTypeSize(selfRecvs[i]->type);
    if (sb != rb)
      return collError(collInvalidUsage,
                       llvm::formatv("rank {0} sends {1} B to itself but receives {2} B", c.rank,
                                     sb, rb));
    if (sb)
      std::memmove(selfRecvs[i]->recv, selfSends[i]->send, sb);
  }
  sends.erase(c.rank);
  recvs.erase(c.rank);
  for (int direction = 0; direction < 2; ++direction) {
    auto &byPeer = direction == 0 ? sends : recvs;
    for (auto &[peer, list] : byPeer) {
      auto found = c.p2pEnds.find(peer);
      if (found == c.p2pEnds.end()) {
        auto out = c.connectionEnd(c.rank, peer, c.p2pChannel, ir::Protocol::Simple);
        if (!out)
          return collError(collInvalidUsage, llvm::toString(out.takeError()));
        auto in = c.connectionEnd(peer, c.rank, c.p2pChannel, ir::Protocol::Simple);
        if (!in)
          return collError(collInvalidUsage, llvm::toString(in.takeError()));
        found = c.p2pEnds.emplace(peer, std::make_pair(*out, *in)).first;
      }
      auto task = std::make_unique<P2PTask>();
      task->comm = &c;
      task->sending = direction == 0;
      task->peer = peer;
      task->end = direction == 0 ? found->second.first : found->second.second;
      task->ops = list;
      tasks.push_back(Task{&runP2P, task.get()});
      COLL_LOG(Trace, P2P, c.rank,
               llvm::formatv("{0} {1} message(s) {2} rank {3}", task->sending ? "send" : "receive",
                             list.size(), task->sending ? "to" : "from", peer));
      p2p.push_back(std::move(task));
    }
  }
  return llvm::Error::success();
}

namespace {

llvm::Error cudaFailure(int result, const char *what, const Op &op) {
  return collError(collUnhandledCudaError,
                   llvm::formatv("{0} of a {1} on CUDA device {2} failed with CUDA error {3} "
                                 "(Coll stages point-to-point calls on device buffers through "
                                 "host memory, synchronizing the caller's stream, which a CUDA "
                                 "graph capture does not allow)",
                                 what, opKindName(op.kind), op.device, result));
}

} // namespace

llvm::Expected<llvm::ArrayRef<Communicator::Unit>>
DeviceP2PStaging::stageIn(llvm::ArrayRef<Communicator::Unit> given) {
  bool any = false;
  for (const Communicator::Unit &u : given)
    for (const Op &op : u.ops)
      any |= op.pointToPoint() && op.device >= 0;
  if (!any)
    return given;
  auto backend = gpuBackend();
  if (!backend)
    return collError(collInvalidUsage, "point-to-point on device buffers: " +
                                           llvm::toString(backend.takeError()));
  ops.reserve(given.size());
  for (const Communicator::Unit &u : given) {
    std::vector<Op> &mine = ops.emplace_back(u.ops.begin(), u.ops.end());
    for (Op &op : mine) {
      if (!op.pointToPoint() || op.device < 0)
        continue;
      // The caller's earlier work on the stream first, as the call would
      // wait for it there.
      if (int r = synchronizeCudaStream(op.stream))
        return cudaFailure(r, "synchronizing the stream", op);
      const uint64_t bytes = op.count * interp::dataTypeSize(op.type);
      auto copy = std::make_unique<Copy>();
      copy->host.resize(std::max<uint64_t>(bytes, 1));
      copy->ordinal = op.device;
      copy->stream = op.stream;
      if (op.kind == OpKind::Send) {
        if (bytes > 0) {
          if (llvm::Error err = (*backend)->copyOnStream(copy->host.data(), op.send, bytes,
                                                         op.stream, op.device))
            return collError(collUnhandledCudaError,
                             "copying a send's device buffer to the host: " +
                                 llvm::toString(std::move(err)));
          if (int r = synchronizeCudaStream(op.stream))
            return cudaFailure(r, "copying the send's data to the host", op);
        }
        op.send = copy->host.data();
      } else {
        copy->device = op.recv;
        op.recv = copy->host.data();
      }
      op.device = -1;
      op.stream = nullptr;
      copies.push_back(std::move(copy));
    }
    units.push_back({u.comm, mine});
  }
  return llvm::ArrayRef<Communicator::Unit>(units);
}

llvm::Error DeviceP2PStaging::stageOut() {
  if (copies.empty())
    return llvm::Error::success();
  auto backend = gpuBackend();
  if (!backend)
    return backend.takeError();
  for (const std::unique_ptr<Copy> &c : copies) {
    if (!c->device)
      continue; // a send's
    if (llvm::Error err = (*backend)->copyOnStream(c->device, c->host.data(), c->host.size(),
                                                   c->stream, c->ordinal))
      return collError(collUnhandledCudaError, "copying a receive's data to its device buffer: " +
                                                   llvm::toString(std::move(err)));
  }
  for (const std::unique_ptr<Copy> &c : copies)
    if (c->device)
      if (int r = synchronizeCudaStream(c->stream))
        return collError(collUnhandledCudaError,
                         llvm::formatv("copying a receive's data to CUDA device {0} failed with "
                                       "CUDA error {1}",
                                       c->ordinal, r));
  return llvm::Error::success();
}

} // namespace coll::rt

namespace coll::rt {

llvm::Expected<std::shared_ptr<TaggedEngine>> Communicator::tagged() {
  Impl &c = *impl;
  std::lock_guard<std::mutex> lock(c.taggedMutex);
  if (c.taggedEngine)
    return c.taggedEngine;
  if (c.config.slotBytes[0] < 2 * TaggedEngine::HeaderBytes)
    return collError(collInvalidUsage,
                     llvm::formatv("tagged point-to-point needs Simple slots of at least {0} B; "
                                   "COLL_SIMPLE_SLOT_BYTES is {1}",
                                   2 * TaggedEngine::HeaderBytes, c.config.slotBytes[0]));
  auto ends = [&c](int peer, ConnectionEnd &out, ConnectionEnd &in) -> llvm::Error {
    auto o = c.connectionEnd(c.rank, peer, c.taggedChannel(), ir::Protocol::Simple);
    if (!o)
      return collError(collInvalidUsage, llvm::toString(o.takeError()));
    auto i = c.connectionEnd(peer, c.rank, c.taggedChannel(), ir::Protocol::Simple);
    if (!i)
      return collError(collInvalidUsage, llvm::toString(i.takeError()));
    out = *o;
    in = *i;
    return llvm::Error::success();
  };
  // The communicator's failures end the requests: a peer lost, a revoke,
  // an abort, a failed call (the host's first report).
  auto failed = [&c](collResult_t &kind, std::string &why) {
    if (!c.stop || !c.stop->raised())
      return false;
    kind = collRemoteError;
    why = c.stop->firstReport();
    if (why.empty())
      why = "the communicator failed";
    return true;
  };
  c.taggedEngine = std::make_shared<TaggedEngine>(c.rank, c.nranks, c.config.slotBytes[0],
                                                  std::move(ends), std::move(failed));
  COLL_LOG(Info, P2P, c.rank,
           llvm::formatv("tagged point-to-point: a progress thread; messages up to {0} B go "
                         "eagerly, larger ones when their receive is posted",
                         c.taggedEngine->eagerBytes()));
  return c.taggedEngine;
}

} // namespace coll::rt
