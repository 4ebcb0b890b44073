//===- AlgorithmLibraryTest.cpp - Every algorithm, compiled and run -------===//
//
// The central end-to-end test: every program in algorithms/ is traced and
// compiled at 4, 8 and 16 ranks (2x4 and 2x8 for hierarchical ones), with 1
// and 2 instances and each protocol, then executed on the host interpreter
// with random data, in every mode the compiler declares, and every rank's
// output is checked against the collective's definition. Sizes include
// counts the chunks do not divide. Sanitizer builds run 4 ranks (2x4) only.
//
//===----------------------------------------------------------------------===//

#include "TestAlgorithms.h"
#include "TestFiles.h"

#include "coll/compiler/Compiler.h"
#include "coll/ir/Geometry.h"
#include "coll/lang/Frontend.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

using namespace coll;

namespace {

std::vector<std::string> algorithmFiles() {
  return coll::testing::filesWithExtension(COLL_ALGORITHMS_DIR, ".coll");
}

/// The parameter settings each program is tested with.
std::vector<std::map<std::string, int64_t>> configurations(llvm::StringRef name) {
  bool small = COLL_TEST_SANITIZER;
  if (name.contains("hierarchical")) {
    std::vector<std::map<std::string, int64_t>> c = {{{"NODES", 2}, {"GPUS", 4}}};
    if (!small)
      c.push_back({{"NODES", 2}, {"GPUS", 8}});
    return c;
  }
  std::vector<std::map<std::string, int64_t>> c = {{{"N", 4}}};
  if (!small)
    c.insert(c.end(), {{{"N", 8}}, {{"N", 16}}});
  return c;
}

std::string describe(const std::map<std::string, int64_t> &params) {
  std::string s;
  for (const auto &[name, value] : params)
    s += " " + name + "=" + std::to_string(value);
  return s;
}

class AlgorithmLibrary : public ::testing::TestWithParam<std::string> {};

TEST_P(AlgorithmLibrary, CompilesAndVerifiesEverywhere) {
  const std::string &path = GetParam();
  auto file = llvm::MemoryBuffer::getFile(path);
  ASSERT_TRUE(file) << path;
  std::string name = llvm::sys::path::stem(path).str();

  for (const auto &params : configurations(name)) {
    for (int32_t instances : {1, 2}) {
      for (ir::Protocol proto : {ir::Protocol::Simple, ir::Protocol::LL, ir::Protocol::LL128}) {
        std::string where = name + describe(params) + " instances=" + std::to_string(instances) +
                            " " + ir::protocolName(proto).str();
        llvm::SourceMgr srcMgr;
        std::string diagText;
        llvm::raw_string_ostream os(diagText);
        lang::DiagnosticEngine diags(srcMgr, os, "test");
        unsigned id = srcMgr.AddNewSourceBuffer(
            llvm::MemoryBuffer::getMemBufferCopy((*file)->getBuffer(), path), llvm::SMLoc());
        lang::Overrides overrides;
        for (const auto &[param, value] : params)
          overrides.params[param] = value;
        std::optional<lang::ChunkDag> dag = lang::compileToDag(id, overrides, diags);
        ASSERT_TRUE(dag) << where << "\n" << os.str();
        dag->options.instances = instances;
        dag->options.protocol = proto;
        std::optional<ir::Algorithm> alg = compiler::compile(*dag, {}, diags);
        ASSERT_TRUE(alg) << where << "\n" << os.str();

        // A count the chunks divide, one they do not, and one below a chunk
        // per rank.
        ir::BlockShape shape = ir::blockShape(*alg);
        uint64_t chunks = static_cast<uint64_t>(shape.chunksPerBlock);
        for (uint64_t count : {chunks * 96, chunks * 37 + 5, uint64_t(3)}) {
          for (bool inplace : {false, true}) {
            if (inplace ? !alg->inplace : !alg->outofplace)
              continue;
            auto result = coll::testing::runChecked(*alg, interp::DataType::Float32,
                                                    interp::ReduceOp::Sum, count, inplace);
            std::string run = where + " count=" + std::to_string(count) +
                              (inplace ? " in place" : " out of place");
            ASSERT_TRUE(static_cast<bool>(result))
                << run << ": " << llvm::toString(result.takeError());
            EXPECT_EQ(result->wrong, 0u) << run << ": " << result->firstWrong;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Programs, AlgorithmLibrary, ::testing::ValuesIn(algorithmFiles()),
                         [](const auto &info) {
                           return llvm::sys::path::stem(info.param).str();
                         });

TEST(AlgorithmLibrary, HasEveryProgram) { EXPECT_EQ(algorithmFiles().size(), 25u); }

} // namespace
