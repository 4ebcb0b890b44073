/*===- nccl_dropin_check.c - libcoll_nccl.so against a stand-in real NCCL --===*
 *
 *   nccl-dropin-check SCENARIO NRANKS
 *
 * Forks NRANKS ranks of an NCCL program (linked to libcoll_nccl.so and to
 * the stand-in CUDA runtime); rank 0 makes the unique id and hands it to the
 * others through a pipe. COLL_NCCL_LIB names the stand-in real NCCL, whose
 * record of calls each rank reads to check what went underneath. Scenarios:
 *   host       host buffers: every collective runs on Coll, results checked;
 *              the real communicator is made beside; nothing else reaches it
 *   fallback   device buffers, fp8, a PreMulSum op: to the real NCCL with the
 *              program's arguments; host calls still on Coll
 *   forced     COLL_FORCE_FALLBACK=allreduce: host allreduce to the real one
 *   validate   bad arguments: NCCL's codes and messages, nothing forwarded
 *   group      deferral to ncclGroupEnd, a mixed group, a failed group
 *   abort      a peer aborts: the call fails, the async error says so,
 *              ncclCommAbort works; the real library's async error is passed
 *   duplicate  ranks on one GPU: Coll-only, device calls fail saying why
 *   dupforced  the same with COLL_FORCE_FALLBACK=all: init fails saying why
 *   nolib      COLL_NCCL_LIB unloadable: host calls work, others fail
 *   tuning     COLL_TUNING_FILE sends allreduces up to 4K to `nccl`: small
 *              ones reach the real NCCL, larger ones run on Coll
 *   refused    host calls on the emulated device of a GPU too small for
 *              some programs (COLL_EMULATED_DEVICE, COLL_EMULATED_GPUS=1,
 *              COLL_EMULATED_SMS=1, set by the caller): an allreduce whose
 *              first program does not fit runs on the next, on Coll; an
 *              alltoall no program fits goes to the real NCCL and succeeds
 * Exits 0 when every rank passed; nothing of Coll's may remain in /dev/shm.
 *
 *===----------------------------------------------------------------------===*/

#include <nccl.h>

#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "NcclTestRanks.h"
#include "TimeScale.h"

static int myRank = -1;
static int failures = 0;

#define CHECK(cond, ...)                                                                        \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      fprintf(stderr, "rank %d: FAIL %s:%d: %s: ", myRank, __FILE__, __LINE__, #cond);          \
      fprintf(stderr, __VA_ARGS__);                                                             \
      fprintf(stderr, "\n");                                                                    \
      ++failures;                                                                               \
    }                                                                                           \
  } while (0)

#define OK(call)                                                                                \
  do {                                                                                          \
    ncclResult_t r_ = (call);                                                                   \
    CHECK(r_ == ncclSuccess, "%s -> %d (%s): %s", #call, (int)r_, ncclGetErrorString(r_),       \
          ncclGetLastError(NULL));                                                              \
  } while (0)

static int recorded(const char *needle) { return countOf(standinCalls(), needle); }

static int noCollectiveRecorded(void) {
  static const char *names[] = {"ncclAllReduce", "ncclAllGather", "ncclReduceScatter",
                                "ncclAlltoAll",  "ncclBroadcast", "ncclReduce ",
                                "ncclGather",    "ncclScatter",   "ncclSend",
                                "ncclRecv"};
  for (size_t i = 0; i < sizeof names / sizeof *names; ++i)
    if (recorded(names[i]))
      return 0;
  return 1;
}

static ncclComm_t init(int rank, int nranks, int idFd[2], int device, ncclResult_t *result) {
  ncclUniqueId id;
  if (rank == 0) {
    OK(ncclGetUniqueId(&id));
    for (int i = 1; i < nranks; ++i)
      if (write(idFd[1], &id, sizeof id) != sizeof id)
        CHECK(0, "cannot pass the id");
  } else if (read(idFd[0], &id, sizeof id) != sizeof id) {
    CHECK(0, "cannot read the id");
  }
  cudaSetDevice(device);
  ncclComm_t comm = NULL;
  *result = ncclCommInitRank(&comm, nranks, id, rank);
  return comm;
}

