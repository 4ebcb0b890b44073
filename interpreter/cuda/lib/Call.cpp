//===- Call.cpp - A call on a CUDA executor -------------------------------===//
//
// prepare() does the host's work of a call: resolve the count, check the
// buffers, upload the tables that changed, fill the kernel's parameters and
// choose the kernel build and block size at which every block can be
// resident at once. launch() enqueues the kernels only (so that a CUDA
// graph can capture them); finish() and poll() turn a watchdog stop into an
// error; enqueue() and join() order a call after and before the caller's
// stream; run() and timeLaunches() time it.
//
//===----------------------------------------------------------------------===//

#include "Executor.h"
#if COLL_CUDA_EMULATION
#include "emu/Simt.h"
#endif

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

namespace coll::interp::cuda {

/// a step of 1 KiB cost 10-15 % less at 128 threads than at 512, and LL's
/// hops more at 64 than at 128 (docs/performance/gpu.md, "scopes and
/// block sizes").
static uint32_t threadsForStep(Proto proto, uint64_t bytes) {
  const uint64_t want = proto == Proto::Simple ? (bytes + 15) / 16
                        : proto == Proto::LL   ? llLines(bytes)
                                               : LL128LanesPerLine * ll128Lines(bytes);
  uint32_t threads = 128;
  while (threads < MaxThreadsPerBlock && threads < want)
    threads *= 2;
  return threads;
}

llvm::Expected<CudaExecutor::Residency>
CudaExecutor::chooseResidency(const void *k, uint32_t sharedBytes, uint32_t cap) {
  int optin = 0;
  COLL_CUDA_TRY(
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, deviceInfo.device));
  // The opt-in limit covers static and dynamic shared memory together.
  cudaFuncAttributes attributes{};
  COLL_CUDA_TRY(cudaFuncGetAttributes(&attributes, k));
  const int64_t dynamicMax =
      static_cast<int64_t>(optin) - static_cast<int64_t>(attributes.sharedSizeBytes);
  if (static_cast<int64_t>(sharedBytes) > dynamicMax)
    return fail(llvm::formatv("{0}: a tb of {1} steps needs {2} bytes of shared memory; "
                              "{3} allows {4} per block beside the kernel's {5} static bytes",
                              plan_.fileName, params.maxSteps, sharedBytes, deviceInfo.name,
                              std::max<int64_t>(dynamicMax, 0), attributes.sharedSizeBytes));
  // The attribute belongs to the kernel, not to this executor: always the
  // device's maximum, so that no executor lowers it under another's launch.
  COLL_CUDA_TRY(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(dynamicMax)));
  const bool automatic = options.threadsPerBlock == 0;
  Residency r{k, automatic ? std::min(cap, MaxThreadsPerBlock) : options.threadsPerBlock, 0, cap};
  for (;; r.threads /= 2) {
    COLL_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &r.blocksPerSm, k, static_cast<int>(r.threads), sharedBytes));
    const uint64_t resident = static_cast<uint64_t>(r.blocksPerSm) * deviceInfo.smCount;
    if (resident >= static_cast<uint64_t>(launchTbs) + coResidentTbs)
      return r;
    if (automatic && r.threads > 32)
      continue;
    const std::string others =
        coResidentTbs
            ? llvm::formatv(" (with the {0} of the other ranks on this GPU)", coResidentTbs).str()
            : std::string();
    return fail(llvm::formatv(
        "{0}: the launch's {1} thread blocks{9} must all be resident at once, but only {2} fit "
        "on {3} ({4} per SM x {5} SMs with {6} threads and {7} bytes of shared memory per "
        "block); {8}",
        plan_.fileName, launchTbs + coResidentTbs, resident, deviceInfo.name, r.blocksPerSm,
        deviceInfo.smCount, r.threads, sharedBytes,
        automatic ? "use an algorithm with fewer tbs"
                  : "use fewer threads per block or an algorithm with fewer tbs",
        others));
  }
}

