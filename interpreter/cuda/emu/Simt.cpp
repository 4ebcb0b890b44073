//===- Simt.cpp - A CPU SIMT launcher for the CUDA kernels ----------------===//
//
// A launch starts one OS thread per block and joins them all (thread start
// and join also give ThreadSanitizer the edges a kernel boundary gives on a
// GPU). Blocks keep their fibers, contexts and shared memory between
// launches, in a pool indexed by block number.
//
// A block's thread runs its fibers round-robin. A pass in which no GPU thread
// arrived at a barrier or exited made no visible progress: the threads are
// all spinning on what other blocks have not yet done, so the OS thread gives
// its CPU away (sched_yield; after 1 ms of that, 20 us sleeps), which keeps
// hundreds of blocks moving on two cores.
//
//===----------------------------------------------------------------------===//

#include "Simt.h"

#include "coll/interpreter/host/Fiber.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/Error.h"

#include <algorithm>
#include <cassert>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <system_error>
#include <thread>
#include <vector>

#include <sched.h>

#if COLL_SIMT_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace coll::interp::cuda::simt {

namespace {

void flushTraffic(ThreadContext &t, bool end = false);

using host::Fiber;
using Clock = std::chrono::steady_clock;

/// The GPU thread running on this OS thread. Atomic (relaxed): the block's
/// scheduler sets it around every resume, and an isolated fiber's reads
/// have no happens-before with the scheduler's next write.
thread_local std::atomic<ThreadContext *> current{nullptr};

/// A fiber's stack: the kernel's frames are small (sanitizer builds get four
/// times as much, Fiber::create).
constexpr size_t FiberStackBytes = 64 << 10;
/// GPU threads one launch may hold at once: each fiber is two memory
/// mappings (stack and guard page), and Linux allows about 65000 a process.
constexpr uint64_t MaxResidentThreads = 16384;

/// The seed of the perturbation mode (COLL_SIMT_SEED), 0 when off.
uint64_t perturbationSeed() {
  static const uint64_t seed = [] {
    const char *text = std::getenv("COLL_SIMT_SEED");
    return text ? std::strtoull(text, nullptr, 10) : 0ull;
  }();
  return seed;
}

/// A counting barrier. The last of `expected` arrivals publishes the
/// predicate's OR and opens the next phase with a release store; the others
/// yield until they acquire it. Arrivals are acq_rel read-modify-writes, so
/// every arrival happens before every departure.
struct Barrier {
  std::atomic<uint32_t> arrived{0};
  std::atomic<uint32_t> phase{0};
  std::atomic<uint32_t> any{0};
  uint32_t result[2] = {0, 0};

  void open(uint32_t ph) {
    result[ph & 1] = any.exchange(0, std::memory_order_relaxed);
    arrived.store(0, std::memory_order_relaxed);
    phase.store(ph + 1, std::memory_order_release);
  }
  void clear() {
    arrived.store(0, std::memory_order_relaxed);
    any.store(0, std::memory_order_relaxed);
  }
};

} // namespace

class Block {
public:
  llvm::Error prepare(uint32_t nthreads, size_t sharedBytes) {
    while (fibers.size() < nthreads) {
      auto fiber = Fiber::create(FiberStackBytes, /*isolated=*/true);
      if (!fiber)
        return fiber.takeError();
      fibers.push_back(std::move(*fiber));
    }
    threads.resize(nthreads);
    warps = std::vector<Barrier>((nthreads + 31) / 32);
    warpLive = std::vector<std::atomic<uint32_t>>(warps.size());
    if (shared.size() * sizeof(Line) < sharedBytes)
      shared.resize((sharedBytes + sizeof(Line) - 1) / sizeof(Line));
    return llvm::Error::success();
  }

