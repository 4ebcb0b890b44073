//===- Sync.h - Doorbells: sleeping until a partner moves -------*- C++ -*-===//
//
// The host backend spins only briefly; a thread whose every task is blocked
// goes to sleep on its process's Doorbell, and whoever changes state such a
// task may be waiting for (a FIFO's head or tail, a dependency flag, the
// abort word) rings that Doorbell. Ringing costs a fence and one load when
// nobody sleeps, so it can follow every FIFO hand-off.
//
// A Doorbell is a plain 64-byte record with no pointers, so it can live in
// memory shared between processes (the runtime's control segment); such a
// doorbell must be marked `shared` so that its futex is not private to the
// process.
//
// Protocol (no lost wake-ups): a sleeper reads `seq`, increments `sleepers`,
// re-checks its conditions, and only then sleeps while `seq` is unchanged.
// A ringer changes state, issues a sequentially consistent fence, and bumps
// `seq` and wakes only if it sees a sleeper. Either the ringer sees the
// sleeper, or the sleeper's re-check sees the new state.
//
// The fence waits until the ringer's stores have reached the other cores,
// which after a FIFO hand-off means until the partner's copy of the line
// is invalidated: a threadblock therefore owes its rings and pays them
// together, before it waits and when it ends (HostRank.cpp). A partner
// sleeps only after waiting itself for a while, so the later ring costs it
// nothing.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_HOST_SYNC_H
#define COLL_INTERPRETER_HOST_SYNC_H

#include <atomic>
#include <chrono>
#include <algorithm>
#include <climits>
#include <cstdint>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#define COLL_HOST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define COLL_HOST_TSAN 1
#endif
#endif
#ifndef COLL_HOST_TSAN
#define COLL_HOST_TSAN 0
#endif

namespace coll::interp::host {

/// One CPU hint for a spin-wait iteration.
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

class alignas(64) Doorbell {
public:
  explicit Doorbell(bool shared = false) : shared(shared ? 1 : 0) {}

  /// Wakes every thread sleeping on this doorbell. Call after the state
  /// change a sleeper may wait for.
  void ring() {
    fence();
    ringFenced();
  }

  /// ring() for several doorbells with one fence: fence() once after the
  /// state changes, then ringFenced() on each doorbell.
  static void fence() {
#if !COLL_HOST_TSAN
    // The fence keeps the line of `sleepers` shared between cores while
    // nobody sleeps, where an RMW would bounce it on every hand-off.
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
  }
  void ringFenced() {
#if COLL_HOST_TSAN
    // ThreadSanitizer does not model fences: an RMW orders the same way
    // (the sleeper's increment reads from it or it reads the increment).
    if (sleepers.fetch_add(0, std::memory_order_seq_cst) != 0)
      wakeAll();
#else
    if (sleepers.load(std::memory_order_relaxed) != 0)
      wakeAll();
#endif
  }

  /// First half of a sleep: returns the value to pass to sleep() after the
  /// caller has re-checked its conditions. Every enter() needs one leave().
  uint32_t enter() {
    uint32_t seen = seq.load(std::memory_order_seq_cst);
    sleepers.fetch_add(1, std::memory_order_seq_cst);
#if !COLL_HOST_TSAN
    std::atomic_thread_fence(std::memory_order_seq_cst); // pairs with ring()'s
#endif
    return seen;
  }
  /// Sleeps while nobody rang since enter() returned `seen`, at most
  /// `timeout`.
  void sleep(uint32_t seen, std::chrono::nanoseconds timeout) {
    if (timeout <= std::chrono::nanoseconds::zero())
      return;
    timespec ts{static_cast<time_t>(timeout.count() / 1000000000),
                static_cast<long>(timeout.count() % 1000000000)};
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(&seq),
            shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE, seen, &ts, nullptr, 0);
  }
  void leave() { sleepers.fetch_sub(1, std::memory_order_seq_cst); }

  /// Blocks the calling thread (not a task) until `ready()` or `stop()`
  /// holds or `timeout` passes without `ready()`; a short spin first.
  enum class Result { Ready, Stopped, TimedOut };
  template <class Ready, class Stop>
  Result wait(Ready &&ready, Stop &&stop, std::chrono::milliseconds timeout) {
    for (int i = 0; i < 64; ++i) {
      if (ready())
        return Result::Ready;
      cpuRelax();
    }
    using Clock = std::chrono::steady_clock;
    const Clock::time_point deadline = Clock::now() + timeout;
    for (;;) {
      uint32_t seen = enter();
      bool done = ready();
      if (!done && !stop()) {
        // Sleep in slices so that a stop request is noticed even if the
        // doorbell it rings is another one.
        auto left = deadline - Clock::now();
        sleep(seen, std::min<std::chrono::nanoseconds>(left, std::chrono::milliseconds(50)));
      }
      leave();
      if (done || ready())
        return Result::Ready;
      if (stop())
        return Result::Stopped;
      if (Clock::now() >= deadline)
        return Result::TimedOut;
    }
  }

private:
  void wakeAll() {
    seq.fetch_add(1, std::memory_order_seq_cst);
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(&seq), shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE,
            INT_MAX, nullptr, nullptr, 0);
  }

  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> sleepers{0};
  uint32_t shared;
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t),
                "futex needs a plain 32-bit word");
  static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared doorbells need lock-free atomics");
};

} // namespace coll::interp::host

#endif // COLL_INTERPRETER_HOST_SYNC_H
