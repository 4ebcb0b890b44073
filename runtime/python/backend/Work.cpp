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

#include <thread>

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

//===- TaggedWork ---------------------------------------------------------===//

namespace {

/// Requests whose Work went before they completed (an isend never waited
/// for, a wait that timed out), each with the buffer it reads or writes,
/// which must stay until it completes: tested, and let go once complete,
/// whenever a TaggedWork is made or goes. A communicator's destroy
/// completes its requests (with an error).
struct Orphans {
  std::mutex mutex;
  std::vector<std::pair<collRequest_t, at::Tensor>> pending;

  void sweep() {
    std::lock_guard<std::mutex> lock(mutex);
    std::erase_if(pending, [](auto &p) {
      int flag = 0;
      collTest(&p.first, &flag, nullptr);
      return flag != 0;
    });
  }
  void adopt(collRequest_t request, at::Tensor buffer) {
    std::lock_guard<std::mutex> lock(mutex);
    pending.emplace_back(request, std::move(buffer));
  }
};

Orphans &orphans() {
  static Orphans *all = new Orphans; // used until the process ends
  return *all;
}

} // namespace

TaggedWork::TaggedWork(int rank, c10d::OpType type, collRequest_t request, at::Tensor host,
                       at::Tensor target, std::chrono::milliseconds timeout)
    : Work(rank, type), request_(request), host_(std::move(host)), target_(std::move(target)),
      timeout_(timeout) {
  orphans().sweep();
}

TaggedWork::~TaggedWork() {
  std::lock_guard<std::mutex> lock(pollMutex_);
  if (request_)
    orphans().adopt(request_, host_);
  orphans().sweep();
}

bool TaggedWork::poll() {
  if (done_)
    return true;
  int flag = 0;
  collStatus_t status;
  collResult_t r = collTest(&request_, &flag, &status);
  if (!flag && r == collSuccess)
    return false;
  done_ = true;
  request_ = nullptr;
  std::exception_ptr error;
  if (r != collSuccess) {
    error = backendError(failureMessage(r, nullptr));
  } else {
    source_ = status.source;
    if (target_.defined() && !target_.is_same(host_))
      target_.copy_(host_);
  }
  finish(error);
  return true;
}

bool TaggedWork::isCompleted() {
  std::lock_guard<std::mutex> lock(pollMutex_);
  return poll();
}

bool TaggedWork::wait(std::chrono::milliseconds timeout) {
  const auto limit = timeout == kNoTimeout ? timeout_ : timeout;
  const auto start = std::chrono::steady_clock::now();
  for (unsigned spins = 0;; ++spins) {
    {
      std::lock_guard<std::mutex> lock(pollMutex_);
      if (poll())
        break;
    }
    if (std::chrono::steady_clock::now() - start > limit)
      C10_THROW_ERROR(DistBackendError,
                      "Coll: a " + std::string(c10d::opTypeToString(retrieveOpType())) +
                          " did not complete within the timeout of " +
                          std::to_string(limit.count()) + " ms");
    if (spins < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  Work::wait(timeout); // throws the call's error
  return true;
}

int TaggedWork::sourceRank() const { return source_; }

c10::intrusive_ptr<c10::ivalue::Future> TaggedWork::getFuture() {
  wait(kNoTimeout);
  static const c10::TypePtr type = c10::ListType::create(c10::TensorType::get());
  auto future = c10::make_intrusive<c10::ivalue::Future>(type);
  future->markCompleted(c10::IValue(result()));
  return future;
}

std::vector<at::Tensor> TaggedWork::result() {
  return {target_.defined() ? target_ : host_};
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
