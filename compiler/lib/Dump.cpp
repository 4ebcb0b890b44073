//===- Dump.cpp - Text dumps of schedules and DAGs ------------------------===//
//
// `collc --emit=schedule` and `--emit=dot`, both stable (docs/COMPILER.md,
// "Text formats"):
//
//   schedule coll=allreduce ranks=2 proto=Simple nchannels=1 ...
//   rank 0: tbs=1
//     tb 0: send=1 recv=1 chan=0
//       0: s     src=i[1+1] dst=o[1+1] ; %0 @9:42
//       1: rrcs  src=i[0+1] dst=o[0+1] hasdep ; %1 @9:42 then %2 @12:15
//
//   digraph dag {
//     op0 [label="%0 reduce 0->1\n0:input[0] -> 1:input[0]\n@9:42"];
//     op0 -> op1;
//   }
//
//===----------------------------------------------------------------------===//

#include "coll/compiler/Compiler.h"

#include "llvm/ADT/StringExtras.h"

namespace coll::compiler {

namespace {

const char *orderingName(Ordering ordering) {
  return ordering == Ordering::Simulated ? "simulated" : "program";
}

} // namespace

llvm::SmallVector<SourcePlace, 2> stepSources(const Schedule &schedule,
                                              const lang::ChunkDag &dag,
                                              const llvm::SourceMgr &srcMgr,
                                              ir::StepRef ref) {
  const StepOrigin &origin = schedule.origins[ref.gpu][ref.tb][ref.step];
  llvm::SmallVector<SourcePlace, 2> places;
  for (uint32_t op : {origin.op, origin.forwardedOp}) {
    if (op == NoOp)
      continue;
    SourcePlace place;
    place.op = op;
    place.lane = origin.lane;
    llvm::SMLoc loc = dag.ops[op].loc;
    if (unsigned buffer = srcMgr.FindBufferContainingLoc(loc)) {
      place.file = srcMgr.getMemoryBuffer(buffer)->getBufferIdentifier();
      std::tie(place.line, place.column) = srcMgr.getLineAndColumn(loc, buffer);
    }
    places.push_back(place);
  }
  return places;
}

void dumpSchedule(const Schedule &schedule, const lang::ChunkDag &dag,
                  const llvm::SourceMgr &srcMgr, llvm::raw_ostream &os) {
  const ir::Algorithm &alg = schedule.algorithm;
  os << "schedule name=\"";
  os.write_escaped(alg.name);
  os << "\" coll=" << ir::collectiveAttribute(alg) << " ranks=" << alg.ngpus()
     << " proto=" << ir::protocolName(alg.protocol)
     << " nchannels=" << alg.nchannels
     << " nchunksperloop=" << alg.nchunksPerLoop;
  if (alg.root >= 0)
    os << " root=" << alg.root;
  os << " inplace=" << int(alg.inplace) << " outofplace=" << int(alg.outofplace)
     << " refinement=" << schedule.refinement << " lanes=" << schedule.lanes
     << " fused=" << int(schedule.fused)
     << " order=" << orderingName(schedule.ordering) << '\n';
  for (int32_t g = 0; g < alg.ngpus(); ++g) {
    const ir::Gpu &gpu = alg.gpus[g];
    os << "rank " << g << ": tbs=" << gpu.tbs.size()
       << " i_chunks=" << gpu.inputChunks << " o_chunks=" << gpu.outputChunks
       << " s_chunks=" << gpu.scratchChunks << '\n';
    for (size_t t = 0; t < gpu.tbs.size(); ++t) {
      const ir::ThreadBlock &tb = gpu.tbs[t];
      os << "  tb " << t << ": send=" << tb.sendPeer << " recv=" << tb.recvPeer
         << " chan=" << tb.channel << '\n';
      for (size_t s = 0; s < tb.steps.size(); ++s) {
        const ir::Step &step = tb.steps[s];
        os << "    " << s << ": ";
        os << llvm::left_justify(ir::stepTypeName(step.type), 5);
        ir::StepTypeInfo info = ir::stepTypeInfo(step.type);
        bool sync = info.direct == ir::DirectRole::Signal ||
                    info.direct == ir::DirectRole::Wait;
        if (step.type != ir::StepType::Nop && !sync)
          os << " src=" << ir::bufferName(step.srcBuf) << '[' << step.srcOff
             << '+' << step.count << "] dst=" << ir::bufferName(step.dstBuf)
             << '[' << step.dstOff << '+' << step.count << ']';
        if (info.hasPeer())
          os << " peer=" << step.peer;
        if (step.hasDependency())
          os << " dep=(tb " << step.depTb << ", step " << step.depStep << ')';
        if (step.hasDep)
          os << " hasdep";
        os << " ;";
        llvm::ListSeparator then(" then");
        ir::StepRef ref{g, int32_t(t), int32_t(s)};
        for (const SourcePlace &place :
             stepSources(schedule, dag, srcMgr, ref)) {
          os << then << " %" << place.op;
          if (schedule.lanes > 1)
            os << '.' << place.lane;
          os << " @" << place.line << ':' << place.column;
        }
        os << '\n';
      }
    }
  }
}

void dumpDot(const lang::ChunkDag &dag, const llvm::SourceMgr &srcMgr,
             llvm::raw_ostream &os) {
  auto escaped = [](const std::string &text) {
    std::string out;
    for (char c : text) {
      if (c == '"' || c == '\\')
        out += '\\';
      out += c;
    }
    return out;
  };
  os << "digraph dag {\n  node [shape=box, fontname=\"monospace\"];\n";
  for (size_t id = 0; id < dag.ops.size(); ++id) {
    const lang::ChunkOp &op = dag.ops[id];
    auto [line, col] = srcMgr.getLineAndColumn(op.loc);
    os << "  op" << id << " [label=\"%" << id << ' '
       << (op.kind == lang::OpKind::Copy ? "copy " : "reduce ") << op.src.rank
       << "->" << op.dst.rank << "\\n"
       << escaped(lang::formatSlots(op.src, dag.scratchNames)) << " -> "
       << escaped(lang::formatSlots(op.dst, dag.scratchNames)) << "\\n@" << line
       << ':' << col << "\"];\n";
  }
  for (size_t id = 0; id < dag.ops.size(); ++id)
    for (uint32_t dep : dag.ops[id].deps)
      os << "  op" << dep << " -> op" << id << ";\n";
  os << "}\n";
}

} // namespace coll::compiler
