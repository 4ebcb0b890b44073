/*===- nccl_standin.c - A stand-in "real NCCL" for libcoll_nccl.so's tests -===*
 *
 * Loaded by the shim from COLL_NCCL_LIB in place of libnccl.so.2. It exports
 * the NCCL functions the shim forwards to, does no communication, and
 * records every call with its arguments; the tests read the record through
 * standinCalls() (the same library handle, dlopen'ed with RTLD_NOLOAD) and
 * check that Coll sent it exactly the calls it could not run.
 *
 * ncclGetVersion reports STANDIN_VERSION, so that tests see the shim report
 * the library underneath; ncclCommGetAsyncError reports what
 * COLL_STANDIN_ASYNC_ERROR says (default ncclSuccess). With
 * COLL_STANDIN_REENTER, ncclCommFinalize calls the NCCL API itself, as the
 * real library does.
 *
 *===----------------------------------------------------------------------===*/

#include <nccl.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STANDIN_VERSION 22899

struct ncclComm {
  int rank, nranks, device;
};

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static char *record;
static size_t recordLen;
static int nextOp = ncclNumOps;

static void note(const char *fmt, ...) {
  char line[512];
  va_list args;
  va_start(args, fmt);
  int n = vsnprintf(line, sizeof line, fmt, args);
  va_end(args);
  if (n < 0)
    return;
  if ((size_t)n >= sizeof line)
    n = sizeof line - 1;
  pthread_mutex_lock(&mutex);
  char *grown = realloc(record, recordLen + (size_t)n + 2);
  if (grown) {
    record = grown;
    memcpy(record + recordLen, line, (size_t)n);
    recordLen += (size_t)n;
    record[recordLen++] = '\n';
    record[recordLen] = 0;
  }
  pthread_mutex_unlock(&mutex);
}

const char *standinCalls(void) { return record ? record : ""; }

static int rankOf(ncclComm_t c) { return c ? c->rank : -1; }

ncclResult_t ncclGetVersion(int *version) {
  note("ncclGetVersion");
  *version = STANDIN_VERSION;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  note("ncclGetUniqueId");
  memset(id, 0, sizeof *id);
  snprintf(id->internal, sizeof id->internal, "standin-id-%d", (int)getpid());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config) {
  note("ncclCommInitRankConfig nranks=%d rank=%d id=%.24s blocking=%d", nranks, rank,
       id.internal, config ? config->blocking : -99);
  struct ncclComm *c = calloc(1, sizeof *c);
  c->rank = rank;
  c->nranks = nranks;
  *comm = c;
  return ncclSuccess;
}

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
  note("ncclCommInitAll ndev=%d", ndev);
  for (int i = 0; i < ndev; ++i) {
    struct ncclComm *c = calloc(1, sizeof *c);
    c->rank = i;
    c->nranks = ndev;
    c->device = devlist ? devlist[i] : i;
    comms[i] = c;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, NULL);
}
ncclResult_t ncclCommFinalize(ncclComm_t c) {
  note("ncclCommFinalize rank=%d", rankOf(c));
  /* COLL_STANDIN_REENTER: as the real NCCL's does, finalizing calls the API
   * (through the global symbols: into the shim where the program loaded
   * this library itself) with this library's own communicator. */
  if (getenv("COLL_STANDIN_REENTER")) {
    ncclResult_t async = ncclInternalError;
    if (ncclGroupStart() != ncclSuccess || ncclCommGetAsyncError(c, &async) != ncclSuccess ||
        ncclGroupEnd() != ncclSuccess)
      return ncclInternalError;
    return async;
  }
  return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t c) {
  note("ncclCommDestroy rank=%d", rankOf(c));
  free(c);
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t c) {
  note("ncclCommAbort rank=%d", rankOf(c));
  free(c);
  return ncclSuccess;
}
ncclResult_t ncclCommSplit(ncclComm_t c, int color, int key, ncclComm_t *out,
                           ncclConfig_t *config) {
  (void)config;
  note("ncclCommSplit rank=%d color=%d key=%d", rankOf(c), color, key);
  *out = NULL;
  if (color == NCCL_SPLIT_NOCOLOR)
    return ncclSuccess;
  struct ncclComm *n = calloc(1, sizeof *n);
  *n = *c;
  *out = n;
  return ncclSuccess;
}
const char *ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "stand-in error"; }
const char *ncclGetLastError(ncclComm_t c) {
  (void)c;
  return "stand-in last error";
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *e) {
  const char *env = getenv("COLL_STANDIN_ASYNC_ERROR");
  *e = env ? (ncclResult_t)atoi(env) : ncclSuccess;
  note("ncclCommGetAsyncError rank=%d -> %d", rankOf(c), (int)*e);
  return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t c, int *n) { *n = c->nranks; return ncclSuccess; }
