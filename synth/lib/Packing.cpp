//===- Packing.cpp - Tree packing, rings and the link-load model ----------===//
//
// Broadcast packing follows the constructive proof of Edmonds' branching
// theorem (Lovász): with k = min over v of the unit-capacity max-flow from
// the root, grow k arborescences one edge at a time, keeping an edge only
// if every rank can still be reached by k-t edge-disjoint paths in what is
// left. Allgather needs the trees of all roots to share the links evenly:
// each root starts from its own Edmonds packing, then a local search
// rebuilds one tree at a time as a minimum-bottleneck arborescence under
// the load of all the others, keeping a change only when the most loaded
// link (then the sum of squared loads) gets no worse.
//
//===----------------------------------------------------------------------===//

#include "SynthSupport.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

using namespace coll::synth;
using Edges = std::vector<std::pair<int32_t, int32_t>>;
using Matrix = std::vector<std::vector<int32_t>>;

static std::vector<std::vector<double>> toDouble(const Matrix &m) {
  std::vector<std::vector<double>> d(m.size(), std::vector<double>(m.size()));
  for (size_t i = 0; i < m.size(); ++i)
    for (size_t j = 0; j < m.size(); ++j)
      d[i][j] = m[i][j];
  return d;
}

static int32_t minFlowFrom(const Matrix &units, int32_t root) {
  auto cap = toDouble(units);
  int32_t best = INT32_MAX;
  for (size_t v = 0; v < units.size(); ++v)
    if (static_cast<int32_t>(v) != root)
      best = std::min(best, static_cast<int32_t>(std::lround(detail::maxFlow(
                                cap, root, static_cast<int32_t>(v)))));
  return best;
}

/// Edmonds/Lovász: k edge-disjoint spanning arborescences rooted at `root`
/// in the unit multigraph, or an error when the construction gets stuck.
static llvm::Expected<std::vector<Edges>>
edmondsPacking(const Matrix &units, int32_t root, int32_t k) {
  const int32_t n = static_cast<int32_t>(units.size());
  Matrix rest = units;
  std::vector<Edges> trees;
  for (int32_t t = 1; t <= k; ++t) {
    std::vector<int32_t> depth(n, -1);
    depth[root] = 0;
    Edges edges;
    for (int32_t added = 1; added < n; ++added) {
      // Candidates: shallow parents first, then fewest remaining units used.
      std::vector<std::pair<int32_t, int32_t>> cands;
      for (int32_t u = 0; u < n; ++u)
        for (int32_t w = 0; w < n; ++w)
          if (depth[u] >= 0 && depth[w] < 0 && rest[u][w] > 0)
            cands.push_back({u, w});
      std::stable_sort(cands.begin(), cands.end(), [&](auto x, auto y) {
        return std::make_tuple(depth[x.first], -rest[x.first][x.second]) <
               std::make_tuple(depth[y.first], -rest[y.first][y.second]);
      });
      bool ok = false;
      for (auto [u, w] : cands) {
        --rest[u][w];
        if (k - t == 0 || minFlowFrom(rest, root) >= k - t) {
          depth[w] = depth[u] + 1;
          edges.push_back({u, w});
          ok = true;
          break;
        }
        ++rest[u][w];
      }
      if (!ok)
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "tree packing got stuck at tree " +
                                           std::to_string(t));
    }
    trees.push_back(std::move(edges));
  }
  return trees;
}

/// Breadth-first order of an out-tree's edges.
static Edges bfsOrder(const Edges &edges, int32_t root, int32_t n) {
  Edges out;
  std::vector<int32_t> frontier{root};
  while (!frontier.empty()) {
    std::vector<int32_t> next;
    for (int32_t u : frontier)
      for (auto [p, c] : edges)
        if (p == u) {
          out.push_back({p, c});
          next.push_back(c);
        }
    frontier = std::move(next);
  }
  (void)n;
  return out;
}

