//===- Check.cpp - Proving an algorithm right without running it ----------===//
//
// Races come first: only a race-free algorithm computes the same in every
// order, so only then does one symbolic execution (in the verifier's
// topological order) speak for every run. The deadlock simulation is
// independent of both.
//
// Symbolic contents are sorted vectors of contributions, immutable and
// shared, so that a copy costs a pointer; a null pointer is data nobody
// defined (a slot read before anything was written to it), which is
// harmless until it reaches a constrained output chunk.
//
//===----------------------------------------------------------------------===//

#include "coll/ir/Check.h"
#include "coll/ir/Geometry.h"
#include "coll/ir/Memory.h"
#include "coll/ir/Races.h"
#include "coll/ir/Simulation.h"

#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <cassert>
#include <deque>
#include <map>
#include <memory>
#include <tuple>

namespace coll::ir {

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

Definition builtinDefinition(Collective kind, int32_t nranks, int32_t k,
                             int32_t root) {
  assert(kind != Collective::Custom && "custom collectives state their own");
  CollectiveInfo info = collectiveInfo(kind);
  Definition def;
  def.nranks = nranks;
  def.inputChunks = info.inputPerRank ? nranks * k : k;
  def.outputChunks = info.outputPerRank ? nranks * k : k;
  bool rootInputOnly =
      kind == Collective::Broadcast || kind == Collective::Scatter;
  def.inputDefined.resize(nranks);
  for (int32_t r = 0; r < nranks; ++r)
    def.inputDefined[r].assign(def.inputChunks, !rootInputOnly || r == root);
  def.expected.assign(nranks,
                      std::vector<std::vector<uint32_t>>(def.outputChunks));
  auto in = [&](int32_t rank, int32_t index) {
    return static_cast<uint32_t>(rank * def.inputChunks + index);
  };
  auto &out = def.expected;
  // Lists are built in increasing rank order, hence sorted.
  auto all = [&](auto contribOfRank) {
    std::vector<uint32_t> list(nranks);
    for (int32_t a = 0; a < nranks; ++a)
      list[a] = contribOfRank(a);
    return list;
  };
  for (int32_t j = 0; j < k; ++j) {
    switch (kind) {
    case Collective::AllReduce: {
      std::vector<uint32_t> sum = all([&](int32_t a) { return in(a, j); });
      for (int32_t r = 0; r < nranks; ++r)
        out[r][j] = sum;
      break;
    }
    case Collective::Reduce:
      out[root][j] = all([&](int32_t a) { return in(a, j); });
      break;
    case Collective::ReduceScatter:
      for (int32_t r = 0; r < nranks; ++r)
        out[r][j] = all([&](int32_t a) { return in(a, r * k + j); });
      break;
    case Collective::Broadcast:
      for (int32_t r = 0; r < nranks; ++r)
        out[r][j] = {in(root, j)};
      break;
    case Collective::Scatter:
      for (int32_t r = 0; r < nranks; ++r)
        out[r][j] = {in(root, r * k + j)};
      break;
    case Collective::AllGather:
    case Collective::Gather:
    case Collective::AllToAll:
      for (int32_t r = 0; r < nranks; ++r) {
        if (kind == Collective::Gather && r != root)
          continue;
        for (int32_t a = 0; a < nranks; ++a)
          out[r][a * k + j] = {
              kind == Collective::AllToAll ? in(a, r * k + j) : in(a, j)};
      }
      break;
    case Collective::Custom: break;
    }
  }
  return def;
}

std::optional<Definition> definitionOf(const Algorithm &alg) {
  if (alg.collective == Collective::Custom)
    return alg.condition;
  BlockShape shape = blockShape(alg);
  int32_t root = alg.root < 0 ? 0 : alg.root;
  return builtinDefinition(alg.collective, shape.nranks, shape.chunksPerBlock,
                           root);
}

std::string describeStep(const Algorithm &alg, StepRef ref) {
  const ThreadBlock &tb = alg.gpus[ref.gpu].tbs[ref.tb];
  const Step &step = tb.steps[ref.step];
  StepTypeInfo info = stepTypeInfo(step.type);
  std::string text = "rank " + std::to_string(ref.gpu) + " tb " +
                     std::to_string(ref.tb) + " step " +
                     std::to_string(ref.step) + " ('" +
                     stepTypeName(step.type).str() + "'";
  if (info.receives)
    text += " from rank " + std::to_string(tb.recvPeer);
  if (info.sends)
    text += std::string(info.receives ? "," : "") + " to rank " +
            std::to_string(tb.sendPeer);
  return text + ")";
}

//===----------------------------------------------------------------------===//
// Deadlock
//===----------------------------------------------------------------------===//

std::optional<Deadlock> findDeadlock(const Algorithm &alg, int32_t fifoSlots) {
  SimGraph graph;
  std::vector<StepRef> refs;
  std::vector<std::vector<uint32_t>> firstNode(alg.gpus.size());
  std::vector<std::vector<uint32_t>> orders;
  std::vector<StepRef> tbOf; // global tb -> (gpu, tb)
  for (int32_t g = 0; g < alg.ngpus(); ++g)
    for (int32_t t = 0; t < static_cast<int32_t>(alg.gpus[g].tbs.size()); ++t) {
      firstNode[g].push_back(static_cast<uint32_t>(refs.size()));
      orders.emplace_back();
      tbOf.push_back({g, t, -1});
      const ThreadBlock &tb = alg.gpus[g].tbs[t];
      for (int32_t s = 0; s < static_cast<int32_t>(tb.steps.size()); ++s) {
        orders.back().push_back(static_cast<uint32_t>(refs.size()));
        refs.push_back({g, t, s});
        SimGraph::Node node;
        node.tb = static_cast<int32_t>(orders.size()) - 1;
        node.count = tb.steps[s].count;
        graph.nodes.push_back(node);
      }
    }
  graph.numTbs = static_cast<int32_t>(orders.size());
  std::vector<uint32_t> depOf(refs.size(), NoNode);
  for (uint32_t n = 0; n < refs.size(); ++n) {
    const StepRef &ref = refs[n];
    const Step &step = alg.gpus[ref.gpu].tbs[ref.tb].steps[ref.step];
    const auto &tbs = alg.gpus[ref.gpu].tbs;
    if (step.hasDependency() && size_t(step.depTb) < tbs.size() &&
        step.depStep >= 0 &&
        size_t(step.depStep) < tbs[step.depTb].steps.size()) {
      depOf[n] = firstNode[ref.gpu][step.depTb] + step.depStep;
      graph.deps.push_back(depOf[n]);
    }
    graph.depBegin.push_back(static_cast<uint32_t>(graph.deps.size()));
  }
  // Connections: the k-th send of the (first) tb driving a direction meets
  // the k-th receive of the tb driving it on the other side.
  std::map<std::tuple<int32_t, int32_t, int32_t>, std::pair<int32_t, int32_t>>
      connections; // (sender, receiver, channel) -> (send tb, recv tb)
  for (int32_t g = 0; g < alg.ngpus(); ++g)
    for (int32_t t = 0; t < static_cast<int32_t>(alg.gpus[g].tbs.size()); ++t) {
      const ThreadBlock &tb = alg.gpus[g].tbs[t];
      if (tb.sendPeer >= 0 && tb.sendPeer < alg.ngpus())
        connections.try_emplace({g, tb.sendPeer, tb.channel}, -1, -1)
            .first->second.first = t;
      if (tb.recvPeer >= 0 && tb.recvPeer < alg.ngpus())
        connections.try_emplace({tb.recvPeer, g, tb.channel}, -1, -1)
            .first->second.second = t;
    }
  for (const auto &[key, ends] : connections) {
    auto [sender, receiver, channel] = key;
    if (ends.first < 0 || ends.second < 0)
      continue;
    std::vector<uint32_t> sends, recvs;
    uint32_t s0 = firstNode[sender][ends.first];
    for (const Step &step : alg.gpus[sender].tbs[ends.first].steps) {
      if (stepTypeInfo(step.type).sends)
        sends.push_back(s0);
      ++s0;
    }
    uint32_t r0 = firstNode[receiver][ends.second];
    for (const Step &step : alg.gpus[receiver].tbs[ends.second].steps) {
      if (stepTypeInfo(step.type).receives)
        recvs.push_back(r0);
      ++r0;
    }
    for (size_t k = 0; k < std::min(sends.size(), recvs.size()); ++k) {
      graph.nodes[sends[k]].feeds = recvs[k];
      graph.nodes[recvs[k]].fedBy = sends[k];
    }
  }

  std::vector<uint32_t> stuck = runOrders(graph, orders, fifoSlots);
  if (stuck.empty())
    return std::nullopt;

  Deadlock dead;
  // Where each unfinished tb stopped: its steps before that one completed.
  std::vector<uint32_t> at(graph.numTbs, NoNode);
  for (uint32_t n : stuck) {
    dead.stuck.push_back(refs[n]);
    at[graph.nodes[n].tb] = n;
  }
  auto completed = [&](uint32_t n) {
    uint32_t stop = at[graph.nodes[n].tb];
    return stop == NoNode || n < stop;
  };
  auto started = [&](uint32_t n) {
    uint32_t stop = at[graph.nodes[n].tb];
    return stop == NoNode || n < stop ||
           (n == stop && graph.nodes[n].feeds != NoNode &&
            graph.nodes[n].count > fifoSlots);
  };
  auto connection = [&](uint32_t sendNode) {
    const StepRef &s = refs[sendNode];
    const ThreadBlock &tb = alg.gpus[s.gpu].tbs[s.tb];
    return "connection " + std::to_string(s.gpu) + "->" +
           std::to_string(tb.sendPeer) + " channel " +
           std::to_string(tb.channel);
  };
  // Each stuck tb waits for one other stuck tb; following those edges from
  // the first must come back around.
  std::vector<int32_t> next(graph.numTbs, -1);
  std::vector<std::string> why(graph.numTbs);
  for (uint32_t n : stuck) {
    int32_t tb = graph.nodes[n].tb;
    const SimGraph::Node &node = graph.nodes[n];
    if (depOf[n] != NoNode && !completed(depOf[n])) {
      next[tb] = graph.nodes[depOf[n]].tb;
      why[tb] = "its dependency " + describeStep(alg, refs[depOf[n]]);
    } else if (node.fedBy != NoNode && !started(node.fedBy)) {
      next[tb] = graph.nodes[node.fedBy].tb;
      why[tb] = "data from " + describeStep(alg, refs[node.fedBy]) + " on " +
                connection(node.fedBy);
    } else if (node.feeds != NoNode) {
      // The receiver's first receive on this connection that has not run
      // would free a slot.
      uint32_t frees = node.feeds;
      for (uint32_t m = node.feeds; m-- > 0 &&
                                    graph.nodes[m].tb == graph.nodes[frees].tb;)
        if (graph.nodes[m].fedBy != NoNode &&
            graph.nodes[graph.nodes[m].fedBy].tb == tb && !completed(m))
          frees = m;
      next[tb] = graph.nodes[frees].tb;
      why[tb] = "a free slot on " + connection(n) + " (" +
                std::to_string(fifoSlots) + " slots), which " +
                describeStep(alg, refs[frees]) + " frees";
    }
  }
  int32_t tb = graph.nodes[stuck.front()].tb;
  std::vector<int32_t> seenAt(graph.numTbs, -1);
  std::vector<int32_t> path;
  while (tb >= 0 && seenAt[tb] < 0) {
    seenAt[tb] = static_cast<int32_t>(path.size());
    path.push_back(tb);
    tb = next[tb];
  }
  if (tb >= 0)
    for (size_t i = seenAt[tb]; i < path.size(); ++i)
      dead.cycle.push_back({refs[at[path[i]]], why[path[i]]});
  return dead;
}

//===----------------------------------------------------------------------===//
// Symbolic execution
//===----------------------------------------------------------------------===//

namespace {

using Contents = std::shared_ptr<const std::vector<uint32_t>>;
constexpr uint64_t None = ~uint64_t(0);

/// Every rank's input, output and scratch chunks in one call mode.
class Memory {
public:
  Memory(const Algorithm &alg, const Definition &def, bool inplace)
      : alg(alg), def(def), inplace(inplace),
        perBlock(blockShape(alg).chunksPerBlock) {
    // In place the file may declare 0 chunks for the aliased buffer, so
    // each buffer gets the larger of the file's and the definition's size.
    base.assign(alg.gpus.size() + 1, 0);
    for (size_t r = 0; r < alg.gpus.size(); ++r) {
      const Gpu &gpu = alg.gpus[r];
      inChunks.push_back(std::max(gpu.inputChunks, def.inputChunks));
      outChunks.push_back(std::max(gpu.outputChunks, def.outputChunks));
      // In place a custom collective aliases output chunk j with input
      // chunk j: the owner must be able to hold either.
      if (inplace && alg.collective == Collective::Custom)
        inChunks.back() = outChunks.back() =
            std::max(inChunks.back(), outChunks.back());
      base[r + 1] = base[r] + uint32_t(inChunks[r]) + uint32_t(outChunks[r]) +
                    uint32_t(gpu.scratchChunks);
    }
    cells.resize(base.back());
    writers.assign(base.back(), None);
    for (int32_t r = 0; r < def.nranks; ++r)
      for (int32_t j = 0; j < def.inputChunks; ++j)
        if (def.inputDefined[r][j])
          cells[cell(r, {BufferKind::Input, j})] =
              std::make_shared<const std::vector<uint32_t>>(
                  1, static_cast<uint32_t>(r * def.inputChunks + j));
  }

