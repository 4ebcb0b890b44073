//===- XMLReaderTest.cpp - Reading MSCCL XML ------------------------------===//

#include "IRTestUtil.h"

#include "llvm/ADT/StringExtras.h"

namespace coll::ir {
namespace {

using test::parse;
using test::parseValid;
using Strings = std::vector<std::string>;

/// A <step> with every attribute; `extra` is spliced into the attribute list.
std::string step(int s, const std::string &extra = "") {
  return "<step s=\"" + std::to_string(s) +
         "\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" "
         "cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"" +
         extra + "/>";
}

/// One gpu with one tb holding `steps` (each on its own line).
std::string oneTb(const std::string &steps,
                  const std::string &algoAttrs = "inplace=\"0\"") {
  return "<algo name=\"x\" proto=\"Simple\" nchannels=\"1\" "
         "nchunksperloop=\"1\" ngpus=\"1\" coll=\"allreduce\" " +
         algoAttrs +
         ">\n"
         "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\">\n"
         "<tb id=\"0\" send=\"-1\" recv=\"-1\" chan=\"0\">\n" +
         steps + "</tb>\n</gpu>\n</algo>\n";
}

TEST(XMLReaderTest, ReadsEveryAttribute) {
  Algorithm alg = parseValid(
      R"(<algo name="ring &amp; more" proto="LL128" nchannels="2" nchunksperloop="4" ngpus="2" coll="allgather" inplace="0" outofplace="1" minBytes="1024" maxBytes="18446744073709551615">
  <gpu id="0" i_chunks="2" o_chunks="4" s_chunks="3">
    <tb id="0" send="1" recv="-1" chan="1">
      <step s="0" type="rrcs" srcbuf="s" srcoff="2" dstbuf="o" dstoff="3" cnt="1" depid="0" deps="1" hasdep="1"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="4" s_chunks="0">
  </gpu>
</algo>)");
  EXPECT_EQ(alg.name, "ring & more");
  EXPECT_EQ(alg.protocol, Protocol::LL128);
  EXPECT_EQ(alg.nchannels, 2);
  EXPECT_EQ(alg.nchunksPerLoop, 4);
  EXPECT_EQ(alg.collective, Collective::AllGather);
  EXPECT_EQ(alg.collectiveSpelling, "allgather");
  EXPECT_EQ(alg.root, -1);
  EXPECT_FALSE(alg.inplace);
  EXPECT_TRUE(alg.outofplace);
  EXPECT_EQ(alg.minBytes, 1024u);
  EXPECT_EQ(alg.maxBytes, UINT64_MAX);
  ASSERT_EQ(alg.ngpus(), 2);
  const Gpu &gpu = alg.gpus[0];
  EXPECT_EQ(gpu.inputChunks, 2);
  EXPECT_EQ(gpu.outputChunks, 4);
  EXPECT_EQ(gpu.scratchChunks, 3);
  ASSERT_EQ(gpu.tbs.size(), 1u);
  const ThreadBlock &tb = gpu.tbs[0];
  EXPECT_EQ(tb.sendPeer, 1);
  EXPECT_EQ(tb.recvPeer, -1);
  EXPECT_EQ(tb.channel, 1);
  ASSERT_EQ(tb.steps.size(), 1u);
  const Step &s = tb.steps[0];
  EXPECT_EQ(s.type, StepType::RecvReduceCopySend);
  EXPECT_EQ(s.srcBuf, BufferKind::Scratch);
  EXPECT_EQ(s.srcOff, 2);
  EXPECT_EQ(s.dstBuf, BufferKind::Output);
  EXPECT_EQ(s.dstOff, 3);
  EXPECT_EQ(s.count, 1);
  EXPECT_EQ(s.depTb, 0);
  EXPECT_EQ(s.depStep, 1);
  EXPECT_TRUE(s.hasDep);
  EXPECT_TRUE(alg.gpus[1].tbs.empty());
  // Every element remembers its line.
  EXPECT_EQ(alg.line, 1u);
  EXPECT_EQ(gpu.line, 2u);
  EXPECT_EQ(tb.line, 3u);
  EXPECT_EQ(s.line, 4u);
  EXPECT_EQ(alg.gpus[1].line, 7u);
}

TEST(XMLReaderTest, OldHeaderFormDefaults) {
  // No name, outofplace, minBytes or maxBytes.
  Algorithm inplace = parseValid(oneTb(step(0), "inplace=\"1\""));
  EXPECT_EQ(inplace.name, "x");
  EXPECT_TRUE(inplace.inplace);
  EXPECT_FALSE(inplace.outofplace);
  EXPECT_EQ(inplace.minBytes, 0u);
  EXPECT_EQ(inplace.maxBytes, 0u);
  Algorithm outofplace = parseValid(oneTb(step(0), "inplace=\"0\""));
  EXPECT_TRUE(outofplace.outofplace);
  // Both may be set.
  Algorithm both = parseValid(oneTb(step(0), "inplace=\"1\" outofplace=\"1\""));
  EXPECT_TRUE(both.inplace && both.outofplace);

  Algorithm unnamed = parseValid(
      R"(<algo proto="LL" nchannels="1" nchunksperloop="1" ngpus="0" coll="allreduce" inplace="1"/>)");
  EXPECT_EQ(unnamed.name, "");
}

TEST(XMLReaderTest, Root) {
  auto withColl = [](const std::string &coll, const std::string &root) {
    return "<algo proto=\"LL\" nchannels=\"1\" nchunksperloop=\"1\" "
           "ngpus=\"0\" coll=\"" +
           coll + "\" inplace=\"1\"" + root + "/>";
  };
  EXPECT_EQ(parseValid(withColl("broadcast", "")).root, 0);
  EXPECT_EQ(parseValid(withColl("reduce", " root=\"3\"")).root, 3);
  EXPECT_EQ(parseValid(withColl("allreduce", "")).root, -1);
  EXPECT_EQ(parseValid(withColl("allreduce", " root=\"-1\"")).root, -1);
  test::ParseResult ignored = parse(withColl("allreduce", " root=\"2\""));
  ASSERT_TRUE(ignored.alg);
  EXPECT_EQ(ignored.alg->root, -1);
  EXPECT_EQ(ignored.warnings,
            Strings{"t.xml:1: warning: attribute 'root' ignored: allreduce "
                    "has no root"});
}

TEST(XMLReaderTest, Collectives) {
  auto withColl = [](const std::string &coll) {
    return "<algo proto=\"LL\" nchannels=\"1\" nchunksperloop=\"1\" "
           "ngpus=\"0\" coll=\"" +
           coll + "\" inplace=\"1\"/>";
  };
  Algorithm alias = parseValid(withColl("reduce_scatter"));
  EXPECT_EQ(alias.collective, Collective::ReduceScatter);
  EXPECT_EQ(alias.collectiveSpelling, "reducescatter");

  test::ParseResult unknown = parse(withColl("allpairs_special"));
  ASSERT_TRUE(unknown.alg);
  EXPECT_EQ(unknown.alg->collective, Collective::Custom);
  EXPECT_EQ(unknown.alg->collectiveSpelling, "allpairs_special");
  EXPECT_EQ(unknown.warnings, Strings{"t.xml:1: warning: unknown collective "
                                      "\"allpairs_special\" read as custom"});
}

TEST(XMLReaderTest, CommentsAndDeclarationsAreAllowed) {
  test::ParseResult result =
      parse("<?xml version=\"1.0\"?>\n"
            "<!-- licence -->\n" +
            oneTb("<!-- a step -->\n" + step(0) + "\n<!-- done -->\n") +
            "<!-- trailer -->\n");
  EXPECT_EQ(result.errors, Strings{});
  EXPECT_EQ(result.warnings, Strings{});
  ASSERT_TRUE(result.alg);
  EXPECT_EQ(result.alg->line, 3u);
  EXPECT_EQ(result.alg->gpus[0].tbs[0].steps[0].line, 7u);
}

TEST(XMLReaderTest, UnknownAttributesAreWarnedOncePerKind) {
  test::ParseResult result =
      parse(oneTb(step(0, " maxcount=\"1\"") + "\n" +
                      step(1, " maxcount=\"1\" extra=\"2\"") + "\n" +
                      step(2, " maxcount=\"1\"") + "\n",
                  "inplace=\"1\" nthreadblocks=\"24\""));
  EXPECT_EQ(result.errors, Strings{});
  EXPECT_EQ(result.warnings,
            (Strings{"t.xml:1: warning: unknown attribute 'nthreadblocks' on "
                     "<algo> ignored",
                     "t.xml:4: warning: unknown attribute 'maxcount' on "
                     "<step> ignored (3 occurrences)",
                     "t.xml:5: warning: unknown attribute 'extra' on <step> "
                     "ignored"}));
}

TEST(XMLReaderTest, UnknownElementsAndTextAreIgnored) {
  test::ParseResult result =
      parse(oneTb(step(0) + "\n<note/>\n<note>x</note>\nstray text\n"));
  EXPECT_EQ(result.errors, Strings{});
  EXPECT_EQ(result.warnings,
            (Strings{"t.xml:5: warning: unknown element <note> in <tb> "
                     "ignored (2 occurrences)",
                     "t.xml:7: warning: text in <tb> ignored"}));
  ASSERT_TRUE(result.alg);
  EXPECT_EQ(result.alg->gpus[0].tbs[0].steps.size(), 1u);
}

TEST(XMLReaderTest, IdsInAnyOrderAreStoredById) {
  Algorithm alg = parseValid(
      R"(<algo proto="LL" nchannels="1" nchunksperloop="1" ngpus="2" coll="custom" inplace="1">
<gpu id="1" i_chunks="7" o_chunks="0" s_chunks="0"/>
<gpu id="0" i_chunks="5" o_chunks="0" s_chunks="0">
<tb id="1" send="-1" recv="-1" chan="0"/>
<tb id="0" send="-1" recv="-1" chan="0">
<step s="1" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" depid="-1" deps="-1" hasdep="0"/>
<step s="0" type="re" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
</tb>
</gpu>
</algo>)");
  ASSERT_EQ(alg.ngpus(), 2);
  EXPECT_EQ(alg.gpus[0].inputChunks, 5);
  EXPECT_EQ(alg.gpus[1].inputChunks, 7);
  ASSERT_EQ(alg.gpus[0].tbs.size(), 2u);
  EXPECT_EQ(alg.gpus[0].tbs[0].line, 5u);
  EXPECT_EQ(alg.gpus[0].tbs[1].line, 4u);
  const auto &steps = alg.gpus[0].tbs[0].steps;
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].type, StepType::Reduce);
  EXPECT_EQ(steps[1].type, StepType::Nop);
  EXPECT_EQ(steps[1].count, 0);
}

