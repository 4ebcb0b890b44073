//===- AverageKernel.cu - The division after an avg reduction -------------===//

#include "device/Kernel.cuh"
#include "Kernels.h"

namespace coll::interp::cuda {

const void *averageKernelFor(uint8_t type) {
  static const void *const table[] = {
#define COLL_DATA_TYPE(Enum, Name, CType, Kind)                                                    \
  COLL_KERNEL_HANDLE(averageKernel<CType>),
#include "coll/interpreter/DataTypes.def"
  };
  return table[type];
}

} // namespace coll::interp::cuda