llvm::Expected<CallResult> CudaExecutor::prepare(const CallArgs &args) {
  DeviceScope scoped = scope();
  prepared = false;
  COLL_CUDA_TRY(cudaSetDevice(deviceInfo.device));
  // The tables below are in use until this executor's earlier launches end:
  // each upload waits for the stream first (launches on other streams must
  // have ended; see the header).
  if (!layout || layoutCount != args.count) {
    auto resolved = resolveCall(plan_, args.count);
    if (!resolved)
      return resolved.takeError();
    layout = std::move(*resolved);
    layoutCount = args.count;
    if (llvm::Error err = upload(slices, layout->slices.data(), layout->slices.size(), stream))
      return err;
  }
  auto inplace = checkCallBuffers(plan_, *layout, args, options.rank);
  if (!inplace)
    return inplace.takeError();
  if (oneRank())
    for (size_t c = 0; c < connPointers.size(); ++c)
      if (!connPointers[c] && plan_.connections[c].sender == options.rank)
        return fail(llvm::formatv("{0}: rank {1} sends to rank {2}, whose FIFOs are not mapped "
                                  "(importConnections)",
                                  plan_.fileName, options.rank, plan_.connections[c].receiver));
  if (oneRank() && direct) {
    for (size_t g = 0; g < signalPointers.size(); ++g) {
      const PlanSignal &pair = plan_.signals[g];
      if (!signalPointers[g] && pair.sender == options.rank)
        return fail(llvm::formatv("{0}: rank {1} signals rank {2}, whose flags are not mapped "
                                  "(importConnections)",
                                  plan_.fileName, options.rank, pair.receiver));
    }
    for (const auto &[peer, buffer] : peerBuffersUsed) {
      if (peer == options.rank || !peerWindows.empty())
        continue; // on windows: the peer's descriptor says where (setPeerWindows)
      const PeerBuffers *given =
          static_cast<size_t>(peer) < peerBuffers.size() ? &peerBuffers[peer] : nullptr;
      const bool known = given && (buffer == 0   ? given->input
                                   : buffer == 1 ? given->output
                                                 : given->scratch);
      if (!known)
        return fail(llvm::formatv("{0}: rank {1}'s direct steps reach rank {2}'s {3} buffer, "
                                  "which it was not given (setPeerBuffers)",
                                  plan_.fileName, options.rank, peer,
                                  buffer == 0 ? "input" : buffer == 1 ? "output" : "scratch"));
    }
  }

  const uint64_t es = dataTypeSize(args.type);
  const uint64_t sliceElems = slotBytes(options, proto) / es;
  const uint32_t span = static_cast<uint32_t>(std::max(plan_.maxIrSteps, 1));
  CallResult result;
  result.inplace = *inplace;
  result.iterations = args.count ? iterationCount(*layout, sliceElems) : 0;
  if (result.iterations > maxFlagIterations(span))
    return fail(llvm::formatv("{0}: the call takes {1} pipeline iterations of {2} steps, more "
                              "than the dependency flags count (2^32 - 1 steps); use larger "
                              "FIFO slots",
                              plan_.fileName, result.iterations, span));

  const bool onWindows = oneRank() && direct && !peerWindows.empty();
  WindowDescriptor own{};
  if (llvm::Error err = uploadRankTable(args, onWindows, own))
    return err;

  int32_t maxSteps = 1, maxSlices = 0;
  for (int32_t t = firstTb; t < firstTb + launchTbs; ++t) {
    maxSteps = std::max(maxSteps, plan_.tbs[t].nSteps);
    maxSlices = std::max(maxSlices, plan_.tbs[t].nSlices);
  }
  // Each block's slices beside its steps in shared memory, where they fit
  // in a budget that leaves the occupancy alone; else read from the call's.
  const uint64_t sliceOffset = sharedSliceOffset(static_cast<uint32_t>(maxSteps));
  if (sliceOffset + uint64_t(maxSlices) * sizeof(CallSlice) > MaxSharedSliceBytes)
    maxSlices = 0;
  const uint8_t type = static_cast<uint8_t>(args.type);
  params = KernelParams{};
  params.tbs = tbs.as<PlanTb>();
  params.steps = steps.as<PlanStep>();
  params.deps = deps.as<PlanDep>();
  params.slices = slices.as<CallSlice>();
  params.ranks = ranks.as<RankPointers>();
  params.state = state.as<unsigned char>();
  params.connections = connTable.as<unsigned char *const>();
  params.connectionScopes = scopeTable.as<const Scope>();
  params.firstTb = firstTb;
  params.report = deviceReport;
  params.flagsOffset = stateLayout.flagsOffset;
  params.stepPeers = stepPeers.as<PlanStepPeer>();
  params.memberPeers = memberPeers.as<int32_t>();
  params.memberSignals = memberSignals.as<PlanMemberSignal>();
  params.signals = signals.as<PlanSignal>();
  params.signalFlags = signalTable.as<uint64_t *const>();
  if (onWindows) {
    params.windowDescriptors = windowDescriptorTable.as<WindowDescriptor *const>();
    params.windowBases = windowBaseTable.as<unsigned char *const>();
    params.windowOwn = own;
    params.windowSlots = static_cast<uint32_t>(peerWindows[options.rank].windows.size());
    params.windowRank = options.rank;
  }
  params.connection = connection;
  params.iterations = result.iterations;
  params.sliceElems = sliceElems;
  params.watchdogNs = uint64_t(watchdogMs) * 1000000;
  params.hostStop = deviceHostStop;
  params.span = span;
  params.maxSteps = static_cast<uint32_t>(maxSteps);
  params.maxSlices = static_cast<uint32_t>(maxSlices);
  params.op = static_cast<DeviceOp>(args.op);

  shape.blocks = static_cast<uint32_t>(launchTbs);
  shape.sharedBytes = static_cast<uint32_t>(
      maxSlices ? sliceOffset + uint64_t(maxSlices) * sizeof(CallSlice) : maxSteps * sizeof(PlanStep));
  shape.smCount = deviceInfo.smCount;
  // Automatic block sizes: no more threads than a step of this call moves
  // in one pass.
  const uint32_t cap = threadsForStep(
      proto, result.iterations > 1 ? sliceElems * es : layout->maxChunkElems * es);
  if (llvm::Error err = chooseKernel(type, onWindows, cap))
    return err;

  averageKernel = nullptr;
  if (args.op == ReduceOp::Avg && ir::collectiveInfo(plan_.collective).reduces) {
    averageKernel = averageKernelFor(type);
    const bool rootOnly = plan_.collective == ir::Collective::Reduce;
    averageFirstRank = rootOnly ? plan_.root : oneRank() ? options.rank : 0;
    averageRanks = rootOnly || oneRank() ? 1 : plan_.nranks;
    averageElems = layout->outputElems;
    if (rootOnly && oneRank() && options.rank != plan_.root)
      averageKernel = nullptr; // only the root's output holds the result
  }
  if (llvm::Error err = prepareCopyEngines(args, own, result))
    return err;
#if COLL_CUDA_EMULATION
  if (simt::countingTraffic.load(std::memory_order_relaxed))
    describeTraffic(args);
#endif
  prepared = true;
  return result;
}

