//===- Threadblocks.cpp - Assigning instructions to threadblocks ----------===//
//
// Union-find over the *endpoints* of each rank ("send to P on channel C",
// "receive from Q on channel C") and the tb ids the program named. Every
// endpoint ends in exactly one component, and each component becomes one
// tb, so exactly one tb per rank drives each direction of a connection. A
// component may hold at most one send endpoint, one receive endpoint and
// one program id, all on one channel:
//
//  1. `sendtb=`/`recvtb=` join an endpoint with the named tb; a conflict is
//     the program's error, reported with both operations.
//  2. Fusion joins the receive and send endpoints of a fused instruction,
//     only when that leaves the component legal.
//  3. Pairing joins "send to P" with "receive from P" on one channel where
//     both are still alone: one tb per peer, as NCCL does.
//  4. Local instructions (cpy, re) go to the tb the program named, else to
//     the tb of their latest same-rank producer (its result is then ready
//     in that tb's order, without a cross-tb dependency), else to the tb of
//     their first consumer that sends or receives (which has to wait for
//     them anyway), else to a local tb per rank and channel: such copies
//     read only untouched data, and run in parallel with the transfers.
//     Direct data steps (put, get, getre) are placed the same way.
//  5. Signals and waits (Signals.cpp) of a rank run on one tb per channel,
//     so that one tb signals each peer on a channel and one waits for it.
//
//===----------------------------------------------------------------------===//

#include "Program.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>

