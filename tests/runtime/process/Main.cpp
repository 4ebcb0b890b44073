//===- Main.cpp - One rank of a multi-process runtime test ----------------===//
//
// A program a user could have written against coll.h alone: it joins a
// communicator, runs a scenario and checks every result on its own rank
// against the collective's definition in closed form. Launched N times by
// ProcessTest.cpp (fork + exec, TCP bootstrap), by mpirun, or by itself:
//
//   coll-rank-check SCENARIO --id HEX --rank R --nranks N
//   coll-rank-check SCENARIO --env          (collCommInitFromEnv: mpirun, srun, torchrun)
//   coll-rank-check SCENARIO --mpi          (collCommInitFromMPI; MPI builds only)
//   coll-rank-check SCENARIO --fork N       (this program forks N ranks itself)
//   coll-rank-check-gpu gpu-all --all N     (N ranks of one process on GPU 0,
//                                            collCommInitAll, groups)
//
// The scenarios are the table below (--help prints it), each a function of
// its family's file (RankCheck.h lists them). The GPU ones are built into
// coll-rank-check-gpu and coll-rank-check-standin (COLL_TEST_GPU) only.
//
// Exit 77 (skip) when a GPU scenario finds no CUDA device.
// Prints "rank R: ok N checks" and exits 0, or "rank R: FAIL ..." and exits 1.
// Failed calls print "rank R: error CODE after MS ms: MESSAGE" (kill, stop,
// mismatch), which the driver parses. COLL_TEST_SMALL=1 keeps sizes small
// (sanitizer builds); every time bound (the watchdog periods scenarios set,
// deadlines, the waits for the other ranks) scales with COLL_TEST_TIME_SCALE
// (tests/support/TimeScale.h). Bad arguments: the usage on stderr, exit 2.
//
//===----------------------------------------------------------------------===//

#include "RankCheck.h"

#include "TimeScale.h"

#if COLL_TEST_MPI
#include "coll_mpi.h"
#endif

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

namespace rankcheck {

int rank = -1, nranks = 0;
collComm_t comm = nullptr;
long checks = 0;

[[noreturn]] void failNow(const std::string &what) {
  std::printf("rank %d: FAIL %s\n", rank, what.c_str());
  std::fflush(stdout);
  std::_Exit(1);
}

void check(collResult_t r, const char *what) {
  if (r != collSuccess)
    failNow(std::string(what) + ": " + collGetErrorString(r) + ": " + collGetLastError(comm));
}

} // namespace rankcheck

using namespace rankcheck;

