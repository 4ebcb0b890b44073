//===- Kernel.cuh - The persistent kernel --------------------------*- CUDA -*-===//
//
// One CUDA block per <tb> of every rank, all in one launch
// (docs/ARCHITECTURE.md §4). Each block copies its tb's steps into shared
// memory and runs the shared interpreter loop (StepSemantics.h) with the
// primitives of its protocol (Prims.h: PrimsSimple.h, PrimsLL.h,
// PrimsLL128.h), which own the memory ordering, the cooperation of the
// block's threads and the waiting. Only the __global__ entry reads
// threadIdx/blockIdx. The element-wise work is Reduce.h's, the timeline
// Timeline.h's.
//
// Memory model (PTX ISA, "Memory Consistency Model"; each synchronising
// access has the scope of what it connects: .gpu within one GPU, a
// connection's own in the CrossGpu build, docs/CUDA.md "Scopes"):
//
//  * Waits poll with acquire loads (ld.acquire): the load that observes a
//    release store is itself the acquire, and no fence follows. Publishing
//    is st.release. Only thread 0 of a block waits on counters and
//    dependency flags; bar.sync/bar.red (__syncthreads, __syncthreads_or)
//    synchronise the block's threads with it, and causality order is
//    transitive through barriers, so the data stores of every thread of the
//    producing block happen before the data loads of every thread of the
//    consuming block.
//  * Every prim ends with a block barrier. So a step's loads and stores all
//    precede thread 0's release of the send tail and of the tb's
//    dependency flag, and the last thread's release of the receive head
//    (any thread may release after the barrier; two threads release in
//    parallel), and the next step never reads what another thread of the
//    same block has not finished writing.
//  * Simple: the receiver frees a slot by releasing `head` after a barrier,
//    the sender acquires `head` before overwriting the slot, so the data
//    accesses of successive uses of a slot never race.
//  * Any protocol: where what thread 0 acquired in an earlier step (the
//    block's FifoSeen, written after that step's barrier) already covers a
//    step's slots, the step neither waits nor adds a barrier: that step's
//    closing barrier ordered the acquire before every thread's accesses now.
//  * LL: each 8-byte half of a 16-byte line is {4 data bytes, 4-byte flag}
//    (Protocol.h's llWord). Lines are stored with st.volatile.v2.u64 and
//    polled with ld.volatile.v2.u64. The ISA treats a vector access as one
//    access per element, and an aligned 64-bit element access is
//    single-copy atomic between strong (volatile) operations, so a half
//    whose flag matches carries its own data; no fence is needed.
//  * LL128: lanes 0-6 of an 8-lane group store their 16 data bytes, lane 7
//    stores data word 14; __syncwarp() then orders all eight lanes' stores
//    before lane 7's st.release of the flag word 15 (the CUDA
//    Programming Guide: "the call to __syncwarp(mask) strongly happens
//    before any warp thread named in mask is unblocked from the wait"; PTX
//    bar.warp.sync "guarantees memory ordering among threads participating
//    in barrier"). The receiver's lane 7 acquires the flag word, and
//    __syncwarp() orders that before the other lanes' loads of the line. The
//    data words therefore need no atomicity of the 128-byte store, which the
//    ISA does not promise.
//
// The hardware is reached only through Hardware.h (PTX under nvcc, host
// C++ for the CPU SIMT launcher otherwise), so this very source also runs on
// the CPU (docs/CUDA.md).
//
// Waiting is bounded: every spin polls the launch's abort flag (and the
// host's stop word, where the launch has one: KernelParams::hostStop) and, after
// the watchdog period (read from %globaltimer), claims the report, writes it
// into host-mapped memory, raises the abort flag and returns false; the
// interpreter loop then stops and the block exits.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CUDA_DEVICE_KERNEL_CUH
#define COLL_INTERPRETER_CUDA_DEVICE_KERNEL_CUH

#include "device/PrimsLL.h"
#include "device/PrimsLL128.h"
#include "device/PrimsSimple.h"

#include "DeviceTypes.h"
#include "Kernels.h"

#include "coll/interpreter/StepSemantics.h"

#include <cstdint>

