//===- MscclppTest.cpp - Reading and translating MSCCL++ plans ------------===//
//
// Every error of the plan reader and of the translation, each on a small
// plan: a valid 2-rank one-shot allreduce (below) with one thing changed.
// Tests compare the whole list of errors, so that each also shows that
// nothing else was reported. Inline plans are named "plan.json".
//
//===----------------------------------------------------------------------===//

#include "IRTestUtil.h"

#include "coll/ir/Check.h"
#include "coll/ir/Mscclpp.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <functional>

namespace coll::ir {
namespace {

using test::formatted;
using Strings = std::vector<std::string>;
namespace json = llvm::json;

/// A 2-rank in-place allreduce of 2 chunks, one shot: each rank signals its
/// peer (relaxed) and waits for it, reduces its chunk from both inputs into
/// both (rres), and ends with a signal and a wait. Rank 1 is made from rank
/// 0 (planText): peer 0, and chunk 1.
const char *const BasePlan = R"({
  "name": "oneshot", "collective": "allreduce", "protocol": "Simple",
  "inplace": true, "reuse_resources": false, "num_threads_per_block": 1024,
  "use_double_scratch_buffer": false, "buffer_alignment": 16,
  "min_message_size": 0, "max_message_size": 18446744073709551615,
  "gpus": [
    {"id": 0, "input_chunks": 2, "output_chunks": 2, "scratch_chunks": 1,
     "channels": [{"channel_type": "memory", "connected_to": [1]}],
     "remote_buffers": [{"rank": 1, "type": "i", "access_channel_types": ["memory"]}],
     "semaphores": [],
     "threadblocks": [{"id": 0,
       "channels": [{"channel_type": "memory", "channel_ids": [0]}],
       "remote_buffer_refs": [{"access_channel_type": "memory", "remote_buffer_ids": [0]}],
       "ops": [
         {"name": "nop"},
         {"name": "rlxsignal", "channel_ids": [0], "channel_type": "memory"},
         {"name": "nop"},
         {"name": "rlxwait", "channel_ids": [0], "channel_type": "memory"},
         {"name": "nop"},
         {"name": "rres", "channel_type": "memory", "reduce_op": "sum",
          "src_buff": [{"type": "i", "index": 0, "size": 1}, {"buffer_id": 0, "index": 0, "size": 1}],
          "dst_buff": [{"type": "i", "index": 0, "size": 1}, {"buffer_id": 0, "index": 0, "size": 1}]},
         {"name": "nop"},
         {"name": "signal", "channel_ids": [0], "channel_type": "memory"},
         {"name": "nop"},
         {"name": "wait", "channel_ids": [0], "channel_type": "memory"},
         {"name": "nop"}]}]}
  ]
})";

using Edit = std::function<void(json::Object &)>;

json::Object &obj(json::Value &v) { return *v.getAsObject(); }
json::Array &arr(json::Value &v) { return *v.getAsArray(); }
json::Object &gpuOf(json::Object &plan, size_t g) { return obj(arr(*plan.get("gpus"))[g]); }
json::Object &tbOf(json::Object &plan, size_t g, size_t t) {
  return obj(arr(*gpuOf(plan, g).get("threadblocks"))[t]);
}
json::Array &opsOf(json::Object &plan, size_t g, size_t t) {
  return arr(*tbOf(plan, g, t).get("ops"));
}
json::Object &opOf(json::Object &plan, size_t g, size_t t, size_t k) {
  return obj(opsOf(plan, g, t)[k]);
}
/// Removes element `i` (llvm::json::Array has no erase).
void eraseAt(json::Array &a, size_t i) {
  json::Array out;
  for (size_t k = 0; k < a.size(); ++k)
    if (k != i)
      out.push_back(std::move(a[k]));
  a = std::move(out);
}
/// Applies `edit` to both ranks' copies of the base plan.
Edit both(const std::function<void(json::Object &, size_t)> &edit) {
  return [edit](json::Object &plan) {
    edit(plan, 0);
    edit(plan, 1);
  };
}

std::string planText(const Edit &edit = {}) {
  json::Value v = cantFail(json::parse(BasePlan));
  json::Value rank1 = arr(*obj(v).get("gpus"))[0];
  json::Object &g1 = obj(rank1);
  g1["id"] = 1;
  obj(arr(*g1.get("channels"))[0])["connected_to"] = json::Array{0};
  obj(arr(*g1.get("remote_buffers"))[0])["rank"] = 0;
  json::Object &rres = obj(arr(*obj(arr(*g1.get("threadblocks"))[0]).get("ops"))[5]);
  for (const char *field : {"src_buff", "dst_buff"})
    for (json::Value &b : arr(*rres.get(field)))
      obj(b)["index"] = 1;
  arr(*obj(v).get("gpus")).push_back(std::move(rank1));
  if (edit)
    edit(obj(v));
  return llvm::formatv("{0}", v).str();
}

struct Result {
  std::optional<mscclpp::Plan> plan;
  std::optional<Algorithm> alg;
  Strings errors, warnings;
};

/// Reads `text` (and, with `translate`, translates it).
Result readText(llvm::StringRef text, bool translate = true) {
  DiagnosticList diags("plan.json");
  Result r;
  if (translate) {
    auto alg = mscclpp::parsePlanAlgorithm(text, diags);
    if (alg)
      r.alg = std::move(*alg);
    else
      llvm::consumeError(alg.takeError());
  } else {
    auto plan = mscclpp::parsePlan(text, diags);
    if (plan)
      r.plan = std::move(*plan);
    else
      llvm::consumeError(plan.takeError());
  }
  r.errors = formatted(diags, Severity::Error);
  r.warnings = formatted(diags, Severity::Warning);
  return r;
}
/// The same for the base plan after `edit`.
Result read(const Edit &edit, bool translate = true) {
  return readText(planText(edit), translate);
}

/// The errors of the base plan after `edit`.
Strings errors(const Edit &edit) { return read(edit).errors; }
std::string E(const std::string &message) { return "plan.json: error: " + message; }

/// Verifies and checks a translated algorithm; the check's errors.
Strings checkErrors(const Algorithm &alg) {
  DiagnosticList diags("plan.json");
  auto analysis = verify(alg, diags);
  if (!analysis) {
    llvm::consumeError(analysis.takeError());
    return formatted(diags, Severity::Error);
  }
  check(alg, *analysis, diags);
  return formatted(diags, Severity::Error);
}

//===----------------------------------------------------------------------===//
// The model
//===----------------------------------------------------------------------===//

TEST(MscclppTest, ReadsTheModel) {
  Result r = read({}, /*translate=*/false);
  ASSERT_EQ(r.errors, Strings{});
  EXPECT_EQ(r.warnings, Strings{});
  const mscclpp::Plan &plan = *r.plan;
  EXPECT_EQ(plan.name, "oneshot");
  EXPECT_EQ(plan.collective, "allreduce");
  EXPECT_EQ(plan.protocol, Protocol::Simple);
  EXPECT_TRUE(plan.inplace);
  EXPECT_FALSE(plan.reuseResources);
  EXPECT_EQ(plan.bufferAlignment, 16);
  EXPECT_EQ(plan.numThreadsPerBlock, 1024);
  ASSERT_EQ(plan.gpus.size(), 2u);
  const mscclpp::Gpu &g = plan.gpus[1];
  EXPECT_EQ(g.inputChunks, 2);
  EXPECT_EQ(g.scratchChunks, 1);
  ASSERT_EQ(g.channels.size(), 1u);
  EXPECT_EQ(g.channels[0].type, mscclpp::ChannelType::Memory);
  EXPECT_EQ(g.channels[0].connectedTo, std::vector<int32_t>{0});
  ASSERT_EQ(g.remoteBuffers.size(), 1u);
  EXPECT_EQ(g.remoteBuffers[0].rank, 0);
  EXPECT_EQ(g.remoteBuffers[0].type, BufferKind::Input);
  ASSERT_EQ(g.threadblocks.size(), 1u);
  const mscclpp::Op &op = g.threadblocks[0].ops[5];
  EXPECT_EQ(op.kind, mscclpp::OpKind::ReadReduceSend);
  EXPECT_EQ(op.reduceOp, "sum");
  ASSERT_EQ(op.src.size(), 2u);
  EXPECT_EQ(op.src[1].remoteBufferId, 0);
  EXPECT_EQ(op.src[1].index, 1);
  EXPECT_EQ(op.path, "gpus[1].threadblocks[0].ops[5]");
  EXPECT_EQ(mscclpp::opName(op.kind), "rres");
}

TEST(MscclppTest, EveryOpNameRoundTrips) {
  for (llvm::StringRef name :
       {"nop", "barrier", "put", "pws", "pwsf", "get", "copy", "signal", "wait", "rlxsignal",
        "rlxwait", "flush", "re", "res", "rre", "rres", "ppkt", "rppkt", "respkt", "cpkt", "upkt",
        "repkt", "recpkt", "recspkt", "pipeline", "sem_acquire", "sem_release", "glres", "glre",
        "gstore", "gstorepkt"}) {
    auto kind = mscclpp::parseOpName(name);
    ASSERT_TRUE(kind.has_value()) << name.str();
    EXPECT_EQ(mscclpp::opName(*kind), name);
  }
  EXPECT_FALSE(mscclpp::parseOpName("xyz").has_value());
}

TEST(MscclppTest, LooksLikePlan) {
  EXPECT_TRUE(mscclpp::looksLikePlan("{}"));
  EXPECT_TRUE(mscclpp::looksLikePlan(" \n\t{"));
  EXPECT_TRUE(mscclpp::looksLikePlan("\xEF\xBB\xBF{"));
  EXPECT_FALSE(mscclpp::looksLikePlan("<algo/>"));
  EXPECT_FALSE(mscclpp::looksLikePlan(""));
}

//===----------------------------------------------------------------------===//
// The translation of the base plan, and that it proves
//===----------------------------------------------------------------------===//

TEST(MscclppTest, TranslatesAndProves) {
  Result r = read({});
  ASSERT_EQ(r.errors, Strings{});
  const Algorithm &alg = *r.alg;
  EXPECT_EQ(alg.collective, Collective::AllReduce);
  EXPECT_TRUE(alg.inplace);
  EXPECT_FALSE(alg.outofplace);
  EXPECT_EQ(alg.nchunksPerLoop, 2);
  EXPECT_EQ(alg.maxBytes, 0u); // 2^64-1: no limit
  EXPECT_EQ(alg.nchannels, 1);
  ASSERT_EQ(alg.gpus[1].tbs.size(), 1u);
  // signal, wait, getre (the rres's read of the peer into the local chunk,
  // which is its own first source), put (the result to the peer), signal,
  // wait.
  const std::vector<Step> &steps = alg.gpus[1].tbs[0].steps;
  ASSERT_EQ(steps.size(), 6u);
  EXPECT_EQ(steps[0].type, StepType::Signal);
  EXPECT_EQ(steps[0].peer, 0);
  EXPECT_EQ(steps[1].type, StepType::Wait);
  EXPECT_EQ(steps[2].type, StepType::GetReduce);
  EXPECT_EQ(steps[2].srcOff, 1);
  EXPECT_EQ(steps[2].dstOff, 1);
  EXPECT_EQ(steps[2].peer, 0);
  EXPECT_EQ(steps[3].type, StepType::Put);
  EXPECT_EQ(steps[3].srcBuf, BufferKind::Input);
  EXPECT_EQ(steps[3].dstBuf, BufferKind::Input);
  EXPECT_EQ(steps[4].type, StepType::Signal);
  EXPECT_EQ(steps[5].type, StepType::Wait);
  EXPECT_EQ(checkErrors(alg), Strings{});
}

