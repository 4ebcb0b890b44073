//===- CopyEngines.cpp - A call's copies on the GPU's copy engines --------===//
//
// A plan whose copies split from its signals (copyEnginePhases, Plan.h) can
// run a call's copies as cudaMemcpyAsync on the call's stream, which the
// copy engines carry out without SMs, as NCCL 2.28's copy-engine
// collectives do. The call is then three things in stream order:
//
//   1. a kernel of every tb's first run: the signals and waits before its
//      copies (a peer's "I have started");
//   2. the copies, one cudaMemcpyAsync per chunk and destination, in an
//      order that keeps each after the copies it waits for;
//   3. a kernel of every tb's last run: the signals and waits after its
//      copies ("I have written you"), whose dependencies on copies are
//      dropped (done, by the stream's order).
//
// Both kernels are the collective kernel itself, given tables of the runs'
// tbs (and for the last, its steps and dependencies), with one pipeline
// iteration: their steps move no data. Each kernel ends by advancing the
// device state's generation, so a call takes two generations; the signals
// of one run are all raised and waited on in one kernel (the split puts a
// signal pair's steps in one run), and the flags a step of the last run
// waits on are those of its own kernel. Every rank must then run its call
// so: an executor of every rank does; the executors of one rank each (a
// job's processes) do when the runtime says so for the call
// (CallArgs::peersAlike, which it decides alike on every rank): the
// peers' buffers of the call are then where this rank's are in its window
// slot 0 (the runtime's area), each moved by its own rank's in-place
// offset, so that the host can name them (docs/CUDA.md, "Copy engines").
//
//===----------------------------------------------------------------------===//

#include "Executor.h"

#include "coll/ir/Geometry.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace coll::interp::cuda {

llvm::Error CudaExecutor::startCopyEngines() {
  copyPhases.reset();
  if (!options.copyEngineBytes || !direct || proto != Proto::Simple)
    return llvm::Error::success();
  // Where the job splits (buildPlan), else its calls run their kernel as
  // without the option (collrun says why: copyEnginePhases).
  std::optional<CopyPhases> split = storedCopyPhases(plan_);
  if (!split)
    return llvm::Error::success();
  std::vector<PlanTb> pre(plan_.tbs), post(plan_.tbs);
  for (size_t t = 0; t < plan_.tbs.size(); ++t) {
    pre[t].nSteps = split->begin[t];
    post[t].stepBegin += split->end[t];
    post[t].nSteps -= split->end[t];
  }
  // The last runs' dependencies, without those on the middle runs.
  auto middle = [&](const PlanDep &d) {
    const int32_t k = publishingStep(plan_, d);
    const int32_t i = k < 0 ? plan_.tbs[static_cast<size_t>(d.tb)].nSteps
                            : k - plan_.tbs[static_cast<size_t>(d.tb)].stepBegin;
    return i >= split->begin[static_cast<size_t>(d.tb)] &&
           i < split->end[static_cast<size_t>(d.tb)];
  };
  std::vector<PlanStep> steps2(plan_.steps);
  std::vector<PlanDep> deps2;
  for (size_t t = 0; t < plan_.tbs.size(); ++t)
    for (int32_t i = split->end[t]; i < plan_.tbs[t].nSteps; ++i) {
      PlanStep &s = steps2[static_cast<size_t>(plan_.tbs[t].stepBegin + i)];
      std::vector<PlanDep> kept;
      for (const PlanDep &d : plan_.dependencies(s))
        if (!middle(d))
          kept.push_back(d);
      if (kept.empty()) {
        s.depTb = -1;
        s.depStep = -1;
      } else if (kept.size() == 1) {
        s.depTb = kept[0].tb;
        s.depStep = kept[0].step;
      } else {
        s.depTb = -static_cast<int32_t>(kept.size());
        s.depStep = static_cast<int32_t>(deps2.size());
        deps2.insert(deps2.end(), kept.begin(), kept.end());
      }
    }
  if (llvm::Error err = upload(preTbs, pre.data(), pre.size(), stream))
    return err;
  if (llvm::Error err = upload(postTbs, post.data(), post.size(), stream))
    return err;
  if (llvm::Error err = upload(postSteps, steps2.data(), steps2.size(), stream))
    return err;
  if (llvm::Error err = upload(postDeps, deps2.data(), deps2.size(), stream))
    return err;
  copyPhases = std::move(*split);
  return llvm::Error::success();
}

