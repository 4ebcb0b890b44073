//===- CudaCorpusTest.cpp - Every shared MSCCL file on the GPU ------------===//
//
// Runs each file of ../shared/msccl-xml (skipped when absent) on the GPU and
// on the host backend at sizes from below one LL line to a few MiB, in every
// mode the file supports, and expects bit-identical outputs.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"
#include "TestFiles.h"

#include "coll/ir/XML.h"

#include <gtest/gtest.h>

using namespace coll;
using namespace coll::interp;

namespace {

using coll::testing::corpusFiles;
using coll::testing::testNameOfFile;

class GpuCorpus : public coll::testing::CudaTest,
                  public ::testing::WithParamInterface<std::string> {};

TEST_P(GpuCorpus, MatchesTheHostAtEverySize) {
  const std::string &path = GetParam();
  ir::DiagnosticList diags(path);
  auto alg = ir::readAlgorithmFile(path, diags);
  ASSERT_TRUE(static_cast<bool>(alg)) << llvm::toString(alg.takeError());
  Plan plan = coll::testing::planOf(*alg, path);
  auto ex = coll::testing::makeExecutors(plan, {}, {});

  struct Size {
    uint64_t bytes;
    DataType type;
    ReduceOp op;
  };
  const Size sizes[] = {
      {4, DataType::Float32, ReduceOp::Sum},       {100, DataType::Float32, ReduceOp::Sum},
      {1000, DataType::BFloat16, ReduceOp::Max},   {4100, DataType::Float32, ReduceOp::Sum},
      {65540, DataType::Int32, ReduceOp::Sum},     {1048588, DataType::Float32, ReduceOp::Sum},
      {3145732, DataType::BFloat16, ReduceOp::Sum}};
  for (const Size &size : sizes) {
    for (bool inplace : {false, true}) {
      if (inplace ? !plan.inplace : !plan.outofplace)
        continue;
      uint64_t count = ir::countForBytes(plan.shape, size.bytes, dataTypeSize(size.type));
      coll::testing::expectSameAsHost(ex, size.type, size.op, count, inplace,
                                      std::to_string(size.bytes) + " bytes " +
                                          dataTypeName(size.type).str() +
                                          (inplace ? " in place" : " out of place"),
                                      size.bytes);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Files, GpuCorpus, ::testing::ValuesIn(corpusFiles()),
                         [](const auto &info) { return testNameOfFile(info.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GpuCorpus);

} // namespace
