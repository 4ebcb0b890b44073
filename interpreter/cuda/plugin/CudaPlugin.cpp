//===- CudaPlugin.cpp - libcoll_cuda.so: the GPU backend as a plugin ------===//
//
// cudaBackend() (CollCuda, the CUDA runtime linked statically, as NCCL
// links it, so that the plugin loads in any CUDA program whatever libcudart
// it uses) behind the C table of DevicePlugin.h.
//
//===----------------------------------------------------------------------===//

#include "DevicePlugin.h"

#include "coll/cuda/Backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

using namespace coll::interp;

namespace {

char *duplicate(const std::string &text) {
  char *copy = static_cast<char *>(std::malloc(text.size() + 1));
  if (copy)
    std::memcpy(copy, text.c_str(), text.size() + 1);
  return copy;
}

int failWith(llvm::Error err, char **error) {
  const std::string text = llvm::toString(std::move(err));
  if (error)
    *error = duplicate(text);
  return 1;
}

/// 0, or 1 with `*error`.
int status(llvm::Error err, char **error) { return err ? failWith(std::move(err), error) : 0; }

DeviceExecutor &of(void *p) { return *static_cast<DeviceExecutor *>(p); }

int deviceCount(int *count, char **error) {
  cudaError_t err = cudaGetDeviceCount(count);
  if (err != cudaSuccess) {
    *error = duplicate(std::string(cudaGetErrorString(err)) + " (" + cudaGetErrorName(err) + ")");
    return 1;
  }
  return 0;
}

char *describe(int device, char **error) {
  cudaDeviceProp props;
  cudaError_t err = cudaGetDeviceProperties(&props, device);
  if (err != cudaSuccess) {
    *error = duplicate("CUDA device " + std::to_string(device) + ": " + cudaGetErrorName(err) +
                       " (" + cudaGetErrorString(err) + ")");
    return nullptr;
  }
  return duplicate(std::string(props.name) + " (CUDA device " + std::to_string(device) + ")");
}

int currentDevice(CudaDeviceInfo *out, char **error) {
  auto info = cudaBackend().currentDevice();
  if (!info)
    return failWith(info.takeError(), error);
  *out = std::move(*info);
  return 0;
}

void *create(const Plan *plan, const CudaOptions *options, int device, char **error) {
  auto made = cudaBackend().create(*plan, *options, device);
  if (!made) {
    failWith(made.takeError(), error);
    return nullptr;
  }
  return made->release();
}

void *stage(const CallArgs *host, uint64_t inputBytes, uint64_t outputBytes, char **error) {
  auto made = cudaBackend().stage(*host, inputBytes, outputBytes);
  if (!made) {
    failWith(made.takeError(), error);
    return nullptr;
  }
  return made->release();
}

DeviceBuffers &staged(void *p) { return *static_cast<DeviceBuffers *>(p); }

int timeDeviceCopy(uint64_t bytes, unsigned warmup, unsigned iters, std::vector<double> *seconds,
                   char **error) {
  auto timed = cudaBackend().timeDeviceCopy(bytes, warmup, iters);
  if (!timed)
    return failWith(timed.takeError(), error);
  *seconds = std::move(*timed);
  return 0;
}

int run(void *p, const CallArgs *args, CallResult *result, char **error) {
  auto ran = of(p).run(*args);
  if (!ran)
    return failWith(ran.takeError(), error);
  *result = *ran;
  return 0;
}

int prepare(void *p, const CallArgs *args, CallResult *result, char **error) {
  auto prepared = of(p).prepare(*args);
  if (!prepared)
    return failWith(prepared.takeError(), error);
  *result = *prepared;
  return 0;
}

int enqueue(void *p, void *stream, const DeviceCopy *before, size_t nbefore,
            const DeviceCopy *after, size_t nafter, char **error) {
  return status(of(p).enqueue(stream, llvm::ArrayRef<DeviceCopy>(before, nbefore),
                              llvm::ArrayRef<DeviceCopy>(after, nafter)),
                error);
}

int poll(void *p, int wait, int *done, char **error) {
  auto ended = of(p).poll(wait != 0);
  if (!ended)
    return failWith(ended.takeError(), error);
  *done = *ended ? 1 : 0;
  return 0;
}

int temporary(void *p, int which, uint64_t bytes, void **out, char **error) {
  auto memory = of(p).temporary(which, bytes);
  if (!memory)
    return failWith(memory.takeError(), error);
  *out = *memory;
  return 0;
}

int collectEnqueued(void *p, void *timeline, int type, int64_t t0ns, int64_t t1ns,
                    char **error) {
  using Clock = std::chrono::steady_clock;
  auto at = [](int64_t ns) {
    return Clock::time_point(
        std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns)));
  };
  return status(of(p).collectEnqueued(*static_cast<Timeline *>(timeline),
                                      static_cast<DataType>(type), at(t0ns), at(t1ns)),
                error);
}

