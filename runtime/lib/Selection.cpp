//===- Selection.cpp - Which algorithm serves a call -----------------------===//
//
// In order: the user's tuning rules (COLL_TUNING_FILE, and those synthesized
// for COLL_TOPO_FILE), the user's algorithms, the built-in rules, the
// built-in algorithms. The first that applies serves the call; when none
// does, the error names every candidate and why it was rejected.
//
//===----------------------------------------------------------------------===//

#include "Selection.h"
#include "CommImpl.h"

#include "coll/support/Bytes.h"

#include "llvm/Support/ErrorHandling.h"

#include <set>

namespace coll::rt {

using synth::parseTuningTable;

namespace {
Choice makeChoice(const LoadedAlgorithm *algo, std::string library, std::string why,
                  bool local = false) {
  Choice c;
  c.algo = algo;
  c.library = std::move(library);
  c.why = std::move(why);
  c.local = local;
  return c;
}
} // namespace

namespace {

// The built-in order of the embedded algorithms. The thresholds come from
// the host backend's runtime benchmark (docs/performance/runtime.md); device calls
// follow them too, after their own (DeviceTable).
constexpr const char *BuiltinTable = R"(# Coll's built-in rules (docs/RUNTIME.md)
allreduce      2   4K-*    allreduce_ring
allreduce      *   0-8K    allreduce_oneshot
allreduce      *   0-16K   allreduce_allpairs
allreduce      *   *       allreduce_ring
allgather      *   0-2M    allgather_recursive_doubling
allgather      *   *       allgather_ring
reducescatter  *   0-16K   reducescatter_allpairs
reducescatter  *   *       reducescatter_ring
alltoall       *   *       alltoall_allpairs
alltoall       *   *       p2p
broadcast      *   0-64K   broadcast_binomial
broadcast      *   *       broadcast_chain
reduce         *   *       reduce_binomial
gather         *   *       gather_direct
scatter        *   *       scatter_direct
)";

// Rules that come first where some host of the job runs more processes than
// it has CPUs (docs/RUNTIME.md). A pipeline such as the chain needs all its
// stages running at once; where processes share CPUs, every slot that moves
// down the chain waits for a process to be scheduled, and the binomial
// tree's fewer, larger hand-offs win (measured with 4 processes on 2 CPUs:
// docs/performance/runtime.md).
constexpr const char *CrowdedTable = R"(# Coll's built-in rules for crowded hosts (docs/RUNTIME.md)
broadcast      *   64K-32M broadcast_binomial
)";

// Calls whose buffers lie in registered windows on one host: the direct
// programs read and write the peers' buffers in place, with no FIFO and no
// copy. Measured with 2 processes on the 2-core build machine against the
// FIFO built-ins on the same windows (docs/performance/runtime.md): the two-shot
// allreduce wins from 16 KiB (of the FIFO ring's time: 0.8 at 16 KiB and
// 0.9-1.0 at 64 KiB with 2 processes, 0.4-0.7 at both with 3 and 4; from
// 1 MiB 0.45-0.5 x Open MPI, 0.2 at 64 MiB); the all-pairs get allgather
// from 1 MiB (0.6-0.8 of the FIFO time); the reduce-scatter that reduces
// every peer's block into its own from 64 KiB (0.5-0.8 of the FIFO time at
// 64 and 256 KiB with 2-4 processes, the same at 16 KiB); the all-pairs put
// alltoall from 4 KiB (0.4-0.85); the broadcast in which every rank reads
// the root's buffer from 4 KiB to 1 MiB (0.4-0.75), and from 4 MiB the
// chain's pipeline is as fast or faster. Below those sizes a direct call's two synchronizations with each
// peer (the peer has started; the peer is done with my buffer) cost more
// than a FIFO's one.
constexpr const char *WindowTable = R"(# Coll's built-in rules for buffers in windows (docs/RUNTIME.md)
allreduce      *   16K-*   allreduce_twoshot_direct
allgather      *   1M-*    allgather_direct
reducescatter  *   64K-*   reducescatter_direct
alltoall       *   4K-*    alltoall_direct
broadcast      *   4K-1M   broadcast_direct
)";

