//===- Verifier.h - Checking an algorithm against the IR contract -*- C++ -*-===//
//
// The verifier checks everything the runtime relies on (docs/ARCHITECTURE.md §3) and
// returns the analysis it had to compute anyway: the connections and their
// matched send/receive sequences, and a global order of all steps that
// respects tb order, dependencies and send-before-receive. A cycle in that
// order is a deadlock on every runtime and is rejected.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_IR_VERIFIER_H
#define COLL_IR_VERIFIER_H

#include "coll/ir/Algorithm.h"
#include "coll/ir/Diagnostics.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace coll::ir {

/// One direction of a connection: (sender, receiver, channel). Exactly one tb
/// on the sender drives it (the tb whose send peer is `receiver` on `channel`)
/// and exactly one on the receiver.
struct Connection {
  int32_t sender = -1, receiver = -1, channel = -1;
  int32_t sendTb = -1, recvTb = -1;
  /// Indices, in sendTb's step list, of the steps that send (s, rcs, rrs,
  /// rrcs), in order; recvSteps likewise for the receiving steps in recvTb.
  /// After verification the two have equal length and equal `cnt` pairwise.
  /// One inline each: most connections of a large program carry one step.
  llvm::SmallVector<int32_t, 1> sendSteps, recvSteps;
};

/// Signals from one rank to another on one channel (docs/IR.md, "Direct
/// steps"): exactly one tb of the sender signals, exactly one tb of the
/// receiver waits, and the k-th wait waits for the k-th signal.
struct SignalPair {
  int32_t sender = -1, receiver = -1, channel = -1;
  int32_t signalTb = -1, waitTb = -1;
  /// Indices of the `signal` steps in signalTb and of the `wait` steps in
  /// waitTb, in order; equally many after verification.
  std::vector<int32_t> signalSteps, waitSteps;
};

struct Analysis {
  /// All connections, sorted by (sender, receiver, channel).
  std::vector<Connection> connections;
  /// sendConnection[gpu][tb] / recvConnection[gpu][tb]: index into
  /// `connections`, or -1 when the tb has no such peer.
  std::vector<std::vector<int32_t>> sendConnection, recvConnection;
  /// All signal pairs, sorted by (sender, receiver, channel).
  std::vector<SignalPair> signals;
  /// Every step exactly once, in an order in which it could execute: after
  /// the previous step of its tb, after its dependency, (for receiving
  /// steps) after the matching send and (for waits) after the matching
  /// signal.
  std::vector<StepRef> topologicalOrder;
};

/// The most chunks a file's buffers may declare in all (per gpu the larger
/// of nchunksperloop, i_chunks and o_chunks, plus s_chunks; summed over the
/// gpus): the race check and the symbolic execution keep a cell per chunk.
/// 2^26: a 4096-rank ring allreduce declares 2^24.
inline constexpr int64_t MaxDeclaredChunks = int64_t(1) << 26;

/// Limits of a particular runtime. 0 means no limit.
struct RuntimeLimits {
  int32_t maxStepsPerTb = 0;
  int32_t maxCount = 0;          ///< cnt must be < maxCount
  int32_t maxTbsPerChannelDirection = 0;
  int32_t maxTbsPerGpu = 0;
  int32_t maxReduceFusion = 16;  ///< sources of one fused `re`
  /// Nops run as steps: they wait for their dependency and publish their
  /// flag like any step, so a tb may end with nops that others wait for
  /// (Coll's runtimes). MSCCL folds a nop into the next real step instead.
  bool nopsRun = true;
  /// Direct steps (put, get, getre, signal, wait) run. MSCCL XML has none.
  bool directSteps = true;
};

/// What the MSCCL executor accepts: MSCCL_MAX_NUM_STEPS (64 steps per tb),
/// MSCCL_MAX_COUNT (cnt below 72) and MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL
/// (32 tbs per channel and direction).
inline RuntimeLimits mscclLimits() {
  RuntimeLimits limits;
  limits.maxStepsPerTb = 64;
  limits.maxCount = 72;
  limits.maxTbsPerChannelDirection = 32;
  limits.nopsRun = false;
  limits.directSteps = false;
  return limits;
}

/// The signal pairs of a verified algorithm, as Analysis::signals holds
/// them, for the checks that run without the analysis.
std::vector<SignalPair> signalPairs(const Algorithm &alg);

/// Checks `alg`. Errors and warnings go to `diags`; on failure the returned
/// error holds every error, formatted.
llvm::Expected<Analysis> verify(const Algorithm &alg, DiagnosticList &diags,
                                const RuntimeLimits &limits = {});

} // namespace coll::ir

#endif // COLL_IR_VERIFIER_H