#if COLL_CUDA_EMULATION
void CudaExecutor::describeTraffic(const CallArgs &args) const {
  std::vector<simt::TrafficRange> ranges;
  auto add = [&](const void *p, uint64_t bytes, simt::Region region, int32_t rank = -1) {
    if (!p || !bytes)
      return;
    const auto begin = reinterpret_cast<uintptr_t>(p);
    ranges.push_back({begin, begin + bytes, region, rank});
  };
  // Later ranges override earlier ones where they overlap: the allocations
  // of flags and counters first, then the FIFO slots inside them, then the
  // buffers.
  add(state.as<void>(), stateLayout.bytes, simt::Flag);
  add(received.as<void>(), exported.bytes, simt::Flag);
  add(own.base, own.bytes, simt::Flag);
  add(report, sizeof(WatchdogReport), simt::Flag);
  add(options.hostStop, sizeof(uint32_t), simt::Flag);
  for (unsigned char *c : connPointers) {
    add(c, ConnectionLayout::FifoOffset, simt::Flag);
    add(c ? c + ConnectionLayout::FifoOffset : nullptr,
        connection.stride - ConnectionLayout::FifoOffset, simt::FifoSlot);
  }
  for (uint64_t *flag : signalPointers)
    add(flag, PollStride, simt::Flag);
  const uint64_t es = dataTypeSize(args.type);
  for (int32_t r = 0; r < static_cast<int32_t>(rankTable.size()); ++r) {
    const RankPointers &at = rankTable[static_cast<size_t>(r)];
    add(at.input, layout->inputElems * es, simt::OwnBuffer, r);
    add(at.output, layout->outputElems * es, simt::OwnBuffer, r);
    add(at.scratch, layout->scratchElems[static_cast<size_t>(r)] * es, simt::OwnBuffer, r);
  }
  for (int32_t r = 0; r < static_cast<int32_t>(peerWindows.size()); ++r) {
    for (const auto &w : peerWindows[static_cast<size_t>(r)].windows)
      add(w.base, w.bytes, simt::OwnBuffer, r);
    add(peerWindows[static_cast<size_t>(r)].descriptor, sizeof(WindowDescriptor), simt::Flag);
  }
  simt::setTrafficRanges(this, std::move(ranges));
}
#endif

