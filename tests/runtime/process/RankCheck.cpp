//===- RankCheck.cpp - One rank of a multi-process runtime test -------------===//
//
// A program a user could have written against coll.h alone: it joins a
// communicator, runs a scenario and checks every result on its own rank
// against the collective's definition in closed form. Launched N times by
// ProcessTest.cpp (fork + exec, TCP bootstrap) or by mpirun.
//
//   coll-rank-check SCENARIO --id HEX --rank R --nranks N
//   coll-rank-check SCENARIO --env          (collCommInitFromEnv: mpirun, srun, torchrun)
//   coll-rank-check SCENARIO --mpi          (collCommInitFromMPI; MPI builds only)
//
// Scenarios: collectives, p2p, kill, stop, loop, mismatch, mismatch-fits, abort, split, errors, trace,
// device (every collective on the emulated device against the host backend),
// and where built with CUDA (coll-rank-check-gpu): gpu (every collective on
// device buffers, on the caller's streams, against the host backend).
//
//   coll-rank-check SCENARIO --fork N       (this program forks N ranks itself)
//   coll-rank-check-gpu gpu-all --all N     (N ranks of one process on GPU 0,
//                                            collCommInitAll, groups)
//
// Exit 77 (skip) when a GPU scenario finds no CUDA device.
// Prints "rank R: ok N checks" and exits 0, or "rank R: FAIL ..." and exits 1.
// Failed calls print "rank R: error CODE after MS ms: MESSAGE" (kill, stop,
// mismatch), which the driver parses. COLL_TEST_SMALL=1 keeps sizes small
// (sanitizer builds).
//
//===----------------------------------------------------------------------===//

#include "coll.h"

#if COLL_TEST_MPI
#include "coll_mpi.h"
#endif
#if COLL_TEST_GPU
#include <cuda_runtime_api.h>
#endif

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

int rank = -1, nranks = 0;
collComm_t comm = nullptr;
long checks = 0;

[[noreturn]] void failNow(const std::string &what) {
  std::printf("rank %d: FAIL %s\n", rank, what.c_str());
  std::fflush(stdout);
  std::_Exit(1);
}

void check(collResult_t r, const char *what) {
  if (r != collSuccess)
    failNow(std::string(what) + ": " + collGetErrorString(r) + ": " + collGetLastError(comm));
}

using Clock = std::chrono::steady_clock;

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

enum class Type { F32, BF16, I32 };
enum class Red { Sum, Prod, Min, Max, Avg };

const char *typeName(Type t) { return t == Type::F32 ? "fp32" : t == Type::BF16 ? "bf16" : "int32"; }
const char *redName(Red r) {
  static const char *names[] = {"sum", "prod", "min", "max", "avg"};
  return names[static_cast<int>(r)];
}
collDataType_t collType(Type t) {
  return t == Type::F32 ? collFloat32 : t == Type::BF16 ? collBfloat16 : collInt32;
}
collRedOp_t collOp(Red r) {
  switch (r) {
  case Red::Sum: return collSum;
  case Red::Prod: return collProd;
  case Red::Min: return collMin;
  case Red::Max: return collMax;
  case Red::Avg: return collAvg;
  }
  return collSum;
}
size_t typeSize(Type t) { return t == Type::BF16 ? 2 : 4; }

/// Small integers: exact in every type, sums and products included.
double value(int r, size_t i, Red red) {
  if (red == Red::Prod)
    return double((r + i) % 2 + 1);
  return double((r * 7 + i * 3) % 5 + 1);
}

double combine(Red red, size_t i, int n) {
  double acc = value(0, i, red);
  for (int a = 1; a < n; ++a) {
    double v = value(a, i, red);
    switch (red) {
    case Red::Sum:
    case Red::Avg: acc += v; break;
    case Red::Prod: acc *= v; break;
    case Red::Min: acc = std::min(acc, v); break;
    case Red::Max: acc = std::max(acc, v); break;
    }
  }
  return acc;
}

/// The expected average, as each type computes it.
double average(double sum, int n, Type t) {
  if (t == Type::I32)
    return double(int64_t(sum) / n);
  return sum / n;
}

