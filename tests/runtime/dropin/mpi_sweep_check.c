/*===- mpi_sweep_check.c - corners of the MPI interposer ------------------===*
 *
 * A plain MPI program for the interposer's sweep (issue 30: a drop-in never
 * breaks a job): calls that are legal MPI and that a program may make,
 * where the interposer must either run the call right on Coll or hand it to
 * Open MPI, and never fail. Each result is checked against its closed form:
 *   - communicators of one rank (MPI_COMM_SELF): Coll copies;
 *   - zero counts with NULL buffers;
 *   - data movement whose send and receive types differ with the same bytes
 *     (MPI_BYTE against MPI_INT), which Coll moves as bytes;
 *   - a contiguous derived datatype (moved as bytes), MPI_SHORT and
 *     MPI_LONG_DOUBLE sums (types Coll does not reduce: fall back),
 *     MPI_MAXLOC on MPI_2INT (falls back), 64-bit unsigned sums, MIN;
 *   - every MPI_IN_PLACE form, at a root other than 0 where there is one;
 *   - a broadcast from every root of a split communicator whose ranks are
 *     numbered backwards, and a duplicated communicator freed and made again;
 *   - odd byte counts; a non-blocking allreduce (not intercepted) between
 *     intercepted calls.
 * Errors return (MPI_ERRORS_RETURN) so that a failing call is reported, not
 * an abort. Prints "rank R: ok N checks" when everything held.
 *
 *===----------------------------------------------------------------------===*/
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, checks, failures;

static void check(int ok, int rc, const char *what) {
  ++checks;
  if (rc != MPI_SUCCESS || !ok) {
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (rc != MPI_SUCCESS)
      MPI_Error_string(rc, text, &len);
    fprintf(stderr, "rank %d: FAIL %s%s%s\n", rank, what, rc != MPI_SUCCESS ? ": " : "",
            text);
    ++failures;
  }
}

/* n ints, zeroed; the job stops when there is no memory. */
static int *ints(int n) {
  int *p = calloc(n > 0 ? (size_t)n : 1, sizeof(int));
  if (!p)
    MPI_Abort(MPI_COMM_WORLD, 2);
  return p;
}

static void oneRank(void) {
  int x = rank + 1, y = 0;
  int rc = MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF);
  check(y == rank + 1, rc, "MPI_Allreduce on MPI_COMM_SELF");
  int in[4] = {1, 2, 3, 4}, out[4] = {0};
  rc = MPI_Allgather(in, 4, MPI_INT, out, 4, MPI_INT, MPI_COMM_SELF);
  check(memcmp(in, out, sizeof in) == 0, rc, "MPI_Allgather on MPI_COMM_SELF");
  rc = MPI_Bcast(in, 4, MPI_INT, 0, MPI_COMM_SELF);
  check(in[3] == 4, rc, "MPI_Bcast on MPI_COMM_SELF");
  rc = MPI_Alltoall(in, 2, MPI_INT, out, 2, MPI_INT, MPI_COMM_SELF);
  check(out[0] == 1 && out[1] == 2, rc, "MPI_Alltoall on MPI_COMM_SELF");
}

