//===- SynthTest.cpp - Bounds, tree packing, rings and emitted programs ---===//
//
// The bounds of small topologies are worked out by hand in the comments;
// the packer must reach them exactly.
//
//===----------------------------------------------------------------------===//

#include "coll/synth/Synthesis.h"

#include <gtest/gtest.h>

using namespace coll::synth;

namespace {

Topology parse(const std::string &text) {
  auto t = parseTopologyText(text, "test.topo");
  EXPECT_TRUE(!!t) << llvm::toString(t.takeError());
  return std::move(*t);
}

Topology dgx1() {
  auto t = readTopologyFile(std::string(COLL_TOPOLOGY_DIR) + "/dgx1-v100.topo");
  EXPECT_TRUE(!!t);
  return std::move(*t);
}

struct Result {
  double bound, packed;
};
Result boundAndPacking(const Topology &topo, CollKind kind, int32_t root = 0) {
  auto fabric = buildFabric(topo);
  EXPECT_TRUE(!!fabric) << llvm::toString(fabric.takeError());
  auto bound = lowerBound(topo, *fabric, kind, root);
  EXPECT_TRUE(!!bound) << llvm::toString(bound.takeError());
  auto plan = packTrees(topo, *fabric, kind, root);
  EXPECT_TRUE(!!plan) << llvm::toString(plan.takeError());
  return {bound->busBw, plan->predictedBusBw};
}

// Triangle, 10 GB/s per link and direction. Broadcast from 0: two paths to
// every rank (direct, and through the third), so 20 GB/s. Allgather: a
// single GPU receives 2 blocks over 20 GB/s: busbw = (N-1) * 20 / 2 = 20.
const char *const triangle = "gpu a\ngpu b\ngpu c\n"
                             "link a b bw=10\nlink b c bw=10\nlink a c bw=10\n";

TEST(Bounds, TriangleByHand) {
  Topology t = parse(triangle);
  for (CollKind k :
       {CollKind::Broadcast, CollKind::Reduce, CollKind::AllGather, CollKind::ReduceScatter}) {
    Result r = boundAndPacking(t, k);
    EXPECT_DOUBLE_EQ(r.bound, 20.0) << collKindName(k).str();
    EXPECT_NEAR(r.packed, r.bound, 1e-9) << collKindName(k).str();
  }
  // Allreduce: every cut passes the whole message both ways: 2*2/3 * 20.
  Result ar = boundAndPacking(t, CollKind::AllReduce);
  EXPECT_NEAR(ar.bound, 2.0 * 2 / 3 * 20, 1e-9);
}

// Path a =(2 links)= b -- c, 10 GB/s per link. Broadcast from a: the cut
// into c is one link, 10 GB/s. Allgather: c receives 2 blocks over 10 GB/s:
// 2 * 10 / 2 = 10 (the other cuts give 20 and 40).
TEST(Bounds, UnevenPathByHand) {
  Topology t = parse("gpu a\ngpu b\ngpu c\nlink a b bw=10 count=2\nlink b c bw=10\n");
  Result bc = boundAndPacking(t, CollKind::Broadcast);
  EXPECT_DOUBLE_EQ(bc.bound, 10.0);
  EXPECT_NEAR(bc.packed, 10.0, 1e-9);
  Result ag = boundAndPacking(t, CollKind::AllGather);
  EXPECT_DOUBLE_EQ(ag.bound, 10.0);
  EXPECT_NEAR(ag.packed, 10.0, 1e-9);
}

// Four GPUs in a square, 10 GB/s: broadcast 2 disjoint paths = 20; a single
// GPU takes 3 blocks over 20 GB/s: 3 * 20 / 3 = 20.
TEST(Bounds, SquareByHand) {
  Topology t = parse("gpu a\ngpu b\ngpu c\ngpu d\n"
                     "link a b bw=10\nlink b c bw=10\nlink c d bw=10\nlink d a bw=10\n");
  for (CollKind k : {CollKind::Broadcast, CollKind::AllGather}) {
    Result r = boundAndPacking(t, k);
    EXPECT_DOUBLE_EQ(r.bound, 20.0);
    EXPECT_NEAR(r.packed, 20.0, 1e-9);
  }
}

TEST(Packing, Dgx1ReachesTheBound) {
  Topology t = dgx1();
  for (CollKind k :
       {CollKind::Broadcast, CollKind::AllGather, CollKind::Reduce, CollKind::ReduceScatter}) {
    Result r = boundAndPacking(t, k);
    // Six NVLinks of 20 GB/s into every GPU.
    EXPECT_DOUBLE_EQ(r.bound, 120.0) << collKindName(k).str();
    EXPECT_NEAR(r.packed, 120.0, 1e-9) << collKindName(k).str();
  }
  auto fabric = buildFabric(t);
  ASSERT_TRUE(!!fabric);
  EXPECT_EQ(fabric->description, "NVLink");
  auto plan = packTrees(t, *fabric, CollKind::Broadcast, 3);
  ASSERT_TRUE(!!plan);
  EXPECT_EQ(plan->trees.size(), 6u);
  // Edge-disjoint in the link multigraph: no pair carries more trees than
  // it has links.
  std::vector<std::vector<int>> used(8, std::vector<int>(8, 0));
  for (const Tree &tree : plan->trees) {
    EXPECT_EQ(tree.edges.size(), 7u);
    for (auto [p, c] : tree.edges)
      ++used[p][c];
  }
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b)
      if (used[a][b]) {
        EXPECT_LE(used[a][b], t.links[t.directLink(a, b)].count);
      }
}

