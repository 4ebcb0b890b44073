//===- XmlFuzzer.cpp - libFuzzer target: reader, verifier, plan builder ---===//
//
// Feeds arbitrary bytes to the reader and everything it accepts to the
// writer, the printer and the verifier (with and without runtime limits);
// what verifies goes to the plan builder and is resolved for a few element
// counts, checking that every resolved chunk lies inside its buffer.
// Besides crashes, hangs and sanitizer reports, it checks the writer's
// contract: read(write(a)) == a and write is a fixed point.
//
//===----------------------------------------------------------------------===//

#include "coll/interpreter/Plan.h"
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
  llvm::Expected<Analysis> analysis = verify(*alg, diags, tight);
  if (!analysis)
    consume(analysis.takeError());
  analysis = verify(*alg, diags);
  if (!analysis) {
    consume(analysis.takeError());
    return 0;
  }

  llvm::Expected<coll::interp::Plan> plan = coll::interp::buildPlan(*alg, *analysis, "fuzz.xml");
  if (!plan) {
    consume(plan.takeError());
    return 0;
  }
  // A plan built here is whole and in range (its dependencies, after the
  // waits through nops were made direct, included), and so is every
  // rank's slice of it.
  if (llvm::Error err = coll::interp::checkPlanIndices(*plan)) {
    consume(std::move(err));
    fail("buildPlan made a plan that checkPlanIndices refuses", written);
  }
  for (int32_t r = 0; r < plan->nranks; ++r)
    if (llvm::Error err = coll::interp::checkPlanIndices(coll::interp::slicePlan(*plan, r))) {
      consume(std::move(err));
      fail("a rank's slice of a built plan is refused by checkPlanIndices", written);
    }
  for (uint64_t count : {0ull, 1ull, 7ull, 1000ull, 123457ull}) {
    llvm::Expected<coll::interp::CallLayout> call = coll::interp::resolveCall(*plan, count);
    if (!call) {
      consume(call.takeError());
      continue;
    }
    // resolveCall bounds every slice itself; re-check the contract here.
    for (size_t i = 0; i < call->slices.size(); ++i) {
      const coll::interp::CallSlice &slice = call->slices[i];
      if (slice.nelem > call->maxChunkElems)
        fail("a slice is larger than maxChunkElems", written);
    }
  }
  return 0;
}
