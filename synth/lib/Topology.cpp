//===- Topology.cpp - Reading and restricting topologies ------------------===//
//
// The text format reader, shared helpers and partial allocations. NCCL's XML
// is read in TopologyXml.cpp, as CollIR's XML tree (coll/ir/XmlTree.h).
//
//===----------------------------------------------------------------------===//

#include "coll/synth/Topology.h"

#include "coll/synth/Detect.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <map>

using namespace coll::synth;

llvm::StringRef coll::synth::nodeKindName(NodeKind kind) {
  switch (kind) {
  case NodeKind::Gpu:
    return "gpu";
  case NodeKind::Switch:
    return "switch";
  case NodeKind::Nic:
    return "nic";
  case NodeKind::Cpu:
    return "cpu";
  case NodeKind::Pci:
    return "pci";
  }
  return "?";
}

llvm::StringRef coll::synth::linkKindName(LinkKind kind) {
  switch (kind) {
  case LinkKind::NVLink:
    return "nvlink";
  case LinkKind::PCI:
    return "pci";
  case LinkKind::Net:
    return "net";
  case LinkKind::Sys:
    return "sys";
  }
  return "?";
}

double coll::synth::nvlinkBandwidth(int32_t sm) {
  // NCCL's per-link figures (src/graph/topo.h), in GB/s.
  if (sm >= 90)
    return 20.6;
  if (sm == 86)
    return 12.0;
  if (sm >= 70)
    return 20.0;
  return 18.0;
}

bool Topology::gpusDirectlyLinked() const {
  for (const Link &l : links)
    if (nodes[l.from].kind != NodeKind::Gpu ||
        nodes[l.to].kind != NodeKind::Gpu)
      return false;
  return true;
}

int32_t Topology::directLink(int32_t a, int32_t b) const {
  for (size_t i = 0; i < links.size(); ++i)
    if (links[i].from == gpus[a] && links[i].to == gpus[b])
      return static_cast<int32_t>(i);
  return -1;
}

static double defaultLatency(LinkKind kind) {
  // One-way per-hop latencies in microseconds, in line with NCCL's hwLat
  // for the Simple protocol's per-hop part (NVLink < PCI < network).
  switch (kind) {
  case LinkKind::NVLink:
    return 0.6;
  case LinkKind::PCI:
    return 1.0;
  case LinkKind::Net:
    return 5.0;
  case LinkKind::Sys:
    return 1.0;
  }
  return 1.0;
}

namespace {
/// Reads the text format line by line.
class TextReader {
public:
  TextReader(llvm::StringRef file) : file(file.str()) {}
  llvm::Expected<Topology> read(llvm::StringRef text);

private:
  llvm::Error error(unsigned line, const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   file + ":" + llvm::Twine(line) +
                                       ": error: " + msg);
  }
  llvm::Error addNode(unsigned line, NodeKind kind,
                      llvm::ArrayRef<llvm::StringRef> words);
  llvm::Error addLink(unsigned line, llvm::ArrayRef<llvm::StringRef> words);
  llvm::Error addGroup(unsigned line, llvm::ArrayRef<llvm::StringRef> words);
  llvm::Expected<double> number(unsigned line, llvm::StringRef key,
                                llvm::StringRef value, bool positive);

  std::string file;
  Topology topo;
  llvm::StringMap<int32_t> nodeIds, groupIds;
};
} // namespace

llvm::Expected<double> TextReader::number(unsigned line, llvm::StringRef key,
                                          llvm::StringRef value,
                                          bool positive) {
  double v = 0;
  if (value.getAsDouble(v) || !std::isfinite(v) || v < 0 ||
      (positive && v == 0))
    return error(line, "'" + key + "' needs a " +
                           (positive ? "positive" : "non-negative") +
                           " number, not '" + value + "'");
  return v;
}

llvm::Error TextReader::addNode(unsigned line, NodeKind kind,
                                llvm::ArrayRef<llvm::StringRef> words) {
  if (words.size() < 2)
    return error(line, "'" + words[0] + "' needs a name");
  Node node;
  node.name = words[1].str();
  node.kind = kind;
  for (llvm::StringRef w : words.drop_front(2)) {
    auto [key, value] = w.split('=');
    if (key != "host")
      return error(line,
                   "unknown attribute '" + key + "' of a node (only host=)");
    int64_t h = 0;
    if (value.getAsInteger(10, h) || h < 0 || h > 1000000)
      return error(line,
                   "host= needs a non-negative integer, not '" + value + "'");
    node.host = static_cast<int32_t>(h);
  }
  if (!nodeIds.insert({node.name, static_cast<int32_t>(topo.nodes.size())})
           .second)
    return error(line, "node '" + node.name + "' is declared twice");
  if (kind == NodeKind::Gpu) {
    node.rank = topo.numRanks();
    topo.gpus.push_back(static_cast<int32_t>(topo.nodes.size()));
  }
  topo.nodes.push_back(node);
  return llvm::Error::success();
}

