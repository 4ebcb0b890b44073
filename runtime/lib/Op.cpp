//===- Op.cpp - One call, as every entry point describes it ---------------===//

#include "coll/runtime/Op.h"

#include "coll/runtime/Comm.h"
#include "coll/runtime/Device.h"

#include "llvm/Support/FormatVariadic.h"

namespace coll::rt {

const char *opKindName(OpKind kind) {
  switch (kind) {
  case OpKind::AllReduce: return "allreduce";
  case OpKind::AllGather: return "allgather";
  case OpKind::ReduceScatter: return "reducescatter";
  case OpKind::AllToAll: return "alltoall";
  case OpKind::Broadcast: return "broadcast";
  case OpKind::Reduce: return "reduce";
  case OpKind::Gather: return "gather";
  case OpKind::Scatter: return "scatter";
  case OpKind::Send: return "send";
  case OpKind::Recv: return "recv";
  }
  return "?";
}

std::optional<interp::DataType> dataTypeOf(collDataType_t t) {
  switch (t) {
  case collInt8: return interp::DataType::Int8;
  case collUint8: return interp::DataType::Uint8;
  case collInt32: return interp::DataType::Int32;
  case collUint32: return interp::DataType::Uint32;
  case collInt64: return interp::DataType::Int64;
  case collUint64: return interp::DataType::Uint64;
  case collFloat16: return interp::DataType::Float16;
  case collFloat32: return interp::DataType::Float32;
  case collFloat64: return interp::DataType::Float64;
  case collBfloat16: return interp::DataType::BFloat16;
  default: return std::nullopt;
  }
}

std::optional<interp::ReduceOp> reduceOpOf(collRedOp_t op) {
  switch (op) {
  case collSum: return interp::ReduceOp::Sum;
  case collProd: return interp::ReduceOp::Prod;
  case collMax: return interp::ReduceOp::Max;
  case collMin: return interp::ReduceOp::Min;
  case collAvg: return interp::ReduceOp::Avg;
  default: return std::nullopt;
  }
}

llvm::Error validateOp(const Op &op, int rank, int nranks, size_t elemSize, const char *name) {
  if ((ir::collectiveInfo(collectiveOf(op.kind)).hasRoot || op.pointToPoint()) &&
      (op.root < 0 || op.root >= nranks))
    return collError(collInvalidArgument,
                     llvm::formatv("{0}: {1} {2} is out of range (the communicator has {3} "
                                   "ranks)",
                                   name, op.pointToPoint() ? "peer" : "root", op.root, nranks));
  if (op.count > (SIZE_MAX / 2) / elemSize / static_cast<size_t>(nranks))
    return collError(collInvalidArgument,
                     llvm::formatv("{0}: count {1} is too large (the byte size overflows)", name,
                                   op.count));
  if (op.count > 0) {
    const bool needSend = op.readsSend(rank), needRecv = op.writesRecv(rank);
    if ((needSend && !op.send) || (needRecv && !op.recv))
      return collError(collInvalidArgument,
                       llvm::formatv("{0}: {1} is NULL with count {2}", name,
                                     needSend && !op.send ? "sendbuff" : "recvbuff", op.count));
  }
  return llvm::Error::success();
}

std::optional<std::string> locateBuffers(Op &op, int rank) {
  op.device = -1;
  if (op.count == 0)
    return std::nullopt; // nothing runs, wherever the buffers are
  const bool needSend = op.readsSend(rank), needRecv = op.writesRecv(rank);
  const auto [sendIn, recvIn] =
      devicesOfPointers(needSend ? op.send : nullptr, needRecv ? op.recv : nullptr);
  auto place = [](int d) {
    return d >= 0 ? "memory of CUDA device " + std::to_string(d) : std::string("host memory");
  };
  if (needSend && needRecv && sendIn != recvIn)
    return "sendbuff is " + place(sendIn) + " but recvbuff is " + place(recvIn);
  op.device = needSend ? sendIn : recvIn;
  return std::nullopt;
}

} // namespace coll::rt
