//===- Verify.cpp - Re-verifying a schedule against its program -----------===//
//
// Nothing leaves the compiler unverified (docs/COMPILER.md,
// "Verification"):
//
//  1. ir::verify: the IR contract, including the deadlock check over tb
//     order, dependencies and send -> receive;
//  2. a simulated run with 8-slot FIFOs (ir::findDeadlock), which also finds
//     the deadlocks bounded FIFOs cause, and points at the steps involved;
//  3. every traced operation scheduled exactly once: each part of it sent
//     and received once (or run once, when local);
//  4. symbolic execution in a topological order against the
//     postcondition, and no races (ir::findRace), so that every order the
//     runtime may take computes the same: in the traced mode and, to decide
//     whether to declare it, in the other mode;
//  5. the target's runtime limits.
//
// Failures of 1-4 are compiler bugs and say so; 5 is the program's. All are
// located at the operations the offending steps were made from.
//
//===----------------------------------------------------------------------===//

#include "Program.h"
#include "Symbolic.h"

#include "coll/ir/Check.h"
#include "coll/ir/Races.h"
#include "coll/support/PhaseTimer.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Error.h"

#include <algorithm>

namespace coll::compiler {

llvm::StringRef targetName(Target target) {
  return target == Target::Msccl ? "msccl" : "coll";
}

ir::RuntimeLimits runtimeLimits(Target target) {
  return target == Target::Msccl ? ir::mscclLimits() : ir::RuntimeLimits();
}

namespace {

constexpr unsigned MaxReported = 10;

class Checker {
public:
  Checker(const Schedule &schedule, const lang::ChunkDag &dag,
          lang::DiagnosticEngine &diags)
      : schedule(schedule), alg(schedule.algorithm), dag(dag), diags(diags) {}

  std::optional<Modes> checkCorrectness();
  bool checkLimits(Target target);

private:
  bool checkContract(std::optional<ir::Analysis> &analysis);
  bool checkDeadlock();
  bool checkExactlyOnce();

  /// The place of the operation step `ref` (or its tb's first step, or
  /// the collective) came from.
  llvm::SMLoc locOf(ir::StepRef ref) const {
    if (ref.gpu < 0 || ref.tb < 0)
      return dag.collective.loc;
    const auto &origins = schedule.origins[ref.gpu][ref.tb];
    if (origins.empty())
      return dag.collective.loc;
    size_t step =
        ref.step < 0 ? 0 : std::min<size_t>(ref.step, origins.size() - 1);
    return dag.ops[origins[step].op].loc;
  }
  static std::string where(ir::StepRef ref) {
    std::string text = "rank " + std::to_string(ref.gpu);
    if (ref.tb >= 0)
      text += " tb " + std::to_string(ref.tb);
    if (ref.step >= 0)
      text += " step " + std::to_string(ref.step);
    return text;
  }
  std::string describeStep(ir::StepRef ref) const {
    const ir::ThreadBlock &tb = alg.gpus[ref.gpu].tbs[ref.tb];
    const ir::Step &step = tb.steps[ref.step];
    ir::StepTypeInfo info = ir::stepTypeInfo(step.type);
    std::string text = where(ref) + " ('" + ir::stepTypeName(step.type).str();
    if (info.receives)
      text += "' from rank " + std::to_string(tb.recvPeer);
    else if (info.sends)
      text += "' to rank " + std::to_string(tb.sendPeer);
    else if (info.direct == ir::DirectRole::RemoteSrc ||
             info.direct == ir::DirectRole::Wait)
      text += "' from rank " + std::to_string(step.peer);
    else if (info.direct != ir::DirectRole::None)
      text += "' to rank " + std::to_string(step.peer);
    else
      text += "'";
    return text + ")";
  }
  void internalError(ir::StepRef ref, const llvm::Twine &message) {
    diags.error(locOf(ref), "internal compiler error: " + message);
  }

