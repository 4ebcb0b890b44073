//===- RunTest.cpp - Compiled programs run on the host interpreter --------===//
//
// Every program is compiled at several rank counts, with 1 and 2 instances
// and each protocol, and run on the host backend in each mode the compiler
// declared, with tiny FIFO slots (many pipeline iterations, FIFOs that
// wrap) and element counts that do not divide evenly. CheckedCall compares
// every output element with the collective's definition; a custom
// collective is compared with its own postcondition here.
//
//===----------------------------------------------------------------------===//

#include "CompilerTest.h"
#include "TestPrograms.h"
#include "TimeScale.h"

#include "coll/interpreter/HostExecutor.h"
#include "coll/interpreter/Plan.h"
#include "coll/ir/Geometry.h"
#include "coll/ir/Verifier.h"

#include "llvm/ADT/STLExtras.h"

#include <map>
#include <set>

using namespace coll;
using namespace coll::compiler;
using namespace coll::compiler::test;

namespace {

struct Program {
  const char *name;
  const char *source; ///< with `param N`
  std::vector<int> ranks;
};

const std::string DirectTwoShot = coll::test::directTwoShotProgram(4);
const std::string DirectPutRing = coll::test::directPutRingProgram(4);

const Program Programs[] = {
    {"ring_allreduce",
     R"(
param N = 4
collective allreduce(ranks = N, chunks = N, inplace = true)
for r in 0..N {
    let c = chunk(r, input, r)
    for k in 1..N { c = chunk((r + k) % N, input, r).reduce(c) }
    for k in 0..N-1 { c = c.copy((r + k) % N, input, r) }
}
)",
     {2, 3, 8}},
    {"ring_allreduce_parallel",
     R"(
param N = 4
collective allreduce(ranks = N, chunks = N, inplace = true)
parallelize(2) {
    for r in 0..N {
        let c = chunk(r, input, r)
        for k in 1..N { c = chunk((r + k) % N, input, r).reduce(c) }
        for k in 0..N-1 { c = c.copy((r + k) % N, input, r) }
    }
}
)",
     {2, 4}},
    {"allpairs_allreduce",
     R"(
param N = 4
collective allreduce(ranks = N, chunks = N, inplace = true)
for r in 0..N { for p in 0..N { if p != r { chunk(p, input, r).copy(r, scratch, p) } } }
for r in 0..N { for p in 0..N { if p != r { chunk(r, input, r).reduce(chunk(r, scratch, p)) } } }
for r in 0..N { for p in 0..N { if p != r { chunk(r, input, r).copy(p, input, r) } } }
)",
     {2, 3, 5}},
    {"allpairs_allreduce_outofplace",
     R"(
param N = 4
collective allreduce(ranks = N, chunks = N)
for r in 0..N { chunk(r, input, r).copy(r, output, r) }
for r in 0..N { for p in 0..N { if p != r { chunk(p, input, r).copy(r, scratch, p) } } }
for r in 0..N { for p in 0..N { if p != r { chunk(r, output, r).reduce(chunk(r, scratch, p)) } } }
for r in 0..N { for p in 0..N { if p != r { chunk(r, output, r).copy(p, output, r) } } }
)",
     {2, 4}},
    {"ring_allgather",
     R"(
param N = 4
collective allgather(ranks = N, chunks = 2)
for r in 0..N {
    let c = chunk(r, input, 0, size = 2).copy(r, output, 2 * r)
    for k in 1..N { c = c.copy((r + k) % N, output, 2 * r) }
}
)",
     {2, 3, 6}},
    {"ring_reducescatter",
     R"(
param N = 4
collective reducescatter(ranks = N, chunks = 1, inplace = true)
for c in 0..N {
    let acc = chunk((c + 1) % N, input, c)
    for k in 2..N+1 { acc = chunk((c + k) % N, input, c).reduce(acc) }
}
)",
     {2, 3, 5}},
    {"ring_reducescatter_outofplace",
     R"(
param N = 4
collective reducescatter(ranks = N, chunks = 1)
for c in 0..N {
    let acc = chunk((c + 1) % N, input, c)
    for k in 2..N {
        let r = (c + k) % N
        acc = chunk(r, input, c).copy(r, scratch, c).reduce(acc)
    }
    chunk(c, input, c).copy(c, output, 0).reduce(acc)
}
)",
     {2, 4}},
    {"allpairs_alltoall",
     R"(
param N = 4
collective alltoall(ranks = N, chunks = 1)
for src in 0..N {
    for dst in 0..N { chunk(src, input, dst).copy(dst, output, src, ch = (dst - src) % N) }
}
)",
     {2, 3, 8}},
    {"chain_broadcast",
     R"(
param N = 4
param Root = N - 1
collective broadcast(ranks = N, chunks = 4, root = Root)
fn next(r) { return (r + 1) % N }
for part in chunk(Root, input, 0, size = 4).split(2) {
    let c = part.copy(Root, output, part.index)
    for hop in 1..N { c = c.copy(next(c.rank), output, c.index) }
}
)",
     {2, 3, 5}},
    {"chain_reduce",
     R"(
param N = 4
param Root = 1
collective reduce(ranks = N, chunks = 3, root = Root, inplace = true)
for j in 0..3 {
    let acc = chunk((Root + 1) % N, input, j)
    for k in 2..N+1 { acc = chunk((Root + k) % N, input, j).reduce(acc) }
}
)",
     {2, 4}},
    {"direct_gather",
     R"(
param N = 4
collective gather(ranks = N, chunks = 1, root = N / 2)
for r in 0..N { chunk(r, input, 0).copy(N / 2, output, r) }
)",
     {2, 3, 6}},
    {"direct_scatter",
     R"(
param N = 4
collective scatter(ranks = N, chunks = 2, root = 0)
for r in 0..N { chunk(0, input, 2 * r, size = 2).copy(r, output, 0) }
)",
     {2, 3, 6}},
    {"hierarchical_alltoall",
     R"(
param N = 4
param L = 2
collective alltoall(ranks = N, chunks = 1)
fn group(r) { return r / L }
fn local(r) { return r % L }
for src in 0..N {
    for dst in 0..N {
        let c = chunk(src, input, dst)
        let gate = group(c.dest_rank) * L + local(src)
        if gate != src { c = c.copy(gate, scratch, src) }
        c.copy(c.dest_rank, output, c.dest_index)
    }
}
)",
     {4, 6, 8}},
    // Direct operations (put, get, get_reduce): the compiler adds the
    // signals and waits.
    {"direct_twoshot_allreduce", DirectTwoShot.c_str(), {2, 3, 8}},
    {"direct_oneshot_allreduce",
     R"(
param N = 4
collective allreduce(ranks = N, chunks = 1)
for r in 0..N {
    // Every rank adds the inputs in rank order: bit-identical results.
    let acc = chunk(r, output, 0)
    if r == 0 { chunk(0, input, 0).copy(0, output, 0) } else { acc.get(chunk(0, input, 0)) }
    for p in 1..N { if p != r { acc.get_reduce(chunk(p, input, 0)) } else { acc.reduce(chunk(r, input, 0)) } }
}
)",
     {2, 4}},
    {"direct_put_ring_allreduce", DirectPutRing.c_str(), {2, 3, 5}},
    {"direct_get_allgather",
     R"(
param N = 4
collective allgather(ranks = N, chunks = 2)
for r in 0..N {
    for a in 0..N {
        if a == r { chunk(r, input, 0, size = 2).copy(r, output, 2 * r) }
        else { chunk(r, output, 2 * a, size = 2).get(chunk(a, input, 0, size = 2)) }
    }
}
)",
     {2, 3, 6}},
    {"direct_put_alltoall",
     R"(
param N = 4
collective alltoall(ranks = N, chunks = 1)
for s in 0..N {
    for d in 0..N {
        if s == d { chunk(s, input, d).copy(d, output, s) }
        else { chunk(s, input, d).put(d, output, s) }
    }
}
)",
     {2, 3, 8}},
    {"direct_get_broadcast",
     R"(
param N = 4
collective broadcast(ranks = N, chunks = 2, root = 1)
let root = chunk(1, input, 0, size = 2).copy(1, output, 0)
for r in 0..N { if r != 1 { chunk(r, output, 0, size = 2).get(root) } }
)",
     {2, 3, 5}},
    {"ring_reduce_then_put_allgather",
     R"(
param N = 4
collective allreduce(ranks = N, chunks = N, inplace = true)
for r in 0..N {
    let c = chunk(r, input, r)
    for k in 1..N { c = chunk((r + k) % N, input, r).reduce(c) }
    for p in 0..N { if p != c.rank { c.put(p, input, r) } }
}
)",
     {2, 3, 5}},
};

