//===- HostExecutorTest.cpp - The host backend on hand-made algorithms ----===//

#include "TestAlgorithms.h"
#include "TimeScale.h"

#include "coll/interpreter/Check.h"
#include "coll/interpreter/HostExecutor.h"
#include "coll/interpreter/host/Connection.h"
#include "coll/interpreter/host/Data.h"
#include "coll/interpreter/Plan.h"
#include "coll/interpreter/ReduceOps.h"
#include "coll/ir/Verifier.h"

#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

using namespace coll;
using namespace coll::interp;
using coll::testing::runChecked;

namespace {

std::string protoName(ir::Protocol p) { return ir::protocolName(p).str(); }

/// Runs `alg` and expects every element right; `what` names the case.
void expectVerified(const ir::Algorithm &alg, DataType type, ReduceOp op, uint64_t count,
                    bool inplace, const HostOptions &options, const std::string &what) {
  auto result = runChecked(alg, type, op, count, inplace, options);
  ASSERT_TRUE(static_cast<bool>(result)) << what << ": " << llvm::toString(result.takeError());
  EXPECT_EQ(result->wrong, 0u) << what << ": " << result->firstWrong;
  EXPECT_GT(result->checked, 0u) << what;
}

// Every algorithm x protocol x a spread of sizes, in each mode it supports:
// sizes from one element (below one LL line) to several pipeline iterations;
// tiny FIFO slots make small sizes take many iterations and wrap the FIFOs.
using coll::testing::MatrixCase;

class AlgorithmMatrix : public ::testing::TestWithParam<MatrixCase> {};

TEST_P(AlgorithmMatrix, EveryAlgorithmVerifies) {
  MatrixCase param = GetParam();
  HostOptions options;
  options.watchdogMs = uint32_t(coll::testing::scaledMs(20000));
  if (param.slotBytes)
    options.simpleSlotBytes = options.llSlotBytes = options.ll128SlotBytes = param.slotBytes;
  for (int n : {2, 4}) {
    for (auto &[name, alg] : coll::testing::allTestAlgorithms(n, param.proto)) {
      for (uint64_t count : {1ull, 7ull, 100ull, 1001ull}) {
        for (bool inplace : {false, true}) {
          if (inplace ? !alg.inplace : !alg.outofplace)
            continue;
          std::string what = name + " n=" + std::to_string(n) + " " + protoName(param.proto) +
                             " count=" + std::to_string(count) +
                             (inplace ? " in-place" : " out-of-place");
          expectVerified(alg, DataType::Float32, ReduceOp::Sum, count, inplace, options, what);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Protocols, AlgorithmMatrix,
    ::testing::ValuesIn(coll::testing::protocolMatrix()),
    [](const auto &info) { return coll::testing::matrixCaseName(info.param); });

// host::data::reduceInto folds its sources into dst in order, bit for bit
// as the definition reads (the GPU's transform folds alike), with 1 to 9
// sources apart from dst (the passes of up to four) and with one source
// that is dst itself (the blocks); fp32 values whose sums round
// differently in another order.
// One default for every backend (the CUDA backend's was 10 s, the host's
// 30 s): an option, else COLL_WATCHDOG_MS, else DefaultWatchdogMs.
TEST(Watchdog, PeriodComesFromOptionThenEnvironmentThenTheOneDefault) {
  const char *saved = std::getenv("COLL_WATCHDOG_MS");
  std::string restore = saved ? saved : "";
  unsetenv("COLL_WATCHDOG_MS");
  EXPECT_EQ(DefaultWatchdogMs, 30000u);
  EXPECT_EQ(watchdogFromEnv(0), DefaultWatchdogMs);
  setenv("COLL_WATCHDOG_MS", "250", 1);
  EXPECT_EQ(watchdogFromEnv(0), 250u);
  EXPECT_EQ(watchdogFromEnv(40), 40u);
  for (const char *bad : {"soon", "0", "-5", "12ms", "2147483648"}) {
    setenv("COLL_WATCHDOG_MS", bad, 1);
    EXPECT_EQ(watchdogFromEnv(0), DefaultWatchdogMs) << bad;
  }
  if (saved)
    setenv("COLL_WATCHDOG_MS", restore.c_str(), 1);
  else
    unsetenv("COLL_WATCHDOG_MS");
}

TEST(HostData, ReduceIntoFoldsInOrder) {
  const uint64_t n = 1037;
  for (int nsrc = 1; nsrc <= 9; ++nsrc)
    for (int selfAt = -1; selfAt < nsrc; ++selfAt) {
      std::vector<std::vector<float>> src(static_cast<size_t>(nsrc), std::vector<float>(n));
      std::vector<float> dst(n), want(n);
      for (uint64_t i = 0; i < n; ++i) {
        dst[i] = 1.0f + float(i % 13) * 1e-7f;
        for (int r = 0; r < nsrc; ++r)
          src[r][i] = (r % 2 ? 3e7f : 1.0f) * float(1 + (i + r) % 7) + 0.25f * float(r);
      }
      std::vector<const float *> srcs;
      for (int r = 0; r < nsrc; ++r)
        srcs.push_back(r == selfAt ? dst.data() : src[r].data());
      for (uint64_t i = 0; i < n; ++i) {
        float acc = dst[i];
        for (int r = 0; r < nsrc; ++r)
          acc = OpSum<float>{}(srcs[r][i], acc);
        want[i] = acc;
      }
      host::data::reduceInto(dst.data(), srcs.data(), nsrc, n, OpSum<float>{});
      for (uint64_t i = 0; i < n; ++i)
        ASSERT_EQ(dst[i], want[i]) << nsrc << " sources, dst at " << selfAt << ", element " << i;
    }
}

TEST(HostExecutor, EveryTypeAndOperator) {
  HostOptions options;
  options.llSlotBytes = 40; // several iterations even for small counts
  ir::Algorithm ring = coll::testing::ringAllReduce(3, ir::Protocol::LL);
  ir::Algorithm pairs = coll::testing::allPairsAllReduce(5, ir::Protocol::Simple);
  ir::Algorithm scatter = coll::testing::ringReduceScatter(4, ir::Protocol::LL128);
  for (int t = 0; t <= static_cast<int>(DataType::Float64); ++t) {
    for (int o = 0; o <= static_cast<int>(ReduceOp::Avg); ++o) {
      auto type = static_cast<DataType>(t);
      auto op = static_cast<ReduceOp>(o);
      std::string what = dataTypeName(type).str() + " " + reduceOpName(op).str();
      expectVerified(ring, type, op, 37, false, options, "ring " + what);
      expectVerified(pairs, type, op, 37, true, options, "allpairs " + what);
      expectVerified(scatter, type, op, 11, false, options, "reducescatter " + what);
    }
  }
}

TEST(HostExecutor, ManyRanks) {
  HostOptions options;
  options.simpleSlotBytes = 256;
  expectVerified(coll::testing::ringAllReduce(8, ir::Protocol::Simple), DataType::Int32,
                 ReduceOp::Sum, 4099, true, options, "ring n=8");
  expectVerified(coll::testing::allPairsAllReduce(8, ir::Protocol::LL), DataType::Float16,
                 ReduceOp::Max, 999, false, options, "allpairs n=8");
}

// HostOptions::fifoBudgetBytes: the default slots halve until the plan's
// FIFOs fit; given slots and a budget of 0 are kept.
TEST(HostExecutor, ManyConnectionsShrinkTheDefaultSlotsToTheBudget) {
  HostOptions options;
  const uint64_t simple = options.simpleSlotBytes;
  EXPECT_EQ(budgetedSlotBytes(options, ir::Protocol::Simple, 16), simple);
  EXPECT_EQ(budgetedSlotBytes(options, ir::Protocol::Simple, 0), simple);
  // The 1024-rank double binary tree's 5114 connections: 128 MiB / 5114 is
  // about 25.6 KiB per connection, which 8 slots of 2 KiB and the control
  // block fit and 8 of 4 KiB do not.
  EXPECT_EQ(budgetedSlotBytes(options, ir::Protocol::Simple, 5114), 2048u);
  for (ir::Protocol proto : {ir::Protocol::Simple, ir::Protocol::LL, ir::Protocol::LL128}) {
    for (uint64_t conns : {1ull, 100ull, 1000ull, 5114ull, 100000ull, 10000000ull}) {
      const uint64_t slot = budgetedSlotBytes(options, proto, conns);
      SCOPED_TRACE(protoName(proto) + " connections=" + std::to_string(conns));
      EXPECT_EQ(slot % 8, 0u);
      EXPECT_LE(slot, options.slotBytes(proto));
      auto shape = host::FifoShape::of(proto, slot);
      ASSERT_TRUE(static_cast<bool>(shape)) << llvm::toString(shape.takeError());
      // Within the budget, or at the smallest slot the budget allows.
      if (slot >= 2 * MinBudgetSlotBytes) {
        EXPECT_LE(shape->totalBytes() * conns, options.fifoBudgetBytes);
      }
      // The largest that fits: twice the slot would not (or is the default).
      if (slot < options.slotBytes(proto)) {
        auto twice = host::FifoShape::of(proto, 2 * slot);
        ASSERT_TRUE(static_cast<bool>(twice));
        EXPECT_GT(twice->totalBytes() * conns, options.fifoBudgetBytes);
      }
    }
  }
  EXPECT_GE(budgetedSlotBytes(options, ir::Protocol::LL, 10000000), MinBudgetSlotBytes);
  HostOptions given = options;
  given.setSlotBytes(64 << 10);
  EXPECT_EQ(budgetedSlotBytes(given, ir::Protocol::Simple, 5114), 64u << 10);
  HostOptions unlimited = options;
  unlimited.fifoBudgetBytes = 0;
  EXPECT_EQ(budgetedSlotBytes(unlimited, ir::Protocol::Simple, 5114), simple);
  // A slot FifoShape refuses is left for the executor to report.
  HostOptions bad = options;
  bad.simpleSlotBytes = 100;
  EXPECT_EQ(budgetedSlotBytes(bad, ir::Protocol::Simple, 5114), 100u);
}

/// An executor for `alg`; a broken test fixture stops the test binary.
std::unique_ptr<HostExecutor> makeExecutor(const ir::Algorithm &alg, const HostOptions &options) {
  ir::DiagnosticList diags("<test>");
  auto analysis = ir::verify(alg, diags);
  if (!analysis)
    llvm::report_fatal_error(llvm::Twine("fixture does not verify: ") +
                             llvm::toString(analysis.takeError()));
  auto plan = buildPlan(alg, *analysis, "<test>");
  if (!plan)
    llvm::report_fatal_error(llvm::Twine("fixture does not plan: ") +
                             llvm::toString(plan.takeError()));
  auto executor = HostExecutor::create(std::move(*plan), options);
  if (!executor)
    llvm::report_fatal_error(llvm::Twine("cannot create executor: ") +
                             llvm::toString(executor.takeError()));
  return std::move(*executor);
}

// A plan whose FIFOs do not fit the budget at the default slot runs with
// the smaller slot, in more pipeline iterations, and computes the same.
TEST(HostExecutor, ABudgetedPlanRunsWithItsSmallerSlots) {
  for (ir::Protocol proto : {ir::Protocol::Simple, ir::Protocol::LL, ir::Protocol::LL128}) {
    SCOPED_TRACE(protoName(proto));
    ir::Algorithm pairs = coll::testing::allPairsAllReduce(6, proto);
    HostOptions options;
    options.fifoBudgetBytes = 30 * 16384; // 30 connections: about 2 KiB slots
    auto executor = makeExecutor(pairs, options);
    const uint64_t conns = executor->plan().connections.size();
    const uint64_t slot = budgetedSlotBytes(options, proto, conns);
    EXPECT_LT(slot, options.slotBytes(proto));
    EXPECT_EQ(executor->sliceElems(DataType::Float32), slot / 4);
    // Several iterations of the smaller slot.
    const uint64_t count = 6 * (3 * slot / 4 + 5);
    expectVerified(pairs, DataType::Float32, ReduceOp::Sum, count, false, options,
                   "budgeted out-of-place");
    expectVerified(pairs, DataType::Float32, ReduceOp::Sum, count, true, options,
                   "budgeted in-place");
  }
}

// Calls of several shapes on one executor, with slots so small that the
// FIFOs wrap within a call and stop at different places between calls
// (Simple connections start again at slot 0 each call; LL and LL128 go on
// through their slots).
TEST(HostExecutor, ReusedAcrossCallsOfDifferentShapes) {
  HostOptions options;
  options.simpleSlotBytes = 40;
  options.llSlotBytes = 48;
  options.ll128SlotBytes = 120 * 2;
  for (ir::Protocol proto : {ir::Protocol::Simple, ir::Protocol::LL, ir::Protocol::LL128}) {
    ir::Algorithm alg = coll::testing::ringAllReduce(4, proto, 2);
    auto executor = makeExecutor(alg, options);
    CollectiveDesc desc = CollectiveDesc::of(executor->plan());
    struct Call {
      DataType type;
      uint64_t count;
      bool inplace;
    };
    for (Call c : {Call{DataType::Float32, 5, false}, Call{DataType::Uint8, 1000, true},
                   Call{DataType::Float64, 333, false}, Call{DataType::Float32, 5, true},
                   Call{DataType::Int32, 77, true}, Call{DataType::Float32, 5, false}}) {
      SCOPED_TRACE(protoName(proto) + " count " + std::to_string(c.count));
      CheckedCall call(desc, c.type, ReduceOp::Sum, c.count, c.inplace, c.count);
      auto result = executor->run(call.args());
      ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
      EXPECT_EQ(result->inplace, c.inplace);
      CheckResult check = call.check();
      EXPECT_EQ(check.wrong, 0u) << check.firstWrong;
    }
  }
}

TEST(HostExecutor, ZeroCountIsANoOp) {
  auto executor = makeExecutor(coll::testing::ringAllReduce(2, ir::Protocol::LL), {});
  CheckedCall call(CollectiveDesc::of(executor->plan()), DataType::Float32, ReduceOp::Sum, 0,
                   false, 1);
  auto result = executor->run(call.args());
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  EXPECT_EQ(result->iterations, 0u);
}

class Watchdog : public ::testing::TestWithParam<ir::Protocol> {};

TEST_P(Watchdog, ReportsAStallInsteadOfHanging) {
  HostOptions options;
  options.watchdogMs = uint32_t(coll::testing::scaledMs(200));
  auto executor = makeExecutor(coll::testing::fifoDeadlock(GetParam()), options);
  CheckedCall call(CollectiveDesc::of(executor->plan()), DataType::Float32, ReduceOp::Sum, 64,
                   false, 1);
  auto result = executor->run(call.args());
  ASSERT_FALSE(static_cast<bool>(result));
  std::string message = llvm::toString(result.takeError());
  EXPECT_NE(message.find("watchdog: no progress for " + std::to_string(options.watchdogMs) + " ms"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("tb 0 (channel 0) step 0 (s) iteration 0"), std::string::npos)
      << message;
  EXPECT_NE(message.find("the FIFO of 8 slots is full"), std::string::npos) << message;
  EXPECT_NE(message.find("sender filled 8 slots, receiver freed 0"), std::string::npos)
      << message;

  auto again = executor->run(call.args());
  ASSERT_FALSE(static_cast<bool>(again));
  EXPECT_NE(llvm::toString(again.takeError()).find("stopped by its watchdog"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Protocols, Watchdog,
                         ::testing::Values(ir::Protocol::Simple, ir::Protocol::LL,
                                           ir::Protocol::LL128),
                         [](const auto &info) { return protoName(info.param); });

TEST(HostExecutor, RejectsBadBuffers) {
  ir::Algorithm alltoall = coll::testing::directAllToAll(2, ir::Protocol::Simple);
  auto executor = makeExecutor(alltoall, {});
  CollectiveDesc desc = CollectiveDesc::of(executor->plan());

  // The algorithm is out of place only.
  CheckedCall inplace(desc, DataType::Float32, ReduceOp::Sum, 8, true, 1);
  auto result = executor->run(inplace.args());
  ASSERT_FALSE(static_cast<bool>(result));
  EXPECT_NE(llvm::toString(result.takeError()).find("does not support in-place"),
            std::string::npos);

  CheckedCall call(desc, DataType::Float32, ReduceOp::Sum, 8, false, 1);
  CallArgs args = call.args();
  args.input.pop_back();
  result = executor->run(args);
  ASSERT_FALSE(static_cast<bool>(result));
  EXPECT_NE(llvm::toString(result.takeError()).find("1 input and 2 output buffers for 2 ranks"),
            std::string::npos);

  args = call.args();
  args.output[1] = static_cast<char *>(args.input[1]) + 4; // overlaps, not in place
  result = executor->run(args);
  ASSERT_FALSE(static_cast<bool>(result));
  EXPECT_NE(llvm::toString(result.takeError()).find("rank 1: input and output overlap"),
            std::string::npos);

  args = call.args();
  args.input[0] = nullptr;
  result = executor->run(args);
  ASSERT_FALSE(static_cast<bool>(result));
  EXPECT_NE(llvm::toString(result.takeError()).find("rank 0: a buffer is null"),
            std::string::npos);
}

TEST(HostExecutor, RejectsRanksThatDisagreeOnInPlace) {
  auto executor = makeExecutor(coll::testing::ringAllReduce(2, ir::Protocol::Simple), {});
  CollectiveDesc desc = CollectiveDesc::of(executor->plan());
  CheckedCall inplace(desc, DataType::Float32, ReduceOp::Sum, 8, true, 1);
  CheckedCall outofplace(desc, DataType::Float32, ReduceOp::Sum, 8, false, 1);
  CallArgs args = inplace.args();
  args.input[1] = outofplace.args().input[1];
  args.output[1] = outofplace.args().output[1];
  auto result = executor->run(args);
  ASSERT_FALSE(static_cast<bool>(result));
  EXPECT_NE(llvm::toString(result.takeError()).find("some ranks call in place"),
            std::string::npos);
}

} // namespace