  uint32_t cell(int32_t rank, Slot slot) const {
    if (inplace)
      slot = inPlaceOwner(alg.collective, rank, perBlock, slot);
    uint32_t local = static_cast<uint32_t>(slot.off);
    if (slot.buf != BufferKind::Input)
      local += static_cast<uint32_t>(inChunks[rank]);
    if (slot.buf == BufferKind::Scratch)
      local += static_cast<uint32_t>(outChunks[rank]);
    return base[rank] + local;
  }

  void read(int32_t rank, Slot slot, int32_t count,
            llvm::SmallVectorImpl<Contents> &out) const {
    out.clear();
    for (int32_t i = 0; i < count; ++i)
      out.push_back(cells[cell(rank, {slot.buf, slot.off + i})]);
  }
  /// The last writer of the first chunk of `slot`.
  uint64_t writer(int32_t rank, Slot slot) const {
    return writers[cell(rank, slot)];
  }

  std::optional<std::string> write(int32_t rank, Slot slot,
                                   llvm::ArrayRef<Contents> values,
                                   uint64_t position) {
    if (!inplace && slot.buf == BufferKind::Input)
      return "writes " + name(rank, slot) +
             ", but out of place the input must stay unchanged";
    for (size_t i = 0; i < values.size(); ++i) {
      uint32_t c = cell(rank, {slot.buf, slot.off + int32_t(i)});
      cells[c] = values[i];
      writers[c] = position;
    }
    return std::nullopt;
  }

