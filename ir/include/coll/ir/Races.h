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
// Direct steps (put, get, getre) touch other ranks' memory, so an algorithm
// with any is checked as one job: a signal orders what its tb did before it
// before what the tb that waits for it does after the wait, every access to
// a rank's memory must be ordered with every other one, and a peer's access
// must also follow the owner's start of the call and precede its end
// (docs/IR.md, "Direct steps").
//
//===----------------------------------------------------------------------===//

#ifndef COLL_IR_RACES_H
#define COLL_IR_RACES_H

#include "coll/ir/Algorithm.h"

#include <optional>
#include <string>

namespace coll::ir {

/// Two steps that touch the same memory, one writing, with nothing ordering
/// them; or a peer's access to a rank's memory that may come before the
/// rank starts the call or after it ends it.
struct Race {
  enum Kind : uint8_t {
    Unordered,   ///< `first` and `second` conflict
    BeforeStart, ///< `second` may access `owner`'s memory before it starts
    AfterEnd,    ///< `second` may access `owner`'s memory after it ends
  };
  Kind kind = Unordered;
  ir::StepRef first, second;
  /// `i[3]`, `o[0]`, `s[2]`; with direct steps, `rank 1 o[0]`.
  std::string memory;
  int32_t owner = -1; ///< BeforeStart, AfterEnd: the rank of the memory
  bool write = false; ///< BeforeStart, AfterEnd: whether `second` writes it
};

/// The first race in `alg` with the memory of `inplace` calls (input and
/// output aliased as NCCL aliases them), in rank order.
std::optional<Race> findRace(const ir::Algorithm &alg, bool inplace);

} // namespace coll::ir

#endif // COLL_IR_RACES_H
