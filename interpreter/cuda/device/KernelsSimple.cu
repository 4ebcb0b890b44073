//===- KernelsSimple.cu - Persistent kernels of the Simple protocol -------===//
//
// One translation unit per protocol, so that the ten element types of each
// compile in parallel.
//
//===----------------------------------------------------------------------===//

#include "device/Kernel.cuh"
#include "Kernels.h"

namespace coll::interp::cuda {

const void *kernelSimple(uint8_t type, KernelBuild build) {
  return collectiveKernelFor<Proto::Simple>(type, build);
}

} // namespace coll::interp::cuda