/// Minimum-bottleneck arborescence (Prim on the load ratio) under `load`.
static Edges cheapestTree(const Matrix &units,
                          const std::vector<std::vector<double>> &load,
                          int32_t root) {
  const int32_t n = static_cast<int32_t>(units.size());
  std::vector<int32_t> depth(n, -1);
  depth[root] = 0;
  Edges edges;
  for (int32_t added = 1; added < n; ++added) {
    double best = 1e300;
    std::pair<int32_t, int32_t> pick{-1, -1};
    for (int32_t u = 0; u < n; ++u)
      for (int32_t w = 0; w < n; ++w)
        if (depth[u] >= 0 && depth[w] < 0 && units[u][w] > 0) {
          double r = (load[u][w] + 1) / units[u][w] + 1e-6 * depth[u];
          if (r < best - 1e-12) {
            best = r;
            pick = {u, w};
          }
        }
    if (pick.first < 0)
      return {};
    depth[pick.second] = depth[pick.first] + 1;
    edges.push_back(pick);
  }
  return bfsOrder(edges, root, n);
}

/// Per-root trees balanced over the links; returns the trees (k per root).
static std::vector<Tree>
balancedAllRoots(const Matrix &units,
                 const std::vector<std::vector<Edges>> &start) {
  const int32_t n = static_cast<int32_t>(units.size());
  std::vector<Tree> trees;
  for (int32_t r = 0; r < n; ++r)
    for (const Edges &e : start[r])
      trees.push_back({r, e, 1});
  std::vector<std::vector<double>> load(n, std::vector<double>(n, 0));
  auto apply = [&](const Tree &t, double sign) {
    for (auto [u, w] : t.edges)
      load[u][w] += sign;
  };
  for (const Tree &t : trees)
    apply(t, 1);
  auto score = [&]() {
    double mx = 0, sq = 0;
    for (int32_t u = 0; u < n; ++u)
      for (int32_t w = 0; w < n; ++w)
        if (units[u][w] > 0) {
          double r = load[u][w] / units[u][w];
          mx = std::max(mx, r);
          sq += r * r * units[u][w];
        }
    return std::make_pair(mx, sq);
  };
  auto current = score();
  for (int pass = 0; pass < 40; ++pass) {
    bool changed = false;
    for (Tree &t : trees) {
      apply(t, -1);
      Edges fresh = cheapestTree(units, load, t.root);
      Tree old = t;
      if (!fresh.empty())
        t.edges = fresh;
      apply(t, 1);
      auto s = score();
      if (s.first < current.first - 1e-9 ||
          (s.first < current.first + 1e-9 &&
           s.second < current.second - 1e-9)) {
        current = s;
        changed = true;
      } else {
        apply(t, -1);
        t = old;
        apply(t, 1);
      }
    }
    if (!changed)
      break;
  }
  return trees;
}

double coll::synth::predictBusBw(const Topology &topo, const Fabric &fabric,
                                 const Plan &plan) {
  const int32_t n = topo.numRanks();
  std::vector<double> linkLoad(topo.links.size(), 0),
      groupLoad(topo.groups.size(), 0);
  auto move = [&](int32_t a, int32_t b, double amount) {
    for (int32_t id : fabric.route[a][b]) {
      linkLoad[id] += amount;
      if (topo.links[id].group >= 0)
        groupLoad[topo.links[id].group] += amount;
    }
  };
  // Share of the message each tree carries.
  std::vector<double> share(plan.trees.size(), 0);
  double total = 0;
  for (const Tree &t : plan.trees)
    total += t.weight;
  for (size_t i = 0; i < plan.trees.size(); ++i) {
    const Tree &t = plan.trees[i];
    if (plan.kind == CollKind::AllGather ||
        plan.kind == CollKind::ReduceScatter) {
      double rootTotal = 0;
      for (const Tree &u : plan.trees)
        if (u.root == t.root)
          rootTotal += u.weight;
      share[i] = double(t.weight) / rootTotal / n;
    } else {
      share[i] = t.weight / total;
    }
  }
  for (size_t i = 0; i < plan.trees.size(); ++i) {
    const Tree &t = plan.trees[i];
    bool bcast = plan.kind == CollKind::Broadcast ||
                 plan.kind == CollKind::AllGather ||
                 plan.kind == CollKind::AllReduce;
    bool reduce = plan.kind == CollKind::Reduce ||
                  plan.kind == CollKind::ReduceScatter ||
                  plan.kind == CollKind::AllReduce;
    if (bcast)
      for (auto [p, c] : t.edges)
        move(p, c, share[i]);
    if (reduce) {
      if (i < plan.reduceEdges.size() && !plan.reduceEdges[i].empty()) {
        for (auto [c, p] : plan.reduceEdges[i])
          move(c, p, share[i]);
      } else {
        for (auto [p, c] : t.edges)
          move(c, p, share[i]);
      }
    }
  }
  double time = 0; // seconds per GB of message
  for (size_t i = 0; i < linkLoad.size(); ++i)
    time = std::max(time, linkLoad[i] / topo.links[i].bw);
  for (size_t g = 0; g < groupLoad.size(); ++g)
    time = std::max(time, groupLoad[g] / topo.groups[g].bw);
  if (time <= 0)
    return 0;
  return busFactor(plan.kind, n) / time;
}

