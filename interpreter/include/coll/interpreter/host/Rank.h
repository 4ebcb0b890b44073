//===- Rank.h - One rank of a plan on the host ------------------*- C++ -*-===//
//
// A RankRunner runs the tbs of one rank of a plan as tasks of a host Engine
// (host/Engine.h), with the step semantics every backend shares
// (StepSemantics.h) and the real framing of the plan's protocol
// (Protocol.h). The emulated executor (HostExecutor) makes one per rank over
// connections in its own memory; the runtime makes one per rank it hosts,
// over connections in memory shared with the peers' processes.
//
// Memory ordering, per protocol:
//  - Simple: the sender writes the slot with plain stores, then stores
//    `tail` with release; the receiver acquires `tail` before reading.
//  - LL: every 8-byte word carries its own flag and is stored and loaded as
//    one relaxed atomic, so a word whose flag matches holds its data; `tail`
//    is kept for the watchdog's report only.
//  - LL128: data words are stored relaxed, then the line's flag word with
//    release; the receiver acquires the flag word before reading the data.
//  In every protocol the receiver frees a slot by storing `head` with
//  release, and the sender acquires `head` before re-using the slot. After
//  moving a counter, an end rings the doorbell of the process that runs the
//  other end. Dependencies: a tb stores its flag (iteration, step) with
//  release after a `hasdep` step; waiters (same rank) acquire it.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_HOST_RANK_H
#define COLL_INTERPRETER_HOST_RANK_H

#include "coll/interpreter/host/Connection.h"
#include "coll/interpreter/host/Engine.h"
#include "coll/interpreter/host/Sync.h"

#include "coll/interpreter/DataType.h"
#include "coll/interpreter/Executor.h"
#include "coll/interpreter/Plan.h"
#include "coll/interpreter/Protocol.h"
#include "coll/interpreter/Timeline.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace coll::interp::host {

/// How the tasks of a launch stop together: a word that every wait checks,
/// and the first report of why.
class StopControl {
public:
  virtual ~StopControl() = default;
  bool stopping() const { return word->load(std::memory_order_relaxed) != 0; }
  /// The word itself (a device kernel may poll it: CudaOptions::hostStop).
  const std::atomic<uint32_t> *stopWord() const { return word; }
  /// Records `report` if it is the first, sets the word and wakes every
  /// waiter (the implementation knows which doorbells).
  virtual void stall(std::string report) = 0;

protected:
  std::atomic<uint32_t> *word = nullptr;
};

/// A StopControl for tasks of one process: the word and the report are
/// local, stalling rings the given doorbells.
class LocalStop final : public StopControl {
public:
  explicit LocalStop(std::vector<Doorbell *> bells) : bells(std::move(bells)) {
    word = &flag;
  }
  void stall(std::string text) override;
  /// The first report, and clears the state for another launch.
  std::string takeReport();
  void clear() { flag.store(0, std::memory_order_relaxed); }

private:
  std::atomic<uint32_t> flag{0};
  std::mutex mutex;
  std::string report;
  std::vector<Doorbell *> bells;
};

/// What the ranks of one executor share to run direct steps (docs/IR.md,
/// "Direct steps"): every rank's buffers for the bound call, which a peer's
/// put, get and getre address, and one counter per signal pair of the plan
/// (Plan::signals), which only grows: a wait of iteration `it` of a call
/// waits for `base + it * perIteration + ordinal + 1` signals, and each
/// call's signals are added to `base` (advance()) once the call has ended.
///
/// Two ways to hold it:
///  - every rank in one process (HostExecutor): `buffers` holds the
///    addresses, the table owns the counters, and `base` is shared by all
///    ranks, advanced when the call has ended on every rank;
///  - a rank per process (the runtime, docs/RUNTIME.md "Direct steps"): the
///    buffers lie in the ranks' shared areas or registered windows, each
///    rank publishing where its call's buffers are at the start of its area
///    (`published`: three offsets, then the three slots they are in, a
///    slot being the area, 0, or a window; `slots` maps them here), and
///    each counter lives in the waiting rank's area; every process keeps its
///    own `base`, which the same calls advance alike.
struct DirectTable {
  std::vector<std::array<void *, 3>> buffers;   ///< per rank: input, output, scratch
  std::vector<std::atomic<uint64_t> *> sent;    ///< per signal pair: its counter
  std::vector<uint64_t> base;                   ///< per signal pair
  /// Per signal pair: the doorbell of the waiting rank's process, rung
  /// after a signal (empty: the signalling rank's own, which every rank of
  /// the process shares).
  std::vector<Doorbell *> wake;
  /// Per slot, per rank: where that rank's area (slot 0) or window is
  /// mapped here (null: `buffers` holds the addresses).
  const std::vector<std::vector<std::byte *>> *slots = nullptr;
  /// Per rank: the six words it published for the bound call.
  std::vector<const std::atomic<uint64_t> *> published;

