//===- HostEngine.cpp - tb tasks on a few threads -------------------------===//

#include "coll/interpreter/host/Engine.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <pthread.h>
#include <sched.h>

namespace coll::interp::host {

namespace {

thread_local Scheduler *currentScheduler = nullptr;

/// A positive integer from the environment, or `fallback`.
long envInteger(const char *name, long fallback) {
  const char *text = std::getenv(name);
  if (!text || !*text)
    return fallback;
  char *end = nullptr;
  long value = std::strtol(text, &end, 10);
  return end && *end == '\0' && value >= 0 ? value : fallback;
}

/// Stack per task: runThreadBlock and the prims need little; reports
/// (formatv) take more, and sanitizer builds quadruple it (Fiber::create).
constexpr size_t TaskStackBytes = 256 << 10;

} // namespace

Scheduler *Scheduler::current() { return currentScheduler; }

/// Whether the calling thread's stack has room for a task run in place: as
/// much as a sanitizer build gives a fiber (four times TaskStackBytes). The
/// thread's stack bounds are looked up once per thread.
static bool stackRoomForTask() {
  thread_local uintptr_t lowest = [] {
    pthread_attr_t attr;
    void *base = nullptr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
      return UINTPTR_MAX; // unknown: never in place
    pthread_attr_getstack(&attr, &base, &size);
    pthread_attr_destroy(&attr);
    return base ? reinterpret_cast<uintptr_t>(base) : UINTPTR_MAX;
  }();
  char here;
  const uintptr_t sp = reinterpret_cast<uintptr_t>(&here);
  return lowest != UINTPTR_MAX && sp > lowest && sp - lowest >= 4 * TaskStackBytes;
}

unsigned availableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0)
      return static_cast<unsigned>(n);
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw ? hw : 1;
}

int moveToFreeCpu(const cpu_set_t &busy) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
    return -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed) || CPU_ISSET(cpu, &busy))
      continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0)
      return -1;
    // The thread runs on `cpu` now; widening the mask again does not move it.
    sched_setaffinity(0, sizeof allowed, &allowed);
    return cpu;
  }
  return -1;
}

EngineOptions engineOptionsFromEnv(EngineOptions base) {
  base.threads = static_cast<unsigned>(envInteger("COLL_HOST_THREADS", base.threads));
  base.spin = std::chrono::microseconds(
      envInteger("COLL_SPIN_US",
                 std::chrono::duration_cast<std::chrono::microseconds>(base.spin).count()));
  base.yield = std::chrono::microseconds(
      envInteger("COLL_YIELD_US",
                 std::chrono::duration_cast<std::chrono::microseconds>(base.yield).count()));
  return base;
}

class Engine::Impl {
public:
  Impl(Doorbell &bell, const EngineOptions &options) : bell(bell), options(options) {
    nthreads = options.threads ? options.threads : availableCpus();
    nthreads = std::max(1u, std::min(nthreads, 256u));
    startCpu = std::make_unique<std::atomic<int>[]>(nthreads);
  }
  ~Impl() {
    shutdown.store(true, std::memory_order_release);
    generation.fetch_add(1, std::memory_order_release);
    startBell.ring();
    for (std::thread &t : workers)
      t.join();
  }

  llvm::Error run(llvm::ArrayRef<Task> tasks, const IdlePoll &idlePoll, uint64_t work);
  /// One idle turn: of a thread whose tasks all wait (runShare), or of a
  /// task that waits in place (Scheduler::idleInPlace).
  void idleTurn(Scheduler &sched, bool (*ready)(void *), void *arg, Clock::time_point &idleStart,
                bool &idle);

  Doorbell &bell;
  EngineOptions options;
  unsigned nthreads = 1;

private:
  struct Slot {
    std::vector<std::unique_ptr<Fiber>> fibers;
    std::vector<uint32_t> live;
    llvm::ArrayRef<Task> share;
  };

  llvm::Error prepare(Slot &slot, size_t n);
  void runShare(Slot &slot);
  void workerMain(Slot &slot, size_t index, uint64_t seen);
  void maybePoll(Clock::time_point now);