static ncclComm_t initOk(int rank, int nranks, int idFd[2], int device) {
  ncclResult_t r;
  ncclComm_t comm = init(rank, nranks, idFd, device, &r);
  CHECK(r == ncclSuccess && comm, "ncclCommInitRank -> %d: %s", (int)r, ncclGetLastError(NULL));
  if (!comm)
    exit(1);
  return comm;
}

/*===--- host ------------------------------------------------------------===*/

static void hostCollectives(ncclComm_t comm, int rank, int n) {
  const size_t sizes[] = {0, 1, 7, 1000, 1 << 18};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; ++s) {
    size_t count = sizes[s];
    float *in = malloc((count + 1) * n * sizeof(float));
    float *out = malloc((count + 1) * n * sizeof(float));
    int32_t *iin = malloc((count + 1) * n * sizeof(int32_t));
    int32_t *iout = malloc((count + 1) * n * sizeof(int32_t));
    for (size_t i = 0; i < count * n; ++i) {
      in[i] = (float)(rank + 1) * (float)(i % 13);
      iin[i] = (int32_t)(rank * 1000 + (int)(i % 977));
    }
    /* allreduce, sum of floats and max of ints */
    OK(ncclAllReduce(in, out, count, ncclFloat, ncclSum, comm, NULL));
    for (size_t i = 0; i < count; ++i)
      if (fabsf(out[i] - (float)(n * (n + 1) / 2) * (float)(i % 13)) > 1e-3f) {
        CHECK(0, "allreduce sum count %zu at %zu: %f", count, i, out[i]);
        break;
      }
    OK(ncclAllReduce(iin, iout, count, ncclInt32, ncclMax, comm, NULL));
    for (size_t i = 0; i < count; ++i)
      if (iout[i] != (n - 1) * 1000 + (int)(i % 977)) {
        CHECK(0, "allreduce max count %zu at %zu: %d", count, i, iout[i]);
        break;
      }
    /* in place */
    memcpy(iout, iin, count * sizeof(int32_t));
    OK(ncclAllReduce(iout, iout, count, ncclInt32, ncclSum, comm, NULL));
    for (size_t i = 0; i < count; ++i)
      if (iout[i] != 1000 * n * (n - 1) / 2 + n * (int)(i % 977)) {
        CHECK(0, "in-place allreduce count %zu at %zu: %d", count, i, iout[i]);
        break;
      }
    /* allgather */
    OK(ncclAllGather(iin, iout, count, ncclInt32, comm, NULL));
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i)
        if (iout[r * count + i] != r * 1000 + (int)(i % 977)) {
          CHECK(0, "allgather count %zu from %d at %zu: %d", count, r, i, iout[r * count + i]);
          r = n;
          break;
        }
    /* reducescatter: block `rank` of the sum */
    OK(ncclReduceScatter(iin, iout, count, ncclInt32, ncclSum, comm, NULL));
    for (size_t i = 0; i < count; ++i) {
      size_t j = rank * count + i;
      if (iout[i] != 1000 * n * (n - 1) / 2 + n * (int)(j % 977)) {
        CHECK(0, "reducescatter count %zu at %zu: %d", count, i, iout[i]);
        break;
      }
    }
    /* alltoall: block r of the output is block `rank` of rank r's input */
    OK(ncclAlltoAll(iin, iout, count, ncclInt32, comm, NULL));
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) {
        size_t j = rank * count + i;
        if (iout[r * count + i] != r * 1000 + (int)(j % 977)) {
          CHECK(0, "alltoall count %zu from %d at %zu: %d", count, r, i, iout[r * count + i]);
          r = n;
          break;
        }
      }
    /* broadcast from the last rank; bcast in place from rank 0 */
    int root = n - 1;
    OK(ncclBroadcast(iin, iout, count, ncclInt32, root, comm, NULL));
    for (size_t i = 0; i < count; ++i)
      if (iout[i] != root * 1000 + (int)(i % 977)) {
        CHECK(0, "broadcast count %zu at %zu: %d", count, i, iout[i]);
        break;
      }
    memcpy(iout, iin, count * sizeof(int32_t));
    OK(ncclBcast(iout, count, ncclInt32, 0, comm, NULL));
    for (size_t i = 0; i < count; ++i)
      if (iout[i] != (int)(i % 977)) {
        CHECK(0, "bcast count %zu at %zu: %d", count, i, iout[i]);
        break;
      }
    /* reduce to rank 0 (recvbuff NULL elsewhere) */
    OK(ncclReduce(iin, rank == 0 ? iout : NULL, count, ncclInt32, ncclSum, 0, comm, NULL));
    if (rank == 0)
      for (size_t i = 0; i < count; ++i)
        if (iout[i] != 1000 * n * (n - 1) / 2 + n * (int)(i % 977)) {
          CHECK(0, "reduce count %zu at %zu: %d", count, i, iout[i]);
          break;
        }
    /* a ring of sends and receives in one group */
    OK(ncclGroupStart());
    OK(ncclSend(iin, count, ncclInt32, (rank + 1) % n, comm, NULL));
    OK(ncclRecv(iout, count, ncclInt32, (rank + n - 1) % n, comm, NULL));
    OK(ncclGroupEnd());
    for (size_t i = 0; i < count; ++i)
      if (iout[i] != ((rank + n - 1) % n) * 1000 + (int)(i % 977)) {
        CHECK(0, "send/recv count %zu at %zu: %d", count, i, iout[i]);
        break;
      }
    free(in);
    free(out);
    free(iin);
    free(iout);
  }
}

