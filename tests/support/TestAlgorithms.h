//===- TestAlgorithms.h - Small algorithms built in code --------*- C++ -*-===//
//
// Hand-made algorithms for runtime tests and benchmarks. Together they use
// every step type (s, r, rcs, rrs, rrc, rrcs, cpy, re with fusion, nop),
// every built-in collective, scratch, dependencies and cnt > 1.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_TESTS_SUPPORT_TESTALGORITHMS_H
#define COLL_TESTS_SUPPORT_TESTALGORITHMS_H

#include "coll/interpreter/Check.h"
#include "coll/interpreter/HostExecutor.h"
#include "coll/ir/Algorithm.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <string>
#include <vector>

namespace coll::testing {

/// Ring allreduce: a reduce chain (s, rrs..., rrcs) then a broadcast chain
/// (rcs..., r) per chunk; `chunkFactor` chunks move together (cnt > 1).
/// Reads `i`, writes `o`: valid in place and out of place.
ir::Algorithm ringAllReduce(int n, ir::Protocol proto, int chunkFactor = 1);

/// All-pairs allreduce: every rank sends each peer its part into scratch,
/// reduces the n-1 received parts with one fused multi-source `re` (nops
/// carry the extra dependencies), then sends the result to every peer.
ir::Algorithm allPairsAllReduce(int n, ir::Protocol proto);

/// Ring allgather with `chunksPerRank` chunks per rank moved as one (cnt).
ir::Algorithm ringAllGather(int n, ir::Protocol proto, int chunksPerRank = 1);

/// Ring reducescatter ending in `rrc`.
ir::Algorithm ringReduceScatter(int n, ir::Protocol proto);

/// Direct alltoall: one tb per peer, local part copied with `cpy`.
ir::Algorithm directAllToAll(int n, ir::Protocol proto);

/// Pipelined chain broadcast of `chunks` chunks from `root`.
ir::Algorithm chainBroadcast(int n, int root, int chunks, ir::Protocol proto);

/// Chain reduce towards `root`.
ir::Algorithm chainReduce(int n, int root, int chunks, ir::Protocol proto);

/// Direct gather to and scatter from `root`.
ir::Algorithm directGather(int n, int root, ir::Protocol proto);
ir::Algorithm directScatter(int n, int root, ir::Protocol proto);

/// Two ranks that each send 16 chunks before receiving any: valid IR that
/// deadlocks on 8-slot FIFOs. For watchdog tests.
ir::Algorithm fifoDeadlock(ir::Protocol proto);
/// fifoDeadlock with a second tb per rank that waits on the receive (a
/// cross-tb dependency) and copies the received data through scratch.
ir::Algorithm fifoDeadlockWithDependency(ir::Protocol proto);

/// Direct steps (docs/IR.md, "Direct steps"), one tb per rank, out of
/// place. One-shot: each rank signals every peer that it has started, waits
/// for theirs, adds every peer's input into its output with `getre`, then
/// signals that it is done reading and waits until the peers are.
ir::Algorithm peerOneShotAllReduce(int n);
/// Two-shot: after the start handshake each rank `put`s the blocks its
/// peers reduce into their scratch, signals them, reduces its own block
/// once they have signalled, and `put`s the result into every peer's
/// output, signalling again.
ir::Algorithm peerTwoShotAllReduce(int n);
/// Direct steps, in place: rank r adds every peer's block r into its own
/// with getre steps on one tb, each after the wait for that peer's start
/// signal, which lies on a tb of its own per peer (so the plan fuses them
/// behind a nop per wait but the last, interp/Plan.h), then puts block r
/// into every peer and signals each when done.
ir::Algorithm peerGetTwoShotAllReduce(int n);
/// The same in both modes, as the built-in two-shot: rank r copies block r
/// of its input into its output, adds every peer's input block r into it,
/// then puts it into every peer's output, all on one tb, so that the plan
/// folds the copy into the fused getre (FoldedCopy) and fuses the puts into
/// one (interp/Plan.h).
ir::Algorithm peerCopyGetTwoShotAllReduce(int n);
/// A direct allgather, out of place, one tb per rank: after the start
/// handshake rank r puts its input into block r of every peer's output
/// (one fused put), copies it into block r of its own, then signals each
/// peer (a peer's start and end signals are one pair, ordinals 0 and 1).
ir::Algorithm peerAllGather(int n);
/// The same with the signals on a tb per peer (startTbs, endOnTbs): the
/// puts wait for the start waits there, and the end signals for the copy.
ir::Algorithm peerAllGatherOnTbs(int n);
/// A direct allgather in both modes, as the built-in one, one tb per rank:
/// after the start handshake rank r copies its input into block r of its
/// output, then puts it into block r of every peer's, so that a Simple plan
/// folds the copy into the fused put (FoldedCopy), which reads the input
/// once; in place the copy is onto itself. Other protocols keep the steps.
ir::Algorithm peerCopyPutAllGather(int n, ir::Protocol proto = ir::Protocol::Simple);
/// The direct allreduces above, for the backend tests to sweep.
std::vector<ir::Algorithm> peerAllReduces(int n);

/// Every builder above at `n` ranks with `proto`, named (FIFO programs
/// only: every backend runs them).
std::vector<std::pair<std::string, ir::Algorithm>> allTestAlgorithms(int n, ir::Protocol proto);

/// One cell of the protocol matrix the backend tests sweep: a protocol and a
/// FIFO slot size in bytes (0: the backend's default). Tiny slots make small
/// calls take many iterations and wrap the FIFOs many times.
struct MatrixCase {
  ir::Protocol proto;
  uint32_t slotBytes;
};

/// Each protocol at its default slot size and at a slot of a few lines.
std::vector<MatrixCase> protocolMatrix();

/// A test-name-safe label for `c`: "LL", "LL128_slot248", ...
std::string matrixCaseName(const MatrixCase &c);

/// Verifies, plans, runs `alg` once on the host backend and checks the
/// result.
llvm::Expected<interp::CheckResult> runChecked(const ir::Algorithm &alg, interp::DataType type,
                                               interp::ReduceOp op, uint64_t count, bool inplace,
                                               const interp::HostOptions &options = {},
                                               uint64_t seed = 1);

} // namespace coll::testing

#endif // COLL_TESTS_SUPPORT_TESTALGORITHMS_H