  /// Runs block `index` of a launch to completion on the calling thread.
  void run(const std::function<void()> &kernel, uint32_t index, Dim3 grid, Dim3 dims,
           uint64_t device, ScopeErrors *scopeErrors) {
    const uint32_t n = dims.x * dims.y * dims.z;
    live.store(n, std::memory_order_relaxed);
    barrier.clear();
    for (size_t w = 0; w < warps.size(); ++w) {
      warps[w].clear();
      const uint32_t lanes = std::min<uint32_t>(32, n - 32 * static_cast<uint32_t>(w));
      warpLive[w].store(lanes == 32 ? 0xffffffffu : (1u << lanes) - 1, std::memory_order_relaxed);
    }
    const Dim3 blockIdx{index % grid.x, index / grid.x % grid.y, index / (grid.x * grid.y)};
    std::vector<uint32_t> order(n);
    counting = countingStepCosts.load(std::memory_order_relaxed);
    const bool countingBytes = countingTraffic.load(std::memory_order_relaxed);
    for (uint32_t t = 0; t < n; ++t) {
      ThreadContext &c = threads[t];
      c = ThreadContext{};
      c.counting = counting;
      c.countingTraffic = countingBytes;
      c.threadIdx = {t % dims.x, t / dims.x % dims.y, t / (dims.x * dims.y)};
      c.blockIdx = blockIdx;
      c.blockDim = dims;
      c.gridDim = grid;
      c.dynamicShared = shared.data();
      c.block = this;
      c.linear = t;
      c.kernel = &kernel;
      c.device = device;
      c.scopeErrors = scopeErrors;
      fibers[t]->reset(&Block::entry, &c);
      order[t] = t;
    }
    perturb = perturbationSeed() != 0;
    if (perturb)
      rng.state.store(perturbationSeed() * 1000003u + index, std::memory_order_relaxed);

    Clock::time_point idleSince{};
    bool idle = false;
    while (!order.empty()) {
      const uint64_t before = arrivals.load(std::memory_order_relaxed);
      if (perturb)
        std::shuffle(order.begin(), order.end(), rng);
      bool exited = false;
      for (size_t i = 0; i < order.size();) {
        const uint32_t t = order[i];
        current.store(&threads[t], std::memory_order_relaxed);
        const bool done = fibers[t]->resume();
        current.store(nullptr, std::memory_order_relaxed);
        if (!done) {
          ++i;
          continue;
        }
        exited = true;
        order.erase(order.begin() + static_cast<ptrdiff_t>(i));
        exit(t);
      }
      if (exited || arrivals.load(std::memory_order_relaxed) != before) {
        idle = false;
        continue;
      }
      const Clock::time_point now = Clock::now();
      if (!idle) {
        idle = true;
        idleSince = now;
      }
      if (now - idleSince < std::chrono::milliseconds(1))
        sched_yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    if (counting)
      foldCosts();
  }

  /// The calling thread's counts so far belong to its step number `seq`
  /// (every thread of a block runs the same steps in the same order).
  void flushCosts(ThreadContext &t) {
    {
      std::lock_guard<std::mutex> lock(costMutex);
      if (costEntries.size() <= t.seq)
        costEntries.resize(t.seq + 1);
      CostEntry &e = costEntries[t.seq];
      e.protocol = t.protocol;
      e.kind = t.kind;
      for (int c = 0; c < NumCosts; ++c)
        e.counts[c] = std::max(e.counts[c], t.counts[c]);
    }
    ++t.seq;
    std::fill(std::begin(t.counts), std::end(t.counts), 0u);
  }

  int syncThreads(int predicate) {
    return arrive(barrier, [&] { return live.load(std::memory_order_relaxed); }, predicate);
  }

  int syncWarp(uint32_t warp, unsigned mask, int predicate) {
    return arrive(
        warps[warp],
        [&] {
          return static_cast<uint32_t>(
              __builtin_popcount(mask & warpLive[warp].load(std::memory_order_relaxed)));
        },
        predicate);
  }

  void pause() {
    if (perturb && rng() % 8 == 0)
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 4));
    Fiber::yield();
  }