static void scenarioHost(int rank, int n, int idFd[2]) {
  int version = 0;
  OK(ncclGetVersion(&version));
  CHECK(version == 22899, "ncclGetVersion gave %d, not the stand-in's 22899", version);
  ncclComm_t comm = initOk(rank, n, idFd, rank);
  int count = 0, me = -1, dev = -1;
  OK(ncclCommCount(comm, &count));
  OK(ncclCommUserRank(comm, &me));
  CHECK(count == n && me == rank, "count %d rank %d", count, me);
  char expect[64];
  snprintf(expect, sizeof expect, "ncclCommInitRankConfig nranks=%d rank=%d id=standin-id-", n,
           rank);
  CHECK(recorded(expect) == 1, "the real communicator was not made beside: %s", standinCalls());
  OK(ncclCommCuDevice(comm, &dev));
  hostCollectives(comm, rank, n);
  /* avg (Coll has it) of floats */
  float x = (float)rank, y = -1;
  OK(ncclAllReduce(&x, &y, 1, ncclFloat, ncclAvg, comm, NULL));
  CHECK(fabsf(y - (float)(n - 1) / 2) < 1e-5f, "avg gave %f", y);
  CHECK(noCollectiveRecorded(), "a host call reached the real NCCL:\n%s", standinCalls());
  ncclResult_t async = ncclInternalError;
  OK(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclSuccess, "async error %d", (int)async);
  OK(ncclCommFinalize(comm));
  OK(ncclCommDestroy(comm));
  CHECK(recorded("ncclCommFinalize") == 1 && recorded("ncclCommDestroy") == 1,
        "finalize/destroy did not reach the real communicator");
}

/*===--- fallback, forced ------------------------------------------------===*/

