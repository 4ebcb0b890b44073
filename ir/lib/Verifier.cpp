//===- Verifier.cpp - Checking an algorithm against the IR contract -------===//
//
// The checks run element by element (header, gpus, tbs, steps), then over
// connections (matching each sender's sends with its receiver's receives),
// then over the global step graph, whose topological order is the deadlock
// check. Every check reports and carries on, so that one run lists every
// problem; the later phases only follow references the earlier ones found
// to be in range.
//
// Nothing is allocated by a number taken from the algorithm (nchannels may be
// 2^31 - 1): only by the sizes of its vectors.
//
//===----------------------------------------------------------------------===//

#include "coll/ir/Verifier.h"

#include "coll/ir/Geometry.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <deque>
#include <map>
#include <tuple>

namespace coll::ir {
namespace {

/// A step's index in the global step graph.
using NodeId = uint32_t;
constexpr NodeId NoNode = ~NodeId(0);

const char *chunksAttribute(BufferKind buffer) {
  switch (buffer) {
  case BufferKind::Input:
    return "i_chunks";
  case BufferKind::Output:
    return "o_chunks";
  case BufferKind::Scratch:
    return "s_chunks";
  }
  return "?";
}

std::string times(size_t n) {
  return std::to_string(n) + (n == 1 ? " time" : " times");
}

std::string describe(StepRef ref) {
  return "gpu " + std::to_string(ref.gpu) + " tb " + std::to_string(ref.tb) +
         " step " + std::to_string(ref.step);
}

class Verifier {
public:
  Verifier(const Algorithm &alg, DiagnosticList &diags,
           const RuntimeLimits &limits)
      : alg(alg), diags(diags), limits(limits), ngpus(alg.ngpus()) {}

  llvm::Expected<Analysis> run();

private:
  void checkHeader();
  bool checkExtent();
  void checkCondition(const Definition &def);
  void checkGpu(int32_t g);
  void checkTb(int32_t g, int32_t t);
  void checkStep(int32_t g, int32_t t, int32_t s);
  void checkOperand(StepRef ref, const Step &step, const char *role,
                    BufferKind buffer, int32_t offset, int32_t owner);
  void checkDirect(StepRef ref, const Step &step, const StepTypeInfo &info);
  void checkDirectTarget();
  void checkDependency(StepRef ref, const Step &step);
  void checkChannelLoad(int32_t g);
  void buildConnections();
  void matchConnection(const Connection &conn);
  void buildSignals();
  void orderSteps();
  void reportCycle(llvm::ArrayRef<NodeId> cycle, llvm::ArrayRef<StepRef> refs);

  bool validPeer(int32_t g, int32_t peer) const {
    return peer >= 0 && peer < ngpus && peer != g;
  }
  /// Whether `step` (on gpu `g`) depends on a step that exists.
  bool dependencyExists(int32_t g, const Step &step) const {
    const Gpu &gpu = alg.gpus[g];
    return step.depTb >= 0 && step.depStep >= 0 &&
           static_cast<size_t>(step.depTb) < gpu.tbs.size() &&
           static_cast<size_t>(step.depStep) < gpu.tbs[step.depTb].steps.size();
  }
  const Step &stepAt(StepRef ref) const {
    return alg.gpus[ref.gpu].tbs[ref.tb].steps[ref.step];
  }
  void error(uint32_t line, StepRef where, const llvm::Twine &message) {
    diags.error(line, where, message);
  }

