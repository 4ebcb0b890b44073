//===- TopologyXml.cpp - NCCL's topology XML ------------------------------===//
//
// Reads the file NCCL writes with NCCL_TOPO_DUMP_FILE and reads with
// NCCL_TOPO_FILE: <system> holds <cpu>s, which hold <pci> trees whose leaves
// are <gpu> (with <nvlink target= count= tclass=>) and <nic> (with <net
// speed=>). Bandwidths follow NCCL's derivation: NVLink per link by the
// GPU's SM generation, PCIe by width x generation, CPU-to-CPU by vendor and
// model, NICs by their speed in Mb/s. Every NVLink that targets an NVSwitch
// joins one switch node, as NCCL folds them.
//
//===----------------------------------------------------------------------===//

#include "coll/synth/Topology.h"
#include "coll/ir/XmlTree.h"

#include "llvm/ADT/StringMap.h"


#include <map>
#include <optional>

using namespace coll::synth;
using coll::ir::XmlElement;

namespace {
class XmlReader {
public:
  explicit XmlReader(llvm::StringRef file) : file(file.str()) {}
  llvm::Expected<Topology> read(llvm::StringRef text);

private:
  llvm::Error error(const XmlElement *e, const llvm::Twine &msg) {
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        file + ":" + llvm::Twine(e ? e->line : 0) + ": error: " +
            (e ? "<" + llvm::Twine(e->name) + ">: " : llvm::Twine()) + msg);
  }
  llvm::Error walk(const XmlElement *e, int32_t parent,
                   double parentBw);
  int32_t addNode(NodeKind kind, std::string name) {
    Node n;
    n.kind = kind;
    n.name = std::move(name);
    topo.nodes.push_back(n);
    return static_cast<int32_t>(topo.nodes.size() - 1);
  }
  void addDuplex(int32_t a, int32_t b, double bw, LinkKind kind, double lat) {
    Link l;
    l.from = a;
    l.to = b;
    l.bw = bw;
    l.kind = kind;
    l.latUs = lat;
    topo.links.push_back(l);
    std::swap(l.from, l.to);
    topo.links.push_back(l);
  }

  struct PendingNvlink {
    const XmlElement *elem;
    int32_t gpuNode;
    std::string target;
    int32_t count;
    int32_t sm;
    bool toSwitch;
  };
  std::string file;
  Topology topo;
  std::vector<PendingNvlink> nvlinks;
  llvm::StringMap<int32_t> gpuByBus;
  std::vector<std::pair<int32_t, int32_t>> gpuRanks; // (rank, node)
  std::vector<std::pair<int32_t, double>> cpus;      // (node, inter-CPU bw)
  int32_t netSwitch = -1;
};
} // namespace

/// PCIe bandwidth in GB/s as NCCL computes it: lanes x per-lane rate / 80,
/// the rate in NCCL's units ("8 GT/s" -> 60, gen3 x16 -> 12 GB/s).
static std::optional<double> pciBandwidth(const char *speed,
                                          const char *width) {
  if (!speed || !width)
    return std::nullopt;
  static const std::pair<const char *, double> rates[] = {
      {"2.5 GT/s", 15}, {"5 GT/s", 30},   {"8 GT/s", 60},
      {"16 GT/s", 120}, {"32 GT/s", 240}, {"64 GT/s", 480}};
  double rate = 0;
  for (auto [name, r] : rates)
    if (llvm::StringRef(speed).trim() == name)
      rate = r;
  int64_t lanes = 0;
  if (rate == 0 || llvm::StringRef(width).trim().getAsInteger(10, lanes) ||
      lanes <= 0)
    return std::nullopt;
  return lanes * rate / 80.0;
}

