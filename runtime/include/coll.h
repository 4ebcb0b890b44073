/*===- coll.h - Coll's communicator runtime: the C API ---------------------===*
 *
 * Coll runs collective-communication algorithms (MSCCL XML, or .coll programs
 * compiled for the job's shape) inside multi-process jobs. The API has
 * NCCL's shape with the `coll` prefix: code written for NCCL moves over with
 * a rename. Differences from NCCL are noted where they matter; the full
 * reference is docs/RUNTIME.md.
 *
 *  - Buffers are host memory (the host backend runs the call on the calling
 *    thread; pass stream NULL) or device memory (the CUDA backend, when the
 *    library was built with it), told apart per call.
 *  - Host calls are synchronous: when a collective returns collSuccess, its
 *    result is in place. Ranks driven by one thread must be grouped
 *    (collGroupStart/collGroupEnd), as in NCCL.
 *  - Every call chooses an algorithm from the communicator's registry; with
 *    COLL_DEBUG=INFO rank 0 prints the choices at init, with COLL_DEBUG=TRACE
 *    every call says what it ran. When no algorithm applies, the call fails
 *    with collInvalidUsage and a message naming every candidate and why it
 *    was rejected (collGetLastError).
 *  - A dead or stopped peer makes every rank's call return collRemoteError
 *    or collTimeout within the watchdog period (COLL_WATCHDOG_MS).
 *
 *===----------------------------------------------------------------------===*/

#ifndef COLL_H
#define COLL_H

#include <limits.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COLL_MAJOR 0
#define COLL_MINOR 3
#define COLL_PATCH 0
#define COLL_VERSION_CODE (COLL_MAJOR * 10000 + COLL_MINOR * 100 + COLL_PATCH)

typedef struct collComm *collComm_t;
#define COLL_COMM_NULL NULL

#define COLL_UNIQUE_ID_BYTES 128
/* Opaque; carries the address of the root's listener and a job nonce. */
typedef struct {
  char internal[COLL_UNIQUE_ID_BYTES];
} collUniqueId;

/* NCCL's result codes and meanings, plus collTimeout. */
typedef enum {
  collSuccess = 0,
  collUnhandledCudaError = 1, /* a CUDA call failed */
  collSystemError = 2,        /* a system call failed (memory, sockets, shm) */
  collInternalError = 3,      /* a bug in Coll */
  collInvalidArgument = 4,    /* a bad argument: null pointer, bad rank, bad type */
  collInvalidUsage = 5,       /* a bad call sequence, mismatched ranks, no algorithm */
  collRemoteError = 6,        /* another rank failed or died */
  collInProgress = 7,         /* not returned by blocking calls */
  collTimeout = 8,            /* the watchdog stopped a call that made no progress */
  collNumResults = 9
} collResult_t;

typedef enum {
  collInt8 = 0, collChar = 0,
  collUint8 = 1,
  collInt32 = 2, collInt = 2,
  collUint32 = 3,
  collInt64 = 4,
  collUint64 = 5,
  collFloat16 = 6, collHalf = 6,
  collFloat32 = 7, collFloat = 7,
  collFloat64 = 8, collDouble = 8,
  collBfloat16 = 9,
  collFloat8e4m3 = 10, /* NCCL's numbering; not supported (collInvalidArgument) */
  collFloat8e5m2 = 11, /* not supported */
  collNumTypes = 12
} collDataType_t;

/* NCCL's numbering (max before min). */
typedef enum {
  collSum = 0,
  collProd = 1,
  collMax = 2,
  collMin = 3,
  collAvg = 4,
  collNumOps = 5
} collRedOp_t;

#define COLL_SPLIT_NOCOLOR -1
#define COLL_CONFIG_UNDEF_INT INT_MIN
#define COLL_CONFIG_UNDEF_PTR NULL

/* Communicator configuration. Initialise with COLL_CONFIG_INITIALIZER, then
 * set what you need; unset fields take the environment's value, then the
 * default. */