  const Schedule &schedule;
  const ir::Algorithm &alg;
  const lang::ChunkDag &dag;
  lang::DiagnosticEngine &diags;
};

bool Checker::checkContract(std::optional<ir::Analysis> &analysis) {
  ir::DiagnosticList list("<compiled>");
  llvm::Expected<ir::Analysis> result = ir::verify(alg, list);
  if (result) {
    analysis = std::move(*result);
    return true;
  }
  llvm::consumeError(result.takeError());
  unsigned reported = 0;
  for (const ir::Diagnostic &d : list.all()) {
    if (d.severity != ir::Severity::Error || reported++ == MaxReported)
      continue;
    // A cycle names no element; the simulation below finds its steps.
    if (d.where.gpu < 0)
      continue;
    internalError(d.where, "the IR made from this operation breaks the IR "
                           "contract: " +
                               where(d.where) + ": " + d.message);
  }
  checkDeadlock();
  return false;
}

/// Runs the tbs in their order with 8-slot FIFOs; a run that gets stuck is
/// a dependency cycle (or a FIFO deadlock), reported at the operations of
/// the steps the tbs wait at.
bool Checker::checkDeadlock() {
  std::optional<ir::Deadlock> dead = ir::findDeadlock(alg, FifoSlots);
  if (!dead)
    return true;
  const std::vector<ir::StepRef> &stuck = dead->stuck;
  ir::StepRef first = stuck.front();
  diags.error(
      locOf(first),
      "deadlock: " + describeStep(first) + " waits forever, and so " +
          (stuck.size() == 2
               ? "does 1 other step"
               : "do " + std::to_string(stuck.size() - 1) + " other steps") +
          ": the tb orders, dependencies and connections (with " +
          std::to_string(FifoSlots) + "-slot FIFOs) form a cycle");
  for (size_t i = 1; i < stuck.size() && i <= MaxReported; ++i)
    diags.note(locOf(stuck[i]), describeStep(stuck[i]) + " waits here");
  return false;
}

/// Sorts keys `op << 24 | part` in time linear in their number and the
/// operations': a counting sort by operation (keys naming no operation of
/// the `numOps` last), then each operation's few keys.
static void sortByOp(std::vector<uint64_t> &keys, size_t numOps) {
  auto bucket = [numOps](uint64_t key) {
    return static_cast<size_t>(std::min<uint64_t>(key >> 24, numOps));
  };
  std::vector<size_t> start(numOps + 2, 0);
  for (uint64_t key : keys)
    ++start[bucket(key) + 1];
  for (size_t b = 1; b < start.size(); ++b)
    start[b] += start[b - 1];
  std::vector<uint64_t> sorted(keys.size());
  std::vector<size_t> next(start.begin(), start.end() - 1);
  for (uint64_t key : keys)
    sorted[next[bucket(key)]++] = key;
  for (size_t b = 0; b + 1 < start.size(); ++b)
    if (start[b + 1] - start[b] > 1)
      std::sort(sorted.begin() + start[b], sorted.begin() + start[b + 1]);
  keys.swap(sorted);
}

bool Checker::checkExactlyOnce() {
  // (op, lane, role) of every step; role 0 = local, 1 = send, 2 = receive.
  std::vector<uint64_t> seen;
  auto add = [&](uint32_t op, int32_t lane, uint32_t role) {
    seen.push_back((uint64_t(op) << 24) | (uint64_t(lane) << 2) | role);
  };
  for (size_t g = 0; g < alg.gpus.size(); ++g)
    for (size_t t = 0; t < alg.gpus[g].tbs.size(); ++t) {
      const std::vector<ir::Step> &steps = alg.gpus[g].tbs[t].steps;
      for (size_t s = 0; s < steps.size(); ++s) {
        const StepOrigin &o = schedule.origins[g][t][s];
        ir::StepTypeInfo info = ir::stepTypeInfo(steps[s].type);
        // Nops, signals and waits carry orderings, not operations.
        if (steps[s].type == ir::StepType::Nop ||
            steps[s].type == ir::StepType::Signal ||
            steps[s].type == ir::StepType::Wait)
          continue;
        if (info.receives)
          add(o.op, o.lane, 2);
        if (info.sends)
          add(info.receives ? o.forwardedOp : o.op, o.lane, 1);
        if (!info.receives && !info.sends)
          add(o.op, o.lane, 0);
      }
    }
  sortByOp(seen, dag.ops.size());
  std::vector<uint64_t> expected;
  int32_t instances = schedule.lanes;
  int32_t maxParallel = 1;
  for (const lang::ChunkOp &op : dag.ops)
    maxParallel = std::max(maxParallel, op.parallel);
  instances /= maxParallel;
  for (uint32_t o = 0; o < dag.ops.size(); ++o) {
    const lang::ChunkOp &op = dag.ops[o];
    for (int32_t q = 0; q < instances * op.parallel; ++q) {
      int32_t lane = (q / op.parallel) * maxParallel + q % op.parallel;
      if (op.src.rank == op.dst.rank || op.direct != lang::Direct::None)
        expected.push_back((uint64_t(o) << 24) | (uint64_t(lane) << 2));
      else
        for (uint32_t role : {1u, 2u})
          expected.push_back((uint64_t(o) << 24) | (uint64_t(lane) << 2) |
                             role);
    }
  }
  sortByOp(expected, dag.ops.size());
  if (seen == expected)
    return true;
  auto [a, b] =
      std::mismatch(seen.begin(), seen.end(), expected.begin(), expected.end());
  uint64_t key = a == seen.end()       ? *b
                 : b == expected.end() ? *a
                                       : std::min(*a, *b);
  diags.error(dag.ops[key >> 24].loc,
              "internal compiler error: this operation is not scheduled "
              "exactly once (part " +
                  llvm::Twine((key >> 2) & 0x3fffff) + ")");
  return false;
}

std::optional<Modes> Checker::checkCorrectness() {
  // Every step must have its origin, for every diagnostic below.
  bool shaped = schedule.origins.size() == alg.gpus.size();
  for (size_t g = 0; shaped && g < alg.gpus.size(); ++g) {
    shaped = schedule.origins[g].size() == alg.gpus[g].tbs.size();
    for (size_t t = 0; shaped && t < alg.gpus[g].tbs.size(); ++t)
      shaped = schedule.origins[g][t].size() == alg.gpus[g].tbs[t].steps.size();
  }
  if (!shaped) {
    diags.error(dag.collective.loc, "internal compiler error: the schedule "
                                    "names no operation for some of its steps");
    return std::nullopt;
  }
  std::optional<ir::Analysis> analysis;
  {
    PhaseTimer timer("verify", "verifying the IR");
    if (!checkContract(analysis))
      return std::nullopt;
  }
  {
    PhaseTimer timer("deadlock", "deadlock simulation");
    if (!checkDeadlock())
      return std::nullopt;
  }
  {
    PhaseTimer timer("exactly-once", "every operation exactly once");
    if (!checkExactlyOnce())
      return std::nullopt;
  }
  const lang::CollectiveSpec &spec = dag.collective;
  bool traced = spec.inplace;
  std::optional<ir::Definition> refined;
  if (schedule.refinement != 1)
    refined = refinedDefinition(spec, schedule.refinement);
  const ir::Definition &def = refined ? *refined : static_cast<const ir::Definition &>(spec);
  auto execute = [&](bool inplace) {
    PhaseTimer timer("symbolic", "symbolic execution");
    return ir::executeSymbolically(alg, *analysis, def, inplace, /*strictReads=*/true);
  };
  auto findRace = [&](bool inplace) {
    PhaseTimer timer("races", "race check");
    return ir::findRace(alg, inplace);
  };
  if (std::optional<ir::WrongResult> wrong = execute(traced)) {
    const ir::StepRef step = wrong->writers.empty() ? ir::StepRef{} : wrong->writers.front();
    internalError(step, llvm::Twine("the compiled IR does not implement the collective ") +
                            (traced ? "in place" : "out of place") +
                            (step.gpu >= 0 ? ": " + where(step) + " " + wrong->message
                                           : ": " + wrong->message));
    return std::nullopt;
  }
  if (std::optional<ir::Race> race = findRace(traced)) {
    std::string owner = "rank " + std::to_string(race->owner);
    const char *access = race->write ? " writes " : " reads ";
    switch (race->kind) {
    case ir::Race::Unordered:
      internalError(race->second,
                    "nothing orders " + describeStep(race->second) +
                        " after " + describeStep(race->first) +
                        ", which both access " + race->memory);
      diags.note(locOf(race->first),
                 "the other step is made from this operation");
      break;
    case ir::Race::BeforeStart:
      internalError(race->second, describeStep(race->second) + access +
                                      race->memory + ", but nothing orders "
                                      "it after " + owner +
                                      " starts the call");
      break;
    case ir::Race::AfterEnd:
      internalError(race->second, describeStep(race->second) + access +
                                      race->memory + ", but nothing orders "
                                      "it before " + owner + " ends the call");
      break;
    }
    return std::nullopt;
  }
  // The other mode: a custom collective has it only with input and output
  // of one size; then it must be right and race-free with that mode's
  // memory.
  bool other = (spec.kind != ir::Collective::Custom ||
                spec.inputChunks == spec.outputChunks) &&
               !execute(!traced) && !findRace(!traced);
  return Modes{traced || other, !traced || other};
}

bool Checker::checkLimits(Target target) {
  if (target == Target::Coll)
    return true; // the interpreter has none
  ir::RuntimeLimits limits = runtimeLimits(target);
  ir::DiagnosticList list("<compiled>");
  llvm::Expected<ir::Analysis> result = ir::verify(alg, list, limits);
  if (result)
    return true;
  llvm::consumeError(result.takeError());
  unsigned reported = 0, errors = 0;
  for (const ir::Diagnostic &d : list.all()) {
    if (d.severity != ir::Severity::Error)
      continue;
    ++errors;
    if (reported == MaxReported)
      continue;
    ++reported;
    // A tb over the step limit is located at its first step too many.
    ir::StepRef at = d.where;
    if (at.step < 0 && at.tb >= 0 && limits.maxStepsPerTb > 0 &&
        alg.gpus[at.gpu].tbs[at.tb].steps.size() > size_t(limits.maxStepsPerTb))
      at.step = limits.maxStepsPerTb;
    diags.error(locOf(at), "target " + targetName(target) + ": " +
                               where(d.where) + ": " + d.message);
  }
  if (errors > reported)
    diags.note(dag.collective.loc,
               llvm::Twine(errors - reported) +
                   " more steps or tbs are over the limits of target " +
                   targetName(target));
  return false;
}

} // namespace

std::optional<Modes> checkSchedule(const Schedule &schedule,
                                   const lang::ChunkDag &dag,
                                   lang::DiagnosticEngine &diags) {
  return Checker(schedule, dag, diags).checkCorrectness();
}

bool checkLimits(const Schedule &schedule, const lang::ChunkDag &dag,
                 Target target, lang::DiagnosticEngine &diags) {
  return Checker(schedule, dag, diags).checkLimits(target);
}

std::optional<Modes> verifySchedule(const Schedule &schedule,
                                    const lang::ChunkDag &dag,
                                    const CompileOptions &options,
                                    lang::DiagnosticEngine &diags) {
  std::optional<Modes> modes = checkSchedule(schedule, dag, diags);
  if (!modes || !checkLimits(schedule, dag, options.target, diags))
    return std::nullopt;
  return modes;
}

} // namespace coll::compiler
