//===- CheckTest.cpp - Races, deadlocks and results without running -------===//

#include "IRTestUtil.h"

#include "coll/ir/Check.h"

namespace coll::ir {
namespace {

/// A 2-rank, 1-chunk in-place allreduce: each rank sends i[0], receives the
/// peer's into s[0] and adds it to i[0]. `{DEP}` is rank 1's dependency of
/// the reduction on the send, `{OP}` its reduction step type.
std::string exchange(llvm::StringRef dep, llvm::StringRef op,
                     llvm::StringRef modes = "inplace=\"1\" outofplace=\"0\"") {
  std::string xml = R"(<algo name="x" proto="Simple" nchannels="1" nchunksperloop="1" ngpus="2" coll="allreduce" )" +
                    modes.str() + R"( minBytes="0" maxBytes="0">)";
  for (int g = 0; g < 2; ++g) {
    std::string peer = std::to_string(1 - g);
    bool last = g == 1;
    xml += "<gpu id=\"" + std::to_string(g) +
           R"(" i_chunks="1" o_chunks="1" s_chunks="1">)";
    xml += R"(<tb id="0" send=")" + peer + R"(" recv="-1" chan="0">)";
    xml += R"(<step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="1"/></tb>)";
    xml += R"(<tb id="1" send="-1" recv=")" + peer + R"(" chan="0">)";
    xml += R"(<step s="0" type="r" srcbuf="s" srcoff="0" dstbuf="s" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>)";
    xml += "<step s=\"1\" type=\"" + (last ? op.str() : std::string("re")) +
           R"(" srcbuf="s" srcoff="0" dstbuf="i" dstoff="0" cnt="1" )" +
           (last ? dep.str() : std::string(R"(depid="0" deps="0")")) +
           R"( hasdep="0"/></tb></gpu>)";
  }
  return xml + "</algo>";
}

std::vector<std::string> checkErrors(const Algorithm &alg,
                                     std::vector<std::string> *warnings = nullptr,
                                     const CheckOptions &options = {}) {
  DiagnosticList diags("t.xml");
  llvm::Expected<Analysis> analysis = verify(alg, diags);
  EXPECT_TRUE(bool(analysis));
  if (!analysis) {
    llvm::consumeError(analysis.takeError());
    return {};
  }
  bool ok = check(alg, *analysis, diags, options);
  EXPECT_EQ(ok, !diags.hasErrors());
  if (warnings)
    *warnings = test::formatted(diags, Severity::Warning);
  return test::formatted(diags, Severity::Error);
}

/// `def` with its postcondition as explicit lists, as a custom collective
/// states it.
Definition listed(Definition def) {
  def.expected.assign(def.nranks, std::vector<std::vector<uint32_t>>(def.outputChunks));
  for (int32_t r = 0; r < def.nranks; ++r)
    for (int32_t i = 0; i < def.outputChunks; ++i)
      def.expected[r][i] = def.wantIds(r, i);
  def.rule = Collective::Custom;
  def.ruleChunks = def.ruleRoot = 0;
  return def;
}

TEST(CheckTest, CorrectExchangePasses) {
  Algorithm alg = test::parseValid(exchange(R"(depid="0" deps="0")", "re"));
  EXPECT_EQ(checkErrors(alg), std::vector<std::string>{});
}

TEST(CheckTest, UnorderedReductionRaces) {
  Algorithm alg = test::parseValid(exchange(R"(depid="-1" deps="-1")", "re"));
  std::vector<std::string> errors = checkErrors(alg);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("gpu 1 tb 1 step 1: race (in place): nothing "
                           "orders rank 1 tb 1 step 1 ('re') and rank 1 tb 0 "
                           "step 0 ('s' to rank 0), which both access i[0]"),
            std::string::npos)
      << errors[0];
}

TEST(CheckTest, CopyInsteadOfReductionIsWrong) {
  Algorithm alg = test::parseValid(exchange(R"(depid="0" deps="0")", "cpy"));
  std::vector<std::string> errors = checkErrors(alg);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("wrong result (in place): output chunk rank 1 "
                           "o[0] holds in(0,0) but must hold in(0,0) + "
                           "in(1,0); written by rank 1 tb 1 step 1 ('cpy')"),
            std::string::npos)
      << errors[0];
}

TEST(CheckTest, OutOfPlaceMustNotWriteTheInput) {
  // The same steps declared for both modes: out of place they reduce into
  // the input, which must stay unchanged, and the output is never written.
  Algorithm alg = test::parseValid(exchange(
      R"(depid="0" deps="0")", "re", R"(inplace="1" outofplace="1")"));
  std::vector<std::string> errors = checkErrors(alg);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("wrong result (out of place): rank "),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[0].find("tb 1 step 1 ('re') writes rank "),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[0].find(
                " i[0], but out of place the input must stay unchanged"),
            std::string::npos)
      << errors[0];
}

