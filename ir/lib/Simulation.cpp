//===- Simulation.cpp - Executing a schedule with bounded FIFOs -----------===//
//
// Event-driven: the effects of the steps started at time t (completions,
// arrivals, freed slots) become visible at t+1, and only tbs that one of
// them concerns are looked at again, so a run costs O(steps log steps)
// rather than O(time * tbs). Tbs are visited in index order, so the result
// is deterministic.
//
//===----------------------------------------------------------------------===//

#include "coll/ir/Simulation.h"

#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <cassert>
#include <functional>

namespace coll::ir {
namespace {

class Simulator {
public:
  Simulator(const SimGraph &graph, int32_t fifoSlots, const TbOrders *fixed)
      : g(graph), cap(fifoSlots), fixed(fixed), tbs(graph.numTbs),
        pending(graph.nodes.size()), bigWaiter(graph.nodes.size(), NoNode),
        feeder(graph.numTbs, -1), dependentBegin(graph.nodes.size() + 1, 0) {
    size_t n = g.nodes.size();
    for (uint32_t x = 0; x < n; ++x) {
      pending[x] = g.depBegin[x + 1] - g.depBegin[x];
      for (uint32_t e = g.depBegin[x]; e < g.depBegin[x + 1]; ++e)
        ++dependentBegin[g.deps[e] + 1];
    }
    for (size_t x = 0; x < n; ++x)
      dependentBegin[x + 1] += dependentBegin[x];
    dependents.resize(g.deps.size());
    std::vector<uint32_t> fill(dependentBegin.begin(),
                               dependentBegin.end() - 1);
    for (uint32_t x = 0; x < n; ++x)
      for (uint32_t e = g.depBegin[x]; e < g.depBegin[x + 1]; ++e)
        dependents[fill[g.deps[e]]++] = x;
    if (!fixed) {
      // Each tb's part of the orders is sized up front and filled as the
      // tb starts its steps.
      orders.begin.assign(g.numTbs + 1, 0);
      for (const SimGraph::Node &node : g.nodes)
        ++orders.begin[node.tb + 1];
      for (int32_t tb = 0; tb < g.numTbs; ++tb)
        orders.begin[tb + 1] += orders.begin[tb];
      orders.nodes.assign(n, NoNode);
      orderFill.assign(orders.begin.begin(), orders.begin.end() - 1);
    }
    for (const SimGraph::Node &node : g.nodes)
      if (node.fedBy != NoNode)
        feeder[node.tb] = g.nodes[node.fedBy].tb;
  }

  /// True when every step ran.
  bool run() {
    for (uint32_t x = 0; x < g.nodes.size(); ++x)
      if (pending[x] == 0)
        depsDone(x, 0);
    for (int32_t tb = 0; tb < g.numTbs; ++tb)
      wakeAt(tb, 0);
    // The tbs stepping now; steps wake tbs for the next time into `wake`,
    // and the two buffers trade places.
    std::vector<int32_t> now;
    for (int64_t t = 0; executed < g.nodes.size(); ++t) {
      if (wake.empty())
        return false;
      now.clear();
      if (wake.size() * 16 >= static_cast<size_t>(g.numTbs)) {
        // Many tbs (every tb at t = 0, and most at each step of a program
        // of one-step tbs such as an all-pairs alltoall): one pass over
        // the tbs, in index order, costs less than sorting them.
        for (int32_t tb = 0; tb < g.numTbs; ++tb)
          if (tbs[tb].wokenFor == t)
            now.push_back(tb);
        wake.clear();
      } else {
        std::sort(wake.begin(), wake.end());
        now.swap(wake);
      }
      for (int32_t tb : now)
        step(tb, t);
      apply(t + 1);
    }
    return true;
  }

  TbOrders orders;

