//===- EmitProgram.cpp - .coll text for a synthesized plan ----------------===//
//
// Every tree becomes explicit copies (and reductions) between ranks, in
// breadth-first order down the tree and children-before-parents up it.
// Reductions accumulate in the default scratch buffer of inner nodes and in
// the output at the root, so that the program is valid both in place and
// out of place (an out-of-place input is read-only).
//
//===----------------------------------------------------------------------===//

#include "SynthSupport.h"

#include "llvm/Support/raw_ostream.h"

#include <map>
#include <set>

using namespace coll::synth;

std::string coll::synth::emitProgram(const Topology &topo, const Plan &plan,
                                     const Bound &bound, llvm::StringRef name) {
  const int32_t n = topo.numRanks();
  std::string text;
  llvm::raw_string_ostream os(text);
  double pct = bound.busBw > 0 ? 100.0 * plan.predictedBusBw / bound.busBw : 0;
  os << "// " << collKindName(plan.kind) << " by " << plan.generator
     << ", synthesized by collsynth.\n"
     << "//\n"
     << "// Topology: " << topo.name << " (" << n << " GPUs)\n"
     << "// Predicted bus bandwidth (link-load model): "
     << llvm::formatv("{0:f2}", plan.predictedBusBw) << " GB/s\n"
     << "// Lower bound on this topology: "
     << llvm::formatv("{0:f2}", bound.busBw) << " GB/s (" << bound.how << ")\n"
     << "// Reaches " << llvm::formatv("{0:f1}", pct) << "% of the bound.\n"
     << "// " << plan.note << "\n";
  // Chunks per block: each root's trees split its block by weight.
  std::map<int32_t, int32_t> perRoot;
  for (const Tree &t : plan.trees)
    perRoot[t.root] += t.weight;
  bool perRank =
      plan.kind == CollKind::AllGather || plan.kind == CollKind::ReduceScatter;
  int32_t chunks = 0;
  if (perRank) {
    chunks = perRoot.begin()->second;
  } else {
    for (const Tree &t : plan.trees)
      chunks += t.weight;
  }
  os << "// Chunks per block: " << chunks << "; trees (root: edges):\n";
  for (const Tree &t : plan.trees) {
    os << "//   " << t.root << ":";
    for (auto [p, c] : t.edges)
      os << " " << p << "->" << c;
    if (t.weight != 1)
      os << " (x" << t.weight << ")";
    os << "\n";
  }
  os << "\n";
  bool rooted =
      plan.kind == CollKind::Broadcast || plan.kind == CollKind::Reduce;
  os << "collective " << collKindName(plan.kind) << "(ranks = " << n
     << ", chunks = " << chunks;
  if (rooted)
    os << ", root = " << plan.root;
  // Traced out of place, the copies into the output are real, and the
  // compiled algorithm serves both modes.
  os << ")\n";
  os << "option name = \"" << name << "\"\n\n";

  // Offsets of each tree's chunks.
  std::vector<int32_t> offset(plan.trees.size());
  std::map<int32_t, int32_t> next;
  for (size_t i = 0; i < plan.trees.size(); ++i) {
    const Tree &t = plan.trees[i];
    int32_t base = perRank ? t.root * chunks : 0;
    offset[i] = base + next[perRank ? t.root : 0];
    next[perRank ? t.root : 0] += t.weight;
  }

  // Channel of each tree: its index, so that a tb never waits for one
  // tree's data before it can move another's.
  std::vector<int32_t> channel(plan.trees.size());
  {
    std::map<int32_t, int32_t> seen;
    for (size_t i = 0; i < plan.trees.size(); ++i)
      channel[i] = seen[0]++;
  }
  auto sizeArg = [](int32_t w) {
    return w == 1 ? std::string() : ", size = " + std::to_string(w);
  };
  switch (plan.kind) {
  case CollKind::Broadcast:
  case CollKind::AllGather: {
    if (plan.kind == CollKind::Broadcast)
      os << "chunk(" << plan.root << ", input, 0, size = " << chunks
         << ").copy(" << plan.root << ", output, 0)\n";
    else
      os << "for r in 0.." << n << " { chunk(r, input, 0, size = " << chunks
         << ").copy(r, output, r * " << chunks << ") }\n";
    os << "fn send(c, w, src, dst, ch) { chunk(src, output, c, size = "
          "w).copy(dst, output, c, "
          "ch = ch) }\n";
    if (plan.pipeline > 1) {
      const Tree &t = plan.trees.front();
      os << "let chain = [" << t.root;
      for (auto [p, c] : t.edges)
        os << ", " << c;
      os << "]\nfor k in 0.." << plan.pipeline
         << " {\n    for h in 1..len(chain) { send(k, 1, chain[h - 1], "
            "chain[h], 0) }\n}\n";
      break;
    }
    for (size_t i = 0; i < plan.trees.size(); ++i) {
      os << "// tree " << i << "\n";
      for (auto [p, c] : plan.trees[i].edges)
        os << "send(" << offset[i] << ", " << plan.trees[i].weight << ", " << p
           << ", " << c << ", " << channel[i] << ")\n";
    }
    break;
  }
  case CollKind::Reduce:
  case CollKind::ReduceScatter:
  case CollKind::AllReduce: {
    for (size_t i = 0; i < plan.trees.size(); ++i) {
      const Tree &t = plan.trees[i];
      std::vector<std::pair<int32_t, int32_t>> up =
          i < plan.reduceEdges.size() && !plan.reduceEdges[i].empty()
              ? plan.reduceEdges[i]
              : std::vector<std::pair<int32_t, int32_t>>();
      if (up.empty())
        for (auto it = t.edges.rbegin(); it != t.edges.rend(); ++it)
          up.push_back({it->second, it->first});
      int32_t c = offset[i];
      std::string sz = sizeArg(t.weight);
      // Where the root keeps the result.
      std::string rootOut = "chunk(" + std::to_string(t.root) + ", output, " +
                            std::to_string(plan.kind == CollKind::ReduceScatter
                                               ? c - t.root * chunks
                                               : c) +
                            sz + ")";
      std::set<int32_t> hasChildren, started;
      for (auto [ch, p] : up)
        hasChildren.insert(p);
      os << "// tree " << i << "\n";
      for (auto [ch, p] : up) {
        std::string src = hasChildren.count(ch)
                              ? "chunk(" + std::to_string(ch) + ", scratch, " +
                                    std::to_string(c) + sz + ")"
                              : "chunk(" + std::to_string(ch) + ", input, " +
                                    std::to_string(c) + sz + ")";
        std::string dst = p == t.root
                              ? rootOut
                              : "chunk(" + std::to_string(p) + ", scratch, " +
                                    std::to_string(c) + sz + ")";
        if (started.insert(p).second)
          os << "chunk(" << p << ", input, " << c << sz << ").copy(" << p
             << ", " << (p == t.root ? "output" : "scratch") << ", "
             << (p == t.root && plan.kind == CollKind::ReduceScatter
                     ? c - t.root * chunks
                     : c)
             << ")\n";
        os << dst << ".reduce(" << src << ", ch = " << channel[i] << ")\n";
      }
      if (plan.kind == CollKind::AllReduce)
        for (auto [p, ch] : t.edges)
          os << "chunk(" << p << ", output, " << c << sz << ").copy(" << ch
             << ", output, " << c << ", ch = " << channel[i] << ")\n";
    }
    break;
  }
  }
  os.flush();
  return text;
}
