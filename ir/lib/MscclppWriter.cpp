//===- MscclppWriter.cpp - Coll IR as an MSCCL++ execution plan -----------===//
//
// writePlan: the inverse of translatePlan (MscclppTranslate.cpp) for the
// programs whose steps MSCCL++ v0.10's plan format can carry: direct steps
// on memory channels and local steps. Every Coll step becomes one op, and
// what orders steps in Coll but not in MSCCL++ is written out:
//
//   * a dependency on another tb of the rank: a device semaphore, released
//     by the producing tb after the step (`sem_release`) and acquired by the
//     consuming tb before it (`sem_acquire`), once per (producing step,
//     consuming tb): a later step of the same tb that waits on the same or
//     an earlier step of the producer is already ordered after the acquire;
//   * the order of a tb's steps: MSCCL++ runs an op on all threads of its
//     tb, signals and waits channel i on thread i, and only a `nop`
//     (__syncthreads) orders two ops. So a `nop` goes before a data op
//     that follows a wait or another data op, and before a signal or
//     release that follows a data op or a wait (the rules the reader
//     enforces, docs/IR.md, "MSCCL++ plans");
//   * signal pairs: Coll counts signals per (sender, receiver, channel);
//     MSCCL++ pairs rank r's k-th memory channel to p with p's k-th to r.
//     Each signal pair of the program gets a tag k of its own between its
//     two ranks, so each memory channel carries one pair, signalled by one
//     tb and waited on by one (the translation's rule).
//
// Nothing here decides what is correct: the written plan is read back with
// parsePlan and translatePlan by the callers (collc --emit=mscclpp), whose
// steps must be the program's (stepDifference), and the read-back is a
// program like any other for the checker.
//
//===----------------------------------------------------------------------===//

#include "coll/ir/Mscclpp.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace coll::ir::mscclpp {
namespace {

const char *bufferLetter(BufferKind b) {
  switch (b) {
  case BufferKind::Input: return "i";
  case BufferKind::Output: return "o";
  case BufferKind::Scratch: return "s";
  }
  return "i";
}

/// One signal pair of the program: sender, receiver and Coll channel.
struct Pair {
  int32_t sender = 0, receiver = 0, channel = 0;
  bool operator<(const Pair &o) const {
    return std::tie(sender, receiver, channel) < std::tie(o.sender, o.receiver, o.channel);
  }
};

class Writer {
public:
  Writer(const Algorithm &alg, DiagnosticList &diags) : alg(alg), diags(diags) {}

  bool run(llvm::raw_ostream &os) {
    nranks = static_cast<int32_t>(alg.gpus.size());
    inplace = alg.inplace && !alg.outofplace;
    checkHeader();
    if (diags.hasErrors())
      return false;
    checkSteps();
    if (diags.hasErrors())
      return false;
    assignChannels();
    assignSemaphores();
    if (diags.hasErrors())
      return false;
    write(os);
    return true;
  }

private:
  const Algorithm &alg;
  DiagnosticList &diags;
  int32_t nranks = 0;
  /// The mode written (MSCCL++ plans have one): in place where the program
  /// is only that (or was traced so: collc --inplace), else out of place.
  bool inplace = false;

  /// Per unordered rank pair (low, high): the signal pairs between them in
  /// order (the tag of a pair is its index), and whether a `get` needs a
  /// channel between them.
  std::map<std::pair<int32_t, int32_t>, std::vector<Pair>> tagsOf;
  std::set<std::pair<int32_t, int32_t>> getPairs;
  /// Per rank: its memory channels, flattened as the executor numbers them
  /// (the `channels` entry j connects to every peer with more than j tags;
  /// connection tag j), as (peer, tag).
  std::vector<std::vector<std::pair<int32_t, int32_t>>> memChannels;
  /// Per rank, per peer: the number of tags (memory channels) to it.
  std::vector<std::map<int32_t, int32_t>> tagCount;

