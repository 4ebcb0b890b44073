//===- Connections.cpp - Where a CUDA executor's FIFOs and flags lie ------===//
//
// For an executor of one rank: where each connection's FIFO and each
// signal flag lies, and how the other end reaches it: in the receiver's
// GPU memory (the same GPU, peer access, or CUDA IPC from another
// process), in pinned host memory shared between processes (GPUs without
// peer access, COLL_P2P_DISABLE=1), or in a staging FIFO that the network
// proxy forwards to another host. Then each connection's scope (.gpu or
// .sys) follows from where its ends run (docs/CUDA.md, "Scopes"). Direct
// steps: the peers' buffers (setPeerBuffers) or windows (setPeerWindows).
//
//===----------------------------------------------------------------------===//

#include "Executor.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace coll::interp::cuda {

/// COLL_P2P_DISABLE=1 (as NCCL_P2P_DISABLE): every FIFO between two ranks
/// in pinned host memory, the GPUs' peer access or not; a way to run the
/// host-memory path on one GPU.
static llvm::Expected<bool> p2pDisabled() {
  const char *v = std::getenv("COLL_P2P_DISABLE");
  if (!v || !*v || std::strcmp(v, "0") == 0)
    return false;
  if (std::strcmp(v, "1") == 0)
    return true;
  return fail(llvm::formatv("COLL_P2P_DISABLE={0}: 1 (FIFOs in host memory) or 0", v));
}

/// The table at the head of a rank's host-memory FIFOs: per connection it
/// receives on (in the order of indexAtReceiver), 0 where the FIFO is in its
/// GPU's memory, k + 1 where it is the k-th FIFO after the table.
static uint64_t hostHeaderBytes(uint64_t receivedConnections) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return (receivedConnections * sizeof(uint32_t) + page - 1) / page * page;
}

void CudaExecutor::releaseArea(HostArea &a) {
  if (a.registered)
    cudaHostUnregister(a.base);
  if (a.mapped)
    munmap(a.base, a.bytes);
  if (a.fd >= 0)
    ::close(a.fd);
  a = HostArea{};
}

