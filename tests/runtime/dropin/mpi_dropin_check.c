/*===- mpi_dropin_check.c - An MPI program run with libcoll_mpi.so preloaded ===*
 *
 * A plain MPI program: it knows nothing of Coll. Every collective the
 * interposer intercepts runs through MPI_* (which the preloaded
 * libcoll_mpi.so serves or passes on) and again through PMPI_* (Open MPI
 * itself), and the results must agree: bit-exact for integers and copies,
 * within reduction-order tolerance for floats. Sizes from 0 to 2 MiB,
 * MPI_IN_PLACE, a communicator from MPI_Comm_split, a derived datatype
 * (moved as bytes), and calls that must fall back (MPI_MAXLOC, a
 * user-defined op, an intercommunicator). Prints "rank R: ok N checks" or
 * "rank R: FAIL ...".
 *
 * Built with COLL_TEST_DEVICE=1 (mpi-dropin-check-device), every buffer
 * comes from cudaMalloc, as in a CUDA-aware MPI program: linked to the
 * stand-in CUDA runtime (whose device memory is host memory, which Open MPI
 * can read too) and run with COLL_CUDA_PLUGIN=emulated, the interposer's
 * device path runs on the CPU.
 *
 *===----------------------------------------------------------------------===*/

#include <mpi.h>
#if COLL_TEST_DEVICE
#include <cuda_runtime_api.h>
#endif

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int wrank;
static long checks, failures;

static void fail(const char *what, size_t i, double got, double want) {
  ++failures;
  if (failures <= 10)
    printf("rank %d: FAIL %s: element %zu is %.9g, MPI says %.9g\n", wrank, what, i, got, want);
}

static void compareF(const char *what, const float *a, const float *b, size_t n, int nranks) {
  size_t i;
  for (i = 0; i < n; ++i) {
    double tol = 1e-5 * nranks * (fabs(b[i]) + 1);
    ++checks;
    if (!(fabs((double)a[i] - b[i]) <= tol))
      fail(what, i, a[i], b[i]);
  }
}

static void compareBytes(const char *what, const void *a, const void *b, size_t bytes) {
  ++checks;
  if (memcmp(a, b, bytes) != 0) {
    size_t i;
    for (i = 0; i < bytes && ((const char *)a)[i] == ((const char *)b)[i]; ++i)
      ;
    fail(what, i, ((const unsigned char *)a)[i], ((const unsigned char *)b)[i]);
  }
}

#if COLL_TEST_DEVICE
static void *xmalloc(size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess || !p)
    MPI_Abort(MPI_COMM_WORLD, 2);
  memset(p, 0, bytes ? bytes : 1); /* the stand-in's device memory is the host's */
  return p;
}
#define free(p) cudaFree(p)
#else
static void *xmalloc(size_t bytes) {
  void *p = calloc(bytes ? bytes : 1, 1);
  if (!p)
    MPI_Abort(MPI_COMM_WORLD, 2);
  return p;
}
#endif

static void fillF(float *p, size_t n, int rank, int salt) {
  size_t i;
  for (i = 0; i < n; ++i)
    p[i] = (float)(((rank + 1) * 131 + i * 7 + salt) % 97) / 8.0f - 3.0f;
}

static void fillI(int32_t *p, size_t n, int rank, int salt) {
  size_t i;
  for (i = 0; i < n; ++i)
    p[i] = (int32_t)(((rank + 3) * 2654435761u + i * 40503u + salt) % 2001) - 1000;
}

