//===- Lower.cpp - Refinement, lowering and dependencies ------------------===//
//
// The first three passes (docs/COMPILER.md):
//
//  buildLayout  channels of the operations (assignChannels, Channels.cpp);
//               R = instances * lcm(parallel factors); traced chunk j becomes
//               refined chunks [j*R, (j+1)*R). An operation is cut into
//               instances * parallel contiguous parts; part q runs on lane
//               (q / parallel) * maxParallel + q % parallel, and lane l uses
//               channels [l*C, (l+1)*C) and tb ids offset by l times the
//               rank's largest program tb id + 1.
//  lower        each part becomes `cpy`/`re` (same rank) or `s` + `r`/`rrc`.
//  computeDependencies
//               recomputes dependencies on refined cells rather than
//               trusting the traced ones (which are per traced chunk).
//
//===----------------------------------------------------------------------===//

#include "Program.h"
#include "Symbolic.h"

#include "coll/ir/ReaderLists.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <numeric>

namespace coll::compiler {

using ir::BufferKind;

uint32_t Layout::cell(int32_t rank, Slot slot) const {
  if (aliasCells)
    slot = inPlaceOwner(kind, rank, chunksPerBlock, slot);
  uint32_t local = static_cast<uint32_t>(slot.off);
  if (slot.buf != BufferKind::Input)
    local += static_cast<uint32_t>(inputChunks);
  if (slot.buf == BufferKind::Scratch)
    local += static_cast<uint32_t>(outputChunks);
  return cellBase[rank] + local;
}

Slot Layout::traced(int32_t rank, lang::BufferId buffer, int32_t index) const {
  if (buffer.kind == BufferKind::Scratch)
    return {BufferKind::Scratch, scratchBase[rank][buffer.scratchId] + index};
  return {buffer.kind, index};
}

std::optional<Slot> Layout::inputView(int32_t rank, Slot owner) const {
  if (owner.buf == BufferKind::Input)
    return owner;
  int32_t begin = rank * chunksPerBlock;
  if (owner.buf == BufferKind::Output && owner.off >= begin &&
      owner.off < begin + chunksPerBlock &&
      inPlaceOwner(kind, rank, chunksPerBlock,
                   {BufferKind::Input, owner.off - begin}) == owner)
    return Slot{BufferKind::Input, owner.off - begin};
  return std::nullopt;
}

std::optional<Slot> Layout::outputView(int32_t rank, Slot owner) const {
  if (owner.buf == BufferKind::Output)
    return owner;
  if (owner.buf != BufferKind::Input)
    return std::nullopt;
  // Either output chunk `off` (same memory) or chunk `off - rank*K` (the
  // output is one block of the input).
  for (int32_t off : {owner.off, owner.off - rank * chunksPerBlock})
    if (off >= 0 && off < outputChunks &&
        inPlaceOwner(kind, rank, chunksPerBlock, {BufferKind::Output, off}) ==
            owner)
      return Slot{BufferKind::Output, off};
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// buildLayout
//===----------------------------------------------------------------------===//

namespace {

/// Program tb ids and channels must leave room for every lane.
constexpr int64_t MaxChannels = 1 << 16;
constexpr int64_t MaxTbId = 1 << 20;
/// Cells over all ranks: the refined buffers must stay of a size the IR's
/// 32-bit offsets and the dependency pass can handle.
constexpr int64_t MaxCells = int64_t(1) << 28;

} // namespace

bool buildLayout(const lang::ChunkDag &dag, Program &prog,
                 lang::DiagnosticEngine &diags) {
  const lang::CollectiveSpec &spec = dag.collective;
  prog.dag = &dag;
  Layout &layout = prog.layout;
  layout.kind = spec.kind;
  layout.nranks = spec.nranks;
  layout.traceInPlace = spec.inplace;

  assignChannels(dag, prog);
  int64_t lcm = 1, maxParallel = 1, maxChannel = 0;
  for (const lang::ChunkOp &op : dag.ops) {
    lcm = std::lcm(lcm, int64_t(op.parallel));
    maxParallel = std::max<int64_t>(maxParallel, op.parallel);
    if (lcm > MaxCells) {
      diags.error(op.loc, "the parallel factors of the program refine each "
                          "chunk into more than " +
                              llvm::Twine(MaxCells) + " parts");
      return false;
    }
  }
  int64_t instances = std::max<int32_t>(dag.options.instances, 1);
  int64_t refinement = instances * lcm;
  int64_t lanes = instances * maxParallel;

  // Cells: input, output and scratch chunks of every rank, refined.
  int64_t cells = 0;
  std::vector<int64_t> scratchTotal(spec.nranks, 0);
  for (int32_t r = 0; r < spec.nranks; ++r) {
    for (int32_t chunks : dag.scratchChunks[r])
      scratchTotal[r] += chunks;
    cells += (int64_t(spec.inputChunks) + spec.outputChunks + scratchTotal[r]) *
             refinement;
  }
  int64_t perLoop = int64_t(spec.chunksPerBlock) * refinement;
  if (cells > MaxCells || perLoop * spec.nranks > INT32_MAX) {
    diags.error(spec.loc, "instances (" + llvm::Twine(instances) +
                              ") times the parallel factors (lcm " +
                              llvm::Twine(lcm) + ") refine the buffers into " +
                              llvm::Twine(cells) +
                              " chunks, more than the compiler handles (" +
                              llvm::Twine(MaxCells) + ")");
    return false;
  }
  for (int32_t channel : prog.opChannel)
    maxChannel = std::max<int64_t>(maxChannel, channel);
  int64_t channelStride = maxChannel + 1;
  if (channelStride * lanes > MaxChannels) {
    diags.error(spec.loc,
                "the program needs " + llvm::Twine(channelStride * lanes) +
                    " channels (channels up to " +
                    llvm::Twine(maxChannel) + " on " + llvm::Twine(lanes) +
                    " lanes), more than " + llvm::Twine(MaxChannels));
    return false;
  }
  prog.lanes = static_cast<int32_t>(lanes);
  prog.maxParallel = static_cast<int32_t>(maxParallel);
  prog.channelStride = static_cast<int32_t>(channelStride);

  // Program tb ids: a local operation runs on one tb (its sendtb when the
  // two differ), and every lane's ids must stay in range.
  std::vector<int64_t> maxTb(spec.nranks, -1);
  const char *warnedAt = nullptr; // once per source location
  for (const lang::ChunkOp &op : dag.ops) {
    if (op.src.rank == op.dst.rank && op.sendTb >= 0 && op.recvTb >= 0 &&
        op.sendTb != op.recvTb && op.loc.getPointer() != warnedAt) {
      warnedAt = op.loc.getPointer();
      diags.warning(op.loc, "a local operation runs on one tb: this one runs "
                            "on its sendtb=" +
                                llvm::Twine(op.sendTb) + "; recvtb=" +
                                llvm::Twine(op.recvTb) + " is ignored");
    }
    maxTb[op.src.rank] = std::max<int64_t>(maxTb[op.src.rank], op.sendTb);
    maxTb[op.dst.rank] = std::max<int64_t>(maxTb[op.dst.rank], op.recvTb);
  }
  prog.tbStride.assign(spec.nranks, 0);
  for (int32_t r = 0; r < spec.nranks; ++r)
    prog.tbStride[r] = static_cast<int32_t>(maxTb[r] + 1);
  for (const lang::ChunkOp &op : dag.ops)
    for (auto [rank, tb] :
         {std::pair(op.src.rank, op.sendTb), std::pair(op.dst.rank, op.recvTb)})
      if (tb >= 0 && tb + (maxTb[rank] + 1) * (lanes - 1) >= MaxTbId) {
        diags.error(op.loc, "tb " + llvm::Twine(tb) + " of rank " +
                                llvm::Twine(rank) +
                                " is out of range: tb ids on all " +
                                llvm::Twine(lanes) + " lanes must stay below " +
                                llvm::Twine(MaxTbId));
        return false;
      }

  layout.refinement = static_cast<int32_t>(refinement);
  layout.chunksPerBlock = static_cast<int32_t>(perLoop);
  layout.inputChunks = static_cast<int32_t>(spec.inputChunks * refinement);
  layout.outputChunks = static_cast<int32_t>(spec.outputChunks * refinement);
  layout.scratchChunks.assign(spec.nranks, 0);
  layout.scratchBase.assign(spec.nranks, {});
  layout.cellBase.assign(spec.nranks + 1, 0);
  for (int32_t r = 0; r < spec.nranks; ++r) {
    // Named scratch buffers lie one after the other in the IR's scratch.
    int32_t base = 0;
    for (int32_t chunks : dag.scratchChunks[r]) {
      layout.scratchBase[r].push_back(base);
      base += static_cast<int32_t>(chunks * refinement);
    }
    layout.scratchChunks[r] = base;
    layout.cellBase[r + 1] =
        layout.cellBase[r] + layout.inputChunks + layout.outputChunks + base;
  }

  // Dependencies on in-place memory make every schedule race-free in both
  // modes. An in-place trace names that memory already; an out-of-place one
  // pays for it only when it would be right in place at all.
  bool inPlacePossible = spec.kind != ir::Collective::Custom ||
                         spec.inputChunks == spec.outputChunks;
  layout.aliasCells =
      spec.inplace || (inPlacePossible && validInProgramOrder(dag, true));

  return true;
}

//===----------------------------------------------------------------------===//
// lower
//===----------------------------------------------------------------------===//

namespace {

/// Chooses the IR names of the slots an instruction reads and writes. Out
/// of place, a slot is named as traced. An in-place trace names the memory
/// that owns it; the IR instead reads data that nothing has written yet
/// from the input and writes to the output, wherever the other buffer
/// aliases the slot, so that the algorithm can also be right out of place
/// (verification decides whether it is).
class Namer {
public:
  explicit Namer(const Layout &layout)
      : layout(layout), written(layout.traceInPlace ? layout.numCells() : 0) {}

  Slot read(int32_t rank, Slot owner, int32_t count) const {
    if (!layout.traceInPlace)
      return owner;
    bool original = true;
    uint32_t first = layout.cell(rank, owner);
    for (int32_t i = 0; i < count; ++i)
      original = original && !written[first + i];
    if (original)
      if (auto view = uniform(rank, owner, count, /*input=*/true))
        return *view;
    return write(rank, owner, count);
  }
  Slot write(int32_t rank, Slot owner, int32_t count) const {
    if (!layout.traceInPlace)
      return owner;
    return uniform(rank, owner, count, /*input=*/false).value_or(owner);
  }
  void markWritten(int32_t rank, Slot owner, int32_t count) {
    if (!layout.traceInPlace)
      return;
    uint32_t first = layout.cell(rank, owner);
    for (int32_t i = 0; i < count; ++i)
      written[first + i] = true;
  }

private:
  /// The input (output) name of a whole range, when the other buffer
  /// aliases all of it.
  std::optional<Slot> uniform(int32_t rank, Slot owner, int32_t count,
                              bool input) const {
    auto view = [&](Slot s) {
      return input ? layout.inputView(rank, s) : layout.outputView(rank, s);
    };
    std::optional<Slot> first = view(owner);
    std::optional<Slot> last = view({owner.buf, owner.off + count - 1});
    if (first && last && first->buf == last->buf &&
        last->off == first->off + count - 1)
      return first;
    return std::nullopt;
  }

  const Layout &layout;
  std::vector<bool> written;
};

} // namespace

void lower(Program &prog) {
  const lang::ChunkDag &dag = *prog.dag;
  const Layout &layout = prog.layout;
  int32_t instances = prog.lanes / prog.maxParallel;
  Namer namer(layout);
  int32_t refinement = layout.refinement;
  prog.instrs.clear();
  prog.instrs.reserve(dag.ops.size() * prog.lanes * 2);
  for (uint32_t o = 0; o < dag.ops.size(); ++o) {
    const lang::ChunkOp &op = dag.ops[o];
    int32_t parts = instances * op.parallel;
    int32_t width = op.src.size * refinement / parts;
    bool reduce = op.kind == lang::OpKind::Reduce;
    for (int32_t q = 0; q < parts; ++q) {
      int32_t lane = (q / op.parallel) * prog.maxParallel + q % op.parallel;
      Slot src = layout.traced(op.src.rank, op.src.buffer,
                               op.src.index * refinement + q * width);
      Slot dst = layout.traced(op.dst.rank, op.dst.buffer,
                               op.dst.index * refinement + q * width);
      auto laneTb = [&](int32_t rank, int32_t tb) {
        return tb < 0 ? -1 : tb + lane * prog.tbStride[rank];
      };
      Instr base;
      base.channel = prog.opChannel[o] + lane * prog.channelStride;
      base.lane = lane;
      base.count = width;
      base.op = o;
      Slot readSrc = namer.read(op.src.rank, src, width);
      Slot writeDst = namer.write(op.dst.rank, dst, width);
      auto id = static_cast<InstrId>(prog.instrs.size());

      if (op.direct != lang::Direct::None) {
        // One step on the rank that runs it; the other operand is in the
        // peer's memory.
        Instr direct = base;
        bool put = op.direct == lang::Direct::Put;
        direct.type = put      ? ir::StepType::Put
                      : reduce ? ir::StepType::GetReduce
                               : ir::StepType::Get;
        direct.rank = lang::directRank(op);
        direct.sendPeer = lang::directPeer(op);
        // getre reads its destination under the name it writes, as `re`.
        direct.src = readSrc;
        direct.dst = writeDst;
        direct.sendTbHint =
            laneTb(direct.rank, put ? op.sendTb : op.recvTb);
        direct.key = {id, 0};
        prog.instrs.push_back(direct);
      } else if (op.src.rank == op.dst.rank) {
        Instr local = base;
        local.type = reduce ? ir::StepType::Reduce : ir::StepType::Copy;
        local.rank = op.src.rank;
        local.src = readSrc;
        local.dst = writeDst;
        local.sendTbHint =
            laneTb(local.rank, op.sendTb >= 0 ? op.sendTb : op.recvTb);
        local.key = {id, 0};
        prog.instrs.push_back(local);
      } else {
        Instr send = base;
        send.type = ir::StepType::Send;
        send.rank = op.src.rank;
        send.src = readSrc;
        send.dst = writeDst;
        send.sendPeer = op.dst.rank;
        send.sendTbHint = laneTb(send.rank, op.sendTb);
        send.to = id + 1;
        send.key = {id, 0};
        Instr recv = base;
        recv.rank = op.dst.rank;
        recv.recvPeer = op.src.rank;
        recv.recvTbHint = laneTb(recv.rank, op.recvTb);
        recv.from = id;
        recv.key = {id, 1};
        recv.dst = writeDst;
        recv.src = writeDst;
        if (reduce) {
          recv.type = ir::StepType::RecvReduceCopy;
          // The local operand is the destination's current data, under the
          // name it is read by (srcoff names the local operand,
          // docs/ARCHITECTURE.md §3); the result goes under the name it is
          // written by. Where these are input and output at different
          // offsets (a reduce-scatter's block r of the input, block 0 of the
          // output), the step reads the input and writes the output out of
          // place, and in place they are the same memory.
          recv.src = namer.read(recv.rank, dst, width);
        } else {
          recv.type = ir::StepType::Recv;
        }
        send.dst = recv.dst;
        prog.instrs.push_back(send);
        prog.instrs.push_back(recv);
      }
      namer.markWritten(op.dst.rank, dst, width);
    }
  }
}

//===----------------------------------------------------------------------===//
// computeDependencies
//===----------------------------------------------------------------------===//

/// Walks the instructions in program order keeping, per cell, its last
/// writer and the readers since that write. An instruction depends on the
/// last writer of every cell it reads or writes and on the readers of every
/// cell it writes. FIFO and local instructions touch only their own rank's
/// cells, so between them these are exactly the same-rank orderings the
/// schedule must keep, and transfers order the rest. Direct instructions
/// touch a peer's cells: their dependencies cross ranks, and insertSignals
/// turns those into signals and waits.
void computeDependencies(Program &prog) {
  const Layout &layout = prog.layout;
  std::vector<InstrId> lastWriter(layout.numCells(), NoInstr);
  std::vector<ir::ReaderPool::List> readers(layout.numCells(),
                                          ir::ReaderPool::Empty);
  ir::ReaderPool pool;
  llvm::SmallVector<InstrId, 16> deps;
  for (InstrId x = 0; x < prog.instrs.size(); ++x) {
    Instr &instr = prog.instrs[x];
    ir::StepTypeInfo info = ir::stepTypeInfo(instr.type);
    // Receiving types read their local operand only when they reduce; `re`
    // reads its destination too.
    bool readsSrc = info.readsSrc;
    bool readsDst = instr.type == ir::StepType::Reduce ||
                    instr.type == ir::StepType::GetReduce;
    bool writes = info.writesDst;
    // Direct steps reach the peer's cells for their remote operand.
    uint32_t readCell = layout.cell(instr.srcRank(), instr.src);
    uint32_t writeCell = layout.cell(instr.dstRank(), instr.dst);
    uint32_t n = static_cast<uint32_t>(instr.count);
    deps.clear();
    auto read = [&](uint32_t first) {
      for (uint32_t c = first; c < first + n; ++c) {
        InstrId w = lastWriter[c];
        if (w == NoInstr)
          continue;
        deps.push_back(w);
        Instr &writer = prog.instrs[w];
        if (writer.firstReader == NoInstr) {
          writer.firstReader = x;
          writer.readers = 1;
        } else if (writer.firstReader != x) {
          writer.readers = 2;
        }
      }
    };
    if (readsSrc)
      read(readCell);
    if (readsDst)
      read(writeCell);
    if (writes)
      for (uint32_t c = writeCell; c < writeCell + n; ++c) {
        if (lastWriter[c] != NoInstr)
          deps.push_back(lastWriter[c]);
        pool.forEach(readers[c], [&](InstrId r) { deps.push_back(r); });
      }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    // A copy onto its own memory (in place) reads and writes one cell.
    llvm::erase_value(deps, x);
    instr.deps.assign(deps.begin(), deps.end());

    uint32_t writeEnd = writes ? writeCell + n : writeCell;
    if (readsSrc)
      for (uint32_t c = readCell; c < readCell + n; ++c)
        if ((c < writeCell || c >= writeEnd) &&
            pool.newest(readers[c]) != x)
          pool.push(readers[c], x);
    if (writes)
      for (uint32_t c = writeCell; c < writeEnd; ++c) {
        lastWriter[c] = x;
        pool.clear(readers[c]);
      }
  }

  // What the postcondition constrains must stay stored.
  const lang::CollectiveSpec &spec = prog.dag->collective;
  for (int32_t r = 0; r < spec.nranks; ++r)
    for (int32_t i = 0; i < spec.outputChunks; ++i) {
      if (spec.want(r, i).empty())
        continue;
      for (int32_t t = 0; t < layout.refinement; ++t) {
        uint32_t c =
            layout.cell(r, {BufferKind::Output, i * layout.refinement + t});
        if (lastWriter[c] != NoInstr)
          prog.instrs[lastWriter[c]].liveAtEnd = true;
      }
    }
}

} // namespace coll::compiler
