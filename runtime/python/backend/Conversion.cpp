//===- Conversion.cpp - torch's terms in Coll's, for coll._c10d -----------===//
//
// What a torch call's tensors, dtype, reduce op and stream are in Coll's
// terms (coll.h), and whether Coll takes them at all: a Decision names the
// reason when it does not, in the words the log gives (docs/PYTORCH.md,
// "What falls back to gloo, and why"). Every answer depends only on what
// all ranks share (dtypes, devices, shapes), so all ranks take the same
// road. Also the words of a failed Coll call.
//
//===----------------------------------------------------------------------===//

#include "CollBackend.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cctype>

namespace coll::pytorch {

namespace {

/// torch's name of a dtype, as Python prints it ("torch.bool").
std::string dtypeName(at::ScalarType t) {
  switch (t) {
  case at::kByte: return "torch.uint8";
  case at::kChar: return "torch.int8";
  case at::kShort: return "torch.int16";
  case at::kInt: return "torch.int32";
  case at::kLong: return "torch.int64";
  case at::kHalf: return "torch.float16";
  case at::kFloat: return "torch.float32";
  case at::kDouble: return "torch.float64";
  case at::kComplexHalf: return "torch.complex32";
  case at::kComplexFloat: return "torch.complex64";
  case at::kComplexDouble: return "torch.complex128";
  case at::kBool: return "torch.bool";
  case at::kBFloat16: return "torch.bfloat16";
  default: {
    std::string name = c10::toString(t);
    for (char &c : name)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return "torch." + name;
  }
  }
}

std::optional<collDataType_t> collType(at::ScalarType t) {
  switch (t) {
  case at::kFloat: return collFloat32;
  case at::kDouble: return collFloat64;
  case at::kHalf: return collFloat16;
  case at::kBFloat16: return collBfloat16;
  case at::kInt: return collInt32;
  case at::kLong: return collInt64;
  case at::kChar: return collInt8;
  case at::kByte: return collUint8;
  default: return std::nullopt;
  }
}

/// The name of a reduce op, as torch spells it ("PREMUL_SUM").
const char *opName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
  case c10d::ReduceOp::SUM: return "SUM";
  case c10d::ReduceOp::AVG: return "AVG";
  case c10d::ReduceOp::PRODUCT: return "PRODUCT";
  case c10d::ReduceOp::MIN: return "MIN";
  case c10d::ReduceOp::MAX: return "MAX";
  case c10d::ReduceOp::BAND: return "BAND";
  case c10d::ReduceOp::BOR: return "BOR";
  case c10d::ReduceOp::BXOR: return "BXOR";
  case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
  default: return "UNUSED";
  }
}

std::optional<collRedOp_t> collOp(const c10d::ReduceOp &op) {
  switch (op.op_) {
  case c10d::ReduceOp::SUM: return collSum;
  case c10d::ReduceOp::PRODUCT: return collProd;
  case c10d::ReduceOp::MIN: return collMin;
  case c10d::ReduceOp::MAX: return collMax;
  case c10d::ReduceOp::AVG: return collAvg;
  default: return std::nullopt;
  }
}

/// libcoll's GPU backend loads in this process (asked once).
std::pair<bool, std::string> deviceSupport() {
  static const std::pair<bool, std::string> answer = [] {
    int ok = 0;
    char why[1024] = "";
    if (collDeviceBuffersSupported(&ok, why, sizeof why) != collSuccess)
      return std::pair<bool, std::string>(false, collGetLastError(nullptr));
    return std::pair<bool, std::string>(ok != 0, why);
  }();
  return answer;
}

} // namespace

Decision check(const std::vector<at::Tensor> &tensors) {
  Decision d;
  if (tensors.empty()) {
    d.unsupported = "no tensors";
    return d;
  }
  const at::Tensor &t0 = tensors[0];
  for (const auto &t : tensors) {
    if (t.layout() != at::kStrided) {
      d.unsupported = "sparse tensors";
      return d;
    }
    // gloo runs a call on a tensor that is not contiguous on the memory
    // from its first element on, as if it were (or refuses it): the same
    // bytes, inside the view and around it, only gloo gives.
    if (!t.is_contiguous()) {
      d.unsupported = "tensors that are not contiguous";
      return d;
    }
    if (t.is_cuda()) {
      auto [ok, why] = deviceSupport();
      if (!ok) {
        d.unsupported = "cuda tensors: " + why;
        return d;
      }
    } else if (!t.is_cpu()) {
      d.unsupported = c10::DeviceTypeName(t.device().type(), true) + " tensors";
      return d;
    }
    if (t.device() != t0.device()) {
      d.unsupported = "tensors on different devices";
      return d;
    }
    if (t.scalar_type() != t0.scalar_type()) {
      d.unsupported = "tensors of different dtypes";
      return d;
    }
  }
  auto type = collType(t0.scalar_type());
  if (!type)
    d.unsupported = "dtype " + dtypeName(t0.scalar_type());
  else
    d.dtype = *type;
  return d;
}

std::optional<collRedOp_t> reduceOp(const c10d::ReduceOp &op, Decision &d) {
  auto mapped = collOp(op);
  if (!mapped && d.unsupported.empty())
    d.unsupported = std::string("reduce op ") + opName(op.op_);
  // gloo's AVG divides the sum in place, which an integer tensor refuses
  // (it raises); Coll's would round.
  bool integral = d.dtype == collInt8 || d.dtype == collUint8 || d.dtype == collInt32 ||
                  d.dtype == collInt64;
  if (mapped == collAvg && integral && d.unsupported.empty())
    d.unsupported = "AVG of integers";
  return mapped;
}

std::optional<c10::Stream> streamOf(const at::Tensor &t) {
  if (!t.is_cuda())
    return std::nullopt;
  return c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(t.device());
}

void *streamHandle(const at::Tensor &t) {
  auto s = streamOf(t);
  return s ? s->native_handle() : nullptr;
}

size_t bytes(const std::vector<at::Tensor> &tensors) {
  size_t n = 0;
  for (const auto &t : tensors)
    n += t.layout() == at::kStrided ? t.nbytes() : 0; // sparse ones go to gloo
  return n;
}

at::Tensor flatten(const std::vector<at::Tensor> &tensors) {
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  for (const auto &t : tensors)
    flat.push_back(t.reshape(-1));
  return at::cat(flat);
}

void copyBack(at::Tensor &t, const at::Tensor &c) {
  if (c.data_ptr() != t.data_ptr())
    t.copy_(c);
}

std::string failureMessage(collResult_t result, collComm_t comm) {
  static const char *names[] = {"success",        "unhandled cuda error", "system error",
                                "internal error", "invalid argument",     "invalid usage",
                                "remote error",   "in progress",          "timeout"};
  std::string name = result >= 0 && result < collNumResults
                         ? names[result]
                         : "result " + std::to_string(static_cast<int>(result));
  return "Coll " + name + ": " + collGetLastError(comm);
}

} // namespace coll::pytorch