static void scenarioFallback(int rank, int n, int idFd[2]) {
  ncclComm_t comm = initOk(rank, n, idFd, rank);
  void *dsend = NULL, *drecv = NULL;
  cudaMalloc(&dsend, 4096);
  cudaMalloc(&drecv, 4096 * n);
  cudaStream_t stream = (cudaStream_t)(uintptr_t)0x5eed;
  char line[256];
  /* twice: the log says it once */
  for (int k = 0; k < 2; ++k)
    OK(ncclAllReduce(dsend, drecv, 1024, ncclFloat, ncclSum, comm, stream));
  snprintf(line, sizeof line,
           "ncclAllReduce rank=%d send=%p recv=%p count=1024 type=7 op=0 stream=%p", rank, dsend,
           drecv, (void *)stream);
  CHECK(recorded(line) == 2, "expected twice '%s' in:\n%s", line, standinCalls());
  OK(ncclAllGather(dsend, drecv, 100, ncclInt64, comm, stream));
  snprintf(line, sizeof line, "ncclAllGather rank=%d send=%p recv=%p count=100 type=4", rank,
           dsend, drecv);
  CHECK(recorded(line) == 1, "expected '%s' in:\n%s", line, standinCalls());
  OK(ncclBroadcast(dsend, drecv, 5, ncclUint8, n - 1, comm, stream));
  snprintf(line, sizeof line, "ncclBroadcast rank=%d send=%p recv=%p count=5 type=1 root=%d",
           rank, dsend, drecv, n - 1);
  CHECK(recorded(line) == 1, "expected '%s' in:\n%s", line, standinCalls());
  /* fp8 on the host: Coll has no fp8 */
  unsigned char b8[16] = {0}, r8[16];
  OK(ncclAllReduce(b8, r8, 16, ncclFloat8e4m3, ncclMax, comm, NULL));
  snprintf(line, sizeof line, "ncclAllReduce rank=%d send=%p recv=%p count=16 type=10 op=2", rank,
           (void *)b8, (void *)r8);
  CHECK(recorded(line) == 1, "expected '%s' in:\n%s", line, standinCalls());
  /* a PreMulSum op: made by the real NCCL, calls with it go there */
  float scalar = 0.5f, hs[4] = {1, 2, 3, 4}, hr[4];
  ncclRedOp_t premul;
  OK(ncclRedOpCreatePreMulSum(&premul, &scalar, ncclFloat, ncclScalarHostImmediate, comm));
  CHECK((int)premul >= (int)ncclNumOps, "premul op %d", (int)premul);
  OK(ncclAllReduce(hs, hr, 4, ncclFloat, premul, comm, NULL));
  snprintf(line, sizeof line, "ncclAllReduce rank=%d send=%p recv=%p count=4 type=7 op=%d", rank,
           (void *)hs, (void *)hr, (int)premul);
  CHECK(recorded(line) == 1, "expected '%s' in:\n%s", line, standinCalls());
  OK(ncclRedOpDestroy(premul, comm));
  CHECK(ncclAllReduce(hs, hr, 4, ncclFloat, premul, comm, NULL) == ncclInvalidArgument,
        "a destroyed op was accepted");
  /* host data still on Coll */
  int before = recorded("ncclAllGather");
  int32_t v = rank, all[16];
  OK(ncclAllGather(&v, all, 1, ncclInt32, comm, NULL));
  for (int r = 0; r < n; ++r)
    CHECK(all[r] == r, "allgather[%d] = %d", r, all[r]);
  CHECK(recorded("ncclAllGather") == before, "a host allgather reached the real NCCL");
  cudaFree(dsend);
  cudaFree(drecv);
  OK(ncclCommFinalize(comm)); /* every rank is done before any leaves */
  OK(ncclCommDestroy(comm));
}

static void scenarioForced(int rank, int n, int idFd[2]) {
  ncclComm_t comm = initOk(rank, n, idFd, rank);
  float x = 1, y = 0;
  OK(ncclAllReduce(&x, &y, 1, ncclFloat, ncclSum, comm, NULL));
  char line[160];
  snprintf(line, sizeof line, "ncclAllReduce rank=%d send=%p recv=%p count=1 type=7 op=0", rank,
           (void *)&x, (void *)&y);
  CHECK(recorded(line) == 1, "the forced allreduce did not reach the real NCCL:\n%s",
        standinCalls());
  int32_t v = rank + 10, all[16];
  OK(ncclAllGather(&v, all, 1, ncclInt32, comm, NULL));
  for (int r = 0; r < n; ++r)
    CHECK(all[r] == r + 10, "allgather[%d] = %d", r, all[r]);
  CHECK(recorded("ncclAllGather") == 0, "allgather is not forced, yet reached the real NCCL");
  OK(ncclCommFinalize(comm)); /* every rank is done before any leaves */
  OK(ncclCommDestroy(comm));
}

