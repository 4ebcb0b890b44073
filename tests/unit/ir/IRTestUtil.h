//===- IRTestUtil.h - Helpers shared by the IR unit tests -------*- C++ -*-===//
//
// Tests compare whole lists of formatted diagnostics, so that a check also
// proves that nothing else was reported. Inline inputs are named "t.xml".
//
//===----------------------------------------------------------------------===//

#ifndef COLL_TESTS_UNIT_IR_IRTESTUTIL_H
#define COLL_TESTS_UNIT_IR_IRTESTUTIL_H

#include "TestFiles.h"
#include "coll/ir/Verifier.h"
#include "coll/ir/XML.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace coll::ir::test {

using coll::testing::corpusFiles;

inline std::vector<std::string> formatted(const DiagnosticList &diags,
                                          Severity severity) {
  std::vector<std::string> result;
  for (const Diagnostic &diag : diags.all())
    if (diag.severity == severity)
      result.push_back(diags.format(diag));
  return result;
}

struct ParseResult {
  std::optional<Algorithm> alg; ///< set when parsing succeeded
  std::vector<std::string> errors, warnings;
};

/// Parses `xml` as the file "t.xml".
inline ParseResult parse(llvm::StringRef xml) {
  DiagnosticList diags("t.xml");
  ParseResult result;
  llvm::Expected<Algorithm> alg = parseAlgorithm(xml, diags);
  if (alg)
    result.alg = std::move(*alg);
  else
    llvm::consumeError(alg.takeError());
  result.errors = formatted(diags, Severity::Error);
  result.warnings = formatted(diags, Severity::Warning);
  return result;
}

/// Parses `xml`, which the test expects to be free of errors.
inline Algorithm parseValid(llvm::StringRef xml) {
  ParseResult result = parse(xml);
  EXPECT_EQ(result.errors, std::vector<std::string>{});
  return result.alg.value_or(Algorithm{});
}

/// The errors (or warnings) verifying `alg` reports, formatted for "t.xml".
inline std::vector<std::string>
verifyDiagnostics(const Algorithm &alg, Severity severity = Severity::Error,
                  const RuntimeLimits &limits = {}) {
  DiagnosticList diags("t.xml");
  llvm::Expected<Analysis> analysis = verify(alg, diags, limits);
  EXPECT_EQ(bool(analysis), !diags.hasErrors());
  if (!analysis)
    llvm::consumeError(analysis.takeError());
  return formatted(diags, severity);
}

} // namespace coll::ir::test

#endif // COLL_TESTS_UNIT_IR_IRTESTUTIL_H
