//===- Program.h - The compiler's working form of a program -----*- C++ -*-===//
//
// Private to the passes (docs/COMPILER.md). A Program is the traced DAG
// lowered to instructions, one per IR step to be, in program order: every
// operation is cut into `lanes`-many parts (refinement), and each part
// becomes a `cpy`/`re` on one rank or an `s` on the source rank followed by
// an `r`/`rrc` on the destination rank. Instruction ids are that order, so
// dependencies always point to smaller ids.
//
// Passes then annotate the instructions in place: dependencies, fusion
// (an `r`/`rrc` absorbs the `s` that forwards its result), threadblocks and
// each threadblock's order.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_COMPILER_PROGRAM_H
#define COLL_COMPILER_PROGRAM_H

#include "coll/compiler/Compiler.h"
#include "coll/ir/Memory.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace coll::compiler {

/// DenseMap keys that pack several fields into the bits of an integer
/// (rank pairs, node identities): DenseMap's own hash of integers (k * 37,
/// truncated to 32 bits) would see only the low fields, and every key that
/// differs in the high ones would probe the same chain.
struct PackedKeyInfo {
  static uint64_t getEmptyKey() { return ~uint64_t(0); }
  static uint64_t getTombstoneKey() { return ~uint64_t(0) - 1; }
  static unsigned getHashValue(uint64_t key) {
    key ^= key >> 31;
    key *= 0x9e3779b97f4a7c15ull;
    return static_cast<unsigned>(key >> 32);
  }
  static bool isEqual(uint64_t a, uint64_t b) { return a == b; }
};

using InstrId = uint32_t;
inline constexpr InstrId NoInstr = ~InstrId(0);

/// Slots of the connection FIFOs (docs/ARCHITECTURE.md §3): a send of more slices than
/// are free waits for the receiver.
inline constexpr int32_t FifoSlots = 8;

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

/// A chunk of a buffer as the IR names it (scratch offsets include the base
/// of the named buffer), and in-place aliasing (coll/ir/Memory.h).
using ir::Slot;
using ir::inPlaceOwner;

/// The refined geometry of a compilation: how traced slots map to IR slots
/// and to *cells*, the units of memory that dependencies are computed on.
struct Layout {
  ir::Collective kind = ir::Collective::Custom;
  int32_t nranks = 1;
  int32_t refinement = 1;     ///< R: refined chunks per traced chunk
  int32_t chunksPerBlock = 1; ///< refined
  int32_t inputChunks = 0, outputChunks = 0; ///< refined, per rank
  /// Per rank: refined chunks of the IR scratch buffer, and where each named
  /// scratch buffer starts in it (scratchBase[rank][scratchId]).
  std::vector<int32_t> scratchChunks;
  std::vector<std::vector<int32_t>> scratchBase;
  /// Cells alias input and output as in place.
  bool aliasCells = false;
  std::vector<uint32_t> cellBase; ///< per rank, then the total
  bool traceInPlace = false;

  uint32_t numCells() const { return cellBase.back(); }
  /// The cell an IR slot of `rank` names.
  uint32_t cell(int32_t rank, Slot slot) const;
  /// The IR slot of refined chunk `index` of a traced buffer, as traced.
  Slot traced(int32_t rank, lang::BufferId buffer, int32_t index) const;
  /// For an in-place trace: the input and output names of an owner slot, if
  /// the other buffer aliases it.
  std::optional<Slot> inputView(int32_t rank, Slot owner) const;
  std::optional<Slot> outputView(int32_t rank, Slot owner) const;
};

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

/// (chain head, position): the program-order priority of an instruction.
/// A chain is a sequence of fused transfers (s -> rcs -> ... -> r); its
/// members share the head's id and count positions along it, so that the
/// two ends of every connection agree (docs/COMPILER.md, "Ordering").
struct Key {
  InstrId head = 0;
  uint32_t pos = 0;
  friend auto operator<=>(const Key &, const Key &) = default;
  uint64_t packed() const { return (uint64_t(head) << 32) | pos; }
};

