//===- MscclppSync.cpp - Signals, semaphores and barriers of MSCCL++ plans -===//
//
// docs/IR.md, "MSCCL++ plans". The ops that order one tb against another
// (signals and waits on memory channels, device semaphores, barriers), and
// how each use is paired with the one it meets, as the v0.10 executor pairs
// them (MscclppTranslate.cpp's file comment says how). The translator's
// state is in MscclppTranslator.h.
//
//===----------------------------------------------------------------------===//

#include "MscclppTranslator.h"

#include <algorithm>
#include <map>
#include <set>

namespace coll::ir::mscclpp::detail {

/// A tb of its own on rank r, after the plan's tbs: it carries signals
/// or waits of another tb (splitStreams).
int32_t Translator::helperTb(int32_t r) {
  alg.gpus[r].tbs.emplace_back();
  state[r].tbs.emplace_back();
  return static_cast<int32_t>(alg.gpus[r].tbs.size()) - 1;
}

/// A Coll channel carries the signals of one tb of a rank to a peer,
/// taken by one tb of the peer; MSCCL++'s tb may signal a peer on memory
/// channels that different tbs of the peer wait on (or wait on channels
/// that different tbs signal). Those channels' signals (waits) move to a
/// tb of their own, one per tb at the other end beyond the first:
/// - a moved signal leaves a nop where it stood, and in the new tb it
///   depends on that nop, so that it follows everything the first tb
///   did and learned before it, which is what it releases there;
/// - a moved wait stays as a nop that depends on the wait, now in the
///   new tb, so that what the wait acquires comes before everything the
///   first tb does after it.
/// The new tb adds no order the plan lacks, and it lets the first tb go
/// on while it signals; the checker proves the program with it.
void Translator::splitStreams() {
  if (diags.hasErrors())
    return;
  // The tb of each channel's uses, where they are all in one (pairSignals
  // reports the others).
  auto tbOf = [](const std::vector<SyncUse> &uses) {
    for (const SyncUse &u : uses)
      if (u.tb != uses.front().tb)
        return -1;
    return uses.empty() ? -1 : uses.front().tb;
  };
  for (bool signalSide : {true, false}) {
    auto &mine = signalSide ? signals : waits;
    auto &theirs = signalSide ? waits : signals;
    // (rank, tb, peer) -> the tb of the peer at the other end -> channels.
    std::map<std::tuple<int32_t, int32_t, int32_t>, std::map<int32_t, std::vector<Conn>>> groups;
    for (const auto &[c, uses] : mine) {
      auto other = theirs.find(Conn{c.peer, c.rank, c.tag});
      const int32_t t = tbOf(uses);
      const int32_t u = other == theirs.end() ? -1 : tbOf(other->second);
      if (t >= 0 && u >= 0)
        groups[{c.rank, t, c.peer}][u].push_back(c);
    }
    for (const auto &[key, byOther] : groups) {
      const auto &[r, t, peer] = key;
      (void)peer;
      for (auto it = std::next(byOther.begin()); it != byOther.end(); ++it) {
        const int32_t h = helperTb(r);
        std::vector<SyncUse *> moved;
        for (const Conn &c : it->second)
          for (SyncUse &u : mine[c])
            moved.push_back(&u);
        std::sort(moved.begin(), moved.end(),
                  [](const SyncUse *a, const SyncUse *b) { return a->order < b->order; });
        for (SyncUse *u : moved) {
          std::vector<Step> &from = alg.gpus[r].tbs[t].steps;
          std::vector<Step> &to = alg.gpus[r].tbs[h].steps;
          Step step = from[u->step];
          const int32_t at = static_cast<int32_t>(to.size());
          from[u->step] = Step{}; // a nop
          if (signalSide) {
            step.depTb = t;
            step.depStep = u->step;
          } else {
            from[u->step].depTb = h;
            from[u->step].depStep = at;
          }
          to.push_back(step);
          u->tb = h;
          u->step = at;
        }
      }
    }
  }
}

/// `barrier` (handleBarrier: DeviceSyncer::sync of num_threadblocks
/// blocks, between two __syncthreads): the k-th barrier of each tb that
/// uses barrier_id meets the k-th of every other. In Coll, a nop that
/// each other tb's nops for that barrier depend on, and a nop after it
/// for each other tb that depends on that tb's (pairBarriers). Its
/// __syncthreads end the run of ops (a nop's rules), and what it
/// acquires counts as a wait's for a relaxed signal after it.
void Translator::barrierOp(int32_t r, int32_t t, const Op &op, Epoch &epoch, std::string &firstWait) {
  epoch = Epoch();
  if (op.numThreadblocks == 1)
    return; // __syncthreads only
  if (currentPipe) {
    unsupported(op.path, "a barrier of several tbs in a pipeline");
    return;
  }
  // deviceSyncers[MAX_DEVICE_SYNCERS] (execution_common.hpp: 16).
  if (op.barrierId >= 16) {
    error(op.path + ".barrier_id", "barrier " + std::to_string(op.barrierId) +
                                       " is out of range: the executor has 16 "
                                       "(MAX_DEVICE_SYNCERS)");
    return;
  }
  std::vector<Step> &steps = alg.gpus[r].tbs[t].steps;
  BarrierUse use{static_cast<int32_t>(steps.size()), op.numThreadblocks, op.path};
  for (int32_t k = 0; k < op.numThreadblocks; ++k)
    steps.push_back(Step{}); // the arrive nop, then one per other tb
  barriers[{r, op.barrierId}][t].push_back(use);
  if (firstWait.empty())
    firstWait = op.path;
}

void Translator::pairBarriers() {
  if (diags.hasErrors())
    return;
  for (const auto &[key, perTb] : barriers) {
    const auto &[r, id] = key;
    const std::string name = "barrier " + std::to_string(id) + " of gpu " + std::to_string(r);
    const std::vector<BarrierUse> &first = perTb.begin()->second;
    const int32_t count = first.front().count;
    bool ok = true;
    for (const auto &[t, uses] : perTb)
      for (const BarrierUse &u : uses)
        if (ok && u.count != count) {
          error(u.path + ".num_threadblocks",
                name + " is for " + std::to_string(u.count) + " tbs here and for " +
                    std::to_string(count) + " at " + first.front().path +
                    ": the executor's count would never reach one of them");
          ok = false;
        }
    if (ok && static_cast<int32_t>(perTb.size()) != count) {
      error(first.front().path,
            name + " is for " + std::to_string(count) + " tbs, and " +
                std::to_string(perTb.size()) + " tbs use it: " +
                (static_cast<int32_t>(perTb.size()) < count
                     ? "the executor would wait for the others forever"
                     : "the executor would let tbs through before every one has arrived"));
      ok = false;
    }
    for (const auto &[t, uses] : perTb)
      if (ok && uses.size() != first.size()) {
        error(uses.size() > first.size() ? uses[first.size()].path
                                         : first[uses.size()].path,
              name + " is met " + std::to_string(first.size()) + " times by tb " +
                  std::to_string(perTb.begin()->first) + " and " +
                  std::to_string(uses.size()) + " times by tb " + std::to_string(t) +
                  ": a barrier that some tbs never reach waits forever");
        ok = false;
      }
    if (!ok)
      continue;
    // Tb t's k-th barrier: after its arrive nop, one nop per other tb u
    // that depends on u's arrive nop of the same barrier.
    for (size_t k = 0; k < first.size(); ++k)
      for (const auto &[t, uses] : perTb) {
        int32_t at = uses[k].arrive + 1;
        for (const auto &[u, others] : perTb) {
          if (u == t)
            continue;
          Step &wait = alg.gpus[r].tbs[t].steps[at++];
          wait.depTb = u;
          wait.depStep = others[k].arrive;
        }
      }
  }
}

/// A signal or wait: one Coll step per channel of the op.
void Translator::syncOp(int32_t r, int32_t t, const Op &op, bool signal, bool relaxed) {
  if (!op.channelType || *op.channelType != ChannelType::Memory) {
    error(op.path + ".channel_type", "'" + opName(op.kind) + "' needs a memory channel here");
    return;
  }
  const Tb2 &tb = state[r].tbs[t];
  for (size_t i = 0; i < op.channelIds.size(); ++i) {
    int32_t id = op.channelIds[i];
    std::string path = op.path + ".channel_ids[" + std::to_string(i) + "]";
    if (size_t(id) >= tb.memChannels.size()) {
      error(path, "channel " + std::to_string(id) + " is out of range: the tb has " +
                      std::to_string(tb.memChannels.size()) + " memory channels");
      continue;
    }
    const Conn &conn = state[r].memConns[tb.memChannels[id]];
    if (conn.peer == r) {
      unsupported(path, "a signal or wait on a memory channel to the tb's own rank: "
                        "Coll's signals reach another rank");
      continue;
    }
    syncStep(r, t, conn, signal, relaxed, op.path);
  }
}

/// A signal or wait on channel `conn`, appended to tb `tb` of rank r and
/// recorded for pairSignals; its step's index.
int32_t Translator::syncStep(int32_t r, int32_t tb, const Conn &conn, bool signal, bool relaxed,
                             const std::string &path) {
  Step step;
  step.type = signal ? StepType::Signal : StepType::Wait;
  step.count = 0;
  step.peer = conn.peer;
  std::vector<Step> &steps = alg.gpus[r].tbs[tb].steps;
  steps.push_back(step);
  const int32_t at = static_cast<int32_t>(steps.size()) - 1;
  (signal ? signals : waits)[conn].push_back(
      SyncUse{tb, relaxed, nextOrder++, path, pipePlace(), at});
  return at;
}

/// sem_release and sem_acquire: device semaphores between the tbs of one
/// rank (concurrency_device.hpp, DeviceSemaphore: release adds one with
/// release order; acquire takes one with acquire order, waiting while
/// there is none). With one tb releasing a semaphore and one acquiring it,
/// the k-th acquire completes exactly when the (k - init_value)-th release
/// has happened: in Coll, a nop that depends on the nop of that release.
void Translator::semaphoreOp(int32_t r, int32_t t, const Op &op, bool release) {
  const std::vector<int64_t> &inits = plan.gpus[r].semaphoreInitValues;
  for (size_t i = 0; i < op.semaphoreIds.size(); ++i) {
    int32_t id = op.semaphoreIds[i];
    std::string path = op.path + ".semaphore_ids[" + std::to_string(i) + "]";
    if (size_t(id) >= inits.size()) {
      error(path, "semaphore " + std::to_string(id) + " is out of range: gpu " +
                      std::to_string(r) + " has " + std::to_string(inits.size()));
      continue;
    }
    std::vector<SemUse> &uses = (release ? releases : acquires)[{r, id}];
    std::vector<Step> &steps = alg.gpus[r].tbs[t].steps;
    SemUse use{t, -1, op.path, pipePlace()};
    // The first init_value acquires wait for nothing.
    if (release || int64_t(uses.size()) >= inits[id]) {
      use.step = static_cast<int32_t>(steps.size());
      steps.push_back(Step{}); // a nop; its dependency is set by pairSemaphores
    }
    uses.push_back(use);
  }
}

void Translator::pairSemaphores() {
  // As for signals: after a refused op, the counts would only repeat it.
  if (diags.hasErrors())
    return;
  std::set<std::pair<int32_t, int32_t>> ids;
  for (const auto &kv : releases)
    ids.insert(kv.first);
  for (const auto &kv : acquires)
    ids.insert(kv.first);
  for (const auto &key : ids) {
    const std::vector<SemUse> &rel = releases[key], &acq = acquires[key];
    std::string name = "semaphore " + std::to_string(key.second) + " of gpu " +
                       std::to_string(key.first);
    bool ok = true;
    for (const auto *uses : {&rel, &acq})
      for (const SemUse &u : *uses)
        if (u.tb != uses->front().tb && ok) {
          unsupported(u.path, "tbs " + std::to_string(uses->front().tb) + " and " +
                                  std::to_string(u.tb) + " both " +
                                  (uses == &rel ? "release " : "acquire ") + name +
                                  ": which release lets which acquire through then depends "
                                  "on timing, and a Coll dependency names one step");
          ok = false;
        }
    if (!ok)
      continue;
    if (rel.size() != acq.size()) {
      // Acquires beyond the releases wait forever; releases left over
      // change the value the next call starts from.
      error(rel.size() < acq.size() ? acq[rel.size()].path : rel[acq.size()].path,
            name + " is released " + std::to_string(rel.size()) + " times and acquired " +
                std::to_string(acq.size()) +
                " times: a call must leave it at its initial value");
      continue;
    }
    int64_t init = plan.gpus[key.first].semaphoreInitValues[key.second];
    // In a pipeline, the executor's k-th acquire takes the release of an
    // earlier iteration where the semaphore starts above 0, and releases
    // and acquires at different places of their pipelines pair
    // differently at each size.
    bool piped = false;
    for (const auto *uses : {&rel, &acq})
      for (const SemUse &u : *uses)
        piped |= u.place.chunks != 0;
    if (piped && init != 0) {
      unsupported(rel.empty() ? acq.front().path : rel.front().path,
                  name + " starts at " + std::to_string(init) +
                      " and is used in a pipeline: each iteration's acquire would take an "
                      "earlier iteration's release, which a Coll dependency (a step of "
                      "the same slice) does not say");
      continue;
    }
    bool placed = true;
    for (size_t k = 0; k < acq.size() && placed; ++k)
      if (rel[k].place != acq[k].place) {
        error(acq[k].path, name + ": acquire " + std::to_string(k) + " runs " +
                               describePlace(acq[k].place) + ", and the release it takes (" +
                               rel[k].path + ") " + describePlace(rel[k].place) +
                               ": the executor runs a pipeline's ops once per unit, so the "
                               "two sides would release and acquire different numbers of "
                               "times or in another order");
        placed = false;
      }
    if (!placed)
      continue;
    for (size_t k = 0; k < acq.size(); ++k) {
      if (acq[k].step < 0)
        continue;
      const SemUse &from = rel[k - static_cast<size_t>(init)];
      Step &step = alg.gpus[key.first].tbs[acq[k].tb].steps[acq[k].step];
      step.depTb = from.tb;
      step.depStep = from.step;
    }
  }
  // A nop that no step after it in its tb carries, and that no other tb
  // waits for, orders nothing: a release that nobody in this call
  // acquires, an acquire at the end of a tb. The verifier refuses such a
  // nop, so it is left out; leaving out an acquire may leave its release
  // without a dependent, so this repeats until nothing changes. (Only the
  // semaphores' nops are nops or have hasdep here.)
  for (bool changed = true; changed;) {
    changed = false;
    for (ir::Gpu &gpu : alg.gpus)
      for (ir::ThreadBlock &tb : gpu.tbs)
        for (Step &step : tb.steps)
          step.hasDep = false;
    for (ir::Gpu &gpu : alg.gpus)
      for (ir::ThreadBlock &tb : gpu.tbs)
        for (const Step &step : tb.steps)
          if (step.hasDependency())
            gpu.tbs[step.depTb].steps[step.depStep].hasDep = true;
    for (ir::Gpu &gpu : alg.gpus)
      for (ir::ThreadBlock &tb : gpu.tbs)
        while (!tb.steps.empty() && tb.steps.back().type == StepType::Nop &&
               !tb.steps.back().hasDep) {
          tb.steps.pop_back();
          changed = true;
        }
  }
}

/// Pairs the k-th wait on each memory channel with the k-th signal of its
/// partner, and gives each tb the Coll channel its signals and waits need:
/// Coll pairs the signals of one tb to a peer on a channel with the waits
/// of one tb of the peer on the same channel.
void Translator::pairSignals() {
  // An op refused above leaves its signals and waits out: pairing what is
  // left would only repeat that error.
  if (diags.hasErrors())
    return;
  // Tbs are nodes (rank, tb); a channel's signalling tb and its partner's
  // waiting tb must share a Coll channel.
  using Node = std::pair<int32_t, int32_t>;
  std::map<Node, Node> parent;
  auto find = [&](Node x) {
    Node root = x;
    for (auto it = parent.find(root); it != parent.end(); it = parent.find(root))
      root = it->second;
    // Point the whole path at the root, so that later finds are short.
    for (auto it = parent.find(x); it != parent.end() && it->second != root;
         it = parent.find(x)) {
      x = it->second;
      it->second = root;
    }
    return root;
  };
  auto unite = [&](Node a, Node b) {
    a = find(a);
    b = find(b);
    if (a != b)
      parent[std::max(a, b)] = std::min(a, b);
  };

  auto singleTb = [&](const std::vector<SyncUse> &uses, const Conn &c, const char *what) {
    for (const SyncUse &u : uses)
      if (u.tb != uses.front().tb) {
        unsupported(u.path, "tbs " + std::to_string(uses.front().tb) + " and " +
                                std::to_string(u.tb) + " of gpu " + std::to_string(c.rank) +
                                " both " + what + " on its " + (c.port ? "port" : "memory") +
                                " channel to gpu " +
                                std::to_string(c.peer) +
                                ": on a Coll channel, one tb per rank " +
                                (llvm::StringRef(what) == "signal" ? "signals a peer"
                                                                   : "waits for a peer"));
        return false;
      }
    return true;
  };
  bool ok = true;
  for (const auto &[c, uses] : signals)
    ok &= singleTb(uses, c, "signal");
  for (const auto &[c, uses] : waits)
    ok &= singleTb(uses, c, "wait");
  if (!ok)
    return;

  // Each channel's signals must all be taken by its partner's waits, as
  // Coll's verifier requires of its own channels: a wait with no signal
  // waits forever, and a signal left over would release a wait of the next
  // call early.
  for (const auto &[c, uses] : signals) {
    auto w = waits.find(Conn{c.peer, c.rank, c.tag});
    size_t taken = w == waits.end() ? 0 : w->second.size();
    if (taken < uses.size())
      error(uses[taken].path,
            "signal " + std::to_string(taken) + " on " + channelName(c) +
                " is never waited for: gpu " + std::to_string(c.peer) + " waits on its partner "
                "channel only " + std::to_string(taken) +
                " times, and a signal left over would release a wait of the next call early");
  }
  for (const auto &[c, uses] : waits) {
    auto sg = signals.find(Conn{c.peer, c.rank, c.tag});
    size_t given = sg == signals.end() ? 0 : sg->second.size();
    if (given < uses.size())
      error(uses[given].path,
            "wait " + std::to_string(given) + " on " + channelName(c) +
                " has no matching signal: gpu " + std::to_string(c.peer) +
                " signals on its partner channel only " + std::to_string(given) +
                " times, so this wait waits forever");
  }
  if (diags.hasErrors())
    return;
  // (A memory channel's partner is the peer's memory channel to this rank
  // with the same connection tag: executor.cc, setupConnections.)

  // The wait side of each signalling channel: rank p's channel to r with
  // the same tag.
  for (const auto &[c, uses] : signals) {
    Conn partner{c.peer, c.rank, c.tag, c.port, c.nth};
    auto w = waits.find(partner);
    if (w == waits.end())
      continue; // no waits: the verifier reports the signals left over
    unite({c.rank, uses.front().tb}, {partner.rank, w->second.front().tb});
    // A relaxed wait does not acquire what a signal releases.
    size_t n = std::min(uses.size(), w->second.size());
    // The executor pairs signals and waits by count: alike only where each
    // runs at the same place of pipelines alike (pipeline).
    for (size_t k = 0; k < n; ++k)
      if (uses[k].place != w->second[k].place) {
        error(w->second[k].path,
              "wait " + std::to_string(k) + " on " + channelName(partner) + " runs " +
                  describePlace(w->second[k].place) + ", and the signal it takes (" +
                  uses[k].path + ") " + describePlace(uses[k].place) +
                  ": the executor runs a pipeline's ops once per unit, so the two sides "
                  "would signal and wait different numbers of times or in another order");
        break;
      }
    for (size_t k = 0; k < n; ++k)
      if (w->second[k].relaxed && !uses[k].relaxed)
        unsupported(w->second[k].path,
                    "a relaxed wait (rlxwait) that takes the signal " + uses[k].path +
                        ", which releases data: the relaxed wait does not acquire it, "
                        "while Coll's wait would");
  }

  // Within a component, the signals from r to p on all its memory channels
  // form one count in Coll, taken by the waits in order. That is exact
  // where one tb of r does all the signals, one tb of p all the waits, and
  // the channels of the signals come in the same order as those of the
  // waits: then the k-th wait of each channel still takes the k-th signal
  // of that channel.
  struct Stream {
    std::vector<std::pair<uint64_t, int32_t>> signalTags, waitTags; // (order, tag)
    std::set<int32_t> signalTbs, waitTbs;
    std::string path;
  };
  using Key = std::pair<int32_t, int32_t>; // (signaller, waiter)
  std::map<Node, std::map<Key, Stream>> pairsOf;
  for (const auto &[c, uses] : signals) {
    Stream &s = pairsOf[find({c.rank, uses.front().tb})][{c.rank, c.peer}];
    for (const SyncUse &u : uses)
      s.signalTags.emplace_back(u.order, c.tag);
    s.signalTbs.insert(uses.front().tb);
    if (s.path.empty())
      s.path = uses.front().path;
  }
  for (const auto &[c, uses] : waits) {
    Stream &s = pairsOf[find({c.rank, uses.front().tb})][{c.peer, c.rank}];
    for (const SyncUse &u : uses)
      s.waitTags.emplace_back(u.order, c.tag);
    s.waitTbs.insert(uses.front().tb);
    if (s.path.empty())
      s.path = uses.front().path;
  }
  for (auto &[root, streams] : pairsOf)
    for (auto &[key, s] : streams) {
      std::string pair = "gpu " + std::to_string(key.first) + "'s signals to gpu " +
                         std::to_string(key.second);
      if (s.signalTbs.size() > 1 || s.waitTbs.size() > 1) {
        auto tbs = [](size_t n) { return std::to_string(n) + (n == 1 ? " tb" : " tbs"); };
        unsupported(s.path, pair + " go through several memory channels, sent by " +
                                tbs(s.signalTbs.size()) + " and waited for by " +
                                tbs(s.waitTbs.size()) +
                                ": a Coll tb has one channel, and on a channel one tb per "
                                "rank signals a peer and one tb of the peer waits");
        continue;
      }
      std::sort(s.signalTags.begin(), s.signalTags.end());
      std::sort(s.waitTags.begin(), s.waitTags.end());
      std::vector<int32_t> st, wt;
      for (const auto &x : s.signalTags)
        st.push_back(x.second);
      for (const auto &x : s.waitTags)
        wt.push_back(x.second);
      std::set<int32_t> tags(st.begin(), st.end());
      tags.insert(wt.begin(), wt.end());
      if (tags.size() > 1 && st != wt)
        unsupported(s.path, pair + " on its " + std::to_string(tags.size()) +
                                " memory channels are not waited for in the order they are "
                                "signalled: Coll, which counts them as one, would pair "
                                "them differently");
    }

  std::vector<std::set<std::pair<int32_t, int32_t>>> used;
  std::map<std::pair<int32_t, int32_t>, int32_t> channelOf;
  for (const auto &[root, pairs] : pairsOf) {
    (void)root;
    size_t c = 0;
    for (; c < used.size(); ++c) {
      bool clash = false;
      for (const auto &kv : pairs)
        clash |= used[c].count(kv.first) != 0;
      if (!clash)
        break;
    }
    if (c == used.size())
      used.emplace_back();
    for (const auto &kv : pairs)
      used[c].insert(kv.first);
    channelOf[root] = static_cast<int32_t>(c);
  }
  alg.nchannels = std::max<int32_t>(1, static_cast<int32_t>(used.size()));
  for (int32_t r = 0; r < nranks; ++r)
    for (size_t t = 0; t < alg.gpus[r].tbs.size(); ++t) {
      auto it = channelOf.find(find({r, static_cast<int32_t>(t)}));
      alg.gpus[r].tbs[t].channel = it == channelOf.end() ? 0 : it->second;
    }
}

} // namespace coll::ir::mscclpp::detail
