//===- Timeline.h - A block's timeline, recorded on the device ----*- CUDA -*-===//
//
// KernelParams::traceEvents, written by each block's thread 0 with
// %globaltimer stamps: its steps, their elements and the block's waits
// (docs/CUDA.md, "Timelines").
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CUDA_DEVICE_TIMELINE_H
#define COLL_INTERPRETER_CUDA_DEVICE_TIMELINE_H

#include "device/Hardware.h"

#include "DeviceTypes.h"

#include <cstdint>

namespace coll::interp::cuda {

// Thread 0 of each block records, in launches whose device state
// (DeviceControl) holds the buffers (Prims::tracing); it keeps its own
// state there too (traceCounts: per block the events so far and 1 + the
// open step's, 0 for none). `block` is the block's index in its launch.

namespace timeline {

/// Adds an event (counted even when it does not fit); `open`: it is the
/// step whose elements follow.
__device__ inline void add(const DeviceControl &c, uint32_t block, uint64_t begin, uint64_t end,
                           uint64_t iteration, int32_t step, uint32_t kind, bool open) {
  uint32_t *state = c.traceCounts + 2 * uint64_t(block);
  const uint32_t index = state[0]++;
  if (index < c.traceCapacity) {
    DeviceTraceEvent &e = c.traceEvents[uint64_t(block) * c.traceCapacity + index];
    e.begin = begin;
    e.end = end;
    e.iteration = iteration;
    e.elems = 0;
    e.step = step;
    e.kind = kind;
  }
  if (open)
    state[1] = index + 1;
}

/// Ends the open step at `now`.
__device__ inline void close(const DeviceControl &c, uint32_t block, uint64_t now) {
  uint32_t *state = c.traceCounts + 2 * uint64_t(block);
  if (state[1] != 0 && state[1] - 1 < c.traceCapacity)
    c.traceEvents[uint64_t(block) * c.traceCapacity + state[1] - 1].end = now;
  state[1] = 0;
}

/// A step starts: the previous one ends.
__device__ inline void step(const DeviceControl &c, uint32_t block, uint64_t iteration,
                            int32_t step) {
  const uint64_t now = ptx::globalTimer();
  close(c, block, now);
  add(c, block, now, now, iteration, step, 0, true);
}

__device__ inline void elems(const DeviceControl &c, uint32_t block, uint64_t n) {
  const uint32_t *state = c.traceCounts + 2 * uint64_t(block);
  if (state[1] != 0 && state[1] - 1 < c.traceCapacity)
    c.traceEvents[uint64_t(block) * c.traceCapacity + state[1] - 1].elems += n;
}

__device__ inline void finish(const DeviceControl &c, uint32_t block) {
  close(c, block, ptx::globalTimer());
}

} // namespace timeline

} // namespace coll::interp::cuda

#endif // COLL_INTERPRETER_CUDA_DEVICE_TIMELINE_H
