/*===- nccl_gpu_check.c - libcoll_nccl.so on a real GPU ---------------------===*
 *
 *   nccl-gpu-check SCENARIO NRANKS
 *   nccl-gpu-check SCENARIO --env
 *
 * An NCCL program (linked to libcoll_nccl.so as to libnccl, and to the CUDA
 * runtime) that forks NRANKS ranks before touching CUDA; rank 0 makes the
 * unique id and hands it to the others through a pipe. Every rank uses
 * CUDA device 0, so ranks share it. With --env it is one rank of a job a
 * launcher started (RANK, WORLD_SIZE), and rank 0 hands the id over in the
 * file $COLL_TEST_DIR/nccl-id (tests/runtime/multihost). Scenarios:
 *   coll   device buffers on the program's streams: every collective and a
 *          group run on Coll (the real NCCL refuses duplicate GPUs, so none
 *          is made) and are checked; a call only the real NCCL could run
 *          (fp8) fails saying why; the async error stays ncclSuccess. With
 *          one rank Coll copies on the stream, and fp8 goes to the real
 *          NCCL (made beside Coll's communicator) and succeeds
 *   windows  ncclMemAlloc memory registered with ncclCommWindowRegister:
 *          allreduces on it, served by the direct two-shot from 4 MiB (the
 *          rank's COLL_DEBUG_FILE says so), and the misuse refused
 *   real   one rank with COLL_FORCE_FALLBACK=all (set by the caller) and
 *          COLL_NCCL_LIB naming the real libnccl.so.2: the same calls on the
 *          real NCCL, whose version ncclGetVersion reports
 * Exits 0 when every rank passed, 77 (skip) when there is no CUDA device.
 *
 *===----------------------------------------------------------------------===*/

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "NcclTestRanks.h"
#include "TimeScale.h"

static int myRank = -1;
static int failures = 0;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "rank %d: FAIL %s:%d: %s: ", myRank, __FILE__, __LINE__, #cond);             \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      ++failures;                                                                                  \
    }                                                                                              \
  } while (0)

#define OK(call)                                                                                   \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    CHECK(r_ == ncclSuccess, "%s -> %d (%s): %s", #call, (int)r_, ncclGetErrorString(r_),          \
          ncclGetLastError(NULL));                                                                 \
  } while (0)

#define CUDA(call)                                                                                 \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "rank %d: FAIL %s: %s\n", myRank, #call, cudaGetErrorString(e_));            \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* --env: the directory where rank 0 leaves the id. */
static const char *idDir = NULL;

/* --env: rank 0 writes the id to a temporary file renamed into place; the
 * others wait for it (at most a minute). */
static int passIdThroughFile(int rank, ncclUniqueId *id) {
  char path[4096], temp[4200];
  snprintf(path, sizeof path, "%s/nccl-id", idDir);
  if (rank == 0) {
    snprintf(temp, sizeof temp, "%s.tmp", path);
    FILE *f = fopen(temp, "wb");
    if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0)
      return 0;
    return rename(temp, path) == 0;
  }
  for (int i = 0; i < 6000; ++i) {
    FILE *f = fopen(path, "rb");
    if (f) {
      const int got = fread(id, sizeof *id, 1, f) == 1;
      fclose(f);
      if (got)
        return 1;
    }
    usleep(10000);
  }
  return 0;
}

static ncclComm_t initOk(int rank, int nranks, int idFd[2]) {
  ncclUniqueId id;
  if (idDir) {
    if (rank == 0)
      OK(ncclGetUniqueId(&id));
    if (!passIdThroughFile(rank, &id)) {
      CHECK(0, "cannot pass the id through %s", idDir);
      exit(1);
    }
  } else if (rank == 0) {
    OK(ncclGetUniqueId(&id));
    for (int i = 1; i < nranks; ++i)
      if (write(idFd[1], &id, sizeof id) != sizeof id)
        CHECK(0, "cannot pass the id");
  } else if (read(idFd[0], &id, sizeof id) != sizeof id) {
    CHECK(0, "cannot read the id");
  }
  CUDA(cudaSetDevice(0));
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRank(&comm, nranks, id, rank);
  CHECK(r == ncclSuccess && comm, "ncclCommInitRank -> %d: %s", (int)r, ncclGetLastError(NULL));
  if (!comm)
    exit(1);
  return comm;
}

