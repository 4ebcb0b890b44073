//===- Symbolic.cpp - Executing programs on contribution sets -------------===//
//
// Sets are sorted vectors, immutable and shared, so that a copy costs a
// pointer and a reduction allocates only its result: a ring allreduce over
// N ranks does O(N^3) work in total, and its live sets stay few because the
// broadcast copies share one result.
//
//===----------------------------------------------------------------------===//

#include "Symbolic.h"
#include "Program.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <deque>
#include <memory>

namespace coll::compiler {
namespace {

using ir::BufferKind;
using Contents = std::shared_ptr<const std::vector<uint32_t>>;

/// The memory of every rank in one call mode: input, output and scratch
/// slots, with input and output aliased in place.
class Memory {
public:
  Memory(const lang::ChunkDag &dag, int32_t refinement, bool inplace)
      : spec(dag.collective), refinement(refinement), inplace(inplace),
        perBlock(spec.chunksPerBlock * refinement),
        inChunks(spec.inputChunks * refinement),
        outChunks(spec.outputChunks * refinement) {
    base.assign(spec.nranks + 1, 0);
    for (int32_t r = 0; r < spec.nranks; ++r) {
      int64_t scratch = 0;
      for (int32_t chunks : dag.scratchChunks[r])
        scratch += chunks;
      base[r + 1] = base[r] + inChunks + outChunks +
                    static_cast<uint32_t>(scratch * refinement);
    }
    cells.resize(base.back());
    writers.assign(base.back(), NoWriter);
    for (int32_t r = 0; r < spec.nranks; ++r)
      for (int32_t j = 0; j < inChunks; ++j)
        if (spec.inputDefined[r][j / refinement])
          cells[cell(r, {BufferKind::Input, j})] =
              std::make_shared<const std::vector<uint32_t>>(
                  1, static_cast<uint32_t>(r * inChunks + j));
  }

  static constexpr uint64_t NoWriter = ~uint64_t(0);

  uint32_t cell(int32_t rank, Slot slot) const {
    if (inplace)
      slot = inPlaceOwner(spec.kind, rank, perBlock, slot);
    uint32_t local = static_cast<uint32_t>(slot.off);
    if (slot.buf != BufferKind::Input)
      local += static_cast<uint32_t>(inChunks);
    if (slot.buf == BufferKind::Scratch)
      local += static_cast<uint32_t>(outChunks);
    return base[rank] + local;
  }

  /// The contents of `count` slots, or a failure message.
  std::optional<std::string> read(int32_t rank, Slot slot, int32_t count,
                                  llvm::SmallVectorImpl<Contents> &out) const {
    out.clear();
    for (int32_t i = 0; i < count; ++i) {
      const Contents &c = cells[cell(rank, {slot.buf, slot.off + i})];
      if (!c)
        return "reads " + name(rank, {slot.buf, slot.off + i}) +
               ", which holds no data";
      out.push_back(c);
    }
    return std::nullopt;
  }

  std::optional<std::string> write(int32_t rank, Slot slot,
                                   llvm::ArrayRef<Contents> values,
                                   uint64_t writer) {
    if (!inplace && slot.buf == BufferKind::Input)
      return "writes " + name(rank, slot) +
             ", but out of place the input must stay unchanged";
    for (size_t i = 0; i < values.size(); ++i) {
      uint32_t c = cell(rank, {slot.buf, slot.off + int32_t(i)});
      cells[c] = values[i];
      writers[c] = writer;
    }
    return std::nullopt;
  }

  /// `into[i] := into[i] (+) with[i]`; a contribution in both would be
  /// counted twice.
  std::optional<std::string> reduce(llvm::SmallVectorImpl<Contents> &into,
                                    llvm::ArrayRef<Contents> with) const {
    for (size_t i = 0; i < into.size(); ++i) {
      const std::vector<uint32_t> &a = *into[i], &b = *with[i];
      auto merged = std::make_shared<std::vector<uint32_t>>();
      merged->reserve(a.size() + b.size());
      size_t x = 0, y = 0;
      while (x < a.size() || y < b.size()) {
        if (x < a.size() && y < b.size() && a[x] == b[y])
          return "adds " + contrib(a[x]) + " to data that already holds it";
        bool takeA = y == b.size() || (x < a.size() && a[x] < b[y]);
        merged->push_back(takeA ? a[x++] : b[y++]);
      }
      into[i] = std::move(merged);
    }
    return std::nullopt;
  }

  /// Operands that share memory without being the same slots would be
  /// read and written chunk by chunk in an order-dependent way.
  std::optional<std::string> checkOverlap(int32_t rank, Slot src, Slot dst,
                                          int32_t count) const {
    uint32_t a = cell(rank, src), b = cell(rank, dst);
    if (a != b && a < b + count && b < a + count)
      return "reads " + name(rank, src) + " and writes " + name(rank, dst) +
             ", which overlap in memory";
    return std::nullopt;
  }

  /// The first output chunk that does not hold what the postcondition
  /// expects, with the last writer of its memory.
  std::optional<SymbolicFailure>
  checkPostcondition(llvm::function_ref<ir::StepRef(uint64_t)> where) const {
    for (int32_t r = 0; r < spec.nranks; ++r)
      for (int32_t i = 0; i < spec.outputChunks; ++i) {
        const std::vector<lang::ContribId> &want = spec.expected[r][i];
        if (want.empty())
          continue;
        for (int32_t t = 0; t < refinement; ++t) {
          Slot out{BufferKind::Output, i * refinement + t};
          uint32_t c = cell(r, out);
          // Refined part t of in(a, j) is in(a, j*R + t).
          auto refined = [&](lang::ContribId id) {
            return id * refinement + t;
          };
          if (cells[c] && cells[c]->size() == want.size() &&
              std::equal(want.begin(), want.end(), cells[c]->begin(),
                         [&](lang::ContribId id, uint32_t have) {
                           return refined(id) == have;
                         }))
            continue;
          std::vector<uint32_t> expected;
          for (lang::ContribId id : want)
            expected.push_back(refined(id));
          std::string have = cells[c] ? describe(*cells[c]) : "nothing";
          return SymbolicFailure{
              writers[c] == NoWriter ? ir::StepRef{} : where(writers[c]),
              "output chunk " + name(r, out) + " holds " + have +
                  " but must hold " + describe(expected)};
        }
      }
    return std::nullopt;
  }