TEST(CheckTest, CustomWithoutDefinitionWarns) {
  std::string xml = exchange(R"(depid="0" deps="0")", "re");
  xml.replace(xml.find("allreduce"), 9, "custom");
  Algorithm alg = test::parseValid(xml);
  std::vector<std::string> warnings;
  EXPECT_EQ(checkErrors(alg, &warnings), std::vector<std::string>{});
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("the result is not checked: collective 'custom' "
                             "has no definition"),
            std::string::npos);
  // With a definition (here the allreduce one) it is checked.
  Definition def = builtinDefinition(Collective::AllReduce, 2, 1, -1);
  CheckOptions options;
  options.custom = &def;
  EXPECT_EQ(checkErrors(alg, &warnings, options), std::vector<std::string>{});
  EXPECT_EQ(warnings, std::vector<std::string>{});
  def = listed(def);
  def.expected[1][0] = {0}; // rank 1 must hold only in(0,0): it does not
  EXPECT_EQ(checkErrors(alg, &warnings, options).size(), 1u);
}

TEST(CheckTest, CustomCarriesItsCondition) {
  std::string xml = exchange(R"(depid="0" deps="0")", "re");
  xml.replace(xml.find("allreduce"), 9, "custom");
  // The allreduce postcondition, carried by the file.
  std::string condition = R"(<condition i_chunks="1" o_chunks="1">
<pre rank="0" chunks="0"/><pre rank="1" chunks="0"/>
<post rank="0" chunk="0" holds="0:0 1:0"/><post rank="1" chunk="0" holds="1:0 0:0"/>
</condition>)";
  Algorithm alg = test::parseValid(
      std::string(xml).insert(xml.rfind("</algo>"), condition));
  ASSERT_TRUE(alg.condition.has_value());
  EXPECT_EQ(alg.condition->expected[1][0], (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(*definitionOf(alg), listed(builtinDefinition(Collective::AllReduce, 2, 1, -1)));
  std::vector<std::string> warnings;
  EXPECT_EQ(checkErrors(alg, &warnings), std::vector<std::string>{});
  EXPECT_EQ(warnings, std::vector<std::string>{});
  // Rank 1 must hold only in(0,0): it does not.
  condition.replace(condition.find("1:0 0:0"), 7, "0:0");
  alg = test::parseValid(std::string(xml).insert(xml.rfind("</algo>"), condition));
  std::vector<std::string> errors = checkErrors(alg);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("output chunk rank 1 o[0] holds in(0,0) + in(1,0) but "
                           "must hold in(0,0)"),
            std::string::npos)
      << errors[0];
}

TEST(CheckTest, BuiltinDefinitions) {
  Definition ag = builtinDefinition(Collective::AllGather, 2, 2, -1);
  EXPECT_EQ(ag.inputChunks, 2);
  EXPECT_EQ(ag.outputChunks, 4);
  // Output chunk r*k + j of every rank is input chunk j of rank r.
  EXPECT_EQ(ag.wantIds(0, 3), std::vector<uint32_t>{3});
  Definition rs = builtinDefinition(Collective::ReduceScatter, 2, 1, -1);
  EXPECT_EQ(rs.wantIds(1, 0), (std::vector<uint32_t>{1, 3}));
  Definition bc = builtinDefinition(Collective::Broadcast, 3, 1, 2);
  EXPECT_FALSE(bc.inputDefined[0][0]);
  EXPECT_TRUE(bc.inputDefined[2][0]);
  EXPECT_EQ(bc.wantIds(0, 0), std::vector<uint32_t>{2});
  EXPECT_EQ(bc.wantIds(1, 0), std::vector<uint32_t>{2});
  // Reduce and gather constrain only the root.
  Definition rd = builtinDefinition(Collective::Reduce, 3, 2, 1);
  EXPECT_TRUE(rd.want(0, 1).empty());
  EXPECT_EQ(rd.wantIds(1, 1), (std::vector<uint32_t>{1, 3, 5}));
  Definition ga = builtinDefinition(Collective::Gather, 3, 1, 2);
  EXPECT_TRUE(ga.want(1, 0).empty());
  EXPECT_EQ(ga.wantIds(2, 1), std::vector<uint32_t>{1});
  // Output chunk a*k + j of rank r is input chunk r*k + j of rank a.
  Definition aa = builtinDefinition(Collective::AllToAll, 3, 2, -1);
  EXPECT_EQ(aa.wantIds(1, 5), std::vector<uint32_t>{2 * 6 + 1 * 2 + 1});
  Definition sc = builtinDefinition(Collective::Scatter, 3, 2, 0);
  EXPECT_EQ(sc.wantIds(2, 1), std::vector<uint32_t>{0 * 6 + 2 * 2 + 1});
  // An allreduce's output chunk is one run of keys, whatever the ranks.
  Definition ar = builtinDefinition(Collective::AllReduce, 4096, 4096, -1);
  EXPECT_EQ(ar.want(4095, 4095).runs().size(), 1u);
  EXPECT_EQ(ar.want(4095, 4095).size(), 4096u);
}

