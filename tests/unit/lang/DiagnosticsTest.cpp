//===- DiagnosticsTest.cpp - The diagnostic engine ------------------------===//

#include "LangTest.h"

using namespace coll::lang;
using namespace coll::lang::test;

namespace {

llvm::SMLoc at(Session &s, size_t offset) {
  return llvm::SMLoc::getFromPointer(
      s.srcMgr.getMemoryBuffer(s.bufferId)->getBufferStart() + offset);
}

TEST(DiagnosticsTest, LocatedErrorShowsLineAndCaret) {
  Session s("let x = 1\nlet y = oops\n");
  s.diags.error(at(s, 18), "unknown name 'oops'");
  EXPECT_EQ(s.text(), "test.coll:2:9: error: unknown name 'oops'\n"
                      "let y = oops\n"
                      "        ^\n");
  EXPECT_EQ(s.diags.errorCount(), 1u);
  EXPECT_TRUE(s.diags.hasErrors());
}

TEST(DiagnosticsTest, NotesAndWarningsDoNotCount) {
  Session s("param N = 8\n");
  s.diags.warning(at(s, 6), "unused");
  s.diags.note(at(s, 6), "declared here");
  EXPECT_EQ(s.diags.errorCount(), 0u);
  EXPECT_NE(s.text().find("test.coll:1:7: warning: unused"), std::string::npos);
  EXPECT_NE(s.text().find("test.coll:1:7: note: declared here"),
            std::string::npos);
}

TEST(DiagnosticsTest, UnlocatedErrorNamesTheTool) {
  Session s("");
  s.diags.error(llvm::SMLoc(), "-D X: bad");
  EXPECT_EQ(s.text(), "test: error: -D X: bad\n");
  EXPECT_EQ(s.diags.errorCount(), 1u);
}

TEST(DiagnosticsTest, LineAndColumn) {
  Session s("ab\ncde\n");
  EXPECT_EQ(s.diags.lineAndColumn(at(s, 5)), std::make_pair(2u, 3u));
}

TEST(DiagnosticsTest, AddDefine) {
  Session s("");
  Overrides overrides;
  EXPECT_TRUE(addDefine(overrides, "N=16", s.diags));
  EXPECT_TRUE(addDefine(overrides, "Neg=-3", s.diags));
  EXPECT_TRUE(addDefine(overrides, "flag=true", s.diags));
  EXPECT_TRUE(addDefine(overrides, "N=32", s.diags)); // the later one wins
  EXPECT_EQ(std::get<int64_t>(overrides.params.at("N")), 32);
  EXPECT_EQ(std::get<int64_t>(overrides.params.at("Neg")), -3);
  EXPECT_TRUE(std::get<bool>(overrides.params.at("flag")));
  EXPECT_EQ(s.diags.errorCount(), 0u);

  EXPECT_FALSE(addDefine(overrides, "N", s.diags));
  EXPECT_FALSE(addDefine(overrides, "=3", s.diags));
  EXPECT_FALSE(addDefine(overrides, "1N=3", s.diags));
  EXPECT_FALSE(addDefine(overrides, "N=three", s.diags));
  EXPECT_FALSE(addDefine(overrides, "N=", s.diags));
  EXPECT_EQ(s.diags.errorCount(), 5u);
  EXPECT_NE(s.text().find("test: error: -D N: expected NAME=VALUE"),
            std::string::npos);
  EXPECT_NE(
      s.text().find("test: error: -D N=three: the value must be an integer, "
                    "true or false"),
      std::string::npos);
}

} // namespace
