//===- Plan.cpp - Building and resolving interpreter plans ----------------===//

#include "coll/interpreter/Plan.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <set>
#include <tuple>

namespace coll::interp {

using ir::BufferKind;
using ir::StepType;

#define COLL_STEP_TYPE(Enum, XmlName, Recv, Send, ReadsSrc, Red, WritesDst, Direct)      \
  static_assert(static_cast<int>(StepKind::Enum) ==                            \
                static_cast<int>(StepType::Enum));
#include "coll/ir/StepTypes.def"

namespace {

llvm::Error planError(llvm::StringRef file, uint32_t line, const llvm::Twine &msg) {
  std::string text = file.str();
  if (line)
    text += ":" + std::to_string(line);
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 text + ": error: " + msg.str());
}

/// Whether step `next` joins the fused `re` or `getre` group whose last
/// member is `prev` (see the file comment of Plan.h for the rule).
bool fusesWith(const ir::Step &prev, const ir::Step &next, int groupSize) {
  // Signals or waits to different peers (the caller checks every member's):
  // their operands are unused. A later signal has no dependency of its
  // own, since the group's would delay the earlier members' signals, which
  // may be what that dependency waits for (through a peer); a wait delays
  // nothing by waiting longer, so waits join as puts do.
  if (prev.type == StepType::Signal || prev.type == StepType::Wait)
    return next.type == prev.type && !prev.hasDep && groupSize < MaxReduceSources &&
           (prev.type == StepType::Wait || !next.hasDependency());
  const bool same = next.type == prev.type && !prev.hasDep && next.dstBuf == prev.dstBuf &&
                    next.dstOff == prev.dstOff && next.srcBuf == prev.srcBuf &&
                    next.count == prev.count && groupSize < MaxReduceSources;
  if (!same)
    return false;
  if (prev.type == StepType::Reduce)
    return !next.hasDependency();
  // A put's members read one source once: the same chunks.
  if (prev.type == StepType::Put)
    return next.srcOff == prev.srcOff && next.peer != prev.peer;
  return prev.type == StepType::GetReduce;
}

/// Whether step s of `tb` is a copy that folds into the group after it
/// (FoldedCopy, PlanTypes.h), nothing waiting for the copy itself:
/// - a `getre` group: the copy is into the group's destination, from the
///   src buffer the group reads in its peers (this rank's own part of the
///   same sum, out of place);
/// - a `put` group (Simple plans, whose kernels fuse puts): the copy reads
///   the chunks the puts read and stores them where the puts store them in
///   their peers (this rank's own copy of what it sends, out of place), so
///   that the source is read once for the copy and every put.
bool foldsCopy(const ir::ThreadBlock &tb, int32_t s, ir::Protocol protocol) {
  if (s + 1 >= static_cast<int32_t>(tb.steps.size()))
    return false;
  const ir::Step &copy = tb.steps[s];
  const ir::Step &next = tb.steps[s + 1];
  if (copy.type != StepType::Copy || copy.hasDep || next.dstBuf != copy.dstBuf ||
      next.dstOff != copy.dstOff || next.count != copy.count || next.srcBuf != copy.srcBuf)
    return false;
  if (next.type == StepType::Put)
    return protocol == ir::Protocol::Simple && next.srcOff == copy.srcOff;
  return next.type == StepType::GetReduce;
}

/// Steps whose fused group's members are each its own peer's (getre: the
/// sources; put: the destinations; wait: the signals waited for), and which
/// wait for all the members' dependencies before they start.
bool fusesPeers(StepType t) {
  return t == StepType::GetReduce || t == StepType::Put || t == StepType::Wait;
}

/// Whether a signal or wait to `peer` may join the group [s, end) of `tb`:
/// each member is its own pair's, so that one pair's flag has one writer
/// and its waits are taken in order.
bool newPeer(const ir::ThreadBlock &tb, int32_t s, int32_t end, int32_t peer) {
  const ir::StepType t = tb.steps[s].type;
  if (t != StepType::Signal && t != StepType::Wait)
    return true;
  for (int32_t r = s; r < end; ++r)
    if (tb.steps[r].peer == peer)
      return false;
  return true;
}

/// Whether member `r` of the group [s, end)'s dependency is met whenever a
/// later member's is (one on the same tb at that step or later).
bool impliedLater(const ir::ThreadBlock &tb, int32_t r, int32_t end) {
  const ir::Step &m = tb.steps[r];
  if (!m.hasDependency())
    return true;
  for (int32_t j = r + 1; j < end; ++j) {
    const ir::Step &later = tb.steps[j];
    if (later.hasDependency() && later.depTb == m.depTb && later.depStep >= m.depStep)
      return true;
  }
  return false;
}

/// Where the plan keeps an IR step: its plan step and its position in a
/// fused group.
struct StepSlot {
  int32_t planStep = -1;
  int32_t member = 0;
};

/// Follows chunk classes through the program in topological order (see the
/// file comment of Plan.h).
class ClassPropagation {
public:
  ClassPropagation(const ir::Algorithm &alg, const ir::Analysis &analysis, Plan &plan,
                   const std::vector<std::vector<std::vector<StepSlot>>> &where)
      : alg(alg), analysis(analysis), plan(plan), where(where),
        inFlight(analysis.connections.size()) {
    // Slots up to the highest any step names: a file may declare far more
    // scratch than its steps use (s_chunks is only bounded by int32).
    int64_t touched = 0;
    for (const ir::Gpu &gpu : alg.gpus)
      for (const ir::ThreadBlock &tb : gpu.tbs)
        for (const ir::Step &step : tb.steps) {
          if (step.srcBuf == BufferKind::Scratch)
            touched = std::max<int64_t>(touched, int64_t(step.srcOff) + step.count);
          if (step.dstBuf == BufferKind::Scratch)
            touched = std::max<int64_t>(touched, int64_t(step.dstOff) + step.count);
        }
    scratch.resize(alg.gpus.size());
    for (size_t g = 0; g < alg.gpus.size(); ++g)
      scratch[g].assign(static_cast<size_t>(std::clamp<int64_t>(alg.gpus[g].scratchChunks, 0, touched)),
                        -1);
  }

  llvm::Error run() {
    for (const ir::StepRef &ref : analysis.topologicalOrder)
      if (llvm::Error err = visit(ref))
        return err;
    return llvm::Error::success();
  }

private:
  /// The class of the data chunk `index` of `buffer` of rank `gpu` holds
  /// now, or -1.
  int32_t classOf(int32_t gpu, BufferKind buffer, int32_t index) const {
    if (buffer == BufferKind::Scratch)
      return scratch[gpu][index];
    return plan.shape.chunkClass(index);
  }

  void conflict(const ir::StepRef &ref, const ir::Step &step, int32_t a, int32_t b) {
    if (a == b)
      return;
    if (!seenConflicts.insert({ref.gpu, ref.tb, ref.step, std::min(a, b), std::max(a, b)}).second)
      return;
    plan.conflicts.push_back(SizeConflict{ref.gpu, ref.tb, ref.step, a, b, step.line});
  }