  /// `into[i] := into[i] (+) with[i]`; undefined data stays undefined, and
  /// a contribution in both would be counted twice.
  std::optional<std::string> reduce(llvm::SmallVectorImpl<Contents> &into,
                                    llvm::ArrayRef<Contents> with) const {
    for (size_t i = 0; i < into.size(); ++i) {
      if (!into[i] || !with[i]) {
        into[i] = nullptr;
        continue;
      }
      const std::vector<uint32_t> &a = *into[i], &b = *with[i];
      auto merged = std::make_shared<std::vector<uint32_t>>();
      merged->reserve(a.size() + b.size());
      size_t x = 0, y = 0;
      while (x < a.size() || y < b.size()) {
        if (x < a.size() && y < b.size() && a[x] == b[y])
          return "adds " + contrib(a[x]) + " to data that already holds it";
        bool takeA = y == b.size() || (x < a.size() && a[x] < b[y]);
        merged->push_back(takeA ? a[x++] : b[y++]);
      }
      into[i] = std::move(merged);
    }
    return std::nullopt;
  }

  std::optional<std::string> checkOverlap(int32_t rank, Slot src, Slot dst,
                                          int32_t count) const {
    uint32_t a = cell(rank, src), b = cell(rank, dst);
    if (a != b && a < b + count && b < a + count)
      return "reads " + name(rank, src) + " and writes " + name(rank, dst) +
             ", which overlap in memory";
    return std::nullopt;
  }