typedef struct collConfig_v1 {
  size_t size;           /* set by the initializer */
  unsigned int magic;    /* set by the initializer */
  unsigned int version;  /* set by the initializer */
  int watchdogMs;        /* COLL_WATCHDOG_MS; default 30000 */
  const char *algoDir;   /* COLL_ALGO_DIR: a folder of .xml and .coll files */
  const char *algoFiles; /* COLL_ALGO_FILES: files separated by ':' or ',' */
  const char *tuningFile;/* COLL_TUNING_FILE: see docs/RUNTIME.md */
  int debugLevel;        /* COLL_DEBUG: 0 NONE, 1 VERSION, 2 WARN, 3 INFO, 4 TRACE */
  int embeddedAlgorithms;/* 0: do not load the built-in set; default 1 */
  int hostThreads;       /* COLL_HOST_THREADS: threads per call; default see docs */
  /* Libraries underneath Coll that tuning rules may name as a target
   * (comma-separated, e.g. "gloo,torch"), for bindings that run those
   * calls themselves (collCommQueryChoice); default none. */
  const char *libraries;
  /* COLL_EMULATED_DEVICE: 1 runs collectives with the CUDA kernel on the CPU
   * emulation of a GPU (one emulated device per rank, FIFOs shared between
   * processes as CUDA IPC shares device memory; buffers are host memory);
   * default 0, the host backend. See docs/RUNTIME.md. */
  int emulatedDevice;
} collConfig_t;

#define COLL_CONFIG_INITIALIZER                                                 \
  {                                                                            \
    sizeof(collConfig_t), 0xc011c0f1u, COLL_VERSION_CODE,                      \
        COLL_CONFIG_UNDEF_INT, COLL_CONFIG_UNDEF_PTR, COLL_CONFIG_UNDEF_PTR,   \
        COLL_CONFIG_UNDEF_PTR, COLL_CONFIG_UNDEF_INT, COLL_CONFIG_UNDEF_INT,   \
        COLL_CONFIG_UNDEF_INT, COLL_CONFIG_UNDEF_PTR, COLL_CONFIG_UNDEF_INT    \
  }

/* Version as COLL_VERSION_CODE. */
collResult_t collGetVersion(int *version);

/* A human-readable description of `result`. */
const char *collGetErrorString(collResult_t result);
/* The message of the last error on `comm` (of this thread when comm is
 * NULL, e.g. after a failed init), or "" when there was none. */
const char *collGetLastError(collComm_t comm);

/* Creates the id rank 0 shares with the others (e.g. with MPI_Bcast), and
 * starts the root listener in this process: on COLL_COMM_ID=host:port when
 * set, else on the interface COLL_SOCKET_IFNAME selects. */
collResult_t collGetUniqueId(collUniqueId *uniqueId);

collResult_t collCommInitRank(collComm_t *comm, int nranks, collUniqueId commId, int rank);
collResult_t collCommInitRankConfig(collComm_t *comm, int nranks, collUniqueId commId,
                                    int rank, const collConfig_t *config);
/* Every rank of a new communicator in this process. `devices` NULL: host
 * ranks; else the CUDA device of each rank (several ranks may share one). */
collResult_t collCommInitAll(collComm_t *comms, int nranks, const int *devices);
/* Rank, size and root from the launcher's environment: Open MPI
 * (OMPI_COMM_WORLD_RANK/SIZE) or Slurm (SLURM_PROCID/NTASKS) with
 * COLL_COMM_ID=host:port naming rank 0's listener, or torchrun (RANK,
 * WORLD_SIZE, MASTER_ADDR, MASTER_PORT; the port after MASTER_PORT is used).
 * Rank 0 listens there. */
collResult_t collCommInitFromEnv(collComm_t *comm);
/* Ranks with the same color form a new communicator, ordered by key, then by
 * rank in `comm`; COLL_SPLIT_NOCOLOR gives *newcomm = NULL. Collective over
 * `comm`. `config` may be NULL (the parent's). */
collResult_t collCommSplit(collComm_t comm, int color, int key, collComm_t *newcomm,
                           const collConfig_t *config);
/* Waits for every rank to finish with the communicator; then destroy frees
 * it locally. */
collResult_t collCommFinalize(collComm_t comm);
collResult_t collCommDestroy(collComm_t comm);
/* Stops every call in flight on this communicator (on every local rank of
 * it), and frees it. Returns promptly from any state. */
collResult_t collCommAbort(collComm_t comm);
/* collSuccess, or the error that broke the communicator: a call that
 * failed, or, found by the communicator's liveness watch whether or not a
 * call is in flight, a rank that died (collRemoteError within a few
 * milliseconds on every survivor; collGetLastError names the rank), a
 * revoke or an abort on another rank (docs/RUNTIME.md, "Lost ranks"). */
collResult_t collCommGetAsyncError(collComm_t comm, collResult_t *asyncError);

