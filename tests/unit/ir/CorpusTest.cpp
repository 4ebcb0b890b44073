//===- CorpusTest.cpp - The shared MSCCL files ----------------------------===//
//
// Every file of the shared corpus is valid: it must read and verify without
// errors (also under the MSCCL executor's limits) and survive a round trip
// through the writer. Skipped when the corpus is absent.
//
//===----------------------------------------------------------------------===//

#include "IRTestUtil.h"

#include "llvm/Support/Path.h"

namespace coll::ir {
namespace {

class CorpusTest : public ::testing::Test {
protected:
  void SetUp() override {
    files = test::corpusFiles();
    if (files.empty())
      GTEST_SKIP() << "no MSCCL files in " COLL_MSCCL_XML_DIR;
  }
  std::vector<std::string> files;
};

TEST_F(CorpusTest, EveryFileVerifies) {
  RuntimeLimits msccl;
  msccl.maxStepsPerTb = 64;
  msccl.maxCount = 72;
  msccl.maxTbsPerChannelDirection = 32;
  for (const std::string &path : files) {
    SCOPED_TRACE(path);
    DiagnosticList diags(path);
    llvm::Expected<Algorithm> alg = readAlgorithmFile(path, diags);
    ASSERT_TRUE(bool(alg)) << llvm::toString(alg.takeError());
    for (const RuntimeLimits &limits : {RuntimeLimits{}, msccl}) {
      llvm::Expected<Analysis> analysis = verify(*alg, diags, limits);
      ASSERT_TRUE(bool(analysis)) << llvm::toString(analysis.takeError());
      size_t steps = 0;
      for (const Gpu &gpu : alg->gpus)
        for (const ThreadBlock &tb : gpu.tbs)
          steps += tb.steps.size();
      EXPECT_EQ(analysis->topologicalOrder.size(), steps);
    }
    EXPECT_EQ(diags.errorCount(), 0u);
  }
}

TEST_F(CorpusTest, EveryFileRoundTrips) {
  for (const std::string &path : files) {
    SCOPED_TRACE(path);
    DiagnosticList diags(path);
    llvm::Expected<Algorithm> alg = readAlgorithmFile(path, diags);
    ASSERT_TRUE(bool(alg)) << llvm::toString(alg.takeError());
    std::string text = writeAlgorithm(*alg);
    DiagnosticList again("written");
    llvm::Expected<Algorithm> back = parseAlgorithm(text, again);
    ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError());
    EXPECT_EQ(again.all().size(), 0u) << "the writer emits only what it knows";
    EXPECT_TRUE(*back == *alg);
    EXPECT_EQ(writeAlgorithm(*back), text);
  }
}

TEST_F(CorpusTest, ExtraAttributesAreWarnedOnce) {
  std::string path = std::string(COLL_MSCCL_XML_DIR) +
                     "/rccl__unit-test__all-reduce-ring-ll.xml";
  if (!llvm::sys::fs::exists(path))
    GTEST_SKIP() << path << " is absent";
  DiagnosticList diags(path);
  llvm::Expected<Algorithm> alg = readAlgorithmFile(path, diags);
  ASSERT_TRUE(bool(alg)) << llvm::toString(alg.takeError());
  EXPECT_EQ(test::formatted(diags, Severity::Warning),
            (std::vector<std::string>{
                path + ":3: warning: unknown attribute 'maxcount' on <algo> "
                       "ignored",
                path + ":3: warning: unknown attribute 'nthreadblocks' on "
                       "<algo> ignored"}));
}

} // namespace
} // namespace coll::ir