  /// The first output chunk that does not hold what the definition
  /// expects: (rank, chunk, message).
  std::optional<std::pair<Slot, std::pair<int32_t, std::string>>>
  firstWrongOutput() const {
    for (int32_t r = 0; r < def.nranks; ++r)
      for (int32_t i = 0; i < def.outputChunks; ++i) {
        const std::vector<uint32_t> &want = def.expected[r][i];
        if (want.empty())
          continue;
        Slot out{BufferKind::Output, i};
        const Contents &have = cells[cell(r, out)];
        if (have && *have == want)
          continue;
        return std::pair(out, std::pair(r, "output chunk " + name(r, out) +
                                               " holds " + describe(have) +
                                               " but must hold " +
                                               describe(want)));
      }
    return std::nullopt;
  }

  std::string name(int32_t rank, Slot slot) const {
    return "rank " + std::to_string(rank) + " " + bufferName(slot.buf).str() +
           "[" + std::to_string(slot.off) + "]";
  }

private:
  std::string contrib(uint32_t id) const {
    return "in(" + std::to_string(id / def.inputChunks) + "," +
           std::to_string(id % def.inputChunks) + ")";
  }
  std::string describe(const Contents &have) const {
    if (!have)
      return "undefined data";
    return describe(*have);
  }
  std::string describe(const std::vector<uint32_t> &ids) const {
    if (ids.empty())
      return "nothing";
    std::string text;
    for (size_t k = 0; k < ids.size() && k < 4; ++k)
      text += (k ? " + " : "") + contrib(ids[k]);
    if (ids.size() > 4)
      text += " + " + std::to_string(ids.size() - 4) + " more";
    return text;
  }