  /// Per rank: semaphores, each (producing tb, producing step, consuming tb).
  std::vector<std::vector<std::tuple<int32_t, int32_t, int32_t>>> semaphores;
  /// Per rank: (tb, step) -> the semaphores its acquire takes before it, and
  /// those released after it.
  std::vector<std::map<std::pair<int32_t, int32_t>, std::vector<int32_t>>> acquireAt, releaseAt;

  void error(StepRef where, const llvm::Twine &message) { diags.error(0, where, message); }

  int32_t tagOf(int32_t sender, int32_t receiver, int32_t channel) const {
    auto key = std::minmax(sender, receiver);
    const std::vector<Pair> &pairs = tagsOf.at({key.first, key.second});
    auto it = std::find_if(pairs.begin(), pairs.end(), [&](const Pair &p) {
      return p.sender == sender && p.receiver == receiver && p.channel == channel;
    });
    return static_cast<int32_t>(it - pairs.begin());
  }

  void checkHeader() {
    if (alg.protocol == Protocol::LL128)
      error({}, "protocol LL128: MSCCL++ plans have Simple and LL only");
    if (alg.collective != Collective::Custom && collectiveInfo(alg.collective).hasRoot)
      error({}, "'" + collectiveName(alg.collective) +
                    "' is a rooted collective, and an MSCCL++ plan names no root (the "
                    "format has no field for it)");
    if (alg.condition)
      error({}, "a custom collective's condition: an MSCCL++ plan has no field for it, and "
                "its result could not be checked after reading it back");
  }

  /// Every step is one MSCCL++ can carry; every signal pair is raised by one
  /// tb and waited on by one.
  void checkSteps() {
    unsigned fifoSeen = 0;
    std::map<Pair, std::pair<int32_t, int32_t>> signalTb, waitTb; // pair -> (tb, step)
    for (int32_t r = 0; r < nranks; ++r) {
      const ir::Gpu &gpu = alg.gpus[r];
      for (int32_t t = 0; t < int32_t(gpu.tbs.size()); ++t) {
        const ThreadBlock &tb = gpu.tbs[t];
        for (int32_t s = 0; s < int32_t(tb.steps.size()); ++s) {
          const Step &step = tb.steps[s];
          StepRef where{r, t, s};
          switch (step.type) {
          case StepType::Copy:
          case StepType::Reduce:
          case StepType::Nop:
          case StepType::Put:
          case StepType::GetReduce:
            break;
          case StepType::Get: {
            if (step.srcOff != step.dstOff) {
              error(where, "a get from chunk " + llvm::Twine(step.srcOff) + " to chunk " +
                               llvm::Twine(step.dstOff) +
                               ": MSCCL++ v0.10's executor (handleGet) reads the peer at the "
                               "destination's offset and writes at the source's, so the plan "
                               "would not run what the program says");
              break;
            }
            getPairs.insert(std::minmax(r, step.peer));
            break;
          }
          case StepType::Signal:
          case StepType::Wait: {
            bool signal = step.type == StepType::Signal;
            Pair pair = signal ? Pair{r, step.peer, tb.channel} : Pair{step.peer, r, tb.channel};
            auto &seen = signal ? signalTb : waitTb;
            auto [it, fresh] = seen.emplace(pair, std::make_pair(t, s));
            if (!fresh && it->second.first != t)
              error(where, llvm::Twine(signal ? "signals" : "waits") + " of rank " +
                               llvm::Twine(pair.sender) + " to rank " +
                               llvm::Twine(pair.receiver) + " on channel " +
                               llvm::Twine(pair.channel) + " are in tbs " +
                               llvm::Twine(it->second.first) + " and " + llvm::Twine(t) +
                               ": an MSCCL++ memory channel is " +
                               (signal ? "signalled" : "waited on") + " by one tb");
            break;
          }
          default:
            // The first only: a FIFO program has thousands.
            if (!fifoSeen++)
              error(where, "'" + stepTypeName(step.type) +
                               "' moves data through a FIFO: MSCCL++ carries such steps on "
                               "port channels, which collc does not write yet (direct steps "
                               "and local steps only)");
            break;
          }
        }
      }
    }
    for (const auto &[pair, at] : signalTb) {
      auto key = std::minmax(pair.sender, pair.receiver);
      tagsOf[{key.first, key.second}].push_back(pair);
    }
    for (const auto &[pair, at] : waitTb)
      if (!signalTb.count(pair)) {
        auto key = std::minmax(pair.sender, pair.receiver);
        tagsOf[{key.first, key.second}].push_back(pair);
      }
  }

