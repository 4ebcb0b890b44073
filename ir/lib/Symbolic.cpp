//===- Symbolic.cpp - Memory of sets of contributions ---------------------===//

#include "coll/ir/Symbolic.h"
#include "coll/ir/Check.h"
#include "coll/ir/Geometry.h"
#include "coll/ir/Verifier.h"

#include <algorithm>
#include <cassert>
#include <climits>

namespace coll::ir {

//===----------------------------------------------------------------------===//
// SymbolicMemory
//===----------------------------------------------------------------------===//

SymbolicMemory::SymbolicMemory(Collective kind, int32_t chunksPerBlock, const Definition &def,
                               std::vector<RankChunks> sizes, bool inplace, bool strict)
    : kind(kind), perBlock(chunksPerBlock), def(def), inplace(inplace), strict(strict),
      sizes(std::move(sizes)) {
  // In place, the buffer that aliases onto the other owns no memory
  // (inPlaceOwner never names it): it gets no cells, and the owner is made
  // large enough for every slot that aliases onto it (a file may declare
  // more chunks for the aliased buffer than for its owner).
  auto cover = [](int32_t &owner, int64_t slots) {
    owner = static_cast<int32_t>(std::clamp<int64_t>(slots, owner, INT32_MAX));
  };
  if (inplace)
    for (size_t r = 0; r < this->sizes.size(); ++r) {
      RankChunks &s = this->sizes[r];
      int64_t block = int64_t(r) * perBlock;
      if (kind == Collective::AllGather || kind == Collective::Gather) {
        cover(s.output, block + s.input);
        s.input = 0;
      } else if (kind == Collective::ReduceScatter || kind == Collective::Scatter) {
        cover(s.input, block + s.output);
        s.output = 0;
      } else {
        cover(s.input, s.output);
        s.output = 0;
      }
    }
  base.assign(this->sizes.size() + 1, 0);
  for (size_t r = 0; r < this->sizes.size(); ++r) {
    const RankChunks &s = this->sizes[r];
    base[r + 1] = base[r] + uint32_t(s.input) + uint32_t(s.output) + uint32_t(s.scratch);
  }
  cells.resize(base.back());
  writers.assign(base.back(), NoWriter32);
  ContribLayout layout = def.layout();
  for (int32_t r = 0; r < def.nranks; ++r)
    for (int32_t j = 0; j < def.inputChunks; ++j)
      if (def.inputDefined[r][j])
        cells[cell(r, {BufferKind::Input, j})] =
            ContribSet::single(layout.key(static_cast<uint32_t>(r * def.inputChunks + j)));
}

uint32_t SymbolicMemory::cell(int32_t rank, Slot slot) const {
  if (inplace)
    slot = inPlaceOwner(kind, rank, perBlock, slot);
  uint32_t local = static_cast<uint32_t>(slot.off);
  if (slot.buf != BufferKind::Input)
    local += static_cast<uint32_t>(sizes[rank].input);
  if (slot.buf == BufferKind::Scratch)
    local += static_cast<uint32_t>(sizes[rank].output);
  return base[rank] + local;
}

std::optional<std::string> SymbolicMemory::read(int32_t rank, Slot slot, int32_t count,
                                                llvm::SmallVectorImpl<Contents> &out) const {
  out.clear();
  for (int32_t i = 0; i < count; ++i) {
    const Contents &c = cells[cell(rank, {slot.buf, slot.off + i})];
    if (c.empty() && strict)
      return "reads " + name(rank, {slot.buf, slot.off + i}) + ", which holds no data";
    out.push_back(c);
  }
  return std::nullopt;
}

std::optional<std::string> SymbolicMemory::write(int32_t rank, Slot slot,
                                                 llvm::ArrayRef<Contents> values,
                                                 uint64_t writer) {
  assert(writer < NoWriter32 && "writer tags fit in 32 bits");
  if (!inplace && slot.buf == BufferKind::Input)
    return "writes " + name(rank, slot) + ", but out of place the input must stay unchanged";
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t c = cell(rank, {slot.buf, slot.off + int32_t(i)});
    cells[c] = values[i];
    writers[c] = static_cast<uint32_t>(writer);
  }
  return std::nullopt;
}

