//===- PluginBackend.cpp - The GPU backend through libcoll_cuda.so --------===//
//
// loadDeviceBackend (DeviceExecutor.h): a DeviceBackend whose every call
// goes through the plugin's C table (plugin/DevicePlugin.h), turning its
// malloc'ed error strings back into llvm::Errors. No CUDA call is made
// here; the plugin makes them all.
//
//===----------------------------------------------------------------------===//

#include "coll/cuda/Backend.h"

#include "plugin/DevicePlugin.h"

#include "HostSupport.h"

#include "llvm/Support/FormatVariadic.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include <dlfcn.h>

namespace coll::interp {

DeviceBackend::~DeviceBackend() = default;

const char *referenceName(ReferenceKind kind) {
  switch (kind) {
  case ReferenceKind::ReduceOnce: return "reduce";
  case ReferenceKind::Exchange: return "exchange";
  case ReferenceKind::BlockCopy: return "block";
  case ReferenceKind::Fifo: return "fifo";
  case ReferenceKind::Steps: return "steps";
  case ReferenceKind::Hops: return "hops";
  }
  return "?";
}
DeviceBuffers::~DeviceBuffers() = default;

namespace {

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The plugin's message, freed.
llvm::Error pluginError(char *error) {
  std::string text = error ? error : "(no message)";
  std::free(error);
  return fail(text);
}

/// An llvm::Error for a table function's status.
llvm::Error check(int status, char *error) {
  return status ? pluginError(error) : llvm::Error::success();
}

class PluginBuffers final : public DeviceBuffers {
public:
  PluginBuffers(const CollDevicePlugin *api, void *handle) : api(api), handle(handle) {}
  ~PluginBuffers() override { api->unstage(handle); }
  const CallArgs &args() const override { return *api->stagedArgs(handle); }
  llvm::Error upload() override {
    char *error = nullptr;
    return check(api->upload(handle, &error), error);
  }
  llvm::Error download() override {
    char *error = nullptr;
    return check(api->download(handle, &error), error);
  }

private:
  const CollDevicePlugin *api;
  void *handle;
};

class PluginExecutor final : public DeviceExecutor {
public:
  PluginExecutor(const CollDevicePlugin *api, void *handle, Plan plan)
      : api(api), handle(handle), plan_(std::move(plan)) {
    api->device(handle, &info);
  }
  ~PluginExecutor() override { api->destroy(handle); }

