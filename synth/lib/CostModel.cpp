//===- CostModel.cpp - Simulating an IR schedule on a topology ------------===//
//
// Event-driven: a heap holds every tb whose next step has all it needs (its
// dependency done, the matching send's data arrived), keyed by the time it
// could start; the earliest is committed, reserving the links of its send.
// Sends do not wait for the receiver (the FIFOs decouple them; their depth
// is not modelled).
//
//===----------------------------------------------------------------------===//

#include "coll/synth/CostModel.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <tuple>

using namespace coll::synth;
using coll::ir::Algorithm;
using coll::ir::Protocol;

ProtocolModel coll::synth::protocolModel(Protocol proto) {
  switch (proto) {
  case Protocol::LL:
    return {0.5, 6.6, 1.0, 16 * 1024};
  case Protocol::LL128:
    return {120.0 / 128.0, 14.0, 1.6, 120 * 1024};
  case Protocol::Simple:
    return {1.0, 8.4, 2.8, 512 * 1024};
  }
  return {1.0, 8.4, 2.8, 512 * 1024};
}

std::optional<CollKind> coll::synth::synthKind(ir::Collective coll) {
  llvm::StringRef name = ir::collectiveName(coll);
  return parseCollKind(name);
}

llvm::Expected<CostResult> coll::synth::simulateCost(const Algorithm &alg,
                                                     const Topology &topo,
                                                     const Fabric &fabric,
                                                     uint64_t bytes) {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  const int32_t n = alg.ngpus();
  if (n != topo.numRanks())
    return fail("the algorithm has " + llvm::Twine(n) +
                " ranks and topology '" + topo.name + "' " +
                llvm::Twine(topo.numRanks()) + " GPUs (use --ranks)");
  const ProtocolModel pm = protocolModel(alg.protocol);
  const double chunkBytes = double(bytes) / std::max(1, alg.nchunksPerLoop);
  const int32_t iterations = static_cast<int32_t>(
      std::clamp(std::ceil(chunkBytes / pm.sliceBytes), 1.0, 256.0));
  const double slice = chunkBytes / iterations;

  // Global numbering of tbs and steps.
  struct TbRef {
    int32_t gpu, tb, firstStep;
  };
  std::vector<TbRef> tbs;
  std::vector<std::vector<int32_t>> tbIndex(n);
  int32_t steps = 0;
  for (int32_t g = 0; g < n; ++g)
    for (size_t t = 0; t < alg.gpus[g].tbs.size(); ++t) {
      tbIndex[g].push_back(static_cast<int32_t>(tbs.size()));
      tbs.push_back({g, static_cast<int32_t>(t), steps});
      steps += static_cast<int32_t>(alg.gpus[g].tbs[t].steps.size());
    }
  auto stepOf = [&](int32_t tb, int32_t s) { return tbs[tb].firstStep + s; };
  // Match the k-th send of a connection with its k-th receive.
  std::map<std::tuple<int32_t, int32_t, int32_t>, std::vector<int32_t>> sends,
      recvs;
  for (size_t i = 0; i < tbs.size(); ++i) {
    const ir::ThreadBlock &tb = alg.gpus[tbs[i].gpu].tbs[tbs[i].tb];
    for (size_t s = 0; s < tb.steps.size(); ++s) {
      auto info = ir::stepTypeInfo(tb.steps[s].type);
      if (info.sends)
        sends[{tbs[i].gpu, tb.sendPeer, tb.channel}].push_back(
            stepOf(static_cast<int32_t>(i), static_cast<int32_t>(s)));
      if (info.receives)
        recvs[{tb.recvPeer, tbs[i].gpu, tb.channel}].push_back(
            stepOf(static_cast<int32_t>(i), static_cast<int32_t>(s)));
    }
  }
  std::vector<int32_t> matchSend(steps, -1);
  for (auto &[key, list] : recvs) {
    auto it = sends.find(key);
    if (it == sends.end() || it->second.size() != list.size())
      return fail("connection " + llvm::Twine(std::get<0>(key)) + "->" +
                  llvm::Twine(std::get<1>(key)) +
                  " has unmatched sends and receives");
    for (size_t k = 0; k < list.size(); ++k)
      matchSend[list[k]] = it->second[k];
  }

  std::vector<double> done(size_t(steps) * iterations, -1),
      arrive(size_t(steps) * iterations, -1);
  std::vector<double> linkFree(topo.links.size(), 0),
      groupFree(topo.groups.size(), 0);
  std::vector<int32_t> iter(tbs.size(), 0), pos(tbs.size(), 0);
  std::vector<double> tbFree(tbs.size(), 0);
  std::vector<std::vector<int32_t>> waiting(steps);
  using Item = std::pair<double, int32_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;

  // The earliest start of tb's next step, or -1 (and registered as a waiter).
  auto ready = [&](int32_t t) -> double {
    const ir::ThreadBlock &tb = alg.gpus[tbs[t].gpu].tbs[tbs[t].tb];
    if (pos[t] >= static_cast<int32_t>(tb.steps.size()))
      return -1;
    const ir::Step &st = tb.steps[pos[t]];
    double start = tbFree[t];
    size_t base = size_t(iter[t]) * steps;
    if (st.depTb >= 0) {
      int32_t dep = stepOf(tbIndex[tbs[t].gpu][st.depTb], st.depStep);
      if (done[base + dep] < 0) {
        waiting[dep].push_back(t);
        return -1;
      }
      start = std::max(start, done[base + dep]);
    }
    if (ir::stepTypeInfo(st.type).receives) {
      int32_t src = matchSend[stepOf(t, pos[t])];
      if (arrive[base + src] < 0) {
        waiting[src].push_back(t);
        return -1;
      }
      start = std::max(start, arrive[base + src]);
    }
    return start;
  };
  for (size_t t = 0; t < tbs.size(); ++t) {
    double s = ready(static_cast<int32_t>(t));
    if (s >= 0)
      heap.push({s, static_cast<int32_t>(t)});
  }
  double end = 0;
  int64_t executed = 0;
  while (!heap.empty()) {
    auto [start, t] = heap.top();
    heap.pop();
    const ir::ThreadBlock &tb = alg.gpus[tbs[t].gpu].tbs[tbs[t].tb];
    const ir::Step &st = tb.steps[pos[t]];
    auto info = ir::stepTypeInfo(st.type);
    double b = slice * st.count;
    double finish = start;
    int32_t gs = stepOf(t, pos[t]);
    size_t base = size_t(iter[t]) * steps;
    // Local work (copies and reductions in GPU memory).
    if (st.type != ir::StepType::Nop &&
        (info.reduces || (!info.sends && !info.receives)))
      finish += b / 1000e9 * 1e6;
    if (info.sends) {
      const auto &route = fabric.route[tbs[t].gpu][tb.sendPeer];
      double s = finish, lat = 0, bw = 1e300;
      for (int32_t id : route) {
        s = std::max(s, linkFree[id]);
        if (topo.links[id].group >= 0)
          s = std::max(s, groupFree[topo.links[id].group]);
        lat += topo.links[id].latUs * pm.hopFactor;
        bw = std::min(bw, topo.links[id].bw);
      }
      double dur = b / (bw * pm.efficiency * 1e9) * 1e6;
      for (int32_t id : route) {
        linkFree[id] = s + b / (topo.links[id].bw * pm.efficiency * 1e9) * 1e6;
        if (topo.links[id].group >= 0) {
          const Group &g = topo.groups[topo.links[id].group];
          groupFree[topo.links[id].group] =
              s + b / (g.bw * pm.efficiency * 1e9) * 1e6;
        }
      }
      finish = s + dur;
      arrive[base + gs] = finish + lat;
    }
    done[base + gs] = finish;
    tbFree[t] = finish;
    end = std::max(end, std::max(finish, arrive[base + gs]));
    ++executed;
    // Advance, wrapping into the next iteration.
    if (++pos[t] == static_cast<int32_t>(tb.steps.size()) &&
        iter[t] + 1 < iterations) {
      pos[t] = 0;
      ++iter[t];
    }
    double s = ready(t);
    if (s >= 0)
      heap.push({s, t});
    std::vector<int32_t> wake;
    wake.swap(waiting[gs]);
    for (int32_t w : wake) {
      double ws = ready(w);
      if (ws >= 0)
        heap.push({ws, w});
    }
  }
  if (executed != int64_t(steps) * iterations)
    return fail("the simulation got stuck after " + llvm::Twine(executed) +
                " of " + llvm::Twine(int64_t(steps) * iterations) + " steps");
  CostResult r;
  r.iterations = iterations;
  r.timeUs = end + pm.baseLatUs;
  r.algBw = double(bytes) / (r.timeUs * 1e-6) / 1e9;
  auto ci = ir::collectiveInfo(alg.collective);
  r.busBw = r.algBw * (ci.busMulN * n + ci.busOffset) / n;
  return r;
}
