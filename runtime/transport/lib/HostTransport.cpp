//===- HostTransport.cpp - Connections between the ranks of a host ----------===//

#include "coll/transport/HostTransport.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <new>

namespace coll::transport {

using interp::FifoDepth;
using interp::host::ConnectionControl;
using interp::host::ConnectionEnd;
using interp::host::Doorbell;
using interp::host::FifoShape;

namespace {
constexpr uint64_t ControlMagic = 0xc011c7a1c0de0001ull;

uint64_t roundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

int protoIndex(ir::Protocol p) { return static_cast<int>(p); }
} // namespace

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

uint64_t FifoLayout::connectionBytes(ir::Protocol p) const {
  auto shape = FifoShape::of(p, slotBytes[protoIndex(p)]);
  if (!shape) {
    llvm::consumeError(shape.takeError());
    return 0;
  }
  return roundUp(shape->totalBytes(), 4096);
}

uint64_t FifoLayout::segmentBytes() const {
  uint64_t total = 0;
  for (int p = 0; p < 3; ++p)
    if (used[p])
      total += connectionBytes(static_cast<ir::Protocol>(p)) * uint64_t(channels) * uint64_t(nranks);
  return std::max<uint64_t>(total, 4096);
}

uint64_t FifoLayout::offset(ir::Protocol proto, int channel, int sender) const {
  uint64_t base = 0;
  for (int p = 0; p < protoIndex(proto); ++p)
    if (used[p])
      base += connectionBytes(static_cast<ir::Protocol>(p)) * uint64_t(channels) * uint64_t(nranks);
  return base + connectionBytes(proto) * (uint64_t(channel) * uint64_t(nranks) + uint64_t(sender));
}

//===----------------------------------------------------------------------===//
// In-process jobs
//===----------------------------------------------------------------------===//

class HostTransport::Job {
public:
  std::mutex mutex;
  std::map<int, Segment> receive; ///< by local index
  Segment control;
};

namespace {
std::mutex jobsMutex;
std::map<uint64_t, std::shared_ptr<HostTransport::Job>> jobs;
} // namespace

//===----------------------------------------------------------------------===//
// HostTransport
//===----------------------------------------------------------------------===//

std::string HostTransport::segmentName(uint64_t nonce, int rank) {
  return llvm::formatv("/coll-{0:x16}-r{1}", nonce, rank).str();
}
std::string HostTransport::controlName(uint64_t nonce) {
  return llvm::formatv("/coll-{0:x16}-ctl", nonce).str();
}

size_t HostTransport::controlBytes(int nlocal, int nprocs) {
  return sizeof(ControlHeader) + sizeof(Doorbell) * size_t(nprocs) +
         sizeof(RankSlot) * size_t(nlocal);
}

HostTransport::~HostTransport() = default;

llvm::Expected<std::unique_ptr<HostTransport>>
HostTransport::create(uint64_t nonce, const FifoLayout &layout, std::vector<LocalRank> local,
                      int me, int nprocs, bool inProcess) {
  std::unique_ptr<HostTransport> t(new HostTransport());
  t->nonce = nonce;
  t->layout = layout;
  t->local = std::move(local);
  t->me = me;
  t->nprocs = nprocs;
  t->inProcess = inProcess;
  const size_t ctlBytes = controlBytes(static_cast<int>(t->local.size()), nprocs);

  auto initControl = [&](Segment &seg) {
    auto *header = new (seg.data()) ControlHeader();
    header->magic = ControlMagic;
    header->nlocal = static_cast<int32_t>(t->local.size());
    header->nprocs = nprocs;
    auto *bells = reinterpret_cast<Doorbell *>(static_cast<char *>(seg.data()) + sizeof(ControlHeader));
    for (int p = 0; p < nprocs; ++p)
      new (&bells[p]) Doorbell(/*shared=*/!inProcess);
    auto *slots = reinterpret_cast<RankSlot *>(bells + nprocs);
    for (size_t i = 0; i < t->local.size(); ++i) {
      RankSlot *slot = new (&slots[i]) RankSlot();
      slot->rank = t->local[i].rank;
      slot->proc = t->local[i].proc;
      slot->pid = t->local[i].pid;
    }
  };

  if (inProcess) {
    std::shared_ptr<Job> job;
    {
      std::lock_guard<std::mutex> lock(jobsMutex);
      auto &entry = jobs[nonce];
      if (!entry)
        entry = std::make_shared<Job>();
      job = entry;
    }
    t->job = job;
    std::lock_guard<std::mutex> lock(job->mutex);
    if (me == 0) {
      auto seg = Segment::anonymous(ctlBytes);
      if (!seg)
        return seg.takeError();
      initControl(*seg);
      job->control = std::move(*seg);
    }
    auto seg = Segment::anonymous(layout.segmentBytes());
    if (!seg)
      return seg.takeError();
    job->receive[me] = std::move(*seg);
    return t;
  }

  if (me == 0) {
    auto seg = Segment::create(controlName(nonce), ctlBytes);
    if (!seg)
      return seg.takeError();
    if (llvm::Error err = seg->commit(0, ctlBytes))
      return err;
    initControl(*seg);
    t->controlSeg = std::move(*seg);
  }
  t->receive.resize(t->local.size());
  auto seg = Segment::create(segmentName(nonce, t->local[me].rank), layout.segmentBytes());
  if (!seg)
    return seg.takeError();
  t->receive[me] = std::move(*seg);
  return t;
}

llvm::Error HostTransport::attach() {
  const size_t ctlBytes = controlBytes(static_cast<int>(local.size()), nprocs);
  if (inProcess) {
    std::lock_guard<std::mutex> lock(job->mutex);
    if (!job->control.valid() || job->receive.size() != local.size())
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "the ranks of this process did not all set up their "
                                     "connections");
    return llvm::Error::success();
  }
  if (me != 0) {
    auto seg = Segment::open(controlName(nonce), ctlBytes);
    if (!seg)
      return seg.takeError();
    controlSeg = std::move(*seg);
  }
  if (control().magic != ControlMagic)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the control segment %s is not Coll's (stale name?)",
                                   controlName(nonce).c_str());
  for (size_t i = 0; i < local.size(); ++i) {
    if (static_cast<int>(i) == me)
      continue;
    auto seg = Segment::open(segmentName(nonce, local[i].rank), layout.segmentBytes());
    if (!seg)
      return seg.takeError();
    receive[i] = std::move(*seg);
  }
  return llvm::Error::success();
}

