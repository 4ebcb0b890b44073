//===- Selection.cpp - Which algorithm serves a call -----------------------===//

#include "Selection.h"

namespace coll::rt {

using synth::parseTuningTable;

namespace {

// The built-in order of the embedded algorithms on the host backend. The
// thresholds come from the runtime benchmark (docs/PERFORMANCE.md).
constexpr const char *BuiltinTable = R"(# Coll's built-in rules (docs/RUNTIME.md)
allreduce      2   0-4K    allreduce_oneshot_ll128
allreduce      *   0-8K    allreduce_oneshot
allreduce      *   0-16K   allreduce_allpairs
allreduce      *   *       allreduce_ring
allgather      *   0-2M    allgather_recursive_doubling
allgather      *   *       allgather_ring
reducescatter  *   0-16K   reducescatter_allpairs
reducescatter  *   *       reducescatter_ring
alltoall       *   *       alltoall_allpairs
broadcast      *   0-64K   broadcast_binomial
broadcast      *   *       broadcast_chain
reduce         *   *       reduce_binomial
gather         *   *       gather_direct
scatter        *   *       scatter_direct
)";

// Rules that come first where some host of the job runs more processes than
// it has CPUs (docs/RUNTIME.md). A pipeline such as the chain needs all its
// stages running at once; where processes share CPUs, every slot that moves
// down the chain waits for a process to be scheduled, and the binomial
// tree's fewer, larger hand-offs win (measured with 4 processes on 2 CPUs:
// docs/PERFORMANCE.md).
constexpr const char *CrowdedTable = R"(# Coll's built-in rules for crowded hosts (docs/RUNTIME.md)
broadcast      *   64K-32M broadcast_binomial
)";

std::vector<TuningRule> parseBuiltin(const char *text, const char *name) {
  auto parsed = parseTuningTable(text, name);
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
    return {};
  }
  return std::move(*parsed);
}

} // namespace

const std::vector<TuningRule> &builtinTuningRules(bool crowded) {
  static const std::vector<TuningRule> rules = parseBuiltin(BuiltinTable, "<built-in rules>");
  static const std::vector<TuningRule> crowdedFirst = [] {
    std::vector<TuningRule> all = parseBuiltin(CrowdedTable, "<built-in rules for crowded hosts>");
    all.insert(all.end(), rules.begin(), rules.end());
    return all;
  }();
  return crowded ? crowdedFirst : rules;
}

bool isCrowdedRule(const TuningRule &rule) {
  return llvm::StringRef(rule.origin).startswith("<built-in rules for crowded hosts>");
}

} // namespace coll::rt
