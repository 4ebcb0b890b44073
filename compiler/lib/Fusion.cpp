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
//===----------------------------------------------------------------------===//

#include "Program.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

namespace coll::compiler {

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

  // Dependencies on an absorbed send are dependencies on its receive.
  for (InstrId x = 0; x < instrs.size(); ++x) {
    Instr &instr = instrs[x];
    if (!instr.live())
      continue;
    for (InstrId &d : instr.deps)
      d = resolve(d);
    llvm::sort(instr.deps);
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
