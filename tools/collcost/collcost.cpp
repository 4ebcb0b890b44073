//===- collcost.cpp - Predict an algorithm's time on a topology -----------===//
//
//   collcost ALG.xml --topology T [--ranks a,b,...] [--size 1K,1M,...]
//
// Simulates a compiled algorithm (MSCCL XML) on a topology with the cost
// model (coll/synth/CostModel.h) and prints, per message size, the
// predicted time, algorithm and bus bandwidth, and the lower bound of that
// collective on that topology. Exit status: 0 done, 1 bad input, 2 usage.
//
//===----------------------------------------------------------------------===//

#include "coll/synth/CostModel.h"
#include "coll/ir/XML.h"

#include "SynthTool.h"
#include "ToolSupport.h"

#include "coll/support/Bytes.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace coll::synth;
namespace cl = llvm::cl;

namespace {
cl::OptionCategory category("collcost options");
cl::opt<std::string> inputPath(cl::Positional, cl::Required, cl::desc("<algorithm.xml>"),
                               cl::cat(category));
coll::tools::SynthTool tool("collcost", category,
                           {"NCCL topology XML or Coll topology text",
                            "Use only these GPUs, as ranks 0..n-1 in this order"});
cl::list<std::string> sizesOpt("size", cl::CommaSeparated,
                               cl::desc("Message sizes in bytes (K, M, G: powers of 1024); "
                                        "default 1K,64K,1M,16M,256M,1G"),
                               cl::cat(category));

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  tool.parseCommandLine(argc, argv, "Coll cost model\n");
  std::vector<uint64_t> sizes;
  for (const std::string &s : sizesOpt) {
    // The size spellings of collrun and collbench; a size of 0 has no time.
    auto v = coll::parseBytes(s, coll::tools::MaxSize);
    if (!v || *v == 0)
      return tool.fail(2, "bad size '" + s + "'");
    sizes.push_back(*v);
  }
  if (sizes.empty())
    sizes = {1ull << 10, 64ull << 10, 1ull << 20, 16ull << 20, 256ull << 20, 1ull << 30};
  auto topo = tool.readTopology();
  if (!topo)
    return tool.fail(1, llvm::toString(topo.takeError()));
  coll::ir::DiagnosticList diags(inputPath);
  auto alg = coll::ir::readAlgorithmFile(inputPath, diags);
  for (const auto &d : diags.all())
    llvm::errs() << diags.format(d) << "\n";
  if (!alg)
    return tool.fail(1, llvm::toString(alg.takeError()));
  if (diags.hasErrors())
    return 1;
  auto fabric = buildFabric(*topo);
  if (!fabric)
    return tool.fail(1, llvm::toString(fabric.takeError()));
  llvm::outs() << "# " << alg->name << " (" << coll::ir::collectiveAttribute(*alg) << ", "
               << coll::ir::protocolName(alg->protocol) << ", " << alg->ngpus() << " ranks) on "
               << topo->name << ", fabric " << fabric->description << "\n";
  std::optional<Bound> bound;
  if (auto kind = synthKind(alg->collective)) {
    auto b = lowerBound(*topo, *fabric, *kind, std::max(0, alg->root));
    if (!b)
      return tool.fail(1, llvm::toString(b.takeError()));
    bound = *b;
    llvm::outs() << llvm::formatv("# lower bound: {0:f2} GB/s bus bandwidth ({1})\n", b->busBw,
                                  b->how);
  } else {
    llvm::outs() << "# no lower bound for this collective\n";
  }
  llvm::outs() << llvm::formatv("# {0,12} {1,12} {2,10} {3,10} {4,8}\n", "bytes", "time(us)",
                                "algbw", "busbw", "%bound");
  for (uint64_t size : sizes) {
    auto r = simulateCost(*alg, *topo, *fabric, size);
    if (!r)
      return tool.fail(1, llvm::toString(r.takeError()));
    llvm::outs() << llvm::formatv("  {0,12} {1,12:f2} {2,10:f2} {3,10:f2} {4,8:f1}\n", size,
                                  r->timeUs, r->algBw, r->busBw,
                                  bound ? 100 * r->busBw / bound->busBw : 0.0);
  }
  return 0;
}
