//===- Algorithm.h - The Coll IR data model ---------------------*- C++ -*-===//
//
// The in-memory form of an MSCCL-compatible algorithm (docs/ARCHITECTURE.md §3): an
// algorithm has one Gpu per rank, each Gpu a list of ThreadBlocks, each
// ThreadBlock a list of Steps. Element ids are positions in the vectors
// (gpu i is gpus[i], tb t of that gpu is tbs[t], step s is steps[s]); the
// reader guarantees that the file's ids were dense and in range.
//
// Every element remembers the source line it was read from (0 when it was
// built in memory) so that later diagnostics can point at it. Lines are not
// part of an element's value: operator== ignores them, so that
// read(write(a)) == a holds.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_IR_ALGORITHM_H
#define COLL_IR_ALGORITHM_H

#include "coll/ir/Contributions.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace coll::ir {

//===----------------------------------------------------------------------===//
// Closed sets
//===----------------------------------------------------------------------===//

enum class StepType : uint8_t {
#define COLL_STEP_TYPE(Enum, XmlName, Recv, Send, ReadsSrc, Red, WritesDst, Direct) Enum,
#include "coll/ir/StepTypes.def"
};
inline constexpr unsigned NumStepTypes = 0
#define COLL_STEP_TYPE(Enum, XmlName, Recv, Send, ReadsSrc, Red, WritesDst, Direct) +1
#include "coll/ir/StepTypes.def"
    ;

enum class Collective : uint8_t {
#define COLL_COLLECTIVE(Enum, XmlName, Root, InPerRank, OutPerRank, Red, MulN, Off) Enum,
#include "coll/ir/Collectives.def"
};

enum class Protocol : uint8_t { Simple, LL, LL128 };

/// The three buffers a step can name. In-place calls alias Input and Output
/// (see Geometry.h for the exact aliasing rule of each collective).
enum class BufferKind : uint8_t { Input, Output, Scratch };

/// XML spelling of each element of a closed set ("rrcs", "allreduce", "LL128",
/// "i"), and the inverse. Parsing accepts the aliases the ecosystem writes
/// ("reduce_scatter"); printing always uses the canonical spelling.
llvm::StringRef stepTypeName(StepType type);
std::optional<StepType> parseStepType(llvm::StringRef name);
llvm::StringRef collectiveName(Collective coll);
std::optional<Collective> parseCollective(llvm::StringRef name);
llvm::StringRef protocolName(Protocol proto);
std::optional<Protocol> parseProtocol(llvm::StringRef name);
llvm::StringRef bufferName(BufferKind buffer);
std::optional<BufferKind> parseBuffer(llvm::StringRef name);

/// How a step uses its own `peer` (StepTypes.def, docs/IR.md "Direct
/// steps").
enum class DirectRole : uint8_t {
  None,      ///< a FIFO or local step: no peer of its own
  RemoteSrc, ///< src is the peer's memory (get, getre)
  RemoteDst, ///< dst is the peer's memory (put)
  Signal,    ///< bumps the peer's counter of signals from this rank
  Wait,      ///< waits for the next signal from the peer
};

/// Properties of a step type, from StepTypes.def.
struct StepTypeInfo {
  bool receives, sends, readsSrc, reduces, writesDst;
  DirectRole direct;
  /// Whether the step names a peer of its own (the `peer` attribute).
  bool hasPeer() const { return direct != DirectRole::None; }
};
/// A table lookup, inline: every pass asks for every step.
inline constexpr StepTypeInfo StepTypeInfos[] = {
#define COLL_STEP_TYPE(Enum, XmlName, Recv, Send, ReadsSrc, Red, WritesDst, Direct)              \
  StepTypeInfo{Recv != 0,      Send != 0,      ReadsSrc != 0,                                  \
               Red != 0,       WritesDst != 0, DirectRole::Direct},
#include "coll/ir/StepTypes.def"
};
inline StepTypeInfo stepTypeInfo(StepType type) {
  return StepTypeInfos[static_cast<size_t>(type)];
}

/// Properties of a collective, from Collectives.def.
struct CollectiveInfo {
  bool hasRoot;
  bool inputPerRank;  ///< input holds one `count`-element block per rank
  bool outputPerRank; ///< output holds one `count`-element block per rank
  bool reduces;
  int busMulN, busOffset; ///< busbw = algbw * (busMulN*N + busOffset) / N
};
/// Inline: the runtime asks on every call.
inline CollectiveInfo collectiveInfo(Collective coll) {
  switch (coll) {
#define COLL_COLLECTIVE(Enum, XmlName, Root, InPerRank, OutPerRank, Red, MulN, Off)                \
  case Collective::Enum:                                                                           \
    return CollectiveInfo{Root != 0, InPerRank != 0, OutPerRank != 0, Red != 0, MulN, Off};
#include "coll/ir/Collectives.def"
  }
  return CollectiveInfo{false, false, false, false, 1, 0};
}

//===----------------------------------------------------------------------===//
// Elements
//===----------------------------------------------------------------------===//

/// One `<step>`. Offsets and `count` are in chunks (docs/ARCHITECTURE.md §3).
struct Step {
  StepType type = StepType::Nop;
  BufferKind srcBuf = BufferKind::Input;
  int32_t srcOff = 0;
  BufferKind dstBuf = BufferKind::Input;
  int32_t dstOff = 0;
  int32_t count = 1;
  /// The tb (same rank) and step this one waits for; -1 when none.
  int32_t depTb = -1;
  int32_t depStep = -1;
  /// Other steps wait on this one: it publishes its completion.
  bool hasDep = false;
  /// Direct steps (put, get, getre, signal, wait): the rank whose memory or
  /// counter the step uses; -1 for every other step.
  int32_t peer = -1;
  uint32_t line = 0; ///< source line; not part of the value

