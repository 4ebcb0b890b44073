//===- Kernels.h - Kernel entry points for the host side --------*- C++ -*-===//
//
// The kernels as `const void *` for cudaLaunchKernel and the occupancy API,
// so that the host side of the backend is plain C++ compiled by the host
// compiler. `type` is a DataType's value.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CUDA_KERNELS_H
#define COLL_INTERPRETER_CUDA_KERNELS_H

#include "coll/interpreter/Config.h"

#include <cstdint>

namespace coll::interp::cuda {

/// The builds of every collective kernel (device/Kernel.cuh): Narrow
/// (two 512-thread blocks per SM, 64 registers), Wide (one, 128 registers),
/// both with every connection at .gpu; CrossGpu (narrow bounds) for
/// launches with a connection to another GPU or through host memory, whose
/// connections each take their own scope.
enum class KernelBuild : uint8_t { Narrow, Wide, CrossGpu };

/// collectiveKernel<T, protocol, blocks per SM, cross-GPU>(KernelParams);
/// each records a timeline when the device state holds its buffers
/// (DeviceControl::traceEvents).
const void *kernelSimple(uint8_t type, KernelBuild build);
const void *kernelLL(uint8_t type, KernelBuild build);
const void *kernelLL128(uint8_t type, KernelBuild build);

/// averageKernel<T>(const RankPointers *, int32_t firstRank, int32_t nranks,
/// uint64_t elems).
const void *averageKernelFor(uint8_t type);

/// The reference kernels of device/References.cuh.
enum class ReferenceKernel { ReduceOnce, Exchange, BlockCopy, Fifo, Steps, Hops };
const void *referenceKernel(ReferenceKernel kind);

} // namespace coll::interp::cuda

#endif // COLL_INTERPRETER_CUDA_KERNELS_H