  const Plan &plan() const override { return plan_; }
  uint64_t sliceElems(DataType type) const override {
    return api->sliceElems(handle, static_cast<int>(type));
  }
  llvm::Expected<CallResult> run(const CallArgs &args) override {
    char *error = nullptr;
    CallResult result;
    if (api->run(handle, &args, &result, &error))
      return pluginError(error);
    return result;
  }
  void setTimeline(Timeline *timeline) override { api->setTimeline(handle, timeline); }
  llvm::Expected<CallResult> prepare(const CallArgs &args) override {
    char *error = nullptr;
    CallResult result;
    if (api->prepare(handle, &args, &result, &error))
      return pluginError(error);
    return result;
  }
  llvm::Error launch(void *stream) override {
    char *error = nullptr;
    return check(api->launch(handle, stream, &error), error);
  }
  llvm::Error finish(void *stream) override {
    char *error = nullptr;
    return check(api->finish(handle, stream, &error), error);
  }
  llvm::Error enqueue(void *stream, llvm::ArrayRef<DeviceCopy> before,
                      llvm::ArrayRef<DeviceCopy> after) override {
    char *error = nullptr;
    return check(api->enqueue(handle, stream, before.data(), before.size(), after.data(),
                              after.size(), &error),
                 error);
  }
  llvm::Error join(void *stream) override {
    char *error = nullptr;
    return check(api->join(handle, stream, &error), error);
  }
  llvm::Expected<bool> poll(bool wait) override {
    char *error = nullptr;
    int done = 0;
    if (api->poll(handle, wait ? 1 : 0, &done, &error))
      return pluginError(error);
    return done != 0;
  }
  llvm::Expected<void *> temporary(int which, uint64_t bytes) override {
    char *error = nullptr;
    void *out = nullptr;
    if (api->temporary(handle, which, bytes, &out, &error))
      return pluginError(error);
    return out;
  }
  llvm::Error abort() override {
    char *error = nullptr;
    return check(api->abort(handle, &error), error);
  }
  const CudaDeviceInfo &device() const override { return info; }
  void traceEnqueued(bool on) override { api->traceEnqueued(handle, on ? 1 : 0); }
  llvm::Error collectEnqueued(Timeline &timeline, DataType type,
                              std::chrono::steady_clock::time_point t0,
                              std::chrono::steady_clock::time_point t1) override {
    auto ns = [](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    };
    char *error = nullptr;
    return check(api->collectEnqueued(handle, &timeline, static_cast<int>(type), ns(t0), ns(t1),
                                      &error),
                 error);
  }
  llvm::Expected<std::vector<double>> timeLaunches(unsigned warmup, unsigned iters,
                                                   bool graph) override {
    char *error = nullptr;
    std::vector<double> seconds;
    if (api->timeLaunches(handle, warmup, iters, graph ? 1 : 0, &seconds, &error))
      return pluginError(error);
    return seconds;
  }
  ConnectionExport exportConnections() const override {
    ConnectionExport out;
    api->exportConnections(handle, &out);
    return out;
  }
  llvm::Error placeConnections(const std::vector<ConnectionExport> &ranks) override {
    char *error = nullptr;
    return check(api->placeConnections(handle, ranks.data(), ranks.size(), &error), error);
  }
  llvm::Error importConnections(const std::vector<ConnectionExport> &ranks) override {
    char *error = nullptr;
    return check(api->importConnections(handle, ranks.data(), ranks.size(), &error), error);
  }
  llvm::Error setPeerBuffers(llvm::ArrayRef<PeerBuffers> ranks) override {
    char *error = nullptr;
    return check(api->setPeerBuffers(handle, ranks.data(), ranks.size(), &error), error);
  }
  llvm::Error setPeerWindows(llvm::ArrayRef<PeerWindows> ranks) override {
    char *error = nullptr;
    return check(api->setPeerWindows(handle, ranks.data(), ranks.size(), &error), error);
  }
  std::vector<ProxiedConnection> proxiedConnections() const override {
    std::vector<ProxiedConnection> out(api->proxiedConnections(handle, nullptr, 0));
    out.resize(api->proxiedConnections(handle, out.data(), out.size()));
    return out;
  }
  LaunchShape launchShape() const override {
    LaunchShape shape;
    api->launchShape(handle, &shape);
    return shape;
  }

private:
  const CollDevicePlugin *api;
  void *handle;
  Plan plan_;
  CudaDeviceInfo info;
};

class PluginBackend final : public DeviceBackend {
public:
  explicit PluginBackend(const CollDevicePlugin *api) : api(api) {}
  bool emulated() const override { return false; }
  llvm::Expected<CudaDeviceInfo> currentDevice() override {
    char *error = nullptr;
    CudaDeviceInfo info;
    if (api->currentDevice(&info, &error))
      return pluginError(error);
    return info;
  }
  std::string describe(int device) override {
    char *error = nullptr;
    char *text = api->describe(device, &error);
    if (!text) {
      std::free(error);
      return llvm::formatv("CUDA device {0}", device);
    }
    std::string out = text;
    std::free(text);
    return out;
  }
  llvm::Expected<std::unique_ptr<DeviceExecutor>> create(const Plan &plan,
                                                         const CudaOptions &options,
                                                         int device) override {
    char *error = nullptr;
    void *handle = api->create(&plan, &options, device, &error);
    if (!handle)
      return pluginError(error);
    return std::make_unique<PluginExecutor>(api, handle, plan);
  }
  llvm::Expected<std::unique_ptr<DeviceBuffers>> stage(const CallArgs &host, uint64_t inputBytes,
                                                       uint64_t outputBytes) override {
    char *error = nullptr;
    void *handle = api->stage(&host, inputBytes, outputBytes, &error);
    if (!handle)
      return pluginError(error);
    return std::make_unique<PluginBuffers>(api, handle);
  }
  llvm::Expected<std::vector<double>> timeDeviceCopy(uint64_t bytes, unsigned warmup,
                                                     unsigned iters) override {
    char *error = nullptr;
    std::vector<double> seconds;
    if (api->timeDeviceCopy(bytes, warmup, iters, &seconds, &error))
      return pluginError(error);
    return seconds;
  }
  llvm::Expected<std::vector<double>> timeReference(const ReferenceRequest &q) override {
    char *error = nullptr;
    std::vector<double> seconds;
    if (api->timeReference(&q, &seconds, &error))
      return pluginError(error);
    return seconds;
  }
  llvm::Error copyOnStream(void *dst, const void *src, uint64_t bytes, void *stream,
                           int device) override {
    char *error = nullptr;
    if (api->copyOnStream(dst, src, bytes, stream, device, &error))
      return pluginError(error);
    return llvm::Error::success();
  }
  llvm::Expected<void *> allocateShared(uint64_t bytes, int device) override {
    char *error = nullptr;
    void *p = api->allocateShared(bytes, device, &error);
    if (!p)
      return pluginError(error);
    return p;
  }
  llvm::Error freeShared(void *base, int device) override {
    char *error = nullptr;
    return check(api->freeShared(base, device, &error), error);
  }
  llvm::Expected<SharedHandle> exportShared(void *base, int device) override {
    char *error = nullptr;
    SharedHandle h;
    if (api->exportShared(base, device, &h, &error))
      return pluginError(error);
    return h;
  }
  llvm::Expected<void *> openShared(const SharedHandle &handle, int device) override {
    char *error = nullptr;
    void *p = api->openShared(&handle, device, &error);
    if (!p)
      return pluginError(error);
    return p;
  }
  llvm::Error closeShared(void *mapped, int device) override {
    char *error = nullptr;
    return check(api->closeShared(mapped, device, &error), error);
  }

private:
  const CollDevicePlugin *api;
};

/// The table of the library at `path`, or why it cannot be used.
llvm::Expected<const CollDevicePlugin *> loadTable(const std::string &path) {
  void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    return fail(why ? why : "not found");
  }
  auto entry = reinterpret_cast<CollDevicePluginEntry>(dlsym(lib, "collDevicePlugin"));
  const CollDevicePlugin *api = entry ? entry() : nullptr;
  if (!api)
    return fail("no collDevicePlugin");
  if (api->abi != COLL_DEVICE_PLUGIN_ABI || api->planSize != sizeof(Plan) ||
      api->argsSize != sizeof(CallArgs) || api->optionsSize != sizeof(CudaOptions) ||
      api->exportSize != sizeof(ConnectionExport) || api->infoSize != sizeof(CudaDeviceInfo) ||
      api->tbSize != sizeof(PlanTb) || api->stepSize != sizeof(PlanStep) ||
      api->sliceSize != sizeof(CallSlice) ||
      std::strcmp(api->version, COLL_VERSION_STRING) != 0)
    return fail(llvm::formatv("from another build: Coll {0}, plugin ABI {1}; this one is {2}, "
                              "ABI {3}",
                              api->version, api->abi, COLL_VERSION_STRING,
                              COLL_DEVICE_PLUGIN_ABI));
  return api;
}

} // namespace

llvm::Expected<DeviceBackend *> loadDeviceBackend(llvm::ArrayRef<std::string> paths) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<PluginBackend>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  std::string tried;
  for (const std::string &path : paths) {
    if (auto found = loaded.find(path); found != loaded.end())
      return found->second.get();
    auto api = loadTable(path);
    if (!api) {
      tried += (tried.empty() ? "" : "; ") + path + " (" + llvm::toString(api.takeError()) + ")";
      continue;
    }
    return (loaded[path] = std::make_unique<PluginBackend>(*api)).get();
  }
  return fail("Coll's GPU backend, libcoll_cuda.so (built where nvcc is found), could not be "
              "loaded: " +
              (tried.empty() ? std::string("no path to try") : tried));
}

} // namespace coll::interp
