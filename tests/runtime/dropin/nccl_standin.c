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
 * With COLL_STANDIN_COMPUTE=1 it also computes, as a real NCCL would: its
 * communicators are Coll's of the C API (libcoll.so, a communicator of
 * their own beside the shim's), and its collectives and send/recv run on
 * them on host copies of the buffers (the stand-in CUDA runtime's "device
 * memory" is host memory too), written back when the call (or its group)
 * ends. A test can then go on after the shim stops using Coll on a
 * communicator and check every later result (nccl_conformance.c, failure).
 *
 *===----------------------------------------------------------------------===*/

#include <nccl.h>

#include "coll.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STANDIN_VERSION 22899

struct ncclComm {
  int rank, nranks, device;
  collComm_t coll; /* COLL_STANDIN_COMPUTE */
};

static int computing(void) {
  const char *v = getenv("COLL_STANDIN_COMPUTE");
  return v && *v && strcmp(v, "0") != 0;
}

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
  if (computing()) {
    collUniqueId cid;
    if (collGetUniqueId(&cid) != collSuccess)
      return ncclInternalError;
    memcpy(id->internal, cid.internal, sizeof cid.internal);
    return ncclSuccess;
  }
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
  if (computing()) {
    collUniqueId cid;
    memcpy(cid.internal, id.internal, sizeof cid.internal);
    /* NCCL has no watchdog: a rank late by several of the shim's watchdog
     * periods (COLL_WATCHDOG_MS) must not stop these calls. */
    collConfig_t cfg = COLL_CONFIG_INITIALIZER;
    cfg.watchdogMs = 600000;
    if (collCommInitRankConfig(&c->coll, nranks, cid, rank, &cfg) != collSuccess) {
      free(c);
      return ncclInternalError;
    }
  }
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
  if (c && c->coll)
    collCommDestroy(c->coll);
  free(c);
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t c) {
  note("ncclCommAbort rank=%d", rankOf(c));
  if (c && c->coll)
    collCommAbort(c->coll);
  free(c);
  return ncclSuccess;
}
ncclResult_t ncclCommSplit(ncclComm_t c, int color, int key, ncclComm_t *out,
                           ncclConfig_t *config) {
  (void)config;
  note("ncclCommSplit rank=%d color=%d key=%d", rankOf(c), color, key);
  *out = NULL;
  if (color == NCCL_SPLIT_NOCOLOR) {
    collComm_t none = NULL;
    if (c->coll && collCommSplit(c->coll, color, key, &none, NULL) != collSuccess)
      return ncclInternalError;
    return ncclSuccess;
  }
  struct ncclComm *n = calloc(1, sizeof *n);
  *n = *c;
  n->coll = NULL;
  if (c->coll) {
    if (collCommSplit(c->coll, color, key, &n->coll, NULL) != collSuccess || !n->coll) {
      free(n);
      return ncclInternalError;
    }
    collCommUserRank(n->coll, &n->rank);
    collCommCount(n->coll, &n->nranks);
  }
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

/*===--- COLL_STANDIN_COMPUTE: the calls on Coll's C API ------------------===*/

static size_t typeBytes(ncclDataType_t t) {
  switch (t) {
  case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
  case ncclFloat16: case ncclBfloat16: return 2;
  case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
  default: return 8;
  }
}

/* Host copies of a call's buffers; recvbuff's is written back when the call
 * ends, or, inside a group, when the group does. */
struct Staged {
  void *user, *host;
  size_t bytes;
};
static __thread struct Staged *staged;
static __thread size_t nstaged;
static __thread int groupDepth;

static void *stage(const void *user, size_t bytes, int writeBack) {
  if (!user || !bytes)
    return (void *)user;
  for (size_t i = 0; i < nstaged; ++i) /* in place: one copy */
    if (staged[i].user == user && staged[i].bytes >= bytes)
      return staged[i].host;
  void *host = malloc(bytes);
  memcpy(host, user, bytes);
  staged = realloc(staged, (nstaged + 1) * sizeof *staged);
  staged[nstaged++] = (struct Staged){writeBack ? (void *)user : NULL, host, bytes};
  return host;
}

static void unstage(void) {
  for (size_t i = 0; i < nstaged; ++i) {
    if (staged[i].user)
      memcpy(staged[i].user, staged[i].host, staged[i].bytes);
    free(staged[i].host);
  }
  free(staged);
  staged = NULL;
  nstaged = 0;
}

static ncclResult_t ended(collResult_t r) {
  if (groupDepth == 0)
    unstage();
  return r == collSuccess ? ncclSuccess : r == collRemoteError || r == collTimeout ? ncclRemoteError : ncclInternalError;
}

/* The staged pointers of a call: sendbuff first (read), then recvbuff. */
#define STAGE_IN(ptr, bytes) stage((ptr), (bytes), 0)
#define STAGE_OUT(ptr, bytes) stage((ptr), (bytes), 1)

ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t c, cudaStream_t st) {
  note("ncclAllReduce rank=%d send=%p recv=%p count=%zu type=%d op=%d stream=%p", rankOf(c), s, r,
       n, (int)t, (int)op, (void *)st);
  if (computing() && c && c->coll) {
    const size_t b = n * typeBytes(t);
    void *out = STAGE_OUT(r, b);
    return ended(collAllReduce(s == r ? out : STAGE_IN(s, b), out, n, (collDataType_t)t,
                               (collRedOp_t)op, c->coll, NULL));
  }
  return ncclSuccess;
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c,
                           cudaStream_t st) {
  note("ncclAllGather rank=%d send=%p recv=%p count=%zu type=%d stream=%p", rankOf(c), s, r, n,
       (int)t, (void *)st);
  if (computing() && c && c->coll) {
    const size_t b = n * typeBytes(t);
    void *out = STAGE_OUT(r, b * (size_t)c->nranks);
    const char *in = (const char *)s;
    const int inPlace = in == (const char *)r + (size_t)c->rank * b;
    return ended(collAllGather(inPlace ? (char *)out + (size_t)c->rank * b : STAGE_IN(s, b), out, n,
                               (collDataType_t)t, c->coll, NULL));
  }
  return ncclSuccess;
}
ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t c, cudaStream_t st) {
  note("ncclReduceScatter rank=%d send=%p recv=%p count=%zu type=%d op=%d stream=%p", rankOf(c),
       s, r, n, (int)t, (int)op, (void *)st);
  if (computing() && c && c->coll) {
    const size_t b = n * typeBytes(t);
    void *in = STAGE_IN(s, b * (size_t)c->nranks);
    const int inPlace = (const char *)r == (const char *)s + (size_t)c->rank * b;
    if (inPlace && b > 0) /* written back from the staged sendbuff */
      staged[nstaged - 1].user = (void *)s;
    return ended(collReduceScatter(in, inPlace ? (char *)in + (size_t)c->rank * b : STAGE_OUT(r, b),
                                   n, (collDataType_t)t, (collRedOp_t)op, c->coll, NULL));
  }
  return ncclSuccess;
}
ncclResult_t ncclAlltoAll(const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t c,
                          cudaStream_t st) {
  note("ncclAlltoAll rank=%d send=%p recv=%p count=%zu type=%d stream=%p", rankOf(c), s, r, n,
       (int)t, (void *)st);
  if (computing() && c && c->coll) {
    const size_t b = n * typeBytes(t) * (size_t)c->nranks;
    void *in = STAGE_IN(s, b);
    return ended(collAlltoAll(in, STAGE_OUT(r, b), n, (collDataType_t)t, c->coll, NULL));
  }
  return ncclSuccess;
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                           ncclComm_t c, cudaStream_t st) {
  note("ncclBroadcast rank=%d send=%p recv=%p count=%zu type=%d root=%d stream=%p", rankOf(c), s,
       r, n, (int)t, root, (void *)st);
  if (computing() && c && c->coll) {
    const size_t b = n * typeBytes(t);
    void *out = STAGE_OUT(r, b);
    return ended(collBroadcast(s == r ? out : STAGE_IN(c->rank == root ? s : NULL, b), out, n,
                               (collDataType_t)t, root, c->coll, NULL));
  }
  return ncclSuccess;
}
ncclResult_t ncclReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                        int root, ncclComm_t c, cudaStream_t st) {
  note("ncclReduce rank=%d send=%p recv=%p count=%zu type=%d op=%d root=%d stream=%p", rankOf(c),
       s, r, n, (int)t, (int)op, root, (void *)st);
  if (computing() && c && c->coll) {
    const size_t b = n * typeBytes(t);
    void *out = c->rank == root ? STAGE_OUT(r, b) : NULL;
    return ended(collReduce(s == r && out ? out : STAGE_IN(s, b), out, n, (collDataType_t)t,
                            (collRedOp_t)op, root, c->coll, NULL));
  }
  return ncclSuccess;
}
ncclResult_t ncclGather(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                        ncclComm_t c, cudaStream_t st) {
  note("ncclGather rank=%d send=%p recv=%p count=%zu type=%d root=%d stream=%p", rankOf(c), s, r,
       n, (int)t, root, (void *)st);
  if (computing() && c && c->coll) {
    const size_t b = n * typeBytes(t);
    void *out = c->rank == root ? STAGE_OUT(r, b * (size_t)c->nranks) : NULL;
    const int inPlace = out && (const char *)s == (const char *)r + (size_t)root * b;
    return ended(collGather(inPlace ? (char *)out + (size_t)root * b : STAGE_IN(s, b), out, n,
                            (collDataType_t)t, root, c->coll, NULL));
  }
  return ncclSuccess;
}
ncclResult_t ncclScatter(const void *s, void *r, size_t n, ncclDataType_t t, int root,
                         ncclComm_t c, cudaStream_t st) {
  note("ncclScatter rank=%d send=%p recv=%p count=%zu type=%d root=%d stream=%p", rankOf(c), s, r,
       n, (int)t, root, (void *)st);
  if (computing() && c && c->coll) {
    const size_t b = n * typeBytes(t);
    void *in = c->rank == root ? STAGE_IN(s, b * (size_t)c->nranks) : NULL;
    const int inPlace = in && (const char *)r == (const char *)s + (size_t)root * b;
    if (inPlace && b > 0)
      staged[nstaged - 1].user = (void *)s;
    return ended(collScatter(in, inPlace ? (char *)in + (size_t)root * b : STAGE_OUT(r, b), n,
                             (collDataType_t)t, root, c->coll, NULL));
  }
  return ncclSuccess;
}
ncclResult_t ncclSend(const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t st) {
  note("ncclSend rank=%d send=%p count=%zu type=%d peer=%d stream=%p", rankOf(c), s, n, (int)t,
       peer, (void *)st);
  if (computing() && c && c->coll)
    return ended(collSend(STAGE_IN(s, n * typeBytes(t)), n, (collDataType_t)t, peer, c->coll, NULL));
  return ncclSuccess;
}
ncclResult_t ncclRecv(void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t st) {
  note("ncclRecv rank=%d recv=%p count=%zu type=%d peer=%d stream=%p", rankOf(c), r, n, (int)t,
       peer, (void *)st);
  if (computing() && c && c->coll)
    return ended(collRecv(STAGE_OUT(r, n * typeBytes(t)), n, (collDataType_t)t, peer, c->coll, NULL));
  return ncclSuccess;
}
ncclResult_t ncclGroupStart(void) {
  note("ncclGroupStart");
  if (computing()) {
    ++groupDepth;
    if (collGroupStart() != collSuccess)
      return ncclInternalError;
  }
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd(void) {
  note("ncclGroupEnd");
  if (computing()) {
    --groupDepth;
    return ended(collGroupEnd());
  }
  return ncclSuccess;
}
