//===- ProcessTest.cpp - Multi-process runs of the runtime ------------------===//
//
// Each test launches N processes of coll-rank-check (fork + exec) that find
// each other through the TCP bootstrap of a unique id made here, and checks
// what every rank printed, how fault scenarios ended and how fast, and that
// nothing of Coll's is left in /dev/shm.
//
// Ranks load the hand-made test algorithms of tests/support (written to a
// temporary COLL_ALGO_DIR as XML for every root), plus the built-in set in
// builds that compile .coll programs. Every time bound here (the watchdog
// periods given to the ranks, how long a job may run, how soon a fault must
// end the others' calls) is written for COLL_TEST_TIME_SCALE 1 and scaled.
//
//===----------------------------------------------------------------------===//

#include "TestAlgorithms.h"
#include "TimeScale.h"

#include "coll.h"
#include "coll/ir/XML.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <functional>
#include <map>
#include <poll.h>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>


namespace {

using Clock = std::chrono::steady_clock;

std::string shmLeftovers() {
  std::string found;
  if (DIR *d = opendir("/dev/shm")) {
    while (dirent *e = readdir(d))
      if (std::strncmp(e->d_name, "coll-", 5) == 0)
        found += std::string(e->d_name) + " ";
    closedir(d);
  }
  return found;
}

/// A folder of XML test algorithms for `n` ranks (every root of the rooted
/// ones), and for each size of `more` (the communicators a shrink or a grow
/// makes), removed at the end of the test.
class AlgoDir {
public:
  explicit AlgoDir(int n, std::vector<int> more = {}) {
    llvm::SmallString<128> dir;
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("coll-algos", dir));
    path = std::string(dir);
    more.insert(more.begin(), n);
    for (int size : more)
      writeFor(size, size == n ? "" : "_n" + std::to_string(size));
  }
  void writeFor(int n, const std::string &suffix) {
    using namespace coll::testing;
    const auto proto = coll::ir::Protocol::Simple;
    write("ring_allreduce", ringAllReduce(n, proto), suffix);
    write("ring_allgather", ringAllGather(n, proto), suffix);
    write("ring_reducescatter", ringReduceScatter(n, proto), suffix);
    write("direct_alltoall", directAllToAll(n, proto), suffix);
    for (int root = 0; root < n; ++root) {
      write("chain_broadcast_" + std::to_string(root), chainBroadcast(n, root, 2, proto), suffix);
      write("chain_reduce_" + std::to_string(root), chainReduce(n, root, 2, proto), suffix);
      write("direct_gather_" + std::to_string(root), directGather(n, root, proto), suffix);
      write("direct_scatter_" + std::to_string(root), directScatter(n, root, proto), suffix);
    }
  }
  ~AlgoDir() { llvm::sys::fs::remove_directories(path); }
  std::string path;

  void write(const std::string &name, coll::ir::Algorithm alg, const std::string &suffix = "") {
    alg.name = name;
    llvm::Error err = coll::ir::writeAlgorithmFile(alg, path + "/" + name + suffix + ".xml");
    EXPECT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
  }
};

struct RankResult {
  int status = 0; ///< from waitpid
  std::string output;
  bool exitedOk() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
};

/// Times at COLL_TEST_TIME_SCALE 1: runJob scales them.
struct JobOptions {
  int watchdogMs = 20000;
  int timeoutSeconds = 240;
  std::map<std::string, std::string> env;
  /// Ranks still running this long after the first one exited are killed
  /// (the stopped victim of the "stop" scenario).
  int stragglerSeconds = 0;
};

/// Every thread's stack of the process `pid`, by gdb where it is installed
/// (scripts/setup.sh installs it), for a rank that outlived its job's
/// timeout: the failure then shows where each rank waits.
std::string stacksOf(pid_t pid) {
  if (std::system("command -v gdb >/dev/null 2>&1") != 0)
    return "(no gdb to show the stacks)\n";
  const std::string command = "timeout 60 gdb -p " + std::to_string(pid) +
                              " -batch -nx -ex 'thread apply all bt 40' 2>&1";
  FILE *in = popen(command.c_str(), "r");
  if (!in)
    return "(gdb did not start)\n";
  std::string stacks;
  char line[1024];
  size_t kept = 0;
  while (std::fgets(line, sizeof line, in))
    if ((line[0] == '#' || std::strncmp(line, "Thread ", 7) == 0) && kept++ < 400)
      stacks += line;
  pclose(in);
  return stacks.empty() ? "(gdb showed no stack)\n" : stacks;
}

