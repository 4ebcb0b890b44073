/*===- coll_vs_mpi.c - Coll's C API against Open MPI's collectives ----------===*
 *
 * A benchmark, not a test: in the same run, on the same buffers, it times
 * each collective through coll.h and through Open MPI's own MPI_*, and
 * prints both latencies and their ratio, in the style of nccl-tests/OSU.
 *
 *   mpirun -np 2 build/bin/coll-vs-mpi [--min 4] [--max 64M] [--op allreduce,...]
 *                                      [--isolated N] [--skew-us T] [--plot FILE.svg]
 *                                      [--windows] [--in-place] [--factor 4]
 *
 * Sizes go from --min to --max, each --factor times the last (4 unless
 * told). They are nccl-tests' (the larger buffer: allgather, alltoall and
 * reduce-scatter count
 * every rank's block). Each point runs a few warm-up calls, then as many
 * calls as fit in about 0.2 s (at least 5, at most 2000), separated by
 * nothing; the time per call is the slowest rank's average. Then it times
 * calls one by one, each after a barrier, as an application that computes
 * between calls makes them: the slowest rank's time of each call, from its
 * barrier's end to its call's return, and the median of those (at most N
 * calls, default 101, and about 0.2 s; --isolated 0 leaves this out).
 * --skew-us T makes the last rank compute for T us after each barrier before
 * its isolated call, as a rank that arrives late does (the times include T).
 * --in-place (allreduce and reducescatter) runs the calls in place: Open
 * MPI's with MPI_IN_PLACE (a reduce_scatter_block's input is then its whole
 * receive buffer, its result the first block), Coll's with NCCL's form
 * (sendbuff == recvbuff; recvbuff the rank's own block of sendbuff); with
 * libcoll_mpi.so preloaded, the MPI column is the MPI drop-in's.
 * --windows puts the buffers in memory from collMemAlloc, registered with
 * the communicator (collCommWindowRegister), so that Coll's direct
 * programs read and write them in place (docs/RUNTIME.md, "Windows"); Open
 * MPI runs on the same buffers. The results are
 * checked once per point, so that a fast wrong answer cannot win. On a
 * terminal, rank 0 shows the point running and the time left (Progress.h).
 *
 * Point-to-point (--op pingpong,exchange; even process counts, rank r paired
 * with r^1), as OSU's osu_latency and osu_bibw measure it: "pingpong" is
 * one round trip (the even rank sends, the odd one receives and sends the
 * message back; half of it is the one-way latency), "exchange" is each
 * rank of a pair sending to the other and receiving from it at once
 * (isend and irecv, then both waited for). Coll's side is collIsend,
 * collIrecv and collWait (tag 7), Open MPI's MPI_Isend, MPI_Irecv and
 * MPI_Wait*. Neither is in the default --op list.
 *
 *===----------------------------------------------------------------------===*/

#include <CollPlot.h>
#include <Progress.h>
#include <coll.h>
#include <coll_mpi.h>
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;
static collComm_t comm;
static int inPlace; /* --in-place */

enum Coll { ALLREDUCE, ALLGATHER, ALLTOALL, BCAST, REDUCESCATTER, PINGPONG, EXCHANGE, NCOLL };
static const char *names[NCOLL] = {"allreduce", "allgather",     "alltoall", "bcast",
                                   "reducescatter", "pingpong", "exchange"};