namespace coll::compiler {

namespace {

uint64_t packKey(int32_t rank, uint8_t kind, int32_t a, int32_t channel) {
  return (uint64_t(uint32_t(rank)) << 48) | (uint64_t(kind) << 46) |
         (uint64_t(uint32_t(a)) << 22) | uint64_t(uint32_t(channel));
}

} // namespace

uint32_t ThreadblockAssigner::node(int32_t rank, NodeKind kind, int32_t a,
                                   int32_t channel) {
  uint64_t key = packKey(rank, static_cast<uint8_t>(kind), a, channel);
  auto [it, inserted] =
      nodes.try_emplace(key, static_cast<uint32_t>(parent.size()));
  if (!inserted)
    return it->second;
  Component comp;
  comp.rank = rank;
  switch (kind) {
  case NodeKind::Send:
    comp.sendPeer = a;
    comp.channel = channel;
    sendNodes.emplace_back(key, it->second);
    break;
  case NodeKind::Recv:
    comp.recvPeer = a;
    comp.channel = channel;
    break;
  case NodeKind::ProgramTb:
    comp.programId = a;
    break;
  case NodeKind::LocalTb:
    break;
  }
  parent.push_back(it->second);
  comps.push_back(comp);
  return it->second;
}

uint32_t ThreadblockAssigner::find(uint32_t n) {
  while (parent[n] != n) {
    parent[n] = parent[parent[n]];
    n = parent[n];
  }
  return n;
}

bool ThreadblockAssigner::compatible(const Component &a, const Component &b) {
  return !(a.sendPeer >= 0 && b.sendPeer >= 0) &&
         !(a.recvPeer >= 0 && b.recvPeer >= 0) &&
         !(a.programId >= 0 && b.programId >= 0) &&
         !(a.channel >= 0 && b.channel >= 0 && a.channel != b.channel);
}

void ThreadblockAssigner::merge(uint32_t a, uint32_t b) {
  a = find(a);
  b = find(b);
  if (a == b)
    return;
  if (b < a)
    std::swap(a, b);
  Component &to = comps[a];
  const Component &from = comps[b];
  auto take = [](int32_t &x, int32_t y) { x = x >= 0 ? x : y; };
  auto takeBy = [](InstrId &x, InstrId y) { x = x != NoInstr ? x : y; };
  take(to.sendPeer, from.sendPeer);
  take(to.recvPeer, from.recvPeer);
  take(to.channel, from.channel);
  take(to.programId, from.programId);
  takeBy(to.sendBy, from.sendBy);
  takeBy(to.recvBy, from.recvBy);
  takeBy(to.idBy, from.idBy);
  parent[b] = a;
}

uint32_t ThreadblockAssigner::endpointOf(const Instr &instr, bool sending) {
  uint32_t n =
      sending ? node(instr.rank, NodeKind::Send, instr.sendPeer, instr.channel)
              : node(instr.rank, NodeKind::Recv, instr.recvPeer, instr.channel);
  Component &comp = comps[find(n)];
  InstrId id = static_cast<InstrId>(&instr - prog.instrs.data());
  if (sending && comp.sendBy == NoInstr)
    comp.sendBy = id;
  if (!sending && comp.recvBy == NoInstr)
    comp.recvBy = id;
  return n;
}

//===----------------------------------------------------------------------===//
// Program ids
//===----------------------------------------------------------------------===//

/// Joins instruction `by`'s endpoint (`sending` or receiving) with the tb
/// the program named for it. Where they cannot be one tb the hint yields
/// with `threadblocks = auto`; with `manual` the conflict is reported,
/// naming both operations, the current one at its place and the other one
/// by line and with a note.
bool ThreadblockAssigner::joinProgramId(InstrId by, bool sending) {
  const Instr &instr = prog.instrs[by];
  int32_t tb = sending ? instr.sendTbHint : instr.recvTbHint;
  uint32_t end = find(endpointOf(instr, sending));
  uint32_t named = find(node(instr.rank, NodeKind::ProgramTb, tb, 0));
  if (comps[named].idBy == NoInstr)
    comps[named].idBy = by;
  if (end == named)
    return true;
  const Component &e = comps[end], &t = comps[named];
  if (compatible(e, t)) {
    merge(end, named);
    return true;
  }
  // With `threadblocks = auto` the program's ids are hints, as msccl-tools
  // treats them: one that conflicts with what earlier operations made of
  // that tb yields, and the endpoint gets a tb of the compiler's choosing.
  if (!prog.dag->options.manualThreadblocks)
    return true;

  std::string rank = "rank " + std::to_string(instr.rank);
  std::string tbName = "tb " + std::to_string(tb) + " of " + rank;
  int32_t peer = sending ? instr.sendPeer : instr.recvPeer;
  std::string dir = sending ? "send to" : "receive from";
  std::string role = sending ? "send" : "receive";
  // The other operation, by line: the one that brought the conflicting fact.
  InstrId other = NoInstr;
  auto at = [&](InstrId by) {
    other = by;
    llvm::SMLoc loc = prog.dag->ops[prog.instrs[by].op].loc;
    if (!loc.isValid())
      return std::string("another operation");
    auto [line, col] = diags.lineAndColumn(loc);
    return "line " + std::to_string(line) + ":" + std::to_string(col);
  };
  std::string message;
  if (e.programId >= 0) {
    message = rank + " " + (sending ? "sends to" : "receives from") + " rank " +
              std::to_string(peer) + " on channel " +
              std::to_string(instr.channel) + " from tb " + std::to_string(tb) +
              " here but from tb " + std::to_string(e.programId) + " at " +
              at(e.idBy) +
              ": one tb per rank drives each direction of a connection";
  } else if (sending ? t.sendPeer >= 0 : t.recvPeer >= 0) {
    int32_t otherPeer = sending ? t.sendPeer : t.recvPeer;
    std::string where = at(sending ? t.sendBy : t.recvBy);
    if (otherPeer != peer)
      message = tbName + " would need two " + role + " peers: it would " + dir +
                " rank " + std::to_string(peer) + " here and rank " +
                std::to_string(otherPeer) + " at " + where + "; a tb has one " +
                role + " peer";
    else
      message = tbName + " would need two channels: it would " + dir +
                " rank " + std::to_string(peer) + " on channel " +
                std::to_string(instr.channel) + " here and on channel " +
                std::to_string(t.channel) + " at " + where +
                "; a tb has one channel";
  } else {
    message = tbName + " would need two channels: channel " +
              std::to_string(instr.channel) + " here and channel " +
              std::to_string(t.channel) + " at " +
              at(t.sendBy != NoInstr ? t.sendBy : t.recvBy) +
              "; a tb has one channel";
  }
  assert(other != NoInstr && "a conflict has a witness");
  const lang::ChunkOp &op = prog.dag->ops[instr.op];
  const lang::ChunkOp &otherOp = prog.dag->ops[prog.instrs[other].op];
  diags.error(op.loc, message);
  noteCalls(op);
  diags.note(otherOp.loc, "the other operation is here");
  noteCalls(otherOp);
  return false;
}

/// The chain of function calls that traced `op`, innermost first: one note
/// per call site, so that a conflict between two operations of one helper
/// function says which calls of it meet.
void ThreadblockAssigner::noteCalls(const lang::ChunkOp &op) {
  const std::vector<lang::CallSite> &calls = prog.dag->calls;
  for (uint32_t c = op.call; c != lang::ChunkOp::NoCall; c = calls[c].parent)
    diags.note(calls[c].loc, "called from here");
}

bool ThreadblockAssigner::applyProgramIds() {
  constexpr unsigned MaxReported = 10;
  unsigned errors = 0;
  // Every lane of an operation repeats the first one's conflicts: report
  // each operation once.
  std::vector<bool> failed(prog.dag->ops.size(), false);
  for (InstrId x = 0; x < prog.instrs.size() && errors < MaxReported; ++x) {
    const Instr &instr = prog.instrs[x];
    if (failed[instr.op])
      continue;
    bool ok = true;
    if (instr.sends())
      ok = instr.sendTbHint < 0 ? (endpointOf(instr, true), true)
                                : joinProgramId(x, true);
    if (ok && instr.receives())
      ok = instr.recvTbHint < 0 ? (endpointOf(instr, false), true)
                                : joinProgramId(x, false);
    if (instr.isLocal() && instr.sendTbHint >= 0) {
      uint32_t named =
          find(node(instr.rank, NodeKind::ProgramTb, instr.sendTbHint, 0));
      if (comps[named].idBy == NoInstr)
        comps[named].idBy = x;
    }
    if (!ok) {
      failed[instr.op] = true;
      ++errors;
    }
  }
  return errors == 0;
}

//===----------------------------------------------------------------------===//
// Fusion and pairing
//===----------------------------------------------------------------------===//

bool ThreadblockAssigner::canJoin(const Instr &recv, const Instr &send) {
  uint32_t a = find(endpointOf(recv, false)), b = find(endpointOf(send, true));
  return a == b || compatible(comps[a], comps[b]);
}

void ThreadblockAssigner::join(const Instr &recv, const Instr &send) {
  merge(endpointOf(recv, false), endpointOf(send, true));
}

void ThreadblockAssigner::assign(bool pairPeers) {
  if (pairPeers)
    for (auto [key, n] : sendNodes) {
      uint32_t s = find(n);
      if (comps[s].recvPeer >= 0)
        continue;
      uint64_t recvKey =
          (key & ~(uint64_t(3) << 46)) | (uint64_t(NodeKind::Recv) << 46);
      auto it = nodes.find(recvKey);
      if (it == nodes.end())
        continue;
      uint32_t r = find(it->second);
      if (r != s && compatible(comps[s], comps[r]))
        merge(s, r);
    }

  // The first consumer of each instruction that sends or receives.
  std::vector<InstrId> consumer(prog.instrs.size(), NoInstr);
  for (InstrId x = 0; x < prog.instrs.size(); ++x)
    if (prog.instrs[x].live() &&
        (prog.instrs[x].sends() || prog.instrs[x].receives()))
      for (InstrId d : prog.instrs[x].deps)
        consumer[d] = std::min(consumer[d], x);

  // The latest dependency of an instruction that is not a signal or wait:
  // those run on the rank's signalling tb of their channel, where a local
  // instruction would wait for every peer's signal in turn.
  auto latestProducer = [&](InstrId x) {
    for (InstrId d : llvm::reverse(prog.instrs[x].deps))
      if (!prog.instrs[d].isSync())
        return d;
    return NoInstr;
  };

  // Each instruction's component, in program order.
  std::vector<uint32_t> compOf(prog.instrs.size(), ~0u);
  std::vector<std::vector<uint32_t>> rankComps(prog.layout.nranks);
  std::vector<InstrId> firstInstr(comps.size(), NoInstr);
  for (InstrId x = 0; x < prog.instrs.size(); ++x) {
    const Instr &instr = prog.instrs[x];
    if (!instr.live())
      continue;
    uint32_t c;
    if (instr.sends())
      c = find(endpointOf(instr, true));
    else if (instr.receives())
      c = find(endpointOf(instr, false));
    else if (instr.isSync())
      c = find(node(instr.rank, NodeKind::LocalTb, 1, instr.channel));
    else if (instr.sendTbHint >= 0)
      c = find(node(instr.rank, NodeKind::ProgramTb, instr.sendTbHint, 0));
    else if (InstrId p = latestProducer(x); p != NoInstr)
      c = compOf[p];
    else if (consumer[x] != NoInstr)
      c = find(endpointOf(prog.instrs[consumer[x]],
                          prog.instrs[consumer[x]].sends()));
    else
      c = find(node(instr.rank, NodeKind::LocalTb, 0, instr.channel));
    compOf[x] = c;
    if (c >= firstInstr.size())
      firstInstr.resize(comps.size(), NoInstr);
    if (firstInstr[c] == NoInstr) {
      firstInstr[c] = x;
      rankComps[instr.rank].push_back(c);
    }
  }

  // Program ids keep their order; the other tbs follow in order of first
  // use.
  prog.tbs.assign(prog.layout.nranks, {});
  std::vector<int32_t> idOf(comps.size(), -1);
  for (int32_t r = 0; r < prog.layout.nranks; ++r) {
    int32_t next = 0;
    for (uint32_t c : rankComps[r])
      next = std::max(next, comps[c].programId + 1);
    for (uint32_t c : rankComps[r])
      idOf[c] = comps[c].programId >= 0 ? comps[c].programId : next++;
    // Ids nothing uses are dropped, keeping the order of the others, so that
    // the IR has no empty tbs (`sendtb = 5` alone on a rank is its tb 0).
    std::vector<int32_t> dense(next, -1);
    for (uint32_t c : rankComps[r])
      dense[idOf[c]] = 0;
    next = 0;
    for (int32_t &id : dense)
      if (id == 0)
        id = next++;
    for (uint32_t c : rankComps[r])
      idOf[c] = dense[idOf[c]];
    prog.tbs[r].resize(next);
    for (uint32_t c : rankComps[r]) {
      Threadblock &tb = prog.tbs[r][idOf[c]];
      tb.sendPeer = comps[c].sendPeer;
      tb.recvPeer = comps[c].recvPeer;
      tb.channel = comps[c].channel >= 0 ? comps[c].channel
                                         : prog.instrs[firstInstr[c]].channel;
    }
  }
  for (InstrId x = 0; x < prog.instrs.size(); ++x) {
    Instr &instr = prog.instrs[x];
    if (!instr.live())
      continue;
    instr.tb = idOf[compOf[x]];
    prog.tbs[instr.rank][instr.tb].instrs.push_back(x);
  }
}

} // namespace coll::compiler
