//===- DropIn.cpp - What the drop-in libraries share ---------------------===//

#include "coll/dropin/DropIn.h"

#include "coll/runtime/Device.h"

#include "coll/runtime/Debug.h"

#include "coll/ir/Algorithm.h"

#include "llvm/Support/FormatVariadic.h"

#include <mutex>
#include <set>

namespace coll::rt::dropin {

namespace {
std::mutex loggedMutex;
std::set<std::string> logged;

ir::Collective collectiveOf(OpKind kind) {
  switch (kind) {
  case OpKind::AllReduce: return ir::Collective::AllReduce;
  case OpKind::AllGather: return ir::Collective::AllGather;
  case OpKind::ReduceScatter: return ir::Collective::ReduceScatter;
  case OpKind::AllToAll: return ir::Collective::AllToAll;
  case OpKind::Broadcast: return ir::Collective::Broadcast;
  case OpKind::Gather: return ir::Collective::Gather;
  case OpKind::Scatter: return ir::Collective::Scatter;
  default: return ir::Collective::Reduce;
  }
}
} // namespace

void onceAtInfo(int rank, const std::string &message) {
  if (!logEnabled(Level::Info, Coll))
    return;
  {
    std::lock_guard<std::mutex> lock(loggedMutex);
    if (!logged.insert(message).second)
      return;
  }
  log(Level::Info, Coll, rank, message + " (said once)");
}

void fallback(const char *collective, const char *library, const std::string &reason, int rank) {
  if (logEnabled(Level::Info, Coll))
    onceAtInfo(rank, llvm::formatv("{0}: falls back to {1}: {2}", collective, library, reason));
}

bool collRuns(const char *collective, Communicator &c, Op &op, const char *library, int logRank) {
  const auto [sendDevice, recvDevice] = devicesOfPointers(op.send, op.recv);
  op.device = -1;
  if (sendDevice >= 0 || recvDevice >= 0) {
    auto place = [](int d) {
      return d >= 0 ? "memory of CUDA device " + std::to_string(d) : std::string("host memory");
    };
    const bool sendUsed = op.send && op.kind != OpKind::Recv;
    const bool recvUsed = op.recv && op.kind != OpKind::Send;
    if (sendUsed && recvUsed && sendDevice != recvDevice) {
      fallback(collective, library,
               "sendbuff is " + place(sendDevice) + ", recvbuff " + place(recvDevice), logRank);
      return false;
    }
    if (op.pointToPoint()) {
      fallback(collective, library, "point-to-point calls on device buffers", logRank);
      return false;
    }
    if (c.config().emulatedDevice) {
      fallback(collective, library, "device buffers on a communicator of the emulated device",
               logRank);
      return false;
    }
    auto backend = gpuBackend();
    if (!backend) {
      fallback(collective, library, "device buffers: " + llvm::toString(backend.takeError()),
               logRank);
      return false;
    }
    const int device = std::max(sendDevice, recvDevice);
    if (c.boundDevice() >= 0 && c.boundDevice() != device) {
      fallback(collective, library,
               llvm::formatv("buffers on CUDA device {0}, but this rank's Coll communicator "
                             "runs on device {1}",
                             device, c.boundDevice()),
               logRank);
      return false;
    }
    op.device = device;
  }
  if (op.count == 0 || op.pointToPoint())
    return true;
  const ir::Collective coll = collectiveOf(op.kind);
  const ir::CollectiveInfo info = ir::collectiveInfo(coll);
  const uint64_t n = static_cast<uint64_t>(c.nranks());
  const uint64_t bytes = op.count * interp::dataTypeSize(op.type) *
                         (info.inputPerRank || info.outputPerRank ? n : 1);
  auto chosen = c.select(coll, bytes, info.hasRoot ? op.root : 0);
  if (!chosen) {
    std::string message;
    takeResult(chosen.takeError(), message);
    fallback(collective, library, message, logRank);
    return false;
  }
  const Choice *choice = *chosen;
  if (choice->local) {
    if (logEnabled(Level::Info, Coll))
      onceAtInfo(logRank,
                 llvm::formatv("{0}: Coll runs it as a copy ({1})", collective, choice->why));
    return true;
  }
  if (!choice->algo) {
    // A tuning rule chose the library underneath for this size: a choice.
    if (logEnabled(Level::Info, Coll))
      onceAtInfo(logRank,
                 llvm::formatv("{0}: {1} runs it by {2}", collective, library, choice->why));
    return false;
  }
  // Formatted only where it may be said: this runs on every call.
  if (logEnabled(Level::Info, Coll))
    onceAtInfo(logRank, llvm::formatv("{0}: Coll runs it{5} with {1} ({2}, {3}) by {4}",
                                      collective, choice->algo->name,
                                      ir::protocolName(choice->algo->protocol),
                                      choice->algo->origin, choice->why,
                                      op.device >= 0 ? " on the GPU" : ""));
  if (op.device >= 0 && c.boundDevice() < 0)
    c.bindDevice(op.device);
  return true;
}

} // namespace coll::rt::dropin
