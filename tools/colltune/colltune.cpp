//===- colltune.cpp - Tuning tables from the cost model -------------------===//
//
//   colltune --topology T [--ranks a,b,...] [--coll c,...] [-o TABLE]
//            [--out-dir DIR] [--measure] [--collrun PATH]
//
// For every collective, synthesizes the candidates collsynth makes for the
// topology (trees, rings, double binary trees, chains of 1, 4, 16 and 64
// chunks), compiles each with the .coll compiler, predicts its time with
// the cost model at sizes 1K, 4K, ..., 1G, and writes the runtime's tuning
// table (docs/RUNTIME.md, "Tuning tables"): one rule per size range, naming
// the fastest candidate.
// --out-dir writes the candidates' .coll files, which COLL_ALGO_DIR loads.
// --measure also runs every candidate on the host backend (collrun) at the
// same sizes (rounded down to whole fp32 elements per rank) and reports, per
// size, where the measured winner differs from the model's. Output is
// deterministic.
//
//===----------------------------------------------------------------------===//

#include "coll/synth/CostModel.h"
#include "coll/synth/Tune.h"
#include "coll/ir/XML.h"
#include "coll/support/Bytes.h"

#include "SynthTool.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace coll;
using namespace coll::synth;
namespace cl = llvm::cl;

