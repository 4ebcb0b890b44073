//===- HostExecutor.h - Running a plan on emulated ranks --------*- C++ -*-===//
//
// The host backend (DESIGN.md §4): every rank of a plan lives in this
// process with its own buffers, connections are FIFOs in ordinary memory
// with the real framing of the plan's protocol, and every tb is a task that
// yields when it must wait; a few threads (one per core by default, the
// calling thread among them) run the tasks. It runs the same step semantics
// (StepSemantics.h) as the CUDA backend, so an algorithm that passes here
// behaves the same on a GPU runtime.
//
// Worker threads are created once per executor and reused by every call. A
// call whose waits make no progress for the watchdog period fails with a
// report naming rank, tb, step, connection and counters; the executor is
// unusable after that (its FIFOs are mid-transfer) and must be recreated.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_HOSTEXECUTOR_H
#define COLL_INTERPRETER_HOSTEXECUTOR_H

#include "coll/interpreter/DataType.h"
#include "coll/interpreter/Plan.h"
#include "coll/interpreter/Timeline.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace coll::interp {

struct HostOptions {
  /// How long a wait may make no progress before the call fails, in
  /// milliseconds. 0: COLL_WATCHDOG_MS from the environment, else 30000.
  uint32_t watchdogMs = 0;
  /// Data bytes one FIFO slot carries, per protocol: the pipeline slice.
  uint32_t simpleSlotBytes = 128 << 10;
  uint32_t llSlotBytes = 16 << 10;
  uint32_t ll128SlotBytes = 120 * 256;
  /// Threads that run the tbs, the calling thread included; 0: one per CPU
  /// this process may use (or COLL_HOST_THREADS).
  unsigned threads = 0;

  uint64_t slotBytes(ir::Protocol protocol) const;
};

/// `ms` if non-zero, else COLL_WATCHDOG_MS from the environment, else 30000.
uint32_t watchdogFromEnv(uint32_t ms);

/// One call of the collective on all ranks.
struct CallArgs {
  DataType type = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  uint64_t count = 0; ///< elements per block (ir/Geometry.h)
  /// Per rank, the input and output buffers, sized as the collective
  /// defines. The call is in place when every rank's pointers alias as NCCL
  /// defines it (ir::inPlaceOffsets); otherwise they must not overlap.
  std::vector<void *> input, output;
};

/// Checks `args` against `plan` resolved as `call` and decides, as NCCL
/// does, whether it is in place: every rank's input and output alias as the
/// collective defines (ir::inPlaceOffsets), or none does and no buffers
/// overlap. A call of 0 elements is out of place and never fails. Shared by
/// the backends so that they accept and classify the same calls. With
/// `onlyRank` >= 0, only that rank's buffers are looked at (an executor of
/// one rank of a job).
llvm::Expected<bool> checkCallBuffers(const Plan &plan, const CallLayout &call,
                                      const CallArgs &args, int32_t onlyRank = -1);

struct CallResult {
  bool inplace = false;
  uint64_t iterations = 0; ///< pipeline iterations the call took
  double seconds = 0;      ///< wall time of the collective itself
};

class HostExecutor {
public:
  static llvm::Expected<std::unique_ptr<HostExecutor>> create(Plan plan,
                                                              const HostOptions &options = {});
  ~HostExecutor();
  HostExecutor(const HostExecutor &) = delete;
  HostExecutor &operator=(const HostExecutor &) = delete;

  /// Runs one call on every rank and waits for it.
  llvm::Expected<CallResult> run(const CallArgs &args);

  const Plan &plan() const;
  /// Elements a slice (one FIFO slot) holds for `type` under this plan.
  uint64_t sliceElems(DataType type) const;
  /// Threads a call with enough tbs uses, the caller included.
  unsigned threads() const;
  /// Records every following call into `timeline` (null: stop recording).
  void setTimeline(Timeline *timeline);

  class Impl;

private:
  explicit HostExecutor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace coll::interp

#endif // COLL_INTERPRETER_HOSTEXECUTOR_H
