//===- Emit.cpp - Dependencies, nops and the IR ---------------------------===//
//
// A consumer whose producer runs in another tb of the same rank must wait
// for it explicitly. An IR step carries one dependency, so a step with k
// remaining dependencies is preceded by k-1 nops that carry the others, and
// every producer waited on gets hasdep="1".
//
// Dependencies that are already implied are dropped, so that nops stay few.
// Each tb's *knowledge* is, per other tb, the last position known to have
// completed (in the same pipeline iteration; flags are monotone). Walking a
// rank's instructions in a topological order of tb order and dependencies:
//
//  - a dependency in the same tb is implied by tb order;
//  - of several on one tb, only the latest is needed;
//  - one the tb already knows of (it waited for that step or a later one of
//    that tb, directly or through what that step's tb knew) is dropped;
//  - one that another remaining dependency's producer knows of is dropped.
//
// Waiting for a step adds it, and everything its tb knew once it had run,
// to the waiting tb's knowledge.
//
//===----------------------------------------------------------------------===//

#include "Program.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <deque>

namespace coll::compiler {
namespace {

/// Each instruction's waits, as (tb, position). Most instructions wait for
/// nothing or for one step: that one is kept in an array of 8 bytes per
/// instruction, longer lists in a map (a program may have millions of
/// instructions).
class WaitLists {
public:
  explicit WaitLists(size_t instrs) : single(instrs, Wait{-1, NoWaits}) {}

