//===- Tune.h - The best synthesized program per collective and size -*- C++ -*-===//
//
// What colltune writes and what the runtime does at communicator creation
// with COLL_TOPO_FILE (docs/SYNTHESIS.md): for every collective, the
// candidates collsynth makes for a topology (trees, rings, double binary
// trees, chains of 1, 4, 16 and 64 chunks), compiled with the .coll
// compiler, and per size range (1K, 4K, ..., 1G) the one the cost model
// predicts fastest. Deterministic: every rank of a job computes the same.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_SYNTH_TUNE_H
#define COLL_SYNTH_TUNE_H

#include "coll/synth/Synthesis.h"
#include "coll/synth/Topology.h"
#include "coll/synth/TuningTable.h"
#include "coll/ir/Algorithm.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace coll::synth {

struct TunedCandidate {
  std::string name;    ///< "allgather_trees", "broadcast_chain16"
  std::string program; ///< its .coll text (header: topology, prediction, bound)
  ir::Algorithm alg;   ///< compiled
};

/// Sizes [minBytes, maxBytes) of one collective go to `candidate`.
struct TunedRange {
  CollKind kind = CollKind::AllReduce;
  uint64_t minBytes = 0;
  uint64_t maxBytes = UINT64_MAX; ///< UINT64_MAX: no limit
  size_t candidate = 0;           ///< index into TuneResult::candidates
  double busBw = 0;               ///< predicted at `atBytes`, the range's largest size evaluated
  uint64_t atBytes = 0;
  double bound = 0; ///< the collective's lower bound on the topology
};

struct TuneResult {
  std::vector<TunedCandidate> candidates;
  std::vector<TunedRange> ranges; ///< per collective in the order asked, by size
};

/// Every collective of `kinds` (empty: allreduce, allgather, reducescatter,
/// broadcast, reduce) on `topo` (at least 2 GPUs), roots 0.
llvm::Expected<TuneResult> tuneTopology(const Topology &topo, std::vector<CollKind> kinds);

/// The sizes the model is evaluated at: 1K, 4K, ..., 1G.
std::vector<uint64_t> tuneSizes();

/// The tuning table's rules for `result` on a job of `nranks` ranks, in
/// order: a range's target is its candidate's name, its text the table line
/// (formatTuningRule) with the prediction and the bound as a comment, its
/// origin `origin`. What colltune writes and what the runtime's synthesis at
/// communicator creation adds to its rules.
std::vector<TuningRule> tunedRules(const TuneResult &result, int nranks,
                                   const std::string &origin);

/// Compiles a .coll program (for the ranks it declares) in process; the
/// error holds the compiler's diagnostics.
llvm::Expected<ir::Algorithm> compileProgramText(const std::string &text, const std::string &name);

} // namespace coll::synth

#endif // COLL_SYNTH_TUNE_H