TEST(XMLReaderTest, StrictIntegers) {
  struct Case {
    const char *text;
    std::optional<int32_t> value;
  } cases[] = {{"0", 0},
               {"-0", 0},
               {"007", 7},
               {"2147483647", INT32_MAX},
               {"-2147483648", INT32_MIN},
               {"2147483648", std::nullopt},
               {"-2147483649", std::nullopt},
               {"99999999999999999999999", std::nullopt},
               {"12abc", std::nullopt},
               {"", std::nullopt},
               {"-", std::nullopt},
               {"1e3", std::nullopt},
               {"+1", std::nullopt},
               {" 1", std::nullopt},
               {"1 ", std::nullopt},
               {"0x10", std::nullopt},
               {"1.0", std::nullopt}};
  for (const Case &c : cases) {
    SCOPED_TRACE(c.text);
    std::string xml = oneTb(step(0) + "\n");
    size_t at = xml.find("srcoff=\"0\"");
    xml.replace(at, 10, std::string("srcoff=\"") + c.text + "\"");
    test::ParseResult result = parse(xml);
    if (c.value) {
      EXPECT_EQ(result.errors, Strings{});
      ASSERT_TRUE(result.alg);
      EXPECT_EQ(result.alg->gpus[0].tbs[0].steps[0].srcOff, *c.value);
    } else {
      ASSERT_EQ(result.errors.size(), 1u);
      EXPECT_TRUE(llvm::StringRef(result.errors[0])
                      .startswith("t.xml:4: error: gpu 0 tb 0 step 0: "
                                  "attribute 'srcoff' of <step> is "))
          << result.errors[0];
    }
  }
}

