//===- HostExecutor.h - Running a plan on emulated ranks --------*- C++ -*-===//
//
// The host backend (docs/ARCHITECTURE.md §4): every rank of a plan lives in this
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

#include "coll/interpreter/Executor.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace coll::interp {

struct HostOptions : ExecutorOptions {
  /// Threads that run the tbs, the calling thread included; 0: one per CPU
  /// this process may use (or COLL_HOST_THREADS).
  unsigned threads = 0;
  /// The most memory the FIFOs of all the plan's connections may take
  /// (FifoDepth slots each): where the protocol's default slot would need
  /// more, the slots are halved until they fit, down to MinBudgetSlotBytes.
  /// Slots given with setSlotBytes are kept. 0: no limit. A plan of many
  /// ranks in one process (collrun's 1024-rank trees) so keeps its FIFOs
  /// bounded; a chunk larger than a slot takes more pipeline iterations.
  uint64_t fifoBudgetBytes = 128ull << 20;
};

/// The smallest slot HostOptions::fifoBudgetBytes shrinks a default to.
inline constexpr uint64_t MinBudgetSlotBytes = 1024;

/// The slot a plan of `connections` connections gets under `options`
/// (HostOptions::fifoBudgetBytes).
uint64_t budgetedSlotBytes(const HostOptions &options, ir::Protocol protocol,
                           uint64_t connections);

class HostExecutor final : public Executor {
public:
  static llvm::Expected<std::unique_ptr<HostExecutor>> create(Plan plan,
                                                              const HostOptions &options = {});
  ~HostExecutor();
  HostExecutor(const HostExecutor &) = delete;
  HostExecutor &operator=(const HostExecutor &) = delete;

  /// Runs one call on every rank (host memory) and waits for it.
  llvm::Expected<CallResult> run(const CallArgs &args) override;

  const Plan &plan() const override;
  uint64_t sliceElems(DataType type) const override;
  /// Threads a call with enough tbs uses, the caller included.
  unsigned threads() const;
  void setTimeline(Timeline *timeline) override;

  class Impl;

private:
  explicit HostExecutor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace coll::interp

#endif // COLL_INTERPRETER_HOSTEXECUTOR_H