  const Algorithm &alg;
  const Definition &def;
  bool inplace;
  int32_t perBlock;
  std::vector<int32_t> inChunks, outChunks; ///< per rank
  std::vector<uint32_t> base;               ///< first cell of each rank
  std::vector<Contents> cells;
  std::vector<uint64_t> writers; ///< last writer of each cell (a position)
};

} // namespace

std::optional<WrongResult> executeSymbolically(const Algorithm &alg,
                                               const Analysis &analysis,
                                               const Definition &def,
                                               bool inplace) {
  assert(def.nranks == alg.ngpus() && "a definition for another rank count");
  Memory mem(alg, def, inplace);
  const std::vector<StepRef> &order = analysis.topologicalOrder;
  // What each position's data came from (its sender, or the writer of what
  // it read), for the chain of steps in a report.
  std::vector<uint64_t> cameFrom(order.size(), None);
  struct Message {
    llvm::SmallVector<Contents, 4> data;
    uint64_t sender;
  };
  std::vector<std::deque<Message>> queues(analysis.connections.size());
  llvm::SmallVector<Contents, 4> data, local;
  auto chain = [&](uint64_t position) {
    std::vector<StepRef> steps;
    for (; position != None && steps.size() < 8; position = cameFrom[position])
      steps.push_back(order[position]);
    return steps;
  };
  for (uint64_t position = 0; position < order.size(); ++position) {
    const StepRef &ref = order[position];
    const Step &step = alg.gpus[ref.gpu].tbs[ref.tb].steps[ref.step];
    StepTypeInfo info = stepTypeInfo(step.type);
    if (step.type == StepType::Nop)
      continue;
    Slot src{step.srcBuf, step.srcOff}, dst{step.dstBuf, step.dstOff};
    auto fail = [&](std::string message) {
      return WrongResult{inplace, false, chain(position), std::move(message)};
    };
    if (info.receives) {
      auto &queue = queues[analysis.recvConnection[ref.gpu][ref.tb]];
      assert(!queue.empty() && "the topological order puts sends first");
      data = std::move(queue.front().data);
      cameFrom[position] = queue.front().sender;
      queue.pop_front();
    } else if (info.readsSrc) {
      if (step.type == StepType::Copy || step.type == StepType::Reduce)
        if (auto err = mem.checkOverlap(ref.gpu, src, dst, step.count))
          return fail(*err);
      mem.read(ref.gpu, src, step.count, data);
      cameFrom[position] = mem.writer(ref.gpu, src);
    }
    // Reductions combine with the local operand: src for receiving types,
    // dst for `re`.
    if (info.reduces) {
      Slot operand = info.receives ? src : dst;
      mem.read(ref.gpu, operand, step.count, local);
      if (auto err = mem.reduce(data, local))
        return fail(*err);
    }
    if (info.writesDst)
      if (auto err = mem.write(ref.gpu, dst, data, position))
        return fail(*err);
    if (info.sends)
      queues[analysis.sendConnection[ref.gpu][ref.tb]].push_back(
          {data, position});
  }
  auto wrong = mem.firstWrongOutput();
  if (!wrong)
    return std::nullopt;
  auto [slot, what] = *wrong;
  return WrongResult{inplace, true, chain(mem.writer(what.first, slot)),
                     std::move(what.second)};
}

//===----------------------------------------------------------------------===//
// The checks together
//===----------------------------------------------------------------------===//

namespace {

uint32_t lineOf(const Algorithm &alg, StepRef ref) {
  if (ref.gpu < 0)
    return alg.line;
  const ThreadBlock &tb = alg.gpus[ref.gpu].tbs[ref.tb];
  return ref.step < 0 ? tb.line : tb.steps[ref.step].line;
}

const char *modeName(bool inplace) {
  return inplace ? "in place" : "out of place";
}

} // namespace

bool check(const Algorithm &alg, const Analysis &analysis,
           DiagnosticList &diags, const CheckOptions &options) {
  bool ok = true;
  std::vector<bool> modes;
  if (alg.inplace)
    modes.push_back(true);
  if (alg.outofplace)
    modes.push_back(false);

  std::vector<bool> raceFree;
  for (bool inplace : modes) {
    std::optional<Race> race = findRace(alg, inplace);
    raceFree.push_back(!race);
    if (!race)
      continue;
    ok = false;
    diags.error(lineOf(alg, race->second), race->second,
                llvm::Twine("race (") + modeName(inplace) +
                    "): nothing orders " + describeStep(alg, race->second) +
                    " and " + describeStep(alg, race->first) +
                    ", which both access " + race->memory +
                    " and one of them writes it; add a dependency between "
                    "them");
  }

  if (std::optional<Deadlock> dead = findDeadlock(alg, options.fifoSlots)) {
    ok = false;
    StepRef first =
        dead->cycle.empty() ? dead->stuck.front() : dead->cycle.front().step;
    std::string text = "deadlock with " + std::to_string(options.fifoSlots) +
                       "-slot FIFOs: " + std::to_string(dead->stuck.size()) +
                       (dead->stuck.size() == 1 ? " tb waits" : " tbs wait") +
                       " forever";
    if (!dead->cycle.empty()) {
      text += "; the cycle:";
      for (const DeadlockWait &wait : dead->cycle)
        text += "\n  " + describeStep(alg, wait.step) + " waits for " +
                wait.waitsFor;
    }
    diags.error(lineOf(alg, first), first, text);
  }

  std::optional<Definition> builtin;
  if (alg.collective != Collective::Custom)
    builtin = definitionOf(alg);
  const Definition *def = builtin          ? &*builtin
                          : options.custom ? options.custom
                          : alg.condition  ? &*alg.condition
                                           : nullptr;
  if (!def) {
    diags.warning(alg.line, {},
                  "the result is not checked: collective '" +
                      collectiveAttribute(alg) +
                      "' has no definition here (only races and deadlocks "
                      "are): the file carries no <condition>");
    return ok;
  }
  if (def->nranks != alg.ngpus()) {
    diags.error(alg.line, {},
                "the collective's definition is for " +
                    llvm::Twine(def->nranks) + " ranks, but the algorithm has " +
                    llvm::Twine(alg.ngpus()));
    return false;
  }
  for (size_t m = 0; m < modes.size(); ++m) {
    // A race makes the result depend on the order; it is reported already.
    if (!raceFree[m])
      continue;
    std::optional<WrongResult> wrong =
        executeSymbolically(alg, analysis, *def, modes[m]);
    if (!wrong)
      continue;
    ok = false;
    std::string text = std::string("wrong result (") + modeName(modes[m]) +
                       "): ";
    if (!wrong->output)
      text += describeStep(alg, wrong->writers.front()) + " ";
    text += wrong->message;
    if (wrong->writers.empty())
      text += "; no step writes it";
    else if (wrong->output)
      text += "; written by " + describeStep(alg, wrong->writers.front());
    for (size_t i = 1; i < wrong->writers.size(); ++i)
      text += "\n  from " + describeStep(alg, wrong->writers[i]);
    StepRef at = wrong->writers.empty() ? StepRef{} : wrong->writers.front();
    diags.error(lineOf(alg, at), at, text);
  }
  return ok;
}

} // namespace coll::ir
