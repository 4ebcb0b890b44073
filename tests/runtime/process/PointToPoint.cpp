//===- PointToPoint.cpp - Sends and receives ------------------------------===//
//
// p2p: a ring exchange and a send to itself, each in a group, at every
// size, and several messages to one peer arriving in order.
//
//===----------------------------------------------------------------------===//

#include "RankCheck.h"
#include "TimeScale.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <cstdint>
#include <string>
#include <vector>

namespace rankcheck {

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

} // namespace rankcheck

namespace rankcheck {

namespace {

/// The value of element i of the message `tag` from `from` to `to`.
int32_t valueOf(int from, int to, int tag, size_t i) {
  return int32_t(from * 7919 + to * 104729 + tag * 31 + int32_t(i % 100003));
}

std::vector<int32_t> messageOf(int from, int to, int tag, size_t count) {
  std::vector<int32_t> m(std::max<size_t>(count, 1));
  for (size_t i = 0; i < count; ++i)
    m[i] = valueOf(from, to, tag, i);
  return m;
}

void expectMessage(const std::vector<int32_t> &got, int from, int to, int tag, size_t count,
                   const std::string &what) {
  for (size_t i = 0; i < count; ++i)
    if (got[i] != valueOf(from, to, tag, i))
      failNow(what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) +
              ", not the message of tag " + std::to_string(tag) + " from rank " +
              std::to_string(from));
  ++checks;
}

void expectStatus(const collStatus_t &s, int source, int tag, size_t count,
                  const std::string &what) {
  if (s.source != source || s.tag != tag || s.count != count || s.error != collSuccess)
    failNow(what + ": status source " + std::to_string(s.source) + " tag " +
            std::to_string(s.tag) + " count " + std::to_string(s.count) + ", expected " +
            std::to_string(source) + ", " + std::to_string(tag) + ", " + std::to_string(count));
  ++checks;
}

/// check() with the process's newest error: a request's failure is not
/// its communicator's (the request may outlive it).
void checkTagged(collResult_t r, const char *what) {
  if (r != collSuccess)
    failNow(std::string(what) + ": " + collGetErrorString(r) + ": " + collGetLastError(nullptr));
}

} // namespace