  std::string name(int32_t rank, Slot slot) const {
    return std::to_string(rank) + ":" + ir::bufferName(slot.buf).str() + "[" +
           std::to_string(slot.off) + "]";
  }

private:
  std::string contrib(uint32_t id) const {
    return "in(" + std::to_string(id / inChunks) + "," +
           std::to_string(id % inChunks) + ")";
  }
  std::string describe(const std::vector<uint32_t> &ids) const {
    std::string text;
    for (size_t k = 0; k < ids.size() && k < 4; ++k)
      text += (k ? " + " : "") + contrib(ids[k]);
    if (ids.size() > 4)
      text += " + " + std::to_string(ids.size() - 4) + " more";
    return text;
  }

  const lang::CollectiveSpec &spec;
  int32_t refinement;
  bool inplace;
  int32_t perBlock, inChunks, outChunks;
  std::vector<uint32_t> base; ///< first cell of each rank
  std::vector<Contents> cells;
  std::vector<uint64_t> writers; ///< last writer of each cell (a tag)
};

} // namespace

bool validInProgramOrder(const lang::ChunkDag &dag, bool inplace) {
  Memory mem(dag, /*refinement=*/1, inplace);
  llvm::SmallVector<Contents, 4> src, dst;
  std::vector<std::vector<int32_t>> scratchBase(dag.collective.nranks);
  for (int32_t r = 0; r < dag.collective.nranks; ++r) {
    int32_t next = 0;
    for (int32_t chunks : dag.scratchChunks[r]) {
      scratchBase[r].push_back(next);
      next += chunks;
    }
  }
  auto slotOf = [&](const lang::SlotRange &range) {
    int32_t off = range.index;
    if (range.buffer.kind == BufferKind::Scratch)
      off += scratchBase[range.rank][range.buffer.scratchId];
    return Slot{range.buffer.kind, off};
  };
  for (uint32_t o = 0; o < dag.ops.size(); ++o) {
    const lang::ChunkOp &op = dag.ops[o];
    Slot from = slotOf(op.src), to = slotOf(op.dst);
    if (op.src.rank == op.dst.rank &&
        mem.checkOverlap(op.src.rank, from, to, op.src.size))
      return false;
    if (mem.read(op.src.rank, from, op.src.size, src))
      return false;
    if (op.kind == lang::OpKind::Reduce &&
        (mem.read(op.dst.rank, to, op.dst.size, dst) || mem.reduce(src, dst)))
      return false;
    if (mem.write(op.dst.rank, to, src, o))
      return false;
  }
  return !mem.checkPostcondition([](uint64_t) { return ir::StepRef{}; });
}

std::optional<SymbolicFailure> executeIR(const ir::Algorithm &alg,
                                         const ir::Analysis &analysis,
                                         const lang::ChunkDag &dag,
                                         int32_t refinement, bool inplace) {
  Memory mem(dag, refinement, inplace);
  std::vector<std::deque<llvm::SmallVector<Contents, 4>>> queues(
      analysis.connections.size());
  llvm::SmallVector<Contents, 4> data, local;
  // Writers are tagged with their position in the order.
  const std::vector<ir::StepRef> &order = analysis.topologicalOrder;
  for (uint64_t position = 0; position < order.size(); ++position) {
    const ir::StepRef &ref = order[position];
    const ir::Step &step = alg.gpus[ref.gpu].tbs[ref.tb].steps[ref.step];
    ir::StepTypeInfo info = ir::stepTypeInfo(step.type);
    if (step.type == ir::StepType::Nop)
      continue;
    Slot src{step.srcBuf, step.srcOff}, dst{step.dstBuf, step.dstOff};
    auto fail = [&](std::string message) {
      return SymbolicFailure{ref, std::move(message)};
    };
    if (info.receives) {
      auto &queue = queues[analysis.recvConnection[ref.gpu][ref.tb]];
      assert(!queue.empty() && "the topological order puts sends first");
      data = std::move(queue.front());
      queue.pop_front();
    } else if (info.readsSrc) {
      if (step.type == ir::StepType::Copy || step.type == ir::StepType::Reduce)
        if (auto err = mem.checkOverlap(ref.gpu, src, dst, step.count))
          return fail(*err);
      if (auto err = mem.read(ref.gpu, src, step.count, data))
        return fail(*err);
    }
    // Reductions combine with the local operand: src for receiving types,
    // dst for `re`.
    if (info.reduces) {
      Slot operand = info.receives ? src : dst;
      if (auto err = mem.read(ref.gpu, operand, step.count, local))
        return fail(*err);
      if (auto err = mem.reduce(data, local))
        return fail(*err);
    }
    if (info.writesDst)
      if (auto err = mem.write(ref.gpu, dst, data, position))
        return fail(*err);
    if (info.sends)
      queues[analysis.sendConnection[ref.gpu][ref.tb]].push_back(data);
  }
  return mem.checkPostcondition(
      [&](uint64_t position) { return order[position]; });
}

} // namespace coll::compiler