/* Element i of rank r's input. */
static int32_t value(int r, size_t i) { return (int32_t)(r * 1000 + (int)(i % 977)); }

/* Copies `count` ints of device memory `d` to the host and compares each with want(i). */
#define EXPECT(d, count, what, want)                                                               \
  do {                                                                                             \
    int32_t *h_ = malloc(((count) + 1) * sizeof(int32_t));                                         \
    CUDA(cudaMemcpy(h_, (d), (count) * sizeof(int32_t), cudaMemcpyDeviceToHost));                  \
    for (size_t i = 0; i < (count); ++i)                                                           \
      if (h_[i] != (want)) {                                                                       \
        CHECK(0, "%s: element %zu is %d, expected %d", what, i, h_[i], (int)(want));               \
        break;                                                                                     \
      }                                                                                            \
    free(h_);                                                                                      \
  } while (0)

static void collectives(ncclComm_t comm, int rank, int n, cudaStream_t stream) {
  const size_t sizes[] = {1, 1000, 1 << 18};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; ++s) {
    const size_t count = sizes[s];
    int32_t *host = malloc(count * n * sizeof(int32_t));
    for (size_t i = 0; i < count * n; ++i)
      host[i] = value(rank, i);
    int32_t *in = NULL, *out = NULL;
    CUDA(cudaMalloc((void **)&in, count * n * sizeof(int32_t)));
    CUDA(cudaMalloc((void **)&out, count * n * sizeof(int32_t)));
    CUDA(cudaMemcpy(in, host, count * n * sizeof(int32_t), cudaMemcpyHostToDevice));
    const int sum = 1000 * n * (n - 1) / 2;

    OK(ncclAllReduce(in, out, count, ncclInt32, ncclSum, comm, stream));
    CUDA(cudaStreamSynchronize(stream));
    EXPECT(out, count, "allreduce sum", sum + n * (int)(i % 977));
    OK(ncclAllReduce(in, out, count, ncclInt32, ncclMax, comm, stream));
    CUDA(cudaStreamSynchronize(stream));
    EXPECT(out, count, "allreduce max", (n - 1) * 1000 + (int)(i % 977));
    OK(ncclAllGather(in, out, count, ncclInt32, comm, stream));
    CUDA(cudaStreamSynchronize(stream));
    EXPECT(out, count * n, "allgather", value((int)(i / count), i % count));
    OK(ncclReduceScatter(in, out, count, ncclInt32, ncclSum, comm, stream));
    CUDA(cudaStreamSynchronize(stream));
    EXPECT(out, count, "reducescatter", sum + n * (int)((rank * count + i) % 977));
    OK(ncclAlltoAll(in, out, count, ncclInt32, comm, stream));
    CUDA(cudaStreamSynchronize(stream));
    EXPECT(out, count * n, "alltoall", value((int)(i / count), rank * count + i % count));
    OK(ncclBroadcast(in, out, count, ncclInt32, n - 1, comm, stream));
    CUDA(cudaStreamSynchronize(stream));
    EXPECT(out, count, "broadcast", value(n - 1, i));
    OK(ncclReduce(in, out, count, ncclInt32, ncclSum, 0, comm, stream));
    CUDA(cudaStreamSynchronize(stream));
    if (rank == 0)
      EXPECT(out, count, "reduce", sum + n * (int)(i % 977));
    /* In place, two calls queued in one group, then on the legacy stream. */
    CUDA(cudaMemcpy(out, host, count * sizeof(int32_t), cudaMemcpyHostToDevice));
    OK(ncclGroupStart());
    OK(ncclAllReduce(out, out, count, ncclInt32, ncclSum, comm, stream));
    OK(ncclAllReduce(out, out, count, ncclInt32, ncclSum, comm, stream));
    OK(ncclGroupEnd());
    OK(ncclAllReduce(out, out, count, ncclInt32, ncclSum, comm, NULL));
    CUDA(cudaDeviceSynchronize());
    EXPECT(out, count, "three in-place allreduces", n * n * (sum + n * (int)(i % 977)));
    CUDA(cudaFree(in));
    CUDA(cudaFree(out));
    free(host);
  }
}