llvm::Error CudaExecutor::uploadRankTable(const CallArgs &args, bool onWindows,
                                          WindowDescriptor &own) {
  const uint64_t es = dataTypeSize(args.type);
  // Scratch: one allocation, each rank's part 256-byte aligned.
  std::vector<uint64_t> scratchAt(plan_.nranks);
  uint64_t scratchBytes = 0;
  for (int32_t r = 0; r < plan_.nranks; ++r) {
    scratchAt[r] = scratchBytes;
    if (!oneRank() || r == options.rank)
      scratchBytes += (layout->scratchElems[r] * es + 255) / 256 * 256;
  }
  if (llvm::Error err = scratch.reserve(scratchBytes))
    return err;
  std::vector<RankPointers> table(plan_.nranks);
  for (int32_t r = 0; r < plan_.nranks; ++r)
    if (!oneRank() || r == options.rank)
      table[r] = {args.input[r], args.output[r], scratch.as<unsigned char>() + scratchAt[r]};
    else if (direct && static_cast<size_t>(r) < peerBuffers.size())
      table[r] = {peerBuffers[r].input, peerBuffers[r].output, peerBuffers[r].scratch};
  // A scratch shared with the peers (setPeerBuffers, setPeerWindows), in
  // place of its own.
  if (oneRank() && direct && static_cast<size_t>(options.rank) < peerBuffers.size() &&
      peerBuffers[options.rank].scratch)
    table[options.rank].scratch = peerBuffers[options.rank].scratch;
  if (onWindows) {
    const PeerWindows &mine = peerWindows[options.rank];
    if (mine.scratch)
      table[options.rank].scratch = mine.scratch;
    // Where this rank's buffers lie in its windows; a buffer in none is
    // published as 0, and a peer that reaches it stops there, naming it.
    const uint64_t bytes[3] = {layout->inputElems * es, layout->outputElems * es,
                               layout->scratchElems[options.rank] * es};
    const RankPointers &at = table[options.rank];
    const void *buffers[3] = {at.input, at.output, at.scratch};
    for (int b = 0; b < 3; ++b) {
      const auto *p = static_cast<const unsigned char *>(buffers[b]);
      for (size_t w = 0; p && w < mine.windows.size(); ++w) {
        const auto *base = static_cast<const unsigned char *>(mine.windows[w].base);
        if (p >= base && p + bytes[b] <= base + mine.windows[w].bytes) {
          own.at[b] = windowPlace(static_cast<uint32_t>(w), static_cast<uint64_t>(p - base));
          break;
        }
      }
    }
    if (!windowTablesUploaded) {
      std::vector<WindowDescriptor *> descriptors(plan_.nranks);
      std::vector<unsigned char *> bases;
      for (int32_t r = 0; r < plan_.nranks; ++r) {
        descriptors[r] = static_cast<WindowDescriptor *>(peerWindows[r].descriptor);
        for (size_t w = 0; w < peerWindows[options.rank].windows.size(); ++w)
          bases.push_back(w < peerWindows[r].windows.size()
                              ? static_cast<unsigned char *>(peerWindows[r].windows[w].base)
                              : nullptr);
      }
      if (llvm::Error err =
              upload(windowDescriptorTable, descriptors.data(), descriptors.size(), stream))
        return err;
      if (llvm::Error err = upload(windowBaseTable, bases.data(), bases.size(), stream))
        return err;
      windowTablesUploaded = true;
    }
  }
  if (table.size() != rankTable.size() ||
      std::memcmp(table.data(), rankTable.data(), table.size() * sizeof(RankPointers)) != 0) {
    if (llvm::Error err = upload(ranks, table.data(), table.size(), stream))
      return err;
    rankTable = std::move(table);
  }
  return llvm::Error::success();
}

