//===- Fusion.cpp - Receive-and-forward instructions ----------------------===//
//
// A receive (`r`, `rrc`) whose result a send forwards unchanged becomes one
// instruction (`rcs`, `rrcs`) that hands each slice on as it arrives.
// Candidates are the sends in program order; send S fuses with receive V
// when
//
//  - S's only dependency is V, and S reads exactly the slots V wrote, under
//    the same names: nothing else must happen between V and S, and S sends
//    what V received (reading the input where V wrote the output would
//    differ out of place, even where the two alias in place);
//  - both run on one channel, and the tb assignment can join V's receive
//    endpoint and S's send endpoint in one tb (ThreadblockAssigner);
//  - the receive R that S feeds keeps the ordering sound once it moves up
//    to V's chain: R's key becomes (V's head, V's position + 1), and every
//    dependency of R must have a smaller key (docs/COMPILER.md, "Ordering").
//
// An `rrcs` whose stored result nobody but its own send reads and the
// postcondition does not need (it is overwritten later, or unconstrained)
// stores nothing: `rrs`.
//
// Consecutive local reductions into one destination become one group, which
// the runtimes execute as one n-ary reduction (consecutive `re` steps of one
// tb, docs/IR.md): `re` B joins the group whose last member A wrote B's
// destination when
//
//  - B has A's destination slot, count, source buffer and tb hint, and its
//    source cells are not the destination's;
//  - nothing but B reads what A wrote (no one sees a partial sum);
//  - every other dependency of B comes before the group's head in program
//    order: the group waits for all its sources before it starts, and no
//    source may depend on the group;
//  - the group has fewer than MaxReduceSources members.
//
// The head carries the group's dependencies; the members keep their own
// sources and operations, and are emitted as consecutive `re` steps, the
// first carrying the group's wait and the last its `hasdep`. The sources are
// reduced in program order, so the result has the same bits.
//
//===----------------------------------------------------------------------===//

#include "Program.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

namespace coll::compiler {
namespace {

/// Whether `count` cells from `a` and from `b` overlap.
bool overlaps(uint32_t a, uint32_t b, uint32_t count) {
  return a < b + count && b < a + count;
}

template <class Resolve>
void fuseReductions(Program &prog, Resolve resolve) {
  std::vector<Instr> &instrs = prog.instrs;
  // Per group head: its last member and its size.
  std::vector<InstrId> tail(instrs.size(), NoInstr);
  std::vector<uint8_t> size(instrs.size(), 0);
  for (InstrId b = 0; b < instrs.size(); ++b) {
    Instr &next = instrs[b];
    if (next.type != ir::StepType::Reduce || !next.live())
      continue;
    // A: the reduction that wrote B's destination, read by B alone.
    InstrId a = NoInstr;
    for (InstrId d : next.deps) {
      const Instr &prev = instrs[d];
      if (prev.type == ir::StepType::Reduce && prev.rank == next.rank &&
          prev.dst == next.dst && prev.count == next.count &&
          prev.readers == 1 && prev.firstReader == b)
        a = d;
    }
    if (a == NoInstr)
      continue;
    InstrId h = resolve(a);
    Instr &head = instrs[h];
    if (tail[h] == NoInstr) {
      tail[h] = h;
      size[h] = 1;
    }
    uint32_t dstCell = prog.layout.cell(next.rank, next.dst);
    uint32_t srcCell = prog.layout.cell(next.rank, next.src);
    uint32_t n = static_cast<uint32_t>(next.count);
    if (tail[h] != a || size[h] >= MaxReduceSources ||
        next.src.buf != head.src.buf || next.sendTbHint != head.sendTbHint ||
        overlaps(srcCell, dstCell, n) ||
        llvm::any_of(next.deps,
                     [&](InstrId d) { return d != a && resolve(d) >= h; }))
      continue;
    instrs[a].nextSource = b;
    next.absorbedInto = h;
    tail[h] = b;
    ++size[h];
    for (InstrId d : next.deps)
      if (d != a)
        head.deps.push_back(d);
  }
}

} // namespace

void fuse(Program &prog, ThreadblockAssigner &assigner) {
  std::vector<Instr> &instrs = prog.instrs;
  auto resolve = [&](InstrId x) {
    return instrs[x].absorbedInto == NoInstr ? x : instrs[x].absorbedInto;
  };
  for (InstrId s = 0; s < instrs.size(); ++s) {
    Instr &send = instrs[s];
    if (send.type != ir::StepType::Send || send.deps.size() != 1)
      continue;
    InstrId v = resolve(send.deps.front());
    Instr &recv = instrs[v];
    if ((recv.type != ir::StepType::Recv &&
         recv.type != ir::StepType::RecvReduceCopy) ||
        recv.dst != send.src || recv.count != send.count ||
        recv.channel != send.channel)
      continue;
    Instr &next = instrs[send.to];
    Key key{recv.key.head, recv.key.pos + 1};
    if (llvm::any_of(next.deps,
                     [&](InstrId d) { return instrs[resolve(d)].key >= key; }))
      continue;
    if (!assigner.canJoin(recv, send))
      continue;
    assigner.join(recv, send);
    recv.type = recv.type == ir::StepType::Recv
                    ? ir::StepType::RecvCopySend
                    : ir::StepType::RecvReduceCopySend;
    recv.sendPeer = send.sendPeer;
    recv.sendTbHint = send.sendTbHint;
    recv.to = send.to;
    recv.forwardedOp = send.op;
    recv.absorbed = s;
    send.absorbedInto = v;
    next.from = v;
    next.key = key;
  }

  fuseReductions(prog, resolve);

  // Dependencies on an absorbed send are dependencies on its receive, and
  // on a member of a reduction group dependencies on the group's head.
  for (InstrId x = 0; x < instrs.size(); ++x) {
    Instr &instr = instrs[x];
    if (!instr.live())
      continue;
    for (InstrId &d : instr.deps)
      d = resolve(d);
    std::sort(instr.deps.begin(), instr.deps.end());
    instr.deps.erase(std::unique(instr.deps.begin(), instr.deps.end()),
                     instr.deps.end());
    llvm::erase_value(instr.deps, x);
  }

  for (Instr &instr : instrs)
    if (instr.type == ir::StepType::RecvReduceCopySend && instr.readers == 1 &&
        instr.firstReader == instr.absorbed && !instr.liveAtEnd) {
      instr.type = ir::StepType::RecvReduceSend;
      instr.dst = instr.src;
    }
  prog.fused = true;
}

} // namespace coll::compiler
