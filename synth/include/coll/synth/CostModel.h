//===- CostModel.h - Predicting a compiled algorithm's time -----*- C++ -*-===//
//
// An α-β model of the runtime on a topology (docs/SYNTHESIS.md, "Cost
// model"): the algorithm's steps run tb by tb as the interpreter runs them,
// once per pipeline iteration; every send occupies each link (and capacity
// group) of its route for bytes / (bandwidth x protocol efficiency), in the
// order the sends become ready, so links shared by several flows serialise
// them; data arrives after the route's per-hop latencies. The call costs the
// protocol's base latency on top.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_SYNTH_COSTMODEL_H
#define COLL_SYNTH_COSTMODEL_H

#include "coll/synth/Synthesis.h"
#include "coll/ir/Algorithm.h"

#include "llvm/Support/Error.h"

namespace coll::synth {

/// Per-protocol constants, after NCCL's tuning model (src/graph/tuning.cc):
/// the share of link bandwidth the framing leaves for data, the fixed cost
/// of a call, and how much a hop's latency grows with the protocol's
/// handshakes.
struct ProtocolModel {
  double efficiency;
  double baseLatUs;
  double hopFactor;
  double sliceBytes; ///< bytes a pipeline iteration moves per chunk at most
};
ProtocolModel protocolModel(ir::Protocol proto);

struct CostResult {
  double timeUs = 0;
  double algBw = 0; ///< GB/s
  double busBw = 0; ///< GB/s
  int32_t iterations = 1;
};

/// Simulates `alg` (rank i on the topology's rank i) for a call of `bytes`
/// bytes, the larger all-ranks side as nccl-tests counts it.
llvm::Expected<CostResult> simulateCost(const ir::Algorithm &alg,
                                        const Topology &topo,
                                        const Fabric &fabric, uint64_t bytes);

/// The synthesis collective an IR collective is, if any.
std::optional<CollKind> synthKind(ir::Collective coll);

} // namespace coll::synth

#endif // COLL_SYNTH_COSTMODEL_H