// Device calls on a communicator of one host with windows registered: the
// direct two-shot allreduce from 4 MiB. Measured on a lent H200 with 8
// ranks on the GPU, in place, against the FIFO ring (Simple, 32 channels)
// in the same run (docs/performance/gpu.md, 2026-11-28): 1.50x the ring's busbw
// at 4 MiB, 1.37x at 16 MiB, 1.28-1.30x from 256 MiB to 1 GiB; 0.97x at
// 1 MiB, so not below 4 MiB. The other direct programs were not measured on
// a GPU and have no rule here. Unlike the host's, these rules hang on
// nothing that one rank alone can see: whether the communicator holds a
// window is the same on every rank (registration is collective), so every
// rank chooses the same program; a rank whose buffers lie outside its
// windows copies them through its area on the GPU (docs/RUNTIME.md).
constexpr const char *DeviceWindowTable =
    R"(# Coll's built-in rules for device calls on a communicator with windows (docs/RUNTIME.md)
allreduce      *   4M-*    allreduce_twoshot_direct
)";

// Device calls: where the GPU's measurements differ from the host's, these
// come before the built-in rules. LL, where each 8-byte line carries its own
// flag, takes a small message in one hand-off without the FIFO's separate
// tail; NCCL chooses it for small messages too. Measured on lent H100 and
// H200 GPUs with the ranks on one GPU, medians of 200 launches
// (docs/performance/gpu.md, 2026-11-27 and 2026-11-28), in four runs each:
// between 2 ranks at 1 KiB the LL ring took 7.9-8.4 us where the one-shot
// took 9.5-10.5 in LL128 (the Simple one-shot was not timed; Simple's hop
// cost 1.05-1.13 us of step time against LL's 0.66-0.70); among 8 ranks at
// 8 KiB the LL all-pairs took 16.7-17.8 us where Simple took 17.6-19.1.
// No GPU run has timed LL losing to Simple or LL128 at a size below that,
// so every device call below DeviceLLBelowBytes (16 KiB, where the
// all-pairs LL rule ended) runs an LL program: for allreduce the ring
// between 2 ranks, the one-shot (one hand-off) among more up to 8 KiB, the
// all-pairs from there; for the others the program the built-in rules
// choose at that size, in LL (recursive doubling for allgather where the
// ranks are a power of 2, else the ring). DeviceCallsChooseLLForSmallAllreduces
// and DeviceRules.* in the unit tests fail where a rule gives such a call
// Simple or LL128.
// The variants are compiled for a communicator only where a rule here
// names them for its ranks (isDeviceOnlyBuiltin), and above 64 ranks at
// their first use, like every built-in; one that cannot compile there (too
// large for the front end) is passed over for the built-in rules.
constexpr const char *DeviceTable = R"(# Coll's built-in rules for device calls (docs/RUNTIME.md)
allreduce      2      0-16K   allreduce_ring_ll
allreduce      3-     0-8K    allreduce_oneshot_ll
allreduce      3-     8K-16K  allreduce_allpairs_ll
allgather      *      0-16K   allgather_recursive_doubling_ll
allgather      *      0-16K   allgather_ring_ll
reducescatter  *      0-16K   reducescatter_allpairs_ll
alltoall       *      0-16K   alltoall_allpairs_ll
broadcast      *      0-16K   broadcast_binomial_ll
reduce         *      0-16K   reduce_binomial_ll
gather         *      0-16K   gather_direct_ll
scatter        *      0-16K   scatter_direct_ll
)";

std::vector<TuningRule> parseBuiltin(const char *text, const char *name) {
  // The tables are this file's text: an error is a bug of the build, which
  // must not pass as a table without rules.
  auto parsed = parseTuningTable(text, name);
  if (!parsed)
    llvm::report_fatal_error(llvm::Twine("Coll: ") + llvm::toString(parsed.takeError()));
  return std::move(*parsed);
}

} // namespace

const std::vector<TuningRule> &builtinTuningRules(bool crowded) {
  static const std::vector<TuningRule> rules = parseBuiltin(BuiltinTable, "<built-in rules>");
  static const std::vector<TuningRule> crowdedFirst = [] {
    std::vector<TuningRule> all = parseBuiltin(CrowdedTable, "<built-in rules for crowded hosts>");
    all.insert(all.end(), rules.begin(), rules.end());
    return all;
  }();
  return crowded ? crowdedFirst : rules;
}

const std::vector<TuningRule> &windowTuningRules() {
  static const std::vector<TuningRule> rules =
      parseBuiltin(WindowTable, "<built-in rules for buffers in windows>");
  return rules;
}

const std::vector<TuningRule> &deviceTuningRules() {
  static const std::vector<TuningRule> rules =
      parseBuiltin(DeviceTable, "<built-in rules for device calls>");
  return rules;
}

