/*===- CollMpi.c - collCommInitFromMPI --------------------------------------===*/

#include "coll_mpi.h"

collResult_t collCommInitFromMPI(MPI_Comm mpiComm, collComm_t *comm) {
  int rank = 0, size = 0;
  if (!comm)
    return collInvalidArgument;
  if (MPI_Comm_rank(mpiComm, &rank) != MPI_SUCCESS || MPI_Comm_size(mpiComm, &size) != MPI_SUCCESS)
    return collInvalidArgument;
  collUniqueId id;
  collResult_t made = collSuccess;
  if (rank == 0)
    made = collGetUniqueId(&id);
  /* Every rank learns whether the root could make an id. */
  int ok = made == collSuccess;
  if (MPI_Bcast(&ok, 1, MPI_INT, 0, mpiComm) != MPI_SUCCESS)
    return collSystemError;
  if (!ok)
    return rank == 0 ? made : collRemoteError;
  if (MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, mpiComm) != MPI_SUCCESS)
    return collSystemError;
  return collCommInitRank(comm, size, id, rank);
}
