//===- CollBackend.h - Inside coll.torch's c10d backend ---------*- C++ -*-===//
//
// The module coll._c10d is the backend behind `backend="coll"`: a C++
// c10d::Backend, so that a call goes from torch's dispatcher to libcoll.so's
// C API (coll.h) with no Python in between. What its sections share; each
// is a file of its own:
//
//   Conversion.cpp        torch's tensors, dtypes, reduce ops and streams in
//                         Coll's terms, and whether Coll takes a call's
//                         tensors at all (a Decision, with the reason when
//                         it does not)
//   Work.cpp              the c10d Work objects of the calls Coll runs, and
//                         their futures
//   ProcessGroupColl.cpp  routing: the c10d::Backend itself, which sends each
//                         call to Coll or to the backend underneath (gloo),
//                         and the Python module that makes it
//
// Everything here is private to the module (built with -fvisibility=hidden).
//
//===----------------------------------------------------------------------===//

#ifndef COLL_PYTHON_BACKEND_COLLBACKEND_H
#define COLL_PYTHON_BACKEND_COLLBACKEND_H

#include "coll.h"

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace coll::pytorch {

using WorkPtr = c10::intrusive_ptr<c10d::Work>;
using BackendPtr = c10::intrusive_ptr<c10d::Backend>;

//===- Conversion.cpp -----------------------------------------------------===//

/// A call's dtype in Coll's terms, or why Coll does not take its tensors.
struct Decision {
  collDataType_t dtype = collFloat32;
  std::string unsupported; // empty: Coll can take the call
};

/// Whether Coll takes these tensors (dense, on one device Coll serves, of
/// one dtype Coll has), and their dtype in its terms.
Decision check(const std::vector<at::Tensor> &tensors);
/// `op` in Coll's terms; where Coll has none, `d` says so (unless it
/// already says why not).
std::optional<collRedOp_t> reduceOp(const c10d::ReduceOp &op, Decision &d);

/// The stream a call on `t` is enqueued on: the current stream of its
/// device; none (host memory) on the CPU.
std::optional<c10::Stream> streamOf(const at::Tensor &t);
/// streamOf(t) as the cudaStream_t Coll's calls take (null on the CPU).
void *streamHandle(const at::Tensor &t);

/// The sum of the tensors' sizes in bytes.
size_t bytes(const std::vector<at::Tensor> &tensors);
/// The tensors, each flattened, end to end in one new tensor.
at::Tensor flatten(const std::vector<at::Tensor> &tensors);
/// Copies `c`, the contiguous copy a call ran on, back into `t` where it is
/// not `t` itself.
void copyBack(at::Tensor &t, const at::Tensor &c);

/// A failed Coll call's report: "Coll NAME: LAST ERROR" (`comm`'s last
/// error, or the process's where `comm` is null).
std::string failureMessage(collResult_t result, collComm_t comm);

//===- Work.cpp -----------------------------------------------------------===//

/// `message` as torch's DistBackendError, the error of a failed call.
std::exception_ptr backendError(const std::string &message);

/// A call Coll ran. Host calls are complete when it is made; a CUDA call
/// holds an event recorded after it on its stream.
class CollWork : public c10d::Work {
public:
  CollWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
           std::exception_ptr error, std::optional<c10::Stream> stream);

  bool isCompleted() override;
  bool wait(std::chrono::milliseconds timeout) override;
  void synchronize() override;
  /// Made when asked for (host calls): most callers only wait.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override;

private:
  c10::intrusive_ptr<c10::ivalue::Future> makeFuture(std::vector<c10::Device> devices);

  std::vector<at::Tensor> outputs_;
  std::optional<c10::Event> event_;
  std::mutex futureMutex_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

/// A send or a receive Coll runs (collIsend, collIrecv on `host`, the
/// tensor's bytes in host memory): complete when its request is. A receive
/// into another tensor than `host` (a CUDA one) copies into it when it
/// completes; a send from one was copied to `host` before. A Work that goes
/// before its request completes leaves the request and `host` to be let go
/// when it does.
class TaggedWork : public c10d::Work {
public:
  TaggedWork(int rank, c10d::OpType type, collRequest_t request, at::Tensor host,
             at::Tensor target, std::chrono::milliseconds timeout);
  ~TaggedWork() override;

  bool isCompleted() override;
  /// Waits until the request completes or, where `timeout` is kNoTimeout,
  /// the group's timeout passes (as gloo's): then raises.
  bool wait(std::chrono::milliseconds timeout) override;
  /// The sender of a receive (recv without src: torch's return value).
  int sourceRank() const override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override;

private:
  /// Tests the request; when complete, finishes the Work. Under mutex_.
  bool poll();

  collRequest_t request_;
  at::Tensor host_, target_;
  std::chrono::milliseconds timeout_;
  int source_ = -1;
  bool done_ = false;
  std::mutex pollMutex_;
};

/// Several calls' Works as one (the coalesced forms): done when all are.
class JoinedWork : public c10d::Work {
public:
  JoinedWork(int rank, c10d::OpType type, std::vector<WorkPtr> works,
             std::vector<at::Tensor> outputs);

  bool isCompleted() override;
  /// Waits for every call; throws the first error.
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override;

private:
  std::vector<WorkPtr> works_;
  std::vector<at::Tensor> outputs_;
  std::mutex futureMutex_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

} // namespace coll::pytorch

#endif // COLL_PYTHON_BACKEND_COLLBACKEND_H