llvm::Error CudaExecutor::chooseKernel(uint8_t type, bool onWindows, uint32_t cap) {
  // A launch records a timeline when run() or enqueue() armed one (the
  // device state holds its buffers), in the same kernels.
  auto build = [&](KernelBuild b) {
    return proto == Proto::Simple ? kernelSimple(type, b)
           : proto == Proto::LL   ? kernelLL(type, b)
                                  : kernelLL128(type, b);
  };
  auto residencyOf = [&](const void *k) -> llvm::Expected<Residency> {
    auto known = std::find_if(residencies.begin(), residencies.end(),
                              [&](const Residency &r) { return r.kernel == k && r.cap == cap; });
    if (known != residencies.end())
      return *known;
    auto chosen = chooseResidency(k, shape.sharedBytes, cap);
    if (chosen)
      residencies.push_back(*chosen);
    return chosen;
  };
  // The wide build (128 registers) where its blocks get as many threads as
  // the narrow build's would; else the narrow one (device/Kernel.cuh). With
  // a connection to another GPU, the CrossGpu build.
  Residency chosen{};
  // Windows in host memory: their descriptors are stored and read at .sys.
  if (crossGpu || (onWindows && windowsInHost)) {
    auto cross = residencyOf(build(KernelBuild::CrossGpu));
    if (!cross)
      return cross.takeError();
    chosen = *cross;
  } else {
    auto wide = residencyOf(build(KernelBuild::Wide));
    auto narrow = residencyOf(build(KernelBuild::Narrow));
    if (!wide && !narrow) {
      llvm::consumeError(wide.takeError());
      return narrow.takeError();
    }
    const bool useWide = wide && (!narrow || wide->threads >= narrow->threads);
    chosen = useWide ? *wide : *narrow;
    if (!wide)
      llvm::consumeError(wide.takeError());
    if (!narrow)
      llvm::consumeError(narrow.takeError());
  }
  kernel = chosen.kernel;
  shape.threads = chosen.threads;
  shape.blocksPerSm = chosen.blocksPerSm;
  shape.wide = chosen.kernel == build(KernelBuild::Wide);
  return llvm::Error::success();
}

llvm::Error CudaExecutor::launchKernel(const KernelParams &p, cudaStream_t s) {
  void *args[] = {const_cast<KernelParams *>(&p)};
  // Cooperative: the driver refuses a grid whose blocks cannot all be
  // resident at once, which the persistent blocks need (they wait for each
  // other), instead of relying on the occupancy query alone.
  cudaLaunchAttribute cooperative{};
  cooperative.id = cudaLaunchAttributeCooperative;
  cooperative.val.cooperative = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(shape.blocks);
  config.blockDim = dim3(shape.threads);
  config.dynamicSmemBytes = shape.sharedBytes;
  config.stream = s;
  config.attrs = &cooperative;
  config.numAttrs = 1;
  COLL_CUDA_TRY(cudaLaunchKernelExC(&config, kernel, args));
  return llvm::Error::success();
}