/*===--- validate --------------------------------------------------------===*/

#define EXPECT_ERR(call, code, text)                                                            \
  do {                                                                                          \
    ncclResult_t r_ = (call);                                                                   \
    CHECK(r_ == (code), "%s -> %d, expected %d", #call, (int)r_, (int)(code));                  \
    CHECK(strstr(ncclGetLastError(NULL), (text)) != NULL, "%s: last error '%s' lacks '%s'",     \
          #call, ncclGetLastError(NULL), (text));                                               \
  } while (0)

static void scenarioValidate(int rank, int n, int idFd[2]) {
  float buf[8] = {0}, out[64];
  EXPECT_ERR(ncclAllReduce(buf, out, 8, ncclFloat, ncclSum, NULL, NULL), ncclInvalidArgument,
             "comm is NULL");
  EXPECT_ERR(ncclGroupEnd(), ncclInvalidUsage, "without ncclGroupStart");
  ncclUniqueId bogus;
  memset(&bogus, 7, sizeof bogus);
  ncclComm_t none = NULL;
  EXPECT_ERR(ncclCommInitRank(&none, n, bogus, rank), ncclInvalidArgument, "unique id");
  EXPECT_ERR(ncclCommInitRank(&none, n, bogus, n), ncclInvalidArgument, "invalid");
  ncclComm_t comm = initOk(rank, n, idFd, rank);
  EXPECT_ERR(ncclAllReduce(buf, out, 8, (ncclDataType_t)99, ncclSum, comm, NULL),
             ncclInvalidArgument, "datatype 99");
  EXPECT_ERR(ncclAllReduce(buf, out, 8, ncclFloat, (ncclRedOp_t)42, comm, NULL),
             ncclInvalidArgument, "reduction op 42");
  EXPECT_ERR(ncclAllGather(buf, out, SIZE_MAX / 2, ncclFloat, comm, NULL), ncclInvalidArgument,
             "too large");
  EXPECT_ERR(ncclBroadcast(buf, out, 8, ncclFloat, n, comm, NULL), ncclInvalidArgument,
             "out of range");
  EXPECT_ERR(ncclSend(buf, 8, ncclFloat, -1, comm, NULL), ncclInvalidArgument, "peer -1");
  EXPECT_ERR(ncclAllReduce(NULL, out, 8, ncclFloat, ncclSum, comm, NULL), ncclInvalidArgument,
             "sendbuff is NULL");
  EXPECT_ERR(ncclCommCount(comm, NULL), ncclInvalidArgument, "NULL argument");
  CHECK(strstr(ncclGetLastError(comm), "NULL argument") != NULL, "per-comm last error '%s'",
        ncclGetLastError(comm));
  CHECK(strcmp(ncclGetErrorString(ncclInvalidArgument), "") != 0, "no error string");
  CHECK(noCollectiveRecorded(), "an invalid call reached the real NCCL:\n%s", standinCalls());
  /* count 0 with NULL buffers is valid */
  OK(ncclAllReduce(NULL, NULL, 0, ncclFloat, ncclSum, comm, NULL));
  OK(ncclCommFinalize(comm)); /* every rank is done before any leaves */
  OK(ncclCommDestroy(comm));
}

/*===--- group -----------------------------------------------------------===*/

static void scenarioGroup(int rank, int n, int idFd[2]) {
  ncclComm_t comm = initOk(rank, n, idFd, rank);
  int32_t a = rank + 1, ar = -1, g[16];
  for (int i = 0; i < 16; ++i)
    g[i] = -1;
  void *dsend = NULL, *drecv = NULL;
  cudaMalloc(&dsend, 64);
  cudaMalloc(&drecv, 64);
  OK(ncclGroupStart());
  OK(ncclAllReduce(&a, &ar, 1, ncclInt32, ncclSum, comm, NULL));
  OK(ncclAllReduce(dsend, drecv, 16, ncclInt32, ncclSum, comm, NULL));
  OK(ncclGroupStart()); /* nested */
  OK(ncclAllGather(&a, g, 1, ncclInt32, comm, NULL));
  OK(ncclGroupEnd());
  CHECK(ar == -1 && g[0] == -1, "a grouped call ran before ncclGroupEnd");
  CHECK(recorded("ncclAllReduce") == 0, "a grouped call reached the real NCCL before GroupEnd");
  OK(ncclGroupEnd());
  CHECK(ar == n * (n + 1) / 2, "grouped allreduce gave %d", ar);
  for (int r = 0; r < n; ++r)
    CHECK(g[r] == r + 1, "grouped allgather[%d] = %d", r, g[r]);
  char line[160];
  snprintf(line, sizeof line, "ncclAllReduce rank=%d send=%p recv=%p count=16 type=2", rank,
           dsend, drecv);
  CHECK(recorded(line) == 1, "the grouped device call did not reach the real NCCL:\n%s",
        standinCalls());
  /* an invalid call fails the whole group */
  ar = -1;
  OK(ncclGroupStart());
  OK(ncclAllReduce(&a, &ar, 1, ncclInt32, ncclSum, comm, NULL));
  CHECK(ncclAllReduce(&a, &ar, 1, (ncclDataType_t)77, ncclSum, comm, NULL) == ncclInvalidArgument,
        "the bad call was accepted");
  CHECK(ncclGroupEnd() == ncclInvalidArgument, "ncclGroupEnd did not report the group's error");
  CHECK(ar == -1, "a call of a failed group ran");
  /* the communicator still works */
  OK(ncclAllReduce(&a, &ar, 1, ncclInt32, ncclSum, comm, NULL));
  CHECK(ar == n * (n + 1) / 2, "allreduce after a failed group gave %d", ar);
  cudaFree(dsend);
  cudaFree(drecv);
  OK(ncclCommFinalize(comm)); /* every rank is done before any leaves */
  OK(ncclCommDestroy(comm));
}

/*===--- abort -----------------------------------------------------------===*/

static void scenarioAbort(int rank, int n, int idFd[2]) {
  ncclComm_t comm = initOk(rank, n, idFd, rank);
  /* the real communicator's async error is reported when Coll's is fine */
  ncclResult_t async = ncclSuccess;
  setenv("COLL_STANDIN_ASYNC_ERROR", "6", 1);
  OK(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclRemoteError, "the real NCCL's async error was not passed on: %d",
        (int)async);
  unsetenv("COLL_STANDIN_ASYNC_ERROR");
  int32_t x = 1, y = 0;
  OK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL));
  /* Rank 0 says (through the id pipe, empty since init) when its first call
   * has returned: an abort while a peer still finishes the call it shares
   * with the aborting rank stops that call too. */
  char done = 1;
  if (rank == 0) {
    for (int r = 1; r < n; ++r)
      CHECK(write(idFd[1], &done, 1) == 1, "cannot write to the id pipe");
  } else {
    CHECK(read(idFd[0], &done, 1) == 1, "cannot read from the id pipe");
  }
  if (rank != 0) {
    /* abort instead of joining rank 0's next call */
    OK(ncclCommAbort(comm));
    CHECK(recorded("ncclCommAbort") == 1, "abort did not reach the real communicator");
    return;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ncclResult_t r = ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  CHECK(r != ncclSuccess, "an allreduce without its peers succeeded");
  CHECK(t1.tv_sec - t0.tv_sec < coll_test_scaled(60), "the failure took %ld s",
        (long)(t1.tv_sec - t0.tv_sec));
  async = ncclSuccess;
  OK(ncclCommGetAsyncError(comm, &async));
  CHECK(async != ncclSuccess, "ncclCommGetAsyncError reports success on a broken communicator");
  CHECK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL) == async,
        "a broken communicator accepted a call");
  OK(ncclCommAbort(comm));
  CHECK(recorded("ncclCommAbort") == 1, "abort did not reach the real communicator");
}

