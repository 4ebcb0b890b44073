//===- Timeline.cpp - The device's timeline of a call ---------------------===//
//
// A call that records a timeline (run() with setTimeline, enqueue() with
// traceEnqueued) gives its kernels buffers for events through the device
// state; afterwards the events are read back and handed to the Timeline as
// the host backend's, each on the host's clock.
//
//===----------------------------------------------------------------------===//

#include "Executor.h"

#include "coll/interpreter/Timeline.h"

#include <algorithm>
#include <climits>
#include <cstddef>

namespace coll::interp::cuda {

llvm::Error CudaExecutor::armTimeline() {
  // Events per block: per iteration and step, the step itself, a wait for a
  // dependency, and per chunk a wait for data and one for a free slot.
  uint64_t perIteration = 0;
  for (int32_t b = 0; b < launchTbs; ++b) {
    const PlanTb &tb = plan_.tbs[firstTb + b];
    uint64_t events = 0;
    for (int32_t i = 0; i < tb.nSteps; ++i)
      events += 2 + 2 * uint64_t(std::max(plan_.steps[tb.stepBegin + i].count, 0));
    perIteration = std::max(perIteration, events);
  }
  // At most 256 MiB of events: a longer call keeps its first ones.
  const uint64_t blocks = std::max<uint64_t>(uint64_t(launchTbs), 1);
  const uint64_t limit = (256ull << 20) / sizeof(DeviceTraceEvent) / blocks;
  const uint64_t capacity = std::min<uint64_t>(
      {perIteration * std::max<uint64_t>(params.iterations, 1), limit, uint64_t(UINT32_MAX)});
  if (llvm::Error err = traceEvents.reserve(blocks * capacity * sizeof(DeviceTraceEvent)))
    return err;
  if (llvm::Error err = traceCounts.reserve(2 * blocks * sizeof(uint32_t)))
    return err;
  COLL_CUDA_TRY(cudaMemsetAsync(traceCounts.as<void>(), 0, 2 * blocks * sizeof(uint32_t), stream));
  traceCapacity = static_cast<uint32_t>(capacity);
  return setTraceBuffers(traceEvents.as<DeviceTraceEvent>(), traceCounts.as<uint32_t>(),
                         traceCapacity);
}

llvm::Error CudaExecutor::setTraceBuffers(DeviceTraceEvent *events, uint32_t *counts,
                                          uint32_t capacity) {
  // The kernels record a timeline while the device state's control block
  // holds its buffers (null: none); pageable source, so the copy is done when it returns.
  struct {
    DeviceTraceEvent *events;
    uint32_t *counts;
    uint32_t capacity;
  } fields{events, counts, capacity};
  static_assert(offsetof(DeviceControl, traceCounts) ==
                    offsetof(DeviceControl, traceEvents) + sizeof(void *) &&
                offsetof(DeviceControl, traceCapacity) ==
                    offsetof(DeviceControl, traceCounts) + sizeof(void *));
  COLL_CUDA_TRY(cudaMemcpyAsync(state.as<unsigned char>() + offsetof(DeviceControl, traceEvents),
                                &fields,
                                offsetof(DeviceControl, traceCapacity) -
                                    offsetof(DeviceControl, traceEvents) + sizeof(uint32_t),
                                cudaMemcpyHostToDevice, stream));
  COLL_CUDA_TRY(cudaStreamSynchronize(stream));
  return llvm::Error::success();
}

llvm::Error CudaExecutor::collectTimeline(Timeline &out, DataType type,
                                          std::chrono::steady_clock::time_point t0,
                                          std::chrono::steady_clock::time_point t1) {
  const uint32_t capacity = traceCapacity;
  if (llvm::Error err = setTraceBuffers(nullptr, nullptr, 0))
    return err;
  const size_t blocks = static_cast<size_t>(std::max(launchTbs, 0));
  std::vector<uint32_t> state(2 * blocks), counts(blocks);
  std::vector<DeviceTraceEvent> events(blocks * capacity);
  if (blocks) {
    COLL_CUDA_TRY(cudaMemcpyAsync(state.data(), traceCounts.as<void>(),
                                  2 * blocks * sizeof(uint32_t), cudaMemcpyDeviceToHost, stream));
    COLL_CUDA_TRY(cudaMemcpyAsync(events.data(), traceEvents.as<void>(),
                                  events.size() * sizeof(DeviceTraceEvent), cudaMemcpyDeviceToHost,
                                  stream));
    COLL_CUDA_TRY(cudaStreamSynchronize(stream));
  }
  for (size_t b = 0; b < blocks; ++b)
    counts[b] = state[2 * b];
  // The GPU's clock and the host's steady clock have different origins:
  // where the events do not fall within the call as the host saw it (on a
  // GPU; the emulation's clock is the steady clock), the first is moved to
  // the call's start.
  const int64_t hostBegin =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count();
  const int64_t hostEnd =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t1.time_since_epoch()).count();
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (size_t b = 0; b < blocks; ++b)
    for (uint32_t i = 0; i < std::min(counts[b], capacity); ++i) {
      first = std::min(first, int64_t(events[b * capacity + i].begin));
      last = std::max(last, int64_t(events[b * capacity + i].end));
    }
  const int64_t shift =
      first == INT64_MAX || (first >= hostBegin && last <= hostEnd) ? 0 : hostBegin - first;
  std::vector<std::vector<host::TbTrace>> perRank(static_cast<size_t>(plan_.nranks));
  for (size_t b = 0; b < blocks; ++b) {
    const int32_t globalTb = firstTb + static_cast<int32_t>(b);
    const PlanTb &tb = plan_.tbs[globalTb];
    auto &traces = perRank[static_cast<size_t>(tb.rank)];
    traces.resize(static_cast<size_t>(plan_.tbCount(tb.rank)));
    host::TbTrace &trace = traces[static_cast<size_t>(globalTb - plan_.rankTbBegin[tb.rank])];
    for (uint32_t i = 0; i < std::min(counts[b], capacity); ++i) {
      const DeviceTraceEvent &e = events[b * capacity + i];
      if (e.step < 0 || e.step >= tb.nSteps)
        continue;
      trace.events.push_back(host::TraceEvent{int64_t(e.begin) + shift, int64_t(e.end) + shift,
                                              e.iteration, &plan_.steps[tb.stepBegin + e.step],
                                              static_cast<uint8_t>(e.kind), e.elems});
    }
  }
  for (int32_t r = 0; r < plan_.nranks; ++r)
    if (!perRank[static_cast<size_t>(r)].empty())
      out.addCall(plan_, r, type, t0, t1, perRank[static_cast<size_t>(r)]);
  return llvm::Error::success();
}

llvm::Error CudaExecutor::collectEnqueued(Timeline &out, DataType type,
                                          std::chrono::steady_clock::time_point t0,
                                          std::chrono::steady_clock::time_point t1) {
  DeviceScope scoped = scope();
  if (!enqueueArmed)
    return llvm::Error::success();
  enqueueArmed = false;
  return collectTimeline(out, type, t0, t1);
}

} // namespace coll::interp::cuda