llvm::Error CudaExecutor::launchOn(cudaStream_t s) {
  if (!prepared)
    return fail("CudaExecutor::launch: no call is prepared");
  COLL_CUDA_TRY(cudaSetDevice(deviceInfo.device));
  if (params.iterations == 0 || shape.blocks == 0)
    return llvm::Error::success();
  if (copyEngineCall)
    return launchCopyEngines(s);
  if (llvm::Error err = launchKernel(params, s))
    return err;
  if (averageKernel) {
    constexpr uint32_t Threads = 256;
    const uint64_t blocks = std::clamp<uint64_t>((averageElems + Threads - 1) / Threads, 1, 1024);
    const RankPointers *table = ranks.as<RankPointers>();
    int32_t nranks = plan_.nranks;
    void *avgArgs[] = {&table, &averageFirstRank, &nranks, &averageElems};
    COLL_CUDA_TRY(cudaLaunchKernel(
        averageKernel, dim3(static_cast<uint32_t>(blocks), static_cast<uint32_t>(averageRanks)),
        dim3(Threads), avgArgs, 0, s));
  }
  return llvm::Error::success();
}

llvm::Error CudaExecutor::finishOn(cudaStream_t s) {
  COLL_CUDA_TRY(cudaSetDevice(deviceInfo.device));
  COLL_CUDA_TRY(cudaStreamSynchronize(s));
  return takeWatchdogReport();
}

llvm::Error CudaExecutor::takeWatchdogReport() {
  // The reporting block fenced its writes at system scope before `valid`,
  // and the kernel has completed.
  if (!reinterpret_cast<volatile WatchdogReport *>(report)->valid)
    return llvm::Error::success();
  std::string text = describeWatchdogReport(plan_, *report, watchdogMs);
  // The FIFOs and flags are mid-transfer: start every counter afresh.
  if (llvm::Error err = resetState())
    return err;
  return fail(plan_.fileName + ": " + text);
}

llvm::Error CudaExecutor::launch(void *s) {
  DeviceScope scoped = scope();
  return launchOn(static_cast<cudaStream_t>(s));
}

llvm::Error CudaExecutor::finish(void *s) {
  DeviceScope scoped = scope();
  return finishOn(static_cast<cudaStream_t>(s));
}

llvm::Error CudaExecutor::enqueue(void *callerStream, llvm::ArrayRef<DeviceCopy> before,
                                  llvm::ArrayRef<DeviceCopy> afterwards) {
  DeviceScope scoped = scope();
  const auto caller = static_cast<cudaStream_t>(callerStream);
  if (!prepared)
    return fail("CudaExecutor::enqueue: no call is prepared");
  COLL_CUDA_TRY(cudaSetDevice(deviceInfo.device));
  enqueueArmed = traceEnqueues && params.iterations > 0 && launchTbs > 0;
  if (enqueueArmed)
    if (llvm::Error err = armTimeline())
      return err;
  COLL_CUDA_TRY(cudaEventRecord(callerReady, caller));
  COLL_CUDA_TRY(cudaStreamWaitEvent(stream, callerReady, 0));
  for (const DeviceCopy &c : before)
    if (c.bytes)
      COLL_CUDA_TRY(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDefault, stream));
  if (llvm::Error err = launchOn(stream))
    return err;
  for (const DeviceCopy &c : afterwards)
    if (c.bytes)
      COLL_CUDA_TRY(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDefault, stream));
  COLL_CUDA_TRY(cudaEventRecord(launched, stream));
  return llvm::Error::success();
}

llvm::Error CudaExecutor::join(void *caller) {
  DeviceScope scoped = scope();
  COLL_CUDA_TRY(cudaSetDevice(deviceInfo.device));
  COLL_CUDA_TRY(cudaStreamWaitEvent(static_cast<cudaStream_t>(caller), launched, 0));
  return llvm::Error::success();
}