const std::vector<TuningRule> &deviceWindowTuningRules() {
  static const std::vector<TuningRule> rules =
      parseBuiltin(DeviceWindowTable, "<built-in rules for device calls with windows>");
  return rules;
}

bool isWindowOnlyBuiltin(llvm::StringRef name) {
  // Every program the window table names is one of them: the table is the
  // one list, so that a program added there is never chosen off windows.
  for (const TuningRule &rule : windowTuningRules())
    if (rule.kind == TuningRule::Target::Algorithm && rule.target == name)
      return true;
  return false;
}

bool isDeviceOnlyBuiltin(llvm::StringRef name) {
  // As for the windows: the table is the one list.
  for (const TuningRule &rule : deviceTuningRules())
    if (rule.kind == TuningRule::Target::Algorithm && rule.target == name)
      return true;
  return false;
}

bool deviceRulesCover(llvm::StringRef name, int nranks) {
  for (const TuningRule &rule : deviceTuningRules())
    if (rule.kind == TuningRule::Target::Algorithm && rule.target == name &&
        nranks >= rule.minRanks && nranks <= rule.maxRanks)
      return true;
  return false;
}

bool isDeviceRule(const TuningRule &rule) {
  return llvm::StringRef(rule.origin).startswith("<built-in rules for device calls>");
}

bool isTuningOnlyBuiltin(llvm::StringRef name) {
  return name == "allreduce_hierarchical" || name == "allreduce_hierarchical_tree" ||
         name == "alltoall_hierarchical";
}

bool isWindowRule(const TuningRule &rule) {
  return llvm::StringRef(rule.origin).startswith("<built-in rules for buffers in windows>");
}

bool isDeviceWindowRule(const TuningRule &rule) {
  return llvm::StringRef(rule.origin).startswith("<built-in rules for device calls with windows>");
}

bool isCrowdedRule(const TuningRule &rule) {
  return llvm::StringRef(rule.origin).startswith("<built-in rules for crowded hosts>");
}

bool Communicator::Impl::applies(const LoadedAlgorithm &a, uint64_t bytes, int root,
                                 bool device, std::string &reason) const {
  if (std::string failed = a.failure(); !failed.empty()) {
    reason = "it was compiled on its first use and serves nothing: " + failed;
    return false;
  }
  // What the devices refused holds for device calls only: the host backend
  // runs every program.
  if (device && a.protocol == ir::Protocol::LL128 &&
      avoidLL128.load(std::memory_order_relaxed)) {
    reason = "LL128 is not used here: the job's device calls have FIFOs in host memory (GPUs "
             "without P2P, or other hosts), where LL128's lines may not arrive whole";
    return false;
  }
  if (device && selectionEpoch.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(refusedMutex);
    if (auto found = refusedOnDevice.find(&a); found != refusedOnDevice.end()) {
      reason = "it could not run on this communicator's devices: " + found->second;
      return false;
    }
  }
  if (a.minBytes && bytes < a.minBytes) {
    reason = llvm::formatv("{0} B is below its minBytes {1}", bytes, a.minBytes);
    return false;
  }
  if (a.maxBytes && bytes > a.maxBytes) {
    reason = llvm::formatv("{0} B is above its maxBytes {1}", bytes, a.maxBytes);
    return false;
  }
  if (ir::collectiveInfo(a.collective).hasRoot && !a.anyRoot && std::max(a.root, 0) != root) {
    reason = llvm::formatv("it is written for root {0}", std::max(a.root, 0));
    return false;
  }
  return true;
}

llvm::Expected<const Choice *> Communicator::Impl::select(ir::Collective coll, uint64_t bytes,
                                                          int root, bool device, bool windowed,
                                                          bool compile) {
  // A choice of a built-in not compiled yet: a call compiles it, with the
  // other ranks (compileOnFirstUse), and selects again, for it may not
  // compile; a query says what a call would try first.
  for (;;) {
    const LoadedAlgorithm *pending = nullptr;
    auto chosen = selectOnce(coll, bytes, root, device, windowed, compile ? &pending : nullptr);
    if (!pending)
      return chosen;
    llvm::cantFail(std::move(chosen));
    if (llvm::Error err = compileOnFirstUse(*pending))
      return err;
  }
}