TEST(MscclppTest, ReductionIntoAnotherPlaceCopiesFirst) {
  // rres into scratch: the first source is copied there, then the peer's
  // chunk is added.
  Result r = read(both([](json::Object &plan, size_t g) {
    json::Object &op = opOf(plan, g, 0, 5);
    obj(arr(*op.get("dst_buff"))[0]) = json::Object{{"type", "s"}, {"index", 0}, {"size", 1}};
    op["dst_buff"] = json::Array{arr(*op.get("dst_buff"))[0]};
    op["name"] = "rre";
  }));
  ASSERT_EQ(r.errors, Strings{});
  const std::vector<Step> &steps = r.alg->gpus[0].tbs[0].steps;
  ASSERT_EQ(steps.size(), 6u);
  EXPECT_EQ(steps[2].type, StepType::Copy);
  EXPECT_EQ(steps[2].dstBuf, BufferKind::Scratch);
  EXPECT_EQ(steps[3].type, StepType::GetReduce);
  EXPECT_EQ(steps[4].type, StepType::Signal);
}

TEST(MscclppTest, CheckFindsAWrongResult) {
  // Rank 1 reduces chunk 0 too: chunk 1 of both ranks stays unreduced.
  Result r = read([](json::Object &plan) {
    json::Object &op = opOf(plan, 1, 0, 5);
    for (const char *field : {"src_buff", "dst_buff"})
      for (json::Value &b : arr(*op.get(field)))
        obj(b)["index"] = 0;
  });
  ASSERT_EQ(r.errors, Strings{});
  Strings errs = checkErrors(*r.alg);
  ASSERT_FALSE(errs.empty());
  EXPECT_NE(errs[0].find("race"), std::string::npos) << errs[0];
}

//===----------------------------------------------------------------------===//
// Reader errors
//===----------------------------------------------------------------------===//

TEST(MscclppTest, MalformedJson) {
  Result r = readText("{\"name\": ");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].rfind("plan.json: error: malformed JSON: ", 0), 0u) << r.errors[0];
  EXPECT_EQ(readText("[1, 2]").errors, Strings{E("a plan is a JSON object, not an array")});
}

TEST(MscclppTest, DeepNestingIsRefused) {
  std::string deep = std::string(300, '[') + std::string(300, ']');
  EXPECT_EQ(readText(deep).errors,
            Strings{E("nesting deeper than 256 levels of arrays and objects: not a plan")});
  // Brackets inside strings do not count.
  Result r = readText("{\"name\": \"" + std::string(300, '[') + "\"}");
  EXPECT_EQ(r.errors, (Strings{E("missing field 'collective'"), E("missing field 'protocol'"),
                               E("missing field 'inplace'"), E("missing field 'gpus'")}));
}

TEST(MscclppTest, MissingTopLevelFields) {
  EXPECT_EQ(readText("{}").errors,
            (Strings{E("missing field 'name'"), E("missing field 'collective'"),
                     E("missing field 'protocol'"), E("missing field 'inplace'"),
                     E("missing field 'gpus'")}));
}

TEST(MscclppTest, WrongTopLevelTypes) {
  EXPECT_EQ(errors([](json::Object &p) {
              p["name"] = 3;
              p["inplace"] = "yes";
              p["protocol"] = "LL128";
              p["num_threads_per_block"] = 2048;
              p["buffer_alignment"] = 1.5;
              p["min_message_size"] = -1;
              p["reuse_resources"] = nullptr;
            }),
            (Strings{E("name: expected a string, found a number"),
                     E("protocol: unknown protocol 'LL128' (Simple or LL)"),
                     E("inplace: expected true or false, found a string"),
                     E("reuse_resources: expected true or false, found null"),
                     E("num_threads_per_block: 2048 is out of range [1, 1024]"),
                     E("buffer_alignment: expected an integer, found a non-integral or too large "
                       "number"),
                     E("min_message_size: -1 is negative")}));
  EXPECT_EQ(errors([](json::Object &p) {
              p["min_message_size"] = 10;
              p["max_message_size"] = 5;
            }),
            Strings{E("min_message_size: 10 is larger than max_message_size 5")});
  EXPECT_EQ(errors([](json::Object &p) { p["max_message_size"] = "big"; }),
            Strings{E("max_message_size: expected an unsigned integer, found a string")});
  EXPECT_EQ(errors([](json::Object &p) { p["inplace"] = json::Array{}; }),
            Strings{E("inplace: expected true or false, found an array")});
  EXPECT_EQ(errors([](json::Object &p) { p["collective"] = false; }),
            Strings{E("collective: expected a string, found a boolean")});
  EXPECT_EQ(errors([](json::Object &p) { p["gpus"] = json::Object{}; }),
            Strings{E("gpus: expected an array, found an object")});
  EXPECT_EQ(errors([](json::Object &p) { p["gpus"] = json::Array{}; }),
            Strings{E("gpus: the plan has no gpus")});
  EXPECT_EQ(errors([](json::Object &p) { arr(*p.get("gpus"))[1] = 7; }),
            Strings{E("gpus[1]: expected an object, found a number")});
}

TEST(MscclppTest, UnknownFieldsWarnOncePerKind) {
  Result r = read(both([](json::Object &plan, size_t g) {
    opOf(plan, g, 0, 0)["comment"] = "x";
    opOf(plan, g, 0, 2)["comment"] = "y";
  }));
  EXPECT_EQ(r.errors, Strings{});
  EXPECT_EQ(r.warnings, Strings{"plan.json: warning: gpus[0].threadblocks[0].ops[0].comment: "
                                "unknown field ignored (4 occurrences)"});
}

TEST(MscclppTest, GpuErrors) {
  EXPECT_EQ(errors([](json::Object &p) {
              json::Object &g = gpuOf(p, 1);
              g["id"] = 0;
              g.erase("input_chunks");
              g["scratch_chunks"] = -1;
              g.erase("channels");
              g.erase("remote_buffers");
              g.erase("threadblocks");
              g["semaphores"] = json::Array{json::Object{}};
            }),
            (Strings{E("gpus[1].id: id 0 at position 1: the executor requires gpus[r].id == r"),
                     E("gpus[1]: missing field 'input_chunks'"),
                     E("gpus[1].scratch_chunks: -1 is out of range [0, 2147483647]"),
                     E("gpus[1]: missing field 'channels'"),
                     E("gpus[1]: missing field 'remote_buffers'"),
                     E("gpus[1].semaphores[0]: missing field 'init_value'"),
                     E("gpus[1]: missing field 'threadblocks'")}));
}

TEST(MscclppTest, ChannelErrors) {
  EXPECT_EQ(errors([](json::Object &p) {
              arr(*gpuOf(p, 0).get("channels")) = json::Array{
                  json::Object{{"channel_type", "memory"}, {"connected_to", json::Array{1, 2}}},
                  json::Object{{"channel_type", "nvlink"}, {"connected_to", json::Array{1}}},
                  json::Object{{"channel_type", "none"}},
                  json::Object{{"channel_type", "port"}},
                  json::Object{{"connected_to", json::Array{1}}},
                  json::Object{{"channel_type", "memory"}, {"connected_to", json::Array{"1"}}},
              };
            }),
            (Strings{E("gpus[0].channels[0].connected_to[1]: peer 2 is out of range [0, 2)"),
                     E("gpus[0].channels[1].channel_type: unknown channel type 'nvlink' "
                       "(memory, port, switch or none)"),
                     E("gpus[0].channels[2].channel_type: a channel of type 'none' connects "
                       "nothing"),
                     E("gpus[0].channels[3]: missing field 'connected_to'"),
                     E("gpus[0].channels[4]: missing field 'channel_type'"),
                     E("gpus[0].channels[5].connected_to[0]: expected an integer, found a "
                       "string")}));
}

TEST(MscclppTest, SwitchChannelsAreRefused) {
  EXPECT_EQ(errors([](json::Object &p) {
              arr(*gpuOf(p, 0).get("channels"))
                  .push_back(json::Object{{"channel_type", "switch"}, {"buffer_type", "i"}});
              arr(*tbOf(p, 0, 0).get("channels"))
                  .push_back(json::Object{{"channel_type", "switch"},
                                          {"channel_ids", json::Array{0}}});
              opsOf(p, 0, 0).push_back(json::Object{{"name", "glres"}});
            }),
            (Strings{E("gpus[0].channels[1].channel_type: switch (NVLS) channels: Coll has no "
                       "multicast step"),
                     E("gpus[0].threadblocks[0].channels[1].channel_type: switch (NVLS) "
                       "channels: Coll has no multicast step"),
                     E("gpus[0].threadblocks[0].ops[11].name: 'glres' uses switch (NVLS) "
                       "channels: Coll has no multicast step")}));
  for (const char *name : {"glre", "gstore", "gstorepkt"})
    EXPECT_EQ(errors([&](json::Object &p) { opOf(p, 0, 0, 0)["name"] = name; }),
              Strings{E(std::string("gpus[0].threadblocks[0].ops[0].name: '") + name +
                        "' uses switch (NVLS) channels: Coll has no multicast step")});
}

TEST(MscclppTest, RemoteBufferErrors) {
  EXPECT_EQ(errors([](json::Object &p) {
              arr(*gpuOf(p, 0).get("remote_buffers")) = json::Array{
                  json::Object{{"rank", 5}, {"type", "x"}, {"access_channel_types", json::Array{"memory", "bus"}}},
                  json::Object{{"type", "i"}}};
            }),
            (Strings{E("gpus[0].remote_buffers[0].rank: rank 5 is out of range [0, 2)"),
                     E("gpus[0].remote_buffers[0].type: unknown buffer type 'x' (i, o or s)"),
                     E("gpus[0].remote_buffers[0].access_channel_types[1]: unknown channel type "
                       "'bus' (memory, port, switch or none)"),
                     E("gpus[0].remote_buffers[1]: missing field 'rank'"),
                     E("gpus[0].remote_buffers[1]: missing field 'access_channel_types'")}));
}

TEST(MscclppTest, ThreadblockErrors) {
  EXPECT_EQ(errors([](json::Object &p) {
              json::Object &tb = tbOf(p, 0, 0);
              tb["id"] = 3;
              tb["channels"] = json::Array{json::Object{{"channel_type", "memory"}},
                                           json::Object{{"channel_ids", json::Array{0}}}};
              tb["remote_buffer_refs"] = 5;
              tb.erase("ops");
            }),
            (Strings{E("gpus[0].threadblocks[0].id: id 3 at position 0: the executor places tbs "
                       "by id, which must be their position"),
                     E("gpus[0].threadblocks[0].channels[0]: missing field 'channel_ids'"),
                     E("gpus[0].threadblocks[0].channels[1]: missing field 'channel_type'"),
                     E("gpus[0].threadblocks[0].remote_buffer_refs: expected an array, found a "
                       "number"),
                     E("gpus[0].threadblocks[0]: missing field 'ops'")}));
}

