//===- Executor.cpp - Creating and tearing down a CUDA executor -----------===//
//
// start(): the plan's tables and the device state on the device; for an
// executor of one rank, the FIFOs and signal flags it receives on, in an
// allocation it exports to the other ranks (ConnectionExport); the host
// stop word mapped for the device. The destructor gives all of it back.
//
//===----------------------------------------------------------------------===//

#include "Executor.h"
#if COLL_CUDA_EMULATION
#include "emu/Simt.h"
#endif

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include <sys/mman.h>
#include <unistd.h>

// One of CollCuda and CollCudaEmu per program (coll/cuda/Backend.h):
// linking both defines this twice.
extern "C" __attribute__((visibility("hidden"))) const int collCudaBackendLinkedOnce =
    COLL_CUDA_EMULATION;

namespace coll::interp::cuda {

static_assert(static_cast<uint8_t>(ir::Protocol::Simple) == static_cast<uint8_t>(Proto::Simple) &&
                  static_cast<uint8_t>(ir::Protocol::LL) == static_cast<uint8_t>(Proto::LL) &&
                  static_cast<uint8_t>(ir::Protocol::LL128) == static_cast<uint8_t>(Proto::LL128),
              "Proto mirrors ir::Protocol");
static_assert(sizeof(PlanStep) % 4 == 0, "steps are copied to shared memory as is");

namespace {
/// The pages of host stop words (CudaOptions::hostStop) this process has
/// registered with CUDA, and how many executors use each: one page may
/// hold the stop word of several communicators' executors, and CUDA
/// refuses a range registered twice.
struct HostStopPages {
  std::mutex mutex;
  std::map<uintptr_t, uint32_t> users;
};
HostStopPages &hostStopPages() {
  static HostStopPages *pages = new HostStopPages(); // used until exit
  return *pages;
}
uintptr_t pageOf(const void *p) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return reinterpret_cast<uintptr_t>(p) & ~(page - 1);
}
/// The device's address of `word`, its page registered; null where CUDA
/// will not map it (the executor then runs without it).
const uint32_t *mapHostStop(const void *word) {
  HostStopPages &pages = hostStopPages();
  std::lock_guard<std::mutex> lock(pages.mutex);
  const uintptr_t page = pageOf(word);
  uint32_t &users = pages.users[page];
  if (users == 0 &&
      cudaHostRegister(reinterpret_cast<void *>(page), static_cast<size_t>(sysconf(_SC_PAGESIZE)),
                       cudaHostRegisterPortable | cudaHostRegisterMapped) != cudaSuccess) {
    cudaGetLastError(); // not sticky: clear it
    pages.users.erase(page);
    return nullptr;
  }
  void *device = nullptr;
  if (cudaHostGetDevicePointer(&device, const_cast<void *>(word), 0) != cudaSuccess) {
    cudaGetLastError();
    if (users == 0) {
      cudaHostUnregister(reinterpret_cast<void *>(page));
      pages.users.erase(page);
    }
    return nullptr;
  }
  ++users;
  return static_cast<const uint32_t *>(device);
}
void unmapHostStop(const void *word) {
  HostStopPages &pages = hostStopPages();
  std::lock_guard<std::mutex> lock(pages.mutex);
  auto it = pages.users.find(pageOf(word));
  if (it == pages.users.end() || --it->second > 0)
    return;
  cudaHostUnregister(reinterpret_cast<void *>(it->first));
  pages.users.erase(it);
}
} // namespace

/// COLL_CUDA_SCOPE (docs/CUDA.md, "Scopes"): "sys" runs every connection at
/// .sys in the CrossGpu build, a diagnostic of what a connection between
/// GPUs pays for its ordering, measurable on one GPU (.sys covers .gpu);
/// unset, empty or "auto": each connection's own scope.
static llvm::Expected<bool> forcedSysScope() {
  const char *v = std::getenv("COLL_CUDA_SCOPE");
  if (!v || !*v || std::strcmp(v, "auto") == 0)
    return false;
  if (std::strcmp(v, "sys") == 0)
    return true;
  return fail(llvm::formatv("COLL_CUDA_SCOPE={0}: auto (each connection's scope) or sys", v));
}

