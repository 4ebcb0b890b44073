//===- KernelsLL.cu - Persistent kernels of the LL protocol ---------------===//
//
// One translation unit per protocol, so that the ten element types of each
// compile in parallel.
//
//===----------------------------------------------------------------------===//

#include "device/Kernel.cuh"
#include "Kernels.h"

namespace coll::interp::cuda {

const void *kernelLL(uint8_t type, KernelBuild build) {
  return collectiveKernelFor<Proto::LL>(type, build);
}

} // namespace coll::interp::cuda
