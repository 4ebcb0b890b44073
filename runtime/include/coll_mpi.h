/*===- coll_mpi.h - Coll communicators from MPI communicators --------------===*
 *
 * In libcoll_mpiinit.so (pkg-config coll-mpi, or Coll::mpiinit), so that
 * libcoll.so itself does not depend on MPI.
 *
 *===----------------------------------------------------------------------===*/

#ifndef COLL_MPI_H
#define COLL_MPI_H

#include "coll.h"

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A Coll communicator with the ranks of `mpiComm`, in its rank order:
 * rank 0 creates the unique id and MPI_Bcast spreads it. Collective over
 * mpiComm. */
collResult_t collCommInitFromMPI(MPI_Comm mpiComm, collComm_t *comm);

#ifdef __cplusplus
}
#endif

#endif /* COLL_MPI_H */