CudaExecutor::~CudaExecutor() {
  DeviceScope scoped = scope();
  releaseAll();
#if COLL_CUDA_EMULATION
  simt::setTrafficRanges(this, {}); // describeTraffic's
#endif
}

void CudaExecutor::releaseAll() {
  if (stream)
    cudaStreamSynchronize(stream);
  // Stream-ordered memory goes back on the stream, before it is destroyed.
  for (DeviceMemory *m : streamMemory())
    m->release();
  if (stream)
    cudaStreamSynchronize(stream);
  for (void *p : opened)
    cudaIpcCloseMemHandle(p);
  for (HostArea &a : mappedAreas)
    releaseArea(a);
  releaseArea(own);
  if (abortStream)
    cudaStreamDestroy(abortStream);
  if (callerReady)
    cudaEventDestroy(callerReady);
  if (launched)
    cudaEventDestroy(launched);
  if (startEvent)
    cudaEventDestroy(startEvent);
  if (stopEvent)
    cudaEventDestroy(stopEvent);
  if (stream)
    cudaStreamDestroy(stream);
  if (report)
    cudaFreeHost(report);
  if (deviceHostStop)
    unmapHostStop(options.hostStop);
  // Not stream-ordered (CUDA IPC exports it): cudaFree, on this device.
  received.release();
}

llvm::Error CudaExecutor::start() {
  if (llvm::Error err = checkOptions(options, proto))
    return err;
  auto info = currentCudaDevice();
  if (!info)
    return info.takeError();
  deviceInfo = *info;
  watchdogMs = watchdogFromEnv(options.watchdogMs);

  if (oneRank() && options.rank >= plan_.nranks)
    return fail(llvm::formatv("{0}: rank {1} of a plan of {2} ranks", plan_.fileName, options.rank,
                              plan_.nranks));
  if (oneRank() ? !plan_.holds(options.rank) : plan_.planRank >= 0)
    return fail(llvm::formatv("{0}: the plan holds rank {1}'s steps only", plan_.fileName,
                              plan_.planRank));
  // Direct steps reach the peers' buffers: an executor of every rank has
  // them all (one GPU, one process); one of a single rank is given them
  // (setPeerBuffers), and shares the flags of the signals it waits on as
  // it shares its FIFOs.
  direct = oneRank() ? plan_.hasDirectSteps(options.rank) : !plan_.stepPeers.empty();
  if (oneRank() && direct)
    findDirectPeers();
  firstTb = oneRank() ? plan_.rankTbBegin[options.rank] : 0;
  launchTbs = oneRank() ? plan_.rankTbBegin[options.rank + 1] - firstTb
                        : static_cast<int32_t>(plan_.tbs.size());

  COLL_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (DeviceMemory *m : streamMemory())
    m->orderOn(stream);
  connection = ConnectionLayout::of(proto, slotBytes(options, proto));
  // One rank: the connections live with their receivers, not in the state.
  stateLayout = StateLayout::of(plan_.tbs.size(), oneRank() ? 0 : plan_.connections.size(),
                                connection, oneRank() ? 0 : plan_.signals.size());
  if (llvm::Error err = upload(tbs, plan_.tbs.data(), plan_.tbs.size(), stream))
    return err;
  if (llvm::Error err = upload(steps, plan_.steps.data(), plan_.steps.size(), stream))
    return err;
  if (llvm::Error err = upload(deps, plan_.deps.data(), plan_.deps.size(), stream))
    return err;
  if (direct) {
    if (llvm::Error err = upload(stepPeers, plan_.stepPeers.data(), plan_.stepPeers.size(), stream))
      return err;
    if (llvm::Error err =
            upload(memberPeers, plan_.memberPeers.data(), plan_.memberPeers.size(), stream))
      return err;
    if (llvm::Error err = upload(memberSignals, plan_.memberSignals.data(),
                                 plan_.memberSignals.size(), stream))
      return err;
    if (llvm::Error err = upload(signals, plan_.signals.data(), plan_.signals.size(), stream))
      return err;
  }
  if (llvm::Error err = state.reserve(stateLayout.bytes))
    return err;
  COLL_CUDA_TRY(cudaMemsetAsync(state.as<void>(), 0, stateLayout.bytes, stream));
  connPointers.assign(plan_.connections.size(), nullptr);
  auto forced = forcedSysScope();
  if (!forced)
    return forced.takeError();
  forceSys = *forced;
  connScopes.assign(plan_.connections.size(), forceSys ? Scope::Sys : Scope::Gpu);
  crossGpu = forceSys;
  indexAtReceiver.assign(plan_.connections.size(), 0);
  viaHost.assign(plan_.connections.size(), 0);
  hostPointers.assign(plan_.connections.size(), nullptr);
  signalPointers.assign(direct ? plan_.signals.size() : 0, nullptr);
  if (llvm::Error err = placeOwnConnections())
    return err;
  if (llvm::Error err = uploadConnections())
    return err;
  if (direct)
    if (llvm::Error err = uploadSignals())
      return err;
  if (llvm::Error err = startCopyEngines())
    return err;
  COLL_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void **>(&report), sizeof(WatchdogReport),
                              cudaHostAllocMapped));
  std::memset(report, 0, sizeof(WatchdogReport));
  COLL_CUDA_TRY(cudaHostGetDevicePointer(reinterpret_cast<void **>(&deviceReport), report, 0));
  if (options.hostStop)
    deviceHostStop = mapHostStop(options.hostStop);
  COLL_CUDA_TRY(cudaEventCreate(&startEvent));
  COLL_CUDA_TRY(cudaEventCreate(&stopEvent));
  COLL_CUDA_TRY(cudaEventCreateWithFlags(&callerReady, cudaEventDisableTiming));
  COLL_CUDA_TRY(cudaEventCreateWithFlags(&launched, cudaEventDisableTiming));
  COLL_CUDA_TRY(cudaStreamSynchronize(stream));
  return llvm::Error::success();
}

