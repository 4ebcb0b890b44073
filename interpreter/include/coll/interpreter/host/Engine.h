//===- Engine.h - tb tasks on a few threads ---------------------*- C++ -*-===//
//
// The host backend's execution model (docs/ARCHITECTURE.md §4): every tb of every rank a
// process runs is a task, a Fiber; a few threads run them, each its own
// contiguous share of the tasks, round-robin. A task whose wait cannot be
// satisfied yields (waitUntil), so one thread keeps every tb of its share
// moving and a FIFO hand-off between two tasks of one thread costs a fiber
// switch, not a futex wake-up.
//
// A thread whose tasks are all blocked spins for a while (a partner on
// another core is usually about to deliver), then yields the CPU, then
// sleeps on the process's Doorbell, which partners ring after every
// hand-off. An oversubscribed machine is therefore not burnt by spinning.
//
// Shares are contiguous in task order (rank-major), so the neighbours of a
// ring mostly share a thread and its cache. A share of one task runs on the
// thread's own stack, without a fiber, and its waits idle in place.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_HOST_ENGINE_H
#define COLL_INTERPRETER_HOST_ENGINE_H

#include "coll/interpreter/host/Fiber.h"
#include "coll/interpreter/host/Sync.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include <sched.h>

namespace coll::interp::host {

using Clock = std::chrono::steady_clock;

struct EngineOptions {
  /// Threads that run tasks, the calling thread included. 0: one per CPU
  /// this process may run on (COLL_HOST_THREADS overrides that default).
  unsigned threads = 0;
  /// An idle thread spins this long, then yields the CPU this long, then
  /// sleeps on the doorbell (COLL_SPIN_US / COLL_YIELD_US override).
  std::chrono::nanoseconds spin = std::chrono::microseconds(50);
  std::chrono::nanoseconds yield = std::chrono::microseconds(500);
  /// A worker keeps looking for the next launch this long before sleeping,
  /// so back-to-back calls do not pay for waking it.
  std::chrono::nanoseconds linger = std::chrono::microseconds(200);
  /// The longest single sleep; waits check their watchdog at least this
  /// often.
  std::chrono::nanoseconds sleepSlice = std::chrono::milliseconds(5);
  /// A launch whose `work` (Engine::run) is at most this runs on the calling
  /// thread alone: handing data between threads costs more than the other
  /// thread saves until then (measured on 2 cores with 2 to 8 ranks:
  /// docs/performance/host.md). 0: always use every thread.
  uint64_t soloWork = 512 << 10;
};

/// EngineOptions from the environment: COLL_HOST_THREADS, COLL_SPIN_US,
/// COLL_YIELD_US; fields the environment does not set keep `base`'s values.
EngineOptions engineOptionsFromEnv(EngineOptions base = {});

/// CPUs this process may run on.
unsigned availableCpus();

/// Moves the calling thread to a CPU it may run on that is not in `busy`,
/// leaving its allowed CPUs as they were (it pins itself to the target for
/// the move, then restores them; the kernel moves it on only when it
/// balances load). Returns the CPU it moved to, or -1 where every allowed CPU
/// is busy or the move failed.
int moveToFreeCpu(const cpu_set_t &busy);

/// One unit of work, run as a fiber.
struct Task {
  void (*run)(void *arg) = nullptr;
  void *arg = nullptr;
};

/// Called by idle threads of a launch at most every `interval` (e.g. to see
/// whether a peer process died).
struct IdlePoll {
  void (*poll)(void *arg) = nullptr;
  void *arg = nullptr;
  std::chrono::nanoseconds interval = std::chrono::milliseconds(20);
};

/// The thread-local side of a running launch, for waitUntil.
class Scheduler {
public:
  /// The scheduler of the calling thread while it runs tasks, else null.
  static Scheduler *current();
  /// The time at the start of the current pass over the tasks (read from
  /// the clock by the first task that asks: a pass where no task waits
  /// reads no clock).
  Clock::time_point now() {
    if (!passTimed) {
      passStart = Clock::now();
      passTimed = true;
    }
    return passStart;
  }
  /// A task got past a wait it had yielded in.
  void noteProgress() { progressed = true; }
  /// A new pass begins.
  void newPass() { passTimed = false; }
  /// Whether the launch's only task runs on the thread's own stack (no
  /// fiber): its waits then idle in place (idleInPlace) instead of
  /// yielding to other tasks, as there are none.
  bool inPlace() const { return engine != nullptr; }
  /// One idle turn of an in-place task's wait, as a thread whose tasks all
  /// wait takes between passes: spin, then yield the CPU, then sleep on the
  /// doorbell (checking `ready` after entering it, so a ring is not lost),
  /// polling the launch's IdlePoll meanwhile. `idleStart` is the wait's
  /// first idle moment (set on the first turn).
  void idleInPlace(bool (*ready)(void *), void *arg, Clock::time_point &idleStart,
                   bool &idle);

  Clock::time_point passStart{};
  bool passTimed = false;
  bool progressed = false;
  /// The engine of an in-place launch; null when tasks run as fibers.
  void *engine = nullptr;
};

enum class WaitResult { Ready, Stopped, TimedOut };

/// From inside a task: returns once `ready()` holds, yielding to the other
/// tasks of this thread while it does not; gives up when `stop()` holds or
/// `ready()` has not held for `watchdog`.
template <class Ready, class Stop>
WaitResult waitUntil(Ready &&ready, Stop &&stop, std::chrono::nanoseconds watchdog) {
  if (ready())
    return WaitResult::Ready;
  Scheduler *s = Scheduler::current();
  const bool inPlace = s->inPlace();
  if (inPlace)
    s->newPass(); // the clock of this wait, not of the launch's start
  const Clock::time_point start = s->now();
  Clock::time_point idleStart{};
  bool idle = false;
  auto readyThunk = [](void *arg) {
    return static_cast<bool>((*static_cast<std::remove_reference_t<Ready> *>(arg))());
  };
  for (;;) {
    if (inPlace)
      s->idleInPlace(readyThunk, const_cast<void *>(static_cast<const void *>(&ready)), idleStart,
                     idle);
    else
      Fiber::yield();
    if (ready()) {
      s->noteProgress();
      return WaitResult::Ready;
    }
    if (stop())
      return WaitResult::Stopped;
    if (s->now() - start >= watchdog)
      return WaitResult::TimedOut;
  }
}

class Engine {
public:
  /// An engine whose idle threads sleep on `bell`.
  static llvm::Expected<std::unique_ptr<Engine>> create(Doorbell &bell,
                                                        const EngineOptions &options = {});
  ~Engine();
  Engine(const Engine &) = delete;
  Engine &operator=(const Engine &) = delete;

  /// Runs every task to completion on the calling thread and at most
  /// threads()-1 workers; on the calling thread alone when `work`, a bound
  /// on the bytes the tasks move, is at most EngineOptions::soloWork. One
  /// launch at a time.
  llvm::Error run(llvm::ArrayRef<Task> tasks, const IdlePoll &poll = {},
                  uint64_t work = UINT64_MAX);

  /// Threads a launch with enough tasks uses, the caller included.
  unsigned threads() const;
  const EngineOptions &options() const;

  class Impl;

private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace coll::interp::host

#endif // COLL_INTERPRETER_HOST_ENGINE_H
