#!/usr/bin/env bash
# dropin-check.sh MPIRUN N LIBCOLL_MPI PROGRAM MODE
# Runs PROGRAM on N ranks with LIBCOLL_MPI preloaded and COLL_DEBUG=INFO.
# Passes when every rank printed "ok", the log shows Coll served the
# intercepted collectives and every forced fallback with its reason, and
# nothing of Coll's is left in /dev/shm. MODE tuning adds a tuning table
# that sends allreduces below 4 KiB to Open MPI; MODE python runs PROGRAM,
# an mpi4py script, with Debian's python3; MODE device expects every
# collective served on the GPU path (COLL_CUDA_PLUGIN passed on); MODE
# sweep runs mpi_sweep_check.c and expects its own decisions; MODE
# conformance runs mpi_conformance_check.c's comparison with Open MPI, and
# MODE fault its planted failure (COLL_WATCHDOG_MS passed on), after which
# each rank must say once, at WARN, that Coll retired from the communicator.
set -u
mpirun=$1 n=$2 lib=$3 prog=$4 mode=$5
# shellcheck source=../../support/time-scale.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../support/time-scale.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../../support/mpirun-env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../support/mpirun-env.sh"
export COLL_DEBUG=INFO
expect=(
  "MPI_Allreduce: Coll runs it with"
  "MPI_Reduce: Coll runs it with"
  "MPI_Reduce_scatter_block: Coll runs it with"
  "MPI_Allgather: Coll runs it with"
  "MPI_Alltoall: Coll runs it with"
  "MPI_Bcast: Coll runs it with"
  "MPI_Allreduce: falls back to Open MPI: datatype MPI_2INT is not one Coll reduces"
  "MPI_Allreduce: falls back to Open MPI: a reduction op other than"
)
run=("$prog")
if [ "$mode" = python ]; then
  # mpi4py + NumPy from Debian, for Debian's interpreter.
  run=(/usr/bin/python3 "$prog")
else
  [ "$mode" = conformance ] ||
    expect+=("MPI_Allreduce: falls back to Open MPI: an intercommunicator")
fi
if [ "$mode" = sweep ]; then
  # mpi_sweep_check.c: the corners, each served or handed on, never failed.
  expect=("MPI_Allreduce: Coll runs it as a copy (one rank"
          "MPI_Allgather: Coll runs it with" "MPI_Alltoall: Coll runs it with"
          "MPI_Bcast: Coll runs it with" "MPI_Reduce: Coll runs it with"
          "MPI_Reduce_scatter_block: Coll runs it with" "MPI_Allreduce: Coll runs it with"
          "MPI_Allreduce: falls back to Open MPI: datatype MPI_SHORT is not one Coll reduces"
          "MPI_Allreduce: falls back to Open MPI: datatype MPI_LONG_DOUBLE is not one Coll reduces"
          "MPI_Allreduce: falls back to Open MPI: datatype MPI_2INT is not one Coll reduces")
  # One rank: every communicator is one rank's, and Coll copies.
  [ "$n" = 1 ] && expect=("${expect[@]/Coll runs it with/Coll runs it as a copy (one rank}")
fi
if [ "$mode" = conformance ]; then
  expect+=("MPI_Allreduce: falls back to Open MPI: datatype MPI_SHORT is not one Coll reduces"
           "MPI_Bcast: falls back to Open MPI: a datatype MPI does not take (not committed")
  run+=(calls)
fi
if [ "$mode" = fault ]; then
  # Before the failure every collective runs on Coll; after it, nothing.
  expect=("MPI_Allreduce: Coll runs it with" "MPI_Bcast: Coll runs it with"
          "MPI_Allreduce: Coll failed on this communicator"
          "MPI_Bcast: falls back to Open MPI: Coll retired from this communicator at a failed call")
  run+=(fault)
fi
if [ "$mode" = device ]; then
  expect=("${expect[@]/Coll runs it with/Coll runs it on the GPU with}")
fi
if [ "$mode" = tuning ]; then
  printf '# small allreduces to Open MPI, the rest to Coll\nallreduce * 0-4K mpi\n' >"$tmp/tuning.txt"
  export COLL_TUNING_FILE=$tmp/tuning.txt
  expect+=("MPI_Allreduce: Open MPI runs it by tuning rule $tmp/tuning.txt:2"
           "library mpi: tuning rule $tmp/tuning.txt:2")
fi
out=$(timeout "$(scaled 500)" "$mpirun" --oversubscribe -np "$n" -x LD_PRELOAD="$lib" \
  -x COLL_DEBUG ${COLL_TUNING_FILE:+-x COLL_TUNING_FILE} ${COLL_CUDA_PLUGIN:+-x COLL_CUDA_PLUGIN} \
  ${COLL_WATCHDOG_MS:+-x COLL_WATCHDOG_MS} \
  "${run[@]}" 2>&1)
rc=$?
echo "$out"
status=0
ok=$(grep -o "rank [0-9]*: ok" <<<"$out" | wc -l)
[ "$rc" -eq 0 ] && [ "$ok" -eq "$n" ] || { echo "dropin-check: exit $rc, $ok of $n ranks ok" >&2; status=1; }
for e in "${expect[@]}"; do
  grep -qF -- "$e" <<<"$out" || { echo "dropin-check: the log lacks: $e" >&2; status=1; }
done
if [ "$mode" = fault ]; then
  # Two communicators fail (mpi_conformance_check.c, fault()): one warning
  # each per rank.
  warned=$(grep -c "Coll failed on this communicator" <<<"$out")
  [ "$warned" -eq $((2 * n)) ] || { echo "dropin-check: $warned retirement warnings, not one per rank and communicator ($((2 * n)))" >&2; status=1; }
fi
left=$(ls /dev/shm 2>/dev/null | grep '^coll-' || true)
[ -z "$left" ] || { echo "dropin-check: left in /dev/shm: $left" >&2; status=1; }
exit $status