TEST(XMLReaderTest, IntegerErrorMessages) {
  auto errorsFor = [](const std::string &attr, const std::string &value) {
    std::string xml = oneTb(step(0) + "\n", "inplace=\"0\" maxBytes=\"0\"");
    size_t at = xml.find(" " + attr + "=\"");
    size_t end = xml.find('"', at + attr.size() + 3);
    xml.replace(at, end + 1 - at, " " + attr + "=\"" + value + "\"");
    return parse(xml).errors;
  };
  EXPECT_EQ(errorsFor("cnt", "12abc"),
            Strings{"t.xml:4: error: gpu 0 tb 0 step 0: attribute 'cnt' of "
                    "<step> is not an integer: \"12abc\""});
  EXPECT_EQ(errorsFor("depid", "99999999999"),
            Strings{"t.xml:4: error: gpu 0 tb 0 step 0: attribute 'depid' "
                    "of <step> is out of range: \"99999999999\" is not in "
                    "[-2147483648, 2147483647]"});
  EXPECT_EQ(errorsFor("maxBytes", "-1"),
            Strings{"t.xml:1: error: attribute 'maxBytes' of <algo> is out "
                    "of range: \"-1\" is not in [0, 18446744073709551615]"});
  EXPECT_EQ(errorsFor("maxBytes", "18446744073709551616"),
            Strings{"t.xml:1: error: attribute 'maxBytes' of <algo> is out "
                    "of range: \"18446744073709551616\" is not in [0, "
                    "18446744073709551615]"});
  // Long values are cut short in messages.
  EXPECT_EQ(errorsFor("s", std::string(100, '9')),
            Strings{"t.xml:4: error: gpu 0 tb 0: attribute 's' of <step> is "
                    "out of range: \"99999999999999999999999999999999...\" "
                    "is not in [-2147483648, 2147483647]"});
  EXPECT_EQ(errorsFor("hasdep", "true"),
            Strings{"t.xml:4: error: gpu 0 tb 0 step 0: attribute 'hasdep' "
                    "of <step> must be \"0\" or \"1\", not \"true\""});
  EXPECT_EQ(errorsFor("inplace", "01"),
            Strings{"t.xml:1: error: attribute 'inplace' of <algo> must be "
                    "\"0\" or \"1\", not \"01\""});
  EXPECT_EQ(errorsFor("type", "send"),
            Strings{"t.xml:4: error: gpu 0 tb 0 step 0: unknown step type "
                    "\"send\" in attribute 'type' of <step>"});
  EXPECT_EQ(errorsFor("dstbuf", "x"),
            Strings{"t.xml:4: error: gpu 0 tb 0 step 0: unknown buffer \"x\" "
                    "in attribute 'dstbuf' of <step>"});
  EXPECT_EQ(errorsFor("proto", "LL64"),
            Strings{"t.xml:1: error: unknown protocol \"LL64\" in attribute "
                    "'proto' of <algo>"});
  EXPECT_EQ(errorsFor("i_chunks", "1\n"),
            Strings{"t.xml:2: error: gpu 0: attribute 'i_chunks' of <gpu> is "
                    "not an integer: \"1\\0A\""});
}