/*===--- duplicate GPUs, no library --------------------------------------===*/

static void scenarioDuplicate(int rank, int n, int idFd[2]) {
  ncclComm_t comm = initOk(rank, n, idFd, 0);
  CHECK(recorded("ncclCommInitRankConfig") == 0, "the real NCCL was asked for duplicate GPUs");
  int32_t x = rank, y = -1;
  OK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL));
  CHECK(y == n * (n - 1) / 2, "allreduce gave %d", y);
  void *d = NULL;
  cudaMalloc(&d, 64);
  ncclResult_t r = ncclAllReduce(d, d, 4, ncclInt32, ncclSum, comm, NULL);
  CHECK(r == ncclInvalidUsage, "a device call without the real NCCL gave %d", (int)r);
  CHECK(strstr(ncclGetLastError(comm), "duplicate GPUs"), "message: %s", ncclGetLastError(comm));
  cudaFree(d);
  OK(ncclCommFinalize(comm)); /* every rank is done before any leaves */
  OK(ncclCommDestroy(comm));
}

static void scenarioDupForced(int rank, int n, int idFd[2]) {
  ncclResult_t r;
  ncclComm_t comm = init(rank, n, idFd, 0, &r);
  CHECK(r == ncclInvalidUsage && !comm, "init gave %d", (int)r);
  CHECK(strstr(ncclGetLastError(NULL), "duplicate GPUs") &&
            strstr(ncclGetLastError(NULL), "COLL_FORCE_FALLBACK"),
        "message: %s", ncclGetLastError(NULL));
}