void store(std::vector<unsigned char> &buf, size_t i, double v, Type t) {
  unsigned char *p = buf.data() + i * typeSize(t);
  if (t == Type::F32) {
    float f = float(v);
    std::memcpy(p, &f, 4);
  } else if (t == Type::I32) {
    int32_t x = int32_t(v);
    std::memcpy(p, &x, 4);
  } else {
    float f = float(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    uint16_t h = uint16_t(bits >> 16); // exact for small integers
    std::memcpy(p, &h, 2);
  }
}

double load(const std::vector<unsigned char> &buf, size_t i, Type t) {
  const unsigned char *p = buf.data() + i * typeSize(t);
  if (t == Type::F32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  if (t == Type::I32) {
    int32_t x;
    std::memcpy(&x, p, 4);
    return x;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

bool close(double got, double want, Type t, Red red) {
  if (red != Red::Avg || t == Type::I32)
    return got == want;
  double tol = t == Type::BF16 ? 1e-2 : 1e-6;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

enum class Coll { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce, Gather, Scatter };
const char *collName(Coll c) {
  static const char *names[] = {"allreduce", "allgather", "reducescatter", "alltoall",
                                "broadcast", "reduce",    "gather",        "scatter"};
  return names[static_cast<int>(c)];
}

/// Runs one call and checks this rank's result; `root` for rooted ones.
void runOne(Coll coll, size_t count, Type t, Red red, bool inplace, int root) {
  const size_t es = typeSize(t);
  const size_t n = size_t(nranks);
  const bool reduces = coll == Coll::AllReduce || coll == Coll::ReduceScatter || coll == Coll::Reduce;
  const bool inPerRank = coll == Coll::ReduceScatter || coll == Coll::AllToAll || coll == Coll::Scatter;
  const bool outPerRank = coll == Coll::AllGather || coll == Coll::AllToAll || coll == Coll::Gather;
  const size_t inElems = inPerRank ? n * count : count;
  const size_t outElems = outPerRank ? n * count : count;
  const bool isRoot = rank == root;
  const bool hasInput = !(coll == Coll::Broadcast || coll == Coll::Scatter) || isRoot;
  const bool hasOutput = !(coll == Coll::Reduce || coll == Coll::Gather) || isRoot;
  const Red valueRed = reduces ? red : Red::Sum;
  // Input element j of rank a.
  auto in = [&](int a, size_t j) { return value(a, j, valueRed); };

  std::vector<unsigned char> sendBuf(std::max<size_t>(inElems, 1) * es, 0xab);
  std::vector<unsigned char> recvBuf(std::max<size_t>(outElems, 1) * es, 0xcd);
  std::vector<unsigned char> big(std::max<size_t>(std::max(inElems, outElems), 1) * es, 0xcd);
  const void *send = sendBuf.data();
  void *recv = recvBuf.data();
  size_t outOffset = 0; // where the output starts within `big` in place
  if (inplace && hasInput && hasOutput) {
    size_t inOffset = 0;
    if (outPerRank && !inPerRank)
      inOffset = size_t(rank) * count;
    if (inPerRank && !outPerRank)
      outOffset = size_t(rank) * count;
    for (size_t j = 0; j < inElems; ++j)
      store(big, inOffset + j, in(rank, j), t);
    send = big.data() + inOffset * es;
    recv = big.data() + outOffset * es;
  } else {
    for (size_t j = 0; j < inElems; ++j)
      store(sendBuf, j, in(rank, j), t);
    if (!hasInput)
      send = nullptr; // NCCL: not used on this rank
    if (!hasOutput)
      recv = nullptr;
  }
  const std::vector<unsigned char> sentCopy = sendBuf;

  collResult_t r = collSuccess;
  const collDataType_t dt = collType(t);
  switch (coll) {
  case Coll::AllReduce: r = collAllReduce(send, recv, count, dt, collOp(red), comm, nullptr); break;
  case Coll::AllGather: r = collAllGather(send, recv, count, dt, comm, nullptr); break;
  case Coll::ReduceScatter:
    r = collReduceScatter(send, recv, count, dt, collOp(red), comm, nullptr);
    break;
  case Coll::AllToAll: r = collAlltoAll(send, recv, count, dt, comm, nullptr); break;
  case Coll::Broadcast: r = collBroadcast(send, recv, count, dt, root, comm, nullptr); break;
  case Coll::Reduce: r = collReduce(send, recv, count, dt, collOp(red), root, comm, nullptr); break;
  case Coll::Gather: r = collGather(send, recv, count, dt, root, comm, nullptr); break;
  case Coll::Scatter: r = collScatter(send, recv, count, dt, root, comm, nullptr); break;
  }
  char what[160];
  std::snprintf(what, sizeof what, "%s count %zu %s %s %s root %d", collName(coll), count,
                typeName(t), reduces ? redName(red) : "-", inplace ? "in-place" : "out-of-place",
                root);
  check(r, what);
  if (!hasOutput)
    return;
  const std::vector<unsigned char> &out = inplace && hasInput ? big : recvBuf;
  for (size_t i = 0; i < outElems; ++i) {
    double want = 0;
    switch (coll) {
    case Coll::AllReduce:
    case Coll::Reduce:
      want = combine(red, i, nranks);
      break;
    case Coll::ReduceScatter:
      want = combine(red, size_t(rank) * count + i, nranks);
      break;
    case Coll::AllGather:
    case Coll::Gather:
      want = in(int(i / count), i % count);
      break;
    case Coll::AllToAll:
      want = in(int(i / count), size_t(rank) * count + i % count);
      break;
    case Coll::Broadcast:
      want = in(root, i);
      break;
    case Coll::Scatter:
      want = in(root, size_t(rank) * count + i);
      break;
    }
    if (reduces && red == Red::Avg)
      want = average(want, nranks, t);
    double got = load(out, outOffset + i, t);
    if (!close(got, want, t, red)) {
      char msg[320];
      std::snprintf(msg, sizeof msg, "%s: element %zu is %g, expected %g", what, i, got, want);
      failNow(msg);
    }
  }
  if (!inplace && hasInput && sendBuf != sentCopy)
    failNow(std::string(what) + ": the send buffer changed (it must stay const)");
  ++checks;
}

void collectives(bool small) {
  std::vector<size_t> counts = {0, 1, 7, 1000, 65536 + 3};
  if (!small)
    counts.push_back(1 << 20); // 4 MiB of fp32
  const Coll all[] = {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::AllToAll,
                      Coll::Broadcast, Coll::Reduce,    Coll::Gather,        Coll::Scatter};
  for (Coll coll : all)
    for (Type t : {Type::F32, Type::BF16, Type::I32})
      for (size_t count : counts)
        for (bool inplace : {false, true}) {
          if (t != Type::F32 && count > (1u << 17))
            continue; // the biggest size once is enough
          int root = (count + int(t)) % nranks;
          runOne(coll, count, t, Red::Sum, inplace, root);
        }
  // Every operator, on the reducing collectives.
  for (Coll coll : {Coll::AllReduce, Coll::ReduceScatter, Coll::Reduce})
    for (Red red : {Red::Prod, Red::Min, Red::Max, Red::Avg})
      for (Type t : {Type::F32, Type::BF16, Type::I32})
        runOne(coll, 1001, t, red, false, nranks - 1);
}

//===----------------------------------------------------------------------===//
// Point to point
//===----------------------------------------------------------------------===//

void p2p(bool small) {
  const size_t sizes[] = {0, 1, 1000, small ? 70000u : 1500000u};
  for (size_t count : sizes) {
    // A ring exchange: everyone sends to the next and receives from the
    // previous, in one group (it would deadlock for big messages otherwise).
    std::vector<int32_t> out(std::max<size_t>(count, 1)), in(std::max<size_t>(count, 1), -1);
    for (size_t i = 0; i < count; ++i)
      out[i] = int32_t(rank * 1000003 + i);
    const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    check(collGroupStart(), "group start");
    check(collSend(out.data(), count, collInt32, next, comm, nullptr), "send");
    check(collRecv(in.data(), count, collInt32, prev, comm, nullptr), "recv");
    check(collGroupEnd(), "ring exchange");
    for (size_t i = 0; i < count; ++i)
      if (in[i] != int32_t(prev * 1000003 + i))
        failNow("ring exchange of " + std::to_string(count) + ": element " + std::to_string(i));
    ++checks;
    // To itself, in a group.
    std::vector<int32_t> self(std::max<size_t>(count, 1), -1);
    check(collGroupStart(), "group start");
    check(collSend(out.data(), count, collInt32, rank, comm, nullptr), "send to self");
    check(collRecv(self.data(), count, collInt32, rank, comm, nullptr), "recv from self");
    check(collGroupEnd(), "self exchange");
    for (size_t i = 0; i < count; ++i)
      if (self[i] != out[i])
        failNow("self exchange: element " + std::to_string(i));
    ++checks;
  }
  // Several messages to one peer arrive in order; rank 0 sends, rank 1 receives.
  if (nranks >= 2 && rank < 2) {
    std::vector<int32_t> a(300, 1), b(5, 2), c(70000, 3);
    if (rank == 0) {
      check(collGroupStart(), "group start");
      check(collSend(a.data(), a.size(), collInt32, 1, comm, nullptr), "send a");
      check(collSend(b.data(), b.size(), collInt32, 1, comm, nullptr), "send b");
      check(collSend(c.data(), c.size(), collInt32, 1, comm, nullptr), "send c");
      check(collGroupEnd(), "sends in order");
    } else {
      std::vector<int32_t> ra(300), rb(5), rc(70000);
      check(collGroupStart(), "group start");
      check(collRecv(ra.data(), ra.size(), collInt32, 0, comm, nullptr), "recv a");
      check(collRecv(rb.data(), rb.size(), collInt32, 0, comm, nullptr), "recv b");
      check(collRecv(rc.data(), rc.size(), collInt32, 0, comm, nullptr), "recv c");
      check(collGroupEnd(), "receives in order");
      if (ra != a || rb != b || rc != c)
        failNow("messages to one peer arrived out of order or wrong");
    }
    ++checks;
  }
}

//===----------------------------------------------------------------------===//
// Faults
//===----------------------------------------------------------------------===//

/// Runs allreduces until one fails; prints the error and how long after
/// `since` it came.
void loopUntilError(Clock::time_point since, int limitSeconds) {
  std::vector<float> buf(1 << 18, 1.0f);
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

/// The last rank dies (kill) or stops (stop) 300 ms into a stream of
/// allreduces; the others must fail within the watchdog period.
void fault(bool stop) {
  const int victim = nranks - 1;
  auto start = Clock::now();
  if (rank == victim) {
    std::thread([stop] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::printf("rank %d: %s now\n", rank, stop ? "stopping" : "dying");
      std::fflush(stdout);
      raise(stop ? SIGSTOP : SIGKILL);
    }).detach();
  }
  loopUntilError(start + std::chrono::milliseconds(300), 60);
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

/// A few calls for COLL_TRACE: an allreduce and an allgather, checked.
void traceScenario() {
  const size_t count = 3000;
  std::vector<float> v(count, float(rank + 1)), all(count * nranks, 0.0f);
  check(collAllReduce(v.data(), v.data(), count, collFloat32, collSum, comm, nullptr), "allreduce");
  const float sum = float(nranks * (nranks + 1) / 2);
  if (v[0] != sum || v[count - 1] != sum)
    failNow("allreduce: " + std::to_string(v[0]) + ", expected " + std::to_string(sum));
  std::vector<float> mine(count, float(rank));
  check(collAllGather(mine.data(), all.data(), count, collFloat32, comm, nullptr), "allgather");
  for (int r = 0; r < nranks; ++r)
    if (all[r * count] != float(r) || all[r * count + count - 1] != float(r))
      failNow("allgather: block " + std::to_string(r) + " is wrong");
  checks += 2;
}

/// The mismatch scenarios' end: the call's result in the driver's format
/// (failureOf), then abort and leave.
[[noreturn]] void reportMismatchAndExit(collResult_t r) {
  std::printf("rank %d: error %d after 0 ms: %s\n", rank, int(r),
              r == collSuccess ? "" : collGetLastError(comm));
  std::fflush(stdout);
  collCommAbort(comm);
  comm = nullptr;
  std::_Exit(0);
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
  collResult_t r = collAllReduce(buf.data(), buf.data(), count, collFloat32, collSum, comm, nullptr);
  reportMismatchAndExit(r);
}

/// Rank 0 aborts while the others are in an allreduce: theirs must end.
void abortScenario() {
  auto start = Clock::now();
  if (rank == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    check(collCommAbort(comm), "abort");
    comm = nullptr;
    std::printf("rank 0: aborted\n");
    std::_Exit(0);
  }
  loopUntilError(start, 60);
}

void splitScenario() {
  // Even and odd ranks form two communicators, ordered by descending rank.
  collComm_t half = nullptr;
  check(collCommSplit(comm, rank % 2, -rank, &half, nullptr), "split");
  int hrank = -1, hsize = -1;
  check(collCommUserRank(half, &hrank), "user rank");
  check(collCommCount(half, &hsize), "count");
  int expectSize = (nranks + 1 - rank % 2) / 2;
  int expectRank = (nranks - 1 - rank) / 2; // ranks of its parity above it
  if (hsize != expectSize || hrank != expectRank)
    failNow("split: rank " + std::to_string(hrank) + " of " + std::to_string(hsize));
  std::vector<int32_t> v(100, rank);
  check(collAllReduce(v.data(), v.data(), v.size(), collInt32, collSum, half, nullptr),
        "allreduce on the half");
  int want = 0;
  for (int r = rank % 2; r < nranks; r += 2)
    want += r;
  if (v[0] != want || v[99] != want)
    failNow("allreduce on the half: " + std::to_string(v[0]) + ", expected " + std::to_string(want));
  // NOCOLOR gives NULL.
  collComm_t none = reinterpret_cast<collComm_t>(1);
  check(collCommSplit(comm, rank == 0 ? COLL_SPLIT_NOCOLOR : 1, 0, &none, nullptr), "split 2");
  if ((rank == 0) != (none == nullptr))
    failNow("COLL_SPLIT_NOCOLOR must give NULL, and only it");
  if (none)
    check(collCommDestroy(none), "destroy");
  check(collCommFinalize(half), "finalize half");
  check(collCommDestroy(half), "destroy half");
  checks += 2;
}

void errors() {
  float x[4] = {0, 0, 0, 0};
  auto expect = [&](collResult_t got, collResult_t want, const char *what, const char *needle) {
    if (got != want)
      failNow(std::string(what) + ": got " + collGetErrorString(got));
    if (needle && !std::strstr(collGetLastError(comm), needle))
      failNow(std::string(what) + ": message '" + collGetLastError(comm) + "' lacks '" + needle + "'");
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

/// late-cuda: a program that loads its CUDA runtime only after its first
/// call (COLL_TEST_STANDIN_CUDART names the stand-in one, which calls the
/// memory of its cudaMalloc device memory): its device memory must be told
/// apart from then on. With COLL_CUDA_PLUGIN naming no file, a call on it
/// fails with collInvalidUsage (as host memory it would succeed).
void lateCuda() {
  std::vector<float> x(16, 1.0f);
  check(collAllReduce(x.data(), x.data(), 16, collFloat32, collSum, comm, nullptr),
        "host allreduce before CUDA is loaded");
  const char *path = std::getenv("COLL_TEST_STANDIN_CUDART");
  void *lib = path ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : nullptr;
  if (!lib)
    failNow(std::string("cannot load COLL_TEST_STANDIN_CUDART: ") + (path ? dlerror() : "unset"));
  auto cudaMallocFn = reinterpret_cast<int (*)(void **, size_t)>(dlsym(lib, "cudaMalloc"));
  void *d = nullptr;
  if (!cudaMallocFn || cudaMallocFn(&d, 64) != 0 || !d)
    failNow("the stand-in's cudaMalloc failed");
  collResult_t r = collAllReduce(d, d, 16, collFloat32, collSum, comm, nullptr);
  if (r != collInvalidUsage || !std::strstr(collGetLastError(comm), "could not be loaded"))
    failNow(std::string("device memory of a CUDA runtime loaded late was not told apart: ") +
            collGetErrorString(r) + ": " + collGetLastError(comm));
  checks += 2;
}

//===----------------------------------------------------------------------===//
// The emulated device
//===----------------------------------------------------------------------===//

#if COLL_TEST_GPU
void cudaCheck(cudaError_t err, const char *what) {
  if (err != cudaSuccess)
    failNow(std::string(what) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}

/// A buffer in device memory with the contents of `host`.
struct DeviceBuffer {
  void *ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(const std::vector<unsigned char> &host) : bytes(host.size()) {
    cudaCheck(cudaMalloc(&ptr, bytes), "cudaMalloc");
    cudaCheck(cudaMemcpy(ptr, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> host(bytes);
    cudaCheck(cudaMemcpy(host.data(), ptr, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    return host;
  }
  unsigned char *at(size_t offset) const { return static_cast<unsigned char *>(ptr) + offset; }
};

/// Calls queued on one stream with no wait in between, each reading the
/// previous one's output (in-place allreduces), checked after one wait.
void gpuQueue(cudaStream_t stream) {
  const size_t count = 100003;
  const int calls = 8;
  std::vector<unsigned char> bytes(count * 4);
  double sum[7] = {};
  for (size_t i = 0; i < count; ++i) {
    const float v = float((size_t(rank) + i) % 7);
    std::memcpy(bytes.data() + 4 * i, &v, 4);
  }
  DeviceBuffer d(bytes);
  for (int k = 0; k < calls; ++k)
    check(collAllReduce(d.ptr, d.ptr, count, collFloat32, collSum, comm, k % 2 ? stream : nullptr),
          "queued allreduce");
  cudaCheck(cudaStreamSynchronize(stream), "queued allreduces");
  cudaCheck(cudaStreamSynchronize(nullptr), "queued allreduces");
  const std::vector<unsigned char> out = d.download();
  for (int r = 0; r < nranks; ++r)
    for (size_t j = 0; j < 7; ++j)
      sum[j] += double((size_t(r) + j) % 7); // element i of rank r holds (r + i) % 7
  double scale = 1;
  for (int k = 1; k < calls; ++k)
    scale *= nranks;
  for (size_t i = 0; i < count; ++i) {
    float got;
    std::memcpy(&got, out.data() + 4 * i, 4);
    const double want = sum[i % 7] * scale;
    if (double(got) != want)
      failNow("queued allreduces: element " + std::to_string(i) + " is " + std::to_string(got) +
              ", expected " + std::to_string(want));
  }
  ++checks;
}

/// Wrong calls with device buffers fail with a message naming the cause,
/// and the communicator goes on working.
void gpuErrors() {
  std::vector<unsigned char> host(64, 0);
  DeviceBuffer d(host);
  auto expect = [&](collResult_t got, collResult_t want, const char *what, const char *needle) {
    if (got != want)
      failNow(std::string(what) + ": got " + collGetErrorString(got));
    if (!std::strstr(collGetLastError(comm), needle))
      failNow(std::string(what) + ": message '" + collGetLastError(comm) + "' lacks '" + needle +
              "'");
    ++checks;
  };
  expect(collAllReduce(host.data(), d.ptr, 16, collFloat32, collSum, comm, nullptr),
         collInvalidArgument, "host sendbuff, device recvbuff", "sendbuff is host memory");
  expect(collSend(d.ptr, 16, collFloat32, (rank + 1) % nranks, comm, nullptr), collInvalidUsage,
         "send from device memory", "point-to-point calls on device buffers");
  check(collAllReduce(d.ptr, d.ptr, 16, collFloat32, collSum, comm, nullptr),
        "device allreduce after errors");
  cudaCheck(cudaDeviceSynchronize(), "device allreduce after errors");
  ++checks;
}

/// gpu-unserved (COLL_CUDA_PLUGIN naming a file that is not there): a call
/// on device memory fails at once on every rank with collInvalidUsage
/// naming the plugin, and host calls go on working.
void gpuUnserved() {
  std::vector<unsigned char> host(64, 0);
  DeviceBuffer d(host);
  collResult_t r = collAllReduce(d.ptr, d.ptr, 16, collFloat32, collSum, comm, nullptr);
  if (r != collInvalidUsage)
    failNow(std::string("device allreduce without a GPU backend: got ") + collGetErrorString(r));
  const char *needle = "could not be loaded";
  if (!std::strstr(collGetLastError(comm), needle))
    failNow(std::string("message '") + collGetLastError(comm) + "' lacks '" + needle + "'");
  int supported = 1;
  char why[512] = {};
  check(collDeviceBuffersSupported(&supported, why, sizeof why), "collDeviceBuffersSupported");
  if (supported || !std::strstr(why, needle))
    failNow(std::string("collDeviceBuffersSupported: ") + std::to_string(supported) + " " + why);
  std::vector<float> x(16, 1.0f);
  check(collAllReduce(x.data(), x.data(), 16, collFloat32, collSum, comm, nullptr),
        "host allreduce after the refusal");
  if (x[0] != float(nranks))
    failNow("host allreduce after the refusal: wrong result");
  checks += 3;
}

/// gpu-trace (COLL_TRACE, set by main before init): an allreduce and an
/// allgather on device buffers, checked; after destroy, checkGpuTraceFile
/// finds both calls and the kernel's step slices in this rank's file.
void gpuTrace() {
  const size_t count = 3000;
  std::vector<unsigned char> bytes(count * 4), all(count * 4 * size_t(nranks), 0);
  for (size_t i = 0; i < count; ++i) {
    const float v = float(rank + 1);
    std::memcpy(bytes.data() + 4 * i, &v, 4);
  }
  DeviceBuffer d(bytes), gathered(all);
  check(collAllReduce(d.ptr, d.ptr, count, collFloat32, collSum, comm, nullptr), "allreduce");
  check(collAllGather(d.ptr, gathered.ptr, count, collFloat32, comm, nullptr), "allgather");
  cudaCheck(cudaDeviceSynchronize(), "the traced calls");
  const float sum = float(nranks * (nranks + 1) / 2);
  std::vector<unsigned char> out = gathered.download();
  for (int r = 0; r < nranks; ++r) {
    float v = 0;
    std::memcpy(&v, out.data() + size_t(r) * count * 4, 4);
    if (v != sum)
      failNow("allreduce then allgather: block " + std::to_string(r) + " holds " +
              std::to_string(v) + ", expected " + std::to_string(sum));
  }
  checks += 2;
}

std::string gpuTracePath(bool withRank) {
  return "/tmp/coll-gpu-trace-" + std::to_string(getpid()) +
         (withRank ? ".r" + std::to_string(rank) : std::string()) + ".json";
}

/// The file gpu-trace's rank wrote: two call slices and step slices
/// (counted in the text: the format is the host backend's, checked in
/// depth by the host and emulation tests); removed afterwards.
void checkGpuTraceFile() {
  const std::string path = gpuTracePath(true);
  std::FILE *f = std::fopen(path.c_str(), "r");
  if (!f)
    failNow("COLL_TRACE wrote no " + path);
  std::string text;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
    text.append(buf, n);
  std::fclose(f);
  std::remove(path.c_str());
  auto countOf = [&](const std::string &needle) {
    size_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
      ++n;
    return n;
  };
  const size_t calls = countOf("\"cat\":\"call\""), steps = countOf("\"cat\":\"step\"");
  if (calls != 2 || steps == 0)
    failNow(path + ": " + std::to_string(calls) + " call slices and " + std::to_string(steps) +
            " step slices; expected 2 calls and their steps");
  ++checks;
}

/// gpu-kill: the last rank dies after a first device allreduce; the others'
/// next one (enqueued, so the call itself succeeds) ends at the kernel's
/// watchdog (COLL_WATCHDOG_MS=3000 here), and collCommGetAsyncError says so,
/// naming the dead process. Prints "rank R: error CODE after MS ms: ...".
void gpuKill() {
  const size_t count = 1 << 20;
  std::vector<unsigned char> host(count * 4, 0);
  DeviceBuffer d(host);
  check(collAllReduce(d.ptr, d.ptr, count, collFloat32, collSum, comm, nullptr), "first allreduce");
  cudaCheck(cudaDeviceSynchronize(), "first allreduce");
  check(collGroupStart(), "group start"); // a barrier through the host backend
  std::vector<float> token(1, 1.0f);
  check(collAllReduce(token.data(), token.data(), 1, collFloat32, collSum, comm, nullptr), "token");
  check(collGroupEnd(), "group end");
  if (rank == nranks - 1) {
    std::printf("rank %d: dying now\n", rank);
    std::fflush(stdout);
    raise(SIGKILL);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto start = Clock::now();
  collResult_t r = collAllReduce(d.ptr, d.ptr, count, collFloat32, collSum, comm, nullptr);
  collResult_t async = collSuccess;
  while (r == collSuccess && async == collSuccess &&
         Clock::now() - start < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    check(collCommGetAsyncError(comm, &async), "collCommGetAsyncError");
  }
  const collResult_t got = r != collSuccess ? r : async;
  const long ms =
      long(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
  std::printf("rank %d: error %d after %ld ms: %s\n", rank, int(got), ms, collGetLastError(comm));
  if (got != collRemoteError && got != collTimeout)
    failNow("the survivor's call did not end with collRemoteError or collTimeout");
  if (ms > 3000 + 2000)
    failNow("the survivor's call ended " + std::to_string(ms) + " ms after it was issued");
  check(collCommDestroy(comm), "destroy after the peer died");
  comm = nullptr;
  std::printf("rank %d: ok %ld checks\n", rank, checks + 1);
  std::fflush(stdout);
  std::_Exit(0);
}

/// gpu-abort: rank 0's device allreduce waits for ranks that never join it
/// (COLL_WATCHDOG_MS=20000 here); collCommAbort must stop its kernel and
/// return within 2 s, and so must the others'.
void gpuAbort() {
  const size_t count = 1 << 20;
  std::vector<unsigned char> host(count * 4, 0);
  DeviceBuffer d(host);
  check(collAllReduce(d.ptr, d.ptr, count, collFloat32, collSum, comm, nullptr), "first allreduce");
  cudaCheck(cudaDeviceSynchronize(), "first allreduce");
  if (rank == 0)
    check(collAllReduce(d.ptr, d.ptr, count, collFloat32, collSum, comm, nullptr),
          "the allreduce nobody joins");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto start = Clock::now();
  check(collCommAbort(comm), "collCommAbort");
  comm = nullptr;
  const long ms =
      long(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
  std::printf("rank %d: abort took %ld ms\n", rank, ms);
  if (ms > 2000)
    failNow("collCommAbort took " + std::to_string(ms) + " ms with a kernel in flight");
  std::printf("rank %d: ok %ld checks\n", rank, checks + 1);
  std::fflush(stdout);
  std::_Exit(0);
}
#endif

/// Where the compared calls run: a second communicator on the emulated
/// device (collConfig_t emulatedDevice) with host buffers, or `comm` itself
/// with device buffers on a GPU.
enum class Target { Emulated, Gpu };

/// Every collective on `target`; each call's output must equal, bit for
/// bit, the same call on the host backend (`comm` with host buffers), with
/// inputs that are not small integers, so that the order of every
/// reduction shows.
void compareScenario(bool small, Target target) {
  collComm_t dev = comm;
  if (target == Target::Emulated) {
    collConfig_t config = COLL_CONFIG_INITIALIZER;
    config.emulatedDevice = 1;
    check(collCommSplit(comm, 0, rank, &dev, &config), "split onto the emulated device");
  }
  const char *where = target == Target::Emulated ? "emulated device" : "GPU";
#if COLL_TEST_GPU
  // Calls alternate between a stream of the caller's and the legacy
  // default stream.
  cudaStream_t gpuStream = nullptr;
  if (target == Target::Gpu)
    cudaCheck(cudaStreamCreate(&gpuStream), "cudaStreamCreate");
  unsigned calls = 0;
#endif
  struct TypeCase {
    collDataType_t type;
    size_t size;
    const char *name;
  };
  const TypeCase types[] = {{collFloat32, 4, "fp32"}, {collFloat64, 8, "fp64"},
                            {collBfloat16, 2, "bf16"}, {collInt32, 4, "int32"},
                            {collInt8, 1, "int8"}};
  std::vector<size_t> counts = {0, 1, 7, 1000, 65536 + 3};
  if (!small)
    counts.push_back(1 << 20);
  const Coll all[] = {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::AllToAll,
                      Coll::Broadcast, Coll::Reduce,    Coll::Gather,        Coll::Scatter};
  uint32_t seed = 12345u + uint32_t(rank) * 7919u;
  auto fill = [&](std::vector<unsigned char> &buf, const TypeCase &t) {
    for (size_t i = 0; i < buf.size() / t.size; ++i) {
      seed = seed * 1664525u + 1013904223u;
      const float f = float(int32_t(seed >> 8) % 20000) / 997.0f; // not exact in bf16
      unsigned char *p = buf.data() + i * t.size;
      if (t.type == collFloat32) {
        std::memcpy(p, &f, 4);
      } else if (t.type == collFloat64) {
        const double d = double(f) / 3.0;
        std::memcpy(p, &d, 8);
      } else if (t.type == collBfloat16) {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        const uint16_t h = uint16_t(bits >> 16);
        std::memcpy(p, &h, 2);
      } else if (t.type == collInt32) {
        const int32_t x = int32_t(seed >> 4);
        std::memcpy(p, &x, 4);
      } else {
        *p = static_cast<unsigned char>(seed >> 24);
      }
    }
  };
  auto runBoth = [&](Coll coll, const TypeCase &t, collRedOp_t op, size_t count, bool inplace,
                     int root) {
    const size_t n = size_t(nranks);
    const bool inPerRank =
        coll == Coll::ReduceScatter || coll == Coll::AllToAll || coll == Coll::Scatter;
    const bool outPerRank =
        coll == Coll::AllGather || coll == Coll::AllToAll || coll == Coll::Gather;
    const size_t inElems = inPerRank ? n * count : count;
    const size_t outElems = outPerRank ? n * count : count;
    const size_t bigElems = std::max<size_t>(std::max(inElems, outElems), 1);
    size_t inOffset = 0;
    if (outPerRank && !inPerRank)
      inOffset = size_t(rank) * count;
    std::vector<unsigned char> input(std::max<size_t>(inElems, 1) * t.size);
    fill(input, t);
    std::vector<unsigned char> result[2];
    for (int d = 0; d < 2; ++d) {
      collComm_t c = d ? dev : comm;
      std::vector<unsigned char> big(bigElems * t.size, 0xcd), recvBuf(bigElems * t.size, 0xcd);
      std::vector<unsigned char> sendBuf = input;
      unsigned char *sendBase = sendBuf.data(), *recvBase = recvBuf.data(), *bigBase = big.data();
      void *stream = nullptr;
#if COLL_TEST_GPU
      std::unique_ptr<DeviceBuffer> dSend, dRecv, dBig;
      if (d && target == Target::Gpu) {
        dSend = std::make_unique<DeviceBuffer>(sendBuf);
        dRecv = std::make_unique<DeviceBuffer>(recvBuf);
        if (inplace)
          std::memcpy(big.data() + inOffset * t.size, input.data(), inElems * t.size);
        dBig = std::make_unique<DeviceBuffer>(big);
        sendBase = dSend->at(0);
        recvBase = dRecv->at(0);
        bigBase = dBig->at(0);
        stream = calls++ % 2 ? nullptr : gpuStream;
      }
#endif
      const void *send = sendBase;
      void *recv = recvBase;
      if (inplace) {
        if (!(d && target == Target::Gpu))
          std::memcpy(big.data() + inOffset * t.size, input.data(), inElems * t.size);
        send = bigBase + inOffset * t.size;
        recv = bigBase;
        if (inPerRank && !outPerRank)
          recv = bigBase + size_t(rank) * count * t.size;
      }
      collResult_t r = collSuccess;
      switch (coll) {
      case Coll::AllReduce:
        r = collAllReduce(send, recv, count, t.type, op, c, stream);
        break;
      case Coll::AllGather:
        r = collAllGather(send, recv, count, t.type, c, stream);
        break;
      case Coll::ReduceScatter:
        r = collReduceScatter(send, recv, count, t.type, op, c, stream);
        break;
      case Coll::AllToAll:
        r = collAlltoAll(send, recv, count, t.type, c, stream);
        break;
      case Coll::Broadcast:
        r = collBroadcast(send, recv, count, t.type, root, c, stream);
        break;
      case Coll::Reduce:
        r = collReduce(send, recv, count, t.type, op, root, c, stream);
        break;
      case Coll::Gather:
        r = collGather(send, recv, count, t.type, root, c, stream);
        break;
      case Coll::Scatter:
        r = collScatter(send, recv, count, t.type, root, c, stream);
        break;
      }
      char what[200];
      std::snprintf(what, sizeof what, "%s %s count %zu %s op %d root %d on the %s", collName(coll),
                    t.name, count, inplace ? "in-place" : "out-of-place", int(op), root,
                    d ? where : "host");
      if (r != collSuccess) {
        comm = c; // collGetLastError of the failing communicator
        check(r, what);
      }
#if COLL_TEST_GPU
      if (d && target == Target::Gpu) {
        cudaCheck(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), what);
        collResult_t async = collSuccess;
        check(collCommGetAsyncError(c, &async), "collCommGetAsyncError");
        check(async, what);
        result[d] = inplace ? dBig->download() : dRecv->download();
        if (!inplace && dSend->download() != input)
          failNow(std::string(what) + ": the device send buffer changed");
        continue;
      }
#endif
      result[d] = inplace ? big : recvBuf;
    }
    const bool hasOutput = !(coll == Coll::Reduce || coll == Coll::Gather) || rank == root;
    if (hasOutput && result[0] != result[1]) {
      size_t e = 0;
      while (std::memcmp(result[0].data() + e * t.size, result[1].data() + e * t.size, t.size) == 0)
        ++e;
      char msg[240];
      std::snprintf(msg, sizeof msg,
                    "%s %s count %zu %s root %d: element %zu differs between the host and the "
                    "%s",
                    collName(coll), t.name, count, inplace ? "in-place" : "out-of-place", root, e,
                    where);
      failNow(msg);
    }
    ++checks;
  };
  for (Coll coll : all)
    for (const TypeCase &t : types)
      for (size_t count : counts)
        for (bool inplace : {false, true}) {
          if ((t.type != collFloat32 && count > (1u << 17)) || (inplace && count > (1u << 17)))
            continue;
          const bool reduces =
              coll == Coll::AllReduce || coll == Coll::ReduceScatter || coll == Coll::Reduce;
          if (!reduces && t.type != collFloat32 && t.type != collInt8)
            continue; // moving data does not depend on the type
          const int root = int((count + size_t(t.size)) % size_t(nranks));
          runBoth(coll, t, collSum, count, inplace, root);
        }
  for (Coll coll : {Coll::AllReduce, Coll::ReduceScatter, Coll::Reduce})
    for (collRedOp_t op : {collProd, collMin, collMax, collAvg})
      for (const TypeCase &t : types)
        runBoth(coll, t, op, 1001, false, nranks - 1);
  if (target == Target::Emulated) {
    check(collCommFinalize(dev), "finalize the emulated device's communicator");
    check(collCommDestroy(dev), "destroy the emulated device's communicator");
  }
#if COLL_TEST_GPU
  if (target == Target::Gpu) {
    gpuQueue(gpuStream);
    gpuErrors();
    cudaCheck(cudaStreamDestroy(gpuStream), "cudaStreamDestroy");
  }
#endif
}

/// `--fork N`: rank 0's id here, then N children run the scenario as ranks
/// 0..N-1 (no CUDA is touched before the fork). Exit status: 0 when all
/// passed, 77 when all skipped, else 1.
int forkRanks(const char *self, const std::string &scenario, int n) {
  if (n < 1)
    return 2;
  collUniqueId id;
  if (collGetUniqueId(&id) != collSuccess) {
    std::printf("FAIL collGetUniqueId: %s\n", collGetLastError(nullptr));
    return 1;
  }
  std::string hex;
  for (char c : id.internal) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", unsigned(static_cast<unsigned char>(c)));
    hex += two;
  }
  std::vector<pid_t> children;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid == 0) {
      const std::string rs = std::to_string(r), ns = std::to_string(n);
      execl(self, self, scenario.c_str(), "--id", hex.c_str(), "--rank", rs.c_str(), "--nranks",
            ns.c_str(), static_cast<char *>(nullptr));
      std::_Exit(127);
    }
    children.push_back(pid);
  }
  int passed = 0, skipped = 0;
  for (size_t r = 0; r < children.size(); ++r) {
    int status = 0;
    waitpid(children[r], &status, 0);
    const bool victim = scenario == "gpu-kill" && int(r) == n - 1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
      ++passed;
    else if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
      ++skipped;
    else if (victim && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      ++passed; // it was meant to die
  }
  // Nothing of Coll's may be left in /dev/shm once the job has ended.
  for (const char *dir : {"/dev/shm"}) {
    if (DIR *d = opendir(dir)) {
      while (struct dirent *e = readdir(d))
        if (std::strncmp(e->d_name, "coll-", 5) == 0) {
          std::printf("FAIL left in /dev/shm: %s\n", e->d_name);
          passed = -n;
        }
      closedir(d);
    }
  }
  if (skipped == n)
    return 77;
  return passed == n ? 0 : 1;
}

#if COLL_TEST_GPU
/// `gpu-all --all N`: N ranks of this process on GPU 0 (collCommInitAll),
/// driven by this thread through groups, every rank's call on a stream of
/// its own, on one shared stream and on the legacy default stream, against
/// N host ranks of this process running the same calls.
int allOnOneGpu(int n) {
  rank = 0;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("rank ?: skip: no CUDA device\n");
    return 77;
  }
  if (n < 1)
    return 2;
  nranks = n;
  std::vector<collComm_t> gpu(n), host(n);
  std::vector<int> devices(n, 0);
  check(collCommInitAll(gpu.data(), n, devices.data()), "collCommInitAll on GPU 0");
  check(collCommInitAll(host.data(), n, nullptr), "collCommInitAll on the host");
  std::vector<cudaStream_t> own(n);
  for (cudaStream_t &s : own)
    cudaCheck(cudaStreamCreate(&s), "cudaStreamCreate");
  cudaStream_t shared = nullptr;
  cudaCheck(cudaStreamCreateWithFlags(&shared, cudaStreamNonBlocking), "cudaStreamCreate");
  const size_t counts[] = {1, 1000, 262147};
  uint32_t seed = 99u;
  int call = 0;
  for (Coll coll : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::AllToAll,
                    Coll::Broadcast, Coll::Reduce})
    for (size_t elems : counts) {
      const int streams = call++ % 3; // 0: own streams, 1: one shared stream, 2: legacy
      const bool inPerRank = coll == Coll::ReduceScatter || coll == Coll::AllToAll;
      const bool outPerRank = coll == Coll::AllGather || coll == Coll::AllToAll;
      const size_t inElems = inPerRank ? size_t(n) * elems : elems;
      const size_t outElems = outPerRank ? size_t(n) * elems : elems;
      const int root = int(elems % size_t(n));
      std::vector<std::vector<unsigned char>> in(n), hostOut(n);
      std::vector<std::unique_ptr<DeviceBuffer>> dIn, dOut;
      for (int r = 0; r < n; ++r) {
        in[r].resize(inElems * 4);
        for (size_t i = 0; i < inElems; ++i) {
          seed = seed * 1664525u + 1013904223u;
          const float f = float(int32_t(seed >> 8) % 20000) / 997.0f;
          std::memcpy(in[r].data() + 4 * i, &f, 4);
        }
        hostOut[r].assign(outElems * 4, 0xcd);
        dIn.push_back(std::make_unique<DeviceBuffer>(in[r]));
        dOut.push_back(std::make_unique<DeviceBuffer>(hostOut[r]));
      }
      auto issue = [&](collComm_t c, const void *send, void *recv, void *stream) {
        switch (coll) {
        case Coll::AllReduce:
          return collAllReduce(send, recv, elems, collFloat32, collSum, c, stream);
        case Coll::AllGather:
          return collAllGather(send, recv, elems, collFloat32, c, stream);
        case Coll::ReduceScatter:
          return collReduceScatter(send, recv, elems, collFloat32, collSum, c, stream);
        case Coll::AllToAll:
          return collAlltoAll(send, recv, elems, collFloat32, c, stream);
        case Coll::Broadcast:
          return collBroadcast(send, recv, elems, collFloat32, root, c, stream);
        case Coll::Reduce:
          return collReduce(send, recv, elems, collFloat32, collSum, root, c, stream);
        default:
          return collInternalError;
        }
      };
      char what[160];
      std::snprintf(what, sizeof what, "%s of %zu fp32 on %d ranks of GPU 0 (%s)", collName(coll),
                    elems, n,
                    streams == 0   ? "a stream per rank"
                    : streams == 1 ? "one shared stream"
                                   : "the legacy default stream");
      check(collGroupStart(), "group start");
      for (int r = 0; r < n; ++r)
        check(issue(host[r], in[r].data(), hostOut[r].data(), nullptr), "host call");
      check(collGroupEnd(), "host group");
      check(collGroupStart(), "group start");
      for (int r = 0; r < n; ++r) {
        void *stream = streams == 0 ? own[r] : streams == 1 ? shared : nullptr;
        comm = gpu[r];
        check(issue(gpu[r], dIn[r]->ptr, dOut[r]->ptr, stream), what);
      }
      check(collGroupEnd(), what);
      cudaCheck(cudaDeviceSynchronize(), what);
      for (int r = 0; r < n; ++r) {
        collResult_t async = collSuccess;
        check(collCommGetAsyncError(gpu[r], &async), "collCommGetAsyncError");
        comm = gpu[r];
        check(async, what);
        const bool hasOutput = coll != Coll::Reduce || r == root;
        if (hasOutput && dOut[r]->download() != hostOut[r])
          failNow(std::string(what) + ": rank " + std::to_string(r) +
                  "'s output differs from the host's");
        ++checks;
      }
    }
  for (int r = 0; r < n; ++r) {
    comm = gpu[r];
    check(collCommDestroy(gpu[r]), "destroy");
    check(collCommDestroy(host[r]), "destroy");
    cudaStreamDestroy(own[r]);
  }
  cudaStreamDestroy(shared);
  std::printf("rank 0..%d: ok %ld checks\n", n - 1, checks);
  return 0;
}
#endif

} // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SCENARIO (--id HEX --rank R --nranks N | --env | --mpi)\n",
                 argv[0]);
    return 2;
  }
  std::string scenario = argv[1], mode = argv[2];
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (mode == "--fork" && argc >= 4)
    return forkRanks(argv[0], scenario, std::atoi(argv[3]));
#if COLL_TEST_GPU
  if (mode == "--all" && argc >= 4)
    return allOnOneGpu(std::atoi(argv[3]));
  if (scenario == "gpu-kill")
    setenv("COLL_WATCHDOG_MS", "3000", 1);
  if (scenario == "gpu-abort")
    setenv("COLL_WATCHDOG_MS", "20000", 1);
  if (scenario.rfind("gpu", 0) == 0) {
    int devices = 0;
    cudaError_t err = cudaGetDeviceCount(&devices);
    if (err != cudaSuccess || devices == 0) {
      std::printf("rank ?: skip: no CUDA device (%s)\n",
                  err != cudaSuccess ? cudaGetErrorString(err) : "none found");
      return 77;
    }
    // As NCCL programs do: the rank's device is current before init.
    cudaCheck(cudaSetDevice(0), "cudaSetDevice");
  }
  if (scenario == "gpu-trace")
    setenv("COLL_TRACE", gpuTracePath(false).c_str(), 1);
#endif
  if (mode == "--id" && argc >= 8) {
    collUniqueId id;
    std::string hex = argv[3];
    if (hex.size() != 2 * sizeof id.internal)
      return 2;
    for (size_t i = 0; i < sizeof id.internal; ++i)
      id.internal[i] = char(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
    rank = std::atoi(argv[5]);
    nranks = std::atoi(argv[7]);
    check(collCommInitRank(&comm, nranks, id, rank), "init");
  } else if (mode == "--env") {
    check(collCommInitFromEnv(&comm), "init from env");
    check(collCommUserRank(comm, &rank), "user rank");
    check(collCommCount(comm, &nranks), "count");
  }
#if COLL_TEST_MPI
  else if (mode == "--mpi") {
    MPI_Init(&argc, &argv);
    check(collCommInitFromMPI(MPI_COMM_WORLD, &comm), "init from MPI");
    check(collCommUserRank(comm, &rank), "user rank");
    check(collCommCount(comm, &nranks), "count");
  }
#endif
  else {
    std::fprintf(stderr, "%s: unknown mode %s\n", argv[0], mode.c_str());
    return 2;
  }
  const bool small = std::getenv("COLL_TEST_SMALL") != nullptr;
  if (scenario == "collectives")
    collectives(small);
  else if (scenario == "p2p")
    p2p(small);
  else if (scenario == "kill")
    fault(false);
  else if (scenario == "stop")
    fault(true);
  else if (scenario == "loop")
    loopScenario();
  else if (scenario == "mismatch")
    mismatch();
  else if (scenario == "mismatch-fits")
    mismatchFits();
  else if (scenario == "abort")
    abortScenario();
  else if (scenario == "split")
    splitScenario();
  else if (scenario == "trace")
    traceScenario();
  else if (scenario == "errors")
    errors();
  else if (scenario == "device")
    compareScenario(small, Target::Emulated);
  else if (scenario == "late-cuda")
    lateCuda();
#if COLL_TEST_GPU
  else if (scenario == "gpu")
    compareScenario(small, Target::Gpu);
  else if (scenario == "gpu-kill")
    gpuKill();
  else if (scenario == "gpu-unserved")
    gpuUnserved();
  else if (scenario == "gpu-abort")
    gpuAbort();
  else if (scenario == "gpu-trace")
    gpuTrace();
#endif
  else
    failNow("unknown scenario " + scenario);
  check(collCommFinalize(comm), "finalize");
  check(collCommDestroy(comm), "destroy");
#if COLL_TEST_GPU
  if (scenario == "gpu-trace")
    checkGpuTraceFile();
#endif
  std::printf("rank %d: ok %ld checks\n", rank, checks);
#if COLL_TEST_MPI
  if (mode == "--mpi")
    MPI_Finalize();
#endif
  return 0;
}