void tagged(bool small) {
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  // A ring, both posting orders, at 7 elements and at 4 MiB (rendezvous),
  // several rounds with tags.
  const size_t big = small ? (1u << 18) : (1u << 20); // int32s: 1 or 4 MiB
  for (size_t count : {size_t(0), size_t(7), big}) {
    for (bool receivesFirst : {true, false}) {
      const std::string what = "ring of " + std::to_string(count) + " elements, " +
                               (receivesFirst ? "receives" : "sends") + " posted first";
      std::vector<int32_t> out = messageOf(rank, next, 5, count);
      std::vector<int32_t> in(std::max<size_t>(count, 1), -1);
      collRequest_t reqs[2];
      collStatus_t st[2];
      if (receivesFirst) {
        checkTagged(collIrecv(in.data(), count, collInt32, prev, 5, comm, &reqs[0]), "irecv");
        checkTagged(collIsend(out.data(), count, collInt32, next, 5, comm, &reqs[1]), "isend");
      } else {
        checkTagged(collIsend(out.data(), count, collInt32, next, 5, comm, &reqs[1]), "isend");
        checkTagged(collIrecv(in.data(), count, collInt32, prev, 5, comm, &reqs[0]), "irecv");
      }
      checkTagged(collWaitAll(2, reqs, st), what.c_str());
      if (reqs[0] || reqs[1])
        failNow(what + ": collWaitAll left a request");
      expectMessage(in, prev, rank, 5, count, what);
      expectStatus(st[0], prev, 5, count, what);
    }
  }
  // Tags received out of order: every rank sends tags 1, 2, 3 to the next
  // (one small, one large, one small), which receives 3, 1, 2.
  {
    const size_t counts[4] = {0, 5, big, 9};
    std::vector<std::vector<int32_t>> outs, ins;
    std::vector<collRequest_t> reqs;
    for (int tag = 1; tag <= 3; ++tag) {
      outs.push_back(messageOf(rank, next, tag, counts[tag]));
      reqs.emplace_back();
      checkTagged(collIsend(outs.back().data(), counts[tag], collInt32, next, tag, comm, &reqs.back()),
            "isend by tag");
    }
    ins.resize(4);
    for (int tag : {3, 1, 2}) {
      ins[tag].assign(counts[tag], -1);
      collRequest_t r;
      collStatus_t s;
      checkTagged(collIrecv(ins[tag].data(), counts[tag], collInt32, prev, tag, comm, &r), "irecv tag");
      checkTagged(collWait(&r, &s), "receive by tag");
      expectMessage(ins[tag], prev, rank, tag, counts[tag],
                    "tag " + std::to_string(tag) + " received out of order");
      expectStatus(s, prev, tag, counts[tag], "tag out of order");
    }
    checkTagged(collWaitAll(static_cast<int>(reqs.size()), reqs.data(), nullptr), "sends by tag");
  }
  // Any source, from every peer: rank 0 receives one message from each
  // other rank, in whatever order they come (a tag per round: a later
  // round's message may overtake another sender's earlier one); then
  // COLL_ANY_TAG.
  int round = 0;
  for (size_t count : {size_t(3), big}) {
    const int anyTag = 40 + round++;
    if (rank == 0) {
      std::vector<std::vector<int32_t>> got(nranks);
      std::vector<collRequest_t> reqs(nranks - 1);
      for (int i = 0; i + 1 < nranks; ++i) {
        got[i].assign(std::max<size_t>(count, 1), -1);
        checkTagged(collIrecv(got[i].data(), count, collInt32, COLL_ANY_SOURCE, anyTag, comm, &reqs[i]),
              "irecv any source");
      }
      std::vector<collStatus_t> st(nranks - 1);
      checkTagged(collWaitAll(nranks - 1, reqs.data(), st.data()), "any source");
      std::vector<bool> seen(nranks, false);
      for (int i = 0; i + 1 < nranks; ++i) {
        const int from = st[i].source;
        if (from < 1 || from >= nranks || seen[from])
          failNow("any source: status names rank " + std::to_string(from));
        seen[from] = true;
        expectMessage(got[i], from, 0, anyTag, count, "any source from rank " + std::to_string(from));
        expectStatus(st[i], from, anyTag, count, "any source");
      }
    } else {
      std::vector<int32_t> out = messageOf(rank, 0, anyTag, count);
      collRequest_t r;
      checkTagged(collIsend(out.data(), count, collInt32, 0, anyTag, comm, &r), "isend to rank 0");
      checkTagged(collWait(&r, nullptr), "send to rank 0");
    }
  }
  {
    // COLL_ANY_TAG: the first message from prev, whatever its tag.
    std::vector<int32_t> out = messageOf(rank, next, 77, 11), in(11, -1);
    collRequest_t s, r;
    collStatus_t st;
    checkTagged(collIsend(out.data(), 11, collInt32, next, 77, comm, &s), "isend tag 77");
    checkTagged(collIrecv(in.data(), 11, collInt32, prev, COLL_ANY_TAG, comm, &r), "irecv any tag");
    int done = 0;
    while (!done)
      checkTagged(collTest(&r, &done, &st), "test any tag");
    if (r)
      failNow("collTest left a complete request");
    expectMessage(in, prev, rank, 77, 11, "any tag");
    expectStatus(st, prev, 77, 11, "any tag");
    checkTagged(collWait(&s, nullptr), "send tag 77");
    checkTagged(collWait(&s, &st), "wait on a NULL request");
    expectStatus(st, COLL_ANY_SOURCE, COLL_ANY_TAG, 0, "a NULL request");
  }
  // To itself.
  {
    std::vector<int32_t> out = messageOf(rank, rank, 8, 100), in(100, -1);
    collRequest_t s, r;
    checkTagged(collIsend(out.data(), 100, collInt32, rank, 8, comm, &s), "isend to itself");
    checkTagged(collIrecv(in.data(), 100, collInt32, rank, 8, comm, &r), "irecv from itself");
    checkTagged(collWait(&r, nullptr), "receive from itself");
    checkTagged(collWait(&s, nullptr), "send to itself");
    expectMessage(in, rank, rank, 8, 100, "to itself");
  }
  // A message larger than its receive: an error naming both sizes, and
  // nothing written; then the pair goes on.
  for (size_t count : {size_t(20), big}) {
    std::vector<int32_t> out = messageOf(rank, next, 9, count), in(count / 2, -1);
    collRequest_t s, r;
    collStatus_t st;
    checkTagged(collIsend(out.data(), count, collInt32, next, 9, comm, &s), "isend too large");
    checkTagged(collIrecv(in.data(), count / 2, collInt32, prev, 9, comm, &r), "irecv too small");
    collResult_t got = collWait(&r, &st);
    if (got != collInvalidUsage || st.error != collInvalidUsage ||
        std::string(collGetLastError(nullptr)).find("has room for") == std::string::npos)
      failNow(std::string("a truncated receive: ") + collGetErrorString(got) + ": " +
              collGetLastError(nullptr));
    for (int32_t v : in)
      if (v != -1)
        failNow("a truncated receive wrote its buffer");
    ++checks;
    checkTagged(collWait(&s, nullptr), "the too-large send");
  }
  // Bad arguments are errors, not crashes.
  {
    collRequest_t r = nullptr;
    int32_t x = 0;
    if (collIsend(&x, 1, collInt32, nranks, 0, comm, &r) != collInvalidArgument ||
        collIsend(&x, 1, collInt32, next, COLL_ANY_TAG, comm, &r) != collInvalidArgument ||
        collIsend(&x, 1, collInt32, COLL_ANY_SOURCE, 0, comm, &r) != collInvalidArgument ||
        collIrecv(&x, 1, collInt32, prev, -5, comm, &r) != collInvalidArgument ||
        collIrecv(nullptr, 1, collInt32, prev, 0, comm, &r) != collInvalidArgument ||
        collIrecv(&x, 1, collInt32, prev, 0, nullptr, &r) != collInvalidArgument ||
        collIrecv(&x, 1, collInt32, prev, 0, comm, nullptr) != collInvalidArgument ||
        collWait(nullptr, nullptr) != collInvalidArgument || r != nullptr)
      failNow("a bad tagged call was not refused");
    ++checks;
  }
  // Everyone done before the communicator goes.
  int64_t one = 1;
  checkTagged(collAllReduce(&one, &one, 1, collInt64, collSum, comm, nullptr), "barrier");
}