uint64_t SymbolicMemory::writer(int32_t rank, Slot slot) const {
  uint32_t w = writers[cell(rank, slot)];
  return w == NoWriter32 ? NoWriter : w;
}

std::optional<std::string> SymbolicMemory::reduce(llvm::SmallVectorImpl<Contents> &into,
                                                  llvm::ArrayRef<Contents> with) const {
  for (size_t i = 0; i < into.size(); ++i) {
    if (into[i].empty() || with[i].empty()) {
      into[i] = {};
      continue;
    }
    uint32_t common = 0;
    std::optional<ContribSet> merged = ContribSet::unite(into[i], with[i], common);
    if (!merged)
      return "adds " + contrib(def.layout().id(common)) + " to data that already holds it";
    into[i] = std::move(*merged);
  }
  return std::nullopt;
}

std::optional<std::string> SymbolicMemory::checkOverlap(int32_t rank, Slot src, Slot dst,
                                                        int32_t count) const {
  uint32_t a = cell(rank, src), b = cell(rank, dst);
  if (a != b && a < b + count && b < a + count)
    return "reads " + name(rank, src) + " and writes " + name(rank, dst) +
           ", which overlap in memory";
  return std::nullopt;
}

std::optional<SymbolicMemory::WrongOutput> SymbolicMemory::firstWrongOutput() const {
  for (int32_t r = 0; r < def.nranks; ++r)
    for (int32_t i = 0; i < def.outputChunks; ++i) {
      ContribSet want = def.want(r, i);
      if (want.empty())
        continue;
      Slot out{BufferKind::Output, i};
      const Contents &have = cells[cell(r, out)];
      if (have == want)
        continue;
      return WrongOutput{r, out,
                         "output chunk " + name(r, out) + " holds " + describe(have) +
                             " but must hold " + describe(want)};
    }
  return std::nullopt;
}

std::string SymbolicMemory::name(int32_t rank, Slot slot) const {
  return "rank " + std::to_string(rank) + " " + bufferName(slot.buf).str() + "[" +
         std::to_string(slot.off) + "]";
}

std::string SymbolicMemory::contrib(uint32_t id) const {
  return "in(" + std::to_string(id / def.inputChunks) + "," +
         std::to_string(id % def.inputChunks) + ")";
}

std::string SymbolicMemory::describe(const Contents &set) const {
  if (set.empty())
    return "undefined data";
  std::vector<uint32_t> ids = set.ids(def.layout());
  std::string text;
  for (size_t k = 0; k < ids.size() && k < 4; ++k)
    text += (k ? " + " : "") + contrib(ids[k]);
  if (ids.size() > 4)
    text += " + " + std::to_string(ids.size() - 4) + " more";
  return text;
}

//===----------------------------------------------------------------------===//
// An IR file on it
//===----------------------------------------------------------------------===//

