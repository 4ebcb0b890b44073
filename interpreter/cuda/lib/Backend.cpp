//===- Backend.cpp - The CUDA backend object ------------------------------===//
//
// cudaBackend() (CollCuda) or emulatedBackend() (CollCudaEmu): the
// DeviceBackend that makes executors (Executor.h), stages host buffers on
// the device, copies on a stream, times device copies and the reference
// kernels, and shares memory between processes with CUDA IPC; with the
// emulation, the step-cost counters too.
//
//===----------------------------------------------------------------------===//

#include "coll/cuda/Backend.h"

#include "Executor.h"
#if COLL_CUDA_EMULATION
#include "emu/Simt.h"
#endif

#include "llvm/Support/FormatVariadic.h"

#include <cstddef>
#include <cstring>
#include <iterator>

namespace coll::interp {

using namespace cuda;

namespace {

class StagedBuffers final : public DeviceBuffers {
public:
  ~StagedBuffers() override {
    for (const Region &region : regions)
      cudaFree(region.device);
  }
  static llvm::Expected<std::unique_ptr<DeviceBuffers>> create(const CallArgs &host,
                                                               uint64_t inputBytes,
                                                               uint64_t outputBytes) {
    MirrorLayout layout = mirrorLayout(host, inputBytes, outputBytes);
    auto buffers = std::make_unique<StagedBuffers>();
    buffers->device = host;
    for (const MirrorLayout::Range &range : layout.ranges) {
      void *ptr = nullptr;
      COLL_CUDA_TRY(cudaMalloc(&ptr, range.bytes));
      buffers->regions.push_back({range.begin, ptr, range.bytes});
    }
    auto place = [&](const MirrorLayout::Place &p) -> void * {
      return p.range < 0 ? nullptr
                         : static_cast<std::byte *>(buffers->regions[p.range].device) + p.offset;
    };
    for (size_t r = 0; r < layout.input.size(); ++r) {
      buffers->device.input[r] = place(layout.input[r]);
      buffers->device.output[r] = place(layout.output[r]);
    }
    return std::unique_ptr<DeviceBuffers>(std::move(buffers));
  }
  const CallArgs &args() const override { return device; }
  llvm::Error upload() override {
    for (const Region &region : regions)
      COLL_CUDA_TRY(cudaMemcpy(region.device, region.host, region.bytes, cudaMemcpyHostToDevice));
    return llvm::Error::success();
  }
  llvm::Error download() override {
    for (const Region &region : regions)
      COLL_CUDA_TRY(cudaMemcpy(region.host, region.device, region.bytes, cudaMemcpyDeviceToHost));
    return llvm::Error::success();
  }

private:
  struct Region {
    std::byte *host;
    void *device;
    uint64_t bytes;
  };
  std::vector<Region> regions;
  CallArgs device;
};

class Backend final : public DeviceBackend {
public:
  bool emulated() const override { return COLL_CUDA_EMULATION != 0; }
  llvm::Expected<CudaDeviceInfo> currentDevice() override { return currentCudaDevice(); }
  std::string describe(int device) override {
#if COLL_CUDA_EMULATION
    return device >= 0
               ? llvm::formatv("the CPU emulation of a GPU, for CUDA device {0}", device).str()
               : std::string("the CPU emulation of a GPU");
#else
    cudaDeviceProp props;
    if (device < 0 && cudaGetDevice(&device) != cudaSuccess)
      return "a CUDA device";
    if (cudaGetDeviceProperties(&props, device) != cudaSuccess)
      return llvm::formatv("CUDA device {0}", device).str();
    return llvm::formatv("{0} (CUDA device {1})", props.name, device).str();
#endif
  }
  llvm::Expected<std::unique_ptr<DeviceExecutor>> create(const Plan &plan,
                                                         const CudaOptions &options,
                                                         int device) override {
    DeviceScope onDevice(device);
    if (llvm::Error err = onDevice.check(device))
      return err;
    auto executor = std::make_unique<CudaExecutor>(plan, options);
    if (llvm::Error err = executor->start())
      return err;
    return std::unique_ptr<DeviceExecutor>(std::move(executor));
  }
  llvm::Expected<std::unique_ptr<DeviceBuffers>> stage(const CallArgs &host, uint64_t inputBytes,
                                                       uint64_t outputBytes) override {
    return StagedBuffers::create(host, inputBytes, outputBytes);
  }
  llvm::Expected<std::vector<double>> timeReference(const ReferenceRequest &q) override {
    return runReference(q);
  }
  llvm::Error copyOnStream(void *dst, const void *src, uint64_t bytes, void *stream,
                           int device) override {
#if COLL_CUDA_EMULATION
    (void)stream;
    (void)device;
    std::memmove(dst, src, bytes);
#else
    DeviceScope onDevice(device);
    if (llvm::Error err = onDevice.check(device))
      return err;
    COLL_CUDA_TRY(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)));
#endif
    return llvm::Error::success();
  }
  llvm::Expected<void *> allocateShared(uint64_t bytes, int device) override {
    DeviceScope onDevice(device);
    if (llvm::Error err = onDevice.check(device))
      return err;
    void *p = nullptr;
    COLL_CUDA_TRY(cudaMalloc(&p, std::max<uint64_t>(bytes, 1)));
    if (cudaError_t e = cudaMemset(p, 0, bytes); e != cudaSuccess) {
      cudaFree(p);
      COLL_CUDA_TRY(e);
    }
    return p;
  }
  llvm::Error freeShared(void *base, int device) override {
    DeviceScope onDevice(device);
    if (llvm::Error err = onDevice.check(device))
      return err;
    COLL_CUDA_TRY(cudaFree(base));
    return llvm::Error::success();
  }
  llvm::Expected<SharedHandle> exportShared(void *base, int device) override {
    DeviceScope onDevice(device);
    if (llvm::Error err = onDevice.check(device))
      return err;
    cudaIpcMemHandle_t handle;
    COLL_CUDA_TRY(cudaIpcGetMemHandle(&handle, base));
    SharedHandle out;
    static_assert(sizeof handle == sizeof out.bytes, "CUDA's handle is 64 bytes");
    std::memcpy(out.bytes, &handle, sizeof out.bytes);
    return out;
  }
  llvm::Expected<void *> openShared(const SharedHandle &handle, int device) override {
    DeviceScope onDevice(device);
    if (llvm::Error err = onDevice.check(device))
      return err;
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle.bytes, sizeof h);
    void *p = nullptr;
    COLL_CUDA_TRY(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess));
    return p;
  }
  llvm::Error closeShared(void *mapped, int device) override {
    DeviceScope onDevice(device);
    if (llvm::Error err = onDevice.check(device))
      return err;
    COLL_CUDA_TRY(cudaIpcCloseMemHandle(mapped));
    return llvm::Error::success();
  }
  llvm::Expected<std::vector<double>> timeDeviceCopy(uint64_t bytes, unsigned warmup,
                                                     unsigned iters) override {
    void *src = nullptr, *dst = nullptr;
    cudaStream_t stream = nullptr;
    auto release = llvm::make_scope_exit([&] {
      if (src)
        cudaFree(src);
      if (dst)
        cudaFree(dst);
      if (stream)
        cudaStreamDestroy(stream);
    });
    COLL_CUDA_TRY(cudaMalloc(&src, std::max<uint64_t>(bytes, 1)));
    COLL_CUDA_TRY(cudaMalloc(&dst, std::max<uint64_t>(bytes, 1)));
    COLL_CUDA_TRY(cudaMemset(src, 1, bytes));
    COLL_CUDA_TRY(cudaStreamCreate(&stream));
    return timeOnStream(stream, warmup, iters, [&]() -> llvm::Error {
      COLL_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
      return llvm::Error::success();
    });
  }
};

} // namespace

