//===- Faults.cpp - Ranks that die, stop or abort; wrong calls ------------===//
//
// What the other ranks see when one is killed (kill), stopped (stop) or
// aborts its communicator (abort), or when the network fails under a
// stream of calls (loop: the driver takes a link down); calls that do not
// match across ranks (mismatch, mismatch-fits); bad arguments (errors).
// Failed calls print "rank R: error CODE after MS ms: MESSAGE", which the
// drivers parse.
//
//===----------------------------------------------------------------------===//

#include "RankCheck.h"

#include "TimeScale.h"

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace rankcheck {

namespace {

/// Runs allreduces until one fails; prints the error and how long after
/// `since` it came. Fails after `limitSeconds` (at time scale 1) without one.
void loopUntilError(Clock::time_point since, int limitSeconds) {
  std::vector<float> buf(1 << 18, 1.0f);
  limitSeconds = coll::testing::scaledSeconds(limitSeconds);
  auto deadline = Clock::now() + std::chrono::seconds(limitSeconds);
  while (Clock::now() < deadline) {
    collResult_t r = collAllReduce(buf.data(), buf.data(), buf.size(), collFloat32, collSum, comm,
                                   nullptr);
    if (r != collSuccess) {
      long ms = long(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since)
                         .count());
      std::printf("rank %d: error %d after %ld ms: %s\n", rank, int(r), ms,
                  collGetLastError(comm));
      std::fflush(stdout);
      collResult_t async = collSuccess;
      collCommGetAsyncError(comm, &async);
      // A broken communicator keeps failing with the same error.
      collResult_t again = collAllReduce(buf.data(), buf.data(), 1, collFloat32, collSum, comm,
                                         nullptr);
      std::printf("rank %d: async %d again %d\n", rank, int(async), int(again));
      check(collCommAbort(comm), "abort");
      comm = nullptr;
      std::fflush(stdout);
      std::_Exit(0);
    }
    for (float &x : buf)
      x = 1.0f;
  }
  failNow("no error within " + std::to_string(limitSeconds) + " s");
}

/// The mismatch scenarios' end: the call's result in the driver's format
/// (failureOf); then the next call, which the retired communicator refuses
/// at once without touching its buffer (docs/RUNTIME.md, "Retiring"):
/// "rank R: next call CODE, buffer untouched|written: MESSAGE"; then abort
/// and leave.
[[noreturn]] void reportMismatchAndExit(collResult_t r) {
  std::printf("rank %d: error %d after 0 ms: %s\n", rank, int(r),
              r == collSuccess ? "" : collGetLastError(comm));
  float x = 7.0f;
  collResult_t next = collAllReduce(&x, &x, 1, collFloat32, collSum, comm, nullptr);
  std::printf("rank %d: next call %d, buffer %s: %s\n", rank, int(next),
              x == 7.0f ? "untouched" : "written", next == collSuccess ? "" : collGetLastError(comm));
  std::fflush(stdout);
  collCommAbort(comm);
  comm = nullptr;
  std::_Exit(0);
}

} // namespace

/// The last rank dies (kill) or stops (stop) 300 ms (scaled) into a stream
/// of allreduces; the others must fail within the watchdog period.
void fault(bool stop) {
  const int victim = nranks - 1;
  const std::chrono::milliseconds delay(coll::testing::scaledMs(300));
  auto start = Clock::now();
  if (rank == victim) {
    std::thread([stop, delay] {
      std::this_thread::sleep_for(delay);
      std::printf("rank %d: %s now\n", rank, stop ? "stopping" : "dying");
      std::fflush(stdout);
      raise(stop ? SIGSTOP : SIGKILL);
    }).detach();
  }
  loopUntilError(start + delay, 60);
}

/// Every rank streams allreduces until one fails, for a fault the driver
/// makes from outside (a network link taken down); "running" tells it when.
void loopScenario() {
  std::vector<float> buf(1 << 16, 1.0f);
  check(collAllReduce(buf.data(), buf.data(), buf.size(), collFloat32, collSum, comm, nullptr),
        "first allreduce");
  std::printf("rank %d: running\n", rank);
  std::fflush(stdout);
  loopUntilError(Clock::now(), 120);
}