private:
  struct alignas(16) Line {
    unsigned char bytes[16];
  };

  static void entry(void *arg) {
    auto *t = static_cast<ThreadContext *>(arg);
    (*t->kernel)();
    if (t->counting)
      t->block->flushCosts(*t);
    if (t->countingTraffic)
      flushTraffic(*t, /*end=*/true);
  }

  /// One step execution of the block: per kind of operation, the most one
  /// of its threads executed.
  struct CostEntry {
    uint32_t protocol = NoStep, kind = NoStep;
    uint32_t counts[NumCosts] = {};
  };

  /// Adds the block's step executions to the process's table. The kernel's
  /// prologue and epilogue (kind NoStep) count as one execution per block,
  /// under the protocol its steps announced; a block that announced none
  /// (not a collective kernel) adds nothing.
  void foldCosts();

  template <class Expected> int arrive(Barrier &b, Expected &&expected, int predicate) {
    if (perturb && rng() % 4 == 0)
      Fiber::yield(); // let others get there first
    const uint32_t ph = b.phase.load(std::memory_order_relaxed);
    if (predicate)
      b.any.fetch_or(1, std::memory_order_relaxed);
    arrivals.fetch_add(1, std::memory_order_relaxed);
    const uint32_t n = b.arrived.fetch_add(1, std::memory_order_acq_rel) + 1;
    if (n >= expected())
      b.open(ph);
    else
      while (b.phase.load(std::memory_order_acquire) == ph)
        Fiber::yield();
    return static_cast<int>(b.result[ph & 1]);
  }

  /// Thread `t` has exited: barriers no longer wait for it.
  void exit(uint32_t t) {
    const uint32_t left = live.fetch_sub(1, std::memory_order_relaxed) - 1;
    const uint32_t arrivedThere = barrier.arrived.load(std::memory_order_acquire);
    if (arrivedThere > 0 && arrivedThere >= left)
      barrier.open(barrier.phase.load(std::memory_order_relaxed));
    Barrier &w = warps[t / 32];
    const uint32_t lanes = warpLive[t / 32].fetch_and(~(1u << (t % 32)), std::memory_order_relaxed) &
                           ~(1u << (t % 32));
    const uint32_t arrivedWarp = w.arrived.load(std::memory_order_acquire);
    if (arrivedWarp > 0 && arrivedWarp >= static_cast<uint32_t>(__builtin_popcount(lanes)))
      w.open(w.phase.load(std::memory_order_relaxed));
  }

  std::vector<std::unique_ptr<Fiber>> fibers;
  std::vector<ThreadContext> threads;
  std::vector<Line> shared;
  Barrier barrier;
  std::vector<Barrier> warps;
  std::vector<std::atomic<uint32_t>> warpLive;
  std::atomic<uint32_t> live{0};
  std::atomic<uint64_t> arrivals{0};
  bool perturb = false;
  bool counting = false;
  std::mutex costMutex;
  std::vector<CostEntry> costEntries;
  /// SplitMix64 on an atomic state: the block's fibers draw from it with no
  /// synchronisation between them (TSan would see a shared generator's
  /// plain state as a race).
  struct Random {
    using result_type = uint64_t;
    static constexpr uint64_t min() { return 0; }
    static constexpr uint64_t max() { return ~uint64_t(0); }
    uint64_t operator()() {
      uint64_t z = state.fetch_add(0x9e3779b97f4a7c15ull, std::memory_order_relaxed) +
                   0x9e3779b97f4a7c15ull;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      return z ^ (z >> 31);
    }
    std::atomic<uint64_t> state{0};
  } rng;
};

namespace {
std::mutex costTableMutex;
StepCostTable costTable;
} // namespace

void Block::foldCosts() {
  std::vector<CostEntry> entries;
  {
    std::lock_guard<std::mutex> lock(costMutex);
    entries.swap(costEntries);
  }
  uint32_t protocol = NoStep;
  for (const CostEntry &e : entries)
    if (e.protocol != NoStep)
      protocol = e.protocol;
  if (protocol == NoStep)
    return;
  StepCost launch;
  launch.executions = 1;
  std::lock_guard<std::mutex> lock(costTableMutex);
  for (const CostEntry &e : entries) {
    StepCost &into = e.kind == NoStep ? launch : costTable[{protocol, e.kind}];
    if (e.kind != NoStep)
      ++into.executions;
    for (int c = 0; c < NumCosts; ++c)
      into.counts[c] += e.counts[c];
  }
  StepCost &total = costTable[{protocol, NoStep}];
  total.executions += launch.executions;
  for (int c = 0; c < NumCosts; ++c)
    total.counts[c] += launch.counts[c];
}

void countStepCosts(bool on) { countingStepCosts.store(on, std::memory_order_relaxed); }

