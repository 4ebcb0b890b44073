//===- Tracer.cpp - Symbolic buffers and the traced operations ------------===//

#include "Tracer.h"
#include "Limits.h"

#include "coll/ir/Check.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"

#include <algorithm>

using namespace coll;
using namespace coll::lang;

std::string coll::lang::formatBuffer(BufferId buffer,
                                     llvm::ArrayRef<std::string> scratchNames) {
  switch (buffer.kind) {
  case ir::BufferKind::Input: return "input";
  case ir::BufferKind::Output: return "output";
  case ir::BufferKind::Scratch:
    return buffer.scratchId == 0
               ? "scratch"
               : "scratch(\"" + scratchNames[buffer.scratchId] + "\")";
  }
  return "?";
}

std::string coll::lang::formatSlots(const SlotRange &range,
                                    llvm::ArrayRef<std::string> scratchNames) {
  std::string text = std::to_string(range.rank) + ":" +
                     formatBuffer(range.buffer, scratchNames) + "[" +
                     std::to_string(range.index);
  if (range.size != 1)
    text += ":" + std::to_string(range.index + range.size);
  return text + "]";
}

std::string coll::lang::formatContrib(ContribId id, int32_t inputChunks) {
  return "in(" + std::to_string(id / inputChunks) + "," +
         std::to_string(id % inputChunks) + ")";
}

/// "in(0,1), in(1,1), in(2,1) and 5 more".
static std::string formatContribs(llvm::ArrayRef<ContribId> ids,
                                  int32_t inputChunks) {
  constexpr size_t Shown = 3;
  std::string text;
  for (size_t i = 0; i < std::min(ids.size(), Shown); ++i)
    text += (i ? ", " : "") + formatContrib(ids[i], inputChunks);
  if (ids.size() > Shown)
    text += " and " + std::to_string(ids.size() - Shown) + " more";
  return text;
}

static std::string plural(size_t n, llvm::StringRef word) {
  return std::to_string(n) + " " + word.str() + (n == 1 ? "" : "s");
}

//===----------------------------------------------------------------------===//
// Built-in collectives
//===----------------------------------------------------------------------===//

CollectiveSpec coll::lang::makeBuiltinSpec(ir::Collective kind, int32_t nranks,
                                           int32_t k, int32_t root,
                                           bool inplace) {
  assert(kind != ir::Collective::Custom &&
         "custom collectives state their own");
  ir::CollectiveInfo info = ir::collectiveInfo(kind);
  CollectiveSpec spec;
  spec.kind = kind;
  spec.nranks = nranks;
  spec.chunksPerBlock = k;
  spec.inputChunks = info.inputPerRank ? nranks * k : k;
  spec.outputChunks = info.outputPerRank ? nranks * k : k;
  spec.root = info.hasRoot ? root : -1;
  spec.inplace = inplace;
  static_cast<ir::Definition &>(spec) =
      ir::builtinDefinition(kind, nranks, k, root);
  return spec;
}

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

static size_t bufferSlot(BufferId buffer) {
  return buffer.kind == ir::BufferKind::Scratch
             ? 2 + buffer.scratchId
             : static_cast<size_t>(buffer.kind);
}

void Tracer::declare(CollectiveSpec spec) {
  dag.collective = std::move(spec);
  const CollectiveSpec &s = dag.collective;
  // Only the buffer that owns aliased memory gets slots.
  bool inputOwned =
      canonical({0, {ir::BufferKind::Input, 0}, 0, 1}).buffer.kind ==
      ir::BufferKind::Input;
  bool outputOwned =
      canonical({0, {ir::BufferKind::Output, 0}, 0, 1}).buffer.kind ==
      ir::BufferKind::Output;
  // A rank's input and output slots are made when an operation first
  // touches them (materialize): until then they hold their initial
  // contents, so a large declaration costs nothing before it is used.
  ownedChunks[0] = inputOwned ? s.inputChunks : 0;
  ownedChunks[1] = outputOwned ? s.outputChunks : 0;
  slots.assign(s.nranks,
               std::vector<std::vector<Slot>>(2 + dag.scratchNames.size()));
  isDeclared = true;
}