  std::vector<std::unique_ptr<Slot>> slots; ///< slot 0 runs on the caller
  std::vector<std::thread> workers;         ///< worker i runs slot i+1
  std::atomic<uint64_t> generation{0};
  std::atomic<unsigned> remaining{0};
  std::atomic<bool> shutdown{false};
  /// The CPU each thread of the launch started its share on (slot order),
  /// -1 before it did: a worker that starts on a CPU another thread of the
  /// launch is on moves (separate).
  std::unique_ptr<std::atomic<int>[]> startCpu;
  void separate(size_t slot);
  Doorbell startBell;
  IdlePoll poll;
  std::atomic<int64_t> lastPoll{0};
};

llvm::Error Engine::Impl::prepare(Slot &slot, size_t n) {
  while (slot.fibers.size() < n) {
    auto fiber = Fiber::create(TaskStackBytes);
    if (!fiber)
      return fiber.takeError();
    slot.fibers.push_back(std::move(*fiber));
  }
  slot.live.reserve(n);
  return llvm::Error::success();
}

void Engine::Impl::maybePoll(Clock::time_point now) {
  if (!poll.poll)
    return;
  int64_t t = now.time_since_epoch().count();
  int64_t last = lastPoll.load(std::memory_order_relaxed);
  if (last == 0) { // the launch's first idle moment: the interval starts
    lastPoll.compare_exchange_strong(last, t, std::memory_order_relaxed);
    return;
  }
  if (t - last < std::chrono::duration_cast<Clock::duration>(poll.interval).count())
    return;
  if (lastPoll.compare_exchange_strong(last, t, std::memory_order_relaxed))
    poll.poll(poll.arg);
}

void Scheduler::idleInPlace(bool (*ready)(void *), void *arg, Clock::time_point &idleStart,
                            bool &idle) {
  static_cast<Engine::Impl *>(engine)->idleTurn(*this, ready, arg, idleStart, idle);
}

/// One idle turn of a thread whose tasks all wait (runShare, between
/// passes) or of a task that waits in place: spin while the idle period is
/// short, then yield the CPU, then sleep on the doorbell unless `ready`,
/// checked after entering it, holds.
void Engine::Impl::idleTurn(Scheduler &sched, bool (*ready)(void *), void *arg,
                            Clock::time_point &idleStart, bool &idle) {
  sched.newPass();
  const Clock::time_point now = sched.now();
  if (!idle) {
    idle = true;
    idleStart = now;
  }
  maybePoll(now);
  auto idleFor = now - idleStart;
  if (idleFor < options.spin) {
    cpuRelax();
  } else if (idleFor < options.spin + options.yield) {
    sched_yield();
  } else {
    uint32_t seen = bell.enter();
    if (!ready(arg))
      bell.sleep(seen, options.sleepSlice);
    bell.leave();
  }
}

void Engine::Impl::runShare(Slot &slot) {
  Scheduler sched;
  currentScheduler = &sched;
  const size_t n = slot.share.size();
  // A share of one task (a small call of one rank, most often) runs on
  // this thread's own stack: with no other task to switch to, a fiber
  // would cost two switches per wait and its set-up, an eighth of such
  // a call's instructions. Its waits idle in place as the loop below would.
  if (n == 1 && stackRoomForTask()) {
    sched.engine = this;
    slot.share[0].run(slot.share[0].arg);
    currentScheduler = nullptr;
    return;
  }
  slot.live.clear();
  for (size_t i = 0; i < n; ++i) {
    slot.fibers[i]->reset(slot.share[i].run, slot.share[i].arg);
    slot.live.push_back(static_cast<uint32_t>(i));
  }
  // One pass over the live tasks; true when one finished or got past a wait.
  auto pass = [&] {
    sched.newPass();
    size_t before = slot.live.size();
    llvm::erase_if(slot.live, [&](uint32_t i) { return slot.fibers[i]->resume(); });
    bool progressed = sched.progressed || slot.live.size() != before;
    sched.progressed = false;
    return progressed;
  };
  // What a thread whose tasks all wait checks before it sleeps: another
  // pass, which may find one ready.
  auto wakes = [&] { return pass() || slot.live.empty(); };
  bool idle = false;
  Clock::time_point idleStart;
  bool first = true;
  while (!slot.live.empty()) {
    bool progressed = pass() || first;
    first = false;
    if (progressed || slot.live.empty()) {
      idle = false;
      continue;
    }
    idleTurn(
        sched, [](void *arg) { return (*static_cast<decltype(wakes) *>(arg))(); }, &wakes,
        idleStart, idle);
  }
  currentScheduler = nullptr;
}

