//===- Traffic.h - What the tools count of the emulation's traffic -*- C++ -*-===//
//
// collrun --traffic and collbench --traffic on the CPU emulation of the CUDA
// backend (docs/CUDA.md, "Traffic"): a sweep target that counts the
// global-memory bytes of each call's first (checked) run, the report of each
// call ending "traffic: B bytes per element, reference R, ratio X", and the
// count of one launch of a reference kernel. Library CollToolTraffic, built
// with the emulation (COLL_ENABLE_CUDA_EMU).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_TOOLS_SUPPORT_TRAFFIC_H
#define COLL_TOOLS_SUPPORT_TRAFFIC_H

#include "Sweep.h"

#include "coll/cuda/Backend.h"
#include "coll/interpreter/DeviceExecutor.h"
#include "coll/ir/Algorithm.h"

#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>
#include <vector>

namespace coll::tools {

/// What was counted of one call: the first run of each row.
struct CountedCall {
  uint64_t count = 0;
  bool inplace = false;
  uint64_t inputBytes = 0, outputBytes = 0; ///< per rank
  std::vector<interp::EmulatedTraffic> traffic;
};

/// A sweep target that counts the traffic of each call's first run (the
/// checked one), and not of its timed runs.
class CountingTarget final : public SweepTarget {
public:
  explicit CountingTarget(std::unique_ptr<SweepTarget> inner) : inner(std::move(inner)) {}
  llvm::Expected<interp::CallResult> run(interp::CheckedCall &call, bool fresh) override;
  llvm::Expected<std::vector<double>> time(interp::CheckedCall &call, unsigned iters) override {
    return inner->time(call, iters);
  }
  llvm::Error recover() override { return inner->recover(); }

  std::vector<CountedCall> calls;

private:
  std::unique_ptr<SweepTarget> inner;
};

/// Every byte the call read and wrote, all ranks and regions together.
uint64_t countedBytes(const CountedCall &c);

/// `x` with at most two decimals, as short as it is exact.
std::string shortNumber(double x);

/// The bytes of the call's reference (docs/CUDA.md, "Traffic"), which reads
/// each input the collective reads once and writes each output it defines
/// once, in place too: every rank's, but only the root's input of a
/// broadcast and a scatter and only the root's output of a reduce and a
/// gather.
uint64_t referenceBytes(ir::Collective collective, int32_t nranks, const CountedCall &c);

/// The report of each counted call: a row per rank and step kind, the
/// totals, and last "traffic: B bytes per element, reference R, ratio X",
/// B and R per element of the call's count.
void printTraffic(const std::vector<CountedCall> &calls, ir::Collective collective,
                  int32_t nranks, llvm::raw_ostream &os);

/// The global-memory bytes of one launch of the reference kernel `q` on the
/// emulated backend (q's warm-up and timed launches aside), every region
/// and rank together.
llvm::Expected<uint64_t> referenceTraffic(interp::DeviceBackend &emulated,
                                          interp::ReferenceRequest q);

} // namespace coll::tools

#endif // COLL_TOOLS_SUPPORT_TRAFFIC_H