  void assignChannels() {
    tagCount.assign(nranks, {});
    for (const auto &[key, pairs] : tagsOf) {
      tagCount[key.first][key.second] = static_cast<int32_t>(pairs.size());
      tagCount[key.second][key.first] = static_cast<int32_t>(pairs.size());
    }
    for (const auto &key : getPairs)
      if (!tagCount[key.first].count(key.second)) {
        tagCount[key.first][key.second] = 1;
        tagCount[key.second][key.first] = 1;
      }
    memChannels.assign(nranks, {});
    for (int32_t r = 0; r < nranks; ++r) {
      int32_t most = 0;
      for (const auto &[peer, n] : tagCount[r])
        most = std::max(most, n);
      for (int32_t j = 0; j < most; ++j)
        for (const auto &[peer, n] : tagCount[r])
          if (n > j)
            memChannels[r].emplace_back(peer, j);
    }
  }

  int32_t channelIndex(int32_t rank, int32_t peer, int32_t tag) const {
    const auto &all = memChannels[rank];
    auto it = std::find(all.begin(), all.end(), std::make_pair(peer, tag));
    return static_cast<int32_t>(it - all.begin());
  }

  void assignSemaphores() {
    semaphores.assign(nranks, {});
    acquireAt.assign(nranks, {});
    releaseAt.assign(nranks, {});
    for (int32_t r = 0; r < nranks; ++r) {
      const ir::Gpu &gpu = alg.gpus[r];
      for (int32_t t = 0; t < int32_t(gpu.tbs.size()); ++t) {
        // Per producing tb, the latest of its steps this tb has acquired.
        std::map<int32_t, int32_t> acquired;
        const ThreadBlock &tb = gpu.tbs[t];
        for (int32_t s = 0; s < int32_t(tb.steps.size()); ++s) {
          const Step &step = tb.steps[s];
          if (!step.hasDependency())
            continue;
          if (step.depTb == t || step.depTb >= int32_t(gpu.tbs.size()) ||
              step.depStep >= int32_t(gpu.tbs[step.depTb].steps.size())) {
            error({r, t, s}, "a dependency on tb " + llvm::Twine(step.depTb) + " step " +
                                 llvm::Twine(step.depStep) + " that does not exist");
            continue;
          }
          auto it = acquired.find(step.depTb);
          if (it != acquired.end() && it->second >= step.depStep)
            continue;
          acquired[step.depTb] = step.depStep;
          int32_t id = static_cast<int32_t>(semaphores[r].size());
          semaphores[r].emplace_back(step.depTb, step.depStep, t);
          acquireAt[r][{t, s}].push_back(id);
          releaseAt[r][{step.depTb, step.depStep}].push_back(id);
        }
      }
    }
  }

  //===------------------------------------------------------------------===//
  // Output
  //===------------------------------------------------------------------===//

  /// A tb's lists: its memory channels (ids into the rank's) and the remote
  /// buffers it reaches (ids into the rank's remote_buffers).
  struct TbLists {
    std::vector<int32_t> channels;
    std::vector<int32_t> remotes;
    int32_t channel(int32_t id) {
      auto it = std::find(channels.begin(), channels.end(), id);
      if (it != channels.end())
        return static_cast<int32_t>(it - channels.begin());
      channels.push_back(id);
      return static_cast<int32_t>(channels.size() - 1);
    }
    int32_t remote(int32_t id) {
      auto it = std::find(remotes.begin(), remotes.end(), id);
      if (it != remotes.end())
        return static_cast<int32_t>(it - remotes.begin());
      remotes.push_back(id);
      return static_cast<int32_t>(remotes.size() - 1);
    }
  };