llvm::Error CudaExecutor::prepareCopyEngines(const CallArgs &args, const WindowDescriptor &own,
                                             CallResult &result) {
  copyEngineCall = false;
  engineCopies.clear();
  const uint64_t es = dataTypeSize(args.type);
  const uint64_t bytes = std::max(layout->inputElems, layout->outputElems) * es;
  if (!copyPhases || bytes < options.copyEngineBytes || result.iterations == 0)
    return llvm::Error::success();
  // One rank: the peers' buffers of the call are where this rank's are in
  // its window slot 0 (the runtime's area), each moved by its own rank's
  // in-place offset (CallArgs::peersAlike); else the kernel runs.
  if (oneRank() && (!args.peersAlike || peerWindows.empty()))
    return llvm::Error::success();
  // One rank: the buffers' offsets in slot 0, unshifted; where one is not
  // in slot 0, a copy that reaches a peer's buffer of that kind fails.
  uint64_t area[3] = {0, 0, 0};
  bool placed[3] = {false, false, false};
  auto shift = [&](int32_t rank, int buffer) -> uint64_t {
    if (!result.inplace || buffer == 2)
      return 0;
    const ir::InPlaceOffsets off = ir::inPlaceOffsets(plan_.shape, rank, args.count);
    return (buffer == 0 ? off.inputInOutput : off.outputInInput) * es;
  };
  if (oneRank())
    for (int b = 0; b < 3; ++b)
      if ((own.at[b] >> WindowOffsetBits) == 1) {
        area[b] = (own.at[b] & ((uint64_t(1) << WindowOffsetBits) - 1)) - shift(options.rank, b);
        placed[b] = true;
      }
  auto notPlaced = [&](uint8_t b) {
    const char *name = b == 0 ? "input" : b == 1 ? "output" : "scratch";
    return fail(own.at[b] == 0
                    ? llvm::formatv("{0}: copy engines: rank {1}'s {2} buffer is in no window, "
                                    "where its peers' are said to be in slot 0 "
                                    "(CallArgs::peersAlike)",
                                    plan_.fileName, options.rank, name)
                          .str()
                    : llvm::formatv("{0}: copy engines: rank {1}'s {2} buffer is in its window "
                                    "slot {3}, not in slot 0 where its peers' are said to be "
                                    "(CallArgs::peersAlike)",
                                    plan_.fileName, options.rank, name,
                                    (own.at[b] >> WindowOffsetBits) - 1)
                          .str());
  };
  auto base = [&](int32_t rank, uint8_t buffer) -> unsigned char * {
    if (!oneRank() || rank == options.rank) {
      const RankPointers &r = rankTable[static_cast<size_t>(rank)];
      return static_cast<unsigned char *>(buffer == 0   ? r.input
                                          : buffer == 1 ? r.output
                                                        : r.scratch);
    }
    const PeerWindows &w = peerWindows[static_cast<size_t>(rank)];
    if (w.windows.empty() || !w.windows[0].base)
      return nullptr;
    return static_cast<unsigned char *>(w.windows[0].base) + area[buffer] + shift(rank, buffer);
  };
  for (const CopyPhases::Copy &c : copyPhases->copies) {
    const int32_t rank = plan_.tbs[static_cast<size_t>(c.tb)].rank;
    if (oneRank() && rank != options.rank)
      continue;
    const PlanStep &step = plan_.steps[static_cast<size_t>(c.step)];
    const PlanStepPeer d = plan_.stepPeer(static_cast<size_t>(c.step));
    const bool put = step.type == StepKind::Put, get = step.type == StepKind::Get;
    const int32_t ndst = put ? step.nsrc : 1;
    for (int32_t chunk = 0; chunk < step.count; ++chunk) {
      const CallSlice *slice =
          layout->slices.data() + step.sliceBegin + static_cast<int64_t>(chunk) * step.nsrc;
      if (!slice->nelem)
        continue;
      if (oneRank() && get && !placed[step.srcBuf])
        return notPlaced(step.srcBuf);
      if (oneRank() && put && !placed[step.dstBuf])
        return notPlaced(step.dstBuf);
      const unsigned char *from = base(get ? d.peer : rank, step.srcBuf);
      // A fused put's destination r is its peer r's, or with a folded copy
      // (FoldedCopy) this rank's own for r = 0 and peer r - 1's after it.
      const bool folded = put && d.members >= 0 && d.ordinal == FoldedCopy;
      for (int32_t r = 0; r < ndst; ++r) {
        const int32_t member = folded ? r - 1 : r;
        const int32_t to = !put || member < 0 ? rank
                           : member == 0      ? d.peer
                                              : plan_.memberPeers[static_cast<size_t>(d.members + member)];
        unsigned char *into = base(to, step.dstBuf);
        if (!from || !into)
          return fail(llvm::formatv("{0}: copy engines: rank {1} reaches rank {2}, whose "
                                    "window slot 0 it was not given (setPeerWindows)",
                                    plan_.fileName, rank, from ? to : d.peer));
        const unsigned char *src = from + slice->src * es;
        unsigned char *dst = into + slice[r].dst * es;
        const uint64_t n = slice->nelem * es;
        if (src == dst) // an in-place rank's own block: nothing to move
          continue;
        // A copy that continues the previous one on both sides joins it.
        if (!engineCopies.empty()) {
          EngineCopy &last = engineCopies.back();
          if (static_cast<unsigned char *>(last.dst) + last.bytes == dst &&
              static_cast<const unsigned char *>(last.src) + last.bytes == src) {
            last.bytes += n;
            continue;
          }
        }
        engineCopies.push_back({dst, src, n});
      }
    }
  }
  copyEngineCall = true;
  result.copyEngineCopies = static_cast<uint32_t>(engineCopies.size());
  return llvm::Error::success();
}

llvm::Error CudaExecutor::launchCopyEngines(cudaStream_t s) {
  // One iteration: the runs' steps move no data.
  KernelParams before = params;
  before.tbs = preTbs.as<PlanTb>();
  before.iterations = 1;
  if (llvm::Error err = launchKernel(before, s))
    return err;
  for (const EngineCopy &c : engineCopies)
    COLL_CUDA_TRY(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDefault, s));
  KernelParams after = params;
  after.tbs = postTbs.as<PlanTb>();
  after.steps = postSteps.as<PlanStep>();
  after.deps = postDeps.as<PlanDep>();
  after.iterations = 1;
  return launchKernel(after, s);
}

} // namespace coll::interp::cuda
