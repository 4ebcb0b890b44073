//===- TuningTable.h - The tuning table (COLL_TUNING_FILE) --------*- C++ -*-===//
//
// One rule per line: collective, rank range, byte range, target (docs/
// RUNTIME.md, "Tuning tables"):
//
//     # collective   ranks   bytes      target
//     allreduce      2-4     0-64K      allreduce_allpairs
//     allreduce      *       64K-*      allreduce_ring
//     allgather      8       *          LL128
//     allreduce      *       0-4K       mpi
//
// Ranks are inclusive ranges (`*`, `N`, `A-B`, `A-`), bytes half-open
// [LO, HI) with K/M/G suffixes (powers of 1024) and `*` for no limit, sized
// as nccl-tests does (the larger, all-ranks side). A target is an algorithm
// name, a protocol (Simple, LL, LL128), a library underneath Coll (mpi,
// nccl, gloo, torch) or, for alltoall only, `p2p` (grouped sends and
// receives, no program). Rules are tried in order; the first that matches and
// whose target applies wins.
//
// This library owns the format: the runtime reads tables with it, colltune
// and the runtime's synthesis at communicator creation write rules with it
// (synth::tunedRules, Tune.h). It links no compiler, so that every build of
// the runtime has it.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_SYNTH_TUNINGTABLE_H
#define COLL_SYNTH_TUNINGTABLE_H

#include "coll/ir/Algorithm.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace coll::synth {

struct TuningRule {
  /// PointToPoint: `p2p`, an alltoall run as grouped sends and receives.
  enum class Target { Algorithm, Protocol, Library, PointToPoint };

  std::optional<ir::Collective> collective; ///< nullopt: any
  int minRanks = 1, maxRanks = 1 << 30;     ///< inclusive
  uint64_t minBytes = 0;                    ///< inclusive
  uint64_t maxBytes = UINT64_MAX;           ///< exclusive; UINT64_MAX: no limit
  Target kind = Target::Algorithm;
  std::string target;         ///< algorithm or library name
  ir::Protocol protocol = ir::Protocol::Simple;
  std::string origin;         ///< FILE:LINE
  std::string text;           ///< the rule as written

  bool matches(ir::Collective coll, int nranks, uint64_t bytes) const;
};

/// Parses a tuning table; errors are "FILE:LINE: error: ...".
llvm::Expected<std::vector<TuningRule>> parseTuningTable(llvm::StringRef text,
                                                         llvm::StringRef fileName);
llvm::Expected<std::vector<TuningRule>> readTuningFile(llvm::StringRef path);

/// `rule` as a line of a table: collective, ranks, bytes and target in
/// aligned columns ("allreduce      8       0-64K       allreduce_ring"),
/// which parseTuningTable reads back as the same rule.
std::string formatTuningRule(const TuningRule &rule);

} // namespace coll::synth

#endif // COLL_SYNTH_TUNINGTABLE_H