/// The direct two-shot as algorithms/allreduce_twoshot_direct.coll places
/// it (in place): every get_reduce into chunk r on tb 0, each peer's
/// signals on a channel of its own, so that its waits are on a tb of its own.
const char *const PerPeerTwoShot = R"(
param N = 4
collective allreduce(ranks = N, chunks = N, inplace = true)
for r in 0..N {
    for p in 0..N {
        if p != r { chunk(r, input, r).get_reduce(chunk(p, input, r), ch = (p - r + N) % N, tb = 0) }
    }
}
for r in 0..N {
    for p in 0..N {
        if p != r {
            let d = (p - r + N) % N
            chunk(r, input, r).put(p, input, r, ch = d, tb = d)
        }
    }
}
)";

/// A custom collective: rank r's output block a is rank a's input.
const char *const CustomAllGather = R"(
param N = 2
collective custom(ranks = N, input = 2, output = 2 * N) {
    post { for r in 0..N { for a in 0..N { for j in 0..2 { expect(r, a*2 + j, contrib(a, j)) } } } }
}
for r in 0..N {
    for a in 0..N { chunk(a, input, 0, size = 2).copy(r, output, 2 * a) }
}
)";

interp::HostOptions tinySlots(ir::Protocol proto) {
  interp::HostOptions options;
  options.watchdogMs = uint32_t(coll::testing::scaledMs(20000));
  options.simpleSlotBytes = 64;
  options.llSlotBytes = 24;
  options.ll128SlotBytes = 248;
  return options;
}

