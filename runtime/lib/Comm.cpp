//===- Comm.cpp - A communicator: one rank of a job -------------------------===//

#include "CommImpl.h"

namespace coll::rt {

char CollError::ID = 0;

llvm::Error collError(collResult_t result, const llvm::Twine &message) {
  return llvm::make_error<CollError>(result, message.str());
}

collResult_t takeResult(llvm::Error err, std::string &message, collResult_t otherwise,
                        bool *agreed) {
  collResult_t result = collSuccess;
  if (agreed)
    *agreed = false;
  llvm::handleAllErrors(
      std::move(err),
      [&](const CollError &e) {
        result = e.result;
        message = e.message;
        if (agreed)
          *agreed = e.agreed;
      },
      [&](const llvm::ErrorInfoBase &e) {
        result = otherwise;
        message = e.message();
      });
  return result;
}

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
Communicator::~Communicator() = default;

llvm::Expected<std::unique_ptr<Communicator>>
Communicator::create(std::unique_ptr<Bootstrap> boot, const Config &config, uint64_t nonce) {
  auto impl = std::make_unique<Impl>();
  impl->boot = std::move(boot);
  impl->config = config;
  impl->nonce = nonce;
  if (llvm::Error err = impl->setup())
    return err;
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

int Communicator::rank() const { return impl->rank; }
int Communicator::nranks() const { return impl->nranks; }
const Config &Communicator::config() const { return impl->config; }

llvm::Expected<const Choice *> Communicator::select(ir::Collective coll, uint64_t bytes,
                                                    int root, bool device) {
  return impl->select(coll, bytes, root, device);
}

collResult_t Communicator::asyncError() const {
  return static_cast<collResult_t>(impl->asyncError.load(std::memory_order_acquire));
}

std::optional<std::string> Communicator::stopReport() const {
  if (!impl->stop || !impl->stop->stopping())
    return std::nullopt;
  return llvm::toString(impl->stop->error());
}

std::optional<std::string> Communicator::firstFailure() const {
  if (!impl->stop || !impl->stop->raised())
    return std::nullopt;
  std::string report = impl->stop->firstReport();
  if (report.empty())
    return std::nullopt;
  return report;
}

collResult_t Communicator::checkAsyncError() {
  std::unique_lock<std::mutex> lock(impl->deviceMutex, std::try_to_lock);
  if (lock.owns_lock() && !impl->devices.empty() && impl->backend && !impl->backend->emulated())
    llvm::consumeError(impl->checkDevices(false)); // breaks the communicator, records the message
  return asyncError();
}

int Communicator::boundDevice() const { return impl->gpu; }

llvm::Error Communicator::waitDevice() {
  std::lock_guard<std::mutex> lock(impl->deviceMutex);
  return impl->checkDevices(true);
}
void Communicator::bindDevice(int device) { impl->gpu = device; }

llvm::Expected<int> Communicator::registerWindow(void *buff, size_t bytes) {
  return impl->registerWindow(buff, bytes);
}

llvm::Error Communicator::deregisterWindow(int id) { return impl->deregisterWindow(id); }

const char *Communicator::lastError() {
  std::lock_guard<std::mutex> lock(impl->errorMutex);
  return impl->lastError.c_str();
}

void Communicator::setLastError(const std::string &message) {
  std::lock_guard<std::mutex> lock(impl->errorMutex);
  impl->lastError = message;
}

llvm::Error Communicator::finalize() {
  {
    // Kernels this rank enqueued on a GPU end first (the watchdog bounds them).
    std::lock_guard<std::mutex> lock(impl->deviceMutex);
    if (!impl->devices.empty())
      if (llvm::Error err = impl->checkDevices(true))
        return err;
  }
  if (impl->net && !impl->stop->stopping() &&
      !impl->net->drain(std::chrono::milliseconds(impl->config.watchdogMs)))
    return collError(collTimeout,
                     llvm::formatv("finalize: rank {0}'s data for other hosts did not leave within "
                                   "the watchdog period ({1} ms)",
                                   impl->rank, impl->config.watchdogMs));
  if (llvm::Error err = impl->boot->barrier())
    return collError(collRemoteError,
                     "finalize: lost contact with the other ranks: " + llvm::toString(std::move(err)));
  return llvm::Error::success();
}

void Communicator::abort() {
  const std::string why = llvm::formatv("rank {0} aborted the communicator", impl->rank);
  impl->stop->failAll(collRemoteError, why);
  impl->breakWith(collRemoteError, why);
  if (impl->liveness)
    impl->liveness->announce(Liveness::Abort, impl->rank);
  {
    // Kernels in flight on a device stop at their next poll instead of
    // running on until their watchdog.
    std::lock_guard<std::mutex> lock(impl->devicesMapMutex);
    for (auto &[plan, runner] : impl->devices)
      if (llvm::Error err = runner->abort())
        COLL_LOG(Warn, Coll, impl->rank, "abort: " + llvm::toString(std::move(err)));
  }
  // A call in flight on another thread sees the stop word at once; wait for
  // it to leave before the caller frees the communicator.
  for (int i = 0; impl->inCall.load(std::memory_order_acquire) != 0 && i < 100000; ++i)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
}

llvm::Expected<std::unique_ptr<Communicator>>
Communicator::split(int color, int key, const Config &config) {
  Impl &c = *impl;
  struct Entry {
    int32_t color, key, rank, pad;
  };
  std::vector<Entry> all(static_cast<size_t>(c.nranks));
  all[c.rank] = {color, key, c.rank, 0};
  if (llvm::Error err = c.boot->allgather(all.data(), sizeof(Entry)))
    return collError(collRemoteError, "split: " + llvm::toString(std::move(err)));
  std::vector<Entry> mine;
  for (const Entry &e : all)
    if (color != COLL_SPLIT_NOCOLOR && e.color == color)
      mine.push_back(e);
  std::stable_sort(mine.begin(), mine.end(), [](const Entry &a, const Entry &b) {
    return a.key != b.key ? a.key < b.key : a.rank < b.rank;
  });
  // Each new communicator's first rank starts a root and shares its id.
  std::vector<std::array<char, 128>> ids(static_cast<size_t>(c.nranks));
  llvm::Error rootError = llvm::Error::success();
  if (!mine.empty() && mine.front().rank == c.rank) {
    auto address = bootstrapAddress();
    if (!address) {
      rootError = std::move(address.takeError());
    } else if (auto root = startRoot(*address)) {
      encodeUniqueId(*root, ids[c.rank].data());
    } else {
      rootError = root.takeError();
    }
  }
  if (llvm::Error err = c.agree(std::move(rootError), "split"))
    return err;
  if (llvm::Error err = c.boot->allgather(ids.data(), 128))
    return collError(collRemoteError, "split: " + llvm::toString(std::move(err)));
  if (color == COLL_SPLIT_NOCOLOR)
    return nullptr;
  int newRank = 0;
  for (size_t i = 0; i < mine.size(); ++i)
    if (mine[i].rank == c.rank)
      newRank = static_cast<int>(i);
  auto id = decodeUniqueId(ids[mine.front().rank].data());
  if (!id)
    return collError(collInternalError, llvm::toString(id.takeError()));
  PeerInfo self = c.peers[c.rank];
  self.configHash = config.agreedHash();
  auto boot = connectBootstrap(*id, static_cast<int>(mine.size()), newRank, self);
  if (!boot)
    return collError(collRemoteError, "split: " + llvm::toString(boot.takeError()));
  return create(std::move(*boot), config, id->nonce);
}

std::optional<std::string> Communicator::deviceRefusal(const Op &op) const {
  if (impl->config.emulatedDevice)
    return std::string("device buffers on a communicator of the emulated device "
                       "(COLL_EMULATED_DEVICE), which takes host buffers");
  if (auto backend = gpuBackend(); !backend)
    return "device buffers: " + llvm::toString(backend.takeError());
  if (impl->gpu >= 0 && impl->gpu != op.device)
    return llvm::formatv("buffers on CUDA device {0}, but rank {1} of this communicator runs on "
                         "CUDA device {2}",
                         op.device, impl->rank, impl->gpu)
        .str();
  return std::nullopt;
}

// Whether `p` is CUDA device memory (Comm.h).
bool isDevicePointer(const void *p) { return deviceOfPointer(p) >= 0; }

} // namespace coll::rt
