//===- Check.cpp - Proving an algorithm right without running it ----------===//
//
// Races come first: only a race-free algorithm computes the same in every
// order, so only then does one symbolic execution (in the verifier's
// topological order) speak for every run. The deadlock simulation is
// independent of both.
//
// Symbolic execution runs on SymbolicMemory (Symbolic.h), the executor the
// compiler's own verification shares.
//
//===----------------------------------------------------------------------===//

#include "coll/ir/Check.h"
#include "coll/ir/Geometry.h"
#include "coll/ir/Memory.h"
#include "coll/ir/Races.h"
#include "coll/ir/Simulation.h"
#include "coll/ir/Symbolic.h"
#include "coll/ir/Verifier.h"

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
  def.rule = kind;
  def.ruleChunks = k;
  def.ruleRoot = info.hasRoot ? root : 0;
  bool rootInputOnly =
      kind == Collective::Broadcast || kind == Collective::Scatter;
  def.inputDefined.resize(nranks);
  for (int32_t r = 0; r < nranks; ++r)
    def.inputDefined[r].assign(def.inputChunks, !rootInputOnly || r == root);
  return def;
}

ContribSet Definition::want(int32_t rank, int32_t index) const {
  if (rule == Collective::Custom) {
    const std::vector<uint32_t> &ids = expected[rank][index];
    std::vector<uint32_t> keys(ids.size());
    for (size_t i = 0; i < ids.size(); ++i)
      keys[i] = layout().key(ids[i]);
    return ContribSet::ofKeys(std::move(keys));
  }
  // Keys are index-major (Contributions.h): input chunk j of every rank is
  // [j*N, (j+1)*N), and input chunk j of rank a is j*N + a.
  uint32_t n = uint32_t(nranks), k = uint32_t(ruleChunks), i = uint32_t(index);
  uint32_t r = uint32_t(rank), root = uint32_t(ruleRoot);
  auto everyRank = [&](uint32_t j) { return ContribSet::range(j * n, j * n + n); };
  auto of = [&](uint32_t a, uint32_t j) { return ContribSet::single(j * n + a); };
  switch (rule) {
  case Collective::AllReduce: return everyRank(i);
  case Collective::Reduce: return r == root ? everyRank(i) : ContribSet();
  case Collective::ReduceScatter: return everyRank(r * k + i);
  case Collective::Broadcast: return of(root, i);
  case Collective::Scatter: return of(root, r * k + i);
  case Collective::Gather:
    if (r != root)
      return {};
    [[fallthrough]];
  case Collective::AllGather: return of(i / k, i % k);
  case Collective::AllToAll: return of(i / k, r * k + i % k);
  case Collective::Custom: break;
  }
  return {};
}

std::vector<uint32_t> Definition::wantIds(int32_t rank, int32_t index) const {
  if (rule == Collective::Custom)
    return expected[rank][index];
  return want(rank, index).ids(layout());
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
  switch (info.direct) {
  case DirectRole::None: break;
  case DirectRole::RemoteSrc: text += " from rank " + std::to_string(step.peer); break;
  case DirectRole::RemoteDst:
  case DirectRole::Signal: text += " to rank " + std::to_string(step.peer); break;
  case DirectRole::Wait: text += " for rank " + std::to_string(step.peer); break;
  }
  return text + ")";
}

//===----------------------------------------------------------------------===//
// Deadlock
//===----------------------------------------------------------------------===//