std::vector<uint64_t> counts() {
  if (COLL_TEST_SANITIZER)
    return {77};
  return {1, 77, 1000};
}

class RunProgram : public ::testing::TestWithParam<Program> {};

TEST_P(RunProgram, VerifiesInEveryDeclaredMode) {
  const Program &program = GetParam();
  for (int n : program.ranks) {
    if (COLL_TEST_SANITIZER && n > 4)
      continue;
    for (int32_t instances : {1, 2}) {
      for (ir::Protocol proto :
           {ir::Protocol::Simple, ir::Protocol::LL, ir::Protocol::LL128}) {
        Config setup;
        setup.overrides.params["N"] = int64_t(n);
        setup.edit = [&](lang::ChunkDag &dag) {
          dag.options.instances = instances;
          dag.options.protocol = proto;
        };
        Compilation c(program.source, setup);
        std::string what = std::string(program.name) +
                           " N=" + std::to_string(n) +
                           " instances=" + std::to_string(instances) + " " +
                           ir::protocolName(proto).str();
        ASSERT_TRUE(c.ok()) << what << "\n" << c.text();
        for (bool inplace : {false, true}) {
          if (inplace ? !c.alg().inplace : !c.alg().outofplace)
            continue;
          for (uint64_t count : counts()) {
            auto result = coll::testing::runChecked(
                c.alg(), interp::DataType::Float32, interp::ReduceOp::Sum,
                count, inplace, tinySlots(proto));
            std::string where = what +
                                (inplace ? " in place" : " out of place") +
                                " count=" + std::to_string(count);
            ASSERT_TRUE(static_cast<bool>(result))
                << where << ": " << llvm::toString(result.takeError());
            EXPECT_EQ(result->wrong, 0u) << where << ": " << result->firstWrong;
            EXPECT_GT(result->checked, 0u) << where;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Programs, RunProgram, ::testing::ValuesIn(Programs),
                         [](const auto &info) {
                           return std::string(info.param.name);
                         });

/// The programs of the collc golden tests that implement built-in
/// collectives, compiled at their default parameters.
TEST(RunLitInputs, VerifyInEveryDeclaredMode) {
  for (const char *name :
       {"ring-allreduce", "alltoall-allpairs", "broadcast-chain",
        "hierarchical-alltoall", "allpairs-allreduce", "manual-exchange",
        "aggregated-broadcast"}) {
    std::string path = std::string(COLL_LIT_INPUTS_DIR) + "/" + name + ".coll";
    auto file = llvm::MemoryBuffer::getFile(path);
    ASSERT_TRUE(file) << path;
    Compilation c((*file)->getBuffer());
    ASSERT_TRUE(c.ok()) << name << "\n" << c.text();
    for (bool inplace : {false, true}) {
      if (inplace ? !c.alg().inplace : !c.alg().outofplace)
        continue;
      for (uint64_t count : counts()) {
        auto result = coll::testing::runChecked(
            c.alg(), interp::DataType::Float32, interp::ReduceOp::Sum, count,
            inplace, tinySlots(c.alg().protocol));
        std::string where = std::string(name) +
                            (inplace ? " in place" : " out of place") +
                            " count=" + std::to_string(count);
        ASSERT_TRUE(static_cast<bool>(result))
            << where << ": " << llvm::toString(result.takeError());
        EXPECT_EQ(result->wrong, 0u) << where << ": " << result->firstWrong;
      }
    }
  }
}

/// The plan of a compiled program, or why there is none.
llvm::Expected<interp::Plan> planOf(const ir::Algorithm &alg) {
  ir::DiagnosticList diags("<test>");
  auto analysis = ir::verify(alg, diags);
  if (!analysis)
    return analysis.takeError();
  return interp::buildPlan(alg, *analysis, "<test>");
}

// Consecutive get_reduce steps into one chunk fuse into one step of the
// plan, each source its own peer's (interp/Plan.h): their dependencies are
// waits on n-1 different tbs, so the fused step waits for the last one's
// behind a nop for each other, and the tb keeps no more steps than the IR
// has. The fused plan computes the allreduce, and damaged peer lists are
// refused.
TEST(RunPlan, GetReduceStepsFuseAcrossPeers) {
  for (int n : {3, 5}) {
    Config setup;
    setup.overrides.params["N"] = int64_t(n);
    Compilation c(PerPeerTwoShot, setup);
    ASSERT_TRUE(c.ok()) << c.text();
    const ir::Algorithm &alg = c.alg();
    auto built = planOf(alg);
    ASSERT_TRUE(static_cast<bool>(built)) << llvm::toString(built.takeError());
    const interp::Plan &plan = *built;
    ASSERT_EQ(plan.stepPeers.size(), plan.steps.size());
    for (int r = 0; r < n; ++r) {
      int fused = 0;
      for (int32_t t = plan.rankTbBegin[r]; t < plan.rankTbBegin[r + 1]; ++t) {
        const interp::PlanTb &tb = plan.tbs[t];
        EXPECT_LE(tb.nSteps, int32_t(alg.gpus[r].tbs[tb.tb].steps.size()));
        for (int32_t i = 0; i < tb.nSteps; ++i) {
          const interp::PlanStep &step = plan.steps[tb.stepBegin + i];
          if (step.type != interp::StepKind::GetReduce)
            continue;
          ++fused;
          ASSERT_EQ(step.nsrc, n - 1) << "rank " << r;
          const interp::PlanStepPeer d = plan.stepPeers[tb.stepBegin + i];
          ASSERT_GE(d.members, 0);
          std::vector<int32_t> peers(plan.memberPeers.begin() + d.members,
                                     plan.memberPeers.begin() + d.members + step.nsrc);
          EXPECT_EQ(peers.front(), d.peer);
          llvm::sort(peers);
          std::vector<int32_t> others;
          for (int p = 0; p < n; ++p)
            if (p != r)
              others.push_back(p);
          EXPECT_EQ(peers, others) << "rank " << r;
          // It waits for every member's wait, on tbs of their own (the
          // nops the plan builds for all but the last member's join it:
          // interp/Plan.h, "Dependencies").
          std::set<int32_t> waited;
          for (int32_t k = 0; k <= i; ++k) {
            const interp::PlanStep &s = plan.steps[tb.stepBegin + k];
            if (k < i && s.type != interp::StepKind::Nop)
              continue;
            for (const interp::PlanDep &d : plan.dependencies(s))
              waited.insert(d.tb);
          }
          EXPECT_EQ(waited.size(), size_t(n - 1)) << "rank " << r;
        }
      }
      EXPECT_EQ(fused, 1) << "rank " << r;
    }
    EXPECT_FALSE(static_cast<bool>(interp::checkPlanIndices(plan)));
    interp::Plan one = interp::slicePlan(plan, 1);
    EXPECT_EQ(one.memberPeers, plan.memberPeers);
    EXPECT_FALSE(static_cast<bool>(interp::checkPlanIndices(one)));
    for (size_t k = 0; k < plan.memberPeers.size(); ++k) {
      interp::Plan damaged = plan;
      damaged.memberPeers[k] = n; // out of range
      llvm::Error err = interp::checkPlanIndices(damaged);
      EXPECT_TRUE(static_cast<bool>(err)) << "member " << k;
      llvm::consumeError(std::move(err));
    }
    for (uint64_t count : counts()) {
      auto result = coll::testing::runChecked(alg, interp::DataType::Float32,
                                              interp::ReduceOp::Sum, count, true,
                                              tinySlots(alg.protocol));
      ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
      EXPECT_EQ(result->wrong, 0u) << "n=" << n << " count=" << count << ": "
                                   << result->firstWrong;
    }
  }
}

TEST(RunCustom, OutputHoldsWhatThePostconditionSays) {
  for (int n : {2, 3}) {
    for (int32_t instances : {1, 2}) {
      Config setup;
      setup.overrides.params["N"] = int64_t(n);
      setup.edit = [&](lang::ChunkDag &dag) {
        dag.options.instances = instances;
      };
      Compilation c(CustomAllGather, setup);
      ASSERT_TRUE(c.ok()) << c.text();
      const ir::Algorithm &alg = c.alg();
      ir::DiagnosticList diags("<test>");
      auto analysis = ir::verify(alg, diags);
      ASSERT_TRUE(static_cast<bool>(analysis))
          << llvm::toString(analysis.takeError());
      auto plan = interp::buildPlan(alg, *analysis, "<test>");
      ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
      ir::BlockShape shape = plan->shape;
      auto executor = interp::HostExecutor::create(std::move(*plan),
                                                   tinySlots(alg.protocol));
      ASSERT_TRUE(static_cast<bool>(executor))
          << llvm::toString(executor.takeError());
      // Output chunk 2a+j has the class of input chunk j only when all
      // chunks have one size: a count the chunks divide.
      uint64_t count = 8 * alg.nchunksPerLoop;
      ir::ChunkLayout layout(shape, count);
      std::vector<std::vector<float>> in(n, std::vector<float>(count)),
          out(n, std::vector<float>(count, -1));
      interp::CallArgs args;
      args.count = count;
      for (int r = 0; r < n; ++r) {
        for (uint64_t i = 0; i < count; ++i)
          in[r][i] = float(r * 100000 + i);
        args.input.push_back(in[r].data());
        args.output.push_back(out[r].data());
      }
      auto result = (*executor)->run(args);
      ASSERT_TRUE(static_cast<bool>(result))
          << llvm::toString(result.takeError());
      int32_t r2 = c.schedule->refinement;
      for (int r = 0; r < n; ++r)
        for (int a = 0; a < n; ++a)
          for (int32_t j = 0; j < 2 * r2; ++j) {
            uint64_t from = layout.chunkOffset(ir::BufferKind::Input, j);
            uint64_t to =
                layout.chunkOffset(ir::BufferKind::Output, 2 * a * r2 + j);
            for (uint64_t e = 0; e < layout.chunkSize(ir::BufferKind::Input, j);
                 ++e)
              ASSERT_EQ(out[r][to + e], in[a][from + e])
                  << "n=" << n << " instances=" << instances << " rank " << r
                  << " block " << a << " chunk " << j;
          }
    }
  }
}

} // namespace

// Signals and waits in one step (interp/Plan.h; docs/COMPILER.md,
// "Signals"): the built-in direct programs put every signal on channel 0,
// so one tb per rank raises and waits for them, and the compiler lines its
// runs up so that each is one step of the plan, with a member per peer.
// Per rank: every peer's start and end signal and wait, each once, in the
// pinned number of fused steps; the plan checks, and the program computes
// its collective.
TEST(RunPlan, SignalsAndWaitsFuseInTheBuiltInDirectPrograms) {
  struct Case {
    const char *name;
    /// Per rank, at 4 and 8 ranks, at most: reducescatter_direct's list
    /// schedule places one end wait among the end signals on every rank
    /// but the last (4 steps there), which parts that run in two.
    int syncSteps;
  };
  for (const Case &k : {Case{"allgather_direct", 4}, Case{"allreduce_twoshot_direct", 4},
                        Case{"reducescatter_direct", 6}}) {
    auto file = llvm::MemoryBuffer::getFile(std::string(COLL_ALGORITHMS_DIR) + "/" + k.name +
                                            ".coll");
    ASSERT_TRUE(static_cast<bool>(file)) << k.name;
    for (int n : {4, 8}) {
      const std::string where = std::string(k.name) + " N=" + std::to_string(n);
      Config setup;
      setup.overrides.params["N"] = int64_t(n);
      Compilation c((*file)->getBuffer().str(), setup);
      ASSERT_TRUE(c.ok()) << where << "\n" << c.text();
      const ir::Algorithm &alg = c.alg();
      auto built = planOf(alg);
      ASSERT_TRUE(static_cast<bool>(built)) << where << ": " << llvm::toString(built.takeError());
      const interp::Plan &plan = *built;
      EXPECT_FALSE(static_cast<bool>(interp::checkPlanIndices(plan))) << where;
      for (int r = 0; r < n; ++r) {
        std::set<int32_t> syncTbs;
        int syncSteps = 0;
        // Per kind (signal, wait): the peers of its members, in step order.
        std::map<interp::StepKind, std::vector<int32_t>> members;
        for (int32_t t = plan.rankTbBegin[r]; t < plan.rankTbBegin[r + 1]; ++t)
          for (int32_t i = 0; i < plan.tbs[t].nSteps; ++i) {
            const size_t at = size_t(plan.tbs[t].stepBegin + i);
            const interp::PlanStep &step = plan.steps[at];
            if (step.type != interp::StepKind::Signal && step.type != interp::StepKind::Wait)
              continue;
            syncTbs.insert(t);
            ++syncSteps;
            const interp::PlanStepPeer d = plan.stepPeers[at];
            for (int32_t m = 0; m < step.nsrc; ++m)
              members[step.type].push_back(m == 0 ? d.peer : plan.memberPeers[d.members + m]);
            EXPECT_EQ(plan.stepSignals(at).size(), size_t(step.nsrc)) << where;
          }
        EXPECT_EQ(syncTbs.size(), 1u) << where << " rank " << r;
        EXPECT_LE(syncSteps, k.syncSteps) << where << " rank " << r;
        EXPECT_GE(syncSteps, 4) << where << " rank " << r;
        // Every peer's start, and its end unless pruneSignals found the pair
        // implied (reducescatter_direct's, once the waits moved).
        for (auto kind : {interp::StepKind::Signal, interp::StepKind::Wait})
          for (int p = 0; p < n; ++p) {
            const auto times = llvm::count(members[kind], p);
            if (p == r)
              EXPECT_EQ(times, 0) << where << " rank " << r;
            else
              EXPECT_TRUE(times == 2 || (times == 1 && k.syncSteps > 4))
                  << where << " rank " << r << " peer " << p << ": " << times;
          }
      }
      for (bool inplace : {false, true}) {
        if (inplace ? !alg.inplace : !alg.outofplace)
          continue;
        auto result = coll::testing::runChecked(alg, interp::DataType::Float32,
                                                interp::ReduceOp::Sum, 1000, inplace,
                                                interp::HostOptions{});
        ASSERT_TRUE(static_cast<bool>(result)) << where << ": " << llvm::toString(result.takeError());
        EXPECT_EQ(result->wrong, 0u) << where << ": " << result->firstWrong;
      }
    }
  }
}

// The same programs with each peer's signals on a channel of their own
// (its distance), as they were written before: a tb per peer's signals.
// The passes that line up runs must leave no nop at a tb's end that
// nothing waits for, which the IR's contract refuses (an internal error at
// 5 and 8 ranks once), and the program still computes its collective.
TEST(RunPlan, SignalsOnAChannelPerPeerStillCompile) {
  for (const char *name : {"allgather_direct", "allreduce_twoshot_direct", "reducescatter_direct"}) {
    auto file =
        llvm::MemoryBuffer::getFile(std::string(COLL_ALGORITHMS_DIR) + "/" + name + ".coll");
    ASSERT_TRUE(static_cast<bool>(file)) << name;
    std::string source = (*file)->getBuffer().str();
    for (const char *op : {".put(p, output, ", ".get_reduce(chunk(p, input, "}) {
      // The operation's closing ", tb = " gains the channel before it.
      for (size_t at = source.find(op); at != std::string::npos; at = source.find(op, at + 1)) {
        size_t tb = source.find(", tb = ", at);
        ASSERT_NE(tb, std::string::npos) << name;
        source.insert(tb, ", ch = (p - r + N) % N");
      }
    }
    ASSERT_NE(source.find("ch = (p - r + N) % N"), std::string::npos) << name;
    for (int n : {5, 8}) {
      const std::string where = std::string(name) + " N=" + std::to_string(n);
      Config setup;
      setup.overrides.params["N"] = int64_t(n);
      Compilation c(source, setup);
      ASSERT_TRUE(c.ok()) << where << "\n" << c.text();
      auto result = coll::testing::runChecked(c.alg(), interp::DataType::Float32,
                                              interp::ReduceOp::Sum, 1000, !c.alg().outofplace,
                                              interp::HostOptions{});
      ASSERT_TRUE(static_cast<bool>(result)) << where << ": " << llvm::toString(result.takeError());
      EXPECT_EQ(result->wrong, 0u) << where << ": " << result->firstWrong;
    }
  }
}
