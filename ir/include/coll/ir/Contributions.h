//===- Contributions.h - Sets of contributions as runs ----------*- C++ -*-===//
//
// What a chunk's data carries: a set of contributions (original input
// chunks). Symbolic execution (Symbolic.h), the tracer and the
// postconditions all work on these sets, so their size decides how the
// proof scales: a ring allreduce over N ranks and N chunks reduces N chunks
// along N ranks, and as sorted lists of ids its sets hold N^3 entries in all.
//
// A set is stored as sorted, disjoint runs [lo, hi) of keys. A contribution
// `rank * inputChunks + index` has the key `index * nranks + rank`
// (ContribLayout): index-major, so that one chunk index summed over a range
// of ranks — what rings, trees, halving and hierarchies build — is one or two
// runs. A union of such sets costs O(runs), not O(contributions), and the
// contributions of one output chunk of an allreduce are one run.
//
// Sets are values: one run is held inline, more are shared and immutable, so
// copying a set is cheap. The empty set is "no data". A set takes 8 bytes
// (memories of 4096 ranks of 4096 chunks hold tens of millions of them): the
// inline run, or, tagged by the top bit of `hi` (keys stay below 2^31), the
// address of the shared runs with their reference count.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_IR_CONTRIBUTIONS_H
#define COLL_IR_CONTRIBUTIONS_H

#include "llvm/ADT/ArrayRef.h"

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

namespace coll::ir {

/// The key order of the contributions of `nranks` ranks of `inputChunks`
/// input chunks each.
struct ContribLayout {
  uint32_t nranks = 1, inputChunks = 1;

  uint32_t key(uint32_t id) const {
    return (id % inputChunks) * nranks + id / inputChunks;
  }
  uint32_t id(uint32_t key) const {
    return (key % nranks) * inputChunks + key / nranks;
  }
};

class ContribSet {
public:
  struct Run {
    uint32_t lo = 0, hi = 0; ///< keys [lo, hi)
    friend bool operator==(const Run &, const Run &) = default;
  };

  ContribSet() = default;
  ContribSet(const ContribSet &other) : one(other.one) { retain(); }
  ContribSet(ContribSet &&other) noexcept : one(other.one) { other.one = {}; }
  ContribSet &operator=(const ContribSet &other) {
    other.retain();
    release();
    one = other.one;
    return *this;
  }
  ContribSet &operator=(ContribSet &&other) noexcept {
    if (this != &other) {
      release();
      one = other.one;
      other.one = {};
    }
    return *this;
  }
  ~ContribSet() { release(); }

  static ContribSet single(uint32_t key) { return range(key, key + 1); }
  /// Keys [lo, hi).
  static ContribSet range(uint32_t lo, uint32_t hi);
  /// From keys in any order, each at most once.
  static ContribSet ofKeys(std::vector<uint32_t> keys);

  bool empty() const { return one.lo == one.hi && !shared(); }
  /// How many contributions.
  uint64_t size() const;
  llvm::ArrayRef<Run> runs() const;
  bool contains(uint32_t key) const;
  /// The only key of a set of one.
  uint32_t only() const { return shared() ? heap()->runs()[0].lo : one.lo; }

  /// `a` united with `b` when they share nothing; otherwise nothing, and
  /// `common` is the smallest key in both.
  static std::optional<ContribSet> unite(const ContribSet &a,
                                         const ContribSet &b, uint32_t &common);

  /// Every key, in increasing order.
  std::vector<uint32_t> keys() const;
  /// The ids of the keys under `layout`, sorted by id.
  std::vector<uint32_t> ids(const ContribLayout &layout) const;

  friend bool operator==(const ContribSet &a, const ContribSet &b);

private:
  static ContribSet ofRuns(llvm::ArrayRef<Run> runs);

  /// Runs held apart: two or more, or one that ends at 2^31 or later. One
  /// allocation: the count, then the runs.
  struct Heap {
    std::atomic<uint32_t> refs{1};
    uint32_t count = 0;
    llvm::ArrayRef<Run> runs() const {
      return {reinterpret_cast<const Run *>(this + 1), count};
    }
    static Heap *make(llvm::ArrayRef<Run> runs);
    static void destroy(Heap *heap);
  };
  static_assert(sizeof(Heap) % alignof(Run) == 0, "the runs follow the header");
  static constexpr uint32_t SharedTag = 0x80000000u;
  bool shared() const { return (one.hi & SharedTag) != 0; }
  Heap *heap() const {
    return reinterpret_cast<Heap *>(
        (uint64_t(one.hi & ~SharedTag) << 32) | one.lo);
  }
  void retain() const {
    if (shared())
      heap()->refs.fetch_add(1, std::memory_order_relaxed);
  }
  void release() {
    if (shared() && heap()->refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
      Heap::destroy(heap());
  }

  /// The set when it is one run below 2^31; otherwise the address of its
  /// Heap, split over lo (low half) and hi (high half, tagged SharedTag).
  Run one;
};

} // namespace coll::ir

#endif // COLL_IR_CONTRIBUTIONS_H
