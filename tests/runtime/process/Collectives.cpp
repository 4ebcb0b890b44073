//===- Collectives.cpp - Every collective, checked in closed form ---------===//
//
// collectives: every collective, type, size, root and both modes (in place
// and out of place), each result on this rank checked against the
// collective's definition; split: communicators made of this one; trace: a
// few calls for COLL_TRACE.
//
//===----------------------------------------------------------------------===//

#include "RankCheck.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace rankcheck {

const char *collName(Coll c) {
  static const char *names[] = {"allreduce", "allgather", "reducescatter", "alltoall",
                                "broadcast", "reduce",    "gather",        "scatter"};
  return names[static_cast<int>(c)];
}

namespace {

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

enum class Type { F32, BF16, I32 };
enum class Red { Sum, Prod, Min, Max, Avg };

const char *typeName(Type t) {
  return t == Type::F32 ? "fp32" : t == Type::BF16 ? "bf16" : "int32";
}
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
  if (red == Red::Prod) // 1s and 2s from the first 16 ranks: at most 2^8
    return r < 16 ? double((r + i) % 2 + 1) : 1.0;
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

/// Runs one call and checks this rank's result; `root` for rooted ones.
void runOne(Coll coll, size_t count, Type t, Red red, bool inplace, int root) {
  const size_t es = typeSize(t);
  const size_t n = size_t(nranks);
  const bool reduces =
      coll == Coll::AllReduce || coll == Coll::ReduceScatter || coll == Coll::Reduce;
  const bool inPerRank =
      coll == Coll::ReduceScatter || coll == Coll::AllToAll || coll == Coll::Scatter;
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

} // namespace

void collectives(bool small) {
  std::vector<size_t> counts = {0, 1, 7, 1000};
  // A rank's buffers of the gathering collectives hold nranks x count: jobs
  // of more than 16 ranks (64 processes on CI's 2 cores) keep to the
  // counts of the pipeline's first slice.
  if (nranks <= 16)
    counts.push_back(65536 + 3);
  if (!small && nranks <= 16)
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

void everyCollectiveRounds(int rounds) {
  const Coll all[] = {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::AllToAll,
                      Coll::Broadcast, Coll::Reduce,    Coll::Gather,        Coll::Scatter};
  for (int round = 0; round < rounds; ++round)
    for (Coll coll : all)
      runOne(coll, 1000 + size_t(round % 7), Type::F32, Red::Sum, round % 2 == 1, round % nranks);
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
    failNow("allreduce on the half: " + std::to_string(v[0]) + ", expected " +
            std::to_string(want));
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

// The built-in selection runs the direct two-shot for buffers in windows
// and a FIFO program for others (docs/RUNTIME.md, "Selection"); ranks that
// disagree run different programs. Every rank must end the call with an
// error from the watchdog (COLL_WATCHDOG_MS), none may wait forever.
void windowsMismatchScenario() {
  const size_t count = 262144;
  const size_t bytes = count * sizeof(float);
  void *mem = nullptr;
  collWindow_t win = nullptr;
  check(collMemAlloc(&mem, bytes), "collMemAlloc");
  check(collCommWindowRegister(comm, mem, bytes, &win, COLL_WIN_COLL_SYMMETRIC),
        "registering the window");
  std::vector<float> plain(count, 1.0f);
  auto *buf = rank == 0 ? static_cast<float *>(mem) : plain.data();
  std::fill(buf, buf + count, 1.0f);
  collResult_t r = collAllReduce(buf, buf, count, collFloat32, collSum, comm, nullptr);
  if (r == collSuccess)
    failNow("an allreduce whose buffers are in a window on rank 0 only succeeded");
  std::string why = collGetLastError(comm);
  if (why.find("watchdog") == std::string::npos)
    failNow("the mismatched allreduce failed without the watchdog: " + why);
  ++checks;
  std::printf("rank %d: the mismatched allreduce failed: %s\n", rank, why.c_str());
  // The communicator still deregisters and frees (collective).
  check(collCommWindowDeregister(comm, win), "deregistering after the failed call");
  check(collMemFree(mem), "collMemFree after the failed call");
}

// Device calls (on the emulated device: COLL_EMULATED_DEVICE=1, set by the
// driver) on a communicator that holds a window: allreduces from 4 MiB run
// the built-in rule for device calls with windows (the direct two-shot),
// with buffers in the window and outside it (copied through the rank's
// area), in place and out of place; smaller ones, and every one once the
// window is gone, run the other built-in rules. The driver reads which from
// COLL_DEBUG=TRACE.
void windowsDeviceRulesScenario() {
  const size_t count = size_t(1) << 20; // 4 MiB of fp32
  const size_t bytes = 2 * count * sizeof(float);
  void *mem = nullptr;
  collWindow_t win = nullptr;
  check(collMemAlloc(&mem, bytes), "collMemAlloc");
  check(collCommWindowRegister(comm, mem, bytes, &win, COLL_WIN_DEFAULT), "registering");
  std::vector<float> plainIn(count), plainOut(count);
  auto *inWindow = static_cast<float *>(mem);
  struct Call {
    float *send, *recv;
    size_t count;
  };
  const Call calls[] = {{inWindow, inWindow + count, count},   // in the window
                        {plainIn.data(), plainOut.data(), count}, // outside it
                        {inWindow, inWindow, count},           // in place
                        {inWindow, inWindow + count, count / 4}}; // 1 MiB
  auto value = [](int r, size_t i) { return static_cast<float>(r + 1 + static_cast<int>(i % 7)); };
  auto run = [&](const Call &c, const char *what) {
    for (size_t i = 0; i < c.count; ++i)
      c.send[i] = value(rank, i);
    check(collAllReduce(c.send, c.recv, c.count, collFloat32, collSum, comm, nullptr), what);
    for (size_t i = 0; i < c.count; ++i) {
      float want = 0;
      for (int r = 0; r < nranks; ++r)
        want += value(r, i);
      if (c.recv[i] != want)
        failNow(std::string(what) + ": element " + std::to_string(i) + " is " +
                std::to_string(c.recv[i]) + ", expected " + std::to_string(want));
    }
    ++checks;
  };
  run(calls[0], "4 MiB allreduce in the window");
  run(calls[1], "4 MiB allreduce outside the window");
  run(calls[2], "4 MiB allreduce in place in the window");
  run(calls[3], "1 MiB allreduce in the window");
  check(collCommWindowDeregister(comm, win), "deregistering");
  run(calls[1], "4 MiB allreduce once the window is gone");
  check(collMemFree(mem), "collMemFree");
}

// Small allreduces of 1, 8 and 64 KiB of fp32 (each checked), for the
// driver to read from COLL_DEBUG=TRACE which program served each: on the
// emulated device (COLL_EMULATED_DEVICE=1) the built-in rules for device
// calls come first, on host buffers they do not.
void smallRulesScenario() {
  for (size_t bytes : {size_t(1) << 10, size_t(8) << 10, size_t(64) << 10}) {
    const size_t count = bytes / sizeof(float);
    std::vector<float> in(count), out(count);
    for (size_t i = 0; i < count; ++i)
      in[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 5));
    check(collAllReduce(in.data(), out.data(), count, collFloat32, collSum, comm, nullptr),
          "small allreduce");
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < nranks; ++r)
        want += static_cast<float>(r + 1 + static_cast<int>(i % 5));
      if (out[i] != want)
        failNow("allreduce of " + std::to_string(bytes) + " B: element " + std::to_string(i) +
                " is " + std::to_string(out[i]) + ", expected " + std::to_string(want));
    }
    ++checks;
  }
}

} // namespace rankcheck

