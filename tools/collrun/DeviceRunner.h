//===- DeviceRunner.h - collrun's CUDA backends -----------------*- C++ -*-===//
//
// The CUDA backend for collrun, on a GPU (--backend cuda) or on the CPU
// emulation (--backend cuda-emu). DeviceRunner.cpp is compiled once per
// device, with COLL_CUDA_EMULATION 0 and 1, so that the executor code is the
// same for both.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_TOOLS_COLLRUN_DEVICERUNNER_H
#define COLL_TOOLS_COLLRUN_DEVICERUNNER_H

#include "coll/interpreter/Check.h"
#include "coll/interpreter/HostExecutor.h"
#include "coll/interpreter/Plan.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <string>

namespace coll::tools {

struct DeviceRunner {
  std::string note; ///< "cuda backend on <device name>"
  /// Copies the call's buffers to the device (`fresh`: allocates them),
  /// runs it and copies them back.
  std::function<llvm::Expected<interp::CallResult>(interp::CheckedCall &, bool fresh)> run;
};

/// For a GPU; "no CUDA device: ..." without one. `timeline`: where every
/// call's timeline goes (CudaExecutor::setTimeline), or null.
llvm::Expected<DeviceRunner> makeGpuRunner(const interp::Plan &plan, interp::DataType type,
                                           uint32_t watchdogMs, uint32_t slotBytes,
                                           interp::Timeline *timeline);
/// On the CPU emulation of the GPU.
llvm::Expected<DeviceRunner> makeEmulatedRunner(const interp::Plan &plan, interp::DataType type,
                                                uint32_t watchdogMs, uint32_t slotBytes,
                                                interp::Timeline *timeline);

} // namespace coll::tools

#endif // COLL_TOOLS_COLLRUN_DEVICERUNNER_H
