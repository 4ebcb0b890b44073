//===- HostSupport.cpp - Host-side helpers of the CUDA backend ------------===//

#include "HostSupport.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace coll::interp::cuda {

uint64_t slotBytes(const CudaOptions &options, Proto proto) {
  return options.slotBytes(static_cast<ir::Protocol>(proto));
}

llvm::Error checkOptions(const CudaOptions &options, Proto proto) {
  const uint32_t threads = options.threadsPerBlock;
  if (threads % 32 != 0 || threads > MaxThreadsPerBlock)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "%u threads per block is not 0 (automatic) or a multiple of "
                                   "32 in [32, %u]",
                                   threads, MaxThreadsPerBlock);
  uint64_t bytes = slotBytes(options, proto);
  if (bytes < 8 || bytes % 8 != 0 || bytes > (64u << 20))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "FIFO slot size %llu is not a multiple of 8 in [8, 64 MiB]",
                                   static_cast<unsigned long long>(bytes));
  return llvm::Error::success();
}

std::string describeWatchdogReport(const Plan &plan, const WatchdogReport &r, uint32_t watchdogMs) {
  const PlanTb &tb = plan.tbs[r.tb];
  const PlanStep &step = plan.steps[tb.stepBegin + r.step];
  if (r.kind == WaitKind::Window) {
    const char *buffer = r.depStep == 0 ? "input" : r.depStep == 1 ? "output" : "scratch";
    return llvm::formatv("rank {0} tb {1} (channel {2}) step {3} ({4}) iteration {5}: rank {6} "
                         "published no window holding its {7} buffer of this call (descriptor "
                         "{8:x}): every rank's buffers that peers reach must lie in windows it "
                         "registered (setPeerWindows)",
                         tb.rank, tb.tb, tb.channel, step.irStep,
                         ir::stepTypeName(static_cast<ir::StepType>(step.type)), r.iteration,
                         r.depTb, buffer, r.observed)
        .str();
  }
  if (r.kind == WaitKind::Stopped)
    return llvm::formatv("stopped at rank {0} tb {1} (channel {2}) step {3} ({4}) iteration {5}: "
                         "the stop word of this host's ranks was raised (another rank failed, "
                         "aborted or found a peer gone)",
                         tb.rank, tb.tb, tb.channel, step.irStep,
                         ir::stepTypeName(static_cast<ir::StepType>(step.type)), r.iteration)
        .str();
  std::string text = llvm::formatv(
      "watchdog: no progress for {0} ms at rank {1} tb {2} (channel {3}) step {4} ({5}) "
      "iteration {6}: ",
      watchdogMs, tb.rank, tb.tb, tb.channel, step.irStep,
      ir::stepTypeName(static_cast<ir::StepType>(step.type)), r.iteration);
  if (r.kind == WaitKind::Dependency) {
    const uint64_t span = std::max(plan.maxIrSteps, 1);
    std::string published = r.observed == 0
                                ? std::string("nothing yet")
                                : llvm::formatv("step {0} of iteration {1}",
                                                (r.observed - 1) % span, (r.observed - 1) / span)
                                      .str();
    return text + llvm::formatv("waiting for tb {0} step {1} of iteration {2}; that tb has "
                                "published {3}",
                                plan.tbs[r.depTb].tb, r.depStep, r.iteration, published)
                      .str();
  }
  if (r.kind == WaitKind::Signal) {
    // Worded as the host backend's (host/Prims.h); a flag holds the
    // signals sent in this call.
    const PlanSignal &pair = plan.signals[r.depTb];
    const uint64_t per = std::max(pair.perIteration, 1);
    return text + llvm::formatv("waiting for signal {0} of iteration {1} from rank {2} on "
                                "channel {3}; rank {2} has sent {4} in this call",
                                (r.expected - 1) % per, r.iteration, pair.sender, pair.channel,
                                r.observed)
                      .str();
  }
  switch (r.kind) {
  case WaitKind::FreeSlot:
    text += llvm::formatv("waiting for a free slot to send on (the FIFO of {0} slots is full)",
                          FifoDepth);
    break;
  case WaitKind::SimpleData:
    text += llvm::formatv("waiting for data to receive (slot {0})", r.slot);
    break;
  case WaitKind::LLLine:
    text += llvm::formatv("waiting for data to receive (LL line {0} of slot {1}: flags {2:x} and "
                          "{3:x}, expected {4:x})",
                          r.line, r.slot, static_cast<uint32_t>(r.observed),
                          static_cast<uint32_t>(r.observed >> 32), r.expected);
    break;
  case WaitKind::LL128Line:
    text += llvm::formatv("waiting for data to receive (LL128 line {0} of slot {1}: flag {2}, "
                          "expected {3})",
                          r.line, r.slot, r.observed, r.expected);
    break;
  case WaitKind::Dependency:
  case WaitKind::Signal:
  case WaitKind::Window:
  case WaitKind::Stopped: break; // returned above
  }
  const PlanConnection &c = plan.connections[r.connection];
  return text + llvm::formatv("; connection {0}->{1} channel {2}: sender filled {3} slots, "
                              "receiver freed {4}",
                              c.sender, c.receiver, c.channel, r.tail, r.head)
                    .str();
}

MirrorLayout mirrorLayout(const CallArgs &host, uint64_t inputBytes, uint64_t outputBytes) {
  MirrorLayout layout;
  auto add = [&](std::byte *begin, uint64_t bytes) {
    layout.ranges.push_back({begin, bytes});
    return static_cast<int32_t>(layout.ranges.size() - 1);
  };
  for (size_t r = 0; r < host.input.size() && r < host.output.size(); ++r) {
    auto *in = static_cast<std::byte *>(host.input[r]);
    auto *out = static_cast<std::byte *>(host.output[r]);
    MirrorLayout::Place inPlace{-1, 0}, outPlace{-1, 0};
    const bool hasIn = in && inputBytes, hasOut = out && outputBytes;
    if (hasIn && hasOut && in < out + outputBytes && out < in + inputBytes) {
      std::byte *begin = std::min(in, out);
      std::byte *end = std::max(in + inputBytes, out + outputBytes);
      int32_t range = add(begin, static_cast<uint64_t>(end - begin));
      inPlace = {range, static_cast<uint64_t>(in - begin)};
      outPlace = {range, static_cast<uint64_t>(out - begin)};
    } else {
      if (hasIn)
        inPlace = {add(in, inputBytes), 0};
      if (hasOut)
        outPlace = {add(out, outputBytes), 0};
    }
    layout.input.push_back(inPlace);
    layout.output.push_back(outPlace);
  }
  return layout;
}

} // namespace coll::interp::cuda