void HostTransport::unlinkNames() {
  if (inProcess) {
    std::lock_guard<std::mutex> lock(jobsMutex);
    auto found = jobs.find(nonce);
    if (found != jobs.end() && found->second == job)
      jobs.erase(found);
    return;
  }
  controlSeg.unlink();
  receive[me].unlink();
}

void HostTransport::removeNames(uint64_t nonce, const std::vector<LocalRank> &local) {
  {
    std::lock_guard<std::mutex> lock(jobsMutex);
    jobs.erase(nonce);
  }
  unlinkSegment(controlName(nonce));
  for (const LocalRank &l : local)
    unlinkSegment(segmentName(nonce, l.rank));
}

ControlHeader &HostTransport::control() {
  void *base = inProcess ? job->control.data() : controlSeg.data();
  return *static_cast<ControlHeader *>(base);
}

Doorbell &HostTransport::doorbell(int proc) {
  auto *bells = reinterpret_cast<Doorbell *>(reinterpret_cast<char *>(&control()) +
                                             sizeof(ControlHeader));
  return bells[proc];
}

RankSlot &HostTransport::slot(int localIndex) {
  auto *slots = reinterpret_cast<RankSlot *>(&doorbell(0) + nprocs);
  return slots[localIndex];
}

int HostTransport::localIndexOf(int rank) const {
  for (size_t i = 0; i < local.size(); ++i)
    if (local[i].rank == rank)
      return static_cast<int>(i);
  return -1;
}

bool HostTransport::isLocal(int rank) const { return localIndexOf(rank) >= 0; }