static Edges reversedChildrenFirst(const Edges &bfs) {
  Edges out;
  for (auto it = bfs.rbegin(); it != bfs.rend(); ++it)
    out.push_back({it->second, it->first});
  return out;
}

llvm::Expected<Plan> coll::synth::packTrees(const Topology &topo,
                                            const Fabric &fabric, CollKind kind,
                                            int32_t root) {
  const int32_t n = topo.numRanks();
  if (!fabric.gpuOnly)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "tree packing needs GPUs joined by direct links; the fabric of '" +
            topo.name + "' (" + fabric.description + ") goes through switches");
  if (n < 2)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "a collective needs at least 2 ranks");
  Matrix units = detail::unitGraph(topo, fabric);
  Plan plan;
  plan.generator = "trees";
  plan.kind = kind;
  plan.root = root;
  if (kind == CollKind::Broadcast || kind == CollKind::Reduce) {
    Matrix g = units;
    if (kind == CollKind::Reduce)
      for (int32_t a = 0; a < n; ++a)
        for (int32_t b = 0; b < n; ++b)
          g[a][b] = units[b][a];
    int32_t k = minFlowFrom(g, root);
    auto trees = edmondsPacking(g, root, k);
    if (!trees)
      return trees.takeError();
    for (Edges &e : *trees) {
      Edges ordered = bfsOrder(e, root, n);
      plan.trees.push_back({root, ordered, 1});
      plan.reduceEdges.push_back(
          kind == CollKind::Reduce ? reversedChildrenFirst(ordered) : Edges());
    }
    plan.chunks = k;
    plan.predictedBusBw = predictBusBw(topo, fabric, plan);
    plan.note = std::to_string(k) + " edge-disjoint spanning trees from rank " +
                std::to_string(root);
    return plan;
  }
  // One packing per root, then balance the roots against each other; try
  // the min-cut tree count and two and three times it (finer splits
  // balance better).
  int32_t k = INT32_MAX;
  for (int32_t r = 0; r < n; ++r)
    k = std::min(k, minFlowFrom(units, r));
  std::vector<std::vector<Edges>> start(n);
  for (int32_t r = 0; r < n; ++r) {
    auto trees = edmondsPacking(units, r, k);
    if (!trees)
      return trees.takeError();
    for (Edges &e : *trees)
      start[r].push_back(bfsOrder(e, r, n));
  }
  Plan best;
  for (int32_t mult : {1, 2, 3}) {
    std::vector<std::vector<Edges>> s = start;
    for (auto &v : s) {
      std::vector<Edges> copy = v;
      for (int32_t m = 1; m < mult; ++m)
        v.insert(v.end(), copy.begin(), copy.end());
    }
    Plan p;
    p.generator = "trees";
    p.kind = kind;
    p.trees = balancedAllRoots(units, s);
    for (Tree &t : p.trees)
      t.edges = bfsOrder(t.edges, t.root, n);
    for (const Tree &t : p.trees)
      p.reduceEdges.push_back(reversedChildrenFirst(t.edges));
    p.chunks = k * mult;
    p.predictedBusBw = predictBusBw(topo, fabric, p);
    p.note = std::to_string(k * mult) +
             " spanning trees per root, balanced over the links";
    if (p.predictedBusBw > best.predictedBusBw * (1 + 1e-9))
      best = std::move(p);
  }
  return best;
}

