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
/// The built-in rules for calls whose buffers lie in registered windows
/// (docs/RUNTIME.md, "Windows"): they come before the others, and choose
/// the direct programs, which read and write such buffers in place.
const std::vector<TuningRule> &windowTuningRules();
/// The built-in rules for device calls on a communicator of one host that
/// holds windows (docs/RUNTIME.md, "Windows"): they come first for such
/// calls, whichever memory the call's buffers are in.
const std::vector<TuningRule> &deviceWindowTuningRules();
/// Whether `rule` is one of deviceWindowTuningRules().
bool isDeviceWindowRule(const TuningRule &rule);
/// Built-in programs with direct steps: loaded only where every rank is on
/// one host, and chosen only through windowTuningRules().
bool isWindowOnlyBuiltin(llvm::StringRef name);
/// Whether `rule` is one of windowTuningRules().
bool isWindowRule(const TuningRule &rule);
/// The built-in rules for device calls (docs/RUNTIME.md, "Built-in rules"):
/// after the user's and the window rules, before builtinTuningRules().
const std::vector<TuningRule> &deviceTuningRules();
/// Below this size the built-in rules give a device call an LL program,
/// whatever its collective and ranks (issue 66: LL's hop, its flag in the data,
/// is the only one near 0.6 us; Simple and LL128 pay an acquire and a
/// release per hop). deviceTuningRules() says where the figure comes from.
constexpr uint64_t DeviceLLBelowBytes = uint64_t(16) << 10;
/// Whether `rule` is one of deviceTuningRules().
bool isDeviceRule(const TuningRule &rule);
/// Built-in protocol variants that deviceTuningRules() names: chosen for
/// device calls only, through those rules or a user's.
bool isDeviceOnlyBuiltin(llvm::StringRef name);
/// Whether a rule of deviceTuningRules() names `name` for `nranks` ranks:
/// where none does, the registry does not compile it (unless a tuning rule
/// names it).
bool deviceRulesCover(llvm::StringRef name, int nranks);
/// Built-in programs that no built-in rule picks: the hierarchical ones,
/// which fit a job's node shape and serve it where a tuning table names
/// them. The registry compiles them only then: at 512 x 8 ranks the ring
/// hierarchy alone is 4.26 million steps (docs/RUNTIME.md, "The program
/// cache").
bool isTuningOnlyBuiltin(llvm::StringRef name);
/// The most ranks for which the registry compiles them (a direct two-shot
/// has a step per pair of ranks).
constexpr int MaxWindowBuiltinRanks = 64;

} // namespace coll::rt

#endif // COLL_RUNTIME_SELECTION_H
