//===- collsynth.cpp - .coll programs for a topology ----------------------===//
//
//   collsynth --topology T [--ranks a,b,...] [--coll c,...] [--generator g]
//             [--root R] [--size BYTES] [-o OUT.coll | --out-dir DIR]
//             [--report] [--print-topology]
//
// Reads a topology (NCCL XML or Coll's text format), optionally keeps only
// some of its GPUs (a partial allocation), and writes .coll programs made by
// the chosen generator: `trees` (spanning-tree packing), `rings`,
// `dbtree` (double binary tree), `chain` (pipelined chain broadcast), or
// `best` (the generator the link-load model predicts fastest). --report
// prints, per collective, every generator's predicted bus bandwidth beside
// the lower bound; --print-topology prints the topology as read (in the
// text format) and stops. Exit status: 0 done, 1 bad input, 2 bad usage or I/O.
//
//===----------------------------------------------------------------------===//

#include "coll/synth/Detect.h"
#include "coll/synth/Synthesis.h"
#include "coll/synth/Topology.h"

#include "SynthTool.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace coll::synth;
namespace cl = llvm::cl;

namespace {
cl::OptionCategory category("collsynth options");
coll::tools::SynthTool tool("collsynth", category,
                           {"NCCL topology XML, Coll topology text, a GPU inventory, or 'nvml' "
                            "(this machine's GPUs)",
                            "Use only these GPUs (a partial allocation), as ranks 0..n-1 in "
                            "this order"});
cl::opt<bool> printInventoryOpt("inventory", cl::init(false),
                                cl::desc("With --topology nvml: print what NVML reports, in "
                                         "the inventory form the tools read back, and stop"),
                                cl::cat(category));
coll::tools::CollectivesOption collectives(tool, {CollKind::Broadcast, CollKind::Reduce,
                                                 CollKind::AllGather, CollKind::ReduceScatter,
                                                 CollKind::AllReduce});
cl::opt<std::string> generatorOpt("generator", cl::init("best"),
                                  cl::desc("trees, rings, dbtree, chain or best"),
                                  cl::cat(category));
cl::opt<int32_t> rootOpt("root", cl::init(0), cl::desc("Root of broadcast and reduce"),
                         cl::cat(category));
cl::opt<uint64_t> sizeOpt("size", cl::init(64ull << 20),
                          cl::desc("Message size in bytes the chain's chunk count is "
                                   "chosen for (default 64M)"),
                          cl::cat(category));
coll::tools::OutputOptions output(tool, {"", "Write the one program here ('-': stdout)",
                                         "Write COLL_GENERATOR.coll for every collective and "
                                         "generator that applies"});
cl::opt<bool> printTopo("print-topology", cl::init(false),
                        cl::desc("Print the topology as read (in the text format) and stop"),
                        cl::cat(category));
cl::opt<bool> report("report", cl::init(false),
                     cl::desc("Print predicted bandwidth and bound per collective and "
                              "generator"),
                     cl::cat(category));

/// Every plan the generators make for one collective (those that apply).
std::vector<Plan> allPlans(const Topology &topo, const Fabric &fabric, CollKind kind, int32_t root,
                           std::vector<std::string> &skipped) {
  std::vector<Plan> plans;
  if (auto p = packTrees(topo, fabric, kind, root))
    plans.push_back(std::move(*p));
  else
    skipped.push_back("trees: " + llvm::toString(p.takeError()));
  auto rings = findRings(topo, fabric, 8);
  plans.push_back(ringPlan(topo, fabric, kind, rings, root));
  if (topo.numRanks() >= 3 && kind != CollKind::AllGather && kind != CollKind::ReduceScatter)
    plans.push_back(doubleBinaryTreePlan(topo, fabric, kind, root));
  if (kind == CollKind::Broadcast)
    plans.push_back(chainPlan(topo, fabric, root, sizeOpt));
  return plans;
}

llvm::StringRef shortName(const Plan &p) {
  if (p.generator == "double-binary-tree")
    return "dbtree";
  return p.generator;
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  tool.parseCommandLine(argc, argv, "Coll topology-aware synthesis\n");
  if (printInventoryOpt) {
    if (tool.topologyPath != "nvml")
      return tool.fail(2, "--inventory prints what NVML reports: use it with --topology nvml");
    auto inventory = coll::hw::queryNvml();
    if (!inventory)
      return tool.fail(1, llvm::toString(inventory.takeError()));
    coll::hw::printInventory(*inventory, llvm::outs());
    return 0;
  }
  auto read = tool.readTopology();
  if (!read)
    return tool.fail(1, llvm::toString(read.takeError()));
  Topology topo = std::move(*read);
  if (printTopo) {
    printTopology(topo, llvm::outs());
    return 0;
  }
  if (topo.numRanks() < 2)
    return tool.fail(1, "synthesis needs at least 2 GPUs");
  if (rootOpt < 0 || rootOpt >= topo.numRanks())
    return tool.fail(2, "--root " + llvm::Twine(rootOpt.getValue()) + " is not a rank");
  auto fabric = buildFabric(topo);
  if (!fabric)
    return tool.fail(1, llvm::toString(fabric.takeError()));
  const std::vector<CollKind> kinds = collectives.kinds();
  llvm::StringRef gen = generatorOpt;
  if (gen != "best" && gen != "trees" && gen != "rings" && gen != "dbtree" && gen != "chain")
    return tool.fail(2, "unknown generator '" + gen + "' (trees, rings, dbtree, chain or best)");
  if (!output.output.empty() && (kinds.size() != 1 || !output.outDir.empty()))
    return tool.fail(2, "-o writes one program: give one --coll and no --out-dir");

  if (report)
    llvm::outs() << "topology " << topo.name << ": " << topo.numRanks() << " GPUs, fabric "
                 << fabric->description << "\n";
  for (CollKind kind : kinds) {
    auto bound = lowerBound(topo, *fabric, kind, rootOpt);
    if (!bound)
      return tool.fail(1, llvm::toString(bound.takeError()));
    std::vector<std::string> skipped;
    std::vector<Plan> plans = allPlans(topo, *fabric, kind, rootOpt, skipped);
    if (report) {
      llvm::outs() << collKindName(kind) << ": bound " << llvm::formatv("{0:f2}", bound->busBw)
                   << " GB/s (" << bound->how << ")\n";
      const Plan *bestTree = nullptr, *bestRing = nullptr;
      for (const Plan &p : plans) {
        llvm::outs() << llvm::formatv("  {0,-8} {1,8:f2} GB/s  {2,5:f1}% of bound  {3}\n",
                                      shortName(p), p.predictedBusBw,
                                      100 * p.predictedBusBw / bound->busBw, p.note);
        if (p.generator == "trees")
          bestTree = &p;
        if (p.generator == "rings")
          bestRing = &p;
      }
      for (const std::string &s : skipped)
        llvm::outs() << "  (no " << s << ")\n";
      if (bestTree && bestRing && bestRing->predictedBusBw > 0)
        llvm::outs() << llvm::formatv("  trees vs best ring: {0:f2} / {1:f2} GB/s = {2:f2}x\n",
                                      bestTree->predictedBusBw, bestRing->predictedBusBw,
                                      bestTree->predictedBusBw / bestRing->predictedBusBw);
    }
    // Choose what to write.
    std::vector<const Plan *> chosen;
    if (gen == "best") {
      const Plan *best = nullptr;
      for (const Plan &p : plans)
        if (!best || p.predictedBusBw > best->predictedBusBw * (1 + 1e-9))
          best = &p;
      chosen.push_back(best);
    } else {
      for (const Plan &p : plans)
        if (shortName(p) == gen)
          chosen.push_back(&p);
      if (chosen.empty() && !report) {
        std::string why = "generator '" + gen.str() + "' does not apply to " +
                          collKindName(kind).str() + " on " + topo.name;
        for (const std::string &s : skipped)
          why += " (" + s + ")";
        return tool.fail(1, why);
      }
    }
    if (!output.outDir.empty()) {
      chosen.clear();
      for (const Plan &p : plans)
        chosen.push_back(&p);
    }
    for (const Plan *p : chosen) {
      if (output.output.empty() && output.outDir.empty())
        break;
      std::string name = (collKindName(kind) + "_" + shortName(*p)).str();
      std::string text = emitProgram(topo, *p, *bound, name);
      std::string path =
          output.outDir.empty() ? std::string(output.output)
                                : coll::tools::programPath(output.outDir, name);
      if (!tool.writeFile(path, text))
        return 2;
    }
  }
  return 0;
}
