//===- TimelineTest.cpp - Timelines of host runs --------------------------===//

#include "TestAlgorithms.h"

#include "coll/interpreter/Check.h"
#include "coll/interpreter/HostExecutor.h"
#include "coll/interpreter/Timeline.h"
#include "coll/ir/Verifier.h"

#include "llvm/Support/JSON.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

using namespace coll;
using namespace coll::interp;

namespace {

std::unique_ptr<HostExecutor> makeExecutor(const ir::Algorithm &alg, const HostOptions &options) {
  ir::DiagnosticList diags("<test>");
  auto analysis = ir::verify(alg, diags);
  EXPECT_TRUE(static_cast<bool>(analysis));
  if (!analysis) {
    llvm::consumeError(analysis.takeError());
    return nullptr;
  }
  auto plan = buildPlan(alg, *analysis, "<test>");
  EXPECT_TRUE(static_cast<bool>(plan));
  if (!plan) {
    llvm::consumeError(plan.takeError());
    return nullptr;
  }
  auto executor = HostExecutor::create(std::move(*plan), options);
  EXPECT_TRUE(static_cast<bool>(executor));
  if (!executor) {
    llvm::consumeError(executor.takeError());
    return nullptr;
  }
  return std::move(*executor);
}

class TimelineProtocols : public ::testing::TestWithParam<ir::Protocol> {};

// One slice per executed step: every step of every tb in every pipeline
// iteration, each on the track of its rank and tb, inside its call's span.
TEST_P(TimelineProtocols, HasOneSlicePerExecutedStep) {
  HostOptions options;
  options.simpleSlotBytes = options.llSlotBytes = options.ll128SlotBytes = 256;
  auto executor = makeExecutor(coll::testing::ringAllReduce(8, GetParam()), options);
  ASSERT_TRUE(executor);
  const Plan &plan = executor->plan();
  Timeline timeline;
  executor->setTimeline(&timeline);
  const uint64_t count = 1000; // several pipeline iterations of 256-byte slots
  CheckedCall call(CollectiveDesc::of(plan), DataType::Float32, ReduceOp::Sum, count, true, 7);
  auto result = executor->run(call.args());
  ASSERT_TRUE(static_cast<bool>(result)) << llvm::toString(result.takeError());
  EXPECT_EQ(call.check().wrong, 0u);
  ASSERT_GT(result->iterations, 1u);

  uint64_t expected = 0;
  std::map<std::pair<int, int>, uint64_t> perTrack; // (rank, tb + 1) -> steps
  for (const PlanTb &tb : plan.tbs) {
    expected += uint64_t(tb.nSteps) * result->iterations;
    perTrack[{tb.rank, tb.tb + 1}] = uint64_t(tb.nSteps) * result->iterations;
  }
  EXPECT_EQ(timeline.stepSlices(), expected);
  EXPECT_EQ(timeline.calls(), uint64_t(plan.nranks));

  std::string text;
  llvm::raw_string_ostream os(text);
  timeline.writeJson(os);
  os.flush();
  auto parsed = llvm::json::parse(text);
  ASSERT_TRUE(static_cast<bool>(parsed)) << llvm::toString(parsed.takeError());
  const llvm::json::Object *root = parsed->getAsObject();
  ASSERT_TRUE(root);
  const llvm::json::Array *events = root->getArray("traceEvents");
  ASSERT_TRUE(events);

  std::map<std::pair<int, int>, uint64_t> seen;
  std::set<std::pair<int, int>> named;
  std::map<int, std::pair<double, double>> callSpan; // rank -> [ts, ts + dur]
  uint64_t waits = 0;
  for (const llvm::json::Value &v : *events) {
    const llvm::json::Object *e = v.getAsObject();
    ASSERT_TRUE(e);
    auto ph = e->getString("ph");
    ASSERT_TRUE(ph.hasValue());
    auto pid = e->getInteger("pid");
    ASSERT_TRUE(pid.hasValue());
    if (*ph == "M") {
      if (e->getString("name") == llvm::StringRef("thread_name"))
        named.insert({int(*pid), int(*e->getInteger("tid"))});
      continue;
    }
    ASSERT_EQ(*ph, "X");
    auto tid = e->getInteger("tid");
    auto ts = e->getNumber("ts");
    auto dur = e->getNumber("dur");
    auto cat = e->getString("cat");
    ASSERT_TRUE(tid && ts && dur && cat && e->getString("name"));
    EXPECT_GE(*dur, 0.0);
    if (*cat == "call") {
      callSpan[int(*pid)] = {*ts, *ts + *dur};
    } else if (*cat == "step") {
      ++seen[{int(*pid), int(*tid)}];
      const llvm::json::Object *args = e->getObject("args");
      ASSERT_TRUE(args);
      EXPECT_TRUE(args->getInteger("step") && args->getInteger("iteration") &&
                  args->getInteger("bytes"));
    } else {
      EXPECT_EQ(*cat, "wait");
      ++waits;
    }
  }
  EXPECT_EQ(seen, perTrack);
  for (const auto &[track, n] : perTrack)
    EXPECT_TRUE(named.count(track)) << "track " << track.first << "/" << track.second;
  EXPECT_EQ(callSpan.size(), size_t(plan.nranks));
  // Every step slice lies inside its rank's call (timestamps are rounded to
  // the nanosecond).
  for (const llvm::json::Value &v : *events) {
    const llvm::json::Object *e = v.getAsObject();
    if (e->getString("cat") != llvm::StringRef("step"))
      continue;
    auto span = callSpan[int(*e->getInteger("pid"))];
    EXPECT_GE(*e->getNumber("ts") + 0.002, span.first);
    EXPECT_LE(*e->getNumber("ts") + *e->getNumber("dur"), span.second + 0.002);
  }
  (void)waits; // how many waits a run has depends on timing
}

INSTANTIATE_TEST_SUITE_P(Protocols, TimelineProtocols,
                         ::testing::Values(ir::Protocol::Simple, ir::Protocol::LL,
                                           ir::Protocol::LL128),
                         [](const auto &info) { return ir::protocolName(info.param).str(); });

TEST(Timeline, WritesAFileAndReportsAnUnwritablePath) {
  auto executor = makeExecutor(coll::testing::ringAllGather(4, ir::Protocol::Simple), {});
  ASSERT_TRUE(executor);
  Timeline timeline;
  timeline.setRankLabel(2, "host-a:1234 rank 2");
  executor->setTimeline(&timeline);
  CheckedCall call(CollectiveDesc::of(executor->plan()), DataType::Int32, ReduceOp::Sum, 33,
                   false, 1);
  ASSERT_TRUE(static_cast<bool>(executor->run(call.args())));
  std::string text;
  llvm::raw_string_ostream os(text);
  timeline.writeJson(os);
  EXPECT_NE(os.str().find("host-a:1234 rank 2"), std::string::npos);
  llvm::Error err = timeline.writeJson("/nonexistent-dir/trace.json");
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("cannot write the timeline"), std::string::npos);
}

} // namespace
