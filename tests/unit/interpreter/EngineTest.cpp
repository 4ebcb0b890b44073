//===- EngineTest.cpp - The host engine's threads --------------------------===//

#include "coll/interpreter/host/Engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include <pthread.h>

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

namespace {

/// What a task saw of where it ran.
struct PlaceNotes {
  std::atomic<bool> *flag = nullptr;
  std::chrono::nanoseconds watchdog = std::chrono::seconds(10);
  bool inPlace = false;
  uintptr_t stackAddress = 0;
  std::thread::id thread;
  WaitResult result = WaitResult::Stopped;
  static void run(void *arg) {
    auto *self = static_cast<PlaceNotes *>(arg);
    char here;
    self->stackAddress = reinterpret_cast<uintptr_t>(&here);
    self->thread = std::this_thread::get_id();
    self->inPlace = Scheduler::current() && Scheduler::current()->inPlace();
    self->result = waitUntil([&] { return self->flag->load(std::memory_order_acquire); },
                             [] { return false; }, self->watchdog);
  }
};

uintptr_t distance(uintptr_t a, uintptr_t b) { return a > b ? a - b : b - a; }

} // namespace

// A launch of one task runs it on the calling thread's own stack, not as a
// fiber; its wait goes through the idle stages in place (spin, yield, sleep
// on the doorbell, polling meanwhile) and wakes when a partner sets the
// flag and rings.
TEST(Engine, OneTaskRunsInPlaceAndItsWaitIdlesThere) {
  Doorbell bell;
  EngineOptions options;
  options.threads = 1;
  options.spin = std::chrono::microseconds(10);
  options.yield = std::chrono::microseconds(100);
  auto engine = Engine::create(bell, options);
  ASSERT_TRUE(static_cast<bool>(engine)) << llvm::toString(engine.takeError());
  std::atomic<bool> flag{false};
  std::atomic<int> polls{0};
  IdlePoll poll;
  poll.poll = [](void *arg) { static_cast<std::atomic<int> *>(arg)->fetch_add(1); };
  poll.arg = &polls;
  poll.interval = std::chrono::milliseconds(1);
  PlaceNotes notes;
  notes.flag = &flag;
  // Before the partner exists, so that its 60 ms all fall after it.
  const auto start = Clock::now();
  std::thread partner([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    flag.store(true, std::memory_order_release);
    bell.ring();
  });
  char here;
  ASSERT_FALSE(llvm::errorToBool((*engine)->run({Task{&PlaceNotes::run, &notes}}, poll)));
  const auto took = Clock::now() - start;
  partner.join();
  EXPECT_TRUE(notes.inPlace);
  EXPECT_EQ(notes.thread, std::this_thread::get_id());
  EXPECT_LT(distance(notes.stackAddress, reinterpret_cast<uintptr_t>(&here)), 64u << 10)
      << "the task should run on the caller's stack, near its frame";
  EXPECT_EQ(notes.result, WaitResult::Ready);
  EXPECT_GE(took, std::chrono::milliseconds(60));
  EXPECT_GE(polls.load(), 2) << "an idle wait in place polls as an idle thread does";
  EXPECT_EQ(Scheduler::current(), nullptr) << "the launch leaves no scheduler behind";
}

// In place, a wait that never becomes ready stops at its watchdog.
TEST(Engine, AWaitInPlaceStopsAtItsWatchdog) {
  Doorbell bell;
  EngineOptions options;
  options.threads = 1;
  options.spin = std::chrono::microseconds(10);
  options.yield = std::chrono::microseconds(100);
  options.sleepSlice = std::chrono::milliseconds(2);
  auto engine = Engine::create(bell, options);
  ASSERT_TRUE(static_cast<bool>(engine)) << llvm::toString(engine.takeError());
  std::atomic<bool> never{false};
  PlaceNotes notes;
  notes.flag = &never;
  notes.watchdog = std::chrono::milliseconds(30);
  const auto start = Clock::now();
  ASSERT_FALSE(llvm::errorToBool((*engine)->run({Task{&PlaceNotes::run, &notes}})));
  EXPECT_TRUE(notes.inPlace);
  EXPECT_EQ(notes.result, WaitResult::TimedOut);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(30));
}

// Two tasks of one share run as fibers; so does one task on a thread whose
// stack has less room than a fiber's (a thread made with a small stack).
TEST(Engine, TasksRunAsFibersWhereInPlaceDoesNotFit) {
  Doorbell bell;
  EngineOptions options;
  options.threads = 1;
  auto engine = Engine::create(bell, options);
  ASSERT_TRUE(static_cast<bool>(engine)) << llvm::toString(engine.takeError());
  std::atomic<bool> ready{true};
  PlaceNotes a, b;
  a.flag = b.flag = &ready;
  ASSERT_FALSE(llvm::errorToBool(
      (*engine)->run({Task{&PlaceNotes::run, &a}, Task{&PlaceNotes::run, &b}})));
  EXPECT_FALSE(a.inPlace);
  EXPECT_FALSE(b.inPlace);

  struct Small {
    Engine *engine;
    PlaceNotes notes;
    bool ok = false;
  } small{engine->get(), {}};
  small.notes.flag = &ready;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 << 10);
  pthread_t thread;
  ASSERT_EQ(pthread_create(
                &thread, &attr,
                [](void *arg) -> void * {
                  auto *s = static_cast<Small *>(arg);
                  s->ok = !llvm::errorToBool(
                      s->engine->run({Task{&PlaceNotes::run, &s->notes}}));
                  return nullptr;
                },
                &small),
            0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  EXPECT_TRUE(small.ok);
  EXPECT_FALSE(small.notes.inPlace) << "a 256 KiB stack has no room for a task in place";
  EXPECT_EQ(small.notes.result, WaitResult::Ready);
}