namespace rankcheck {

namespace {

/// `r` must be `want`, with a message holding `words`.
void expectRefused(collResult_t r, collResult_t want, collComm_t on, const char *words,
                   const char *what) {
  const std::string message = collGetLastError(on);
  if (r != want || message.find(words) == std::string::npos)
    failNow(std::string(what) + ": expected " + collGetErrorString(want) + " naming '" + words +
            "', got " + collGetErrorString(r) + ": " + message);
  ++checks;
}

} // namespace

// The built-in rules for buffers in windows (docs/RUNTIME.md, "Selection"):
// each collective they name, at a size within its rule, on collMemAlloc
// buffers registered with the communicator; every result checked.
void windowsBuiltinScenario() {
  const size_t gatherCount = 100000;          // allgather, reduce-scatter: 1.2 MB at 3 ranks
  const size_t reduceCount = 65536;           // allreduce: 256 KiB
  const size_t alltoallCount = 1000;          // alltoall: 4000 B per peer
  const size_t bcastCount = 10000;            // broadcast: 40000 B
  const size_t bytes = gatherCount * sizeof(float) * static_cast<size_t>(nranks);
  void *send = nullptr, *recv = nullptr;
  collWindow_t sendWin = nullptr, recvWin = nullptr;
  check(collMemAlloc(&send, bytes), "collMemAlloc");
  check(collMemAlloc(&recv, bytes), "collMemAlloc");
  check(collCommWindowRegister(comm, send, bytes, &sendWin, COLL_WIN_COLL_SYMMETRIC),
        "registering sendbuff");
  check(collCommWindowRegister(comm, recv, bytes, &recvWin, COLL_WIN_COLL_SYMMETRIC),
        "registering recvbuff");
  auto *s = static_cast<float *>(send);
  auto *r = static_cast<float *>(recv);
  auto expectAt = [&](float got, float want, const char *what, size_t i) {
    if (got != want)
      failNow(std::string(what) + " in windows: element " + std::to_string(i) + " is " +
              std::to_string(got) + ", expected " + std::to_string(want));
  };
  auto value = [](int rankOf, size_t i) {
    return static_cast<float>((rankOf + 1) * static_cast<int>(i % 29 + 1));
  };

  for (size_t i = 0; i < reduceCount; ++i)
    s[i] = value(rank, i);
  check(collAllReduce(send, recv, reduceCount, collFloat32, collSum, comm, nullptr),
        "allreduce in windows");
  const float total = static_cast<float>(nranks * (nranks + 1) / 2);
  for (size_t i = 0; i < reduceCount; ++i)
    expectAt(r[i], total * static_cast<float>(i % 29 + 1), "allreduce", i);

  for (size_t i = 0; i < gatherCount; ++i)
    s[i] = value(rank, i);
  check(collAllGather(send, recv, gatherCount, collFloat32, comm, nullptr),
        "allgather in windows");
  for (int p = 0; p < nranks; ++p)
    for (size_t i = 0; i < gatherCount; ++i)
      expectAt(r[p * gatherCount + i], value(p, i), "allgather", p * gatherCount + i);

  // Block `rank` of every rank's sendbuff, summed (1.2 MB of sendbuff).
  for (size_t i = 0; i < gatherCount * static_cast<size_t>(nranks); ++i)
    s[i] = value(rank, i);
  check(collReduceScatter(send, recv, gatherCount, collFloat32, collSum, comm, nullptr),
        "reduce-scatter in windows");
  for (size_t i = 0; i < gatherCount; ++i)
    expectAt(r[i], total * static_cast<float>((rank * gatherCount + i) % 29 + 1),
             "reduce-scatter", i);

  // Block p of sendbuff goes to rank p; block p of recvbuff comes from it.
  for (int p = 0; p < nranks; ++p)
    for (size_t i = 0; i < alltoallCount; ++i)
      s[p * alltoallCount + i] = static_cast<float>(rank * 1000 + p) + static_cast<float>(i % 7);
  check(collAlltoAll(send, recv, alltoallCount, collFloat32, comm, nullptr),
        "alltoall in windows");
  for (int p = 0; p < nranks; ++p)
    for (size_t i = 0; i < alltoallCount; ++i)
      expectAt(r[p * alltoallCount + i],
               static_cast<float>(p * 1000 + rank) + static_cast<float>(i % 7), "alltoall",
               p * alltoallCount + i);

  const int root = nranks - 1;
  for (size_t i = 0; i < bcastCount; ++i)
    s[i] = rank == root ? value(root, i) : -1.0f;
  check(collBroadcast(send, recv, bcastCount, collFloat32, root, comm, nullptr),
        "broadcast in windows");
  for (size_t i = 0; i < bcastCount; ++i)
    expectAt(r[i], value(root, i), "broadcast", i);
  checks += 5;

  check(collCommWindowDeregister(comm, sendWin), "deregistering sendbuff");
  check(collCommWindowDeregister(comm, recvWin), "deregistering recvbuff");
  check(collMemFree(send), "collMemFree");
  check(collMemFree(recv), "collMemFree");
}

// Windows (docs/RUNTIME.md, "Windows"): buffers of collMemAlloc registered
// with the communicator, on which programs with direct steps run without
// copies; and what is refused.
void windowsScenario(bool small) {
  const size_t count = small ? 1000 : 200000;
  const size_t bytes = count * sizeof(float) * static_cast<size_t>(nranks);
  collWindow_t w = nullptr;
  std::vector<float> plain(count);
  expectRefused(collCommWindowRegister(comm, plain.data(), count * sizeof(float), &w,
                                       COLL_WIN_DEFAULT),
                collInvalidArgument, comm, "not within one block of collMemAlloc",
                "registering memory of malloc");
  expectRefused(collMemFree(plain.data()), collInvalidArgument, nullptr,
                "is not a block of collMemAlloc", "collMemFree of memory of malloc");
  void *send = nullptr, *recv = nullptr;
  check(collMemAlloc(&send, bytes), "collMemAlloc");
  check(collMemAlloc(&recv, bytes), "collMemAlloc");
  collWindow_t sendWin = nullptr, recvWin = nullptr, again = nullptr;
  check(collCommWindowRegister(comm, send, bytes, &sendWin, COLL_WIN_COLL_SYMMETRIC),
        "registering sendbuff");
  check(collCommWindowRegister(comm, recv, bytes, &recvWin, COLL_WIN_DEFAULT),
        "registering recvbuff");
  expectRefused(collCommWindowRegister(comm, static_cast<char *>(recv) + 64, 64, &again, 0),
                collInvalidUsage, comm, "overlaps a window already registered",
                "registering a window twice");
  expectRefused(collMemFree(recv), collInvalidUsage, nullptr, "still registered",
                "collMemFree of a registered window");

  auto *s = static_cast<float *>(send);
  auto *r = static_cast<float *>(recv);
  auto expectEqual = [&](float got, float want, const char *what, size_t i) {
    if (got != want)
      failNow(std::string(what) + ": element " + std::to_string(i) + " is " +
              std::to_string(got) + ", expected " + std::to_string(want));
  };
  const float total = static_cast<float>(nranks * (nranks + 1) / 2);
  for (size_t n : {size_t(1), size_t(7), count}) {
    for (size_t i = 0; i < n; ++i)
      s[i] = static_cast<float>((rank + 1) * static_cast<int>(i % 13 + 1));
    check(collAllReduce(send, recv, n, collFloat32, collSum, comm, nullptr),
          "allreduce in windows");
    for (size_t i = 0; i < n; ++i)
      expectEqual(r[i], total * static_cast<float>(i % 13 + 1), "allreduce in windows", i);
    check(collAllReduce(recv, recv, n, collFloat32, collSum, comm, nullptr),
          "in-place allreduce in a window");
    for (size_t i = 0; i < n; ++i)
      expectEqual(r[i], static_cast<float>(nranks) * total * static_cast<float>(i % 13 + 1),
                  "in-place allreduce in a window", i);
    check(collAllGather(send, recv, n, collFloat32, comm, nullptr), "allgather in windows");
    for (int p = 0; p < nranks; ++p)
      for (size_t i = 0; i < n; ++i)
        expectEqual(r[p * n + i], static_cast<float>((p + 1) * static_cast<int>(i % 13 + 1)),
                    "allgather in windows", p * n + i);
    // Half in a window, half not: through the shared area.
    check(collAllReduce(send, plain.data(), n, collFloat32, collSum, comm, nullptr),
          "allreduce into memory of malloc");
    for (size_t i = 0; i < n; ++i)
      expectEqual(plain[i], total * static_cast<float>(i % 13 + 1),
                  "allreduce into memory of malloc", i);
    checks += 4;
  }
  check(collCommWindowDeregister(comm, sendWin), "deregistering sendbuff");
  check(collCommWindowDeregister(comm, recvWin), "deregistering recvbuff");
  check(collMemFree(send), "collMemFree");
  check(collMemFree(recv), "collMemFree");

  // Every rank must register the same size.
  void *odd = nullptr;
  check(collMemAlloc(&odd, 8192), "collMemAlloc");
  expectRefused(collCommWindowRegister(comm, odd, rank == 0 ? 8192 : 4096, &w, 0),
                collInvalidArgument, comm, "the same size on every rank",
                "windows of different sizes");
  check(collMemFree(odd), "collMemFree");
}

} // namespace rankcheck