TEST(XMLReaderTest, MissingAttributes) {
  for (llvm::StringRef attr : {"s", "type", "srcbuf", "srcoff", "dstbuf",
                               "dstoff", "cnt", "depid", "deps", "hasdep"}) {
    SCOPED_TRACE(attr.str());
    std::string xml = oneTb(step(0) + "\n");
    size_t at = xml.find((" " + attr + "=\"").str());
    xml.erase(at, xml.find('"', xml.find('"', at) + 1) + 1 - at);
    std::string where = attr == "s" ? "gpu 0 tb 0" : "gpu 0 tb 0 step 0";
    EXPECT_EQ(parse(xml).errors,
              Strings{"t.xml:4: error: " + where +
                      ": <step> is missing attribute '" + attr.str() + "'"});
  }
  EXPECT_EQ(parse(R"(<algo><gpu/></algo>)").errors,
            (Strings{"t.xml:1: error: <algo> is missing attribute 'proto'",
                     "t.xml:1: error: <algo> is missing attribute 'nchannels'",
                     "t.xml:1: error: <algo> is missing attribute "
                     "'nchunksperloop'",
                     "t.xml:1: error: <algo> is missing attribute 'ngpus'",
                     "t.xml:1: error: <algo> is missing attribute 'coll'",
                     "t.xml:1: error: <algo> is missing attribute 'inplace'",
                     "t.xml:1: error: <gpu> is missing attribute 'id'",
                     "t.xml:1: error: <gpu> is missing attribute 'i_chunks'",
                     "t.xml:1: error: <gpu> is missing attribute 'o_chunks'",
                     "t.xml:1: error: <gpu> is missing attribute 's_chunks'"}));
  EXPECT_EQ(parse(oneTb("").replace(oneTb("").find("<tb id=\"0\""), 10, "<tb"))
                .errors,
            Strings{"t.xml:3: error: gpu 0: <tb> is missing attribute 'id'"});
}

TEST(XMLReaderTest, MalformedDocuments) {
  EXPECT_EQ(parse("").errors, Strings{"t.xml: error: malformed XML (tinyxml2: "
                                      "XML_ERROR_EMPTY_DOCUMENT)"});
  EXPECT_EQ(parse("<algo>\n<gpu>\n</algo>").errors,
            Strings{"t.xml:2: error: malformed XML (tinyxml2: "
                    "XML_ERROR_MISMATCHED_ELEMENT)"});
  EXPECT_EQ(parse("<algo a=\"1\" a=\"2\"/>").errors,
            Strings{"t.xml:1: error: malformed XML (tinyxml2: "
                    "XML_ERROR_PARSING_ATTRIBUTE)"});
  EXPECT_EQ(parse("<!-- only a comment -->").errors,
            Strings{"t.xml: error: no <algo> element"});
  EXPECT_EQ(parse("<gpu/>").errors,
            (Strings{"t.xml:1: error: unexpected top-level element <gpu>: "
                     "the file must hold one <algo>",
                     "t.xml: error: no <algo> element"}));
  std::string valid = oneTb(step(0) + "\n");
  EXPECT_EQ(parse(valid + valid).errors,
            Strings{"t.xml:8: error: second <algo> element (the first is at "
                    "line 1)"});
}