llvm::Error XmlReader::walk(const XmlElement *e, int32_t parent,
                            double parentBw) {
  for (const XmlElement &child : e->children) {
    const XmlElement *c = &child;
    llvm::StringRef name = c->name;
    if (name == "pci") {
      const char *bus = c->attribute("busid");
      if (!bus)
        return error(c, "missing attribute 'busid'");
      double bw = parentBw;
      if (auto b = pciBandwidth(c->attribute("link_speed"),
                                c->attribute("link_width")))
        bw = std::min(*b, parentBw);
      // A <pci> holding a <gpu> or a <nic> is that device; otherwise it is a
      // PCIe switch.
      const XmlElement *gpu = c->child("gpu");
      const XmlElement *nic = c->child("nic");
      if (gpu) {
        int32_t node = addNode(NodeKind::Gpu, std::string("gpu@") + bus);
        addDuplex(node, parent, bw, LinkKind::PCI, 1.0);
        int sm = 0;
        if (!gpu->intAttribute("sm", sm) || sm <= 0)
          return error(gpu, "missing or bad attribute 'sm' (the compute "
                            "capability, e.g. 70)");
        int rank = -1;
        if (!gpu->intAttribute("rank", rank) && !gpu->intAttribute("dev", rank))
          return error(gpu, "missing attribute 'rank' or 'dev'");
        if (rank < 0 || rank > 4095)
          return error(gpu, "rank " + llvm::Twine(rank) + " is out of range");
        for (auto [r, n] : gpuRanks)
          if (r == rank)
            return error(gpu, "two GPUs have rank " + llvm::Twine(rank));
        gpuRanks.push_back({rank, node});
        gpuByBus[llvm::StringRef(bus).lower()] = node;
        for (const XmlElement &link : gpu->children) {
          if (link.name != "nvlink")
            continue;
          const XmlElement *nv = &link;
          const char *target = nv->attribute("target");
          int count = 1;
          if (!target)
            return error(nv, "missing attribute 'target'");
          if (!nv->intAttribute("count", count) || count < 1)
            return error(nv, "missing or bad attribute 'count'");
          llvm::StringRef tclass =
              nv->attribute("tclass") ? nv->attribute("tclass") : "";
          nvlinks.push_back({nv, node, llvm::StringRef(target).lower(), count,
                             sm, tclass == "0x068000"});
        }
      } else if (nic) {
        int32_t node = addNode(NodeKind::Nic, std::string("nic@") + bus);
        addDuplex(node, parent, bw, LinkKind::PCI, 1.0);
        if (llvm::Error err = walk(c, node, bw))
          return err;
      } else {
        int32_t node = addNode(NodeKind::Pci, std::string("pci@") + bus);
        addDuplex(node, parent, bw, LinkKind::PCI, 1.0);
        if (llvm::Error err = walk(c, node, bw))
          return err;
      }
    } else if (name == "nic") {
      int32_t node = parent;
      if (topo.nodes[parent].kind != NodeKind::Nic) {
        node =
            addNode(NodeKind::Nic, "nic" + std::to_string(topo.nodes.size()));
        addDuplex(node, parent, parentBw, LinkKind::PCI, 1.0);
      }
      if (llvm::Error err = walk(c, node, parentBw))
        return err;
    } else if (name == "net") {
      int speed = 0;
      if (!c->intAttribute("speed", speed) || speed <= 0)
        return error(c, "missing or bad attribute 'speed' (Mb/s)");
      if (netSwitch < 0)
        netSwitch = addNode(NodeKind::Switch, "network");
      int32_t node = parent;
      if (topo.nodes[parent].kind != NodeKind::Nic) {
        node = addNode(NodeKind::Nic,
                       c->attribute("name") ? c->attribute("name") : "net");
        addDuplex(node, parent, parentBw, LinkKind::PCI, 1.0);
      }
      addDuplex(node, netSwitch, speed / 8000.0, LinkKind::Net, 5.0);
    } else if (name == "gpu") {
      return error(c,
                   "a <gpu> must sit inside the <pci> element of its bus id");
    }
    // Other elements (e.g. <nvs>, <c2c>) carry nothing the model uses.
  }
  return llvm::Error::success();
}