/// Runs `scenario` on `n` ranks; returns each rank's result.
std::vector<RankResult> runJob(const std::string &scenario, int n, const JobOptions &options) {
  collUniqueId id;
  EXPECT_EQ(collGetUniqueId(&id), collSuccess) << collGetLastError(nullptr);
  std::string hex;
  for (char c : id.internal)
    hex += llvm::formatv("{0:x-2}", uint8_t(c)).str();

  std::vector<pid_t> pids(n);
  std::vector<int> pipes(n);
  for (int r = 0; r < n; ++r) {
    int fds[2];
    EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
    // The driver's end never blocks: a stopped rank keeps its pipe open.
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    std::vector<std::string> args = {COLL_RANK_CHECK, scenario, "--id", hex, "--rank",
                                     std::to_string(r), "--nranks", std::to_string(n)};
    std::map<std::string, std::string> vars = options.env;
    vars.emplace("COLL_WATCHDOG_MS", // unless the job sets it itself
                 std::to_string(coll::testing::scaledMs(options.watchdogMs)));
    // This process's environment, less what the job sets, then the job's.
    std::vector<std::string> env;
    for (char **e = environ; *e; ++e) {
      const char *eq = std::strchr(*e, '=');
      if (!eq || !vars.count(std::string(*e, size_t(eq - *e))))
        env.push_back(*e);
    }
    for (const auto &[k, v] : vars)
      env.push_back(k + "=" + v);
    // Everything the child needs is made before the fork: the child of a
    // process with threads (the bootstrap root's) may not allocate, as a
    // lock another thread held at the fork stays held there. Under
    // AddressSanitizer that lock is its allocator's, and the rank hung
    // before it ran (while the others waited for it in the bootstrap).
    std::vector<char *> argv, envp;
    for (std::string &a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    for (std::string &e : env)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    close(fds[1]);
    pids[r] = pid;
    pipes[r] = fds[0];
  }
  std::vector<RankResult> results(n);
  std::vector<bool> done(n, false);
  int remaining = n;
  const int timeoutSeconds = coll::testing::scaledSeconds(options.timeoutSeconds);
  const auto straggler =
      std::chrono::seconds(coll::testing::scaledSeconds(options.stragglerSeconds));
  const auto deadline = Clock::now() + std::chrono::seconds(timeoutSeconds);
  std::optional<Clock::time_point> firstExit;
  while (remaining > 0) {
    // Drain output so that no rank blocks on a full pipe.
    std::vector<pollfd> fds;
    for (int r = 0; r < n; ++r)
      if (pipes[r] >= 0)
        fds.push_back({pipes[r], POLLIN, 0});
    if (!fds.empty())
      poll(fds.data(), fds.size(), 20);
    for (int r = 0; r < n; ++r) {
      if (pipes[r] < 0)
        continue;
      char buf[4096];
      ssize_t got;
      while ((got = read(pipes[r], buf, sizeof buf)) > 0)
        results[r].output.append(buf, size_t(got));
      if (got == 0) {
        close(pipes[r]);
        pipes[r] = -1;
      }
      if (got < 0 && errno != EAGAIN && errno != EINTR) {
        close(pipes[r]);
        pipes[r] = -1;
      }
    }
    for (int r = 0; r < n; ++r) {
      if (done[r])
        continue;
      if (waitpid(pids[r], &results[r].status, WNOHANG) == pids[r]) {
        done[r] = true;
        --remaining;
        if (!firstExit)
          firstExit = Clock::now();
      }
    }
    bool straggling =
        options.stragglerSeconds && firstExit && Clock::now() - *firstExit > straggler;
    if (Clock::now() > deadline || straggling) {
      for (int r = 0; r < n; ++r)
        if (!done[r]) {
          if (!straggling) {
            ADD_FAILURE() << "rank " << r << " still runs after " << timeoutSeconds
                          << " s; killed";
            results[r].output += "--- its threads when it was killed:\n" + stacksOf(pids[r]);
          }
          kill(pids[r], SIGKILL);
          waitpid(pids[r], &results[r].status, 0);
          done[r] = true;
          --remaining;
        }
    }
  }
  for (int r = 0; r < n; ++r)
    if (pipes[r] >= 0) {
      char buf[4096];
      ssize_t got;
      fcntl(pipes[r], F_SETFL, 0);
      while ((got = read(pipes[r], buf, sizeof buf)) > 0)
        results[r].output.append(buf, size_t(got));
      close(pipes[r]);
    }
  return results;
}

std::string describe(const std::vector<RankResult> &results) {
  std::string text;
  for (size_t r = 0; r < results.size(); ++r)
    text += llvm::formatv("--- rank {0} (status {1:x}):\n{2}", r, results[r].status,
                          results[r].output)
                .str();
  return text;
}

bool smallSizes() { return COLL_TEST_SANITIZER != 0; }

JobOptions withAlgorithms(const AlgoDir &dir) {
  JobOptions o;
  o.env["COLL_ALGO_DIR"] = dir.path;
  if (smallSizes()) {
    o.env["COLL_TEST_SMALL"] = "1";
    o.watchdogMs = 60000;
  }
  return o;
}

void expectAllOk(const std::vector<RankResult> &results) {
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_TRUE(results[r].exitedOk()) << describe(results);
    EXPECT_NE(results[r].output.find("rank " + std::to_string(r) + ": ok"), std::string::npos)
        << describe(results);
  }
  EXPECT_EQ(shmLeftovers(), "");
}

class Ranks : public ::testing::TestWithParam<int> {};

TEST_P(Ranks, EveryCollectiveIsCorrect) {
  AlgoDir dir(GetParam());
  expectAllOk(runJob("collectives", GetParam(), withAlgorithms(dir)));
}

TEST_P(Ranks, PointToPoint) {
  AlgoDir dir(GetParam());
  expectAllOk(runJob("p2p", GetParam(), withAlgorithms(dir)));
}

// collIsend/collIrecv (docs/RUNTIME.md, "Tagged point-to-point"): a ring in
// both posting orders at 7 elements and 4 MiB, tags received out of order,
// any source from every peer, any tag, to itself, a truncated receive.
TEST_P(Ranks, TaggedPointToPointMatchesAsMpi) {
  AlgoDir dir(GetParam());
  expectAllOk(runJob("tagged", GetParam(), withAlgorithms(dir)));
}

// The same with COLL_P2P_SINGLE_COPY=0: large messages in DATA frames
// through the FIFO, where by default the receiver reads them from the
// sender's memory in one copy.
TEST(Runtime, TaggedPointToPointThroughTheFifo) {
  AlgoDir dir(3);
  JobOptions o = withAlgorithms(dir);
  o.env["COLL_P2P_SINGLE_COPY"] = "0";
  expectAllOk(runJob("tagged", 3, o));
}

INSTANTIATE_TEST_SUITE_P(Runtime, Ranks, ::testing::Values(2, 3, 4),
                         [](const auto &info) { return std::to_string(info.param) + "ranks"; });

TEST(Runtime, BuiltInAlgorithmsServeEveryCollective) {
  if (!COLL_TEST_HAVE_LANG)
    GTEST_SKIP() << "this build compiles no .coll programs (COLL_ENABLE_LANG=OFF): the built-in "
                    "set is the XML-directory test's job here";
  JobOptions o;
  if (smallSizes())
    o.env["COLL_TEST_SMALL"] = "1";
  expectAllOk(runJob("collectives", 4, o));
  expectAllOk(runJob("collectives", 3, o));
}

// A job of one process, as `torchrun --nproc_per_node 1` or a one-rank
// communicator from a split makes: every collective is a copy, as NCCL's.
TEST(Runtime, OneRankCopiesSendbuffToRecvbuff) {
  JobOptions o;
  o.env["COLL_TEST_SMALL"] = "1";
  expectAllOk(runJob("collectives", 1, o));
}

// Programs with direct steps (docs/RUNTIME.md, "Direct steps"): every rank
// of the host maps the others' shared areas, and calls run there, their
// buffers copied in and out. A hand-made program from XML serves allreduce;
// the other collectives keep their FIFO programs.
TEST(Runtime, AProgramWithDirectStepsRunsAcrossProcesses) {
  AlgoDir dir(3);
  dir.write("peer_twoshot", coll::testing::peerTwoShotAllReduce(3));
  JobOptions o = withAlgorithms(dir);
  o.env["COLL_TEST_SMALL"] = "1";
  o.env["COLL_DEBUG"] = "TRACE";
  o.env["COLL_DEBUG_SUBSYS"] = "INIT,COLL";
  auto results = runJob("collectives", 3, o);
  expectAllOk(results);
  for (const auto &r : results) {
    EXPECT_NE(r.output.find("this rank's shared area is mapped by the 3 ranks of its host"),
              std::string::npos)
        << describe(results);
    EXPECT_NE(r.output.find("-> peer_twoshot ("), std::string::npos) << describe(results);
    EXPECT_NE(r.output.find("run in the shared area: buffers copied in and out"),
              std::string::npos)
        << describe(results);
  }
}

// The direct programs of algorithms/ (a user's programs come before the
// built-in ones) serve allreduce, allgather, reduce-scatter, alltoall and
// broadcast at 2-4 ranks, in and out of place, every type and operator of
// the scenario.
class DirectPrograms : public ::testing::TestWithParam<std::tuple<int, const char *>> {};