// The threads of a launch hand data to each other all the time; two of them
// on one CPU pay a spin period (or a time slice) for every hand-off, and the
// kernel, which places a thread it wakes next to its waker, can keep them
// there for hundreds of launches (measured: an 8-rank collrun at 100-270 us a
// call instead of 18 while the caller and the worker shared a CPU). So a
// worker that starts its share on a CPU where another thread of the launch
// already is moves to a CPU where none is, when there is one.
void Engine::Impl::separate(size_t me) {
  int cpu = sched_getcpu();
  cpu_set_t busy;
  CPU_ZERO(&busy);
  bool shared = false;
  for (size_t i = 0; i < nthreads; ++i) {
    int other = startCpu[i].load(std::memory_order_relaxed);
    if (i == me || other < 0 || other >= CPU_SETSIZE)
      continue;
    CPU_SET(other, &busy);
    shared |= other == cpu;
  }
  if (shared) {
    int moved = moveToFreeCpu(busy);
    if (moved >= 0)
      cpu = moved;
  }
  startCpu[me].store(cpu, std::memory_order_relaxed);
}

void Engine::Impl::workerMain(Slot &slot, size_t index, uint64_t seen) {
  for (;;) {
    auto moved = [&] { return generation.load(std::memory_order_acquire) != seen; };
    Clock::time_point lingerEnd = Clock::now() + options.linger;
    while (!moved() && Clock::now() < lingerEnd)
      for (int i = 0; i < 16; ++i)
        cpuRelax();
    while (!moved() &&
           startBell.wait(moved, [] { return false; }, std::chrono::hours(1)) !=
               Doorbell::Result::Ready) {
    }
    seen = generation.load(std::memory_order_acquire);
    if (shutdown.load(std::memory_order_acquire))
      return;
    if (!slot.share.empty()) {
      separate(index);
      runShare(slot);
    }
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1)
      bell.ring();
  }
}

llvm::Error Engine::Impl::run(llvm::ArrayRef<Task> tasks, const IdlePoll &idlePoll, uint64_t work) {
  if (tasks.empty())
    return llvm::Error::success();
  const bool solo = options.soloWork && work <= options.soloWork;
  const unsigned use = solo ? 1u : static_cast<unsigned>(std::min<size_t>(nthreads, tasks.size()));
  while (slots.size() < use)
    slots.push_back(std::make_unique<Slot>());
  for (unsigned i = 0; i < use; ++i) {
    size_t begin = tasks.size() * i / use, end = tasks.size() * (i + 1) / use;
    slots[i]->share = tasks.slice(begin, end - begin);
    if (llvm::Error err = prepare(*slots[i], end - begin))
      return err;
  }
  for (size_t i = use; i < slots.size(); ++i)
    slots[i]->share = {};
  poll = idlePoll;
  lastPoll.store(0, std::memory_order_relaxed); // maybePoll starts the interval

  if (use > 1) {
    while (workers.size() + 1 < use) {
      const size_t index = workers.size() + 1;
      Slot *slot = slots[index].get();
      // A new worker waits for the launch after the current generation.
      uint64_t now = generation.load(std::memory_order_relaxed);
      workers.emplace_back([this, slot, index, now] { workerMain(*slot, index, now); });
    }
    for (unsigned i = 0; i < nthreads; ++i)
      startCpu[i].store(-1, std::memory_order_relaxed);
    startCpu[0].store(sched_getcpu(), std::memory_order_relaxed);
    remaining.store(static_cast<unsigned>(workers.size()), std::memory_order_relaxed);
    generation.fetch_add(1, std::memory_order_release);
    startBell.ring();
  }
  runShare(*slots[0]);
  if (use > 1) {
    while (bell.wait([&] { return remaining.load(std::memory_order_acquire) == 0; },
                     [] { return false; }, std::chrono::hours(1)) != Doorbell::Result::Ready) {
    }
  }
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<Engine>> Engine::create(Doorbell &bell,
                                                       const EngineOptions &options) {
  return std::unique_ptr<Engine>(new Engine(std::make_unique<Impl>(bell, options)));
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
Engine::~Engine() = default;

llvm::Error Engine::run(llvm::ArrayRef<Task> tasks, const IdlePoll &poll, uint64_t work) {
  return impl->run(tasks, poll, work);
}

unsigned Engine::threads() const { return impl->nthreads; }
const EngineOptions &Engine::options() const { return impl->options; }

} // namespace coll::interp::host
