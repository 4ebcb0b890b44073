//===- TuneTest.cpp - colltune writes tables the runtime reads -------------===//
//
// Runs the colltune binary (built beside the tests) and reads its tables with
// the parser the runtime reads them with (synth/lib/TuningTable.cpp, the
// library CollTuningTable, which this test links).
//
//===----------------------------------------------------------------------===//

#include "coll/synth/TuningTable.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <gtest/gtest.h>

#include <set>

namespace {

struct TuneRun {
  int rc = -1;
  std::string table;
};

TuneRun colltune(const std::vector<std::string> &extra, const std::string &outDir) {
  llvm::SmallString<128> out;
  llvm::sys::fs::createTemporaryFile("tune", "txt", out);
  std::string tool = std::string(COLL_BIN_DIR) + "/colltune";
  std::vector<std::string> argv{
      tool,  "--topology",     std::string(COLL_TOPOLOGY_DIR) + "/dgx1-v100.topo",
      "-o",  std::string(out), "--out-dir",
      outDir};
  argv.insert(argv.end(), extra.begin(), extra.end());
  std::vector<llvm::StringRef> args(argv.begin(), argv.end());
  TuneRun r;
  r.rc = llvm::sys::ExecuteAndWait(tool, args);
  if (auto buf = llvm::MemoryBuffer::getFile(out))
    r.table = (*buf)->getBuffer().str();
  llvm::sys::fs::remove(out);
  return r;
}

void checkTable(const std::string &table, int nranks, const std::string &dir) {
  auto rules = coll::synth::parseTuningTable(table, "colltune.txt");
  ASSERT_TRUE(!!rules) << llvm::toString(rules.takeError());
  std::set<std::string> colls;
  uint64_t expectFrom = 0;
  std::optional<coll::ir::Collective> last;
  for (const coll::synth::TuningRule &rule : *rules) {
    ASSERT_TRUE(rule.collective.has_value());
    EXPECT_EQ(rule.kind, coll::synth::TuningRule::Target::Algorithm);
    EXPECT_EQ(rule.minRanks, nranks);
    EXPECT_EQ(rule.maxRanks, nranks);
    if (rule.collective != last)
      expectFrom = 0;
    // Ranges of one collective tile [0, inf).
    EXPECT_EQ(rule.minBytes, expectFrom) << rule.text;
    expectFrom = rule.maxBytes;
    last = rule.collective;
    colls.insert(rule.target.substr(0, rule.target.find('_')));
    // The target is an algorithm colltune wrote.
    EXPECT_TRUE(llvm::sys::fs::exists(dir + "/" + rule.target + ".coll")) << rule.target;
  }
  EXPECT_EQ(expectFrom, UINT64_MAX);
  EXPECT_EQ(colls, (std::set<std::string>{"allreduce", "allgather", "reducescatter", "broadcast",
                                          "reduce"}));
}

TEST(Colltune, TablesParseAndAreDeterministic) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("colltune", dir));
  TuneRun a = colltune({}, std::string(dir));
  TuneRun b = colltune({}, std::string(dir));
  ASSERT_EQ(a.rc, 0);
  ASSERT_EQ(b.rc, 0);
  EXPECT_EQ(a.table, b.table);
  checkTable(a.table, 8, std::string(dir));
  llvm::sys::fs::remove_directories(dir);
}

TEST(Colltune, PartialAllocation) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("colltune", dir));
  TuneRun a = colltune({"--ranks", "0,1,2,4"}, std::string(dir));
  ASSERT_EQ(a.rc, 0);
  checkTable(a.table, 4, std::string(dir));
  // Without an NVLink ring, rings are never the large-message choice.
  EXPECT_EQ(a.table.find("allgather_rings"), std::string::npos) << a.table;
  llvm::sys::fs::remove_directories(dir);
}