TEST_P(DirectPrograms, ServeTheirCollectives) {
  if (!COLL_TEST_HAVE_LANG)
    GTEST_SKIP() << "this build compiles no .coll programs (COLL_ENABLE_LANG=OFF)";
  const auto [n, allreduce] = GetParam();
  JobOptions o;
  if (smallSizes()) {
    o.env["COLL_TEST_SMALL"] = "1";
    o.watchdogMs = 60000;
  }
  std::string files = std::string(COLL_SOURCE_DIR "/algorithms/") + allreduce + ".coll";
  for (const char *name : {"allgather_direct", "reducescatter_direct", "alltoall_direct",
                           "broadcast_direct"})
    files += std::string(":" COLL_SOURCE_DIR "/algorithms/") + name + ".coll";
  o.env["COLL_ALGO_FILES"] = files;
  o.env["COLL_DEBUG"] = "TRACE";
  o.env["COLL_DEBUG_SUBSYS"] = "COLL";
  auto results = runJob("collectives", n, o);
  expectAllOk(results);
  const std::string all = describe(results);
  for (std::string name : {std::string(allreduce), std::string("allgather_direct"),
                           std::string("reducescatter_direct"), std::string("alltoall_direct"),
                           std::string("broadcast_direct")})
    EXPECT_NE(all.find("-> " + name), std::string::npos) << name << " served no call\n" << all;
}

// An MSCCL++ execution plan (docs/IR.md, "MSCCL++ plans") among the
// algorithm files: translated, proven and served for the calls it fits
// (in place, as "inplace": true says; out of place in a temporary buffer,
// as any in-place algorithm), every result checked; a plan Coll does not
// take yet is a rejection with the reader's reason (the TUNING table), and
// the calls go on with the built-ins.
TEST(Runtime, MscclppPlansAreAlgorithmFiles) {
  // The job's other collectives need the built-in set, which is .coll.
  if (!COLL_TEST_HAVE_LANG)
    GTEST_SKIP() << "this build compiles no .coll programs (COLL_ENABLE_LANG=OFF)";
  JobOptions o;
  o.env["COLL_TEST_SMALL"] = "1";
  o.env["COLL_ALGO_FILES"] =
      COLL_SOURCE_DIR "/tests/lit/Inputs/mscclpp/single_node_allreduce_2.json:" COLL_SOURCE_DIR
                      "/tests/lit/Inputs/mscclpp/single_node_allgather_pkt_2.json";
  o.env["COLL_DEBUG"] = "TRACE";
  o.env["COLL_DEBUG_SUBSYS"] = "INIT,COLL,TUNING";
  auto results = runJob("collectives", 2, o);
  expectAllOk(results);
  const std::string all = describe(results);
  EXPECT_NE(all.find("in place -> single_node_allreduce"), std::string::npos) << all;
  EXPECT_NE(all.find("not loaded: single_node_allgather_pkt_2 ("), std::string::npos) << all;
  EXPECT_NE(all.find("LL packets"), std::string::npos) << all;
}

// Windows (docs/RUNTIME.md, "Windows"): calls on collMemAlloc buffers
// registered with the communicator run the direct programs on them without
// copies; a call with one buffer outside goes through the shared area; and
// misuse is refused on every rank (the scenario checks the errors).
TEST(Runtime, DirectProgramsRunOnRegisteredWindows) {
  if (!COLL_TEST_HAVE_LANG)
    GTEST_SKIP() << "this build compiles no .coll programs (COLL_ENABLE_LANG=OFF)";
  JobOptions o;
  o.env["COLL_TEST_SMALL"] = "1";
  o.env["COLL_ALGO_FILES"] = COLL_SOURCE_DIR "/algorithms/allreduce_twoshot_direct.coll:" COLL_SOURCE_DIR
                             "/algorithms/allgather_direct.coll";
  o.env["COLL_DEBUG"] = "TRACE";
  o.env["COLL_DEBUG_SUBSYS"] = "INIT,COLL";
  auto results = runJob("windows", 3, o);
  expectAllOk(results);
  const std::string all = describe(results);
  EXPECT_NE(all.find("allreduce of 4000 B (1000 x fp32 sum) out of place -> "
                     "allreduce_twoshot_direct"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("buffers in registered windows: not copied"), std::string::npos) << all;
  // The two-shot is valid out of place too: such a call on windows runs on
  // the caller's buffers as they are, with no copy of sendbuff first.
  std::istringstream lines(all);
  int outOfPlaceOnWindows = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.find("out of place -> allreduce_twoshot_direct") != std::string::npos &&
        line.find("buffers in registered windows: not copied") != std::string::npos) {
      ++outOfPlaceOnWindows;
      EXPECT_EQ(line.find("sendbuff copied"), std::string::npos) << line;
    }
  EXPECT_GT(outOfPlaceOnWindows, 0) << all;
  EXPECT_NE(all.find("run in the shared area: buffers copied in and out"), std::string::npos)
      << all;
  EXPECT_NE(all.find("window 2 deregistered"), std::string::npos) << all;
}

// The built-in rules for buffers in windows (docs/RUNTIME.md, "Selection"):
// with no program of the user's, each collective they name runs its direct
// program on windows, by the rule, and computes the right result.
TEST(Runtime, BuiltInRulesRunTheDirectProgramsOnWindows) {
  if (!COLL_TEST_HAVE_LANG)
    GTEST_SKIP() << "this build compiles no .coll programs (COLL_ENABLE_LANG=OFF)";
  JobOptions o;
  o.env["COLL_DEBUG"] = "TRACE";
  o.env["COLL_DEBUG_SUBSYS"] = "COLL";
  auto results = runJob("windows-builtin", 3, o);
  expectAllOk(results);
  const std::string all = describe(results);
  for (const char *name :
       {"allreduce_twoshot_direct", "allgather_direct", "reducescatter_direct", "alltoall_direct",
        "broadcast_direct"})
    EXPECT_NE(all.find(std::string("-> ") + name), std::string::npos)
        << name << " served no call\n"
        << all;
  EXPECT_NE(all.find("built-in rule for buffers in windows \"alltoall"), std::string::npos)
      << all;
}

// The programs that served a rank's allreduces, in order, from its
// COLL_DEBUG=TRACE lines ("allreduce of ... -> NAME (...").
std::vector<std::string> servedAllreduces(const RankResult &r) {
  std::vector<std::string> names;
  for (size_t at = r.output.find("allreduce of "); at != std::string::npos;
       at = r.output.find("allreduce of ", at + 1)) {
    const size_t arrow = r.output.find("-> ", at), end = r.output.find(' ', arrow + 3);
    if (arrow == std::string::npos || end == std::string::npos)
      break;
    names.push_back(r.output.substr(arrow + 3, end - arrow - 3));
  }
  return names;
}