llvm::Error CudaExecutor::placeConnections(const std::vector<ConnectionExport> &all) {
  DeviceScope scoped = scope();
  if (!oneRank())
    return fail("CudaExecutor::placeConnections: the executor runs every rank itself");
  if (all.size() != static_cast<size_t>(plan_.nranks))
    return fail(llvm::formatv("CudaExecutor::placeConnections: {0} entries for {1} ranks",
                              all.size(), plan_.nranks));
  if (own.base || exported.hostFd >= 0)
    return fail("CudaExecutor::placeConnections: the FIFOs are placed already");
  auto disabled = p2pDisabled();
  if (!disabled)
    return disabled.takeError();
  COLL_CUDA_TRY(cudaSetDevice(deviceInfo.device));
  int visible = 0;
  COLL_CUDA_TRY(cudaGetDeviceCount(&visible));
  // Whether the sender's GPU reaches this one's memory: the same GPU, or
  // peer access where this process sees both GPUs. A GPU this process does
  // not see is left to CUDA IPC, which maps it when the two can (and says
  // so when they cannot, in importConnections).
  auto reaches = [&](const ConnectionExport &sender) -> llvm::Expected<bool> {
    if (std::memcmp(sender.deviceUuid, deviceInfo.uuid.data(), sizeof sender.deviceUuid) == 0)
      return true;
    int ordinal = -1;
    if (sender.pid == static_cast<int32_t>(getpid())) {
      ordinal = sender.device;
    } else {
      for (int d = 0; d < visible && ordinal < 0; ++d) {
        cudaDeviceProp props{};
        COLL_CUDA_TRY(cudaGetDeviceProperties(&props, d));
        if (std::memcmp(props.uuid.bytes, sender.deviceUuid, sizeof sender.deviceUuid) == 0)
          ordinal = d;
      }
    }
    if (ordinal < 0)
      return true;
    int can = 0;
    COLL_CUDA_TRY(cudaDeviceCanAccessPeer(&can, ordinal, deviceInfo.device));
    return can != 0;
  };
  uint64_t receivedConnections = 0;
  std::vector<uint32_t> table;
  uint32_t inHost = 0;
  for (size_t c = 0; c < plan_.connections.size(); ++c) {
    const PlanConnection &info = plan_.connections[c];
    if (info.receiver != options.rank)
      continue;
    ++receivedConnections;
    table.resize(receivedConnections, 0);
    if (info.sender == options.rank)
      continue;
    // From another host, through this process's network proxy.
    bool host = *disabled || all[info.sender].remote;
    if (!host) {
      auto reached = reaches(all[info.sender]);
      if (!reached)
        return reached.takeError();
      host = !*reached;
    }
    if (host) {
      table[indexAtReceiver[c]] = ++inHost;
      viaHost[c] = 1;
    }
  }
  remotePeer.assign(plan_.nranks, 0);
  for (int32_t r = 0; r < plan_.nranks; ++r)
    remotePeer[r] = all[r].remote != 0;
  // Direct steps load and store the peers' memory and signal into it: the
  // peers must be on this GPU or on one with peer access to it.
  for (int32_t peer : directPeers) {
    if (peer == options.rank)
      continue;
    const char *why = nullptr;
    if (all[peer].remote) {
      why = "it runs on another host";
    } else if (*disabled) {
      why = "COLL_P2P_DISABLE=1";
    } else {
      auto reached = reaches(all[peer]);
      if (!reached)
        return reached.takeError();
      if (!*reached)
        why = "their GPUs have no peer access";
    }
    if (why)
      return fail(llvm::formatv("{0}: rank {1}'s direct steps reach rank {2}, whose memory it "
                                "cannot load and store: {3} (direct steps need the peers on one "
                                "GPU or on GPUs with P2P)",
                                plan_.fileName, options.rank, peer, why));
  }
  // To another host: a staging FIFO of this rank's, which its network
  // proxy forwards, after the FIFOs it receives on.
  uint32_t staged = 0;
  std::vector<uint32_t> stagingSlot(plan_.connections.size(), 0);
  for (size_t c = 0; c < plan_.connections.size(); ++c) {
    const PlanConnection &info = plan_.connections[c];
    if (info.sender == options.rank && info.receiver != options.rank && all[info.receiver].remote) {
      stagingSlot[c] = ++staged;
      viaHost[c] = 1;
    }
  }
  if (!inHost && !staged)
    return llvm::Error::success();
  ownHeaderBytes = hostHeaderBytes(receivedConnections);
  own.bytes = ownHeaderBytes + static_cast<uint64_t>(inHost + staged) * connection.stride;
  own.fd = memfd_create("coll-host-fifos", MFD_CLOEXEC);
  if (own.fd < 0)
    return fail(llvm::formatv("{0}: rank {1}: memfd_create for its host-memory FIFOs: {2}",
                              plan_.fileName, options.rank, std::strerror(errno)));
  if (ftruncate(own.fd, static_cast<off_t>(own.bytes)) != 0) {
    const int e = errno;
    releaseArea(own);
    return fail(llvm::formatv("{0}: rank {1}: {2} bytes of host-memory FIFOs: {3}", plan_.fileName,
                              options.rank, ownHeaderBytes, std::strerror(e)));
  }
  void *p = mmap(nullptr, own.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, own.fd, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    releaseArea(own);
    return fail(llvm::formatv("{0}: rank {1}: mapping its host-memory FIFOs: {2}", plan_.fileName,
                              options.rank, std::strerror(e)));
  }
  own.base = static_cast<unsigned char *>(p);
  own.mapped = true;
  std::memcpy(own.base, table.data(), table.size() * sizeof(uint32_t));
  // Portable: the executors of other GPUs in this process use it as it is.
  if (cudaError_t err =
          cudaHostRegister(own.base, own.bytes, cudaHostRegisterPortable | cudaHostRegisterMapped);
      err != cudaSuccess) {
    releaseArea(own);
    return fail(llvm::formatv("{0}: rank {1}: pinning its host-memory FIFOs: {2} ({3})",
                              plan_.fileName, options.rank, cudaGetErrorName(err),
                              cudaGetErrorString(err)));
  }
  own.registered = true;
  void *onDevice = nullptr;
  COLL_CUDA_TRY(cudaHostGetDevicePointer(&onDevice, own.base, 0));
  for (size_t c = 0; c < plan_.connections.size(); ++c) {
    uint64_t at = 0;
    if (viaHost[c] && plan_.connections[c].receiver == options.rank)
      at = table[indexAtReceiver[c]] - 1;
    else if (stagingSlot[c])
      at = inHost + stagingSlot[c] - 1;
    else
      continue;
    connPointers[c] = static_cast<unsigned char *>(onDevice) + ownHeaderBytes + at * connection.stride;
    hostPointers[c] = own.base + ownHeaderBytes + at * connection.stride;
  }
  struct stat st {};
  if (fstat(own.fd, &st) != 0)
    return fail(llvm::formatv("{0}: rank {1}: fstat of its host-memory FIFOs: {2}", plan_.fileName,
                              options.rank, std::strerror(errno)));
  exported.hostFd = own.fd;
  exported.hostConnections = inHost;
  exported.hostBytes = ownHeaderBytes + static_cast<uint64_t>(inHost) * connection.stride;
  exported.hostAddress = reinterpret_cast<uintptr_t>(own.base);
  exported.hostInode = static_cast<uint64_t>(st.st_ino);
  exported.hostDevice = static_cast<uint64_t>(st.st_dev);
  return llvm::Error::success();
}