//===----------------------------------------------------------------------===//
// Traffic
//===----------------------------------------------------------------------===//

namespace {

std::mutex trafficTableMutex;
TrafficTable trafficTable;

/// Every owner's ranges, and the address space painted from them: disjoint
/// segments, each with what it is.
struct TrafficMap {
  std::shared_mutex mutex;
  std::map<const void *, std::vector<TrafficRange>> owners;
  std::map<uintptr_t, TrafficRange> segments; ///< by begin
};
TrafficMap &trafficMap() {
  static TrafficMap *m = new TrafficMap(); // used until exit
  return *m;
}

/// Paints `r` over `segments`: what it covers of earlier segments is its.
void paint(std::map<uintptr_t, TrafficRange> &segments, const TrafficRange &r) {
  if (r.begin >= r.end)
    return;
  auto it = segments.lower_bound(r.begin);
  if (it != segments.begin() && std::prev(it)->second.end > r.begin)
    --it;
  std::vector<TrafficRange> pieces; // what remains of the segments it overlaps
  while (it != segments.end() && it->second.begin < r.end) {
    const TrafficRange s = it->second;
    it = segments.erase(it);
    if (s.begin < r.begin) {
      TrafficRange left = s;
      left.end = r.begin;
      pieces.push_back(left);
    }
    if (s.end > r.end) {
      TrafficRange right = s;
      right.begin = r.end;
      pieces.push_back(right);
    }
  }
  for (const TrafficRange &p : pieces)
    segments[p.begin] = p;
  segments[r.begin] = r;
}

bool empty(const TrafficCount &c) {
  for (int r = 0; r < NumRegions; ++r)
    if (c.read[r] || c.written[r])
      return false;
  return true;
}

void addTo(TrafficCount &into, const TrafficCount &c) {
  for (int r = 0; r < NumRegions; ++r) {
    into.read[r] += c.read[r];
    into.written[r] += c.written[r];
  }
}

/// Adds the calling thread's bytes of its step to the process's table.
/// What came before the kernel's first step (its prologue) waits for that
/// step's protocol, and counts as the kernel's own (NoStep) with its
/// epilogue. A kernel without steps (collbench's references) counts at its
/// `end` as the kernel's own of no protocol.
void flushTraffic(ThreadContext &t, bool end) {
  if (t.protocol == NoStep && end) {
    addTo(t.prologue, t.traffic);
    if (!empty(t.prologue)) {
      std::lock_guard<std::mutex> lock(trafficTableMutex);
      addTo(trafficTable[{t.rank, NoStep, NoStep}], t.prologue);
    }
    t.prologue = TrafficCount{};
  } else if (t.protocol == NoStep) {
    addTo(t.prologue, t.traffic);
  } else if (!empty(t.traffic) || (t.kind == NoStep && !empty(t.prologue))) {
    std::lock_guard<std::mutex> lock(trafficTableMutex);
    TrafficCount &into = trafficTable[{t.rank, t.protocol, t.kind}];
    addTo(into, t.traffic);
    if (t.kind == NoStep) {
      addTo(into, t.prologue);
      t.prologue = TrafficCount{};
    }
  }
  t.traffic = TrafficCount{};
}

} // namespace

void countTraffic(bool on) { countingTraffic.store(on, std::memory_order_relaxed); }

TrafficTable traffic(bool reset) {
  std::lock_guard<std::mutex> lock(trafficTableMutex);
  TrafficTable table = trafficTable;
  if (reset)
    trafficTable.clear();
  return table;
}

void setTrafficRanges(const void *owner, std::vector<TrafficRange> ranges) {
  TrafficMap &m = trafficMap();
  std::unique_lock<std::shared_mutex> lock(m.mutex);
  if (ranges.empty())
    m.owners.erase(owner);
  else
    m.owners[owner] = std::move(ranges);
  m.segments.clear();
  for (const auto &[who, set] : m.owners)
    for (const TrafficRange &r : set)
      paint(m.segments, r);
}

