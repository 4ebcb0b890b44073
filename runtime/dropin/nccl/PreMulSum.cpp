//===- PreMulSum.cpp - ncclRedOpCreatePreMulSum on Coll's side --------------===//
//
// Where no real NCCL is loaded, Coll makes the ops of ncclRedOpCreatePreMulSum
// itself: a call with one sums each rank's input multiplied by that rank's
// scalar, as NCCL's FuncPreMulSum does (each element multiplied in its type,
// then summed in it). The inputs are multiplied on the host into a copy that
// the call then sums (ncclSum); on device buffers through host memory, the
// stream synchronized first and the result copied back after the call, so
// the call completes when it returns. Where a real NCCL is loaded, its own
// op serves (Enqueue.cpp), on the GPU.
//
//===----------------------------------------------------------------------===//

#include "Shim.h"

#include "coll/interpreter/DataType.h"
#include "coll/interpreter/Float16.h"

#include "llvm/Support/FormatVariadic.h"

#include <cstring>
#include <type_traits>

namespace coll::rt::dropin::nccl {

namespace {

/// x[i] *= k for n elements of an integer type, wrapping as NCCL's do.
template <class T> void scaleIntegers(void *p, size_t n, const unsigned char *scalar) {
  using U = std::make_unsigned_t<T>;
  U k;
  std::memcpy(&k, scalar, sizeof k);
  auto *x = static_cast<U *>(p);
  for (size_t i = 0; i < n; ++i)
    x[i] = static_cast<U>(static_cast<uint64_t>(x[i]) * k);
}

/// x[i] *= k in a 16-bit float type: the product of two such values is
/// exact in float, so one rounding gives what the type's own multiply
/// (__hmul) gives.
template <class H> void scaleHalves(void *p, size_t n, const unsigned char *scalar) {
  H k;
  std::memcpy(&k, scalar, sizeof k);
  const float kf = k.toFloat();
  auto *x = static_cast<H *>(p);
  for (size_t i = 0; i < n; ++i)
    x[i] = H::fromFloat(x[i].toFloat() * kf);
}

template <class F> void scaleFloats(void *p, size_t n, const unsigned char *scalar) {
  F k;
  std::memcpy(&k, scalar, sizeof k);
  auto *x = static_cast<F *>(p);
  for (size_t i = 0; i < n; ++i)
    x[i] = x[i] * k;
}

void scale(interp::DataType type, void *p, size_t n, const unsigned char *scalar) {
  using interp::DataType;
  switch (type) {
  case DataType::Int8: return scaleIntegers<int8_t>(p, n, scalar);
  case DataType::Uint8: return scaleIntegers<uint8_t>(p, n, scalar);
  case DataType::Int32: return scaleIntegers<int32_t>(p, n, scalar);
  case DataType::Uint32: return scaleIntegers<uint32_t>(p, n, scalar);
  case DataType::Int64: return scaleIntegers<int64_t>(p, n, scalar);
  case DataType::Uint64: return scaleIntegers<uint64_t>(p, n, scalar);
  case DataType::Float16: return scaleHalves<interp::Half>(p, n, scalar);
  case DataType::BFloat16: return scaleHalves<interp::BFloat16>(p, n, scalar);
  case DataType::Float32: return scaleFloats<float>(p, n, scalar);
  case DataType::Float64: return scaleFloats<double>(p, n, scalar);
  }
}

/// Copies between host and device memory (either side) with the process's
/// CUDA, failing with a message naming `what`.
ncclResult_t copy(void *dst, const void *src, size_t bytes, ncclComm_t comm, const char *what) {
  if (bytes == 0)
    return ncclSuccess;
  if (int r = copyCudaMemory(dst, src, bytes); r != 0)
    return failWith(comm, r < 0 ? ncclInvalidUsage : ncclUnhandledCudaError,
                    llvm::formatv("PreMulSum on Coll: {0}: {1}", what,
                                  r < 0 ? std::string("the process has not loaded CUDA")
                                        : "CUDA error " + std::to_string(r)));
  return ncclSuccess;
}

} // namespace

ncclResult_t createPreMulOnColl(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                ncclScalarResidence_t residence, ncclComm_t comm) {
  if (datatype < 0 || datatype >= ncclNumTypes)
    return failWith(comm, ncclInvalidArgument,
                    llvm::formatv("ncclRedOpCreatePreMulSum: datatype {0} is not an "
                                  "ncclDataType_t",
                                  int(datatype)));
  if (residence != ncclScalarHostImmediate && residence != ncclScalarDevice)
    return failWith(comm, ncclInvalidArgument,
                    llvm::formatv("ncclRedOpCreatePreMulSum: residence {0} is neither "
                                  "ncclScalarHostImmediate nor ncclScalarDevice",
                                  int(residence)));
  if (!scalar)
    return failWith(comm, ncclInvalidArgument, "ncclRedOpCreatePreMulSum: scalar is NULL");
  auto type = dataTypeOf(static_cast<collDataType_t>(datatype));
  if (!type)
    return failWith(comm, ncclInvalidUsage,
                    llvm::formatv("ncclRedOpCreatePreMulSum: Coll has no datatype {0} (fp8) and "
                                  "the real NCCL has no communicator here: {1}",
                                  int(datatype), whyNoReal(comm)));
  PreMulOp made;
  made.datatype = datatype;
  made.residence = residence;
  if (residence == ncclScalarHostImmediate) // NCCL reads it now
    std::memcpy(made.scalar, scalar, interp::dataTypeSize(*type));
  else // and this one at each call
    made.deviceScalar = scalar;
  std::lock_guard<std::mutex> lock(comm->mutex);
  const int id = comm->nextPreMul++;
  comm->preMuls[id] = made;
  comm->userOps.insert(id);
  *op = static_cast<ncclRedOp_t>(id);
  return ncclSuccess;
}

ncclResult_t PreMulStaging::stageIn(const Call &c, Op &op) {
  const PreMulOp &pm = *c.preMul;
  const size_t es = interp::dataTypeSize(op.type);
  const bool scatters = op.kind == OpKind::ReduceScatter;
  const size_t inElems = op.count * (scatters ? size_t(c.comm->nranks) : 1);
  auto s = std::make_unique<Staged>();
  s->comm = c.comm;
  s->stream = c.stream;
  unsigned char scalar[8];
  std::memcpy(scalar, pm.scalar, sizeof scalar);
  const bool device = op.device >= 0;
  if (device || pm.deviceScalar) // the work queued before the call first
    if (int r = synchronizeCudaStream(c.stream); r != 0)
      return failWith(c.comm, ncclUnhandledCudaError,
                      llvm::formatv("{0} with a PreMulSum op on Coll: synchronizing the stream "
                                    "failed with CUDA error {1} (Coll multiplies the inputs on "
                                    "the host, which a CUDA graph capture does not allow)",
                                    c.function, r));
  if (pm.deviceScalar)
    if (ncclResult_t r = copy(scalar, pm.deviceScalar, es, c.comm, "reading the scalar");
        r != ncclSuccess)
      return r;
  s->in.resize(std::max<size_t>(inElems * es, 1));
  if (device) {
    if (ncclResult_t r = copy(s->in.data(), op.send, inElems * es, c.comm,
                              "copying the input to the host");
        r != ncclSuccess)
      return r;
  } else if (inElems) {
    std::memcpy(s->in.data(), op.send, inElems * es);
  }
  scale(op.type, s->in.data(), inElems, scalar);
  op.send = s->in.data();
  op.op = interp::ReduceOp::Sum;
  if (device) {
    // The whole call on the host, its result copied back (stageOut) where
    // this rank has one.
    s->out.resize(std::max<size_t>(op.count * es, 1));
    if (op.writesRecv(c.comm->rank))
      s->deviceOut = op.recv;
    op.recv = s->out.data();
    op.device = -1;
    op.stream = nullptr;
  }
  staged.push_back(std::move(s));
  return ncclSuccess;
}

ncclResult_t PreMulStaging::stageOut() {
  for (const std::unique_ptr<Staged> &s : staged)
    if (s->deviceOut)
      if (ncclResult_t r = copy(s->deviceOut, s->out.data(), s->out.size(), s->comm,
                                "copying the result to the device");
          r != ncclSuccess)
        return r;
  return ncclSuccess;
}

} // namespace coll::rt::dropin::nccl