namespace rankcheck {

// A communicator without the built-in set (a split with embeddedAlgorithms
// 0) has no alltoall program: the built-in rules end with `p2p`, so an
// alltoall runs as grouped sends and receives (issue 29: at thousands of
// ranks no alltoall program compiles), in place and out of place, and
// collCommQueryChoice says so. An allreduce has nothing to run it.
void alltoallWithoutProgramsScenario() {
  collConfig_t config = COLL_CONFIG_INITIALIZER;
  config.embeddedAlgorithms = 0;
  collComm_t bare = nullptr;
  check(collCommSplit(comm, 0, rank, &bare, &config), "split without the built-in set");
  char text[1024] = "";
  check(collCommQueryChoice(bare, "alltoall", 4096, 0, text, sizeof text), "query alltoall");
  if (std::strncmp(text, "p2p -- built-in rule \"alltoall", 30) != 0)
    failNow(std::string("alltoall without programs: chosen '") + text + "'");
  if (collCommQueryChoice(bare, "allreduce", 4096, 0, text, sizeof text) == collSuccess)
    failNow(std::string("allreduce without programs: chosen '") + text + "'");
  checks += 2;
  for (size_t count : {size_t(1), size_t(1000), size_t(65536 + 3)})
    for (bool inplace : {false, true}) {
      const size_t n = count * static_cast<size_t>(nranks);
      std::vector<float> send(n), recv(n, -1.0f);
      for (int p = 0; p < nranks; ++p)
        for (size_t i = 0; i < count; ++i)
          send[p * count + i] = static_cast<float>(rank * 1000 + p) + static_cast<float>(i % 7);
      float *out = inplace ? send.data() : recv.data();
      check(collAlltoAll(send.data(), out, count, collFloat32, bare, nullptr),
            "alltoall without programs");
      for (int p = 0; p < nranks; ++p)
        for (size_t i = 0; i < count; ++i) {
          const float want = static_cast<float>(p * 1000 + rank) + static_cast<float>(i % 7);
          if (out[p * count + i] != want)
            failNow("alltoall without programs (" + std::string(inplace ? "in" : "out of") +
                    " place, count " + std::to_string(count) + "): element " +
                    std::to_string(p * count + i) + " is " + std::to_string(out[p * count + i]) +
                    ", expected " + std::to_string(want));
        }
      ++checks;
    }
  check(collCommFinalize(bare), "finalize");
  check(collCommDestroy(bare), "destroy");
}

} // namespace rankcheck