std::optional<WrongResult> executeSymbolically(const Algorithm &alg, const Analysis &analysis,
                                               const Definition &def, bool inplace,
                                               bool strictReads) {
  assert(def.nranks == alg.ngpus() && "a definition for another rank count");
  // In place the file may declare 0 chunks for the aliased buffer, so each
  // buffer gets the larger of the file's and the definition's size.
  std::vector<SymbolicMemory::RankChunks> sizes;
  for (const Gpu &gpu : alg.gpus) {
    SymbolicMemory::RankChunks s{std::max(gpu.inputChunks, def.inputChunks),
                                 std::max(gpu.outputChunks, def.outputChunks),
                                 gpu.scratchChunks};
    // In place a custom collective aliases output chunk j with input
    // chunk j: the owner must be able to hold either.
    if (inplace && alg.collective == Collective::Custom)
      s.input = s.output = std::max(s.input, s.output);
    sizes.push_back(s);
  }
  using Contents = SymbolicMemory::Contents;
  constexpr uint64_t None = SymbolicMemory::NoWriter;
  SymbolicMemory mem(alg.collective, blockShape(alg).chunksPerBlock, def, std::move(sizes),
                     inplace, strictReads);
  const std::vector<StepRef> &order = analysis.topologicalOrder;
  // What each position's data came from (its sender, or the writer of what
  // it read), for the chain of steps in a report.
  std::vector<uint64_t> cameFrom(order.size(), None);
  struct Message {
    llvm::SmallVector<Contents, 4> data;
    uint64_t sender;
  };
  // Each connection's messages in flight: a vector and the index of the
  // oldest (a deque per connection would allocate a block for each), with
  // room for one inline: most connections of a large program carry one.
  struct Queue {
    llvm::SmallVector<Message, 1> messages;
    size_t head = 0;
  };
  std::vector<Queue> queues(analysis.connections.size());
  llvm::SmallVector<Contents, 4> data, local;
  auto chain = [&](uint64_t position) {
    std::vector<StepRef> steps;
    for (; position != None && steps.size() < 8; position = cameFrom[position])
      steps.push_back(order[position]);
    return steps;
  };
  for (uint64_t position = 0; position < order.size(); ++position) {
    const StepRef &ref = order[position];
    const Step &step = alg.gpus[ref.gpu].tbs[ref.tb].steps[ref.step];
    StepTypeInfo info = stepTypeInfo(step.type);
    if (step.type == StepType::Nop || step.type == StepType::Signal ||
        step.type == StepType::Wait)
      continue;
    Slot src{step.srcBuf, step.srcOff}, dst{step.dstBuf, step.dstOff};
    // Direct steps have one operand in their peer's memory.
    int32_t srcRank = info.direct == DirectRole::RemoteSrc ? step.peer : ref.gpu;
    int32_t dstRank = info.direct == DirectRole::RemoteDst ? step.peer : ref.gpu;
    auto fail = [&](std::string message) {
      return WrongResult{inplace, false, chain(position), std::move(message)};
    };
    if (info.receives) {
      Queue &queue = queues[analysis.recvConnection[ref.gpu][ref.tb]];
      assert(queue.head < queue.messages.size() && "the topological order puts sends first");
      Message &front = queue.messages[queue.head++];
      data = std::move(front.data);
      cameFrom[position] = front.sender;
      if (queue.head == queue.messages.size()) {
        queue.messages.clear();
        queue.head = 0;
      }
    } else if (info.readsSrc) {
      if (step.type == StepType::Copy || step.type == StepType::Reduce)
        if (auto err = mem.checkOverlap(ref.gpu, src, dst, step.count))
          return fail(*err);
      if (auto err = mem.read(srcRank, src, step.count, data))
        return fail(*err);
      cameFrom[position] = mem.writer(srcRank, src);
    }
    // Reductions combine with the local operand: src for receiving types,
    // dst for `re` and `getre`.
    if (info.reduces) {
      Slot operand = info.receives ? src : dst;
      if (auto err = mem.read(ref.gpu, operand, step.count, local))
        return fail(*err);
      if (auto err = mem.reduce(data, local))
        return fail(*err);
    }
    if (info.writesDst)
      if (auto err = mem.write(dstRank, dst, data, position))
        return fail(*err);
    if (info.sends)
      queues[analysis.sendConnection[ref.gpu][ref.tb]].messages.push_back({data, position});
  }
  auto wrong = mem.firstWrongOutput();
  if (!wrong)
    return std::nullopt;
  return WrongResult{inplace, true, chain(mem.writer(wrong->rank, wrong->slot)),
                     std::move(wrong->message)};
}

} // namespace coll::ir
