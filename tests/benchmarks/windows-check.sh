#!/usr/bin/env bash
# windows-check.sh MPIRUN COLL_VS_MPI ALGORITHM.coll: coll-vs-mpi --windows
# (buffers of collMemAlloc, registered with collCommWindowRegister) runs the
# direct program ALGORITHM on them without copies (COLL_DEBUG=TRACE says
# "buffers in registered windows: not copied" for its calls, and never that
# they ran in the shared area), checks every result, deregisters and frees
# them, and leaves nothing in /dev/shm.
set -u
mpirun=$1 prog=$2 algorithm=$3
# shellcheck source=../support/time-scale.sh
. "$(dirname "${BASH_SOURCE[0]}")/../support/time-scale.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_plm_rsh_agent=false OMPI_MCA_rmaps_base_oversubscribe=1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$(timeout "$(scaled 300)" "$mpirun" --oversubscribe -np 2 -x COLL_ALGO_FILES="$algorithm" \
  -x COLL_DEBUG=TRACE -x COLL_DEBUG_FILE="$dir/log.%p" "$prog" --min 4K --max 256K --op allreduce \
  --isolated 11 --windows 2>&1) ||
  { echo "$out"; cat "$dir"/log.* 2>/dev/null | tail -20; echo "windows-check: the run failed" >&2; exit 1; }
echo "$out"
log=$(cat "$dir"/log.*)
grep -q '^  allreduce *262144 ' <<<"$out" || { echo "windows-check: no 256 KiB row" >&2; exit 1; }
grep -q 'buffers: collMemAlloc, registered with collCommWindowRegister' <<<"$out" ||
  { echo "windows-check: the run does not say its buffers are windows" >&2; exit 1; }
calls=$(grep -c 'buffers in registered windows: not copied' <<<"$log")
[ "$calls" -ge 20 ] || { echo "windows-check: $calls calls on windows, expected every call's" >&2; exit 1; }
if grep -q 'run in the shared area: buffers copied in and out' <<<"$log"; then
  echo "windows-check: a call copied its buffers though they are windows" >&2
  exit 1
fi
left=$(ls /dev/shm 2>/dev/null | grep '^coll-' || true)
[ -z "$left" ] || { echo "windows-check: left in /dev/shm: $left" >&2; exit 1; }
echo "windows-check: ok ($calls calls on windows)"