/* Every intercepted collective on `comm`, `count` elements per block. */
static void suite(MPI_Comm comm, size_t count, const char *label) {
  int rank, n, c = (int)count, root;
  char what[160];
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  root = n - 1;
  size_t all = count * (size_t)n;
  float *sf = xmalloc(all * 4), *rf = xmalloc(all * 4), *ef = xmalloc(all * 4);
  int32_t *si = xmalloc(all * 4), *ri = xmalloc(all * 4), *ei = xmalloc(all * 4);
  static const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
  static const char *opNames[] = {"sum", "prod", "min", "max"};
  int o;

  for (o = 0; o < 4; ++o) {
    /* Allreduce: float and int32, out of place and in place. */
    fillF(sf, count, rank, o);
    if (ops[o] == MPI_PROD) {
      size_t i;
      for (i = 0; i < count; ++i)
        sf[i] = (float)((rank + i) % 3) * 0.5f + 0.75f;
    }
    MPI_Allreduce(sf, rf, c, MPI_FLOAT, ops[o], comm);
    PMPI_Allreduce(sf, ef, c, MPI_FLOAT, ops[o], comm);
    snprintf(what, sizeof what, "%s allreduce float %s count %zu", label, opNames[o], count);
    compareF(what, rf, ef, count, n);

    fillI(si, count, rank, o);
    if (ops[o] == MPI_PROD) {
      size_t i;
      for (i = 0; i < count; ++i)
        si[i] = (int32_t)((rank + i) % 3) - 1;
    }
    memcpy(ri, si, count * 4);
    MPI_Allreduce(MPI_IN_PLACE, ri, c, MPI_INT, ops[o], comm);
    PMPI_Allreduce(si, ei, c, MPI_INT, ops[o], comm);
    snprintf(what, sizeof what, "%s allreduce int in place %s count %zu", label, opNames[o], count);
    compareBytes(what, ri, ei, count * 4);
  }

  /* Reduce to the last rank, out of place and in place at the root. */
  fillI(si, count, rank, 11);
  memset(ri, 0, count * 4);
  MPI_Reduce(si, ri, c, MPI_INT, MPI_SUM, root, comm);
  PMPI_Reduce(si, ei, c, MPI_INT, MPI_SUM, root, comm);
  snprintf(what, sizeof what, "%s reduce int count %zu", label, count);
  if (rank == root)
    compareBytes(what, ri, ei, count * 4);
  memcpy(ri, si, count * 4);
  MPI_Reduce(rank == root ? MPI_IN_PLACE : si, rank == root ? ri : NULL, c, MPI_INT, MPI_MAX, root,
             comm);
  PMPI_Reduce(si, ei, c, MPI_INT, MPI_MAX, root, comm);
  snprintf(what, sizeof what, "%s reduce int in place count %zu", label, count);
  if (rank == root)
    compareBytes(what, ri, ei, count * 4);

  /* Reduce_scatter_block, out of place and in place. */
  fillF(sf, all, rank, 5);
  MPI_Reduce_scatter_block(sf, rf, c, MPI_FLOAT, MPI_SUM, comm);
  PMPI_Reduce_scatter_block(sf, ef, c, MPI_FLOAT, MPI_SUM, comm);
  snprintf(what, sizeof what, "%s reduce_scatter_block float count %zu", label, count);
  compareF(what, rf, ef, count, n);
  fillI(si, all, rank, 6);
  memcpy(ri, si, all * 4);
  MPI_Reduce_scatter_block(MPI_IN_PLACE, ri, c, MPI_INT, MPI_SUM, comm);
  PMPI_Reduce_scatter_block(si, ei, c, MPI_INT, MPI_SUM, comm);
  snprintf(what, sizeof what, "%s reduce_scatter_block int in place count %zu", label, count);
  compareBytes(what, ri, ei, count * 4);

  /* Allgather, out of place and in place; int32 sent as bytes as well. */
  fillI(si, count, rank, 7);
  MPI_Allgather(si, c, MPI_INT, ri, c, MPI_INT, comm);
  PMPI_Allgather(si, c, MPI_INT, ei, c, MPI_INT, comm);
  snprintf(what, sizeof what, "%s allgather int count %zu", label, count);
  compareBytes(what, ri, ei, all * 4);
  memset(ri, 0, all * 4);
  memcpy(ri + (size_t)rank * count, si, count * 4);
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ri, c * 4, MPI_BYTE, comm);
  snprintf(what, sizeof what, "%s allgather bytes in place count %zu", label, count);
  compareBytes(what, ri, ei, all * 4);

  /* Alltoall, out of place and in place. */
  fillI(si, all, rank, 8);
  MPI_Alltoall(si, c, MPI_INT, ri, c, MPI_INT, comm);
  PMPI_Alltoall(si, c, MPI_INT, ei, c, MPI_INT, comm);
  snprintf(what, sizeof what, "%s alltoall int count %zu", label, count);
  compareBytes(what, ri, ei, all * 4);
  memcpy(ri, si, all * 4);
  MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ri, c, MPI_INT, comm);
  snprintf(what, sizeof what, "%s alltoall int in place count %zu", label, count);
  compareBytes(what, ri, ei, all * 4);

  /* Bcast from the last rank and from rank 0. */
  fillF(sf, count, rank == root ? 99 : rank, 9);
  memcpy(ef, sf, count * 4);
  MPI_Bcast(sf, c, MPI_FLOAT, root, comm);
  PMPI_Bcast(ef, c, MPI_FLOAT, root, comm);
  snprintf(what, sizeof what, "%s bcast float root %d count %zu", label, root, count);
  compareBytes(what, sf, ef, count * 4);
  fillI(si, count, rank, 10);
  memcpy(ei, si, count * 4);
  MPI_Bcast(si, c, MPI_INT, 0, comm);
  PMPI_Bcast(ei, c, MPI_INT, 0, comm);
  snprintf(what, sizeof what, "%s bcast int root 0 count %zu", label, count);
  compareBytes(what, si, ei, count * 4);

  free(sf), free(rf), free(ef), free(si), free(ri), free(ei);
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *type) {
  int i;
  (void)type;
  for (i = 0; i < *len; ++i)
    ((int *)inout)[i] += ((int *)in)[i];
}