// Device calls on a communicator that holds a window (docs/RUNTIME.md,
// "Selection"): on the emulated device, the built-in rule for device calls
// with windows runs the direct two-shot for allreduces from 4 MiB, on
// every rank whichever memory its buffers are in, and the other rules below
// 4 MiB and once the window is gone.
TEST(Runtime, DeviceCallsWithWindowsRunTheDirectTwoShot) {
  if (!COLL_TEST_HAVE_LANG || !COLL_TEST_HAVE_EMU)
    GTEST_SKIP() << "this build compiles no .coll programs or has no emulated device";
  JobOptions o;
  o.env["COLL_EMULATED_DEVICE"] = "1";
  o.env["COLL_DEBUG"] = "TRACE";
  o.env["COLL_DEBUG_SUBSYS"] = "COLL";
  const int n = 2;
  auto results = runJob("windows-device-rules", n, o);
  expectAllOk(results);
  ASSERT_EQ(results.size(), size_t(n));
  for (const RankResult &r : results) {
    // Five calls: three of 4 MiB with the window, then 1 MiB, then 4 MiB
    // without it, in that order.
    const std::vector<std::string> served = servedAllreduces(r);
    ASSERT_EQ(served.size(), 5u) << r.output;
    for (int i : {0, 1, 2})
      EXPECT_EQ(served[i], "allreduce_twoshot_direct") << "call " << i << "\n" << r.output;
    for (int i : {3, 4})
      EXPECT_NE(served[i], "allreduce_twoshot_direct") << "call " << i << "\n" << r.output;
    EXPECT_NE(r.output.find("built-in rule for device calls on a communicator with windows"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("on the emulated device"), std::string::npos) << r.output;
  }
}

// The built-in rules for device calls (docs/RUNTIME.md, "Built-in rules"):
// on the emulated device, 2 ranks run 1 and 8 KiB on the LL ring, 3 ranks
// 1 KiB on the LL one-shot and 8 KiB on the LL all-pairs; the sizes no
// device rule names (64 KiB), and every size on host buffers, follow the
// built-in rules. Where no device rule
// names a variant for the communicator's ranks, it is not compiled.
TEST(Runtime, DeviceCallsChooseLLForSmallAllreduces) {
  if (!COLL_TEST_HAVE_LANG || !COLL_TEST_HAVE_EMU)
    GTEST_SKIP() << "this build compiles no .coll programs or has no emulated device";
  struct Case {
    int n;
    bool device;
    std::vector<std::string> want;
    const char *notLoaded;
  };
  const Case cases[] = {
      {2, true, {"allreduce_ring_ll", "allreduce_ring_ll", "allreduce_ring"}, "allreduce_allpairs_ll"},
      {3, true, {"allreduce_oneshot_ll", "allreduce_allpairs_ll", "allreduce_ring"}, "allreduce_ring_ll"},
      {2, false, {"allreduce_oneshot", "allreduce_ring", "allreduce_ring"}, nullptr},
      {3, false, {"allreduce_oneshot", "allreduce_allpairs", "allreduce_ring"}, nullptr}};
  for (const Case &c : cases) {
    SCOPED_TRACE(std::to_string(c.n) + (c.device ? " ranks, device" : " ranks, host"));
    JobOptions o;
    if (c.device)
      o.env["COLL_EMULATED_DEVICE"] = "1";
    o.env["COLL_DEBUG"] = "TRACE";
    o.env["COLL_DEBUG_SUBSYS"] = "COLL,TUNING";
    auto results = runJob("small-rules", c.n, o);
    expectAllOk(results);
    ASSERT_EQ(results.size(), size_t(c.n));
    for (const RankResult &r : results) {
      // What served each of the scenario's three calls (1, 8, 64 KiB).
      EXPECT_EQ(servedAllreduces(r), c.want) << r.output;
      // A call's TRACE line: "-> NAME (PROTOCOL; WHY)".
      if (c.device) {
        EXPECT_NE(r.output.find("(LL; built-in rule for device calls \"allreduce"),
                  std::string::npos)
            << r.output;
      } else {
        EXPECT_EQ(r.output.find("; built-in rule for device calls"), std::string::npos)
            << r.output;
      }
      // Rank 0 lists the selection (INFO); a variant no device rule names
      // for this rank count is not compiled.
      if (&r != &results[0])
        continue;
      if (c.notLoaded) {
        EXPECT_NE(r.output.find(std::string("not loaded: ") + c.notLoaded + " (built-in"),
                  std::string::npos)
            << r.output;
      }
      if (c.device) {
        EXPECT_NE(r.output.find(std::string("device buffers: ") + c.want[c.n == 2 ? 0 : 1]),
                  std::string::npos)
            << r.output;
      }
    }
  }
}

// Ranks that pass buffers in windows where others do not run different
// programs (the built-in rule for windows chooses the direct two-shot):
// every rank ends the call with the watchdog's error, none waits forever
// (the rule's program was set up, collectively, when the window was
// registered).
TEST(Runtime, RanksThatDisagreeOnWindowsStopByTheWatchdog) {
  if (!COLL_TEST_HAVE_LANG)
    GTEST_SKIP() << "this build compiles no .coll programs (COLL_ENABLE_LANG=OFF)";
  JobOptions o;
  o.env["COLL_WATCHDOG_MS"] = "2000";
  o.env["COLL_DEBUG"] = "TRACE";
  o.env["COLL_DEBUG_SUBSYS"] = "COLL";
  auto results = runJob("windows-mismatch", 3, o);
  expectAllOk(results);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_NE(results[0].output.find("in place -> allreduce_twoshot_direct"), std::string::npos)
      << results[0].output;
  EXPECT_EQ(results[1].output.find("-> allreduce_twoshot_direct"), std::string::npos)
      << results[1].output;
  const std::string all = describe(results);
  EXPECT_NE(all.find("watchdog: no progress for 2000 ms"), std::string::npos) << all;
}

INSTANTIATE_TEST_SUITE_P(
    Runtime, DirectPrograms,
    ::testing::Combine(::testing::Values(2, 3, 4),
                       ::testing::Values("allreduce_twoshot_direct", "allreduce_oneshot_direct")),
    [](const auto &info) {
      return std::to_string(std::get<0>(info.param)) + "ranks_" +
             std::string(std::get<1>(info.param)).substr(10, 3) + "shot";
    });

TEST(Runtime, SplitMakesWorkingCommunicators) {
  AlgoDir two(2), three(3), four(4);
  JobOptions o = withAlgorithms(four);
  o.env["COLL_ALGO_DIR"] = ""; // several sizes: files, not a folder
  std::string files;
  for (const AlgoDir *d : {&two, &three, &four}) {
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(d->path, ec), end; !ec && it != end;
         it.increment(ec))
      files += (files.empty() ? "" : ":") + it->path();
  }
  o.env["COLL_ALGO_FILES"] = files;
  o.env["COLL_DEBUG"] = "INFO"; // each rank's steps, should one fail
  expectAllOk(runJob("split", 4, o));
}

