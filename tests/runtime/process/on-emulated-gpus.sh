#!/usr/bin/env bash
# on-emulated-gpus.sh PROGRAM ARGS...
# One rank of an mpirun job on the emulated GPUs of docs/CUDA.md ("Emulated
# devices"): COLL_TEST_EMULATED_GPUS=N shares N emulated GPUs among the
# job's processes and puts rank r on GPU r * N / size (consecutive ranks
# share a GPU), as a launcher maps local ranks to GPUs.
set -eu
gpus=${COLL_TEST_EMULATED_GPUS:?set COLL_TEST_EMULATED_GPUS to the number of emulated GPUs}
rank=${OMPI_COMM_WORLD_RANK:?not started by Open MPI\'s mpirun}
size=${OMPI_COMM_WORLD_SIZE:?not started by Open MPI\'s mpirun}
export COLL_EMULATED_GPUS=$gpus COLL_EMULATED_GPU=$((rank * gpus / size))
exec "$@"