const Segment *HostTransport::receiveSegment(int localIndex) const {
  if (inProcess) {
    std::lock_guard<std::mutex> lock(job->mutex);
    auto found = job->receive.find(localIndex);
    return found == job->receive.end() ? nullptr : &found->second;
  }
  return receive[localIndex].valid() ? &receive[localIndex] : nullptr;
}

namespace {

/// Commits a connection's control block and the first `payloadBytes` of
/// each of its slots (at `offset` of `seg`).
llvm::Error commitSlots(const Segment &seg, uint64_t offset, const FifoShape &shape,
                        uint64_t payloadBytes) {
  const uint64_t span = shape.slotSpan();
  const uint64_t used = shape.slotBytesFor(std::min(payloadBytes, shape.slotBytes));
  // Slots used whole, or nearly: one range.
  if (used * 2 >= span)
    return seg.commit(offset, shape.totalBytes());
  if (llvm::Error err = seg.commit(offset, sizeof(ConnectionControl)))
    return err;
  for (uint64_t i = 0; i < FifoDepth && used; ++i)
    if (llvm::Error err = seg.commit(offset + sizeof(ConnectionControl) + i * span, used))
      return err;
  return llvm::Error::success();
}

} // namespace

llvm::Expected<ConnectionEnd> HostTransport::bindEnd(int sender, int receiver, int channel,
                                                     ir::Protocol protocol, Doorbell *peerBell,
                                                     uint64_t payloadBytes) {
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   llvm::formatv("connection {0}->{1} channel {2} ({3}): ",
                                                 sender, receiver, channel,
                                                 ir::protocolName(protocol))
                                           .str() +
                                       why.str());
  };
  int si = localIndexOf(sender), ri = localIndexOf(receiver);
  if (ri < 0 || (si < 0 && !peerBell))
    return fail("the ranks are on different hosts, and no network proxy serves the connection");
  if (channel < 0 || channel >= layout.channels)
    return fail(llvm::formatv("the channel is beyond the {0} this communicator set up",
                              layout.channels));
  if (!layout.used[static_cast<int>(protocol)])
    return fail("the communicator set up no FIFOs for this protocol");
  const Segment *seg = receiveSegment(ri);
  if (!seg)
    return fail("the receiver's segment is not mapped");
  const uint64_t offset = layout.offset(protocol, channel, sender);
  auto shape = FifoShape::of(protocol, layout.slotBytes[static_cast<int>(protocol)]);
  if (!shape)
    return shape.takeError();
  if (llvm::Error err = commitSlots(*seg, offset, *shape, payloadBytes))
    return err;
  if (!peerBell)
    peerBell = &doorbell(local[local[me].rank == sender ? ri : si].proc);
  return ConnectionEnd::bind(static_cast<char *>(seg->data()) + offset, *shape, peerBell, sender,
                             receiver, channel);
}

llvm::Expected<ConnectionEnd> HostTransport::end(int sender, int receiver, int channel,
                                                 ir::Protocol protocol, uint64_t payloadBytes) {
  return bindEnd(sender, receiver, channel, protocol, nullptr, payloadBytes);
}

llvm::Error HostTransport::commit(int sender, int receiver, int channel, ir::Protocol protocol,
                                  uint64_t payloadBytes) {
  const int ri = localIndexOf(receiver);
  const Segment *seg = ri < 0 ? nullptr : receiveSegment(ri);
  auto shape = FifoShape::of(protocol, layout.slotBytes[static_cast<int>(protocol)]);
  if (!seg || !shape) {
    if (!shape)
      llvm::consumeError(shape.takeError());
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   llvm::formatv("connection {0}->{1} channel {2}: its receiver's "
                                                 "FIFOs are not mapped here",
                                                 sender, receiver, channel)
                                       .str());
  }
  return commitSlots(*seg, layout.offset(protocol, channel, sender), *shape, payloadBytes);
}

llvm::Expected<ConnectionEnd> HostTransport::inboundEnd(int sender, int channel,
                                                        ir::Protocol protocol,
                                                        Doorbell &proxyBell) {
  return bindEnd(sender, local[me].rank, channel, protocol, &proxyBell, UINT64_MAX);
}

} // namespace coll::transport