std::vector<std::vector<int32_t>> coll::synth::findRings(const Topology &topo,
                                                         const Fabric &fabric,
                                                         int32_t maxRings) {
  const int32_t n = topo.numRanks();
  std::vector<std::vector<int32_t>> rings;
  if (n < 2)
    return rings;
  if (fabric.gpuOnly && n <= 16) {
    Matrix rest = detail::unitGraph(topo, fabric);
    // Depth-first search for a Hamiltonian cycle through rank 0, with a
    // budget so that a large graph without one cannot take long.
    auto hamiltonian = [&](std::vector<int32_t> &path) {
      std::vector<char> seen(n, 0);
      path = {0};
      seen[0] = 1;
      int64_t budget = 2000000;
      std::function<bool()> dfs = [&]() -> bool {
        if (--budget < 0)
          return false;
        int32_t u = path.back();
        if (static_cast<int32_t>(path.size()) == n)
          return rest[u][0] > 0;
        std::vector<int32_t> next;
        for (int32_t w = 0; w < n; ++w)
          if (!seen[w] && rest[u][w] > 0)
            next.push_back(w);
        std::stable_sort(next.begin(), next.end(), [&](int32_t a, int32_t b) {
          return rest[u][a] > rest[u][b];
        });
        for (int32_t w : next) {
          seen[w] = 1;
          path.push_back(w);
          if (dfs())
            return true;
          path.pop_back();
          seen[w] = 0;
        }
        return false;
      };
      return dfs();
    };
    auto take = [&](const std::vector<int32_t> &ring) {
      for (int32_t i = 0; i < n; ++i)
        if (rest[ring[i]][ring[(i + 1) % n]] <= 0)
          return false;
      for (int32_t i = 0; i < n; ++i)
        --rest[ring[i]][ring[(i + 1) % n]];
      rings.push_back(ring);
      return true;
    };
    std::vector<int32_t> path;
    while (static_cast<int32_t>(rings.size()) < maxRings && hamiltonian(path)) {
      take(path);
      if (static_cast<int32_t>(rings.size()) < maxRings && n > 2) {
        std::vector<int32_t> rev(path.rbegin(), path.rend());
        std::rotate(rev.begin(), std::find(rev.begin(), rev.end(), 0),
                    rev.end());
        take(rev);
      }
    }
    if (!rings.empty())
      return rings;
  }
  // Several hosts: one ring per GPU of a host, each entering and leaving
  // every host through different GPUs (and so different NICs), as NCCL's
  // rings do.
  std::vector<std::vector<int32_t>> byHost;
  for (int32_t r = 0; r < n; ++r) {
    int32_t h = topo.nodes[topo.gpus[r]].host;
    int32_t idx = -1;
    for (size_t i = 0; i < byHost.size(); ++i)
      if (topo.nodes[topo.gpus[byHost[i].front()]].host == h)
        idx = static_cast<int32_t>(i);
    if (idx < 0) {
      byHost.push_back({});
      idx = static_cast<int32_t>(byHost.size() - 1);
    }
    byHost[idx].push_back(r);
  }
  if (byHost.size() > 1) {
    size_t per = byHost.front().size();
    for (const auto &h : byHost)
      per = std::min(per, h.size());
    for (size_t i = 0; i < per && static_cast<int32_t>(rings.size()) < maxRings;
         ++i) {
      std::vector<int32_t> ring;
      for (const auto &h : byHost)
        for (size_t j = 0; j < h.size(); ++j)
          ring.push_back(h[(i + j) % h.size()]);
      std::rotate(ring.begin(), std::find(ring.begin(), ring.end(), 0),
                  ring.end());
      rings.push_back(ring);
    }
    return rings;
  }
  // No ring over the fabric's direct links: the order whose slowest hop is
  // fastest over the routes (every order when n <= 9, else rank order).
  auto hopBw = [&](int32_t a, int32_t b) {
    double w = 1e300;
    for (int32_t id : fabric.route[a][b])
      w = std::min(w, topo.links[id].bw);
    return w;
  };
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::vector<int32_t> best = order;
  if (n <= 9) {
    double bestMin = -1, bestSum = -1;
    do {
      double mn = 1e300, sum = 0;
      for (int32_t i = 0; i < n; ++i) {
        double w = hopBw(order[i], order[(i + 1) % n]);
        mn = std::min(mn, w);
        sum += w;
      }
      if (mn > bestMin + 1e-9 ||
          (mn > bestMin - 1e-9 && sum > bestSum + 1e-9)) {
        bestMin = mn;
        bestSum = sum;
        best = order;
      }
    } while (std::next_permutation(order.begin() + 1, order.end()));
  }
  rings.push_back(best);
  return rings;
}