Tracer::ContribSet Tracer::initialContents(int32_t rank, BufferId buffer,
                                   int32_t index) const {
  const CollectiveSpec &s = dag.collective;
  // The input chunk whose memory this canonical slot is (Tracer::canonical).
  int32_t j = index;
  if (buffer.kind == ir::BufferKind::Output) {
    // Only an in-place allgather or gather lets the output own memory that
    // holds input: block `rank` of the output.
    if (!s.inplace || ownedChunks[0] != 0)
      return {};
    j = index - rank * s.chunksPerBlock;
    if (j < 0 || j >= s.chunksPerBlock)
      return {};
  } else if (buffer.kind != ir::BufferKind::Input) {
    return {};
  }
  if (!s.inputDefined[rank][j])
    return {};
  return ContribSet::single(
      s.layout().key(static_cast<ContribId>(rank * s.inputChunks + j)));
}

std::vector<Tracer::Slot> &Tracer::materialize(int32_t rank, BufferId buffer) {
  std::vector<Slot> &buf = slots[rank][bufferSlot(buffer)];
  if (buffer.kind == ir::BufferKind::Scratch || !buf.empty())
    return buf;
  size_t kind = static_cast<size_t>(buffer.kind);
  buf.resize(static_cast<size_t>(ownedChunks[kind]));
  for (int32_t i = 0; i < ownedChunks[kind]; ++i)
    buf[i].contents = initialContents(rank, buffer, i);
  return buf;
}

void Tracer::provide(int32_t rank, int32_t index) {
  CollectiveSpec &s = dag.collective;
  s.inputDefined[rank][index] = true;
  SlotRange c = canonical({rank, {ir::BufferKind::Input, 0}, index, 1});
  // Slots not made yet take it from inputDefined when they are.
  std::vector<Slot> &buf = slots[c.rank][bufferSlot(c.buffer)];
  if (!buf.empty())
    buf[c.index].contents = initialContents(c.rank, c.buffer, c.index);
}

bool Tracer::expect(int32_t rank, int32_t index, ContribId contrib,
                    llvm::SMLoc loc) {
  CollectiveSpec &s = dag.collective;
  if (!s.inputDefined[contrib / s.inputChunks][contrib % s.inputChunks]) {
    diags.error(loc, describe(contrib) +
                         " is expected in an output chunk but the "
                         "pre block does not provide it");
    return false;
  }
  std::vector<ContribId> &list = s.expected[rank][index];
  auto it = std::lower_bound(list.begin(), list.end(), contrib);
  if (it != list.end() && *it == contrib) {
    diags.error(loc,
                "output chunk " +
                    describe({rank, {ir::BufferKind::Output, 0}, index, 1}) +
                    " is expected to hold " + describe(contrib) + " twice");
    return false;
  }
  list.insert(it, contrib);
  return true;
}

BufferId Tracer::scratch(llvm::StringRef name) {
  auto [it, inserted] = scratchIds.try_emplace(name, dag.scratchNames.size());
  if (inserted) {
    dag.scratchNames.push_back(name.str());
    for (auto &rankSlots : slots)
      rankSlots.emplace_back();
  }
  return {ir::BufferKind::Scratch, it->second};
}

int32_t Tracer::scratchEnd(int32_t rank, BufferId buffer) const {
  assert(buffer.kind == ir::BufferKind::Scratch && "only scratch appends");
  return static_cast<int32_t>(slots[rank][bufferSlot(buffer)].size());
}

SlotRange Tracer::canonical(const SlotRange &ref) const {
  const CollectiveSpec &s = dag.collective;
  if (!s.inplace || ref.buffer.kind == ir::BufferKind::Scratch)
    return ref;
  SlotRange c = ref;
  switch (s.kind) {
  case ir::Collective::AllGather:
  case ir::Collective::Gather:
    // The input is block `rank` of the output.
    if (ref.buffer.kind == ir::BufferKind::Input)
      c = {ref.rank,
           {ir::BufferKind::Output, 0},
           ref.rank * s.chunksPerBlock + ref.index,
           ref.size};
    break;
  case ir::Collective::ReduceScatter:
  case ir::Collective::Scatter:
    // The output is block `rank` of the input.
    if (ref.buffer.kind == ir::BufferKind::Output)
      c = {ref.rank,
           {ir::BufferKind::Input, 0},
           ref.rank * s.chunksPerBlock + ref.index,
           ref.size};
    break;
  default:
    if (ref.buffer.kind == ir::BufferKind::Output)
      c.buffer = {ir::BufferKind::Input, 0};
    break;
  }
  return c;
}