TEST(MscclppTest, OpErrors) {
  auto opErrors = [](json::Object op) {
    return errors([&](json::Object &p) { opsOf(p, 0, 0)[0] = json::Value(std::move(op)); });
  };
  const std::string at = "gpus[0].threadblocks[0].ops[0]";
  EXPECT_EQ(opErrors(json::Object{}), Strings{E(at + ": missing field 'name'")});
  EXPECT_EQ(opErrors(json::Object{{"name", 1}}),
            Strings{E(at + ".name: expected a string, found a number")});
  EXPECT_EQ(opErrors(json::Object{{"name", "xyz"}}), Strings{E(at + ".name: unknown op 'xyz'")});
  EXPECT_EQ(opErrors(json::Object{{"name", "signal"}}),
            (Strings{E(at + ": missing field 'channel_type'"),
                     E(at + ": missing field 'channel_ids'")}));
  EXPECT_EQ(opErrors(json::Object{{"name", "signal"}, {"channel_type", "memory"},
                                  {"channel_ids", json::Array{-1}}}),
            Strings{E(at + ".channel_ids[0]: -1 is out of range [0, 2147483647]")});
  EXPECT_EQ(opErrors(json::Object{{"name", "copy"}}),
            (Strings{E(at + ": missing field 'src_buff'"), E(at + ": missing field 'dst_buff'")}));
  EXPECT_EQ(opErrors(json::Object{{"name", "copy"}, {"src_buff", json::Array{}},
                                  {"dst_buff", json::Object{}}}),
            (Strings{E(at + ".src_buff: empty: the op names no buffer"),
                     E(at + ".dst_buff: expected an array, found an object")}));
  EXPECT_EQ(opErrors(json::Object{{"name", "re"},
                                  {"src_buff", json::Array{json::Object{{"index", 0}, {"size", 1}}}},
                                  {"dst_buff", json::Array{json::Object{{"type", "i"},
                                                                        {"buffer_id", 0},
                                                                        {"index", 0},
                                                                        {"size", 1}}}}}),
            (Strings{E(at + ".src_buff[0]: names no buffer: one of 'type' (local), 'buffer_id' "
                            "(a peer's) or 'switch_channel_id'"),
                     E(at + ".dst_buff[0]: names more than one buffer: only one of 'type', "
                            "'buffer_id' and 'switch_channel_id'"),
                     E(at + ": missing field 'reduce_op'")}));
  EXPECT_EQ(opErrors(json::Object{
                {"name", "copy"},
                {"src_buff", json::Array{json::Object{{"type", "i"}, {"index", -1}, {"size", 0}}}},
                {"dst_buff", json::Array{json::Object{{"type", "i"}, {"index", 2147483647},
                                                      {"size", 1}}}}}),
            (Strings{E(at + ".src_buff[0].index: -1 is out of range [0, 2147483647]"),
                     E(at + ".src_buff[0].size: 0 is out of range [1, 2147483647]"),
                     E(at + ".dst_buff[0]: index 2147483647 + size 1 does not fit 32 bits")}));
  EXPECT_EQ(opErrors(json::Object{
                {"name", "copy"},
                {"src_buff", json::Array{json::Object{{"type", "i"}}}},
                {"dst_buff", json::Array{json::Object{{"type", "i"}, {"index", 0}, {"size", 1}}}},
                {"tbg_info", json::Object{{"tb_id", 2}, {"tbg_size", 2}}}}),
            (Strings{E(at + ".src_buff[0]: missing field 'index'"),
                     E(at + ".src_buff[0]: missing field 'size'"),
                     E(at + ".tbg_info.tb_id: tb_id 2 is out of range [0, 2) given by tbg_size")}));
  EXPECT_EQ(opErrors(json::Object{{"name", "barrier"}}),
            (Strings{E(at + ": missing field 'barrier_id'"),
                     E(at + ": missing field 'num_threadblocks'")}));
  EXPECT_EQ(opErrors(json::Object{{"name", "sem_acquire"}}),
            Strings{E(at + ": missing field 'semaphore_ids'")});
  EXPECT_EQ(opErrors(json::Object{{"name", "pipeline"}}),
            (Strings{E(at + ": missing field 'iter_context'"), E(at + ": missing field 'ops'")}));
  EXPECT_EQ(opErrors(json::Object{
                {"name", "pipeline"},
                {"iter_context", json::Object{{"unit_size", 0}, {"num_chunks", 1}}},
                {"ops", json::Array{json::Object{{"name", "pipeline"}}}}}),
            (Strings{E(at + ".iter_context.unit_size: 0 is out of range [1, 4294967295]"),
                     E(at + ".ops[0].name: a pipeline inside a pipeline")}));
}

//===----------------------------------------------------------------------===//
// Translation errors
//===----------------------------------------------------------------------===//

TEST(MscclppTest, HeaderErrors) {
  EXPECT_EQ(errors([](json::Object &p) { p["reuse_resources"] = true; }),
            Strings{E("reuse_resources: not yet supported: reuse_resources: scratch offsets "
                      "then wrap around a fixed scratch size (execution_plan.cc, getOffset), so "
                      "scratch chunks alias one another depending on the message size; Coll's "
                      "scratch chunks never alias")});
  EXPECT_EQ(errors([](json::Object &p) { p["max_message_size"] = 0; }),
            Strings{E("max_message_size: 0 admits no message that carries data")});
  EXPECT_EQ(errors([](json::Object &p) { p["collective"] = "broadcast"; }),
            Strings{E("collective: 'broadcast' is a rooted collective, and a plan names no "
                      "root")});
  EXPECT_EQ(errors([](json::Object &p) { gpuOf(p, 1)["input_chunks"] = 1; }),
            (Strings{E("gpus[1]: input_chunks 1 and output_chunks 2 differ from gpu 0's 2 and "
                       "2: Coll cuts every rank's buffers alike"),
                     E("gpus[1].threadblocks[0].ops[5].src_buff[0]: index 1 + size 1 exceeds "
                       "the 1 i chunks of gpu 1"),
                     E("gpus[1].threadblocks[0].ops[5].dst_buff[0]: index 1 + size 1 exceeds "
                       "the 1 i chunks of gpu 1")}));
  EXPECT_EQ(errors(both([](json::Object &p, size_t g) { gpuOf(p, g)["output_chunks"] = 4; })),
            Strings{E("gpus[0].output_chunks: allreduce over 2 ranks needs as many output "
                      "chunks as input chunks, at least 1 (input_chunks 2, output_chunks 4)")});
  EXPECT_EQ(errors([](json::Object &p) { p["collective"] = "allgather"; }),
            Strings{E("gpus[0].output_chunks: allgather over 2 ranks needs ranks times "
                      "input_chunks output chunks (input_chunks 2, output_chunks 2)")});
  EXPECT_EQ(errors([](json::Object &p) { p["collective"] = "reducescatter"; }),
            Strings{E("gpus[0].input_chunks: reducescatter over 2 ranks needs ranks times "
                      "output_chunks input chunks (input_chunks 2, output_chunks 2)")});
  EXPECT_EQ(errors(both([](json::Object &p, size_t g) {
              p["collective"] = "alltoall";
              gpuOf(p, g)["input_chunks"] = 3;
              gpuOf(p, g)["output_chunks"] = 3;
            })),
            Strings{E("gpus[0].input_chunks: alltoall over 2 ranks needs equal input and output "
                      "chunks, a multiple of the ranks (input_chunks 3, output_chunks 3)")});
}

TEST(MscclppTest, UnknownCollectiveIsCustom) {
  Result r = read([](json::Object &p) { p["collective"] = "test"; });
  ASSERT_EQ(r.errors, Strings{});
  EXPECT_EQ(r.alg->collective, Collective::Custom);
  EXPECT_EQ(r.alg->collectiveSpelling, "test");
  EXPECT_EQ(checkErrors(*r.alg), Strings{});
}

TEST(MscclppTest, ChannelAndBufferIds) {
  EXPECT_EQ(errors([](json::Object &p) {
              tbOf(p, 0, 0)["channels"] =
                  json::Array{json::Object{{"channel_type", "memory"}, {"channel_ids", json::Array{0, 1}}},
                              json::Object{{"channel_type", "port"}, {"channel_ids", json::Array{0}}}};
              tbOf(p, 0, 0)["remote_buffer_refs"] = json::Array{
                  json::Object{{"access_channel_type", "memory"}, {"remote_buffer_ids", json::Array{0, 1}}},
                  json::Object{{"access_channel_type", "port"}, {"remote_buffer_ids", json::Array{0}}}};
              opOf(p, 0, 0, 1)["channel_ids"] = json::Array{3};
            }),
            (Strings{E("gpus[0].threadblocks[0].channels[0].channel_ids[1]: channel 1 is out of "
                       "range: gpu 0 has 1 memory channels"),
                     E("gpus[0].threadblocks[0].channels[1].channel_ids[0]: channel 0 is out of "
                       "range: gpu 0 has 0 port channels"),
                     E("gpus[0].threadblocks[0].remote_buffer_refs[0].remote_buffer_ids[1]: "
                       "remote buffer 1 is out of range: gpu 0 has 1"),
                     E("gpus[0].threadblocks[0].remote_buffer_refs[1].remote_buffer_ids[0]: "
                       "remote buffer 0 is not registered for port channels (its "
                       "access_channel_types do not list it)"),
                     E("gpus[0].threadblocks[0].ops[1].channel_ids[0]: channel 3 is out of "
                       "range: the tb has 1 memory channels")}));
  EXPECT_EQ(errors([](json::Object &p) {
              obj(arr(*opOf(p, 0, 0, 5).get("src_buff"))[1])["buffer_id"] = 4;
            }),
            Strings{E("gpus[0].threadblocks[0].ops[5].src_buff[1].buffer_id: remote buffer 4 "
                      "is out of range: the tb has 1 memory-channel remote buffers")});
  EXPECT_EQ(errors([](json::Object &p) {
              obj(arr(*opOf(p, 0, 0, 5).get("src_buff"))[1])["index"] = 2;
            }),
            Strings{E("gpus[0].threadblocks[0].ops[5].src_buff[1]: index 2 + size 1 exceeds the "
                      "2 i chunks of gpu 1")});
}

TEST(MscclppTest, SelfChannelsAndBuffers) {
  // Legal for the executor, refused when used.
  EXPECT_EQ(errors([](json::Object &p) {
              arr(*gpuOf(p, 0).get("channels"))
                  .push_back(json::Object{{"channel_type", "memory"}, {"connected_to", json::Array{0}}});
              arr(*gpuOf(p, 0).get("remote_buffers"))
                  .push_back(json::Object{{"rank", 0}, {"type", "s"},
                                          {"access_channel_types", json::Array{"memory"}}});
              tbOf(p, 0, 0)["channels"] =
                  json::Array{json::Object{{"channel_type", "memory"}, {"channel_ids", json::Array{0, 1}}}};
              tbOf(p, 0, 0)["remote_buffer_refs"] = json::Array{
                  json::Object{{"access_channel_type", "memory"}, {"remote_buffer_ids", json::Array{0, 1}}}};
              opsOf(p, 0, 0).push_back(
                  json::Object{{"name", "signal"}, {"channel_type", "memory"}, {"channel_ids", json::Array{1}}});
              opsOf(p, 0, 0).push_back(json::Object{
                  {"name", "put"}, {"channel_type", "memory"},
                  {"src_buff", json::Array{json::Object{{"type", "i"}, {"index", 0}, {"size", 1}}}},
                  {"dst_buff", json::Array{json::Object{{"buffer_id", 1}, {"index", 0}, {"size", 1}}}}});
            }),
            (Strings{E("gpus[0].threadblocks[0].ops[11].channel_ids[0]: not yet supported: a "
                       "signal or wait on a memory channel to the tb's own rank: Coll's signals "
                       "reach another rank"),
                     E("gpus[0].threadblocks[0].ops[12].dst_buff[0].buffer_id: not yet "
                       "supported: a remote buffer of the tb's own rank: Coll's direct steps "
                       "reach another rank")}));
}