TEST(Packing, XmlAndTextDgx1Agree) {
  auto x = readTopologyFile(std::string(COLL_TOPOLOGY_DIR) + "/dgx1-v100.xml");
  ASSERT_TRUE(!!x);
  Topology t = dgx1();
  for (CollKind k : {CollKind::Broadcast, CollKind::AllGather, CollKind::AllReduce}) {
    Result a = boundAndPacking(*x, k), b = boundAndPacking(t, k);
    EXPECT_DOUBLE_EQ(a.bound, b.bound);
    EXPECT_DOUBLE_EQ(a.packed, b.packed);
  }
}

TEST(Rings, Dgx1HasSixLinkDisjointRings) {
  Topology t = dgx1();
  auto fabric = buildFabric(t);
  ASSERT_TRUE(!!fabric);
  auto rings = findRings(t, *fabric, 8);
  EXPECT_EQ(rings.size(), 6u);
  Plan p = ringPlan(t, *fabric, CollKind::AllGather, rings);
  EXPECT_NEAR(p.predictedBusBw, 120.0, 1e-9);
}

// GPUs 0, 1, 2 and 4 of a DGX-1: GPU 4's only NVLink neighbour is GPU 0, so
// no NVLink ring exists; a ring must cross PCIe and QPI (6 GB/s), while
// trees stay on NVLink and reach the 40 GB/s cut of GPU 4.
TEST(Partial, TreesBeatTheBestRingWithoutAnNVLinkRing) {
  auto part = restrictTopology(dgx1(), {0, 1, 2, 4});
  ASSERT_TRUE(!!part);
  auto fabric = buildFabric(*part);
  ASSERT_TRUE(!!fabric);
  auto rings = findRings(*part, *fabric, 8);
  ASSERT_EQ(rings.size(), 1u);
  for (CollKind k : {CollKind::AllGather, CollKind::Broadcast}) {
    Plan ring = ringPlan(*part, *fabric, k, rings);
    auto trees = packTrees(*part, *fabric, k);
    ASSERT_TRUE(!!trees);
    auto bound = lowerBound(*part, *fabric, k);
    ASSERT_TRUE(!!bound);
    EXPECT_DOUBLE_EQ(bound->busBw, 40.0);
    EXPECT_NEAR(trees->predictedBusBw, 40.0, 1e-9);
    EXPECT_NEAR(ring.predictedBusBw, 6.0, 1e-9);
  }
}