namespace coll::interp::cuda {

/// Every kernel is built twice, for blocks of MaxThreadsPerBlock threads of
/// which this many must fit on one SM (the launch bound bounds the
/// registers): wide, 1 (128 registers, no spills: the cheapest steps), for
/// launches whose blocks fit one per SM; narrow, 2 (64 registers), for
/// larger plans, which it keeps at 512 threads per block where the wide
/// build would need fewer (docs/CUDA.md, "Occupancy").
inline constexpr int WideBlocksPerSm = 1;
inline constexpr int NarrowBlocksPerSm = 2;
// A third build, CrossGpu (narrow bounds), runs launches that have a
// connection to another GPU or through host memory: each connection's
// accesses take its scope (Prims.h). The other two know every scope is .gpu
// at compile time, so the choice costs a launch within one GPU nothing.
/// The registers of an SM, which the launch bound shares among its blocks.
inline constexpr int RegistersPerSm = 65536;
inline constexpr int KernelDataTypes = 0
#define COLL_DATA_TYPE(Enum, Name, CType, Kind) +1
#include "coll/interpreter/DataTypes.def"
    ;

/// One block per tb of every rank (or of one rank, from p.firstTb): gridDim.x
/// == number of tbs launched,
/// dynamic shared memory == p.maxSteps * sizeof(PlanStep), or with
/// p.maxSlices, sharedSliceOffset(p.maxSteps) + p.maxSlices * sizeof(CallSlice).
template <class T, Proto P, int MinBlocksPerSm, bool CrossGpu>
__global__ void __launch_bounds__(MaxThreadsPerBlock, MinBlocksPerSm)
    collectiveKernel(const KernelParams p) {
  PlanStep *const sharedSteps = dynamicShared<PlanStep>();
  __shared__ PlanTb tb;
  __shared__ uint32_t generation;
  __shared__ FifoSeen seen;
  const uint32_t tid = threadIdx.x, nthreads = blockDim.x;
  const int32_t tbIndex = p.firstTb + static_cast<int32_t>(blockIdx.x);
  auto *control = reinterpret_cast<DeviceControl *>(p.state);

  if (tid == 0) {
    tb = p.tbs[tbIndex];
#if COLL_CUDA_EMULATION
    ptx::noteRank(tb.rank); // the emulation's traffic counters
#endif
    seen = FifoSeen{0, 0};
    // The last block of the previous launch advanced it before that launch
    // ended; no block of this launch advances it before all have read it.
    generation = ptx::ldVolatile(&control->generation);
  }
  __syncthreads();
  // The tb's slices too, where the launch made room for them (p.maxSlices).
  // Then each step's sliceBegin counts from the tb's first slice: its own
  // copy in shared memory, so that the interpreter loop's slice base is 0
  // (a constant, where a base kept in a register for the whole launch is
  // one more thing to spill, and to reload on every step's path).
  const CallSlice *slices = p.slices;
  int32_t sliceBase = 0;
  if (p.maxSlices) {
    CallSlice *shared = reinterpret_cast<CallSlice *>(
        reinterpret_cast<unsigned char *>(sharedSteps) + sharedSliceOffset(p.maxSteps));
    for (int32_t i = static_cast<int32_t>(tid); i < tb.nSlices; i += static_cast<int32_t>(nthreads))
      shared[i] = p.slices[tb.sliceBegin + i];
    slices = shared;
    sliceBase = tb.sliceBegin;
  }
  // Each step's hasDep becomes the bits the interpreter loop tests
  // (StepSemantics.h: stepFlags), worked out here once for the launch.
  for (int32_t i = static_cast<int32_t>(tid); i < tb.nSteps; i += static_cast<int32_t>(nthreads)) {
    PlanStep step = p.steps[tb.stepBegin + i];
    step.sliceBegin -= sliceBase;
    step.hasDep = stepFlags(step, HasDirectSteps<Prims<T, P, CrossGpu>>::value, i, tb.nSteps);
    sharedSteps[i] = step;
  }
  __syncthreads();
#if COLL_CUDA_EMULATION
  ptx::noteRank(tb.rank);
#endif

  {
    Prims<T, P, CrossGpu> prims(p, tb, tbIndex, generation, &seen, tid, nthreads);
    const RankPointers &rank = p.ranks[tb.rank];
    RankBuffers<T> buffers{static_cast<T *>(rank.input), static_cast<T *>(rank.output),
                           static_cast<T *>(rank.scratch)};
    // The wide build holds each step in registers (StepSemantics.h); the
    // narrow ones, at 64 registers, would spill it (resources.expected).
    constexpr bool holdSteps = MinBlocksPerSm == WideBlocksPerSm;
    runThreadBlock<T, holdSteps, true>(prims, sharedSteps, tb.nSteps, slices, 0, buffers,
                                 p.iterations, p.sliceElems);
    prims.traceFinish();
  }
  ptx::noteStep(static_cast<uint32_t>(P), ptx::NoStep); // the emulation's step costs

  __syncthreads();
  // acq_rel: every other block's increment (and its read of `generation`
  // before it) happens before the last block's plain stores below. With a
  // relaxed atomicAdd those stores raced with the other blocks' accesses in
  // the PTX memory model (ThreadSanitizer found it on the CPU emulation).
  if (tid == 0 && ptx::atomicAddAcqRel(&control->finished, 1u) == gridDim.x - 1) {
    control->finished = 0;
    control->generation = generation + 1;
  }
}

/// avg: divides the reduced outputs by the rank count after the collective,
/// as the host backend does. blockIdx.y picks the rank (from firstRank).
template <class T>
__global__ void averageKernel(const RankPointers *ranks, int32_t firstRank, int32_t nranks,
                              uint64_t elems) {
  T *out = static_cast<T *>(ranks[firstRank + static_cast<int32_t>(blockIdx.y)].output);
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < elems;
       i += uint64_t(gridDim.x) * blockDim.x)
    out[i] = Arith<T>::divide(out[i], nranks);
}

