//===- Symbolic.h - The compiler's programs on contribution sets -*- C++ -*-===//
//
// The compiler verifies with the IR library's symbolic executor
// (coll/ir/Symbolic.h): a traced program in program order, to decide whether
// it is also right in place, and the IR it compiled, against the program's
// postcondition (docs/COMPILER.md, "Verification"). Both read strictly: a
// compiled program never reads data nobody defined.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_COMPILER_SYMBOLIC_H
#define COLL_COMPILER_SYMBOLIC_H

#include "coll/ir/Algorithm.h"
#include "coll/lang/ChunkDag.h"

#include <cstdint>

namespace coll::compiler {

/// The definition the program's collective states (its spec is one), for
/// chunks refined `refinement` times: refined part t of chunk j is chunk
/// j * refinement + t.
ir::Definition refinedDefinition(const lang::CollectiveSpec &spec, int32_t refinement);

/// Whether the traced operations, run in program order with the memory of
/// `inplace` calls, establish the postcondition.
bool validInProgramOrder(const lang::ChunkDag &dag, bool inplace);

} // namespace coll::compiler

#endif // COLL_COMPILER_SYMBOLIC_H
