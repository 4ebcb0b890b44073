//===- MscclppPort.cpp - Port channels of MSCCL++ plans -------------------===//
//
// docs/IR.md, "MSCCL++ plans", port channels. A port channel's puts and
// signals are requests that a thread of the tb hands to the rank's host
// proxy (a FIFO trigger); the proxy carries them out later, each after
// the ones before it on the channel (ProxyService: a copy, then the
// semaphore's update on the same connection), and `pwsf`'s thread waits
// until its request is done. Waits on a port channel are the device's own.
//
// In Coll each port channel of a rank gets a tb of its own, its proxy tb:
// the tb that uses the channel keeps a nop where a request stands, and the
// proxy tb does the request's put and signal as steps that depend on that
// nop, so that they follow everything the tb did before it, and nothing
// after it. The checker then sees what the proxy's lateness allows: a
// write of a put's source before the put is done, or a read of its
// destination before its signal is waited for, is a race there as it is
// on the GPU. One proxy tb per channel runs the channels' requests at
// once, where MSCCL++'s one proxy thread takes them in turn: a program
// proved with more concurrency holds with less.
//
//===----------------------------------------------------------------------===//

#include "MscclppTranslator.h"

namespace coll::ir::mscclpp::detail {

int32_t Translator::proxyTb(int32_t r, int32_t conn) {
  auto [it, fresh] = proxies.try_emplace({r, conn}, -1);
  if (fresh)
    it->second = helperTb(r);
  return it->second;
}

std::string Translator::channelName(const Conn &c) {
  return "gpu " + std::to_string(c.rank) + "'s " + (c.port ? "port" : "memory") +
         " channel " + std::to_string(c.nth) + " to gpu " + std::to_string(c.peer);
}

void Translator::portOp(int32_t r, int32_t t, const Op &op, Epoch &epoch,
                        std::string &firstWait) {
  const std::string name = opName(op.kind).str();
  if (op.kind == OpKind::Flush) {
    // handleFlush: thread i flushes channel channel_ids[i] for i below the
    // op's count of dst_buff entries, and a flush has none: nothing.
    diags.warning(0, StepRef{},
                  op.path + ": 'flush' does nothing in MSCCL++ v0.10's executor "
                            "(handleFlush flushes as many channels as the op has dst_buff "
                            "entries, and a flush has none); Coll reads it as nothing");
    return;
  }
  if (!op.channelType || *op.channelType != ChannelType::Port) {
    // handlePut with signal or flush on a memory channel only puts.
    error(op.path + ".channel_type",
          "'" + name + "' on a channel of type '" +
              channelTypeName(op.channelType.value_or(ChannelType::None)) +
              "': the executor signals and flushes only on port channels, so on another it "
              "would only put");
    return;
  }
  if (currentPipe) {
    unsupported(op.path, "'" + name + "' on a port channel in a pipeline");
    return;
  }
  const Tb2 &tb = state[r].tbs[t];
  // The port channel (index into portConnList) that thread i of the op uses.
  auto channel = [&](size_t i) -> std::optional<int32_t> {
    if (i >= op.channelIds.size()) {
      error(op.path + ".channel_ids",
            "'" + name + "' has " + std::to_string(op.channelIds.size()) +
                " channel_ids for " + std::to_string(op.dst.size()) +
                " dst_buff entries: thread i puts dst_buff[i] through channel_ids[i]");
      return std::nullopt;
    }
    const int32_t id = op.channelIds[i];
    const std::string path = op.path + ".channel_ids[" + std::to_string(i) + "]";
    if (size_t(id) >= tb.portChannels.size()) {
      error(path, "channel " + std::to_string(id) + " is out of range: the tb has " +
                      std::to_string(tb.portChannels.size()) + " port channels");
      return std::nullopt;
    }
    const int32_t c = tb.portChannels[id];
    if (state[r].portConnList[c].peer == r) {
      unsupported(path, "a port channel to the tb's own rank: Coll's puts and signals reach "
                        "another rank");
      return std::nullopt;
    }
    return c;
  };
  auto steps = [&](int32_t on) -> std::vector<Step> & { return alg.gpus[r].tbs[on].steps; };
  auto last = [&](int32_t on) { return static_cast<int32_t>(steps(on).size()) - 1; };

  if (op.kind == OpKind::Wait || op.kind == OpKind::RelaxedWait) {
    // handleWait (relaxed or not) on a port channel: thread i waits on
    // channel i's semaphore, which the peer's proxy updates.
    for (size_t i = 0; i < op.channelIds.size(); ++i) {
      auto c = channel(i);
      if (!c)
        continue;
      syncStep(r, t, state[r].portConnList[*c], /*signal=*/false, /*relaxed=*/false, op.path);
    }
    epoch.lastWait = op.path;
    if (firstWait.empty())
      firstWait = op.path;
    return;
  }

  // A request: thread i hands it over as soon as its own part of what came
  // before is done, so what it sends must have been finished by a nop.
  if (!afterNop(op, name, epoch,
                "thread i hands its request to the proxy as soon as its own part of that op "
                "is done, so the request covers only that part, while in Coll it follows "
                "everything its tb did",
                "thread i hands its request to the proxy whether or not the other threads' "
                "waits are over, while in Coll it follows them"))
    return;

  if (op.kind == OpKind::Signal || op.kind == OpKind::RelaxedSignal) {
    // handleSignal (relaxed or not) on a port channel: thread i asks the
    // proxy to signal channel i.
    for (size_t i = 0; i < op.channelIds.size(); ++i) {
      auto c = channel(i);
      if (!c)
        continue;
      const int32_t proxy = proxyTb(r, *c);
      steps(t).push_back(Step{}); // the request
      const int32_t at = syncStep(r, proxy, state[r].portConnList[*c], /*signal=*/true,
                                  /*relaxed=*/false, op.path);
      steps(proxy)[at].depTb = t;
      steps(proxy)[at].depStep = last(t);
    }
    return;
  }

  // put, pws, pwsf (handlePut on a port channel): thread i asks the proxy
  // to copy src_buff[i] (its own buffer and offset) to the peer's
  // dst_buff[i] through channel_ids[i], dst_buff[i]'s size; pws and pwsf
  // then signal the channel, and pwsf's thread waits until both are done.
  if (op.src.size() != op.dst.size()) {
    error(op.path + ".src_buff", "'" + name + "' on a port channel pairs src_buff and "
                                 "dst_buff entry by entry: " +
                                     std::to_string(op.src.size()) + " and " +
                                     std::to_string(op.dst.size()) + " entries");
    return;
  }
  struct Request {
    int32_t conn;
    Operand src, dst;
  };
  std::vector<Request> requests;
  for (size_t i = 0; i < op.dst.size(); ++i) {
    auto c = channel(i);
    auto s = local(r, op.src[i]);
    auto d = remote(r, t, op.dst[i], ChannelType::Port);
    if (!c || !s || !d || !sameSizes(op, {&*d, &*s}))
      return;
    const Conn &conn = state[r].portConnList[*c];
    if (d->rank != conn.peer) {
      error(op.dst[i].path + ".buffer_id",
            "gpu " + std::to_string(d->rank) + "'s buffer through " + channelName(conn) +
                ": the proxy writes only the channel's peer's memory");
      return;
    }
    requests.push_back({*c, *s, *d});
  }
  const bool signals_ = op.kind != OpKind::Put;
  std::vector<std::pair<int32_t, int32_t>> done; // the proxy's last step per request
  for (const Request &q : requests) {
    const Conn &conn = state[r].portConnList[q.conn];
    const int32_t proxy = proxyTb(r, q.conn);
    steps(t).push_back(Step{}); // the request
    emit(r, proxy, StepType::Put, q.src, q.dst, conn.peer);
    steps(proxy).back().depTb = t;
    steps(proxy).back().depStep = last(t);
    if (signals_)
      syncStep(r, proxy, conn, /*signal=*/true, /*relaxed=*/false, op.path);
    done.emplace_back(proxy, last(proxy));
  }
  if (op.kind == OpKind::PutWithSignalFlush) {
    for (const auto &[proxy, step] : done) {
      Step wait; // the flush: this thread's request is done
      wait.depTb = proxy;
      wait.depStep = step;
      steps(t).push_back(wait);
    }
    epoch.lastWait = op.path;
    if (firstWait.empty())
      firstWait = op.path;
  }
}

} // namespace coll::ir::mscclpp::detail