struct Instr {
  Instr() = default;
  Instr(const Instr &) = default;
  Instr &operator=(const Instr &) = default;
  /// Declared noexcept (SmallVector's are not, though they do not throw),
  /// so that a growing std::vector moves instructions instead of copying
  /// them.
  Instr(Instr &&) noexcept = default;
  Instr &operator=(Instr &&) noexcept = default;

  ir::StepType type = ir::StepType::Nop;
  /// Dead-store analysis: distinct instructions that read what this one
  /// wrote (0, 1 or 2 = more), and whether a cell it wrote is still its at
  /// the end and constrained by the postcondition (firstReader below: the
  /// first of those readers). Next to `type` to save padding: a program may
  /// have millions of instructions.
  uint8_t readers = 0;
  bool liveAtEnd = false;
  int32_t rank = 0;
  int32_t channel = 0;
  int32_t lane = 0;
  int32_t count = 1;
  /// The local operands. Receiving types name their local operand in src
  /// (equal to dst for r/rcs); the dst of `s` names the remote slot. Direct
  /// types name their remote operand (the src of get/getre, the dst of put)
  /// in the peer's memory.
  Slot src, dst;
  /// FIFO types: the connection's peers. Direct types (put, get, getre,
  /// signal, wait): sendPeer is the step's peer (peer() below).
  int32_t sendPeer = -1, recvPeer = -1;
  uint32_t op = NoOp;          ///< the ChunkOp (fused: the received one)
  uint32_t forwardedOp = NoOp; ///< fused: the ChunkOp of the absorbed send
  /// Threadblock ids the program asked for (`sendtb=`, `recvtb=`), expanded
  /// to this lane; -1 when not given.
  int32_t sendTbHint = -1, recvTbHint = -1;
  /// Receiving: the instruction whose data it receives. Sending: the one
  /// that receives its data. A wait: its signal; a signal: its wait.
  InstrId from = NoInstr, to = NoInstr;
  Key key;
  /// An `s` fused into a receive, or a `re` fused into the `re` that
  /// heads its group.
  InstrId absorbedInto = NoInstr;
  InstrId absorbed = NoInstr; ///< the `s` a fused receive absorbed
  /// A fused `re` group (one n-ary reduction into one destination): the
  /// next member after this one, in reduction order. The head is live and
  /// carries the group's dependencies; each member keeps its own source and
  /// operation.
  InstrId nextSource = NoInstr;
  InstrId firstReader = NoInstr; ///< dead-store analysis (readers above)
  int32_t tb = -1; ///< IR id within the rank
  /// Same-rank instructions that must complete first; sorted.
  llvm::SmallVector<InstrId, 2> deps;

  bool sends() const { return ir::stepTypeInfo(type).sends; }
  bool receives() const { return ir::stepTypeInfo(type).receives; }
  /// Runs on one tb without a connection: cpy, re and the direct data
  /// steps (put, get, getre).
  bool isLocal() const {
    return type == ir::StepType::Copy || type == ir::StepType::Reduce ||
           type == ir::StepType::Put || type == ir::StepType::Get ||
           type == ir::StepType::GetReduce;
  }
  bool isDirect() const {
    return ir::stepTypeInfo(type).direct != ir::DirectRole::None;
  }
  bool isSync() const {
    return type == ir::StepType::Signal || type == ir::StepType::Wait;
  }
  int32_t peer() const { return isDirect() ? sendPeer : -1; }
  /// The ranks whose memory the src and dst operands are in.
  int32_t srcRank() const {
    return type == ir::StepType::Get || type == ir::StepType::GetReduce
               ? sendPeer
               : rank;
  }
  int32_t dstRank() const {
    return type == ir::StepType::Put ? sendPeer : rank;
  }
  bool live() const { return absorbedInto == NoInstr; }
};
static_assert(sizeof(Instr) <= 120, "an instruction stays small");

struct Threadblock {
  Threadblock() = default;
  Threadblock(const Threadblock &) = default;
  Threadblock &operator=(const Threadblock &) = default;
  Threadblock(Threadblock &&) noexcept = default; // moved, not copied, as vectors grow
  Threadblock &operator=(Threadblock &&) noexcept = default;

