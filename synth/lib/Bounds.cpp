//===- Bounds.cpp - Fabric, routes, max-flow and cut bounds ---------------===//
//
// The fabric is the set of links synthesis uses: NVLink and network links
// when they join every GPU (NCCL too prefers them and falls back to PCIe
// only when it must), else every link. Routes between ranks pass through a
// third GPU only where nothing else joins them. Bounds are over the fabric's
// capacities; capacity groups are not part of the bounds (the cost model
// charges them).
//
//===----------------------------------------------------------------------===//

#include "SynthSupport.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <deque>

using namespace coll::synth;

llvm::StringRef coll::synth::collKindName(CollKind kind) {
  switch (kind) {
  case CollKind::Broadcast:
    return "broadcast";
  case CollKind::Reduce:
    return "reduce";
  case CollKind::AllGather:
    return "allgather";
  case CollKind::ReduceScatter:
    return "reducescatter";
  case CollKind::AllReduce:
    return "allreduce";
  }
  return "?";
}

std::optional<CollKind> coll::synth::parseCollKind(llvm::StringRef name) {
  for (CollKind k : {CollKind::Broadcast, CollKind::Reduce, CollKind::AllGather,
                     CollKind::ReduceScatter, CollKind::AllReduce})
    if (name == collKindName(k))
      return k;
  return std::nullopt;
}

double coll::synth::busFactor(CollKind kind, int32_t n) {
  switch (kind) {
  case CollKind::Broadcast:
  case CollKind::Reduce:
    return 1.0;
  case CollKind::AllGather:
  case CollKind::ReduceScatter:
    return double(n - 1) / n;
  case CollKind::AllReduce:
    return 2.0 * (n - 1) / n;
  }
  return 1.0;
}

double detail::maxFlow(std::vector<std::vector<double>> cap, int32_t s,
                       int32_t t) {
  const size_t n = cap.size();
  double flow = 0;
  while (true) {
    std::vector<int32_t> prev(n, -1);
    prev[s] = s;
    std::deque<int32_t> queue{s};
    while (!queue.empty() && prev[t] < 0) {
      int32_t u = queue.front();
      queue.pop_front();
      for (size_t v = 0; v < n; ++v)
        if (prev[v] < 0 && cap[u][v] > 1e-9) {
          prev[v] = u;
          queue.push_back(static_cast<int32_t>(v));
        }
    }
    if (prev[t] < 0)
      return flow;
    double push = 1e300;
    for (int32_t v = t; v != s; v = prev[v])
      push = std::min(push, cap[prev[v]][v]);
    for (int32_t v = t; v != s; v = prev[v]) {
      cap[prev[v]][v] -= push;
      cap[v][prev[v]] += push;
    }
    flow += push;
  }
}

/// Shortest route (fewest hops, then widest) from node `a` to node `b` over
/// `allowed` links, not passing through another GPU.
static std::vector<int32_t> route(const Topology &topo,
                                  const std::vector<int32_t> &allowed,
                                  int32_t a, int32_t b, bool gpuRelay) {
  const size_t n = topo.nodes.size();
  std::vector<int32_t> hops(n, INT32_MAX), via(n, -1);
  std::vector<double> width(n, 0);
  hops[a] = 0;
  width[a] = 1e300;
  for (size_t round = 0; round < n; ++round) {
    bool changed = false;
    for (int32_t id : allowed) {
      const Link &l = topo.links[id];
      if (hops[l.from] == INT32_MAX)
        continue;
      if (!gpuRelay && l.from != a && topo.nodes[l.from].kind == NodeKind::Gpu)
        continue; // GPUs do not relay
      int32_t h = hops[l.from] + 1;
      double w = std::min(width[l.from], l.bw);
      if (h < hops[l.to] || (h == hops[l.to] && w > width[l.to] + 1e-9)) {
        hops[l.to] = h;
        width[l.to] = w;
        via[l.to] = id;
        changed = true;
      }
    }
    if (!changed)
      break;
  }
  std::vector<int32_t> path;
  if (hops[b] == INT32_MAX)
    return path;
  for (int32_t v = b; v != a; v = topo.links[via[v]].from)
    path.push_back(via[v]);
  std::reverse(path.begin(), path.end());
  return path;
}

