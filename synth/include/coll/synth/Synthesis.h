//===- Synthesis.h - Lower bounds, tree packing, rings, .coll text -*- C++
//-*-===//
//
// Topology-aware synthesis (docs/SYNTHESIS.md):
//
//   fabric      the links the generators use: NVLink and network links when
//               they join all GPUs, else every link
//   bounds      the best bus bandwidth any algorithm can reach on the fabric:
//               max-flow/min-cut for broadcast and reduce, the cut bound for
//               allgather and reduce-scatter, the two together for allreduce
//   packing     spanning out-arborescences (Edmonds/Lovász) for a broadcast,
//               per-root packings balanced by local search for allgather
//   rings       link-disjoint directed Hamiltonian cycles (NCCL-style rings)
//   programs    .coll text for trees, rings, double binary trees and the
//               pipelined chain
//
// All throughput figures are bus bandwidths in GB/s as nccl-tests defines
// them. Everything here is deterministic.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_SYNTH_SYNTHESIS_H
#define COLL_SYNTH_SYNTHESIS_H

#include "coll/synth/Topology.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace coll::synth {

enum class CollKind : uint8_t {
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AllReduce
};
llvm::StringRef collKindName(CollKind kind);
std::optional<CollKind> parseCollKind(llvm::StringRef name);

/// busbw = algbw * factor: 1 for broadcast/reduce, (N-1)/N for allgather and
/// reduce-scatter, 2(N-1)/N for allreduce.
double busFactor(CollKind kind, int32_t nranks);

/// The links synthesis works on, and how ranks reach each other over them.
struct Fabric {
  std::vector<int32_t> links; ///< topology link ids in the fabric
  bool gpuOnly = false;       ///< every fabric link joins two GPUs
  std::string description;    ///< "NVLink", "NVLink+network", "all links"
  /// route[a][b]: topology link ids from rank a to rank b (empty: a == b).
  std::vector<std::vector<std::vector<int32_t>>> route;
  /// Units of the GPU-to-GPU multigraph the packer uses: unitBw GB/s each.
  double unitBw = 0;
};
llvm::Expected<Fabric> buildFabric(const Topology &topo);

/// The bound and how it was found (e.g. "min-cut 120 GB/s into rank 3").
struct Bound {
  double busBw = 0;
  std::string how;
};
llvm::Expected<Bound> lowerBound(const Topology &topo, const Fabric &fabric,
                                 CollKind kind, int32_t root = 0);

/// A spanning tree over ranks. For out-trees, edges are (parent, child) in
/// breadth-first order; `weight` chunks of the data follow it.
struct Tree {
  int32_t root = 0;
  std::vector<std::pair<int32_t, int32_t>> edges;
  int32_t weight = 1;
};

/// A set of trees and what the link-load model predicts for them.
struct Plan {
  std::string generator; ///< "trees", "rings", "double-binary-tree", "chain"
  CollKind kind = CollKind::Broadcast;
  int32_t root = 0;
  /// Out-trees. Allgather: per root; allreduce/reduce-scatter: trees whose
  /// reversed edges reduce toward the root (see reduceEdges).
  std::vector<Tree> trees;
  /// Reduction trees for allreduce/reduce-scatter/reduce, parallel to
  /// `trees`: (child, parent) edges, children before their parents. Empty:
  /// the reversed out-tree.
  std::vector<std::vector<std::pair<int32_t, int32_t>>> reduceEdges;
  int32_t chunks = 1;   ///< chunks per block (the .coll `chunks`)
  int32_t pipeline = 1; ///< chain: chunks streamed one after another
  double predictedBusBw = 0;
  std::string note;
};

/// The link-load model: data moved over every link (and capacity group) by
/// the plan, for one byte of message; returns the predicted bus bandwidth.
double predictBusBw(const Topology &topo, const Fabric &fabric,
                    const Plan &plan);

/// Spanning-tree packing. Broadcast and reduce: as many edge-disjoint
/// arborescences as the min-cut allows (Edmonds), grown edge by edge while a
/// max-flow check keeps the rest packable (Lovász). Allgather, reduce-scatter
/// and allreduce: a packing per root, balanced across roots by local search.
/// Needs a fabric of direct GPU links.
llvm::Expected<Plan> packTrees(const Topology &topo, const Fabric &fabric,
                               CollKind kind, int32_t root = 0);

/// Up to `maxRings` directed rings over all ranks, link-disjoint in the
/// fabric's unit multigraph where it has direct GPU links; otherwise (or
/// when no Hamiltonian cycle exists there) the single ring whose slowest hop
/// is fastest over every path. Never empty for two or more ranks.
std::vector<std::vector<int32_t>>
findRings(const Topology &topo, const Fabric &fabric, int32_t maxRings);

/// A plan from rings: allgather/reduce-scatter/allreduce as on a ring,
/// broadcast/reduce as chains along each ring.
Plan ringPlan(const Topology &topo, const Fabric &fabric, CollKind kind,
              const std::vector<std::vector<int32_t>> &rings, int32_t root = 0);

/// NCCL's double binary tree (allreduce, and broadcast/reduce with the
/// data halved over the two trees), laid over the order of ranks (rank 0
/// first; every order up to 8 ranks is tried) that the link-load model
/// predicts fastest.
Plan doubleBinaryTreePlan(const Topology &topo, const Fabric &fabric,
                          CollKind kind, int32_t root = 0);

/// Pipelined chain broadcast along the Hamiltonian path from the root whose
/// slowest hop is fastest (searched over every order up to 9 ranks, else
/// the best ring's order), with the chunk count in 1..64 that minimises the
/// α-β time of `bytes` (α: the slowest hop's latency plus 1 µs of per-step
/// overhead; β: the path's narrowest link), or with `chunks` chunks when
/// that is given (1..64).
Plan chainPlan(const Topology &topo, const Fabric &fabric, int32_t root,
               uint64_t bytes, int32_t chunks = 0);

/// The .coll program for a plan, opening with a comment that names the
/// topology, the predicted bandwidth and the bound.
std::string emitProgram(const Topology &topo, const Plan &plan,
                        const Bound &bound, llvm::StringRef name);

} // namespace coll::synth

#endif // COLL_SYNTH_SYNTHESIS_H