  int32_t sendPeer = -1, recvPeer = -1, channel = 0;
  /// Its instructions, in execution order once ordered; one inline (a
  /// 128-rank all-pairs alltoall has 32,512 tbs of one instruction).
  llvm::SmallVector<InstrId, 1> instrs;
};

struct Program {
  const lang::ChunkDag *dag = nullptr;
  Layout layout;
  int32_t lanes = 1; ///< parts of an operation: instances * maxParallel
  int32_t maxParallel = 1;
  int32_t channelStride = 1; ///< channels one lane uses
  /// Per rank: how far apart the program's tb ids of consecutive lanes are
  /// (the rank's largest id + 1).
  std::vector<int32_t> tbStride;
  /// The channel of each traced operation before lanes: its hint, or the
  /// one assignChannels chose.
  std::vector<int32_t> opChannel;
  std::vector<Instr> instrs;
  /// tbs[rank][id]; the ids the program named in their order, then the
  /// others, dense (ids nothing uses are dropped).
  std::vector<std::vector<Threadblock>> tbs;
  Ordering ordering = Ordering::Simulated;
  bool fused = false;
};

//===----------------------------------------------------------------------===//
// Knowledge
//===----------------------------------------------------------------------===//

/// (tb, position in it).
using Wait = std::pair<int32_t, int32_t>;
/// What one tb of a rank knows to have completed, in the same pipeline
/// iteration: per other tb, the last position (dependency flags are
/// monotone, so waiting for a step covers the ones before it). Sorted by
/// tb.
using Knowledge = llvm::SmallVector<Wait, 2>;

/// The last position of `tb` known complete, or -1.
inline int32_t known(const Knowledge &knowledge, int32_t tb) {
  auto it = llvm::lower_bound(knowledge, Wait{tb, INT32_MIN});
  return it != knowledge.end() && it->first == tb ? it->second : -1;
}

inline void learn(Knowledge &knowledge, Wait fact) {
  auto it = llvm::lower_bound(knowledge, Wait{fact.first, INT32_MIN});
  if (it != knowledge.end() && it->first == fact.first)
    it->second = std::max(it->second, fact.second);
  else
    knowledge.insert(it, fact);
}

//===----------------------------------------------------------------------===//
// Passes (docs/COMPILER.md), in pipeline order
//===----------------------------------------------------------------------===//

/// Channels automatic channels spread flows over, lanes included.
inline constexpr int32_t MaxAutoChannels = 32;

/// A channel for every operation: its hint, or one that keeps independent
/// flows apart (Channels.cpp).
void assignChannels(const lang::ChunkDag &dag, Program &prog);

/// Refinement and geometry: channels (assignChannels), R, lanes, scratch
/// layout, cells.
/// Reports programs whose refinement or hints are out of range.
bool buildLayout(const lang::ChunkDag &dag, Program &prog,
                 lang::DiagnosticEngine &diags);

/// Every operation part -> instructions, with IR slots.
void lower(Program &prog);

/// Dependencies on cells (last writer / readers since), and the facts the
/// dead-store analysis needs.
void computeDependencies(Program &prog);

/// Signals and waits for direct operations (Signals.cpp): every dependency
/// between instructions of two ranks becomes a signal after the producer
/// and a wait before the consumer, and every access to a peer's memory is
/// ordered after the peer started the call and before it ends it. Renumbers
/// the instructions; a no-op for programs without direct operations.
void insertSignals(Program &prog);

/// Drops the signal/wait pairs that the tb order made redundant: each is
/// tried in turn and removed when the whole-job race check and the deadlock
/// simulation still pass without it (Signals.cpp). Programs with more than
/// 512 signals keep theirs.
void pruneSignals(Schedule &schedule);