  /// Counters of its own (`own`): every rank in this process.
  explicit DirectTable(const Plan &plan)
      : buffers(static_cast<size_t>(plan.nranks), {nullptr, nullptr, nullptr}),
        base(plan.signals.size(), 0), own(new std::atomic<uint64_t>[plan.signals.size()]()) {
    for (size_t p = 0; p < plan.signals.size(); ++p)
      sent.push_back(&own[p]);
  }
  /// Counters and buffers elsewhere: the caller fills `sent` (one per signal
  /// pair), `slots` and `published`.
  DirectTable(const Plan &plan, std::nullptr_t) : base(plan.signals.size(), 0) {}

  /// Where buffer `buffer` (0 input, 1 output, 2 scratch) of `rank` is.
  void *address(int32_t rank, uint8_t buffer) const {
    if (!slots)
      return buffers[static_cast<size_t>(rank)][buffer];
    const std::atomic<uint64_t> *words = published[static_cast<size_t>(rank)];
    const uint64_t slot = words[3 + buffer].load(std::memory_order_relaxed);
    return (*slots)[slot][static_cast<size_t>(rank)] +
           words[buffer].load(std::memory_order_relaxed);
  }
  /// After a call of `iterations` iterations ended (everywhere `base` is shared).
  void advance(const Plan &plan, uint64_t iterations) {
    for (size_t p = 0; p < plan.signals.size(); ++p)
      base[p] += iterations * static_cast<uint64_t>(plan.signals[p].perIteration);
  }

private:
  std::unique_ptr<std::atomic<uint64_t>[]> own;
};

struct RankOptions {
  std::chrono::milliseconds watchdog{DefaultWatchdogMs};
  /// Data bytes per FIFO slot for the plan's protocol.
  uint64_t slotBytes = 128 << 10;
};

class RankRunner {
public:
  /// Runs the tbs of rank `rank` of `plan`, which must outlive it. `ends`
  /// gives, per connection of the plan (Plan::connections) that this rank
  /// sends or receives on, the end this rank drives; other entries are
  /// ignored. `bell` is the doorbell of this process; `stop` is shared by
  /// every rank of a launch.
  /// `direct` is what the rank shares with the others to run direct steps;
  /// a rank with direct steps and none is refused.
  static llvm::Expected<std::unique_ptr<RankRunner>>
  create(const Plan &plan, int32_t rank, llvm::ArrayRef<ConnectionEnd> ends, Doorbell &bell,
         StopControl &stop, const RankOptions &options, DirectTable *direct = nullptr);
  ~RankRunner();

  /// Binds one call: `layout` (resolved for the call's count, outliving the
  /// run) and this rank's buffers. `scratch`, when given, holds the call's
  /// scratch (layout.scratchElems of this rank); else the runner allocates
  /// its own. Fails when scratch memory is exhausted.
  llvm::Error bind(const CallLayout &layout, DataType type, ReduceOp op, void *input,
                   void *output, void *scratch = nullptr);
  /// Appends one task per tb to `tasks`.
  void appendTasks(llvm::SmallVectorImpl<Task> &tasks);
  /// After the launch: whether every tb ran to the end.
  bool completed() const;
  /// `avg`: divides this rank's result by the rank count.
  void finishAverage() const;

  /// Pipeline iterations of the bound call.
  uint64_t iterations() const;
  /// The bound call's scratch buffer (null when it needs none).
  void *scratch() const;
  /// A bound on the bytes the bound call's steps on this rank move: its
  /// steps times the largest chunk (Engine::run's `work`).
  uint64_t work() const;
  /// Elements per slice for `type`.
  uint64_t sliceElems(DataType type) const;

  /// Records a timeline of the next calls into `traces` (one per tb of this
  /// rank, in tb order); null stops recording.
  void setTrace(std::vector<TbTrace> *traces);

  /// Before a call: the tag this rank's sends store with each slot
  /// (ConnectionControl::call).
  void tagSends(uint64_t tag) const;
  /// Between calls, when no rank of the plan is running: this rank's ends
  /// of its Simple connections start again at slot 0 (the sender's tail
  /// and the receiver's head), so that a connection reuses the slots of
  /// the previous calls instead of moving on through all FifoDepth of them:
  /// the pages a job touches follow one call's traffic. Nothing for LL and
  /// LL128, whose flags tell slots apart by their sequence number.
  void rewindConnections();
  /// After a call: per connection this rank received Simple slots on, the
  /// sender and the tag stored with the last slot.
  llvm::SmallVector<std::pair<int32_t, uint64_t>, 4> receivedTags() const;

  class Impl;

private:
  explicit RankRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

/// Describes where a tb is, for watchdog reports.
std::string describeTbPosition(const Plan &plan, int32_t globalTb, uint64_t iteration,
                               const PlanStep *step);

} // namespace coll::interp::host

#endif // COLL_INTERPRETER_HOST_RANK_H
