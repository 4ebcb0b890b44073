//===- MscclppReader.cpp - Reading MSCCL++ execution plans ----------------===//
//
// The JSON plan into mscclpp::Plan, checking every field the v0.10 executor
// reads (src/core/executor/execution_plan.cc) for presence and type, and
// every id for range where the id's list is known here. Each problem is one
// error naming the JSON path; reading goes on, so one run shows them all.
// The input may be hostile: numbers are range-checked before they are
// stored, and nothing is allocated by a size read from the file.
//
//===----------------------------------------------------------------------===//

#include "coll/ir/Mscclpp.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <limits>

namespace coll::ir::mscclpp {

llvm::StringRef channelTypeName(ChannelType type) {
  switch (type) {
  case ChannelType::Memory: return "memory";
  case ChannelType::Port: return "port";
  case ChannelType::Switch: return "switch";
  case ChannelType::None: return "none";
  }
  return "?";
}

namespace {

struct OpNameEntry {
  OpKind kind;
  llvm::StringLiteral name;
};
constexpr OpNameEntry OpNames[] = {
    {OpKind::Nop, "nop"},
    {OpKind::Barrier, "barrier"},
    {OpKind::Put, "put"},
    {OpKind::PutWithSignal, "pws"},
    {OpKind::PutWithSignalFlush, "pwsf"},
    {OpKind::Get, "get"},
    {OpKind::Copy, "copy"},
    {OpKind::Signal, "signal"},
    {OpKind::Wait, "wait"},
    {OpKind::RelaxedSignal, "rlxsignal"},
    {OpKind::RelaxedWait, "rlxwait"},
    {OpKind::Flush, "flush"},
    {OpKind::Reduce, "re"},
    {OpKind::ReduceSend, "res"},
    {OpKind::ReadReduce, "rre"},
    {OpKind::ReadReduceSend, "rres"},
    {OpKind::PutPackets, "ppkt"},
    {OpKind::ReadPutPackets, "rppkt"},
    {OpKind::ReduceSendPackets, "respkt"},
    {OpKind::CopyPackets, "cpkt"},
    {OpKind::UnpackPackets, "upkt"},
    {OpKind::ReducePackets, "repkt"},
    {OpKind::ReduceCopyPackets, "recpkt"},
    {OpKind::ReduceCopySendPackets, "recspkt"},
    {OpKind::Pipeline, "pipeline"},
    {OpKind::SemAcquire, "sem_acquire"},
    {OpKind::SemRelease, "sem_release"},
    {OpKind::MultiLoadReduceStore, "glres"},
    {OpKind::MultiLoadReduce, "glre"},
    {OpKind::MultiStore, "gstore"},
    {OpKind::MultiStorePackets, "gstorepkt"},
};

bool isSwitchOp(OpKind kind) {
  return kind == OpKind::MultiLoadReduceStore || kind == OpKind::MultiLoadReduce ||
         kind == OpKind::MultiStore || kind == OpKind::MultiStorePackets;
}

/// What fields each op kind carries, as the DSL writes them
/// (language/internal/operations.py, to_dict) and the executor reads them.
struct OpShape {
  bool channelIds = false;  ///< `channel_ids` required
  bool channelType = false; ///< `channel_type` required
  bool buffers = false;     ///< `src_buff` and `dst_buff` required
  bool reduceOp = false;    ///< `reduce_op` required
};
OpShape shapeOf(OpKind kind) {
  switch (kind) {
  case OpKind::Signal:
  case OpKind::Wait:
  case OpKind::RelaxedSignal:
  case OpKind::RelaxedWait:
  case OpKind::Flush:
    return {true, true, false, false};
  case OpKind::Put:
  case OpKind::Get:
  case OpKind::PutWithSignal:
  case OpKind::PutWithSignalFlush:
  case OpKind::PutPackets:
  case OpKind::ReadPutPackets:
    return {false, true, true, false};
  case OpKind::Copy:
  case OpKind::CopyPackets:
  case OpKind::UnpackPackets:
    return {false, false, true, false};
  case OpKind::Reduce:
  case OpKind::ReducePackets:
  case OpKind::ReduceCopyPackets:
    return {false, false, true, true};
  case OpKind::ReduceSend:
  case OpKind::ReadReduce:
  case OpKind::ReadReduceSend:
  case OpKind::ReduceSendPackets:
  case OpKind::ReduceCopySendPackets:
    return {false, true, true, true};
  default:
    return {};
  }
}

/// The fields each object kind knows; any other is warned about once per
/// kind and name, with the number of occurrences.
constexpr llvm::StringLiteral PlanFields[] = {
    "name",     "collective", "protocol",   "inplace",
    "reuse_resources", "gpus", "num_threads_per_block",
    "use_double_scratch_buffer", "buffer_alignment", "min_message_size",
    "max_message_size"};
constexpr llvm::StringLiteral GpuFields[] = {
    "id",       "input_chunks", "output_chunks", "scratch_chunks",
    "threadblocks", "channels", "remote_buffers", "semaphores"};
constexpr llvm::StringLiteral TbFields[] = {"id", "ops", "channels",
                                            "remote_buffer_refs"};
constexpr llvm::StringLiteral OpFields[] = {
    "name",        "channel_ids", "channel_type", "src_buff",
    "dst_buff",    "reduce_op",   "tbg_info",     "barrier_id",
    "num_threadblocks", "semaphore_ids", "iter_context", "ops"};
constexpr llvm::StringLiteral BuffFields[] = {"type", "buffer_id", "switch_channel_id",
                                              "index", "size"};
constexpr llvm::StringLiteral ChannelFields[] = {"channel_type", "connected_to"};
constexpr llvm::StringLiteral RemoteBufferFields[] = {"rank", "type", "access_channel_types"};
// The executor reads `buff` on a tb's channel entry into a key it never
// uses; the DSL does not write it in v0.10.
constexpr llvm::StringLiteral TbChannelFields[] = {"channel_type", "channel_ids", "buff"};
constexpr llvm::StringLiteral TbRemoteFields[] = {"access_channel_type", "remote_buffer_ids"};
constexpr llvm::StringLiteral TbgFields[] = {"tb_id", "tbg_size"};
constexpr llvm::StringLiteral IterFields[] = {"unit_size", "num_chunks"};

class Reader {
public:
  explicit Reader(DiagnosticList &diags) : diags(diags) {}

