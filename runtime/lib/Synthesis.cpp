//===- Synthesis.cpp - Programs for the job's GPUs (COLL_TOPO_FILE) ---------===//

#include "CommImpl.h"

#if COLL_RUNTIME_HAVE_LANG
#include "coll/synth/Detect.h"
#include "coll/synth/Tune.h"
#endif

#include <algorithm>

namespace coll::rt {

llvm::Error Communicator::Impl::synthesizeForJob() {
  // Every rank finds its GPU in the topology, then all compare; whatever
  // cannot apply is said at INFO and the communicator goes on without.
  struct Mine {
    int32_t gpu = -1;
    char why[244] = {};
  };
  Mine mine;
  std::string why;
#if COLL_RUNTIME_HAVE_LANG
  auto topo = synth::readTopologyFile(config.topoFile);
  if (!topo) {
    why = llvm::toString(topo.takeError());
  } else if (!config.topoGpus.empty()) {
    llvm::SmallVector<llvm::StringRef, 16> parts;
    llvm::StringRef(config.topoGpus).split(parts, ',', -1, false);
    int32_t g = -1;
    if (parts.size() != static_cast<size_t>(nranks))
      why = llvm::formatv("COLL_TOPO_GPUS={0} names {1} GPUs for {2} ranks", config.topoGpus,
                          parts.size(), nranks);
    else if (parts[rank].trim().getAsInteger(10, g) || g < 0 || g >= topo->numRanks())
      why = llvm::formatv("COLL_TOPO_GPUS entry '{0}' of rank {1} is not a GPU of {2} (0..{3})",
                          parts[rank].trim(), rank, config.topoFile, topo->numRanks() - 1);
    else
      mine.gpu = g;
  } else if (hostOf.size() && *std::max_element(hostOf.begin(), hostOf.end()) > 0) {
    why = "the job spans hosts: name each rank's GPU with COLL_TOPO_GPUS";
  } else {
    // The GPU of this rank's CUDA device, by PCI bus id.
    std::string busWhy;
    const std::string bus = pciBusIdOfDevice(gpu, busWhy);
    if (bus.empty()) {
      why = "rank " + std::to_string(rank) + "'s GPU is not known at creation (" + busWhy +
            "): name it with COLL_TOPO_GPUS";
    } else {
      for (int32_t g = 0; g < topo->numRanks(); ++g)
        if (llvm::StringRef(topo->nodes[topo->gpus[g]].name).equals_insensitive("gpu@" + bus))
          mine.gpu = g;
      if (mine.gpu < 0)
        why = "rank " + std::to_string(rank) + "'s GPU " + bus + " is not in " + config.topoFile;
    }
  }
#else
  why = "this libcoll was built without the .coll compiler (COLL_ENABLE_LANG=OFF)";
#endif
  std::snprintf(mine.why, sizeof mine.why, "%s", why.c_str());
  std::vector<Mine> all(static_cast<size_t>(nranks));
  all[rank] = mine;
  if (llvm::Error err = boot->allgather(all.data(), sizeof(Mine)))
    return collError(collRemoteError, "synthesis: lost contact with the other ranks: " +
                                          llvm::toString(std::move(err)));
  std::string skipped;
  std::vector<int32_t> gpus;
  for (int r = 0; r < nranks && skipped.empty(); ++r) {
    if (all[r].gpu < 0)
      skipped = all[r].why;
    else if (std::find(gpus.begin(), gpus.end(), all[r].gpu) != gpus.end())
      skipped = llvm::formatv("ranks share GPU {0} of {1}; synthesis assumes one rank per GPU",
                              all[r].gpu, config.topoFile);
    gpus.push_back(all[r].gpu);
  }
  if (skipped.empty() && nranks < 2)
    skipped = "one rank: nothing to synthesize";
  if (!skipped.empty()) {
    if (rank == 0)
      COLL_LOG(Info, Tuning, rank,
               "COLL_TOPO_FILE=" + config.topoFile + ": no synthesis: " + skipped);
    return llvm::Error::success();
  }
#if COLL_RUNTIME_HAVE_LANG
  // Every rank computes the same programs and rules from the same input.
  std::string gpuList;
  for (int32_t g : gpus)
    gpuList += (gpuList.empty() ? "" : ",") + std::to_string(g);
  const std::string origin = "synthesized for " + config.topoFile + " GPUs " + gpuList;
  auto restricted = synth::restrictTopology(*topo, gpus);
  llvm::Expected<synth::TuneResult> tuned =
      restricted ? synth::tuneTopology(*restricted, {}) : restricted.takeError();
  std::vector<TuningRule> rules;
  std::string failure;
  if (!tuned) {
    failure = llvm::toString(tuned.takeError());
  } else {
    std::vector<bool> used(tuned->candidates.size(), false);
    for (const synth::TunedRange &range : tuned->ranges)
      used[range.candidate] = true;
    for (size_t i = 0; i < tuned->candidates.size() && failure.empty(); ++i)
      if (used[i])
        if (llvm::Error err = registry->addSynthesized(tuned->candidates[i].alg, origin))
          failure = llvm::toString(std::move(err));
    rules = synth::tunedRules(*tuned, nranks, origin);
  }
  if (llvm::Error err =
          agree(failure.empty() ? llvm::Error::success() : collError(collInternalError, failure),
                "synthesis for COLL_TOPO_FILE"))
    return err;
  // After the user's own table (which wins), before the built-in rules.
  userRules.insert(userRules.end(), rules.begin(), rules.end());
  if (rank == 0)
    COLL_LOG(
        Info, Tuning, rank,
        llvm::formatv("COLL_TOPO_FILE={0}: {1} programs {2}, {3} rules", config.topoFile,
                      std::count_if(registry->algorithms().begin(), registry->algorithms().end(),
                                    [&](const LoadedAlgorithm &a) { return a.origin == origin; }),
                      origin, rules.size()));
  return llvm::Error::success();
#else
  return llvm::Error::success();
#endif
}

} // namespace coll::rt