llvm::Expected<bool> CudaExecutor::poll(bool wait) {
  DeviceScope scoped = scope();
  COLL_CUDA_TRY(cudaSetDevice(deviceInfo.device));
  if (wait) {
    COLL_CUDA_TRY(cudaStreamSynchronize(stream));
  } else {
    cudaError_t status = cudaStreamQuery(stream);
    if (status == cudaErrorNotReady)
      return false;
    COLL_CUDA_TRY(status);
  }
  if (llvm::Error err = takeWatchdogReport())
    return err;
  return true;
}

llvm::Error CudaExecutor::abort() {
  DeviceScope scoped = scope();
  COLL_CUDA_TRY(cudaSetDevice(deviceInfo.device));
  if (!abortStream)
    COLL_CUDA_TRY(cudaStreamCreateWithFlags(&abortStream, cudaStreamNonBlocking));
  // The flag every wait polls (as a watchdog stop raises it), written from
  // a stream of its own while the launches run on `stream`.
  COLL_CUDA_TRY(cudaMemsetAsync(state.as<unsigned char>() + offsetof(DeviceControl, abort), 1,
                                sizeof(uint32_t), abortStream));
  COLL_CUDA_TRY(cudaStreamSynchronize(abortStream));
  COLL_CUDA_TRY(cudaStreamSynchronize(stream));
  return resetState();
}

llvm::Expected<void *> CudaExecutor::temporary(int which, uint64_t bytes) {
  if (which < 0 || which > 1)
    return fail("DeviceExecutor::temporary: buffer 0 or 1");
  DeviceScope scoped = scope();
  COLL_CUDA_TRY(cudaSetDevice(deviceInfo.device));
  if (llvm::Error err = temp[which].reserve(bytes))
    return err;
  return temp[which].as<void>();
}

llvm::Expected<CallResult> CudaExecutor::run(const CallArgs &args) {
  DeviceScope scoped = scope();
  auto result = prepare(args);
  if (!result)
    return result.takeError();
  const bool tracing = timeline && params.iterations > 0 && launchTbs > 0;
  if (tracing)
    if (llvm::Error err = armTimeline())
      return err;
  const auto t0 = std::chrono::steady_clock::now();
  COLL_CUDA_TRY(cudaEventRecord(startEvent, stream));
  if (llvm::Error err = launchOn(stream))
    return err;
  COLL_CUDA_TRY(cudaEventRecord(stopEvent, stream));
  if (llvm::Error err = finishOn(stream))
    return err;
  const auto t1 = std::chrono::steady_clock::now();
  float ms = 0;
  COLL_CUDA_TRY(cudaEventElapsedTime(&ms, startEvent, stopEvent));
  result->seconds = ms * 1e-3;
  if (tracing)
    if (llvm::Error err = collectTimeline(*timeline, args.type, t0, t1))
      return err;
  return result;
}

llvm::Expected<std::vector<double>> CudaExecutor::timeLaunches(unsigned warmup, unsigned iters,
                                                               bool graph) {
  DeviceScope scoped = scope();
  if (!prepared)
    return fail("CudaExecutor::timeLaunches: no call is prepared");
  COLL_CUDA_TRY(cudaSetDevice(deviceInfo.device));
  cudaGraph_t captured = nullptr;
  cudaGraphExec_t exec = nullptr;
  auto destroy = llvm::make_scope_exit([&] {
    if (exec)
      cudaGraphExecDestroy(exec);
    if (captured)
      cudaGraphDestroy(captured);
  });
  if (graph) {
    COLL_CUDA_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    llvm::Error err = launchOn(stream);
    cudaError_t ended = cudaStreamEndCapture(stream, &captured);
    if (err)
      return err;
    COLL_CUDA_TRY(ended);
    COLL_CUDA_TRY(cudaGraphInstantiate(&exec, captured, 0));
  }
  auto seconds = timeOnStream(stream, warmup, iters, [&]() -> llvm::Error {
    if (!graph)
      return launchOn(stream);
    COLL_CUDA_TRY(cudaGraphLaunch(exec, stream));
    return llvm::Error::success();
  });
  if (llvm::Error err = finishOn(stream))
    return err;
  return seconds;
}

} // namespace coll::interp::cuda
