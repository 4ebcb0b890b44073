//===- FiberTest.cpp - Stackful coroutines -------------------------------===//

#include "coll/interpreter/host/Fiber.h"

#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

using coll::interp::host::Fiber;

namespace {

std::unique_ptr<Fiber> makeFiber(size_t stack = 64 << 10) {
  auto fiber = Fiber::create(stack);
  if (!fiber) {
    ADD_FAILURE() << llvm::toString(fiber.takeError());
    return nullptr;
  }
  return std::move(*fiber);
}

TEST(Fiber, RunsToCompletionWithoutYielding) {
  auto fiber = makeFiber();
  ASSERT_TRUE(fiber);
  int calls = 0;
  fiber->reset([](void *arg) { ++*static_cast<int *>(arg); }, &calls);
  EXPECT_FALSE(fiber->finished());
  EXPECT_TRUE(fiber->resume());
  EXPECT_TRUE(fiber->finished());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(Fiber::current(), nullptr);
}

struct PingPong {
  std::vector<std::string> log;
  Fiber *self = nullptr;
};

TEST(Fiber, YieldsAndResumesWhereItStopped) {
  auto fiber = makeFiber();
  ASSERT_TRUE(fiber);
  PingPong state;
  state.self = fiber.get();
  fiber->reset(
      [](void *arg) {
        auto &s = *static_cast<PingPong *>(arg);
        for (int i = 0; i < 3; ++i) {
          EXPECT_EQ(Fiber::current(), s.self);
          s.log.push_back("fiber " + std::to_string(i));
          Fiber::yield();
        }
        s.log.push_back("fiber done");
      },
      &state);
  int rounds = 0;
  while (!fiber->resume()) {
    EXPECT_TRUE(fiber->suspended());
    state.log.push_back("main " + std::to_string(rounds++));
  }
  std::vector<std::string> want = {"fiber 0", "main 0", "fiber 1", "main 1",
                                   "fiber 2", "main 2", "fiber done"};
  EXPECT_EQ(state.log, want);
}

// Many live values across a yield: the compiler keeps some of them in
// callee-saved registers, which the switch must preserve, and floating-point
// state must survive too.
struct Live {
  double result = 0;
  long sum = 0;
};

void keepValuesLive(void *arg) {
  auto &out = *static_cast<Live *>(arg);
  volatile long seed = 3;
  long a = seed, b = seed * 2, c = seed * 3, d = seed * 5, e = seed * 7, f = seed * 11;
  double x = std::sqrt(double(seed));
  for (int i = 0; i < 10; ++i) {
    Fiber::yield();
    a += b;
    b += c;
    c += d;
    d += e;
    e += f;
    f += a;
    x = x * 1.5 + 0.25;
  }
  out.sum = a + b + c + d + e + f;
  out.result = x;
}

TEST(Fiber, PreservesRegistersAcrossSwitches) {
  // Reference: the same computation without fibers yielding to a busy caller.
  long a = 3, b = 6, c = 9, d = 15, e = 21, f = 33;
  double x = std::sqrt(3.0);
  for (int i = 0; i < 10; ++i) {
    a += b, b += c, c += d, d += e, e += f, f += a;
    x = x * 1.5 + 0.25;
  }
  std::vector<std::unique_ptr<Fiber>> fibers;
  std::vector<Live> outs(4);
  for (int i = 0; i < 4; ++i) {
    fibers.push_back(makeFiber());
    ASSERT_TRUE(fibers.back());
    fibers.back()->reset(&keepValuesLive, &outs[i]);
  }
  // Interleave them, clobbering registers in between.
  volatile double noise = 0;
  for (bool live = true; live;) {
    live = false;
    for (auto &fiber : fibers) {
      if (fiber->finished())
        continue;
      noise = noise + std::cos(double(noise) + 1.0);
      live |= !fiber->resume();
    }
  }
  for (const Live &out : outs) {
    EXPECT_EQ(out.sum, a + b + c + d + e + f);
    EXPECT_DOUBLE_EQ(out.result, x);
  }
}

TEST(Fiber, CanBeResetAndReused) {
  auto fiber = makeFiber();
  ASSERT_TRUE(fiber);
  int counter = 0;
  for (int round = 0; round < 100; ++round) {
    fiber->reset(
        [](void *arg) {
          ++*static_cast<int *>(arg);
          Fiber::yield();
          ++*static_cast<int *>(arg);
        },
        &counter);
    EXPECT_FALSE(fiber->resume());
    EXPECT_TRUE(fiber->resume());
  }
  EXPECT_EQ(counter, 200);
}

int deep(int depth) {
  volatile char frame[1024];
  frame[0] = static_cast<char>(depth);
  if (depth == 0)
    return frame[0];
  return deep(depth - 1) + frame[0] + (depth % 7 == 0 ? (Fiber::yield(), 0) : 0);
}

TEST(Fiber, UsesItsWholeStack) {
  auto fiber = makeFiber(256 << 10);
  ASSERT_TRUE(fiber);
  int result = -1;
  fiber->reset([](void *arg) { *static_cast<int *>(arg) = deep(150); }, &result);
  while (!fiber->resume()) {
  }
  int expect = 0;
  for (int d = 150; d >= 1; --d)
    expect += static_cast<char>(d);
  EXPECT_EQ(result, expect);
}

// Fibers of different threads communicating through atomics: the sanitizer
// builds check that switches are announced (no false reports, no missed
// synchronisation).
TEST(Fiber, FibersOnSeveralThreadsExchangeData) {
  constexpr int Rounds = 400;
  std::atomic<int> turn{0};
  std::vector<int> data(Rounds, 0);
  auto worker = [&](int me) {
    auto fiber = makeFiber();
    ASSERT_TRUE(fiber);
    struct Ctx {
      std::atomic<int> *turn;
      std::vector<int> *data;
      int me;
    } ctx{&turn, &data, me};
    fiber->reset(
        [](void *arg) {
          auto &c = *static_cast<Ctx *>(arg);
          for (int i = c.me; i < Rounds; i += 2) {
            while (c.turn->load(std::memory_order_acquire) != i)
              Fiber::yield();
            if (i > 0) {
              EXPECT_EQ((*c.data)[i - 1], i) << "the previous round is visible";
            }
            (*c.data)[i] = i + 1;
            c.turn->store(i + 1, std::memory_order_release);
          }
        },
        &ctx);
    while (!fiber->resume())
      std::this_thread::yield();
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  for (int i = 0; i < Rounds; ++i)
    EXPECT_EQ(data[i], i + 1);
}

TEST(Fiber, MovesBetweenThreadsBetweenYields) {
  auto fiber = makeFiber();
  ASSERT_TRUE(fiber);
  std::vector<int> steps;
  fiber->reset(
      [](void *arg) {
        auto &s = *static_cast<std::vector<int> *>(arg);
        for (int i = 0; i < 4; ++i) {
          s.push_back(i);
          Fiber::yield();
        }
      },
      &steps);
  for (int i = 0; i < 5; ++i) {
    bool done = false;
    std::thread([&] { done = fiber->resume(); }).join();
    EXPECT_EQ(done, i == 4);
  }
  EXPECT_EQ(steps, (std::vector<int>{0, 1, 2, 3}));
}

} // namespace
