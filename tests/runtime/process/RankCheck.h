//===- RankCheck.h - What the rank program's scenarios share ----*- C++ -*-===//
//
// coll-rank-check is one rank of a job, written against coll.h alone (see
// Main.cpp for how it is launched and the table of its scenarios). Each
// family of scenarios is a file of its own:
//   Collectives.cpp   every collective checked in closed form, split, trace
//   PointToPoint.cpp  sends and receives
//   Faults.cpp        a rank killed, stopped or aborting, mismatched calls,
//                     bad arguments
//   Device.cpp        the emulated device and, in coll-rank-check-gpu (built
//                     with COLL_TEST_GPU), device buffers on a GPU
// They share this rank's communicator and the way a check fails.
//
//===----------------------------------------------------------------------===//

#ifndef COLL_TESTS_RUNTIME_PROCESS_RANKCHECK_H
#define COLL_TESTS_RUNTIME_PROCESS_RANKCHECK_H

#include "coll.h"

#include <chrono>
#include <string>

namespace rankcheck {

/// This rank, the job's size and the communicator the scenario runs on
/// (Main.cpp makes it; a scenario that aborts it sets it to null).
extern int rank, nranks;
extern collComm_t comm;
/// Checks passed so far, printed by "rank R: ok N checks".
extern long checks;

/// Prints "rank R: FAIL what" and exits 1.
[[noreturn]] void failNow(const std::string &what);
/// failNow with the error and collGetLastError(comm) unless `r` is collSuccess.
void check(collResult_t r, const char *what);

using Clock = std::chrono::steady_clock;

enum class Coll {
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Broadcast,
  Reduce,
  Gather,
  Scatter
};
const char *collName(Coll c);

//===----------------------------------------------------------------------===//
// The scenarios, by family (Main.cpp's table says which runs when)
//===----------------------------------------------------------------------===//

// Collectives.cpp
void collectives(bool small);
/// `rounds` calls of every collective (fp32 sums of about 1000 elements,
/// in place every other round, the root moving), each checked.
void everyCollectiveRounds(int rounds);
void splitScenario();
void traceScenario();
void windowsScenario(bool small);
void windowsMismatchScenario();
void windowsBuiltinScenario();
void windowsDeviceRulesScenario();
void smallRulesScenario();
void alltoallWithoutProgramsScenario();

// PointToPoint.cpp
void p2p(bool small);
/// collIsend, collIrecv: tags, any source, both posting orders, truncation.
void tagged(bool small);
/// The last rank dies while the others wait on tagged requests to and from it.
void taggedLost();

// Faults.cpp
void fault(bool stop);
void loopScenario();
void abortScenario();
void mismatch();
void mismatchFits();
void errors();
/// A rank is killed (SIGKILL) 300 ms into a stream of allreduces (`idle`:
/// while the others wait outside any call, asking collCommGetAsyncError);
/// the survivors see the error, revoke, shrink without it and run 100
/// calls of every collective on the new communicator.
void lostRank(bool idle);
/// 4 ranks: the last is killed, the survivors shrink to 3, then grow back
/// to 4 with a fresh process (which rank 0 launches: "grow-new").
void growScenario();
/// The fresh rank of growScenario (--id HEX --rank R --nranks N from the
/// root, joining through collCommGrow).
int growNewRank(const char *id, int rank, int nranks);

// Device.cpp
/// Where the compared calls run: a second communicator on the emulated
/// device (collConfig_t emulatedDevice) with host buffers, or `comm` itself
/// with device buffers on a GPU.
enum class Target { Emulated, Gpu };
void compareScenario(bool small, Target target);
void lateCuda();
/// N ranks of this process on an emulated GPU too small for some programs.
int deviceRefused(int n);
#if COLL_TEST_GPU
/// Makes GPU 0 current, as NCCL programs do before init; false (after
/// printing "rank ?: skip: ...") where there is no CUDA device.
bool selectGpu();
void gpuKill();
void gpuLost();
void gpuAbort();
void gpuUnserved();
void gpuUnmappable();
void gpuTrace();
void gpuWindows();
/// gpu-trace's COLL_TRACE, set before init, and the check of the file it
/// wrote, after destroy.
void setGpuTracePath();
void checkGpuTraceFile();
int allInOneProcess(int n);
#endif

} // namespace rankcheck

#endif // COLL_TESTS_RUNTIME_PROCESS_RANKCHECK_H
