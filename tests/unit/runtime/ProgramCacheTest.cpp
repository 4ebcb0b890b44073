//===- ProgramCacheTest.cpp - Plans kept whole, read one rank at a time ---===//
//
// The program cache stores the whole job's plan of a program and a rank
// reads back only its own part (docs/RUNTIME.md, "The program cache"). What
// a rank reads must be exactly interp::slicePlan of the whole plan, for every
// built-in program and rank; a damaged part is a miss for the ranks that
// need it and only for them.
//
//===----------------------------------------------------------------------===//

#include "ProgramCache.h"
#include "Selection.h"

#include "coll/interpreter/HostExecutor.h"
#include "coll/interpreter/Plan.h"
#include "coll/runtime/Registry.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <tuple>
#include <unistd.h>

using namespace coll;
using coll::rt::ProgramCache;

namespace {

/// The records of two vectors, byte for byte (the plan's records are POD
/// with no padding).
template <typename T> bool sameRecords(const std::vector<T> &a, const std::vector<T> &b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// Whether two plans are the same, field by field; names the first that
/// differs.
std::string planDifference(const interp::Plan &a, const interp::Plan &b) {
  if (a.name != b.name || a.fileName != b.fileName)
    return "names";
  if (a.collective != b.collective || a.protocol != b.protocol || a.nranks != b.nranks ||
      a.root != b.root || a.inplace != b.inplace || a.outofplace != b.outofplace ||
      a.minBytes != b.minBytes || a.maxBytes != b.maxBytes || a.maxIrSteps != b.maxIrSteps ||
      a.planRank != b.planRank)
    return "scalars";
  if (a.shape.nranks != b.shape.nranks || a.shape.chunksPerBlock != b.shape.chunksPerBlock ||
      a.shape.inputPerRank != b.shape.inputPerRank ||
      a.shape.outputPerRank != b.shape.outputPerRank)
    return "shape";
  if ((a.condition == nullptr) != (b.condition == nullptr))
    return "condition";
  if (a.scratchChunks != b.scratchChunks || a.rankTbBegin != b.rankTbBegin ||
      a.sliceClasses != b.sliceClasses || a.connectionsInto != b.connectionsInto)
    return "per-rank tables";
  if (!sameRecords(a.tbs, b.tbs))
    return "tbs";
  if (!sameRecords(a.steps, b.steps))
    return "steps";
  if (!sameRecords(a.deps, b.deps))
    return "dependencies";
  if (!sameRecords(a.slices, b.slices))
    return "slices";
  if (!sameRecords(a.connections, b.connections))
    return "connections";
  if (!sameRecords(a.conflicts, b.conflicts))
    return "conflicts";
  return "";
}

/// A fresh directory, removed at the end of the test.
struct TempDir {
  std::string path;
  TempDir() {
    llvm::SmallString<128> p;
    if (llvm::sys::fs::createUniqueDirectory("coll-cache-test", p))
      ADD_FAILURE() << "cannot make a temporary directory";
    path = std::string(p);
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
};

/// The built-ins only a tuning table picks (Selection.h).
const std::vector<std::string> TuningOnly = {"allreduce_hierarchical",
                                             "allreduce_hierarchical_tree",
                                             "alltoall_hierarchical"};

/// Every built-in program compiled for `shape`, every rank's plan (those
/// only a tuning table picks too).
std::vector<rt::LoadedAlgorithm> builtins(const rt::Shape &shape) {
  rt::RegistryOptions options; // no program cache: compiled here
  options.namedByRules = TuningOnly;
  auto registry = rt::Registry::load(options, shape);
  if (!registry) {
    ADD_FAILURE() << llvm::toString(registry.takeError());
    return {};
  }
  return registry->algorithms();
}

rt::Shape shapeOf(int nodes, int gpus) {
  rt::Shape shape;
  shape.nodes = nodes;
  shape.gpus = gpus;
  shape.nranks = nodes * gpus;
  return shape;
}

ProgramCache::Entry entryOf(const rt::Compiled &compiled) {
  ProgramCache::Entry entry;
  entry.plan = compiled.plan;
  entry.hash = compiled.hash;
  entry.maxChannel = compiled.maxChannel;
  return entry;
}

/// Overwrites one byte of `path` at `offset` (from the end when negative).
void damage(const std::string &path, long offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(0, std::ios::end);
  const long size = static_cast<long>(f.tellg());
  const long at = offset < 0 ? size + offset : offset;
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(at);
  f.write(&c, 1);
}

TEST(ProgramCache, EveryRankReadsExactlyItsSliceOfEveryBuiltinProgram) {
  TempDir dir;
  ProgramCache cache(dir.path);
  ASSERT_TRUE(cache.enabled()) << "the test binary has no build id";
  // Plans whose steps wait on several dependencies (Plan::deps), which
  // each rank's part must carry with its tbs renumbered: the all-pairs and
  // one-shot allreduces have some.
  int withDeps = 0;
  for (rt::Shape shape : {shapeOf(2, 4), shapeOf(1, 5)}) {
    std::vector<rt::LoadedAlgorithm> algos = builtins(shape);
    ASSERT_GT(algos.size(), 5u);
    for (const rt::LoadedAlgorithm &a : algos) {
      SCOPED_TRACE(a.origin + " at " + std::to_string(shape.nranks) + " ranks");
      const interp::Plan &whole = a.compiled->plan;
      ASSERT_EQ(whole.planRank, -1);
      withDeps += !whole.deps.empty();
      const std::string key = cache.key(a.origin, std::to_string(shape.nranks));
      ASSERT_TRUE(cache.store(key, entryOf(*a.compiled)));

      // A whole plan is stored, never read back whole.
      EXPECT_FALSE(cache.load(key, -1));

      for (int32_t r = 0; r < shape.nranks; ++r) {
        SCOPED_TRACE("rank " + std::to_string(r));
        std::optional<ProgramCache::Entry> mine = cache.load(key, r);
        ASSERT_TRUE(mine && mine->plan);
        const interp::Plan sliced = interp::slicePlan(whole, r);
        EXPECT_EQ(planDifference(*mine->plan, sliced), "");
        EXPECT_EQ(mine->hash, a.compiled->hash);
        EXPECT_EQ(mine->maxChannel, a.compiled->maxChannel);
        ASSERT_FALSE(interp::checkPlanIndices(*mine->plan)) << "a slice out of range";
        // Only this rank's tbs, steps and connections.
        int64_t own = 0, conns = 0;
        for (int32_t t = whole.rankTbBegin[r]; t < whole.rankTbBegin[r + 1]; ++t)
          own += whole.tbs[t].nSteps;
        for (const interp::PlanConnection &c : whole.connections)
          conns += c.sender == r || c.receiver == r;
        EXPECT_EQ(static_cast<int64_t>(mine->plan->steps.size()), own);
        EXPECT_EQ(static_cast<int32_t>(mine->plan->tbs.size()), whole.tbCount(r));
        EXPECT_EQ(mine->plan->tbCount(r), whole.tbCount(r));
        EXPECT_EQ(static_cast<int64_t>(mine->plan->connections.size()), conns);
        // Each of its tbs drives the same connection as in the whole plan.
        for (int32_t t = 0; t < whole.tbCount(r); ++t) {
          const interp::PlanTb &w = whole.tbs[whole.rankTbBegin[r] + t];
          const interp::PlanTb &m = mine->plan->tbs[t];
          for (auto [wc, mc] : {std::pair{w.sendConn, m.sendConn}, {w.recvConn, m.recvConn}}) {
            ASSERT_EQ(wc < 0, mc < 0);
            if (wc < 0)
              continue;
            const interp::PlanConnection &x = whole.connections[wc];
            const interp::PlanConnection &y = mine->plan->connections[mc];
            EXPECT_EQ(std::tie(x.sender, x.receiver, x.channel, x.atReceiver),
                      std::tie(y.sender, y.receiver, y.channel, y.atReceiver));
          }
        }
        // A call resolves the same on this rank from either plan: the same
        // largest chunk (the pipeline's iterations agree across ranks) and
        // the same element ranges for this rank's slices.
        for (uint64_t count : {uint64_t(1000), uint64_t(7 * whole.shape.chunksPerBlock + 3)}) {
          auto a1 = interp::resolveCall(whole, count);
          auto b1 = interp::resolveCall(*mine->plan, count);
          ASSERT_EQ(static_cast<bool>(a1), static_cast<bool>(b1));
          if (!a1) {
            llvm::consumeError(a1.takeError());
            llvm::consumeError(b1.takeError());
            continue;
          }
          EXPECT_EQ(a1->maxChunkElems, b1->maxChunkElems);
          EXPECT_EQ(a1->scratchElems, b1->scratchElems);
          const int32_t first = whole.rankTbBegin[r];
          if (first < whole.rankTbBegin[r + 1]) {
            const int32_t base = whole.tbs[first].sliceBegin;
            for (size_t k = 0; k < b1->slices.size(); ++k) {
              EXPECT_EQ(b1->slices[k].src, a1->slices[base + k].src);
              EXPECT_EQ(b1->slices[k].dst, a1->slices[base + k].dst);
              EXPECT_EQ(b1->slices[k].nelem, a1->slices[base + k].nelem);
            }
          }
        }
      }
    }
  }
  EXPECT_GE(withDeps, 2);
}

/// The ring allreduce of 8 ranks, stored: its entry's path and whole plan.
struct Stored {
  TempDir dir;
  ProgramCache cache{dir.path};
  std::string key, path;
  interp::Plan whole;
  Stored() {
    for (const rt::LoadedAlgorithm &a : builtins(shapeOf(1, 8)))
      if (a.name == "allreduce_ring") {
        whole = a.compiled->plan;
        key = cache.key("ring", "8");
        cache.store(key, entryOf(*a.compiled));
      }
    path = dir.path + "/" + key;
  }
  /// The file offset of rank r's part and its size: the common part ends
  /// with (offset, bytes, checksum) per rank, offsets from its end.
  std::pair<long, long> part(int32_t r) const {
    std::ifstream f(path, std::ios::binary);
    std::string line;
    std::getline(f, line);
    // "coll-program-cache 9 ok COMMON_BYTES CHECKSUM"
    unsigned long common = 0;
    char hex[40];
    EXPECT_EQ(std::sscanf(line.c_str(), "coll-program-cache 9 ok %lu %39s", &common, hex), 2);
    const long partsAt = static_cast<long>(line.size() + 1 + common);
    uint64_t entry[3] = {};
    f.seekg(partsAt - static_cast<long>((whole.nranks - r) * sizeof entry));
    f.read(reinterpret_cast<char *>(entry), sizeof entry);
    return {partsAt + static_cast<long>(entry[0]), static_cast<long>(entry[1])};
  }
};

TEST(ProgramCache, DamageToOneRanksPartIsAMissForThatRankOnly) {
  Stored s;
  ASSERT_EQ(s.whole.nranks, 8);
  for (int32_t r = 0; r < 8; ++r)
    ASSERT_TRUE(s.cache.load(s.key, r)) << "rank " << r;
  auto [at, bytes] = s.part(3);
  ASSERT_GT(bytes, 40);
  damage(s.path, at + bytes - 5); // in its slices
  EXPECT_FALSE(s.cache.load(s.key, 3)) << "rank 3 read its damaged part";
  for (int32_t r : {0, 2, 4, 7})
    EXPECT_TRUE(s.cache.load(s.key, r)) << "rank " << r << "'s part is whole";
}

TEST(ProgramCache, DamageToTheCommonPartIsAMissForEveryRank) {
  Stored s;
  damage(s.path, 80); // in the common part: names and tables
  for (int32_t r : {0, 5})
    EXPECT_FALSE(s.cache.load(s.key, r)) << "rank " << r;
}

TEST(ProgramCache, ATruncatedEntryIsAMissForTheRanksItCuts) {
  Stored s;
  // The parts come in rank order: ranks 6 and 7 lose theirs.
  ASSERT_EQ(::truncate(s.path.c_str(), s.part(6).first + 1), 0);
  EXPECT_TRUE(s.cache.load(s.key, 0));
  EXPECT_TRUE(s.cache.load(s.key, 5));
  EXPECT_FALSE(s.cache.load(s.key, 6));
  EXPECT_FALSE(s.cache.load(s.key, 7));
  ASSERT_EQ(::truncate(s.path.c_str(), 30), 0); // within the first line
  EXPECT_FALSE(s.cache.load(s.key, 0));
}

TEST(ProgramCache, AnErrorIsKeptAsAnError) {
  TempDir dir;
  ProgramCache cache(dir.path);
  ProgramCache::Entry entry;
  entry.error = "assert failed: N must be a power of two";
  ASSERT_TRUE(cache.store("e", entry));
  for (int32_t r : {-1, 3}) {
    auto hit = cache.load("e", r);
    ASSERT_TRUE(hit);
    EXPECT_FALSE(hit->plan);
    EXPECT_EQ(hit->error, entry.error);
  }
  EXPECT_FALSE(cache.load("missing", 0));
}

TEST(ProgramCache, ANoteIsReadBackOnlyAsANoteAndOnlyWhole) {
  TempDir dir;
  ProgramCache cache(dir.path);
  ASSERT_TRUE(cache.storeNote("n", "N\nroot"));
  EXPECT_EQ(cache.loadNote("n"), std::optional<std::string>("N\nroot"));
  ASSERT_TRUE(cache.storeNote("empty", ""));
  EXPECT_EQ(cache.loadNote("empty"), std::optional<std::string>(""));
  // Neither kind reads as the other.
  EXPECT_FALSE(cache.load("n", 0)) << "a note is not a plan nor an error";
  ProgramCache::Entry error;
  error.error = "does not compile";
  ASSERT_TRUE(cache.store("e", error));
  EXPECT_FALSE(cache.loadNote("e"));
  EXPECT_FALSE(cache.loadNote("missing"));
  // A note cut short no longer matches its digest.
  llvm::SmallString<128> path(dir.path);
  llvm::sys::path::append(path, "n");
  std::ifstream in(path.c_str());
  std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(::truncate(path.c_str(), off_t(whole.size() - 2)), 0);
  EXPECT_FALSE(cache.loadNote("n"));
  // A disabled cache keeps nothing.
  ProgramCache off("");
  EXPECT_FALSE(off.storeNote("n", "N"));
  EXPECT_FALSE(off.loadNote("n"));
}

TEST(ProgramCache, ARanksPlanIsNeverStoredNorRunAsTheJobs) {
  Stored s;
  ProgramCache::Entry entry;
  entry.plan = interp::slicePlan(s.whole, 2);
  EXPECT_FALSE(s.cache.store("sliced", entry)) << "another rank would read rank 2's plan";
  // The host executor runs every rank: it needs every rank's steps.
  interp::HostOptions options;
  auto executor = interp::HostExecutor::create(*entry.plan, options);
  ASSERT_FALSE(executor);
  EXPECT_NE(llvm::toString(executor.takeError()).find("rank 2's steps only"), std::string::npos);
}

} // namespace

// The hierarchical built-ins, which no built-in rule picks, are compiled
// only where a tuning rule names them; otherwise they are rejections that
// say so.
TEST(Registry, TuningOnlyBuiltinsAreCompiledWhereATuningRuleNamesThem) {
  auto namesOf = [](const rt::Registry &reg) {
    std::vector<std::string> names;
    for (const rt::LoadedAlgorithm &a : reg.algorithms())
      names.push_back(a.name);
    return names;
  };
  auto has = [](const std::vector<std::string> &names, const std::string &name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  rt::RegistryOptions options;
  auto plain = rt::Registry::load(options, shapeOf(2, 4));
  ASSERT_TRUE(static_cast<bool>(plain)) << llvm::toString(plain.takeError());
  std::vector<std::string> names = namesOf(*plain);
  EXPECT_TRUE(has(names, "allreduce_ring"));
  for (const std::string &t : TuningOnly) {
    EXPECT_FALSE(has(names, t)) << t;
    bool said = false;
    for (const rt::Rejection &r : plain->rejections())
      said |= r.name == t && llvm::StringRef(r.reason).contains("no tuning rule names it");
    EXPECT_TRUE(said) << t;
  }
  options.namedByRules = {"allreduce_hierarchical_tree"};
  auto named = rt::Registry::load(options, shapeOf(2, 4));
  ASSERT_TRUE(static_cast<bool>(named)) << llvm::toString(named.takeError());
  names = namesOf(*named);
  EXPECT_TRUE(has(names, "allreduce_hierarchical_tree"));
  EXPECT_FALSE(has(names, "allreduce_hierarchical"));
  EXPECT_FALSE(has(names, "alltoall_hierarchical"));
}

// Compiling on first use (RegistryOptions::deferBuiltins): what a deferred
// built-in says of itself before it is compiled (its name, collective,
// protocol, size range and roots, read from its header without tracing)
// is what compiling it at creation gives, and compiling it on first use
// gives the same program. At 6 ranks the power-of-two programs do not
// compile: on first use they are errors, as they are rejections at
// creation.
TEST(Registry, ABuiltinCompiledOnFirstUseIsTheOneCompiledAtCreation) {
  for (rt::Shape shape : {shapeOf(1, 4), shapeOf(1, 6), shapeOf(2, 4)}) {
    SCOPED_TRACE(shape.nranks);
    rt::RegistryOptions options;
    options.namedByRules = TuningOnly;
    auto eager = rt::Registry::load(options, shape);
    ASSERT_TRUE(static_cast<bool>(eager)) << llvm::toString(eager.takeError());
    options.deferBuiltins = true;
    auto lazy = rt::Registry::load(options, shape);
    ASSERT_TRUE(static_cast<bool>(lazy)) << llvm::toString(lazy.takeError());
    EXPECT_GT(lazy->programsDeferred(), 0);
    // Every program compiled at creation (those that did not compile too) is
    // compiled at creation or deferred.
    EXPECT_EQ(lazy->programsCompiled() + lazy->programsDeferred(), eager->programsCompiled());
    EXPECT_GE(lazy->maxChannel(), eager->maxChannel());
    for (const rt::LoadedAlgorithm &a : lazy->algorithms()) {
      SCOPED_TRACE(a.name);
      auto same = std::find_if(eager->algorithms().begin(), eager->algorithms().end(),
                               [&](const rt::LoadedAlgorithm &e) { return e.name == a.name; });
      auto compiled = lazy->compileDeferred(a);
      if (same == eager->algorithms().end()) {
        // Not loaded at creation: it must not compile now either.
        ASSERT_TRUE(a.deferred);
        ASSERT_FALSE(compiled) << "compiled on first use, rejected at creation";
        EXPECT_NE(llvm::toString(compiled.takeError()).find("does not compile for"),
                  std::string::npos);
        continue;
      }
      ASSERT_TRUE(static_cast<bool>(compiled)) << llvm::toString(compiled.takeError());
      EXPECT_EQ(a.collective, same->collective);
      EXPECT_EQ(a.protocol, same->protocol);
      EXPECT_EQ(a.anyRoot, same->anyRoot);
      EXPECT_EQ(a.minBytes, same->minBytes);
      EXPECT_EQ(a.maxBytes, same->maxBytes);
      EXPECT_EQ(std::max(a.root, 0), std::max(same->root, 0));
      EXPECT_EQ((*compiled)->hash, same->compiled->hash);
      EXPECT_EQ(planDifference((*compiled)->plan, same->compiled->plan), "");
      if (!a.deferred)
        continue;
      // Until it is settled, the program is pending and holds nothing.
      EXPECT_TRUE(a.pending());
      EXPECT_FALSE(a.program());
      rt::Registry::settle(a, *compiled, "");
      EXPECT_FALSE(a.pending());
      EXPECT_EQ(a.program(), *compiled);
      // Another root compiles from the same source.
      if (a.anyRoot && shape.nranks > 1) {
        auto other = lazy->forRoot(a, 1);
        ASSERT_TRUE(static_cast<bool>(other)) << llvm::toString(other.takeError());
        EXPECT_EQ((*other)->plan.root, 1);
      }
    }
  }
}

// The agreed outcome of a program that does not compile: it serves
// nothing, and says why; the registries of two ranks agree before and
// after (the fingerprint names the programs, not their compiled IR).
TEST(Registry, ADeferredProgramThatFailsIsSettledAsAnError) {
  rt::RegistryOptions options;
  options.deferBuiltins = true;
  auto one = rt::Registry::load(options, shapeOf(1, 6));
  auto two = rt::Registry::load(options, shapeOf(1, 6));
  ASSERT_TRUE(one && two);
  EXPECT_EQ(one->fingerprint(), two->fingerprint());
  auto rhd = std::find_if(one->algorithms().begin(), one->algorithms().end(),
                          [](const rt::LoadedAlgorithm &a) { return a.name == "allreduce_rhd"; });
  ASSERT_NE(rhd, one->algorithms().end());
  auto compiled = one->compileDeferred(*rhd);
  ASSERT_FALSE(compiled);
  std::string why = llvm::toString(compiled.takeError());
  rt::Registry::settle(*rhd, nullptr, why);
  EXPECT_FALSE(rhd->pending());
  EXPECT_EQ(rhd->failure(), why);
  auto again = one->compileDeferred(*rhd);
  ASSERT_FALSE(again);
  EXPECT_EQ(llvm::toString(again.takeError()), why);
  EXPECT_FALSE(one->forRoot(*rhd, 0));
  EXPECT_EQ(one->fingerprint(), two->fingerprint());
}

// With a program cache, the header is kept beside the parameters: a second
// load parses nothing, and defers the same programs with the same header.
TEST(Registry, TheProgramCacheKeepsTheHeadersOfDeferredPrograms) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("coll-cache-test", dir));
  rt::RegistryOptions options;
  options.deferBuiltins = true;
  options.cacheDir = std::string(dir);
  auto first = rt::Registry::load(options, shapeOf(2, 8));
  auto second = rt::Registry::load(options, shapeOf(2, 8));
  ASSERT_TRUE(first && second);
  EXPECT_GT(first->programsInspected(), 0);
  EXPECT_EQ(second->programsInspected(), 0);
  EXPECT_EQ(first->fingerprint(), second->fingerprint());
  ASSERT_EQ(first->algorithms().size(), second->algorithms().size());
  for (size_t i = 0; i < first->algorithms().size(); ++i) {
    const rt::LoadedAlgorithm &a = first->algorithms()[i], &b = second->algorithms()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.collective, b.collective);
    EXPECT_EQ(a.protocol, b.protocol);
    EXPECT_EQ(static_cast<bool>(a.deferred), static_cast<bool>(b.deferred));
  }
  llvm::sys::fs::remove_directories(dir);
}

