//===- Tuning.h - The tuning table (COLL_TUNING_FILE) -------------*- C++ -*-===//
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
// name, a protocol (Simple, LL, LL128) or a library underneath Coll (mpi,
// nccl, gloo, torch). Rules are tried in order; the first that matches and
// whose target applies wins.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_RUNTIME_TUNING_H
#define COLL_RUNTIME_TUNING_H

#include "coll/ir/Algorithm.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace coll::rt {

struct TuningRule {
  enum class Target { Algorithm, Protocol, Library };

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

/// The built-in rules that order the embedded algorithms (docs/RUNTIME.md);
/// `crowded`: some host of the job runs more processes than it has CPUs,
/// and the rules for that case come first.
const std::vector<TuningRule> &builtinTuningRules(bool crowded = false);
/// Whether `rule` is one of the rules for crowded hosts.
bool isCrowdedRule(const TuningRule &rule);

/// A byte count: decimal digits with an optional K, M or G (binary, either
/// case); nullopt for anything else.
std::optional<uint64_t> parseBytes(llvm::StringRef text);

/// "0", "64K", "4M", "inf".
std::string formatBytes(uint64_t bytes);

} // namespace coll::rt

#endif // COLL_RUNTIME_TUNING_H
