//===- Op.h - One call, as every entry point describes it --------*- C++ -*-===//
//
// The C API (coll.h), libcoll_nccl.so and libcoll_mpi.so turn their calls
// into an Op with makeOp and check it with validateOp and locateBuffers, so
// that the three accept and refuse the same calls with the same words. What
// each API adds is its own: data types and reduction ops (coll.h's, NCCL's
// with its user ops, MPI's datatypes), and what a refusal becomes (an error
// result, or the library underneath running the call).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_RUNTIME_OP_H
#define COLL_RUNTIME_OP_H

#include "coll.h"

#include "coll/interpreter/DataType.h"
#include "coll/ir/Algorithm.h"

#include "llvm/Support/Error.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace coll::rt {

enum class OpKind : uint8_t {
  AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce, Gather, Scatter, Send, Recv
};
const char *opKindName(OpKind kind);
/// The collective an OpKind runs (Custom for Send and Recv).
inline ir::Collective collectiveOf(OpKind kind) {
  switch (kind) {
  case OpKind::AllReduce: return ir::Collective::AllReduce;
  case OpKind::AllGather: return ir::Collective::AllGather;
  case OpKind::ReduceScatter: return ir::Collective::ReduceScatter;
  case OpKind::AllToAll: return ir::Collective::AllToAll;
  case OpKind::Broadcast: return ir::Collective::Broadcast;
  case OpKind::Reduce: return ir::Collective::Reduce;
  case OpKind::Gather: return ir::Collective::Gather;
  case OpKind::Scatter: return ir::Collective::Scatter;
  default: return ir::Collective::Custom;
  }
}

/// The interpreter's type and op for coll.h's (and NCCL's: the numbering is
/// the same); nullopt for those Coll does not have.
std::optional<interp::DataType> dataTypeOf(collDataType_t type);
std::optional<interp::ReduceOp> reduceOpOf(collRedOp_t op);

/// One call.
struct Op {
  OpKind kind = OpKind::AllReduce;
  const void *send = nullptr;
  void *recv = nullptr;
  size_t count = 0;
  interp::DataType type = interp::DataType::Float32;
  interp::ReduceOp op = interp::ReduceOp::Sum;
  int root = 0; ///< the root, or the peer of Send/Recv
  /// Device buffers: their CUDA device, and the caller's stream (a
  /// cudaStream_t); -1 for host buffers.
  int device = -1;
  void *stream = nullptr;

  bool pointToPoint() const { return kind == OpKind::Send || kind == OpKind::Recv; }
  /// Whether this rank (`rank`) reads sendbuff, and writes recvbuff, for a
  /// count above 0: not a broadcast's or scatter's sendbuff off the root,
  /// not a reduce's or gather's recvbuff off the root, not a send's
  /// recvbuff or a receive's sendbuff.
  bool readsSend(int rank) const {
    switch (kind) {
    case OpKind::Broadcast:
    case OpKind::Scatter: return rank == root;
    case OpKind::Recv: return false;
    default: return true;
    }
  }
  bool writesRecv(int rank) const {
    switch (kind) {
    case OpKind::Reduce:
    case OpKind::Gather: return rank == root;
    case OpKind::Send: return false;
    default: return true;
    }
  }
  /// The size selection goes by, as nccl-tests measures it: the larger,
  /// all-ranks side of the collective, in bytes.
  uint64_t selectionBytes(int nranks) const {
    const ir::CollectiveInfo info = ir::collectiveInfo(collectiveOf(kind));
    return count * interp::dataTypeSize(type) *
           (info.inputPerRank || info.outputPerRank ? static_cast<uint64_t>(nranks) : 1);
  }
};

/// An Op from the arguments every entry point takes, in coll.h's and
/// nccl.h's order; `root` is the root of rooted collectives and the peer of
/// Send and Recv (0 otherwise). Type, op and device are the caller's.
inline Op makeOp(OpKind kind, const void *send, void *recv, size_t count, int root = 0) {
  Op op;
  op.kind = kind;
  op.send = send;
  op.recv = recv;
  op.count = count;
  op.root = root;
  return op;
}

/// The checks every entry point makes before a call runs anywhere, as NCCL
/// makes them: the root or peer is a rank of the communicator (`nranks`
/// ranks; this is `rank`), `count` elements of `elemSize` bytes on every
/// rank do not overflow a byte size, and the buffers the call uses are not
/// NULL when the count is not 0. The error (collInvalidArgument) begins
/// with `name`.
llvm::Error validateOp(const Op &op, int rank, int nranks, size_t elemSize, const char *name);

/// Where the buffers `op` uses live: sets op.device to their CUDA device,
/// or -1 for host memory. The reason, when sendbuff and recvbuff live in
/// different places ("sendbuff is host memory but recvbuff is memory of
/// CUDA device 0"); op.device is then -1.
std::optional<std::string> locateBuffers(Op &op, int rank);

} // namespace coll::rt

#endif // COLL_RUNTIME_OP_H
