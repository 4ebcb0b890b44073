#!/usr/bin/env bash
# tuning-mismatch-check.sh MPIRUN PROGRAM
# Two ranks whose COLL_TUNING_FILE differ: rank 1's names a built-in that
# only a tuning table picks (allreduce_hierarchical), which the registry
# then compiles there and not on rank 0. Creation must fail on both ranks,
# with an error naming the settings that must agree, and leave nothing in
# /dev/shm.
set -u
mpirun=$1 prog=$2
# shellcheck source=../../support/time-scale.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../support/time-scale.sh"
# shellcheck source=../../support/mpirun-env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../support/mpirun-env.sh"
unset COLL_TUNING_FILE
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "tuning-mismatch-check: FAIL: $*" >&2; exit 1; }
printf 'allreduce  *  *  allreduce_hierarchical\n' >"$work/hierarchical.tuning"
printf '#!/usr/bin/env bash\n[ "$OMPI_COMM_WORLD_RANK" = 1 ] && export COLL_TUNING_FILE=%q\nexec "$@"\n' \
  "$work/hierarchical.tuning" >"$work/wrap.sh"
chmod +x "$work/wrap.sh"
out=$(timeout "$(scaled 300)" "$mpirun" --oversubscribe -np 2 "$work/wrap.sh" \
  "$prog" collectives --mpi 2>&1)
rc=$?
echo "$out"
[ "$rc" -ne 124 ] || fail "the job timed out"
[ "$rc" -ne 0 ] || fail "the job succeeded with different tuning files"
n=$(grep -c "FAIL .*loaded different algorithms than rank .*COLL_TUNING_FILE" <<<"$out")
[ "$n" -eq 2 ] || fail "$n of 2 ranks reported the different algorithms"
left=$(ls /dev/shm 2>/dev/null | grep '^coll-' || true)
[ -z "$left" ] || fail "left in /dev/shm: $left"
echo "tuning-mismatch-check: passed"
