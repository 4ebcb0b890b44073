//===- TestAlgorithms.cpp - Small algorithms built in code ----------------===//

#include "TestAlgorithms.h"

#include "coll/interpreter/Plan.h"
#include "coll/ir/Verifier.h"

namespace coll::testing {

using ir::BufferKind;
using ir::StepType;
constexpr BufferKind I = BufferKind::Input, O = BufferKind::Output, S = BufferKind::Scratch;

namespace {

/// Appends tbs and steps to an algorithm with little ceremony.
class Builder {
public:
  Builder(const char *name, ir::Collective coll, int n, int nchunks, ir::Protocol proto,
          bool inplace, bool outofplace) {
    alg.name = name;
    alg.collective = coll;
    alg.collectiveSpelling = ir::collectiveName(coll).str();
    alg.protocol = proto;
    alg.nchunksPerLoop = nchunks;
    alg.inplace = inplace;
    alg.outofplace = outofplace;
    alg.root = ir::collectiveInfo(coll).hasRoot ? 0 : -1;
    alg.gpus.resize(n);
  }

  void chunks(int in, int out, int scratch) {
    for (ir::Gpu &g : alg.gpus) {
      g.inputChunks = in;
      g.outputChunks = out;
      g.scratchChunks = scratch;
    }
  }

  int tb(int rank, int send, int recv, int channel = 0) {
    ir::ThreadBlock t;
    t.sendPeer = send;
    t.recvPeer = recv;
    t.channel = channel;
    alg.nchannels = std::max(alg.nchannels, channel + 1);
    alg.gpus[rank].tbs.push_back(t);
    return static_cast<int>(alg.gpus[rank].tbs.size()) - 1;
  }

  /// Appends a step; receiving steps name their local operand in src.
  int step(int rank, int tb, StepType type, BufferKind sb, int so, BufferKind db, int dof,
           int cnt = 1, int depTb = -1, int depStep = -1) {
    ir::Step s;
    s.type = type;
    s.srcBuf = sb;
    s.srcOff = so;
    s.dstBuf = db;
    s.dstOff = dof;
    s.count = cnt;
    s.depTb = depTb;
    s.depStep = depStep;
    auto &steps = alg.gpus[rank].tbs[tb].steps;
    steps.push_back(s);
    return static_cast<int>(steps.size()) - 1;
  }

  void hasDep(int rank, int tb, int step) { alg.gpus[rank].tbs[tb].steps[step].hasDep = true; }

  /// Appends a direct step on `peer` (signals and waits move no chunks).
  int peerStep(int rank, int tb, StepType type, int peer, BufferKind sb = I, int so = 0,
               BufferKind db = I, int dof = 0, int depTb = -1, int depStep = -1) {
    bool sync = type == StepType::Signal || type == StepType::Wait;
    int s = step(rank, tb, type, sb, so, db, dof, sync ? 0 : 1, depTb, depStep);
    alg.gpus[rank].tbs[tb].steps[s].peer = peer;
    return s;
  }