/// COLL_TRACE: each process writes a Chrome trace of its calls, one call
/// slice per collective and step slices inside it; on the emulated device
/// from the kernel's own stamps.
void expectTimelinePerProcess(bool emulatedDevice) {
  AlgoDir dir(3);
  llvm::SmallString<128> traceDir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("coll-trace", traceDir));
  JobOptions o = withAlgorithms(dir);
  o.env["COLL_TRACE"] = (traceDir + "/run.json").str();
  if (emulatedDevice)
    o.env["COLL_EMULATED_DEVICE"] = "1";
  expectAllOk(runJob("trace", 3, o));
  for (int r = 0; r < 3; ++r) {
    const std::string path = (traceDir + "/run.r" + std::to_string(r) + ".json").str();
    auto buffer = llvm::MemoryBuffer::getFile(path);
    ASSERT_TRUE(static_cast<bool>(buffer)) << path << ": " << buffer.getError().message();
    auto parsed = llvm::json::parse((*buffer)->getBuffer());
    ASSERT_TRUE(static_cast<bool>(parsed)) << path << ": " << llvm::toString(parsed.takeError());
    const llvm::json::Array *events = parsed->getAsObject()
                                          ? parsed->getAsObject()->getArray("traceEvents")
                                          : nullptr;
    ASSERT_TRUE(events) << path;
    std::vector<std::pair<double, double>> calls;
    std::vector<std::pair<double, double>> steps;
    std::set<std::string> callNames;
    for (const llvm::json::Value &v : *events) {
      const llvm::json::Object *e = v.getAsObject();
      ASSERT_TRUE(e) << path;
      auto ph = e->getString("ph");
      ASSERT_TRUE(ph.hasValue()) << path;
      EXPECT_EQ(e->getInteger("pid").getValueOr(-1), r) << path; // a process per rank
      if (*ph == "M")
        continue;
      ASSERT_EQ(*ph, "X") << path;
      auto cat = e->getString("cat");
      auto ts = e->getNumber("ts");
      auto dur = e->getNumber("dur");
      ASSERT_TRUE(cat && ts && dur) << path;
      if (*cat == "call") {
        calls.push_back({*ts, *ts + *dur});
        callNames.insert(e->getString("name")->str());
      } else if (*cat == "step") {
        steps.push_back({*ts, *ts + *dur});
      }
    }
    EXPECT_EQ(calls.size(), 2u) << path;
    EXPECT_EQ(callNames.size(), 2u) << path; // an allreduce and an allgather
    EXPECT_FALSE(steps.empty()) << path;
    for (const auto &[b, e] : steps) {
      bool inside = false;
      for (const auto &[cb, ce] : calls)
        inside |= b + 0.002 >= cb && e <= ce + 0.002;
      EXPECT_TRUE(inside) << path << ": a step slice outside every call";
    }
  }
  llvm::sys::fs::remove_directories(traceDir);
}

TEST(Runtime, TraceWritesATimelinePerProcess) { expectTimelinePerProcess(false); }

TEST(Runtime, TraceWritesATimelineOfEmulatedDeviceCalls) {
  if (!COLL_TEST_HAVE_EMU)
    GTEST_SKIP() << "this build has no emulated device (COLL_ENABLE_CUDA_EMU=OFF)";
  expectTimelinePerProcess(true);
}

TEST(Runtime, BadArgumentsAreErrorsNotCrashes) {
  AlgoDir dir(2);
  expectAllOk(runJob("errors", 2, withAlgorithms(dir)));
}

// The FIFO slot sizes take byte counts as the tuning table writes them (64K),
// and a value that is not one is an error naming the variable.
TEST(Runtime, SlotSizesFromTheEnvironmentTakeSuffixes) {
  const int n = 2;
  const size_t count = 100000; // 400 KB: several 64 KiB slots per connection
  AlgoDir dir(n); // builds without the .coll compiler have no built-in set
  struct Case {
    const char *value;
    bool ok;
  };
  for (Case c : {Case{"64K", true}, Case{"65536", true}, Case{"64Q", false}, Case{"12", false},
                 Case{"128M", false}}) {
    SCOPED_TRACE(c.value);
    setenv("COLL_SIMPLE_SLOT_BYTES", c.value, 1);
    setenv("COLL_ALGO_DIR", dir.path.c_str(), 1);
    std::vector<collComm_t> comms(n, nullptr);
    collResult_t init = collCommInitAll(comms.data(), n, nullptr);
    unsetenv("COLL_SIMPLE_SLOT_BYTES");
    unsetenv("COLL_ALGO_DIR");
    if (!c.ok) {
      EXPECT_EQ(init, collInvalidArgument);
      EXPECT_NE(std::string(collGetLastError(nullptr)).find("COLL_SIMPLE_SLOT_BYTES"),
                std::string::npos)
          << collGetLastError(nullptr);
      continue;
    }
    ASSERT_EQ(init, collSuccess) << collGetLastError(nullptr);
    std::vector<std::vector<float>> data(n, std::vector<float>(count));
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i)
        data[r][i] = float(r + int(i % 5));
    ASSERT_EQ(collGroupStart(), collSuccess);
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(collAllReduce(data[r].data(), data[r].data(), count, collFloat32, collSum, comms[r],
                              nullptr),
                collSuccess)
          << collGetLastError(comms[r]);
    ASSERT_EQ(collGroupEnd(), collSuccess) << collGetLastError(comms[0]);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; i += 331)
        ASSERT_EQ(data[r][i], float(1 + 2 * int(i % 5))) << "rank " << r << " element " << i;
    for (collComm_t comm : comms)
      EXPECT_EQ(collCommDestroy(comm), collSuccess);
  }
  EXPECT_EQ(shmLeftovers(), "");
}

/// Parses "rank R: error CODE after MS ms: MESSAGE" lines.
struct Failure {
  int code = -1;
  long ms = -1;
  std::string message;
};
std::optional<Failure> failureOf(const RankResult &r) {
  static const std::regex line("rank [0-9]+: error ([0-9]+) after (-?[0-9]+) ms: ([^\n]*)");
  std::smatch m;
  if (!std::regex_search(r.output, m, line))
    return std::nullopt;
  return Failure{std::stoi(m[1]), std::stol(m[2]), m[3]};
}

/// The last rank of `results` was killed (SIGKILL) and the others exited
/// and printed their error: those errors, in rank order (empty after a
/// failed expectation).
std::vector<Failure> errorsOfSurvivors(const std::vector<RankResult> &results) {
  const int n = static_cast<int>(results.size());
  EXPECT_TRUE(WIFSIGNALED(results[n - 1].status) && WTERMSIG(results[n - 1].status) == SIGKILL)
      << describe(results);
  std::vector<Failure> errors;
  for (int r = 0; r < n - 1; ++r) {
    EXPECT_TRUE(results[r].exitedOk()) << describe(results);
    auto f = failureOf(results[r]);
    EXPECT_TRUE(f) << describe(results);
    if (!f)
      return {};
    errors.push_back(*f);
  }
  return errors;
}

TEST(Runtime, AKilledRankEndsTheOthersWithAnError) {
  const int n = 3, watchdog = smallSizes() ? 8000 : 3000;
  AlgoDir dir(n);
  JobOptions o = withAlgorithms(dir);
  o.watchdogMs = watchdog;
  auto results = runJob("kill", n, o);
  std::vector<Failure> errors = errorsOfSurvivors(results);
  for (int r = 0; r < static_cast<int>(errors.size()); ++r) {
    const Failure *f = &errors[r];
    EXPECT_TRUE(f->code == collRemoteError || f->code == collTimeout) << describe(results);
    EXPECT_LE(f->ms, coll::testing::scaledMs(watchdog + 2000)) << describe(results);
    EXPECT_NE(results[r].output.find("exited"), std::string::npos) << describe(results);
    // The communicator stays broken, with the same error.
    EXPECT_NE(results[r].output.find("async " + std::to_string(f->code) + " again " +
                                     std::to_string(f->code)),
              std::string::npos)
        << describe(results);
  }
  EXPECT_EQ(shmLeftovers(), "");
}

