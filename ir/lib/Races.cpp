//===- Races.cpp - Unordered accesses to the same memory ------------------===//
//
// Per rank, the steps are walked in a topological order of tb order and
// dependencies, keeping what each tb knows to have completed,
// and, per chunk of memory, its last writer and the readers since. A read
// must be ordered after the last write; a write after the last write and
// every read since. Linear in steps, chunks moved and knowledge merged.
//
//===----------------------------------------------------------------------===//

#include "coll/ir/Races.h"
#include "coll/ir/Geometry.h"
#include "coll/ir/Memory.h"
#include "coll/ir/ReaderLists.h"
#include "coll/ir/Verifier.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <climits>
#include <deque>
#include <map>
#include <tuple>

namespace coll::ir {
namespace {

constexpr uint32_t NoStep = ~uint32_t(0);

/// (tb, position in it).
using Wait = std::pair<int32_t, int32_t>;
/// What one tb of a rank knows to have completed, in the same pipeline
/// iteration: per other tb, the last position (dependency flags are
/// monotone, so waiting for a step covers the ones before it). Sorted by tb.
using Knowledge = llvm::SmallVector<Wait, 2>;

int32_t known(const Knowledge &knowledge, int32_t tb) {
  auto it = llvm::lower_bound(knowledge, Wait{tb, INT32_MIN});
  return it != knowledge.end() && it->first == tb ? it->second : -1;
}

void learn(Knowledge &knowledge, Wait fact) {
  auto it = llvm::lower_bound(knowledge, Wait{fact.first, INT32_MIN});
  if (it != knowledge.end() && it->first == fact.first)
    it->second = std::max(it->second, fact.second);
  else
    knowledge.insert(it, fact);
}

/// After a step's accesses are checked: what it reads joins the readers of
/// those chunks (unless it overwrites them itself), and it becomes the last
/// writer of what it writes.
void recordAccesses(ReaderPool &pool, std::vector<ReaderPool::List> &readers,
                    std::vector<uint32_t> &lastWriter, uint32_t n, bool readsSrc, bool writesDst,
                    uint32_t src, uint32_t dst, uint32_t count) {
  for (uint32_t i = 0; readsSrc && i < count; ++i)
    if (!writesDst || src + i < dst || src + i >= dst + count)
      pool.push(readers[src + i], n);
  if (writesDst)
    for (uint32_t c = dst; c < dst + count; ++c) {
      lastWriter[c] = n;
      pool.clear(readers[c]);
    }
}


/// Direct steps: the whole job at once (Races.h). Nodes are every rank's
/// steps; edges are tb order, dependencies and signal -> wait. A tb's
/// knowledge names global tbs. Cells are every rank's chunks.
std::optional<Race> findDirectRace(const Algorithm &alg, bool inplace) {
  int32_t perBlock = blockShape(alg).chunksPerBlock;
  int32_t ngpus = alg.ngpus();
  std::vector<int32_t> tbBase(ngpus + 1, 0); // first global tb of each rank
  std::vector<int32_t> rankOf;               // global tb -> rank
  std::vector<uint32_t> first;               // global tb -> first node
  std::vector<Wait> where;                   // node -> (global tb, step)
  for (int32_t g = 0; g < ngpus; ++g) {
    tbBase[g] = static_cast<int32_t>(first.size());
    for (const ThreadBlock &tb : alg.gpus[g].tbs) {
      int32_t global = static_cast<int32_t>(first.size());
      first.push_back(static_cast<uint32_t>(where.size()));
      rankOf.push_back(g);
      for (int32_t s = 0; s < static_cast<int32_t>(tb.steps.size()); ++s)
        where.emplace_back(global, s);
    }
  }
  tbBase[ngpus] = static_cast<int32_t>(first.size());
  auto tbAt = [&](int32_t global) -> const ThreadBlock & {
    int32_t g = rankOf[global];
    return alg.gpus[g].tbs[global - tbBase[g]];
  };
  auto step = [&](uint32_t n) -> const Step & {
    return tbAt(where[n].first).steps[where[n].second];
  };
  auto refOf = [&](uint32_t n) {
    int32_t g = rankOf[where[n].first];
    return StepRef{g, where[n].first - tbBase[g], where[n].second};
  };

  // The k-th wait of a (sender, receiver, channel) takes its k-th signal.
  std::vector<uint32_t> signalOf(where.size(), NoStep);
  for (const SignalPair &pair : signalPairs(alg))
    for (size_t k = 0; k < std::min(pair.signalSteps.size(), pair.waitSteps.size()); ++k)
      signalOf[first[tbBase[pair.receiver] + pair.waitTb] + pair.waitSteps[k]] =
          first[tbBase[pair.sender] + pair.signalTb] + pair.signalSteps[k];

  // Kahn over tb order, dependencies and signal -> wait.
  auto depNode = [&](uint32_t n) {
    const Step &s = step(n);
    return first[tbBase[rankOf[where[n].first]] + s.depTb] +
           static_cast<uint32_t>(s.depStep);
  };
  std::vector<uint32_t> pending(where.size(), 0);
  std::vector<std::vector<uint32_t>> nextOf(where.size());
  std::deque<uint32_t> ready;
  for (uint32_t n = 0; n < where.size(); ++n) {
    if (where[n].second > 0) {
      ++pending[n];
      nextOf[n - 1].push_back(n);
    }
    if (step(n).hasDependency()) {
      ++pending[n];
      nextOf[depNode(n)].push_back(n);
    }
    if (signalOf[n] != NoStep) {
      ++pending[n];
      nextOf[signalOf[n]].push_back(n);
    }
    if (pending[n] == 0)
      ready.push_back(n);
  }

  // Cells: per rank, three buffers of `span` chunks each (span covers every
  // slot in-place aliasing can name).
  std::vector<uint32_t> cellBase(ngpus + 1, 0), span(ngpus, 0);
  BlockShape shape = blockShape(alg);
  for (int32_t g = 0; g < ngpus; ++g) {
    const Gpu &gpu = alg.gpus[g];
    int64_t m = std::max({gpu.inputChunks, gpu.outputChunks, gpu.scratchChunks,
                          shape.chunks(BufferKind::Input),
                          shape.chunks(BufferKind::Output)});
    m = std::max<int64_t>(m, int64_t(g + 1) * perBlock);
    span[g] = static_cast<uint32_t>(m);
    cellBase[g + 1] = cellBase[g] + 3 * span[g];
  }
  auto cellOf = [&](int32_t g, Slot slot) {
    if (inplace)
      slot = inPlaceOwner(alg.collective, g, perBlock, slot);
    return cellBase[g] + uint32_t(slot.buf) * span[g] + uint32_t(slot.off);
  };
  auto ownerOf = [&](uint32_t cell) {
    return static_cast<int32_t>(
        std::upper_bound(cellBase.begin(), cellBase.end(), cell) -
        cellBase.begin() - 1);
  };
  auto name = [&](uint32_t cell) {
    int32_t g = ownerOf(cell);
    uint32_t local = cell - cellBase[g];
    return "rank " + std::to_string(g) + " " +
           bufferName(BufferKind(local / span[g])).str() + "[" +
           std::to_string(local % span[g]) + "]";
  };

  constexpr uint32_t Begin = NoStep - 1; // the owner's start of the call
  std::vector<uint32_t> lastWriter(cellBase.back(), Begin);
  std::vector<ReaderPool::List> readers(cellBase.back(), ReaderPool::Empty);
  ReaderPool pool;
  std::vector<Knowledge> knowledge(first.size());
  std::vector<Knowledge> after(where.size());
  // Per owner rank: its peers' last access to its memory, per global tb:
  // (position, cell, writes).
  std::vector<std::map<int32_t, std::tuple<int32_t, uint32_t, bool>>> remote(
      ngpus);

  while (!ready.empty()) {
    uint32_t n = ready.front();
    ready.pop_front();
    for (uint32_t m : nextOf[n])
      if (--pending[m] == 0)
        ready.push_back(m);
    int32_t t = where[n].first, s = where[n].second;
    int32_t rank = rankOf[t];
    const Step &st = step(n);
    Knowledge &mine = knowledge[t];
    auto learnFrom = [&](uint32_t p) {
      for (Wait fact : after[p])
        learn(mine, fact);
      learn(mine, where[p]);
    };
    if (st.hasDependency())
      learnFrom(depNode(n));
    if (signalOf[n] != NoStep)
      learnFrom(signalOf[n]);
    if (st.hasDep || st.type == StepType::Signal) {
      after[n] = mine;
      learn(after[n], {t, s});
    }
    StepTypeInfo info = stepTypeInfo(st.type);
    if (!info.readsSrc && !info.writesDst)
      continue;
    auto knowsRank = [&](int32_t g) {
      if (g == rank)
        return true;
      auto it = llvm::lower_bound(mine, Wait{tbBase[g], INT32_MIN});
      return it != mine.end() && it->first < tbBase[g + 1];
    };
    auto ordered = [&](uint32_t p, uint32_t cell) {
      if (p == Begin)
        return knowsRank(ownerOf(cell));
      return where[p].first == t ? where[p].second < s
                                 : known(mine, where[p].first) >= where[p].second;
    };
    auto race = [&](uint32_t p, uint32_t cell, bool writes) {
      Race r;
      r.second = refOf(n);
      r.memory = name(cell);
      if (p == Begin) {
        r.kind = Race::BeforeStart;
        r.owner = ownerOf(cell);
        r.write = writes;
      } else {
        r.first = refOf(p);
      }
      return r;
    };
    int32_t srcRank = info.direct == DirectRole::RemoteSrc ? st.peer : rank;
    int32_t dstRank = info.direct == DirectRole::RemoteDst ? st.peer : rank;
    bool readsSrc = info.readsSrc;
    bool readsDst =
        st.type == StepType::Reduce || st.type == StepType::GetReduce;
    uint32_t src = cellOf(srcRank, {st.srcBuf, st.srcOff});
    uint32_t dst = cellOf(dstRank, {st.dstBuf, st.dstOff});
    uint32_t count = static_cast<uint32_t>(st.count);
    auto noteRemote = [&](uint32_t cell, bool writes) {
      int32_t owner = ownerOf(cell);
      if (owner == rank)
        return;
      auto [it, fresh] = remote[owner].try_emplace(t, s, cell, writes);
      int32_t pos = std::get<0>(it->second);
      bool wrote = std::get<2>(it->second);
      if (!fresh && (s > pos || (s == pos && writes && !wrote)))
        it->second = {s, cell, writes};
    };
    for (uint32_t i = 0; i < count; ++i)
      for (uint32_t c : {readsSrc ? src + i : NoStep, readsDst ? dst + i : NoStep})
        if (c != NoStep) {
          if (lastWriter[c] != n && !ordered(lastWriter[c], c))
            return race(lastWriter[c], c, false);
          noteRemote(c, false);
        }
    if (info.writesDst)
      for (uint32_t c = dst; c < dst + count; ++c) {
        if (!ordered(lastWriter[c], c))
          return race(lastWriter[c], c, true);
        std::optional<Race> found;
        pool.forEach(readers[c], [&](uint32_t r) {
          if (r != n && !ordered(r, c))
            found = race(r, c, true);
        });
        if (found)
          return found;
        noteRemote(c, true);
      }
    recordAccesses(pool, readers, lastWriter, n, readsSrc, info.writesDst, src, dst, count);
  }

  // The owner's end of the call must follow every peer's access: some tb
  // of the owner must know of it.
  for (int32_t g = 0; g < ngpus; ++g) {
    if (remote[g].empty())
      continue;
    Knowledge ends;
    for (int32_t t = tbBase[g]; t < tbBase[g + 1]; ++t)
      for (Wait fact : knowledge[t])
        learn(ends, fact);
    for (const auto &[tb, last] : remote[g]) {
      auto [pos, cell, writes] = last;
      if (known(ends, tb) >= pos)
        continue;
      Race r;
      r.kind = Race::AfterEnd;
      r.second = refOf(first[tb] + static_cast<uint32_t>(pos));
      r.memory = name(cell);
      r.owner = g;
      r.write = writes;
      return r;
    }
  }
  return std::nullopt;
}

} // namespace

std::optional<Race> findRace(const Algorithm &alg, bool inplace) {
  if (alg.hasDirectSteps())
    return findDirectRace(alg, inplace);
  int32_t perBlock = blockShape(alg).chunksPerBlock;
  for (int32_t g = 0; g < alg.ngpus(); ++g) {
    const Gpu &gpu = alg.gpus[g];
    // Nodes: the rank's steps, tb by tb.
    std::vector<uint32_t> first;
    std::vector<Wait> where; // (tb, step) of each node
    for (int32_t t = 0; t < static_cast<int32_t>(gpu.tbs.size()); ++t) {
      first.push_back(static_cast<uint32_t>(where.size()));
      for (int32_t s = 0; s < static_cast<int32_t>(gpu.tbs[t].steps.size());
           ++s)
        where.emplace_back(t, s);
    }
    auto step = [&](uint32_t n) -> const Step & {
      return gpu.tbs[where[n].first].steps[where[n].second];
    };
    auto depNode = [&](const Step &s) {
      return first[s.depTb] + static_cast<uint32_t>(s.depStep);
    };

    // Kahn over tb order and dependencies.
    // Each step's successors, as one array: next(n).
    std::vector<uint32_t> pending(where.size(), 0);
    std::vector<uint32_t> firstNext(where.size() + 1, 0);
    for (uint32_t n = 0; n < where.size(); ++n) {
      if (where[n].second > 0)
        ++firstNext[n];
      if (step(n).hasDependency())
        ++firstNext[depNode(step(n)) + 1];
    }
    for (size_t n = 0; n < where.size(); ++n)
      firstNext[n + 1] += firstNext[n];
    std::vector<uint32_t> nextList(firstNext.back());
    std::vector<uint32_t> fill(firstNext.begin(), firstNext.end() - 1);
    std::deque<uint32_t> ready;
    for (uint32_t n = 0; n < where.size(); ++n) {
      if (where[n].second > 0) {
        ++pending[n];
        nextList[fill[n - 1]++] = n;
      }
      if (step(n).hasDependency()) {
        ++pending[n];
        nextList[fill[depNode(step(n))]++] = n;
      }
      if (pending[n] == 0)
        ready.push_back(n);
    }
    auto next = [&](uint32_t n) {
      return llvm::ArrayRef<uint32_t>(nextList.data() + firstNext[n],
                                      nextList.data() + firstNext[n + 1]);
    };

    auto cellOf = [&](Slot slot) {
      if (inplace)
        slot = inPlaceOwner(alg.collective, g, perBlock, slot);
      uint32_t local = static_cast<uint32_t>(slot.off);
      if (slot.buf != BufferKind::Input)
        local += static_cast<uint32_t>(gpu.inputChunks);
      if (slot.buf == BufferKind::Scratch)
        local += static_cast<uint32_t>(gpu.outputChunks);
      return local;
    };
    auto name = [&](uint32_t cell) {
      int32_t c = static_cast<int32_t>(cell);
      const char *buf = "i";
      if (c >= gpu.inputChunks) {
        c -= gpu.inputChunks;
        buf = "o";
        if (c >= gpu.outputChunks) {
          c -= gpu.outputChunks;
          buf = "s";
        }
      }
      return std::string(buf) + "[" + std::to_string(c) + "]";
    };
    size_t cells =
        size_t(gpu.inputChunks) + gpu.outputChunks + gpu.scratchChunks;
    std::vector<uint32_t> lastWriter(cells, NoStep);
    std::vector<ReaderPool::List> readers(cells, ReaderPool::Empty);
    ReaderPool pool;
    std::vector<Knowledge> knowledge(gpu.tbs.size());
    std::vector<Knowledge> after(where.size());

    while (!ready.empty()) {
      uint32_t n = ready.front();
      ready.pop_front();
      for (uint32_t m : next(n))
        if (--pending[m] == 0)
          ready.push_back(m);
      int32_t t = where[n].first, s = where[n].second;
      const Step &st = step(n);
      Knowledge &mine = knowledge[t];
      if (st.hasDependency()) {
        for (Wait fact : after[depNode(st)])
          learn(mine, fact);
        learn(mine, {st.depTb, st.depStep});
      }
      if (st.hasDep) {
        after[n] = mine;
        learn(after[n], {t, s});
      }
      auto ordered = [&](uint32_t p) {
        return where[p].first == t
                   ? where[p].second < s
                   : known(mine, where[p].first) >= where[p].second;
      };
      auto race = [&](uint32_t p, uint32_t cell) {
        return Race{Race::Unordered,
                    {g, where[p].first, where[p].second},
                    {g, t, s},
                    name(cell)};
      };

      StepTypeInfo info = stepTypeInfo(st.type);
      if (st.type == StepType::Nop)
        continue;
      // Receiving steps read their local operand only when they reduce;
      // `re` also reads its destination.
      bool readsSrc = info.readsSrc;
      bool readsDst = st.type == StepType::Reduce;
      uint32_t src = cellOf({st.srcBuf, st.srcOff});
      uint32_t dst = cellOf({st.dstBuf, st.dstOff});
      uint32_t count = static_cast<uint32_t>(st.count);
      for (uint32_t i = 0; i < count; ++i)
        for (uint32_t c :
             {readsSrc ? src + i : NoStep, readsDst ? dst + i : NoStep})
          if (c != NoStep && lastWriter[c] != NoStep && lastWriter[c] != n &&
              !ordered(lastWriter[c]))
            return race(lastWriter[c], c);
      if (info.writesDst)
        for (uint32_t c = dst; c < dst + count; ++c) {
          if (lastWriter[c] != NoStep && !ordered(lastWriter[c]))
            return race(lastWriter[c], c);
          // Newest first: the last one found is the oldest unordered
          // reader, the one reported.
          std::optional<Race> found;
          pool.forEach(readers[c], [&](uint32_t r) {
            if (r != n && !ordered(r))
              found = race(r, c);
          });
          if (found)
            return found;
        }
      recordAccesses(pool, readers, lastWriter, n, readsSrc, info.writesDst, src, dst, count);
    }
  }
  return std::nullopt;
}

} // namespace coll::ir