  /// After a stuck run: where each unfinished tb waits.
  std::vector<uint32_t> blocked() const {
    std::vector<uint32_t> at;
    for (int32_t tb = 0; tb < g.numTbs; ++tb) {
      const Tb &state = tbs[tb];
      if (state.busy != NoNode)
        at.push_back(state.busy);
      else if (fixed && state.cursor < (*fixed)[tb].size())
        at.push_back((*fixed)[tb][state.cursor]);
    }
    return at;
  }

private:
  /// (priority, node): the order ready candidates compete in.
  using Entry = std::pair<uint64_t, uint32_t>;
  /// A min-heap of entries with room for one inline: most tbs of a large
  /// program hold one or two steps, and a heap allocation per tb was a
  /// tenth of the instructions of a 128-rank all-pairs alltoall's
  /// compilation (32,512 tbs of one step each).
  struct Heap {
    llvm::SmallVector<Entry, 1> items;
    bool empty() const { return items.empty(); }
    const Entry &top() const { return items.front(); }
    void push(const Entry &e) {
      items.push_back(e);
      std::push_heap(items.begin(), items.end(), std::greater<Entry>());
    }
    void pop() {
      std::pop_heap(items.begin(), items.end(), std::greater<Entry>());
      items.pop_back();
    }
  };
  /// A FIFO of node ids: a vector and the index of its front (a
  /// std::deque allocates a block even while empty, and there is one per tb).
  struct Fifo {
    llvm::SmallVector<uint32_t, 1> items;
    size_t head = 0;
    bool empty() const { return head == items.size(); }
    uint32_t front() const { return items[head]; }
    void push_back(uint32_t x) { items.push_back(x); }
    void pop_front() {
      if (++head == items.size()) {
        items.clear();
        head = 0;
      }
    }
  };
  struct Tb {
    Heap local, sends; ///< list mode: ready non-receiving steps
    Fifo arrivals;     ///< receiving steps, in FIFO order
    size_t cursor = 0;             ///< fixed mode: the next step
    int32_t occupancy = 0;         ///< slots used in the outgoing FIFO
    uint32_t busy = NoNode;        ///< a big send waiting for its receiver
    int64_t wokenFor = -1;
  };

  bool receives(uint32_t x) const { return g.nodes[x].fedBy != NoNode; }
  bool sends(uint32_t x) const { return g.nodes[x].feeds != NoNode; }
  /// Whether `tb` may start sending `x` now. List scheduling also keeps a
  /// big send from starting towards a tb that is itself stuck in one: two
  /// such tbs would wait for each other.
  bool canSend(const Tb &tb, uint32_t x) const {
    int32_t count = g.nodes[x].count;
    if (tb.occupancy + count <= cap)
      return true;
    return count > cap && tb.occupancy == 0 &&
           (fixed || tbs[g.nodes[g.nodes[x].feeds].tb].busy == NoNode);
  }
  Entry entry(uint32_t x) const { return {g.nodes[x].priority, x}; }
  void wakeAt(int32_t tb, int64_t t) {
    if (tbs[tb].wokenFor != t) {
      tbs[tb].wokenFor = t;
      wake.push_back(tb);
    }
  }

  void depsDone(uint32_t x, int64_t t) {
    const SimGraph::Node &node = g.nodes[x];
    if (!fixed && !receives(x))
      (sends(x) ? tbs[node.tb].sends : tbs[node.tb].local).push(entry(x));
    wakeAt(node.tb, t);
  }

