//===- Simulation.h - Executing a schedule with bounded FIFOs ---*- C++ -*-===//
//
// A discrete-time model of the runtime (docs/ARCHITECTURE.md §4): every tb runs one
// step per time unit; a step waits for its dependencies; a receiving step
// waits for the data its matching send put into the connection's FIFO, in
// FIFO order; a send needs free slots. A send of more slices than the FIFO
// holds is modelled as a rendezvous: its tb stays busy until the receiving
// step completes (the real send streams, so this is conservative).
//
// Because every wait is persistent (only the waiting tb itself can consume
// what it waits for), an execution that completes in this model proves that
// every execution of the runtime completes (docs/IR.md, "Checking").
//
//===----------------------------------------------------------------------===//

#ifndef COLL_IR_SIMULATION_H
#define COLL_IR_SIMULATION_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace coll::ir {

inline constexpr uint32_t NoNode = ~uint32_t(0);

/// The steps to simulate, and what orders them.
struct SimGraph {
  struct Node {
    int32_t tb = 0;          ///< global tb index
    int32_t count = 0;       ///< FIFO slots a send fills
    uint32_t feeds = NoNode; ///< sending: the node that receives its data
    uint32_t fedBy = NoNode; ///< receiving: the node whose data it takes
    uint64_t priority = 0;   ///< list scheduling: smaller goes first
  };
  std::vector<Node> nodes;
  /// Dependencies, compressed: node n waits for deps[depBegin[n]..[n+1]).
  std::vector<uint32_t> depBegin{0};
  std::vector<uint32_t> deps;
  int32_t numTbs = 0;
};

/// Every tb's steps in order, compressed: tb t runs nodes[begin[t]..[t+1]).
/// One array for all tbs, not a vector per tb: a large program has tens of
/// thousands of tbs of one or two steps.
struct TbOrders {
  std::vector<uint32_t> begin{0};
  std::vector<uint32_t> nodes;
  size_t size() const { return begin.size() - 1; }
  llvm::ArrayRef<uint32_t> operator[](size_t tb) const {
    return llvm::ArrayRef<uint32_t>(nodes).slice(begin[tb], begin[tb + 1] - begin[tb]);
  }
  /// Appends a tb's steps: add its nodes, then close it.
  void push(uint32_t node) { nodes.push_back(node); }
  void closeTb() { begin.push_back(static_cast<uint32_t>(nodes.size())); }
};

/// List scheduling: at every time unit each free tb starts the ready step
/// of smallest priority. Returns each tb's steps in the order it ran them,
/// or nothing when the simulation got stuck.
std::optional<TbOrders> listSchedule(const SimGraph &graph, int32_t fifoSlots);

/// Runs fixed per-tb orders. Returns, for a run that gets stuck, the step
/// each unfinished tb waits at (empty when the run completes).
std::vector<uint32_t> runOrders(const SimGraph &graph, const TbOrders &orders,
                                int32_t fifoSlots);

} // namespace coll::ir

#endif // COLL_IR_SIMULATION_H
