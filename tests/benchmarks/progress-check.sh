#!/usr/bin/env bash
# progress-check.sh MPIRUN COLL_VS_MPI: under mpirun on a terminal (a
# pseudo-terminal: tests/support/pty-run.py), rank 0 of coll-vs-mpi shows each
# point and the time left on one line rewritten with '\r', erased before each
# row (on standard output, in order with the rows: tools/support/Progress.h).
# (plot-check.sh checks that nothing of it is printed off a terminal.)
set -u
mpirun=$1 prog=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../support/time-scale.sh
. "$here/../support/time-scale.sh"
# shellcheck source=../support/mpirun-env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../support/mpirun-env.sh"
out=$(timeout "$(scaled 300)" python3 "$here/../support/pty-run.py" "$mpirun" --oversubscribe \
  -np 2 "$prog" --min 4 --max 16 --op allreduce) ||
  { echo "$out"; echo "progress-check: the run failed" >&2; exit 1; }
echo "$out"
status=0
for want in '<CR>coll-vs-mpi: allreduce of 4 bytes \(1/2\)<EL>' \
  '<CR>coll-vs-mpi: allreduce of 16 bytes \(2/2\), (about [0-9]+ (s|min [0-9]+ s)|under 1 s) left<EL>'; do
  grep -qE -- "$want" <<<"$out" || { echo "progress-check: no line matches: $want" >&2; status=1; }
done
# The progress line is erased before each row.
rows=$(grep -cE '^<CR>coll-vs-mpi: [^<]*<EL><CR><EL>  allreduce +[0-9]+' <<<"$out")
[ "$rows" -eq 2 ] || { echo "progress-check: $rows of 2 rows after an erased line" >&2; status=1; }
exit $status
