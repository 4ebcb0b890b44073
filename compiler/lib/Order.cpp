//===- Order.cpp - Ordering each threadblock's instructions ---------------===//
//
// Every tb runs its instructions in one order; the k-th send of a
// connection must meet the k-th receive, and no order may deadlock, also
// with 8-slot FIFOs (docs/COMPILER.md, "Ordering"). Two orders qualify:
//
//  1. List scheduling (preferred): simulate the execution (Simulation.h)
//     and let each tb run, at every time unit, the ready instruction that
//     comes first in program order (by Key, so a chain's later members,
//     which carry its head's key, go before new chains). Sends on a
//     connection and the receives they feed happen in the same order by
//     construction, and a run that completes is an execution that
//     completes, which proves the order deadlock-free. Ring programs come
//     out in the classic pipelined ring order.
//     To keep a receive that reached the head of its FIFO from waiting for
//     something that would need later data of the same FIFO, the first send
//     of a chain of fused transfers only starts once every dependency of
//     the chain's later members (outside the chain) is complete.
//  2. Program order (fallback, when the simulation gets stuck): every tb
//     sorts its instructions by their Key (chain head, position). Every
//     dependency, tb order and send -> receive edge increases the key, so
//     running the chains one after another in key order is an execution
//     in which each chain finds all its members at the front of their tbs;
//     the FIFO-aware simulation checks the rest (big transfers).
//
//===----------------------------------------------------------------------===//

#include "Program.h"
#include "coll/ir/Simulation.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

namespace coll::compiler {
namespace {

using ir::NoNode;
using ir::SimGraph;

/// The simulation graph of the live instructions, nodes in instruction
/// order. With `gateChains`, the head of every chain also waits for the
/// outside dependencies of the chain's later members.
SimGraph buildGraph(const Program &prog, bool gateChains,
                    std::vector<InstrId> &instrOf,
                    std::vector<uint32_t> &nodeOf) {
  nodeOf.assign(prog.instrs.size(), NoNode);
  instrOf.clear();
  for (InstrId x = 0; x < prog.instrs.size(); ++x)
    if (prog.instrs[x].live()) {
      nodeOf[x] = static_cast<uint32_t>(instrOf.size());
      instrOf.push_back(x);
    }
  std::vector<int32_t> tbBase(prog.tbs.size() + 1, 0);
  for (size_t r = 0; r < prog.tbs.size(); ++r)
    tbBase[r + 1] = tbBase[r] + static_cast<int32_t>(prog.tbs[r].size());

  SimGraph graph;
  graph.numTbs = tbBase.back();
  graph.nodes.reserve(instrOf.size());
  graph.depBegin.reserve(instrOf.size() + 1);
  llvm::SmallVector<uint32_t, 8> deps;
  for (InstrId x : instrOf) {
    const Instr &instr = prog.instrs[x];
    SimGraph::Node node;
    node.tb = tbBase[instr.rank] + instr.tb;
    node.count = instr.count;
    node.feeds = instr.sends() ? nodeOf[instr.to] : NoNode;
    node.fedBy = instr.receives() ? nodeOf[instr.from] : NoNode;
    node.priority = instr.key.packed();
    graph.nodes.push_back(node);

    deps.clear();
    for (InstrId d : instr.deps)
      deps.push_back(nodeOf[d]);
    // A wait completes once its signal has run (signals never block).
    if (instr.type == ir::StepType::Wait)
      deps.push_back(nodeOf[instr.from]);
    if (gateChains && instr.sends() && !instr.receives())
      for (InstrId m = instr.to; m != NoInstr;) {
        const Instr &member = prog.instrs[m];
        for (InstrId d : member.deps)
          if (prog.instrs[d].key.head != instr.key.head)
            deps.push_back(nodeOf[d]);
        m = member.sends() ? member.to : NoInstr;
      }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    graph.deps.insert(graph.deps.end(), deps.begin(), deps.end());
    graph.depBegin.push_back(static_cast<uint32_t>(graph.deps.size()));
  }
  return graph;
}

} // namespace

bool order(Program &prog) {
  std::vector<InstrId> instrOf;
  std::vector<uint32_t> nodeOf;
  auto setOrders = [&](const ir::TbOrders &orders) {
    size_t g = 0;
    for (auto &rankTbs : prog.tbs)
      for (Threadblock &tb : rankTbs) {
        tb.instrs.clear();
        for (uint32_t n : orders[g])
          tb.instrs.push_back(instrOf[n]);
        ++g;
      }
  };

  SimGraph gated = buildGraph(prog, /*gateChains=*/true, instrOf, nodeOf);
  if (auto orders = ir::listSchedule(gated, FifoSlots)) {
    setOrders(*orders);
    prog.ordering = Ordering::Simulated;
    return true;
  }

  SimGraph graph = buildGraph(prog, /*gateChains=*/false, instrOf, nodeOf);
  ir::TbOrders orders;
  for (auto &rankTbs : prog.tbs)
    for (Threadblock &tb : rankTbs) {
      llvm::sort(tb.instrs, [&](InstrId a, InstrId b) {
        return std::pair(prog.instrs[a].key, a) <
               std::pair(prog.instrs[b].key, b);
      });
      for (InstrId x : tb.instrs)
        orders.push(nodeOf[x]);
      orders.closeTb();
    }
  prog.ordering = Ordering::ProgramOrder;
  return ir::runOrders(graph, orders, FifoSlots).empty();
}

} // namespace coll::compiler
