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

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <climits>
#include <deque>

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

} // namespace

std::optional<Race> findRace(const Algorithm &alg, bool inplace) {
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
        return Race{
            {g, where[p].first, where[p].second}, {g, t, s}, name(cell)};
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
      for (uint32_t i = 0; readsSrc && i < count; ++i)
        if (!info.writesDst || src + i < dst || src + i >= dst + count)
          pool.push(readers[src + i], n);
      if (info.writesDst)
        for (uint32_t c = dst; c < dst + count; ++c) {
          lastWriter[c] = n;
          pool.clear(readers[c]);
        }
    }
  }
  return std::nullopt;
}

} // namespace coll::ir
