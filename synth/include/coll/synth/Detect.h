//===- Detect.h - The GPUs of this machine as a topology ---------*- C++ -*-===//
//
// Topology detection for synthesis on the machine a job got (docs/SYNTHESIS.md,
// "Detecting the topology"): NVML's inventory of the GPUs (coll/support/
// Hardware.h) becomes NCCL topology XML, read by the same reader as
// NCCL_TOPO_FILE, so that bandwidths follow NCCL's derivation.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_SYNTH_DETECT_H
#define COLL_SYNTH_DETECT_H

#include "coll/support/Hardware.h"
#include "coll/synth/Topology.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace coll::synth {

/// NCCL topology XML of `inventory`: every GPU under one CPU, in its PCIe
/// slot, its NVLinks grouped by the GPU at the other end (count), and those
/// to NVSwitches in one element of class 0x068000, as NCCL dumps them.
std::string ncclTopologyXml(const hw::GpuInventory &inventory);

/// The topology of `inventory` (ncclTopologyXml, then its reader).
llvm::Expected<Topology> topologyOf(const hw::GpuInventory &inventory, llvm::StringRef name);

/// hw::queryNvml, then topologyOf: the GPUs of this machine as ranks 0..n-1
/// in NVML's order. readTopologyFile("nvml") is this.
llvm::Expected<Topology> detectTopology();

} // namespace coll::synth

#endif // COLL_SYNTH_DETECT_H
