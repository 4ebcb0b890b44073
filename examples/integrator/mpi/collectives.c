/*===- collectives.c - Coll in an MPI job: the program to copy --------------===*
 *
 * Every rank is one process started by mpirun. Rank 0 creates Coll's unique
 * id, MPI_Bcast hands it to the others, and each rank joins the
 * communicator with collCommInitRank -- the same three steps as with NCCL.
 * Then every collective runs at counts from 0 to 1M elements and each rank
 * checks its own result against the collective's definition.
 *
 *   mpirun -np 4 ./coll-mpi-collectives            # prints "rank R: ok ..."
 *   COLL_DEBUG=INFO mpirun -np 4 ./coll-mpi-collectives
 *                                                  # which algorithm serves what
 *
 * Build: see CMakeLists.txt beside it (find_package(Coll)), or
 *   mpicc collectives.c $(pkg-config --cflags --libs coll) -o coll-mpi-collectives
 *
 *===----------------------------------------------------------------------===*/

#include <coll.h>
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks;
static collComm_t comm;
static long wrong, checked;

#define COLLCHECK(call)                                                              \
  do {                                                                               \
    collResult_t r_ = (call);                                                        \
    if (r_ != collSuccess) {                                                         \
      fprintf(stderr, "rank %d: %s failed: %s: %s\n", rank, #call,                   \
              collGetErrorString(r_), collGetLastError(comm));                       \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                  \
    }                                                                                \
  } while (0)

/* Small integers, so that sums are exact in float. */
static float value(int r, size_t i) { return (float)((r * 7 + i * 3) % 11); }

static void expect(const char *what, size_t count, size_t i, float got, float want) {
  ++checked;
  if (got != want && wrong++ < 5)
    fprintf(stderr, "rank %d: %s count %zu: element %zu is %g, expected %g\n", rank, what,
            count, i, got, want);
}

static void *alloc(size_t count) {
  void *p = malloc(count ? count * sizeof(float) : 1);
  if (!p) {
    fprintf(stderr, "rank %d: out of memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return p;
}

static void run(size_t count) {
  size_t n = (size_t)nranks, i;
  int r, root = nranks - 1;
  float *send = alloc(count * n), *recv = alloc(count * n);

  /* AllReduce (sum), out of place, then in place. */
  for (i = 0; i < count; ++i)
    send[i] = value(rank, i);
  COLLCHECK(collAllReduce(send, recv, count, collFloat32, collSum, comm, NULL));
  for (i = 0; i < count; ++i) {
    float want = 0;
    for (r = 0; r < nranks; ++r)
      want += value(r, i);
    expect("allreduce", count, i, recv[i], want);
  }
  COLLCHECK(collAllReduce(send, send, count, collFloat32, collMax, comm, NULL));
  for (i = 0; i < count; ++i) {
    float want = 0;
    for (r = 0; r < nranks; ++r)
      want = value(r, i) > want ? value(r, i) : want;
    expect("allreduce max in place", count, i, send[i], want);
  }

  /* AllGather: rank r's count elements land at r * count. */
  for (i = 0; i < count; ++i)
    send[i] = value(rank, i);
  COLLCHECK(collAllGather(send, recv, count, collFloat32, comm, NULL));
  for (r = 0; r < nranks; ++r)
    for (i = 0; i < count; ++i)
      expect("allgather", count, r * count + i, recv[r * count + i], value(r, i));

  /* ReduceScatter: block r of the sum goes to rank r. */
  for (i = 0; i < count * n; ++i)
    send[i] = value(rank, i);
  COLLCHECK(collReduceScatter(send, recv, count, collFloat32, collSum, comm, NULL));
  for (i = 0; i < count; ++i) {
    float want = 0;
    for (r = 0; r < nranks; ++r)
      want += value(r, rank * count + i);
    expect("reducescatter", count, i, recv[i], want);
  }

  /* AlltoAll: block d of rank s goes to block s of rank d. */
  for (i = 0; i < count * n; ++i)
    send[i] = value(rank, i);
  COLLCHECK(collAlltoAll(send, recv, count, collFloat32, comm, NULL));
  for (r = 0; r < nranks; ++r)
    for (i = 0; i < count; ++i)
      expect("alltoall", count, r * count + i, recv[r * count + i], value(r, rank * count + i));

  /* Broadcast from the last rank. */
  for (i = 0; i < count; ++i)
    send[i] = rank == root ? value(root, i) : -1.0f;
  COLLCHECK(collBroadcast(send, recv, count, collFloat32, root, comm, NULL));
  for (i = 0; i < count; ++i)
    expect("broadcast", count, i, recv[i], value(root, i));

  /* Reduce (sum) to the last rank. */
  for (i = 0; i < count; ++i)
    send[i] = value(rank, i);
  COLLCHECK(collReduce(send, recv, count, collFloat32, collSum, root, comm, NULL));
  if (rank == root)
    for (i = 0; i < count; ++i) {
      float want = 0;
      for (r = 0; r < nranks; ++r)
        want += value(r, i);
      expect("reduce", count, i, recv[i], want);
    }

  /* Gather to and scatter from the last rank. */
  COLLCHECK(collGather(send, recv, count, collFloat32, root, comm, NULL));
  if (rank == root)
    for (r = 0; r < nranks; ++r)
      for (i = 0; i < count; ++i)
        expect("gather", count, r * count + i, recv[r * count + i], value(r, i));
  for (i = 0; i < count * n; ++i)
    send[i] = rank == root ? value(root, i) : -1.0f;
  COLLCHECK(collScatter(send, recv, count, collFloat32, root, comm, NULL));
  for (i = 0; i < count; ++i)
    expect("scatter", count, i, recv[i], value(root, rank * count + i));

  /* Send/Recv around a ring, grouped so that neither side waits for the other. */
  for (i = 0; i < count; ++i)
    send[i] = value(rank, i);
  COLLCHECK(collGroupStart());
  COLLCHECK(collSend(send, count, collFloat32, (rank + 1) % nranks, comm, NULL));
  COLLCHECK(collRecv(recv, count, collFloat32, (rank + nranks - 1) % nranks, comm, NULL));
  COLLCHECK(collGroupEnd());
  for (i = 0; i < count; ++i)
    expect("send/recv", count, i, recv[i], value((rank + nranks - 1) % nranks, i));

  free(send);
  free(recv);
}

int main(int argc, char **argv) {
  static const size_t counts[] = {0, 1, 7, 1000, 65537, 1 << 20};
  collUniqueId id;
  size_t c;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);

  if (rank == 0)
    COLLCHECK(collGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  COLLCHECK(collCommInitRank(&comm, nranks, id, rank));

  for (c = 0; c < sizeof counts / sizeof counts[0]; ++c)
    run(counts[c]);

  COLLCHECK(collCommFinalize(comm));
  COLLCHECK(collCommDestroy(comm));
  if (wrong)
    printf("rank %d: FAIL %ld of %ld elements wrong\n", rank, wrong, checked);
  else
    printf("rank %d: ok %ld elements checked\n", rank, checked);
  MPI_Finalize();
  return wrong ? 1 : 0;
}