llvm::Error CudaExecutor::setPeerBuffers(llvm::ArrayRef<PeerBuffers> all) {
  if (!oneRank())
    return fail("CudaExecutor::setPeerBuffers: the executor runs every rank itself, with the "
                "buffers of its calls");
  if (all.size() != static_cast<size_t>(plan_.nranks))
    return fail(llvm::formatv("CudaExecutor::setPeerBuffers: {0} entries for {1} ranks",
                              all.size(), plan_.nranks));
  peerBuffers.assign(all.begin(), all.end());
  peerWindows.clear();
  return llvm::Error::success();
}

llvm::Error CudaExecutor::setPeerWindows(llvm::ArrayRef<PeerWindows> all) {
  DeviceScope scoped = scope();
  if (!oneRank())
    return fail("CudaExecutor::setPeerWindows: the executor runs every rank itself, with the "
                "buffers of its calls");
  if (all.size() != static_cast<size_t>(plan_.nranks))
    return fail(llvm::formatv("CudaExecutor::setPeerWindows: {0} entries for {1} ranks",
                              all.size(), plan_.nranks));
  const size_t slots = all[options.rank].windows.size();
  if (slots == 0)
    return fail("CudaExecutor::setPeerWindows: no windows");
  for (size_t r = 0; r < all.size(); ++r) {
    if (!all[r].descriptor && all[r].windows.empty())
      continue; // a rank this one never reaches (another host's)
    if (all[r].windows.size() != slots)
      return fail(llvm::formatv("CudaExecutor::setPeerWindows: rank {0} has {1} windows and "
                                "rank {2} {3}; every rank registers the same windows",
                                r, all[r].windows.size(), options.rank, slots));
    if (!all[r].descriptor || reinterpret_cast<uintptr_t>(all[r].descriptor) % 8 != 0)
      return fail(llvm::formatv("CudaExecutor::setPeerWindows: rank {0}'s descriptor is {1}",
                                r, all[r].descriptor ? "not 8-byte aligned" : "null"));
    for (size_t w = 0; w < slots; ++w)
      if (all[r].windows[w].bytes >= (uint64_t(1) << WindowOffsetBits))
        return fail(llvm::formatv("CudaExecutor::setPeerWindows: rank {0}'s window {1} of {2} "
                                  "bytes is larger than descriptors address (2^{3})",
                                  r, w, all[r].windows[w].bytes, WindowOffsetBits));
  }
  // Allocated here (stream-ordered, as every table), not at the call.
  COLL_CUDA_TRY(cudaSetDevice(deviceInfo.device));
  if (llvm::Error err = windowDescriptorTable.reserve(all.size() * sizeof(WindowDescriptor *)))
    return err;
  if (llvm::Error err = windowBaseTable.reserve(all.size() * slots * sizeof(unsigned char *)))
    return err;
  peerWindows.assign(all.begin(), all.end());
  windowsInHost = std::any_of(all.begin(), all.end(),
                              [](const PeerWindows &w) { return w.hostMemory; });
  peerBuffers.clear();
  windowTablesUploaded = false;
  return llvm::Error::success();
}

std::vector<ProxiedConnection> CudaExecutor::proxiedConnections() const {
  std::vector<ProxiedConnection> out;
  for (size_t c = 0; c < plan_.connections.size(); ++c) {
    const PlanConnection &info = plan_.connections[c];
    const int32_t other = info.sender == options.rank ? info.receiver : info.sender;
    if (!hostPointers[c] || other == options.rank || !remotePeer[other])
      continue;
    unsigned char *base = hostPointers[c];
    ProxiedConnection p;
    p.head = reinterpret_cast<uintptr_t>(base + ConnectionLayout::HeadOffset);
    p.tail = reinterpret_cast<uintptr_t>(base + ConnectionLayout::TailOffset);
    p.sizes = reinterpret_cast<uintptr_t>(base + ConnectionLayout::SizesOffset);
    p.fifo = reinterpret_cast<uintptr_t>(base + ConnectionLayout::FifoOffset);
    p.slotStride = connection.slotStride;
    p.connection = static_cast<int32_t>(c);
    p.sender = info.sender;
    p.receiver = info.receiver;
    p.channel = info.channel;
    p.outbound = info.sender == options.rank;
    p.protocol = static_cast<uint32_t>(plan_.protocol);
    out.push_back(p);
  }
  return out;
}