  void write(const ir::StepRef &ref, const ir::Step &step, int32_t rank, int32_t index,
             int32_t cls) {
    if (step.dstBuf == BufferKind::Scratch)
      scratch[rank][index] = cls;
    else
      conflict(ref, step, cls, plan.shape.chunkClass(index));
  }

  llvm::Error visit(const ir::StepRef &ref) {
    const ir::Step &step = alg.gpus[ref.gpu].tbs[ref.tb].steps[ref.step];
    if (step.type == StepType::Nop)
      return llvm::Error::success();
    ir::StepTypeInfo info = ir::stepTypeInfo(step.type);
    StepSlot slot = where[ref.gpu][ref.tb][ref.step];
    PlanStep &ps = plan.steps[slot.planStep];
    int32_t sendConn = analysis.sendConnection[ref.gpu][ref.tb];
    int32_t recvConn = analysis.recvConnection[ref.gpu][ref.tb];

    std::vector<int32_t> incoming;
    if (info.receives) {
      assert(recvConn >= 0 && !inFlight[recvConn].empty() && "verified order");
      incoming = std::move(inFlight[recvConn].front());
      inFlight[recvConn].pop_front();
    }
    std::vector<int32_t> outgoing;
    // A direct step's remote operand is in its peer's buffers (a put's
    // write sets the class of the peer's scratch slot).
    int32_t srcRank = info.direct == ir::DirectRole::RemoteSrc ? step.peer : ref.gpu;
    int32_t dstRank = info.direct == ir::DirectRole::RemoteDst ? step.peer : ref.gpu;
    if (!info.readsSrc && !info.writesDst && !info.sends)
      return llvm::Error::success(); // signal, wait
    for (int32_t c = 0; c < step.count; ++c) {
      int32_t src = -1;
      if (info.readsSrc) {
        src = classOf(srcRank, step.srcBuf, step.srcOff + c);
        if (src < 0)
          return unwritten(ref, step, step.srcOff + c);
      }
      int32_t data = info.receives ? incoming[c] : src;
      if (info.receives && info.reduces)
        conflict(ref, step, data, src);
      if (step.type == StepType::Reduce || step.type == StepType::GetReduce) {
        int32_t dst = classOf(ref.gpu, step.dstBuf, step.dstOff + c);
        if (dst < 0)
          return unwritten(ref, step, step.dstOff + c);
        conflict(ref, step, data, dst);
      } else if (info.writesDst) {
        write(ref, step, dstRank, step.dstOff + c, data);
      }
      if (info.sends)
        outgoing.push_back(data);
      plan.slices[ps.sliceBegin + c * ps.nsrc + slot.member].cls = data;
    }
    if (info.sends) {
      assert(sendConn >= 0 && "verified");
      inFlight[sendConn].push_back(std::move(outgoing));
    }
    return llvm::Error::success();
  }

  llvm::Error unwritten(const ir::StepRef &ref, const ir::Step &step, int32_t index) {
    return planError(plan.fileName, step.line,
                     llvm::formatv("gpu {0} tb {1} step {2}: reads scratch chunk {3}, "
                                   "which no earlier step writes",
                                   ref.gpu, ref.tb, ref.step, index));
  }

