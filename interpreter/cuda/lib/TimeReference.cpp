//===- TimeReference.cpp - collbench's reference kernels ------------------===//
//
// DeviceBackend::timeReference: the one-launch references of
// device/References.cuh, which collbench times beside a program's calls
// (docs/BENCHMARKS.md): allocated, filled, run once and checked, then
// timed with events around each launch.
//
//===----------------------------------------------------------------------===//

#include "Device.h"

#include "device/DeviceTypes.h"
#include "device/Kernels.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace coll::interp::cuda {

static_assert(cuda::MaxReferenceRanks == interp::MaxReferenceRanks);

/// collbench's one-launch references (device/References.cuh): allocates,
/// fills the inputs, runs the kernel once and checks its result, then times
/// `q.iters` launches after `q.warmup`.
llvm::Expected<std::vector<double>> runReference(const ReferenceRequest &q) {
  const bool reduces = q.kind == ReferenceKind::ReduceOnce || q.kind == ReferenceKind::Exchange;
  const char *name = referenceName(q.kind);
  auto bad = [&](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   llvm::Twine("the ") + name + " reference: " + why);
  };
  if (q.bytes == 0)
    return bad("no bytes to move");
  if (q.threads == 0 || q.threads % 32 != 0 || q.threads > 1024)
    return bad(llvm::formatv("{0} threads per block (a multiple of 32, at most 1024)", q.threads));
  if (reduces && (q.nranks < 1 || q.nranks > interp::MaxReferenceRanks))
    return bad(llvm::formatv("{0} ranks (1 to {1})", q.nranks, interp::MaxReferenceRanks));
  if (reduces && q.bytes % sizeof(float) != 0)
    return bad(llvm::formatv("{0} bytes is not a whole number of fp32 elements", q.bytes));
  if (q.kind == ReferenceKind::Exchange && q.bytes > MaxExchangeReferenceBytes)
    return bad(llvm::formatv("{0} bytes per rank is above its {1}", q.bytes,
                             MaxExchangeReferenceBytes));
  if (q.kind == ReferenceKind::Fifo && (q.slotBytes == 0 || q.slotBytes > (64u << 20)))
    return bad(llvm::formatv("a slot of {0} bytes (1 to 64 MiB, as the executor's FIFOs)",
                             q.slotBytes));
  const bool counted = q.kind == ReferenceKind::Steps || q.kind == ReferenceKind::Hops;
  // Each launch's hops take flags of their own, never 0: all of the run's
  // must fit 32 bits.
  const uint64_t launchesInAll = uint64_t(q.warmup) + q.iters + 1;
  if (counted && (q.steps == 0 || q.steps > MaxReferenceSteps))
    return bad(llvm::formatv("{0} steps (1 to {1})", q.steps, MaxReferenceSteps));
  if (q.kind == ReferenceKind::Steps && (q.bytes + q.steps - 1) / q.steps > (64u << 20))
    return bad(llvm::formatv("steps of {0} bytes (at most 64 MiB, as the kernel's)",
                             (q.bytes + q.steps - 1) / q.steps));
  if (q.kind == ReferenceKind::Hops && (q.bytes % 4 != 0 || q.bytes > MaxExchangeReferenceBytes))
    return bad(llvm::formatv("a message of {0} bytes (a multiple of 4, at most {1}: LL words "
                             "of 4 data bytes)",
                             q.bytes, MaxExchangeReferenceBytes));
  if (q.kind == ReferenceKind::Hops && launchesInAll * q.steps >= 0xffffffffull)
    return bad(llvm::formatv("{0} launches of {1} hops (their flags must fit 32 bits)",
                             launchesInAll, q.steps));
  const int32_t nbuf = reduces ? q.nranks : 1;
  const uint64_t n = q.bytes / sizeof(float);
  std::vector<void *> allocations;
  cudaStream_t stream = nullptr;
  auto release = llvm::make_scope_exit([&] {
    if (stream)
      cudaStreamSynchronize(stream);
    for (void *p : allocations)
      cudaFree(p);
    if (stream)
      cudaStreamDestroy(stream);
  });
  auto alloc = [&](uint64_t bytes, void *&p) -> llvm::Error {
    COLL_CUDA_TRY(cudaMalloc(&p, std::max<uint64_t>(bytes, 1)));
    allocations.push_back(p);
    COLL_CUDA_TRY(cudaMemset(p, 0, bytes));
    return llvm::Error::success();
  };
  cuda::ReferenceRanks ranks{};
  std::vector<std::vector<unsigned char>> inputs(nbuf);
  for (int32_t r = 0; r < nbuf; ++r) {
    void *in = nullptr, *out = nullptr;
    if (llvm::Error err = alloc(q.bytes, in))
      return err;
    if (llvm::Error err = alloc(q.bytes, out))
      return err;
    ranks.in[r] = static_cast<const float *>(in);
    ranks.out[r] = static_cast<float *>(out);
    // Copies: bytes of a hash of the offset, so that no shift of the
    // message reproduces it (a pattern of period 256 hid one).
    // Reductions: small integers, whose every fp32 sum is exact in any order.
    inputs[r].resize(q.bytes);
    for (uint64_t i = 0; i < q.bytes; ++i) {
      uint64_t x = i + uint64_t(r) * 0x9e3779b97f4a7c15ull;
      x = (x ^ (x >> 33)) * 0xff51afd7ed558ccdull;
      inputs[r][i] = static_cast<unsigned char>(x ^ (x >> 33));
    }
    if (reduces)
      for (uint64_t i = 0; i < n; ++i) {
        const float v = float((r + 1) * (i % 13 + 1));
        std::memcpy(&inputs[r][i * sizeof(float)], &v, sizeof v);
      }
    COLL_CUDA_TRY(cudaMemcpy(in, inputs[r].data(), q.bytes, cudaMemcpyHostToDevice));
  }
  void *stalled = nullptr, *lines = nullptr, *slots = nullptr, *counters = nullptr;
  if (llvm::Error err = alloc(sizeof(uint32_t), stalled))
    return err;
  if (q.kind == ReferenceKind::Exchange)
    if (llvm::Error err = alloc(uint64_t(q.nranks) * q.nranks * n * sizeof(uint64_t), lines))
      return err;
  if (q.kind == ReferenceKind::Fifo) {
    if (llvm::Error err = alloc(FifoDepth * q.slotBytes, slots))
      return err;
    if (llvm::Error err = alloc(2 * PollStride, counters))
      return err;
  }
  if (q.kind == ReferenceKind::Hops) // two inboxes of bytes / 4 words
    if (llvm::Error err = alloc(2 * (q.bytes / 4) * sizeof(uint64_t), lines))
      return err;
  COLL_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int device = 0, sms = 1;
  COLL_CUDA_TRY(cudaGetDevice(&device));
  COLL_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));

  const void *kernel = nullptr;
  switch (q.kind) {
  case ReferenceKind::ReduceOnce: kernel = cuda::referenceKernel(cuda::ReferenceKernel::ReduceOnce); break;
  case ReferenceKind::Exchange: kernel = cuda::referenceKernel(cuda::ReferenceKernel::Exchange); break;
  case ReferenceKind::BlockCopy: kernel = cuda::referenceKernel(cuda::ReferenceKernel::BlockCopy); break;
  case ReferenceKind::Fifo: kernel = cuda::referenceKernel(cuda::ReferenceKernel::Fifo); break;
  case ReferenceKind::Steps: kernel = cuda::referenceKernel(cuda::ReferenceKernel::Steps); break;
  case ReferenceKind::Hops: kernel = cuda::referenceKernel(cuda::ReferenceKernel::Hops); break;
  }
  if (!kernel) // a kind of a later build's (the request crosses the plugin boundary)
    return bad(llvm::formatv("reference kind {0} is unknown to this build", int(q.kind)));
  int32_t nranks = nbuf;
  uint32_t flag = 0;
  uint64_t launches = 0, bytes = q.bytes;
  auto *stalledFlag = static_cast<uint32_t *>(stalled);
  auto *lineWords = static_cast<uint64_t *>(lines);
  const auto *src = reinterpret_cast<const unsigned char *>(ranks.in[0]);
  auto *dst = reinterpret_cast<unsigned char *>(ranks.out[0]);
  cuda::ReferenceFifo fifo{};
  fifo.src = src;
  fifo.dst = dst;
  fifo.slots = static_cast<unsigned char *>(slots);
  fifo.head = static_cast<uint64_t *>(counters);
  fifo.tail = fifo.head ? fifo.head + PollStride / sizeof(uint64_t) : nullptr;
  fifo.bytes = q.bytes;
  fifo.slotBytes = q.slotBytes;
  fifo.stalled = stalledFlag;
  const uint64_t nslots = q.slotBytes ? (q.bytes + q.slotBytes - 1) / q.slotBytes : 0;
  cuda::ReferenceSteps stepped{};
  stepped.src = src;
  stepped.dst = dst;
  stepped.bytes = q.bytes;
  stepped.steps = q.steps;
  stepped.inbox[0] = lineWords;
  stepped.inbox[1] = lineWords ? lineWords + q.bytes / 4 : nullptr;
  stepped.flag = 1;
  stepped.stalled = stalledFlag;
  auto once = [&]() -> llvm::Error {
    void *reduceArgs[] = {&ranks, &nranks, const_cast<uint64_t *>(&n)};
    void *exchangeArgs[] = {&ranks, &nranks, const_cast<uint64_t *>(&n), &lineWords, &flag,
                            &stalledFlag};
    void *copyArgs[] = {&src, &dst, &bytes};
    void *fifoArgs[] = {&fifo};
    void *steppedArgs[] = {&stepped};
    dim3 grid(1);
    void **args = copyArgs;
    switch (q.kind) {
    case ReferenceKind::ReduceOnce:
      grid = dim3(static_cast<uint32_t>(
          std::clamp<uint64_t>((n + q.threads - 1) / q.threads, 1, uint64_t(sms) * 4)));
      args = reduceArgs;
      break;
    case ReferenceKind::Exchange:
      ++flag; // a launch's words are told from the last one's by their flag
      grid = dim3(static_cast<uint32_t>(nranks));
      args = exchangeArgs;
      break;
    case ReferenceKind::BlockCopy: break;
    case ReferenceKind::Fifo:
      fifo.base = launches * nslots;
      grid = dim3(2);
      args = fifoArgs;
      break;
    case ReferenceKind::Steps: args = steppedArgs; break;
    case ReferenceKind::Hops:
      stepped.flag = static_cast<uint32_t>(1 + launches * q.steps);
      grid = dim3(2);
      args = steppedArgs;
      break;
    }
    ++launches;
    // The blocks of exchange, fifo and hops wait for each other: cooperative, so
    // that all are resident at once (or the launch is refused), as for the
    // persistent kernel.
    cudaLaunchAttribute cooperative{};
    cooperative.id = cudaLaunchAttributeCooperative;
    cooperative.val.cooperative = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = dim3(q.threads);
    config.stream = stream;
    const bool together = q.kind == ReferenceKind::Exchange || q.kind == ReferenceKind::Fifo ||
                          q.kind == ReferenceKind::Hops;
    config.attrs = together ? &cooperative : nullptr;
    config.numAttrs = together ? 1 : 0;
    COLL_CUDA_TRY(cudaLaunchKernelExC(&config, kernel, args));
    return llvm::Error::success();
  };
  auto stalledNow = [&]() -> llvm::Expected<bool> {
    uint32_t s = 0;
    COLL_CUDA_TRY(cudaStreamSynchronize(stream));
    COLL_CUDA_TRY(cudaMemcpy(&s, stalled, sizeof s, cudaMemcpyDeviceToHost));
    return s != 0;
  };
  // Once, checked.
  if (llvm::Error err = once())
    return err;
  auto stuck = stalledNow();
  if (!stuck)
    return stuck.takeError();
  if (*stuck)
    return bad("a wait did not end (its watchdog stopped it)");
  std::vector<unsigned char> got(q.bytes);
  for (int32_t r = 0; r < nbuf; ++r) {
    COLL_CUDA_TRY(cudaMemcpy(got.data(), ranks.out[r], q.bytes, cudaMemcpyDeviceToHost));
    for (uint64_t i = 0; i < (reduces ? n : q.bytes); ++i) {
      if (reduces) {
        float want = 0, v = 0;
        for (int32_t k = 0; k < nbuf; ++k) {
          float x = 0;
          std::memcpy(&x, &inputs[k][i * sizeof(float)], sizeof x);
          want += x;
        }
        std::memcpy(&v, &got[i * sizeof(float)], sizeof v);
        if (v != want)
          return bad(llvm::formatv("rank {0}'s element {1} is {2}, not {3}", r, i, v, want));
      } else if (got[i] != inputs[0][i]) {
        return bad(llvm::formatv("byte {0} is {1}, not {2}", i, int(got[i]), int(inputs[0][i])));
      }
    }
  }
  auto seconds = timeOnStream(stream, q.warmup, q.iters, once);
  if (!seconds)
    return seconds.takeError();
  stuck = stalledNow();
  if (!stuck)
    return stuck.takeError();
  if (*stuck)
    return bad("a wait did not end (its watchdog stopped it)");
  return seconds;
}

} // namespace coll::interp::cuda
