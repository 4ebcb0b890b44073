//===- Signals.cpp - Signals and waits for direct operations --------------===//
//
// A direct operation (put, get, get_reduce) runs on one rank and reaches the
// memory of another, so the dependencies computeDependencies finds on cells
// cross ranks. No FIFO orders them: each becomes a signal on the producer's
// rank and a wait on the consumer's (docs/IR.md, "Direct steps"):
//
//  - Data. For every instruction x and every other rank A whose
//    instructions x depends on, a signal on A after those producers and a
//    wait on x's rank before x, which then depends on the wait instead. A
//    producer already signalled to x's rank on the same channel is not
//    signalled again: x depends on that wait.
//  - The call's start. An access to peer B's memory that depends on no
//    instruction of B waits for a signal B sends when it starts (a signal
//    with no dependencies).
//  - The call's end. An access to B's memory that no instruction of B
//    depends on is followed by a signal to B, which B waits for at its end.
//
// Signals and waits of a rank run on one tb per channel (Threadblocks.cpp),
// so that one tb signals each peer on a channel and one waits for it. The
// k-th wait must take the k-th signal: each signal of a (sender, receiver,
// channel) depends on the one before, and so does each wait, so both tbs
// run them in the order they were made. The new instructions are numbered
// so that every edge (dependency, signal -> wait) still increases the id
// and the key: a signal right after its latest producer, a wait right
// before its consumer's chain head. Program order therefore stays a valid
// execution (docs/COMPILER.md, "Ordering").
//
// The pairs are chosen before the tbs are ordered; pruneSignals then drops
// those that the order made redundant, each only where the IR's own checks
// show that nothing races and nothing deadlocks without it.
//
//===----------------------------------------------------------------------===//

#include "Program.h"

#include "coll/ir/Check.h"
#include "coll/ir/Races.h"
#include "coll/ir/Verifier.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <array>
#include <functional>
#include <optional>

