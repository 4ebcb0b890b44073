//===- KernelsLL128.cu - Persistent kernels of the LL128 protocol ---------===//
//
// One translation unit per protocol, so that the ten element types of each
// compile in parallel.
//
//===----------------------------------------------------------------------===//

#include "device/Kernel.cuh"
#include "Kernels.h"

namespace coll::interp::cuda {

const void *kernelLL128(uint8_t type, KernelBuild build) {
  return collectiveKernelFor<Proto::LL128>(type, build);
}

} // namespace coll::interp::cuda