TEST(MscclppTest, RefusedOps) {
  auto refused = [](const std::string &name, const std::string &field, const std::string &why) {
    return errors([&](json::Object &p) {
      json::Object op{{"name", name}};
      if (name == "flush" || name == "pws" || name == "pwsf") {
        op["channel_type"] = "port";
        op["channel_ids"] = json::Array{0};
        op["src_buff"] = json::Array{json::Object{{"type", "i"}, {"index", 0}, {"size", 1}}};
        op["dst_buff"] = json::Array{json::Object{{"buffer_id", 0}, {"index", 0}, {"size", 1}}};
      } else {
        op["channel_type"] = "memory";
        op["channel_ids"] = json::Array{0};
        op["reduce_op"] = "sum";
        op["src_buff"] = json::Array{json::Object{{"type", "s"}, {"index", 0}, {"size", 1}}};
        op["dst_buff"] = json::Array{json::Object{{"buffer_id", 0}, {"index", 0}, {"size", 1}}};
      }
      opsOf(p, 0, 0)[0] = json::Value(std::move(op));
    }) == Strings{E("gpus[0].threadblocks[0].ops[0]." + field + ": not yet supported: " + why)};
  };
  const std::string none = " — Coll's IR has no such step";
  const std::string window = "LL packets into a peer's window (";
  const std::string local = "LL packets (";
  for (const char *n : {"ppkt", "rppkt", "respkt", "recspkt"})
    EXPECT_TRUE(refused(n, "name", window + n + ")" + none)) << n;
  for (const char *n : {"cpkt", "upkt", "repkt", "recpkt"})
    EXPECT_TRUE(refused(n, "name",
                        local + n + ": data and flags interleaved in a buffer)" + none))
        << n;
  // A group of one is no group.
  EXPECT_EQ(errors(both([](json::Object &p, size_t g) {
              opOf(p, g, 0, 5)["tbg_info"] = json::Object{{"tb_id", 0}, {"tbg_size", 1}};
            })),
            Strings{});
  // Ops other than puts, signals and waits on a port channel.
  EXPECT_EQ(errors([](json::Object &p) { opOf(p, 0, 0, 5)["channel_type"] = "port"; }),
            Strings{E("gpus[0].threadblocks[0].ops[5].channel_type: not yet supported: port "
                      "channels (rres): a host proxy carries the op out after it returns — "
                      "Coll's steps complete where they stand")});
  EXPECT_EQ(errors([](json::Object &p) { opOf(p, 0, 0, 5)["reduce_op"] = "max"; }),
            Strings{E("gpus[0].threadblocks[0].ops[5].reduce_op: not yet supported: reduce_op "
                      "'max': Coll's reductions are the call's own op, and a plan that fixes one "
                      "is not yet read")});
}

/// Moves ops [first, last) of gpu g's tb t into a pipeline of `chunks`
/// chunks in units of 16 bytes, which takes their place.
void pipeOps(json::Object &p, size_t g, size_t t, size_t first, size_t last, int chunks = 1) {
  json::Array &ops = opsOf(p, g, t);
  json::Array body, out;
  for (size_t k = 0; k < ops.size(); ++k) {
    if (k == first)
      out.push_back(json::Object{
          {"name", "pipeline"},
          {"iter_context", json::Object{{"unit_size", 16}, {"num_chunks", chunks}}},
          {"ops", json::Value(nullptr)}});
    (k >= first && k < last ? body : out).push_back(std::move(ops[k]));
  }
  obj(out[first])["ops"] = std::move(body);
  ops = std::move(out);
}

/// The base plan with ops [first, last) of each rank's tb in a pipeline
/// (rank 1's only where `rank1`).
Edit withPipeline(size_t first, size_t last, int chunks = 1, bool rank1 = true) {
  return [=](json::Object &p) {
    for (size_t g = 0; g < (rank1 ? 2u : 1u); ++g)
      pipeOps(p, g, 0, first, last, chunks);
  };
}

// A pipeline's ops become steps of the tb where it stands, once: Coll's tb
// already runs its steps per slice of every chunk (the translator's
// `pipeline`). The base plan's rres, signal and wait in a pipeline of one
// chunk translate to the same steps and prove; the defects that would make
// the executor's loop differ are refused, each at its op.
TEST(MscclppTest, Pipelines) {
  const std::string pipe = "gpus[0].threadblocks[0].ops[5]";
  // rres, nop, signal, nop, wait, nop.
  Result r = read(withPipeline(5, 11));
  ASSERT_EQ(r.errors, Strings{});
  Result base = read({});
  ASSERT_TRUE(r.alg && base.alg);
  for (size_t g = 0; g < 2; ++g) {
    const std::vector<Step> &a = r.alg->gpus[g].tbs[0].steps, &b = base.alg->gpus[g].tbs[0].steps;
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_EQ(a[k].type, b[k].type) << "rank " << g << " step " << k;
      EXPECT_EQ(a[k].srcOff, b[k].srcOff) << "rank " << g << " step " << k;
      EXPECT_EQ(a[k].peer, b[k].peer) << "rank " << g << " step " << k;
    }
  }
  EXPECT_EQ(checkErrors(*r.alg), Strings{});

  // Without the last nop, the next iteration's rres follows the wait.
  EXPECT_EQ(errors(withPipeline(5, 10)),
            (Strings{E(pipe + ".ops[0]: not yet supported: 'rres' at the start of " + pipe +
                       "'s ops, which in every iteration after the first follow the wait " + pipe +
                       ".ops[4] at their end with no nop between them: only thread i waits, so "
                       "the other threads may start on this op before the wait is over"),
                     E("gpus[1].threadblocks[0].ops[5].ops[0]: not yet supported: 'rres' at the "
                       "start of gpus[1].threadblocks[0].ops[5]'s ops, which in every iteration "
                       "after the first follow the wait gpus[1].threadblocks[0].ops[5].ops[4] at "
                       "their end with no nop between them: only thread i waits, so the other "
                       "threads may start on this op before the wait is over")}));
  // The signal first, the rres last: the next iteration's signal follows
  // the rres.
  Result signalFirst = read([&](json::Object &p) {
    withPipeline(7, 9)(p); // signal, nop
    for (size_t g = 0; g < 2; ++g) {
      json::Array &body = *obj(opsOf(p, g, 0)[7]).get("ops")->getAsArray();
      // signal, nop, wait, nop, rres: the rres moved in from before.
      json::Array &ops = opsOf(p, g, 0);
      body.push_back(json::Object{{"name", "wait"}, {"channel_ids", json::Array{0}},
                                  {"channel_type", "memory"}});
      body.push_back(json::Object{{"name", "nop"}});
      body.push_back(std::move(ops[5]));
      eraseAt(ops, 5); // the rres
      eraseAt(ops, 5); // its nop
      eraseAt(ops, 6); // the wait after the pipeline
    }
  });
  ASSERT_EQ(signalFirst.errors.size(), 2u);
  EXPECT_NE(signalFirst.errors[0].find("not yet supported: 'signal' at the start of"),
            std::string::npos)
      << signalFirst.errors[0];
  EXPECT_NE(signalFirst.errors[0].find("at their end with no nop between them: thread i signals "
                                       "or releases as soon as its own part is done"),
            std::string::npos)
      << signalFirst.errors[0];

  // Operands of fewer or more chunks than the pipeline's.
  Strings two = errors(withPipeline(5, 11, 2));
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0], E(pipe + ".ops[0].src_buff[0].size: 'rres' moves 1 chunks in a pipeline of 2 (" +
                      pipe + ".iter_context.num_chunks): the executor moves a unit of every "
                      "operand in each iteration, as many units as the pipeline's chunks hold, "
                      "so it would run past the operand"));

  // Only rank 0's signal and wait in a pipeline: each rank's wait takes a
  // signal at another place, which the executor pairs differently.
  Strings placed = errors(withPipeline(5, 11, 1, /*rank1=*/false));
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_NE(placed[1].find("wait 1 on gpu 0's memory channel 0 to gpu 1 runs in a pipeline of 1 "
                           "chunks in units of 16 bytes, as use 0 of 1 in each iteration, and the "
                           "signal it takes (gpus[1].threadblocks[0].ops[7]) outside any pipeline: "
                           "the executor runs a pipeline's ops once per unit"),
            std::string::npos)
      << placed[1];
  EXPECT_EQ(placed[0].find("plan.json: error: gpus[1].threadblocks[0].ops[9]: wait 1 on gpu 1's "
                           "memory channel 0 to gpu 0 runs outside any pipeline, and the signal "
                           "it takes (gpus[0].threadblocks[0].ops[5].ops[2]) in a pipeline"),
            0u)
      << placed[0];

  // A relaxed signal in a pipeline that moves data.
  Strings relaxed = errors(withPipeline(1, 11));
  ASSERT_FALSE(relaxed.empty());
  EXPECT_NE(relaxed[0].find("gpus[0].threadblocks[0].ops[1].ops[0]: not yet supported: relaxed "
                            "signal in a pipeline whose ops also include"),
            std::string::npos)
      << relaxed[0];
}

TEST(MscclppTest, DataOpShapes) {
  const std::string at = "gpus[0].threadblocks[0].ops[5]";
  auto withOp = [](json::Object op) {
    return errors([&](json::Object &p) { opsOf(p, 0, 0)[5] = json::Value(std::move(op)); });
  };
  auto local = [](const char *type, int index, int size = 1) {
    return json::Object{{"type", type}, {"index", index}, {"size", size}};
  };
  auto peer = [](int index, int size = 1) {
    return json::Object{{"buffer_id", 0}, {"index", index}, {"size", size}};
  };
  EXPECT_EQ(withOp(json::Object{{"name", "copy"},
                                {"src_buff", json::Array{local("i", 0), local("i", 1)}},
                                {"dst_buff", json::Array{local("s", 0)}}}),
            Strings{E(at + ".src_buff: 'copy' takes 1 entries here, not 2")});
  EXPECT_EQ(withOp(json::Object{{"name", "copy"},
                                {"src_buff", json::Array{local("i", 0, 2)}},
                                {"dst_buff", json::Array{local("i", 1)}}}),
            Strings{E(at + ".dst_buff[0].size: size 1 differs from the 2 chunks of the op's "
                           "first operand: the executor moves the first operand's size "
                           "everywhere")});
  EXPECT_EQ(withOp(json::Object{{"name", "copy"},
                                {"src_buff", json::Array{peer(0)}},
                                {"dst_buff", json::Array{local("i", 1)}}}),
            Strings{E(at + ".src_buff[0]: expected a local buffer ('type') here")});
  EXPECT_EQ(withOp(json::Object{{"name", "put"}, {"channel_type", "memory"},
                                {"src_buff", json::Array{local("i", 0), local("s", 0)}},
                                {"dst_buff", json::Array{peer(0), peer(1)}}}),
            Strings{E(at + ".src_buff[1].type: not yet supported: a put whose sources lie in "
                           "different buffers: the executor takes every source from "
                           "src_buff[0]'s buffer")});
  EXPECT_EQ(withOp(json::Object{{"name", "put"}, {"channel_type", "memory"},
                                {"src_buff", json::Array{local("i", 0)}},
                                {"dst_buff", json::Array{peer(0), peer(1)}}}),
            Strings{E(at + ".src_buff: 'put' pairs src_buff and dst_buff entry by entry: 1 and "
                           "2 entries")});
  EXPECT_EQ(withOp(json::Object{{"name", "put"}, {"channel_type", "memory"},
                                {"src_buff", json::Array{local("i", 0)}},
                                {"dst_buff", json::Array{local("i", 0)}}}),
            Strings{E(at + ".dst_buff[0]: expected a peer's buffer ('buffer_id') here")});
  EXPECT_EQ(withOp(json::Object{{"name", "get"}, {"channel_type", "memory"},
                                {"src_buff", json::Array{peer(1)}},
                                {"dst_buff", json::Array{local("s", 0)}}}),
            Strings{E(at + ".dst_buff[0].index: not yet supported: a get from index 1 to index "
                           "0: MSCCL++ v0.10's executor (handleGet) reads the peer at the "
                           "destination's offset and writes at the source's, so what runs is "
                           "not what the plan says")});
  EXPECT_EQ(withOp(json::Object{{"name", "get"}, {"channel_type", "memory"},
                                {"src_buff", json::Array{peer(0), peer(1)}},
                                {"dst_buff", json::Array{local("s", 0)}}}),
            Strings{E(at + ".src_buff: 'get' pairs src_buff and dst_buff entry by entry: 2 and "
                           "1 entries")});
  EXPECT_EQ(withOp(json::Object{{"name", "put"}, {"channel_type", "none"},
                                {"src_buff", json::Array{local("i", 0)}},
                                {"dst_buff", json::Array{peer(0)}}}),
            Strings{E(at + ".channel_type: 'put' on a channel of type 'none': the executor "
                           "reaches a peer's buffer only through a memory or port channel")});
  EXPECT_EQ(withOp(json::Object{{"name", "copy"}, {"channel_type", "switch"},
                                {"src_buff", json::Array{local("i", 0)}},
                                {"dst_buff", json::Array{local("s", 0)}}}),
            Strings{E(at + ".channel_type: switch (NVLS) channels: Coll has no multicast step")});
  {
    json::Array many;
    for (int i = 0; i < 65; ++i)
      many.push_back(local("s", 0));
    EXPECT_EQ(withOp(json::Object{{"name", "re"}, {"reduce_op", "sum"},
                                  {"src_buff", std::move(many)},
                                  {"dst_buff", json::Array{local("i", 0)}}}),
              Strings{E(at + ".src_buff: more than 64 entries")});
  }
  EXPECT_EQ(withOp(json::Object{{"name", "signal"}, {"channel_type", "none"},
                                {"channel_ids", json::Array{0}}}),
            Strings{E(at + ".channel_type: 'signal' needs a memory channel here")});
  EXPECT_EQ(withOp(json::Object{{"name", "copy"},
                                {"src_buff", json::Array{local("o", 0, 2)}},
                                {"dst_buff", json::Array{local("i", 1, 2)}}}),
            (Strings{E(at + ".dst_buff[0]: index 1 + size 2 exceeds the 2 i chunks of gpu 0")}));
}