// Lost ranks (docs/RUNTIME.md, "Lost ranks"): rank 1 is killed (SIGKILL)
// 300 ms into a stream of allreduces, or while the others are in no call
// and ask collCommGetAsyncError. Every survivor must see collRemoteError
// naming the dead rank within 2 s of the kill (the liveness watch: the
// pidfds of this host's processes, the ring's connections), then revoke,
// shrink without it (no unique id), get dense ranks in the old order and
// run 100 checked calls of every collective; nothing is left in /dev/shm.
void expectSurvivorsShrank(const std::vector<RankResult> &results, int victim, int calls) {
  const int n = static_cast<int>(results.size());
  EXPECT_TRUE(WIFSIGNALED(results[victim].status) && WTERMSIG(results[victim].status) == SIGKILL)
      << describe(results);
  for (int r = 0; r < n; ++r) {
    if (r == victim)
      continue;
    EXPECT_TRUE(results[r].exitedOk()) << describe(results);
    auto f = failureOf(results[r]);
    ASSERT_TRUE(f) << describe(results);
    EXPECT_EQ(f->code, collRemoteError) << describe(results);
    EXPECT_LE(f->ms, coll::testing::scaledMs(2000)) << describe(results);
    EXPECT_TRUE(f->message.find("rank " + std::to_string(victim)) != std::string::npos &&
                f->message.find("exited") != std::string::npos)
        << describe(results);
    const int newRank = r - (r > victim ? 1 : 0);
    EXPECT_NE(results[r].output.find(llvm::formatv("rank {0}: shrunk to rank {1} of {2}", r,
                                                   newRank, n - 1)
                                          .str()),
              std::string::npos)
        << describe(results);
    EXPECT_NE(results[r].output.find(std::to_string(calls) + " rounds of every collective"),
              std::string::npos)
        << describe(results);
  }
  EXPECT_EQ(shmLeftovers(), "");
}

// Tagged requests to and from a rank that dies end with collRemoteError,
// naming it, within 2 s; later posts fail at once.
TEST(Runtime, TaggedRequestsWithALostRankFail) {
  const int n = 3;
  AlgoDir dir(n);
  auto results = runJob("tagged-lost", n, withAlgorithms(dir));
  for (const Failure &e : errorsOfSurvivors(results)) {
    const Failure *f = &e;
    EXPECT_EQ(f->code, collRemoteError) << describe(results);
    EXPECT_LE(f->ms, coll::testing::scaledMs(2000)) << describe(results);
    EXPECT_NE(f->message.find("rank " + std::to_string(n - 1)), std::string::npos)
        << describe(results);
  }
  EXPECT_EQ(shmLeftovers(), "");
}

class LostRank : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(LostRank, SurvivorsSeeItWithinTwoSecondsShrinkAndGoOn) {
  const auto [n, idle] = GetParam();
  AlgoDir dir(n, {n - 1});
  JobOptions o = withAlgorithms(dir);
  o.env["COLL_TEST_SMALL"] = "1";
  expectSurvivorsShrank(runJob(idle ? "lost-rank-idle" : "lost-rank", n, o), 1, 100);
}

INSTANTIATE_TEST_SUITE_P(Runtime, LostRank,
                         ::testing::Combine(::testing::Values(4, 8), ::testing::Bool()),
                         [](const auto &info) {
                           return std::to_string(std::get<0>(info.param)) + "Ranks" +
                                  (std::get<1>(info.param) ? "Idle" : "InCall");
                         });

// The same on the emulated device: the survivors' kernels wait for the
// dead rank until the liveness watch raises the stop word (not the
// watchdog, set long here), then the shrunk communicator runs on the
// emulated device too.
TEST(Runtime, ALostRankOnTheEmulatedDeviceIsShrunkAway) {
  if (!COLL_TEST_HAVE_EMU)
    GTEST_SKIP() << "this build has no emulated device (COLL_ENABLE_CUDA_EMU=OFF)";
  const int n = 4;
  AlgoDir dir(n, {n - 1});
  JobOptions o = withAlgorithms(dir);
  o.env["COLL_TEST_SMALL"] = "1";
  o.env["COLL_EMULATED_DEVICE"] = "1";
  o.watchdogMs = 60000;
  expectSurvivorsShrank(runJob("lost-rank", n, o), 1, 100);
}

// Grow: 4 ranks, the last killed; the 3 survivors shrink, then grow back to
// 4 with a fresh process (collCommGetUniqueId on rank 0, collCommGrow on
// all), and every collective is checked on the grown communicator.
TEST(Runtime, AShrunkCommunicatorGrowsBackWithAFreshProcess) {
  const int n = 4;
  AlgoDir dir(n, {n - 1});
  JobOptions o = withAlgorithms(dir);
  o.env["COLL_TEST_SMALL"] = "1";
  auto results = runJob("grow", n, o);
  EXPECT_TRUE(WIFSIGNALED(results[n - 1].status) && WTERMSIG(results[n - 1].status) == SIGKILL)
      << describe(results);
  for (int r = 0; r < n - 1; ++r) {
    EXPECT_TRUE(results[r].exitedOk()) << describe(results);
    EXPECT_NE(results[r].output.find(llvm::formatv("rank {0}: grown back to 4 ranks", r).str()),
              std::string::npos)
        << describe(results);
  }
  EXPECT_NE(results[0].output.find("rank 3 (fresh): ok"), std::string::npos) << describe(results);
  EXPECT_EQ(shmLeftovers(), "");
}

// The emulated device (COLL_EMULATED_DEVICE): every collective through the
// C API, each rank's kernel in its own process with the FIFOs shared between
// the processes, bit-identical to the host backend (RankCheck's "device").
TEST(Runtime, EveryCollectiveOnTheEmulatedDeviceMatchesTheHost) {
  if (!COLL_TEST_HAVE_EMU)
    GTEST_SKIP() << "this build has no emulated device (COLL_ENABLE_CUDA_EMU=OFF)";
  AlgoDir dir(3);
  JobOptions o = withAlgorithms(dir);
  o.env["COLL_TEST_SMALL"] = "1";
  expectAllOk(runJob("device", 3, o));
  EXPECT_EQ(shmLeftovers(), "");
}

/// Sum allreduces of `count` floats over `comms` (the ranks of one
/// process, driven through groups by this thread) on buffers that each rank
/// places itself: rank r's sendbuff at `send[r]`, its recvbuff at
/// `recv[r]` (equal: in place); "" or what went wrong.
std::string placedAllReduces(const std::vector<collComm_t> &comms, size_t count,
                             const std::vector<float *> &send, const std::vector<float *> &recv,
                             size_t stride = 31) {
  const int n = static_cast<int>(comms.size());
  for (int call = 0; call < 2; ++call) {
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i)
        send[r][i] = float(r + int(i % 7) + call);
    if (collGroupStart() != collSuccess)
      return "collGroupStart failed";
    for (int r = 0; r < n; ++r)
      if (collAllReduce(send[r], recv[r], count, collFloat32, collSum, comms[r], nullptr) !=
          collSuccess)
        return "rank " + std::to_string(r) + ": " + collGetLastError(comms[r]);
    if (collGroupEnd() != collSuccess)
      return std::string("collGroupEnd: ") + collGetLastError(comms[0]);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; i += stride) {
        const float want = float(n * int(i % 7) + n * (n - 1) / 2 + n * call);
        if (recv[r][i] != want)
          return "call " + std::to_string(call) + " rank " + std::to_string(r) + " element " +
                 std::to_string(i) + ": " + std::to_string(recv[r][i]) + ", not " +
                 std::to_string(want);
      }
  }
  return "";
}

