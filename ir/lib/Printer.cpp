//===- Printer.cpp - Stable text dump of an algorithm ---------------------===//
//
// The format is documented in docs/IR.md; golden tests depend on it, so any
// change here is a change of that document too.
//
//===----------------------------------------------------------------------===//

#include "coll/ir/Printer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"

namespace coll::ir {

void printAlgorithm(const Algorithm &alg, llvm::raw_ostream &os) {
  os << "algo name=\"";
  llvm::printEscapedString(alg.name, os);
  os << "\" proto=" << protocolName(alg.protocol)
     << " nchannels=" << alg.nchannels
     << " nchunksperloop=" << alg.nchunksPerLoop << " ngpus=" << alg.ngpus()
     << " coll=";
  llvm::printEscapedString(collectiveAttribute(alg), os);
  os << " inplace=" << int(alg.inplace) << " outofplace=" << int(alg.outofplace)
     << " minBytes=" << alg.minBytes << " maxBytes=" << alg.maxBytes;
  if (collectiveInfo(alg.collective).hasRoot)
    os << " root=" << alg.root;
  os << '\n';

  for (size_t g = 0; g < alg.gpus.size(); ++g) {
    const Gpu &gpu = alg.gpus[g];
    os << "gpu " << g << ": i_chunks=" << gpu.inputChunks
       << " o_chunks=" << gpu.outputChunks << " s_chunks=" << gpu.scratchChunks
       << '\n';
    for (size_t t = 0; t < gpu.tbs.size(); ++t) {
      const ThreadBlock &tb = gpu.tbs[t];
      os << "  tb " << t << ": send=" << tb.sendPeer << " recv=" << tb.recvPeer
         << " chan=" << tb.channel << '\n';
      for (size_t s = 0; s < tb.steps.size(); ++s) {
        const Step &step = tb.steps[s];
        std::string fields;
        llvm::raw_string_ostream fs(fields);
        // A nop, a signal and a wait move no data: their operands mean
        // nothing.
        if (step.type != StepType::Nop && step.type != StepType::Signal &&
            step.type != StepType::Wait)
          fs << " src=" << bufferName(step.srcBuf) << '[' << step.srcOff << '+'
             << step.count << "] dst=" << bufferName(step.dstBuf) << '['
             << step.dstOff << '+' << step.count << ']';
        if (step.peer != -1)
          fs << " peer=" << step.peer;
        if (step.depTb != -1 || step.depStep != -1)
          fs << " dep=(tb " << step.depTb << ", step " << step.depStep << ')';
        if (step.hasDep)
          fs << " hasdep";
        // Pad the type so that the fields line up (no trailing blanks).
        os << "    " << s << ": "
           << llvm::left_justify(stepTypeName(step.type),
                                 fields.empty() ? 0 : 5)
           << fs.str() << '\n';
      }
    }
  }
}

} // namespace coll::ir