TEST(MscclppTest, PartialOverlaps) {
  const std::string at = "gpus[0].threadblocks[0].ops[5]";
  auto withOp = [](json::Object op) {
    return errors([&](json::Object &p) {
      for (size_t g = 0; g < 2; ++g)
        for (const char *field : {"input_chunks", "output_chunks", "scratch_chunks"})
          gpuOf(p, g)[field] = 4;
      opsOf(p, 0, 0)[5] = json::Value(std::move(op));
    });
  };
  auto local = [](const char *type, int index, int size) {
    return json::Object{{"type", type}, {"index", index}, {"size", size}};
  };
  // In place, i and o are one buffer: o[1:3) overlaps i[0:2) in part.
  EXPECT_EQ(withOp(json::Object{{"name", "copy"},
                                {"src_buff", json::Array{local("i", 0, 2)}},
                                {"dst_buff", json::Array{local("o", 1, 2)}}}),
            Strings{E(at + ": not yet supported: a copy whose source and destination partly "
                           "overlap")});
  EXPECT_EQ(withOp(json::Object{{"name", "re"}, {"reduce_op", "sum"},
                                {"src_buff", json::Array{local("s", 0, 2), local("i", 0, 2)}},
                                {"dst_buff", json::Array{local("o", 1, 2)}}}),
            Strings{E(at + ".src_buff[1]: not yet supported: a reduction whose destination "
                           "partly overlaps this source")});
  // The destination is the second source, exactly: the sum accumulates there.
  Result r = read([&](json::Object &p) {
    for (size_t g = 0; g < 2; ++g)
      for (const char *field : {"input_chunks", "output_chunks", "scratch_chunks"})
        gpuOf(p, g)[field] = 4;
    opsOf(p, 0, 0)[5] = json::Object{{"name", "re"}, {"reduce_op", "sum"},
                                     {"src_buff", json::Array{local("s", 0, 1), local("i", 2, 1)}},
                                     {"dst_buff", json::Array{local("o", 2, 1)}}};
  });
  ASSERT_EQ(r.errors, Strings{});
  const std::vector<Step> &steps = r.alg->gpus[0].tbs[0].steps;
  ASSERT_EQ(steps.size(), 5u);
  EXPECT_EQ(steps[2].type, StepType::Reduce);
  EXPECT_EQ(steps[2].srcBuf, BufferKind::Scratch);
  EXPECT_EQ(steps[2].dstBuf, BufferKind::Output);
  EXPECT_EQ(steps[2].dstOff, 2);
}

TEST(MscclppTest, NopRules) {
  // The rres's nop before the signal removed: the signal would release only
  // the signalling thread's part.
  EXPECT_EQ(errors([](json::Object &p) { eraseAt(opsOf(p, 0, 0), 6); }),
            Strings{E("gpus[0].threadblocks[0].ops[6]: not yet supported: 'signal' after "
                      "gpus[0].threadblocks[0].ops[5] with no nop between them: thread i "
                      "signals channel i as soon as its own part of that op is done, so the "
                      "signal releases only that part, while Coll's signal releases everything "
                      "its tb did")});
  // The nop after the relaxed wait removed.
  EXPECT_EQ(errors([](json::Object &p) { eraseAt(opsOf(p, 0, 0), 4); }),
            Strings{E("gpus[0].threadblocks[0].ops[4]: not yet supported: 'rres' after the "
                      "wait gpus[0].threadblocks[0].ops[3] with no nop between them: only "
                      "thread i waits, for channel or semaphore i, so the other threads may "
                      "start on this op before the wait is over, while in Coll every step after "
                      "a wait follows it")});
  // The nop between the relaxed wait and the rres removed, and the rres
  // with it: the end signal follows the relaxed wait with no nop between.
  EXPECT_EQ(errors([](json::Object &p) {
              eraseAt(opsOf(p, 0, 0), 6);
              eraseAt(opsOf(p, 0, 0), 5);
              eraseAt(opsOf(p, 0, 0), 4);
            }),
            Strings{E("gpus[0].threadblocks[0].ops[4]: not yet supported: 'signal' after the "
                      "wait gpus[0].threadblocks[0].ops[3] with no nop between them: thread i "
                      "signals channel i whether or not the other threads' waits are over, so "
                      "the signal does not pass on what they acquired, while Coll's signal "
                      "would")});
  // Two data ops on one chunk with no nop between them.
  EXPECT_EQ(errors([](json::Object &p) {
              opsOf(p, 0, 0).insert(
                  opsOf(p, 0, 0).begin() + 6,
                  json::Object{{"name", "copy"},
                               {"src_buff", json::Array{json::Object{{"type", "o"}, {"index", 0}, {"size", 1}}}},
                               {"dst_buff", json::Array{json::Object{{"type", "s"}, {"index", 0}, {"size", 1}}}}});
            }),
            Strings{E("gpus[0].threadblocks[0].ops[6]: not yet supported: 'copy' and "
                      "gpus[0].threadblocks[0].ops[5] both access gpu 0 o[0:1), one writing "
                      "it, with no nop between them: the threads of one tb run them at once, "
                      "while Coll's tb runs its steps in order")});
}

TEST(MscclppTest, RelaxedRules) {
  // A relaxed signal at the end orders none of the data before it.
  EXPECT_EQ(errors(both([](json::Object &p, size_t g) { opOf(p, g, 0, 7)["name"] = "rlxsignal"; })),
            (Strings{E("gpus[0].threadblocks[0].ops[7]: not yet supported: relaxed signal after "
                       "gpus[0].threadblocks[0].ops[5]: it orders none of the data before it, "
                       "while Coll's signal releases everything its tb did"),
                     E("gpus[1].threadblocks[0].ops[7]: not yet supported: relaxed signal after "
                       "gpus[1].threadblocks[0].ops[5]: it orders none of the data before it, "
                       "while Coll's signal releases everything its tb did")}));
  // A relaxed wait does not acquire a signal that releases data.
  EXPECT_EQ(errors([](json::Object &p) { opOf(p, 0, 0, 9)["name"] = "rlxwait"; }),
            Strings{E("gpus[0].threadblocks[0].ops[9]: not yet supported: a relaxed wait "
                      "(rlxwait) that takes the signal gpus[1].threadblocks[0].ops[7], which "
                      "releases data: the relaxed wait does not acquire it, while Coll's wait "
                      "would")});
  // A relaxed signal after a wait does not pass on what it acquired.
  EXPECT_EQ(errors([](json::Object &p) {
              json::Array &ops = opsOf(p, 0, 0);
              ops.push_back(json::Object{{"name", "rlxsignal"}, {"channel_ids", json::Array{0}},
                                         {"channel_type", "memory"}});
              opsOf(p, 1, 0).push_back(json::Object{{"name", "rlxwait"}, {"channel_ids", json::Array{0}},
                                                    {"channel_type", "memory"}});
              // no data before: only the wait matters
              eraseAt(ops, 5);
            }),
            Strings{E("gpus[0].threadblocks[0].ops[10]: not yet supported: relaxed signal after "
                      "gpus[0].threadblocks[0].ops[8]: it does not pass on what that wait "
                      "acquired, while Coll's signal would")});
}

/// Rank 0 of the base plan gets semaphore 0 (initial value `init`), which
/// its tb 0 releases after the rres, and a tb 1 that acquires it and then
/// copies chunk 0 (which the rres wrote) to scratch.
Edit withSemaphore(int init = 0) {
  return [init](json::Object &p) {
    gpuOf(p, 0)["semaphores"] = json::Array{json::Object{{"init_value", init}}};
    json::Array &ops = opsOf(p, 0, 0);
    ops.push_back(json::Object{{"name", "sem_release"}, {"semaphore_ids", json::Array{0}}});
    ops.push_back(json::Object{{"name", "nop"}});
    arr(*gpuOf(p, 0).get("threadblocks"))
        .push_back(json::Object{
            {"id", 1},
            {"channels", json::Array{}},
            {"ops", json::Array{json::Object{{"name", "sem_acquire"}, {"semaphore_ids", json::Array{0}}},
                                json::Object{{"name", "nop"}},
                                json::Object{{"name", "copy"},
                                             {"src_buff", json::Array{json::Object{{"type", "o"}, {"index", 0}, {"size", 1}}}},
                                             {"dst_buff", json::Array{json::Object{{"type", "s"}, {"index", 0}, {"size", 1}}}}},
                                json::Object{{"name", "nop"}}}}});
  };
}

TEST(MscclppTest, Semaphores) {
  Result r = read(withSemaphore());
  ASSERT_EQ(r.errors, Strings{});
  // The release is a nop that publishes; the acquire a nop that depends on
  // it, before the copy.
  const ir::Gpu &g = r.alg->gpus[0];
  ASSERT_EQ(g.tbs[0].steps.size(), 7u);
  EXPECT_EQ(g.tbs[0].steps[6].type, StepType::Nop);
  EXPECT_TRUE(g.tbs[0].steps[6].hasDep);
  ASSERT_EQ(g.tbs[1].steps.size(), 2u);
  EXPECT_EQ(g.tbs[1].steps[0].type, StepType::Nop);
  EXPECT_EQ(g.tbs[1].steps[0].depTb, 0);
  EXPECT_EQ(g.tbs[1].steps[0].depStep, 6);
  EXPECT_EQ(g.tbs[1].steps[1].type, StepType::Copy);
  EXPECT_EQ(checkErrors(*r.alg), Strings{});
  // Without the release and the acquire the copy races with the rres.
  Result bare = read([](json::Object &p) {
    withSemaphore()(p);
    eraseAt(opsOf(p, 0, 0), 11);
    eraseAt(opsOf(p, 0, 1), 0);
  });
  ASSERT_EQ(bare.errors, Strings{});
  Strings errs = checkErrors(*bare.alg);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0], E("gpu 0 tb 0 step 2: race (in place): nothing orders rank 0 tb 0 step 2 "
                       "('getre' from rank 1) and rank 0 tb 1 step 0 ('cpy'), which both access "
                       "rank 0 i[0] and one of them writes it; add a dependency, or a signal and "
                       "a wait, between them"));
  // An initial value of 1 lets the acquire through at once: no dependency,
  // and the release, which nobody in the call waits for, orders nothing
  // and is left out; the race is back.
  Result once = read(withSemaphore(1));
  ASSERT_EQ(once.errors, Strings{});
  EXPECT_EQ(once.alg->gpus[0].tbs[0].steps.size(), 6u);
  EXPECT_EQ(once.alg->gpus[0].tbs[1].steps.size(), 1u);
  EXPECT_EQ(checkErrors(*once.alg).size(), 1u);
}