Tracer::Slot *Tracer::find(int32_t rank, BufferId buffer, int32_t index) {
  std::vector<Slot> &buf = materialize(rank, buffer);
  return static_cast<size_t>(index) < buf.size() ? &buf[index] : nullptr;
}

bool Tracer::checkDefined(const SlotRange &ref, llvm::SMLoc loc) {
  SlotRange c = canonical(ref);
  const std::vector<Slot> &buf = materialize(c.rank, c.buffer);
  for (int32_t i = 0; i < ref.size; ++i) {
    const auto at = static_cast<size_t>(c.index + i);
    if (at < buf.size() && !buf[at].contents.empty())
      continue;
    SlotRange one{ref.rank, ref.buffer, ref.index + i, 1};
    const CollectiveSpec &s = dag.collective;
    if (ref.buffer.kind != ir::BufferKind::Input)
      diags.error(loc, "chunk " + describe(one) +
                           " is read before anything is written to it");
    else if (s.kind == ir::Collective::Custom)
      diags.error(loc, "chunk " + describe(one) +
                           " holds no data: the collective's pre block does "
                           "not provide it");
    else
      diags.error(loc, "chunk " + describe(one) +
                           " holds no data: " + ir::collectiveName(s.kind) +
                           " defines only the input of root " +
                           llvm::Twine(s.root));
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Operations
//===----------------------------------------------------------------------===//

bool Tracer::record(ChunkOp op, const Sites &sites) {
  assert(isDeclared && op.src.size == op.dst.size);
  const CollectiveSpec &s = dag.collective;
  bool reduce = op.kind == OpKind::Reduce;
  if (dag.ops.size() >= limits::MaxOps) {
    diags.error(sites.call, "the program traces more than " +
                                llvm::Twine(limits::MaxOps) +
                                " chunk operations");
    return false;
  }
  if (!checkDefined(op.src, sites.src) ||
      (reduce && !checkDefined(op.dst, sites.dst)))
    return false;
  SlotRange src = canonical(op.src), dst = canonical(op.dst);
  // Located at the operation that writes (the `.copy`/`.reduce`), not at
  // the reference it writes through.
  if (dst.buffer.kind == ir::BufferKind::Input && !s.inplace) {
    diags.error(sites.call, "cannot write to " + describe(op.dst) +
                               ": the input of an out-of-place collective is "
                               "read-only");
    return false;
  }
  // Copying chunks onto themselves is the identity: nothing to record. This
  // is what "copy the input to the output, then work in the output" traces
  // to in place, so one program serves both modes.
  if (!reduce && src.rank == dst.rank && src.buffer == dst.buffer &&
      src.index == dst.index)
    return true;
  if (src.rank == dst.rank && src.buffer == dst.buffer &&
      src.index < dst.index + dst.size && dst.index < src.index + src.size) {
    diags.error(sites.call, "source " + describe(op.src) + " and destination " +
                                describe(op.dst) + " overlap");
    return false;
  }

  // Each side's slots, looked up once (both may be one buffer: the ranges
  // do not overlap). checkDefined made every source slot.
  std::vector<Slot> &srcBuf = materialize(src.rank, src.buffer);
  std::vector<Slot> &dstBuf = materialize(dst.rank, dst.buffer);
  llvm::SmallVector<Contents, 4> result(op.src.size);
  llvm::SmallVector<uint32_t, 16> deps;
  for (int32_t i = 0; i < op.src.size; ++i) {
    const Slot &from = srcBuf[static_cast<size_t>(src.index + i)];
    if (from.lastWriter >= 0)
      deps.push_back(from.lastWriter);
    result[i] = from.contents;
    const auto at = static_cast<size_t>(dst.index + i);
    if (at >= dstBuf.size())
      continue;
    Slot *to = &dstBuf[at];
    if (to->lastWriter >= 0)
      deps.push_back(to->lastWriter);
    readerPool.forEach(to->readers, [&](uint32_t r) { deps.push_back(r); });
    if (!reduce)
      continue;
    // dst (+) src; a contribution in both would be counted twice.
    uint32_t common = 0;
    std::optional<ContribSet> merged =
        ContribSet::unite(to->contents, from.contents, common);
    if (!merged) {
      diags.error(sites.call, "duplicated contribution: the reduction adds " +
                                  describe(s.layout().id(common)) + " to " +
                                  describe({op.dst.rank, op.dst.buffer,
                                            op.dst.index + i, 1}) +
                                  ", which already holds it");
      return false;
    }
    result[i] = std::move(*merged);
  }
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());

  auto id = static_cast<uint32_t>(dag.ops.size());
  for (int32_t i = 0; i < op.src.size; ++i)
    readerPool.push(srcBuf[static_cast<size_t>(src.index + i)].readers, id);
  if (static_cast<size_t>(dst.index + dst.size) > dstBuf.size()) {
    assert(dst.buffer.kind == ir::BufferKind::Scratch && "input/output slots exist");
    dstBuf.resize(static_cast<size_t>(dst.index + dst.size));
  }
  for (int32_t i = 0; i < op.dst.size; ++i) {
    Slot &to = dstBuf[static_cast<size_t>(dst.index + i)];
    to.contents = std::move(result[i]);
    to.lastWriter = static_cast<int32_t>(id);
    readerPool.clear(to.readers);
  }
  op.src = src;
  op.dst = dst;
  op.deps.assign(deps.begin(), deps.end());
  chunksMoved += uint64_t(op.src.size);
  dag.ops.push_back(std::move(op));
  return true;
}

//===----------------------------------------------------------------------===//
// Provenance
//===----------------------------------------------------------------------===//

std::optional<ContribId> Tracer::origin(const SlotRange &ref,
                                        llvm::StringRef what, llvm::SMLoc loc) {
  SlotRange c = canonical(ref);
  Slot *slot = find(c.rank, c.buffer, c.index);
  SlotRange first{ref.rank, ref.buffer, ref.index, 1};
  if (!slot || slot->contents.empty()) {
    diags.error(loc, "'" + what +
                         "' needs a chunk holding one contribution, but " +
                         describe(first) + " holds nothing");
    return std::nullopt;
  }
  const ContribSet &set = slot->contents;
  if (set.size() != 1) {
    std::vector<ContribId> ids = set.ids(dag.collective.layout());
    diags.error(loc, "'" + what +
                         "' needs a chunk holding one contribution, but " +
                         describe(first) + " holds a reduction of " +
                         plural(ids.size(), "contribution") + " (" +
                         formatContribs(ids, dag.collective.inputChunks) + ")");
    return std::nullopt;
  }
  return dag.collective.layout().id(set.only());
}

std::optional<SlotRange>
Tracer::destination(ContribId contrib, llvm::StringRef what, llvm::SMLoc loc) {
  const CollectiveSpec &s = dag.collective;
  if (destinations.empty()) {
    destinations.assign(static_cast<size_t>(s.nranks) * s.inputChunks, -1);
    for (int32_t r = 0; r < s.nranks; ++r)
      for (int32_t i = 0; i < s.outputChunks; ++i)
        if (ir::ContribSet want = s.want(r, i); want.size() == 1) {
          int64_t &d = destinations[s.layout().id(want.only())];
          d = d == -1 ? int64_t(r) * s.outputChunks + i : -2;
        }
  }
  int64_t d = destinations[contrib];
  if (d < 0) {
    diags.error(
        loc, "'" + what + "' is undefined: " + describe(contrib) +
                 (d == -1 ? " is not the sole content of any output chunk"
                          : " is the sole content of several output chunks"));
    return std::nullopt;
  }
  return SlotRange{static_cast<int32_t>(d / s.outputChunks),
                   {ir::BufferKind::Output, 0},
                   static_cast<int32_t>(d % s.outputChunks),
                   1};
}

//===----------------------------------------------------------------------===//
// Postcondition
//===----------------------------------------------------------------------===//

std::optional<ChunkDag> Tracer::finish(ProgramOptions options) {
  dag.options = std::move(options);
  const CollectiveSpec &s = dag.collective;
  unsigned errorsBefore = diags.errorCount();

  if (dag.options.manualThreadblocks)
    for (const ChunkOp &op : dag.ops)
      if (op.direct != Direct::None
              ? (op.direct == Direct::Put ? op.sendTb : op.recvTb) < 0
              : op.src.rank != op.dst.rank && (op.sendTb < 0 || op.recvTb < 0)) {
        diags.error(op.loc,
                    op.direct != Direct::None
                        ? "with `threadblocks = manual`, a direct operation "
                          "must name the tb that runs it (tb=)"
                        : "with `threadblocks = manual`, an operation between "
                          "ranks must name sendtb and recvtb");
        break;
      }

  constexpr unsigned MaxReported = 10;
  unsigned failures = 0;
  for (int32_t r = 0; r < s.nranks; ++r) {
    for (int32_t i = 0; i < s.outputChunks; ++i) {
      ContribSet wantSet = s.want(r, i);
      if (wantSet.empty())
        continue;
      SlotRange named{r, {ir::BufferKind::Output, 0}, i, 1};
      SlotRange c = canonical(named);
      // Without making the slots of buffers no operation touched.
      const std::vector<Slot> &buf = slots[c.rank][bufferSlot(c.buffer)];
      const Slot *slot =
          static_cast<size_t>(c.index) < buf.size() ? &buf[c.index] : nullptr;
      ContribSet haveSet = slot ? slot->contents
                                : initialContents(c.rank, c.buffer, c.index);
      if (haveSet == wantSet || ++failures > MaxReported)
        continue;
      std::vector<ContribId> want = wantSet.ids(s.layout());
      std::vector<ContribId> have = haveSet.ids(s.layout());
      llvm::SMLoc loc =
          slot && slot->lastWriter >= 0 ? dag.ops[slot->lastWriter].loc : s.loc;
      std::string chunk = "output chunk " + describe(named);
      if (have.empty()) {
        diags.error(loc, chunk + " is never written (it must hold " +
                             formatContribs(want, s.inputChunks) + ")");
        continue;
      }
      std::vector<ContribId> missing, extra;
      std::set_difference(want.begin(), want.end(), have.begin(), have.end(),
                          std::back_inserter(missing));
      std::set_difference(have.begin(), have.end(), want.begin(), want.end(),
                          std::back_inserter(extra));
      std::string missingText = "is missing " + std::to_string(missing.size()) +
                                " of its " +
                                plural(want.size(), "contribution");
      std::string extraText =
          "holds " + plural(extra.size(), "unexpected contribution");
      if (extra.empty())
        diags.error(loc, chunk + " " + missingText + ": " +
                             formatContribs(missing, s.inputChunks));
      else if (missing.empty())
        diags.error(loc, chunk + " " + extraText + ": " +
                             formatContribs(extra, s.inputChunks));
      else
        diags.error(loc, chunk + " " + missingText + " (" +
                             formatContribs(missing, s.inputChunks) + ") and " +
                             extraText + " (" +
                             formatContribs(extra, s.inputChunks) + ")");
    }
  }
  if (failures > MaxReported)
    diags.note(s.loc, plural(failures - MaxReported, "more output chunk") +
                          (failures - MaxReported == 1 ? " does" : " do") +
                          " not hold what the postcondition requires");
  if (diags.errorCount() != errorsBefore)
    return std::nullopt;

  dag.scratchChunks.assign(s.nranks,
                           std::vector<int32_t>(dag.scratchNames.size()));
  for (int32_t r = 0; r < s.nranks; ++r)
    for (size_t id = 0; id < dag.scratchNames.size(); ++id)
      dag.scratchChunks[r][id] = static_cast<int32_t>(slots[r][2 + id].size());
  return std::move(dag);
}
