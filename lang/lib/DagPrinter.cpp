//===- DagPrinter.cpp - The text dump of a ChunkDag -----------------------===//
//
// collc --emit=dag. Fixed order, one fact per line (docs/LANGUAGE.md):
//
//   collective allreduce ranks=4 chunks=4 input=4 output=4 inplace=true @3:1
//   options name="ring" protocol=Simple instances=1 threadblocks=auto ...
//   scratch "scratch" chunks=0,0,0,0
//   pre 0:input[0:4] 1:input[0:4] 2:input[0:4] 3:input[0:4]
//   post 0:output[0] = in(0,0) + in(1,0) + in(2,0) + in(3,0)
//   ...
//   ops 24
//   %0 = reduce 0:input[0] -> 1:input[0] deps=[] @9:43
//
// Slots of operations are canonical (ChunkDag.h); pre lists the defined
// input chunks as ranges, post every constrained output chunk.
//
//===----------------------------------------------------------------------===//

#include "Tracer.h"

#include "coll/lang/Frontend.h"

using namespace coll;
using namespace coll::lang;

void coll::lang::dumpDag(const ChunkDag &dag, const llvm::SourceMgr &srcMgr,
                         llvm::raw_ostream &os) {
  auto at = [&](llvm::SMLoc loc) {
    auto [line, col] = srcMgr.getLineAndColumn(loc);
    os << " @" << line << ':' << col << '\n';
  };
  auto slots = [&](const SlotRange &range) {
    os << formatSlots(range, dag.scratchNames);
  };
  const CollectiveSpec &c = dag.collective;
  os << "collective " << ir::collectiveName(c.kind) << " ranks=" << c.nranks
     << " chunks=" << c.chunksPerBlock << " input=" << c.inputChunks
     << " output=" << c.outputChunks;
  if (c.root >= 0)
    os << " root=" << c.root;
  os << " inplace=" << (c.inplace ? "true" : "false");
  at(c.loc);

  const ProgramOptions &o = dag.options;
  os << "options name=\"" << o.name << "\" protocol="
     << (o.protocol ? ir::protocolName(*o.protocol) : "default")
     << " instances=" << o.instances
     << " threadblocks=" << (o.manualThreadblocks ? "manual" : "auto")
     << " fusion=" << (o.fusion ? "true" : "false")
     << " min_bytes=" << o.minBytes << " max_bytes=" << o.maxBytes << '\n';

  for (size_t id = 0; id < dag.scratchNames.size(); ++id) {
    os << "scratch \"" << dag.scratchNames[id] << "\" chunks=";
    for (int32_t r = 0; r < c.nranks; ++r)
      os << (r ? "," : "") << dag.scratchChunks[r][id];
    os << '\n';
  }

  os << "pre";
  for (int32_t r = 0; r < c.nranks; ++r) {
    const std::vector<bool> &defined = c.inputDefined[r];
    for (int32_t i = 0; i < c.inputChunks;) {
      if (!defined[i]) {
        ++i;
        continue;
      }
      int32_t end = i;
      while (end < c.inputChunks && defined[end])
        ++end;
      os << ' ';
      slots({r, {ir::BufferKind::Input, 0}, i, end - i});
      i = end;
    }
  }
  os << '\n';
  for (int32_t r = 0; r < c.nranks; ++r) {
    for (int32_t i = 0; i < c.outputChunks; ++i) {
      std::vector<ContribId> want = c.wantIds(r, i);
      if (want.empty())
        continue;
      os << "post ";
      slots({r, {ir::BufferKind::Output, 0}, i, 1});
      os << " =";
      for (size_t k = 0; k < want.size(); ++k)
        os << (k ? " + " : " ") << formatContrib(want[k], c.inputChunks);
      os << '\n';
    }
  }

  os << "ops " << dag.ops.size() << '\n';
  for (size_t id = 0; id < dag.ops.size(); ++id) {
    const ChunkOp &op = dag.ops[id];
    const char *name = op.direct == Direct::Put ? "put "
                       : op.direct == Direct::Get
                           ? (op.kind == OpKind::Copy ? "get " : "get_reduce ")
                       : op.kind == OpKind::Copy ? "copy "
                                                 : "reduce ";
    os << '%' << id << " = " << name;
    slots(op.src);
    os << " -> ";
    slots(op.dst);
    if (op.channel >= 0)
      os << " ch=" << op.channel;
    if (op.sendTb >= 0)
      os << " sendtb=" << op.sendTb;
    if (op.recvTb >= 0)
      os << " recvtb=" << op.recvTb;
    if (op.parallel != 1)
      os << " parallel=" << op.parallel;
    os << " deps=[";
    for (size_t k = 0; k < op.deps.size(); ++k)
      os << (k ? "," : "") << op.deps[k];
    os << ']';
    at(op.loc);
  }
}
