//===- MscclCorpusTest.cpp - Every shared MSCCL file on the host backend --===//
//
// Runs each file of ../shared/msccl-xml (skipped when absent) at sizes from
// below one LL line to several MiB, including sizes that are not multiples
// of nchunksperloop, in every mode the file supports. Sanitizer builds stop
// at 64 KiB.
//
//===----------------------------------------------------------------------===//

#include "TestFiles.h"

#include "coll/interpreter/Check.h"
#include "coll/interpreter/HostExecutor.h"
#include "coll/interpreter/Plan.h"
#include "coll/ir/Verifier.h"
#include "coll/ir/XML.h"

#include <gtest/gtest.h>

using namespace coll;
using namespace coll::interp;

namespace {

using coll::testing::corpusFiles;
using coll::testing::testNameOfFile;

TEST(MscclCorpus, IsPresent) {
  if (!llvm::sys::fs::is_directory(COLL_MSCCL_XML_DIR))
    GTEST_SKIP() << "no MSCCL corpus at " << COLL_MSCCL_XML_DIR;
  EXPECT_FALSE(corpusFiles().empty());
}

class MscclCorpus : public ::testing::TestWithParam<std::string> {};

TEST_P(MscclCorpus, RunsAndVerifiesAtEverySize) {
  const std::string &path = GetParam();
  ir::DiagnosticList diags(path);
  auto alg = ir::readAlgorithmFile(path, diags);
  ASSERT_TRUE(static_cast<bool>(alg)) << llvm::toString(alg.takeError());
  auto analysis = ir::verify(*alg, diags);
  ASSERT_TRUE(static_cast<bool>(analysis)) << llvm::toString(analysis.takeError());
  auto plan = buildPlan(*alg, *analysis, path);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  CollectiveDesc desc = CollectiveDesc::of(*plan);
  bool modes[2] = {plan->outofplace, plan->inplace};
  auto executor = HostExecutor::create(std::move(*plan));
  ASSERT_TRUE(static_cast<bool>(executor)) << llvm::toString(executor.takeError());

  struct Size {
    uint64_t bytes;
    DataType type;
    ReduceOp op;
  };
  std::vector<Size> sizes = {{4, DataType::Float32, ReduceOp::Sum},
                             {12, DataType::Float32, ReduceOp::Sum},
                             {100, DataType::Float32, ReduceOp::Sum},
                             {1000, DataType::BFloat16, ReduceOp::Max},
                             {4100, DataType::Float32, ReduceOp::Sum},
                             {65540, DataType::Int32, ReduceOp::Sum}};
  if (!COLL_TEST_SANITIZER)
    sizes.insert(sizes.end(), {{1048588, DataType::Float32, ReduceOp::Sum},
                               {3145732, DataType::BFloat16, ReduceOp::Sum}});
  for (const Size &size : sizes) {
    for (bool inplace : {false, true}) {
      if (!modes[inplace])
        continue;
      uint64_t count = ir::countForBytes(desc.shape, size.bytes, dataTypeSize(size.type));
      CheckedCall call(desc, size.type, size.op, count, inplace, size.bytes);
      auto result = (*executor)->run(call.args());
      ASSERT_TRUE(static_cast<bool>(result))
          << size.bytes << " bytes: " << llvm::toString(result.takeError());
      CheckResult check = call.check();
      EXPECT_EQ(check.wrong, 0u) << size.bytes << " bytes " << dataTypeName(size.type).str()
                                 << (inplace ? " in place: " : " out of place: ")
                                 << check.firstWrong;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Files, MscclCorpus, ::testing::ValuesIn(corpusFiles()),
                         [](const auto &info) { return testNameOfFile(info.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(MscclCorpus);

} // namespace