static Edges chainFrom(const std::vector<int32_t> &ring, int32_t start,
                       int32_t hops) {
  const int32_t n = static_cast<int32_t>(ring.size());
  int32_t pos = static_cast<int32_t>(
      std::find(ring.begin(), ring.end(), start) - ring.begin());
  Edges e;
  for (int32_t h = 0; h < hops; ++h)
    e.push_back({ring[(pos + h) % n], ring[(pos + h + 1) % n]});
  return e;
}

Plan coll::synth::ringPlan(const Topology &topo, const Fabric &fabric,
                           CollKind kind,
                           const std::vector<std::vector<int32_t>> &rings,
                           int32_t root) {
  const int32_t n = topo.numRanks();
  Plan plan;
  plan.generator = "rings";
  plan.kind = kind;
  plan.root = root;
  plan.chunks = static_cast<int32_t>(rings.size());
  for (const auto &ring : rings) {
    if (kind == CollKind::Broadcast) {
      plan.trees.push_back({root, chainFrom(ring, root, n - 1), 1});
      plan.reduceEdges.push_back({});
    } else if (kind == CollKind::Reduce) {
      // The chain that starts after the root and ends at it.
      int32_t pos = static_cast<int32_t>(
          std::find(ring.begin(), ring.end(), root) - ring.begin());
      plan.trees.push_back({root, chainFrom(ring, root, n - 1), 1});
      plan.reduceEdges.push_back(chainFrom(ring, ring[(pos + 1) % n], n - 1));
    } else {
      for (int32_t r = 0; r < n; ++r) {
        int32_t pos = static_cast<int32_t>(
            std::find(ring.begin(), ring.end(), r) - ring.begin());
        plan.trees.push_back({r, chainFrom(ring, r, n - 1), 1});
        plan.reduceEdges.push_back(chainFrom(ring, ring[(pos + 1) % n], n - 1));
      }
    }
  }
  plan.predictedBusBw = predictBusBw(topo, fabric, plan);
  plan.note = std::to_string(rings.size()) + " ring(s)";
  return plan;
}

/// NCCL's double binary tree over `order` (a permutation of the ranks):
/// heap positions 0..n-1 hold order[0..n-1] in the first tree and the
/// mirrored order in the second, so that the leaves of one are the inner
/// nodes of the other. Rooted collectives keep the root at the top of both.
static Plan dbtOver(const Topology &topo, const Fabric &fabric, CollKind kind,
                    int32_t root, const std::vector<int32_t> &order) {
  const int32_t n = topo.numRanks();
  Plan plan;
  plan.generator = "double-binary-tree";
  plan.kind = kind;
  plan.root = root;
  plan.chunks = 2;
  bool rooted = kind == CollKind::Broadcast || kind == CollKind::Reduce;
  for (int32_t which = 0; which < 2; ++which) {
    std::vector<int32_t> at(n);
    if (rooted) {
      at[0] = root;
      int32_t p = 1;
      for (int32_t i = 0; i < n; ++i) {
        int32_t r = order[which == 0 ? i : n - 1 - i];
        if (r != root)
          at[p++] = r;
      }
    } else {
      for (int32_t i = 0; i < n; ++i)
        at[i] = order[which == 0 ? i : n - 1 - i];
    }
    Edges edges;
    for (int32_t i = 1; i < n; ++i)
      edges.push_back({at[(i - 1) / 2], at[i]});
    plan.trees.push_back({at[0], edges, 1});
    plan.reduceEdges.push_back(reversedChildrenFirst(edges));
  }
  plan.predictedBusBw = predictBusBw(topo, fabric, plan);
  return plan;
}

