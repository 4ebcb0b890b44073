//===- Fiber.h - Stackful coroutines for waits that yield -------*- C++ -*-===//
//
// A Fiber runs a function on a stack of its own and can give the thread back
// in the middle of it (yield), to be resumed later exactly where it stopped.
// The host backend runs every tb as a fiber, so that a wait that cannot be
// satisfied switches to another tb instead of blocking a thread (docs/ARCHITECTURE.md
// §4); the CPU SIMT launcher of the CUDA emulation runs the threads of a
// block the same way. Both keep their own scheduling loop and only share
// this primitive.
//
// The switch saves and restores only what the ABI makes callee-saved, so it
// costs a few nanoseconds (x86-64 assembly; other targets fall back to
// ucontext, which is slower because it also switches the signal mask).
// Stacks are mmap'ed with a guard page below them: an overflow faults
// instead of corrupting memory. Under ThreadSanitizer and AddressSanitizer
// every switch is announced with their fiber APIs, so races between fibers
// of different threads are still found and stacks are not mistaken for
// corrupted ones.
//
// A fiber belongs to one thread while it runs; between a yield and the next
// resume it may move to another thread.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_INTERPRETER_HOST_FIBER_H
#define COLL_INTERPRETER_HOST_FIBER_H

#include "llvm/Support/Error.h"

#include <atomic>
#include <cstddef>
#include <memory>

namespace coll::interp::host {

class Fiber {
public:
  using Entry = void (*)(void *arg);

  /// A fiber with a stack of at least `stackBytes` bytes (rounded up to
  /// pages; sanitizer builds get four times as much). Fails when the stack
  /// cannot be mapped.
  ///
  /// `isolated` matters only under ThreadSanitizer: by default every switch
  /// synchronises the fibers involved, as if a lock were handed over. An
  /// isolated fiber synchronises with its resumer only when it is entered and
  /// when its entry returns, not when it yields, so TSan orders two isolated
  /// fibers of one thread only by what they synchronise themselves (the CPU
  /// SIMT launcher runs each GPU thread as one, so that a missing barrier
  /// between threads of a block is a race TSan can see).
  static llvm::Expected<std::unique_ptr<Fiber>> create(size_t stackBytes = 256 << 10,
                                                       bool isolated = false);
  ~Fiber();
  Fiber(const Fiber &) = delete;
  Fiber &operator=(const Fiber &) = delete;

  /// Arms the fiber to run `entry(arg)` from its beginning at the next
  /// resume(). The fiber must not be running or suspended in a yield.
  void reset(Entry entry, void *arg);

  /// Runs the fiber on this thread until it yields or its entry returns.
  /// Returns true when the entry has returned (the fiber can then be reset).
  bool resume();

  /// Gives the thread back to whoever resumed the running fiber. Must be
  /// called from inside a fiber.
  static void yield();

  /// The fiber running on this thread, or null outside fibers.
  static Fiber *current();

  bool finished() const { return state.load(std::memory_order_relaxed) == State::Finished; }
  bool suspended() const { return state.load(std::memory_order_relaxed) == State::Suspended; }

  class Impl;

private:
  Fiber() = default;
  enum class State { Idle, Ready, Running, Suspended, Finished };

  static void trampoline(Fiber *self);

  // Atomic (relaxed) because an isolated fiber and its resumer both touch it
  // with no synchronisation TSan would see; they never run at the same time.
  std::atomic<State> state{State::Idle};
  Entry entry = nullptr;
  void *arg = nullptr;
  std::unique_ptr<Impl> impl;
};

} // namespace coll::interp::host

#endif // COLL_INTERPRETER_HOST_FIBER_H