/* Lost ranks (docs/RUNTIME.md, "Lost ranks"), in NCCL's shapes. */
#define COLL_REVOKE_DEFAULT 0x00
#define COLL_SHRINK_DEFAULT 0x00 /* the calls in flight are left to end */
#define COLL_SHRINK_ABORT 0x01   /* the calls in flight on this rank end first */
/* Ends the calls in flight on every rank of `comm` with collRemoteError
 * (this host's at once, the others' through the liveness ring) and breaks
 * it: later calls fail at once. Returns when this rank's calls have ended.
 * Resources stay until collCommDestroy or collCommAbort; collCommShrink
 * works on it. revokeFlags must be COLL_REVOKE_DEFAULT. */
collResult_t collCommRevoke(collComm_t comm, int revokeFlags);
/* Called by every rank of `comm` not in excludeRanks (and by none of
 * them): a new communicator of those ranks, numbered densely in their
 * order in `comm`. Works on a healthy, broken or revoked communicator, and
 * needs no unique id: the ranks meet over the listeners they opened at
 * creation. `config` NULL: the parent's. shrinkFlags: COLL_SHRINK_DEFAULT
 * or COLL_SHRINK_ABORT. A communicator whose ranks met through the MPI
 * drop-in cannot shrink (collInvalidUsage). */
collResult_t collCommShrink(collComm_t comm, int *excludeRanks, int excludeRanksCount,
                            collComm_t *newcomm, const collConfig_t *config, int shrinkFlags);
/* The unique id that names a grown communicator (collCommGrow), made by
 * the existing rank that will pass it (the root); as collGetUniqueId. */
collResult_t collCommGetUniqueId(collComm_t comm, collUniqueId *uniqueId);
/* A communicator of nRanks ranks: the ranks of `comm` keep their numbers,
 * new ranks take the rest. Existing ranks pass comm and rank -1, the root
 * also uniqueId (from collCommGetUniqueId), the others NULL; new ranks pass
 * comm NULL, uniqueId and their rank (at least comm's size). Collective
 * over all of them. `config` NULL: the parent's (new ranks: the
 * environment's). */
collResult_t collCommGrow(collComm_t comm, int nRanks, const collUniqueId *uniqueId, int rank,
                          collComm_t *newcomm, const collConfig_t *config);
collResult_t collCommCount(const collComm_t comm, int *count);
collResult_t collCommUserRank(const collComm_t comm, int *rank);

/* Which implementation the communicator's selection gives a call of
 * `collective` ("allreduce", "allgather", "reducescatter", "alltoall",
 * "broadcast", "reduce", "gather", "scatter") of `bytes` bytes (nccl-tests'
 * size: the larger, all-ranks side) with `root`: writes the algorithm's name,
 * or "library:NAME" when a tuning rule sends it to a library underneath
 * (collConfig_t::libraries), or "local" on a communicator of one rank (the
 * call copies sendbuff to recvbuff), followed by " -- " and the reason. When nothing
 * applies: collInvalidUsage, with every candidate's reason in
 * collGetLastError. Local; not collective. */
collResult_t collCommQueryChoice(collComm_t comm, const char *collective, size_t bytes, int root,
                                 char *out, size_t outBytes);

/* Whether calls on device buffers can run in this process: loads Coll's GPU
 * backend (libcoll_cuda.so, beside libcoll.so; COLL_CUDA_PLUGIN names
 * another file) unless it is loaded. On success *supported is 1, or 0 with
 * the reason in `why` (if not NULL, NUL-terminated within whyBytes). Local. */
collResult_t collDeviceBuffersSupported(int *supported, char *why, size_t whyBytes);

/* Collectives: NCCL's argument order and in-place rules. Buffers are host
 * memory (stream NULL; the call returns when it is done) or memory of one
 * CUDA device (the call is enqueued after the work `stream` holds, a
 * cudaStream_t, NULL for the legacy default stream, and returns at once, as
 * NCCL's do). */
collResult_t collAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           collDataType_t datatype, collRedOp_t op, collComm_t comm,
                           void *stream);
collResult_t collAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           collDataType_t datatype, collComm_t comm, void *stream);
collResult_t collReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               collDataType_t datatype, collRedOp_t op, collComm_t comm,
                               void *stream);
collResult_t collAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                          collDataType_t datatype, collComm_t comm, void *stream);
collResult_t collBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           collDataType_t datatype, int root, collComm_t comm, void *stream);
collResult_t collReduce(const void *sendbuff, void *recvbuff, size_t count,
                        collDataType_t datatype, collRedOp_t op, int root, collComm_t comm,
                        void *stream);