void addTraffic(const void *address, uint64_t bytes, bool write) {
  ThreadContext *t = current.load(std::memory_order_relaxed);
  if (!t || !t->countingTraffic || t->retrying || bytes == 0)
    return;
  Region region = OtherMemory;
  {
    TrafficMap &m = trafficMap();
    std::shared_lock<std::shared_mutex> lock(m.mutex);
    const uintptr_t a = reinterpret_cast<uintptr_t>(address);
    auto it = m.segments.upper_bound(a);
    if (it != m.segments.begin() && a < std::prev(it)->second.end) {
      const TrafficRange &s = std::prev(it)->second;
      region = s.region == OwnBuffer && s.rank != t->rank ? PeerBuffer : s.region;
    }
  }
  (write ? t->traffic.written : t->traffic.read)[region] += bytes;
}

void noteRank(int32_t rank) {
  if (ThreadContext *t = current.load(std::memory_order_relaxed))
    t->rank = rank;
}

StepCostTable stepCosts(bool reset) {
  std::lock_guard<std::mutex> lock(costTableMutex);
  StepCostTable table = costTable;
  if (reset)
    costTable.clear();
  return table;
}

void addCost(Cost c) {
  ThreadContext *t = current.load(std::memory_order_relaxed);
  if (t && t->counting && !t->retrying)
    ++t->counts[c];
}

void noteStep(uint32_t protocol, uint32_t kind) {
  ThreadContext *t = current.load(std::memory_order_relaxed);
  if (!t || !(t->counting || t->countingTraffic))
    return;
  if (t->counting)
    t->block->flushCosts(*t);
  if (t->countingTraffic)
    flushTraffic(*t);
  t->protocol = protocol;
  t->kind = kind;
}

void beginRetries() {
  if (ThreadContext *t = current.load(std::memory_order_relaxed))
    t->retrying = true;
}

void endRetries() {
  if (ThreadContext *t = current.load(std::memory_order_relaxed))
    t->retrying = false;
}

ThreadContext &self() {
  ThreadContext *t = current.load(std::memory_order_relaxed);
  assert(t && "a CUDA primitive called outside an emulated kernel");
  return *t;
}

void spinPause() { self().block->pause(); }

int syncThreads(int predicate) {
  cost(BlockBarrier);
  return self().block->syncThreads(predicate);
}

int syncWarp(unsigned mask, int predicate) {
  cost(WarpBarrier);
  ThreadContext &t = self();
  return t.block->syncWarp(t.linear / 32, mask, predicate);
}

#if COLL_SIMT_TSAN
void noteRelaxedLoad(const void *address) {
  ThreadContext *t = current.load(std::memory_order_relaxed);
  if (!t)
    return;
  for (int i = 0; i < t->nrelaxed; ++i)
    if (t->relaxed[i] == address)
      return;
  if (t->nrelaxed == ThreadContext::MaxRelaxed) {
    std::move(t->relaxed + 1, t->relaxed + ThreadContext::MaxRelaxed, t->relaxed);
    --t->nrelaxed;
  }
  t->relaxed[t->nrelaxed++] = address;
}

void acquireRelaxedLoads() {
  ThreadContext &t = self();
  for (int i = 0; i < t.nrelaxed; ++i)
    __tsan_acquire(const_cast<void *>(t.relaxed[i]));
  t.nrelaxed = 0;
}
#endif

namespace {
std::atomic<ScopeRule> scopeRule{nullptr};
} // namespace

/// A launch's scope errors: the first is kept, each is printed once.
struct ScopeErrors {
  std::mutex mutex;
  std::string first;
  uint64_t count = 0;
};

void setScopeRule(ScopeRule rule) { scopeRule.store(rule, std::memory_order_release); }

void checkScopeOf(const void *address, bool sys, const char *op) {
  ThreadContext &t = self();
  ScopeRule rule = scopeRule.load(std::memory_order_acquire);
  if (!rule)
    return;
  std::string why = rule(address, t.device, sys);
  if (why.empty())
    return;
  std::string report = "scope error: " + std::string(op) + (sys ? ".sys" : ".gpu") + " by thread " +
                       std::to_string(t.linear) + " of block " + std::to_string(t.blockIdx.x) +
                       ": " + why;
  ScopeErrors &errors = *t.scopeErrors;
  std::lock_guard<std::mutex> lock(errors.mutex);
  if (errors.count++ == 0) {
    errors.first = report;
    std::fprintf(stderr, "coll (CUDA emulation): %s\n", report.c_str());
  }
}