  bool hasDependency() const { return depTb >= 0; }
  friend bool operator==(const Step &a, const Step &b);
};

/// One `<tb>`: a sequence of steps run in order, with at most one send peer
/// and one receive peer on channel `channel`.
struct ThreadBlock {
  int32_t sendPeer = -1; ///< -1 when the tb sends nothing
  int32_t recvPeer = -1; ///< -1 when the tb receives nothing
  int32_t channel = 0;
  std::vector<Step> steps;
  uint32_t line = 0;

  friend bool operator==(const ThreadBlock &a, const ThreadBlock &b);
};

/// One `<gpu>`: the program of one rank.
struct Gpu {
  int32_t inputChunks = 0;
  int32_t outputChunks = 0;
  int32_t scratchChunks = 0;
  std::vector<ThreadBlock> tbs;
  uint32_t line = 0;

  int32_t chunks(BufferKind buffer) const {
    switch (buffer) {
    case BufferKind::Input: return inputChunks;
    case BufferKind::Output: return outputChunks;
    case BufferKind::Scratch: return scratchChunks;
    }
    return 0;
  }
  friend bool operator==(const Gpu &a, const Gpu &b);
};

/// What a collective computes, chunk by chunk (docs/IR.md, "Custom
/// collectives"). A contribution is an original input chunk, numbered
/// `rank * inputChunks + index`. Built-in collectives derive theirs by rule
/// (Check.h, builtinDefinition), so that no list grows with ranks squared; a
/// custom collective lists its own, and carries them in the file as a
/// `<condition>` element that MSCCL runtimes skip.
struct Definition {
  int32_t nranks = 0;
  int32_t inputChunks = 0, outputChunks = 0; ///< per rank
  /// Precondition: inputDefined[rank][index] says whether that input chunk
  /// carries a contribution when the collective starts.
  std::vector<std::vector<bool>> inputDefined;
  /// A custom collective's postcondition: expected[rank][index] is the
  /// sorted list of contributions output chunk `index` of `rank` must hold,
  /// each once; an empty list leaves the chunk unconstrained. Empty for a
  /// built-in rule.
  std::vector<std::vector<std::vector<uint32_t>>> expected;
  /// The built-in collective whose postcondition this is (Custom: the
  /// lists above), for blocks of `ruleChunks` chunks and root `ruleRoot`.
  Collective rule = Collective::Custom;
  int32_t ruleChunks = 0, ruleRoot = 0;

  ContribLayout layout() const {
    return {uint32_t(nranks), uint32_t(inputChunks)};
  }
  /// The contributions output chunk `index` of `rank` must hold, as keys of
  /// layout(); empty when the chunk is unconstrained.
  ContribSet want(int32_t rank, int32_t index) const;
  /// The same as sorted ids.
  std::vector<uint32_t> wantIds(int32_t rank, int32_t index) const;

  friend bool operator==(const Definition &a, const Definition &b) = default;
};

/// One `<algo>`.
struct Algorithm {
  std::string name;
  Protocol protocol = Protocol::Simple;
  int32_t nchannels = 1;
  int32_t nchunksPerLoop = 1;
  Collective collective = Collective::Custom;
  /// The `coll` attribute as written. Equal to collectiveName(collective)
  /// except for collectives read as Custom from a name we do not know.
  std::string collectiveSpelling = "custom";
  /// The root rank of rooted collectives (broadcast, reduce, gather, scatter);
  /// -1 for the others. Written as the `root` attribute, which MSCCL readers
  /// ignore; files without it have root 0.
  int32_t root = -1;
  bool inplace = false;
  bool outofplace = true;
  uint64_t minBytes = 0; ///< 0: no lower limit
  uint64_t maxBytes = 0; ///< 0: no upper limit
  std::vector<Gpu> gpus; ///< one per rank; ngpus == gpus.size()
  /// A custom collective's pre- and postcondition (`<condition>`), when the
  /// file carries one; always empty for built-in collectives.
  std::optional<Definition> condition;
  uint32_t line = 0;
  uint32_t conditionLine = 0; ///< of `<condition>`; not part of the value

  int32_t ngpus() const { return static_cast<int32_t>(gpus.size()); }
  /// Whether any step is a direct one (DirectRole other than None): such a
  /// file is no longer MSCCL XML.
  bool hasDirectSteps() const;
  friend bool operator==(const Algorithm &a, const Algorithm &b);
};

/// A hash of the algorithm's value (what operator== compares), the same in
/// every process that builds an equal algorithm: ranks compare it to agree
/// on what they run.
uint64_t hashAlgorithm(const Algorithm &alg);

/// The `coll` attribute to write for `alg`: the canonical name of a known
/// collective (so an algorithm built in memory need not also set
/// collectiveSpelling), else the spelling read from the file.
llvm::StringRef collectiveAttribute(const Algorithm &alg);

/// Names one step of an algorithm: gpus[gpu].tbs[tb].steps[step].
struct StepRef {
  int32_t gpu = -1, tb = -1, step = -1;
  friend bool operator==(const StepRef &, const StepRef &) = default;
};

} // namespace coll::ir

#endif // COLL_IR_ALGORITHM_H