  /// The rank's remote buffers: (peer, buffer) in first-use order.
  std::vector<std::pair<int32_t, BufferKind>> remotesOf(int32_t r) const {
    std::vector<std::pair<int32_t, BufferKind>> out;
    for (const ThreadBlock &tb : alg.gpus[r].tbs)
      for (const Step &step : tb.steps) {
        std::optional<std::pair<int32_t, BufferKind>> use;
        if (step.type == StepType::Put)
          use = std::make_pair(step.peer, step.dstBuf);
        else if (step.type == StepType::Get || step.type == StepType::GetReduce)
          use = std::make_pair(step.peer, step.srcBuf);
        if (use && std::find(out.begin(), out.end(), *use) == out.end())
          out.push_back(*use);
      }
    return out;
  }

  static void localRef(llvm::json::OStream &j, BufferKind b, int32_t index, int32_t size) {
    j.object([&] {
      j.attribute("type", bufferLetter(b));
      j.attribute("index", index);
      j.attribute("size", size);
    });
  }
  static void remoteRef(llvm::json::OStream &j, int32_t id, int32_t index, int32_t size) {
    j.object([&] {
      j.attribute("buffer_id", id);
      j.attribute("index", index);
      j.attribute("size", size);
    });
  }

  /// A region of one rank's memory with in-place aliasing resolved, as the
  /// translation resolves it (MscclppTranslate.cpp, Translator::region).
  struct Region {
    int32_t rank = 0;
    BufferKind buffer = BufferKind::Input;
    int64_t begin = 0, end = 0;
    bool write = false;
    bool clashes(const Region &o) const {
      return (write || o.write) && rank == o.rank && buffer == o.buffer && begin < o.end &&
             o.begin < end;
    }
  };
  Region region(int32_t rank, BufferKind buffer, int64_t index, int64_t size, bool write) const {
    Region r{rank, buffer, index, index + size, write};
    if (!inplace || buffer == BufferKind::Scratch || alg.gpus.empty())
      return r;
    int64_t in = alg.gpus[0].inputChunks, out = alg.gpus[0].outputChunks;
    switch (alg.collective) {
    case Collective::AllGather:
      if (buffer == BufferKind::Input)
        r = {rank, BufferKind::Output, rank * in + index, rank * in + index + size, write};
      break;
    case Collective::ReduceScatter:
      if (buffer == BufferKind::Output)
        r = {rank, BufferKind::Input, rank * out + index, rank * out + index + size, write};
      break;
    default:
      r.buffer = BufferKind::Output;
      break;
    }
    return r;
  }
  /// What a data step of rank r reads and writes.
  std::vector<Region> accesses(int32_t r, const Step &step) const {
    std::vector<Region> out;
    const bool remoteSrc = step.type == StepType::Get || step.type == StepType::GetReduce;
    const bool remoteDst = step.type == StepType::Put;
    out.push_back(region(remoteSrc ? step.peer : r, step.srcBuf, step.srcOff, step.count, false));
    if (step.type == StepType::Reduce || step.type == StepType::GetReduce)
      out.push_back(region(r, step.dstBuf, step.dstOff, step.count, false));
    out.push_back(region(remoteDst ? step.peer : r, step.dstBuf, step.dstOff, step.count, true));
    return out;
  }