  const ir::Algorithm &alg;
  const ir::Analysis &analysis;
  Plan &plan;
  const std::vector<std::vector<std::vector<StepSlot>>> &where;
  std::vector<std::vector<int32_t>> scratch; ///< [gpu][slot] -> class or -1
  std::vector<std::deque<std::vector<int32_t>>> inFlight; ///< per connection
  std::set<std::tuple<int32_t, int32_t, int32_t, int32_t, int32_t>> seenConflicts;
};

/// Sorts `deps` by tb and keeps each tb's latest step (a tb's flag is
/// monotone: its later step implies its earlier ones); drops those on tb
/// `own`, which program order implies (-1: none).
void normalizeDeps(std::vector<PlanDep> &deps, int32_t own) {
  std::sort(deps.begin(), deps.end(), [](const PlanDep &a, const PlanDep &b) {
    return a.tb != b.tb ? a.tb < b.tb : a.step > b.step;
  });
  size_t out = 0;
  for (size_t i = 0; i < deps.size(); ++i)
    if (deps[i].tb != own && (out == 0 || deps[out - 1].tb != deps[i].tb))
      deps[out++] = deps[i];
  deps.resize(out);
}

/// Waits through nops made direct (Plan.h, "Dependencies"): every step
/// waits on what the nops it waited on imply, several flags at once; nops
/// nobody waits on then leave the plan, their dependencies joining the
/// next step of their tb.
void waitDirectly(Plan &plan) {
  const auto nsteps = static_cast<int32_t>(plan.steps.size());
  std::vector<int32_t> tbOf(static_cast<size_t>(nsteps));
  for (int32_t t = 0; t < static_cast<int32_t>(plan.tbs.size()); ++t)
    for (int32_t i = 0; i < plan.tbs[t].nSteps; ++i)
      tbOf[plan.tbs[t].stepBegin + i] = t;
  // The plan step as which tb t publishes IR step j (a tb's steps are in
  // increasing irStep), or -1.
  auto locate = [&](int32_t t, int32_t j) {
    const PlanTb &tb = plan.tbs[t];
    auto b = plan.steps.begin() + tb.stepBegin, e = b + tb.nSteps;
    auto at = std::lower_bound(b, e, j, [](const PlanStep &s, int32_t v) { return s.irStep < v; });
    return at != e && at->irStep == j ? static_cast<int32_t>(at - plan.steps.begin()) : -1;
  };
  auto depsOf = [&](const PlanStep &s) {
    const StepDependencies d = plan.dependencies(s);
    return std::vector<PlanDep>(d.begin(), d.end());
  };
  // What each step's completion implies, as few (tb, step) pairs as
  // possible: a step that moves data, itself; a nop, the step before it on
  // its tb and what its own dependencies imply (flags are monotone and
  // waiting is transitive). Depth first without recursion: chains of nops
  // may be as long as the plan.
  enum : uint8_t { Unseen, Open, Done };
  std::vector<uint8_t> state(static_cast<size_t>(nsteps), Unseen);
  std::vector<std::vector<PlanDep>> implied(static_cast<size_t>(nsteps));
  auto children = [&](int32_t i, std::vector<int32_t> &out) {
    out.clear();
    const PlanStep &s = plan.steps[i];
    if (s.type != StepKind::Nop)
      return false;
    if (i > plan.tbs[tbOf[i]].stepBegin)
      out.push_back(i - 1);
    for (const PlanDep &d : depsOf(s)) {
      int32_t at = d.tb >= 0 && d.tb < static_cast<int32_t>(plan.tbs.size()) ? locate(d.tb, d.step) : -1;
      if (at < 0)
        return false;
      out.push_back(at);
    }
    return true;
  };
  auto self = [&](int32_t i) {
    return std::vector<PlanDep>{PlanDep{tbOf[i], plan.steps[i].irStep}};
  };
  std::vector<int32_t> kids;
  for (int32_t root = 0; root < nsteps; ++root) {
    if (state[root] != Unseen)
      continue;
    std::vector<std::pair<int32_t, size_t>> stack{{root, 0}};
    state[root] = Open;
    while (!stack.empty()) {
      auto [i, next] = stack.back();
      bool expands = children(i, kids);
      if (expands && next < kids.size()) {
        ++stack.back().second;
        const int32_t k = kids[next];
        if (state[k] == Unseen) {
          state[k] = Open;
          stack.push_back({k, 0});
        }
        continue;
      }
      std::vector<PlanDep> all;
      for (int32_t k : kids) {
        if (state[k] != Done) { // a cycle, which a verified program has not
          expands = false;
          break;
        }
        all.insert(all.end(), implied[k].begin(), implied[k].end());
      }
      normalizeDeps(all, -1);
      implied[i] = expands && all.size() <= size_t(MaxStepDependencies) ? std::move(all) : self(i);
      state[i] = Done;
      stack.pop_back();
    }
  }
  // Each step waits on what its dependencies imply, where they fit.
  std::vector<std::vector<PlanDep>> waits(static_cast<size_t>(nsteps));
  for (int32_t i = 0; i < nsteps; ++i) {
    std::vector<PlanDep> mine = depsOf(plan.steps[i]), all;
    for (const PlanDep &d : mine) {
      int32_t at = d.tb >= 0 && d.tb < static_cast<int32_t>(plan.tbs.size()) ? locate(d.tb, d.step) : -1;
      if (at < 0) {
        all = mine;
        break;
      }
      all.insert(all.end(), implied[at].begin(), implied[at].end());
    }
    normalizeDeps(all, tbOf[i]);
    waits[i] = all.size() <= size_t(MaxStepDependencies) ? std::move(all) : std::move(mine);
  }
  // Nops some step still waits on stay (those the waits could not pass).
  std::vector<bool> nopWaited(static_cast<size_t>(nsteps), false);
  for (const std::vector<PlanDep> &w : waits)
    for (const PlanDep &d : w)
      if (int32_t at = locate(d.tb, d.step); at >= 0)
        nopWaited[at] = true;
  // The steps that stay, in order: a nop nobody waits on hands its
  // dependencies to the next step of its tb (at the tb's end, to none:
  // nothing after it waits).
  struct Kept {
    PlanStep step;
    std::vector<PlanDep> waits;
    int32_t from; ///< its index in plan.steps; -1: a nop made here
  };
  std::vector<Kept> kept;
  std::vector<int32_t> tbBegin;
  for (int32_t t = 0; t < static_cast<int32_t>(plan.tbs.size()); ++t) {
    const PlanTb &tb = plan.tbs[t];
    tbBegin.push_back(static_cast<int32_t>(kept.size()));
    std::vector<PlanDep> pending;
    int32_t pendingStep = -1; // the IR step of the last nop taken into pending
    auto flush = [&] {
      PlanStep nop{};
      nop.type = StepKind::Nop;
      nop.nsrc = 1;
      nop.sliceBegin = tb.sliceBegin;
      nop.irStep = pendingStep;
      kept.push_back(Kept{nop, std::move(pending), -1});
      pending.clear();
    };
    for (int32_t i = tb.stepBegin; i < tb.stepBegin + tb.nSteps; ++i) {
      std::vector<PlanDep> merged = pending;
      merged.insert(merged.end(), waits[i].begin(), waits[i].end());
      normalizeDeps(merged, t);
      if (merged.size() > size_t(MaxStepDependencies)) {
        flush();
        merged = waits[i];
      }
      if (plan.steps[i].type == StepKind::Nop && !nopWaited[i]) {
        pending = std::move(merged);
        pendingStep = plan.steps[i].irStep;
        continue;
      }
      kept.push_back(Kept{plan.steps[i], std::move(merged), i});
      pending.clear();
    }
  }
  tbBegin.push_back(static_cast<int32_t>(kept.size()));
  // A dependency that another of the step's dependencies waits on itself
  // is implied by that one (a send after a reduction need not wait for
  // what the reduction waited for).
  auto covers = [&](const PlanDep &e, const PlanDep &d) {
    const int32_t at = locate(e.tb, e.step);
    if (at < 0)
      return false;
    const std::vector<PlanDep> &w = waits[at];
    auto it = std::lower_bound(w.begin(), w.end(), d.tb,
                               [](const PlanDep &x, int32_t tb) { return x.tb < tb; });
    return it != w.end() && it->tb == d.tb && it->step >= d.step;
  };
  for (Kept &k : kept) {
    std::vector<PlanDep> mine;
    for (const PlanDep &d : k.waits)
      if (std::none_of(k.waits.begin(), k.waits.end(),
                       [&](const PlanDep &e) { return e.tb != d.tb && covers(e, d); }))
        mine.push_back(d);
    k.waits = std::move(mine);
  }
  // A step publishes where another waits on it, and only there.
  std::vector<bool> waited(static_cast<size_t>(nsteps), false);
  for (const Kept &k : kept)
    for (const PlanDep &d : k.waits)
      if (int32_t at = locate(d.tb, d.step); at >= 0)
        waited[at] = true;
  std::vector<PlanStep> steps;
  std::vector<PlanStepPeer> peers;
  std::vector<PlanDep> deps;
  const bool direct = !plan.stepPeers.empty();
  for (const Kept &k : kept) {
    PlanStep s = k.step;
    s.hasDep = k.from >= 0 && waited[k.from] ? 1 : 0;
    if (k.waits.empty()) {
      s.depTb = s.depStep = -1;
    } else if (k.waits.size() == 1) {
      s.depTb = k.waits[0].tb;
      s.depStep = k.waits[0].step;
    } else {
      s.depTb = -static_cast<int32_t>(k.waits.size());
      s.depStep = static_cast<int32_t>(deps.size());
      deps.insert(deps.end(), k.waits.begin(), k.waits.end());
    }
    steps.push_back(s);
    if (direct)
      peers.push_back(k.from >= 0 ? plan.stepPeers[k.from] : PlanStepPeer{-1, -1, 0, -1});
  }
  for (size_t t = 0; t < plan.tbs.size(); ++t) {
    plan.tbs[t].stepBegin = tbBegin[t];
    plan.tbs[t].nSteps = tbBegin[t + 1] - tbBegin[t];
  }
  plan.steps = std::move(steps);
  plan.stepPeers = std::move(peers);
  plan.deps = std::move(deps);
}

} // namespace

