//===- Contributions.cpp - Sets of contributions as runs ------------------===//

#include "coll/ir/Contributions.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <cassert>
#include <memory>
#include <new>

namespace coll::ir {

static_assert(sizeof(ContribSet) == 8, "a set is one word");

ContribSet ContribSet::range(uint32_t lo, uint32_t hi) {
  assert(lo <= hi && "a run ends after it starts");
  if (lo < hi && hi >= SharedTag)
    return ofRuns({Run{lo, hi}});
  ContribSet set;
  if (lo < hi)
    set.one = {lo, hi};
  return set;
}

ContribSet::Heap *ContribSet::Heap::make(llvm::ArrayRef<Run> runs) {
  void *memory = ::operator new(sizeof(Heap) + runs.size() * sizeof(Run));
  auto *heap = new (memory) Heap;
  heap->count = static_cast<uint32_t>(runs.size());
  std::uninitialized_copy(runs.begin(), runs.end(), reinterpret_cast<Run *>(heap + 1));
  return heap;
}

void ContribSet::Heap::destroy(Heap *heap) {
  heap->~Heap();
  ::operator delete(heap);
}

ContribSet ContribSet::ofRuns(llvm::ArrayRef<Run> runs) {
  if (runs.empty())
    return {};
  if (runs.size() == 1 && runs[0].hi < SharedTag)
    return range(runs[0].lo, runs[0].hi);
  assert(runs.size() <= UINT32_MAX && "runs of 32-bit keys");
  Heap *heap = Heap::make(runs);
  auto address = reinterpret_cast<uint64_t>(heap);
  assert((address >> 63) == 0 && "addresses fit in 63 bits");
  ContribSet set;
  set.one = {static_cast<uint32_t>(address),
             static_cast<uint32_t>(address >> 32) | SharedTag};
  return set;
}

ContribSet ContribSet::ofKeys(std::vector<uint32_t> keys) {
  llvm::sort(keys);
  std::vector<Run> runs;
  for (uint32_t key : keys) {
    assert((runs.empty() || runs.back().hi <= key) && "a key twice");
    if (!runs.empty() && runs.back().hi == key)
      ++runs.back().hi;
    else
      runs.push_back({key, key + 1});
  }
  return ofRuns(runs);
}

llvm::ArrayRef<ContribSet::Run> ContribSet::runs() const {
  if (shared())
    return heap()->runs();
  if (one.lo == one.hi)
    return {};
  return llvm::ArrayRef<Run>(one);
}

uint64_t ContribSet::size() const {
  uint64_t n = 0;
  for (const Run &run : runs())
    n += run.hi - run.lo;
  return n;
}

bool ContribSet::contains(uint32_t key) const {
  llvm::ArrayRef<Run> all = runs();
  auto it = std::upper_bound(all.begin(), all.end(), key,
                             [](uint32_t k, const Run &r) { return k < r.hi; });
  return it != all.end() && it->lo <= key;
}

std::optional<ContribSet> ContribSet::unite(const ContribSet &a,
                                            const ContribSet &b,
                                            uint32_t &common) {
  llvm::ArrayRef<Run> x = a.runs(), y = b.runs();
  if (x.empty())
    return b;
  if (y.empty())
    return a;
  // The common case of a chain of reductions: one set just below or above
  // the other.
  if (x.size() == 1 && y.size() == 1) {
    if (x[0].hi == y[0].lo)
      return range(x[0].lo, y[0].hi);
    if (y[0].hi == x[0].lo)
      return range(y[0].lo, x[0].hi);
  }
  llvm::SmallVector<Run, 8> out;
  out.reserve(x.size() + y.size());
  size_t i = 0, j = 0;
  while (i < x.size() || j < y.size()) {
    bool takeX = j == y.size() || (i < x.size() && x[i].lo < y[j].lo);
    const Run &next = takeX ? x[i++] : y[j++];
    if (!out.empty() && next.lo < out.back().hi) {
      common = next.lo;
      return std::nullopt;
    }
    if (!out.empty() && next.lo == out.back().hi)
      out.back().hi = next.hi;
    else
      out.push_back(next);
  }
  return ofRuns(out);
}

std::vector<uint32_t> ContribSet::keys() const {
  std::vector<uint32_t> all;
  all.reserve(size());
  for (const Run &run : runs())
    for (uint32_t k = run.lo; k < run.hi; ++k)
      all.push_back(k);
  return all;
}

std::vector<uint32_t> ContribSet::ids(const ContribLayout &layout) const {
  std::vector<uint32_t> all = keys();
  for (uint32_t &k : all)
    k = layout.id(k);
  llvm::sort(all);
  return all;
}

bool operator==(const ContribSet &a, const ContribSet &b) {
  if (a.shared() && a.one == b.one)
    return true;
  llvm::ArrayRef<ContribSet::Run> x = a.runs(), y = b.runs();
  return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin());
}

} // namespace coll::ir
