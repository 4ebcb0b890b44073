//===- Symbolic.cpp - The compiler's programs on contribution sets --------===//

#include "Symbolic.h"
#include "Program.h"

#include "coll/ir/Check.h"
#include "coll/ir/Symbolic.h"

#include "llvm/ADT/SmallVector.h"

namespace coll::compiler {

using ir::BufferKind;

ir::Definition refinedDefinition(const lang::CollectiveSpec &spec, int32_t refinement) {
  // Part t of in(a, j) is in(a, j*R + t): a built-in collective's blocks
  // of k chunks become blocks of k*R.
  if (spec.rule != ir::Collective::Custom)
    return ir::builtinDefinition(spec.rule, spec.nranks, spec.ruleChunks * refinement,
                                 spec.ruleRoot);
  ir::Definition def;
  def.nranks = spec.nranks;
  def.inputChunks = spec.inputChunks * refinement;
  def.outputChunks = spec.outputChunks * refinement;
  def.inputDefined.resize(spec.nranks);
  def.expected.resize(spec.nranks);
  for (int32_t r = 0; r < spec.nranks; ++r) {
    for (int32_t j = 0; j < def.inputChunks; ++j)
      def.inputDefined[r].push_back(spec.inputDefined[r][j / refinement]);
    def.expected[r].resize(def.outputChunks);
    for (int32_t i = 0; i < spec.outputChunks; ++i)
      for (int32_t t = 0; t < refinement; ++t)
        for (lang::ContribId id : spec.expected[r][i])
          def.expected[r][i * refinement + t].push_back(id * refinement + t);
  }
  return def;
}

bool validInProgramOrder(const lang::ChunkDag &dag, bool inplace) {
  const lang::CollectiveSpec &spec = dag.collective;
  const ir::Definition &def = spec;
  std::vector<ir::SymbolicMemory::RankChunks> sizes;
  std::vector<std::vector<int32_t>> scratchBase(spec.nranks);
  for (int32_t r = 0; r < spec.nranks; ++r) {
    int32_t next = 0;
    for (int32_t chunks : dag.scratchChunks[r]) {
      scratchBase[r].push_back(next);
      next += chunks;
    }
    sizes.push_back({spec.inputChunks, spec.outputChunks, next});
  }
  ir::SymbolicMemory mem(spec.kind, spec.chunksPerBlock, def, std::move(sizes), inplace,
                         /*strict=*/true);
  auto slotOf = [&](const lang::SlotRange &range) {
    int32_t off = range.index;
    if (range.buffer.kind == BufferKind::Scratch)
      off += scratchBase[range.rank][range.buffer.scratchId];
    return Slot{range.buffer.kind, off};
  };
  llvm::SmallVector<ir::SymbolicMemory::Contents, 4> src, dst;
  for (uint32_t o = 0; o < dag.ops.size(); ++o) {
    const lang::ChunkOp &op = dag.ops[o];
    Slot from = slotOf(op.src), to = slotOf(op.dst);
    if (op.src.rank == op.dst.rank && mem.checkOverlap(op.src.rank, from, to, op.src.size))
      return false;
    if (mem.read(op.src.rank, from, op.src.size, src))
      return false;
    if (op.kind == lang::OpKind::Reduce &&
        (mem.read(op.dst.rank, to, op.dst.size, dst) || mem.reduce(src, dst)))
      return false;
    if (mem.write(op.dst.rank, to, src, o))
      return false;
  }
  return !mem.firstWrongOutput();
}

} // namespace coll::compiler