// A semaphore's releases and acquires in pipelines pair as Coll pairs them
// only at the same place of pipelines alike, and from an initial value of
// 0 (pipeline).
TEST(MscclppTest, SemaphoresInPipelines) {
  // The release (tb 0's ops 11 and 12) and the acquire (tb 1's ops 0 and
  // 1) each in a pipeline of one chunk: the same steps as without them.
  Result r = read([](json::Object &p) {
    withSemaphore()(p);
    pipeOps(p, 0, 0, 11, 13);
    pipeOps(p, 0, 1, 0, 2);
  });
  ASSERT_EQ(r.errors, Strings{});
  EXPECT_EQ(r.alg->gpus[0].tbs[1].steps.size(), 2u);
  EXPECT_EQ(r.alg->gpus[0].tbs[1].steps[0].depTb, 0);
  EXPECT_EQ(checkErrors(*r.alg), Strings{});
  // Only the acquire in one: the executor would acquire once per unit.
  EXPECT_EQ(errors([](json::Object &p) {
              withSemaphore()(p);
              pipeOps(p, 0, 1, 0, 2);
            }),
            Strings{E("gpus[0].threadblocks[1].ops[0].ops[0]: semaphore 0 of gpu 0: acquire 0 "
                      "runs in a pipeline of 1 chunks in units of 16 bytes, as use 0 of 1 in "
                      "each iteration, and the release it takes (gpus[0].threadblocks[0].ops[11]) "
                      "outside any pipeline: the executor runs a pipeline's ops once per unit, "
                      "so the two sides would release and acquire different numbers of times "
                      "or in another order")});
  // From 1, each iteration's acquire would take the previous one's release.
  EXPECT_EQ(errors([](json::Object &p) {
              withSemaphore(1)(p);
              pipeOps(p, 0, 0, 11, 13);
              pipeOps(p, 0, 1, 0, 2);
            }),
            Strings{E("gpus[0].threadblocks[0].ops[11].ops[0]: not yet supported: semaphore 0 of "
                      "gpu 0 starts at 1 and is used in a pipeline: each iteration's acquire "
                      "would take an earlier iteration's release, which a Coll dependency (a "
                      "step of the same slice) does not say")});
}

/// The base plan with a barrier of rank 0's tb 0 (after its last op) and
/// a tb 1 that meets it and then copies o[0], which tb 0's rres writes,
/// into s[0].
Edit withBarrier(int count = 2, int id = 0) {
  return [=](json::Object &p) {
    auto barrier = [&] {
      return json::Object{{"name", "barrier"}, {"barrier_id", id}, {"num_threadblocks", count}};
    };
    opsOf(p, 0, 0).push_back(barrier());
    arr(*gpuOf(p, 0).get("threadblocks"))
        .push_back(json::Object{
            {"id", 1},
            {"channels", json::Array{}},
            {"ops", json::Array{barrier(),
                                json::Object{{"name", "copy"},
                                             {"src_buff", json::Array{json::Object{{"type", "o"}, {"index", 0}, {"size", 1}}}},
                                             {"dst_buff", json::Array{json::Object{{"type", "s"}, {"index", 0}, {"size", 1}}}}},
                                json::Object{{"name", "nop"}}}}});
  };
}

// A barrier of several tbs (barrierOp, pairBarriers): a nop that the other
// tbs' nops after their barrier depend on. Here it orders tb 1's copy after
// tb 0's rres; without it they race. Barriers that the executor would not
// pass, or would pass early, are errors.
TEST(MscclppTest, Barriers) {
  Result r = read(withBarrier());
  ASSERT_EQ(r.errors, Strings{});
  // Tb 0: its steps, then its barrier's nop (tb 1's nop after its own
  // depends on it; tb 0's nop for tb 1 ends its tb and is left out).
  const ir::Gpu &g = r.alg->gpus[0];
  ASSERT_EQ(g.tbs[0].steps.size(), 7u);
  EXPECT_EQ(g.tbs[0].steps[6].type, StepType::Nop);
  EXPECT_TRUE(g.tbs[0].steps[6].hasDep);
  ASSERT_EQ(g.tbs[1].steps.size(), 3u);
  EXPECT_EQ(g.tbs[1].steps[1].type, StepType::Nop);
  EXPECT_EQ(g.tbs[1].steps[1].depTb, 0);
  EXPECT_EQ(g.tbs[1].steps[1].depStep, 6);
  EXPECT_EQ(g.tbs[1].steps[2].type, StepType::Copy);
  EXPECT_EQ(checkErrors(*r.alg), Strings{});
  // A barrier of one tb is its __syncthreads only: the copy races.
  Result one = read([](json::Object &p) {
    withBarrier()(p);
    for (size_t t = 0; t < 2; ++t)
      for (json::Value &op : opsOf(p, 0, t))
        if (*obj(op).getString("name") == "barrier")
          obj(op)["num_threadblocks"] = 1;
  });
  ASSERT_EQ(one.errors, Strings{});
  Strings raced = checkErrors(*one.alg);
  ASSERT_EQ(raced.size(), 1u);
  EXPECT_NE(raced[0].find("race (in place)"), std::string::npos) << raced[0];

  EXPECT_EQ(errors([](json::Object &p) {
              withBarrier()(p);
              opOf(p, 0, 1, 0)["num_threadblocks"] = 3;
            }),
            Strings{E("gpus[0].threadblocks[1].ops[0].num_threadblocks: barrier 0 of gpu 0 is "
                      "for 3 tbs here and for 2 at gpus[0].threadblocks[0].ops[11]: the "
                      "executor's count would never reach one of them")});
  EXPECT_EQ(errors(withBarrier(3)),
            Strings{E("gpus[0].threadblocks[0].ops[11]: barrier 0 of gpu 0 is for 3 tbs, and 2 "
                      "tbs use it: the executor would wait for the others forever")});
  EXPECT_EQ(errors([](json::Object &p) {
              withBarrier()(p);
              opsOf(p, 0, 1).push_back(json::Object{
                  {"name", "barrier"}, {"barrier_id", 0}, {"num_threadblocks", 2}});
            }),
            Strings{E("gpus[0].threadblocks[1].ops[3]: barrier 0 of gpu 0 is met 1 times by tb "
                      "0 and 2 times by tb 1: a barrier that some tbs never reach waits "
                      "forever")});
  EXPECT_EQ(errors(withBarrier(2, 16)),
            (Strings{E("gpus[0].threadblocks[0].ops[11].barrier_id: barrier 16 is out of range: "
                       "the executor has 16 (MAX_DEVICE_SYNCERS)"),
                     E("gpus[0].threadblocks[1].ops[0].barrier_id: barrier 16 is out of range: "
                       "the executor has 16 (MAX_DEVICE_SYNCERS)")}));
  EXPECT_EQ(errors([](json::Object &p) {
              withBarrier()(p);
              pipeOps(p, 0, 1, 0, 1);
            }),
            Strings{E("gpus[0].threadblocks[1].ops[0].ops[0]: not yet supported: a barrier of "
                      "several tbs in a pipeline")});
}

TEST(MscclppTest, SemaphoreErrors) {
  EXPECT_EQ(errors([](json::Object &p) {
              withSemaphore()(p);
              opOf(p, 0, 1, 0)["semaphore_ids"] = json::Array{3};
            }),
            (Strings{E("gpus[0].threadblocks[1].ops[0].semaphore_ids[0]: semaphore 3 is out of "
                       "range: gpu 0 has 1")}));
  EXPECT_EQ(errors([](json::Object &p) {
              withSemaphore()(p);
              opsOf(p, 0, 1).push_back(
                  json::Object{{"name", "sem_acquire"}, {"semaphore_ids", json::Array{0}}});
              opsOf(p, 0, 1).push_back(json::Object{{"name", "nop"}});
            }),
            Strings{E("gpus[0].threadblocks[1].ops[4]: semaphore 0 of gpu 0 is released 1 times "
                      "and acquired 2 times: a call must leave it at its initial value")});
  EXPECT_EQ(errors([](json::Object &p) {
              withSemaphore()(p);
              opsOf(p, 0, 1).push_back(
                  json::Object{{"name", "sem_release"}, {"semaphore_ids", json::Array{0}}});
              opsOf(p, 0, 1).push_back(
                  json::Object{{"name", "sem_acquire"}, {"semaphore_ids", json::Array{0}}});
            }),
            Strings{E("gpus[0].threadblocks[1].ops[4]: not yet supported: tbs 0 and 1 both "
                      "release semaphore 0 of gpu 0: which release lets which acquire through "
                      "then depends on timing, and a Coll dependency names one step")});
  // The nop before the release removed: it would not cover the rres.
  EXPECT_EQ(errors([](json::Object &p) {
              withSemaphore()(p);
              eraseAt(opsOf(p, 0, 0), 10);
              json::Array &ops = opsOf(p, 0, 0);
              json::Value release = std::move(ops[10]);
              eraseAt(ops, 10);
              ops.insert(ops.begin() + 6, std::move(release));
            }),
            Strings{E("gpus[0].threadblocks[0].ops[6]: not yet supported: 'sem_release' after "
                      "gpus[0].threadblocks[0].ops[5] with no nop between them: thread i "
                      "releases semaphore i as soon as its own part is done, so the release "
                      "does not cover the other threads' part, while Coll's dependency would")});
  // The nop after the acquire removed.
  EXPECT_EQ(errors([](json::Object &p) {
              withSemaphore()(p);
              eraseAt(opsOf(p, 0, 1), 1);
            }),
            Strings{E("gpus[0].threadblocks[1].ops[1]: not yet supported: 'copy' after the wait "
                      "gpus[0].threadblocks[1].ops[0] with no nop between them: only thread i "
                      "waits, for channel or semaphore i, so the other threads may start on this "
                      "op before the wait is over, while in Coll every step after a wait follows "
                      "it")});
}

TEST(MscclppTest, SignalPairing) {
  // Rank 1's end wait removed: rank 0's signal is left over.
  EXPECT_EQ(errors([](json::Object &p) { eraseAt(opsOf(p, 1, 0), 9); }),
            Strings{E("gpus[0].threadblocks[0].ops[7]: signal 1 on gpu 0's memory channel 0 to "
                      "gpu 1 is never waited for: gpu 1 waits on its partner channel only 1 "
                      "times, and a signal left over would release a wait of the next call "
                      "early")});
  // Rank 0's end signal removed: rank 1's end wait waits forever.
  EXPECT_EQ(errors([](json::Object &p) { eraseAt(opsOf(p, 0, 0), 7); }),
            Strings{E("gpus[1].threadblocks[0].ops[9]: wait 1 on gpu 1's memory channel 0 to "
                      "gpu 0 has no matching signal: gpu 0 signals on its partner channel only 1 "
                      "times, so this wait waits forever")});
  // Two tbs of rank 1 wait on one memory channel.
  EXPECT_EQ(errors([](json::Object &p) {
              arr(*gpuOf(p, 1).get("threadblocks"))
                  .push_back(json::Object{
                      {"id", 1},
                      {"channels", json::Array{json::Object{{"channel_type", "memory"},
                                                            {"channel_ids", json::Array{0}}}}},
                      {"ops", json::Array{json::Object{{"name", "wait"}, {"channel_ids", json::Array{0}},
                                                       {"channel_type", "memory"}}}}});
              opsOf(p, 0, 0).push_back(json::Object{{"name", "signal"}, {"channel_ids", json::Array{0}},
                                                    {"channel_type", "memory"}});
            }),
            Strings{E("gpus[1].threadblocks[1].ops[0]: not yet supported: tbs 0 and 1 of gpu 1 "
                      "both wait on its memory channel to gpu 0: on a Coll channel, one tb per "
                      "rank waits for a peer")});
  // Two tbs of rank 0 signal on one memory channel.
  EXPECT_EQ(errors([](json::Object &p) {
              json::Array &tbs = arr(*gpuOf(p, 0).get("threadblocks"));
              json::Object second{{"id", 1},
                                  {"channels", json::Array{json::Object{{"channel_type", "memory"},
                                                                        {"channel_ids", json::Array{0}}}}},
                                  {"ops", json::Array{json::Object{{"name", "signal"},
                                                                   {"channel_ids", json::Array{0}},
                                                                   {"channel_type", "memory"}}}}};
              tbs.push_back(std::move(second));
              opsOf(p, 1, 0).push_back(json::Object{{"name", "wait"}, {"channel_ids", json::Array{0}},
                                                    {"channel_type", "memory"}});
            }),
            Strings{E("gpus[0].threadblocks[1].ops[0]: not yet supported: tbs 0 and 1 of gpu 0 "
                      "both signal on its memory channel to gpu 1: on a Coll channel, one tb per "
                      "rank signals a peer")});
}

