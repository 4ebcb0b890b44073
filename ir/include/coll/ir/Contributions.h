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
// copying a set is cheap. The empty set is "no data".
//
//===----------------------------------------------------------------------===//

#ifndef COLL_IR_CONTRIBUTIONS_H
#define COLL_IR_CONTRIBUTIONS_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <memory>
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
  static ContribSet single(uint32_t key) { return range(key, key + 1); }
  /// Keys [lo, hi).
  static ContribSet range(uint32_t lo, uint32_t hi);
  /// From keys in any order, each at most once.
  static ContribSet ofKeys(std::vector<uint32_t> keys);

  bool empty() const { return one.lo == one.hi && !many; }
  /// How many contributions.
  uint64_t size() const;
  llvm::ArrayRef<Run> runs() const;
  bool contains(uint32_t key) const;
  /// The only key of a set of one.
  uint32_t only() const { return one.lo; }

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
  static ContribSet ofRuns(std::vector<Run> runs);

  /// The set when it is one run (many is null); otherwise unused.
  Run one;
  /// Two or more runs.
  std::shared_ptr<const std::vector<Run>> many;
};

} // namespace coll::ir

#endif // COLL_IR_CONTRIBUTIONS_H
