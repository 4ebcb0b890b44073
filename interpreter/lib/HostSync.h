//===- HostSync.h - Sleeping waits with a deadline for the host backend ---===//
//
// The host backend runs hundreds of tb threads on a few cores, so a wait must
// sleep rather than spin (DESIGN.md §4), and must give up after a deadline so
// that the watchdog can report a stall instead of hanging. C++20's
// atomic::wait has no timeout, hence a futex.
//
// A Bell is rung after the state a waiter may be waiting for changes. The
// waiter snapshots the bell, announces itself, re-checks its condition and
// only then sleeps on the snapshot, so a ring between the check and the
// sleep is never lost (the futex returns at once when the word moved).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_HOSTSYNC_H
#define COLL_INTERPRETER_HOSTSYNC_H

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace coll::interp::host {

class Bell {
public:
  /// Wakes every thread sleeping on this bell.
  void ring() {
    seq.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) != 0)
      syscall(SYS_futex, reinterpret_cast<uint32_t *>(&seq), FUTEX_WAKE_PRIVATE, INT_MAX,
              nullptr, nullptr, 0);
  }

  /// Waits until `ready()` holds, `stop()` holds, or `timeout` passes without
  /// `ready()`; returns which, in that order of preference.
  enum class Result { Ready, Stopped, TimedOut };
  template <class Ready, class Stop>
  Result wait(Ready &&ready, Stop &&stop, std::chrono::milliseconds timeout) {
    // A short spin catches a partner that is just about to deliver, without
    // paying for a sleep; it stays short because cores are few.
    for (int i = 0; i < 64; ++i) {
      if (ready())
        return Result::Ready;
      pause();
    }
    using Clock = std::chrono::steady_clock;
    const Clock::time_point deadline = Clock::now() + timeout;
    for (;;) {
      uint32_t seen = seq.load(std::memory_order_seq_cst);
      sleepers.fetch_add(1, std::memory_order_seq_cst);
      bool done = ready();
      if (!done && !stop()) {
        auto left = deadline - Clock::now();
        // Sleep in slices so that a stop request is noticed even if the bell
        // it rings was missed by a sleeper of another bell.
        auto slice = std::min<Clock::duration>(left, std::chrono::milliseconds(50));
        if (slice > Clock::duration::zero()) {
          auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(slice).count();
          timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
          syscall(SYS_futex, reinterpret_cast<uint32_t *>(&seq), FUTEX_WAIT_PRIVATE, seen,
                  &ts, nullptr, 0);
        }
      }
      sleepers.fetch_sub(1, std::memory_order_seq_cst);
      if (done || ready())
        return Result::Ready;
      if (stop())
        return Result::Stopped;
      if (Clock::now() >= deadline)
        return Result::TimedOut;
    }
  }

private:
  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> sleepers{0};
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t),
                "futex needs a plain 32-bit word");
};

} // namespace coll::interp::host

#endif // COLL_INTERPRETER_HOSTSYNC_H