llvm::Expected<Topology> XmlReader::read(llvm::StringRef text) {
  auto doc = coll::ir::parseXmlTree(text, file);
  if (!doc)
    return doc.takeError();
  const XmlElement *system = &*doc;
  if (system->name != "system")
    return error(system, "the root element must be <system>");
  topo.name = llvm::StringRef(file).rsplit('/').second.empty()
                  ? file
                  : llvm::StringRef(file).rsplit('/').second.str();
  for (const XmlElement &cpuElement : system->children) {
    if (cpuElement.name != "cpu")
      continue;
    const XmlElement *cpu = &cpuElement;
    int32_t node = addNode(NodeKind::Cpu, "cpu" + std::to_string(cpus.size()));
    llvm::StringRef vendor =
        cpu->attribute("vendor") ? cpu->attribute("vendor") : "";
    llvm::StringRef arch = cpu->attribute("arch") ? cpu->attribute("arch") : "";
    int model = 0;
    cpu->intAttribute("modelid", model);
    double bw = 6.0; // QPI
    if (arch == "ppc64")
      bw = 32.0;
    else if (arch == "arm64")
      bw = 6.0;
    else if (vendor == "AuthenticAMD")
      bw = 16.0;
    else if (vendor == "GenuineIntel" && model >= 0x55)
      bw = 10.0; // Skylake and later
    cpus.push_back({node, bw});
    // Devices below a CPU reach it at the root complex's speed at most.
    if (llvm::Error err = walk(cpu, node, 5000.0))
      return err;
  }
  for (size_t i = 0; i < cpus.size(); ++i)
    for (size_t j = i + 1; j < cpus.size(); ++j)
      addDuplex(cpus[i].first, cpus[j].first,
                std::min(cpus[i].second, cpus[j].second), LinkKind::Sys, 1.0);
  int32_t nvswitch = -1;
  for (const PendingNvlink &nv : nvlinks) {
    double bw = nvlinkBandwidth(nv.sm) * nv.count;
    auto it = gpuByBus.find(nv.target);
    Link l;
    l.from = nv.gpuNode;
    l.bw = bw;
    l.count = nv.count;
    l.latUs = 0.6;
    l.kind = LinkKind::NVLink;
    if (it != gpuByBus.end() && !nv.toSwitch) {
      if (it->second == nv.gpuNode)
        return error(nv.elem, "an NVLink from a GPU to itself");
      l.to = it->second;
      topo.links.push_back(l); // the peer's own element gives the reverse
      continue;
    }
    if (!nv.toSwitch)
      return error(nv.elem, "target '" + nv.target +
                                "' is no GPU of this file and tclass is not "
                                "0x068000 (NVSwitch)");
    if (nvswitch < 0)
      nvswitch = addNode(NodeKind::Switch, "nvswitch");
    l.to = nvswitch;
    topo.links.push_back(l);
    std::swap(l.from, l.to);
    topo.links.push_back(l);
  }
  if (gpuRanks.empty())
    return error(system, "the file describes no <gpu>");
  llvm::sort(gpuRanks);
  for (size_t i = 0; i < gpuRanks.size(); ++i) {
    if (gpuRanks[i].first != static_cast<int32_t>(i))
      return error(system, "GPU ranks must be 0.." +
                               llvm::Twine(gpuRanks.size() - 1) + "; rank " +
                               llvm::Twine(i) + " is missing");
    topo.nodes[gpuRanks[i].second].rank = static_cast<int32_t>(i);
    topo.gpus.push_back(gpuRanks[i].second);
  }
  // NVLinks between GPUs must be declared from both sides.
  for (const Link &l : topo.links)
    if (l.kind == LinkKind::NVLink &&
        topo.nodes[l.from].kind == NodeKind::Gpu &&
        topo.nodes[l.to].kind == NodeKind::Gpu) {
      bool back = false;
      for (const Link &m : topo.links)
        back |= m.kind == LinkKind::NVLink && m.from == l.to && m.to == l.from;
      if (!back)
        return error(system, "the NVLink from " + topo.nodes[l.from].name +
                                 " to " + topo.nodes[l.to].name +
                                 " is not declared by the other GPU");
    }
  return topo;
}

llvm::Expected<Topology>
coll::synth::parseNcclTopologyXml(llvm::StringRef text,
                                  llvm::StringRef fileName) {
  XmlReader reader(fileName);
  return reader.read(text);
}