  llvm::Expected<Plan> read(llvm::StringRef text) {
    // llvm::json::parse recurses once per level of nesting; a plan nests
    // about eight levels, so a deep input is refused before it can exhaust
    // the stack.
    if (size_t depth = nesting(text); depth > MaxNesting) {
      error("", "nesting deeper than " + std::to_string(MaxNesting) +
                    " levels of arrays and objects: not a plan");
      return diags.takeErrors();
    }
    llvm::Expected<llvm::json::Value> root = llvm::json::parse(text);
    if (!root) {
      error("", "malformed JSON: " + llvm::toString(root.takeError()));
      return diags.takeErrors();
    }
    Plan plan;
    const llvm::json::Object *obj = root->getAsObject();
    if (!obj) {
      error("", "a plan is a JSON object, not " + kindOf(*root));
      return diags.takeErrors();
    }
    readPlan(*obj, plan);
    reportUnknown();
    if (diags.hasErrors())
      return diags.takeErrors();
    return plan;
  }

private:
  static constexpr size_t MaxNesting = 256;
  DiagnosticList &diags;

  /// The deepest nesting of arrays and objects in `text`, strings skipped.
  static size_t nesting(llvm::StringRef text) {
    size_t depth = 0, deepest = 0;
    bool inString = false, escaped = false;
    for (char c : text) {
      if (inString) {
        if (escaped)
          escaped = false;
        else if (c == '\\')
          escaped = true;
        else if (c == '"')
          inString = false;
      } else if (c == '"') {
        inString = true;
      } else if (c == '[' || c == '{') {
        deepest = std::max(deepest, ++depth);
      } else if ((c == ']' || c == '}') && depth > 0) {
        --depth;
      }
    }
    return deepest;
  }
  /// (object kind, field) -> (occurrences, first path).
  llvm::StringMap<std::pair<unsigned, std::string>> unknown;
  std::vector<std::string> unknownOrder;

  void error(const std::string &path, const llvm::Twine &message) {
    if (path.empty())
      diags.error(0, StepRef{}, message);
    else
      diags.error(0, StepRef{}, path + ": " + message);
  }

