//===- allreduce.cpp - Running an IR file from C++ ------------------------===//
//
// A runtime integrator's view of Coll: load an MSCCL XML algorithm, check it,
// and run an fp32 sum allreduce on emulated ranks through the library API,
// with buffers this program owns. Every rank's input i is filled with
// rank + 1 + i/1000, so the expected sum is known in closed form.
//
//   allreduce ALGO.xml [count]
//
//===----------------------------------------------------------------------===//

#include "coll/interpreter/HostExecutor.h"
#include "coll/interpreter/Plan.h"
#include "coll/ir/Verifier.h"
#include "coll/ir/XML.h"

#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>
#include <vector>

using namespace coll;

int main(int argc, char **argv) {
  if (argc < 2) {
    llvm::errs() << "usage: allreduce ALGO.xml [count]\n";
    return 2;
  }
  uint64_t count = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1000;

  // 1. Read and verify: every problem is reported as FILE:LINE: error: ...
  ir::DiagnosticList diags(argv[1]);
  llvm::Expected<ir::Algorithm> alg = ir::readAlgorithmFile(argv[1], diags);
  if (!alg) {
    llvm::logAllUnhandledErrors(alg.takeError(), llvm::errs());
    return 1;
  }
  llvm::Expected<ir::Analysis> analysis = ir::verify(*alg, diags);
  if (!analysis) {
    llvm::logAllUnhandledErrors(analysis.takeError(), llvm::errs());
    return 1;
  }
  if (alg->collective != ir::Collective::AllReduce || !alg->outofplace) {
    llvm::errs() << argv[1] << ": not an out-of-place allreduce\n";
    return 1;
  }

  // 2. Plan once, create an executor once; it can run many calls.
  llvm::Expected<interp::Plan> plan = interp::buildPlan(*alg, *analysis, argv[1]);
  if (!plan) {
    llvm::logAllUnhandledErrors(plan.takeError(), llvm::errs());
    return 1;
  }
  const int nranks = plan->nranks;
  auto executor = interp::HostExecutor::create(std::move(*plan));
  if (!executor) {
    llvm::logAllUnhandledErrors(executor.takeError(), llvm::errs());
    return 1;
  }

  // 3. Our own buffers: one input and one output per rank.
  std::vector<std::vector<float>> in(nranks, std::vector<float>(count));
  std::vector<std::vector<float>> out(nranks, std::vector<float>(count));
  interp::CallArgs args;
  args.type = interp::DataType::Float32;
  args.op = interp::ReduceOp::Sum;
  args.count = count;
  for (int r = 0; r < nranks; ++r) {
    for (uint64_t i = 0; i < count; ++i)
      in[r][i] = float(r + 1) + float(i) / 1000.0f;
    args.input.push_back(in[r].data());
    args.output.push_back(out[r].data());
  }

  llvm::Expected<interp::CallResult> result = (*executor)->run(args);
  if (!result) {
    llvm::logAllUnhandledErrors(result.takeError(), llvm::errs());
    return 1;
  }

  // 4. Every rank holds sum_r (r + 1 + i/1000).
  uint64_t wrong = 0;
  for (int r = 0; r < nranks; ++r)
    for (uint64_t i = 0; i < count; ++i) {
      double want = nranks * (nranks + 1) / 2.0 + nranks * (double(i) / 1000.0);
      if (std::fabs(out[r][i] - want) > 1e-4 * want)
        ++wrong;
    }
  llvm::outs() << "allreduce of " << count << " floats on " << nranks << " ranks: "
               << result->iterations << " pipeline iterations, " << wrong
               << " wrong elements\n";
  return wrong == 0 ? 0 : 1;
}