std::string launch(const std::function<void()> &kernel, Dim3 grid, Dim3 dims, size_t sharedBytes,
                   bool coResident, uint64_t device) {
  // Launches from several threads (one executor per rank, each on its own
  // thread) run at once, each with blocks of its own; blocks are kept for
  // later launches.
  using Pool = std::vector<std::unique_ptr<Block>>;
  static std::mutex mutex;
  static std::vector<Pool> idle;
  Pool pool;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!idle.empty()) {
      pool = std::move(idle.back());
      idle.pop_back();
    }
  }
  auto giveBack = llvm::make_scope_exit([&] {
    std::lock_guard<std::mutex> lock(mutex);
    idle.push_back(std::move(pool));
  });
  const uint64_t nthreads = uint64_t(dims.x) * dims.y * dims.z;
  const uint64_t nblocks = uint64_t(grid.x) * grid.y * grid.z;
  if (nthreads == 0 || nthreads > 1024)
    return "a block of " + std::to_string(nthreads) + " threads (1 to 1024 allowed)";
  if (nblocks == 0 || nblocks > (1u << 20))
    return "a grid of " + std::to_string(nblocks) + " blocks (1 to 2^20 allowed)";
  // OS threads: one per block, or a few that take blocks in turn.
  const uint64_t workers = coResident ? nblocks : std::min<uint64_t>(nblocks, 4);
  if (workers * nthreads > MaxResidentThreads)
    return std::to_string(workers) + " blocks of " + std::to_string(nthreads) +
           " threads at once: the CPU launcher holds at most " +
           std::to_string(MaxResidentThreads) + " GPU threads (each has a stack mapping)";
  // Blocks beyond what this launch needs are released, so that one large
  // launch does not hold its stacks for the rest of the process.
  auto trim = llvm::make_scope_exit([&] { pool.resize(std::min<size_t>(pool.size(), 64)); });
  while (pool.size() < workers)
    pool.push_back(std::make_unique<Block>());
  for (uint64_t w = 0; w < workers; ++w)
    if (llvm::Error err = pool[w]->prepare(static_cast<uint32_t>(nthreads), sharedBytes))
      return "block " + std::to_string(w) + ": " + llvm::toString(std::move(err));

  ScopeErrors scopeErrors;
  std::atomic<uint64_t> next{0};
  std::vector<std::thread> threads;
  threads.reserve(workers);
  std::string failure;
  for (uint64_t w = 0; w < workers; ++w) {
    try {
      threads.emplace_back([&, w] {
        if (coResident) {
          pool[w]->run(kernel, static_cast<uint32_t>(w), grid, dims, device, &scopeErrors);
          return;
        }
        for (uint64_t b; (b = next.fetch_add(1, std::memory_order_relaxed)) < nblocks;)
          pool[w]->run(kernel, static_cast<uint32_t>(b), grid, dims, device, &scopeErrors);
      });
    } catch (const std::system_error &e) {
      // Blocks already started wait for this one until their watchdog ends
      // them (a co-resident launch), or take its blocks (otherwise).
      failure = "cannot start a thread for block " + std::to_string(w) + ": " + e.what();
      break;
    }
  }
  for (std::thread &t : threads)
    t.join();
  if (failure.empty() && scopeErrors.count)
    failure = scopeErrors.first + (scopeErrors.count > 1
                                       ? " (and " + std::to_string(scopeErrors.count - 1) +
                                             " more scope errors)"
                                       : std::string());
  return failure;
}

namespace {
std::mutex kernelRegistersMutex;
std::map<const void *, int> &describedRegisters() {
  static std::map<const void *, int> registers;
  return registers;
}
} // namespace

void describeKernelRegisters(const void *kernel, int registersPerThread) {
  std::lock_guard<std::mutex> lock(kernelRegistersMutex);
  describedRegisters()[kernel] = registersPerThread;
}

int kernelRegisters(const void *kernel, int fallback) {
  std::lock_guard<std::mutex> lock(kernelRegistersMutex);
  auto found = describedRegisters().find(kernel);
  return found == describedRegisters().end() ? fallback : found->second;
}

} // namespace coll::interp::cuda::simt
