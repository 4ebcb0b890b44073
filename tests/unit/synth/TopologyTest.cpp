//===- TopologyTest.cpp - Reading topologies, and their errors ------------===//

#include "coll/synth/Topology.h"

#include <gtest/gtest.h>

using namespace coll::synth;

namespace {

std::string errorOf(llvm::Expected<Topology> t) {
  if (t)
    return "";
  return llvm::toString(t.takeError());
}

TEST(TopologyText, ReadsNodesLinksAndGroups) {
  auto t = parseTopologyText("topology tiny\n"
                             "gpu a\ngpu b  # comment\nswitch s host=1\n"
                             "group up bw=12\n"
                             "link a b bw=20 count=2\n"
                             "link a s bw=12 kind=pci group=up oneway\n",
                             "tiny.topo");
  ASSERT_TRUE(!!t) << llvm::toString(t.takeError());
  EXPECT_EQ(t->name, "tiny");
  EXPECT_EQ(t->numRanks(), 2);
  ASSERT_EQ(t->links.size(), 3u);
  EXPECT_DOUBLE_EQ(t->links[0].bw, 40.0);
  EXPECT_EQ(t->links[0].count, 2);
  EXPECT_EQ(t->links[1].from, 1); // the reverse direction
  EXPECT_EQ(t->links[2].kind, LinkKind::PCI);
  EXPECT_EQ(t->links[2].group, 0);
  EXPECT_EQ(t->nodes[2].host, 1);
  EXPECT_EQ(t->directLink(0, 1), 0);
}

TEST(TopologyText, ErrorsNameFileLineAndCause) {
  EXPECT_EQ(errorOf(parseTopologyText("gpu a\nlink a b bw=1\n", "x.topo")),
            "x.topo:2: error: unknown node 'b' (declare it before the link)");
  EXPECT_EQ(errorOf(parseTopologyText("gpu a\ngpu b\nlink a b bw=fast\n", "x.topo")),
            "x.topo:3: error: 'bw' needs a positive number, not 'fast'");
  EXPECT_EQ(errorOf(parseTopologyText("gpu a\ngpu b\nlink a b\n", "x.topo")),
            "x.topo:3: error: the link needs bw=GBPS (per physical link)");
  EXPECT_EQ(errorOf(parseTopologyText("gpu a\ngpu a\n", "x.topo")),
            "x.topo:2: error: node 'a' is declared twice");
  EXPECT_EQ(errorOf(parseTopologyText("\n\nwire a b\n", "x.topo")),
            "x.topo:3: error: unknown statement 'wire' (topology, gpu, switch, nic, cpu, pci, "
            "group or link)");
  EXPECT_EQ(errorOf(parseTopologyText("gpu a\ngpu b\nlink a b bw=1 count=0\n", "x.topo")),
            "x.topo:3: error: count= needs an integer from 1 to 64, not '0'");
  EXPECT_EQ(errorOf(parseTopologyText("# nothing\n", "x.topo")),
            "x.topo:1: error: the topology declares no GPU");
  EXPECT_EQ(errorOf(parseTopologyText("gpu a\ngpu b\nlink a b bw=1 group=g\n", "x.topo")),
            "x.topo:3: error: unknown group 'g' (declare it before the link)");
}

const char *const twoGpuXml = R"(<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
    <pci busid="0000:01:00.0" class="0x030200" link_speed="16 GT/s" link_width="16">
      <gpu dev="0" sm="80" rank="0" gdr="1">
        <nvlink target="0000:02:00.0" count="4" tclass="0x030200"/>
      </gpu>
    </pci>
    <pci busid="0000:02:00.0" class="0x030200" link_speed="8 GT/s" link_width="16">
      <gpu dev="1" sm="80" rank="1" gdr="1">
        <nvlink target="0000:01:00.0" count="4" tclass="0x030200"/>
      </gpu>
    </pci>
    <pci busid="0000:03:00.0" class="0x020000" link_speed="8 GT/s" link_width="16">
      <nic><net name="mlx5_0" dev="0" speed="100000" port="1"/></nic>
    </pci>
  </cpu>
</system>
)";

