//===- Emit.cpp - Dependencies, nops and the IR ---------------------------===//
//
// A consumer whose producer runs in another tb of the same rank must wait
// for it explicitly. An IR step carries one dependency, so a step with k
// remaining dependencies is preceded by k-1 nops that carry the others, and
// every producer waited on gets hasdep="1".
//
// Dependencies the consumer's tb already has are dropped: tb order covers
// producers in the same tb, and a tb that has waited for step s of tb P
// (at any earlier step) need not wait for any step of P up to s again. Of
// several dependencies on one tb only the latest is kept.
//
//===----------------------------------------------------------------------===//

#include "Program.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>

namespace coll::compiler {

Schedule emit(const Program &prog) {
  const lang::ChunkDag &dag = *prog.dag;
  const lang::CollectiveSpec &spec = dag.collective;
  const Layout &layout = prog.layout;
  ir::CollectiveInfo info = ir::collectiveInfo(spec.kind);

  Schedule schedule;
  schedule.refinement = layout.refinement;
  schedule.lanes = prog.lanes;
  schedule.fused = prog.fused;
  schedule.inPlaceDependencies = layout.aliasCells;
  schedule.ordering = prog.ordering;

  ir::Algorithm &alg = schedule.algorithm;
  alg.name = dag.options.name;
  alg.protocol = dag.options.protocol.value_or(ir::Protocol::Simple);
  alg.collective = spec.kind;
  alg.collectiveSpelling = ir::collectiveName(spec.kind).str();
  bool perRank = info.inputPerRank || info.outputPerRank;
  alg.nchunksPerLoop = layout.chunksPerBlock * (perRank ? spec.nranks : 1);
  alg.root = info.hasRoot ? spec.root : -1;
  alg.inplace = spec.inplace;
  alg.outofplace = !spec.inplace;
  alg.minBytes = dag.options.minBytes;
  alg.maxBytes = dag.options.maxBytes;
  alg.gpus.resize(spec.nranks);
  schedule.origins.resize(spec.nranks);

  std::vector<int32_t> position(prog.instrs.size(), -1);
  for (const auto &rankTbs : prog.tbs)
    for (const Threadblock &tb : rankTbs)
      for (size_t i = 0; i < tb.instrs.size(); ++i)
        position[tb.instrs[i]] = static_cast<int32_t>(i);

  using Wait = std::pair<int32_t, int32_t>; // (tb, instruction position)
  std::vector<llvm::SmallVector<Wait, 1>> waits(prog.instrs.size());
  std::vector<int32_t> stepOf(prog.instrs.size(), -1);
  int32_t maxChannel = 0;
  for (int32_t r = 0; r < spec.nranks; ++r) {
    const std::vector<Threadblock> &tbs = prog.tbs[r];
    for (int32_t t = 0; t < static_cast<int32_t>(tbs.size()); ++t) {
      llvm::SmallDenseMap<int32_t, int32_t, 4> known; // tb -> position
      int32_t step = 0;
      for (InstrId x : tbs[t].instrs) {
        llvm::SmallVector<Wait, 1> &need = waits[x];
        for (InstrId d : prog.instrs[x].deps) {
          int32_t tb = prog.instrs[d].tb;
          if (tb == t) {
            assert(position[d] < position[x] && "tb order keeps dependencies");
            continue;
          }
          need.emplace_back(tb, position[d]);
        }
        llvm::sort(need);
        // Of several waits on one tb keep the last; drop what is known.
        llvm::SmallVector<Wait, 1> kept;
        for (size_t i = 0; i < need.size(); ++i) {
          if (i + 1 < need.size() && need[i + 1].first == need[i].first)
            continue;
          auto it = known.find(need[i].first);
          if (it != known.end() && it->second >= need[i].second)
            continue;
          kept.push_back(need[i]);
          known[need[i].first] = need[i].second;
        }
        need = std::move(kept);
        step += need.empty() ? 0 : static_cast<int32_t>(need.size()) - 1;
        stepOf[x] = step++;
      }
      maxChannel = std::max(maxChannel, tbs[t].channel);
    }

    ir::Gpu &gpu = alg.gpus[r];
    gpu.inputChunks = layout.inputChunks;
    gpu.outputChunks = layout.outputChunks;
    gpu.scratchChunks = layout.scratchChunks[r];
    gpu.tbs.resize(tbs.size());
    schedule.origins[r].resize(tbs.size());
    for (size_t t = 0; t < tbs.size(); ++t) {
      ir::ThreadBlock &tb = gpu.tbs[t];
      tb.sendPeer = tbs[t].sendPeer;
      tb.recvPeer = tbs[t].recvPeer;
      tb.channel = tbs[t].channel;
      std::vector<StepOrigin> &origins = schedule.origins[r][t];
      for (InstrId x : tbs[t].instrs) {
        const Instr &instr = prog.instrs[x];
        StepOrigin origin{instr.op, instr.forwardedOp, instr.lane};
        // Nops carry all dependencies but the last, which the step itself
        // carries.
        for (auto [depTb, depPos] : waits[x]) {
          ir::Step nop;
          nop.count = 0;
          nop.depTb = depTb;
          nop.depStep = stepOf[tbs[depTb].instrs[depPos]];
          tb.steps.push_back(nop);
          origins.push_back(origin);
        }
        if (waits[x].empty()) {
          tb.steps.emplace_back();
          origins.push_back(origin);
        }
        ir::Step &step = tb.steps.back();
        step.type = instr.type;
        step.srcBuf = instr.src.buf;
        step.srcOff = instr.src.off;
        step.dstBuf = instr.dst.buf;
        step.dstOff = instr.dst.off;
        step.count = instr.count;
      }
    }
    for (size_t t = 0; t < tbs.size(); ++t)
      for (const ir::Step &step : gpu.tbs[t].steps)
        if (step.hasDependency())
          gpu.tbs[step.depTb].steps[step.depStep].hasDep = true;
  }
  alg.nchannels = maxChannel + 1;
  return schedule;
}

} // namespace coll::compiler
