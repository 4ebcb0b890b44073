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

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

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

namespace {

long msSince(Clock::time_point since) {
  return long(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count());
}

/// Kills this process (SIGKILL) `delay` from now, from a thread of its own.
void dieIn(std::chrono::milliseconds delay) {
  std::thread([delay] {
    std::this_thread::sleep_for(delay);
    std::printf("rank %d: dying now\n", rank);
    std::fflush(stdout);
    raise(SIGKILL);
  }).detach();
}

/// Until a call fails (or, `idle`, until collCommGetAsyncError reports an
/// error while no call is in flight): prints "rank R: error CODE after MS
/// ms: MESSAGE", MS from `since`; then that the communicator stays broken.
void waitForLoss(bool idle, Clock::time_point since, int limitSeconds) {
  std::vector<float> buf(1 << 14, 1.0f);
  const auto deadline = Clock::now() + std::chrono::seconds(coll::testing::scaledSeconds(limitSeconds));
  collResult_t r = collSuccess;
  while (r == collSuccess && Clock::now() < deadline) {
    if (idle) {
      collResult_t async = collSuccess;
      check(collCommGetAsyncError(comm, &async), "get async error");
      r = async;
      if (r == collSuccess)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } else {
      r = collAllReduce(buf.data(), buf.data(), buf.size(), collFloat32, collSum, comm, nullptr);
    }
  }
  if (r == collSuccess)
    failNow("no error within " + std::to_string(limitSeconds) + " s of the loss");
  std::printf("rank %d: error %d after %ld ms: %s\n", rank, int(r), msSince(since),
              collGetLastError(comm));
  collResult_t async = collSuccess;
  check(collCommGetAsyncError(comm, &async), "get async error");
  if (async != collRemoteError)
    failNow("collCommGetAsyncError gave " + std::string(collGetErrorString(async)) +
            " after the loss, not a remote error");
  ++checks;
  // A later call fails at once, and leaves its buffer alone.
  float x = 7.0f;
  auto t0 = Clock::now();
  collResult_t again = collAllReduce(&x, &x, 1, collFloat32, collSum, comm, nullptr);
  if (again == collSuccess || x != 7.0f || msSince(t0) > coll::testing::scaledMs(500))
    failNow("a call after the loss did not fail at once without touching its buffer");
  ++checks;
}

/// Revokes `comm` and shrinks it without `victims`; `comm`, `rank` and
/// `nranks` become the new communicator's.
void shrinkAway(const std::vector<int> &victims) {
  check(collCommRevoke(comm, COLL_REVOKE_DEFAULT), "revoke");
  std::vector<int> exclude = victims;
  collComm_t shrunk = nullptr;
  auto t0 = Clock::now();
  check(collCommShrink(comm, exclude.data(), static_cast<int>(exclude.size()), &shrunk, nullptr,
                       COLL_SHRINK_DEFAULT),
        "shrink");
  const long took = msSince(t0);
  int newRank = -1, newSize = -1;
  check(collCommUserRank(shrunk, &newRank), "user rank of the shrunk communicator");
  check(collCommCount(shrunk, &newSize), "count of the shrunk communicator");
  int below = 0;
  for (int v : victims)
    below += v < rank ? 1 : 0;
  if (newSize != nranks - static_cast<int>(victims.size()) || newRank != rank - below)
    failNow("shrink: rank " + std::to_string(newRank) + " of " + std::to_string(newSize) +
            " for rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  ++checks;
  check(collCommDestroy(comm), "destroy the revoked communicator");
  std::printf("rank %d: shrunk to rank %d of %d in %ld ms\n", rank, newRank, newSize, took);
  comm = shrunk;
  rank = newRank;
  nranks = newSize;
}

/// The ranks lostRank kills: COLL_TEST_VICTIMS ("2,3": every rank of a
/// host, say), else rank 1 (the last of 2).
std::vector<int> victimsOf() {
  std::vector<int> victims;
  if (const char *list = std::getenv("COLL_TEST_VICTIMS"); list && *list) {
    for (const char *p = list; *p;) {
      victims.push_back(std::atoi(p));
      while (*p && *p != ',')
        ++p;
      if (*p == ',')
        ++p;
    }
    return victims;
  }
  return {nranks >= 3 ? 1 : nranks - 1};
}

} // namespace

void lostRank(bool idle) {
  const std::vector<int> victims = victimsOf();
  const std::chrono::milliseconds delay(coll::testing::scaledMs(300));
  const auto start = Clock::now();
  if (std::find(victims.begin(), victims.end(), rank) != victims.end()) {
    dieIn(delay);
    std::vector<float> buf(1 << 14, 1.0f);
    for (;;) {
      if (idle)
        std::this_thread::sleep_for(std::chrono::seconds(1));
      else
        collAllReduce(buf.data(), buf.data(), buf.size(), collFloat32, collSum, comm, nullptr);
    }
  }
  waitForLoss(idle, start + delay, 60);
  const int oldRank = rank;
  shrinkAway(victims);
  everyCollectiveRounds(100);
  std::printf("rank %d: was rank %d; 100 rounds of every collective after the shrink\n", rank,
              oldRank);
}

void growScenario() {
  const int victim = nranks - 1;
  const std::chrono::milliseconds delay(coll::testing::scaledMs(300));
  const auto start = Clock::now();
  if (rank == victim) {
    dieIn(delay);
    for (;;)
      std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  waitForLoss(true, start + delay, 60);
  shrinkAway({victim});
  everyCollectiveRounds(10);
  // Rank 0 makes the id and starts the fresh rank, which joins as `victim`.
  collUniqueId id;
  pid_t fresh = -1;
  if (rank == 0) {
    check(collCommGetUniqueId(comm, &id), "unique id for the grow");
    std::string hex;
    for (char c : id.internal) {
      char two[3];
      std::snprintf(two, sizeof two, "%02x", unsigned(static_cast<unsigned char>(c)));
      hex += two;
    }
    std::fflush(stdout);
    // Made before the fork: the child of a process with threads may not
    // allocate (ProcessTest.cpp's runJob).
    const std::string rs = std::to_string(victim), ns = std::to_string(victim + 1);
    fresh = fork();
    if (fresh == 0) {
      execl("/proc/self/exe", "coll-rank-check", "grow-new", "--id", hex.c_str(), "--rank",
            rs.c_str(), "--nranks", ns.c_str(), static_cast<char *>(nullptr));
      std::_Exit(127);
    }
    if (fresh < 0)
      failNow("fork of the fresh rank failed");
  }
  collComm_t grown = nullptr;
  check(collCommGrow(comm, victim + 1, rank == 0 ? &id : nullptr, -1, &grown, nullptr), "grow");
  int newRank = -1, newSize = -1;
  check(collCommUserRank(grown, &newRank), "user rank of the grown communicator");
  check(collCommCount(grown, &newSize), "count of the grown communicator");
  if (newRank != rank || newSize != victim + 1)
    failNow("grow: rank " + std::to_string(newRank) + " of " + std::to_string(newSize));
  ++checks;
  check(collCommDestroy(comm), "destroy the shrunk communicator");
  comm = grown;
  nranks = newSize;
  everyCollectiveRounds(100);
  std::printf("rank %d: grown back to %d ranks; 100 rounds of every collective\n", rank, nranks);
  if (fresh > 0) {
    // The fresh rank finishes with the others (finalize is collective).
    check(collCommFinalize(comm), "finalize");
    int status = 0;
    waitpid(fresh, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      failNow("the fresh rank failed");
    ++checks;
    check(collCommDestroy(comm), "destroy");
    std::printf("rank %d: ok %ld checks\n", rank, checks);
    std::fflush(stdout);
    std::_Exit(0);
  }
}

int growNewRank(const char *hex, int newRank, int size) {
  collUniqueId id;
  if (std::strlen(hex) != 2 * sizeof id.internal)
    return 2;
  for (size_t i = 0; i < sizeof id.internal; ++i)
    id.internal[i] = char(std::stoi(std::string(hex + 2 * i, 2), nullptr, 16));
  rank = newRank;
  nranks = size;
  check(collCommGrow(nullptr, size, &id, newRank, &comm, nullptr), "grow (the fresh rank)");
  int got = -1;
  check(collCommUserRank(comm, &got), "user rank");
  if (got != newRank)
    failNow("the fresh rank is rank " + std::to_string(got));
  everyCollectiveRounds(100);
  check(collCommFinalize(comm), "finalize");
  check(collCommDestroy(comm), "destroy");
  std::printf("rank %d (fresh): ok %ld checks\n", rank, checks);
  return 0;
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