void CudaExecutor::findDirectPeers() {
  for (int32_t t = plan_.rankTbBegin[options.rank]; t < plan_.rankTbBegin[options.rank + 1]; ++t)
    for (int32_t i = 0; i < plan_.tbs[t].nSteps; ++i) {
      const PlanStep &step = plan_.steps[size_t(plan_.tbs[t].stepBegin + i)];
      const PlanStepPeer d = plan_.stepPeer(size_t(plan_.tbs[t].stepBegin + i));
      if (d.peer < 0)
        continue;
      const bool loads = step.type == StepKind::Get || step.type == StepKind::GetReduce;
      // Every source's peer of a fused getre, every destination's of a
      // fused put.
      for (int r = 0; r < stepPeerCount(d, step.nsrc); ++r) {
        const int32_t peer = d.members < 0 ? d.peer : plan_.memberPeers[size_t(d.members + r)];
        directPeers.push_back(peer);
        if (loads || step.type == StepKind::Put)
          peerBuffersUsed.emplace_back(peer, loads ? step.srcBuf : step.dstBuf);
      }
    }
  for (const PlanSignal &pair : plan_.signals)
    if (pair.sender == options.rank || pair.receiver == options.rank)
      directPeers.push_back(pair.sender == options.rank ? pair.receiver : pair.sender);
  llvm::sort(directPeers);
  directPeers.erase(std::unique(directPeers.begin(), directPeers.end()), directPeers.end());
  llvm::sort(peerBuffersUsed);
  peerBuffersUsed.erase(std::unique(peerBuffersUsed.begin(), peerBuffersUsed.end()),
                        peerBuffersUsed.end());
}