  static std::string join(const std::string &path, llvm::StringRef field) {
    return path.empty() ? field.str() : path + "." + field.str();
  }
  static std::string at(const std::string &path, size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

  static std::string kindOf(const llvm::json::Value &v) {
    switch (v.kind()) {
    case llvm::json::Value::Null: return "null";
    case llvm::json::Value::Boolean: return "a boolean";
    case llvm::json::Value::Number: return "a number";
    case llvm::json::Value::String: return "a string";
    case llvm::json::Value::Array: return "an array";
    case llvm::json::Value::Object: return "an object";
    }
    return "?";
  }

  template <size_t N>
  void checkFields(const llvm::json::Object &obj, const std::string &path,
                   llvm::StringRef kind, const llvm::StringLiteral (&known)[N]) {
    for (const auto &kv : obj) {
      llvm::StringRef key = kv.first;
      bool isKnown = false;
      for (llvm::StringRef k : known)
        isKnown |= k == key;
      if (isKnown)
        continue;
      std::string id = (kind + "." + key).str();
      auto [it, inserted] = unknown.try_emplace(id, 0u, join(path, key));
      if (inserted)
        unknownOrder.push_back(id);
      ++it->second.first;
    }
  }

  void reportUnknown() {
    for (const std::string &id : unknownOrder) {
      const auto &entry = unknown[id];
      diags.warning(0, StepRef{},
                    entry.second + ": unknown field ignored (" +
                        std::to_string(entry.first) +
                        (entry.first == 1 ? " occurrence)" : " occurrences)"));
    }
  }

  /// A required field; an error naming it when absent.
  const llvm::json::Value *need(const llvm::json::Object &obj, const std::string &path,
                                llvm::StringRef field) {
    const llvm::json::Value *v = obj.get(field);
    if (!v)
      error(path, "missing field '" + field + "'");
    return v;
  }

  std::optional<int64_t> integer(const llvm::json::Value &v, const std::string &path,
                                 int64_t lo, int64_t hi) {
    std::optional<int64_t> n;
    if (auto i = v.getAsInteger())
      n = *i;
    if (!n) {
      error(path, "expected an integer, found " +
                      (v.kind() == llvm::json::Value::Number ? std::string("a non-integral or too large number")
                                                             : kindOf(v)));
      return std::nullopt;
    }
    if (*n < lo || *n > hi) {
      error(path, std::to_string(*n) + " is out of range [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "]");
      return std::nullopt;
    }
    return n;
  }
  std::optional<int32_t> int32(const llvm::json::Value &v, const std::string &path,
                               int32_t lo = 0) {
    auto n = integer(v, path, lo, std::numeric_limits<int32_t>::max());
    if (!n)
      return std::nullopt;
    return static_cast<int32_t>(*n);
  }
  std::optional<uint64_t> uint64(const llvm::json::Value &v, const std::string &path) {
    if (auto u = v.getAsUINT64())
      return *u;
    if (auto i = v.getAsInteger()) {
      if (*i >= 0)
        return static_cast<uint64_t>(*i);
      error(path, std::to_string(*i) + " is negative");
      return std::nullopt;
    }
    error(path, "expected an unsigned integer, found " + kindOf(v));
    return std::nullopt;
  }
  std::optional<bool> boolean(const llvm::json::Value &v, const std::string &path) {
    if (auto b = v.getAsBoolean())
      return *b;
    error(path, "expected true or false, found " + kindOf(v));
    return std::nullopt;
  }
  std::optional<llvm::StringRef> string(const llvm::json::Value &v, const std::string &path) {
    if (auto s = v.getAsString())
      return *s;
    error(path, "expected a string, found " + kindOf(v));
    return std::nullopt;
  }
  const llvm::json::Array *array(const llvm::json::Value &v, const std::string &path) {
    if (const llvm::json::Array *a = v.getAsArray())
      return a;
    error(path, "expected an array, found " + kindOf(v));
    return nullptr;
  }
  const llvm::json::Object *object(const llvm::json::Value &v, const std::string &path) {
    if (const llvm::json::Object *o = v.getAsObject())
      return o;
    error(path, "expected an object, found " + kindOf(v));
    return nullptr;
  }
  /// Calls fn(object, its path, its position) for each element of the array
  /// `v` that is an object; everything else is an error. After an error the
  /// positions no longer match what was stored, but nothing is translated
  /// then.
  template <typename Fn>
  void forEachObject(const llvm::json::Value &v, const std::string &path, Fn fn) {
    const llvm::json::Array *a = array(v, path);
    if (!a)
      return;
    for (size_t i = 0; i < a->size(); ++i) {
      std::string ipath = at(path, i);
      if (const llvm::json::Object *o = object((*a)[i], ipath))
        fn(*o, ipath, i);
    }
  }

  /// An array of integers >= 0 (ids).
  std::optional<std::vector<int32_t>> ids(const llvm::json::Value &v, const std::string &path) {
    const llvm::json::Array *a = array(v, path);
    if (!a)
      return std::nullopt;
    std::vector<int32_t> out;
    bool ok = true;
    for (size_t i = 0; i < a->size(); ++i) {
      auto n = int32((*a)[i], at(path, i));
      ok &= n.has_value();
      if (n)
        out.push_back(*n);
    }
    if (!ok)
      return std::nullopt;
    return out;
  }

  std::optional<ChannelType> channelType(const llvm::json::Value &v, const std::string &path) {
    auto s = string(v, path);
    if (!s)
      return std::nullopt;
    auto t = llvm::StringSwitch<std::optional<ChannelType>>(*s)
                 .Case("memory", ChannelType::Memory)
                 .Case("port", ChannelType::Port)
                 .Case("switch", ChannelType::Switch)
                 .Case("none", ChannelType::None)
                 .Default(std::nullopt);
    if (!t)
      error(path, "unknown channel type '" + *s + "' (memory, port, switch or none)");
    return t;
  }
  std::optional<BufferKind> bufferType(const llvm::json::Value &v, const std::string &path) {
    auto s = string(v, path);
    if (!s)
      return std::nullopt;
    auto b = parseBuffer(*s);
    if (!b)
      error(path, "unknown buffer type '" + *s + "' (i, o or s)");
    return b;
  }

  void readPlan(const llvm::json::Object &obj, Plan &plan) {
    checkFields(obj, "", "plan", PlanFields);
    if (auto *v = need(obj, "", "name"))
      if (auto s = string(*v, "name"))
        plan.name = s->str();
    if (auto *v = need(obj, "", "collective"))
      if (auto s = string(*v, "collective"))
        plan.collective = s->str();
    if (auto *v = need(obj, "", "protocol"))
      if (auto s = string(*v, "protocol")) {
        // The executor tells only "LL" (packets) from everything else; the
        // DSL writes "Simple" or "LL".
        if (*s == "Simple")
          plan.protocol = Protocol::Simple;
        else if (*s == "LL")
          plan.protocol = Protocol::LL;
        else
          error("protocol", "unknown protocol '" + *s + "' (Simple or LL)");
      }
    if (auto *v = need(obj, "", "inplace"))
      if (auto b = boolean(*v, "inplace"))
        plan.inplace = *b;
    if (auto *v = obj.get("reuse_resources"))
      if (auto b = boolean(*v, "reuse_resources"))
        plan.reuseResources = *b;
    if (auto *v = obj.get("use_double_scratch_buffer"))
      if (auto b = boolean(*v, "use_double_scratch_buffer"))
        plan.useDoubleScratchBuffer = *b;
    if (auto *v = obj.get("num_threads_per_block"))
      if (auto n = integer(*v, "num_threads_per_block", 1, 1024))
        plan.numThreadsPerBlock = *n;
    if (auto *v = obj.get("buffer_alignment"))
      if (auto n = integer(*v, "buffer_alignment", 1, int64_t(1) << 30))
        plan.bufferAlignment = *n;
    if (auto *v = obj.get("min_message_size"))
      if (auto n = uint64(*v, "min_message_size"))
        plan.minMessageSize = *n;
    if (auto *v = obj.get("max_message_size"))
      if (auto n = uint64(*v, "max_message_size"))
        plan.maxMessageSize = *n;
    if (plan.minMessageSize > plan.maxMessageSize)
      error("min_message_size", std::to_string(plan.minMessageSize) +
                                    " is larger than max_message_size " +
                                    std::to_string(plan.maxMessageSize));
    const llvm::json::Value *gpus = need(obj, "", "gpus");
    if (!gpus)
      return;
    const llvm::json::Array *list = gpus->getAsArray();
    if (list && list->empty())
      error("gpus", "the plan has no gpus");
    size_t nranks = list ? list->size() : 0;
    forEachObject(*gpus, "gpus", [&](const llvm::json::Object &o, const std::string &path,
                                     size_t g) {
      Gpu gpu;
      gpu.path = path;
      readGpu(o, path, g, nranks, gpu);
      plan.gpus.push_back(std::move(gpu));
    });
  }

  void readGpu(const llvm::json::Object &obj, const std::string &path, size_t rank,
               size_t nranks, Gpu &gpu) {
    checkFields(obj, path, "gpu", GpuFields);
    if (auto *v = need(obj, path, "id"))
      if (auto id = int32(*v, join(path, "id")); id && size_t(*id) != rank)
        error(join(path, "id"), "id " + std::to_string(*id) + " at position " +
                                    std::to_string(rank) +
                                    ": the executor requires gpus[r].id == r");
    auto chunks = [&](llvm::StringRef field, int32_t &out) {
      if (auto *v = need(obj, path, field))
        if (auto n = int32(*v, join(path, field)))
          out = *n;
    };
    chunks("input_chunks", gpu.inputChunks);
    chunks("output_chunks", gpu.outputChunks);
    chunks("scratch_chunks", gpu.scratchChunks);

    if (auto *v = need(obj, path, "channels"))
      forEachObject(*v, join(path, "channels"),
                    [&](const llvm::json::Object &o, const std::string &cpath, size_t) {
                      Channel channel;
                      channel.path = cpath;
                      readChannel(o, cpath, nranks, channel);
                      gpu.channels.push_back(std::move(channel));
                    });
    if (auto *v = need(obj, path, "remote_buffers"))
      forEachObject(*v, join(path, "remote_buffers"),
                    [&](const llvm::json::Object &o, const std::string &bpath, size_t) {
                      RemoteBuffer buffer;
                      buffer.path = bpath;
                      readRemoteBuffer(o, bpath, nranks, buffer);
                      gpu.remoteBuffers.push_back(std::move(buffer));
                    });
    // The executor reads `semaphores` only when present.
    if (auto *v = obj.get("semaphores"))
      forEachObject(*v, join(path, "semaphores"),
                    [&](const llvm::json::Object &o, const std::string &spath, size_t) {
                      int64_t init = 0;
                      if (auto *iv = need(o, spath, "init_value"))
                        if (auto n = integer(*iv, join(spath, "init_value"), 0,
                                             std::numeric_limits<uint32_t>::max()))
                          init = *n;
                      gpu.semaphoreInitValues.push_back(init);
                    });
    if (auto *v = need(obj, path, "threadblocks"))
      forEachObject(*v, join(path, "threadblocks"),
                    [&](const llvm::json::Object &o, const std::string &tpath, size_t t) {
                      Threadblock tb;
                      tb.path = tpath;
                      readThreadblock(o, tpath, t, tb);
                      gpu.threadblocks.push_back(std::move(tb));
                    });
  }

  void readChannel(const llvm::json::Object &obj, const std::string &path, size_t nranks,
                   Channel &channel) {
    const llvm::json::Value *t = need(obj, path, "channel_type");
    if (!t)
      return;
    auto type = channelType(*t, join(path, "channel_type"));
    if (!type)
      return;
    channel.type = *type;
    if (*type == ChannelType::Switch) {
      // NVLS multicast: every member's store reaches every member's buffer,
      // and a load reduces over all of them, in one instruction.
      error(join(path, "channel_type"),
            "switch (NVLS) channels: Coll has no multicast step");
      return;
    }
    if (*type == ChannelType::None) {
      error(join(path, "channel_type"), "a channel of type 'none' connects nothing");
      return;
    }
    checkFields(obj, path, "channel", ChannelFields);
    const llvm::json::Value *peers = need(obj, path, "connected_to");
    if (!peers)
      return;
    auto list = ids(*peers, join(path, "connected_to"));
    if (!list)
      return;
    for (size_t i = 0; i < list->size(); ++i) {
      int32_t peer = (*list)[i];
      std::string ppath = at(join(path, "connected_to"), i);
      // A channel to the rank itself is legal (the executor connects it like
      // any other); the translation refuses to use one.
      if (size_t(peer) >= nranks)
        error(ppath, "peer " + std::to_string(peer) + " is out of range [0, " +
                         std::to_string(nranks) + ")");
    }
    channel.connectedTo = std::move(*list);
  }

  void readRemoteBuffer(const llvm::json::Object &obj, const std::string &path,
                        size_t nranks, RemoteBuffer &buffer) {
    checkFields(obj, path, "remote buffer", RemoteBufferFields);
    if (auto *v = need(obj, path, "rank"))
      if (auto r = int32(*v, join(path, "rank"))) {
        if (size_t(*r) >= nranks)
          error(join(path, "rank"), "rank " + std::to_string(*r) + " is out of range [0, " +
                                        std::to_string(nranks) + ")");
        buffer.rank = *r;
      }
    if (auto *v = need(obj, path, "type"))
      if (auto b = bufferType(*v, join(path, "type")))
        buffer.type = *b;
    if (auto *v = need(obj, path, "access_channel_types"))
      if (auto *a = array(*v, join(path, "access_channel_types")))
        for (size_t i = 0; i < a->size(); ++i)
          if (auto t = channelType((*a)[i], at(join(path, "access_channel_types"), i)))
            buffer.accessChannelTypes.push_back(*t);
  }

  template <size_t N>
  void readIdLists(const llvm::json::Value &v, const std::string &path,
                   const llvm::StringLiteral (&fields)[N], std::vector<IdList> &out) {
    llvm::StringRef typeField = fields[0], idsField = fields[1];
    forEachObject(v, path, [&](const llvm::json::Object &o, const std::string &ipath, size_t) {
      IdList list;
      list.path = ipath;
      checkFields(o, ipath, "tb list", fields);
      bool ok = true;
      if (auto *t = need(o, ipath, typeField)) {
        auto type = channelType(*t, join(ipath, typeField));
        ok &= type.has_value();
        if (type)
          list.type = *type;
        if (type && *type == ChannelType::Switch) {
          error(join(ipath, typeField), "switch (NVLS) channels: Coll has no multicast step");
          ok = false;
        }
      } else {
        ok = false;
      }
      if (auto *l = need(o, ipath, idsField)) {
        auto idl = ids(*l, join(ipath, idsField));
        ok &= idl.has_value();
        if (idl)
          list.ids = std::move(*idl);
      } else {
        ok = false;
      }
      if (ok)
        out.push_back(std::move(list));
    });
  }

  void readThreadblock(const llvm::json::Object &obj, const std::string &path, size_t index,
                       Threadblock &tb) {
    checkFields(obj, path, "threadblock", TbFields);
    if (auto *v = need(obj, path, "id"))
      if (auto id = int32(*v, join(path, "id")); id && size_t(*id) != index)
        error(join(path, "id"), "id " + std::to_string(*id) + " at position " +
                                    std::to_string(index) +
                                    ": the executor places tbs by id, which must be their position");
    if (auto *v = need(obj, path, "channels"))
      readIdLists(*v, join(path, "channels"), TbChannelFields, tb.channels);
    // The executor skips a tb without `remote_buffer_refs`.
    if (auto *v = obj.get("remote_buffer_refs"))
      readIdLists(*v, join(path, "remote_buffer_refs"), TbRemoteFields, tb.remoteBufferRefs);
    if (auto *v = need(obj, path, "ops"))
      readOps(*v, join(path, "ops"), tb.ops, /*nested=*/false);
  }

  void readOps(const llvm::json::Value &v, const std::string &path, std::vector<Op> &out,
               bool nested) {
    forEachObject(v, path, [&](const llvm::json::Object &o, const std::string &opath, size_t) {
      Op op;
      op.path = opath;
      if (readOp(o, opath, op, nested))
        out.push_back(std::move(op));
    });
  }

  std::optional<BufferRef> readBuffer(const llvm::json::Value &v, const std::string &path) {
    const llvm::json::Object *o = object(v, path);
    if (!o)
      return std::nullopt;
    checkFields(*o, path, "buffer", BuffFields);
    BufferRef ref;
    ref.path = path;
    bool ok = true;
    int kinds = 0;
    if (auto *t = o->get("type")) {
      ++kinds;
      ref.local = bufferType(*t, join(path, "type"));
      ok &= ref.local.has_value();
    }
    if (auto *b = o->get("buffer_id")) {
      ++kinds;
      auto id = int32(*b, join(path, "buffer_id"));
      ok &= id.has_value();
      ref.remoteBufferId = id.value_or(-1);
    }
    if (auto *s = o->get("switch_channel_id")) {
      ++kinds;
      auto id = int32(*s, join(path, "switch_channel_id"));
      ok &= id.has_value();
      ref.switchChannelId = id.value_or(-1);
    }
    if (kinds != 1) {
      error(path, kinds == 0 ? "names no buffer: one of 'type' (local), 'buffer_id' (a peer's) "
                               "or 'switch_channel_id'"
                             : "names more than one buffer: only one of 'type', 'buffer_id' "
                               "and 'switch_channel_id'");
      ok = false;
    }
    if (auto *i = need(*o, path, "index")) {
      auto n = int32(*i, join(path, "index"));
      ok &= n.has_value();
      ref.index = n.value_or(0);
    } else {
      ok = false;
    }
    if (auto *s = need(*o, path, "size")) {
      auto n = int32(*s, join(path, "size"), 1);
      ok &= n.has_value();
      ref.size = n.value_or(0);
    } else {
      ok = false;
    }
    if (ok && int64_t(ref.index) + ref.size > std::numeric_limits<int32_t>::max()) {
      error(path, "index " + std::to_string(ref.index) + " + size " + std::to_string(ref.size) +
                      " does not fit 32 bits");
      ok = false;
    }
    if (!ok)
      return std::nullopt;
    return ref;
  }

  bool readBuffers(const llvm::json::Object &obj, const std::string &path, llvm::StringRef field,
                   std::vector<BufferRef> &out) {
    const llvm::json::Value *v = need(obj, path, field);
    if (!v)
      return false;
    const llvm::json::Array *a = array(*v, join(path, field));
    if (!a)
      return false;
    if (a->empty()) {
      error(join(path, field), "empty: the op names no buffer");
      return false;
    }
    bool ok = true;
    for (size_t i = 0; i < a->size(); ++i) {
      auto ref = readBuffer((*a)[i], at(join(path, field), i));
      ok &= ref.has_value();
      if (ref)
        out.push_back(std::move(*ref));
    }
    return ok;
  }

  bool readOp(const llvm::json::Object &obj, const std::string &path, Op &op, bool nested) {
    checkFields(obj, path, "op", OpFields);
    const llvm::json::Value *n = need(obj, path, "name");
    if (!n)
      return false;
    auto name = string(*n, join(path, "name"));
    if (!name)
      return false;
    auto kind = parseOpName(*name);
    if (!kind) {
      error(join(path, "name"), "unknown op '" + *name + "'");
      return false;
    }
    op.kind = *kind;
    if (isSwitchOp(*kind)) {
      error(join(path, "name"),
            "'" + *name + "' uses switch (NVLS) channels: Coll has no multicast step");
      return false;
    }
    bool ok = true;
    OpShape shape = shapeOf(*kind);
    if (auto *v = obj.get("channel_type")) {
      op.channelType = channelType(*v, join(path, "channel_type"));
      ok &= op.channelType.has_value();
    } else if (shape.channelType) {
      error(path, "missing field 'channel_type'");
      ok = false;
    }
    if (auto *v = obj.get("channel_ids")) {
      auto l = ids(*v, join(path, "channel_ids"));
      ok &= l.has_value();
      if (l)
        op.channelIds = std::move(*l);
    } else if (shape.channelIds) {
      error(path, "missing field 'channel_ids'");
      ok = false;
    }
    if (shape.buffers) {
      ok &= readBuffers(obj, path, "src_buff", op.src);
      ok &= readBuffers(obj, path, "dst_buff", op.dst);
    }
    if (auto *v = obj.get("reduce_op")) {
      if (auto s = string(*v, join(path, "reduce_op")))
        op.reduceOp = s->str();
      else
        ok = false;
    } else if (shape.reduceOp) {
      error(path, "missing field 'reduce_op'");
      ok = false;
    }
    if (auto *v = obj.get("tbg_info")) {
      std::string tpath = join(path, "tbg_info");
      if (auto *o = object(*v, tpath)) {
        checkFields(*o, tpath, "tbg_info", TbgFields);
        TbgInfo tbg;
        auto *id = need(*o, tpath, "tb_id");
        auto *size = need(*o, tpath, "tbg_size");
        auto idv = id ? int32(*id, join(tpath, "tb_id")) : std::nullopt;
        auto sizev = size ? int32(*size, join(tpath, "tbg_size"), 1) : std::nullopt;
        if (idv && sizev && *idv >= *sizev) {
          error(join(tpath, "tb_id"), "tb_id " + std::to_string(*idv) +
                                          " is out of range [0, " + std::to_string(*sizev) +
                                          ") given by tbg_size");
          ok = false;
        } else if (idv && sizev) {
          tbg.tbId = *idv;
          tbg.tbgSize = *sizev;
          op.tbg = tbg;
        } else {
          ok = false;
        }
      } else {
        ok = false;
      }
    }
    if (*kind == OpKind::Barrier) {
      auto *id = need(obj, path, "barrier_id");
      auto *count = need(obj, path, "num_threadblocks");
      auto idv = id ? int32(*id, join(path, "barrier_id")) : std::nullopt;
      auto countv = count ? int32(*count, join(path, "num_threadblocks"), 1) : std::nullopt;
      ok &= idv && countv;
      op.barrierId = idv.value_or(-1);
      op.numThreadblocks = countv.value_or(0);
    }
    if (*kind == OpKind::SemAcquire || *kind == OpKind::SemRelease) {
      if (auto *v = need(obj, path, "semaphore_ids")) {
        auto l = ids(*v, join(path, "semaphore_ids"));
        ok &= l.has_value();
        if (l)
          op.semaphoreIds = std::move(*l);
      } else {
        ok = false;
      }
    }
    if (*kind == OpKind::Pipeline) {
      if (nested) {
        // The executor flattens one level: a pipeline's ops follow it in the
        // tb's op list, and a nested pipeline would run its own ops twice.
        error(join(path, "name"), "a pipeline inside a pipeline");
        return false;
      }
      if (auto *v = need(obj, path, "iter_context")) {
        std::string ipath = join(path, "iter_context");
        if (auto *o = object(*v, ipath)) {
          checkFields(*o, ipath, "iter_context", IterFields);
          auto *u = need(*o, ipath, "unit_size");
          auto *c = need(*o, ipath, "num_chunks");
          auto uv = u ? integer(*u, join(ipath, "unit_size"), 1,
                                std::numeric_limits<uint32_t>::max())
                      : std::nullopt;
          auto cv = c ? int32(*c, join(ipath, "num_chunks"), 1) : std::nullopt;
          ok &= uv && cv;
          op.unitSize = uv.value_or(0);
          op.numChunks = cv.value_or(0);
        } else {
          ok = false;
        }
      } else {
        ok = false;
      }
      if (auto *v = need(obj, path, "ops"))
        readOps(*v, join(path, "ops"), op.ops, /*nested=*/true);
      else
        ok = false;
    }
    return ok;
  }
};

} // namespace

llvm::StringRef opName(OpKind kind) {
  for (const OpNameEntry &e : OpNames)
    if (e.kind == kind)
      return e.name;
  return "?";
}

std::optional<OpKind> parseOpName(llvm::StringRef name) {
  for (const OpNameEntry &e : OpNames)
    if (e.name == name)
      return e.kind;
  return std::nullopt;
}

bool looksLikePlan(llvm::StringRef text) {
  text = text.ltrim(" \t\r\n");
  if (text.startswith("\xEF\xBB\xBF")) // a UTF-8 byte order mark
    text = text.drop_front(3).ltrim(" \t\r\n");
  return text.startswith("{");
}

llvm::Expected<Plan> parsePlan(llvm::StringRef text, DiagnosticList &diags) {
  return Reader(diags).read(text);
}

llvm::Expected<Algorithm> parsePlanAlgorithm(llvm::StringRef text, DiagnosticList &diags) {
  llvm::Expected<Plan> plan = parsePlan(text, diags);
  if (!plan)
    return plan.takeError();
  return translatePlan(*plan, diags);
}

} // namespace coll::ir::mscclpp
