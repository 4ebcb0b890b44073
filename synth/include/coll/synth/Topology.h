//===- Topology.h - GPUs, switches and the links between them ---*- C++ -*-===//
//
// One description of a machine (docs/ARCHITECTURE.md §7) for the cost model, the
// synthesizer (collsynth) and the tuning tables (colltune): nodes (GPUs,
// switches, NICs, CPUs, PCIe switches) and directed links, each with a
// bandwidth in GB/s, a latency in microseconds, a count of physical links it
// bundles, and optionally a capacity group that several links share.
//
// Two readers: NCCL's topology XML (NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE),
// with bandwidths derived per GPU generation as NCCL derives them, and
// Coll's text format (docs/SYNTHESIS.md, "Topology text format"). Every
// reader error names the file and line and says what is wrong.
//
// GPUs are ranks in the order they are declared (text) or numbered by their
// `dev`/`rank` attribute (XML).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_SYNTH_TOPOLOGY_H
#define COLL_SYNTH_TOPOLOGY_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace coll::synth {

enum class NodeKind : uint8_t { Gpu, Switch, Nic, Cpu, Pci };
llvm::StringRef nodeKindName(NodeKind kind);

/// What a link is made of; the cost model picks per-hop latencies by it.
enum class LinkKind : uint8_t { NVLink, PCI, Net, Sys };
llvm::StringRef linkKindName(LinkKind kind);

struct Node {
  std::string name;
  NodeKind kind = NodeKind::Gpu;
  int32_t rank = -1; ///< GPUs: their rank; -1 for the others
  int32_t host = 0;  ///< the machine it sits in
};

/// One direction of a connection between two nodes.
struct Link {
  int32_t from = 0, to = 0; ///< node ids
  double bw = 0;            ///< GB/s, all `count` physical links together
  double latUs = 0;         ///< one-way latency of the hop
  int32_t count = 1;        ///< physical links bundled
  int32_t group = -1;       ///< capacity group, or -1
  LinkKind kind = LinkKind::NVLink;
};

/// A capacity that several links draw from (e.g. a PCIe uplink shared by a
/// GPU and a NIC, or a GPU's NVSwitch ports shared by all its peers).
struct Group {
  std::string name;
  double bw = 0; ///< GB/s
};

struct Topology {
  std::string name;
  std::vector<Node> nodes;
  std::vector<Link> links;
  std::vector<Group> groups;
  std::vector<int32_t> gpus; ///< node id of each rank

  int32_t numRanks() const { return static_cast<int32_t>(gpus.size()); }
  /// True when every pair of GPUs that talks does so over a direct link
  /// (no switch in between): the tree packer works on such graphs.
  bool gpusDirectlyLinked() const;
  /// The links that join rank `a`'s GPU to rank `b`'s directly (-1: none).
  int32_t directLink(int32_t a, int32_t b) const;
};

/// Reads `path` as NCCL topology XML when it starts with '<', as a GPU
/// inventory when it starts with "coll-gpu-inventory" (Detect.h), else as
/// the text format; "nvml" is this machine's GPUs as NVML reports them.
llvm::Expected<Topology> readTopologyFile(llvm::StringRef path);
llvm::Expected<Topology> parseTopologyText(llvm::StringRef text,
                                           llvm::StringRef fileName);
llvm::Expected<Topology> parseNcclTopologyXml(llvm::StringRef text,
                                              llvm::StringRef fileName);

/// The sub-topology of the given ranks (a partial allocation): the other
/// GPUs and every link touching them go; switches, NICs and CPUs stay.
/// Ranks are renumbered 0..n-1 in the order given.
llvm::Expected<Topology> restrictTopology(const Topology &topo,
                                          const std::vector<int32_t> &ranks);

/// readTopologyFile, then restrictTopology to `ranks` unless it is empty
/// (the tools' --topology and --ranks).
llvm::Expected<Topology> readTopologyFile(llvm::StringRef path,
                                          const std::vector<int32_t> &ranks);

/// NCCL's per-link NVLink bandwidth for a compute capability (e.g. 70).
double nvlinkBandwidth(int32_t sm);

/// The stable text form: the text format itself, every link one way (so
/// that the text reads back as the same topology); `G~` names the twin group
/// that the reverse direction of a duplex link in group `G` draws from.
void printTopology(const Topology &topo, llvm::raw_ostream &os);

} // namespace coll::synth

#endif // COLL_SYNTH_TOPOLOGY_H