static void scenarioColl(int rank, int n, int idFd[2]) {
  ncclComm_t comm = initOk(rank, n, idFd);
  cudaStream_t stream;
  CUDA(cudaStreamCreate(&stream));
  collectives(comm, rank, n, stream);
  /* fp8 is the real NCCL's, which cannot be made with ranks sharing a GPU;
   * one rank has one (a drop-in never breaks what the real library runs). */
  void *d = NULL;
  CUDA(cudaMalloc(&d, 64));
  ncclResult_t r = ncclAllReduce(d, d, 16, ncclFloat8e4m3, ncclSum, comm, stream);
  if (n > 1) {
    CHECK(r == ncclInvalidUsage, "fp8 allreduce -> %d, not ncclInvalidUsage", (int)r);
    CHECK(strstr(ncclGetLastError(comm), "real NCCL") != NULL, "fp8: '%s'",
          ncclGetLastError(comm));
  } else {
    CHECK(r == ncclSuccess, "fp8 allreduce on one rank -> %d: %s", (int)r,
          ncclGetLastError(comm));
    CUDA(cudaStreamSynchronize(stream));
  }
  CUDA(cudaFree(d));
  ncclResult_t async = ncclInternalError;
  OK(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclSuccess, "async error %d", (int)async);
  OK(ncclCommFinalize(comm));
  OK(ncclCommDestroy(comm));
  CUDA(cudaStreamDestroy(stream));
}

#if !COLL_TEST_NO_WINDOWS /* (linked to the stand-in NCCL, which has no windows) */
#if COLL_TEST_STANDIN
/* The stand-in CUDA runtime knows the memory it allocated itself; Coll's
 * (collMemAllocDevice, under the emulated device) it is told of. */
int collStandinAdoptDeviceMemory(void *ptr, size_t size);
void collStandinForgetDeviceMemory(void *ptr);
#endif

/* Whether the file at `path` holds `words`. */
static int fileHolds(const char *path, const char *words) {
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  char line[4096];
  int found = 0;
  while (!found && fgets(line, sizeof line, f))
    found = strstr(line, words) != NULL;
  fclose(f);
  return found;
}

/* windows: memory of ncclMemAlloc (Coll's, on the GPU) registered on every
 * rank with ncclCommWindowRegister; allreduces of 4 MiB in it (in place and
 * out of place: the built-in rule for device calls with windows runs the
 * direct two-shot, which this rank's log file at COLL_DEBUG=TRACE shows)
 * and of 4 KiB, checked. ncclMemFree refuses the memory while it is
 * registered; memory of cudaMalloc is not Coll's to register. */
static void scenarioWindows(int rank, int n, int idFd[2]) {
  char log[256];
  snprintf(log, sizeof log, "/tmp/coll-nccl-windows.%d.log", (int)getpid());
  setenv("COLL_DEBUG", "TRACE", 1);
  setenv("COLL_DEBUG_SUBSYS", "COLL", 1);
  setenv("COLL_DEBUG_FILE", log, 1);
  ncclComm_t comm = initOk(rank, n, idFd);
  cudaStream_t stream;
  CUDA(cudaStreamCreate(&stream));
  const size_t count = (size_t)1 << 20;
  const size_t bytes = 2 * count * sizeof(int32_t);
  void *mem = NULL;
  OK(ncclMemAlloc(&mem, bytes));
  if (!mem)
    exit(1);
#if COLL_TEST_STANDIN
  CHECK(collStandinAdoptDeviceMemory(mem, bytes) == 0, "the stand-in cannot adopt the memory");
#endif
  ncclWindow_t win = NULL;
  OK(ncclCommWindowRegister(comm, mem, bytes, &win, NCCL_WIN_COLL_SYMMETRIC));
  ncclResult_t r = ncclMemFree(mem);
  CHECK(r == ncclInvalidUsage && strstr(ncclGetLastError(NULL), "registered"),
        "ncclMemFree of a registered window -> %d: %s", (int)r, ncclGetLastError(NULL));
  int32_t *in = mem, *out = (int32_t *)mem + count;
  int32_t *host = malloc(count * sizeof(int32_t));
  const int sum = 1000 * n * (n - 1) / 2;
  const size_t sizes[] = {count, 1024};
  for (int s = 0; s < 2; ++s)
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      const size_t c = sizes[s];
      for (size_t i = 0; i < c; ++i)
        host[i] = value(rank, i);
      int32_t *dst = inPlace ? in : out;
      CUDA(cudaMemcpy(in, host, c * sizeof(int32_t), cudaMemcpyHostToDevice));
      OK(ncclAllReduce(in, dst, c, ncclInt32, ncclSum, comm, stream));
      CUDA(cudaStreamSynchronize(stream));
      EXPECT(dst, c, inPlace ? "allreduce in place in a window" : "allreduce in a window",
             sum + n * (int)(i % 977));
    }
  free(host);
  if (n > 1) { /* (one rank copies: nothing to choose) */
    CHECK(fileHolds(log, "-> allreduce_twoshot_direct"),
          "no call ran the direct two-shot (COLL_DEBUG_FILE %s)", log);
    CHECK(fileHolds(log, "built-in rule for device calls on a communicator with windows"),
          "no call was served by the rule for device calls with windows (%s)", log);
  }
  OK(ncclCommWindowDeregister(comm, win));