namespace coll::compiler {
namespace {

/// A producer standing for "the rank started the call".
constexpr uint32_t StartOfCall = NoInstr - 1;

uint64_t chainKey(int32_t from, int32_t to, int32_t channel) {
  return (uint64_t(uint32_t(from)) << 40) | (uint64_t(uint32_t(to)) << 16) |
         uint64_t(uint32_t(channel) & 0xffff);
}

struct Chain {
  uint32_t lastSignal = NoInstr, lastWait = NoInstr;
  int64_t anchor = -1; ///< the last signal's place: after this instruction
};

} // namespace

void insertSignals(Program &prog) {
  std::vector<Instr> &instrs = prog.instrs;
  const uint32_t n = static_cast<uint32_t>(instrs.size());
  if (llvm::none_of(instrs, [](const Instr &i) { return i.isDirect(); }))
    return;

  // Direct instructions that some instruction of their peer depends on:
  // those are ordered before the peer ends by that dependency's signal.
  std::vector<bool> peerFollows(n, false);
  for (InstrId y = 0; y < n; ++y)
    for (InstrId d : instrs[y].deps)
      if (instrs[d].rank != instrs[y].rank && instrs[d].isDirect() &&
          instrs[d].peer() == instrs[y].rank)
        peerFollows[d] = true;

  // New instructions have ids n, n+1, ... until renumbering, and a place:
  // after an original instruction, before one, or at either end.
  std::vector<Instr> extra;
  std::vector<std::pair<uint32_t, uint32_t>> afterOf, beforeOf; // (x, id)
  std::vector<uint32_t> prologue, epilogue;
  llvm::DenseMap<uint64_t, Chain, PackedKeyInfo> chains;
  llvm::DenseMap<std::pair<uint64_t, uint32_t>, uint32_t> covered;

  // A signal from `from` to `to` after `producers`, and its wait; returns
  // the wait's id. The wait's place is the caller's.
  auto makePair = [&](int32_t from, int32_t to, int32_t channel,
                      llvm::ArrayRef<uint32_t> producers,
                      const Instr &origin) {
    Chain &chain = chains[chainKey(from, to, channel)];
    Instr signal, wait;
    for (Instr *i : {&signal, &wait}) {
      i->channel = channel;
      i->lane = origin.lane;
      i->count = 0;
      i->op = origin.op;
    }
    signal.type = ir::StepType::Signal;
    signal.rank = from;
    signal.sendPeer = to;
    wait.type = ir::StepType::Wait;
    wait.rank = to;
    wait.sendPeer = from;
    int64_t anchor = chain.anchor;
    for (uint32_t p : producers)
      if (p != StartOfCall) {
        signal.deps.push_back(p);
        anchor = std::max<int64_t>(anchor, p);
      }
    if (chain.lastSignal != NoInstr)
      signal.deps.push_back(chain.lastSignal);
    if (chain.lastWait != NoInstr)
      wait.deps.push_back(chain.lastWait);
    llvm::sort(signal.deps);
    uint32_t s = n + static_cast<uint32_t>(extra.size());
    uint32_t w = s + 1;
    signal.to = w;
    wait.from = s;
    extra.push_back(std::move(signal));
    extra.push_back(std::move(wait));
    if (anchor < 0)
      prologue.push_back(s);
    else
      afterOf.emplace_back(static_cast<uint32_t>(anchor), s);
    chain.lastSignal = s;
    chain.lastWait = w;
    chain.anchor = anchor;
    return w;
  };

  // Data dependencies and the call's start, consumer by consumer.
  llvm::SmallVector<std::pair<int32_t, uint32_t>, 8> remote;
  llvm::SmallVector<uint32_t, 8> local, fresh;
  for (InstrId x = 0; x < n; ++x) {
    Instr &consumer = instrs[x];
    remote.clear();
    local.clear();
    for (InstrId d : consumer.deps)
      if (instrs[d].rank != consumer.rank)
        remote.emplace_back(instrs[d].rank, d);
      else
        local.push_back(d);
    if (consumer.isDirect() &&
        llvm::none_of(remote, [&](auto &r) { return r.first == consumer.peer(); }))
      remote.emplace_back(consumer.peer(), StartOfCall);
    if (remote.empty())
      continue;
    llvm::sort(remote);
    for (size_t i = 0; i < remote.size();) {
      int32_t from = remote[i].first;
      uint64_t key = chainKey(from, consumer.rank, consumer.channel);
      fresh.clear();
      for (; i < remote.size() && remote[i].first == from; ++i) {
        auto it = covered.find({key, remote[i].second});
        if (it != covered.end())
          local.push_back(it->second);
        else
          fresh.push_back(remote[i].second);
      }
      if (fresh.empty())
        continue;
      uint32_t w = makePair(from, consumer.rank, consumer.channel, fresh,
                            consumer);
      beforeOf.emplace_back(consumer.key.head, w);
      local.push_back(w);
      for (uint32_t p : fresh)
        covered[{key, p}] = w;
    }
    llvm::sort(local);
    local.erase(std::unique(local.begin(), local.end()), local.end());
    consumer.deps.assign(local.begin(), local.end());
  }

  // The call's end: accesses to a peer that nothing of the peer follows.
  llvm::SmallVector<uint64_t, 8> endKeys;
  llvm::DenseMap<uint64_t, llvm::SmallVector<uint32_t, 4>, PackedKeyInfo> ends;
  for (InstrId x = 0; x < n; ++x)
    if (instrs[x].isDirect() && !instrs[x].isSync() && !peerFollows[x]) {
      uint64_t key = chainKey(instrs[x].rank, instrs[x].peer(),
                              instrs[x].channel);
      auto [it, inserted] = ends.try_emplace(key);
      if (inserted)
        endKeys.push_back(key);
      it->second.push_back(x);
    }
  for (uint64_t key : endKeys) {
    const llvm::SmallVector<uint32_t, 4> &accesses = ends[key];
    const Instr &last = instrs[accesses.back()];
    epilogue.push_back(
        makePair(last.rank, last.peer(), last.channel, accesses, last));
  }

  // Renumbering: the prologue, each original instruction between what goes
  // before and after it, then the epilogue.
  llvm::stable_sort(afterOf, [](auto &a, auto &b) { return a.first < b.first; });
  llvm::stable_sort(beforeOf, [](auto &a, auto &b) { return a.first < b.first; });
  std::vector<uint32_t> order;
  order.reserve(n + extra.size());
  order.insert(order.end(), prologue.begin(), prologue.end());
  size_t a = 0, b = 0;
  for (InstrId x = 0; x < n; ++x) {
    for (; b < beforeOf.size() && beforeOf[b].first == x; ++b)
      order.push_back(beforeOf[b].second);
    order.push_back(x);
    for (; a < afterOf.size() && afterOf[a].first == x; ++a)
      order.push_back(afterOf[a].second);
  }
  order.insert(order.end(), epilogue.begin(), epilogue.end());
  assert(order.size() == n + extra.size() && "every instruction has a place");

  std::vector<uint32_t> newId(order.size());
  for (uint32_t i = 0; i < order.size(); ++i)
    newId[order[i]] = i;
  auto remap = [&](InstrId &id) {
    if (id != NoInstr)
      id = newId[id];
  };
  std::vector<Instr> result;
  result.reserve(order.size());
  for (uint32_t old : order) {
    Instr instr = old < n ? std::move(instrs[old]) : std::move(extra[old - n]);
    for (InstrId &d : instr.deps)
      remap(d);
    llvm::sort(instr.deps);
    remap(instr.from);
    remap(instr.to);
    remap(instr.firstReader);
    instr.key = old < n ? Key{newId[instr.key.head], instr.key.pos}
                        : Key{newId[old], 0};
    assert(llvm::all_of(instr.deps,
                        [&](InstrId d) { return d < result.size(); }) &&
           "dependencies point to earlier instructions");
    result.push_back(std::move(instr));
  }
  instrs = std::move(result);
}

namespace {

/// Drops a dependency that an earlier step of the same tb implies (one that
/// waits for that step or a later one of its tb), then sets `hasdep` on
/// exactly the steps something waits for.
void tidyDependencies(ir::Gpu &gpu) {
  std::vector<int32_t> known(gpu.tbs.size());
  for (ir::ThreadBlock &tb : gpu.tbs) {
    std::fill(known.begin(), known.end(), -1);
    for (ir::Step &step : tb.steps) {
      if (!step.hasDependency())
        continue;
      if (known[step.depTb] >= step.depStep)
        step.depTb = step.depStep = -1;
      else
        known[step.depTb] = step.depStep;
    }
  }
  for (ir::ThreadBlock &tb : gpu.tbs)
    for (const ir::Step &step : tb.steps)
      if (step.hasDependency())
        gpu.tbs[step.depTb].steps[step.depStep].hasDep = true;
}

/// Removes step `s` of tb `t` on rank `g`. A step that depended on it
/// depends on the step before it in that tb instead (which completes no
/// later), or on nothing when it was the first.
void removeStep(Schedule &schedule, int32_t g, int32_t t, int32_t s) {
  ir::Gpu &gpu = schedule.algorithm.gpus[g];
  std::vector<ir::Step> &steps = gpu.tbs[t].steps;
  steps.erase(steps.begin() + s);
  std::vector<StepOrigin> &origins = schedule.origins[g][t];
  origins.erase(origins.begin() + s);
  for (ir::ThreadBlock &tb : gpu.tbs)
    for (ir::Step &step : tb.steps) {
      step.hasDep = false;
      if (step.depTb != t)
        continue;
      if (step.depStep == s && s == 0)
        step.depTb = step.depStep = -1;
      else if (step.depStep >= s)
        --step.depStep;
    }
  tidyDependencies(gpu);
}

bool isSync(ir::StepType t) { return t == ir::StepType::Signal || t == ir::StepType::Wait; }

/// Whether step `b` may join the run whose last member is `a`: `getre`
/// steps into one destination, `put` steps of one source to several peers,
/// or signals or waits (the runtimes' rule, interp::buildPlan's fusesWith,
/// but for `hasdep` and a later signal's dependency; the caller checks that
/// a signal's or wait's peer is new to the run).
bool sameGroup(const ir::Step &a, const ir::Step &b) {
  if (isSync(a.type))
    return b.type == a.type;
  if (a.type != b.type || b.dstBuf != a.dstBuf || b.dstOff != a.dstOff ||
      b.srcBuf != a.srcBuf || b.count != a.count)
    return false;
  if (a.type == ir::StepType::Put)
    return b.srcOff == a.srcOff && b.peer != a.peer;
  return a.type == ir::StepType::GetReduce;
}

/// The runs of `getre` or `put` steps that the runtimes would fuse but for
/// an earlier member that others wait on, as (rank, tb, first, end): a run
/// of more than MaxReduceSources in pieces of at most that.
struct ReductionRun {
  int32_t rank, tb, first, end;
};
std::vector<ReductionRun> splitReductionRuns(const ir::Algorithm &alg) {
  std::vector<ReductionRun> runs;
  for (int32_t g = 0; g < static_cast<int32_t>(alg.gpus.size()); ++g)
    for (int32_t t = 0; t < static_cast<int32_t>(alg.gpus[g].tbs.size()); ++t) {
      const std::vector<ir::Step> &steps = alg.gpus[g].tbs[t].steps;
      const int32_t n = static_cast<int32_t>(steps.size());
      for (int32_t s = 0; s < n;) {
        const bool sync = isSync(steps[s].type);
        auto newPeer = [&](int32_t end) {
          for (int32_t i = s; sync && i < end; ++i)
            if (steps[i].peer == steps[end].peer)
              return false;
          return true;
        };
        int32_t end = s + 1;
        while (end < n && end - s < MaxReduceSources && sameGroup(steps[end - 1], steps[end]) &&
               newPeer(end))
          ++end;
        bool split = false;
        for (int32_t i = s; i + 1 < end; ++i)
          split |= steps[i].hasDep;
        // A later signal's dependency: the run's first member takes it
        // (joinRun), where all are on one tb.
        int32_t depTb = steps[s].depTb;
        bool oneTb = true;
        for (int32_t i = s + 1; steps[s].type == ir::StepType::Signal && i < end; ++i)
          if (steps[i].hasDependency()) {
            split = true;
            oneTb &= depTb < 0 || steps[i].depTb == depTb;
            depTb = steps[i].depTb;
          }
        if (split && oneTb)
          runs.push_back({g, t, s, end});
        s = end;
      }
    }
  return runs;
}

/// Moves what waits on a member of `run` onto its last member, which
/// completes no earlier; in a run of signals, the first member waits for
/// the latest of the members' dependencies (all on one tb), which delays
/// the earlier signals, so that the runtimes raise them in one step.
void joinRun(ir::Algorithm &alg, const ReductionRun &run) {
  ir::Gpu &gpu = alg.gpus[run.rank];
  std::vector<ir::Step> &steps = gpu.tbs[run.tb].steps;
  if (steps[run.first].type == ir::StepType::Signal)
    for (int32_t i = run.first + 1; i < run.end; ++i)
      if (steps[i].hasDependency()) {
        ir::Step &first = steps[run.first];
        if (!first.hasDependency() || first.depStep < steps[i].depStep) {
          first.depTb = steps[i].depTb;
          first.depStep = steps[i].depStep;
        }
        steps[i].depTb = steps[i].depStep = -1;
      }
  for (ir::ThreadBlock &tb : gpu.tbs)
    for (ir::Step &step : tb.steps)
      if (step.depTb == run.tb && step.depStep >= run.first && step.depStep < run.end - 1)
        step.depStep = run.end - 1;
  for (ir::ThreadBlock &tb : gpu.tbs)
    for (ir::Step &step : tb.steps)
      step.hasDep = false;
  tidyDependencies(gpu);
}

/// Runs joined one by one (each try a whole-job check) in one call of
/// joinFusedEnds, at most: the runs left then run member by member. A
/// program whose runs pass together, or each kind's together, needs none.
constexpr int MaxSingleJoins = 16;

/// Programs with more signals than this keep all of theirs: each attempt
/// runs the whole-job race check, whose cost grows with the steps times
/// the tbs a tb learns of.
constexpr size_t MaxPrunedSignals = 512;

} // namespace

namespace {

/// Whether a schedule changed from `alg` keeps what the IR's checks prove of
/// `alg`: every mode race-free that is now, and no deadlock. Null when
/// `alg` is too large to check over and over (more than MaxPrunedSignals
/// signals), or races in both modes (verification reports that).
std::optional<std::function<bool(const ir::Algorithm &)>> trialCheck(const ir::Algorithm &alg) {
  size_t total = 0;
  for (const ir::SignalPair &pair : ir::signalPairs(alg))
    total += pair.signalSteps.size();
  if (total == 0 || total > MaxPrunedSignals)
    return std::nullopt;
  std::array<bool, 2> raceFree = {!ir::findRace(alg, false), !ir::findRace(alg, true)};
  if (!raceFree[0] && !raceFree[1])
    return std::nullopt;
  return [raceFree](const ir::Algorithm &trial) {
    for (bool inplace : {false, true})
      if (raceFree[inplace] && ir::findRace(trial, inplace))
        return false;
    return !ir::findDeadlock(trial, FifoSlots);
  };
}

} // namespace

namespace {

/// Drops the nops that nothing waits for and that wait for nothing (a
/// dependency tidyDependencies found implied leaves one), which would part
/// a run of signals or waits the runtimes fuse, or that end their tb (a
/// join moved what waited on them elsewhere: they would delay nothing, and
/// the IR's contract refuses them). A tb keeps its last step.
void dropIdleNops(Schedule &schedule) {
  std::vector<ir::Gpu> &gpus = schedule.algorithm.gpus;
  // A removal can leave another nop idle (removeStep's tidyDependencies
  // drops a dependency that became implied, and the nop it waited on then
  // has no waiter): passes until none is left.
  for (bool dropped = true; dropped;) {
    dropped = false;
    for (int32_t g = 0; g < static_cast<int32_t>(gpus.size()); ++g)
      for (int32_t t = 0; t < static_cast<int32_t>(gpus[g].tbs.size()); ++t)
        for (int32_t s = static_cast<int32_t>(gpus[g].tbs[t].steps.size()) - 1; s >= 0; --s) {
          const std::vector<ir::Step> &steps = gpus[g].tbs[t].steps;
          const ir::Step &step = steps[s];
          const bool last = s + 1 == static_cast<int32_t>(steps.size());
          if (step.type == ir::StepType::Nop && !step.hasDep &&
              (!step.hasDependency() || last) && steps.size() > 1) {
            removeStep(schedule, g, t, s);
            dropped = true;
          }
        }
  }
}

/// Moves step `from` of tb `t` on rank `g` to `to` (< from), the steps
/// between one later: what depended on a step depends on it where it now
/// is (a step that moved later completes no earlier, and what waits on a
/// later step of a tb also waits on the earlier ones).
void moveStepEarlier(Schedule &schedule, int32_t g, int32_t t, int32_t from, int32_t to) {
  ir::Gpu &gpu = schedule.algorithm.gpus[g];
  std::vector<ir::Step> &steps = gpu.tbs[t].steps;
  std::rotate(steps.begin() + to, steps.begin() + from, steps.begin() + from + 1);
  std::vector<StepOrigin> &origins = schedule.origins[g][t];
  std::rotate(origins.begin() + to, origins.begin() + from, origins.begin() + from + 1);
  for (ir::ThreadBlock &tb : gpu.tbs)
    for (ir::Step &step : tb.steps) {
      if (step.depTb != t || step.depStep < to || step.depStep > from)
        continue;
      step.depStep = step.depStep == from ? to : step.depStep + 1;
    }
  for (ir::ThreadBlock &tb : gpu.tbs)
    for (ir::Step &step : tb.steps)
      step.hasDep = false;
  tidyDependencies(gpu);
}

/// Puts a tb's waits for signals that need nothing ahead of the signals
/// that wait for something, so that its signals and waits stand side by
/// side and fuse: a wait with no dependency moves ahead of the run of
/// signals before it when that run's first signal has a dependency (the
/// list scheduler interleaves a rank's start waits with its end signals
/// when one tb holds both). Returns whether it moved any.
bool raiseWaits(Schedule &schedule) {
  bool moved = false;
  std::vector<ir::Gpu> &gpus = schedule.algorithm.gpus;
  for (int32_t g = 0; g < static_cast<int32_t>(gpus.size()); ++g)
    for (int32_t t = 0; t < static_cast<int32_t>(gpus[g].tbs.size()); ++t)
      for (int32_t i = 1; i < static_cast<int32_t>(gpus[g].tbs[t].steps.size()); ++i) {
        const std::vector<ir::Step> &steps = gpus[g].tbs[t].steps;
        if (steps[i].type != ir::StepType::Wait || steps[i].hasDependency())
          continue;
        // A wait something waits for, itself or through a wait right after
        // it: not a wait at the tb's end, which a signal before it may be
        // what the peer waits for before it signals back.
        bool gates = false;
        for (int32_t j = i; !gates && j < static_cast<int32_t>(steps.size()) &&
                            steps[j].type == ir::StepType::Wait;
             ++j)
          gates = steps[j].hasDep;
        if (!gates)
          continue;
        int32_t run = i;
        while (run > 0 && steps[run - 1].type == ir::StepType::Signal)
          --run;
        if (run == i || !steps[run].hasDependency())
          continue;
        moveStepEarlier(schedule, g, t, i, run);
        moved = true;
      }
  return moved;
}

} // namespace

namespace {

bool joinRuns(Schedule &schedule);

} // namespace

bool joinFusedEnds(Schedule &schedule) {
  if (!schedule.algorithm.hasDirectSteps())
    return false;
  dropIdleNops(schedule);
  const bool moved = joinRuns(schedule);
  // What a join left idle.
  dropIdleNops(schedule);
  return moved;
}

namespace {

/// Returns whether it moved a wait, joined waits or delayed a signal (what
/// can make a signal pair redundant).
bool joinRuns(Schedule &schedule) {
  ir::Algorithm &alg = schedule.algorithm;
  std::optional<std::function<bool(const ir::Algorithm &)>> keeps;
  bool moved = false;
  {
    Schedule trial = schedule;
    if (raiseWaits(trial)) {
      if (!(keeps = trialCheck(alg)))
        return false;
      if ((*keeps)(trial.algorithm)) {
        schedule = std::move(trial);
        moved = true;
      }
    }
  }
  // A join can leave a nop idle (its dependency now implied), whose removal
  // brings two runs together: a few rounds.
  int singleTries = 0;
  for (int round = 0; round < 3; ++round) {
    std::vector<ReductionRun> runs = splitReductionRuns(alg);
    if (runs.empty())
      return moved;
    if (!keeps && !(keeps = trialCheck(alg)))
      return moved;
    // All at once, as they usually pass together; else each kind's (data
    // runs, waits, signals) at once; else that kind's one by one, each try
    // a whole-job check.
    auto kindOf = [&](const ReductionRun &run) {
      const ir::StepType t = alg.gpus[run.rank].tbs[run.tb].steps[run.first].type;
      return t == ir::StepType::Wait ? 1 : t == ir::StepType::Signal ? 2 : 0;
    };
    auto joinAll = [&](int kind) {
      ir::Algorithm all = alg;
      bool any = false;
      for (const ReductionRun &run : runs)
        if (kind < 0 || kindOf(run) == kind) {
          joinRun(all, run);
          any = true;
        }
      if (!any || !(*keeps)(all))
        return false;
      alg = std::move(all);
      for (const ReductionRun &run : runs)
        moved |= (kind < 0 || kindOf(run) == kind) && kindOf(run) != 0;
      return true;
    };
    const bool together = joinAll(-1);
    bool joined = together;
    for (int kind = 0; !together && kind < 3; ++kind) {
      if (joinAll(kind)) {
        joined = true;
        continue;
      }
      for (const ReductionRun &run : runs) {
        if (kindOf(run) != kind || singleTries == MaxSingleJoins)
          continue;
        ++singleTries;
        ir::Algorithm trial = alg;
        joinRun(trial, run);
        if ((*keeps)(trial)) {
          alg = std::move(trial);
          joined = true;
          moved |= kind != 0;
        }
      }
    }
    if (!joined)
      return moved;
    dropIdleNops(schedule);
  }
  return moved;
}

} // namespace

void pruneSignals(Schedule &schedule) {
  const ir::Algorithm &alg = schedule.algorithm;
  if (!alg.hasDirectSteps())
    return;
  auto keeps = trialCheck(alg);
  if (!keeps)
    return;
  // Candidates in (sender, receiver, channel, ordinal) order; `kept` counts
  // those tried and kept, which stay in front of the ones still to try.
  size_t kept = 0;
  for (;;) {
    std::vector<ir::SignalPair> pairs = ir::signalPairs(schedule.algorithm);
    size_t skip = kept;
    const ir::SignalPair *pair = nullptr;
    size_t k = 0;
    for (const ir::SignalPair &p : pairs) {
      size_t n = std::min(p.signalSteps.size(), p.waitSteps.size());
      if (skip < n) {
        pair = &p;
        k = skip;
        break;
      }
      skip -= n;
    }
    if (!pair)
      return;
    Schedule trial = schedule;
    removeStep(trial, pair->receiver, pair->waitTb, pair->waitSteps[k]);
    removeStep(trial, pair->sender, pair->signalTb, pair->signalSteps[k]);
    if ((*keeps)(trial.algorithm))
      schedule = std::move(trial);
    else
      ++kept;
  }
}

} // namespace coll::compiler
