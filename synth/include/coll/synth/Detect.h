//===- Detect.h - The GPUs of this machine, from NVML ------------*- C++ -*-===//
//
// Topology detection for synthesis on the machine a job got (docs/SYNTHESIS.md,
// "Detecting the topology"): NVML, loaded with dlopen (libnvidia-ml.so.1,
// the driver's; nothing links it), says which GPUs there are, their PCI bus
// ids, compute capability and PCIe link, and for every active NVLink the
// bus id at its other end and whether that is an NVSwitch. That inventory
// becomes NCCL topology XML, read by the same reader as NCCL_TOPO_FILE, so
// bandwidths follow NCCL's derivation.
//
// An inventory also has a text form, written by `collsynth --topology nvml
// --inventory` on a GPU machine and read back anywhere: tests run recorded
// inventories of real machines through the same path.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_SYNTH_DETECT_H
#define COLL_SYNTH_DETECT_H

#include "coll/synth/Topology.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace coll::synth {

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

/// Asks NVML of this machine. Fails with the reason when NVML cannot be
/// loaded or initialised (no NVIDIA driver), or reports no GPU.
llvm::Expected<GpuInventory> queryNvml();

/// The text form: a first line "coll-gpu-inventory 1", then per GPU
///   gpu BUSID sm=90 pcie=5x16 name=NVIDIA H100 80GB HBM3
/// and per active NVLink of the GPU above
///   nvlink REMOTE_BUSID [switch]
void printInventory(const GpuInventory &inventory, llvm::raw_ostream &os);
llvm::Expected<GpuInventory> parseInventory(llvm::StringRef text, llvm::StringRef fileName);
/// Whether `text` is an inventory (its first line).
bool isInventory(llvm::StringRef text);

/// NCCL topology XML of `inventory`: every GPU under one CPU, in its PCIe
/// slot, its NVLinks grouped by the GPU at the other end (count), and those
/// to NVSwitches in one element of class 0x068000, as NCCL dumps them.
std::string ncclTopologyXml(const GpuInventory &inventory);

/// The topology of `inventory` (ncclTopologyXml, then its reader).
llvm::Expected<Topology> topologyOf(const GpuInventory &inventory, llvm::StringRef name);

/// queryNvml, then topologyOf: the GPUs of this machine as ranks 0..n-1 in
/// NVML's order. readTopologyFile("nvml") is this.
llvm::Expected<Topology> detectTopology();

} // namespace coll::synth

#endif // COLL_SYNTH_DETECT_H
