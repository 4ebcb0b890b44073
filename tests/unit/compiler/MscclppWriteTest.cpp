//===- MscclppWriteTest.cpp - Coll programs as MSCCL++ plans --------------===//
//
// ir::mscclpp::writePlan (collc --emit=mscclpp): the built-in direct
// programs at 2, 4 and 8 ranks are written, read back as the same steps,
// proven again and run on the host backend with every rank verified; what
// the format cannot carry is refused with the step that shows it.
//
//===----------------------------------------------------------------------===//

#include "CompilerTest.h"

#include "coll/ir/Check.h"
#include "coll/ir/Mscclpp.h"
#include "coll/ir/Verifier.h"

#include "llvm/Support/JSON.h"

#include <gtest/gtest.h>

namespace coll::compiler::test {
namespace {

std::string sourceOf(const char *name) {
  std::string path = std::string(COLL_ALGORITHMS_DIR) + "/" + name + ".coll";
  auto file = llvm::MemoryBuffer::getFile(path);
  EXPECT_TRUE(static_cast<bool>(file)) << path;
  return file ? (*file)->getBuffer().str() : std::string();
}

/// writePlan's text, or its errors as the text of a failed expectation.
llvm::Expected<std::string> written(const ir::Algorithm &alg) {
  std::string text;
  llvm::raw_string_ostream os(text);
  ir::DiagnosticList diags("prog.coll");
  if (llvm::Error err = ir::mscclpp::writePlan(alg, os, diags))
    return std::move(err);
  return os.str();
}

class WritePlan : public ::testing::TestWithParam<const char *> {};

TEST_P(WritePlan, RoundTripsProvesAndRuns) {
  const char *name = GetParam();
  std::string source = sourceOf(name);
  for (int n : {2, 4, 8}) {
    Config setup;
    setup.overrides.params["N"] = int64_t(n);
    Compilation c(source, setup);
    ASSERT_TRUE(c.ok()) << name << " N=" << n << "\n" << c.text();
    auto text = written(c.alg());
    ASSERT_TRUE(static_cast<bool>(text))
        << name << " N=" << n << ": " << llvm::toString(text.takeError());
    std::string where = std::string(name) + " N=" + std::to_string(n);

    // The keys the DSL writes, at every level (tests/lit/mscclpp/emit.test
    // compares their order with plans the DSL wrote).
    auto json = llvm::json::parse(*text);
    ASSERT_TRUE(static_cast<bool>(json)) << where << ": " << llvm::toString(json.takeError());
    const llvm::json::Object *plan = json->getAsObject();
    ASSERT_TRUE(plan);
    for (const char *key : {"name", "collective", "protocol", "inplace", "reuse_resources", "gpus",
                            "num_threads_per_block", "use_double_scratch_buffer",
                            "buffer_alignment", "min_message_size", "max_message_size"})
      EXPECT_TRUE(plan->get(key)) << where << ": no '" << key << "'";
    EXPECT_EQ(plan->getArray("gpus")->size(), size_t(n)) << where;

    ir::DiagnosticList back("plan.json");
    auto read = ir::mscclpp::parsePlanAlgorithm(*text, back);
    ASSERT_TRUE(static_cast<bool>(read)) << where << ": " << llvm::toString(read.takeError());
    std::optional<std::string> diff = ir::mscclpp::stepDifference(c.alg(), *read);
    EXPECT_FALSE(diff) << where << ": " << diff.value_or("");
    EXPECT_EQ(read->collective, c.alg().collective) << where;

    auto analysis = ir::verify(*read, back);
    ASSERT_TRUE(static_cast<bool>(analysis)) << where << ": " << llvm::toString(analysis.takeError());
    ASSERT_TRUE(ir::check(*read, *analysis, back)) << where << ": " << llvm::toString(back.takeErrors());

    const bool inplace = read->inplace;
    for (uint64_t count : {uint64_t(read->nchunksPerLoop) * 5, uint64_t(1000)}) {
      auto result = coll::testing::runChecked(*read, interp::DataType::Float32,
                                              interp::ReduceOp::Sum, count, inplace);
      ASSERT_TRUE(static_cast<bool>(result))
          << where << " count=" << count << ": " << llvm::toString(result.takeError());
      EXPECT_EQ(result->wrong, 0u) << where << " count=" << count << ": " << result->firstWrong;
      EXPECT_GT(result->checked, 0u) << where;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Builtin, WritePlan,
                         ::testing::Values("allgather_direct", "alltoall_direct",
                                           "allreduce_oneshot_direct", "allreduce_twoshot_direct",
                                           "reducescatter_direct"));

/// A program that supports both modes is written out of place, or in place
/// when traced so (collc --inplace): one mode per plan, as MSCCL++'s.
TEST(WritePlanModes, OneModePerPlan) {
  std::string source = sourceOf("allreduce_twoshot_direct");
  for (bool inplace : {false, true}) {
    Config setup;
    setup.overrides.params["N"] = int64_t(4);
    if (inplace)
      setup.overrides.inplace = true; // collc --inplace
    Compilation c(source, setup);
    ASSERT_TRUE(c.ok()) << c.text();
    auto text = written(c.alg());
    ASSERT_TRUE(static_cast<bool>(text)) << llvm::toString(text.takeError());
    auto json = llvm::json::parse(*text);
    ASSERT_TRUE(static_cast<bool>(json));
    EXPECT_EQ(json->getAsObject()->getBoolean("inplace"), inplace);
  }
}

ir::Algorithm twoRanks() {
  ir::Algorithm alg;
  alg.name = "t";
  alg.collective = ir::Collective::Custom;
  alg.collectiveSpelling = "test";
  alg.gpus.resize(2);
  for (ir::Gpu &g : alg.gpus) {
    g.inputChunks = 2;
    g.outputChunks = 2;
    g.tbs.resize(2);
  }
  return alg;
}

ir::Step direct(ir::StepType type, int32_t peer, ir::BufferKind sb = ir::BufferKind::Input,
                int32_t so = 0, ir::BufferKind db = ir::BufferKind::Output, int32_t d = 0) {
  ir::Step s;
  s.type = type;
  s.peer = peer;
  s.srcBuf = sb;
  s.srcOff = so;
  s.dstBuf = db;
  s.dstOff = d;
  s.count = type == ir::StepType::Signal || type == ir::StepType::Wait ? 0 : 1;
  return s;
}

std::string errorsOf(const ir::Algorithm &alg) {
  auto text = written(alg);
  if (text)
    return "written";
  return llvm::toString(text.takeError());
}

TEST(WritePlanRefuses, FifoSteps) {
  Compilation c(sourceOf("allreduce_ring"), [] {
    Config setup;
    setup.overrides.params["N"] = int64_t(2);
    return setup;
  }());
  ASSERT_TRUE(c.ok()) << c.text();
  std::string errors = errorsOf(c.alg());
  EXPECT_NE(errors.find("prog.coll: error: gpu 0 tb 0 step 0: "), std::string::npos) << errors;
  EXPECT_NE(errors.find("moves data through a FIFO: MSCCL++ carries such steps on port "
                        "channels, which collc does not write yet"),
            std::string::npos)
      << errors;
}

TEST(WritePlanRefuses, RootedCollectivesLL128AndConditions) {
  ir::Algorithm alg = twoRanks();
  alg.collective = ir::Collective::Broadcast;
  alg.root = 0;
  EXPECT_EQ(errorsOf(alg), "prog.coll: error: 'broadcast' is a rooted collective, and an MSCCL++ "
                           "plan names no root (the format has no field for it)");
  alg = twoRanks();
  alg.protocol = ir::Protocol::LL128;
  EXPECT_EQ(errorsOf(alg), "prog.coll: error: protocol LL128: MSCCL++ plans have Simple and LL "
                           "only");
  alg = twoRanks();
  alg.condition.emplace();
  EXPECT_EQ(errorsOf(alg),
            "prog.coll: error: a custom collective's condition: an MSCCL++ plan has no field for "
            "it, and its result could not be checked after reading it back");
}

TEST(WritePlanRefuses, GetBetweenDifferentChunks) {
  ir::Algorithm alg = twoRanks();
  alg.gpus[0].tbs[0].steps.push_back(
      direct(ir::StepType::Get, 1, ir::BufferKind::Input, 0, ir::BufferKind::Output, 1));
  EXPECT_EQ(errorsOf(alg),
            "prog.coll: error: gpu 0 tb 0 step 0: a get from chunk 0 to chunk 1: MSCCL++ v0.10's "
            "executor (handleGet) reads the peer at the destination's offset and writes at the "
            "source's, so the plan would not run what the program says");
  alg.gpus[0].tbs[0].steps[0].dstOff = 0;
  EXPECT_EQ(errorsOf(alg), "written");
}

TEST(WritePlanRefuses, OnePairSignalledFromTwoTbs) {
  ir::Algorithm alg = twoRanks();
  alg.gpus[0].tbs[0].steps.push_back(direct(ir::StepType::Signal, 1));
  alg.gpus[0].tbs[1].steps.push_back(direct(ir::StepType::Signal, 1));
  alg.gpus[1].tbs[0].steps.push_back(direct(ir::StepType::Wait, 0));
  alg.gpus[1].tbs[0].steps.push_back(direct(ir::StepType::Wait, 0));
  EXPECT_EQ(errorsOf(alg),
            "prog.coll: error: gpu 0 tb 1 step 0: signals of rank 0 to rank 1 on channel 0 are "
            "in tbs 0 and 1: an MSCCL++ memory channel is signalled by one tb");
  // On channels of their own, the two pairs are two memory channels.
  alg.gpus[0].tbs[1].channel = 1;
  alg.gpus[1].tbs[1].channel = 1;
  alg.gpus[1].tbs[0].steps.pop_back();
  alg.gpus[1].tbs[1].steps.push_back(direct(ir::StepType::Wait, 0));
  auto text = written(alg);
  ASSERT_TRUE(static_cast<bool>(text)) << llvm::toString(text.takeError());
  ir::DiagnosticList back("plan.json");
  auto read = ir::mscclpp::parsePlanAlgorithm(*text, back);
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError()) << "\n" << *text;
  EXPECT_FALSE(ir::mscclpp::stepDifference(alg, *read));
}

/// A dependency between tbs is a semaphore: released after the producing
/// step, acquired before the first consuming step of each tb, and the read
/// back orders the two as the program did.
TEST(WritePlanSemaphores, DependenciesBecomeSemaphores) {
  ir::Algorithm alg = twoRanks();
  ir::Step put = direct(ir::StepType::Put, 1);
  put.hasDep = true;
  alg.gpus[0].tbs[0].steps.push_back(put);
  ir::Step sig = direct(ir::StepType::Signal, 1);
  sig.depTb = 0;
  sig.depStep = 0;
  alg.gpus[0].tbs[1].steps.push_back(sig);
  ir::Step again = direct(ir::StepType::Signal, 1);
  again.depTb = 0; // already ordered by the acquire before step 0
  again.depStep = 0;
  alg.gpus[0].tbs[1].steps.push_back(again);
  alg.gpus[1].tbs[0].steps.push_back(direct(ir::StepType::Wait, 0));
  alg.gpus[1].tbs[0].steps.push_back(direct(ir::StepType::Wait, 0));
  auto text = written(alg);
  ASSERT_TRUE(static_cast<bool>(text)) << llvm::toString(text.takeError());
  auto json = llvm::json::parse(*text);
  ASSERT_TRUE(static_cast<bool>(json));
  const llvm::json::Object &gpu0 = *(*json->getAsObject()->getArray("gpus"))[0].getAsObject();
  EXPECT_EQ(gpu0.getArray("semaphores")->size(), 1u);
  auto opNames = [&](int tb) {
    std::string out;
    const llvm::json::Array &tbs = *gpu0.getArray("threadblocks");
    for (const llvm::json::Value &op : *tbs[tb].getAsObject()->getArray("ops"))
      out += op.getAsObject()->getString("name")->str() + " ";
    return out;
  };
  EXPECT_EQ(opNames(0), "put nop sem_release ");
  // After the acquire, a nop: thread i would signal whether or not the
  // other threads' acquires are over. The two signals reach one channel:
  // two ops (one op signals each of its channels once).
  EXPECT_EQ(opNames(1), "sem_acquire nop signal signal ");
  ir::DiagnosticList back("plan.json");
  auto read = ir::mscclpp::parsePlanAlgorithm(*text, back);
  ASSERT_TRUE(static_cast<bool>(read)) << llvm::toString(read.takeError()) << "\n" << *text;
  EXPECT_FALSE(ir::mscclpp::stepDifference(alg, *read));
  const ir::ThreadBlock &tb1 = read->gpus[0].tbs[1];
  ASSERT_FALSE(tb1.steps.empty());
  EXPECT_EQ(tb1.steps[0].type, ir::StepType::Nop);
  EXPECT_EQ(tb1.steps[0].depTb, 0);
}

} // namespace
} // namespace coll::compiler::test
