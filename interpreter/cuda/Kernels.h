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

/// collectiveKernel<T, protocol, trace, blocks per SM>(KernelParams):
/// `trace` picks the kernels that record a timeline
/// (KernelParams::traceEvents), `wide` the build for launches whose blocks
/// fit one per SM (device/Kernel.cuh).
const void *kernelSimple(uint8_t type, bool trace, bool wide);
const void *kernelLL(uint8_t type, bool trace, bool wide);
const void *kernelLL128(uint8_t type, bool trace, bool wide);

/// averageKernel<T>(const RankPointers *, int32_t firstRank, int32_t nranks,
/// uint64_t elems).
const void *averageKernelFor(uint8_t type);

/// The reference kernels of device/References.cuh.
enum class ReferenceKernel { ReduceOnce, Exchange, BlockCopy, Fifo };
const void *referenceKernel(ReferenceKernel kind);

} // namespace coll::interp::cuda

#endif // COLL_INTERPRETER_CUDA_KERNELS_H