TEST(CheckTest, ContribSetsUniteDisjointRuns) {
  uint32_t common = 0;
  // A chain of reductions along a ring: adjacent runs join.
  auto a = ContribSet::unite(ContribSet::range(4, 8), ContribSet::single(8), common);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, ContribSet::range(4, 9));
  auto b = ContribSet::unite(*a, ContribSet::range(0, 2), common);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->runs().size(), 2u);
  EXPECT_EQ(b->size(), 7u);
  EXPECT_TRUE(b->contains(1));
  EXPECT_FALSE(b->contains(2));
  EXPECT_TRUE(b->contains(8));
  EXPECT_FALSE(b->contains(9));
  auto c = ContribSet::unite(*b, ContribSet::range(2, 4), common);
  ASSERT_TRUE(c);
  EXPECT_EQ(*c, ContribSet::range(0, 9));
  // A contribution in both would be counted twice: the smallest is named.
  EXPECT_FALSE(ContribSet::unite(*b, ContribSet::range(1, 6), common));
  EXPECT_EQ(common, 1u);
  EXPECT_FALSE(ContribSet::unite(ContribSet::range(0, 2), ContribSet::ofKeys({5, 1, 7}), common));
  EXPECT_EQ(common, 1u);
  EXPECT_EQ(ContribSet::ofKeys({7, 5, 6, 1}).keys(), (std::vector<uint32_t>{1, 5, 6, 7}));
  EXPECT_TRUE(ContribSet::ofKeys({}).empty());
  // Keys are index-major; ids come back rank-major, sorted.
  ContribLayout layout{3, 2};
  EXPECT_EQ(layout.key(layout.id(5)), 5u);
  EXPECT_EQ(ContribSet::range(3, 6).ids(layout), (std::vector<uint32_t>{1, 3, 5}));
}

TEST(CheckTest, DeadlockCycleNamesBothTbs) {
  // Rank g sends 9 chunks before receiving any: 8-slot FIFOs fill up.
  std::string xml = R"(<algo name="d" proto="Simple" nchannels="1" nchunksperloop="9" ngpus="2" coll="allreduce" inplace="1" outofplace="0" minBytes="0" maxBytes="0">)";
  for (int g = 0; g < 2; ++g) {
    std::string peer = std::to_string(1 - g);
    xml += "<gpu id=\"" + std::to_string(g) +
           R"(" i_chunks="9" o_chunks="0" s_chunks="9"><tb id="0" send=")" +
           peer + R"(" recv=")" + peer + R"(" chan="0">)";
    int s = 0;
    for (const char *type : {"s", "r", "re"})
      for (int c = 0; c < 9; ++c, ++s)
        xml += "<step s=\"" + std::to_string(s) + "\" type=\"" + type +
               "\" srcbuf=\"" + (type[0] == 's' ? "i" : "s") +
               "\" srcoff=\"" + std::to_string(c) + "\" dstbuf=\"" +
               (type[1] == 'e' ? "i" : "s") + "\" dstoff=\"" +
               std::to_string(c) +
               R"(" cnt="1" depid="-1" deps="-1" hasdep="0"/>)";
    xml += "</tb></gpu>";
  }
  Algorithm alg = test::parseValid(xml + "</algo>");
  std::optional<Deadlock> dead = findDeadlock(alg);
  ASSERT_TRUE(dead.has_value());
  ASSERT_EQ(dead->cycle.size(), 2u);
  EXPECT_EQ(dead->cycle[0].step, (StepRef{0, 0, 8}));
  EXPECT_EQ(dead->cycle[1].step, (StepRef{1, 0, 8}));
  // With 9-slot FIFOs it completes, and everything else is right.
  EXPECT_FALSE(findDeadlock(alg, 9).has_value());
  CheckOptions options;
  options.fifoSlots = 9;
  EXPECT_EQ(checkErrors(alg, nullptr, options), std::vector<std::string>{});
}

TEST(CheckTest, EveryCorpusFilePasses) {
  std::vector<std::string> files = test::corpusFiles();
  if (files.empty())
    GTEST_SKIP() << "no MSCCL files in " COLL_MSCCL_XML_DIR;
  for (const std::string &path : files) {
    SCOPED_TRACE(path);
    DiagnosticList diags(path);
    llvm::Expected<Algorithm> alg = readAlgorithmFile(path, diags);
    ASSERT_TRUE(bool(alg)) << llvm::toString(alg.takeError());
    llvm::Expected<Analysis> analysis = verify(*alg, diags);
    ASSERT_TRUE(bool(analysis)) << llvm::toString(analysis.takeError());
    EXPECT_TRUE(check(*alg, *analysis, diags));
    EXPECT_EQ(test::formatted(diags, Severity::Error),
              std::vector<std::string>{});
  }
}

} // namespace
} // namespace coll::ir
