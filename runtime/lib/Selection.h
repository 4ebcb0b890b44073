//===- Selection.h - Which algorithm serves a call ---------------*- C++ -*-===//
//
// The runtime's own tuning rules: the order of the embedded algorithms on
// the host backend (docs/RUNTIME.md, "Built-in rules"), read with the tuning
// table's parser (coll/synth/TuningTable.h).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_RUNTIME_SELECTION_H
#define COLL_RUNTIME_SELECTION_H

#include "coll/synth/TuningTable.h"

#include <vector>

namespace coll::rt {

using synth::TuningRule;

/// The built-in rules that order the embedded algorithms (docs/RUNTIME.md);
/// `crowded`: some host of the job runs more processes than it has CPUs,
/// and the rules for that case come first.
const std::vector<TuningRule> &builtinTuningRules(bool crowded = false);
/// Whether `rule` is one of the rules for crowded hosts.
bool isCrowdedRule(const TuningRule &rule);

} // namespace coll::rt

#endif // COLL_RUNTIME_SELECTION_H