/* A derived datatype (which Coll moves as bytes), then calls the
 * interposer must hand to Open MPI, still with right results. */
static void fallbacks(void) {
  int n, i;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  enum { C = 100 };
  int32_t s[2 * C], r[2 * C], e[2 * C];

  /* A derived datatype. */
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  {
    int32_t *gs = xmalloc(2 * C * 4), *gr = xmalloc(2 * C * 4 * (size_t)n),
            *ge = xmalloc(2 * C * 4 * (size_t)n);
    fillI(gs, 2 * C, wrank, 1);
    MPI_Allgather(gs, C, pair, gr, C, pair, MPI_COMM_WORLD);
    PMPI_Allgather(gs, C, pair, ge, C, pair, MPI_COMM_WORLD);
    compareBytes("allgather of a derived datatype", gr, ge, 2 * C * 4 * (size_t)n);
    free(gs), free(gr), free(ge);
  }
  MPI_Type_free(&pair);

  /* MPI_MAXLOC on MPI_2INT. */
  for (i = 0; i < C; ++i) {
    s[2 * i] = (wrank * 17 + i) % 23;
    s[2 * i + 1] = wrank;
  }
  MPI_Allreduce(s, r, C, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD);
  PMPI_Allreduce(s, e, C, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD);
  compareBytes("fallback: allreduce MPI_MAXLOC", r, e, sizeof r);

  /* A user-defined op. */
  MPI_Op mine;
  MPI_Op_create(user_sum, 1, &mine);
  fillI(s, C, wrank, 2);
  MPI_Allreduce(s, r, C, MPI_INT, mine, MPI_COMM_WORLD);
  PMPI_Allreduce(s, e, C, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  compareBytes("fallback: allreduce with a user op", r, e, C * 4);
  MPI_Op_free(&mine);

  /* An intercommunicator between the even and the odd ranks. */
  if (n >= 2) {
    MPI_Comm half, inter;
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, wrank % 2 ? 0 : 1, 7, &inter);
    fillI(s, C, wrank, 3);
    MPI_Allreduce(s, r, C, MPI_INT, MPI_SUM, inter);
    PMPI_Allreduce(s, e, C, MPI_INT, MPI_SUM, inter);
    compareBytes("fallback: allreduce on an intercommunicator", r, e, C * 4);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
  }
}

int main(int argc, char **argv) {
  static const size_t counts[] = {0, 1, 3, 1000, 4097, 1 << 19};
  size_t k;
  int n;
  MPI_Comm split;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);

  for (k = 0; k < sizeof counts / sizeof counts[0]; ++k)
    suite(MPI_COMM_WORLD, counts[k], "world");

  /* A communicator of every rank but the first, in reverse order. */
  MPI_Comm_split(MPI_COMM_WORLD, wrank == 0 && n > 2 ? MPI_UNDEFINED : 1, n - wrank, &split);
  if (split != MPI_COMM_NULL) {
    suite(split, 1000, "split");
    suite(split, 65536, "split");
    MPI_Comm_free(&split);
  }

  fallbacks();

  if (failures)
    printf("rank %d: FAIL %ld of %ld checks\n", wrank, failures, checks);
  else
    printf("rank %d: ok %ld checks\n", wrank, checks);
  MPI_Finalize();
  return failures ? 1 : 0;
}