llvm::Error TextReader::addGroup(unsigned line,
                                 llvm::ArrayRef<llvm::StringRef> words) {
  if (words.size() != 3 || !words[2].startswith("bw="))
    return error(line, "expected 'group NAME bw=GBPS'");
  auto bw = number(line, "bw", words[2].drop_front(3), true);
  if (!bw)
    return bw.takeError();
  if (!groupIds.insert({words[1], static_cast<int32_t>(topo.groups.size())})
           .second)
    return error(line, "group '" + words[1] + "' is declared twice");
  topo.groups.push_back({words[1].str(), *bw});
  // The reverse direction of a duplex link draws from a twin group.
  groupIds.insert(
      {(words[1] + "~").str(), static_cast<int32_t>(topo.groups.size())});
  topo.groups.push_back({(words[1] + "~").str(), *bw});
  return llvm::Error::success();
}

llvm::Error TextReader::addLink(unsigned line,
                                llvm::ArrayRef<llvm::StringRef> words) {
  if (words.size() < 3)
    return error(line, "expected 'link FROM TO bw=GBPS [lat=US] [count=N] "
                       "[kind=nvlink|pci|net|sys] [group=NAME] [oneway]'");
  Link link;
  for (int i = 1; i <= 2; ++i) {
    auto it = nodeIds.find(words[i]);
    if (it == nodeIds.end())
      return error(line, "unknown node '" + words[i] +
                             "' (declare it before the link)");
    (i == 1 ? link.from : link.to) = it->second;
  }
  if (link.from == link.to)
    return error(line, "a link needs two different nodes");
  bool haveBw = false, haveLat = false, oneway = false;
  double perLink = 0;
  std::string group;
  for (llvm::StringRef w : words.drop_front(3)) {
    if (w == "oneway") {
      oneway = true;
      continue;
    }
    auto [key, value] = w.split('=');
    if (key == "bw") {
      auto v = number(line, key, value, true);
      if (!v)
        return v.takeError();
      perLink = *v;
      haveBw = true;
    } else if (key == "lat") {
      auto v = number(line, key, value, false);
      if (!v)
        return v.takeError();
      link.latUs = *v;
      haveLat = true;
    } else if (key == "count") {
      int64_t c = 0;
      if (value.getAsInteger(10, c) || c < 1 || c > 64)
        return error(line, "count= needs an integer from 1 to 64, not '" +
                               value + "'");
      link.count = static_cast<int32_t>(c);
    } else if (key == "kind") {
      if (value == "nvlink")
        link.kind = LinkKind::NVLink;
      else if (value == "pci")
        link.kind = LinkKind::PCI;
      else if (value == "net")
        link.kind = LinkKind::Net;
      else if (value == "sys")
        link.kind = LinkKind::Sys;
      else
        return error(line, "unknown link kind '" + value +
                               "' (nvlink, pci, net or sys)");
    } else if (key == "group") {
      if (!groupIds.count(value))
        return error(line, "unknown group '" + value +
                               "' (declare it before the link)");
      group = value.str();
    } else {
      return error(line, "unknown link attribute '" + w + "'");
    }
  }
  if (!haveBw)
    return error(line, "the link needs bw=GBPS (per physical link)");
  link.bw = perLink * link.count;
  if (!haveLat)
    link.latUs = defaultLatency(link.kind);
  if (!group.empty())
    link.group = groupIds.lookup(group);
  topo.links.push_back(link);
  if (!oneway) {
    Link back = link;
    std::swap(back.from, back.to);
    if (!group.empty())
      back.group = groupIds.lookup(group + "~");
    topo.links.push_back(back);
  }
  return llvm::Error::success();
}

llvm::Expected<Topology> TextReader::read(llvm::StringRef text) {
  unsigned lineNo = 0;
  while (!text.empty()) {
    auto [line, rest] = text.split('\n');
    text = rest;
    ++lineNo;
    line = line.split('#').first.trim();
    if (line.empty())
      continue;
    llvm::SmallVector<llvm::StringRef, 8> words;
    line.split(words, ' ', -1, false);
    for (auto &w : words)
      w = w.trim();
    llvm::erase_if(words, [](llvm::StringRef w) { return w.empty(); });
    llvm::StringRef kw = words[0];
    llvm::Error err = llvm::Error::success();
    if (kw == "topology") {
      if (words.size() != 2)
        return error(lineNo, "expected 'topology NAME'");
      topo.name = words[1].str();
      continue;
    }
    if (kw == "gpu")
      err = addNode(lineNo, NodeKind::Gpu, words);
    else if (kw == "switch")
      err = addNode(lineNo, NodeKind::Switch, words);
    else if (kw == "nic")
      err = addNode(lineNo, NodeKind::Nic, words);
    else if (kw == "cpu")
      err = addNode(lineNo, NodeKind::Cpu, words);
    else if (kw == "pci")
      err = addNode(lineNo, NodeKind::Pci, words);
    else if (kw == "link")
      err = addLink(lineNo, words);
    else if (kw == "group")
      err = addGroup(lineNo, words);
    else
      return error(
          lineNo,
          "unknown statement '" + kw +
              "' (topology, gpu, switch, nic, cpu, pci, group or link)");
    if (err)
      return err;
  }
  if (topo.gpus.empty())
    return error(lineNo, "the topology declares no GPU");
  if (topo.name.empty())
    topo.name = llvm::StringRef(file).rsplit('/').second.empty()
                    ? file
                    : llvm::StringRef(file).rsplit('/').second.str();
  return topo;
}