collResult_t collGather(const void *sendbuff, void *recvbuff, size_t count,
                        collDataType_t datatype, int root, collComm_t comm, void *stream);
collResult_t collScatter(const void *sendbuff, void *recvbuff, size_t count,
                         collDataType_t datatype, int root, collComm_t comm, void *stream);

/* Point to point: matched in order per (sender, receiver); sends and
 * receives that must progress together go in one group. */
collResult_t collSend(const void *sendbuff, size_t count, collDataType_t datatype, int peer,
                      collComm_t comm, void *stream);
collResult_t collRecv(void *recvbuff, size_t count, collDataType_t datatype, int peer,
                      collComm_t comm, void *stream);

/* Tagged point-to-point, with MPI's matching rules (docs/RUNTIME.md,
 * "Tagged point-to-point"): a receive takes the first message, in the
 * order each sender posted them, whose source and tag it names (or
 * COLL_ANY_SOURCE, COLL_ANY_TAG). Nonblocking: sends and receives posted
 * in any order by any ranks complete at every size. A request is complete
 * when collTest says so or collWait returns, which free it and set it to
 * NULL; its status (which may be NULL) gives a receive's source, tag and
 * element count. A receive whose message is larger than its buffer fails
 * with collInvalidUsage and writes nothing (MPI_ERR_TRUNCATE). Host
 * buffers. Tags are 0 to COLL_TAG_UB. Not part of groups. */
#define COLL_ANY_SOURCE (-1)
#define COLL_ANY_TAG (-1)
#define COLL_TAG_UB 0x7fffffff
typedef struct collRequest *collRequest_t;
typedef struct {
  int source;          /* the sender (a receive), or COLL_ANY_SOURCE (a send) */
  int tag;             /* the message's tag */
  size_t count;        /* elements of the request's datatype received (sent) */
  collResult_t error;  /* the request's outcome */
} collStatus_t;
collResult_t collIsend(const void *sendbuff, size_t count, collDataType_t datatype, int peer,
                       int tag, collComm_t comm, collRequest_t *request);
collResult_t collIrecv(void *recvbuff, size_t count, collDataType_t datatype, int peer, int tag,
                       collComm_t comm, collRequest_t *request);
/* *flag: 1 when the request is complete (then freed, *request NULL). */
collResult_t collTest(collRequest_t *request, int *flag, collStatus_t *status);
collResult_t collWait(collRequest_t *request, collStatus_t *status);
/* Waits for every request; statuses (may be NULL) has count entries. The
 * first failure's result. */
collResult_t collWaitAll(int count, collRequest_t *requests, collStatus_t *statuses);

/* Calls between collGroupStart and collGroupEnd (per thread, nestable) are
 * queued and run together at the outermost collGroupEnd, which returns when
 * all are complete. */
collResult_t collGroupStart(void);
collResult_t collGroupEnd(void);

/* Windows (docs/RUNTIME.md, "Windows"), as NCCL's: memory that the other
 * ranks of the host map, so that programs with direct steps read and write
 * a call's buffers there instead of copying them into the communicator's
 * shared area. collMemAlloc returns host memory that can be registered
 * (shared memory of this process), collMemAllocDevice GPU memory (calls on
 * device buffers); collCommWindowRegister is collective:
 * every rank registers a buffer of the same size, in the same order, and
 * collCommWindowDeregister likewise, once no call uses it. A call whose
 * buffers lie in windows of its communicator runs on them. collMemFree
 * refuses memory that is still registered. */
typedef struct collWindow *collWindow_t;
#define COLL_WIN_DEFAULT 0x00
#define COLL_WIN_COLL_SYMMETRIC 0x01
collResult_t collMemAlloc(void **ptr, size_t size);
/* GPU memory that windows can hold, as ncclMemAlloc's: `size` bytes of CUDA
 * device `device` (-1: the calling thread's current device), zeroed, an
 * allocation of its own that the other processes of the host map with CUDA
 * IPC once it is registered. collMemFree frees it. */
collResult_t collMemAllocDevice(void **ptr, size_t size, int device);
collResult_t collMemFree(void *ptr);
collResult_t collCommWindowRegister(collComm_t comm, void *buff, size_t size, collWindow_t *win,
                                    int winFlags);
collResult_t collCommWindowDeregister(collComm_t comm, collWindow_t win);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* COLL_H */
