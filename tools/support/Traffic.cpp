//===- Traffic.cpp - What the tools count of the emulation's traffic ------===//

#include "Traffic.h"

#include "coll/interpreter/DataType.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace coll::tools {

using namespace coll::interp;

llvm::Expected<CallResult> CountingTarget::run(CheckedCall &call, bool fresh) {
  if (!fresh)
    return inner->run(call, false);
  emulatedTraffic(/*reset=*/true);
  countEmulatedTraffic(true);
  auto result = inner->run(call, true);
  countEmulatedTraffic(false);
  std::vector<EmulatedTraffic> counted = emulatedTraffic(/*reset=*/true);
  if (result) {
    const CallArgs args = call.args();
    const uint64_t es = dataTypeSize(args.type);
    CountedCall c;
    c.count = args.count;
    c.inputBytes = call.inputElems() * es;
    c.outputBytes = call.outputElems() * es;
    // In place: each rank's input lies in its output (CheckedCall makes
    // one allocation of both).
    const auto *in = static_cast<const unsigned char *>(args.input[0]);
    const auto *out = static_cast<const unsigned char *>(args.output[0]);
    c.inplace = in && out && in >= out && in < out + std::max<uint64_t>(c.outputBytes, 1);
    c.traffic = std::move(counted);
    calls.push_back(std::move(c));
  }
  return result;
}

std::string shortNumber(double x) {
  std::string s = llvm::formatv("{0:F2}", x).str();
  while (s.back() == '0')
    s.pop_back();
  if (s.back() == '.')
    s.pop_back();
  return s;
}

uint64_t referenceBytes(ir::Collective collective, int32_t nranks, const CountedCall &c) {
  const bool rootIn =
      collective == ir::Collective::Broadcast || collective == ir::Collective::Scatter;
  const bool rootOut =
      collective == ir::Collective::Reduce || collective == ir::Collective::Gather;
  return uint64_t(rootIn ? 1 : nranks) * c.inputBytes +
         uint64_t(rootOut ? 1 : nranks) * c.outputBytes;
}

uint64_t countedBytes(const CountedCall &c) {
  uint64_t total = 0;
  for (const EmulatedTraffic &t : c.traffic)
    for (int r = 0; r < TrafficRegions; ++r)
      total += t.read[r] + t.written[r];
  return total;
}

void printTraffic(const std::vector<CountedCall> &calls, ir::Collective collective, int32_t nranks,
                  llvm::raw_ostream &os) {
  static const char *const regions[] = {"own", "peer", "fifo", "flag", "other"};
  for (const CountedCall &c : calls) {
    os << llvm::formatv("# traffic of one call (cuda-emu; docs/CUDA.md, \"Traffic\"): {0} "
                        "elements, {1}, global-memory bytes read/written per rank and step kind, "
                        "waits' first poll only\n",
                        c.count, c.inplace ? "in place" : "out of place");
    os << llvm::formatv("# {0,4} {1,-6} {2,-6}", "rank", "proto", "step");
    for (const char *r : regions)
      os << llvm::formatv(" {0,21}", std::string(r) + " rd/wr");
    os << "\n";
    uint64_t read[TrafficRegions] = {}, written[TrafficRegions] = {};
    for (const EmulatedTraffic &t : c.traffic) {
      os << llvm::formatv("# {0,4} {1,-6} {2,-6}", t.rank, t.protocol, t.step);
      for (int r = 0; r < TrafficRegions; ++r) {
        os << llvm::formatv(" {0,10}/{1,-10}", t.read[r], t.written[r]);
        read[r] += t.read[r];
        written[r] += t.written[r];
      }
      os << "\n";
    }
    uint64_t total = 0;
    os << "# total per element:";
    for (int r = 0; r < TrafficRegions; ++r) {
      total += read[r] + written[r];
      os << llvm::formatv(" {0} {1}/{2}", regions[r],
                          shortNumber(c.count ? double(read[r]) / double(c.count) : 0),
                          shortNumber(c.count ? double(written[r]) / double(c.count) : 0));
    }
    os << "\n";
    const uint64_t reference = referenceBytes(collective, nranks, c);
    const double b = c.count ? double(total) / double(c.count) : 0;
    const double r = c.count ? double(reference) / double(c.count) : 0;
    os << llvm::formatv("traffic: {0} bytes per element, reference {1}, ratio {2:F2}\n",
                        shortNumber(b), shortNumber(r), r > 0 ? b / r : 0.0);
  }
}

llvm::Expected<uint64_t> referenceTraffic(DeviceBackend &emulated, ReferenceRequest q) {
  // The reference runs once checked, then its warm-up and timed launches:
  // one of each here, every launch moving the same bytes.
  q.warmup = 0;
  q.iters = 1;
  const uint64_t launches = 2;
  emulatedTraffic(/*reset=*/true);
  countEmulatedTraffic(true);
  auto seconds = emulated.timeReference(q);
  countEmulatedTraffic(false);
  std::vector<EmulatedTraffic> counted = emulatedTraffic(/*reset=*/true);
  if (!seconds)
    return seconds.takeError();
  uint64_t total = 0;
  for (const EmulatedTraffic &t : counted)
    for (int r = 0; r < TrafficRegions; ++r)
      total += t.read[r] + t.written[r];
  return total / launches;
}

} // namespace coll::tools