llvm::Error CudaExecutor::placeOwnConnections() {
  if (!oneRank()) {
    // Every rank: the connections and signal flags in the device state.
    for (size_t c = 0; c < plan_.connections.size(); ++c)
      connPointers[c] = state.as<unsigned char>() + stateLayout.connectionsOffset +
                        c * connection.stride;
    for (size_t g = 0; g < signalPointers.size(); ++g)
      signalPointers[g] = reinterpret_cast<uint64_t *>(state.as<unsigned char>() +
                                                       stateLayout.signalsOffset + g * PollStride);
    return llvm::Error::success();
  }
  // Each FIFO's place among its receiver's, from the whole plan (a
  // rank's plan holds only its own connections).
  for (size_t c = 0; c < plan_.connections.size(); ++c)
    indexAtReceiver[c] = static_cast<uint64_t>(plan_.connections[c].atReceiver);
  const uint64_t fifoBytes =
      static_cast<uint64_t>(plan_.connectionsInto[options.rank]) * connection.stride;
  // The flags of the signals it waits on, after them: every rank numbers
  // each receiver's signals alike, from the whole plan's list.
  uint32_t signalsInto = 0;
  if (direct) {
    std::vector<uint64_t> into(plan_.nranks, 0);
    signalAtReceiver.resize(plan_.signals.size());
    for (size_t g = 0; g < plan_.signals.size(); ++g)
      signalAtReceiver[g] = into[plan_.signals[g].receiver]++;
    signalsInto = static_cast<uint32_t>(into[options.rank]);
  }
  const uint64_t bytes = fifoBytes + uint64_t(signalsInto) * PollStride;
  exported.signalsOffset = fifoBytes;
  exported.signals = signalsInto;
  exported.pid = static_cast<int32_t>(getpid());
  exported.rank = options.rank;
  exported.device = deviceInfo.device;
  exported.tbs = static_cast<uint32_t>(launchTbs);
  std::memcpy(exported.deviceUuid, deviceInfo.uuid.data(), sizeof exported.deviceUuid);
  exported.stride = connection.stride;
  if (bytes) {
    if (llvm::Error err = received.reserve(bytes))
      return err;
    COLL_CUDA_TRY(cudaMemsetAsync(received.as<void>(), 0, bytes, stream));
    cudaIpcMemHandle_t handle;
    COLL_CUDA_TRY(cudaIpcGetMemHandle(&handle, received.as<void>()));
    static_assert(sizeof handle == sizeof exported.ipcHandle, "CUDA's IPC handle is 64 bytes");
    std::memcpy(exported.ipcHandle, &handle, sizeof handle);
    exported.address = reinterpret_cast<uintptr_t>(received.as<void>());
    exported.bytes = bytes;
  }
  for (size_t c = 0; c < plan_.connections.size(); ++c)
    if (plan_.connections[c].receiver == options.rank)
      connPointers[c] = received.as<unsigned char>() + indexAtReceiver[c] * connection.stride;
  for (size_t g = 0; g < signalPointers.size(); ++g)
    if (plan_.signals[g].receiver == options.rank)
      signalPointers[g] = reinterpret_cast<uint64_t *>(received.as<unsigned char>() + fifoBytes +
                                                       signalAtReceiver[g] * PollStride);
  return llvm::Error::success();
}

llvm::Error CudaExecutor::uploadConnections() {
  if (llvm::Error err = upload(scopeTable, connScopes.data(), connScopes.size(), stream))
    return err;
  return upload(connTable, connPointers.data(), connPointers.size(), stream);
}

llvm::Error CudaExecutor::resetState() {
  COLL_CUDA_TRY(cudaMemsetAsync(state.as<void>(), 0, stateLayout.bytes, stream));
  // One rank: its receiving FIFOs too. The senders' ends (in other
  // executors) are mid-transfer as well; a job does not go on after a stop.
  if (exported.bytes)
    COLL_CUDA_TRY(cudaMemsetAsync(received.as<void>(), 0, exported.bytes, stream));
  COLL_CUDA_TRY(cudaStreamSynchronize(stream));
  if (own.base)
    std::memset(own.base + ownHeaderBytes, 0, own.bytes - ownHeaderBytes);
  std::memset(report, 0, sizeof(WatchdogReport));
  return llvm::Error::success();
}

} // namespace coll::interp::cuda
