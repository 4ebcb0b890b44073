//===- Compiler.cpp - The pass pipeline -----------------------------------===//
//
// One attempt runs every pass once (Compiler.h lists them). Fusion is the
// only pass that can make a correct program hard to schedule: if ordering
// or verification fails with fusion, the program is compiled again without
// it, whose program order is deadlock-free by construction
// (docs/COMPILER.md). What still fails is reported.
//
//===----------------------------------------------------------------------===//

#include "Program.h"

#include "coll/support/PhaseTimer.h"

#include "llvm/Support/raw_ostream.h"

namespace coll::compiler {
namespace {

/// Runs the passes up to emission; nothing when the program had an error
/// (reported) or no order was found (not reported).
std::optional<Schedule> attempt(const lang::ChunkDag &dag, bool fusion,
                                bool spread, lang::DiagnosticEngine &diags,
                                bool &error) {
  Program prog;
  {
    PhaseTimer timer("layout", "buffer layout and refinement");
    if (!buildLayout(dag, prog, diags)) {
      error = true;
      return std::nullopt;
    }
  }
  {
    PhaseTimer timer("lower", "lowering to instructions");
    lower(prog);
  }
  {
    PhaseTimer timer("dependencies", "dependencies between instructions");
    computeDependencies(prog);
  }
  {
    PhaseTimer timer("signals", "signals and waits for direct operations");
    insertSignals(prog);
  }
  ThreadblockAssigner assigner(prog, diags);
  {
    PhaseTimer timer("program-tbs", "threadblocks the program names");
    if (!assigner.applyProgramIds()) {
      error = true;
      return std::nullopt;
    }
  }
  if (fusion) {
    PhaseTimer timer("fusion", "fusion");
    fuse(prog, assigner);
  }
  {
    PhaseTimer timer("threadblocks", "threadblock and channel assignment");
    assigner.assign(/*pairPeers=*/true);
  }
  {
    PhaseTimer timer("order", "ordering");
    if (!order(prog))
      return std::nullopt;
  }
  std::optional<Schedule> schedule;
  {
    PhaseTimer timer("emit", "emitting the IR");
    schedule = emit(prog, spread);
  }
  {
    PhaseTimer timer("prune-signals", "signals the tb order made redundant");
    pruneSignals(*schedule);
  }
  PhaseTimer timer("join-fused", "getre, put, signal and wait runs the runtimes fuse");
  // Waits moved ahead or joined, or a signal delayed, can make a pair
  // redundant (a signal now later implies another): prune again, then join
  // what that parted.
  if (joinFusedEnds(*schedule)) {
    const ir::Algorithm joined = schedule->algorithm;
    pruneSignals(*schedule);
    if (!(schedule->algorithm == joined))
      joinFusedEnds(*schedule);
  }
  return schedule;
}

} // namespace

std::optional<Schedule> compileSchedule(const lang::ChunkDag &dag,
                                        const CompileOptions &options,
                                        lang::DiagnosticEngine &diags) {
  bool fusion = dag.options.fusion;
  // Helper nops wait and publish as steps, which MSCCL's nops do not.
  bool spread = options.target == Target::Coll;
  bool error = false;
  std::optional<Schedule> schedule =
      attempt(dag, fusion, spread, diags, error);
  if (error)
    return std::nullopt;

  std::optional<Modes> modes;
  if (schedule && fusion) {
    // A failure here is retried without fusion before anyone sees it.
    std::string ignored;
    llvm::raw_string_ostream quiet(ignored);
    lang::DiagnosticEngine probe(diags.sourceMgr(), quiet);
    modes = checkSchedule(*schedule, dag, probe);
  }
  if (!modes && fusion)
    schedule = attempt(dag, /*fusion=*/false, spread, diags, error);
  if (!schedule) {
    diags.error(dag.collective.loc,
                "internal compiler error: no deadlock-free order of the "
                "operations was found");
    return std::nullopt;
  }
  if (!modes)
    modes = checkSchedule(*schedule, dag, diags);
  if (!modes || !checkLimits(*schedule, dag, options.target, diags))
    return std::nullopt;
  schedule->algorithm.inplace = modes->inplace;
  schedule->algorithm.outofplace = modes->outofplace;
  return schedule;
}

std::optional<ir::Algorithm> compile(const lang::ChunkDag &dag,
                                     const CompileOptions &options,
                                     lang::DiagnosticEngine &diags) {
  std::optional<Schedule> schedule = compileSchedule(dag, options, diags);
  if (!schedule)
    return std::nullopt;
  return std::move(schedule->algorithm);
}

} // namespace coll::compiler