TEST(Colltune, MeasuresOnTheHostAndComparesWithTheModel) {
  std::string tool = std::string(COLL_BIN_DIR) + "/colltune";
  llvm::SmallString<128> err, out;
  llvm::sys::fs::createTemporaryFile("err", "txt", err);
  llvm::sys::fs::createTemporaryFile("out", "txt", out);
  std::string topo = std::string(COLL_TOPOLOGY_DIR) + "/dgx1-v100.topo";
  std::vector<llvm::StringRef> args{tool,        "--topology", topo,
                                    "--ranks",   "0,4,5",      "--coll",
                                    "allgather", "--measure",  "--measure-sizes",
                                    "4K,64K",    "--collrun",  COLL_BIN_DIR "/collrun"};
  llvm::Optional<llvm::StringRef> redirects[] = {llvm::None, llvm::StringRef(out),
                                                 llvm::StringRef(err)};
  EXPECT_EQ(llvm::sys::ExecuteAndWait(tool, args, llvm::None, redirects), 0);
  auto buf = llvm::MemoryBuffer::getFile(err);
  ASSERT_TRUE(!!buf);
  std::string text = (*buf)->getBuffer().str();
  // One line per measured size, each naming the model's and the host's pick.
  for (const char *size : {"allgather 4K: model picks ", "allgather 64K: model picks "})
    EXPECT_NE(text.find(size), std::string::npos) << text;
  EXPECT_EQ(text.find("no measurement"), std::string::npos) << text;
  EXPECT_NE(text.find("model and host measurement disagree at "), std::string::npos) << text;
  llvm::sys::fs::remove(err);
  llvm::sys::fs::remove(out);
}

TEST(Colltune, BadTopologyFails) {
  std::string tool = std::string(COLL_BIN_DIR) + "/colltune";
  llvm::SmallString<128> bad;
  int fd = -1;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("bad", "topo", fd, bad));
  {
    llvm::raw_fd_ostream os(fd, true);
    os << "gpu a\nlink a b bw=1\n";
  }
  llvm::SmallString<128> err;
  llvm::sys::fs::createTemporaryFile("err", "txt", err);
  std::vector<llvm::StringRef> args{tool, "--topology", bad};
  llvm::Optional<llvm::StringRef> redirects[] = {llvm::None, llvm::None, llvm::StringRef(err)};
  EXPECT_EQ(llvm::sys::ExecuteAndWait(tool, args, llvm::None, redirects), 1);
  auto buf = llvm::MemoryBuffer::getFile(err);
  ASSERT_TRUE(!!buf);
  EXPECT_EQ((*buf)->getBuffer().str(),
            "colltune: error: " + std::string(bad) +
                ":2: error: unknown node 'b' (declare it before the link)\n");
  llvm::sys::fs::remove(bad);
  llvm::sys::fs::remove(err);
}

} // namespace

// `p2p`: an alltoall as grouped sends and receives; on any other line
// (even `*`, which would cover the other collectives) it is refused.
TEST(TuningTable, PointToPointServesAlltoallOnly) {
  auto rules = coll::synth::parseTuningTable("alltoall * 64K-* p2p\n", "t.txt");
  ASSERT_TRUE(static_cast<bool>(rules)) << llvm::toString(rules.takeError());
  ASSERT_EQ(rules->size(), 1u);
  EXPECT_EQ((*rules)[0].kind, coll::synth::TuningRule::Target::PointToPoint);
  EXPECT_EQ((*rules)[0].target, "p2p");
  for (const char *line : {"allreduce * * p2p\n", "* * * p2p\n"}) {
    auto bad = coll::synth::parseTuningTable(line, "t.txt");
    ASSERT_FALSE(static_cast<bool>(bad)) << line;
    std::string message = llvm::toString(bad.takeError());
    EXPECT_NE(message.find("t.txt:1:"), std::string::npos) << message;
    EXPECT_NE(message.find("p2p (grouped sends and receives) serves alltoall only"),
              std::string::npos)
        << message;
  }
}