/// The kernels of protocol P, indexed by DataType's value; `build`:
/// KernelBuild (Kernels.h). A launch records a timeline when the device
/// state holds its buffers (Prims::tracing): one kernel per build and type
/// serves both, which halves the kernels the build compiles (the check is a
/// register and a branch per step; docs/CUDA.md, "Timelines"). On the
/// emulation each is described with the registers ptxas gives its build, for
/// the occupancy query.
template <Proto P> const void *collectiveKernelFor(uint8_t type, KernelBuild build) {
  // [build][type]
  static const void *const kernels[3][KernelDataTypes] = {
      {
#define COLL_DATA_TYPE(Enum, Name, CType, Kind)                                                    \
  COLL_KERNEL_HANDLE(collectiveKernel<CType, P, NarrowBlocksPerSm, false>),
#include "coll/interpreter/DataTypes.def"
      },
      {
#define COLL_DATA_TYPE(Enum, Name, CType, Kind)                                                    \
  COLL_KERNEL_HANDLE(collectiveKernel<CType, P, WideBlocksPerSm, false>),
#include "coll/interpreter/DataTypes.def"
      },
      {
#define COLL_DATA_TYPE(Enum, Name, CType, Kind)                                                    \
  COLL_KERNEL_HANDLE(collectiveKernel<CType, P, NarrowBlocksPerSm, true>),
#include "coll/interpreter/DataTypes.def"
      }};
  static const bool described = [] {
    const int narrow = RegistersPerSm / int(MaxThreadsPerBlock * NarrowBlocksPerSm);
    const int wide = RegistersPerSm / int(MaxThreadsPerBlock * WideBlocksPerSm);
    ptx::describeKernels(&kernels[int(KernelBuild::Narrow)][0], KernelDataTypes, narrow);
    ptx::describeKernels(&kernels[int(KernelBuild::Wide)][0], KernelDataTypes, wide);
    ptx::describeKernels(&kernels[int(KernelBuild::CrossGpu)][0], KernelDataTypes, narrow);
    return true;
  }();
  (void)described;
  return kernels[int(build)][type];
}

} // namespace coll::interp::cuda

#endif // COLL_INTERPRETER_CUDA_DEVICE_KERNEL_CUH