llvm::Expected<Plan> buildPlan(const ir::Algorithm &alg, const ir::Analysis &analysis,
                               llvm::StringRef fileName) {
  Plan plan;
  plan.fileName = fileName.str();
  plan.name = alg.name;
  plan.collective = alg.collective;
  plan.protocol = alg.protocol;
  plan.nranks = alg.ngpus();
  plan.root = alg.root;
  if (alg.condition && alg.collective == ir::Collective::Custom)
    plan.condition = std::make_shared<const ir::Definition>(*alg.condition);
  plan.inplace = alg.inplace;
  plan.outofplace = alg.outofplace;
  plan.minBytes = alg.minBytes;
  plan.maxBytes = alg.maxBytes;
  plan.shape = ir::blockShape(alg);

  // Global tb indices, rank-major.
  plan.rankTbBegin.push_back(0);
  for (const ir::Gpu &gpu : alg.gpus)
    plan.rankTbBegin.push_back(plan.rankTbBegin.back() +
                               static_cast<int32_t>(gpu.tbs.size()));
  plan.connectionsInto.assign(static_cast<size_t>(alg.ngpus()), 0);
  for (const ir::Connection &conn : analysis.connections)
    plan.connections.push_back(PlanConnection{
        conn.sender, conn.receiver, conn.channel,
        plan.rankTbBegin[conn.sender] + conn.sendTb,
        plan.rankTbBegin[conn.receiver] + conn.recvTb,
        plan.connectionsInto[conn.receiver]++});

  std::vector<std::vector<std::vector<StepSlot>>> where(alg.gpus.size());
  for (int32_t g = 0; g < alg.ngpus(); ++g) {
    const ir::Gpu &gpu = alg.gpus[g];
    plan.scratchChunks.push_back(gpu.scratchChunks);
    where[g].resize(gpu.tbs.size());
    for (int32_t t = 0; t < static_cast<int32_t>(gpu.tbs.size()); ++t) {
      const ir::ThreadBlock &tb = gpu.tbs[t];
      PlanTb ptb{g, t, tb.channel, analysis.sendConnection[g][t],
                 analysis.recvConnection[g][t], static_cast<int32_t>(plan.steps.size()), 0,
                 static_cast<int32_t>(plan.slices.size()), 0};
      plan.maxIrSteps = std::max(plan.maxIrSteps, static_cast<int32_t>(tb.steps.size()));
      where[g][t].resize(tb.steps.size());

      for (int32_t s = 0; s < static_cast<int32_t>(tb.steps.size());) {
        const ir::Step &first = tb.steps[s];
        const int32_t nSteps = static_cast<int32_t>(tb.steps.size());
        // A copy that the getre or put group right after it folds in joins
        // the group as its first member (FoldedCopy, PlanTypes.h).
        const bool folded = foldsCopy(tb, s, alg.protocol);
        // Gather the fused group starting at s (a single step when no fusion).
        int32_t end = folded ? s + 2 : s + 1;
        const ir::Step &head = folded ? tb.steps[s + 1] : first; // its kind and peer
        // Fused puts only in Simple programs: the LL and LL128 kernels do
        // not carry their loop (device/Prims.h, FusedPuts).
        while (end < nSteps && fusesWith(tb.steps[end - 1], tb.steps[end], end - s) &&
               newPeer(tb, s, end, tb.steps[end].peer) &&
               (head.type != StepType::Put || alg.protocol == ir::Protocol::Simple))
          ++end;
        const ir::Step &last = tb.steps[end - 1];
        int32_t nsrc = end - s;
        ir::StepTypeInfo firstInfo = ir::stepTypeInfo(head.type);
        bool moves = firstInfo.readsSrc || firstInfo.writesDst || firstInfo.sends ||
                     firstInfo.receives;
        // A fused getre waits for its members' dependencies before it: the
        // last member's itself, each earlier one's that no later one's
        // implies in a nop of its own (Plan.h).
        const ir::Step &waits = fusesPeers(head.type) ? last : first;
        if (fusesPeers(head.type))
          for (int32_t r = s; r < end - 1; ++r) {
            if (impliedLater(tb, r, end))
              continue;
            const ir::Step &m = tb.steps[r];
            PlanStep nop{};
            nop.type = StepKind::Nop;
            nop.nsrc = 1;
            nop.sliceBegin = static_cast<int32_t>(plan.slices.size());
            nop.depTb = plan.rankTbBegin[g] + m.depTb;
            nop.depStep = m.depStep;
            nop.irStep = r;
            plan.steps.push_back(nop);
            ++ptb.nSteps;
          }
        PlanStep ps{};
        ps.type = static_cast<StepKind>(head.type);
        ps.srcBuf = static_cast<uint8_t>(first.srcBuf);
        ps.dstBuf = static_cast<uint8_t>(first.dstBuf);
        ps.nsrc = static_cast<uint8_t>(nsrc);
        ps.count = moves ? first.count : 0;
        ps.sliceBegin = static_cast<int32_t>(plan.slices.size());
        ps.depTb = waits.hasDependency() ? plan.rankTbBegin[g] + waits.depTb : -1;
        ps.depStep = waits.hasDependency() ? waits.depStep : -1;
        ps.irStep = end - 1;
        ps.hasDep = last.hasDep ? 1 : 0;
        int32_t index = static_cast<int32_t>(plan.steps.size());
        if (firstInfo.hasPeer()) {
          plan.stepPeers.resize(plan.steps.size(), PlanStepPeer{-1, -1, 0, -1});
          int32_t members = -1;
          if (nsrc > 1) {
            members = static_cast<int32_t>(plan.memberPeers.size());
            for (int32_t r = folded ? s + 1 : s; r < end; ++r) {
              plan.memberPeers.push_back(tb.steps[r].peer);
              plan.memberSignals.push_back(PlanMemberSignal{-1, 0});
            }
          }
          plan.stepPeers.push_back(
              PlanStepPeer{head.peer, -1, folded ? FoldedCopy : 0, members});
        }
        for (int32_t c = 0; c < ps.count; ++c)
          for (int32_t r = 0; r < nsrc; ++r)
            plan.slices.push_back(PlanSlice{tb.steps[s + r].srcOff + c, first.dstOff + c, -1});
        for (int32_t r = 0; r < nsrc; ++r)
          where[g][t][s + r] = StepSlot{index, r};
        plan.steps.push_back(ps);
        ++ptb.nSteps;
        ptb.nSlices += ps.count * nsrc;
        s = end;
      }
      plan.tbs.push_back(ptb);
    }
  }

  // Direct steps: every step gets its record once there is one. Signal
  // pairs: each signal and wait step learns its pair and its place among
  // the pair's signals or waits (the k-th wait takes the k-th signal).
  if (!plan.stepPeers.empty())
    plan.stepPeers.resize(plan.steps.size(), PlanStepPeer{-1, -1, 0, -1});
  for (const ir::SignalPair &pair : analysis.signals) {
    int32_t index = static_cast<int32_t>(plan.signals.size());
    plan.signals.push_back(PlanSignal{pair.sender, pair.receiver, pair.channel,
                                      static_cast<int32_t>(pair.signalSteps.size())});
    // A fused signal or wait: member 0's in its record too.
    auto place = [&](StepSlot at, size_t k) {
      PlanStepPeer &d = plan.stepPeers[at.planStep];
      if (at.member == 0) {
        d.signal = index;
        d.ordinal = static_cast<int32_t>(k);
      }
      if (d.members >= 0)
        plan.memberSignals[d.members + at.member] =
            PlanMemberSignal{index, static_cast<int32_t>(k)};
    };
    for (size_t k = 0; k < pair.signalSteps.size(); ++k)
      place(where[pair.sender][pair.signalTb][pair.signalSteps[k]], k);
    for (size_t k = 0; k < pair.waitSteps.size(); ++k)
      place(where[pair.receiver][pair.waitTb][pair.waitSteps[k]], k);
  }

  ClassPropagation propagation(alg, analysis, plan, where);
  if (llvm::Error err = propagation.run())
    return err;
  // Sorted and distinct (not a table of every class: a block may declare
  // up to 2^31 chunks).
  for (const PlanSlice &slice : plan.slices)
    if (slice.cls >= 0 && slice.cls < std::max(plan.shape.chunksPerBlock, 1))
      plan.sliceClasses.push_back(slice.cls);
  llvm::sort(plan.sliceClasses);
  plan.sliceClasses.erase(std::unique(plan.sliceClasses.begin(), plan.sliceClasses.end()),
                          plan.sliceClasses.end());
  waitDirectly(plan);
  // Copy engines: where the whole job's copies split from its signals, each
  // tb's runs, for the executors of every rank and of one (CopyEngines.cpp).
  if (!plan.stepPeers.empty() && plan.protocol == ir::Protocol::Simple) {
    if (auto split = copyEnginePhases(plan)) {
      plan.copyBegin = std::move(split->begin);
      plan.copyEnd = std::move(split->end);
    } else {
      llvm::consumeError(split.takeError());
    }
  }
  return plan;
}