  const Algorithm &alg;
  DiagnosticList &diags;
  const RuntimeLimits &limits;
  int32_t ngpus;
  /// The buffer shape, when the header allows computing it.
  std::optional<BlockShape> shape;
  Analysis analysis;
};

llvm::Expected<Analysis> Verifier::run() {
  unsigned errorsBefore = diags.errorCount();
  checkHeader();
  if (!checkExtent())
    return diags.takeErrors();
  for (int32_t g = 0; g < ngpus; ++g)
    checkGpu(g);
  buildConnections();
  buildSignals();
  checkDirectTarget();
  orderSteps();
  if (diags.errorCount() != errorsBefore)
    return diags.takeErrors();
  return std::move(analysis);
}

void Verifier::checkHeader() {
  CollectiveInfo info = collectiveInfo(alg.collective);
  llvm::StringRef coll = collectiveAttribute(alg);
  if (ngpus < 1)
    error(alg.line, {}, "the algorithm has no gpus");
  if (alg.nchannels < 1)
    error(alg.line, {},
          "nchannels " + llvm::Twine(alg.nchannels) + " must be at least 1");
  bool perRank = info.inputPerRank || info.outputPerRank;
  if (alg.nchunksPerLoop < 1)
    error(alg.line, {},
          "nchunksperloop " + llvm::Twine(alg.nchunksPerLoop) +
              " must be at least 1");
  else if (perRank && ngpus > 0 && alg.nchunksPerLoop % ngpus != 0)
    error(alg.line, {},
          "nchunksperloop " + llvm::Twine(alg.nchunksPerLoop) +
              " is not a multiple of ngpus " + llvm::Twine(ngpus) + ", as " +
              coll + " requires");
  else if (alg.collective != Collective::Custom && ngpus > 0)
    shape = blockShape(alg);

  if (info.hasRoot && (alg.root < 0 || alg.root >= ngpus))
    error(alg.line, {},
          "root " + llvm::Twine(alg.root) + " is out of range [0, " +
              llvm::Twine(ngpus) + ")");
  else if (!info.hasRoot && alg.root != -1)
    error(alg.line, {},
          "root " + llvm::Twine(alg.root) + " given, but " + coll +
              " has no root (root must be -1)");
  if (alg.maxBytes != 0 && alg.minBytes > alg.maxBytes)
    error(alg.line, {},
          "minBytes " + llvm::Twine(alg.minBytes) +
              " is larger than maxBytes " + llvm::Twine(alg.maxBytes));
  if (alg.condition)
    checkCondition(*alg.condition);
}

void Verifier::checkCondition(const Definition &def) {
  uint32_t line = alg.conditionLine ? alg.conditionLine : alg.line;
  if (alg.collective != Collective::Custom) {
    error(line, {},
          "a <condition> belongs to a custom collective, but " +
              collectiveAttribute(alg) + " has a built-in definition");
    return;
  }
  // An algorithm built in memory may hold anything; the reader's are
  // consistent.
  bool consistent =
      def.nranks == ngpus && def.inputDefined.size() == size_t(ngpus) &&
      def.expected.size() == size_t(ngpus) &&
      llvm::all_of(def.inputDefined,
                   [&](const auto &v) { return v.size() == size_t(def.inputChunks); }) &&
      llvm::all_of(def.expected, [&](const auto &v) {
        return v.size() == size_t(def.outputChunks);
      });
  if (!consistent) {
    error(line, {},
          "the condition is not for " + llvm::Twine(ngpus) + " ranks of " +
              llvm::Twine(def.inputChunks) + " input and " +
              llvm::Twine(def.outputChunks) + " output chunks");
    return;
  }
  // A custom collective's buffers are one block of nchunksperloop chunks.
  for (auto [chunks, attr] : {std::pair(def.inputChunks, "i_chunks"),
                              std::pair(def.outputChunks, "o_chunks")})
    if (alg.nchunksPerLoop >= 1 && chunks > alg.nchunksPerLoop)
      error(line, {},
            "condition " + llvm::Twine(attr) + " " + llvm::Twine(chunks) +
                " is larger than nchunksperloop " +
                llvm::Twine(alg.nchunksPerLoop) +
                ", the chunks of a custom collective's buffers");
}

/// The chunks every gpu's buffers declare, summed, within what the checks
/// that keep a cell per chunk (the race check, the symbolic execution) can
/// hold: false (reported) when over MaxDeclaredChunks, and nothing more is
/// checked. Per gpu: the larger of nchunksperloop (which bounds what the
/// collective defines for the input and output) and i_chunks and o_chunks,
/// plus s_chunks.
bool Verifier::checkExtent() {
  int64_t total = 0;
  for (const Gpu &gpu : alg.gpus)
    total += std::max<int64_t>({alg.nchunksPerLoop, gpu.inputChunks, gpu.outputChunks, 0}) +
             std::max<int32_t>(gpu.scratchChunks, 0);
  if (total <= MaxDeclaredChunks)
    return true;
  error(alg.line, {},
        "the gpus' buffers declare " + llvm::Twine(total) +
            " chunks in all (per gpu the larger of nchunksperloop, i_chunks and o_chunks, "
            "plus s_chunks), over the limit of " +
            llvm::Twine(MaxDeclaredChunks));
  return false;
}

void Verifier::checkGpu(int32_t g) {
  const Gpu &gpu = alg.gpus[g];
  StepRef where{g, -1, -1};
  for (BufferKind buffer :
       {BufferKind::Input, BufferKind::Output, BufferKind::Scratch}) {
    int32_t chunks = gpu.chunks(buffer);
    if (chunks < 0)
      error(gpu.line, where,
            llvm::Twine(chunksAttribute(buffer)) + " " + llvm::Twine(chunks) +
                " is negative");
    // In-place files often declare fewer (even 0) chunks for the buffer
    // they do not use; only more than the collective defines is wrong.
    else if (shape && buffer != BufferKind::Scratch &&
             chunks > shape->chunks(buffer))
      error(gpu.line, where,
            llvm::Twine(chunksAttribute(buffer)) + " " + llvm::Twine(chunks) +
                " is larger than the " + llvm::Twine(shape->chunks(buffer)) +
                " chunks of the " +
                (buffer == BufferKind::Input ? "input" : "output") +
                " of this " + collectiveName(alg.collective));
  }
  int32_t ntbs = static_cast<int32_t>(gpu.tbs.size());
  if (limits.maxTbsPerGpu > 0 && ntbs > limits.maxTbsPerGpu) {
    int32_t first = limits.maxTbsPerGpu;
    error(gpu.tbs[first].line, {g, first, -1},
          "over the limit of " + llvm::Twine(limits.maxTbsPerGpu) +
              " tbs per gpu: the gpu has " + llvm::Twine(ntbs) + " tbs, " +
              llvm::Twine(ntbs - limits.maxTbsPerGpu) + " too many");
  }
  for (int32_t t = 0; t < ntbs; ++t)
    checkTb(g, t);
  checkChannelLoad(g);
}

void Verifier::checkTb(int32_t g, int32_t t) {
  const ThreadBlock &tb = alg.gpus[g].tbs[t];
  StepRef where{g, t, -1};
  for (auto [role, peer] :
       {std::pair("send", tb.sendPeer), std::pair("recv", tb.recvPeer)}) {
    if (peer == -1)
      continue;
    if (peer < -1 || peer >= ngpus)
      error(tb.line, where,
            llvm::Twine(role) + " peer " + llvm::Twine(peer) +
                " is out of range [-1, " + llvm::Twine(ngpus) + ")");
    else if (peer == g)
      error(tb.line, where,
            llvm::Twine(role) + " peer " + llvm::Twine(peer) +
                " is the tb's own rank");
  }
  if (tb.channel < 0 || tb.channel >= alg.nchannels)
    error(tb.line, where,
          "chan " + llvm::Twine(tb.channel) + " is out of range [0, " +
              llvm::Twine(alg.nchannels) + ") given by nchannels");
  int32_t nsteps = static_cast<int32_t>(tb.steps.size());
  if (limits.maxStepsPerTb > 0 && nsteps > limits.maxStepsPerTb)
    error(tb.line, where,
          "over the limit of " + llvm::Twine(limits.maxStepsPerTb) +
              " steps per tb: the tb has " + llvm::Twine(nsteps) + " steps, " +
              llvm::Twine(nsteps - limits.maxStepsPerTb) + " too many");

  // A nop hands its dependency to the next real step; at the end of a tb
  // there is none. Where nops run as steps (Coll's runtimes), trailing nops
  // still matter when another tb waits for the last of them; MSCCL folds
  // nops into the next real step, so there they are always an error.
  int32_t trailing = nsteps;
  while (trailing > 0 && tb.steps[trailing - 1].type == StepType::Nop)
    --trailing;
  if (trailing < nsteps && !(limits.nopsRun && tb.steps[nsteps - 1].hasDep))
    error(tb.steps[trailing].line, {g, t, trailing},
          "nop at the end of its tb: no later step carries its dependency");

  for (int32_t s = 0; s < nsteps; ++s)
    checkStep(g, t, s);
}

void Verifier::checkStep(int32_t g, int32_t t, int32_t s) {
  const ThreadBlock &tb = alg.gpus[g].tbs[t];
  const Step &step = tb.steps[s];
  StepRef ref{g, t, s};
  StepTypeInfo info = stepTypeInfo(step.type);
  llvm::StringRef type = stepTypeName(step.type);
  if (info.sends && tb.sendPeer == -1)
    error(step.line, ref,
          "'" + type + "' sends, but the tb has no send peer (send=-1)");
  if (info.receives && tb.recvPeer == -1)
    error(step.line, ref,
          "'" + type + "' receives, but the tb has no receive peer (recv=-1)");
  // Signals and waits move no data: like a nop's, their cnt is unused.
  if (step.type != StepType::Nop && step.type != StepType::Signal &&
      step.type != StepType::Wait) {
    if (step.count < 1)
      error(step.line, ref,
            "cnt " + llvm::Twine(step.count) + " must be at least 1");
    if (limits.maxCount > 0 && step.count >= limits.maxCount)
      error(step.line, ref,
            "cnt " + llvm::Twine(step.count) +
                " is over the limit: cnt must be below " +
                llvm::Twine(limits.maxCount) + " (" +
                llvm::Twine(step.count - limits.maxCount + 1) + " too many)");
  }
  // Only the operands the step type uses: the dst of `s` and the src of
  // `r`/`rcs` are informational, and a nop has none.
  checkDirect(ref, step, info);
  // A direct step's remote operand is in its peer's buffers.
  bool peerValid = validPeer(g, step.peer);
  int32_t srcOwner = info.direct == DirectRole::RemoteSrc ? step.peer : g;
  int32_t dstOwner = info.direct == DirectRole::RemoteDst ? step.peer : g;
  if (info.readsSrc && (srcOwner == g || peerValid))
    checkOperand(ref, step, "src", step.srcBuf, step.srcOff, srcOwner);
  if (info.writesDst && (dstOwner == g || peerValid))
    checkOperand(ref, step, "dst", step.dstBuf, step.dstOff, dstOwner);
  checkDependency(ref, step);
  // The reference compiler sometimes writes the sender's index into a
  // receiving step's srcoff (docs/ARCHITECTURE.md §3). A reducing receive
  // whose local operand is in another buffer than its destination (an
  // out-of-place reduce-scatter's last hop: input block r into output block
  // 0) names two places, and its offsets differ by right.
  if (info.receives && step.srcOff != step.dstOff &&
      !(info.readsSrc && step.srcBuf != step.dstBuf))
    diags.warning(step.line, ref,
                  "'" + type + "' has srcoff " + llvm::Twine(step.srcOff) +
                      " but dstoff " + llvm::Twine(step.dstOff) +
                      (info.readsSrc
                           ? ": srcoff is the local operand it reduces with"
                           : ": srcoff is unused here, but receiving steps name "
                             "their local operand there"));
}

void Verifier::checkDirect(StepRef ref, const Step &step,
                           const StepTypeInfo &info) {
  llvm::StringRef type = stepTypeName(step.type);
  if (!info.hasPeer()) {
    if (step.peer != -1)
      error(step.line, ref,
            "peer " + llvm::Twine(step.peer) + " given, but '" + type +
                "' is not a direct step: only put, get, getre, signal and "
                "wait name a peer");
    return;
  }
  if (step.peer == -1)
    error(step.line, ref,
          "'" + type + "' is a direct step and needs a peer attribute");
  else if (step.peer < 0 || step.peer >= ngpus)
    error(step.line, ref,
          "peer " + llvm::Twine(step.peer) + " is out of range [0, " +
              llvm::Twine(ngpus) + ")");
  else if (step.peer == ref.gpu)
    error(step.line, ref,
          "peer " + llvm::Twine(step.peer) +
              " is the step's own rank: a direct step reaches another rank");
}

/// MSCCL XML has FIFO steps only; one error, at the first direct step.
void Verifier::checkDirectTarget() {
  if (limits.directSteps)
    return;
  StepRef first;
  size_t count = 0;
  for (int32_t g = 0; g < ngpus; ++g)
    for (int32_t t = 0; t < static_cast<int32_t>(alg.gpus[g].tbs.size()); ++t)
      for (int32_t s = 0;
           s < static_cast<int32_t>(alg.gpus[g].tbs[t].steps.size()); ++s)
        if (stepTypeInfo(alg.gpus[g].tbs[t].steps[s].type).hasPeer() &&
            count++ == 0)
          first = {g, t, s};
  if (count == 0)
    return;
  const Step &step = stepAt(first);
  error(step.line, first,
        "'" + stepTypeName(step.type) +
            "' is a direct step, which MSCCL XML does not have: this target "
            "runs FIFO steps only (" +
            llvm::Twine(count) + " direct " +
            (count == 1 ? "step" : "steps") + " in the file)");
}

void Verifier::checkOperand(StepRef ref, const Step &step, const char *role,
                            BufferKind buffer, int32_t offset, int32_t owner) {
  if (offset < 0) {
    error(step.line, ref,
          llvm::Twine(role) + "off " + llvm::Twine(offset) + " is negative");
    return;
  }
  int32_t chunks = alg.gpus[owner].chunks(buffer);
  int64_t end = int64_t(offset) + std::max<int64_t>(step.count, 0);
  if (end > chunks)
    error(step.line, ref,
          llvm::Twine(role) + "off " + llvm::Twine(offset) + " + cnt " +
              llvm::Twine(step.count) + " exceeds " + chunksAttribute(buffer) +
              " " + llvm::Twine(chunks) +
              (owner != ref.gpu ? " of gpu " + std::to_string(owner) +
                                      ", the step's peer"
                                : std::string()));
}

void Verifier::checkDependency(StepRef ref, const Step &step) {
  if (step.depTb == -1 && step.depStep == -1)
    return;
  if (step.depTb < 0 || step.depStep < 0) {
    error(step.line, ref,
          "depid " + llvm::Twine(step.depTb) + " and deps " +
              llvm::Twine(step.depStep) +
              ": both must be -1, or both must name a step");
    return;
  }
  const Gpu &gpu = alg.gpus[ref.gpu];
  if (static_cast<size_t>(step.depTb) >= gpu.tbs.size()) {
    error(step.line, ref,
          "dependency on tb " + llvm::Twine(step.depTb) +
              ", but the gpu has only " + llvm::Twine(gpu.tbs.size()) + " tbs");
    return;
  }
  const ThreadBlock &target = gpu.tbs[step.depTb];
  if (static_cast<size_t>(step.depStep) >= target.steps.size()) {
    error(step.line, ref,
          "dependency on tb " + llvm::Twine(step.depTb) + " step " +
              llvm::Twine(step.depStep) + ", but that tb has only " +
              llvm::Twine(target.steps.size()) + " steps");
    return;
  }
  if (!target.steps[step.depStep].hasDep)
    error(step.line, ref,
          "dependency on tb " + llvm::Twine(step.depTb) + " step " +
              llvm::Twine(step.depStep) +
              ", which has hasdep=0: it never signals, so this step would "
              "wait forever");
}

void Verifier::checkChannelLoad(int32_t g) {
  if (limits.maxTbsPerChannelDirection <= 0)
    return;
  const Gpu &gpu = alg.gpus[g];
  for (bool sending : {true, false}) {
    // (channel, tb) of the tbs driving this direction, grouped by channel.
    std::vector<std::pair<int32_t, int32_t>> users;
    for (int32_t t = 0; t < static_cast<int32_t>(gpu.tbs.size()); ++t) {
      const ThreadBlock &tb = gpu.tbs[t];
      if ((sending ? tb.sendPeer : tb.recvPeer) != -1)
        users.emplace_back(tb.channel, t);
    }
    llvm::sort(users);
    int32_t limit = limits.maxTbsPerChannelDirection;
    for (size_t begin = 0, end; begin < users.size(); begin = end) {
      end = begin;
      while (end < users.size() && users[end].first == users[begin].first)
        ++end;
      int32_t count = static_cast<int32_t>(end - begin);
      if (count <= limit)
        continue;
      int32_t first = users[begin + limit].second;
      error(gpu.tbs[first].line, {g, first, -1},
            "over the limit of " + llvm::Twine(limit) + " tbs " +
                (sending ? "sending" : "receiving") + " on one channel: " +
                llvm::Twine(count) + " tbs " + (sending ? "send" : "receive") +
                " on channel " + llvm::Twine(users[begin].first) + ", " +
                llvm::Twine(count - limit) + " too many");
    }
  }
}

/// Pairs each tb that sends to P on channel C with the tb of P that receives
/// from this rank on C. Both sides are sorted by (sender, receiver, channel),
/// which is the order of Analysis::connections, and merged.
void Verifier::buildConnections() {
  struct End {
    int32_t sender, receiver, channel, tb;
    auto key() const { return std::tie(sender, receiver, channel); }
    bool operator<(const End &other) const {
      return std::tie(sender, receiver, channel, tb) <
             std::tie(other.sender, other.receiver, other.channel, other.tb);
    }
  };
  std::vector<End> sends, recvs;
  analysis.sendConnection.resize(alg.gpus.size());
  analysis.recvConnection.resize(alg.gpus.size());
  for (int32_t g = 0; g < ngpus; ++g) {
    const Gpu &gpu = alg.gpus[g];
    analysis.sendConnection[g].assign(gpu.tbs.size(), -1);
    analysis.recvConnection[g].assign(gpu.tbs.size(), -1);
    for (int32_t t = 0; t < static_cast<int32_t>(gpu.tbs.size()); ++t) {
      const ThreadBlock &tb = gpu.tbs[t];
      if (validPeer(g, tb.sendPeer))
        sends.push_back({g, tb.sendPeer, tb.channel, t});
      if (validPeer(g, tb.recvPeer))
        recvs.push_back({tb.recvPeer, g, tb.channel, t});
    }
  }
  llvm::sort(sends);
  llvm::sort(recvs);

  // One tb per rank drives each direction; keep the first, report the rest.
  auto dropDuplicates = [&](std::vector<End> &ends, bool sending) {
    std::vector<End> unique;
    for (const End &end : ends) {
      if (!unique.empty() && unique.back().key() == end.key()) {
        int32_t g = sending ? end.sender : end.receiver;
        int32_t peer = sending ? end.receiver : end.sender;
        error(alg.gpus[g].tbs[end.tb].line, {g, end.tb, -1},
              "tb " + llvm::Twine(unique.back().tb) + " and tb " +
                  llvm::Twine(end.tb) + " both " +
                  (sending ? "send to" : "receive from") + " gpu " +
                  llvm::Twine(peer) + " on channel " +
                  llvm::Twine(end.channel));
        continue;
      }
      unique.push_back(end);
    }
    ends = std::move(unique);
  };
  dropDuplicates(sends, true);
  dropDuplicates(recvs, false);

  auto usesDirection = [&](int32_t g, int32_t t, bool sending) {
    return llvm::any_of(alg.gpus[g].tbs[t].steps, [&](const Step &step) {
      StepTypeInfo info = stepTypeInfo(step.type);
      return sending ? info.sends : info.receives;
    });
  };
  auto unmatched = [&](const End &end, bool sending) {
    int32_t g = sending ? end.sender : end.receiver;
    int32_t peer = sending ? end.receiver : end.sender;
    if (!usesDirection(g, end.tb, sending))
      return; // a declared but unused peer is harmless
    error(alg.gpus[g].tbs[end.tb].line, {g, end.tb, -1},
          llvm::Twine(sending ? "sends to" : "receives from") + " gpu " +
              llvm::Twine(peer) + " on channel " + llvm::Twine(end.channel) +
              ", but no tb of gpu " + llvm::Twine(peer) +
              (sending ? " receives from" : " sends to") + " gpu " +
              llvm::Twine(g) + " on channel " + llvm::Twine(end.channel));
  };

  size_t i = 0, j = 0;
  while (i < sends.size() || j < recvs.size()) {
    if (j == recvs.size() ||
        (i < sends.size() && sends[i].key() < recvs[j].key())) {
      unmatched(sends[i++], true);
      continue;
    }
    if (i == sends.size() || recvs[j].key() < sends[i].key()) {
      unmatched(recvs[j++], false);
      continue;
    }
    Connection conn;
    conn.sender = sends[i].sender;
    conn.receiver = sends[i].receiver;
    conn.channel = sends[i].channel;
    conn.sendTb = sends[i++].tb;
    conn.recvTb = recvs[j++].tb;
    const auto &sendSteps = alg.gpus[conn.sender].tbs[conn.sendTb].steps;
    for (int32_t s = 0; s < static_cast<int32_t>(sendSteps.size()); ++s)
      if (stepTypeInfo(sendSteps[s].type).sends)
        conn.sendSteps.push_back(s);
    const auto &recvSteps = alg.gpus[conn.receiver].tbs[conn.recvTb].steps;
    for (int32_t s = 0; s < static_cast<int32_t>(recvSteps.size()); ++s)
      if (stepTypeInfo(recvSteps[s].type).receives)
        conn.recvSteps.push_back(s);
    matchConnection(conn);
    int32_t index = static_cast<int32_t>(analysis.connections.size());
    analysis.sendConnection[conn.sender][conn.sendTb] = index;
    analysis.recvConnection[conn.receiver][conn.recvTb] = index;
    analysis.connections.push_back(std::move(conn));
  }
}

/// The k-th send of a connection delivers to its k-th receive, so the two
/// sequences must agree in length and in cnt; the first difference is
/// reported (later ones are usually its consequence).
void Verifier::matchConnection(const Connection &conn) {
  size_t common = std::min(conn.sendSteps.size(), conn.recvSteps.size());
  for (size_t k = 0; k < common; ++k) {
    StepRef send{conn.sender, conn.sendTb, conn.sendSteps[k]};
    StepRef recv{conn.receiver, conn.recvTb, conn.recvSteps[k]};
    int32_t sendCount = stepAt(send).count, recvCount = stepAt(recv).count;
    if (sendCount != recvCount) {
      error(stepAt(send).line, send,
            "send " + llvm::Twine(k) + " to gpu " + llvm::Twine(conn.receiver) +
                " on channel " + llvm::Twine(conn.channel) + " has cnt " +
                llvm::Twine(sendCount) + ", but the matching receive (" +
                describe(recv) + ") has cnt " + llvm::Twine(recvCount));
      return;
    }
  }
  if (conn.sendSteps.size() > common) {
    StepRef send{conn.sender, conn.sendTb, conn.sendSteps[common]};
    error(stepAt(send).line, send,
          "send " + llvm::Twine(common) + " to gpu " +
              llvm::Twine(conn.receiver) + " on channel " +
              llvm::Twine(conn.channel) + " has no matching receive: gpu " +
              llvm::Twine(conn.receiver) + " tb " + llvm::Twine(conn.recvTb) +
              " receives only " + times(common));
  } else if (conn.recvSteps.size() > common) {
    StepRef recv{conn.receiver, conn.recvTb, conn.recvSteps[common]};
    error(stepAt(recv).line, recv,
          "receive " + llvm::Twine(common) + " from gpu " +
              llvm::Twine(conn.sender) + " on channel " +
              llvm::Twine(conn.channel) + " has no matching send: gpu " +
              llvm::Twine(conn.sender) + " tb " + llvm::Twine(conn.sendTb) +
              " sends only " + times(common));
  }
}

/// Pairs the signals a rank sends another on a channel with the waits of
/// the other rank for them. Each side must be one tb, and the k-th wait
/// takes the k-th signal, so the counts must agree.
void Verifier::buildSignals() {
  struct End {
    int32_t sender, receiver, channel;
    bool waits;
    int32_t tb, step;
    auto key() const { return std::tie(sender, receiver, channel); }
    bool operator<(const End &o) const {
      return std::tie(sender, receiver, channel, waits, tb, step) <
             std::tie(o.sender, o.receiver, o.channel, o.waits, o.tb, o.step);
    }
  };
  std::vector<End> ends;
  for (int32_t g = 0; g < ngpus; ++g)
    for (int32_t t = 0; t < static_cast<int32_t>(alg.gpus[g].tbs.size()); ++t) {
      const ThreadBlock &tb = alg.gpus[g].tbs[t];
      for (int32_t s = 0; s < static_cast<int32_t>(tb.steps.size()); ++s) {
        const Step &step = tb.steps[s];
        if (!validPeer(g, step.peer))
          continue;
        if (step.type == StepType::Signal)
          ends.push_back({g, step.peer, tb.channel, false, t, s});
        else if (step.type == StepType::Wait)
          ends.push_back({step.peer, g, tb.channel, true, t, s});
      }
    }
  llvm::sort(ends);
  for (size_t begin = 0, end; begin < ends.size(); begin = end) {
    end = begin;
    while (end < ends.size() && ends[end].key() == ends[begin].key())
      ++end;
    SignalPair pair;
    pair.sender = ends[begin].sender;
    pair.receiver = ends[begin].receiver;
    pair.channel = ends[begin].channel;
    bool bad = false;
    for (size_t i = begin; i < end; ++i) {
      const End &e = ends[i];
      int32_t &tb = e.waits ? pair.waitTb : pair.signalTb;
      int32_t g = e.waits ? e.receiver : e.sender;
      if (tb >= 0 && tb != e.tb) {
        // One tb per side; report the other tb once, at its first step.
        if (i > begin && ends[i - 1].waits == e.waits && ends[i - 1].tb == e.tb)
          continue;
        bad = true;
        error(stepAt({g, e.tb, e.step}).line, {g, e.tb, e.step},
              "tb " + llvm::Twine(tb) + " and tb " + llvm::Twine(e.tb) +
                  (e.waits ? " both wait for signals from gpu " +
                                 llvm::Twine(e.sender)
                           : " both signal gpu " + llvm::Twine(e.receiver)) +
                  " on channel " + llvm::Twine(e.channel) +
                  ": one tb per rank signals a peer on a channel, and one "
                  "waits for it");
        continue;
      }
      tb = e.tb;
      (e.waits ? pair.waitSteps : pair.signalSteps).push_back(e.step);
    }
    if (bad)
      continue;
    size_t nsignals = pair.signalSteps.size(), nwaits = pair.waitSteps.size();
    if (nwaits > nsignals) {
      StepRef at{pair.receiver, pair.waitTb, pair.waitSteps[nsignals]};
      error(stepAt(at).line, at,
            "wait " + llvm::Twine(nsignals) + " for gpu " +
                llvm::Twine(pair.sender) + " on channel " +
                llvm::Twine(pair.channel) + " has no matching signal: gpu " +
                llvm::Twine(pair.sender) +
                (nsignals == 0 ? " never signals gpu " + llvm::Twine(pair.receiver)
                               : " signals gpu " + llvm::Twine(pair.receiver) +
                                     " on it only " + times(nsignals)));
    } else if (nsignals > nwaits) {
      StepRef at{pair.sender, pair.signalTb, pair.signalSteps[nwaits]};
      error(stepAt(at).line, at,
            "signal " + llvm::Twine(nwaits) + " to gpu " +
                llvm::Twine(pair.receiver) + " on channel " +
                llvm::Twine(pair.channel) + " is never waited for: gpu " +
                llvm::Twine(pair.receiver) +
                (nwaits == 0 ? " never waits for it"
                             : " waits for it only " + times(nwaits)) +
                ", and a signal left over would release a wait of the next "
                "call early");
    }
    analysis.signals.push_back(std::move(pair));
  }
}

/// Kahn's algorithm over all steps of all ranks. A step waits for the
/// previous step of its tb, for its dependency, (when it receives) for the
/// matching send and (a wait) for the matching signal. Steps left over lie on or behind a cycle, one of which
/// is then found by walking predecessors backwards.
void Verifier::orderSteps() {
  // Node ids: all steps, gpu by gpu, tb by tb.
  std::vector<StepRef> refs;
  std::vector<std::vector<NodeId>> firstNode(alg.gpus.size());
  for (int32_t g = 0; g < ngpus; ++g) {
    const Gpu &gpu = alg.gpus[g];
    for (int32_t t = 0; t < static_cast<int32_t>(gpu.tbs.size()); ++t) {
      firstNode[g].push_back(static_cast<NodeId>(refs.size()));
      for (int32_t s = 0; s < static_cast<int32_t>(gpu.tbs[t].steps.size());
           ++s)
        refs.push_back({g, t, s});
    }
  }
  size_t numNodes = refs.size();
  auto node = [&](int32_t g, int32_t t, int32_t s) {
    return firstNode[g][t] + static_cast<NodeId>(s);
  };

  // Each step has at most three predecessors: previous, dependency, and the
  // send or signal it takes.
  std::vector<std::array<NodeId, 3>> preds(numNodes, {NoNode, NoNode, NoNode});
  for (NodeId n = 0; n < numNodes; ++n) {
    const StepRef &ref = refs[n];
    if (ref.step > 0)
      preds[n][0] = n - 1;
    const Step &step = stepAt(ref);
    if (dependencyExists(ref.gpu, step))
      preds[n][1] = node(ref.gpu, step.depTb, step.depStep);
  }
  for (const Connection &conn : analysis.connections) {
    size_t common = std::min(conn.sendSteps.size(), conn.recvSteps.size());
    for (size_t k = 0; k < common; ++k)
      preds[node(conn.receiver, conn.recvTb, conn.recvSteps[k])][2] =
          node(conn.sender, conn.sendTb, conn.sendSteps[k]);
  }
  // A wait receives nothing, so its third predecessor is its signal.
  for (const SignalPair &pair : analysis.signals) {
    size_t common = std::min(pair.signalSteps.size(), pair.waitSteps.size());
    for (size_t k = 0; k < common; ++k)
      preds[node(pair.receiver, pair.waitTb, pair.waitSteps[k])][2] =
          node(pair.sender, pair.signalTb, pair.signalSteps[k]);
  }

  // Successor lists in compressed form.
  std::vector<uint32_t> inDegree(numNodes, 0), succBegin(numNodes + 1, 0);
  for (NodeId n = 0; n < numNodes; ++n)
    for (NodeId p : preds[n])
      if (p != NoNode) {
        ++inDegree[n];
        ++succBegin[p + 1];
      }
  for (size_t n = 0; n < numNodes; ++n)
    succBegin[n + 1] += succBegin[n];
  std::vector<NodeId> succs(succBegin[numNodes]);
  std::vector<uint32_t> fill(succBegin.begin(), succBegin.end() - 1);
  for (NodeId n = 0; n < numNodes; ++n)
    for (NodeId p : preds[n])
      if (p != NoNode)
        succs[fill[p]++] = n;

  std::deque<NodeId> ready;
  for (NodeId n = 0; n < numNodes; ++n)
    if (inDegree[n] == 0)
      ready.push_back(n);
  std::vector<bool> done(numNodes, false);
  analysis.topologicalOrder.reserve(numNodes);
  while (!ready.empty()) {
    NodeId n = ready.front();
    ready.pop_front();
    done[n] = true;
    analysis.topologicalOrder.push_back(refs[n]);
    for (uint32_t e = succBegin[n]; e < succBegin[n + 1]; ++e)
      if (--inDegree[succs[e]] == 0)
        ready.push_back(succs[e]);
  }
  if (analysis.topologicalOrder.size() == numNodes)
    return;

  // Every step left has a predecessor that is left too, so walking back
  // from one must revisit a step: the walk from there on is a cycle.
  NodeId start = 0;
  while (done[start])
    ++start;
  std::vector<uint32_t> position(numNodes, UINT32_MAX);
  std::vector<NodeId> path;
  NodeId n = start;
  while (position[n] == UINT32_MAX) {
    position[n] = static_cast<uint32_t>(path.size());
    path.push_back(n);
    const auto *pred = llvm::find_if(
        preds[n], [&](NodeId p) { return p != NoNode && !done[p]; });
    assert(pred != preds[n].end() && "a step left over has a predecessor left");
    n = *pred;
  }
  // The path runs against the edges; turn the cycle around and start it at
  // its first step in node order, so the report does not depend on `start`.
  std::vector<NodeId> cycle(path.rbegin(), path.rend() - position[n]);
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()),
              cycle.end());
  reportCycle(cycle, refs);
}