llvm::Expected<Topology>
coll::synth::parseTopologyText(llvm::StringRef text, llvm::StringRef fileName) {
  TextReader reader(fileName);
  return reader.read(text);
}

llvm::Expected<Topology> coll::synth::readTopologyFile(llvm::StringRef path) {
  if (path == "nvml")
    return detectTopology();
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf)
    return llvm::createStringError(
        buf.getError(),
        path + ": error: cannot read: " + buf.getError().message());
  llvm::StringRef text = (*buf)->getBuffer();
  if (text.ltrim().startswith("<"))
    return parseNcclTopologyXml(text, path);
  if (hw::isInventory(text)) {
    auto inventory = hw::parseInventory(text, path);
    if (!inventory)
      return inventory.takeError();
    return topologyOf(*inventory, path);
  }
  return parseTopologyText(text, path);
}

llvm::Expected<Topology> coll::synth::readTopologyFile(llvm::StringRef path,
                                                       const std::vector<int32_t> &ranks) {
  auto topo = readTopologyFile(path);
  if (!topo || ranks.empty())
    return topo;
  return restrictTopology(*topo, ranks);
}

llvm::Expected<Topology>
coll::synth::restrictTopology(const Topology &topo,
                              const std::vector<int32_t> &ranks) {
  std::vector<int32_t> keep(topo.nodes.size(), 1);
  for (int32_t g : topo.gpus)
    keep[g] = 0;
  for (int32_t r : ranks) {
    if (r < 0 || r >= topo.numRanks())
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "rank " + std::to_string(r) + " is not a GPU of topology '" +
              topo.name + "' (it has " + std::to_string(topo.numRanks()) + ")");
    if (keep[topo.gpus[r]])
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "rank " + std::to_string(r) +
                                         " is listed twice");
    keep[topo.gpus[r]] = 1;
  }
  Topology out;
  out.name = topo.name + "[";
  for (size_t i = 0; i < ranks.size(); ++i)
    out.name += (i ? "," : "") + std::to_string(ranks[i]);
  out.name += "]";
  out.groups = topo.groups;
  std::vector<int32_t> newId(topo.nodes.size(), -1);
  for (size_t n = 0; n < topo.nodes.size(); ++n)
    if (keep[n] && topo.nodes[n].kind != NodeKind::Gpu) {
      newId[n] = static_cast<int32_t>(out.nodes.size());
      out.nodes.push_back(topo.nodes[n]);
    }
  // GPUs in the order given, so that rank i is ranks[i].
  for (int32_t r : ranks) {
    int32_t n = topo.gpus[r];
    newId[n] = static_cast<int32_t>(out.nodes.size());
    Node node = topo.nodes[n];
    node.rank = out.numRanks();
    out.gpus.push_back(newId[n]);
    out.nodes.push_back(node);
  }
  for (const Link &l : topo.links)
    if (newId[l.from] >= 0 && newId[l.to] >= 0) {
      Link c = l;
      c.from = newId[l.from];
      c.to = newId[l.to];
      out.links.push_back(c);
    }
  return out;
}

void coll::synth::printTopology(const Topology &topo, llvm::raw_ostream &os) {
  os << "topology " << topo.name << "\n";
  for (const Group &g : topo.groups)
    if (!llvm::StringRef(g.name).endswith("~"))
      os << "group " << g.name << " bw=" << llvm::format("%g", g.bw) << "\n";
  // Other nodes first, then the GPUs in rank order (the text format numbers
  // ranks by declaration).
  for (const Node &n : topo.nodes)
    if (n.kind != NodeKind::Gpu)
      os << nodeKindName(n.kind) << " " << n.name << " host=" << n.host << "\n";
  for (int32_t g : topo.gpus)
    os << "gpu " << topo.nodes[g].name << " host=" << topo.nodes[g].host
       << "\n";
  for (const Link &l : topo.links) {
    os << "link " << topo.nodes[l.from].name << " " << topo.nodes[l.to].name
       << " bw=" << llvm::format("%g", l.bw / l.count) << " count=" << l.count
       << " lat=" << llvm::format("%g", l.latUs)
       << " kind=" << linkKindName(l.kind);
    if (l.group >= 0)
      os << " group=" << topo.groups[l.group].name; // "G~": G's reverse twin
    os << " oneway\n";
  }
}
