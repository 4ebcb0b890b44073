//===- Executor.h - Running a plan: the interface of every backend -*- C++ -*-===//
//
// A plan runs on an Executor: the host backend (HostExecutor.h: every rank
// a set of tasks in this process), or a device (DeviceExecutor.h: the CUDA
// kernel on a GPU, or the same kernel on the CPU emulation of one). Tools
// and tests that run "an algorithm on some backend" hold an Executor; the
// runtime holds the device's richer interface for enqueued calls.
//
// Every backend accepts and classifies the same calls (checkCallBuffers)
// and runs the same step semantics (StepSemantics.h), so their results are
// bit-identical.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_EXECUTOR_H
#define COLL_INTERPRETER_EXECUTOR_H

#include "coll/interpreter/DataType.h"
#include "coll/interpreter/Plan.h"
#include "coll/interpreter/Timeline.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace coll::interp {

/// The watchdog period, in milliseconds, where neither an option nor
/// COLL_WATCHDOG_MS sets one: the one default of every backend, the runtime
/// and the tools (docs/RUNTIME.md, "Configuration").
inline constexpr uint32_t DefaultWatchdogMs = 30000;

/// `ms` if non-zero, else COLL_WATCHDOG_MS from the environment (a whole
/// number from 1 to 2^31 - 1), else DefaultWatchdogMs.
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
  /// Copy engines on an executor of one rank (CudaOptions::copyEngineBytes):
  /// every rank's buffers of this call lie where this rank's do in its
  /// window slot 0, each moved by its own rank's in-place offset
  /// (ir::inPlaceOffsets) in an in-place call, so that the host can name
  /// the peers' (the runtime stages every rank's call so in its area, and
  /// says so on every rank alike).
  bool peersAlike = false;
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
  /// The copies the call runs on copy engines (CudaOptions::copyEngineBytes):
  /// cudaMemcpyAsync calls per call; 0 where its kernels move the data.
  uint32_t copyEngineCopies = 0;
};

/// What every backend's options share.
struct ExecutorOptions {
  /// How long a wait may make no progress before the call fails, in
  /// milliseconds. 0: watchdogFromEnv (COLL_WATCHDOG_MS, else
  /// DefaultWatchdogMs).
  uint32_t watchdogMs = 0;
  /// Data bytes one FIFO slot carries, per protocol: the pipeline slice.
  uint32_t simpleSlotBytes = 128 << 10;
  uint32_t llSlotBytes = 16 << 10;
  uint32_t ll128SlotBytes = 120 * 256;

  uint64_t slotBytes(ir::Protocol protocol) const {
    switch (protocol) {
    case ir::Protocol::Simple: return simpleSlotBytes;
    case ir::Protocol::LL: return llSlotBytes;
    case ir::Protocol::LL128: return ll128SlotBytes;
    }
    return simpleSlotBytes;
  }
  /// Every protocol's slot: `bytes` (0 leaves the defaults).
  void setSlotBytes(uint32_t bytes) {
    if (bytes) {
      simpleSlotBytes = llSlotBytes = ll128SlotBytes = bytes;
      slotBytesGiven = true;
    }
  }
  /// The slots were given (setSlotBytes), not the defaults: a backend keeps
  /// them as they are.
  bool slotBytesGiven = false;
};

/// Runs calls of one plan.
class Executor {
public:
  virtual ~Executor();
  /// The plan this executor runs.
  virtual const Plan &plan() const = 0;
  /// Elements a slice (one FIFO slot) holds for `type` under this plan.
  virtual uint64_t sliceElems(DataType type) const = 0;
  /// Runs one call and waits for it. `args` holds every rank's buffers (an
  /// executor of one rank of a job: that rank's) in this backend's memory:
  /// host memory for the host backend, device memory for a device (stage
  /// host buffers with DeviceBackend::stage). `seconds` is the collective's
  /// own time.
  virtual llvm::Expected<CallResult> run(const CallArgs &args) = 0;
  /// Adds a timeline of every following run() to `timeline` (null: stop),
  /// in the host backend's format.
  virtual void setTimeline(Timeline *timeline) = 0;
};

} // namespace coll::interp

#endif // COLL_INTERPRETER_EXECUTOR_H