ncclResult_t ncclCommUserRank(const ncclComm_t c, int *r) { *r = c->rank; return ncclSuccess; }
ncclResult_t ncclCommCuDevice(const ncclComm_t c, int *d) { *d = c->device; return ncclSuccess; }

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t type,
                                      ncclScalarResidence_t residence, ncclComm_t c) {
  (void)scalar;
  pthread_mutex_lock(&mutex);
  *op = (ncclRedOp_t)nextOp++;
  pthread_mutex_unlock(&mutex);
  note("ncclRedOpCreatePreMulSum rank=%d type=%d residence=%d -> %d", rankOf(c), (int)type,
       (int)residence, (int)*op);
  return ncclSuccess;
}
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t c) {
  note("ncclRedOpDestroy rank=%d op=%d", rankOf(c), (int)op);
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t c, cudaStream_t st) {
  note("ncclAllReduce rank=%d send=%p recv=%p count=%zu type=%d op=%d stream=%p", rankOf(c), s, r,
       n, (int)t, (int)op, (void *)st);
  return ncclSuccess;
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c,
                           cudaStream_t st) {
  note("ncclAllGather rank=%d send=%p recv=%p count=%zu type=%d stream=%p", rankOf(c), s, r, n,
       (int)t, (void *)st);
  return ncclSuccess;
}
ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t c, cudaStream_t st) {
  note("ncclReduceScatter rank=%d send=%p recv=%p count=%zu type=%d op=%d stream=%p", rankOf(c),
       s, r, n, (int)t, (int)op, (void *)st);
  return ncclSuccess;
}
ncclResult_t ncclAlltoAll(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c,
                          cudaStream_t st) {
  note("ncclAlltoAll rank=%d send=%p recv=%p count=%zu type=%d stream=%p", rankOf(c), s, r, n,
       (int)t, (void *)st);
  return ncclSuccess;
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                           ncclComm_t c, cudaStream_t st) {
  note("ncclBroadcast rank=%d send=%p recv=%p count=%zu type=%d root=%d stream=%p", rankOf(c), s,
       r, n, (int)t, root, (void *)st);
  return ncclSuccess;
}
ncclResult_t ncclReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                        int root, ncclComm_t c, cudaStream_t st) {
  note("ncclReduce rank=%d send=%p recv=%p count=%zu type=%d op=%d root=%d stream=%p", rankOf(c),
       s, r, n, (int)t, (int)op, root, (void *)st);
  return ncclSuccess;
}
ncclResult_t ncclGather(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                        ncclComm_t c, cudaStream_t st) {
  note("ncclGather rank=%d send=%p recv=%p count=%zu type=%d root=%d stream=%p", rankOf(c), s, r,
       n, (int)t, root, (void *)st);
  return ncclSuccess;
}
ncclResult_t ncclScatter(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                         ncclComm_t c, cudaStream_t st) {
  note("ncclScatter rank=%d send=%p recv=%p count=%zu type=%d root=%d stream=%p", rankOf(c), s, r,
       n, (int)t, root, (void *)st);
  return ncclSuccess;
}
ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t st) {
  note("ncclSend rank=%d send=%p count=%zu type=%d peer=%d stream=%p", rankOf(c), s, n, (int)t,
       peer, (void *)st);
  return ncclSuccess;
}
ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t st) {
  note("ncclRecv rank=%d recv=%p count=%zu type=%d peer=%d stream=%p", rankOf(c), r, n, (int)t,
       peer, (void *)st);
  return ncclSuccess;
}
ncclResult_t ncclGroupStart(void) {
  note("ncclGroupStart");
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd(void) {
  note("ncclGroupEnd");
  return ncclSuccess;
}