bool Plan::hasDirectSteps(int32_t rank) const {
  if (!holds(rank))
    return false;
  for (int32_t t = rankTbBegin[rank]; t < rankTbBegin[rank + 1]; ++t)
    for (int32_t i = 0; i < tbs[t].nSteps; ++i)
      if (stepPeer(size_t(tbs[t].stepBegin + i)).peer >= 0)
        return true;
  return false;
}

std::vector<std::vector<int32_t>> connectionsByRank(const Plan &whole) {
  std::vector<std::vector<int32_t>> byRank(static_cast<size_t>(whole.nranks));
  for (size_t c = 0; c < whole.connections.size(); ++c) {
    const PlanConnection &conn = whole.connections[c];
    byRank[conn.sender].push_back(static_cast<int32_t>(c));
    if (conn.receiver != conn.sender)
      byRank[conn.receiver].push_back(static_cast<int32_t>(c));
  }
  return byRank;
}

Plan slicePlan(const Plan &whole, int32_t rank, const std::vector<int32_t> *ofRank) {
  Plan plan;
  plan.fileName = whole.fileName;
  plan.name = whole.name;
  plan.collective = whole.collective;
  plan.protocol = whole.protocol;
  plan.nranks = whole.nranks;
  plan.root = whole.root;
  plan.inplace = whole.inplace;
  plan.outofplace = whole.outofplace;
  plan.minBytes = whole.minBytes;
  plan.maxBytes = whole.maxBytes;
  plan.shape = whole.shape;
  plan.condition = whole.condition;
  plan.maxIrSteps = whole.maxIrSteps;
  plan.scratchChunks = whole.scratchChunks;
  plan.connectionsInto = whole.connectionsInto;
  plan.conflicts = whole.conflicts;
  plan.sliceClasses = whole.sliceClasses;
  plan.signals = whole.signals;
  plan.planRank = rank;
  const int32_t first = whole.rankTbBegin[rank], last = whole.rankTbBegin[rank + 1];
  // This rank's tbs from 0: the ranks before it have none, those after it
  // begin where it ends.
  plan.rankTbBegin.assign(whole.rankTbBegin.size(), 0);
  for (size_t r = static_cast<size_t>(rank) + 1; r < plan.rankTbBegin.size(); ++r)
    plan.rankTbBegin[r] = last - first;
  // Its connections, in the whole plan's order; a tb's connection index
  // becomes its place among them.
  std::vector<int32_t> mine;
  if (!ofRank) {
    for (size_t c = 0; c < whole.connections.size(); ++c)
      if (whole.connections[c].sender == rank || whole.connections[c].receiver == rank)
        mine.push_back(static_cast<int32_t>(c));
    ofRank = &mine;
  }
  for (int32_t c : *ofRank) {
    PlanConnection conn = whole.connections[c];
    conn.sendTb = conn.sender == rank ? conn.sendTb - first : -1;
    conn.recvTb = conn.receiver == rank ? conn.recvTb - first : -1;
    plan.connections.push_back(conn);
  }
  auto localIndex = [&](int32_t c) {
    auto at = std::lower_bound(ofRank->begin(), ofRank->end(), c);
    return at != ofRank->end() && *at == c ? static_cast<int32_t>(at - ofRank->begin()) : -1;
  };
  int32_t stepBase = 0, sliceBase = 0;
  if (first < last) {
    stepBase = whole.tbs[first].stepBegin;
    sliceBase = whole.tbs[first].sliceBegin;
    const PlanTb &end = whole.tbs[last - 1];
    plan.steps.assign(whole.steps.begin() + stepBase,
                      whole.steps.begin() + end.stepBegin + end.nSteps);
    plan.slices.assign(whole.slices.begin() + sliceBase,
                       whole.slices.begin() + end.sliceBegin + end.nSlices);
    if (!whole.stepPeers.empty())
      plan.stepPeers.assign(whole.stepPeers.begin() + stepBase,
                            whole.stepPeers.begin() + end.stepBegin + end.nSteps);
  }
  plan.memberPeers = whole.memberPeers;
  plan.memberSignals = whole.memberSignals;
  for (PlanStep &step : plan.steps) {
    step.sliceBegin -= sliceBase;
    if (step.depTb >= 0) {
      step.depTb -= first;
    } else if (step.depTb < -1) {
      const auto at = static_cast<int32_t>(plan.deps.size());
      for (const PlanDep &d : whole.dependencies(step))
        plan.deps.push_back(PlanDep{d.tb - first, d.step});
      step.depStep = at;
    }
  }
  plan.tbs.assign(whole.tbs.begin() + first, whole.tbs.begin() + last);
  if (!whole.copyBegin.empty()) {
    plan.copyBegin.assign(whole.copyBegin.begin() + first, whole.copyBegin.begin() + last);
    plan.copyEnd.assign(whole.copyEnd.begin() + first, whole.copyEnd.begin() + last);
  }
  for (PlanTb &tb : plan.tbs) {
    tb.stepBegin -= stepBase;
    tb.sliceBegin -= sliceBase;
    if (tb.sendConn >= 0)
      tb.sendConn = localIndex(tb.sendConn);
    if (tb.recvConn >= 0)
      tb.recvConn = localIndex(tb.recvConn);
  }
  return plan;
}

