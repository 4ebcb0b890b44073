//===- LangTest.h - Helpers for the front end's unit tests ------*- C++ -*-===//
//
// Each helper compiles a program given as a string (named "test.coll") with
// its own SourceMgr and returns what came out together with the text of
// every diagnostic, so that tests can check both.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_TESTS_UNIT_LANG_LANGTEST_H
#define COLL_TESTS_UNIT_LANG_LANGTEST_H

#include "coll/lang/Frontend.h"

#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace coll::lang::test {

/// A program loaded into its own SourceMgr, with diagnostics captured.
struct Session {
  explicit Session(llvm::StringRef source)
      : os(diagText), diags(srcMgr, os, "test") {
    bufferId = srcMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(source, "test.coll"),
        llvm::SMLoc());
  }
  const std::string &text() {
    os.flush();
    return diagText;
  }

  llvm::SourceMgr srcMgr;
  std::string diagText;
  llvm::raw_string_ostream os;
  DiagnosticEngine diags;
  unsigned bufferId = 0;
};

struct TraceResult {
  std::optional<ChunkDag> dag;
  std::string diags;
};

inline TraceResult trace(llvm::StringRef source,
                         const Overrides &overrides = {}) {
  Session s(source);
  TraceResult result;
  result.dag = compileToDag(s.bufferId, overrides, s.diags);
  result.diags = s.text();
  return result;
}

/// Traces a program that must succeed.
inline ChunkDag traceOk(llvm::StringRef source,
                        const Overrides &overrides = {}) {
  TraceResult result = trace(source, overrides);
  EXPECT_TRUE(result.dag) << result.diags;
  EXPECT_EQ(result.diags, "");
  return result.dag ? std::move(*result.dag) : ChunkDag();
}

/// The diagnostics of a program that must fail.
inline std::string traceError(llvm::StringRef source,
                              const Overrides &overrides = {}) {
  TraceResult result = trace(source, overrides);
  EXPECT_FALSE(result.dag) << "expected an error from:\n" << source.str();
  return result.diags;
}

/// The first line of the diagnostics: `test.coll:L:C: error: message`.
inline std::string firstLine(const std::string &diags) {
  return diags.substr(0, diags.find('\n'));
}

/// Runs `body` (from line 2) after declaring a one-rank in-place allreduce,
/// whose postcondition holds without any operation, so that only the
/// language is exercised; returns the first diagnostic line or "".
inline std::string run(llvm::StringRef body) {
  std::string source =
      "collective allreduce(ranks = 1, inplace = true)\n" + body.str() + "\n";
  return firstLine(trace(source).diags);
}

} // namespace coll::lang::test

#endif // COLL_TESTS_UNIT_LANG_LANGTEST_H