TEST(MscclppTest, MergedChannels) {
  // Each rank gets a second memory channel to the other (tag 1) and uses
  // it for the end handshake: one tb signals and one waits on both
  // channels, in the same order, so Coll's one count is exact.
  auto second = [](json::Object &p, size_t g) {
    arr(*obj(arr(*gpuOf(p, g).get("channels"))[0]).get("connected_to")).push_back(1 - int(g));
    tbOf(p, g, 0)["channels"] =
        json::Array{json::Object{{"channel_type", "memory"}, {"channel_ids", json::Array{0, 1}}}};
    opOf(p, g, 0, 7)["channel_ids"] = json::Array{1};
    opOf(p, g, 0, 9)["channel_ids"] = json::Array{1};
  };
  Result r = read(both(second));
  ASSERT_EQ(r.errors, Strings{});
  EXPECT_EQ(checkErrors(*r.alg), Strings{});
  // Rank 1 waits on them in the other order: one count would pair them
  // differently (and its relaxed wait would take rank 0's end signal).
  EXPECT_EQ(errors([&](json::Object &p) {
              second(p, 0);
              second(p, 1);
              opOf(p, 1, 0, 3)["channel_ids"] = json::Array{1};
              opOf(p, 1, 0, 9)["channel_ids"] = json::Array{0};
            }),
            (Strings{E("gpus[1].threadblocks[0].ops[3]: not yet supported: a relaxed wait "
                       "(rlxwait) that takes the signal gpus[0].threadblocks[0].ops[7], which "
                       "releases data: the relaxed wait does not acquire it, while Coll's wait "
                       "would"),
                     E("gpus[0].threadblocks[0].ops[1]: not yet supported: gpu 0's signals to "
                       "gpu 1 on its 2 memory channels are not waited for in the order they are "
                       "signalled: Coll, which counts them as one, would pair them "
                       "differently")}));
}

// A tb that signals a peer on two memory channels whose waits are in two
// tbs of the peer: the second channel's signals move to a tb of their own
// (splitStreams), which signals after the nop left where each stood. The
// same on the wait side: a tb that waits on two channels signalled by two
// tbs keeps a nop that depends on the wait, now in a tb of its own.
TEST(MscclppTest, TwoTbsOnMergedChannels) {
  // Rank 0's tb 0 signals rank 1 on channel 1 too, after its end
  // handshake; rank 1's tb 1 waits for it.
  auto secondChannel = [](json::Object &p) {
    arr(*obj(arr(*gpuOf(p, 0).get("channels"))[0]).get("connected_to")).push_back(1);
    arr(*obj(arr(*gpuOf(p, 1).get("channels"))[0]).get("connected_to")).push_back(0);
  };
  Result sig = read([&](json::Object &p) {
    secondChannel(p);
    tbOf(p, 0, 0)["channels"] =
        json::Array{json::Object{{"channel_type", "memory"}, {"channel_ids", json::Array{0, 1}}}};
    opsOf(p, 0, 0).push_back(json::Object{{"name", "signal"}, {"channel_ids", json::Array{1}},
                                          {"channel_type", "memory"}});
    arr(*gpuOf(p, 1).get("threadblocks"))
        .push_back(json::Object{
            {"id", 1},
            {"channels", json::Array{json::Object{{"channel_type", "memory"},
                                                  {"channel_ids", json::Array{1}}}}},
            {"ops", json::Array{json::Object{{"name", "wait"}, {"channel_ids", json::Array{0}},
                                             {"channel_type", "memory"}}}}});
  });
  ASSERT_EQ(sig.errors, Strings{});
  const ir::Gpu &g0 = sig.alg->gpus[0];
  ASSERT_EQ(g0.tbs.size(), 2u);
  ASSERT_EQ(g0.tbs[0].steps.size(), 7u);
  EXPECT_EQ(g0.tbs[0].steps[6].type, StepType::Nop); // where the signal stood
  EXPECT_TRUE(g0.tbs[0].steps[6].hasDep);
  ASSERT_EQ(g0.tbs[1].steps.size(), 1u);
  EXPECT_EQ(g0.tbs[1].steps[0].type, StepType::Signal);
  EXPECT_EQ(g0.tbs[1].steps[0].peer, 1);
  EXPECT_EQ(g0.tbs[1].steps[0].depTb, 0);
  EXPECT_EQ(g0.tbs[1].steps[0].depStep, 6);
  EXPECT_NE(g0.tbs[0].channel, g0.tbs[1].channel);
  EXPECT_EQ(g0.tbs[1].channel, sig.alg->gpus[1].tbs[1].channel);
  EXPECT_EQ(checkErrors(*sig.alg), Strings{});

  // Rank 0's tb 1 signals rank 1 on channel 1, which rank 1's tb 0 waits
  // on after its end handshake, before copying i[1] into s[0].
  Result wait = read([&](json::Object &p) {
    secondChannel(p);
    arr(*gpuOf(p, 0).get("threadblocks"))
        .push_back(json::Object{
            {"id", 1},
            {"channels", json::Array{json::Object{{"channel_type", "memory"},
                                                  {"channel_ids", json::Array{1}}}}},
            {"ops", json::Array{json::Object{{"name", "signal"}, {"channel_ids", json::Array{0}},
                                             {"channel_type", "memory"}}}}});
    tbOf(p, 1, 0)["channels"] =
        json::Array{json::Object{{"channel_type", "memory"}, {"channel_ids", json::Array{0, 1}}}};
    json::Array &ops = opsOf(p, 1, 0);
    ops.push_back(json::Object{{"name", "wait"}, {"channel_ids", json::Array{1}},
                               {"channel_type", "memory"}});
    ops.push_back(json::Object{{"name", "nop"}});
    ops.push_back(json::Object{
        {"name", "copy"},
        {"src_buff", json::Array{json::Object{{"type", "i"}, {"index", 1}, {"size", 1}}}},
        {"dst_buff", json::Array{json::Object{{"type", "s"}, {"index", 0}, {"size", 1}}}}});
  });
  ASSERT_EQ(wait.errors, Strings{});
  const ir::Gpu &g1 = wait.alg->gpus[1];
  ASSERT_EQ(g1.tbs.size(), 2u);
  ASSERT_EQ(g1.tbs[0].steps.size(), 8u);
  EXPECT_EQ(g1.tbs[0].steps[6].type, StepType::Nop); // where the wait stood
  EXPECT_EQ(g1.tbs[0].steps[6].depTb, 1);
  EXPECT_EQ(g1.tbs[0].steps[6].depStep, 0);
  EXPECT_EQ(g1.tbs[0].steps[7].type, StepType::Copy);
  ASSERT_EQ(g1.tbs[1].steps.size(), 1u);
  EXPECT_EQ(g1.tbs[1].steps[0].type, StepType::Wait);
  EXPECT_EQ(g1.tbs[1].steps[0].peer, 0);
  EXPECT_TRUE(g1.tbs[1].steps[0].hasDep);
  EXPECT_EQ(checkErrors(*wait.alg), Strings{});
}

//===----------------------------------------------------------------------===//
// Port channels
//===----------------------------------------------------------------------===//

/// A 2-rank in-place allgather over port channels, as MSCCL++'s multi-node
/// allgather at 2 GPUs: each rank tells its peer it is ready (signal), waits
/// for the peer's, puts its chunk into the peer's output with a signal and
/// a flush (pwsf), and waits for the peer's.
std::string portPlan(const std::function<void(json::Object &)> &edit = {}) {
  const char *text = R"({
  "name": "ag", "collective": "allgather", "protocol": "Simple",
  "inplace": true, "reuse_resources": false, "num_threads_per_block": 1024,
  "use_double_scratch_buffer": false, "buffer_alignment": 16,
  "min_message_size": 0, "max_message_size": 18446744073709551615,
  "gpus": [)";
  std::string gpus;
  for (int g = 0; g < 2; ++g) {
    int peer = 1 - g;
    std::string one = R"({"id": G, "input_chunks": 1, "output_chunks": 2, "scratch_chunks": 1,
     "channels": [{"channel_type": "port", "connected_to": [P]}],
     "remote_buffers": [{"rank": P, "type": "o", "access_channel_types": ["port"]}],
     "semaphores": [],
     "threadblocks": [{"id": 0,
       "channels": [{"channel_type": "port", "channel_ids": [0]}],
       "remote_buffer_refs": [{"access_channel_type": "port", "remote_buffer_ids": [0]}],
       "ops": [
         {"name": "nop"},
         {"name": "signal", "channel_ids": [0], "channel_type": "port"},
         {"name": "nop"},
         {"name": "wait", "channel_ids": [0], "channel_type": "port"},
         {"name": "nop"},
         {"name": "pwsf", "src_buff": [{"type": "o", "index": G, "size": 1}],
          "dst_buff": [{"buffer_id": 0, "index": G, "size": 1}], "channel_ids": [0],
          "channel_type": "port"},
         {"name": "wait", "channel_ids": [0], "channel_type": "port"},
         {"name": "nop"}]}]})";
    for (auto [from, to] : {std::pair<const char *, int>{"G", g}, {"P", peer}})
      for (size_t at; (at = one.find(from)) != std::string::npos;)
        one.replace(at, 1, std::to_string(to));
    gpus += (g ? ",\n" : "") + one;
  }
  json::Value v = cantFail(json::parse(std::string(text) + gpus + "]}"));
  if (edit)
    edit(obj(v));
  return llvm::formatv("{0}", v).str();
}

TEST(MscclppTest, PortChannels) {
  Result r = readText(portPlan());
  ASSERT_EQ(r.errors, Strings{});
  ASSERT_TRUE(r.alg);
  EXPECT_EQ(checkErrors(*r.alg), Strings{});
  // Each rank: its tb, and the proxy tb of its port channel, whose signal,
  // put and signal each follow the request (a nop) that their tb left.
  for (int32_t g = 0; g < 2; ++g) {
    const Gpu &gpu = r.alg->gpus[g];
    ASSERT_EQ(gpu.tbs.size(), 2u);
    const std::vector<Step> &tb = gpu.tbs[0].steps, &proxy = gpu.tbs[1].steps;
    ASSERT_EQ(proxy.size(), 3u);
    EXPECT_EQ(proxy[0].type, StepType::Signal);
    EXPECT_EQ(proxy[0].depTb, 0);
    EXPECT_EQ(tb[proxy[0].depStep].type, StepType::Nop);
    EXPECT_EQ(proxy[1].type, StepType::Put);
    EXPECT_EQ(proxy[1].peer, 1 - g);
    EXPECT_EQ(proxy[1].dstBuf, BufferKind::Output);
    EXPECT_EQ(proxy[1].dstOff, g);
    EXPECT_EQ(proxy[1].depTb, 0);
    EXPECT_GT(proxy[1].depStep, proxy[0].depStep);
    EXPECT_EQ(proxy[2].type, StepType::Signal);
    // pwsf's flush: a nop of the tb that depends on the proxy's signal.
    bool flushed = false;
    for (const Step &s : tb)
      flushed |= s.depTb == 1 && s.depStep == 2;
    EXPECT_TRUE(flushed);
  }
  // Every plan runs on the proxy tbs' puts: a wait that nothing signals is
  // found as on memory channels.
  EXPECT_EQ(readText(portPlan([](json::Object &p) { eraseAt(opsOf(p, 1, 0), 1); })).errors,
            Strings{E("gpus[0].threadblocks[0].ops[6]: wait 1 on gpu 0's port channel 0 to gpu "
                      "1 has no matching signal: gpu 1 signals on its partner channel only 1 "
                      "times, so this wait waits forever")});
}

