//===- Device.cpp - Device buffers: the emulated device, a GPU ------------===//
//
// device: every collective on the emulated device (a second communicator
// with collConfig_t emulatedDevice) against the host backend, bit for bit;
// late-cuda: a program that loads its CUDA runtime after its first call.
// Built with COLL_TEST_GPU (coll-rank-check-gpu on the CUDA runtime,
// coll-rank-check-standin on tests/runtime/dropin's stand-in one): gpu, the
// same comparison on device buffers and the caller's streams; the GPU
// faults (gpu-kill, gpu-abort, gpu-unserved); gpu-trace; and gpu-all, every
// rank in this process on GPU 0.
//
//===----------------------------------------------------------------------===//

#include "RankCheck.h"

#include "TimeScale.h"

#if COLL_TEST_GPU
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <dlfcn.h>
#include <unistd.h>

namespace rankcheck {

/// late-cuda: a program that loads its CUDA runtime only after its first
/// call (COLL_TEST_STANDIN_CUDART names the stand-in one, which calls the
/// memory of its cudaMalloc device memory): its device memory must be told
/// apart from then on. With COLL_CUDA_PLUGIN naming no file, a call on it
/// fails with collInvalidUsage (as host memory it would succeed).
void lateCuda() {
  std::vector<float> x(16, 1.0f);
  check(collAllReduce(x.data(), x.data(), 16, collFloat32, collSum, comm, nullptr),
        "host allreduce before CUDA is loaded");
  const char *path = std::getenv("COLL_TEST_STANDIN_CUDART");
  void *lib = path ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : nullptr;
  if (!lib)
    failNow(std::string("cannot load COLL_TEST_STANDIN_CUDART: ") + (path ? dlerror() : "unset"));
  auto cudaMallocFn = reinterpret_cast<int (*)(void **, size_t)>(dlsym(lib, "cudaMalloc"));
  void *d = nullptr;
  if (!cudaMallocFn || cudaMallocFn(&d, 64) != 0 || !d)
    failNow("the stand-in's cudaMalloc failed");
  collResult_t r = collAllReduce(d, d, 16, collFloat32, collSum, comm, nullptr);
  if (r != collInvalidUsage || !std::strstr(collGetLastError(comm), "could not be loaded"))
    failNow(std::string("device memory of a CUDA runtime loaded late was not told apart: ") +
            collGetErrorString(r) + ": " + collGetLastError(comm));
  checks += 2;
}

//===----------------------------------------------------------------------===//
// Device buffers on a GPU
//===----------------------------------------------------------------------===//

#if COLL_TEST_GPU
namespace {

void cudaCheck(cudaError_t err, const char *what) {
  if (err != cudaSuccess)
    failNow(std::string(what) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}

/// A buffer in device memory with the contents of `host`.
struct DeviceBuffer {
  void *ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(const std::vector<unsigned char> &host) : bytes(host.size()) {
    cudaCheck(cudaMalloc(&ptr, bytes), "cudaMalloc");
    cudaCheck(cudaMemcpy(ptr, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> host(bytes);
    cudaCheck(cudaMemcpy(host.data(), ptr, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    return host;
  }
  unsigned char *at(size_t offset) const { return static_cast<unsigned char *>(ptr) + offset; }
};

/// Calls queued on one stream with no wait in between, each reading the
/// previous one's output (in-place allreduces), checked after one wait.
void gpuQueue(cudaStream_t stream) {
  const size_t count = 100003;
  const int calls = 8;
  std::vector<unsigned char> bytes(count * 4);
  double sum[7] = {};
  for (size_t i = 0; i < count; ++i) {
    const float v = float((size_t(rank) + i) % 7);
    std::memcpy(bytes.data() + 4 * i, &v, 4);
  }
  DeviceBuffer d(bytes);
  for (int k = 0; k < calls; ++k)
    check(collAllReduce(d.ptr, d.ptr, count, collFloat32, collSum, comm, k % 2 ? stream : nullptr),
          "queued allreduce");
  cudaCheck(cudaStreamSynchronize(stream), "queued allreduces");
  cudaCheck(cudaStreamSynchronize(nullptr), "queued allreduces");
  const std::vector<unsigned char> out = d.download();
  for (int r = 0; r < nranks; ++r)
    for (size_t j = 0; j < 7; ++j)
      sum[j] += double((size_t(r) + j) % 7); // element i of rank r holds (r + i) % 7
  double scale = 1;
  for (int k = 1; k < calls; ++k)
    scale *= nranks;
  for (size_t i = 0; i < count; ++i) {
    float got;
    std::memcpy(&got, out.data() + 4 * i, 4);
    const double want = sum[i % 7] * scale;
    if (double(got) != want)
      failNow("queued allreduces: element " + std::to_string(i) + " is " + std::to_string(got) +
              ", expected " + std::to_string(want));
  }
  ++checks;
}

/// Wrong calls with device buffers fail with a message naming the cause,
/// and the communicator goes on working; point-to-point on device buffers
/// works.
void gpuErrors() {
  std::vector<unsigned char> host(64, 0);
  DeviceBuffer d(host);
  auto expect = [&](collResult_t got, collResult_t want, const char *what, const char *needle) {
    if (got != want)
      failNow(std::string(what) + ": got " + collGetErrorString(got));
    if (!std::strstr(collGetLastError(comm), needle))
      failNow(std::string(what) + ": message '" + collGetLastError(comm) + "' lacks '" + needle +
              "'");
    ++checks;
  };
  expect(collAllReduce(host.data(), d.ptr, 16, collFloat32, collSum, comm, nullptr),
         collInvalidArgument, "host sendbuff, device recvbuff", "sendbuff is host memory");
  // Sends and receives on device buffers run, staged through host memory
  // (runtime/lib/PointToPoint.cpp): around the ring in one group (a rank
  // alone sends to itself).
  {
    std::vector<unsigned char> mine(64), zero(64, 0);
    for (size_t i = 0; i < mine.size(); ++i)
      mine[i] = static_cast<unsigned char>(rank * 31 + int(i));
    DeviceBuffer s(mine), r(zero);
    const int prev = (rank + nranks - 1) % nranks;
    check(collGroupStart(), "collGroupStart");
    check(collSend(s.ptr, 16, collFloat32, (rank + 1) % nranks, comm, nullptr),
          "send from device memory");
    check(collRecv(r.ptr, 16, collFloat32, prev, comm, nullptr), "receive into device memory");
    check(collGroupEnd(), "send and receive on device memory");
    const std::vector<unsigned char> got = r.download();
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != static_cast<unsigned char>(prev * 31 + int(i)))
        failNow("receive into device memory: byte " + std::to_string(i) + " is " +
                std::to_string(got[i]) + ", expected " +
                std::to_string(static_cast<unsigned char>(prev * 31 + int(i))));
    ++checks;
  }
  check(collAllReduce(d.ptr, d.ptr, 16, collFloat32, collSum, comm, nullptr),
        "device allreduce after errors");
  cudaCheck(cudaDeviceSynchronize(), "device allreduce after errors");
  ++checks;
}

std::string gpuTracePath(bool withRank) {
  return "/tmp/coll-gpu-trace-" + std::to_string(getpid()) +
         (withRank ? ".r" + std::to_string(rank) : std::string()) + ".json";
}

} // namespace

bool selectGpu() {
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("rank ?: skip: no CUDA device (%s)\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "none found");
    return false;
  }
  // As NCCL programs do: the rank's device is current before init.
  cudaCheck(cudaSetDevice(0), "cudaSetDevice");
  return true;
}

/// After device calls were refused, a host allreduce on the same
/// communicator still runs, and right.
static void hostAllreduceGoesOn() {
  std::vector<float> x(16, 1.0f);
  check(collAllReduce(x.data(), x.data(), 16, collFloat32, collSum, comm, nullptr),
        "host allreduce after the refusal");
  if (x[0] != float(nranks))
    failNow("host allreduce after the refusal: wrong result");
}

/// gpu-unserved (COLL_CUDA_PLUGIN naming a file that is not there): a call
/// on device memory fails at once on every rank with collInvalidUsage
/// naming the plugin, and host calls go on working.
void gpuUnserved() {
  std::vector<unsigned char> host(64, 0);
  DeviceBuffer d(host);
  collResult_t r = collAllReduce(d.ptr, d.ptr, 16, collFloat32, collSum, comm, nullptr);
  if (r != collInvalidUsage)
    failNow(std::string("device allreduce without a GPU backend: got ") + collGetErrorString(r));
  const char *needle = "could not be loaded";
  if (!std::strstr(collGetLastError(comm), needle))
    failNow(std::string("message '") + collGetLastError(comm) + "' lacks '" + needle + "'");
  int supported = 1;
  char why[512] = {};
  check(collDeviceBuffersSupported(&supported, why, sizeof why), "collDeviceBuffersSupported");
  if (supported || !std::strstr(why, needle))
    failNow(std::string("collDeviceBuffersSupported: ") + std::to_string(supported) + " " + why);
  hostAllreduceGoesOn();
  checks += 3;
}

/// gpu-unmappable (COLL_EMULATED_IPC=fail: the emulation cannot map another
/// process's memory): no rank can map its peers' FIFOs. A device call fails
/// on every rank with a report naming the mapping, well within the watchdog
/// period, and so does the next one; host calls go on. For the emulation
/// only: on a GPU the mapping works.
void gpuUnmappable() {
  std::vector<unsigned char> host(64 * 4, 0);
  DeviceBuffer d(host);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const auto start = std::chrono::steady_clock::now();
    collResult_t r = collAllReduce(d.ptr, d.ptr, 64, collFloat32, collSum, comm, nullptr);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    if (r == collSuccess)
      failNow("a device allreduce whose FIFOs cannot be mapped succeeded");
    const std::string message = collGetLastError(comm);
    for (const char *needle : {"cannot map rank", "cudaErrorMapBufferObjectFailed"})
      if (message.find(needle) == std::string::npos)
        failNow("attempt " + std::to_string(attempt) + ": message '" + message + "' lacks '" +
                needle + "'");
    if (ms > coll::testing::scaledMs(5000))
      failNow("the refusal took " + std::to_string(ms) + " ms");
  }
  hostAllreduceGoesOn();
  checks += 3;
}

#if COLL_TEST_STANDIN
// The stand-in CUDA runtime's test hook: memory of libcoll's emulated GPU
// backend is device memory here too (tests/runtime/dropin/cudart_standin.c).
extern "C" int collStandinAdoptDeviceMemory(void *ptr, size_t size);
extern "C" void collStandinForgetDeviceMemory(void *ptr);
#endif

/// gpu-windows (with a tuning file naming direct programs: direct.tuning):
/// a window of GPU memory (collMemAllocDevice) registered by every rank,
/// and allreduces and allgathers of a direct program on buffers at each
/// rank's own offsets in it, out of place, in place, and with rank 0's
/// recvbuff outside its window (copied through its area) while the others'
/// are in theirs; collMemFree refuses the memory while it is registered.
void gpuWindows() {
  const size_t count = 3001;
  const size_t bytes = (2 + static_cast<size_t>(nranks)) * count * sizeof(float) + 4096;
  void *mem = nullptr;
  check(collMemAllocDevice(&mem, bytes, -1), "collMemAllocDevice");
#if COLL_TEST_STANDIN
  if (collStandinAdoptDeviceMemory(mem, bytes) != 0)
    failNow("the stand-in could not adopt collMemAllocDevice's memory");
#endif
  collWindow_t win = nullptr;
  check(collCommWindowRegister(comm, mem, bytes, &win, COLL_WIN_DEFAULT), "collCommWindowRegister");
  if (collMemFree(mem) != collInvalidUsage)
    failNow("collMemFree of registered memory did not fail with collInvalidUsage");
  std::vector<unsigned char> zeros(static_cast<size_t>(nranks) * count * sizeof(float), 0);
  DeviceBuffer outside(zeros);
  float *base = static_cast<float *>(mem) + 3 * rank + 1;
  auto value = [](int r, size_t i, int round) { return float(r + int(i % 5) + round); };
  for (int round = 0; round < 3; ++round) {
    std::vector<float> in(count);
    for (size_t i = 0; i < count; ++i)
      in[i] = value(rank, i, round);
    float *send = base + round;
    float *recv = round == 1 ? send : send + count + 7;
    if (round == 2 && rank == 0)
      recv = static_cast<float *>(outside.ptr);
    cudaCheck(cudaMemcpy(send, in.data(), count * sizeof(float), cudaMemcpyHostToDevice),
              "cudaMemcpy to device");
    check(collAllReduce(send, recv, count, collFloat32, collSum, comm, nullptr), "collAllReduce");
    cudaCheck(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
    std::vector<float> out(count);
    cudaCheck(cudaMemcpy(out.data(), recv, count * sizeof(float), cudaMemcpyDeviceToHost),
              "cudaMemcpy to host");
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < nranks; ++r)
        want += value(r, i, round);
      if (out[i] != want)
        failNow("round " + std::to_string(round) + ": allreduce element " + std::to_string(i) +
                " is " + std::to_string(out[i]) + ", not " + std::to_string(want));
    }
    // An allgather out of place (its recvbuff holds every rank's block).
    if (round != 1) {
      check(collAllGather(send, recv, count, collFloat32, comm, nullptr), "collAllGather");
      cudaCheck(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
      std::vector<float> all(static_cast<size_t>(nranks) * count);
      cudaCheck(cudaMemcpy(all.data(), recv, all.size() * sizeof(float), cudaMemcpyDeviceToHost),
                "cudaMemcpy to host");
      for (int r = 0; r < nranks; ++r)
        for (size_t i = 0; i < count; i += 13)
          if (all[r * count + i] != value(r, i, round))
            failNow("round " + std::to_string(round) + ": allgather block " + std::to_string(r) +
                    " element " + std::to_string(i) + " is " + std::to_string(all[r * count + i]));
    }
    checks += 2;
  }
  check(collCommWindowDeregister(comm, win), "collCommWindowDeregister");
#if COLL_TEST_STANDIN
  collStandinForgetDeviceMemory(mem);
#endif
  check(collMemFree(mem), "collMemFree");
  checks += 1;
}

/// gpu-trace (COLL_TRACE, set by main before init): an allreduce and an
/// allgather on device buffers, checked; after destroy, checkGpuTraceFile
/// finds both calls and the kernel's step slices in this rank's file.
void gpuTrace() {
  const size_t count = 3000;
  std::vector<unsigned char> bytes(count * 4), all(count * 4 * size_t(nranks), 0);
  for (size_t i = 0; i < count; ++i) {
    const float v = float(rank + 1);
    std::memcpy(bytes.data() + 4 * i, &v, 4);
  }
  DeviceBuffer d(bytes), gathered(all);
  check(collAllReduce(d.ptr, d.ptr, count, collFloat32, collSum, comm, nullptr), "allreduce");
  check(collAllGather(d.ptr, gathered.ptr, count, collFloat32, comm, nullptr), "allgather");
  cudaCheck(cudaDeviceSynchronize(), "the traced calls");
  const float sum = float(nranks * (nranks + 1) / 2);
  std::vector<unsigned char> out = gathered.download();
  for (int r = 0; r < nranks; ++r) {
    float v = 0;
    std::memcpy(&v, out.data() + size_t(r) * count * 4, 4);
    if (v != sum)
      failNow("allreduce then allgather: block " + std::to_string(r) + " holds " +
              std::to_string(v) + ", expected " + std::to_string(sum));
  }
  checks += 2;
}

void setGpuTracePath() { setenv("COLL_TRACE", gpuTracePath(false).c_str(), 1); }

/// The file gpu-trace's rank wrote: two call slices and step slices
/// (counted in the text: the format is the host backend's, checked in
/// depth by the host and emulation tests); removed afterwards.
void checkGpuTraceFile() {
  const std::string path = gpuTracePath(true);
  std::FILE *f = std::fopen(path.c_str(), "r");
  if (!f)
    failNow("COLL_TRACE wrote no " + path);
  std::string text;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
    text.append(buf, n);
  std::fclose(f);
  std::remove(path.c_str());
  auto countOf = [&](const std::string &needle) {
    size_t n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
      ++n;
    return n;
  };
  const size_t calls = countOf("\"cat\":\"call\""), steps = countOf("\"cat\":\"step\"");
  if (calls != 2 || steps == 0)
    failNow(path + ": " + std::to_string(calls) + " call slices and " + std::to_string(steps) +
            " step slices; expected 2 calls and their steps");
  ++checks;
}

/// gpu-kill: the last rank dies after a first device allreduce; the others'
/// next one (enqueued, so the call itself succeeds) ends at the kernel's
/// watchdog (COLL_WATCHDOG_MS=3000 here, scaled), and collCommGetAsyncError
/// says so, naming the dead process. Prints "rank R: error CODE after MS ms: ...".
/// A first device allreduce on `d`, waited for, then a barrier through the
/// host backend, so that every rank has finished it.
void firstAllreduceThenBarrier(const DeviceBuffer &d, size_t count) {
  check(collAllReduce(d.ptr, d.ptr, count, collFloat32, collSum, comm, nullptr), "first allreduce");
  cudaCheck(cudaDeviceSynchronize(), "first allreduce");
  check(collGroupStart(), "group start");
  std::vector<float> token(1, 1.0f);
  check(collAllReduce(token.data(), token.data(), 1, collFloat32, collSum, comm, nullptr), "token");
  check(collGroupEnd(), "group end");
}

/// How a device allreduce that cannot complete ended: its own result, or
/// (enqueued, so the call itself may succeed) collCommGetAsyncError's,
/// polled for up to 30 s (scaled). Prints "rank R: error CODE after MS ms: ...".
struct Ended {
  collResult_t result;
  long ms;
  std::string message;
};
Ended allreduceUntilError(const DeviceBuffer &d, size_t count) {
  const auto start = Clock::now();
  collResult_t r = collAllReduce(d.ptr, d.ptr, count, collFloat32, collSum, comm, nullptr);
  collResult_t async = collSuccess;
  while (r == collSuccess && async == collSuccess &&
         Clock::now() - start < std::chrono::seconds(coll::testing::scaledSeconds(30))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    check(collCommGetAsyncError(comm, &async), "collCommGetAsyncError");
  }
  Ended e{r != collSuccess ? r : async,
          long(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count()),
          collGetLastError(comm)};
  std::printf("rank %d: error %d after %ld ms: %s\n", rank, int(e.result), e.ms,
              e.message.c_str());
  return e;
}

void gpuKill() {
  const size_t count = 1 << 20;
  std::vector<unsigned char> host(count * 4, 0);
  DeviceBuffer d(host);
  firstAllreduceThenBarrier(d, count);
  if (rank == nranks - 1) {
    std::printf("rank %d: dying now\n", rank);
    std::fflush(stdout);
    raise(SIGKILL);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(coll::testing::scaledMs(200)));
  const auto [got, ms, message] = allreduceUntilError(d, count);
  if (got != collRemoteError && got != collTimeout)
    failNow("the survivor's call did not end with collRemoteError or collTimeout");
  if (ms > coll::testing::scaledMs(3000 + 2000))
    failNow("the survivor's call ended " + std::to_string(ms) + " ms after it was issued");
  check(collCommDestroy(comm), "destroy after the peer died");
  comm = nullptr;
  std::printf("rank %d: ok %ld checks\n", rank, checks + 1);
  std::fflush(stdout);
  std::_Exit(0);
}

/// gpu-lost: the last rank's GPU is lost after a first device allreduce
/// (the emulation's planted fault COLL_EMULATED_GPU_LOST=1: from the next
/// launch on, every use of the device fails with cudaErrorLaunchFailure, as
/// after a GPU falls off the bus or is reset). Its next device allreduce
/// must fail at once, naming the CUDA error. It raises the host's stop word,
/// which the others' kernels poll (CudaOptions::hostStop): their calls must
/// end within 3 s, far inside the watchdog period (COLL_WATCHDOG_MS=20000
/// here, scaled), naming that rank's failure.
/// Every rank then destroys its communicator; the driver checks that
/// nothing is left in /dev/shm. Prints "rank R: error CODE after MS ms: ...".
/// Only the stand-in build can plant the fault: elsewhere it skips (77).
void gpuLost() {
#if COLL_TEST_STANDIN
  const size_t count = 1 << 16;
  std::vector<unsigned char> host(count * 4, 0);
  DeviceBuffer d(host);
  firstAllreduceThenBarrier(d, count);
  const bool lost = rank == nranks - 1;
  if (lost) {
    // After the others have left the barrier: its failure stops their
    // calls, and must stop the allreduce, not the barrier.
    std::this_thread::sleep_for(std::chrono::milliseconds(coll::testing::scaledMs(200)));
    setenv("COLL_EMULATED_GPU_LOST", "1", 1);
  }
  const auto [got, ms, message] = allreduceUntilError(d, count);
  if (lost) {
    if (got != collUnhandledCudaError)
      failNow("the rank whose GPU was lost did not get collUnhandledCudaError");
    if (message.find("cudaErrorLaunchFailure") == std::string::npos)
      failNow("the lost GPU's error does not name cudaErrorLaunchFailure");
    if (ms > coll::testing::scaledMs(2000))
      failNow("the lost GPU's call took " + std::to_string(ms) + " ms to fail");
    // The communicator is broken: the next call says so at once.
    if (collAllReduce(d.ptr, d.ptr, count, collFloat32, collSum, comm, nullptr) == collSuccess)
      failNow("a call after the GPU was lost succeeded");
    checks += 3;
  } else {
    if (got != collRemoteError)
      failNow("the survivor's call did not end with collRemoteError");
    if (message.find("rank " + std::to_string(nranks - 1) + "'s device failed") ==
            std::string::npos ||
        message.find("stopped at rank " + std::to_string(rank)) == std::string::npos)
      failNow("the survivor's error names neither the failed device nor where its kernel stopped");
    if (ms > coll::testing::scaledMs(3000))
      failNow("the survivor's call ended " + std::to_string(ms) + " ms after it was issued");
    checks += 3;
  }
  // Destroy may report the broken state; it must return, and free what it holds.
  const collResult_t destroyed = collCommDestroy(comm);
  std::printf("rank %d: destroy returned %d\n", rank, int(destroyed));
  comm = nullptr;
  std::printf("rank %d: ok %ld checks\n", rank, checks + 1);
  std::fflush(stdout);
  std::_Exit(0);
#else
  std::printf("rank %d: skip: gpu-lost plants its fault in the emulation (the stand-in build)\n",
              rank);
  std::fflush(stdout);
  std::_Exit(77);
#endif
}

/// gpu-abort: rank 0's device allreduce waits for ranks that never join it
/// (COLL_WATCHDOG_MS=20000 here, scaled); collCommAbort must stop its kernel
/// and return within 2 s (scaled), and so must the others'.
void gpuAbort() {
  const size_t count = 1 << 20;
  std::vector<unsigned char> host(count * 4, 0);
  DeviceBuffer d(host);
  check(collAllReduce(d.ptr, d.ptr, count, collFloat32, collSum, comm, nullptr), "first allreduce");
  cudaCheck(cudaDeviceSynchronize(), "first allreduce");
  if (rank == 0)
    check(collAllReduce(d.ptr, d.ptr, count, collFloat32, collSum, comm, nullptr),
          "the allreduce nobody joins");
  std::this_thread::sleep_for(std::chrono::milliseconds(coll::testing::scaledMs(300)));
  const auto start = Clock::now();
  check(collCommAbort(comm), "collCommAbort");
  comm = nullptr;
  const long ms =
      long(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
  std::printf("rank %d: abort took %ld ms\n", rank, ms);
  if (ms > coll::testing::scaledMs(2000))
    failNow("collCommAbort took " + std::to_string(ms) + " ms with a kernel in flight");
  std::printf("rank %d: ok %ld checks\n", rank, checks + 1);
  std::fflush(stdout);
  std::_Exit(0);
}
#endif

//===----------------------------------------------------------------------===//
// Every collective against the host backend
//===----------------------------------------------------------------------===//

/// Every collective on `target`; each call's output must equal, bit for
/// bit, the same call on the host backend (`comm` with host buffers), with
/// inputs that are not small integers, so that the order of every
/// reduction shows.
void compareScenario(bool small, Target target) {
  collComm_t dev = comm;
  if (target == Target::Emulated) {
    collConfig_t config = COLL_CONFIG_INITIALIZER;
    config.emulatedDevice = 1;
    check(collCommSplit(comm, 0, rank, &dev, &config), "split onto the emulated device");
  }
  const char *where = target == Target::Emulated ? "emulated device" : "GPU";
#if COLL_TEST_GPU
  // Calls alternate between a stream of the caller's and the legacy
  // default stream.
  cudaStream_t gpuStream = nullptr;
  if (target == Target::Gpu)
    cudaCheck(cudaStreamCreate(&gpuStream), "cudaStreamCreate");
  unsigned calls = 0;
#endif
  struct TypeCase {
    collDataType_t type;
    size_t size;
    const char *name;
  };
  const TypeCase types[] = {{collFloat32, 4, "fp32"}, {collFloat64, 8, "fp64"},
                            {collBfloat16, 2, "bf16"}, {collInt32, 4, "int32"},
                            {collInt8, 1, "int8"}};
  std::vector<size_t> counts = {0, 1, 7, 1000, 65536 + 3};
  if (!small)
    counts.push_back(1 << 20);
  const Coll all[] = {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::AllToAll,
                      Coll::Broadcast, Coll::Reduce,    Coll::Gather,        Coll::Scatter};
  uint32_t seed = 12345u + uint32_t(rank) * 7919u;
  auto fill = [&](std::vector<unsigned char> &buf, const TypeCase &t) {
    for (size_t i = 0; i < buf.size() / t.size; ++i) {
      seed = seed * 1664525u + 1013904223u;
      const float f = float(int32_t(seed >> 8) % 20000) / 997.0f; // not exact in bf16
      unsigned char *p = buf.data() + i * t.size;
      if (t.type == collFloat32) {
        std::memcpy(p, &f, 4);
      } else if (t.type == collFloat64) {
        const double d = double(f) / 3.0;
        std::memcpy(p, &d, 8);
      } else if (t.type == collBfloat16) {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        const uint16_t h = uint16_t(bits >> 16);
        std::memcpy(p, &h, 2);
      } else if (t.type == collInt32) {
        const int32_t x = int32_t(seed >> 4);
        std::memcpy(p, &x, 4);
      } else {
        *p = static_cast<unsigned char>(seed >> 24);
      }
    }
  };
  auto runBoth = [&](Coll coll, const TypeCase &t, collRedOp_t op, size_t count, bool inplace,
                     int root) {
    const size_t n = size_t(nranks);
    const bool inPerRank =
        coll == Coll::ReduceScatter || coll == Coll::AllToAll || coll == Coll::Scatter;
    const bool outPerRank =
        coll == Coll::AllGather || coll == Coll::AllToAll || coll == Coll::Gather;
    const size_t inElems = inPerRank ? n * count : count;
    const size_t outElems = outPerRank ? n * count : count;
    const size_t bigElems = std::max<size_t>(std::max(inElems, outElems), 1);
    size_t inOffset = 0;
    if (outPerRank && !inPerRank)
      inOffset = size_t(rank) * count;
    std::vector<unsigned char> input(std::max<size_t>(inElems, 1) * t.size);
    fill(input, t);
    std::vector<unsigned char> result[2];
    for (int d = 0; d < 2; ++d) {
      collComm_t c = d ? dev : comm;
      std::vector<unsigned char> big(bigElems * t.size, 0xcd), recvBuf(bigElems * t.size, 0xcd);
      std::vector<unsigned char> sendBuf = input;
      unsigned char *sendBase = sendBuf.data(), *recvBase = recvBuf.data(), *bigBase = big.data();
      void *stream = nullptr;
#if COLL_TEST_GPU
      std::unique_ptr<DeviceBuffer> dSend, dRecv, dBig;
      if (d && target == Target::Gpu) {
        dSend = std::make_unique<DeviceBuffer>(sendBuf);
        dRecv = std::make_unique<DeviceBuffer>(recvBuf);
        if (inplace)
          std::memcpy(big.data() + inOffset * t.size, input.data(), inElems * t.size);
        dBig = std::make_unique<DeviceBuffer>(big);
        sendBase = dSend->at(0);
        recvBase = dRecv->at(0);
        bigBase = dBig->at(0);
        stream = calls++ % 2 ? nullptr : gpuStream;
      }
#endif
      const void *send = sendBase;
      void *recv = recvBase;
      if (inplace) {
        if (!(d && target == Target::Gpu))
          std::memcpy(big.data() + inOffset * t.size, input.data(), inElems * t.size);
        send = bigBase + inOffset * t.size;
        recv = bigBase;
        if (inPerRank && !outPerRank)
          recv = bigBase + size_t(rank) * count * t.size;
      }
      collResult_t r = collSuccess;
      switch (coll) {
      case Coll::AllReduce:
        r = collAllReduce(send, recv, count, t.type, op, c, stream);
        break;
      case Coll::AllGather:
        r = collAllGather(send, recv, count, t.type, c, stream);
        break;
      case Coll::ReduceScatter:
        r = collReduceScatter(send, recv, count, t.type, op, c, stream);
        break;
      case Coll::AllToAll:
        r = collAlltoAll(send, recv, count, t.type, c, stream);
        break;
      case Coll::Broadcast:
        r = collBroadcast(send, recv, count, t.type, root, c, stream);
        break;
      case Coll::Reduce:
        r = collReduce(send, recv, count, t.type, op, root, c, stream);
        break;
      case Coll::Gather:
        r = collGather(send, recv, count, t.type, root, c, stream);
        break;
      case Coll::Scatter:
        r = collScatter(send, recv, count, t.type, root, c, stream);
        break;
      }
      char what[200];
      std::snprintf(what, sizeof what, "%s %s count %zu %s op %d root %d on the %s", collName(coll),
                    t.name, count, inplace ? "in-place" : "out-of-place", int(op), root,
                    d ? where : "host");
      if (r != collSuccess) {
        comm = c; // collGetLastError of the failing communicator
        check(r, what);
      }
#if COLL_TEST_GPU
      if (d && target == Target::Gpu) {
        cudaCheck(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), what);
        collResult_t async = collSuccess;
        check(collCommGetAsyncError(c, &async), "collCommGetAsyncError");
        check(async, what);
        result[d] = inplace ? dBig->download() : dRecv->download();
        if (!inplace && dSend->download() != input)
          failNow(std::string(what) + ": the device send buffer changed");
        continue;
      }
#endif
      result[d] = inplace ? big : recvBuf;
    }
    const bool hasOutput = !(coll == Coll::Reduce || coll == Coll::Gather) || rank == root;
    if (hasOutput && result[0] != result[1]) {
      size_t e = 0;
      while (std::memcmp(result[0].data() + e * t.size, result[1].data() + e * t.size, t.size) == 0)
        ++e;
      char msg[240];
      std::snprintf(msg, sizeof msg,
                    "%s %s count %zu %s root %d: element %zu differs between the host and the "
                    "%s",
                    collName(coll), t.name, count, inplace ? "in-place" : "out-of-place", root, e,
                    where);
      failNow(msg);
    }
    ++checks;
  };
  for (Coll coll : all)
    for (const TypeCase &t : types)
      for (size_t count : counts)
        for (bool inplace : {false, true}) {
          if ((t.type != collFloat32 && count > (1u << 17)) || (inplace && count > (1u << 17)))
            continue;
          const bool reduces =
              coll == Coll::AllReduce || coll == Coll::ReduceScatter || coll == Coll::Reduce;
          if (!reduces && t.type != collFloat32 && t.type != collInt8)
            continue; // moving data does not depend on the type
          const int root = int((count + size_t(t.size)) % size_t(nranks));
          runBoth(coll, t, collSum, count, inplace, root);
        }
  for (Coll coll : {Coll::AllReduce, Coll::ReduceScatter, Coll::Reduce})
    for (collRedOp_t op : {collProd, collMin, collMax, collAvg})
      for (const TypeCase &t : types)
        runBoth(coll, t, op, 1001, false, nranks - 1);
  if (target == Target::Emulated) {
    check(collCommFinalize(dev), "finalize the emulated device's communicator");
    check(collCommDestroy(dev), "destroy the emulated device's communicator");
  }
#if COLL_TEST_GPU
  if (target == Target::Gpu) {
    gpuQueue(gpuStream);
    gpuErrors();
    cudaCheck(cudaStreamDestroy(gpuStream), "cudaStreamDestroy");
  }
#endif
}

/// `device-refused --all N`: N ranks of this process on the emulated
/// device (collCommInitAll, COLL_EMULATED_DEVICE=1), whose GPU is made too
/// small (COLL_EMULATED_SMS) for some programs' blocks to be resident at
/// once. A 1 MiB allreduce, whose first choice does not fit, is served by
/// the next program that does, with the host's result on every rank; an
/// alltoall, which no program fits, fails on every rank with
/// collInvalidUsage saying why (issue 30: what the runtime takes on must
/// succeed, or fail before it starts, saying so).
int deviceRefused(int n) {
  rank = 0;
  nranks = n;
  if (n < 2)
    return 2;
  std::vector<collComm_t> comms(n);
  check(collCommInitAll(comms.data(), n, nullptr), "collCommInitAll");
  comm = comms[0];
  const size_t count = 1 << 18; // 1 MiB of fp32
  std::vector<std::vector<float>> data(n, std::vector<float>(count));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      data[r][i] = float(r + int(i % 5));
  check(collGroupStart(), "group start");
  for (int r = 0; r < n; ++r)
    check(collAllReduce(data[r].data(), data[r].data(), count, collFloat32, collSum, comms[r],
                        nullptr),
          "allreduce");
  check(collGroupEnd(), "allreduce whose first program does not fit");
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; i += 997)
      if (data[r][i] != float(n * (n - 1) / 2 + n * int(i % 5)))
        failNow("rank " + std::to_string(r) + " element " + std::to_string(i) + " is " +
                std::to_string(data[r][i]));
  ++checks;
  std::vector<std::vector<float>> in(n, std::vector<float>(size_t(n) * 64, 1.0f)),
      out(n, std::vector<float>(size_t(n) * 64));
  check(collGroupStart(), "group start");
  std::vector<collResult_t> results(n);
  for (int r = 0; r < n; ++r)
    results[r] = collAlltoAll(in[r].data(), out[r].data(), 64, collFloat32, comms[r], nullptr);
  const collResult_t end = collGroupEnd();
  if (end != collInvalidUsage)
    failNow(std::string("an alltoall no program fits ended with ") + collGetErrorString(end) +
            ", not collInvalidUsage");
  const std::string why = collGetLastError(comms[0]);
  if (why.find("could not run on this communicator's devices") == std::string::npos)
    failNow("the alltoall's error does not say why: " + why);
  ++checks;
  for (int r = 0; r < n; ++r)
    check(collCommDestroy(comms[r]), "destroy");
  comm = nullptr;
  std::printf("rank 0..%d: ok %ld checks\n", n - 1, checks);
  return 0;
}

#if COLL_TEST_GPU
/// `gpu-all --all N`: N ranks of this process on GPU 0 (collCommInitAll),
/// driven by this thread through groups, every rank's call on a stream of
/// its own, on one shared stream and on the legacy default stream, against
/// N host ranks of this process running the same calls. With
/// COLL_TEST_GPUS=G (multi-device): the ranks spread over GPUs 0 to G - 1
/// (rank r on GPU r * G / N), each rank's buffers and stream on its GPU,
/// and no stream shared between GPUs; this thread's current device is
/// whatever the last allocation left, so the library must set each rank's.
int allInOneProcess(int n) {
  rank = 0;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("rank ?: skip: no CUDA device\n");
    return 77;
  }
  if (n < 1)
    return 2;
  int gpus = 1;
  if (const char *g = std::getenv("COLL_TEST_GPUS"))
    gpus = std::atoi(g);
  if (gpus < 1 || gpus > n || gpus > count) {
    std::printf("rank ?: skip: COLL_TEST_GPUS=%d needs that many of the %d devices and at most "
                "%d ranks\n",
                gpus, count, n);
    return 77;
  }
  nranks = n;
  std::vector<collComm_t> gpu(n), host(n);
  std::vector<int> devices(n, 0);
  for (int r = 0; r < n; ++r)
    devices[r] = r * gpus / n;
  check(collCommInitAll(gpu.data(), n, devices.data()),
        gpus == 1 ? "collCommInitAll on GPU 0" : "collCommInitAll on several GPUs");
  check(collCommInitAll(host.data(), n, nullptr), "collCommInitAll on the host");
  std::vector<cudaStream_t> own(n);
  for (int r = 0; r < n; ++r) {
    cudaCheck(cudaSetDevice(devices[r]), "cudaSetDevice");
    cudaCheck(cudaStreamCreate(&own[r]), "cudaStreamCreate");
  }
  cudaCheck(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t shared = nullptr;
  cudaCheck(cudaStreamCreateWithFlags(&shared, cudaStreamNonBlocking), "cudaStreamCreate");
  const size_t counts[] = {1, 1000, 262147};
  uint32_t seed = 99u;
  int call = 0;
  for (Coll coll : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::AllToAll,
                    Coll::Broadcast, Coll::Reduce})
    for (size_t elems : counts) {
      // 0: own streams, 1: one shared stream (one GPU only), 2: legacy
      const int streams = gpus == 1 ? call++ % 3 : 2 * (call++ % 2);
      const bool inPerRank = coll == Coll::ReduceScatter || coll == Coll::AllToAll;
      const bool outPerRank = coll == Coll::AllGather || coll == Coll::AllToAll;
      const size_t inElems = inPerRank ? size_t(n) * elems : elems;
      const size_t outElems = outPerRank ? size_t(n) * elems : elems;
      const int root = int(elems % size_t(n));
      std::vector<std::vector<unsigned char>> in(n), hostOut(n);
      std::vector<std::unique_ptr<DeviceBuffer>> dIn, dOut;
      for (int r = 0; r < n; ++r) {
        in[r].resize(inElems * 4);
        for (size_t i = 0; i < inElems; ++i) {
          seed = seed * 1664525u + 1013904223u;
          const float f = float(int32_t(seed >> 8) % 20000) / 997.0f;
          std::memcpy(in[r].data() + 4 * i, &f, 4);
        }
        hostOut[r].assign(outElems * 4, 0xcd);
        cudaCheck(cudaSetDevice(devices[r]), "cudaSetDevice");
        dIn.push_back(std::make_unique<DeviceBuffer>(in[r]));
        dOut.push_back(std::make_unique<DeviceBuffer>(hostOut[r]));
      }
      auto issue = [&](collComm_t c, const void *send, void *recv, void *stream) {
        switch (coll) {
        case Coll::AllReduce:
          return collAllReduce(send, recv, elems, collFloat32, collSum, c, stream);
        case Coll::AllGather:
          return collAllGather(send, recv, elems, collFloat32, c, stream);
        case Coll::ReduceScatter:
          return collReduceScatter(send, recv, elems, collFloat32, collSum, c, stream);
        case Coll::AllToAll:
          return collAlltoAll(send, recv, elems, collFloat32, c, stream);
        case Coll::Broadcast:
          return collBroadcast(send, recv, elems, collFloat32, root, c, stream);
        case Coll::Reduce:
          return collReduce(send, recv, elems, collFloat32, collSum, root, c, stream);
        default:
          return collInternalError;
        }
      };
      char what[160];
      std::snprintf(what, sizeof what, "%s of %zu fp32 on %d ranks of %d GPUs (%s)",
                    collName(coll), elems, n, gpus,
                    streams == 0   ? "a stream per rank"
                    : streams == 1 ? "one shared stream"
                                   : "the legacy default stream");
      check(collGroupStart(), "group start");
      for (int r = 0; r < n; ++r)
        check(issue(host[r], in[r].data(), hostOut[r].data(), nullptr), "host call");
      check(collGroupEnd(), "host group");
      check(collGroupStart(), "group start");
      for (int r = 0; r < n; ++r) {
        void *stream = streams == 0 ? own[r] : streams == 1 ? shared : nullptr;
        comm = gpu[r];
        check(issue(gpu[r], dIn[r]->ptr, dOut[r]->ptr, stream), what);
      }
      check(collGroupEnd(), what);
      for (int d = 0; d < gpus; ++d) {
        cudaCheck(cudaSetDevice(d), "cudaSetDevice");
        cudaCheck(cudaDeviceSynchronize(), what);
      }
      for (int r = 0; r < n; ++r) {
        collResult_t async = collSuccess;
        check(collCommGetAsyncError(gpu[r], &async), "collCommGetAsyncError");
        comm = gpu[r];
        check(async, what);
        const bool hasOutput = coll != Coll::Reduce || r == root;
        if (hasOutput && dOut[r]->download() != hostOut[r])
          failNow(std::string(what) + ": rank " + std::to_string(r) +
                  "'s output differs from the host's");
        ++checks;
      }
    }
  for (int r = 0; r < n; ++r) {
    comm = gpu[r];
    check(collCommDestroy(gpu[r]), "destroy");
    check(collCommDestroy(host[r]), "destroy");
    cudaSetDevice(devices[r]);
    cudaStreamDestroy(own[r]);
  }
  cudaStreamDestroy(shared);
  std::printf("rank 0..%d: ok %ld checks\n", n - 1, checks);
  return 0;
}
#endif

} // namespace rankcheck