  ir::Algorithm alg;
};

int mod(int a, int n) { return ((a % n) + n) % n; }

} // namespace

ir::Algorithm ringAllReduce(int n, ir::Protocol proto, int f) {
  Builder b("ring_allreduce", ir::Collective::AllReduce, n, n * f, proto, true, true);
  b.chunks(n * f, n * f, 0);
  for (int r = 0; r < n; ++r) {
    int t = b.tb(r, mod(r + 1, n), mod(r - 1, n));
    for (int k = 0; k <= 2 * n - 2; ++k) {
      int off = mod(r - k - 1, n) * f;
      StepType type = k == 0           ? StepType::Send
                      : k < n - 1      ? StepType::RecvReduceSend
                      : k == n - 1     ? StepType::RecvReduceCopySend
                      : k < 2 * n - 2  ? StepType::RecvCopySend
                                       : StepType::Recv;
      BufferKind src = k < n ? I : O;
      b.step(r, t, type, src, off, O, off, f);
    }
  }
  return b.alg;
}

ir::Algorithm allPairsAllReduce(int n, ir::Protocol proto) {
  Builder b("allpairs_allreduce", ir::Collective::AllReduce, n, n, proto, true, true);
  b.chunks(n, n, n);
  for (int r = 0; r < n; ++r) {
    std::vector<int> peers, tbOf(n, -1);
    for (int p = 0; p < n; ++p)
      if (p != r) {
        peers.push_back(p);
        tbOf[p] = b.tb(r, p, p);
      }
    int local = b.tb(r, -1, -1);
    // Peer tbs: send my part of p's chunk, receive p's part of mine.
    for (int p : peers) {
      b.step(r, tbOf[p], StepType::Send, I, p, S, r);
      int got = b.step(r, tbOf[p], StepType::Recv, S, p, S, p);
      b.hasDep(r, tbOf[p], got);
    }
    // Local tb: start from my own part, then one fused reduction of all
    // received parts; nops carry all dependencies but the last.
    b.step(r, local, StepType::Copy, I, r, O, r);
    for (size_t i = 0; i + 1 < peers.size(); ++i)
      b.step(r, local, StepType::Nop, I, 0, O, 0, 0, tbOf[peers[i]], 1);
    int last = -1;
    for (size_t i = 0; i < peers.size(); ++i) {
      int p = i == 0 ? peers.back() : peers[i - 1];
      last = b.step(r, local, StepType::Reduce, S, p, O, r, 1, i == 0 ? tbOf[p] : -1,
                    i == 0 ? 1 : -1);
    }
    b.hasDep(r, local, last);
    // Send the result to every peer; receive theirs.
    for (int p : peers) {
      b.step(r, tbOf[p], StepType::Send, O, r, O, r, 1, local, last);
      b.step(r, tbOf[p], StepType::Recv, O, p, O, p);
    }
  }
  return b.alg;
}

ir::Algorithm ringAllGather(int n, ir::Protocol proto, int k) {
  Builder b("ring_allgather", ir::Collective::AllGather, n, n * k, proto, true, true);
  b.chunks(k, n * k, 0);
  for (int r = 0; r < n; ++r) {
    int t = b.tb(r, mod(r + 1, n), mod(r - 1, n));
    b.step(r, t, StepType::Copy, I, 0, O, r * k, k);
    for (int j = 0; j <= n - 1; ++j) {
      int off = mod(r - j, n) * k;
      StepType type = j == 0 ? StepType::Send : j < n - 1 ? StepType::RecvCopySend : StepType::Recv;
      b.step(r, t, type, O, off, O, off, k);
    }
  }
  return b.alg;
}

ir::Algorithm ringReduceScatter(int n, ir::Protocol proto) {
  Builder b("ring_reducescatter", ir::Collective::ReduceScatter, n, n, proto, true, true);
  b.chunks(n, 1, 0);
  for (int r = 0; r < n; ++r) {
    int t = b.tb(r, mod(r + 1, n), mod(r - 1, n));
    for (int k = 0; k < n; ++k) {
      int c = mod(r - k - 1, n);
      if (k == 0)
        b.step(r, t, StepType::Send, I, c, I, c);
      else if (k < n - 1)
        b.step(r, t, StepType::RecvReduceSend, I, c, I, c);
      else
        b.step(r, t, StepType::RecvReduceCopy, I, c, O, 0);
    }
  }
  return b.alg;
}

ir::Algorithm directAllToAll(int n, ir::Protocol proto) {
  Builder b("direct_alltoall", ir::Collective::AllToAll, n, n, proto, false, true);
  b.chunks(n, n, 0);
  for (int r = 0; r < n; ++r) {
    int local = b.tb(r, -1, -1);
    b.step(r, local, StepType::Copy, I, r, O, r);
    for (int p = 0; p < n; ++p) {
      if (p == r)
        continue;
      int t = b.tb(r, p, p);
      b.step(r, t, StepType::Send, I, p, O, r);
      b.step(r, t, StepType::Recv, O, p, O, p);
    }
  }
  return b.alg;
}

ir::Algorithm chainBroadcast(int n, int root, int chunks, ir::Protocol proto) {
  Builder b("chain_broadcast", ir::Collective::Broadcast, n, chunks, proto, true, true);
  b.alg.root = root;
  b.chunks(chunks, chunks, 0);
  for (int p = 0; p < n; ++p) {
    int r = mod(root + p, n);
    int t = b.tb(r, p < n - 1 ? mod(r + 1, n) : -1, p > 0 ? mod(r - 1, n) : -1);
    if (p == 0)
      b.step(r, t, StepType::Copy, I, 0, O, 0, chunks);
    for (int c = 0; c < chunks; ++c) {
      if (p == 0)
        b.step(r, t, StepType::Send, I, c, O, c);
      else
        b.step(r, t, p < n - 1 ? StepType::RecvCopySend : StepType::Recv, O, c, O, c);
    }
  }
  return b.alg;
}

ir::Algorithm chainReduce(int n, int root, int chunks, ir::Protocol proto) {
  Builder b("chain_reduce", ir::Collective::Reduce, n, chunks, proto, true, true);
  b.alg.root = root;
  b.chunks(chunks, chunks, 0);
  for (int p = 0; p < n; ++p) {
    int r = mod(root + 1 + p, n); // the chain ends at the root (p = n-1)
    int t = b.tb(r, p < n - 1 ? mod(r + 1, n) : -1, p > 0 ? mod(r - 1, n) : -1);
    for (int c = 0; c < chunks; ++c) {
      if (p == 0)
        b.step(r, t, StepType::Send, I, c, I, c);
      else if (p < n - 1)
        b.step(r, t, StepType::RecvReduceSend, I, c, I, c);
      else
        b.step(r, t, StepType::RecvReduceCopy, I, c, O, c);
    }
  }
  return b.alg;
}

ir::Algorithm directGather(int n, int root, ir::Protocol proto) {
  Builder b("direct_gather", ir::Collective::Gather, n, n, proto, true, true);
  b.alg.root = root;
  b.chunks(1, n, 0);
  for (int r = 0; r < n; ++r) {
    if (r != root) {
      b.step(r, b.tb(r, root, -1), StepType::Send, I, 0, O, r);
      continue;
    }
    b.step(r, b.tb(r, -1, -1), StepType::Copy, I, 0, O, r);
    for (int p = 0; p < n; ++p)
      if (p != r)
        b.step(r, b.tb(r, -1, p), StepType::Recv, O, p, O, p);
  }
  return b.alg;
}

ir::Algorithm directScatter(int n, int root, ir::Protocol proto) {
  Builder b("direct_scatter", ir::Collective::Scatter, n, n, proto, true, true);
  b.alg.root = root;
  b.chunks(n, 1, 0);
  for (int r = 0; r < n; ++r) {
    if (r != root) {
      b.step(r, b.tb(r, -1, root), StepType::Recv, O, 0, O, 0);
      continue;
    }
    b.step(r, b.tb(r, -1, -1), StepType::Copy, I, r, O, 0);
    for (int p = 0; p < n; ++p)
      if (p != r)
        b.step(r, b.tb(r, p, -1), StepType::Send, I, p, O, 0);
  }
  return b.alg;
}

ir::Algorithm fifoDeadlock(ir::Protocol proto) {
  Builder b("fifo_deadlock", ir::Collective::AllReduce, 2, 16, proto, true, true);
  b.chunks(16, 16, 0);
  for (int r = 0; r < 2; ++r) {
    int t = b.tb(r, 1 - r, 1 - r);
    b.step(r, t, StepType::Send, I, 0, O, 0, 16);
    b.step(r, t, StepType::Recv, O, 0, O, 0, 16);
  }
  return b.alg;
}

ir::Algorithm fifoDeadlockWithDependency(ir::Protocol proto) {
  Builder b("fifo_deadlock_dep", ir::Collective::AllReduce, 2, 16, proto, false, true);
  b.chunks(16, 16, 16);
  for (int r = 0; r < 2; ++r) {
    int t = b.tb(r, 1 - r, 1 - r);
    b.step(r, t, StepType::Send, I, 0, O, 0, 16);
    b.step(r, t, StepType::Recv, O, 0, O, 0, 16);
    b.hasDep(r, t, 1);
    int local = b.tb(r, -1, -1);
    b.step(r, local, StepType::Copy, O, 0, S, 0, 16, t, 1);
    b.step(r, local, StepType::Copy, S, 0, O, 0, 16);
  }
  return b.alg;
}

namespace {

/// Signals every peer of `r` on its tb `t`, then waits for every one.
void handshake(Builder &b, int r, int t, int n) {
  for (StepType type : {StepType::Signal, StepType::Wait})
    for (int p = 0; p < n; ++p)
      if (p != r)
        b.peerStep(r, t, type, p);
}

} // namespace

ir::Algorithm peerOneShotAllReduce(int n) {
  Builder b("peer_oneshot_allreduce", ir::Collective::AllReduce, n, 1, ir::Protocol::Simple,
            false, true);
  b.chunks(1, 1, 0);
  for (int r = 0; r < n; ++r) {
    int t = b.tb(r, -1, -1);
    b.step(r, t, StepType::Copy, I, 0, O, 0);
    handshake(b, r, t, n);
    for (int p = 0; p < n; ++p)
      if (p != r)
        b.peerStep(r, t, StepType::GetReduce, p, I, 0, O, 0);
    handshake(b, r, t, n);
  }
  return b.alg;
}

ir::Algorithm peerTwoShotAllReduce(int n) {
  Builder b("peer_twoshot_allreduce", ir::Collective::AllReduce, n, n, ir::Protocol::Simple,
            false, true);
  b.chunks(n, n, n);
  for (int r = 0; r < n; ++r) {
    int t = b.tb(r, -1, -1);
    handshake(b, r, t, n);
    for (int p = 0; p < n; ++p)
      if (p != r)
        b.peerStep(r, t, StepType::Put, p, I, p, S, r);
    handshake(b, r, t, n);
    b.step(r, t, StepType::Copy, I, r, O, r);
    for (int p = 0; p < n; ++p)
      if (p != r)
        b.step(r, t, StepType::Reduce, S, p, O, r);
    for (int p = 0; p < n; ++p)
      if (p != r)
        b.peerStep(r, t, StepType::Put, p, O, r, O, r);
    handshake(b, r, t, n);
  }
  return b.alg;
}

/// A tb per peer of rank r (the others -1) that signals the peer that r
/// has started and waits for the peer's own start signal.
static std::vector<int> startTbs(Builder &b, int r, int n) {
  std::vector<int> sync(n, -1);
  for (int p = 0; p < n; ++p)
    if (p != r) {
      sync[p] = b.tb(r, -1, -1);
      b.peerStep(r, sync[p], StepType::Signal, p); // this rank has started
      b.hasDep(r, sync[p], b.peerStep(r, sync[p], StepType::Wait, p)); // so has p
    }
  return sync;
}

/// After step `last` of tb `data`, each peer's tb signals that r is done
/// with it and waits until the peer is done with r.
static void endOnTbs(Builder &b, int r, int n, const std::vector<int> &sync, int data, int last) {
  b.hasDep(r, data, last);
  for (int p = 0; p < n; ++p)
    if (p != r) {
      b.peerStep(r, sync[p], StepType::Signal, p, I, 0, I, 0, data, last); // done with p
      b.peerStep(r, sync[p], StepType::Wait, p);                           // p done with me
    }
}

ir::Algorithm peerGetTwoShotAllReduce(int n) {
  Builder b("peer_get_twoshot_allreduce", ir::Collective::AllReduce, n, n, ir::Protocol::Simple,
            true, false);
  b.chunks(n, n, 0);
  for (int r = 0; r < n; ++r) {
    const int data = b.tb(r, -1, -1);
    const std::vector<int> sync = startTbs(b, r, n);
    int last = -1;
    for (int p = 0; p < n; ++p)
      if (p != r)
        last = b.peerStep(r, data, StepType::GetReduce, p, I, r, I, r, sync[p], 1);
    for (int p = 0; p < n; ++p)
      if (p != r)
        last = b.peerStep(r, data, StepType::Put, p, I, r, I, r);
    endOnTbs(b, r, n, sync, data, last);
  }
  return b.alg;
}

ir::Algorithm peerCopyGetTwoShotAllReduce(int n) {
  Builder b("peer_copy_get_twoshot_allreduce", ir::Collective::AllReduce, n, n,
            ir::Protocol::Simple, true, true);
  b.chunks(n, n, 0);
  for (int r = 0; r < n; ++r) {
    const int data = b.tb(r, -1, -1);
    const std::vector<int> sync = startTbs(b, r, n);
    b.step(r, data, StepType::Copy, I, r, O, r);
    int last = -1;
    for (int p = 0; p < n; ++p)
      if (p != r)
        last = b.peerStep(r, data, StepType::GetReduce, p, I, r, O, r, sync[p], 1);
    for (int p = 0; p < n; ++p)
      if (p != r)
        last = b.peerStep(r, data, StepType::Put, p, O, r, O, r);
    endOnTbs(b, r, n, sync, data, last);
  }
  return b.alg;
}

ir::Algorithm peerAllGather(int n) {
  Builder b("peer_allgather", ir::Collective::AllGather, n, n, ir::Protocol::Simple, false, true);
  b.chunks(1, n, 0);
  for (int r = 0; r < n; ++r) {
    int t = b.tb(r, -1, -1);
    handshake(b, r, t, n);
    for (int p = 0; p < n; ++p)
      if (p != r)
        b.peerStep(r, t, StepType::Put, p, I, 0, O, r);
    b.step(r, t, StepType::Copy, I, 0, O, r);
    handshake(b, r, t, n);
  }
  return b.alg;
}

ir::Algorithm peerAllGatherOnTbs(int n) {
  Builder b("peer_allgather_tbs", ir::Collective::AllGather, n, n, ir::Protocol::Simple, false,
            true);
  b.chunks(1, n, 0);
  for (int r = 0; r < n; ++r) {
    const int data = b.tb(r, -1, -1);
    const std::vector<int> sync = startTbs(b, r, n);
    int last = -1;
    for (int p = 0; p < n; ++p)
      if (p != r)
        last = b.peerStep(r, data, StepType::Put, p, I, 0, O, r, sync[p], 1);
    last = b.step(r, data, StepType::Copy, I, 0, O, r);
    endOnTbs(b, r, n, sync, data, last);
  }
  return b.alg;
}

ir::Algorithm peerCopyPutAllGather(int n, ir::Protocol proto) {
  Builder b("peer_copy_put_allgather", ir::Collective::AllGather, n, n, proto, true, true);
  b.chunks(1, n, 0);
  for (int r = 0; r < n; ++r) {
    int t = b.tb(r, -1, -1);
    handshake(b, r, t, n);
    b.step(r, t, StepType::Copy, I, 0, O, r);
    for (int p = 0; p < n; ++p)
      if (p != r)
        b.peerStep(r, t, StepType::Put, p, I, 0, O, r);
    handshake(b, r, t, n);
  }
  return b.alg;
}

std::vector<ir::Algorithm> peerAllReduces(int n) {
  return {peerOneShotAllReduce(n), peerTwoShotAllReduce(n), peerGetTwoShotAllReduce(n),
          peerCopyGetTwoShotAllReduce(n)};
}

std::vector<std::pair<std::string, ir::Algorithm>> allTestAlgorithms(int n, ir::Protocol proto) {
  return {
      {"ring_allreduce", ringAllReduce(n, proto)},
      {"ring_allreduce_cnt3", ringAllReduce(n, proto, 3)},
      {"allpairs_allreduce", allPairsAllReduce(n, proto)},
      {"ring_allgather", ringAllGather(n, proto)},
      {"ring_allgather_cnt2", ringAllGather(n, proto, 2)},
      {"ring_reducescatter", ringReduceScatter(n, proto)},
      {"direct_alltoall", directAllToAll(n, proto)},
      {"chain_broadcast", chainBroadcast(n, n - 1, 4, proto)},
      {"chain_reduce", chainReduce(n, 1 % n, 3, proto)},
      {"direct_gather", directGather(n, n / 2, proto)},
      {"direct_scatter", directScatter(n, n / 2, proto)},
  };
}

llvm::Expected<interp::CheckResult> runChecked(const ir::Algorithm &alg, interp::DataType type,
                                               interp::ReduceOp op, uint64_t count, bool inplace,
                                               const interp::HostOptions &options, uint64_t seed) {
  ir::DiagnosticList diags("<test>");
  auto analysis = ir::verify(alg, diags);
  if (!analysis)
    return analysis.takeError();
  auto plan = interp::buildPlan(alg, *analysis, "<test>");
  if (!plan)
    return plan.takeError();
  interp::CollectiveDesc desc = interp::CollectiveDesc::of(*plan);
  auto executor = interp::HostExecutor::create(std::move(*plan), options);
  if (!executor)
    return executor.takeError();
  interp::CheckedCall call(desc, type, op, count, inplace, seed);
  auto result = (*executor)->run(call.args());
  if (!result)
    return result.takeError();
  return call.check();
}

std::vector<MatrixCase> protocolMatrix() {
  return {{ir::Protocol::Simple, 0}, {ir::Protocol::LL, 0},  {ir::Protocol::LL128, 0},
          {ir::Protocol::Simple, 64}, {ir::Protocol::LL, 24}, {ir::Protocol::LL128, 248}};
}

std::string matrixCaseName(const MatrixCase &c) {
  std::string name = ir::protocolName(c.proto).str();
  if (c.slotBytes)
    name += "_slot" + std::to_string(c.slotBytes);
  return name;
}

} // namespace coll::testing