namespace {

/// Whether a step's direct-step record fits it and the plan (checkPlanIndices).
bool directOkIn(const Plan &p, const PlanStep &s, const PlanStepPeer &d, int32_t rank) {
  bool sync = s.type == StepKind::Signal || s.type == StepKind::Wait;
  if (ir::stepTypeInfo(static_cast<StepType>(s.type)).hasPeer() != (d.peer >= 0) ||
      sync != (d.signal >= 0) || d.ordinal < 0)
    return false;
  if (d.peer < 0)
    return d.peer == -1 && d.ordinal == 0 && d.members == -1;
  if (d.peer >= p.nranks || d.peer == rank)
    return false;
  // Several members: a fused getre, each source a peer of its own, or a
  // fused put, each destination.
  if ((s.nsrc > 1) != (d.members >= 0) || d.members < -1)
    return false;
  // A folded copy: a fused getre's or put's only ordinal of its own.
  if (!sync && d.ordinal != 0 &&
      (d.ordinal != FoldedCopy ||
       (s.type != StepKind::GetReduce && s.type != StepKind::Put) || d.members < 0))
    return false;
  // A signal or wait of `peer`'s pair `signal`, its ordinal-th.
  auto pairOk = [&](int32_t peer, int32_t signal, int32_t ordinal) {
    if (signal < 0 || signal >= static_cast<int64_t>(p.signals.size()) || ordinal < 0)
      return false;
    const PlanSignal &pair = p.signals[signal];
    bool mine = s.type == StepKind::Signal ? pair.sender == rank && pair.receiver == peer
                                           : pair.receiver == rank && pair.sender == peer;
    return mine && ordinal < pair.perIteration;
  };
  if (d.members >= 0) {
    const int32_t peers = stepPeerCount(d, s.nsrc);
    // Fused puts in Simple plans only (buildPlan): no other kernel runs them.
    if ((s.type != StepKind::GetReduce && !sync &&
         (s.type != StepKind::Put || p.protocol != ir::Protocol::Simple)) ||
        peers < 1 || p.memberSignals.size() != p.memberPeers.size() ||
        int64_t(d.members) + peers > static_cast<int64_t>(p.memberPeers.size()) ||
        p.memberPeers[d.members] != d.peer)
      return false;
    for (int r = 0; r < peers; ++r) {
      const int32_t m = p.memberPeers[d.members + r];
      const PlanMemberSignal &ms = p.memberSignals[d.members + r];
      if (m < 0 || m >= p.nranks || m == rank)
        return false;
      if (!sync) {
        if (ms.signal != -1 || ms.ordinal != 0)
          return false;
        continue;
      }
      // Each member its own pair's: one writer per flag, waits in order.
      if (!pairOk(m, ms.signal, ms.ordinal) ||
          (r == 0 && (ms.signal != d.signal || ms.ordinal != d.ordinal)))
        return false;
      for (int q = 0; q < r; ++q)
        if (p.memberPeers[d.members + q] == m)
          return false;
    }
  }
  if (!sync)
    return true;
  return pairOk(d.peer, d.signal, d.ordinal);
}

} // namespace

llvm::Error checkPlanIndices(const Plan &p) {
  auto bad = [&](const llvm::Twine &what) {
    return planError(p.fileName, 0, "the plan is damaged: " + what);
  };
  const auto ntbs = static_cast<int64_t>(p.tbs.size());
  const auto nsteps = static_cast<int64_t>(p.steps.size());
  const auto nslices = static_cast<int64_t>(p.slices.size());
  const auto nconns = static_cast<int64_t>(p.connections.size());
  if (!p.stepPeers.empty() && p.stepPeers.size() != p.steps.size())
    return bad("its direct steps' records");
  if (p.copyBegin.size() != p.copyEnd.size() ||
      (!p.copyBegin.empty() && p.copyBegin.size() != p.tbs.size()))
    return bad("its copy-engine runs");
  for (size_t t = 0; t < p.copyBegin.size(); ++t)
    if (p.copyBegin[t] < 0 || p.copyBegin[t] > p.copyEnd[t] || p.copyEnd[t] > p.tbs[t].nSteps)
      return bad("the copy-engine runs of tb " + llvm::Twine(t));
  auto directOk = [&](const PlanStep &s, const PlanStepPeer &d, int32_t rank) {
    return directOkIn(p, s, d, rank);
  };
  // A step's dependencies: tbs of its own rank, steps of the IR's span.
  auto depsOk = [&](const PlanStep &s, int32_t rank) {
    // Several: their list within Plan::deps, before it is read.
    if (s.depTb < -1 && (s.depTb < -MaxStepDependencies || s.depStep < 0 ||
                         int64_t(s.depStep) - s.depTb > static_cast<int64_t>(p.deps.size())))
      return false;
    const StepDependencies deps = p.dependencies(s);
    return std::all_of(deps.begin(), deps.end(), [&](const PlanDep &d) {
      return d.tb >= p.rankTbBegin[rank] && d.tb < p.rankTbBegin[rank + 1] && d.step >= 0 &&
             d.step < std::max(p.maxIrSteps, 1);
    });
  };
  if (p.nranks < 1 || p.planRank < -1 || p.planRank >= p.nranks ||
      p.rankTbBegin.size() != static_cast<size_t>(p.nranks) + 1 ||
      p.scratchChunks.size() != static_cast<size_t>(p.nranks) ||
      p.connectionsInto.size() != static_cast<size_t>(p.nranks) || p.rankTbBegin.front() != 0 ||
      p.rankTbBegin.back() != ntbs || p.shape.nranks != p.nranks ||
      p.shape.chunksPerBlock < 1 || p.maxIrSteps < 0 ||
      static_cast<unsigned>(p.protocol) > 2)
    return bad("its ranks, tbs or shape");
  for (int32_t r = 0; r < p.nranks; ++r)
    if (p.rankTbBegin[r] > p.rankTbBegin[r + 1] || p.scratchChunks[r] < 0)
      return bad(llvm::formatv("rank {0}'s tbs or scratch", r));
  for (int32_t cls : p.sliceClasses)
    if (cls < 0 || cls >= p.shape.chunksPerBlock)
      return bad("its chunk classes");
  for (const PlanSignal &sig : p.signals)
    if (sig.sender < 0 || sig.sender >= p.nranks || sig.receiver < 0 ||
        sig.receiver >= p.nranks || sig.sender == sig.receiver || sig.perIteration < 0)
      return bad("a signal pair");
  for (const PlanConnection &c : p.connections) {
    if (c.sender < 0 || c.sender >= p.nranks || c.receiver < 0 || c.receiver >= p.nranks ||
        c.atReceiver < 0 || c.atReceiver >= p.connectionsInto[c.receiver] ||
        (!p.holds(c.sender) && !p.holds(c.receiver)))
      return bad("a connection");
    // Each end's tb where this plan holds its rank, else none.
    auto endOk = [&](int32_t r, int32_t tb) {
      return p.holds(r) ? tb >= p.rankTbBegin[r] && tb < p.rankTbBegin[r + 1] : tb == -1;
    };
    if (!endOk(c.sender, c.sendTb) || !endOk(c.receiver, c.recvTb))
      return bad("a connection's tbs");
  }
  for (int32_t r = 0; r < p.nranks; ++r)
    for (int32_t t = p.rankTbBegin[r]; t < p.rankTbBegin[r + 1]; ++t) {
      const PlanTb &tb = p.tbs[t];
      auto inRange = [](int64_t begin, int64_t n, int64_t size) {
        return begin >= 0 && n >= 0 && begin + n <= size;
      };
      if (tb.rank != r || tb.tb != t - p.rankTbBegin[r] || tb.sendConn < -1 ||
          tb.sendConn >= nconns || tb.recvConn < -1 || tb.recvConn >= nconns ||
          !inRange(tb.stepBegin, tb.nSteps, nsteps) || !inRange(tb.sliceBegin, tb.nSlices, nslices))
        return bad(llvm::formatv("gpu {0} tb {1}", r, t - p.rankTbBegin[r]));
      if (!p.holds(r) && (tb.nSteps || tb.nSlices))
        return bad(llvm::formatv("gpu {0} has steps in a plan of rank {1}", r, p.planRank));
      for (int32_t i = 0; i < tb.nSteps; ++i) {
        const PlanStep &s = p.steps[tb.stepBegin + i];
        const int64_t n = int64_t(s.count) * s.nsrc;
        if (static_cast<unsigned>(s.type) >= ir::NumStepTypes || s.srcBuf > 2 || s.dstBuf > 2 ||
            s.nsrc < 1 || s.nsrc > MaxReduceSources || s.count < 0 ||
            s.sliceBegin < tb.sliceBegin || s.sliceBegin + n > int64_t(tb.sliceBegin) + tb.nSlices ||
            !depsOk(s, r) ||
            s.irStep < 0 || s.irStep >= std::max(p.maxIrSteps, 1) ||
            !directOk(s, p.stepPeer(size_t(tb.stepBegin + i)), r))
          return bad(llvm::formatv("gpu {0} tb {1} step {2}", r, tb.tb, i));
        for (int64_t k = 0; k < n; ++k) {
          const PlanSlice &slice = p.slices[s.sliceBegin + k];
          if (slice.srcChunk < 0 || slice.dstChunk < 0 || slice.cls < 0 ||
              slice.cls >= p.shape.chunksPerBlock)
            return bad(llvm::formatv("gpu {0} tb {1} step {2}: a chunk", r, tb.tb, i));
        }
      }
    }
  for (const SizeConflict &c : p.conflicts)
    if (c.a < 0 || c.b < 0 || c.a >= p.shape.chunksPerBlock || c.b >= p.shape.chunksPerBlock)
      return bad("a size conflict");
  return llvm::Error::success();
}