namespace {

#if COLL_TEST_GPU
constexpr bool gpuBuild = true;
/// A scenario of this build only (COLL_TEST_GPU); null in the others.
#define GPU_ONLY(...) __VA_ARGS__
#else
constexpr bool gpuBuild = false;
#define GPU_ONLY(...) nullptr
#endif

//===----------------------------------------------------------------------===//
// The scenarios
//===----------------------------------------------------------------------===//

/// How a scenario's ranks are launched.
enum class Launch {
  /// One rank per process: --id, --env or --mpi, or --fork N, which runs N
  /// of those.
  PerProcess,
  /// Every rank in this process (collCommInitAll): --all N.
  AllInProcess,
};

struct Scenario {
  const char *name;
  /// One line of the usage text.
  const char *summary;
  Launch launch = Launch::PerProcess;
  /// PerProcess: this rank's part, between init and finalize (`small`:
  /// COLL_TEST_SMALL is set). Null where this build lacks it (GPU ones).
  void (*run)(bool small) = nullptr;
  /// AllInProcess: the whole job, given N; its exit status.
  int (*runAll)(int n) = nullptr;
  /// Device buffers: built with COLL_TEST_GPU only; GPU 0 is made current
  /// before init, and the rank exits 77 (skip) where there is no device.
  bool gpu = false;
  /// The COLL_WATCHDOG_MS the scenario sets for itself (0: the caller's), at
  /// COLL_TEST_TIME_SCALE 1.
  int watchdogMs = 0;
  /// --fork: the last rank is meant to die (SIGKILL), which counts as a pass.
  bool lastRankDies = false;
  /// --fork: this rank is meant to die, likewise (-1: none).
  int victim = -1;
  /// Run before init (after the device check) and after destroy.
  void (*beforeInit)() = nullptr;
  void (*afterDestroy)() = nullptr;
};

// clang-format off
const Scenario scenarios[] = {
  // Collectives.cpp
  {.name = "collectives",
   .summary = "every collective, type, size and root, in place and out of place",
   .run = [](bool small) { collectives(small); }},
  {.name = "alltoall-p2p",
   .summary = "a communicator without the built-in set: alltoall by the built-in rule p2p",
   .run = [](bool) { alltoallWithoutProgramsScenario(); }},
  {.name = "split", .summary = "collCommSplit: even and odd ranks, COLL_SPLIT_NOCOLOR",
   .run = [](bool) { splitScenario(); }},
  {.name = "trace", .summary = "an allreduce and an allgather for COLL_TRACE",
   .run = [](bool) { traceScenario(); }},
  {.name = "windows",
   .summary = "collMemAlloc buffers registered as windows: allreduce and allgather on them, misuse",
   .run = [](bool small) { windowsScenario(small); }},
  {.name = "windows-builtin",
   .summary = "the built-in rules for windows: every collective they name, on windows",
   .run = [](bool) { windowsBuiltinScenario(); }},
  {.name = "windows-device-rules",
   .summary = "device calls with a window registered: 4 MiB allreduces in and outside it, 1 MiB",
   .run = [](bool) { windowsDeviceRulesScenario(); }},
  {.name = "small-rules",
   .summary = "allreduces of 1, 8 and 64 KiB, for the driver to read which program served each",
   .run = [](bool) { smallRulesScenario(); }},
  {.name = "windows-mismatch",
   .summary = "a 1 MiB allreduce with buffers in windows on rank 0 only: every rank fails",
   .run = [](bool) { windowsMismatchScenario(); }},
  // PointToPoint.cpp
  {.name = "p2p", .summary = "a ring exchange, sends to itself, messages to one peer in order",
   .run = [](bool small) { p2p(small); }},
  {.name = "tagged",
   .summary = "collIsend/collIrecv: tags out of order, any source, both posting orders, truncation",
   .run = [](bool small) { tagged(small); }},
  {.name = "tagged-lost",
   .summary = "the last rank dies while the others wait on tagged sends and receives with it",
   .run = [](bool) { taggedLost(); }, .lastRankDies = true},
  // Faults.cpp
  {.name = "kill", .summary = "the last rank dies mid-stream; the others must end with an error",
   .run = [](bool) { fault(false); }},
  {.name = "stop", .summary = "the last rank stops (SIGSTOP) mid-stream; likewise",
   .run = [](bool) { fault(true); }},
  {.name = "loop", .summary = "allreduces until one fails, for a fault made from outside",
   .run = [](bool) { loopScenario(); }},
  {.name = "abort", .summary = "rank 0 aborts while the others are in an allreduce",
   .run = [](bool) { abortScenario(); }},
  {.name = "mismatch", .summary = "rank 0 all-reduces while the others all-gather",
   .run = [](bool) { mismatch(); }},
  {.name = "mismatch-fits", .summary = "allreduces of 1000 and 1001 elements",
   .run = [](bool) { mismatchFits(); }},
  {.name = "errors", .summary = "bad arguments are errors with their reason, not crashes",
   .run = [](bool) { errors(); }},
  {.name = "lost-rank",
   .summary = "rank 1 is killed mid-stream; the others revoke, shrink and run every collective",
   .run = [](bool) { lostRank(false); }, .victim = 1},
  {.name = "lost-rank-idle",
   .summary = "likewise, rank 1 killed while the others are in no call (collCommGetAsyncError)",
   .run = [](bool) { lostRank(true); }, .victim = 1},
  {.name = "grow",
   .summary = "the last rank is killed; the others shrink, then grow back with a fresh process",
   .run = [](bool) { growScenario(); }, .lastRankDies = true},
  // Device.cpp
  {.name = "device",
   .summary = "every collective on the emulated device against the host, bit for bit",
   .run = [](bool small) { compareScenario(small, Target::Emulated); }},
  {.name = "device-refused",
   .summary = "N ranks of this process on one emulated GPU too small for some programs",
   .launch = Launch::AllInProcess, .runAll = deviceRefused},
  {.name = "late-cuda", .summary = "device memory of a CUDA runtime loaded after the first call",
   .run = [](bool) { lateCuda(); }},
  {.name = "gpu", .summary = "every collective on device buffers against the host, bit for bit",
   .run = GPU_ONLY([](bool small) { compareScenario(small, Target::Gpu); }), .gpu = true},
  {.name = "gpu-kill", .summary = "the last rank dies; the others' kernels end at the watchdog",
   .run = GPU_ONLY([](bool) { gpuKill(); }), .gpu = true, .watchdogMs = 3000,
   .lastRankDies = true},
  {.name = "gpu-lost", .summary = "the last rank's GPU is lost mid-job (the emulation's planted fault)",
   .run = GPU_ONLY([](bool) { gpuLost(); }), .gpu = true, .watchdogMs = 20000},
  {.name = "gpu-abort", .summary = "collCommAbort stops a kernel in flight within 2 s",
   .run = GPU_ONLY([](bool) { gpuAbort(); }), .gpu = true, .watchdogMs = 20000},
  {.name = "gpu-unserved", .summary = "no GPU backend: device calls fail, host calls go on",
   .run = GPU_ONLY([](bool) { gpuUnserved(); }), .gpu = true},
  {.name = "gpu-unmappable",
   .summary = "peers' FIFOs cannot be mapped (COLL_EMULATED_IPC=fail): device calls fail at once",
   .run = GPU_ONLY([](bool) { gpuUnmappable(); }), .gpu = true},
  {.name = "gpu-trace", .summary = "COLL_TRACE of device calls, the kernel's steps included",
   .run = GPU_ONLY([](bool) { gpuTrace(); }), .gpu = true,
   .beforeInit = GPU_ONLY(setGpuTracePath), .afterDestroy = GPU_ONLY(checkGpuTraceFile)},
  {.name = "gpu-windows",
   .summary = "direct programs on windows of GPU memory (collMemAllocDevice), each rank's own offsets",
   .run = GPU_ONLY([](bool) { gpuWindows(); }), .gpu = true},
  {.name = "gpu-all", .summary = "N ranks of this process on GPU 0 (COLL_TEST_GPUS: on several) against N host ranks",
   .launch = Launch::AllInProcess, .runAll = GPU_ONLY(allInOneProcess), .gpu = true},
};
// clang-format on

const Scenario *findScenario(const std::string &name) {
  for (const Scenario &s : scenarios)
    if (name == s.name)
      return &s;
  return nullptr;
}

void usage(std::FILE *out, const char *self) {
  std::fprintf(out, "usage: %s SCENARIO (--id HEX --rank R --nranks N | --env | --mpi)\n", self);
  std::fprintf(out, "       %s SCENARIO --fork N\n", self);
  for (const Scenario &s : scenarios)
    if (s.launch == Launch::AllInProcess)
      std::fprintf(out, "       %s %s --all N\n", self, s.name);
  std::fprintf(out, "scenarios (GPU: in coll-rank-check-gpu and coll-rank-check-standin only):\n");
  for (const Scenario &s : scenarios)
    std::fprintf(out, "  %-14s %s%s\n", s.name, s.gpu ? "GPU: " : "", s.summary);
}

//===----------------------------------------------------------------------===//
// Launching
//===----------------------------------------------------------------------===//

/// `--fork N`: rank 0's id here, then N children run the scenario as ranks
/// 0..N-1 (no CUDA is touched before the fork). Exit status: 0 when all
/// passed, 77 when all skipped, else 1.
int forkRanks(const char *self, const std::string &scenario, int n, bool lastRankDies,
              int victimRank) {
  if (n < 1)
    return 2;
  collUniqueId id;
  if (collGetUniqueId(&id) != collSuccess) {
    std::printf("FAIL collGetUniqueId: %s\n", collGetLastError(nullptr));
    return 1;
  }
  std::string hex;
  for (char c : id.internal) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", unsigned(static_cast<unsigned char>(c)));
    hex += two;
  }
  std::vector<pid_t> children;
  const std::string ns = std::to_string(n);
  for (int r = 0; r < n; ++r) {
    // Made before the fork, as the child may not allocate (runJob).
    const std::string rs = std::to_string(r);
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid == 0) {
      execl(self, self, scenario.c_str(), "--id", hex.c_str(), "--rank", rs.c_str(), "--nranks",
            ns.c_str(), static_cast<char *>(nullptr));
      std::_Exit(127);
    }
    children.push_back(pid);
  }
  int passed = 0, skipped = 0;
  for (size_t r = 0; r < children.size(); ++r) {
    int status = 0;
    waitpid(children[r], &status, 0);
    const bool victim = (lastRankDies && int(r) == n - 1) || int(r) == victimRank;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
      ++passed;
    else if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
      ++skipped;
    else if (victim && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      ++passed; // it was meant to die
  }
  // Nothing of Coll's may be left in /dev/shm once the job has ended.
  for (const char *dir : {"/dev/shm"}) {
    if (DIR *d = opendir(dir)) {
      while (struct dirent *e = readdir(d))
        if (std::strncmp(e->d_name, "coll-", 5) == 0) {
          std::printf("FAIL left in /dev/shm: %s\n", e->d_name);
          passed = -n;
        }
      closedir(d);
    }
  }
  if (skipped == n)
    return 77;
  return passed == n ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    usage(stdout, argv[0]);
    return 0;
  }
  if (argc < 3) {
    usage(stderr, argv[0]);
    return 2;
  }
  std::string name = argv[1], mode = argv[2];
  // The fresh rank that the grow scenario's rank 0 launches.
  if (name == "grow-new" && mode == "--id" && argc >= 8) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    return growNewRank(argv[3], std::atoi(argv[5]), std::atoi(argv[7]));
  }
  const Scenario *scenario = findScenario(name);
  if (!scenario) {
    std::fprintf(stderr, "%s: unknown scenario %s\n", argv[0], name.c_str());
    usage(stderr, argv[0]);
    return 2;
  }
  if (scenario->gpu && !gpuBuild) {
    std::fprintf(stderr, "%s: scenario %s needs device buffers: coll-rank-check-gpu runs it\n",
                 argv[0], name.c_str());
    return 2;
  }
  if ((scenario->launch == Launch::AllInProcess) != (mode == "--all")) {
    std::fprintf(stderr, "%s: scenario %s runs %s\n", argv[0], name.c_str(),
                 scenario->launch == Launch::AllInProcess
                     ? "every rank in this process: --all N"
                     : "one rank per process: --id, --env, --mpi or --fork N");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (mode == "--fork" && argc >= 4)
    return forkRanks(argv[0], name, std::atoi(argv[3]), scenario->lastRankDies,
                     scenario->victim);
  if (mode == "--all") {
    if (argc < 4) {
      usage(stderr, argv[0]);
      return 2;
    }
    return scenario->runAll(std::atoi(argv[3]));
  }
  if (scenario->watchdogMs)
    setenv("COLL_WATCHDOG_MS",
           std::to_string(coll::testing::scaledMs(scenario->watchdogMs)).c_str(), 1);
#if COLL_TEST_GPU
  if (scenario->gpu && !selectGpu())
    return 77;
#endif
  if (scenario->beforeInit)
    scenario->beforeInit();
  if (mode == "--id" && argc >= 8) {
    collUniqueId id;
    std::string hex = argv[3];
    if (hex.size() != 2 * sizeof id.internal)
      return 2;
    for (size_t i = 0; i < sizeof id.internal; ++i)
      id.internal[i] = char(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
    rank = std::atoi(argv[5]);
    nranks = std::atoi(argv[7]);
    check(collCommInitRank(&comm, nranks, id, rank), "init");
  } else if (mode == "--env") {
    check(collCommInitFromEnv(&comm), "init from env");
    check(collCommUserRank(comm, &rank), "user rank");
    check(collCommCount(comm, &nranks), "count");
  }
#if COLL_TEST_MPI
  else if (mode == "--mpi") {
    MPI_Init(&argc, &argv);
    check(collCommInitFromMPI(MPI_COMM_WORLD, &comm), "init from MPI");
    check(collCommUserRank(comm, &rank), "user rank");
    check(collCommCount(comm, &nranks), "count");
  }
#endif
  else {
    std::fprintf(stderr, "%s: unknown mode %s\n", argv[0], mode.c_str());
    return 2;
  }
  const bool small = std::getenv("COLL_TEST_SMALL") != nullptr;
  scenario->run(small);
  check(collCommFinalize(comm), "finalize");
  check(collCommDestroy(comm), "destroy");
  if (scenario->afterDestroy)
    scenario->afterDestroy();
  std::printf("rank %d: ok %ld checks\n", rank, checks);
#if COLL_TEST_MPI
  if (mode == "--mpi")
    MPI_Finalize();
#endif
  return 0;
}