  llvm::ArrayRef<Wait> operator[](InstrId x) const {
    if (single[x].first >= 0)
      return llvm::ArrayRef<Wait>(single[x]);
    if (single[x].second == NoWaits)
      return {};
    return several.find(x)->second;
  }
  void assign(InstrId x, llvm::ArrayRef<Wait> list) {
    if (list.size() == 1) {
      single[x] = list.front();
    } else if (list.empty()) {
      single[x] = Wait{-1, NoWaits};
    } else {
      single[x] = Wait{-1, SeveralWaits};
      several[x].assign(list.begin(), list.end());
    }
  }

private:
  static constexpr int32_t NoWaits = 0, SeveralWaits = 1;
  std::vector<Wait> single; ///< the one wait, or tb -1 and one of the above
  llvm::DenseMap<InstrId, llvm::SmallVector<Wait, 2>> several;
};

/// The dependencies each instruction must wait for explicitly, as (tb,
/// position), in tb order.
WaitLists computeWaits(const Program &prog,
                       const std::vector<int32_t> &position) {
  const std::vector<Instr> &instrs = prog.instrs;
  WaitLists waits(instrs.size());
  // What a producer's tb knew once the producer had run: kept only for
  // producers (instructions another tb depends on).
  constexpr uint32_t NotProducer = ~uint32_t(0), Producer = NotProducer - 1;
  std::vector<uint32_t> afterOf(instrs.size(), NotProducer);
  std::vector<Knowledge> afters;
  for (const Instr &instr : instrs)
    if (instr.live())
      for (InstrId d : instr.deps)
        if (instrs[d].tb != instr.tb)
          afterOf[d] = Producer;
  const Knowledge none;
  auto after = [&](InstrId x) -> const Knowledge & {
    return afterOf[x] < Producer ? afters[afterOf[x]] : none;
  };

  // Each instruction's dependents (its consumers, then the next
  // instruction of its tb), as one array in rank, tb and position order.
  std::vector<uint32_t> pending(instrs.size(), 0);
  std::vector<uint32_t> firstDependent(instrs.size() + 1, 0);
  for (const std::vector<Threadblock> &tbs : prog.tbs)
    for (const Threadblock &tb : tbs)
      for (size_t i = 0; i < tb.instrs.size(); ++i) {
        InstrId x = tb.instrs[i];
        for (InstrId d : instrs[x].deps)
          ++firstDependent[d + 1];
        if (i + 1 < tb.instrs.size())
          ++firstDependent[x + 1];
      }
  for (size_t x = 0; x < instrs.size(); ++x)
    firstDependent[x + 1] += firstDependent[x];
  std::vector<InstrId> dependentList(firstDependent.back());
  {
    std::vector<uint32_t> fill(firstDependent.begin(),
                               firstDependent.end() - 1);
    for (const std::vector<Threadblock> &tbs : prog.tbs)
      for (const Threadblock &tb : tbs)
        for (size_t i = 0; i < tb.instrs.size(); ++i) {
          InstrId x = tb.instrs[i];
          for (InstrId d : instrs[x].deps)
            dependentList[fill[d]++] = x;
          if (i + 1 < tb.instrs.size())
            dependentList[fill[x]++] = tb.instrs[i + 1];
        }
  }
  auto dependents = [&](InstrId x) {
    return llvm::ArrayRef<InstrId>(dependentList.data() + firstDependent[x],
                                   dependentList.data() +
                                       firstDependent[x + 1]);
  };

  for (const std::vector<Threadblock> &tbs : prog.tbs) {
    // A topological order of the rank's instructions (Kahn).
    std::deque<InstrId> ready;
    for (const Threadblock &tb : tbs)
      for (size_t i = 0; i < tb.instrs.size(); ++i) {
        InstrId x = tb.instrs[i];
        pending[x] = static_cast<uint32_t>(instrs[x].deps.size()) + (i > 0);
        if (pending[x] == 0)
          ready.push_back(x);
      }
    std::vector<Knowledge> knowledge(tbs.size());
    while (!ready.empty()) {
      InstrId x = ready.front();
      ready.pop_front();
      for (InstrId y : dependents(x))
        if (--pending[y] == 0)
          ready.push_back(y);
      const Instr &instr = instrs[x];
      Knowledge &mine = knowledge[instr.tb];
      llvm::SmallVector<Wait, 4> need;
      for (InstrId d : instr.deps)
        if (instrs[d].tb != instr.tb)
          need.emplace_back(instrs[d].tb, position[d]);
      std::sort(need.begin(), need.end());
      llvm::SmallVector<Wait, 4> kept;
      for (size_t i = 0; i < need.size(); ++i) {
        int32_t tb = need[i].first, pos = need[i].second;
        bool implied =
            (i + 1 < need.size() && need[i + 1].first == tb) ||
            known(mine, tb) >= pos || llvm::any_of(need, [&](Wait other) {
              return other != need[i] &&
                     known(after(tbs[other.first].instrs[other.second]), tb) >=
                         pos;
            });
        if (!implied)
          kept.push_back(need[i]);
      }
      for (Wait w : kept) {
        for (Wait fact : after(tbs[w.first].instrs[w.second]))
          learn(mine, fact);
        learn(mine, w);
      }
      waits.assign(x, kept);
      if (afterOf[x] == Producer) {
        afterOf[x] = static_cast<uint32_t>(afters.size());
        afters.push_back(mine);
        learn(afters.back(), {instr.tb, position[x]});
      }
    }
  }
  return waits;
}

/// Steps of instruction x's reduction group (1 for any other instruction).
int32_t groupSize(const Program &prog, InstrId x) {
  int32_t n = 0;
  for (InstrId m = x; m != NoInstr; m = prog.instrs[m].nextSource)
    ++n;
  return n;
}

inline constexpr uint32_t NoHelper = ~uint32_t(0);

/// What a step waits for: a step of an instruction, or a helper nop.
struct WaitOn {
  int32_t tb = 0;
  InstrId instr = NoInstr;
  uint32_t helper = NoHelper;
};

/// A nop that waits for `target` on behalf of another tb (spreadWaits).
struct Helper {
  WaitOn target;
  InstrId waiter; ///< the instruction it waits for (its origin)
};

/// Sparse, as few instructions wait for several tbs (a program may have
/// millions of instructions).
struct Spread {
  /// What an instruction whose waits were spread waits for, in order; the
  /// last one is carried by the instruction's step, the others by nops
  /// before it. Other instructions wait as computeWaits says.
  llvm::DenseMap<InstrId, llvm::SmallVector<WaitOn, 2>> waits;
  std::vector<Helper> helpers;
  /// The helper nops right after an instruction in its tb, in order.
  llvm::DenseMap<InstrId, llvm::SmallVector<uint32_t, 1>> after;
};

/// An instruction that waits for steps of k > 1 other tbs would run k-1
/// nops one after another in its own tb. Instead, the waits form a chain
/// through the tbs waited for: the tb of the second wait runs, right after
/// that step, a nop waiting for the first's, the third's tb a nop waiting
/// for that nop, and so on; the instruction waits for the last nop only,
/// which knows them all (dependency flags are monotone and waiting is
/// transitive).
///
/// A helper nop goes after step w of tb h only where h has nothing after w,
/// or h's next instruction depends on the waiting instruction x itself. Then
/// nothing in h runs later than before: h's next instruction could not start
/// before x, nor x before every step it waits for. Every execution of the
/// new orders is one of the old orders plus nops whose targets complete, so
/// no cycle and no deadlock can appear; verification checks it again.
Spread spreadWaits(const Program &prog, const WaitLists &waits,
                   bool enabled) {
  const std::vector<Instr> &instrs = prog.instrs;
  Spread spread;
  if (!enabled)
    return spread;
  for (InstrId x = 0; x < instrs.size(); ++x) {
    const Instr &instr = instrs[x];
    if (!instr.live() || waits[x].size() < 2)
      continue;
    const std::vector<Threadblock> &tbs = prog.tbs[instr.rank];
    auto target = [&](Wait w) {
      return WaitOn{w.first, tbs[w.first].instrs[w.second], NoHelper};
    };
    llvm::SmallVector<Wait, 4> helpers, direct;
    for (Wait w : waits[x]) {
      llvm::ArrayRef<InstrId> order = tbs[w.first].instrs;
      size_t next = static_cast<size_t>(w.second) + 1;
      bool free = next == order.size() ||
                  llvm::is_contained(instrs[order[next]].deps, x);
      (free ? helpers : direct).push_back(w);
    }
    if (helpers.size() + (direct.empty() ? 0 : 1) < 2)
      continue; // nothing to spread
    // The end of the chain needs no nop of its own. The chain runs up the
    // tb ids, so that the host backend, which runs a thread's tasks
    // round-robin in that order, resolves it in one round.
    if (!helpers.empty() && direct.empty()) {
      direct.push_back(helpers.front());
      helpers.erase(helpers.begin());
    }
    llvm::SmallVector<WaitOn, 2> &mine = spread.waits[x];
    for (Wait w : direct)
      mine.push_back(target(w));
    WaitOn tail = mine.pop_back_val();
    for (Wait w : helpers) {
      uint32_t h = static_cast<uint32_t>(spread.helpers.size());
      spread.helpers.push_back({tail, x});
      spread.after[target(w).instr].push_back(h);
      tail = WaitOn{w.first, NoInstr, h};
    }
    mine.push_back(tail);
  }
  return spread;
}

/// A custom collective's pre- and postcondition on the refined chunks, for
/// the IR to carry: traced chunk j is refined chunks [j*R, (j+1)*R), and
/// part t of in(a, j) is in(a, j*R + t).
ir::Definition refinedCondition(const lang::CollectiveSpec &spec, int32_t R) {
  ir::Definition def;
  def.nranks = spec.nranks;
  def.inputChunks = spec.inputChunks * R;
  def.outputChunks = spec.outputChunks * R;
  def.inputDefined.assign(spec.nranks, std::vector<bool>(def.inputChunks));
  def.expected.assign(spec.nranks, std::vector<std::vector<uint32_t>>(
                                       size_t(def.outputChunks)));
  for (int32_t r = 0; r < spec.nranks; ++r) {
    for (int32_t j = 0; j < def.inputChunks; ++j)
      def.inputDefined[r][j] = spec.inputDefined[r][j / R];
    for (int32_t i = 0; i < spec.outputChunks; ++i)
      for (int32_t t = 0; t < R; ++t)
        for (lang::ContribId id : spec.expected[r][i])
          // Sorted, as ids keep their order when scaled.
          def.expected[r][i * R + t].push_back(id * uint32_t(R) + uint32_t(t));
  }
  return def;
}

} // namespace

Schedule emit(const Program &prog, bool spreading) {
  const lang::ChunkDag &dag = *prog.dag;
  const lang::CollectiveSpec &spec = dag.collective;
  const Layout &layout = prog.layout;
  ir::CollectiveInfo info = ir::collectiveInfo(spec.kind);

  Schedule schedule;
  schedule.refinement = layout.refinement;
  schedule.lanes = prog.lanes;
  schedule.fused = prog.fused;
  schedule.inPlaceDependencies = layout.aliasCells;
  schedule.ordering = prog.ordering;

  ir::Algorithm &alg = schedule.algorithm;
  alg.name = dag.options.name;
  alg.protocol = dag.options.protocol.value_or(ir::Protocol::Simple);
  alg.collective = spec.kind;
  alg.collectiveSpelling = ir::collectiveName(spec.kind).str();
  bool perRank = info.inputPerRank || info.outputPerRank;
  alg.nchunksPerLoop = layout.chunksPerBlock * (perRank ? spec.nranks : 1);
  alg.root = info.hasRoot ? spec.root : -1;
  alg.inplace = spec.inplace;
  alg.outofplace = !spec.inplace;
  alg.minBytes = dag.options.minBytes;
  alg.maxBytes = dag.options.maxBytes;
  alg.gpus.resize(spec.nranks);
  if (spec.kind == ir::Collective::Custom)
    alg.condition = refinedCondition(spec, layout.refinement);
  schedule.origins.resize(spec.nranks);

  std::vector<int32_t> position(prog.instrs.size(), -1);
  for (const auto &rankTbs : prog.tbs)
    for (const Threadblock &tb : rankTbs)
      for (size_t i = 0; i < tb.instrs.size(); ++i)
        position[tb.instrs[i]] = static_cast<int32_t>(i);

  WaitLists waits = computeWaits(prog, position);
  Spread spread = spreadWaits(prog, waits, spreading);
  auto waitsOf = [&](InstrId x) {
    llvm::SmallVector<WaitOn, 2> list;
    auto it = spread.waits.find(x);
    if (it != spread.waits.end())
      return it->second;
    const std::vector<Threadblock> &tbs = prog.tbs[prog.instrs[x].rank];
    for (Wait w : waits[x])
      list.push_back({w.first, tbs[w.first].instrs[w.second], NoHelper});
    return list;
  };
  auto helpersAfter = [&](InstrId x) {
    auto it = spread.after.find(x);
    return it != spread.after.end() ? llvm::ArrayRef<uint32_t>(it->second)
                                    : llvm::ArrayRef<uint32_t>();
  };

  // IR step numbers: an instruction's nops, its steps (a reduction group
  // has one per member; the last one is the instruction's), then the helper
  // nops that follow it.
  std::vector<int32_t> stepOf(prog.instrs.size(), -1);
  std::vector<int32_t> helperStep(spread.helpers.size(), -1);
  std::vector<int32_t> tbSteps; // of the rank's tbs
  int32_t maxChannel = 0;
  for (int32_t r = 0; r < spec.nranks; ++r) {
    const std::vector<Threadblock> &tbs = prog.tbs[r];
    tbSteps.clear();
    for (const Threadblock &tb : tbs) {
      int32_t step = 0;
      for (InstrId x : tb.instrs) {
        auto it = spread.waits.find(x);
        size_t nwaits =
            it != spread.waits.end() ? it->second.size() : waits[x].size();
        step += std::max<int32_t>(static_cast<int32_t>(nwaits) - 1, 0);
        step += groupSize(prog, x) - 1;
        stepOf[x] = step++;
        for (uint32_t h : helpersAfter(x))
          helperStep[h] = step++;
      }
      tbSteps.push_back(step);
      maxChannel = std::max(maxChannel, tb.channel);
    }
    auto stepOfTarget = [&](const WaitOn &target) {
      return target.helper != NoHelper ? helperStep[target.helper]
                                       : stepOf[target.instr];
    };
    ir::Gpu &gpu = alg.gpus[r];
    gpu.inputChunks = layout.inputChunks;
    gpu.outputChunks = layout.outputChunks;
    gpu.scratchChunks = layout.scratchChunks[r];
    gpu.tbs.resize(tbs.size());
    schedule.origins[r].resize(tbs.size());
    for (size_t t = 0; t < tbs.size(); ++t) {
      ir::ThreadBlock &tb = gpu.tbs[t];
      tb.sendPeer = tbs[t].sendPeer;
      tb.recvPeer = tbs[t].recvPeer;
      tb.channel = tbs[t].channel;
      std::vector<StepOrigin> &origins = schedule.origins[r][t];
      tb.steps.reserve(tbSteps[t]);
      origins.reserve(tbSteps[t]);
      auto wait = [&](const WaitOn &target, const StepOrigin &origin) {
        ir::Step nop;
        nop.count = 0;
        nop.depTb = target.tb;
        nop.depStep = stepOfTarget(target);
        tb.steps.push_back(nop);
        origins.push_back(origin);
      };
      for (InstrId x : tbs[t].instrs) {
        const Instr &instr = prog.instrs[x];
        StepOrigin origin{instr.op, instr.forwardedOp, instr.lane};
        // Nops carry all dependencies but the last, which the (first) step
        // itself carries.
        llvm::SmallVector<WaitOn, 2> targets = waitsOf(x);
        for (const WaitOn &target : targets)
          wait(target, origin);
        if (targets.empty()) {
          tb.steps.emplace_back();
          origins.push_back(origin);
        }
        for (InstrId m = x; m != NoInstr; m = prog.instrs[m].nextSource) {
          const Instr &member = prog.instrs[m];
          if (m != x) {
            tb.steps.emplace_back();
            origins.push_back({member.op, member.forwardedOp, member.lane});
          }
          ir::Step &step = tb.steps.back();
          step.type = instr.type;
          step.srcBuf = member.src.buf;
          step.srcOff = member.src.off;
          step.dstBuf = instr.dst.buf;
          step.dstOff = instr.dst.off;
          step.count = instr.count;
          step.peer = instr.peer();
        }
        // A helper nop names the operation it waits for.
        for (uint32_t h : helpersAfter(x)) {
          const Instr &waiter = prog.instrs[spread.helpers[h].waiter];
          wait(spread.helpers[h].target,
               {waiter.op, waiter.forwardedOp, waiter.lane});
        }
      }
    }
    for (size_t t = 0; t < tbs.size(); ++t)
      for (const ir::Step &step : gpu.tbs[t].steps)
        if (step.hasDependency())
          gpu.tbs[step.depTb].steps[step.depStep].hasDep = true;
  }
  alg.nchannels = maxChannel + 1;
  return schedule;
}

} // namespace coll::compiler
