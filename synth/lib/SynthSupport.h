//===- SynthSupport.h - Helpers shared by the synthesis sources -*- C++ -*-===//

#ifndef COLL_COMPILER_LIB_SYNTH_SYNTHSUPPORT_H
#define COLL_COMPILER_LIB_SYNTH_SYNTHSUPPORT_H

#include "coll/synth/Synthesis.h"

#include "llvm/Support/FormatVariadic.h"

#include <vector>

namespace coll::synth::detail {

/// Edmonds-Karp on a dense capacity matrix (taken by value).
double maxFlow(std::vector<std::vector<double>> cap, int32_t s, int32_t t);

/// units[a][b]: physical links of fabric.unitBw from rank a to rank b over
/// direct GPU links.
std::vector<std::vector<int32_t>> unitGraph(const Topology &topo,
                                            const Fabric &fabric);

} // namespace coll::synth::detail

#endif
