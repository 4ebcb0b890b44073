//===- Races.h - Unordered accesses to the same memory ----------*- C++ -*-===//
//
// A symbolic execution follows one order of an IR's steps; the runtime may
// run the steps of different tbs in any order the dependencies allow. Both
// agree when every two accesses of one rank to the same memory, at least
// one of them a write, are ordered by the rank's tb order and dependencies:
// then every execution computes what the symbolic one did. Orderings that
// only hold through other ranks' transfers are not considered (the compiler
// orders every such pair on the rank itself, docs/COMPILER.md), so this is
// the check of any IR, ours or another tool's (docs/IR.md, "Checking").
//
//===----------------------------------------------------------------------===//

#ifndef COLL_IR_RACES_H
#define COLL_IR_RACES_H

#include "coll/ir/Algorithm.h"

#include <optional>
#include <string>

namespace coll::ir {

/// Two steps of one rank that touch the same memory, one writing, with
/// nothing ordering them.
struct Race {
  ir::StepRef first, second;
  std::string memory; ///< `i[3]`, `o[0]`, `s[2]`
};

/// The first race in `alg` with the memory of `inplace` calls (input and
/// output aliased as NCCL aliases them), in rank order.
std::optional<Race> findRace(const ir::Algorithm &alg, bool inplace);

} // namespace coll::ir

#endif // COLL_IR_RACES_H