  /// The ops of tb t of rank r. A `nop` (__syncthreads) goes only where the
  /// executor's threads would otherwise run two things at once that Coll
  /// orders: a data op after a wait or acquire, or after a data op of the
  /// same run that touches what it touches, one writing; a signal or release
  /// after a data op or a wait. Consecutive signals (waits) with nothing
  /// between them are one op on several channels: thread i signals (waits
  /// on) channel i, all at once.
  void writeOps(llvm::json::OStream &j, int32_t r, int32_t t, TbLists &lists,
                const std::vector<std::pair<int32_t, BufferKind>> &remotes) {
    const ThreadBlock &tb = alg.gpus[r].tbs[t];
    std::vector<Region> epochData;
    bool epochWait = false;
    auto nop = [&] {
      j.object([&] { j.attribute("name", "nop"); });
      epochData.clear();
      epochWait = false;
    };
    auto semOp = [&](const char *name, const std::vector<int32_t> &ids) {
      j.object([&] {
        j.attribute("name", name);
        j.attributeArray("semaphore_ids", [&] {
          for (int32_t id : ids)
            j.value(id);
        });
      });
    };
    auto remoteId = [&](int32_t peer, BufferKind b) {
      auto it = std::find(remotes.begin(), remotes.end(), std::make_pair(peer, b));
      return lists.remote(static_cast<int32_t>(it - remotes.begin()));
    };
    const int32_t n = static_cast<int32_t>(tb.steps.size());
    for (int32_t s = 0; s < n; ++s) {
      const Step &step = tb.steps[s];
      auto acquire = acquireAt[r].find({t, s});
      if (acquire != acquireAt[r].end()) {
        semOp("sem_acquire", acquire->second);
        epochWait = true;
      }
      switch (step.type) {
      case StepType::Nop:
        break;
      case StepType::Signal:
      case StepType::Wait: {
        const bool signal = step.type == StepType::Signal;
        if (signal && (!epochData.empty() || epochWait))
          nop();
        // This step and the ones of its kind right after it, up to one that
        // acquires first or after one that releases.
        std::vector<int32_t> ids;
        int32_t last = s;
        for (;;) {
          const Step &at = tb.steps[last];
          int32_t tag = signal ? tagOf(r, at.peer, tb.channel) : tagOf(at.peer, r, tb.channel);
          int32_t id = lists.channel(channelIndex(r, at.peer, tag));
          if (std::find(ids.begin(), ids.end(), id) != ids.end())
            break; // the same channel twice: two ops
          ids.push_back(id);
          if (last + 1 >= n || tb.steps[last + 1].type != step.type ||
              releaseAt[r].count({t, last}) || acquireAt[r].count({t, last + 1}))
            break;
          ++last;
        }
        if (ids.size() < size_t(last - s + 1))
          last = s + static_cast<int32_t>(ids.size()) - 1;
        j.object([&] {
          j.attribute("name", signal ? "signal" : "wait");
          j.attributeArray("channel_ids", [&] {
            for (int32_t id : ids)
              j.value(id);
          });
          j.attribute("channel_type", "memory");
        });
        if (!signal)
          epochWait = true;
        s = last;
        break;
      }
      default: {
        std::vector<Region> mine = accesses(r, step);
        bool clash = epochWait;
        for (const Region &a : mine)
          for (const Region &b : epochData)
            clash = clash || a.clashes(b);
        if (clash)
          nop();
        j.object([&] {
          switch (step.type) {
          case StepType::Copy:
            j.attribute("name", "copy");
            j.attributeArray("src_buff", [&] { localRef(j, step.srcBuf, step.srcOff, step.count); });
            j.attributeArray("dst_buff", [&] { localRef(j, step.dstBuf, step.dstOff, step.count); });
            break;
          case StepType::Reduce:
            // MSCCL++'s re: dst[0] = src[0] + src[1]; Coll's: dst += src.
            j.attribute("name", "re");
            j.attributeArray("src_buff", [&] {
              localRef(j, step.dstBuf, step.dstOff, step.count);
              localRef(j, step.srcBuf, step.srcOff, step.count);
            });
            j.attributeArray("dst_buff", [&] { localRef(j, step.dstBuf, step.dstOff, step.count); });
            j.attribute("reduce_op", "sum");
            break;
          case StepType::Put:
            j.attribute("name", "put");
            j.attributeArray("src_buff", [&] { localRef(j, step.srcBuf, step.srcOff, step.count); });
            j.attributeArray("dst_buff", [&] {
              remoteRef(j, remoteId(step.peer, step.dstBuf), step.dstOff, step.count);
            });
            j.attribute("channel_type", "memory");
            break;
          case StepType::Get: {
            int32_t channel = lists.channel(channelIndex(r, step.peer, 0));
            j.attribute("name", "get");
            j.attributeArray("src_buff", [&] {
              remoteRef(j, remoteId(step.peer, step.srcBuf), step.srcOff, step.count);
            });
            j.attributeArray("dst_buff", [&] { localRef(j, step.dstBuf, step.dstOff, step.count); });
            j.attributeArray("channel_ids", [&] { j.value(channel); });
            j.attribute("channel_type", "memory");
            break;
          }
          case StepType::GetReduce:
            // rre: dst[0] = src[0] + the peer's src[1], with src[0] the
            // destination itself (Coll's getre: dst += the peer's src).
            j.attribute("name", "rre");
            j.attributeArray("src_buff", [&] {
              localRef(j, step.dstBuf, step.dstOff, step.count);
              remoteRef(j, remoteId(step.peer, step.srcBuf), step.srcOff, step.count);
            });
            j.attributeArray("dst_buff", [&] { localRef(j, step.dstBuf, step.dstOff, step.count); });
            j.attribute("channel_type", "memory");
            j.attribute("reduce_op", "sum");
            break;
          default: // refused by checkSteps
            break;
          }
        });
        epochData.insert(epochData.end(), mine.begin(), mine.end());
        break;
      }
      }
      auto release = releaseAt[r].find({t, s});
      if (release != releaseAt[r].end()) {
        if (!epochData.empty() || epochWait)
          nop();
        semOp("sem_release", release->second);
      }
    }
  }

