//===- ChunkDag.h - The traced program handed to the compiler ---*- C++ -*-===//
//
// The tracer evaluates a .coll program and records, in program order, every
// chunk operation it performs (a copy or a reduction of `size` contiguous
// chunks from one slot range to another), with the scheduling hints the
// author gave and the source location of the call. The data dependencies
// between operations (read-after-write, write-after-read, write-after-write
// on the chunk slots they touch) are recorded with each operation, so the
// operations form a DAG whose edges always point to earlier operations.
//
// Slots are canonical: for in-place collectives, references to the output
// buffer are rewritten to the input slots they alias (or the reverse for
// allgather/gather, whose input lives inside the output), so two operations
// touching the same memory always name the same slot.
//
// The collective's postcondition is part of the DAG, so that later stages can
// re-verify what they emit (symbolic execution of the IR) against the same
// definition the tracer checked.
//
// This header has no ANTLR types: the compiler depends on it alone.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_LANG_CHUNKDAG_H
#define COLL_LANG_CHUNKDAG_H

#include "coll/ir/Algorithm.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/SMLoc.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace coll::lang {

/// A buffer of one rank. Scratch buffers are named by the program
/// (`scratch("tmp")`); id 0 is the unnamed `scratch`.
struct BufferId {
  ir::BufferKind kind = ir::BufferKind::Input;
  uint32_t scratchId = 0; ///< only for Scratch: index into ChunkDag::scratchNames

  friend bool operator==(const BufferId &, const BufferId &) = default;
};

/// The first of `size` contiguous chunks of a buffer on a rank.
struct SlotRange {
  int32_t rank = 0;
  BufferId buffer;
  int32_t index = 0;
  int32_t size = 1;

  friend bool operator==(const SlotRange &, const SlotRange &) = default;
};

/// An original input chunk: contribution `rank * inputChunks + index`, where
/// inputChunks is CollectiveSpec::inputChunks.
using ContribId = uint32_t;

enum class OpKind : uint8_t {
  Copy,   ///< dst := src
  Reduce, ///< dst := dst (+) src
};

/// How an operation between two ranks moves its data (docs/LANGUAGE.md,
/// "Direct access"): through a connection FIFO, or by one of the two ranks
/// loading or storing the other's memory itself.
enum class Direct : uint8_t {
  None, ///< a FIFO transfer (or a local operation)
  Put,  ///< the source's rank stores into the destination (copies only)
  Get,  ///< the destination's rank loads the source (`get`, `get_reduce`)
};

/// One traced chunk operation. src and dst have the same size; they may be
/// on different ranks (then the data crosses a connection).
struct ChunkOp {
  ChunkOp() = default;
  ChunkOp(const ChunkOp &) = default;
  ChunkOp &operator=(const ChunkOp &) = default;
  /// Declared noexcept (SmallVector's are not, though they do not throw),
  /// so that a growing std::vector moves operations instead of copying
  /// them.
  ChunkOp(ChunkOp &&) noexcept = default;
  ChunkOp &operator=(ChunkOp &&) noexcept = default;

  OpKind kind = OpKind::Copy;
  Direct direct = Direct::None;
  SlotRange src, dst;
  /// Scheduling hints from the program (`ch=`, `sendtb=`, `recvtb=`); -1 when
  /// not given. A direct operation's `tb=` is the sendtb of a put and the
  /// recvtb of a get: the tb of the rank that runs it.
  int32_t channel = -1, sendTb = -1, recvTb = -1;
  /// Number of parts the enclosing `parallelize(n)` blocks split this
  /// operation into (the product of nested factors; 1 outside any block).
  int32_t parallel = 1;
  /// Earlier operations (indices into ChunkDag::ops) this one must follow.
  /// Sorted, unique. Most operations have one or two, held inline (a
  /// program may trace millions of operations).
  llvm::SmallVector<uint32_t, 2> deps;
  llvm::SMLoc loc; ///< the `.copy`/`.reduce` call
  /// The innermost user-function call active when the operation was traced
  /// (an index into ChunkDag::calls), or NoCall at the top level.
  uint32_t call = NoCall;
  static constexpr uint32_t NoCall = ~uint32_t(0);
};

/// The rank that runs a direct operation, and the other one, whose memory it
/// reaches.
inline int32_t directRank(const ChunkOp &op) {
  return op.direct == Direct::Put ? op.src.rank : op.dst.rank;
}
inline int32_t directPeer(const ChunkOp &op) {
  return op.direct == Direct::Put ? op.dst.rank : op.src.rank;
}

/// A call of a user function that traced operations: where it was called
/// from, and the call it was made in (ChunkOp::NoCall at the top level).
/// Operations traced in one activation of a function share its entry.
struct CallSite {
  llvm::SMLoc loc;
  uint32_t parent = ChunkOp::NoCall;
};

/// The collective a program declares: its shape, and as an ir::Definition
/// (nranks, inputChunks, outputChunks per rank) its precondition,
/// `inputDefined[rank][index]`, whether that input chunk carries a
/// contribution when the collective starts, and its postcondition,
/// `want(rank, index)`, the contributions output chunk `index` of `rank`
/// must hold exactly (once each): a built-in collective's by rule, a custom
/// one's listed in `expected`; an empty set means the chunk's final content
/// is not constrained. For in-place collectives the slot is the canonical
/// one it aliases.
struct CollectiveSpec : ir::Definition {
  CollectiveSpec() { nranks = 1; }
  ir::Collective kind = ir::Collective::Custom;
  /// Chunks per `count`-element block (ir::BlockShape::chunksPerBlock).
  int32_t chunksPerBlock = 1;
  int32_t root = -1;
  bool inplace = false;
  llvm::SMLoc loc; ///< the `collective` declaration
};

/// Program-wide options (`option name = value`), before command-line
/// overrides are applied by the driver.
struct ProgramOptions {
  std::string name;
  std::optional<ir::Protocol> protocol;
  int32_t instances = 1;
  /// Threadblock assignment: automatic unless the program asks for manual
  /// (then every cross-rank operation must name its tbs).
  bool manualThreadblocks = false;
  bool fusion = true;
  uint64_t minBytes = 0, maxBytes = 0;
};

struct ChunkDag {
  CollectiveSpec collective;
  ProgramOptions options;
  /// Names of the scratch buffers; index = BufferId::scratchId. Entry 0 is
  /// "scratch".
  std::vector<std::string> scratchNames;
  /// scratchChunks[rank][scratchId]: chunks of that scratch buffer the
  /// program uses on that rank (highest index + size).
  std::vector<std::vector<int32_t>> scratchChunks;
  std::vector<ChunkOp> ops;
  std::vector<CallSite> calls; ///< ChunkOp::call chains
};

/// `1:input[3]`, `0:scratch[2:4]` (chunks 2 and 3), `2:scratch("tmp")[0]`.
std::string formatSlots(const SlotRange &range,
                        llvm::ArrayRef<std::string> scratchNames);
/// `input`, `output`, `scratch`, `scratch("tmp")`.
std::string formatBuffer(BufferId buffer,
                         llvm::ArrayRef<std::string> scratchNames);
/// `in(2,1)`: input chunk 1 of rank 2.
std::string formatContrib(ContribId id, int32_t inputChunks);

} // namespace coll::lang

#endif // COLL_LANG_CHUNKDAG_H
