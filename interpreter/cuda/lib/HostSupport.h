//===- HostSupport.h - Host-side helpers of the CUDA backend ----*- C++ -*-===//
//
// The parts of the CUDA backend's host side that make no CUDA calls, so that
// they are unit-tested on machines without a GPU: option checks, the
// watchdog report's wording and how DeviceBuffers mirrors host buffers.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_CUDA_LIB_HOSTSUPPORT_H
#define COLL_INTERPRETER_CUDA_LIB_HOSTSUPPORT_H

#include "device/DeviceTypes.h"

#include "coll/interpreter/DeviceExecutor.h"
#include "coll/interpreter/Plan.h"

#include "llvm/Support/Error.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace coll::interp::cuda {

/// Data bytes per FIFO slot for `proto`.
uint64_t slotBytes(const CudaOptions &options, Proto proto);

/// Rejects thread counts and slot sizes the kernel cannot use.
llvm::Error checkOptions(const CudaOptions &options, Proto proto);

/// The watchdog's report, worded as the host backend's, e.g. "watchdog: no
/// progress for 200 ms at rank 0 tb 0 (channel 0) step 0 (s) iteration 0:
/// waiting for a free slot to send on (the FIFO of 8 slots is full);
/// connection 0->1 channel 0: sender filled 8 slots, receiver freed 0".
std::string describeWatchdogReport(const Plan &plan, const WatchdogReport &report,
                                   uint32_t watchdogMs);

/// Where DeviceBuffers puts each rank's input and output: host ranges to
/// mirror (an input and an output that overlap share one), and for every
/// pointer the range it lies in (-1: null or empty) and its offset there.
struct MirrorLayout {
  struct Range {
    std::byte *begin;
    uint64_t bytes;
  };
  struct Place {
    int32_t range;
    uint64_t offset;
  };
  std::vector<Range> ranges;
  std::vector<Place> input, output; ///< per rank
};
MirrorLayout mirrorLayout(const CallArgs &host, uint64_t inputBytes, uint64_t outputBytes);

} // namespace coll::interp::cuda

#endif // COLL_INTERPRETER_CUDA_LIB_HOSTSUPPORT_H