// Issue 66, item 5: below rt::DeviceLLBelowBytes a device call runs an LL
// program, whatever its collective and ranks. The first built-in rule for
// device calls that matches the call must name a program the communicator
// loads, for that size and root 0, whose protocol is LL (where the rules
// run out, the host's rules would give Simple or LL128).
TEST(DeviceRules, NoDeviceCallBelowTheLLCrossoverGetsSimpleOrLL128) {
  rt::RegistryOptions options;
  options.builtin = true;
  options.deferBuiltins = true; // headers only: the protocol without a compile
  const ir::Collective collectives[] = {
      ir::Collective::AllReduce, ir::Collective::AllGather, ir::Collective::ReduceScatter,
      ir::Collective::AllToAll,  ir::Collective::Broadcast, ir::Collective::Reduce,
      ir::Collective::Gather,    ir::Collective::Scatter};
  for (rt::Shape shape : {shapeOf(1, 2), shapeOf(1, 3), shapeOf(1, 4), shapeOf(1, 7),
                          shapeOf(1, 8), shapeOf(8, 8), shapeOf(128, 8)}) {
    SCOPED_TRACE(std::to_string(shape.nranks) + " ranks");
    auto reg = rt::Registry::load(options, shape);
    ASSERT_TRUE(static_cast<bool>(reg)) << llvm::toString(reg.takeError());
    const uint64_t below = rt::DeviceLLBelowBytes;
    for (ir::Collective coll : collectives)
      for (uint64_t bytes : {uint64_t(0), uint64_t(4), uint64_t(1) << 10, uint64_t(4) << 10,
                             (uint64_t(8) << 10) - 4, uint64_t(8) << 10, below / 2 * 3 / 2,
                             below - 4}) {
        SCOPED_TRACE(ir::collectiveName(coll).str() + " of " + std::to_string(bytes) + " B");
        const rt::LoadedAlgorithm *served = nullptr;
        const rt::TuningRule *by = nullptr;
        for (const rt::TuningRule &rule : rt::deviceTuningRules()) {
          if (!rule.matches(coll, shape.nranks, bytes))
            continue;
          for (const rt::LoadedAlgorithm &a : reg->algorithms())
            if (a.name == rule.target && a.collective == coll &&
                (!a.minBytes || bytes >= a.minBytes) && (!a.maxBytes || bytes <= a.maxBytes) &&
                (a.anyRoot || a.root <= 0))
              served = &a;
          if (served) {
            by = &rule;
            break;
          }
        }
        ASSERT_NE(served, nullptr)
            << "no built-in rule for device calls serves it: the host's rules would";
        EXPECT_EQ(served->protocol, ir::Protocol::LL)
            << served->name << " by \"" << by->text << "\"";
      }
  }
}