/// Reports `cycle` (in edge order) compactly: a run of consecutive steps of
/// one tb is shown by its first and last step.
void Verifier::reportCycle(llvm::ArrayRef<NodeId> cycle,
                           llvm::ArrayRef<StepRef> refs) {
  auto continues = [&](size_t i) { // cycle[i] -> cycle[i+1] within a tb
    NodeId next = cycle[(i + 1) % cycle.size()];
    return refs[next].gpu == refs[cycle[i]].gpu &&
           refs[next].tb == refs[cycle[i]].tb &&
           refs[next].step == refs[cycle[i]].step + 1;
  };
  std::string text = "dependency cycle: ";
  for (size_t i = 0; i < cycle.size(); ++i) {
    bool runStart = i == 0 || !continues(i - 1);
    bool runEnd = i + 1 == cycle.size() || !continues(i);
    if (runStart || runEnd)
      text += describe(refs[cycle[i]]) + " -> ";
  }
  text += describe(refs[cycle.front()]);
  error(stepAt(refs[cycle.front()]).line, {}, text);
}

} // namespace

std::vector<SignalPair> signalPairs(const Algorithm &alg) {
  std::map<std::tuple<int32_t, int32_t, int32_t>, SignalPair> pairs;
  for (int32_t g = 0; g < alg.ngpus(); ++g)
    for (int32_t t = 0; t < static_cast<int32_t>(alg.gpus[g].tbs.size()); ++t) {
      const ThreadBlock &tb = alg.gpus[g].tbs[t];
      for (int32_t s = 0; s < static_cast<int32_t>(tb.steps.size()); ++s) {
        const Step &step = tb.steps[s];
        bool waits = step.type == StepType::Wait;
        if ((!waits && step.type != StepType::Signal) || step.peer < 0 ||
            step.peer >= alg.ngpus() || step.peer == g)
          continue;
        int32_t sender = waits ? step.peer : g, receiver = waits ? g : step.peer;
        SignalPair &pair = pairs[{sender, receiver, tb.channel}];
        pair.sender = sender;
        pair.receiver = receiver;
        pair.channel = tb.channel;
        (waits ? pair.waitTb : pair.signalTb) = t;
        (waits ? pair.waitSteps : pair.signalSteps).push_back(s);
      }
    }
  std::vector<SignalPair> out;
  for (auto &entry : pairs)
    out.push_back(std::move(entry.second));
  return out;
}

llvm::Expected<Analysis> verify(const Algorithm &alg, DiagnosticList &diags,
                                const RuntimeLimits &limits) {
  return Verifier(alg, diags, limits).run();
}

} // namespace coll::ir
