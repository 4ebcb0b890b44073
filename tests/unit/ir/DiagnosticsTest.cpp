//===- DiagnosticsTest.cpp - Formatting and collecting diagnostics --------===//

#include "coll/ir/Diagnostics.h"

#include <gtest/gtest.h>

namespace coll::ir {
namespace {

TEST(DiagnosticsTest, FormatNamesFileLineAndElement) {
  DiagnosticList diags("a.xml");
  diags.error(12, {0, 1, 3}, "srcoff 5 + cnt 4 exceeds i_chunks 8");
  diags.warning(7, {2, 4, -1}, "odd");
  diags.error(3, {1, -1, -1}, "gpu-level");
  diags.error(1, {}, "algo-level");
  diags.error(0, {0, 1, 2}, "no line");
  diags.error(0, {}, "nothing known");
  const std::vector<Diagnostic> &all = diags.all();
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(diags.format(all[0]),
            "a.xml:12: error: gpu 0 tb 1 step 3: srcoff 5 + cnt 4 exceeds "
            "i_chunks 8");
  EXPECT_EQ(diags.format(all[1]), "a.xml:7: warning: gpu 2 tb 4: odd");
  EXPECT_EQ(diags.format(all[2]), "a.xml:3: error: gpu 1: gpu-level");
  EXPECT_EQ(diags.format(all[3]), "a.xml:1: error: algo-level");
  EXPECT_EQ(diags.format(all[4]), "a.xml: error: gpu 0 tb 1 step 2: no line");
  EXPECT_EQ(diags.format(all[5]), "a.xml: error: nothing known");
}

TEST(DiagnosticsTest, Counts) {
  DiagnosticList diags("<generated>");
  EXPECT_FALSE(diags.hasErrors());
  diags.warning(1, {}, "w");
  EXPECT_FALSE(diags.hasErrors());
  diags.error(2, {}, "e");
  diags.warning(3, {}, "w2");
  EXPECT_TRUE(diags.hasErrors());
  EXPECT_EQ(diags.errorCount(), 1u);
  EXPECT_EQ(diags.warningCount(), 2u);
  EXPECT_EQ(diags.file(), "<generated>");
}

TEST(DiagnosticsTest, PrintLimitsAndCountsTheRest) {
  DiagnosticList diags("a.xml");
  for (int i = 1; i <= 4; ++i)
    diags.warning(i, {}, "w" + llvm::Twine(i));
  diags.error(9, {}, "e");
  auto printed = [&](Severity severity, size_t limit) {
    std::string text;
    llvm::raw_string_ostream os(text);
    diags.print(os, severity, limit);
    return os.str();
  };
  EXPECT_EQ(printed(Severity::Warning, 2),
            "a.xml:1: warning: w1\na.xml:2: warning: w2\n"
            "... and 2 more warnings\n");
  EXPECT_EQ(printed(Severity::Warning, 3),
            "a.xml:1: warning: w1\na.xml:2: warning: w2\na.xml:3: warning: "
            "w3\n... and 1 more warning\n");
  EXPECT_EQ(printed(Severity::Warning, 0), "... and 4 more warnings\n");
  EXPECT_EQ(printed(Severity::Warning, 4).find("more"), std::string::npos);
  EXPECT_EQ(printed(Severity::Error, SIZE_MAX), "a.xml:9: error: e\n");
}

TEST(DiagnosticsTest, TakeErrorsHoldsEveryError) {
  DiagnosticList diags("a.xml");
  EXPECT_FALSE(bool(diags.takeErrors()));
  diags.warning(1, {}, "just a warning");
  EXPECT_FALSE(bool(diags.takeErrors()));
  diags.error(2, {0, -1, -1}, "first");
  diags.error(3, {}, "second");
  EXPECT_EQ(llvm::toString(diags.takeErrors()),
            "a.xml:2: error: gpu 0: first\na.xml:3: error: second");
}

} // namespace
} // namespace coll::ir
