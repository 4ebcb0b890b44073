//===- DirectStepsTest.cpp - Direct steps on the host backend ------------===//
//
// Programs whose ranks read and write each other's buffers and signal each
// other (docs/IR.md, "Direct steps"): they verify and check, the host
// executor runs them right call after call (the signal counters carry over
// between calls), and the executors that cannot run them say so.
//
//===----------------------------------------------------------------------===//

#include "TestAlgorithms.h"
#include "TimeScale.h"

#include "coll/interpreter/Check.h"
#include "coll/interpreter/HostExecutor.h"
#include "coll/interpreter/Plan.h"
#include "coll/interpreter/host/Rank.h"
#include "coll/ir/Check.h"
#include "coll/ir/Verifier.h"

#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

using namespace coll;
using namespace coll::interp;

namespace {

std::vector<std::pair<std::string, ir::Algorithm>> peerAlgorithms(int n) {
  return {{"oneshot", coll::testing::peerOneShotAllReduce(n)},
          {"twoshot", coll::testing::peerTwoShotAllReduce(n)},
          {"get-twoshot", coll::testing::peerGetTwoShotAllReduce(n)},
          {"copy-get-twoshot", coll::testing::peerCopyGetTwoShotAllReduce(n)}};
}

Plan planOf(const ir::Algorithm &alg) {
  ir::DiagnosticList diags("<test>");
  auto analysis = ir::verify(alg, diags);
  if (!analysis)
    ADD_FAILURE() << llvm::toString(analysis.takeError());
  auto plan = buildPlan(alg, *analysis, "<test>");
  if (!plan)
    ADD_FAILURE() << llvm::toString(plan.takeError());
  return std::move(*plan);
}

TEST(DirectSteps, ProgramsCheck) {
  for (int n : {2, 3, 5})
    for (auto &[name, alg] : peerAlgorithms(n)) {
      ir::DiagnosticList diags("<test>");
      auto analysis = ir::verify(alg, diags);
      ASSERT_TRUE(static_cast<bool>(analysis)) << name << ": " << llvm::toString(analysis.takeError());
      EXPECT_TRUE(ir::check(alg, *analysis, diags)) << name << " n=" << n;
      EXPECT_EQ(diags.errorCount(), 0u) << name << " n=" << n;
      EXPECT_EQ(analysis->signals.size(), size_t(n * (n - 1))) << name;
    }
}

TEST(DirectSteps, PlanPairsSignalsWithWaits) {
  Plan plan = planOf(coll::testing::peerTwoShotAllReduce(3));
  ASSERT_EQ(plan.signals.size(), 6u);
  for (const PlanSignal &s : plan.signals)
    EXPECT_EQ(s.perIteration, 3) << s.sender << "->" << s.receiver; // three handshakes
  ASSERT_EQ(plan.stepPeers.size(), plan.steps.size());
  // Per pair, its signals and its waits are numbered 0, 1, 2 in tb order:
  // the k-th wait takes the k-th signal (the GPU's signal flags store the
  // signal's number).
  // A handshake's signals to the two peers are one fused step, and so are
  // its waits (Plan::memberSignals): each member its own pair's.
  std::vector<std::vector<int32_t>> signalOrdinals(plan.signals.size()),
      waitOrdinals(plan.signals.size());
  int waits = 0, fusedSyncs = 0;
  for (const PlanTb &tb : plan.tbs)
    for (int32_t i = 0; i < tb.nSteps; ++i) {
      const PlanStep &step = plan.steps[tb.stepBegin + i];
      const PlanStepPeer &d = plan.stepPeers[tb.stepBegin + i];
      bool sync = step.type == StepKind::Signal || step.type == StepKind::Wait;
      EXPECT_EQ(sync, d.signal >= 0);
      EXPECT_EQ(sync ? 0 : 1, step.count);
      EXPECT_EQ(step.type == StepKind::Copy || step.type == StepKind::Reduce, d.peer < 0);
      if (!sync)
        continue;
      EXPECT_EQ(step.nsrc, 2) << "rank " << tb.rank << " step " << i;
      fusedSyncs += step.nsrc > 1;
      const std::vector<PlanMemberSignal> members = plan.stepSignals(size_t(tb.stepBegin + i));
      ASSERT_EQ(members.size(), size_t(step.nsrc));
      EXPECT_EQ(members[0].signal, d.signal);
      EXPECT_EQ(members[0].ordinal, d.ordinal);
      for (int32_t m = 0; m < step.nsrc; ++m) {
        const int32_t peer = m == 0 ? d.peer : plan.memberPeers[d.members + m];
        const PlanSignal &pair = plan.signals[members[m].signal];
        EXPECT_EQ(step.type == StepKind::Wait ? pair.receiver : pair.sender, tb.rank);
        EXPECT_EQ(step.type == StepKind::Wait ? pair.sender : pair.receiver, peer);
        waits += step.type == StepKind::Wait;
        (step.type == StepKind::Wait ? waitOrdinals : signalOrdinals)[members[m].signal].push_back(
            members[m].ordinal);
      }
    }
  for (size_t s = 0; s < plan.signals.size(); ++s) {
    EXPECT_EQ(signalOrdinals[s], (std::vector<int32_t>{0, 1, 2})) << s;
    EXPECT_EQ(waitOrdinals[s], (std::vector<int32_t>{0, 1, 2})) << s;
  }
  // PlanStep keeps its size: the kernel copies one per step into shared
  // memory.
  static_assert(sizeof(PlanStep) == 28);
  EXPECT_EQ(waits, 18);
  EXPECT_EQ(fusedSyncs, 18) << "per rank three handshakes, each a signal step and a wait step";
  EXPECT_FALSE(static_cast<bool>(checkPlanIndices(plan)));
  EXPECT_TRUE(plan.hasDirectSteps(0));
  // A rank's plan keeps the job's signal pairs.
  Plan one = slicePlan(plan, 1);
  EXPECT_EQ(one.signals.size(), plan.signals.size());
  EXPECT_EQ(one.stepPeers.size(), one.steps.size());
  EXPECT_FALSE(static_cast<bool>(checkPlanIndices(one)));
  // Damaged records are refused: an ordinal past its pair's signals or
  // waits, a signal to its own rank, a record list of another length.
  auto refused = [](const Plan &damaged) {
    llvm::Error err = checkPlanIndices(damaged);
    bool failed = static_cast<bool>(err);
    llvm::consumeError(std::move(err));
    return failed;
  };
  for (size_t i = 0; i < one.steps.size(); ++i) {
    Plan damaged = one;
    if (one.steps[i].type == StepKind::Wait)
      damaged.stepPeers[i].ordinal = 7;
    else if (one.steps[i].type == StepKind::Signal)
      damaged.stepPeers[i].peer = 1;
    else
      continue;
    EXPECT_TRUE(refused(damaged)) << "step " << i;
    if (one.steps[i].type == StepKind::Signal) {
      Plan late = one;
      late.stepPeers[i].ordinal = 3;
      EXPECT_TRUE(refused(late)) << "step " << i;
    }
    // A fused step's second member: past its pair's count, on its first
    // member's pair (two writers of one flag), or to the first's peer.
    const int32_t at = one.stepPeers[i].members + 1;
    Plan past = one;
    past.memberSignals[at].ordinal = 3;
    EXPECT_TRUE(refused(past)) << "step " << i;
    Plan samePair = one;
    samePair.memberSignals[at] = samePair.memberSignals[at - 1];
    EXPECT_TRUE(refused(samePair)) << "step " << i;
    Plan samePeer = one;
    samePeer.memberPeers[at] = samePeer.memberPeers[at - 1];
    EXPECT_TRUE(refused(samePeer)) << "step " << i;
    Plan unfused = one;
    unfused.steps[i].nsrc = 1;
    EXPECT_TRUE(refused(unfused)) << "step " << i;
  }
  Plan shorter = one;
  shorter.stepPeers.pop_back();
  EXPECT_TRUE(refused(shorter));
  Plan noMembers = one;
  noMembers.memberSignals.pop_back();
  EXPECT_TRUE(refused(noMembers));
}

// A run of getre steps into one chunk is one fused step of the plan, each
// source its own peer's (interp/Plan.h). Its members wait for different
// peers' start signals, on a tb per peer: the fused step waits for the
// last member's and a nop before it for each other's, so that no peer is
// read before it has started; the nops' dependencies then join the fused
// step's, which waits on them all at once (Plan.h, "Dependencies"). (The
// ordering the verifier proved for the IR holds for the plan only so;
// this pins it.)
TEST(DirectSteps, FusedGetReduceWaitsForEveryMember) {
  for (int n : {2, 3, 5}) {
    Plan plan = planOf(coll::testing::peerGetTwoShotAllReduce(n));
    EXPECT_FALSE(static_cast<bool>(checkPlanIndices(plan)));
    for (int r = 0; r < n; ++r) {
      const PlanTb &data = plan.tbs[plan.rankTbBegin[r]]; // tb 0
      std::set<int32_t> waited;
      int fused = 0;
      for (int32_t i = 0; i < data.nSteps; ++i) {
        const PlanStep &step = plan.steps[data.stepBegin + i];
        auto waits = [&] {
          for (const PlanDep &d : plan.dependencies(step))
            waited.insert(d.tb);
        };
        if (step.type == StepKind::Nop) {
          EXPECT_EQ(fused, 0) << "a nop after the fused step";
          waits();
        }
        if (step.type != StepKind::GetReduce)
          continue;
        ++fused;
        waits();
        EXPECT_EQ(step.nsrc, n - 1);
        const PlanStepPeer d = plan.stepPeers[data.stepBegin + i];
        EXPECT_EQ(d.members >= 0, n > 2);
      }
      EXPECT_EQ(fused, 1) << "rank " << r;
      // Every peer's sync tb (tbs 1 .. n-1 of the rank), and only those.
      std::set<int32_t> syncTbs;
      for (int32_t t = plan.rankTbBegin[r] + 1; t < plan.rankTbBegin[r + 1]; ++t)
        syncTbs.insert(t);
      EXPECT_EQ(waited, syncTbs) << "rank " << r;
    }
  }
}

// A copy into the destination of the getre group after it joins the group
// as its first source (FoldedCopy), and a run of puts of one chunk to the
// peers is one step that reads it once (interp/Plan.h): on the data tb of
// every rank one getre of n sources and one put of n-1 destinations, each
// peer once. A damaged record is refused: a folded copy on a put, a fused
// put in a plan of another protocol, whose kernels do not run them.
// (A copy before the puts folds into them too: PlanFoldsTheOwnCopyIntoThePuts.)
TEST(DirectSteps, PlanFoldsTheCopyAndFusesThePuts) {
  for (int n : {2, 3, 5}) {
    Plan plan = planOf(coll::testing::peerCopyGetTwoShotAllReduce(n));
    ASSERT_FALSE(static_cast<bool>(checkPlanIndices(plan)));
    for (int r = 0; r < n; ++r) {
      const PlanTb &data = plan.tbs[plan.rankTbBegin[r]];
      int getres = 0, puts = 0, copies = 0;
      for (int32_t i = 0; i < data.nSteps; ++i) {
        const int32_t at = data.stepBegin + i;
        const PlanStep &step = plan.steps[at];
        const PlanStepPeer &d = plan.stepPeers[at];
        copies += step.type == StepKind::Copy;
        std::set<int32_t> peers;
        for (int32_t m = 0; m < stepPeerCount(d, step.nsrc); ++m)
          peers.insert(d.members < 0 ? d.peer : plan.memberPeers[d.members + m]);
        if (step.type == StepKind::GetReduce) {
          ++getres;
          EXPECT_EQ(step.nsrc, n) << "the copy and n-1 peers";
          EXPECT_EQ(d.ordinal, FoldedCopy);
          EXPECT_EQ(peers.size(), size_t(n - 1));
          EXPECT_EQ(peers.count(r), 0u);
        }
        if (step.type == StepKind::Put) {
          ++puts;
          EXPECT_EQ(step.nsrc, n - 1);
          EXPECT_EQ(d.ordinal, 0);
          EXPECT_EQ(peers.size(), size_t(n - 1));
          EXPECT_EQ(peers.count(r), 0u);
        }
      }
      EXPECT_EQ(copies, 0) << "rank " << r;
      EXPECT_EQ(getres, 1) << "rank " << r;
      EXPECT_EQ(puts, 1) << "rank " << r;
    }
    auto refused = [](const Plan &damaged) {
      llvm::Error err = checkPlanIndices(damaged);
      bool failed = static_cast<bool>(err);
      llvm::consumeError(std::move(err));
      return failed;
    };
    const int32_t first = plan.tbs[plan.rankTbBegin[0]].stepBegin;
    for (int32_t i = first; i < first + plan.tbs[plan.rankTbBegin[0]].nSteps; ++i) {
      if (plan.steps[i].type == StepKind::Put && n > 2) {
        Plan ll = plan;
        ll.protocol = ir::Protocol::LL;
        EXPECT_TRUE(refused(ll)) << "a fused put in an LL plan";
        Plan other = plan;
        other.stepPeers[i].ordinal = FoldedCopy + 1;
        EXPECT_TRUE(refused(other)) << "a put's ordinal neither 0 nor FoldedCopy";
      }
    }
  }
}

// A copy of what the puts after it send, into the place they store it in
// their peers, joins them as their first destination, this rank's own
// (FoldedCopy): in a Simple plan each rank's data is one put of n
// destinations that reads the input once, and its peers are the n-1 others.
// It runs right in both modes (in place the own copy is onto itself and is
// left out), and its copies split for copy engines as one fused put per
// rank. An LL plan keeps the copy and the single puts, and an LL plan with
// the fused put is refused.
TEST(DirectSteps, PlanFoldsTheOwnCopyIntoThePuts) {
  auto refused = [](const Plan &damaged) {
    llvm::Error err = checkPlanIndices(damaged);
    bool failed = static_cast<bool>(err);
    llvm::consumeError(std::move(err));
    return failed;
  };
  for (int n : {2, 3, 5}) {
    ir::Algorithm alg = coll::testing::peerCopyPutAllGather(n);
    Plan plan = planOf(alg);
    ASSERT_FALSE(static_cast<bool>(checkPlanIndices(plan)));
    for (int r = 0; r < n; ++r) {
      const PlanTb &tb = plan.tbs[plan.rankTbBegin[r]];
      int puts = 0, copies = 0;
      for (int32_t i = 0; i < tb.nSteps; ++i) {
        const int32_t at = tb.stepBegin + i;
        const PlanStep &step = plan.steps[at];
        const PlanStepPeer &d = plan.stepPeers[at];
        copies += step.type == StepKind::Copy;
        if (step.type != StepKind::Put)
          continue;
        ++puts;
        EXPECT_EQ(step.nsrc, n) << "the copy and n-1 peers";
        EXPECT_EQ(d.ordinal, FoldedCopy);
        ASSERT_GE(d.members, 0);
        ASSERT_EQ(stepPeerCount(d, step.nsrc), n - 1);
        std::set<int32_t> peers;
        for (int32_t m = 0; m < n - 1; ++m)
          peers.insert(plan.memberPeers[d.members + m]);
        EXPECT_EQ(peers.size(), size_t(n - 1));
        EXPECT_EQ(peers.count(r), 0u);
        EXPECT_EQ(plan.memberPeers[d.members], d.peer);
        Plan ll = plan;
        ll.protocol = ir::Protocol::LL;
        EXPECT_TRUE(refused(ll)) << "a folded put in an LL plan";
      }
      EXPECT_EQ(copies, 0) << "n=" << n << " rank " << r;
      EXPECT_EQ(puts, 1) << "n=" << n << " rank " << r;
    }
    for (bool inplace : {false, true})
      for (uint64_t count : {1ull, 1001ull}) {
        auto result =
            coll::testing::runChecked(alg, DataType::Float32, ReduceOp::Sum, count, inplace);
        ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
        EXPECT_EQ(result->wrong, 0u) << "n=" << n << " inplace=" << inplace << " count=" << count
                                     << ": " << result->firstWrong;
      }
    auto split = copyEnginePhases(plan);
    ASSERT_TRUE(static_cast<bool>(split)) << llvm::toString(split.takeError());
    ASSERT_EQ(split->copies.size(), size_t(n));
    for (const CopyPhases::Copy &c : split->copies)
      EXPECT_EQ(plan.steps[size_t(c.step)].nsrc, n);

    Plan ll = planOf(coll::testing::peerCopyPutAllGather(n, ir::Protocol::LL));
    ASSERT_FALSE(static_cast<bool>(checkPlanIndices(ll)));
    const PlanTb &tb = ll.tbs[ll.rankTbBegin[0]];
    int puts = 0, copies = 0;
    for (int32_t i = 0; i < tb.nSteps; ++i) {
      const PlanStep &step = ll.steps[tb.stepBegin + i];
      copies += step.type == StepKind::Copy;
      if (step.type == StepKind::Put) {
        ++puts;
        EXPECT_EQ(step.nsrc, 1);
        EXPECT_EQ(ll.stepPeers[tb.stepBegin + i].ordinal, 0);
      }
    }
    EXPECT_EQ(copies, 1) << "n=" << n;
    EXPECT_EQ(puts, n - 1) << "n=" << n;
  }
}

// A signal after the first of a run that has a dependency of its own is
// not fused (interp/Plan.h): the group would hold back the earlier
// signals until that dependency is met. A wait with one is (waiting
// longer delays nothing but the tb), and so are the signals once the
// dependency is the run's first's. Every form runs right on the host.
TEST(DirectSteps, SignalRunsFuseOnlyWhereNoLaterSignalWaits) {
  const int n = 3;
  auto withDependency = [&](ir::StepType type, int member) {
    ir::Algorithm alg = coll::testing::peerAllGather(n);
    ir::Gpu &gpu = alg.gpus[0];
    ir::ThreadBlock extra;
    ir::Step nop;
    nop.type = ir::StepType::Nop;
    nop.count = 0;
    nop.hasDep = true;
    extra.steps.push_back(nop);
    gpu.tbs.push_back(extra);
    // The first handshake's run of this type, its member-th step.
    int seen = 0;
    for (ir::Step &step : gpu.tbs[0].steps)
      if (step.type == type && seen++ == member) {
        step.depTb = 1;
        step.depStep = 0;
        break;
      }
    return alg;
  };
  auto syncSteps = [](const Plan &plan, StepKind kind) {
    std::vector<int> sizes;
    const PlanTb &tb = plan.tbs[plan.rankTbBegin[0]];
    for (int32_t i = 0; i < tb.nSteps; ++i)
      if (plan.steps[tb.stepBegin + i].type == kind)
        sizes.push_back(plan.steps[tb.stepBegin + i].nsrc);
    return sizes;
  };
  struct Case {
    ir::StepType type;
    int member;
    std::vector<int> signals, waits;
  };
  for (const Case &k : {Case{ir::StepType::Signal, 0, {2, 2}, {2, 2}},
                        Case{ir::StepType::Signal, 1, {1, 1, 2}, {2, 2}},
                        Case{ir::StepType::Wait, 1, {2, 2}, {2, 2}}}) {
    ir::Algorithm alg = withDependency(k.type, k.member);
    Plan plan = planOf(alg);
    EXPECT_FALSE(static_cast<bool>(checkPlanIndices(plan)));
    EXPECT_EQ(syncSteps(plan, StepKind::Signal), k.signals) << "member " << k.member;
    EXPECT_EQ(syncSteps(plan, StepKind::Wait), k.waits) << "member " << k.member;
    auto result = coll::testing::runChecked(alg, DataType::Float32, ReduceOp::Sum, 1000,
                                            !alg.outofplace);
    ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
    EXPECT_EQ(result->wrong, 0u) << result->firstWrong;
  }
}

// Many calls on one executor, sizes from one element to several pipeline
// iterations of tiny slots, every type and operator: the counters' bases
// must carry over from call to call, whatever each call's iterations.
// Copy engines (docs/CUDA.md, "Copy engines"): a plan splits where each
// tb's copies are one run between the signals before and after them, a
// signal and the wait that takes it in one run; the copies come out in an
// order that keeps each after what it waits for; anything else is refused
// at the step that shows it.
TEST(DirectSteps, CopyEnginePhasesSplitCopiesFromSignals) {
  for (int n : {2, 3, 5}) {
    Plan plan = planOf(coll::testing::peerAllGather(n));
    auto split = copyEnginePhases(plan);
    ASSERT_TRUE(static_cast<bool>(split)) << llvm::toString(split.takeError());
    ASSERT_EQ(split->begin.size(), plan.tbs.size());
    // Per tb: the start signals and waits (a fused step each), the fused
    // put and the copy, the end signals and waits.
    for (size_t t = 0; t < plan.tbs.size(); ++t) {
      EXPECT_EQ(split->begin[t], 2) << "n=" << n << " tb " << t;
      EXPECT_EQ(split->end[t], 4) << "n=" << n << " tb " << t;
      EXPECT_EQ(plan.tbs[t].nSteps, 6);
    }
    ASSERT_EQ(split->copies.size(), size_t(2 * n));
    for (const CopyPhases::Copy &c : split->copies) {
      const PlanStep &s = plan.steps[size_t(c.step)];
      EXPECT_TRUE(s.type == StepKind::Put || s.type == StepKind::Copy);
      EXPECT_EQ(s.nsrc, s.type == StepKind::Put ? n - 1 : 1); // the fused put
    }
  }
  // With the signals on tbs of their own, the puts wait for the start
  // waits there and the end signals for the copy: the same split.
  for (int n : {2, 4}) {
    Plan plan = planOf(coll::testing::peerAllGatherOnTbs(n));
    auto split = copyEnginePhases(plan);
    ASSERT_TRUE(static_cast<bool>(split)) << llvm::toString(split.takeError());
    for (int32_t r = 0; r < n; ++r) {
      const int32_t data = plan.rankTbBegin[r];
      EXPECT_EQ(split->begin[data], 0);
      EXPECT_EQ(split->end[data], plan.tbs[data].nSteps); // nops, the fused put, the copy
      for (int32_t t = data + 1; t < plan.rankTbBegin[r + 1]; ++t) {
        EXPECT_EQ(split->begin[t], 2); // start signal and wait
        EXPECT_EQ(split->end[t], 2);   // no copies; end signal and wait after them
        EXPECT_EQ(plan.tbs[t].nSteps, 4);
      }
    }
    EXPECT_EQ(split->copies.size(), size_t(2 * n));
  }
  // A reduction is not a copy.
  auto twoShot = copyEnginePhases(planOf(coll::testing::peerTwoShotAllReduce(3)));
  ASSERT_FALSE(static_cast<bool>(twoShot));
  std::string why = llvm::toString(twoShot.takeError());
  EXPECT_NE(why.find("copy engines: rank 0 tb 0 step "), std::string::npos) << why;
  EXPECT_NE(why.find("('re'): neither a copy (cpy, put, get) nor a signal, wait or nop"),
            std::string::npos)
      << why;
  // A copy before the start signals: the signals after it could publish
  // what it wrote, so it cannot move past them.
  ir::Algorithm early = coll::testing::peerAllGather(2);
  for (ir::Gpu &g : early.gpus) {
    std::vector<ir::Step> &steps = g.tbs[0].steps;
    auto copy = std::find_if(steps.begin(), steps.end(),
                             [](const ir::Step &s) { return s.type == ir::StepType::Copy; });
    ir::Step moved = *copy;
    steps.erase(copy);
    steps.insert(steps.begin(), moved);
  }
  auto refused = copyEnginePhases(planOf(early));
  ASSERT_FALSE(static_cast<bool>(refused));
  why = llvm::toString(refused.takeError());
  EXPECT_NE(why.find("('put'): a copy after a signal or wait that follows copies"),
            std::string::npos)
      << why;
  // A plan of one rank lacks the other ranks' steps.
  auto one = copyEnginePhases(slicePlan(planOf(coll::testing::peerAllGather(2)), 0));
  ASSERT_FALSE(static_cast<bool>(one));
  EXPECT_NE(llvm::toString(one.takeError()).find("a plan of one rank"), std::string::npos);
}

TEST(DirectSteps, HostExecutorRunsThemCallAfterCall) {
  for (int n : {2, 3, 4})
    for (auto &[name, alg] : peerAlgorithms(n))
      for (uint32_t slot : {0u, 64u}) {
        HostOptions options;
        options.watchdogMs = uint32_t(coll::testing::scaledMs(20000));
        options.setSlotBytes(slot);
        Plan plan = planOf(alg);
        CollectiveDesc desc = CollectiveDesc::of(plan);
        const bool inplace = !plan.outofplace;
        auto executor = HostExecutor::create(std::move(plan), options);
        ASSERT_TRUE(static_cast<bool>(executor)) << llvm::toString(executor.takeError());
        uint64_t seed = 1;
        for (auto [type, op] : {std::pair(DataType::Float32, ReduceOp::Sum),
                                std::pair(DataType::Int32, ReduceOp::Max),
                                std::pair(DataType::Float64, ReduceOp::Prod),
                                std::pair(DataType::Int8, ReduceOp::Min),
                                std::pair(DataType::Float32, ReduceOp::Avg)})
          for (uint64_t count : {1ull, 7ull, 100ull, 1001ull, 5000ull}) {
            std::string what = name + " n=" + std::to_string(n) + " slot=" + std::to_string(slot) +
                               " " + dataTypeName(type).str() + " count=" + std::to_string(count);
            CheckedCall call(desc, type, op, count, inplace, seed++);
            auto result = (*executor)->run(call.args());
            ASSERT_TRUE(static_cast<bool>(result)) << what << ": " << llvm::toString(result.takeError());
            CheckResult checked = call.check();
            EXPECT_EQ(checked.wrong, 0u) << what << ": " << checked.firstWrong;
            EXPECT_GT(checked.checked, 0u) << what;
          }
      }
}

// Without every rank's buffers (a rank of the runtime in its own process),
// a rank with direct steps is refused when it is made, naming why.
TEST(DirectSteps, RankRunnerWithoutPeersRefusesThem) {
  Plan plan = planOf(coll::testing::peerOneShotAllReduce(2));
  host::Doorbell bell;
  host::LocalStop stop({&bell});
  auto runner = host::RankRunner::create(plan, 0, {}, bell, stop, host::RankOptions{});
  ASSERT_FALSE(static_cast<bool>(runner));
  std::string message = llvm::toString(runner.takeError());
  EXPECT_NE(message.find("rank 0 has direct steps"), std::string::npos) << message;
  EXPECT_NE(message.find("no table of its peers' buffers and signals"), std::string::npos) << message;
}

} // namespace
