//===- Tune.cpp - The best synthesized program per collective and size ----===//

#include "coll/synth/Tune.h"

#include "coll/support/Bytes.h"

#include "coll/compiler/Compiler.h"
#include "coll/synth/CostModel.h"
#include "coll/lang/Frontend.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace coll;
using namespace coll::synth;

std::vector<TuningRule> coll::synth::tunedRules(const TuneResult &result, int nranks,
                                                 const std::string &origin) {
  std::vector<TuningRule> rules;
  for (const TunedRange &range : result.ranges) {
    TuningRule r;
    r.collective = ir::parseCollective(collKindName(range.kind));
    r.minRanks = r.maxRanks = nranks;
    r.minBytes = range.minBytes;
    r.maxBytes = range.maxBytes;
    r.target = result.candidates[range.candidate].name;
    r.origin = origin;
    r.text = formatTuningRule(r) +
             llvm::formatv("  # {0:f2} GB/s predicted at {1}, bound {2:f2}", range.busBw,
                           formatBytes(range.atBytes), range.bound)
                 .str();
    rules.push_back(std::move(r));
  }
  return rules;
}

std::vector<uint64_t> coll::synth::tuneSizes() {
  std::vector<uint64_t> sizes;
  for (uint64_t s = 1ull << 10; s <= (1ull << 30); s *= 4)
    sizes.push_back(s);
  return sizes;
}

llvm::Expected<ir::Algorithm>
coll::synth::compileProgramText(const std::string &text,
                                const std::string &name) {
  llvm::SourceMgr srcMgr;
  std::string diagText;
  llvm::raw_string_ostream os(diagText);
  lang::DiagnosticEngine diags(srcMgr, os, "synthesis");
  unsigned id = srcMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, name + ".coll"),
      llvm::SMLoc());
  auto dag = lang::compileToDag(id, lang::Overrides(), diags);
  std::optional<ir::Algorithm> alg;
  if (dag)
    alg = compiler::compile(*dag, compiler::CompileOptions(), diags);
  if (!alg)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the synthesized " + name +
                                       " does not compile:\n" + os.str());
  return std::move(*alg);
}

llvm::Expected<TuneResult>
coll::synth::tuneTopology(const Topology &topo, std::vector<CollKind> kinds) {
  const int32_t n = topo.numRanks();
  if (n < 2)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "tuning needs at least 2 GPUs");
  auto fabric = buildFabric(topo);
  if (!fabric)
    return fabric.takeError();
  if (kinds.empty())
    kinds = {CollKind::AllReduce, CollKind::AllGather, CollKind::ReduceScatter,
             CollKind::Broadcast, CollKind::Reduce};
  const std::vector<uint64_t> sizes = tuneSizes();
  TuneResult result;
  for (CollKind kind : kinds) {
    auto bound = lowerBound(topo, *fabric, kind, 0);
    if (!bound)
      return bound.takeError();
    std::vector<Plan> plans;
    if (auto p = packTrees(topo, *fabric, kind, 0))
      plans.push_back(std::move(*p));
    else
      llvm::consumeError(p.takeError());
    plans.push_back(
        ringPlan(topo, *fabric, kind, findRings(topo, *fabric, 8), 0));
    if (n >= 3 && kind != CollKind::AllGather &&
        kind != CollKind::ReduceScatter)
      plans.push_back(doubleBinaryTreePlan(topo, *fabric, kind, 0));
    if (kind == CollKind::Broadcast) {
      // Chains of several chunk counts: the simulation picks per size.
      for (int32_t k : {1, 4, 16, 64})
        plans.push_back(chainPlan(topo, *fabric, 0, 64ull << 20, k));
    }
    const size_t first = result.candidates.size();
    for (const Plan &p : plans) {
      std::string gen =
          p.generator == "double-binary-tree" ? "dbtree" : p.generator;
      std::string name = collKindName(kind).str() + "_" + gen;
      if (p.generator == "chain")
        name += std::to_string(p.pipeline);
      std::string text = emitProgram(topo, p, *bound, name);
      auto alg = compileProgramText(text, name);
      if (!alg)
        return alg.takeError();
      result.candidates.push_back({name, text, std::move(*alg)});
    }
    // The fastest candidate per size; ties go to the earlier one.
    std::vector<size_t> winner;
    std::vector<double> winnerBw;
    for (uint64_t size : sizes) {
      size_t best = first;
      double bestT = 1e300, bestBw = 0;
      for (size_t i = first; i < result.candidates.size(); ++i) {
        auto r = simulateCost(result.candidates[i].alg, topo, *fabric, size);
        if (!r)
          return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                         result.candidates[i].name + ": " +
                                             llvm::toString(r.takeError()));
        if (r->timeUs < bestT * (1 - 1e-9)) {
          bestT = r->timeUs;
          best = i;
          bestBw = r->busBw;
        }
      }
      winner.push_back(best);
      winnerBw.push_back(bestBw);
    }
    for (size_t i = 0; i < sizes.size();) {
      size_t j = i;
      while (j + 1 < sizes.size() && winner[j + 1] == winner[i])
        ++j;
      TunedRange r;
      r.kind = kind;
      r.minBytes = i == 0 ? 0 : sizes[i];
      r.maxBytes = j + 1 == sizes.size() ? UINT64_MAX : sizes[j + 1];
      r.candidate = winner[i];
      r.busBw = winnerBw[j];
      r.atBytes = sizes[j];
      r.bound = bound->busBw;
      result.ranges.push_back(r);
      i = j + 1;
    }
  }
  return result;
}