int32_t publishingStep(const Plan &plan, const PlanDep &d) {
  const PlanTb &tb = plan.tbs[static_cast<size_t>(d.tb)];
  const PlanStep *first = plan.steps.data() + tb.stepBegin, *last = first + tb.nSteps;
  const PlanStep *at = std::lower_bound(
      first, last, d.step, [](const PlanStep &s, int32_t ir) { return s.irStep < ir; });
  return at == last ? -1 : static_cast<int32_t>(at - plan.steps.data());
}

namespace {

/// CopyPhases::copies from begin and end: each tb's middle run in its order,
/// a tb waiting where its next step depends on a middle-run step not yet
/// taken.
llvm::Error orderCopies(const Plan &plan, CopyPhases &out) {
  const int32_t ntbs = static_cast<int32_t>(plan.tbs.size());
  std::vector<int32_t> tbOf(plan.steps.size(), -1);
  for (int32_t t = 0; t < ntbs; ++t)
    for (int32_t i = 0; i < plan.tbs[t].nSteps; ++i)
      tbOf[static_cast<size_t>(plan.tbs[t].stepBegin + i)] = t;
  auto middle = [&](int32_t k) {
    const int32_t t = tbOf[static_cast<size_t>(k)];
    const int32_t i = k - plan.tbs[t].stepBegin;
    return i >= out.begin[t] && i < out.end[t];
  };
  std::vector<uint8_t> taken(plan.steps.size(), 0);
  std::vector<int32_t> at(out.begin);
  out.copies.clear();
  for (bool progress = true; progress;) {
    progress = false;
    for (int32_t t = 0; t < ntbs; ++t)
      for (; at[t] < out.end[t]; ++at[t]) {
        const int32_t k = plan.tbs[t].stepBegin + at[t];
        bool ready = true;
        for (const PlanDep &d : plan.dependencies(plan.steps[k]))
          if (int32_t j = publishingStep(plan, d); j >= 0 && middle(j) && !taken[j])
            ready = false;
        if (!ready)
          break;
        taken[k] = 1;
        progress = true;
        const StepKind kind = plan.steps[k].type;
        if (kind == StepKind::Copy || kind == StepKind::Put || kind == StepKind::Get)
          out.copies.push_back({t, k});
      }
  }
  for (int32_t t = 0; t < ntbs; ++t)
    if (at[t] < out.end[t]) {
      const PlanTb &tb = plan.tbs[t];
      return planError(plan.fileName, 0,
                       llvm::formatv("copy engines: rank {0} tb {1} step {2}: its copies wait "
                                     "for each other in a cycle",
                                     tb.rank, tb.tb, at[t]));
    }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<CopyPhases> copyEnginePhases(const Plan &plan) {
  auto refuse = [&](const llvm::Twine &why) {
    return planError(plan.fileName, 0, "copy engines: " + why);
  };
  auto refuseAt = [&](int32_t t, int32_t i, const llvm::Twine &why) {
    const PlanTb &tb = plan.tbs[t];
    return refuse(llvm::formatv("rank {0} tb {1} step {2} ('{3}'): ", tb.rank, tb.tb, i,
                                ir::stepTypeName(static_cast<StepType>(plan.steps[tb.stepBegin + i].type)))
                      .str() +
                  why);
  };
  if (plan.planRank >= 0)
    return refuse("a plan of one rank: the split needs every rank's steps");
  if (plan.protocol != ir::Protocol::Simple)
    return refuse("protocol " + ir::protocolName(plan.protocol) + ": only Simple plans");
  auto isCopy = [](StepKind k) {
    return k == StepKind::Copy || k == StepKind::Put || k == StepKind::Get;
  };
  const int32_t ntbs = static_cast<int32_t>(plan.tbs.size());
  // 0: before the copies, 1: the copies, 2: after them.
  std::vector<int8_t> phase(plan.steps.size(), 0);
  // Per signal pair and ordinal (a pair's k-th signal and k-th wait of an
  // iteration: one event; a pair may carry a start and an end).
  std::vector<size_t> firstOrdinal(plan.signals.size() + 1, 0);
  for (size_t g = 0; g < plan.signals.size(); ++g)
    firstOrdinal[g + 1] = firstOrdinal[g] + static_cast<size_t>(std::max(plan.signals[g].perIteration, 1));
  std::vector<int8_t> pairPhase(firstOrdinal.back(), 0);
  bool anyCopy = false;
  for (int32_t t = 0; t < ntbs; ++t)
    for (int32_t i = 0; i < plan.tbs[t].nSteps; ++i) {
      const StepKind k = plan.steps[plan.tbs[t].stepBegin + i].type;
      if (isCopy(k)) {
        phase[plan.tbs[t].stepBegin + i] = 1;
        anyCopy = true;
      } else if (k != StepKind::Signal && k != StepKind::Wait && k != StepKind::Nop) {
        return refuseAt(t, i, "neither a copy (cpy, put, get) nor a signal, wait or nop");
      }
    }
  if (!anyCopy)
    return refuse("the plan has no copies");
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t t = 0; t < ntbs; ++t)
      for (int32_t i = 0; i < plan.tbs[t].nSteps; ++i) {
        const int32_t k = plan.tbs[t].stepBegin + i;
        const PlanStep &s = plan.steps[k];
        int8_t p = phase[k];
        if (i > 0)
          p = std::max(p, phase[k - 1]);
        for (const PlanDep &d : plan.dependencies(s))
          if (int32_t j = publishingStep(plan, d); j >= 0)
            p = std::max(p, phase[j]);
        const bool sync = s.type == StepKind::Signal || s.type == StepKind::Wait;
        // A fused signal or wait is each of its members' events.
        std::vector<size_t> events;
        for (const PlanMemberSignal &m : plan.stepSignals(size_t(k)))
          events.push_back(firstOrdinal[m.signal] + static_cast<size_t>(m.ordinal));
        for (size_t event : events)
          p = std::max(p, pairPhase[event]);
        if (p == 1 && sync)
          p = 2; // a signal or wait after copies: after all of them
        if (p == 2 && isCopy(s.type))
          return refuseAt(t, i, "a copy after a signal or wait that follows copies (its own "
                                "tb's, or what it waits for): the copies are not one run");
        if (p != phase[k]) {
          phase[k] = p;
          changed = true;
        }
        for (size_t event : events)
          if (pairPhase[event] < p) {
            pairPhase[event] = p;
            changed = true;
          }
      }
  }
  CopyPhases out;
  out.begin.resize(ntbs);
  out.end.resize(ntbs);
  for (int32_t t = 0; t < ntbs; ++t) {
    const PlanTb &tb = plan.tbs[t];
    int32_t i = 0;
    while (i < tb.nSteps && phase[tb.stepBegin + i] == 0)
      ++i;
    out.begin[t] = i;
    while (i < tb.nSteps && phase[tb.stepBegin + i] == 1)
      ++i;
    out.end[t] = i;
  }
  if (llvm::Error err = orderCopies(plan, out))
    return err;
  return out;
}

