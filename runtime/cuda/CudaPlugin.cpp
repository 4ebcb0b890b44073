//===- CudaPlugin.cpp - libcoll_cuda.so: the runtime's GPU backend --------===//
//
// interp::CudaExecutor (CollCuda, the CUDA runtime linked statically) behind
// the C table of DevicePlugin.h. libcoll.so loads this library with dlopen
// the first time a call passes device memory. Every entry makes the
// executor's device current for its work and gives the caller's back.
//
//===----------------------------------------------------------------------===//

#include "coll/plugin/DevicePlugin.h"

#include "llvm/Support/FormatVariadic.h"

#include <cuda_runtime_api.h>

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

/// Makes `device` current for the scope and restores the caller's.
class DeviceScope {
public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&saved) != cudaSuccess)
      saved = -1;
    if (device >= 0 && device != saved)
      status = cudaSetDevice(device);
  }
  ~DeviceScope() {
    int now = -1;
    if (saved >= 0 && cudaGetDevice(&now) == cudaSuccess && now != saved)
      cudaSetDevice(saved);
  }
  llvm::Error check(int device) const {
    if (status == cudaSuccess)
      return llvm::Error::success();
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   llvm::formatv("cannot use CUDA device {0}: {1} ({2})", device,
                                                 cudaGetErrorName(status),
                                                 cudaGetErrorString(status)));
  }

private:
  int saved = -1;
  cudaError_t status = cudaSuccess;
};

struct Executor {
  std::unique_ptr<CudaExecutor> ex;
  int device = 0;
};

Executor *of(void *p) { return static_cast<Executor *>(p); }

void *create(const Plan *plan, const CudaOptions *options, int device, char **error) {
  DeviceScope scope(device);
  if (llvm::Error err = scope.check(device)) {
    failWith(std::move(err), error);
    return nullptr;
  }
  auto made = CudaExecutor::create(*plan, *options);
  if (!made) {
    failWith(made.takeError(), error);
    return nullptr;
  }
  return new Executor{std::move(*made), device};
}

void destroy(void *p) {
  if (!p)
    return;
  DeviceScope scope(of(p)->device);
  delete of(p);
}

void exportConnections(void *p, ConnectionExport *out) { *out = of(p)->ex->exportConnections(); }

int importConnections(void *p, const ConnectionExport *all, size_t n, char **error) {
  DeviceScope scope(of(p)->device);
  if (llvm::Error err = of(p)->ex->importConnections(std::vector<ConnectionExport>(all, all + n)))
    return failWith(std::move(err), error);
  return 0;
}

int prepare(void *p, const CallArgs *args, char **error) {
  DeviceScope scope(of(p)->device);
  auto result = of(p)->ex->prepare(*args);
  if (!result)
    return failWith(result.takeError(), error);
  return 0;
}

int enqueue(void *p, void *stream, const DeviceCopy *before, size_t nbefore,
            const DeviceCopy *after, size_t nafter, char **error) {
  DeviceScope scope(of(p)->device);
  if (llvm::Error err = of(p)->ex->enqueue(stream, llvm::ArrayRef<DeviceCopy>(before, nbefore),
                                           llvm::ArrayRef<DeviceCopy>(after, nafter)))
    return failWith(std::move(err), error);
  return 0;
}

int join(void *p, void *stream, char **error) {
  DeviceScope scope(of(p)->device);
  if (llvm::Error err = of(p)->ex->join(stream))
    return failWith(std::move(err), error);
  return 0;
}

int poll(void *p, int wait, int *done, char **error) {
  DeviceScope scope(of(p)->device);
  auto ended = of(p)->ex->poll(wait != 0);
  if (!ended)
    return failWith(ended.takeError(), error);
  *done = *ended ? 1 : 0;
  return 0;
}

int temporary(void *p, int which, uint64_t bytes, void **out, char **error) {
  DeviceScope scope(of(p)->device);
  auto memory = of(p)->ex->temporary(which, bytes);
  if (!memory)
    return failWith(memory.takeError(), error);
  *out = *memory;
  return 0;
}

char *describe(int device, char **error) {
  cudaDeviceProp props;
  cudaError_t err = cudaGetDeviceProperties(&props, device);
  if (err != cudaSuccess) {
    *error = duplicate(llvm::formatv("CUDA device {0}: {1} ({2})", device, cudaGetErrorName(err),
                                     cudaGetErrorString(err)));
    return nullptr;
  }
  return duplicate(llvm::formatv("{0} (CUDA device {1})", props.name, device));
}

int deviceCount(int *count, char **error) {
  cudaError_t err = cudaGetDeviceCount(count);
  if (err != cudaSuccess) {
    *error = duplicate(llvm::formatv("{0} ({1})", cudaGetErrorString(err), cudaGetErrorName(err)));
    return 1;
  }
  return 0;
}

int abortExecutor(void *p, char **error) {
  DeviceScope scope(of(p)->device);
  if (llvm::Error err = of(p)->ex->abort())
    return failWith(std::move(err), error);
  return 0;
}

int traceEnqueued(void *p, int on, char **) {
  of(p)->ex->traceEnqueued(on != 0);
  return 0;
}

int collectTrace(void *p, void *timeline, int type, int64_t t0ns, int64_t t1ns, char **error) {
  DeviceScope scope(of(p)->device);
  using Clock = std::chrono::steady_clock;
  auto at = [](int64_t ns) {
    return Clock::time_point(
        std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns)));
  };
  if (llvm::Error err = of(p)->ex->collectEnqueued(*static_cast<Timeline *>(timeline),
                                                   static_cast<DataType>(type), at(t0ns), at(t1ns)))
    return failWith(std::move(err), error);
  return 0;
}

const CollDevicePlugin table = {
    COLL_DEVICE_PLUGIN_ABI,
    sizeof(Plan),
    sizeof(CallArgs),
    sizeof(CudaOptions),
    sizeof(ConnectionExport),
    COLL_VERSION_STRING,
    create,
    destroy,
    exportConnections,
    importConnections,
    prepare,
    enqueue,
    join,
    poll,
    temporary,
    describe,
    deviceCount,
    abortExecutor,
    traceEnqueued,
    collectTrace,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const CollDevicePlugin *collDevicePlugin() {
  return &table;
}