/// Lets the runtimes fuse a run of `getre` steps into one destination (one
/// read of each source, one write of the sum) or of `put` steps of one
/// source to several peers (one read, a write to each; interp::buildPlan)
/// where an earlier member is waited on (the end signal to its peer, say):
/// what waits on a member then waits on the run's last member instead,
/// where the whole-job race check and the deadlock simulation still pass
/// (Signals.cpp). Also lines up a tb's signals and waits so that runs of
/// them fuse (docs/COMPILER.md, "Signals"); returns whether that moved or
/// joined waits or delayed a signal, which can make a signal pair redundant.
bool joinFusedEnds(Schedule &schedule);

class ThreadblockAssigner;

/// r+s -> rcs, rrc+s -> rrcs where legal; rrcs with a dead store -> rrs;
/// consecutive `re` into one destination -> one n-ary `re` group.
void fuse(Program &prog, ThreadblockAssigner &assigner);

/// Sources of one fused `re` (the runtimes' MaxReduceSources and
/// ir::RuntimeLimits::maxReduceFusion).
inline constexpr int32_t MaxReduceSources = 16;

/// Per-tb instruction order: list scheduling, or program order when the
/// simulation cannot complete. False when neither order runs to completion
/// with bounded FIFOs.
bool order(Program &prog);

/// The IR and the provenance of every step. With `spreading`, waits on
/// several tbs are spread over those tbs (helper nops, which must run as
/// steps: not for MSCCL).
Schedule emit(const Program &prog, bool spreading);

/// verifySchedule in two halves: what the compiler guarantees (a failure is
/// a compiler bug), and the target's limits (a failure is the program's).
std::optional<Modes> checkSchedule(const Schedule &schedule,
                                   const lang::ChunkDag &dag,
                                   lang::DiagnosticEngine &diags);
bool checkLimits(const Schedule &schedule, const lang::ChunkDag &dag,
                 Target target, lang::DiagnosticEngine &diags);

/// Connections of a rank are endpoints "send to P on channel C" and
/// "receive from Q on channel C"; a tb drives at most one of each kind, on
/// one channel, and each endpoint is driven by exactly one tb. Endpoints and
/// the program's tb ids are nodes of a union-find; a fused instruction
/// joins its two endpoints. Conflicts among the program's own ids are
/// errors; fusion only joins what may be joined.
class ThreadblockAssigner {
public:
  ThreadblockAssigner(Program &prog, lang::DiagnosticEngine &diags)
      : prog(prog), diags(diags) {}

  /// Creates the endpoints and applies `sendtb=`/`recvtb=`. False after
  /// reporting conflicting ids.
  bool applyProgramIds();
  /// Whether receive `recv` and send `send` (same rank) may share a tb.
  bool canJoin(const Instr &recv, const Instr &send);
  void join(const Instr &recv, const Instr &send);
  /// Pairs "send to P" with "receive from P" on the same channel, places
  /// local instructions, and numbers the tbs into prog.tbs.
  void assign(bool pairPeers);

private:
  struct Component {
    int32_t rank = 0;
    int32_t sendPeer = -1, recvPeer = -1, channel = -1, programId = -1;
    /// The instructions that brought each fact, for diagnostics.
    InstrId sendBy = NoInstr, recvBy = NoInstr, idBy = NoInstr;
  };
  enum class NodeKind : uint8_t { Send, Recv, ProgramTb, LocalTb };

  uint32_t node(int32_t rank, NodeKind kind, int32_t a, int32_t channel);
  uint32_t find(uint32_t n);
  static bool compatible(const Component &a, const Component &b);
  void merge(uint32_t a, uint32_t b);
  uint32_t endpointOf(const Instr &instr, bool sending);
  bool joinProgramId(InstrId by, bool sending);
  void noteCalls(const lang::ChunkOp &op);

  Program &prog;
  lang::DiagnosticEngine &diags;
  /// Node keys pack (rank, kind, peer or id, channel) into bit fields.
  llvm::DenseMap<uint64_t, uint32_t, PackedKeyInfo> nodes;
  std::vector<uint32_t> parent;
  std::vector<Component> comps;                         ///< valid at roots
  std::vector<std::pair<uint64_t, uint32_t>> sendNodes; ///< creation order
};

} // namespace coll::compiler

#endif // COLL_COMPILER_PROGRAM_H
