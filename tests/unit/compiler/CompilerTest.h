//===- CompilerTest.h - Helpers for the compiler's unit tests ---*- C++ -*-===//
//
// A Compilation traces and compiles a program given as a string (named
// "test.coll") with its own SourceMgr, keeping the DAG, the schedule and the
// text of every diagnostic. Pass-level tests build the compiler's private
// Program from the same DAG (compiler/lib is on their include path).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_TESTS_UNIT_COMPILER_COMPILERTEST_H
#define COLL_TESTS_UNIT_COMPILER_COMPILERTEST_H

#include "Program.h"
#include "TestAlgorithms.h"

#include "coll/compiler/Compiler.h"
#include "coll/ir/XML.h"
#include "coll/lang/Frontend.h"

#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace coll::compiler::test {

/// What to change about a program before it is compiled.
struct Config {
  lang::Overrides overrides;
  CompileOptions options;
  /// Applied to the traced DAG (e.g. to set options.instances).
  std::function<void(lang::ChunkDag &)> edit;
};

class Compilation {
public:
  explicit Compilation(llvm::StringRef source, const Config &config = {})
      : os(diagText), diags(srcMgr, os, "test") {
    unsigned id = srcMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(source, "test.coll"),
        llvm::SMLoc());
    dag = lang::compileToDag(id, config.overrides, diags);
    if (!dag)
      return;
    if (config.edit)
      config.edit(*dag);
    schedule = compileSchedule(*dag, config.options, diags);
  }

  bool ok() const { return schedule.has_value(); }
  const ir::Algorithm &alg() const { return schedule->algorithm; }
  const std::string &text() {
    os.flush();
    return diagText;
  }
  /// The first line of the diagnostics: `test.coll:L:C: error: message`.
  std::string firstLine() {
    const std::string &all = text();
    return all.substr(0, all.find('\n'));
  }
  std::string dump() {
    std::string out;
    llvm::raw_string_ostream s(out);
    dumpSchedule(*schedule, *dag, srcMgr, s);
    return s.str();
  }
  std::string xml() const { return ir::writeAlgorithm(alg()); }
  /// Verifies the (possibly edited) schedule again.
  std::optional<Modes> reverify(const Schedule &edited, CompileOptions o = {}) {
    return verifySchedule(edited, *dag, o, diags);
  }

  llvm::SourceMgr srcMgr;
  std::string diagText;
  llvm::raw_string_ostream os;
  lang::DiagnosticEngine diags;
  std::optional<lang::ChunkDag> dag;
  std::optional<Schedule> schedule;
};

/// The DAG lowered and with dependencies: the input of fusion and tb
/// assignment.
inline std::unique_ptr<Program> lowered(const lang::ChunkDag &dag,
                                        lang::DiagnosticEngine &diags) {
  auto prog = std::make_unique<Program>();
  if (!buildLayout(dag, *prog, diags))
    return nullptr;
  lower(*prog);
  computeDependencies(*prog);
  return prog;
}

/// Counts the steps of each type on one rank, as "s:1 rrs:2 ..." in the
/// order of StepTypes.def.
inline std::string stepTypes(const ir::Algorithm &alg, int32_t rank) {
  std::vector<int> counts(ir::NumStepTypes, 0);
  for (const ir::ThreadBlock &tb : alg.gpus[rank].tbs)
    for (const ir::Step &step : tb.steps)
      ++counts[static_cast<size_t>(step.type)];
  std::string text;
  for (unsigned t = 0; t < ir::NumStepTypes; ++t)
    if (counts[t])
      text += (text.empty() ? "" : " ") +
              ir::stepTypeName(static_cast<ir::StepType>(t)).str() + ":" +
              std::to_string(counts[t]);
  return text;
}

/// The step types of one tb in order, as "s r re".
inline std::string stepTypesOf(const ir::ThreadBlock &tb) {
  std::string text;
  for (const ir::Step &step : tb.steps)
    text += (text.empty() ? "" : " ") + ir::stepTypeName(step.type).str();
  return text;
}

} // namespace coll::compiler::test

#endif // COLL_TESTS_UNIT_COMPILER_COMPILERTEST_H
