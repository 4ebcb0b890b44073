//===- PointToPoint.cpp - Sends and receives ------------------------------===//
//
// p2p: a ring exchange and a send to itself, each in a group, at every
// size, and several messages to one peer arriving in order.
//
//===----------------------------------------------------------------------===//

#include "RankCheck.h"

#include <algorithm>
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
