//===- Work.cpp - The c10d Work objects of coll._c10d ---------------------===//
//
// What torch gets back for a call Coll ran (a call handed to gloo returns
// gloo's own Work): wait() raises the call's error as a DistBackendError,
// get_future() gives a future of the output tensors (what DDP's reducer
// uses), is_completed() says whether it is done. A host call is done when
// its Work is made; a CUDA call's Work holds an event recorded after the
// call on its stream, and wait() makes the then-current stream wait for it,
// as NCCL's do.
//
//===----------------------------------------------------------------------===//

#include "CollBackend.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace coll::pytorch {

std::exception_ptr backendError(const std::string &message) {
  try {
    C10_THROW_ERROR(DistBackendError, message);
  } catch (...) {
    return std::current_exception();
  }
}

//===- CollWork -----------------------------------------------------------===//

CollWork::CollWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
                   std::exception_ptr error, std::optional<c10::Stream> stream)
    : Work(rank, type), outputs_(std::move(outputs)) {
  finish(error);
  if (stream && !error) {
    event_.emplace(c10::DeviceType::CUDA);
    event_->record(*stream);
    // Made now, while the call's stream is current: the future records
    // its own events there, so its callbacks run after the call.
    future_ = makeFuture({stream->device()});
  }
}

bool CollWork::isCompleted() { return Work::isCompleted() && (!event_ || event_->query()); }

bool CollWork::wait(std::chrono::milliseconds timeout) {
  Work::wait(timeout); // throws the call's error
  synchronize();
  return true;
}

void CollWork::synchronize() {
  if (event_)
    event_->block(
        c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(event_->device()));
}

c10::intrusive_ptr<c10::ivalue::Future> CollWork::getFuture() {
  std::lock_guard<std::mutex> lock(futureMutex_);
  if (!future_)
    future_ = makeFuture({});
  return future_;
}

std::vector<at::Tensor> CollWork::result() { return outputs_; }

c10::intrusive_ptr<c10::ivalue::Future>
CollWork::makeFuture(std::vector<c10::Device> devices) {
  static const c10::TypePtr type = c10::ListType::create(c10::TensorType::get());
  auto future = c10::make_intrusive<c10::ivalue::Future>(type, std::move(devices));
  if (exception_)
    future->setError(exception_);
  else
    future->markCompleted(c10::IValue(outputs_));
  return future;
}

//===- JoinedWork ---------------------------------------------------------===//

JoinedWork::JoinedWork(int rank, c10d::OpType type, std::vector<WorkPtr> works,
                       std::vector<at::Tensor> outputs)
    : Work(rank, type), works_(std::move(works)), outputs_(std::move(outputs)) {}

bool JoinedWork::isCompleted() {
  for (auto &w : works_)
    if (!w->isCompleted())
      return false;
  return true;
}

bool JoinedWork::wait(std::chrono::milliseconds timeout) {
  std::exception_ptr error;
  for (auto &w : works_) {
    try {
      w->wait(timeout);
    } catch (...) {
      if (!error)
        error = std::current_exception();
    }
  }
  if (error)
    std::rethrow_exception(error);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> JoinedWork::getFuture() {
  std::lock_guard<std::mutex> lock(futureMutex_);
  if (!future_) {
    std::vector<c10::intrusive_ptr<c10::ivalue::Future>> futures;
    for (auto &w : works_)
      futures.push_back(w->getFuture());
    auto all = c10::collectAll(c10::List<c10::intrusive_ptr<c10::ivalue::Future>>(futures));
    auto outputs = outputs_;
    future_ = all->then(
        [outputs](c10::ivalue::Future &done) {
          for (const auto &f : done.value().toList())
            if (f.get().toFuture()->hasError())
              f.get().toFuture()->value(); // rethrows the first error
          return c10::IValue(outputs);
        },
        c10::ListType::create(c10::TensorType::get()));
  }
  return future_;
}

std::vector<at::Tensor> JoinedWork::result() { return outputs_; }

} // namespace coll::pytorch