Plan coll::synth::doubleBinaryTreePlan(const Topology &topo,
                                       const Fabric &fabric, CollKind kind,
                                       int32_t root) {
  const int32_t n = topo.numRanks();
  // NCCL lays the trees over rank order; here the order of the ranks in
  // the heap is searched (every order up to 8 ranks, rank 0 first) for the
  // best link-load prediction, so that tree edges stay on fast links where
  // they can.
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  Plan best = dbtOver(topo, fabric, kind, root, order);
  if (n <= 8) {
    while (std::next_permutation(order.begin() + 1, order.end())) {
      Plan p = dbtOver(topo, fabric, kind, root, order);
      if (p.predictedBusBw > best.predictedBusBw * (1 + 1e-9))
        best = std::move(p);
    }
  }
  best.note = "two binary trees, each with half of the data";
  return best;
}

Plan coll::synth::chainPlan(const Topology &topo, const Fabric &fabric,
                            int32_t root, uint64_t bytes, int32_t chunks) {
  const int32_t n = topo.numRanks();
  // A chain needs no closing hop: the Hamiltonian path from the root whose
  // slowest hop is fastest (every order when n <= 9), else the best ring's.
  auto hopBw = [&](int32_t a, int32_t b) {
    double w = 1e300;
    for (int32_t id : fabric.route[a][b])
      w = std::min(w, topo.links[id].bw);
    return w;
  };
  std::vector<int32_t> ring = findRings(topo, fabric, 1).front();
  Edges chain = chainFrom(ring, root, n - 1);
  if (n <= 9) {
    std::vector<int32_t> order{root};
    for (int32_t r = 0; r < n; ++r)
      if (r != root)
        order.push_back(r);
    double bestMin = -1, bestSum = -1;
    do {
      double mn = 1e300, sum = 0;
      for (int32_t i = 0; i + 1 < n; ++i) {
        double w = hopBw(order[i], order[i + 1]);
        mn = std::min(mn, w);
        sum += w;
      }
      if (mn > bestMin + 1e-9 ||
          (mn > bestMin - 1e-9 && sum > bestSum + 1e-9)) {
        bestMin = mn;
        bestSum = sum;
        chain.clear();
        for (int32_t i = 0; i + 1 < n; ++i)
          chain.push_back({order[i], order[i + 1]});
      }
    } while (std::next_permutation(order.begin() + 1, order.end()));
  }
  Plan plan;
  plan.generator = "chain";
  plan.kind = CollKind::Broadcast;
  plan.root = root;
  double bw = 1e300, lat = 0;
  for (auto [a, b] : chain) {
    double l = 0;
    for (int32_t id : fabric.route[a][b]) {
      bw = std::min(bw, topo.links[id].bw);
      l += topo.links[id].latUs;
    }
    lat = std::max(lat, l);
  }
  // alpha: the slowest hop's latency plus the Simple protocol's per-step
  // overhead (NCCL's base latency spread over a ring's steps).
  const double alphaUs = lat + 1.0;
  double bestTime = 1e300;
  int32_t bestK = 1;
  for (int32_t k = 1; k <= 64; ++k) {
    double t =
        (n - 1 + k - 1) * (alphaUs * 1e-6 + double(bytes) / k / (bw * 1e9));
    if (chunks > 0 && k != chunks)
      continue;
    if (t < bestTime - 1e-15) {
      bestTime = t;
      bestK = k;
    }
  }
  plan.trees.push_back({root, chain, bestK});
  plan.reduceEdges.push_back({});
  plan.chunks = bestK;
  plan.pipeline = bestK;
  plan.predictedBusBw = predictBusBw(topo, fabric, plan);
  plan.note =
      llvm::formatv(
          "{0} chunks minimise the alpha-beta time at {1} bytes: {2:f2} us "
          "({3:f2} GB/s; alpha {4:f2} us per hop, beta from {5:f2} GB/s)",
          bestK, bytes, bestTime * 1e6, bytes / bestTime / 1e9, alphaUs, bw)
          .str();
  return plan;
}