static void scenarioNoLib(int rank, int n, int idFd[2]) {
  int version = 0;
  OK(ncclGetVersion(&version));
  CHECK(version == NCCL_VERSION_CODE, "version %d", version);
  ncclComm_t comm = initOk(rank, n, idFd, rank);
  int32_t x = rank, y = -1;
  OK(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, NULL));
  CHECK(y == n * (n - 1) / 2, "allreduce gave %d", y);
  unsigned char b[4] = {0};
  CHECK(ncclAllReduce(b, b, 4, ncclFloat8e5m2, ncclSum, comm, NULL) == ncclInvalidUsage,
        "fp8 without the real NCCL did not fail");
  CHECK(strstr(ncclGetLastError(comm), "cannot load the real NCCL"), "message: %s",
        ncclGetLastError(comm));
  void *p = NULL;
  CHECK(ncclMemAlloc(&p, 64) == ncclInvalidUsage, "ncclMemAlloc without the real NCCL");
  OK(ncclCommFinalize(comm)); /* every rank is done before any leaves */
  OK(ncclCommDestroy(comm));
}

static void scenarioTuning(int rank, int n, int idFd[2]) {
  ncclComm_t comm = initOk(rank, n, idFd, rank);
  float small[16], smallOut[16];
  for (int i = 0; i < 16; ++i)
    small[i] = (float)rank;
  OK(ncclAllReduce(small, smallOut, 16, ncclFloat, ncclSum, comm, NULL));
  char line[160];
  snprintf(line, sizeof line, "ncclAllReduce rank=%d send=%p recv=%p count=16 type=7 op=0", rank,
           (void *)small, (void *)smallOut);
  CHECK(recorded(line) == 1, "the tuning table's small allreduce did not reach the real NCCL:\n%s",
        standinCalls());
  enum { Big = 1 << 14 };
  float *big = malloc(Big * sizeof(float)), *bigOut = malloc(Big * sizeof(float));
  for (int i = 0; i < Big; ++i)
    big[i] = (float)(rank + i % 5);
  OK(ncclAllReduce(big, bigOut, Big, ncclFloat, ncclSum, comm, NULL));
  for (int i = 0; i < Big; ++i)
    if (bigOut[i] != (float)(n * (n - 1) / 2 + n * (i % 5))) {
      CHECK(0, "large allreduce at %d: %f", i, bigOut[i]);
      break;
    }
  CHECK(recorded("ncclAllReduce") == 1, "the large allreduce reached the real NCCL");
  free(big);
  free(bigOut);
  OK(ncclCommFinalize(comm));
  OK(ncclCommDestroy(comm));
}