TEST(TopologyXml, DerivesBandwidthsAsNccl) {
  auto t = parseNcclTopologyXml(twoGpuXml, "two.xml");
  ASSERT_TRUE(!!t) << llvm::toString(t.takeError());
  EXPECT_EQ(t->numRanks(), 2);
  double nv = 0, pciGen4 = 0, pciGen3 = 0, net = 0;
  for (const Link &l : t->links) {
    if (l.kind == LinkKind::NVLink && l.from == t->gpus[0])
      nv = l.bw;
    if (l.kind == LinkKind::PCI && l.from == t->gpus[0])
      pciGen4 = l.bw;
    if (l.kind == LinkKind::PCI && l.from == t->gpus[1])
      pciGen3 = l.bw;
    if (l.kind == LinkKind::Net)
      net = l.bw;
  }
  EXPECT_DOUBLE_EQ(nv, 4 * 20.0); // SM80: 20 GB/s per link
  EXPECT_DOUBLE_EQ(pciGen4, 24.0);
  EXPECT_DOUBLE_EQ(pciGen3, 12.0);
  EXPECT_DOUBLE_EQ(net, 12.5);
  EXPECT_DOUBLE_EQ(nvlinkBandwidth(70), 20.0);
  EXPECT_DOUBLE_EQ(nvlinkBandwidth(60), 18.0);
  EXPECT_DOUBLE_EQ(nvlinkBandwidth(90), 20.6);
}

TEST(TopologyXml, ErrorsNameFileLineAndCause) {
  EXPECT_EQ(errorOf(parseNcclTopologyXml("<system>\n<cpu>\n</system>\n", "bad.xml")).substr(0, 33),
            "bad.xml:2: error: malformed XML: "); // the unclosed <cpu>
  EXPECT_EQ(errorOf(parseNcclTopologyXml("<machine/>\n", "bad.xml")),
            "bad.xml:1: error: <machine>: the root element must be <system>");
  EXPECT_EQ(errorOf(parseNcclTopologyXml("<system>\n<cpu>\n<pci busid=\"1\">\n"
                                         "<gpu dev=\"0\"/>\n</pci></cpu></system>",
                                         "bad.xml")),
            "bad.xml:4: error: <gpu>: missing or bad attribute 'sm' (the compute "
            "capability, e.g. 70)");
  EXPECT_EQ(errorOf(parseNcclTopologyXml(
                "<system>\n<cpu>\n<pci busid=\"1\">\n<gpu dev=\"0\" sm=\"70\">\n"
                "<nvlink target=\"9\" count=\"1\"/>\n</gpu></pci></cpu></system>",
                "bad.xml")),
            "bad.xml:5: error: <nvlink>: target '9' is no GPU of this file and tclass is "
            "not 0x068000 (NVSwitch)");
  EXPECT_EQ(errorOf(parseNcclTopologyXml("<system>\n</system>\n", "bad.xml")),
            "bad.xml:1: error: <system>: the file describes no <gpu>");
}

TEST(TopologyFiles, BundledDescriptionsRead) {
  for (const char *name : {"dgx1-v100.topo", "dgx1-v100.xml", "ndv2.topo", "dgx-a100.xml",
                           "dgx-h100.xml", "cluster-2x8.topo"}) {
    auto t = readTopologyFile(std::string(COLL_TOPOLOGY_DIR) + "/" + name);
    ASSERT_TRUE(!!t) << name << ": " << llvm::toString(t.takeError());
    EXPECT_GE(t->numRanks(), 8) << name;
  }
  auto missing = readTopologyFile("/nonexistent/x.topo");
  ASSERT_FALSE(!!missing);
  EXPECT_NE(llvm::toString(missing.takeError()).find("/nonexistent/x.topo: error: cannot read"),
            std::string::npos);
}