void taggedLost() {
  // The last rank dies 300 ms after the others post receives from it (a
  // small and a large one) and a large send to it, which it never
  // receives: each request fails with the loss, naming the rank, within
  // 2 s; a later post fails at once.
  const int victim = nranks - 1;
  int64_t one = 1;
  check(collAllReduce(&one, &one, 1, collInt64, collSum, comm, nullptr), "barrier");
  const auto delay = std::chrono::milliseconds(coll::testing::scaledMs(300));
  if (rank == victim) {
    std::this_thread::sleep_for(delay);
    std::printf("rank %d: dying now\n", rank);
    std::fflush(stdout);
    raise(SIGKILL);
  }
  const auto start = Clock::now();
  std::vector<int32_t> small(10, -1), big(1 << 20, -1), out(1 << 20, 1);
  collRequest_t reqs[3];
  checkTagged(collIrecv(small.data(), small.size(), collInt32, victim, 1, comm, &reqs[0]),
              "irecv from the rank that dies");
  checkTagged(collIrecv(big.data(), big.size(), collInt32, COLL_ANY_SOURCE, 2, comm, &reqs[1]),
              "irecv from any source");
  checkTagged(collIsend(out.data(), out.size(), collInt32, victim, 3, comm, &reqs[2]),
              "isend to the rank that dies");
  collStatus_t st[3];
  const collResult_t got = collWaitAll(3, reqs, st);
  const long ms = static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start - delay)
          .count());
  const std::string message = collGetLastError(nullptr);
  if (got != collRemoteError)
    failNow(std::string("the requests ended with ") + collGetErrorString(got) + ": " + message);
  for (const collStatus_t &s : st)
    if (s.error != collRemoteError)
      failNow("a request's status is " + std::string(collGetErrorString(s.error)));
  if (message.find("rank " + std::to_string(victim)) == std::string::npos)
    failNow("the error does not name rank " + std::to_string(victim) + ": " + message);
  ++checks;
  collRequest_t r;
  const collResult_t later = collIsend(out.data(), 1, collInt32, 0, 4, comm, &r);
  if (later != collRemoteError)
    failNow(std::string("a send after the loss gave ") + collGetErrorString(later));
  ++checks;
  std::printf("rank %d: error %d after %ld ms: %s\n", rank, static_cast<int>(got), ms,
              message.c_str());
  // A communicator with a dead rank cannot finalize: it is aborted, and
  // the rank ends here (as the kill scenario's do).
  check(collCommAbort(comm), "abort");
  comm = nullptr;
  std::fflush(stdout);
  std::_Exit(0);
}

} // namespace rankcheck
