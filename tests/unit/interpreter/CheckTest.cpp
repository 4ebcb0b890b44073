//===- CheckTest.cpp - The checker catches what it must -------------------===//

#include "TestAlgorithms.h"

#include "coll/interpreter/Check.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

using namespace coll;
using namespace coll::interp;

namespace {

CollectiveDesc describe(ir::Collective coll, int n, int k, int root = 0) {
  CollectiveDesc d;
  d.collective = coll;
  d.shape.nranks = n;
  d.shape.chunksPerBlock = k;
  ir::CollectiveInfo info = ir::collectiveInfo(coll);
  d.shape.inputPerRank = info.inputPerRank;
  d.shape.outputPerRank = info.outputPerRank;
  d.root = root;
  return d;
}

TEST(Check, PoisonedOutputsAreAllWrong) {
  for (ir::Collective coll : {ir::Collective::AllReduce, ir::Collective::AllGather,
                              ir::Collective::ReduceScatter, ir::Collective::AllToAll,
                              ir::Collective::Broadcast, ir::Collective::Reduce,
                              ir::Collective::Gather, ir::Collective::Scatter}) {
    for (DataType type : {DataType::Float32, DataType::Int8, DataType::BFloat16}) {
      CheckedCall call(describe(coll, 3, 1, 1), type, ReduceOp::Sum, 5, false, 7);
      CheckResult r = call.check();
      EXPECT_GT(r.checked, 0u);
      EXPECT_EQ(r.wrong, r.checked) << ir::collectiveName(coll).str();
    }
  }
}

/// Writes the exact allreduce sum of `call`'s inputs into every output.
template <class T> void writeExactSum(const CheckedCall &call, int n, uint64_t count) {
  CallArgs args = call.args();
  for (uint64_t e = 0; e < count; ++e) {
    double sum = 0;
    for (int a = 0; a < n; ++a)
      sum += static_cast<const T *>(args.input[a])[e];
    for (int r = 0; r < n; ++r)
      static_cast<T *>(args.output[r])[e] = static_cast<T>(sum);
  }
}

TEST(Check, FloatingToleranceAndBitIdentity) {
  CollectiveDesc d = describe(ir::Collective::AllReduce, 4, 2);
  CheckedCall call(d, DataType::Float32, ReduceOp::Sum, 64, false, 3);
  writeExactSum<float>(call, 4, 64);
  CheckResult r = call.check();
  EXPECT_EQ(r.wrong, 0u) << r.firstWrong;
  EXPECT_EQ(r.crossRankDiffs, 0u);

  // One ulp on one rank: still right, but no longer identical across ranks.
  float *out = static_cast<float *>(call.args().output[2]);
  out[5] = std::nextafter(out[5], 10.0f);
  r = call.check();
  EXPECT_EQ(r.wrong, 0u);
  EXPECT_EQ(r.crossRankDiffs, 1u);

  // Far off: wrong, and the report names the element.
  out[9] += 0.5f;
  r = call.check();
  EXPECT_EQ(r.wrong, 1u);
  EXPECT_NE(r.firstWrong.find("rank 2 element 9"), std::string::npos) << r.firstWrong;
}

TEST(Check, IntegersMustBeExact) {
  CollectiveDesc d = describe(ir::Collective::AllReduce, 3, 1);
  CheckedCall call(d, DataType::Int32, ReduceOp::Sum, 16, false, 5);
  CallArgs args = call.args();
  for (uint64_t e = 0; e < 16; ++e) {
    uint32_t sum = 0; // wrapping
    for (int a = 0; a < 3; ++a)
      sum += static_cast<uint32_t>(static_cast<const int32_t *>(args.input[a])[e]);
    for (int r = 0; r < 3; ++r)
      static_cast<int32_t *>(args.output[r])[e] = static_cast<int32_t>(sum);
  }
  EXPECT_EQ(call.check().wrong, 0u);
  static_cast<int32_t *>(args.output[0])[3] += 1;
  EXPECT_EQ(call.check().wrong, 1u);
}

TEST(Check, OutOfPlaceInputMustStayUnchanged) {
  CollectiveDesc d = describe(ir::Collective::AllReduce, 2, 1);
  CheckedCall call(d, DataType::Float32, ReduceOp::Sum, 8, false, 5);
  writeExactSum<float>(call, 2, 8);
  static_cast<float *>(call.args().input[1])[0] = 42.0f;
  CheckResult r = call.check();
  EXPECT_GE(r.wrong, 1u);
  EXPECT_NE(r.firstWrong.find("input buffer was modified"), std::string::npos) << r.firstWrong;
}

TEST(Check, InputsAreNeverZeroAndDependOnTheSeed) {
  CollectiveDesc d = describe(ir::Collective::AllGather, 4, 1);
  for (DataType type : {DataType::Uint8, DataType::Float16, DataType::Int64}) {
    CheckedCall a(d, type, ReduceOp::Sum, 4096, true, 1), b(d, type, ReduceOp::Sum, 4096, true, 2);
    size_t es = dataTypeSize(type);
    const auto *pa = static_cast<const unsigned char *>(a.args().input[3]);
    const auto *pb = static_cast<const unsigned char *>(b.args().input[3]);
    std::vector<unsigned char> zero(es, 0);
    for (uint64_t e = 0; e < 4096; ++e)
      ASSERT_NE(std::memcmp(pa + e * es, zero.data(), es), 0);
    EXPECT_NE(std::memcmp(pa, pb, 4096 * es), 0);
  }
}

TEST(Check, CustomCollectivesNeedTheirCondition) {
  EXPECT_FALSE(CheckedCall::canCheck(ir::Collective::Custom));
  EXPECT_TRUE(CheckedCall::canCheck(ir::Collective::Scatter));
  CollectiveDesc d = describe(ir::Collective::Custom, 2, 2);
  EXPECT_FALSE(d.checkable());
  // Rank 0's output chunk 0 is the sum of both ranks' input chunk 0, its
  // chunk 1 is rank 1's input chunk 1; rank 0's input chunk 1 holds no data
  // and rank 1's output is unconstrained.
  auto def = std::make_shared<ir::Definition>();
  def->nranks = 2;
  def->inputChunks = def->outputChunks = 2;
  def->inputDefined = {{true, false}, {true, true}};
  def->expected = {{{0, 2}, {3}}, {{}, {}}};
  d.custom = def;
  EXPECT_TRUE(d.checkable());
  const uint64_t count = 6; // chunks of 3 elements
  CheckedCall call(d, DataType::Int32, ReduceOp::Sum, count, false, 5);
  CallArgs args = call.args();
  const auto *in0 = static_cast<const int32_t *>(args.input[0]);
  const auto *in1 = static_cast<const int32_t *>(args.input[1]);
  for (uint64_t e = 3; e < 6; ++e)
    EXPECT_EQ(in0[e], -1) << "an undefined input chunk holds 0xff bytes";
  auto *out0 = static_cast<int32_t *>(args.output[0]);
  for (uint64_t e = 0; e < 3; ++e) {
    out0[e] = int32_t(uint32_t(in0[e]) + uint32_t(in1[e]));
    out0[3 + e] = in1[3 + e];
  }
  CheckResult r = call.check();
  EXPECT_EQ(r.checked, 6u);
  EXPECT_EQ(r.wrong, 0u) << r.firstWrong;
  out0[4] = in0[4];
  r = call.check();
  EXPECT_EQ(r.wrong, 1u);
  EXPECT_EQ(r.firstWrong.substr(0, 26), "rank 0 element 4: got -1, ");
  EXPECT_NE(r.firstWrong.find("(output chunk 1 must hold in(1,1))"), std::string::npos)
      << r.firstWrong;
}

} // namespace
