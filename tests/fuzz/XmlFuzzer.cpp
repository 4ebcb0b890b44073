//===- XmlFuzzer.cpp - libFuzzer target for the IR reader and verifier ----===//
//
// Feeds arbitrary bytes to the reader and everything it accepts to the
// writer, the printer and the verifier (with and without runtime limits).
// Besides crashes, hangs and sanitizer reports, it checks the writer's
// contract: read(write(a)) == a and write is a fixed point.
//
//===----------------------------------------------------------------------===//

#include "coll/ir/Printer.h"
#include "coll/ir/Verifier.h"
#include "coll/ir/XML.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>

using namespace coll::ir;

namespace {

[[noreturn]] void fail(const char *what, const std::string &text) {
  llvm::errs() << "XmlFuzzer: " << what << "\n--- written ---\n" << text;
  std::abort();
}

void consume(llvm::Error err) { llvm::consumeError(std::move(err)); }

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef input(reinterpret_cast<const char *>(data), size);
  DiagnosticList diags("fuzz.xml");
  llvm::Expected<Algorithm> alg = parseAlgorithm(input, diags);
  for (const Diagnostic &diag : diags.all())
    (void)diags.format(diag);
  if (!alg) {
    consume(alg.takeError());
    return 0;
  }

  std::string written = writeAlgorithm(*alg);
  DiagnosticList again("written.xml");
  llvm::Expected<Algorithm> back = parseAlgorithm(written, again);
  if (!back) {
    consume(back.takeError());
    fail("the reader rejects what the writer wrote", written);
  }
  if (!(*back == *alg))
    fail("read(write(a)) != a", written);
  if (writeAlgorithm(*back) != written)
    fail("write(read(write(a))) != write(a)", written);

  printAlgorithm(*alg, llvm::nulls());
  // Small limits, so that every limit check runs on small inputs too.
  RuntimeLimits tight;
  tight.maxStepsPerTb = 4;
  tight.maxCount = 4;
  tight.maxTbsPerChannelDirection = 1;
  tight.maxTbsPerGpu = 2;
  for (const RuntimeLimits &limits : {RuntimeLimits{}, tight}) {
    llvm::Expected<Analysis> analysis = verify(*alg, diags, limits);
    if (!analysis)
      consume(analysis.takeError());
  }
  return 0;
}