/// Two sum allreduces of `count` floats over `comms`, the ranks of one
/// process, each call one group driven by this thread, in place or out of
/// place; "" or what went wrong.
std::string groupAllReduces(const std::vector<collComm_t> &comms, size_t count, bool inplace) {
  const size_t n = comms.size();
  std::vector<std::vector<float>> send(n, std::vector<float>(count)), recv = send;
  std::vector<float *> sends(n), recvs(n);
  for (size_t r = 0; r < n; ++r) {
    sends[r] = send[r].data();
    recvs[r] = inplace ? send[r].data() : recv[r].data();
  }
  return placedAllReduces(comms, count, sends, recvs, 97);
}

// collCommInitAll: one process holds every rank, and one thread drives them
// through a group. On the emulated device the first call of a plan makes the
// executors collectively, so the ranks of the group prepare side by side.
TEST(Runtime, OneThreadDrivesEveryRankOnTheEmulatedDevice) {
  if (!COLL_TEST_HAVE_EMU)
    GTEST_SKIP() << "this build has no emulated device (COLL_ENABLE_CUDA_EMU=OFF)";
  const int n = 3;
  const size_t count = 10000;
  AlgoDir dir(n);
  for (bool device : {false, true}) {
    setenv("COLL_ALGO_DIR", dir.path.c_str(), 1);
    setenv("COLL_EMULATED_DEVICE", device ? "1" : "0", 1);
    std::vector<collComm_t> comms(n, nullptr);
    collResult_t init = collCommInitAll(comms.data(), n, nullptr);
    unsetenv("COLL_ALGO_DIR");
    unsetenv("COLL_EMULATED_DEVICE");
    ASSERT_EQ(init, collSuccess) << collGetLastError(nullptr);
    EXPECT_EQ(groupAllReduces(comms, count, true), "") << (device ? "emulated device" : "host");
    for (collComm_t c : comms)
      EXPECT_EQ(collCommDestroy(c), collSuccess);
  }
  EXPECT_EQ(shmLeftovers(), "");
}


/// Runs f(r) for every rank at once, a thread each (collective calls of the
/// ranks of one process); "" or the first failure.
std::string everyRank(int n, const std::function<std::string(int)> &f) {
  std::vector<std::string> failures(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] { failures[r] = f(r); });
  for (std::thread &t : threads)
    t.join();
  for (int r = 0; r < n; ++r)
    if (!failures[r].empty())
      return "rank " + std::to_string(r) + ": " + failures[r];
  return "";
}

// A program with direct steps on the emulated device, whose kernels run on
// host memory: the peers reach a rank's buffers in its shared area (copied
// in and out, as on the host) or, where they lie in windows registered
// with the communicator, where they are; each rank decides alone, and its
// kernel publishes where (docs/CUDA.md, "Windows"). A tuning table names a
// direct two-shot (as XML, so that builds without the .coll compiler run
// it too) for every allreduce; the selection keeps it. (GPU buffers take
// each rank's area on its GPU instead: runtime-standin-gpu-direct-*.)
TEST(Runtime, DirectProgramsRunOnTheEmulatedDevice) {
  if (!COLL_TEST_HAVE_EMU)
    GTEST_SKIP() << "this build has no emulated device (COLL_ENABLE_CUDA_EMU=OFF)";
  const int n = 3;
  const size_t count = 3000;
  AlgoDir dir(n);
  dir.write("peer_twoshot_allreduce", coll::testing::peerTwoShotAllReduce(n));
  llvm::SmallString<128> table;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("coll-tuning", "txt", table));
  auto removeTable = llvm::make_scope_exit([&] { llvm::sys::fs::remove(table); });
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(table, ec);
    ASSERT_FALSE(ec) << ec.message();
    out << "allreduce * * peer_twoshot_allreduce\n";
  }
  setenv("COLL_ALGO_DIR", dir.path.c_str(), 1);
  setenv("COLL_TUNING_FILE", table.c_str(), 1);
  setenv("COLL_EMULATED_DEVICE", "1", 1);
  std::vector<collComm_t> comms(n, nullptr);
  collResult_t init = collCommInitAll(comms.data(), n, nullptr);
  unsetenv("COLL_ALGO_DIR");
  unsetenv("COLL_TUNING_FILE");
  unsetenv("COLL_EMULATED_DEVICE");
  ASSERT_EQ(init, collSuccess) << collGetLastError(nullptr);
  // Through the shared areas, out of place and in place.
  EXPECT_EQ(groupAllReduces(comms, count, false), "");
  EXPECT_EQ(groupAllReduces(comms, count, true), "");
  char chosen[256] = {0};
  ASSERT_EQ(collCommQueryChoice(comms[0], "allreduce", count * sizeof(float), 0, chosen,
                                sizeof chosen),
            collSuccess);
  EXPECT_EQ(std::string(chosen).rfind("peer_twoshot_allreduce", 0), 0u) << chosen;

  // Windows of collMemAlloc memory (registered by every rank together),
  // each rank's buffers at offsets of its own; rank 0's recvbuff outside
  // them in one round, so that it copies out while the others do not.
  const size_t bytes = 3 * count * sizeof(float) + 4096;
  std::vector<void *> memory(n, nullptr);
  std::vector<collWindow_t> wins(n, nullptr);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(collMemAlloc(&memory[r], bytes), collSuccess);
  EXPECT_EQ(everyRank(n,
                      [&](int r) -> std::string {
                        return collCommWindowRegister(comms[r], memory[r], bytes, &wins[r],
                                                      COLL_WIN_DEFAULT) == collSuccess
                                   ? ""
                                   : collGetLastError(comms[r]);
                      }),
            "");
  std::vector<float> outside(count);
  for (int round = 0; round < 3; ++round) {
    std::vector<float *> send(n), recv(n);
    for (int r = 0; r < n; ++r) {
      float *base = static_cast<float *>(memory[r]) + 5 * r + round + 1;
      send[r] = base;
      recv[r] = round == 1 ? base : base + count + 3 * r; // round 1: in place
    }
    if (round == 2)
      recv[0] = outside.data();
    EXPECT_EQ(placedAllReduces(comms, count, send, recv), "") << "round " << round;
  }
  EXPECT_EQ(everyRank(n,
                      [&](int r) -> std::string {
                        return collCommWindowDeregister(comms[r], wins[r]) == collSuccess
                                   ? ""
                                   : collGetLastError(comms[r]);
                      }),
            "");
  // And through the areas again, once the windows are gone.
  EXPECT_EQ(groupAllReduces(comms, count, false), "");
  for (collComm_t c : comms)
    EXPECT_EQ(collCommDestroy(c), collSuccess);
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(collMemFree(memory[r]), collSuccess);
  EXPECT_EQ(shmLeftovers(), "");
}