int timeLaunches(void *p, unsigned warmup, unsigned iters, int graph,
                 std::vector<double> *seconds, char **error) {
  auto timed = of(p).timeLaunches(warmup, iters, graph != 0);
  if (!timed)
    return failWith(timed.takeError(), error);
  *seconds = std::move(*timed);
  return 0;
}

const CollDevicePlugin table = {
    COLL_DEVICE_PLUGIN_ABI,
    sizeof(Plan),
    sizeof(CallArgs),
    sizeof(CudaOptions),
    sizeof(ConnectionExport),
    sizeof(CudaDeviceInfo),
    sizeof(PlanTb),
    sizeof(PlanStep),
    sizeof(CallSlice),
    COLL_VERSION_STRING,
    deviceCount,
    describe,
    currentDevice,
    create,
    stage,
    [](void *s) -> const CallArgs * { return &staged(s).args(); },
    [](void *s, char **error) { return status(staged(s).upload(), error); },
    [](void *s, char **error) { return status(staged(s).download(), error); },
    [](void *s) { delete static_cast<DeviceBuffers *>(s); },
    timeDeviceCopy,
    [](const ReferenceRequest *q, std::vector<double> *seconds, char **error) {
      auto timed = cudaBackend().timeReference(*q);
      if (!timed)
        return failWith(timed.takeError(), error);
      *seconds = std::move(*timed);
      return 0;
    },
    [](void *dst, const void *src, uint64_t bytes, void *stream, int device, char **error) {
      return status(cudaBackend().copyOnStream(dst, src, bytes, stream, device), error);
    },
    [](void *p) { delete static_cast<DeviceExecutor *>(p); },
    [](void *p, int type) { return of(p).sliceElems(static_cast<DataType>(type)); },
    [](void *p, CudaDeviceInfo *out) { *out = of(p).device(); },
    run,
    [](void *p, void *timeline) { of(p).setTimeline(static_cast<Timeline *>(timeline)); },
    prepare,
    [](void *p, void *stream, char **error) { return status(of(p).launch(stream), error); },
    [](void *p, void *stream, char **error) { return status(of(p).finish(stream), error); },
    enqueue,
    [](void *p, void *stream, char **error) { return status(of(p).join(stream), error); },
    poll,
    temporary,
    [](void *p, char **error) { return status(of(p).abort(), error); },
    [](void *p, int on) { of(p).traceEnqueued(on != 0); },
    collectEnqueued,
    timeLaunches,
    [](void *p, ConnectionExport *out) { *out = of(p).exportConnections(); },
    [](void *p, const ConnectionExport *all, size_t n, char **error) {
      return status(of(p).placeConnections(std::vector<ConnectionExport>(all, all + n)), error);
    },
    [](void *p, const ConnectionExport *all, size_t n, char **error) {
      return status(of(p).importConnections(std::vector<ConnectionExport>(all, all + n)), error);
    },
    [](void *p, LaunchShape *out) { *out = of(p).launchShape(); },
    [](void *p, ProxiedConnection *out, size_t capacity) {
      const std::vector<ProxiedConnection> all = of(p).proxiedConnections();
      std::copy_n(all.begin(), std::min(capacity, all.size()), out);
      return all.size();
    },
    [](void *p, const PeerBuffers *ranks, size_t n, char **error) {
      return status(of(p).setPeerBuffers(llvm::ArrayRef<PeerBuffers>(ranks, n)), error);
    },
    [](uint64_t bytes, int device, char **error) -> void * {
      auto p = cudaBackend().allocateShared(bytes, device);
      if (!p) {
        failWith(p.takeError(), error);
        return nullptr;
      }
      return *p;
    },
    [](void *base, int device, char **error) {
      return status(cudaBackend().freeShared(base, device), error);
    },
    [](void *base, int device, SharedHandle *out, char **error) {
      auto h = cudaBackend().exportShared(base, device);
      if (!h)
        return failWith(h.takeError(), error);
      *out = *h;
      return 0;
    },
    [](const SharedHandle *handle, int device, char **error) -> void * {
      auto p = cudaBackend().openShared(*handle, device);
      if (!p) {
        failWith(p.takeError(), error);
        return nullptr;
      }
      return *p;
    },
    [](void *mapped, int device, char **error) {
      return status(cudaBackend().closeShared(mapped, device), error);
    },
    [](void *p, const PeerWindows *ranks, size_t n, char **error) {
      return status(of(p).setPeerWindows(llvm::ArrayRef<PeerWindows>(ranks, n)), error);
    },
};

} // namespace

extern "C" __attribute__((visibility("default"))) const CollDevicePlugin *collDevicePlugin() {
  return &table;
}