llvm::Expected<const Choice *>
Communicator::Impl::selectOnce(ir::Collective coll, uint64_t bytes, int root, bool device,
                               bool windowed, const LoadedAlgorithm **pending) {
  // A loop of one call is the common case: the calling thread's last
  // answer, without the lock (entries of `choices` are never erased).
  struct Last {
    uint64_t serial = 0, bytes = 0;
    int coll = -1, root = 0;
    uint64_t epoch = 0;
    bool device = false, windowed = false;
    const Choice *choice = nullptr;
  };
  thread_local Last last;
  // Device calls see the refusals of the devices (a new epoch each), host
  // calls never do.
  const uint64_t epoch = device ? selectionEpoch.load(std::memory_order_acquire) : 0;
  if (last.serial == serial && last.bytes == bytes && last.coll == static_cast<int>(coll) &&
      last.root == root && last.epoch == epoch && last.device == device &&
      last.windowed == windowed)
    return last.choice;
  auto key = std::make_tuple(static_cast<int>(coll), bytes, root, epoch, device, windowed);
  std::lock_guard<std::mutex> lock(choicesMutex);
  if (auto found = choices.find(key); found != choices.end()) {
    last = Last{serial, bytes, static_cast<int>(coll), root, epoch,
                device, windowed, &found->second};
    return &found->second;
  }

  std::vector<std::string> rejections;
  // A choice of an algorithm carries its program for the call's root,
  // compiled on first use by the registry (so no call path compiles).
  auto remember = [&](Choice c) -> llvm::Expected<const Choice *> {
    if (c.algo && c.algo->pending()) {
      if (pending) { // the caller compiles it, and selects again
        *pending = c.algo;
        return nullptr;
      }
      // A query: not kept, for the program may yet fail to compile.
      thread_local Choice query;
      query = std::move(c);
      query.why += " (compiled at its first use by a call)";
      return &query;
    }
    if (c.algo) {
      auto program = registry->forRoot(*c.algo, root);
      if (!program)
        return collError(collInvalidUsage,
                         llvm::formatv("{0} ({1}) cannot serve root {2}: {3}", c.algo->name,
                                       c.algo->origin, root,
                                       llvm::toString(program.takeError())));
      c.program = std::move(*program);
    }
    if (choices.size() >= 4096) {
      // Full: this thread's own copy, valid until its next select.
      thread_local Choice overflow;
      overflow = std::move(c);
      return &overflow;
    }
    Choice &kept = choices[key];
    kept = std::move(c);
    return &kept;
  };
  if (nranks == 1)
    return remember(makeChoice(nullptr, "", "one rank: recvbuff gets sendbuff", true));
  const auto &algos = registry->algorithms();
  auto candidates = [&](auto &&accept) -> const LoadedAlgorithm * {
    for (const LoadedAlgorithm &a : algos) {
      if (a.collective != coll || !accept(a))
        continue;
      // The built-in direct programs serve buffers in windows, through
      // their own rules only.
      if (a.builtin && !windowed && isWindowOnlyBuiltin(a.name))
        continue;
      // The built-in protocol variants for device calls, through theirs.
      if (a.builtin && !device && isDeviceOnlyBuiltin(a.name))
        continue;
      std::string reason;
      if (applies(a, bytes, root, device, reason))
        return &a;
    }
    return nullptr;
  };
  auto tryRules = [&](const std::vector<TuningRule> &rules, bool user) -> std::optional<Choice> {
    for (size_t i = 0; i < rules.size(); ++i) {
      const TuningRule &rule = rules[i];
      if (!rule.matches(coll, nranks, bytes))
        continue;
      std::string why = user ? "tuning rule " + rule.origin + " (" + rule.text + ")"
                        : isCrowdedRule(rule)
                            ? "built-in rule for crowded hosts \"" + rule.text + "\""
                        : isWindowRule(rule)
                            ? "built-in rule for buffers in windows \"" + rule.text + "\""
                        : isDeviceWindowRule(rule)
                            ? "built-in rule for device calls on a communicator with windows \"" +
                                  rule.text + "\""
                        : isDeviceRule(rule)
                            ? "built-in rule for device calls \"" + rule.text + "\""
                            : "built-in rule \"" + rule.text + "\"";
      switch (rule.kind) {
      case TuningRule::Target::Library:
        if (std::find(config.underneath.begin(), config.underneath.end(), rule.target) !=
            config.underneath.end())
          return makeChoice(nullptr, rule.target, why);
        rejections.push_back(llvm::formatv("{0}: no library '{1}' underneath Coll here", why,
                                           rule.target));
        break;
      case TuningRule::Target::PointToPoint:
        if (coll == ir::Collective::AllToAll && !device) {
          Choice c = makeChoice(nullptr, "", why);
          c.p2p = true;
          return c;
        }
        rejections.push_back(why + (coll != ir::Collective::AllToAll
                                        ? ": p2p serves alltoall only"
                                        : ": p2p runs host buffers only"));
        break;
      case TuningRule::Target::Protocol:
        if (const LoadedAlgorithm *a =
                candidates([&](const LoadedAlgorithm &x) { return x.protocol == rule.protocol; }))
          return makeChoice(a, "", why);
        rejections.push_back(why + ": no loaded algorithm of that protocol applies");
        break;
      case TuningRule::Target::Algorithm: {
        bool named = false;
        for (const LoadedAlgorithm &a : algos) {
          if (a.name != rule.target)
            continue;
          named = true;
          std::string reason;
          if (a.collective != coll)
            reason = "it is a " + ir::collectiveName(a.collective).str();
          else if (applies(a, bytes, root, device, reason))
            return makeChoice(&a, "", why);
          rejections.push_back(llvm::formatv("{0}: {1} ({2}) does not apply: {3}", why, a.name,
                                             a.origin, reason));
        }
        if (!named)
          rejections.push_back(why + ": no algorithm '" + rule.target + "' is loaded");
        break;
      }
      }
    }
    return std::nullopt;
  };

  if (auto c = tryRules(userRules, true))
    return remember(*c);
  if (const LoadedAlgorithm *a = candidates([](const LoadedAlgorithm &x) { return !x.builtin; }))
    return remember(makeChoice(a, "", "the first user algorithm that applies (" + a->origin + ")"));
  if (windowed)
    if (auto c = tryRules(device ? deviceWindowTuningRules() : windowTuningRules(), false))
      return remember(*c);
  if (device)
    if (auto c = tryRules(deviceTuningRules(), false))
      return remember(*c);
  if (auto c = tryRules(builtinTuningRules(crowded), false))
    return remember(*c);
  if (const LoadedAlgorithm *a = candidates([](const LoadedAlgorithm &x) { return x.builtin; }))
    return remember(makeChoice(a, "", "the first built-in algorithm that applies"));

  // Nothing: say why about every candidate.
  std::string message = llvm::formatv("no algorithm serves {0} of {1} B (root {2}) on {3} ranks",
                                      ir::collectiveName(coll), bytes, root, nranks);
  for (const LoadedAlgorithm &a : algos) {
    if (a.collective != coll)
      continue;
    std::string reason;
    applies(a, bytes, root, device, reason);
    message += "\n  " + a.name + " (" + a.origin + "): " + reason;
  }
  for (const Rejection &r : registry->rejections())
    message += "\n  " + r.name + " (" + r.origin + "): not loaded: " + r.reason;
  for (const std::string &r : rejections)
    message += "\n  " + r;
  if (registry->algorithms().empty() && registry->rejections().empty())
    message += "\n  (no algorithm is loaded: set COLL_ALGO_DIR or COLL_ALGO_FILES, or keep the "
               "built-in set)";
  return collError(collInvalidUsage, message);
}

