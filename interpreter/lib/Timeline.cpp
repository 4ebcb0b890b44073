//===- Timeline.cpp - A trace of every step of a run ----------------------===//

#include "coll/interpreter/Timeline.h"

#include "coll/interpreter/host/Rank.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>

namespace coll::interp {

namespace {

int64_t nanos(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::string chunkName(uint8_t buffer, int32_t chunk) {
  static const char *const names[] = {"i", "o", "s"};
  return llvm::formatv("{0}[{1}]", names[buffer < 3 ? buffer : 2], chunk).str();
}

/// What `step` waits for: "tb 2 step 1", or each of several, with commas.
std::string waitsFor(const Plan &plan, const PlanStep &step) {
  std::string out;
  for (const PlanDep &d : plan.dependencies(step))
    out += llvm::formatv("{0}tb {1} step {2}", out.empty() ? "" : ", ", plan.tbs[d.tb].tb,
                         d.step)
               .str();
  return out;
}

} // namespace

void Timeline::setRankLabel(int32_t rank, std::string label) {
  for (auto &entry : rankLabels)
    if (entry.first == rank) {
      entry.second = std::move(label);
      return;
    }
  rankLabels.emplace_back(rank, std::move(label));
}

void Timeline::addCall(const Plan &plan, int32_t rank, DataType type,
                       std::chrono::steady_clock::time_point begin,
                       std::chrono::steady_clock::time_point end,
                       llvm::ArrayRef<host::TbTrace> tbs) {
  ++callCount;
  const uint64_t es = dataTypeSize(type);
  auto haveTrack = [&](int32_t track) {
    return std::any_of(tracks.begin(), tracks.end(),
                       [&](const Track &t) { return t.rank == rank && t.track == track; });
  };
  if (!haveTrack(0))
    tracks.push_back(Track{rank, 0, "calls"});
  slices.push_back(Slice{nanos(begin), nanos(end), rank, 0,
                         llvm::formatv("{0} {1}", ir::collectiveName(plan.collective),
                                       plan.name)
                             .str(),
                         llvm::formatv("\"algorithm\":{0},\"protocol\":\"{1}\",\"type\":\"{2}\"",
                                       llvm::json::Value(plan.name),
                                       ir::protocolName(plan.protocol), dataTypeName(type))
                             .str(),
                         "call"});
  for (size_t local = 0; local < tbs.size(); ++local) {
    const int32_t globalTb = plan.rankTbBegin[rank] + static_cast<int32_t>(local);
    const PlanTb &ptb = plan.tbs[globalTb];
    const int32_t track = ptb.tb + 1;
    const int32_t sendPeer = ptb.sendConn >= 0 ? plan.connections[ptb.sendConn].receiver : -1;
    const int32_t recvPeer = ptb.recvConn >= 0 ? plan.connections[ptb.recvConn].sender : -1;
    if (!haveTrack(track)) {
      std::string name = llvm::formatv("tb {0} (channel {1}", ptb.tb, ptb.channel);
      if (sendPeer >= 0)
        name += llvm::formatv(", sends to {0}", sendPeer).str();
      if (recvPeer >= 0)
        name += llvm::formatv(", receives from {0}", recvPeer).str();
      tracks.push_back(Track{rank, track, name + ")"});
    }
    for (const host::TraceEvent &e : tbs[local].events) {
      if (!e.step)
        continue;
      const PlanStep &step = *e.step;
      ir::StepType st = static_cast<ir::StepType>(step.type);
      ir::StepTypeInfo info = ir::stepTypeInfo(st);
      if (e.kind == 0) {
        ++steps;
        std::string args = llvm::formatv("\"step\":{0},\"iteration\":{1},\"bytes\":{2}",
                                         step.irStep, e.iteration, e.elems * es);
        if (info.sends)
          args += llvm::formatv(",\"to\":{0}", sendPeer).str();
        if (info.receives)
          args += llvm::formatv(",\"from\":{0}", recvPeer).str();
        if (step.count > 0) {
          const PlanSlice &first = plan.slices[step.sliceBegin];
          if (info.readsSrc && !info.receives)
            args += llvm::formatv(",\"src\":\"{0}\"", chunkName(step.srcBuf, first.srcChunk))
                        .str();
          else if (info.readsSrc)
            args += llvm::formatv(",\"local\":\"{0}\"", chunkName(step.srcBuf, first.srcChunk))
                        .str();
          if (info.writesDst)
            args += llvm::formatv(",\"dst\":\"{0}\"", chunkName(step.dstBuf, first.dstChunk))
                        .str();
          args += llvm::formatv(",\"chunks\":{0}", step.count).str();
        }
        if (step.depTb != -1)
          args += llvm::formatv(",\"after\":\"{0}\"", waitsFor(plan, step)).str();
        slices.push_back(Slice{e.begin, e.end, rank, track,
                               ir::stepTypeName(st).str(), std::move(args), "step"});
      } else {
        std::string name;
        switch (e.kind) {
        case 1: name = llvm::formatv("wait: data from {0}", recvPeer); break;
        case 2: name = llvm::formatv("wait: free slot to {0}", sendPeer); break;
        default:
          name = step.depTb != -1 ? "wait: " + waitsFor(plan, step)
                                  : std::string("wait: dependency");
          break;
        }
        slices.push_back(Slice{e.begin, e.end, rank, track, std::move(name),
                               llvm::formatv("\"step\":{0},\"iteration\":{1}", step.irStep,
                                             e.iteration)
                                   .str(),
                               "wait"});
      }
    }
  }
}

void Timeline::writeJson(llvm::raw_ostream &os) const {
  int64_t origin = 0;
  if (!slices.empty())
    origin = std::min_element(slices.begin(), slices.end(), [](const Slice &a, const Slice &b) {
               return a.begin < b.begin;
             })->begin;
  auto micros = [&](int64_t ns) { return llvm::formatv("{0:f3}", double(ns - origin) / 1e3); };
  os << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool firstEvent = true;
  auto sep = [&] {
    if (!firstEvent)
      os << ",\n";
    firstEvent = false;
  };
  std::vector<int32_t> ranks;
  for (const Track &t : tracks)
    if (std::find(ranks.begin(), ranks.end(), t.rank) == ranks.end())
      ranks.push_back(t.rank);
  std::sort(ranks.begin(), ranks.end());
  for (int32_t rank : ranks) {
    std::string label = "rank " + std::to_string(rank);
    for (const auto &entry : rankLabels)
      if (entry.first == rank)
        label = entry.second;
    sep();
    os << llvm::formatv("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{0},\"args\":{\"name\":{1}}}",
                        rank, llvm::json::Value(label));
    sep();
    os << llvm::formatv("{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{0},"
                        "\"args\":{\"sort_index\":{0}}}",
                        rank);
  }
  for (const Track &t : tracks) {
    sep();
    os << llvm::formatv("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{0},\"tid\":{1},"
                        "\"args\":{\"name\":{2}}}",
                        t.rank, t.track, llvm::json::Value(t.name));
    sep();
    os << llvm::formatv("{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{0},\"tid\":{1},"
                        "\"args\":{\"sort_index\":{1}}}",
                        t.rank, t.track);
  }
  for (const Slice &s : slices) {
    sep();
    os << llvm::formatv("{\"ph\":\"X\",\"cat\":\"{0}\",\"name\":{1},\"pid\":{2},\"tid\":{3},"
                        "\"ts\":{4},\"dur\":{5:f3}",
                        s.category, llvm::json::Value(s.name), s.rank, s.track, micros(s.begin),
                        double(std::max<int64_t>(s.end - s.begin, 0)) / 1e3);
    if (!s.args.empty())
      os << ",\"args\":{" << s.args << "}";
    os << "}";
  }
  os << "\n]}\n";
}

llvm::Error Timeline::writeJson(llvm::StringRef path) const {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return llvm::createStringError(ec, "cannot write the timeline to %s: %s",
                                   path.str().c_str(), ec.message().c_str());
  writeJson(os);
  os.close();
  if (os.has_error())
    return llvm::createStringError(os.error(), "cannot write the timeline to %s",
                                   path.str().c_str());
  return llvm::Error::success();
}

} // namespace coll::interp