llvm::Error CudaExecutor::importConnections(const std::vector<ConnectionExport> &all) {
  DeviceScope scoped = scope();
  if (!oneRank())
    return fail("CudaExecutor::importConnections: the executor runs every rank itself");
  if (all.size() != static_cast<size_t>(plan_.nranks))
    return fail(llvm::formatv("CudaExecutor::importConnections: {0} entries for {1} ranks",
                              all.size(), plan_.nranks));
  COLL_CUDA_TRY(cudaSetDevice(deviceInfo.device));
  // Ranks on this same GPU run their blocks beside ours.
  coResidentTbs = 0;
  for (const ConnectionExport &peer : all)
    if (peer.rank != options.rank &&
        std::memcmp(peer.deviceUuid, deviceInfo.uuid.data(), sizeof peer.deviceUuid) == 0)
      coResidentTbs += peer.tbs;
  residencies.clear();
  std::vector<uint64_t> receivedBy(plan_.connectionsInto.begin(), plan_.connectionsInto.end());
  std::vector<unsigned char *> base(plan_.nranks, nullptr), hostBase(plan_.nranks, nullptr),
      hostOnDevice(plan_.nranks, nullptr);
  // Peer access to the GPU of rank r, an executor of this process on
  // another device, for reaching its `what`.
  auto enablePeer = [&](int32_t r, const char *what) -> llvm::Error {
    const ConnectionExport &peer = all[r];
    if (peer.device == deviceInfo.device)
      return llvm::Error::success();
    cudaError_t err = cudaDeviceEnablePeerAccess(peer.device, 0);
    if (err == cudaErrorPeerAccessAlreadyEnabled)
      (void)cudaGetLastError();
    else if (err != cudaSuccess)
      return fail(llvm::formatv("{0}: rank {1} on device {2} cannot reach rank {3}'s {4} on "
                                "device {5}: {6} ({7})",
                                plan_.fileName, options.rank, deviceInfo.device, r, what, peer.device,
                                cudaGetErrorName(err), cudaGetErrorString(err)));
    return llvm::Error::success();
  };
  // The receiver's memory of FIFOs and signal flags, mapped once.
  auto mapReceiver = [&](int32_t r) -> llvm::Error {
    if (base[r])
      return llvm::Error::success();
    const ConnectionExport &peer = all[r];
    if (peer.pid == static_cast<int32_t>(getpid())) {
      // Another executor of this process: its pointer is valid here, on
      // another GPU once peer access is on.
      if (llvm::Error err = enablePeer(r, "FIFOs"))
        return err;
      base[r] = reinterpret_cast<unsigned char *>(peer.address);
    } else {
      cudaIpcMemHandle_t handle;
      std::memcpy(&handle, peer.ipcHandle, sizeof handle);
      void *mapped = nullptr;
      cudaError_t err = cudaIpcOpenMemHandle(&mapped, handle, cudaIpcMemLazyEnablePeerAccess);
      if (err != cudaSuccess)
        return fail(llvm::formatv("{0}: cannot map rank {1}'s FIFOs (process {2}): {3} ({4})",
                                  plan_.fileName, r, peer.pid,
                                  cudaGetErrorName(err), cudaGetErrorString(err)));
      opened.push_back(mapped);
      base[r] = static_cast<unsigned char *>(mapped);
    }
    return llvm::Error::success();
  };
  for (size_t c = 0; c < plan_.connections.size(); ++c) {
    const PlanConnection &info = plan_.connections[c];
    if (info.sender != options.rank || info.receiver == options.rank)
      continue;
    const ConnectionExport &peer = all[info.receiver];
    if (peer.remote) {
      // On another host: this rank's staging FIFO (placeConnections).
      if (!hostPointers[c])
        return fail(llvm::formatv("{0}: rank {1} sends to rank {2} on another host, and has no "
                                  "staging FIFO for it (placeConnections first)",
                                  plan_.fileName, options.rank, info.receiver));
      continue;
    }
    // The receiver's host-memory FIFOs, where it placed some.
    if (peer.hostFd >= 0 && !hostBase[info.receiver]) {
      const uint64_t header = hostHeaderBytes(receivedBy[info.receiver]);
      if (peer.rank != info.receiver || peer.stride != connection.stride ||
          peer.hostBytes != header + uint64_t(peer.hostConnections) * connection.stride)
        return fail(llvm::formatv(
            "{0}: rank {1} exported {2} bytes of host-memory FIFOs for {3} connections ({4} per "
            "connection) as rank {5}; rank {6} expects {7} per connection after a {8}-byte "
            "table: the ranks disagree on the plan or the slot size",
            plan_.fileName, info.receiver, peer.hostBytes, peer.hostConnections, peer.stride,
            peer.rank, options.rank, connection.stride, header));
      HostArea area;
      if (peer.pid == static_cast<int32_t>(getpid())) {
        // Another executor of this process: registered portable there.
        area.base = reinterpret_cast<unsigned char *>(peer.hostAddress);
        area.bytes = peer.hostBytes;
      } else {
        const std::string path =
            "/proc/" + std::to_string(peer.pid) + "/fd/" + std::to_string(peer.hostFd);
        const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
        struct stat st {};
        const bool same = fd >= 0 && fstat(fd, &st) == 0 &&
                          static_cast<uint64_t>(st.st_ino) == peer.hostInode &&
                          static_cast<uint64_t>(st.st_dev) == peer.hostDevice &&
                          static_cast<uint64_t>(st.st_size) >= peer.hostBytes;
        const int e = fd < 0 ? errno : 0;
        void *p = same ? mmap(nullptr, peer.hostBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                       : MAP_FAILED;
        if (fd >= 0)
          ::close(fd);
        if (p == MAP_FAILED)
          return fail(llvm::formatv(
              "{0}: cannot map rank {1}'s host-memory FIFOs (process {2}, {3}): {4}",
              plan_.fileName, info.receiver, peer.pid, path,
              e ? std::strerror(e) : same ? "mmap failed" : "not the memory it exported"));
        area.base = static_cast<unsigned char *>(p);
        area.bytes = peer.hostBytes;
        area.mapped = true;
        if (cudaError_t err = cudaHostRegister(area.base, area.bytes,
                                               cudaHostRegisterPortable | cudaHostRegisterMapped);
            err != cudaSuccess) {
          releaseArea(area);
          return fail(llvm::formatv("{0}: pinning rank {1}'s host-memory FIFOs: {2} ({3})",
                                    plan_.fileName, info.receiver, cudaGetErrorName(err),
                                    cudaGetErrorString(err)));
        }
        area.registered = true;
        mappedAreas.push_back(area);
      }
      void *onDevice = nullptr;
      COLL_CUDA_TRY(cudaHostGetDevicePointer(&onDevice, area.base, 0));
      hostBase[info.receiver] = area.base;
      hostOnDevice[info.receiver] = static_cast<unsigned char *>(onDevice);
    }
    if (hostBase[info.receiver]) {
      uint32_t slot = 0;
      std::memcpy(&slot, hostBase[info.receiver] + indexAtReceiver[c] * sizeof(uint32_t),
                  sizeof slot);
      if (slot > all[info.receiver].hostConnections)
        return fail(llvm::formatv("{0}: rank {1}'s table of host-memory FIFOs names FIFO {2} of "
                                  "{3}",
                                  plan_.fileName, info.receiver, slot,
                                  all[info.receiver].hostConnections));
      if (slot) {
        viaHost[c] = 1;
        connPointers[c] = hostOnDevice[info.receiver] +
                          hostHeaderBytes(receivedBy[info.receiver]) +
                          (slot - 1) * connection.stride;
        continue;
      }
    }
    const uint64_t need = (indexAtReceiver[c] + 1) * connection.stride;
    if (peer.rank != info.receiver || peer.stride != connection.stride || peer.bytes < need)
      return fail(llvm::formatv(
          "{0}: rank {1} exported {2} bytes of FIFOs ({3} per connection) as rank {4}; rank {5} "
          "needs {6} ({7} per connection): the ranks disagree on the plan or the slot size",
          plan_.fileName, info.receiver, peer.bytes, peer.stride, peer.rank, options.rank, need,
          connection.stride));
    if (llvm::Error err = mapReceiver(info.receiver))
      return err;
    connPointers[c] = base[info.receiver] + indexAtReceiver[c] * connection.stride;
  }
  // Direct steps: the flags of the signals this rank sends, in their
  // receivers' memory; and peer access to the GPUs of peers in this process
  // whose buffers the steps load or store.
  for (size_t g = 0; g < signalPointers.size(); ++g) {
    const PlanSignal &pair = plan_.signals[g];
    if (pair.sender != options.rank || pair.receiver == options.rank)
      continue;
    const ConnectionExport &peer = all[pair.receiver];
    if (peer.rank != pair.receiver || signalAtReceiver[g] >= peer.signals ||
        peer.signalsOffset + peer.signals * PollStride > peer.bytes)
      return fail(llvm::formatv(
          "{0}: rank {1} exported {2} signal flags at {3} of {4} bytes as rank {5}; rank {6} "
          "signals its flag {7}: the ranks disagree on the plan",
          plan_.fileName, pair.receiver, peer.signals, peer.signalsOffset, peer.bytes, peer.rank,
          options.rank, signalAtReceiver[g]));
    if (llvm::Error err = mapReceiver(pair.receiver))
      return err;
    signalPointers[g] = reinterpret_cast<uint64_t *>(base[pair.receiver] + peer.signalsOffset +
                                                     signalAtReceiver[g] * PollStride);
  }
  for (int32_t peer : directPeers)
    if (peer != options.rank && all[peer].pid == static_cast<int32_t>(getpid()))
      if (llvm::Error err = enablePeer(peer, "buffers"))
        return err;
  if (direct)
    if (llvm::Error err = uploadSignals())
      return err;
  // Blocks that wait for each other must all be resident (chooseResidency
  // picks their size per call); more than the GPU can ever hold, whatever
  // their size, is refused here, where every rank learns of it at once.
  int blocksPerSm = 0;
  COLL_CUDA_TRY(
      cudaDeviceGetAttribute(&blocksPerSm, cudaDevAttrMaxBlocksPerMultiprocessor, deviceInfo.device));
  const uint64_t most = static_cast<uint64_t>(blocksPerSm) * deviceInfo.smCount;
  if (static_cast<uint64_t>(launchTbs) + coResidentTbs > most)
    return fail(llvm::formatv(
        "{0}: rank {1}'s {2} thread blocks and the {3} of the other ranks on this GPU must all "
        "be resident at once, but {4} holds at most {5} ({6} per SM x {7} SMs) whatever their "
        "size; use an algorithm with fewer tbs",
        plan_.fileName, options.rank, launchTbs, coResidentTbs, deviceInfo.name, most, blocksPerSm,
        deviceInfo.smCount));
  if (proto == Proto::LL128)
    for (size_t c = 0; c < plan_.connections.size(); ++c) {
      const PlanConnection &info = plan_.connections[c];
      if (viaHost[c] && (info.sender == options.rank || info.receiver == options.rank))
        return fail(llvm::formatv(
            "{0}: the FIFO from rank {1} to rank {2} is in host memory (their GPUs have no "
            "peer access, or COLL_P2P_DISABLE=1); LL128 needs its 128-byte lines to arrive "
            "whole, which only NVLink promises (NCCL uses LL128 over NVLink only): use an LL "
            "or Simple program between GPUs without P2P",
            plan_.fileName, info.sender, info.receiver));
    }
  // Scopes by construction (docs/CUDA.md, "Scopes"): a connection whose
  // other end runs on another GPU, or whose FIFO is in host memory,
  // synchronises at .sys, at both ends; one within this GPU at .gpu.
  auto sameGpu = [&](int32_t rank) {
    return std::memcmp(all[rank].deviceUuid, deviceInfo.uuid.data(), sizeof all[rank].deviceUuid) == 0;
  };
  crossGpu = forceSys;
  for (size_t c = 0; c < plan_.connections.size(); ++c) {
    const PlanConnection &info = plan_.connections[c];
    if (info.sender == options.rank || info.receiver == options.rank) {
      connScopes[c] =
          !forceSys && !viaHost[c] &&
                  sameGpu(info.sender == options.rank ? info.receiver : info.sender)
              ? Scope::Gpu
              : Scope::Sys;
      crossGpu = crossGpu || connScopes[c] == Scope::Sys;
    }
  }
  // Direct steps with a peer on another GPU: their signals at .sys.
  for (int32_t peer : directPeers)
    crossGpu = crossGpu || !sameGpu(peer);
  return uploadConnections();
}

} // namespace coll::interp::cuda