llvm::Expected<Fabric> coll::synth::buildFabric(const Topology &topo) {
  Fabric fabric;
  const int32_t n = topo.numRanks();
  std::vector<int32_t> all;
  for (size_t i = 0; i < topo.links.size(); ++i) {
    all.push_back(static_cast<int32_t>(i));
    const Link &l = topo.links[i];
    if (l.kind == LinkKind::NVLink || l.kind == LinkKind::Net)
      fabric.links.push_back(static_cast<int32_t>(i));
  }
  // Connected over the fast links, with GPUs allowed to relay (trees do)?
  auto connected = [&](const std::vector<int32_t> &links) {
    std::vector<std::vector<double>> cap(
        topo.nodes.size(), std::vector<double>(topo.nodes.size(), 0));
    for (int32_t id : links)
      cap[topo.links[id].from][topo.links[id].to] += topo.links[id].bw;
    for (int32_t a = 0; a < n; ++a)
      for (int32_t b = 0; b < n; ++b)
        if (a != b && detail::maxFlow(cap, topo.gpus[a], topo.gpus[b]) <= 0)
          return false;
    return true;
  };
  // NVLink alone, then NVLink and the network, then everything.
  std::vector<int32_t> nvlink;
  for (int32_t id : fabric.links)
    if (topo.links[id].kind == LinkKind::NVLink)
      nvlink.push_back(id);
  if (!nvlink.empty() && (n < 2 || connected(nvlink))) {
    fabric.links = nvlink;
    fabric.description = "NVLink";
  } else if (n > 1 && !connected(fabric.links)) {
    fabric.links = all;
    fabric.description = "all links";
  } else {
    fabric.description = nvlink.empty() ? "network" : "NVLink+network";
  }
  if (n > 1 && !connected(fabric.links))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "topology '" + topo.name +
                                       "': some GPUs cannot reach each other");
  fabric.gpuOnly = true;
  for (int32_t id : fabric.links) {
    const Link &l = topo.links[id];
    if (topo.nodes[l.from].kind != NodeKind::Gpu ||
        topo.nodes[l.to].kind != NodeKind::Gpu)
      fabric.gpuOnly = false;
  }
  fabric.route.assign(n, std::vector<std::vector<int32_t>>(n));
  for (int32_t a = 0; a < n; ++a)
    for (int32_t b = 0; b < n; ++b) {
      if (a == b)
        continue;
      // Over the fabric, then over anything, and only then through another
      // GPU (which then forwards the data, as a relay in NCCL's PXN does).
      auto r = route(topo, fabric.links, topo.gpus[a], topo.gpus[b], false);
      if (r.empty())
        r = route(topo, all, topo.gpus[a], topo.gpus[b], false);
      if (r.empty())
        r = route(topo, all, topo.gpus[a], topo.gpus[b], true);
      assert(!r.empty() && "connected() holds");
      fabric.route[a][b] = std::move(r);
    }
  fabric.unitBw = 0;
  for (int32_t id : fabric.links) {
    const Link &l = topo.links[id];
    if (topo.nodes[l.from].kind == NodeKind::Gpu &&
        topo.nodes[l.to].kind == NodeKind::Gpu) {
      double per = l.bw / l.count;
      if (fabric.unitBw == 0 || per < fabric.unitBw)
        fabric.unitBw = per;
    }
  }
  return fabric;
}

std::vector<std::vector<int32_t>> detail::unitGraph(const Topology &topo,
                                                    const Fabric &fabric) {
  const int32_t n = topo.numRanks();
  std::vector<std::vector<int32_t>> units(n, std::vector<int32_t>(n, 0));
  if (fabric.unitBw <= 0)
    return units;
  for (int32_t id : fabric.links) {
    const Link &l = topo.links[id];
    int32_t a = topo.nodes[l.from].rank, b = topo.nodes[l.to].rank;
    if (a < 0 || b < 0)
      continue;
    units[a][b] += std::max<int32_t>(
        1, static_cast<int32_t>(std::floor(l.bw / fabric.unitBw + 1e-6)));
  }
  return units;
}