static void zeroCounts(void) {
  check(1, MPI_Allreduce(NULL, NULL, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce of 0");
  check(1, MPI_Bcast(NULL, 0, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast of 0");
  check(1, MPI_Allgather(NULL, 0, MPI_INT, NULL, 0, MPI_INT, MPI_COMM_WORLD),
        "MPI_Allgather of 0");
  check(1, MPI_Reduce(NULL, NULL, 0, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD), "MPI_Reduce of 0");
}

static void mixedTypes(void) {
  int mine = rank * 10 + 3;
  int *all = ints(size);
  int rc = MPI_Allgather(&mine, (int)sizeof(int), MPI_BYTE, all, 1, MPI_INT, MPI_COMM_WORLD);
  int ok = 1;
  for (int r = 0; r < size; ++r)
    ok = ok && all[r] == r * 10 + 3;
  check(ok, rc, "MPI_Allgather of MPI_BYTE into MPI_INT");
  int *send = ints(size), *recv = ints(size);
  for (int r = 0; r < size; ++r)
    send[r] = rank * 100 + r;
  rc = MPI_Alltoall(send, 1, MPI_INT, recv, (int)sizeof(int), MPI_BYTE, MPI_COMM_WORLD);
  ok = 1;
  for (int r = 0; r < size; ++r)
    ok = ok && recv[r] == r * 100 + rank;
  check(ok, rc, "MPI_Alltoall of MPI_INT into MPI_BYTE");
  free(all);
  free(send);
  free(recv);
}

static void fallbacks(void) {
  MPI_Datatype triple;
  MPI_Type_contiguous(3, MPI_INT, &triple);
  MPI_Type_commit(&triple);
  int v[6] = {0};
  if (rank == 0)
    for (int i = 0; i < 6; ++i)
      v[i] = i + 1;
  int rc = MPI_Bcast(v, 2, triple, 0, MPI_COMM_WORLD);
  check(v[0] == 1 && v[5] == 6, rc, "MPI_Bcast of a contiguous derived datatype");
  MPI_Type_free(&triple);

  short s = 2, ssum = 0;
  rc = MPI_Allreduce(&s, &ssum, 1, MPI_SHORT, MPI_SUM, MPI_COMM_WORLD);
  check(ssum == 2 * size, rc, "MPI_Allreduce of MPI_SHORT");
  long double l = 1.5L, lsum = 0;
  rc = MPI_Allreduce(&l, &lsum, 1, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  check(lsum == 1.5L * size, rc, "MPI_Allreduce of MPI_LONG_DOUBLE");
  struct {
    int value, index;
  } loc = {rank % 3, rank}, best = {-1, -1};
  rc = MPI_Allreduce(&loc, &best, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD);
  int want = size >= 3 ? 2 : size - 1;
  check(best.value == want && best.index == want, rc, "MPI_Allreduce MPI_MAXLOC");

  uint64_t big = (uint64_t)1 << 40, bigsum = 0;
  rc = MPI_Allreduce(&big, &bigsum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  check(bigsum == (uint64_t)size << 40, rc, "MPI_Allreduce of MPI_UINT64_T");
  double d[2] = {rank, -rank}, dmin[2] = {0, 0};
  rc = MPI_Allreduce(d, dmin, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  check(dmin[0] == 0 && dmin[1] == -(size - 1), rc, "MPI_Allreduce MPI_MIN of MPI_DOUBLE");
}

static void inPlace(void) {
  int root = size - 1;
  int x = rank + 1;
  int rc = rank == root ? MPI_Reduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD)
                        : MPI_Reduce(&x, NULL, 1, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
  check(rank != root || x == size * (size + 1) / 2, rc, "MPI_Reduce in place at the last rank");

  int *blocks = ints(size * 3);
  for (int i = 0; i < size * 3; ++i)
    blocks[i] = i;
  rc = MPI_Reduce_scatter_block(MPI_IN_PLACE, blocks, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  check(blocks[0] == rank * 3 * size && blocks[2] == (rank * 3 + 2) * size, rc,
        "MPI_Reduce_scatter_block in place");

  int *gathered = ints(size);
  gathered[rank] = rank + 7;
  rc = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gathered, 1, MPI_INT, MPI_COMM_WORLD);
  int ok = 1;
  for (int r = 0; r < size; ++r)
    ok = ok && gathered[r] == r + 7;
  check(ok, rc, "MPI_Allgather in place");

  for (int r = 0; r < size; ++r)
    gathered[r] = rank * 100 + r;
  rc = MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gathered, 1, MPI_INT, MPI_COMM_WORLD);
  ok = 1;
  for (int r = 0; r < size; ++r)
    ok = ok && gathered[r] == r * 100 + rank;
  check(ok, rc, "MPI_Alltoall in place");

  double sum = rank;
  rc = MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  check(sum == size * (size - 1) / 2.0, rc, "MPI_Allreduce in place");
  free(blocks);
  free(gathered);
}

static void communicators(void) {
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
  int hr, hs;
  MPI_Comm_rank(half, &hr);
  MPI_Comm_size(half, &hs);
  for (int root = 0; root < hs; ++root) {
    int v = hr == root ? 1000 + root : -1;
    int rc = MPI_Bcast(&v, 1, MPI_INT, root, half);
    check(v == 1000 + root, rc, "MPI_Bcast from every root of a split communicator");
  }
  MPI_Comm_free(&half);
  for (int round = 0; round < 2; ++round) {
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    int one = 1, n = 0;
    int rc = MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, dup);
    check(n == size, rc, "MPI_Allreduce on a duplicate, made, freed and made again");
    MPI_Comm_free(&dup);
  }
}

static void oddSizes(void) {
  int root = 1 % size;
  char bytes[13];
  for (int i = 0; i < 13; ++i)
    bytes[i] = (char)(rank == root ? i + 1 : 0);
  int rc = MPI_Bcast(bytes, 13, MPI_BYTE, root, MPI_COMM_WORLD);
  int ok = 1;
  for (int i = 0; i < 13; ++i)
    ok = ok && bytes[i] == i + 1;
  check(ok, rc, "MPI_Bcast of 13 bytes");
  MPI_Request request;
  int one = 1, n = 0;
  int rc2 = MPI_Iallreduce(&one, &n, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &request);
  if (rc2 == MPI_SUCCESS)
    rc2 = MPI_Wait(&request, MPI_STATUS_IGNORE);
  check(n == size, rc2, "MPI_Iallreduce between intercepted calls");
  float f = 0.5f, fsum = 0;
  rc = MPI_Allreduce(&f, &fsum, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  check(fsum == 0.5f * size, rc, "MPI_Allreduce after MPI_Iallreduce");
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  oneRank();
  zeroCounts();
  mixedTypes();
  fallbacks();
  inPlace();
  communicators();
  oddSizes();
  if (failures == 0)
    printf("rank %d: ok %d checks\n", rank, checks);
  fflush(stdout);
  MPI_Finalize();
  return failures != 0;
}
