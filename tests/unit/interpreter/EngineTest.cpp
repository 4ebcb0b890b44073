//===- EngineTest.cpp - The host engine's threads --------------------------===//

#include "coll/interpreter/host/Engine.h"

#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <thread>

using namespace coll::interp::host;

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
    // (Where it runs now is the kernel's again: the mask is restored.)
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

namespace {

/// Tasks that note the thread they ran on.
struct ThreadNotes {
  std::mutex mutex;
  std::set<std::thread::id> ids;
  static void run(void *arg) {
    auto *self = static_cast<ThreadNotes *>(arg);
    std::lock_guard<std::mutex> lock(self->mutex);
    self->ids.insert(std::this_thread::get_id());
  }
};

} // namespace

// A launch that moves little runs on the calling thread alone; a larger one
// gives the workers their shares.
TEST(Engine, SmallLaunchesRunOnTheCallingThreadAlone) {
  Doorbell bell;
  EngineOptions options;
  options.threads = 2;
  options.soloWork = 1000;
  auto engine = Engine::create(bell, options);
  ASSERT_TRUE(static_cast<bool>(engine)) << llvm::toString(engine.takeError());
  ThreadNotes small, large;
  std::vector<Task> smallTasks(4, Task{&ThreadNotes::run, &small});
  std::vector<Task> largeTasks(4, Task{&ThreadNotes::run, &large});
  ASSERT_FALSE(llvm::errorToBool((*engine)->run(smallTasks, {}, 1000)));
  ASSERT_FALSE(llvm::errorToBool((*engine)->run(largeTasks, {}, 1001)));
  EXPECT_EQ(small.ids, std::set<std::thread::id>{std::this_thread::get_id()});
  EXPECT_EQ(large.ids.size(), 2u) << "a launch above soloWork should use both threads";
  EXPECT_EQ(large.ids.count(std::this_thread::get_id()), 1u);
}
