//===- Hardware.h - The GPUs of this machine, from NVML ---------*- C++ -*-===//
//
// What NVML (libnvidia-ml.so.1, the driver's; loaded with dlopen, never
// linked) says about the GPUs of this machine: their PCI bus ids, compute
// capability and PCIe link, and for every active NVLink the bus id at its
// other end and whether that is an NVSwitch. Synthesis turns an inventory
// into a topology (coll/synth/Detect.h).
//
// An inventory also has a text form, written by `collsynth --topology nvml
// --inventory` on a GPU machine and read back anywhere: tests run recorded
// inventories of real machines through the same path.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_SUPPORT_HARDWARE_H
#define COLL_SUPPORT_HARDWARE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace coll::hw {

/// What NVML reports of the GPUs of one machine.
struct GpuInventory {
  struct NvLink {
    std::string remote;    ///< bus id at the other end
    bool toSwitch = false; ///< the other end is an NVSwitch
  };
  struct Gpu {
    std::string busId; ///< "0000:06:00.0", as NCCL writes it
    std::string name;  ///< "NVIDIA H100 80GB HBM3"
    int32_t sm = 0;    ///< compute capability, major * 10 + minor
    int32_t pcieGen = 0, pcieWidth = 0; ///< the link's maximum; 0 unknown
    std::vector<NvLink> nvlinks;        ///< one per active link
  };
  std::vector<Gpu> gpus; ///< in NVML's order (CUDA_VISIBLE_DEVICES does not apply)
};

/// Asks NVML of this machine, loading `library`. Fails with the reason when
/// NVML cannot be loaded or initialised (no NVIDIA driver), or reports no GPU.
llvm::Expected<GpuInventory> queryNvml(const std::string &library = "libnvidia-ml.so.1");

/// The text form: a first line "coll-gpu-inventory 1", then per GPU
///   gpu BUSID sm=90 pcie=5x16 name=NVIDIA H100 80GB HBM3
/// and per active NVLink of the GPU above
///   nvlink REMOTE_BUSID [switch]
void printInventory(const GpuInventory &inventory, llvm::raw_ostream &os);
llvm::Expected<GpuInventory> parseInventory(llvm::StringRef text, llvm::StringRef fileName);
/// Whether `text` is an inventory (its first line).
bool isInventory(llvm::StringRef text);

} // namespace coll::hw

#endif // COLL_SUPPORT_HARDWARE_H