TEST(XMLReaderTest, IdErrors) {
  // Duplicate and missing step numbers, and a hostile one that must not be
  // used to size anything.
  test::ParseResult steps =
      parse(oneTb(step(0) + "\n" + step(0) + "\n" + step(2000000000) + "\n" +
                  step(-1) + "\n"));
  EXPECT_EQ(steps.errors,
            (Strings{"t.xml:5: error: gpu 0 tb 0: duplicate step number 0 "
                     "(also at line 4)",
                     "t.xml:6: error: gpu 0 tb 0: step number 2000000000 is "
                     "out of range [0, 4)",
                     "t.xml:7: error: gpu 0 tb 0: step number -1 is out of "
                     "range [0, 4)",
                     "t.xml:3: error: gpu 0 tb 0: step numbers are not dense: "
                     "1, 2 and 3 are missing"}));

  test::ParseResult tbs = parse(
      R"(<algo proto="LL" nchannels="1" nchunksperloop="1" ngpus="1" coll="allreduce" inplace="1">
<gpu id="0" i_chunks="1" o_chunks="0" s_chunks="0">
<tb id="0" send="-1" recv="-1" chan="0"/>
<tb id="2" send="-1" recv="-1" chan="0"/>
<tb id="3" send="-1" recv="-1" chan="0"/>
</gpu>
</algo>)");
  EXPECT_EQ(tbs.errors,
            (Strings{"t.xml:5: error: gpu 0: tb id 3 is out of range [0, 3)",
                     "t.xml:2: error: gpu 0: tb ids are not dense: 1 is "
                     "missing"}));

  test::ParseResult gpus = parse(
      R"(<algo proto="LL" nchannels="1" nchunksperloop="1" ngpus="3" coll="allreduce" inplace="1">
<gpu id="1" i_chunks="1" o_chunks="0" s_chunks="0"/>
<gpu id="1" i_chunks="1" o_chunks="0" s_chunks="0"/>
</algo>)");
  EXPECT_EQ(gpus.errors,
            (Strings{"t.xml:3: error: duplicate gpu id 1 (also at line 2)",
                     "t.xml:1: error: gpu ids are not dense: 0 is missing",
                     "t.xml:1: error: ngpus 3 does not match the number of "
                     "<gpu> elements, 2"}));
}

TEST(XMLReaderTest, ManyMissingIdsAreSummarised) {
  std::string steps;
  for (int s = 0; s < 12; ++s)
    steps += step(s == 0 ? 0 : 100 + s) + "\n";
  std::vector<std::string> errors = parse(oneTb(steps)).errors;
  ASSERT_EQ(errors.size(), 12u);
  EXPECT_EQ(errors.back(), "t.xml:3: error: gpu 0 tb 0: step numbers are not "
                           "dense: 1, 2, 3, 4, 5, 6, 7, 8 and 3 more are "
                           "missing");
}

TEST(XMLReaderTest, ReportsEveryErrorAtOnce) {
  test::ParseResult result = parse(
      R"(<algo proto="LL" nchannels="x" nchunksperloop="1" ngpus="1" coll="allreduce" inplace="1">
<gpu id="0" i_chunks="1" o_chunks="y" s_chunks="0">
<tb id="0" send="-1" recv="-1" chan="z">
<step s="0" type="q" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="2"/>
</tb>
</gpu>
</algo>)");
  EXPECT_FALSE(result.alg);
  EXPECT_EQ(result.errors.size(), 5u);
}

TEST(XMLReaderTest, ReadAlgorithmFile) {
  DiagnosticList diags("/nonexistent/dir/a.xml");
  llvm::Expected<Algorithm> alg =
      readAlgorithmFile("/nonexistent/dir/a.xml", diags);
  ASSERT_FALSE(bool(alg));
  // An unreadable file is not a diagnostic about its contents.
  EXPECT_EQ(diags.all().size(), 0u);
  EXPECT_EQ(llvm::toString(alg.takeError()),
            "cannot read '/nonexistent/dir/a.xml': No such file or directory");
}

} // namespace
} // namespace coll::ir