void mismatch() {
  std::vector<float> buf(4096 * nranks, 1.0f);
  collResult_t r;
  if (rank == 0)
    r = collAllReduce(buf.data(), buf.data(), 4096, collFloat32, collSum, comm, nullptr);
  else
    r = collAllGather(buf.data() + rank * 4096, buf.data(), 4096, collFloat32, comm, nullptr);
  reportMismatchAndExit(r);
}

/// Calls that differ only in their count: the data fit, so every call
/// completes, and the tags the senders store with their slots must still
/// tell each rank that the call was not the one it made.
void mismatchFits() {
  const size_t count = rank == 0 ? 1000 : 1001;
  std::vector<float> buf(count, 1.0f);
  collResult_t r =
      collAllReduce(buf.data(), buf.data(), count, collFloat32, collSum, comm, nullptr);
  reportMismatchAndExit(r);
}

/// Rank 0 aborts while the others are in an allreduce: theirs must end.
void abortScenario() {
  auto start = Clock::now();
  if (rank == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(coll::testing::scaledMs(200)));
    check(collCommAbort(comm), "abort");
    comm = nullptr;
    std::printf("rank 0: aborted\n");
    std::_Exit(0);
  }
  loopUntilError(start, 60);
}

void errors() {
  float x[4] = {0, 0, 0, 0};
  auto expect = [&](collResult_t got, collResult_t want, const char *what, const char *needle) {
    if (got != want)
      failNow(std::string(what) + ": got " + collGetErrorString(got));
    if (needle && !std::strstr(collGetLastError(comm), needle))
      failNow(std::string(what) + ": message '" + collGetLastError(comm) + "' lacks '" + needle +
              "'");
    ++checks;
  };
  expect(collAllReduce(nullptr, x, 4, collFloat32, collSum, comm, nullptr), collInvalidArgument,
         "null sendbuff", "sendbuff is NULL");
  expect(collAllReduce(x, x, 4, collFloat8e4m3, collSum, comm, nullptr), collInvalidArgument,
         "fp8", "not supported");
  char choice[256] = {0};
  expect(collCommQueryChoice(comm, "allreduce", 4096, 0, choice, sizeof choice), collSuccess,
         "query allreduce", nullptr);
  if (!std::strstr(choice, " -- "))
    failNow(std::string("query allreduce: '") + choice + "' names no reason");
  expect(collCommQueryChoice(comm, "allsum", 4096, 0, choice, sizeof choice), collInvalidArgument,
         "query a collective that does not exist", "'allsum' is not a collective");
  expect(collCommQueryChoice(comm, "broadcast", 64, nranks, choice, sizeof choice),
         collInvalidArgument, "query with a root out of range", "out of range");
  expect(collAllReduce(x, x, 4, collFloat32, static_cast<collRedOp_t>(9), comm, nullptr),
         collInvalidArgument, "bad op", "reduction op");
  expect(collBroadcast(x, x, 4, collFloat32, nranks, comm, nullptr), collInvalidArgument,
         "root out of range", "out of range");
  expect(collAllReduce(x, x, SIZE_MAX / 2, collFloat32, collSum, comm, nullptr),
         collInvalidArgument, "count overflow", "too large");
  expect(collAllReduce(x, x + 1, 4, collFloat32, collSum, comm, nullptr), collInvalidArgument,
         "overlap", "overlap");
  expect(collAllReduce(x, x, 4, collFloat32, collSum, comm, reinterpret_cast<void *>(1)),
         collInvalidArgument, "stream with host buffers", "stream NULL");
  expect(collSend(x, 4, collFloat32, rank, comm, nullptr), collInvalidUsage, "lone send to self",
         "to itself");
  expect(collGroupEnd(), collInvalidUsage, "group end without start", nullptr);
  // The communicator still works after argument errors.
  check(collAllReduce(x, x, 4, collFloat32, collSum, comm, nullptr), "allreduce after errors");
  ++checks;
}

} // namespace rankcheck
