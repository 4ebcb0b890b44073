//===- Tracer.h - Symbolic buffers and the traced operations ----*- C++ -*-===//
//
// The tracer keeps, for every chunk slot of every rank, the set of original
// input chunks (contributions) it currently holds, and records each copy and
// reduction the program performs together with its dependencies. Sets are
// immutable and shared, so a copy costs a pointer and a reduction allocates
// only its result.
//
// The interpreter checks that every reference is in range before it calls
// the tracer; the tracer checks what depends on buffer contents (reading
// what was never written, duplicated contributions, writes to a read-only
// input) and, at the end, the collective's postcondition.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_LANG_TRACER_H
#define COLL_LANG_TRACER_H

#include "coll/lang/ChunkDag.h"
#include "coll/lang/Diagnostics.h"
#include "coll/ir/ReaderLists.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace coll::lang {

/// The geometry, precondition and postcondition of a built-in collective
/// (docs/ARCHITECTURE.md §5 and docs/LANGUAGE.md).
CollectiveSpec makeBuiltinSpec(ir::Collective kind, int32_t nranks,
                               int32_t chunksPerBlock, int32_t root,
                               bool inplace);

class Tracer {
public:
  explicit Tracer(DiagnosticEngine &diags) : diags(diags) {
    scratch("scratch");
  }

  /// Starts tracing `spec`: the input slots hold their contributions.
  void declare(CollectiveSpec spec);
  bool declared() const { return isDeclared; }
  const CollectiveSpec &spec() const { return dag.collective; }
  llvm::ArrayRef<std::string> scratchNames() const { return dag.scratchNames; }

  /// While a custom collective's pre and post blocks run: input chunk
  /// (rank, index) is defined; output chunk (rank, index) must also hold
  /// `contrib` (reporting errors at `loc`).
  void provide(int32_t rank, int32_t index);
  bool expect(int32_t rank, int32_t index, ContribId contrib, llvm::SMLoc loc);

  /// The named scratch buffer, created on first use.
  BufferId scratch(llvm::StringRef name);
  /// The chunks of scratch buffer `buffer` that `rank` uses so far: where a
  /// copy without an index appends.
  int32_t scratchEnd(int32_t rank, BufferId buffer) const;

  /// Records a call of a user function made at `loc` within call `parent`
  /// (ChunkOp::NoCall at the top level); returns its id for ChunkOp::call.
  uint32_t call(llvm::SMLoc loc, uint32_t parent) {
    dag.calls.push_back({loc, parent});
    return static_cast<uint32_t>(dag.calls.size() - 1);
  }

  /// Where the interpreter's diagnostics point, one location per operand.
  struct Sites {
    llvm::SMLoc call; ///< the method name
    llvm::SMLoc src;  ///< the expression producing the source reference
    llvm::SMLoc dst;  ///< the destination reference (reduce) or buffer (copy)
  };
  /// Traces `dst := src` (kind Copy) or `dst := dst (+) src` (kind Reduce).
  /// `op` carries the kind, scheduling hints and location; src and dst are
  /// as the program named them.
  bool record(ChunkOp op, const Sites &sites);

  /// The single contribution the first chunk of `ref` holds, or an error
  /// naming `what` (the property asked for).
  std::optional<ContribId> origin(const SlotRange &ref, llvm::StringRef what,
                                  llvm::SMLoc loc);
  /// The output slot that must hold `contrib` and nothing else.
  std::optional<SlotRange> destination(ContribId contrib, llvm::StringRef what,
                                       llvm::SMLoc loc);

  /// Checks the postcondition and the options' demands on the operations,
  /// and hands over the DAG.
  std::optional<ChunkDag> finish(ProgramOptions options);

  /// Chunks moved by the operations traced so far (each operation counts
  /// its size).
  uint64_t chunksTraced() const { return chunksMoved; }

private:
  using ContribSet = ir::ContribSet;
  using Contents = ContribSet;
  struct Slot {
    Contents contents; ///< empty: holds nothing
    int32_t lastWriter = -1;
    ir::ReaderPool::List readers = ir::ReaderPool::Empty; ///< since the last write
  };

  /// The slots a reference names: rewritten to the buffer that owns the
  /// memory when input and output alias.
  SlotRange canonical(const SlotRange &ref) const;
  /// The slot, or null for scratch slots beyond what was ever written.
  Slot *find(int32_t rank, BufferId buffer, int32_t index);
  /// The rank's slots of `buffer`, made (with their initial contents) the
  /// first time an input or output buffer is touched.
  std::vector<Slot> &materialize(int32_t rank, BufferId buffer);
  /// What a canonical slot holds before any operation wrote it.
  ContribSet initialContents(int32_t rank, BufferId buffer, int32_t index) const;
  /// Reports the first slot of `ref` (as named) that holds nothing.
  bool checkDefined(const SlotRange &ref, llvm::SMLoc loc);
  std::string describe(const SlotRange &range) const {
    return formatSlots(range, dag.scratchNames);
  }
  std::string describe(ContribId id) const {
    return formatContrib(id, dag.collective.inputChunks);
  }

  DiagnosticEngine &diags;
  ChunkDag dag;
  bool isDeclared = false;
  uint64_t chunksMoved = 0;
  llvm::StringMap<uint32_t> scratchIds;
  /// slots[rank][buffer]: input, output, then one per scratch buffer.
  std::vector<std::vector<std::vector<Slot>>> slots;
  /// Slots of a rank's input and output buffer (0 for the buffer that an
  /// in-place collective aliases onto the other).
  int32_t ownedChunks[2] = {0, 0};
  /// For each contribution, the output slot expecting it alone: -1 none,
  /// -2 several; computed on first use.
  std::vector<int64_t> destinations;
  /// The readers of every slot since its last write.
  ir::ReaderPool readerPool;
};

} // namespace coll::lang

#endif // COLL_LANG_TRACER_H