  void write(llvm::raw_ostream &os) {
    llvm::json::OStream j(os, 2);
    j.object([&] {
      j.attribute("name", alg.name);
      j.attribute("collective", alg.collective == Collective::Custom
                                    ? alg.collectiveSpelling
                                    : collectiveName(alg.collective).str());
      j.attribute("protocol", alg.protocol == Protocol::LL ? "LL" : "Simple");
      j.attribute("inplace", inplace);
      j.attribute("reuse_resources", false);
      j.attributeArray("gpus", [&] {
        for (int32_t r = 0; r < nranks; ++r)
          writeGpu(j, r);
      });
      j.attribute("num_threads_per_block", 1024);
      j.attribute("use_double_scratch_buffer", false);
      j.attribute("buffer_alignment", 16);
      j.attribute("min_message_size", int64_t(alg.minBytes));
      // The DSL writes 2^64-1 for no limit; llvm::json writes uint64_t.
      j.attribute("max_message_size", alg.maxBytes ? alg.maxBytes : UINT64_MAX);
    });
    os << "\n";
  }

  void writeGpu(llvm::json::OStream &j, int32_t r) {
    const ir::Gpu &gpu = alg.gpus[r];
    std::vector<std::pair<int32_t, BufferKind>> remotes = remotesOf(r);
    j.object([&] {
      j.attribute("id", r);
      j.attribute("input_chunks", gpu.inputChunks);
      j.attribute("output_chunks", gpu.outputChunks);
      j.attribute("scratch_chunks", gpu.scratchChunks);
      j.attributeArray("threadblocks", [&] {
        for (int32_t t = 0; t < int32_t(gpu.tbs.size()); ++t) {
          TbLists lists;
          j.object([&] {
            j.attribute("id", t);
            j.attributeArray("ops", [&] { writeOps(j, r, t, lists, remotes); });
            j.attributeArray("channels", [&] {
              if (lists.channels.empty())
                return;
              j.object([&] {
                j.attribute("channel_type", "memory");
                j.attributeArray("channel_ids", [&] {
                  for (int32_t id : lists.channels)
                    j.value(id);
                });
              });
            });
            j.attributeArray("remote_buffer_refs", [&] {
              if (lists.remotes.empty())
                return;
              j.object([&] {
                j.attribute("access_channel_type", "memory");
                j.attributeArray("remote_buffer_ids", [&] {
                  for (int32_t id : lists.remotes)
                    j.value(id);
                });
              });
            });
          });
        }
      });
      j.attributeArray("channels", [&] {
        int32_t most = 0;
        for (const auto &[peer, n] : tagCount[r])
          most = std::max(most, n);
        for (int32_t k = 0; k < most; ++k)
          j.object([&] {
            j.attribute("channel_type", "memory");
            j.attributeArray("connected_to", [&] {
              for (const auto &[peer, n] : tagCount[r])
                if (n > k)
                  j.value(peer);
            });
          });
      });
      j.attributeArray("remote_buffers", [&] {
        for (const auto &[peer, buffer] : remotes)
          j.object([&] {
            j.attribute("rank", peer);
            j.attribute("type", bufferLetter(buffer));
            j.attributeArray("access_channel_types", [&] { j.value("memory"); });
          });
      });
      j.attributeArray("semaphores", [&] {
        for (size_t i = 0; i < semaphores[r].size(); ++i)
          j.object([&] { j.attribute("init_value", 0); });
      });
    });
  }
};

bool carriesData(const Step &s) { return s.type != StepType::Nop; }

} // namespace