TEST(TopologyFiles, Dgx1HasTheHybridCubeMesh) {
  auto t = readTopologyFile(std::string(COLL_TOPOLOGY_DIR) + "/dgx1-v100.topo");
  ASSERT_TRUE(!!t);
  for (int32_t g = 0; g < 8; ++g) {
    int32_t links = 0;
    for (const Link &l : t->links)
      if (l.kind == LinkKind::NVLink && l.from == t->gpus[g])
        links += l.count;
    EXPECT_EQ(links, 6) << "GPU " << g;
  }
  EXPECT_EQ(t->links[t->directLink(0, 3)].count, 2);
  EXPECT_EQ(t->links[t->directLink(0, 1)].count, 1);
  EXPECT_EQ(t->directLink(0, 5), -1);
}

TEST(TopologyRestrict, KeepsTheGivenGpus) {
  auto t = readTopologyFile(std::string(COLL_TOPOLOGY_DIR) + "/dgx1-v100.topo");
  ASSERT_TRUE(!!t);
  auto part = restrictTopology(*t, {4, 0, 5});
  ASSERT_TRUE(!!part) << llvm::toString(part.takeError());
  EXPECT_EQ(part->numRanks(), 3);
  EXPECT_EQ(part->nodes[part->gpus[0]].name, "gpu4");
  EXPECT_GE(part->directLink(0, 1), 0);  // gpu4-gpu0
  EXPECT_EQ(part->directLink(1, 2), -1); // gpu0-gpu5
  auto bad = restrictTopology(*t, {0, 9});
  ASSERT_FALSE(!!bad);
  EXPECT_EQ(llvm::toString(bad.takeError()),
            "rank 9 is not a GPU of topology 'dgx1-v100' (it has 8)");
  auto twice = restrictTopology(*t, {1, 1});
  ASSERT_FALSE(!!twice);
  EXPECT_EQ(llvm::toString(twice.takeError()), "rank 1 is listed twice");
}

} // namespace

namespace {
TEST(TopologyText, PrintedFormReadsBack) {
  auto t = parseTopologyText("topology g\ngpu a\ngpu b\nswitch s\ngroup up bw=12\n"
                             "link a s bw=12 kind=pci group=up\nlink b s bw=12 kind=pci\n"
                             "link a b bw=20 count=2 lat=0.5\n",
                             "g.topo");
  ASSERT_TRUE(!!t) << llvm::toString(t.takeError());
  std::string once, twice;
  llvm::raw_string_ostream a(once), b(twice);
  printTopology(*t, a);
  auto back = parseTopologyText(a.str(), "printed.topo");
  ASSERT_TRUE(!!back) << llvm::toString(back.takeError()) << "\n" << once;
  printTopology(*back, b);
  EXPECT_EQ(a.str(), b.str());
  ASSERT_EQ(back->links.size(), t->links.size());
  for (size_t i = 0; i < t->links.size(); ++i) {
    EXPECT_EQ(back->links[i].group, t->links[i].group);
    EXPECT_DOUBLE_EQ(back->links[i].bw, t->links[i].bw);
    EXPECT_DOUBLE_EQ(back->links[i].latUs, t->links[i].latUs);
  }
}
} // namespace

namespace {
TEST(TopologyXml, PrintedFormReadsBackAsText) {
  auto x = readTopologyFile(std::string(COLL_TOPOLOGY_DIR) + "/dgx-a100.xml");
  ASSERT_TRUE(!!x);
  std::string once, twice;
  llvm::raw_string_ostream a(once), b(twice);
  printTopology(*x, a);
  auto back = parseTopologyText(a.str(), "printed.topo");
  ASSERT_TRUE(!!back) << llvm::toString(back.takeError());
  printTopology(*back, b);
  EXPECT_EQ(a.str(), b.str());
  EXPECT_EQ(back->numRanks(), 8);
  EXPECT_EQ(back->links.size(), x->links.size());
}
} // namespace
