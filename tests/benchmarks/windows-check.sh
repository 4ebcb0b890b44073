#!/usr/bin/env bash
# windows-check.sh MPIRUN COLL_VS_MPI ALGORITHM.coll: coll-vs-mpi --windows
# (buffers of collMemAlloc, registered with collCommWindowRegister) runs the
# direct program ALGORITHM on them without copies (COLL_DEBUG=TRACE says
# "buffers in registered windows: not copied" for its calls, and never that
# they ran in the shared area), checks every result, deregisters and frees
# them, and leaves nothing in /dev/shm. Then the built-in set alone: its
# rule for buffers in windows chooses allreduce_twoshot_direct from 16 KiB
# and not below, and never for buffers that are not in windows.
set -u
mpirun=$1 prog=$2 algorithm=$3
# shellcheck source=../support/time-scale.sh
. "$(dirname "${BASH_SOURCE[0]}")/../support/time-scale.sh"
# shellcheck source=../support/mpirun-env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../support/mpirun-env.sh"
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

# The built-in set: windows from 16 KiB only.
run() { # log-prefix coll-vs-mpi arguments...
  local prefix=$1
  shift
  timeout "$(scaled 300)" "$mpirun" --oversubscribe -np 2 -x COLL_DEBUG=TRACE \
    -x COLL_DEBUG_FILE="$dir/$prefix.%p" "$prog" --op allreduce --isolated 11 "$@" >/dev/null 2>&1 ||
    { cat "$dir/$prefix".* 2>/dev/null | tail -20; echo "windows-check: the run '$*' failed" >&2; exit 1; }
  cat "$dir/$prefix".*
}
chosen() { # log size: the programs calls of that size ran, one per line
  grep -o "allreduce of $2 B ([^)]*) [a-z -]* -> [a-z_0-9]*" <<<"$1" | sed 's/.*-> //' | sort -u
}
builtin=$(run builtin --min 4K --max 1M --windows)
for size in 16384 65536 262144 1048576; do
  got=$(chosen "$builtin" $size)
  [ "$got" = allreduce_twoshot_direct ] ||
    { echo "windows-check: $size B in windows ran '$got', not the built-in direct two-shot" >&2; exit 1; }
done
got=$(chosen "$builtin" 4096)
[ -n "$got" ] && ! grep -q twoshot_direct <<<"$got" ||
  { echo "windows-check: 4 KiB in windows ran '$got': the direct two-shot serves 16 KiB up" >&2; exit 1; }
grep -q 'buffers in registered windows: allreduce_twoshot_direct' <<<"$builtin" ||
  { echo "windows-check: the selection (INFO) does not list the rule for buffers in windows" >&2; exit 1; }
plain=$(run plain --min 1M --max 1M)
got=$(chosen "$plain" 1048576)
[ -n "$got" ] && ! grep -q twoshot_direct <<<"$got" ||
  { echo "windows-check: 1 MiB of malloc ran '$got': the direct built-in is for windows only" >&2; exit 1; }
echo "windows-check: the built-in rule for windows chooses the direct two-shot from 16 KiB"

left=$(ls /dev/shm 2>/dev/null | grep '^coll-' || true)
[ -z "$left" ] || { echo "windows-check: left in /dev/shm: $left" >&2; exit 1; }
echo "windows-check: ok ($calls calls on windows)"
