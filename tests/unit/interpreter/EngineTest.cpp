//===- EngineTest.cpp - The host engine's threads --------------------------===//

#include "HostEngine.h"

#include <gtest/gtest.h>

#include <thread>

using coll::interp::host::moveToFreeCpu;

namespace {

bool sameMask(const cpu_set_t &a, const cpu_set_t &b) { return CPU_EQUAL(&a, &b); }

/// Runs `body` on a new thread, so that the test's own thread keeps its CPUs.
template <class Body> void onNewThread(Body body) { std::thread(body).join(); }

} // namespace

TEST(Engine, MoveToFreeCpuMovesOffTheBusyOnesAndKeepsTheMask) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  if (CPU_COUNT(&allowed) < 2)
    GTEST_SKIP() << "this process may run on one CPU only";
  onNewThread([&] {
    const int from = sched_getcpu();
    ASSERT_GE(from, 0);
    cpu_set_t busy;
    CPU_ZERO(&busy);
    CPU_SET(from, &busy);
    const int to = moveToFreeCpu(busy);
    EXPECT_GE(to, 0);
    EXPECT_NE(to, from);
    EXPECT_TRUE(CPU_ISSET(to, &allowed));
    EXPECT_EQ(sched_getcpu(), to) << "the thread should run on the CPU it moved to";
    cpu_set_t after;
    ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
    EXPECT_TRUE(sameMask(after, allowed)) << "the thread's allowed CPUs changed";
  });
}

TEST(Engine, MoveToFreeCpuStaysWhereEveryAllowedCpuIsBusy) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  onNewThread([&] {
    EXPECT_EQ(moveToFreeCpu(allowed), -1);
    cpu_set_t after;
    ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
    EXPECT_TRUE(sameMask(after, allowed));
  });
}
