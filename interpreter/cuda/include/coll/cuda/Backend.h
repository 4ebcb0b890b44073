//===- coll/cuda/Backend.h - The CUDA backends' entry points ----*- C++ -*-===//
//
// Where a program gets a DeviceBackend (coll/interpreter/DeviceExecutor.h):
//
//   cudaBackend()        CollCuda: a GPU, built with nvcc (COLL_HAVE_CUDA);
//   emulatedBackend()    CollCudaEmu: the same sources on the CPU emulation
//                        of a GPU (every build unless COLL_ENABLE_CUDA_EMU=OFF),
//                        with its step-cost counters;
//   loadDeviceBackend()  CollCudaSupport: CollCuda as the plugin
//                        libcoll_cuda.so, for programs that link the
//                        emulation or no CUDA (libcoll.so, collrun).
//
// CollCuda and CollCudaEmu compile the same sources: a program links at most
// one of them.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_CUDA_BACKEND_H
#define COLL_CUDA_BACKEND_H

#include "coll/interpreter/DeviceExecutor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace coll::interp {

/// The backend this program links: CollCuda's GPU, or CollCudaEmu's CPU
/// emulation. Both libraries define the symbol collCudaBackendLinkedOnce, so
/// a program that links both fails to link instead of mixing their code.
DeviceBackend &cudaBackend();
DeviceBackend &emulatedBackend();

/// What the emulation's step-cost counters saw of one kind of step under one
/// protocol (docs/CUDA.md, "Step costs"), summed over `executions`. `step`
/// is the IR's name ("s", "rrc", ...) or "launch" for the kernel's own
/// prologue and epilogue (one execution per block). Per execution, each
/// count is the most that one thread of the block executed.
struct EmulatedStepCost {
  std::string protocol;
  std::string step;
  uint64_t executions = 0;
  uint64_t barriers = 0;     ///< block barriers (bar.sync, bar.red)
  uint64_t warpBarriers = 0; ///< warp barriers (bar.warp.sync, vote)
  uint64_t fences = 0;       ///< fence.acq_rel.gpu
  uint64_t sysFences = 0;    ///< fence.sc.sys
  uint64_t releases = 0;     ///< st.release.gpu
  uint64_t loads = 0;        ///< strong loads (ld.relaxed, ld.volatile), first poll only
  uint64_t acquires = 0;     ///< ld.acquire.gpu, first poll only
  uint64_t stores = 0;       ///< strong stores (st.relaxed, st.volatile)
  uint64_t atomics = 0;      ///< atom
};
/// Makes later launches of the emulated backend count their step costs
/// (CollCudaEmu only).
void countEmulatedStepCosts(bool on);
/// The counts of every counted launch so far, by protocol then step kind in
/// the IR's order, "launch" last; `reset` clears them.
std::vector<EmulatedStepCost> emulatedStepCosts(bool reset = false);

/// Where an access that the emulation's traffic counters saw went
/// (docs/CUDA.md, "Traffic").
enum class TrafficRegion : int {
  Own,   ///< the accessing rank's input, output, scratch or windows
  Peer,  ///< another rank's
  Fifo,  ///< a connection's FIFO slots
  Flag,  ///< FIFO heads and tails, dependency and signal flags, control words
  Other, ///< none of these (not the executor's)
};
inline constexpr int TrafficRegions = 5;
/// The global-memory bytes one rank read and wrote in one kind of step
/// under one protocol, summed over the counted launches. `step` is the IR's
/// name ("s", "rrc", ...) or "launch" for the kernel outside its steps.
struct EmulatedTraffic {
  int32_t rank = -1;
  std::string protocol;
  std::string step;
  uint64_t read[TrafficRegions] = {};    ///< by TrafficRegion
  uint64_t written[TrafficRegions] = {}; ///< by TrafficRegion
};
/// Makes later launches of the emulated backend count their traffic
/// (CollCudaEmu only).
void countEmulatedTraffic(bool on);
/// The bytes of every counted launch so far, by rank, protocol and step kind
/// (in the IR's order, "launch" last); `reset` clears them.
std::vector<EmulatedTraffic> emulatedTraffic(bool reset = false);

/// The GPU backend as a plugin (libcoll_cuda.so, CollCudaSupport): the
/// first of `paths` that loads and whose table comes from this build of
/// Coll. The error lists every path tried and why it failed. Each library
/// is loaded once and never unloaded.
llvm::Expected<DeviceBackend *> loadDeviceBackend(llvm::ArrayRef<std::string> paths);

} // namespace coll::interp

#endif // COLL_CUDA_BACKEND_H