/*===--- refused ---------------------------------------------------------===*/

static void scenarioRefused(int rank, int n, int idFd[2]) {
  ncclComm_t comm = initOk(rank, n, idFd, rank); /* distinct GPUs: a real communicator */
  const size_t count = 1 << 18;
  float *x = malloc(count * sizeof(float));
  for (size_t i = 0; i < count; ++i)
    x[i] = (float)(rank + (int)(i % 5));
  OK(ncclAllReduce(x, x, count, ncclFloat, ncclSum, comm, NULL));
  for (size_t i = 0; i < count; i += 997)
    if (x[i] != (float)(n * (n - 1) / 2 + n * (int)(i % 5))) {
      CHECK(0, "allreduce element %zu is %f", i, x[i]);
      break;
    }
  CHECK(recorded("ncclAllReduce") == 0, "the allreduce reached the real NCCL:\n%s",
        standinCalls());
  float in[8 * 16], out[8 * 16];
  for (int i = 0; i < 8 * 16; ++i)
    in[i] = (float)i;
  OK(ncclAlltoAll(in, out, 16, ncclFloat, comm, NULL));
  char line[160];
  snprintf(line, sizeof line, "ncclAlltoAll rank=%d send=%p recv=%p count=16 type=7", rank,
           (void *)in, (void *)out);
  CHECK(recorded(line) == 1, "the alltoall no program fits did not reach the real NCCL:\n%s",
        standinCalls());
  free(x);
  OK(ncclCommFinalize(comm));
  OK(ncclCommDestroy(comm));
}

/*===--- driver ----------------------------------------------------------===*/

static void (*run)(int, int, int[2]);

static int rankMain(int r, int n, int idFd[2]) {
  myRank = r;
  run(r, n, idFd);
  if (failures == 0)
    printf("rank %d: ok\n", r);
  return failures ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s SCENARIO NRANKS\n", argv[0]);
    return 2;
  }
  const char *scenario = argv[1];
  int n = atoi(argv[2]);
  if (!strcmp(scenario, "host")) run = scenarioHost;
  else if (!strcmp(scenario, "fallback")) run = scenarioFallback;
  else if (!strcmp(scenario, "forced")) run = scenarioForced;
  else if (!strcmp(scenario, "validate")) run = scenarioValidate;
  else if (!strcmp(scenario, "group")) run = scenarioGroup;
  else if (!strcmp(scenario, "abort")) run = scenarioAbort;
  else if (!strcmp(scenario, "duplicate")) run = scenarioDuplicate;
  else if (!strcmp(scenario, "dupforced")) run = scenarioDupForced;
  else if (!strcmp(scenario, "nolib")) run = scenarioNoLib;
  else if (!strcmp(scenario, "tuning")) run = scenarioTuning;
  else if (!strcmp(scenario, "refused")) run = scenarioRefused;
  if (!run || n < 1 || n > 8) {
    fprintf(stderr, "unknown scenario '%s' or bad rank count\n", scenario);
    return 2;
  }
  int skipped = 0;
  int bad = forkRanks(n, 120, rankMain, &skipped);
  bad += skipped; /* nothing here skips */
  if (shmLeftovers())
    ++bad;
  printf("%s with %d ranks: %s\n", scenario, n, bad ? "FAILED" : "passed");
  return bad ? 1 : 0;
}