namespace {
cl::OptionCategory category("colltune options");
coll::tools::SynthTool tool("colltune", category,
                           {"NCCL topology XML or Coll topology text",
                            "Use only these GPUs, as ranks 0..n-1 in this order"});
coll::tools::CollectivesOption collectives(tool, {CollKind::AllReduce, CollKind::AllGather,
                                                 CollKind::ReduceScatter, CollKind::Broadcast,
                                                 CollKind::Reduce});
coll::tools::OutputOptions output(tool, {"-", "The tuning table ('-': stdout)",
                                         "Write the candidates' .coll files here"});
cl::opt<bool> measure("measure", cl::init(false),
                      cl::desc("Also time every candidate on the host backend (collrun) "
                               "and report where model and measurement disagree"),
                      cl::cat(category));
cl::opt<std::string> collrunPath("collrun", cl::init(""), cl::value_desc("path"),
                                 cl::desc("collrun to measure with (default: beside colltune)"),
                                 cl::cat(category));
cl::opt<std::string> measureSizes("measure-sizes", cl::init("4K,64K,1M"),
                                  cl::desc("Sizes --measure runs (the host backend is slow)"),
                                  cl::cat(category));

struct Candidate {
  std::string name, source;
  ir::Algorithm alg;
  std::string xmlPath; ///< for --measure
};

/// A size collrun accepts for n ranks of fp32: a multiple of 4n bytes (the
/// nearest one below, at least 4n).
uint64_t measurable(uint64_t size, int32_t n) {
  uint64_t unit = 4ull * n;
  return std::max(unit, size / unit * unit);
}

/// Runs collrun on a candidate and returns busbw per requested size
/// (in-place rows); says why when collrun fails.
std::map<uint64_t, double> measureOne(const std::string &collrun, const Candidate &c,
                                      const std::vector<uint64_t> &sizes) {
  std::map<uint64_t, double> out;
  std::map<uint64_t, uint64_t> asked; // measured size -> requested size
  llvm::SmallString<128> log;
  llvm::sys::fs::createTemporaryFile("colltune", "txt", log);
  std::string sizeArg = "--size=";
  for (size_t i = 0; i < sizes.size(); ++i) {
    uint64_t m = measurable(sizes[i], c.alg.ngpus());
    asked[m] = sizes[i];
    sizeArg += (i ? "," : "") + std::to_string(m);
  }
  llvm::SmallVector<llvm::StringRef, 8> args{collrun, c.xmlPath, sizeArg, "--iters=3",
                                             "--mode=inplace"};
  llvm::Optional<llvm::StringRef> redirects[] = {llvm::None, llvm::StringRef(log),
                                                 llvm::StringRef(log)};
  int rc = llvm::sys::ExecuteAndWait(collrun, args, llvm::None, redirects);
  auto buf = llvm::MemoryBuffer::getFile(log);
  llvm::sys::fs::remove(log);
  if (rc != 0 || !buf) {
    llvm::StringRef text = buf ? (*buf)->getBuffer().trim() : "";
    llvm::errs() << "colltune: collrun failed on " << c.name << " (exit status " << rc
                 << "): " << text.rsplit('\n').second.trim() << "\n";
    return out;
  }
  llvm::SmallVector<llvm::StringRef, 32> lines;
  (*buf)->getBuffer().split(lines, '\n');
  for (llvm::StringRef line : lines) {
    llvm::SmallVector<llvm::StringRef, 12> f;
    line.split(f, ' ', -1, false);
    // place size count type redop time algbw busbw #wrong
    if (f.size() >= 9 && f[0] == "in-place") {
      uint64_t size = 0;
      double bus = 0;
      if (!f[1].getAsInteger(10, size) && !f[7].getAsDouble(bus) && asked.count(size))
        out[asked[size]] = bus;
    }
  }
  return out;
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  tool.parseCommandLine(argc, argv, "Coll tuning tables from the cost model\n");
  auto topo = tool.readTopology();
  if (!topo)
    return tool.fail(1, llvm::toString(topo.takeError()));
  if (topo->numRanks() < 2)
    return tool.fail(1, "tuning needs at least 2 GPUs");
  auto fabric = buildFabric(*topo);
  if (!fabric)
    return tool.fail(1, llvm::toString(fabric.takeError()));
  const std::vector<CollKind> kinds = collectives.kinds();
  std::string collrun = collrunPath;
  if (measure && collrun.empty()) {
    std::string self = llvm::sys::fs::getMainExecutable(argv[0], (void *)&measureOne);
    llvm::SmallString<256> p(llvm::sys::path::parent_path(self));
    llvm::sys::path::append(p, "collrun");
    collrun = std::string(p);
  }
  std::vector<uint64_t> mSizes;
  if (measure) {
    llvm::SmallVector<llvm::StringRef, 8> parts;
    llvm::StringRef(measureSizes).split(parts, ',', -1, false);
    for (llvm::StringRef p : parts) {
      std::optional<uint64_t> v = parseBytes(p);
      if (!v || *v == 0)
        return tool.fail(2, "bad size '" + p + "' in --measure-sizes");
      mSizes.push_back(*v);
    }
  }
  llvm::SmallString<256> tmpDir;
  if (measure && llvm::sys::fs::createUniqueDirectory("colltune", tmpDir))
    return tool.fail(2, "cannot create a temporary directory");

  std::string table;
  llvm::raw_string_ostream os(table);
  const int32_t n = topo->numRanks();
  os << "# Tuning table for " << topo->name << ", " << n
     << " ranks, from Coll's cost model (colltune).\n"
     << "# Targets are algorithms colltune --out-dir writes (load them with COLL_ALGO_DIR).\n"
     << "# collective   ranks   bytes       target  # predicted bus bandwidth at the range's largest "
        "size "
        "evaluated\n";
  int disagreements = 0;
  auto tuned = tuneTopology(*topo, kinds);
  if (!tuned)
    return tool.fail(1, llvm::toString(tuned.takeError()));
  std::vector<Candidate> cands;
  for (const TunedCandidate &t : tuned->candidates) {
    Candidate c{t.name, t.program, t.alg, ""};
    if (!output.outDir.empty() &&
        !tool.writeFile(coll::tools::programPath(output.outDir, c.name), c.source))
      return 2;
    if (measure) {
      llvm::SmallString<256> path(tmpDir);
      llvm::sys::path::append(path, c.name + ".xml");
      c.xmlPath = std::string(path);
      if (llvm::Error e = ir::writeAlgorithmFile(c.alg, c.xmlPath))
        return tool.fail(2, llvm::toString(std::move(e)));
    }
    cands.push_back(std::move(c));
  }
  for (const TuningRule &rule : tunedRules(*tuned, n, ""))
    os << rule.text << "\n";
  for (CollKind kind : kinds) {
    if (!measure)
      break;
    // This collective's candidates.
    std::vector<size_t> mine;
    for (size_t i = 0; i < cands.size(); ++i)
      if (llvm::StringRef(cands[i].name).startswith(collKindName(kind).str() + "_"))
        mine.push_back(i);
    std::vector<std::map<uint64_t, double>> got(cands.size());
    for (size_t i : mine)
      got[i] = measureOne(collrun, cands[i], mSizes);
    for (uint64_t size : mSizes) {
      size_t model = mine.front(), meas = mine.front();
      double bestT = 1e300, bestM = -1;
      for (size_t i : mine) {
        auto r = simulateCost(cands[i].alg, *topo, *fabric, size);
        if (r && r->timeUs < bestT * (1 - 1e-9)) {
          bestT = r->timeUs;
          model = i;
        }
        auto it = got[i].find(size);
        if (it != got[i].end() && it->second > bestM) {
          bestM = it->second;
          meas = i;
        }
      }
      if (bestM < 0) {
        llvm::errs() << "colltune: " << collKindName(kind) << " " << coll::formatBytes(size)
                     << ": no measurement (did collrun run?)\n";
        ++disagreements;
        continue;
      }
      bool agree = model == meas;
      disagreements += !agree;
      llvm::errs() << llvm::formatv("colltune: {0} {1}: model picks {2}, host measurement "
                                    "picks {3} ({4:f3} GB/s){5}\n",
                                    collKindName(kind), coll::formatBytes(size), cands[model].name,
                                    cands[meas].name, bestM, agree ? "" : "  <- disagree");
    }
  }
  if (measure) {
    llvm::errs() << "colltune: model and host measurement disagree at " << disagreements
                 << " point(s); the host backend runs ranks as CPU threads, so its "
                    "ranking reflects memory copies, not the topology's links\n";
    llvm::sys::fs::remove_directories(tmpDir);
  }
  os.flush();
  return tool.writeFile(output.output, table) ? 0 : 2;
}
