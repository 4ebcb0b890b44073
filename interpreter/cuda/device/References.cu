//===- References.cu - collbench's one-launch references -------------------===//
//
// The handles of device/References.cuh's kernels for the host side
// (Kernels.h); lib/TimeReference.cpp launches and times them.
//
//===----------------------------------------------------------------------===//

#include "device/References.cuh"
#include "Kernels.h"

namespace coll::interp::cuda {

const void *referenceKernel(ReferenceKernel kind) {
  switch (kind) {
  case ReferenceKernel::ReduceOnce: return COLL_KERNEL_HANDLE(referenceReduceOnce);
  case ReferenceKernel::Exchange: return COLL_KERNEL_HANDLE(referenceExchange);
  case ReferenceKernel::BlockCopy: return COLL_KERNEL_HANDLE(referenceBlockCopy);
  case ReferenceKernel::Fifo: return COLL_KERNEL_HANDLE(referenceFifo);
  case ReferenceKernel::Steps: return COLL_KERNEL_HANDLE(referenceSteps);
  case ReferenceKernel::Hops: return COLL_KERNEL_HANDLE(referenceHops);
  }
  return nullptr;
}

} // namespace coll::interp::cuda