std::optional<Deadlock> findDeadlock(const Algorithm &alg, int32_t fifoSlots) {
  SimGraph graph;
  std::vector<StepRef> refs;
  std::vector<std::vector<uint32_t>> firstNode(alg.gpus.size());
  TbOrders orders;
  std::vector<StepRef> tbOf; // global tb -> (gpu, tb)
  for (int32_t g = 0; g < alg.ngpus(); ++g)
    for (int32_t t = 0; t < static_cast<int32_t>(alg.gpus[g].tbs.size()); ++t) {
      firstNode[g].push_back(static_cast<uint32_t>(refs.size()));
      const int32_t globalTb = static_cast<int32_t>(tbOf.size());
      tbOf.push_back({g, t, -1});
      const ThreadBlock &tb = alg.gpus[g].tbs[t];
      for (int32_t s = 0; s < static_cast<int32_t>(tb.steps.size()); ++s) {
        orders.push(static_cast<uint32_t>(refs.size()));
        refs.push_back({g, t, s});
        SimGraph::Node node;
        node.tb = globalTb;
        node.count = tb.steps[s].count;
        graph.nodes.push_back(node);
      }
      orders.closeTb();
    }
  graph.numTbs = static_cast<int32_t>(orders.size());
  // A wait waits for its signal as for a dependency: signals never block,
  // and only the waiting tb consumes what it waits for.
  std::vector<uint32_t> signalOf(refs.size(), NoNode);
  for (const SignalPair &pair : signalPairs(alg))
    for (size_t k = 0; k < std::min(pair.signalSteps.size(), pair.waitSteps.size()); ++k)
      signalOf[firstNode[pair.receiver][pair.waitTb] + pair.waitSteps[k]] =
          firstNode[pair.sender][pair.signalTb] + pair.signalSteps[k];
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
    if (signalOf[n] != NoNode)
      graph.deps.push_back(signalOf[n]);
    graph.depBegin.push_back(static_cast<uint32_t>(graph.deps.size()));
  }
  // Connections: the k-th send of the tb driving a direction meets
  // the k-th receive of the tb driving it on the other side. One sorted
  // array of (sender, receiver, channel, which end, tb), not a map node
  // per connection: where several tbs claim one end, the last one counts.
  struct End {
    int32_t sender, receiver, channel, receiving, tb;
  };
  std::vector<End> endsList;
  for (int32_t g = 0; g < alg.ngpus(); ++g)
    for (int32_t t = 0; t < static_cast<int32_t>(alg.gpus[g].tbs.size()); ++t) {
      const ThreadBlock &tb = alg.gpus[g].tbs[t];
      if (tb.sendPeer >= 0 && tb.sendPeer < alg.ngpus())
        endsList.push_back({g, tb.sendPeer, tb.channel, 0, t});
      if (tb.recvPeer >= 0 && tb.recvPeer < alg.ngpus())
        endsList.push_back({tb.recvPeer, g, tb.channel, 1, t});
    }
  auto connectionOf = [](const End &e) { return std::tie(e.sender, e.receiver, e.channel); };
  std::stable_sort(endsList.begin(), endsList.end(), [&](const End &a, const End &b) {
    return connectionOf(a) < connectionOf(b);
  });
  std::vector<uint32_t> sends, recvs; // of one connection
  for (size_t i = 0; i < endsList.size();) {
    const int32_t sender = endsList[i].sender, receiver = endsList[i].receiver;
    std::pair<int32_t, int32_t> ends{-1, -1}; // (send tb, recv tb)
    size_t j = i;
    for (; j < endsList.size() && connectionOf(endsList[j]) == connectionOf(endsList[i]); ++j)
      (endsList[j].receiving ? ends.second : ends.first) = endsList[j].tb;
    i = j;
    if (ends.first < 0 || ends.second < 0)
      continue;
    sends.clear();
    recvs.clear();
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
    } else if (signalOf[n] != NoNode && !completed(signalOf[n])) {
      next[tb] = graph.nodes[signalOf[n]].tb;
      why[tb] = "the signal of " + describeStep(alg, refs[signalOf[n]]);
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
    std::string what = std::string("race (") + modeName(inplace) + "): ";
    std::string owner = "rank " + std::to_string(race->owner);
    const char *access = race->write ? " writes " : " reads ";
    switch (race->kind) {
    case Race::Unordered:
      what += "nothing orders " + describeStep(alg, race->second) + " and " +
              describeStep(alg, race->first) + ", which both access " +
              race->memory + " and one of them writes it; add a " +
              (alg.hasDirectSteps() ? "dependency, or a signal and a wait, "
                                    : "dependency ") +
              "between them";
      break;
    case Race::BeforeStart:
      what += describeStep(alg, race->second) + access + race->memory +
              ", but nothing orders it after " + owner +
              " starts the call (before that, " + owner +
              " may still be using its buffers); wait for a signal from " +
              owner + " first";
      break;
    case Race::AfterEnd:
      what += describeStep(alg, race->second) + access + race->memory +
              ", but nothing orders it before " + owner +
              " ends the call (after that, " + owner +
              " may use its buffers again); signal " + owner +
              " after it, and make " + owner + " wait for that signal";
      break;
    }
    diags.error(lineOf(alg, race->second), race->second, what);
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
