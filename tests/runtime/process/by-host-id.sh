#!/usr/bin/env bash
# by-host-id.sh PROGRAM ARGS...: runs one rank of an mpirun job as if on
# host number OMPI_COMM_WORLD_RANK / COLL_TEST_RANKS_PER_HOST (COLL_HOSTID:
# ranks with the same id share memory, the others connect through the
# network proxy), so that one machine runs a job of several "hosts" and the
# programs are compiled for that node shape.
set -u
: "${OMPI_COMM_WORLD_RANK:?by-host-id.sh runs under mpirun}"
export COLL_HOSTID="host$((OMPI_COMM_WORLD_RANK / ${COLL_TEST_RANKS_PER_HOST:-8}))"
exec "$@"