// A rank killed while the others' kernels wait for it: their watchdog ends
// the call, or, once a rank has found the death and raised the host's stop
// word, their kernels stop at it (CudaOptions::hostStop); either way with
// the kernel's report and the cause (the peer exited), the communicator
// stays broken, and nothing is left in /dev/shm.
TEST(Runtime, AKilledRankEndsTheOthersOnTheEmulatedDevice) {
  if (!COLL_TEST_HAVE_EMU)
    GTEST_SKIP() << "this build has no emulated device (COLL_ENABLE_CUDA_EMU=OFF)";
  const int n = 3, watchdog = smallSizes() ? 8000 : 3000;
  AlgoDir dir(n);
  JobOptions o = withAlgorithms(dir);
  o.watchdogMs = watchdog;
  o.env["COLL_EMULATED_DEVICE"] = "1";
  auto results = runJob("kill", n, o);
  EXPECT_TRUE(WIFSIGNALED(results[n - 1].status) && WTERMSIG(results[n - 1].status) == SIGKILL)
      << describe(results);
  for (int r = 0; r < n - 1; ++r) {
    EXPECT_TRUE(results[r].exitedOk()) << describe(results);
    auto f = failureOf(results[r]);
    ASSERT_TRUE(f) << describe(results);
    // The cause (a peer that exited) and, from a rank whose kernel waited
    // for it, the kernel's watchdog report. A rank whose kernel had all it
    // needed before the victim died finds the death right after its launch
    // and reports the cause alone. (Should the victim die before the first
    // launch, while the ranks map each other's FIFOs, the others see the
    // lost contact instead.)
    EXPECT_TRUE(f->code == collRemoteError || f->code == collTimeout) << describe(results);
    if (f->message.find("mapping FIFOs") == std::string::npos &&
        f->message.find("executor") == std::string::npos) {
      EXPECT_NE(f->message.find(") exited"), std::string::npos) << describe(results);
      if (f->message.find("the kernel's report") != std::string::npos) {
        EXPECT_NE(f->message.find("emulated device"), std::string::npos) << describe(results);
        EXPECT_TRUE(f->message.find("watchdog: no progress") != std::string::npos ||
                    f->message.find("the stop word of this host's ranks was raised") !=
                        std::string::npos)
            << describe(results);
      }
    }
    EXPECT_LE(f->ms, coll::testing::scaledMs(watchdog + 3000)) << describe(results);
    EXPECT_NE(results[r].output.find("async " + std::to_string(f->code) + " again " +
                                     std::to_string(f->code)),
              std::string::npos)
        << describe(results);
  }
  EXPECT_EQ(shmLeftovers(), "");
}

TEST(Runtime, AStoppedRankEndsTheOthersWithinTheWatchdog) {
  const int n = 3, watchdog = smallSizes() ? 8000 : 2000;
  AlgoDir dir(n);
  JobOptions o = withAlgorithms(dir);
  o.watchdogMs = watchdog;
  o.stragglerSeconds = 5; // then the stopped rank is killed
  auto results = runJob("stop", n, o);
  for (int r = 0; r < n - 1; ++r) {
    auto f = failureOf(results[r]);
    ASSERT_TRUE(f) << describe(results);
    EXPECT_TRUE(f->code == collTimeout || f->code == collRemoteError) << describe(results);
    EXPECT_LE(f->ms, coll::testing::scaledMs(watchdog + 2000)) << describe(results);
    EXPECT_NE(results[r].output.find("watchdog"), std::string::npos) << describe(results);
  }
  EXPECT_EQ(shmLeftovers(), "");
}

// Every rank's call fails as a mismatch naming both calls: the rank that
// finds it says collInvalidUsage, the others that it stopped them. The
// communicator has then retired on every rank: the next call fails at once,
// its buffer untouched (docs/RUNTIME.md, "Retiring").
void expectMismatchReported(const std::vector<RankResult> &results, const char *one,
                            const char *other) {
  for (const RankResult &r : results) {
    auto f = failureOf(r);
    ASSERT_TRUE(f) << describe(results);
    EXPECT_TRUE(f->code == collInvalidUsage || f->code == collRemoteError) << describe(results);
    EXPECT_NE(f->message.find("mismatched calls"), std::string::npos) << describe(results);
    EXPECT_NE(f->message.find(one), std::string::npos) << describe(results);
    EXPECT_NE(f->message.find(other), std::string::npos) << describe(results);
    const size_t next = r.output.find("next call ");
    ASSERT_NE(next, std::string::npos) << describe(results);
    const std::string line = r.output.substr(next, r.output.find('\n', next) - next);
    EXPECT_EQ(line.find("next call 0"), std::string::npos) << describe(results);
    // (The C API says so itself for a rank whose own call failed; a rank
    // whose call completed learns it from the host's stop word.)
    EXPECT_TRUE(line.find("buffer untouched: the communicator is broken by an earlier error") !=
                    std::string::npos ||
                line.find("buffer untouched: the communicator retired at an earlier failure") !=
                    std::string::npos)
        << describe(results);
  }
  EXPECT_EQ(shmLeftovers(), "");
}

// Counts 1000 and 1001: with the built-in one-shot allreduce the data fit
// and every call completes; the call tags in the FIFOs still catch it.
TEST(Runtime, MismatchedCallsThatCompleteAreReportedAsSuch) {
  if (!COLL_TEST_HAVE_LANG)
    GTEST_SKIP() << "this build compiles no .coll programs (COLL_ENABLE_LANG=OFF): no built-in "
                    "one-shot allreduce, whose calls of 1000 and 1001 elements complete";
  expectMismatchReported(runJob("mismatch-fits", 2, JobOptions{}), "allreduce of 1000 fp32 sum",
                         "allreduce of 1001 fp32 sum");
}

TEST(Runtime, MismatchedCallsAreReportedAsSuch) {
  AlgoDir dir(2);
  expectMismatchReported(runJob("mismatch", 2, withAlgorithms(dir)), "allreduce of 4096 fp32 sum",
                         "allgather of 4096 fp32");
}

TEST(Runtime, AbortEndsTheCallsOfTheOthers) {
  const int n = 3;
  AlgoDir dir(n);
  JobOptions o = withAlgorithms(dir);
  o.watchdogMs = 30000; // the abort, not the watchdog, must end them
  auto results = runJob("abort", n, o);
  for (int r = 1; r < n; ++r) {
    auto f = failureOf(results[r]);
    ASSERT_TRUE(f) << describe(results);
    EXPECT_EQ(f->code, collRemoteError) << describe(results);
    EXPECT_NE(f->message.find("aborted"), std::string::npos) << describe(results);
    EXPECT_LE(f->ms, coll::testing::scaledMs(5000)) << describe(results);
  }
  EXPECT_EQ(shmLeftovers(), "");
}

} // namespace