#if COLL_CUDA_EMULATION
void countEmulatedStepCosts(bool on) { cuda::simt::countStepCosts(on); }

namespace {
/// The counters' names of a protocol (a Proto) and a step kind (a StepKind,
/// or NoStep: "launch").
const char *protocolName(uint32_t protocol) {
  static const char *const protocols[] = {"Simple", "LL", "LL128"};
  if (protocol == cuda::simt::NoStep) // a kernel of no protocol: a reference
    return "-";
  return protocol < std::size(protocols) ? protocols[protocol] : "?";
}
const char *stepName(uint32_t kind) {
  static const char *const kinds[] = {
#define COLL_STEP_TYPE(Enum, XmlName, Recv, Send, ReadsSrc, Red, WritesDst, Direct) XmlName,
#include "coll/ir/StepTypes.def"
  };
  return kind == cuda::simt::NoStep ? "launch" : kind < std::size(kinds) ? kinds[kind] : "?";
}
} // namespace

std::vector<EmulatedStepCost> emulatedStepCosts(bool reset) {
  std::vector<EmulatedStepCost> out;
  // The table's order: protocol, then kind (NoStep, 0xff, last).
  for (const auto &[key, c] : cuda::simt::stepCosts(reset)) {
    EmulatedStepCost e;
    e.protocol = protocolName(key.first);
    e.step = stepName(key.second);
    e.executions = c.executions;
    e.barriers = c.counts[cuda::simt::BlockBarrier];
    e.warpBarriers = c.counts[cuda::simt::WarpBarrier];
    e.fences = c.counts[cuda::simt::FenceGpu];
    e.sysFences = c.counts[cuda::simt::FenceSys];
    e.releases = c.counts[cuda::simt::ReleaseStore];
    e.loads = c.counts[cuda::simt::StrongLoad];
    e.acquires = c.counts[cuda::simt::AcquireLoad];
    e.stores = c.counts[cuda::simt::StrongStore];
    e.atomics = c.counts[cuda::simt::AtomicRmw];
    out.push_back(std::move(e));
  }
  return out;
}

void countEmulatedTraffic(bool on) { cuda::simt::countTraffic(on); }

std::vector<EmulatedTraffic> emulatedTraffic(bool reset) {
  static_assert(TrafficRegions == cuda::simt::NumRegions &&
                int(TrafficRegion::Own) == cuda::simt::OwnBuffer &&
                int(TrafficRegion::Peer) == cuda::simt::PeerBuffer &&
                int(TrafficRegion::Fifo) == cuda::simt::FifoSlot &&
                int(TrafficRegion::Flag) == cuda::simt::Flag &&
                int(TrafficRegion::Other) == cuda::simt::OtherMemory,
                "TrafficRegion mirrors simt::Region");
  std::vector<EmulatedTraffic> out;
  // The table's order: rank, protocol, then kind (NoStep, 0xff, last).
  for (const auto &[key, c] : cuda::simt::traffic(reset)) {
    const auto &[rank, protocol, kind] = key;
    EmulatedTraffic e;
    e.rank = rank;
    e.protocol = protocolName(protocol);
    e.step = stepName(kind);
    for (int r = 0; r < TrafficRegions; ++r) {
      e.read[r] = c.read[r];
      e.written[r] = c.written[r];
    }
    out.push_back(std::move(e));
  }
  return out;
}

DeviceBackend &emulatedBackend() {
#else
DeviceBackend &cudaBackend() {
#endif
  static Backend backend;
  return backend;
}

} // namespace coll::interp