static void die(const char *what) {
  fprintf(stderr, "rank %d: %s: %s\n", rank, what, collGetLastError(comm));
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* One pingpong or exchange with rank^1 (see the header): lib 0 is Coll. */
static collResult_t pointToPoint(int lib, enum Coll c, float *send, float *recv, size_t count) {
  const int peer = rank ^ 1, tag = 7, ic = (int)count;
  collResult_t r = collSuccess;
  if (c == EXCHANGE) {
    if (lib == 0) {
      collRequest_t req[2] = {NULL, NULL};
      if ((r = collIrecv(recv, count, collFloat32, peer, tag, comm, &req[0])) == collSuccess &&
          (r = collIsend(send, count, collFloat32, peer, tag, comm, &req[1])) == collSuccess)
        r = collWaitAll(2, req, NULL);
    } else {
      MPI_Request req[2];
      MPI_Irecv(recv, ic, MPI_FLOAT, peer, tag, MPI_COMM_WORLD, &req[0]);
      MPI_Isend(send, ic, MPI_FLOAT, peer, tag, MPI_COMM_WORLD, &req[1]);
      MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    }
    return r;
  }
  /* pingpong: the even rank sends `send` and receives the reply into recv;
   * the odd one receives into recv and sends recv back. */
  for (int leg = 0; leg < 2 && r == collSuccess; ++leg) {
    const int sending = (leg == 0) == (rank % 2 == 0);
    float *buf = sending ? (rank % 2 == 0 ? send : recv) : recv;
    if (lib == 0) {
      collRequest_t req = NULL;
      r = sending ? collIsend(buf, count, collFloat32, peer, tag, comm, &req)
                  : collIrecv(buf, count, collFloat32, peer, tag, comm, &req);
      if (r == collSuccess)
        r = collWait(&req, NULL);
    } else {
      MPI_Request req;
      if (sending)
        MPI_Isend(buf, ic, MPI_FLOAT, peer, tag, MPI_COMM_WORLD, &req);
      else
        MPI_Irecv(buf, ic, MPI_FLOAT, peer, tag, MPI_COMM_WORLD, &req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
  }
  return r;
}

/* One call; lib 0 is Coll, 1 is MPI. count is per rank block in floats. */
static void call(int lib, enum Coll c, float *send, float *recv, size_t count) {
  int ic = (int)count;
  collResult_t r = collSuccess;
  switch (c) {
  case ALLREDUCE:
    if (lib == 0)
      r = collAllReduce(inPlace ? recv : send, recv, count, collFloat32, collSum, comm, NULL);
    else
      MPI_Allreduce(inPlace ? MPI_IN_PLACE : send, recv, ic, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    break;
  case ALLGATHER:
    if (lib == 0)
      r = collAllGather(send, recv, count, collFloat32, comm, NULL);
    else
      MPI_Allgather(send, ic, MPI_FLOAT, recv, ic, MPI_FLOAT, MPI_COMM_WORLD);
    break;
  case ALLTOALL:
    if (lib == 0)
      r = collAlltoAll(send, recv, count, collFloat32, comm, NULL);
    else
      MPI_Alltoall(send, ic, MPI_FLOAT, recv, ic, MPI_FLOAT, MPI_COMM_WORLD);
    break;
  case BCAST:
    if (lib == 0)
      r = collBroadcast(recv, recv, count, collFloat32, 0, comm, NULL);
    else
      MPI_Bcast(recv, ic, MPI_FLOAT, 0, MPI_COMM_WORLD);
    break;
  case PINGPONG:
  case EXCHANGE:
    r = pointToPoint(lib, c, send, recv, count);
    break;
  case REDUCESCATTER:
    /* In place: the input is sendbuff for both (see resultOf). */
    if (lib == 0)
      r = collReduceScatter(send, inPlace ? send + (size_t)rank * count : recv, count,
                            collFloat32, collSum, comm, NULL);
    else
      MPI_Reduce_scatter_block(inPlace ? MPI_IN_PLACE : send, inPlace ? send : recv, ic,
                               MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    break;
  default:
    break;
  }
  if (r != collSuccess)
    die(names[c]);
}

/* Whether a call's larger buffer holds a block per rank (count is a
 * block's), as nccl-tests sizes allgather, alltoall and reduce-scatter. */
static int perRankBlocks(enum Coll c) {
  return c == ALLGATHER || c == ALLTOALL || c == REDUCESCATTER;
}

/* Checks the result of one call against its definition. */
static int check(enum Coll c, const float *recv, size_t count) {
  size_t i, n = (size_t)nranks;
  for (i = 0; i < count; ++i) {
    int r;
    float want = 0;
    switch (c) {
    case ALLREDUCE:
      for (r = 0; r < nranks; ++r)
        want += (float)((r + i) % 7);
      if (recv[i] != want)
        return 0;
      break;
    case ALLGATHER:
      for (r = 0; r < nranks; ++r)
        if (recv[r * count + i] != (float)((r + i) % 7))
          return 0;
      break;
    case ALLTOALL:
      for (r = 0; r < nranks; ++r)
        if (recv[r * count + i] != (float)((r * 3 + rank * count + i) % 7))
          return 0;
      break;
    case BCAST:
      if (recv[i] != (float)(i % 7))
        return 0;
      break;
    case PINGPONG: /* the even rank's message, there and back */
      if (recv[i] != (float)(((rank & ~1) + i) % 7))
        return 0;
      break;
    case EXCHANGE:
      if (recv[i] != (float)(((rank ^ 1) + i) % 7))
        return 0;
      break;
    case REDUCESCATTER:
      /* Block `rank` of every rank's sendbuff, summed. */
      for (r = 0; r < nranks; ++r)
        want += (float)((r + (size_t)rank * count + i) % 7);
      if (recv[i] != want)
        return 0;
      break;
    default:
      break;
    }
  }
  (void)n;
  return 1;
}

static void fill(enum Coll c, float *send, float *recv, size_t count) {
  size_t i, n = (size_t)nranks;
  for (i = 0; i < count * n; ++i)
    send[i] = c == ALLTOALL ? (float)((rank * 3 + i) % 7) : (float)((rank + i) % 7);
  for (i = 0; i < count; ++i)
    recv[i] = c == BCAST && rank == 0 ? (float)(i % 7) : c == ALLREDUCE && inPlace ? send[i]
                                                                                  : -1.0f;
}

/* Where library `lib`'s call leaves its result. */
static const float *resultOf(int lib, enum Coll c, const float *send, const float *recv,
                             size_t count) {
  if (c == REDUCESCATTER && inPlace)
    return lib == 0 ? send + (size_t)rank * count : send;
  return recv;
}

/* Seconds per call, the slowest rank's. */
static double timeit(int lib, enum Coll c, float *send, float *recv, size_t count) {
  int iters = 5, w, k;
  double t0, t, worst;
  for (w = 0; w < 3; ++w)
    call(lib, c, send, recv, count);
  /* Calibrate: how many calls fit in 0.2 s (agreed by every rank). */
  MPI_Barrier(MPI_COMM_WORLD);
  t0 = MPI_Wtime();
  call(lib, c, send, recv, count);
  t = MPI_Wtime() - t0;
  MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (worst > 0)
    iters = (int)(0.2 / worst);
  if (iters < 5)
    iters = 5;
  if (iters > 2000)
    iters = 2000;
  MPI_Barrier(MPI_COMM_WORLD);
  t0 = MPI_Wtime();
  for (k = 0; k < iters; ++k)
    call(lib, c, send, recv, count);
  t = (MPI_Wtime() - t0) / iters;
  MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

/* --skew-us: how long the last rank computes after each barrier before its
 * isolated call, as a rank that arrives late does. */
static double skewSeconds;

static int compareDoubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Seconds per call made alone: the median over `calls` calls, each made
 * after a barrier, of the slowest rank's time. */
static double isolated(int lib, enum Coll c, float *send, float *recv, size_t count, int calls) {
  double *mine = malloc((size_t)calls * sizeof(double));
  double *worst = malloc((size_t)calls * sizeof(double));
  double median;
  int k;
  if (!mine || !worst)
    die("out of memory");
  for (k = 0; k < calls; ++k) {
    double t0;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    if (skewSeconds > 0 && rank == nranks - 1)
      while (MPI_Wtime() - t0 < skewSeconds)
        ;
    call(lib, c, send, recv, count);
    mine[k] = MPI_Wtime() - t0;
  }
  MPI_Allreduce(mine, worst, calls, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  qsort(worst, (size_t)calls, sizeof(double), compareDoubles);
  median = worst[calls / 2];
  free(mine);
  free(worst);
  return median;
}

/* How many isolated calls a point gets: about 0.2 s of them at the
 * back-to-back time `perCall`, odd, at least 11 and at most `most`. */
static int isolatedCalls(double perCall, int most) {
  int calls = perCall > 0 ? (int)(0.2 / perCall) : most;
  if (calls > most)
    calls = most;
  if (calls < 11)
    calls = 11;
  return calls | 1;
}

static size_t parseSize(const char *s) {
  char *end;
  size_t v = strtoull(s, &end, 10);
  if (*end == 'K' || *end == 'k')
    v <<= 10;
  else if (*end == 'M' || *end == 'm')
    v <<= 20;
  else if (*end == 'G' || *end == 'g')
    v <<= 30;
  return v;
}

/* nccl-tests' bus bandwidth factor: the bytes each rank must move over its
 * link, as a multiple of the message size. */
static double busFactor(enum Coll c, int n) {
  switch (c) {
  case ALLREDUCE: return 2.0 * (n - 1) / n;
  case ALLGATHER:
  case ALLTOALL:
  case REDUCESCATTER: return (double)(n - 1) / n;
  case PINGPONG: return 2.0; /* the message crosses twice per round trip */
  case EXCHANGE: return 2.0; /* both directions at once: osu_bibw's bandwidth */
  default: return 1.0;
  }
}

int main(int argc, char **argv) {
  size_t minBytes = 4, maxBytes = 64u << 20, bytes, factor = 4;
  const char *ops = "allreduce,allgather,alltoall,bcast,reducescatter";
  const char *plot = NULL;
  collPlotPoint points[512];
  char seriesNames[NCOLL][2][48];
  size_t npoints = 0;
  collProgress *progress = NULL;
  int isolatedMost = 101;
  int windows = 0;
  int a, c;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  for (a = 1; a < argc; a += 2) {
    if (!strcmp(argv[a], "--windows") || !strcmp(argv[a], "--in-place")) {
      *(argv[a][2] == 'w' ? &windows : &inPlace) = 1;
      --a;
      continue;
    }
    if (a + 1 >= argc)
      break;
    if (!strcmp(argv[a], "--min"))
      minBytes = parseSize(argv[a + 1]);
    else if (!strcmp(argv[a], "--max"))
      maxBytes = parseSize(argv[a + 1]);
    else if (!strcmp(argv[a], "--op"))
      ops = argv[a + 1];
    else if (!strcmp(argv[a], "--factor"))
      factor = strtoull(argv[a + 1], NULL, 10);
    else if (!strcmp(argv[a], "--plot"))
      plot = argv[a + 1];
    else if (!strcmp(argv[a], "--isolated"))
      isolatedMost = atoi(argv[a + 1]);
    else if (!strcmp(argv[a], "--skew-us"))
      skewSeconds = atof(argv[a + 1]) * 1e-6;
  }
  if (inPlace && (strstr(ops, "allgather") || strstr(ops, "alltoall") || strstr(ops, "bcast"))) {
    if (rank == 0)
      fprintf(stderr, "coll-vs-mpi: --in-place runs allreduce and reducescatter only (--op)\n");
    MPI_Finalize();
    return 2;
  }
  if ((strstr(ops, "pingpong") || strstr(ops, "exchange")) && (nranks % 2 || inPlace)) {
    if (rank == 0)
      fprintf(stderr, "coll-vs-mpi: pingpong and exchange pair the ranks: an even number of "
                      "processes, not --in-place\n");
    MPI_Finalize();
    return 2;
  }
  if (factor < 2) {
    if (rank == 0)
      fprintf(stderr, "coll-vs-mpi: --factor takes a whole number from 2 up\n");
    MPI_Finalize();
    return 2;
  }
  if (isolatedMost < 0) {
    if (rank == 0)
      fprintf(stderr, "coll-vs-mpi: --isolated takes a number of calls (0: none)\n");
    MPI_Finalize();
    return 2;
  }
  for (c = 0; c < NCOLL; ++c) {
    snprintf(seriesNames[c][0], sizeof seriesNames[c][0], "%s, Coll", names[c]);
    snprintf(seriesNames[c][1], sizeof seriesNames[c][1], "%s, Open MPI", names[c]);
  }
  if (collCommInitFromMPI(MPI_COMM_WORLD, &comm) != collSuccess)
    die("collCommInitFromMPI");

  if (rank == 0) {
    printf("# Coll (coll.h) against Open MPI, %d processes, fp32; time per call in us, "
           "the slowest rank's average\n",
           nranks);
    if (isolatedMost > 0)
      printf("# alone: each call after a barrier, the median of the slowest rank's time "
             "(at most %d calls)%s\n",
             isolatedMost | 1, skewSeconds > 0 ? "; the last rank computes first" : "");
    if (inPlace)
      printf("# in place: MPI_IN_PLACE for Open MPI; sendbuff == recvbuff (allreduce) or "
             "recvbuff the rank's block of sendbuff (reducescatter) for Coll\n");
    if (windows)
      printf("# buffers: collMemAlloc, registered with collCommWindowRegister (both libraries "
             "use them)\n");
    if (isolatedMost > 0 && skewSeconds > 0)
      printf("# skew: after each barrier the last rank computes for %.0f us before its call; "
             "the time includes it\n",
             skewSeconds * 1e6);
  }
  if (rank == 0) {
    /* Every point is timed for about as long: each weighs 1. */
    size_t steps = 0;
    for (c = 0; c < NCOLL; ++c)
      for (bytes = minBytes; strstr(ops, names[c]) && bytes <= maxBytes; bytes *= factor)
        steps += (perRankBlocks((enum Coll)c) ? bytes / (size_t)nranks : bytes) >=
                 sizeof(float);
    progress = collProgressStart("coll-vs-mpi", steps, (double)steps);
  }
  for (c = 0; c < NCOLL; ++c) {
    if (!strstr(ops, names[c]))
      continue;
    if (rank == 0) {
      printf("#\n# %-10s %12s %12s %12s %10s %8s", names[c], "size(B)", "count", "coll(us)",
             "mpi(us)", "coll/mpi");
      if (isolatedMost > 0)
        printf(" %14s %13s %10s", "coll-alone(us)", "mpi-alone(us)", "alone c/m");
      printf("\n");
    }
    for (bytes = minBytes; bytes <= maxBytes; bytes *= factor) {
      /* bytes is the larger buffer; count is per rank block. */
      size_t perBlock = perRankBlocks((enum Coll)c) ? bytes / (size_t)nranks : bytes;
      size_t count = perBlock / sizeof(float);
      size_t n = (size_t)nranks;
      float *send, *recv;
      collWindow_t sendWin = NULL, recvWin = NULL;
      double tc, tm, ic = 0, im = 0;
      int ok, allOk;
      if (count == 0)
        continue;
      if (progress) {
        char what[64];
        snprintf(what, sizeof what, "%s of %zu bytes", names[c], bytes);
        fflush(stdout);
        collProgressStep(progress, what, 1);
      }
      if (windows) {
        if (collMemAlloc((void **)&send, count * n * sizeof(float)) != collSuccess ||
            collMemAlloc((void **)&recv, count * n * sizeof(float)) != collSuccess)
          die("collMemAlloc");
        if (collCommWindowRegister(comm, send, count * n * sizeof(float), &sendWin,
                                   COLL_WIN_COLL_SYMMETRIC) != collSuccess ||
            collCommWindowRegister(comm, recv, count * n * sizeof(float), &recvWin,
                                   COLL_WIN_COLL_SYMMETRIC) != collSuccess)
          die("collCommWindowRegister");
      } else {
        send = malloc(count * n * sizeof(float));
        recv = malloc(count * n * sizeof(float));
      }
      if (!send || !recv)
        die("out of memory");
      fill((enum Coll)c, send, recv, count);
      call(0, (enum Coll)c, send, recv, count);
      ok = check((enum Coll)c, resultOf(0, (enum Coll)c, send, recv, count), count);
      fill((enum Coll)c, send, recv, count);
      call(1, (enum Coll)c, send, recv, count);
      ok = ok && check((enum Coll)c, resultOf(1, (enum Coll)c, send, recv, count), count);
      MPI_Allreduce(&ok, &allOk, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      if (!allOk) {
        if (rank == 0)
          fprintf(stderr, "%s of %zu B: wrong result\n", names[c], bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
      /* Alternate the order so neither library always runs on a warm cache. */
      tm = timeit(1, (enum Coll)c, send, recv, count);
      tc = timeit(0, (enum Coll)c, send, recv, count);
      if (isolatedMost > 0) {
        int calls = isolatedCalls(tc > tm ? tc : tm, isolatedMost);
        ic = isolated(0, (enum Coll)c, send, recv, count, calls);
        im = isolated(1, (enum Coll)c, send, recv, count, calls);
      }
      collProgressClear(progress);
      if (rank == 0) {
        printf("  %-10s %12zu %12zu %12.2f %12.2f %8.2f", names[c], count * sizeof(float) *
               (perRankBlocks((enum Coll)c) ? n : 1), count, tc * 1e6, tm * 1e6, tc / tm);
        if (isolatedMost > 0)
          printf(" %14.2f %13.2f %10.2f", ic * 1e6, im * 1e6, ic / im);
        printf("\n");
      }
      if (rank == 0 && plot && npoints + 2 <= sizeof points / sizeof points[0]) {
        uint64_t size = count * sizeof(float) * (perRankBlocks((enum Coll)c) ? n : 1);
        double factor = busFactor((enum Coll)c, nranks);
        collPlotPoint coll = {seriesNames[c][0], 0, size, tc, tc > 0 ? size / tc / 1e9 * factor : 0};
        collPlotPoint mpi = {seriesNames[c][1], 1, size, tm, tm > 0 ? size / tm / 1e9 * factor : 0};
        points[npoints++] = coll;
        points[npoints++] = mpi;
      }
      fflush(stdout);
      if (windows) {
        if (collCommWindowDeregister(comm, sendWin) != collSuccess ||
            collCommWindowDeregister(comm, recvWin) != collSuccess ||
            collMemFree(send) != collSuccess || collMemFree(recv) != collSuccess)
          die("collCommWindowDeregister or collMemFree");
      } else {
        free(send);
        free(recv);
      }
    }
  }
  collProgressEnd(progress);
  if (rank == 0 && plot) {
    char title[128];
    snprintf(title, sizeof title, "Coll (coll.h) against Open MPI, %d processes, fp32", nranks);
    if (collPlotWrite(plot, title, points, npoints) != 0) {
      collCommDestroy(comm);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    printf("# plot written to %s\n", plot);
  }
  collCommDestroy(comm);
  MPI_Finalize();
  return 0;
}