TEST(Partial, EveryNVLinkConnectedDgx1SubsetPacksToItsBound) {
  Topology t = dgx1();
  // Every allocation of 3 to 8 GPUs that contains GPU 0 (by symmetry enough).
  int checked = 0;
  for (uint32_t mask = 1; mask < 256; mask += 2) {
    std::vector<int32_t> ranks;
    for (int g = 0; g < 8; ++g)
      if (mask >> g & 1)
        ranks.push_back(g);
    if (ranks.size() < 3)
      continue;
    auto part = restrictTopology(t, ranks);
    ASSERT_TRUE(!!part);
    auto fabric = buildFabric(*part);
    ASSERT_TRUE(!!fabric);
    if (fabric->description != "NVLink")
      continue; // NVLink does not join them: the trees cannot stay on it
    for (CollKind k : {CollKind::Broadcast, CollKind::AllGather, CollKind::ReduceScatter}) {
      auto bound = lowerBound(*part, *fabric, k);
      auto plan = packTrees(*part, *fabric, k);
      ASSERT_TRUE(bound && plan);
      EXPECT_NEAR(plan->predictedBusBw, bound->busBw, 1e-9)
          << part->name << " " << collKindName(k).str();
    }
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

TEST(Emit, ProgramsAreDeterministicAndSayWhatTheyAre) {
  Topology t = dgx1();
  auto fabric = buildFabric(t);
  ASSERT_TRUE(!!fabric);
  auto bound = lowerBound(t, *fabric, CollKind::AllGather);
  auto a = packTrees(t, *fabric, CollKind::AllGather);
  auto b = packTrees(t, *fabric, CollKind::AllGather);
  ASSERT_TRUE(bound && a && b);
  std::string pa = emitProgram(t, *a, *bound, "ag"), pb = emitProgram(t, *b, *bound, "ag");
  EXPECT_EQ(pa, pb);
  EXPECT_NE(pa.find("// Topology: dgx1-v100 (8 GPUs)"), std::string::npos);
  EXPECT_NE(pa.find("// Predicted bus bandwidth (link-load model): 120.00 GB/s"),
            std::string::npos);
  EXPECT_NE(pa.find("// Lower bound on this topology: 120.00 GB/s"), std::string::npos);
  EXPECT_NE(pa.find("collective allgather(ranks = 8, chunks = 6)"), std::string::npos);
}

TEST(Chain, ChunkCountMinimisesTheModel) {
  Topology t = dgx1();
  auto fabric = buildFabric(t);
  ASSERT_TRUE(!!fabric);
  // Tiny messages: latency dominates, one chunk; large: many.
  EXPECT_EQ(chainPlan(t, *fabric, 0, 1024).pipeline, 1);
  EXPECT_GT(chainPlan(t, *fabric, 0, 64 << 20).pipeline, 8);
}

} // namespace

namespace {
// Two links out of a share one 10 GB/s group: a broadcast from a over them
// both is predicted at 5 GB/s, though the bound (which ignores groups) is 10.
TEST(Model, SharedCapacityIsCharged) {
  Topology t = parse("gpu a\ngpu b\ngpu c\ngroup out bw=10\n"
                     "link a b bw=10 group=out\nlink a c bw=10 group=out\n");
  Result r = boundAndPacking(t, CollKind::Broadcast);
  EXPECT_DOUBLE_EQ(r.bound, 10.0);
  EXPECT_NEAR(r.packed, 5.0, 1e-9);
}
} // namespace

namespace {
TEST(Bounds, CutEnumerationHasALimitAndSaysSo) {
  std::string text;
  for (int i = 0; i < 23; ++i)
    text += "gpu g" + std::to_string(i) + "\n";
  for (int i = 0; i < 23; ++i)
    text += "link g" + std::to_string(i) + " g" + std::to_string((i + 1) % 23) + " bw=10\n";
  Topology t = parse(text);
  auto fabric = buildFabric(t);
  ASSERT_TRUE(!!fabric);
  auto bc = lowerBound(t, *fabric, CollKind::Broadcast);
  ASSERT_TRUE(!!bc);
  EXPECT_DOUBLE_EQ(bc->busBw, 20.0); // both ways around the ring
  auto ag = lowerBound(t, *fabric, CollKind::AllGather);
  ASSERT_FALSE(!!ag);
  EXPECT_EQ(llvm::toString(ag.takeError()),
            "topology 'test.topo': the cut bound enumerates every split of the 23 fabric "
            "nodes; at most 22 are supported");
}
} // namespace
