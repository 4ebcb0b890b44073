//===- DetectTest.cpp - GPU inventories (NVML) as topologies ---------------===//
//
// Inventories in the form `collsynth --topology nvml --inventory` records
// them: those of the bundled machines must give the same bounds as the
// bundled NCCL XML, and malformed ones located errors.
//
//===----------------------------------------------------------------------===//

#include "coll/synth/Detect.h"
#include "coll/synth/Synthesis.h"

#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

using namespace coll::synth;
using namespace coll::hw;

namespace {

std::string readFile(const std::string &path) {
  auto buf = llvm::MemoryBuffer::getFile(path);
  EXPECT_TRUE(!!buf) << path;
  return buf ? (*buf)->getBuffer().str() : std::string();
}

double bound(const Topology &topo, CollKind kind) {
  auto fabric = buildFabric(topo);
  EXPECT_TRUE(!!fabric) << llvm::toString(fabric.takeError());
  auto b = lowerBound(topo, *fabric, kind, 0);
  EXPECT_TRUE(!!b) << llvm::toString(b.takeError());
  return b ? b->busBw : -1;
}

void expectSameBounds(const std::string &inventory, const std::string &xml) {
  auto fromInventory = readTopologyFile(std::string(COLL_INVENTORY_DIR) + "/" + inventory);
  ASSERT_TRUE(!!fromInventory) << llvm::toString(fromInventory.takeError());
  auto fromXml = readTopologyFile(std::string(COLL_TOPOLOGY_DIR) + "/" + xml);
  ASSERT_TRUE(!!fromXml) << llvm::toString(fromXml.takeError());
  EXPECT_EQ(fromInventory->numRanks(), fromXml->numRanks());
  for (CollKind k :
       {CollKind::Broadcast, CollKind::AllGather, CollKind::ReduceScatter, CollKind::AllReduce})
    EXPECT_DOUBLE_EQ(bound(*fromInventory, k), bound(*fromXml, k))
        << inventory << " " << collKindName(k).str();
}

TEST(Detect, Dgx1InventoryGivesTheBundledBounds) {
  expectSameBounds("dgx1-v100.gpus", "dgx1-v100.xml");
}

TEST(Detect, DgxH100InventoryGivesTheBundledBounds) {
  expectSameBounds("dgx-h100.gpus", "dgx-h100.xml");
}

TEST(Detect, PrintedInventoryReadsBack) {
  const std::string path = std::string(COLL_INVENTORY_DIR) + "/dgx1-v100.gpus";
  auto inventory = parseInventory(readFile(path), path);
  ASSERT_TRUE(!!inventory) << llvm::toString(inventory.takeError());
  ASSERT_EQ(inventory->gpus.size(), 8u);
  EXPECT_EQ(inventory->gpus[0].busId, "0000:06:00.0");
  EXPECT_EQ(inventory->gpus[0].sm, 70);
  EXPECT_EQ(inventory->gpus[0].name, "Tesla V100-SXM2-16GB");
  EXPECT_EQ(inventory->gpus[0].nvlinks.size(), 6u);
  std::string text;
  llvm::raw_string_ostream os(text);
  printInventory(*inventory, os);
  auto again = parseInventory(os.str(), "printed");
  ASSERT_TRUE(!!again) << llvm::toString(again.takeError());
  EXPECT_EQ(ncclTopologyXml(*again), ncclTopologyXml(*inventory));
}

// Recorded on a lent GPU machine: one H100, PCIe gen 5 x16, no NVLink.
TEST(Detect, RecordedH100) {
  const std::string path = std::string(COLL_INVENTORY_DIR) + "/h100-lent.gpus";
  auto inventory = parseInventory(readFile(path), path);
  ASSERT_TRUE(!!inventory) << llvm::toString(inventory.takeError());
  ASSERT_EQ(inventory->gpus.size(), 1u);
  EXPECT_EQ(inventory->gpus[0].sm, 90);
  EXPECT_TRUE(inventory->gpus[0].nvlinks.empty());
  auto topo = readTopologyFile(path);
  ASSERT_TRUE(!!topo) << llvm::toString(topo.takeError());
  EXPECT_EQ(topo->numRanks(), 1);
  // Its one link is PCIe to the CPU, at NCCL's gen 5 x16 rate.
  ASSERT_FALSE(topo->links.empty());
  for (const Link &l : topo->links) {
    EXPECT_EQ(l.kind, LinkKind::PCI);
    EXPECT_DOUBLE_EQ(l.bw, 48.0);
  }
}

TEST(Detect, MalformedInventoriesAreLocatedErrors) {
  struct Case {
    const char *text, *message;
  };
  const Case cases[] = {
      {"gpu 0000:06:00.0 sm=70\n", "bad.gpus:1: error: the first line must be"},
      {"coll-gpu-inventory 1\ngpu 06:00.0 sm=70\n",
       "bad.gpus:2: error: '06:00.0' is not a PCI bus id"},
      {"coll-gpu-inventory 1\nnvlink 0000:07:00.0\n",
       "bad.gpus:2: error: an nvlink before any gpu"},
      {"coll-gpu-inventory 1\ngpu 0000:06:00.0 sm=7x\n", "bad.gpus:2: error: sm=7x"},
      {"coll-gpu-inventory 1\ngpu 0000:06:00.0 sm=70 pcie=3\n", "bad.gpus:2: error: pcie=3"},
      {"coll-gpu-inventory 1\ngpu 0000:06:00.0 sm=70 color=red\n",
       "bad.gpus:2: error: unknown attribute 'color'"},
      {"coll-gpu-inventory 1\ngpu 0000:06:00.0 sm=70\ngpu 0000:06:00.0 sm=70\n",
       "bad.gpus:3: error: GPU 0000:06:00.0 is listed twice"},
      {"coll-gpu-inventory 1\ngpu 0000:06:00.0 sm=70\nnvlink 0000:07:00.0\n",
       "bad.gpus: error: GPU 0000:06:00.0 has an NVLink to 0000:07:00.0, which is no other GPU"},
      {"coll-gpu-inventory 1\ngpu 0000:06:00.0 sm=70\nnvlink 0000:07:00.0 bridge\n",
       "bad.gpus:3: error: 'bridge'"},
      {"coll-gpu-inventory 1\n", "bad.gpus: error: the inventory lists no GPU"},
      {"coll-gpu-inventory 1\nnic 0000:06:00.0\n", "bad.gpus:2: error: 'nic'"},
  };
  for (const Case &c : cases) {
    auto inventory = parseInventory(c.text, "bad.gpus");
    ASSERT_FALSE(!!inventory) << c.text;
    const std::string message = llvm::toString(inventory.takeError());
    EXPECT_NE(message.find(c.message), std::string::npos) << message;
  }
}

} // namespace