llvm::Expected<Bound> coll::synth::lowerBound(const Topology &topo,
                                              const Fabric &fabric,
                                              CollKind kind, int32_t root) {
  const int32_t n = topo.numRanks();
  Bound bound;
  if (n < 2)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "a collective needs at least 2 ranks");
  if (root < 0 || root >= n)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "root " + std::to_string(root) +
                                       " is not a rank");
  const size_t nodes = topo.nodes.size();
  std::vector<std::vector<double>> cap(nodes, std::vector<double>(nodes, 0));
  for (int32_t id : fabric.links)
    cap[topo.links[id].from][topo.links[id].to] += topo.links[id].bw;
  auto fmt = [](double v) { return llvm::formatv("{0:f2}", v).str(); };
  if (kind == CollKind::Broadcast || kind == CollKind::Reduce) {
    double best = 1e300;
    int32_t at = -1;
    for (int32_t v = 0; v < n; ++v) {
      if (v == root)
        continue;
      double f = kind == CollKind::Broadcast
                     ? detail::maxFlow(cap, topo.gpus[root], topo.gpus[v])
                     : detail::maxFlow(cap, topo.gpus[v], topo.gpus[root]);
      if (f < best - 1e-9) {
        best = f;
        at = v;
      }
    }
    bound.busBw = best;
    bound.how =
        "max-flow/min-cut: " + fmt(best) + " GB/s " +
        (kind == CollKind::Broadcast ? "from root " + std::to_string(root) +
                                           " to rank " + std::to_string(at)
                                     : "from rank " + std::to_string(at) +
                                           " to root " + std::to_string(root));
    return bound;
  }
  // Cut bounds over every split of the fabric's nodes.
  std::vector<int32_t> used;
  std::vector<int32_t> index(nodes, -1);
  for (int32_t g : topo.gpus) {
    index[g] = static_cast<int32_t>(used.size());
    used.push_back(g);
  }
  for (int32_t id : fabric.links)
    for (int32_t v : {topo.links[id].from, topo.links[id].to})
      if (index[v] < 0) {
        index[v] = static_cast<int32_t>(used.size());
        used.push_back(v);
      }
  if (used.size() > 22)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "topology '" + topo.name +
            "': the cut bound enumerates every split of the " +
            std::to_string(used.size()) +
            " fabric nodes; at most 22 are supported");
  struct Arc {
    int32_t a, b;
    double bw;
  };
  std::vector<Arc> arcs;
  for (int32_t id : fabric.links)
    arcs.push_back({index[topo.links[id].from], index[topo.links[id].to],
                    topo.links[id].bw});
  // bus bandwidth = (N-1) * cap(cut) / (GPUs on the receiving... side)
  auto cutBound = [&](bool intoS, std::string &how) {
    double best = 1e300;
    const uint64_t count = uint64_t(1) << used.size();
    const uint64_t gpuMask = (uint64_t(1) << n) - 1;
    for (uint64_t s = 1; s + 1 < count; ++s) {
      int32_t inS = __builtin_popcountll(s & gpuMask);
      int32_t outS = n - inS;
      if (inS == 0 || outS == 0)
        continue;
      double c = 0;
      for (const Arc &arc : arcs) {
        bool aIn = (s >> arc.a) & 1, bIn = (s >> arc.b) & 1;
        if (intoS ? (!aIn && bIn) : (aIn && !bIn))
          c += arc.bw;
      }
      double bw = (n - 1) * c / outS;
      if (bw < best - 1e-9) {
        best = bw;
        how = std::to_string(outS) + " blocks must cross " + fmt(c) +
              " GB/s of links " + (intoS ? "into" : "out of") + " a set of " +
              std::to_string(inS) + " GPU(s)";
      }
    }
    return best;
  };
  std::string howAg, howRs;
  double ag = cutBound(true, howAg);
  double rs = cutBound(false, howRs);
  if (kind == CollKind::AllGather) {
    bound.busBw = ag;
    bound.how = "cut bound: " + howAg;
  } else if (kind == CollKind::ReduceScatter) {
    bound.busBw = rs;
    bound.how = "cut bound: " + howRs;
  } else {
    // Every side of every cut must learn the other side's sum: the whole
    // message crosses the cut in each direction. (Twice the reduce-scatter
    // time is only a bound for algorithms that finish the reduce-scatter
    // before the allgather starts; overlapping the two directions beats it.)
    double best = 1e300;
    std::string how;
    const uint64_t count = uint64_t(1) << used.size();
    const uint64_t gpuMask = (uint64_t(1) << n) - 1;
    for (uint64_t s = 1; s + 1 < count; ++s) {
      int32_t inS = __builtin_popcountll(s & gpuMask);
      if (inS == 0 || inS == n)
        continue;
      double in = 0, out = 0;
      for (const Arc &arc : arcs) {
        bool aIn = (s >> arc.a) & 1, bIn = (s >> arc.b) & 1;
        if (!aIn && bIn)
          in += arc.bw;
        if (aIn && !bIn)
          out += arc.bw;
      }
      double bw = busFactor(CollKind::AllReduce, n) * std::min(in, out);
      if (bw < best - 1e-9) {
        best = bw;
        how = "the whole message crosses " + fmt(std::min(in, out)) +
              " GB/s of links at a set of " + std::to_string(inS) + " GPU(s)";
      }
    }
    double twice = 2.0 / (1.0 / ag + 1.0 / rs);
    bound.busBw = best;
    bound.how = "cut bound: " + how +
                "; reduce-scatter then allgather, one after the "
                "other, can reach at most " +
                fmt(twice) + " GB/s";
  }
  return bound;
}