  /// Starts the best eligible step of `tb` at time t, if any.
  void step(int32_t index, int64_t t) {
    Tb &tb = tbs[index];
    if (tb.busy != NoNode)
      return;
    uint32_t chosen = NoNode;
    if (fixed) {
      llvm::ArrayRef<uint32_t> order = (*fixed)[index];
      if (tb.cursor == order.size())
        return;
      uint32_t x = order[tb.cursor];
      bool ready = pending[x] == 0 &&
                   (!receives(x) ||
                    (!tb.arrivals.empty() && tb.arrivals.front() == x)) &&
                   (!sends(x) || canSend(tb, x));
      if (!ready)
        return;
      chosen = x;
      ++tb.cursor;
    } else {
      std::optional<Entry> best;
      enum { None, Arrival, Local, Send } from = None;
      auto consider = [&](const Entry &e, decltype(from) source) {
        if (!best || e < *best) {
          best = e;
          from = source;
        }
      };
      if (!tb.arrivals.empty()) {
        uint32_t x = tb.arrivals.front();
        if (pending[x] == 0 && (!sends(x) || canSend(tb, x)))
          consider(entry(x), Arrival);
      }
      if (!tb.local.empty())
        consider(tb.local.top(), Local);
      if (!tb.sends.empty() && canSend(tb, tb.sends.top().second))
        consider(tb.sends.top(), Send);
      if (from == None)
        return;
      chosen = best->second;
      if (from == Local)
        tb.local.pop();
      else if (from == Send)
        tb.sends.pop();
      orders.nodes[orderFill[index]++] = chosen;
    }
    if (receives(chosen)) {
      assert(tb.arrivals.front() == chosen);
      tb.arrivals.pop_front();
    }
    ++executed;
    wakeAt(index, t + 1);
    const SimGraph::Node &node = g.nodes[chosen];
    if (sends(chosen)) {
      arriving.push_back(node.feeds);
      if (node.count > cap) {
        tb.occupancy = cap;
        tb.busy = chosen;
        bigWaiter[node.feeds] = chosen;
        return;
      }
      tb.occupancy += node.count;
    }
    completing.push_back(chosen);
  }

  /// Makes the effects of the steps started at t-1 visible at t.
  void apply(int64_t t) {
    for (uint32_t x : arriving) {
      tbs[g.nodes[x].tb].arrivals.push_back(x);
      wakeAt(g.nodes[x].tb, t);
    }
    arriving.clear();
    for (size_t i = 0; i < completing.size(); ++i) {
      uint32_t x = completing[i];
      for (uint32_t e = dependentBegin[x]; e < dependentBegin[x + 1]; ++e)
        if (--pending[dependents[e]] == 0)
          depsDone(dependents[e], t);
      if (!receives(x))
        continue;
      // The receiver freed its slots; a big send waiting on it is done.
      uint32_t sender = g.nodes[x].fedBy;
      Tb &from = tbs[g.nodes[sender].tb];
      from.occupancy -= std::min(g.nodes[x].count, cap);
      wakeAt(g.nodes[sender].tb, t);
      if (bigWaiter[x] != NoNode) {
        from.busy = NoNode;
        completing.push_back(bigWaiter[x]);
        // A big send into the sender's tb may start now.
        if (feeder[g.nodes[sender].tb] >= 0)
          wakeAt(feeder[g.nodes[sender].tb], t);
      }
    }
    completing.clear();
  }

  const SimGraph &g;
  int32_t cap;
  const TbOrders *fixed;
  std::vector<uint32_t> orderFill; ///< list mode: where each tb's next step goes
  std::vector<Tb> tbs;
  std::vector<uint32_t> pending;
  std::vector<uint32_t> bigWaiter;
  std::vector<int32_t> feeder; ///< per tb: the tb that sends to it, or -1
  std::vector<uint32_t> dependentBegin, dependents;
  std::vector<int32_t> wake;
  std::vector<uint32_t> arriving, completing;
  size_t executed = 0;
};

} // namespace

std::optional<TbOrders> listSchedule(const SimGraph &graph, int32_t fifoSlots) {
  Simulator sim(graph, fifoSlots, nullptr);
  if (!sim.run())
    return std::nullopt;
  return std::move(sim.orders);
}

std::vector<uint32_t> runOrders(const SimGraph &graph, const TbOrders &orders,
                                int32_t fifoSlots) {
  Simulator sim(graph, fifoSlots, &orders);
  if (sim.run())
    return {};
  return sim.blocked();
}

} // namespace coll::ir