llvm::Error writePlan(const Algorithm &alg, llvm::raw_ostream &os, DiagnosticList &diags) {
  Writer writer(alg, diags);
  if (!writer.run(os))
    return diags.takeErrors();
  return llvm::Error::success();
}

std::optional<std::string> stepDifference(const Algorithm &a, const Algorithm &b) {
  if (a.gpus.size() != b.gpus.size())
    return std::to_string(a.gpus.size()) + " ranks against " + std::to_string(b.gpus.size());
  for (size_t r = 0; r < a.gpus.size(); ++r) {
    const ir::Gpu &x = a.gpus[r], &y = b.gpus[r];
    std::string rank = "gpu " + std::to_string(r);
    if (x.inputChunks != y.inputChunks || x.outputChunks != y.outputChunks ||
        x.scratchChunks != y.scratchChunks)
      return rank + ": different chunk counts";
    if (x.tbs.size() != y.tbs.size())
      return rank + ": " + std::to_string(x.tbs.size()) + " tbs against " +
             std::to_string(y.tbs.size());
    for (size_t t = 0; t < x.tbs.size(); ++t) {
      std::vector<const Step *> xs, ys;
      for (const Step &s : x.tbs[t].steps)
        if (carriesData(s))
          xs.push_back(&s);
      for (const Step &s : y.tbs[t].steps)
        if (carriesData(s))
          ys.push_back(&s);
      std::string tb = rank + " tb " + std::to_string(t);
      if (xs.size() != ys.size())
        return tb + ": " + std::to_string(xs.size()) + " steps against " +
               std::to_string(ys.size());
      for (size_t s = 0; s < xs.size(); ++s) {
        const Step &p = *xs[s], &q = *ys[s];
        if (p.type != q.type || p.count != q.count || p.peer != q.peer ||
            (stepTypeInfo(p.type).readsSrc && (p.srcBuf != q.srcBuf || p.srcOff != q.srcOff)) ||
            (stepTypeInfo(p.type).writesDst && (p.dstBuf != q.dstBuf || p.dstOff != q.dstOff)))
          return tb + ": step " + std::to_string(s) + " (not counting nops) differs: '" +
                 stepTypeName(p.type).str() + "' against '" + stepTypeName(q.type).str() + "'";
      }
    }
  }
  return std::nullopt;
}

} // namespace coll::ir::mscclpp
