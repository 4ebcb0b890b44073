//===- DeviceRunner.cpp - collrun's CUDA backends -------------------------===//

#include "DeviceRunner.h"

#include "coll/interpreter/CudaExecutor.h"

#include <memory>
#include <optional>

namespace coll::tools {

using namespace interp;

#if COLL_CUDA_EMULATION
llvm::Expected<DeviceRunner> makeEmulatedRunner(const Plan &plan, DataType type,
                                                uint32_t watchdogMs, uint32_t slotBytes,
                                                Timeline *timeline) {
  const char *backend = "cuda-emu backend on ";
#else
llvm::Expected<DeviceRunner> makeGpuRunner(const Plan &plan, DataType type, uint32_t watchdogMs,
                                           uint32_t slotBytes, Timeline *timeline) {
  const char *backend = "cuda backend on ";
#endif
  auto device = currentCudaDevice();
  if (!device)
    return device.takeError();
  CudaOptions options;
  options.watchdogMs = watchdogMs;
  if (slotBytes)
    options.simpleSlotBytes = options.llSlotBytes = options.ll128SlotBytes = slotBytes;
  auto created = CudaExecutor::create(plan, options);
  if (!created)
    return created.takeError();
  // Shared so that the runner can be copied into a std::function.
  std::shared_ptr<CudaExecutor> executor(std::move(*created));
  executor->setTimeline(timeline);
  auto buffers = std::make_shared<std::optional<DeviceBuffers>>();
  DeviceRunner runner;
  runner.note = backend + device->name;
  runner.run = [executor, buffers, type](CheckedCall &call,
                                         bool fresh) -> llvm::Expected<CallResult> {
    if (fresh) {
      buffers->reset();
      auto made = DeviceBuffers::create(call.args(), call.inputElems() * dataTypeSize(type),
                                        call.outputElems() * dataTypeSize(type));
      if (!made)
        return made.takeError();
      *buffers = std::move(*made);
    }
    if (llvm::Error err = (*buffers)->upload())
      return err;
    auto result = executor->run((*buffers)->args());
    if (!result)
      return result.takeError();
    if (llvm::Error err = (*buffers)->download())
      return err;
    return result;
  };
  return runner;
}

} // namespace coll::tools
