//===- Detect.cpp - The GPUs of this machine as a topology ----------------===//

#include "coll/synth/Detect.h"

#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace coll::synth;
using coll::hw::GpuInventory;

std::string coll::synth::ncclTopologyXml(const GpuInventory &inventory) {
  static const char *const speeds[] = {
      "", "2.5 GT/s", "5 GT/s", "8 GT/s", "16 GT/s", "32 GT/s", "64 GT/s"};
  std::string out;
  llvm::raw_string_ostream os(out);
  os << "<system version=\"1\">\n  <cpu numaid=\"0\" arch=\"x86_64\">\n";
  for (size_t i = 0; i < inventory.gpus.size(); ++i) {
    const GpuInventory::Gpu &g = inventory.gpus[i];
    const int gen = g.pcieGen >= 1 && g.pcieGen <= 6 ? g.pcieGen : 3;
    const int width = g.pcieWidth > 0 ? g.pcieWidth : 16;
    os << "    <pci busid=\"" << g.busId
       << "\" class=\"0x030200\" link_speed=\"" << speeds[gen]
       << "\" link_width=\"" << width << "\">\n";
    os << "      <gpu dev=\"" << i << "\" sm=\"" << g.sm << "\" rank=\"" << i
       << "\" gdr=\"1\">\n";
    // One element per GPU at the other end, with its link count, in
    // first-seen order; the links to NVSwitches in one, as NCCL writes them
    // (its switches are one node).
    std::vector<std::string> ends;
    std::map<std::string, int> counts;
    int toSwitches = 0;
    for (const GpuInventory::NvLink &l : g.nvlinks) {
      if (l.toSwitch)
        ++toSwitches;
      else if (counts[l.remote]++ == 0)
        ends.push_back(l.remote);
    }
    for (const std::string &remote : ends)
      os << "        <nvlink target=\"" << remote << "\" count=\""
         << counts[remote] << "\" tclass=\"0x030200\"/>\n";
    if (toSwitches)
      os << "        <nvlink target=\"fffffff:ffff:ff\" count=\"" << toSwitches
         << "\" tclass=\"0x068000\"/>\n";
    os << "      </gpu>\n    </pci>\n";
  }
  os << "  </cpu>\n</system>\n";
  return os.str();
}

llvm::Expected<Topology> coll::synth::topologyOf(const GpuInventory &inventory,
                                                 llvm::StringRef name) {
  auto topo = parseNcclTopologyXml(ncclTopologyXml(inventory), name);
  if (!topo)
    return topo.takeError();
  topo->name = name.str();
  return topo;
}

llvm::Expected<Topology> coll::synth::detectTopology() {
  auto inventory = hw::queryNvml();
  if (!inventory)
    return inventory.takeError();
  return topologyOf(*inventory, "nvml");
}
