//===- State.h - What a rank's runner and its tbs hold --------------*- C++ -*-===//
//
// RankRunner's state (coll/interpreter/host/Rank.h) and each tb's, shared by
// the runner (HostRank.cpp) and the primitives its tbs run (Prims.h).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_LIB_HOST_STATE_H
#define COLL_INTERPRETER_LIB_HOST_STATE_H

#include "coll/interpreter/host/Rank.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace coll::interp::host {

/// 64-byte aligned, zero-initialised storage of `bytes` bytes.
struct AlignedBuffer {
  struct Free {
    void operator()(void *p) const { std::free(p); }
  };
  std::unique_ptr<void, Free> ptr;
  size_t bytes = 0;

  /// Makes room for `need` bytes; false when memory is exhausted.
  [[nodiscard]] bool reserve(size_t need) {
    if (need <= bytes && ptr)
      return true;
    size_t rounded = (std::max<size_t>(need, 1) + CacheLine - 1) / CacheLine * CacheLine;
    ptr.reset(std::aligned_alloc(CacheLine, rounded));
    bytes = ptr ? rounded : 0;
    if (ptr)
      std::memset(ptr.get(), 0, rounded);
    return ptr != nullptr;
  }
  template <class T> T *as() const { return static_cast<T *>(ptr.get()); }
};

struct TbState {
  RankRunner::Impl *owner = nullptr;
  int32_t globalTb = 0;
  ConnectionEnd send, recv;
  alignas(CacheLine) std::atomic<uint64_t> flag{0};
  alignas(CacheLine) std::atomic<uint64_t> iteration{0};
  std::atomic<const PlanStep *> step{nullptr};
  AlignedBuffer stageIn, stageOut;
  TbTrace *trace = nullptr;
  bool ok = false;
  /// ConnectionControl::call: what sendEnd stores with each slot, and what
  /// the Simple recvBegin saw last (in the line it reads anyway).
  uint64_t sendTag = 0, seenTag = 0;
};

class RankRunner::Impl {
public:
  using Runner = bool (*)(TbState &);

  Impl(const Plan &plan, int32_t rank, Doorbell &bell, StopControl &stop,
       const RankOptions &options)
      : plan(plan), rank(rank), bell(bell), stop(stop), options(options) {
    for (int32_t t = plan.rankTbBegin[rank]; t < plan.rankTbBegin[rank + 1]; ++t)
      steps += static_cast<uint64_t>(plan.tbs[t].nSteps);
  }

  const Plan &plan;
  const int32_t rank;
  uint64_t steps = 0; ///< this rank's steps in the plan
  Doorbell &bell;
  StopControl &stop;
  RankOptions options;
  std::vector<std::unique_ptr<TbState>> tbs;
  AlignedBuffer scratch;
  void *scratchGiven = nullptr; ///< the bound call's scratch, when bind() was given one
  std::vector<TbTrace> *traces = nullptr;
  DirectTable *direct = nullptr; ///< peers' buffers and the signals; null: no direct steps

  // The bound call.
  Runner runner = nullptr;
  const CallLayout *layout = nullptr;
  DataType type = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  void *input = nullptr, *output = nullptr;
  uint64_t iterations = 0, sliceElems = 0;

  TbState &localTb(int32_t globalTb) { return *tbs[globalTb - plan.rankTbBegin[rank]]; }
  uint64_t span() const { return static_cast<uint64_t>(std::max(plan.maxIrSteps, 1)); }
  uint64_t flagValue(uint64_t iteration, int32_t irStep) const {
    return iteration * span() + static_cast<uint64_t>(irStep) + 1;
  }
};

} // namespace coll::interp::host

#endif // COLL_INTERPRETER_LIB_HOST_STATE_H