#if COLL_TEST_STANDIN
  collStandinForgetDeviceMemory(mem);
#endif
  OK(ncclMemFree(mem));
  /* Memory Coll did not allocate: refused by Coll on every rank, and there
   * is no real NCCL with windows to take it (none is made for ranks that
   * share a GPU; the stand-in of the tests has no windows). */
  void *d = NULL;
  CUDA(cudaMalloc(&d, 4096));
  r = ncclCommWindowRegister(comm, d, 4096, &win, NCCL_WIN_DEFAULT);
  CHECK(r != ncclSuccess && strstr(ncclGetLastError(comm), "collMemAlloc"),
        "registering memory of cudaMalloc -> %d: %s", (int)r, ncclGetLastError(comm));
  CUDA(cudaFree(d));
  OK(ncclCommFinalize(comm));
  OK(ncclCommDestroy(comm));
  CUDA(cudaStreamDestroy(stream));
  unlink(log);
}
#endif

static void scenarioReal(int rank, int n, int idFd[2]) {
  int version = 0;
  OK(ncclGetVersion(&version));
  CHECK(version >= 22000, "ncclGetVersion gave %d, not a real NCCL 2.2x", version);
  ncclComm_t comm = initOk(rank, n, idFd);
  cudaStream_t stream;
  CUDA(cudaStreamCreate(&stream));
  collectives(comm, rank, n, stream);
  OK(ncclCommDestroy(comm));
  CUDA(cudaStreamDestroy(stream));
}

static void (*run)(int, int, int[2]);

static int rankMain(int r, int n, int idFd[2]) {
  myRank = r;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("rank %d: skip: no CUDA device\n", r);
    return 77;
  }
  run(r, n, idFd);
  if (failures == 0)
    printf("rank %d: ok\n", r);
  return failures ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s coll|real|windows NRANKS|--env\n", argv[0]);
    return 2;
  }
  const char *scenario = argv[1];
  if (!strcmp(scenario, "coll"))
    run = scenarioColl;
  else if (!strcmp(scenario, "real"))
    run = scenarioReal;
#if !COLL_TEST_NO_WINDOWS
  else if (!strcmp(scenario, "windows"))
    run = scenarioWindows;
#endif
  if (run && !strcmp(argv[2], "--env")) {
    /* One rank of a launched job. */
    const char *r = getenv("RANK"), *size = getenv("WORLD_SIZE");
    idDir = getenv("COLL_TEST_DIR");
    if (!r || !size || !idDir) {
      fprintf(stderr, "--env needs RANK, WORLD_SIZE and COLL_TEST_DIR\n");
      return 2;
    }
    myRank = atoi(r);
    alarm((unsigned)coll_test_scaled(300));
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      printf("rank %d: skip: no CUDA device\n", myRank);
      return 77;
    }
    run(myRank, atoi(size), NULL);
    if (failures == 0)
      printf("rank %d: ok (%s)\n", myRank, scenario);
    return failures ? 1 : 0;
  }
  int n = atoi(argv[2]);
  if (!run || n < 1 || n > 8) {
    fprintf(stderr, "unknown scenario '%s' or bad rank count\n", scenario);
    return 2;
  }
  int skipped = 0;
  const int bad = forkRanks(n, 300, rankMain, &skipped);
  if (skipped == n) {
    printf("%s with %d ranks: skipped (no CUDA device)\n", scenario, n);
    return 77;
  }
  printf("%s with %d ranks: %s\n", scenario, n, bad || skipped ? "FAILED" : "passed");
  return bad || skipped ? 1 : 0;
}
