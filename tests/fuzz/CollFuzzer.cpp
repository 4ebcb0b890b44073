//===- CollFuzzer.cpp - libFuzzer target: the .coll front end and compiler ===//
//
// Feeds arbitrary bytes to the .coll pipeline the runtime runs on programs
// it finds in a job's algorithm folder: parse, trace, compile (which
// verifies what it emits), then the IR check (coll/ir/Check.h) on the
// result, which must pass: the compiler only emits verified algorithms.
// Diagnostics are formatted into a string, so their locations are exercised
// too. Besides crashes, hangs and sanitizer reports, a compiled algorithm
// that fails the IR verifier or check is a finding.
//
//===----------------------------------------------------------------------===//

#include "coll/compiler/Compiler.h"
#include "coll/ir/Check.h"
#include "coll/ir/Verifier.h"
#include "coll/ir/XML.h"
#include "coll/lang/Frontend.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>

using namespace coll;

namespace {

[[noreturn]] void fail(const char *what, const std::string &text) {
  llvm::errs() << "CollFuzzer: " << what << "\n" << text << "\n";
  std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::SourceMgr srcMgr;
  std::string messages;
  llvm::raw_string_ostream os(messages);
  lang::DiagnosticEngine diags(srcMgr, os, "collc");
  unsigned bufferId = srcMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char *>(data), size),
          "fuzz.coll"),
      llvm::SMLoc());
  std::unique_ptr<lang::ast::Program> program =
      lang::parseProgram(bufferId, diags);
  if (!program)
    return 0;
  // A smaller evaluation budget than collc's keeps runaway loops from
  // being timeouts; the limit's own code path is the same.
  lang::Overrides overrides;
  overrides.maxSteps = 1'000'000;
  std::optional<lang::ChunkDag> dag =
      lang::traceProgram(*program, overrides, diags);
  if (!dag)
    return 0;
  for (compiler::Target target :
       {compiler::Target::Coll, compiler::Target::Msccl}) {
    compiler::CompileOptions options;
    options.target = target;
    std::optional<ir::Algorithm> alg = compiler::compile(*dag, options, diags);
    if (!alg)
      continue;
    // What the compiler emits must read back, verify and pass the check.
    std::string xml = ir::writeAlgorithm(*alg);
    ir::DiagnosticList irDiags("fuzz.xml");
    llvm::Expected<ir::Algorithm> back = ir::parseAlgorithm(xml, irDiags);
    if (!back)
      fail("the compiled XML does not read back",
           llvm::toString(back.takeError()) + "\n" + xml);
    llvm::Expected<ir::Analysis> analysis = ir::verify(*back, irDiags);
    if (!analysis)
      fail("the compiled XML does not verify",
           llvm::toString(analysis.takeError()) + "\n" + xml);
    // A custom collective's condition travels in the XML, so it is checked
    // against its own postcondition like any other.
    if (!(*back == *alg))
      fail("the compiled XML reads back as another algorithm", xml);
    if (!ir::check(*back, *analysis, irDiags)) {
      std::string report;
      for (const ir::Diagnostic &d : irDiags.all())
        report += irDiags.format(d) + "\n";
      fail("the compiled XML fails the check", report + xml);
    }
  }
  return 0;
}
