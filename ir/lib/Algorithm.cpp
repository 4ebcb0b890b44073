//===- Algorithm.cpp - Names and properties of the IR's closed sets -------===//

#include "coll/ir/Algorithm.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/StringSwitch.h"

namespace coll::ir {

llvm::StringRef stepTypeName(StepType type) {
  switch (type) {
#define COLL_STEP_TYPE(Enum, XmlName, Recv, Send, ReadsSrc, Red, WritesDst, Direct)      \
  case StepType::Enum:                                                         \
    return XmlName;
#include "coll/ir/StepTypes.def"
  }
  return "?";
}

std::optional<StepType> parseStepType(llvm::StringRef name) {
#define COLL_STEP_TYPE(Enum, XmlName, Recv, Send, ReadsSrc, Red, WritesDst, Direct)      \
  if (name == XmlName)                                                         \
    return StepType::Enum;
#include "coll/ir/StepTypes.def"
  return std::nullopt;
}

llvm::StringRef collectiveName(Collective coll) {
  switch (coll) {
#define COLL_COLLECTIVE(Enum, XmlName, Root, InPerRank, OutPerRank, Red, MulN, Off) \
  case Collective::Enum:                                                       \
    return XmlName;
#include "coll/ir/Collectives.def"
  }
  return "?";
}

std::optional<Collective> parseCollective(llvm::StringRef name) {
  // Spellings other tools write for the same collectives.
  if (name == "reduce_scatter")
    return Collective::ReduceScatter;
#define COLL_COLLECTIVE(Enum, XmlName, Root, InPerRank, OutPerRank, Red, MulN, Off) \
  if (name == XmlName)                                                         \
    return Collective::Enum;
#include "coll/ir/Collectives.def"
  return std::nullopt;
}

llvm::StringRef collectiveAttribute(const Algorithm &alg) {
  return alg.collective == Collective::Custom
             ? llvm::StringRef(alg.collectiveSpelling)
             : collectiveName(alg.collective);
}

llvm::StringRef protocolName(Protocol proto) {
  switch (proto) {
  case Protocol::Simple: return "Simple";
  case Protocol::LL: return "LL";
  case Protocol::LL128: return "LL128";
  }
  return "?";
}

std::optional<Protocol> parseProtocol(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<Protocol>>(name)
      .Case("Simple", Protocol::Simple)
      .Case("LL", Protocol::LL)
      .Case("LL128", Protocol::LL128)
      .Default(std::nullopt);
}

llvm::StringRef bufferName(BufferKind buffer) {
  switch (buffer) {
  case BufferKind::Input: return "i";
  case BufferKind::Output: return "o";
  case BufferKind::Scratch: return "s";
  }
  return "?";
}

std::optional<BufferKind> parseBuffer(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<BufferKind>>(name)
      .Case("i", BufferKind::Input)
      .Case("o", BufferKind::Output)
      .Case("s", BufferKind::Scratch)
      .Default(std::nullopt);
}

bool operator==(const Step &a, const Step &b) {
  return a.type == b.type && a.srcBuf == b.srcBuf && a.srcOff == b.srcOff &&
         a.dstBuf == b.dstBuf && a.dstOff == b.dstOff && a.count == b.count &&
         a.depTb == b.depTb && a.depStep == b.depStep && a.hasDep == b.hasDep &&
         a.peer == b.peer;
}

bool Algorithm::hasDirectSteps() const {
  for (const Gpu &gpu : gpus)
    for (const ThreadBlock &tb : gpu.tbs)
      for (const Step &step : tb.steps)
        if (stepTypeInfo(step.type).hasPeer())
          return true;
  return false;
}

bool operator==(const ThreadBlock &a, const ThreadBlock &b) {
  return a.sendPeer == b.sendPeer && a.recvPeer == b.recvPeer &&
         a.channel == b.channel && a.steps == b.steps;
}

bool operator==(const Gpu &a, const Gpu &b) {
  return a.inputChunks == b.inputChunks && a.outputChunks == b.outputChunks &&
         a.scratchChunks == b.scratchChunks && a.tbs == b.tbs;
}

bool operator==(const Algorithm &a, const Algorithm &b) {
  return a.name == b.name && a.protocol == b.protocol &&
         a.nchannels == b.nchannels && a.nchunksPerLoop == b.nchunksPerLoop &&
         a.collective == b.collective &&
         a.collectiveSpelling == b.collectiveSpelling && a.root == b.root &&
         a.inplace == b.inplace && a.outofplace == b.outofplace &&
         a.minBytes == b.minBytes && a.maxBytes == b.maxBytes &&
         a.gpus == b.gpus && a.condition == b.condition;
}

uint64_t hashAlgorithm(const Algorithm &alg) {
  // Everything operator== compares, in order; the same on every rank and
  // every host (llvm::hash_combine's seed is fixed).
  llvm::hash_code h = llvm::hash_combine(
      llvm::StringRef(alg.name), int(alg.protocol), alg.nchannels, alg.nchunksPerLoop,
      int(alg.collective), llvm::StringRef(alg.collectiveSpelling), alg.root, alg.inplace,
      alg.outofplace, alg.minBytes, alg.maxBytes, alg.gpus.size());
  for (const Gpu &gpu : alg.gpus) {
    h = llvm::hash_combine(h, gpu.inputChunks, gpu.outputChunks, gpu.scratchChunks,
                           gpu.tbs.size());
    for (const ThreadBlock &tb : gpu.tbs) {
      h = llvm::hash_combine(h, tb.sendPeer, tb.recvPeer, tb.channel, tb.steps.size());
      for (const Step &step : tb.steps) {
        h = llvm::hash_combine(h, int(step.type), int(step.srcBuf), step.srcOff,
                               int(step.dstBuf), step.dstOff, step.count, step.depTb,
                               step.depStep, step.hasDep);
        // Only direct steps have a peer: MSCCL files hash as they always did.
        if (step.peer != -1)
          h = llvm::hash_combine(h, step.peer);
      }
    }
  }
  h = llvm::hash_combine(h, alg.condition.has_value());
  if (const std::optional<Definition> &def = alg.condition) {
    h = llvm::hash_combine(h, def->nranks, def->inputChunks, def->outputChunks, int(def->rule),
                           def->ruleChunks, def->ruleRoot);
    for (const std::vector<bool> &defined : def->inputDefined)
      h = llvm::hash_combine(h, llvm::hash_combine_range(defined.begin(), defined.end()));
    for (const auto &rank : def->expected)
      for (const std::vector<uint32_t> &ids : rank)
        h = llvm::hash_combine(h, ids.size(), llvm::hash_combine_range(ids.begin(), ids.end()));
  }
  return uint64_t(h);
}

} // namespace coll::ir
