//===- StepLoopTest.cpp - The interpreter loop's order of work ------------===//
//
// runThreadBlock (StepSemantics.h) against a Prims that records what it is
// asked: the steps' waits, chunks and publishes in order, per iteration, and
// the same record whether the loop works each step's tests out itself or
// finds them in hasDep (stepFlags, as the kernel's shared copy holds them).
//
//===----------------------------------------------------------------------===//

#include "coll/interpreter/StepSemantics.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace coll::interp;

namespace {

/// What the loop asked, one line per call: "at it.i", "wait tb", "copy
/// off n", "reduce nsrc n", "send off n", "recv off n", "publish it.step".
struct Recorder {
  std::vector<std::string> log;
  float *base = nullptr; ///< offsets are counted from it

  long off(const float *p) const { return static_cast<long>(p - base); }
  void add(std::string s) { log.push_back(std::move(s)); }

  bool waitDependency(int32_t tb, uint64_t, int32_t step) {
    add("wait " + std::to_string(tb) + "." + std::to_string(step));
    return true;
  }
  void publish(uint64_t it, int32_t step) {
    add("publish " + std::to_string(it) + "." + std::to_string(step));
  }
  void at(uint64_t it, int32_t i, const PlanStep &) {
    add("at " + std::to_string(it) + "." + std::to_string(i));
  }
  bool send(const float *s, uint64_t n) {
    add("send " + std::to_string(off(s)) + " " + std::to_string(n));
    return true;
  }
  bool recv(float *d, uint64_t n) {
    add("recv " + std::to_string(off(d)) + " " + std::to_string(n));
    return true;
  }
  bool recvCopySend(float *, uint64_t) { return false; }
  bool recvReduceSend(const float *, uint64_t) { return false; }
  bool recvReduceCopy(const float *, float *, uint64_t) { return false; }
  bool recvReduceCopySend(const float *, float *, uint64_t) { return false; }
  void copy(const float *s, float *d, uint64_t n) {
    add("copy " + std::to_string(off(s)) + "->" + std::to_string(off(d)) + " " +
        std::to_string(n));
  }
  void reduce(float *d, const float *const *srcs, int nsrc, uint64_t n, bool from) {
    std::string line = "reduce " + std::to_string(off(d)) + (from ? " <=" : " <-");
    for (int r = 0; r < nsrc; ++r)
      line += " " + std::to_string(off(srcs[r]));
    add(line + " " + std::to_string(n));
  }
};

PlanStep step(StepKind type, int32_t count, int32_t sliceBegin, bool hasDep, int32_t depTb = -1,
              int32_t irStep = 0, uint8_t nsrc = 1) {
  PlanStep s{};
  s.type = type;
  s.srcBuf = 0;
  s.dstBuf = 1;
  s.nsrc = nsrc;
  s.count = count;
  s.sliceBegin = sliceBegin;
  s.depTb = depTb;
  s.depStep = depTb >= 0 ? 4 : -1;
  s.irStep = irStep;
  s.hasDep = hasDep ? 1 : 0;
  return s;
}

/// The loop's record of `steps` over `iterations`, slices of 4 elements;
/// Flagged: with each step's hasDep replaced by its stepFlags first.
template <bool Flagged>
std::vector<std::string> run(std::vector<PlanStep> steps, const std::vector<CallSlice> &slices,
                             uint64_t iterations) {
  if (Flagged)
    for (size_t i = 0; i < steps.size(); ++i)
      steps[i].hasDep = stepFlags(steps[i], false, static_cast<int32_t>(i),
                                  static_cast<int32_t>(steps.size()));
  std::vector<float> memory(4096);
  Recorder r;
  r.base = memory.data();
  // input at 0, output at 1000 (offsets in the record)
  RankBuffers<float> buffers{memory.data(), memory.data() + 1000, memory.data() + 2000};
  EXPECT_TRUE((runThreadBlock<float, false, Flagged>(r, steps.data(),
                                                       static_cast<int32_t>(steps.size()),
                                                       slices.data(), 0, buffers, iterations, 4)));
  return r.log;
}

TEST(StepLoop, FlagsSayWhatTheFieldsSay) {
  // publishes, slow (dependency / no chunks / direct), straight (one chunk,
  // no publish, not last)
  EXPECT_EQ(stepFlags(step(StepKind::Copy, 1, 0, false), false, 0, 2), step_flag::Straight);
  EXPECT_EQ(stepFlags(step(StepKind::Copy, 1, 0, false), false, 1, 2), 0); // the tb's last
  EXPECT_EQ(stepFlags(step(StepKind::Copy, 2, 0, false), false, 0, 2), 0);
  EXPECT_EQ(stepFlags(step(StepKind::Copy, 1, 0, true), false, 0, 2), step_flag::Publishes);
  EXPECT_EQ(stepFlags(step(StepKind::Send, 1, 0, false, 3), false, 0, 2),
            step_flag::Slow | step_flag::Straight);
  EXPECT_EQ(stepFlags(step(StepKind::Nop, 0, 0, true, 3), false, 0, 2),
            step_flag::Slow | step_flag::Publishes);
  EXPECT_EQ(stepFlags(step(StepKind::Put, 1, 0, false), false, 0, 2), step_flag::Straight);
  EXPECT_EQ(stepFlags(step(StepKind::Put, 1, 0, false), true, 0, 2),
            step_flag::Slow | step_flag::Straight);
}

TEST(StepLoop, EveryChunkEveryPublishInOrder) {
  // Slices of 4 elements per iteration; chunk sizes 6 (two iterations: 4,
  // then 2), 3 (one: 3, then nothing), 8.
  const std::vector<CallSlice> slices = {
      {0, 10, 6},   // 0: step 0's chunk
      {20, 30, 3},  // 1: step 1's first chunk
      {40, 50, 8},  // 2: step 1's second chunk
      {60, 70, 6},  // 3: step 2's (send)
      {80, 90, 8},  // 4: step 4's reduce, source 0
      {100, 0, 8},  // 5: step 4's reduce, source 1
      {120, 130, 6} // 6: step 5's (the tb's last)
  };
  const std::vector<PlanStep> steps = {
      step(StepKind::Copy, 1, 0, false),                      // straight
      step(StepKind::Copy, 2, 1, false),                      // two chunks
      step(StepKind::Send, 1, 3, true, -1, 7),                // publishes
      step(StepKind::Nop, 0, 0, true, 2, 8),                  // waits and publishes
      step(StepKind::Reduce, 1, 4, false, 5, 9, /*nsrc=*/2),  // waits, straight
      step(StepKind::Copy, 1, 6, false),                      // last: not straight
  };
  const std::vector<std::string> expected = {
      "at 0.0", "copy 0->1010 4",
      "at 0.1", "copy 20->1030 3", "copy 40->1050 4",
      "at 0.2", "send 60 4", "publish 0.7",
      "at 0.3", "wait 2.4", "publish 0.8",
      "at 0.4", "wait 5.4", "reduce 1090 <- 80 100 4",
      "at 0.5", "copy 120->1130 4",
      // iteration 1: from element 4 of each chunk; the 3-element chunk
      // moves nothing (a local kind still calls its prim, with 0 elements
      // at the chunk's own start)
      "at 1.0", "copy 4->1014 2",
      "at 1.1", "copy 20->1030 0", "copy 44->1054 4",
      "at 1.2", "send 64 2", "publish 1.7",
      "at 1.3", "wait 2.4", "publish 1.8",
      "at 1.4", "wait 5.4", "reduce 1094 <- 84 104 4",
      "at 1.5", "copy 124->1134 2",
  };
  EXPECT_EQ(run<false>(steps, slices, 2), expected);
  EXPECT_EQ(run<true>(steps, slices, 2), expected);
}

TEST(StepLoop, ASendSkipsAChunkWithNothingLeft) {
  const std::vector<CallSlice> slices = {{0, 0, 3}, {10, 0, 8}};
  const std::vector<PlanStep> steps = {step(StepKind::Send, 2, 0, false),
                                       step(StepKind::Recv, 1, 1, true, -1, 3)};
  const std::vector<std::string> expected = {
      "at 0.0", "send 0 3", "send 10 4", "at 0.1", "recv 1000 4", "publish 0.3",
      "at 1.0", "send 14 4", "at 1.1", "recv 1004 4", "publish 1.3",
  };
  EXPECT_EQ(run<false>(steps, slices, 2), expected);
  EXPECT_EQ(run<true>(steps, slices, 2), expected);
}

TEST(StepLoop, OneStepAndNoSteps) {
  const std::vector<CallSlice> slices = {{0, 0, 4}};
  const std::vector<std::string> one = {"at 0.0", "copy 0->1000 4", "at 1.0", "copy 0->1000 0"};
  EXPECT_EQ(run<false>({step(StepKind::Copy, 1, 0, false)}, slices, 2), one);
  EXPECT_EQ(run<true>({step(StepKind::Copy, 1, 0, false)}, slices, 2), one);
  EXPECT_TRUE(run<false>({}, slices, 3).empty());
  EXPECT_TRUE(run<true>({}, slices, 3).empty());
}

} // namespace
