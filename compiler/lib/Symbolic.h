//===- Symbolic.h - Executing programs on contribution sets -----*- C++ -*-===//
//
// Symbolic execution: every chunk slot holds the set of original input
// chunks (contributions) it carries; a copy replaces a set, a reduction
// unites two disjoint ones. Run over a traced DAG in program order, or over
// an IR in a topological order of its steps, and compared with the
// collective's postcondition, this decides whether the program (or the IR)
// implements the collective in one call mode (docs/COMPILER.md,
// "Verification").
//
//===----------------------------------------------------------------------===//

#ifndef COLL_COMPILER_SYMBOLIC_H
#define COLL_COMPILER_SYMBOLIC_H

#include "coll/ir/Verifier.h"
#include "coll/lang/ChunkDag.h"

#include <cstdint>
#include <optional>
#include <string>

namespace coll::compiler {

/// Why a symbolic execution failed, and where: `step` is the IR step (or
/// the traced operation, as gpu = -1 and step = its index) that failed or
/// last wrote the wrong chunk; gpu = step = -1 when none did.
struct SymbolicFailure {
  ir::StepRef step;
  std::string message;
};

/// Whether the traced operations, run in program order with the memory of
/// `inplace` calls, establish the postcondition.
bool validInProgramOrder(const lang::ChunkDag &dag, bool inplace);

/// Runs `alg` (whose chunks are the DAG's refined `refinement` times) in
/// `analysis.topologicalOrder` with the memory of `inplace` calls; out of
/// place, the input must also stay unchanged.
std::optional<SymbolicFailure> executeIR(const ir::Algorithm &alg,
                                         const ir::Analysis &analysis,
                                         const lang::ChunkDag &dag,
                                         int32_t refinement, bool inplace);

} // namespace coll::compiler

#endif // COLL_COMPILER_SYMBOLIC_H
