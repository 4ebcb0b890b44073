//===- Symbolic.h - Memory of sets of contributions --------------*- C++ -*-===//
//
// The one symbolic executor of the project: every chunk slot of every rank
// holds the set of original input chunks (contributions) its data carries.
// A copy replaces a set; a reduction unites two disjoint ones (a
// contribution in both would be counted twice). At the end the outputs are
// compared with a collective's Definition.
//
// `collir --check` and collrun run an IR file on it (executeSymbolically,
// Check.h); the compiler runs both its traced program, in program order,
// and the IR it compiled from it (docs/COMPILER.md, "Verification").
//
// Sets are runs of keys (Contributions.h): a copy costs a run or a pointer,
// and a reduction along a ring or a tree stays one or two runs. An empty set
// is data nobody defined (a slot read before anything was written to it):
// harmless until it reaches a constrained output chunk, unless reads are
// strict.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_IR_SYMBOLIC_H
#define COLL_IR_SYMBOLIC_H

#include "coll/ir/Algorithm.h"
#include "coll/ir/Contributions.h"
#include "coll/ir/Memory.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace coll::ir {

class SymbolicMemory {
public:
  using Contents = ContribSet;
  static constexpr uint64_t NoWriter = ~uint64_t(0);

  /// Chunks of one rank's buffers.
  struct RankChunks {
    int32_t input = 0, output = 0, scratch = 0;
  };
  /// The memory of `def.nranks` ranks of `sizes`, in one call mode; in place,
  /// slots alias as `kind` defines (inPlaceOwner, with `chunksPerBlock`).
  /// Input chunks that `def` defines hold their contribution
  /// `rank * def.inputChunks + index`. `strict`: reading data nobody
  /// defined is an error.
  SymbolicMemory(Collective kind, int32_t chunksPerBlock, const Definition &def,
                 std::vector<RankChunks> sizes, bool inplace, bool strict);

  /// The contents of `count` slots from `slot`; strictly, an error when one
  /// holds no data.
  std::optional<std::string> read(int32_t rank, Slot slot, int32_t count,
                                  llvm::SmallVectorImpl<Contents> &out) const;
  /// Writes `values` from `slot`, recording `writer` (any tag below
  /// 2^32 - 1, such as a step's position) as their last writer; out of
  /// place, the input may not be written.
  std::optional<std::string> write(int32_t rank, Slot slot, llvm::ArrayRef<Contents> values,
                                   uint64_t writer);
  /// The last writer of `slot` (NoWriter: none).
  uint64_t writer(int32_t rank, Slot slot) const;
  /// `into[i] := into[i] (+) with[i]`; undefined data stays undefined.
  std::optional<std::string> reduce(llvm::SmallVectorImpl<Contents> &into,
                                    llvm::ArrayRef<Contents> with) const;
  /// Operands that share memory without being the same slots would be read
  /// and written chunk by chunk in an order-dependent way.
  std::optional<std::string> checkOverlap(int32_t rank, Slot src, Slot dst, int32_t count) const;

  /// The first output chunk that does not hold what the definition expects.
  struct WrongOutput {
    int32_t rank = 0;
    Slot slot;
    std::string message;
  };
  std::optional<WrongOutput> firstWrongOutput() const;

  /// "rank 1 o[3]".
  std::string name(int32_t rank, Slot slot) const;

private:
  uint32_t cell(int32_t rank, Slot slot) const;
  std::string contrib(uint32_t id) const;
  std::string describe(const Contents &set) const;

  Collective kind;
  int32_t perBlock;
  const Definition &def;
  bool inplace, strict;
  std::vector<RankChunks> sizes;
  std::vector<uint32_t> base; ///< first cell of each rank
  std::vector<Contents> cells;
  static constexpr uint32_t NoWriter32 = ~uint32_t(0);
  /// Last writer of each cell (NoWriter32: none).
  std::vector<uint32_t> writers;
};

} // namespace coll::ir

#endif // COLL_IR_SYMBOLIC_H