llvm::Error Communicator::Impl::forWindowChoices(
    llvm::function_ref<llvm::Error(const TuningRule &, const Choice &)> f, bool device) {
  for (const TuningRule &r : device ? deviceWindowTuningRules() : windowTuningRules()) {
    if (!r.collective)
      continue;
    auto chosen = select(*r.collective, std::max<uint64_t>(r.minBytes, 1), 0, device, true);
    if (!chosen) {
      llvm::consumeError(chosen.takeError());
      continue;
    }
    if (!(*chosen)->algo)
      continue;
    if (llvm::Error err = f(r, **chosen))
      return err;
  }
  return llvm::Error::success();
}

void Communicator::Impl::logSelection() {
  if (!logEnabled(Level::Info, Tuning))
    return;
  std::string source =
      config.tuningFile.empty() ? std::string() : "tuning file " + config.tuningFile;
  if (std::any_of(userRules.begin(), userRules.end(), [](const TuningRule &r) {
        return llvm::StringRef(r.origin).startswith("synthesized for ");
      }))
    source += (source.empty() ? "" : ", ") + std::string("rules synthesized for COLL_TOPO_FILE");
  if (source.empty())
    source = "built-in rules";
  if (crowded)
    source += "; a host runs more processes than it has CPUs, so the built-in rules for crowded "
              "hosts come first";
  std::string out = llvm::formatv("algorithm selection for {0} ranks ({1}):", nranks, source).str();
  std::set<const LoadedAlgorithm *> used;
  for (int c = 0; c < static_cast<int>(ir::Collective::Custom); ++c) {
    auto coll = static_cast<ir::Collective>(c);
    // Size boundaries where the choice may change.
    std::set<uint64_t> cuts = {0};
    for (const std::vector<TuningRule> *rules :
         std::array<const std::vector<TuningRule> *, 2>{&userRules, &builtinTuningRules(crowded)})
      for (const TuningRule &r : *rules)
        if (!r.collective || *r.collective == coll) {
          cuts.insert(r.minBytes);
          if (r.maxBytes != UINT64_MAX)
            cuts.insert(r.maxBytes);
        }
    for (const LoadedAlgorithm &a : registry->algorithms())
      if (a.collective == coll) {
        cuts.insert(a.minBytes);
        if (a.maxBytes)
          cuts.insert(a.maxBytes + 1);
      }
    std::vector<uint64_t> bounds(cuts.begin(), cuts.end());
    std::string last;
    uint64_t from = 0;
    auto flush = [&](uint64_t to) {
      if (!last.empty())
        out += llvm::formatv("\n  {0,-13} [{1}, {2})  {3}", ir::collectiveName(coll),
                             formatBytes(from), formatBytes(to), last)
                   .str();
    };
    for (size_t i = 0; i < bounds.size(); ++i) {
      auto chosen = select(coll, bounds[i], 0);
      const Choice *choice = chosen ? *chosen : nullptr;
      std::string text;
      if (!chosen) {
        llvm::consumeError(chosen.takeError());
        text = "(nothing applies)";
      } else if (choice->local) {
        text = "local copy: " + choice->why;
      } else if (choice->p2p) {
        text = "p2p (grouped sends and receives): " + choice->why;
      } else if (choice->algo) {
        used.insert(choice->algo);
        text = llvm::formatv("{0} ({1}, {2}): {3}", choice->algo->name,
                             ir::protocolName(choice->algo->protocol), choice->algo->origin,
                             choice->why)
                   .str();
      } else {
        text = "library " + choice->library + ": " + choice->why;
      }
      if (text != last) {
        flush(bounds[i]);
        last = text;
        from = bounds[i];
      }
    }
    if (last != "(nothing applies)")
      flush(UINT64_MAX);
  }
  // Device calls: their own rules come before the built-in ones.
  for (const TuningRule &r : deviceTuningRules()) {
    if (!r.collective || nranks < r.minRanks || nranks > r.maxRanks)
      continue;
    auto chosen = select(*r.collective, r.minBytes, 0, true);
    if (!chosen) {
      llvm::consumeError(chosen.takeError());
      continue;
    }
    const Choice *choice = *chosen;
    if (!choice->algo)
      continue;
    used.insert(choice->algo);
    out += llvm::formatv("\n  {0,-13} [{1}, {2})  device buffers: {3} ({4}, {5}): {6}",
                         ir::collectiveName(*r.collective), formatBytes(r.minBytes),
                         formatBytes(r.maxBytes), choice->algo->name,
                         ir::protocolName(choice->algo->protocol), choice->algo->origin,
                         choice->why)
               .str();
  }
  // Calls on buffers in windows (one host): their own rules first.
  for (bool device : {false, true})
    llvm::cantFail(forWindowChoices(
        [&](const TuningRule &r, const Choice &choice) -> llvm::Error {
          used.insert(choice.algo);
          out += llvm::formatv("\n  {0,-13} [{1}, {2})  {3}: {4} ({5}, {6}): {7}",
                               ir::collectiveName(*r.collective), formatBytes(r.minBytes),
                               formatBytes(r.maxBytes),
                               device ? "device buffers, windows registered"
                                      : "buffers in registered windows",
                               choice.algo->name, ir::protocolName(choice.algo->protocol),
                               choice.algo->origin, choice.why)
                     .str();
          return llvm::Error::success();
        },
        device));
  for (const LoadedAlgorithm &a : registry->algorithms())
    if (!used.count(&a))
      out += llvm::formatv("\n  not chosen for any size: {0} ({1}, {2}): another algorithm comes "
                           "first for every size (rules, then user files, then built-in)",
                           a.name, ir::collectiveName(a.collective), a.origin)
                 .str();
  for (const Rejection &r : registry->rejections())
    out += llvm::formatv("\n  not loaded: {0} ({1}): {2}", r.name, r.origin, r.reason).str();
  log(Level::Info, Tuning, rank, out);
}

} // namespace coll::rt