std::optional<CopyPhases> storedCopyPhases(const Plan &plan) {
  if (plan.copyBegin.empty() || plan.copyBegin.size() != plan.tbs.size() ||
      plan.copyEnd.size() != plan.tbs.size())
    return std::nullopt;
  CopyPhases out;
  out.begin = plan.copyBegin;
  out.end = plan.copyEnd;
  if (llvm::Error err = orderCopies(plan, out)) { // checkPlanIndices keeps it from a damaged plan
    llvm::consumeError(std::move(err));
    return std::nullopt;
  }
  return out;
}

llvm::Expected<CallLayout> resolveCall(const Plan &plan, uint64_t count) {
  // Keeps every element offset, in elements and in bytes, far from overflow.
  constexpr uint64_t maxCount = uint64_t(1) << 44;
  if (count > maxCount)
    return planError(plan.fileName, 0,
                     llvm::formatv("element count {0} is too large (limit {1})", count,
                                   maxCount));
  CallLayout call;
  call.layout = ir::ChunkLayout(plan.shape, count);
  const ir::ChunkLayout &layout = call.layout;

  for (const SizeConflict &c : plan.conflicts) {
    uint64_t a = layout.classSize(c.a), b = layout.classSize(c.b);
    if (a != b)
      return planError(
          plan.fileName, c.line,
          llvm::formatv("gpu {0} tb {1} step {2}: combines chunks of classes {3} and {4}, "
                        "which hold {5} and {6} elements when each block has {7}; this "
                        "algorithm needs a count per block that is a multiple of {8}",
                        c.rank, c.tb, c.irStep, c.a, c.b, a, b, count,
                        plan.shape.chunksPerBlock));
  }

  call.inputElems = layout.bufferElems(BufferKind::Input);
  call.outputElems = layout.bufferElems(BufferKind::Output);
  for (int32_t chunks : plan.scratchChunks)
    call.scratchElems.push_back(layout.bufferElems(BufferKind::Scratch, chunks));

  call.slices.resize(plan.slices.size());
  for (const PlanTb &tb : plan.tbs) {
    for (int32_t i = 0; i < tb.nSteps; ++i) {
      const PlanStep &ps = plan.steps[tb.stepBegin + i];
      ir::StepTypeInfo info = ir::stepTypeInfo(static_cast<StepType>(ps.type));
      auto src = static_cast<BufferKind>(ps.srcBuf), dst = static_cast<BufferKind>(ps.dstBuf);
      // A direct step's remote operand is bounded by its peer's scratch (a
      // fused getre's source r by its own peer's).
      const PlanStepPeer d = plan.stepPeer(size_t(tb.stepBegin + i));
      const bool folded = d.members >= 0 && d.signal < 0 && d.ordinal == FoldedCopy;
      auto limitOf = [&](BufferKind buffer, bool remote, int32_t member) {
        int32_t owner = !remote || (folded && member == 0)
                            ? tb.rank
                        : d.members < 0 ? d.peer
                                        : plan.memberPeers[d.members + member - (folded ? 1 : 0)];
        return buffer == BufferKind::Input    ? call.inputElems
               : buffer == BufferKind::Output ? call.outputElems
                                              : call.scratchElems[owner];
      };
      for (int32_t k = 0; k < ps.count * ps.nsrc; ++k) {
        const uint64_t srcLimit =
            limitOf(src, info.direct == ir::DirectRole::RemoteSrc, k % ps.nsrc);
        const uint64_t dstLimit =
            limitOf(dst, info.direct == ir::DirectRole::RemoteDst, k % ps.nsrc);
        const PlanSlice &slice = plan.slices[ps.sliceBegin + k];
        CallSlice &out = call.slices[ps.sliceBegin + k];
        out.nelem = layout.classSize(slice.cls);
        out.src = info.readsSrc ? layout.chunkOffset(src, slice.srcChunk) : 0;
        out.dst = info.writesDst ? layout.chunkOffset(dst, slice.dstChunk) : 0;
        // The verifier bounds chunk indices; this guards the element ranges
        // themselves, whatever the input.
        bool srcOk = !info.readsSrc || out.src + out.nelem <= srcLimit;
        bool dstOk = !info.writesDst || out.dst + out.nelem <= dstLimit;
        if (!srcOk || !dstOk)
          return planError(plan.fileName, 0,
                           llvm::formatv("gpu {0} tb {1} step {2}: chunk range outside "
                                         "its buffer for count {3}",
                                         tb.rank, tb.tb, ps.irStep, count));
        call.maxChunkElems = std::max(call.maxChunkElems, out.nelem);
      }
    }
  }
  // The other ranks' slices too, where this plan holds one rank's.
  for (int32_t cls : plan.sliceClasses)
    call.maxChunkElems = std::max(call.maxChunkElems, layout.classSize(cls));
  return call;
}

} // namespace coll::interp