TEST(MscclppTest, PortChannelRaces) {
  // With pws instead of pwsf, nothing tells the tb when the proxy has read
  // the put's source: writing it afterwards (a copy from scratch) races
  // with the proxy's put, which the check finds.
  auto overwrite = [](const char *put) {
    return [put](json::Object &p) {
      p["collective"] = "test";
      for (size_t g = 0; g < 2; ++g) {
        opOf(p, g, 0, 5)["name"] = put;
        json::Array &ops = opsOf(p, g, 0);
        ops.push_back(json::Object{
            {"name", "copy"},
            {"src_buff", json::Array{json::Object{{"type", "s"}, {"index", 0}, {"size", 1}}}},
            {"dst_buff", json::Array{json::Object{{"type", "o"}, {"index", int(g)}, {"size", 1}}}}});
      }
    };
  };
  Result pws = readText(portPlan(overwrite("pws")));
  ASSERT_EQ(pws.errors, Strings{});
  Strings found = checkErrors(*pws.alg);
  ASSERT_FALSE(found.empty());
  EXPECT_NE(found.front().find("race"), std::string::npos) << found.front();
  // pwsf waits until the put is done: the same copy after it is ordered.
  Result pwsf = readText(portPlan(overwrite("pwsf")));
  ASSERT_EQ(pwsf.errors, Strings{});
  EXPECT_EQ(checkErrors(*pwsf.alg), Strings{});
}

TEST(MscclppTest, PortChannelErrors) {
  auto errs = [](const std::function<void(json::Object &)> &edit) {
    return readText(portPlan(edit)).errors;
  };
  // A request right after a data op or a wait, with no nop between them.
  EXPECT_EQ(errs([](json::Object &p) { eraseAt(opsOf(p, 0, 0), 4); }),
            Strings{E("gpus[0].threadblocks[0].ops[4]: not yet supported: 'pwsf' after the wait "
                      "gpus[0].threadblocks[0].ops[3] with no nop between them: thread i hands "
                      "its request to the proxy whether or not the other threads' waits are over, "
                      "while in Coll it follows them")});
  EXPECT_EQ(errs([](json::Object &p) {
              json::Array &ops = opsOf(p, 0, 0);
              ops[4] = json::Object{
                  {"name", "copy"},
                  {"src_buff", json::Array{json::Object{{"type", "o"}, {"index", 0}, {"size", 1}}}},
                  {"dst_buff", json::Array{json::Object{{"type", "s"}, {"index", 0}, {"size", 1}}}}};
              ops.insert(ops.begin() + 4, json::Object{{"name", "nop"}});
            }),
            Strings{E("gpus[0].threadblocks[0].ops[6]: not yet supported: 'pwsf' after "
                      "gpus[0].threadblocks[0].ops[5] with no nop between them: thread i hands "
                      "its request to the proxy as soon as its own part of that op is done, so "
                      "the request covers only that part, while in Coll it follows everything "
                      "its tb did")});
  // pws on a memory channel only puts.
  EXPECT_EQ(errs([](json::Object &p) { opOf(p, 0, 0, 5)["channel_type"] = "memory"; }),
            Strings{E("gpus[0].threadblocks[0].ops[5].channel_type: 'pwsf' on a channel of type "
                      "'memory': the executor signals and flushes only on port channels, so on "
                      "another it would only put")});
  // Entries and channels by thread.
  EXPECT_EQ(errs([](json::Object &p) {
              arr(*opOf(p, 0, 0, 5).get("src_buff"))
                  .push_back(json::Object{{"type", "o"}, {"index", 1}, {"size", 1}});
            }),
            Strings{E("gpus[0].threadblocks[0].ops[5].src_buff: 'pwsf' on a port channel pairs "
                      "src_buff and dst_buff entry by entry: 2 and 1 entries")});
  EXPECT_EQ(errs([](json::Object &p) { opOf(p, 0, 0, 5)["channel_ids"] = json::Array{}; }),
            Strings{E("gpus[0].threadblocks[0].ops[5].channel_ids: 'pwsf' has 0 channel_ids for "
                      "1 dst_buff entries: thread i puts dst_buff[i] through channel_ids[i]")});
  EXPECT_EQ(errs([](json::Object &p) { opOf(p, 0, 0, 1)["channel_ids"] = json::Array{1}; }),
            Strings{E("gpus[0].threadblocks[0].ops[1].channel_ids[0]: channel 1 is out of "
                      "range: the tb has 1 port channels")});
  EXPECT_EQ(errs([](json::Object &p) {
              obj(arr(*opOf(p, 0, 0, 5).get("dst_buff"))[0])["buffer_id"] = 1;
            }),
            Strings{E("gpus[0].threadblocks[0].ops[5].dst_buff[0].buffer_id: remote buffer 1 is "
                      "out of range: the tb has 1 port-channel remote buffers")});
  // In a pipeline.
  EXPECT_EQ(errs([](json::Object &p) { pipeOps(p, 0, 0, 1, 2); }),
            Strings{E("gpus[0].threadblocks[0].ops[1].ops[0]: not yet supported: 'signal' on a "
                      "port channel in a pipeline")});
  // flush does nothing in v0.10's executor: a warning, no step.
  Result flush = readText(portPlan([](json::Object &p) {
    opsOf(p, 0, 0).push_back(json::Object{{"name", "flush"}, {"channel_ids", json::Array{0}},
                                          {"channel_type", "port"}});
  }));
  EXPECT_EQ(flush.errors, Strings{});
  EXPECT_EQ(flush.warnings,
            Strings{"plan.json: warning: gpus[0].threadblocks[0].ops[8]: 'flush' does nothing in "
                    "MSCCL++ v0.10's executor (handleFlush flushes as many channels as the op has "
                    "dst_buff entries, and a flush has none); Coll reads it as nothing"});
}

TEST(MscclppTest, PortChannelTags) {
  // Port channels count their connection tags after the memory channels
  // to the same peer, both ends from the larger count: with a memory
  // channel on rank 0 only, the port channels still meet.
  Result r = readText(portPlan([](json::Object &p) {
    arr(*gpuOf(p, 0).get("channels"))
        .push_back(json::Object{{"channel_type", "memory"}, {"connected_to", json::Array{1}}});
  }));
  EXPECT_EQ(r.errors, Strings{});
  // A second port channel on rank 0 whose partner rank 1 lacks: a signal
  // on it is never waited for.
  EXPECT_EQ(readText(portPlan([](json::Object &p) {
              obj(arr(*gpuOf(p, 0).get("channels"))[0])["connected_to"] = json::Array{1, 1};
              obj(arr(*tbOf(p, 0, 0).get("channels"))[0])["channel_ids"] = json::Array{0, 1};
              opOf(p, 0, 0, 1)["channel_ids"] = json::Array{1};
            })).errors,
            (Strings{E("gpus[0].threadblocks[0].ops[1]: signal 0 on gpu 0's port channel 1 to gpu "
                      "1 is never waited for: gpu 1 waits on its partner channel only 0 times, and "
                      "a signal left over would release a wait of the next call early"),
                    E("gpus[1].threadblocks[0].ops[6]: wait 1 on gpu 1's port channel 0 to gpu 0 "
                      "has no matching signal: gpu 0 signals on its partner channel only 1 times, "
                      "so this wait waits forever")}));
}

//===----------------------------------------------------------------------===//
// Threadblock groups
//===----------------------------------------------------------------------===//

TEST(MscclppTest, ThreadblockGroups) {
  // Rank 0's rres in a group of 2 of which only tb 0 exists: the plan is
  // read with each chunk split in 2, the rres moves the first half of its
  // chunk, and the check finds the other half never reduced.
  Result half = read([](json::Object &p) {
    opOf(p, 0, 0, 5)["tbg_info"] = json::Object{{"tb_id", 0}, {"tbg_size", 2}};
  });
  ASSERT_EQ(half.errors, Strings{});
  ASSERT_TRUE(half.alg);
  EXPECT_EQ(half.alg->gpus[0].inputChunks, 4);
  EXPECT_EQ(half.alg->gpus[1].inputChunks, 4);
  Strings found = checkErrors(*half.alg);
  ASSERT_FALSE(found.empty());
  EXPECT_NE(found.front().find("wrong result"), std::string::npos) << found.front();
  // Both halves, one per tb of the group, in tbs of their own that each
  // take their half: gpu 0's tb 1 is tb 0 with the other slice.
  Result whole = read([](json::Object &p) {
    json::Array &tbs = arr(*gpuOf(p, 0).get("threadblocks"));
    json::Value second = tbs[0];
    opOf(p, 0, 0, 5)["tbg_info"] = json::Object{{"tb_id", 0}, {"tbg_size", 2}};
    json::Object &t1 = obj(second);
    t1["id"] = 1;
    json::Array ops;
    json::Value rres = arr(*t1.get("ops"))[5];
    obj(rres)["tbg_info"] = json::Object{{"tb_id", 1}, {"tbg_size", 2}};
    // Only the data op: tb 0's signals and waits order it (tb 1 is
    // ordered by nothing, so the check finds its race with the peer).
    ops.push_back(std::move(rres));
    t1["ops"] = std::move(ops);
    tbs.push_back(std::move(second));
  });
  ASSERT_EQ(whole.errors, Strings{});
  ASSERT_TRUE(whole.alg);
  const std::vector<Step> &t0 = whole.alg->gpus[0].tbs[0].steps;
  const std::vector<Step> &t1 = whole.alg->gpus[0].tbs[1].steps;
  ASSERT_FALSE(t1.empty());
  bool firstHalf = false;
  for (const Step &st : t0)
    firstHalf |= st.type == StepType::GetReduce && st.dstOff == 0 && st.count == 1;
  EXPECT_TRUE(firstHalf);
  EXPECT_EQ(t1.front().dstOff, 1);
  EXPECT_EQ(t1.front().count, 1);
  found = checkErrors(*whole.alg);
  ASSERT_FALSE(found.empty());
  EXPECT_NE(found.front().find("race"), std::string::npos) << found.front();
  // In a pipeline: refused.
  EXPECT_EQ(errors([](json::Object &p) {
              opOf(p, 0, 0, 5)["tbg_info"] = json::Object{{"tb_id", 0}, {"tbg_size", 2}};
              pipeOps(p, 0, 0, 5, 6);
            }),
            Strings{E("gpus[0].threadblocks[0].ops[5].ops[0].tbg_info: not yet supported: a "
                      "threadblock group (tbg_size 2) in a pipeline: each of its tbs runs its "
                      "slice of every unit")});
  // Group sizes whose least common multiple is above 1024.
  EXPECT_EQ(errors([](json::Object &p) {
              opOf(p, 0, 0, 5)["tbg_info"] = json::Object{{"tb_id", 0}, {"tbg_size", 1021}};
              opOf(p, 1, 0, 5)["tbg_info"] = json::Object{{"tb_id", 0}, {"tbg_size", 1019}};
            }),
            Strings{E("not yet supported: threadblock groups whose sizes' least common multiple "
                      "is 1040399: Coll reads such a plan with each chunk split in that many, and "
                      "takes at most 1024")});
}

} // namespace
} // namespace coll::ir
