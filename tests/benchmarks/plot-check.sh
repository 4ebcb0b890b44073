#!/usr/bin/env bash
# plot-check.sh MPIRUN COLL_VS_MPI: coll-vs-mpi --plot writes an SVG with a
# line for Coll and a dashed one for Open MPI in each panel, no progress line
# is printed (not a terminal), and no /dev/shm segment is left.
set -u
mpirun=$1 prog=$2
# shellcheck source=../support/time-scale.sh
. "$(dirname "${BASH_SOURCE[0]}")/../support/time-scale.sh"
# shellcheck source=../support/mpirun-env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../support/mpirun-env.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$(timeout "$(scaled 300)" "$mpirun" --oversubscribe -np 2 "$prog" --min 4 --max 256 \
  --op allreduce --plot "$dir/p.svg" 2>&1) || { echo "$out"; echo "plot-check: the run failed" >&2; exit 1; }
echo "$out"
# Off a terminal, no progress line (progress-check.sh: on one).
case $out in *$'\r'* | *coll-vs-mpi:*) echo "plot-check: a progress line off a terminal" >&2; exit 1 ;; esac
python3 - "$dir/p.svg" <<'PY' || exit 1
import sys, xml.etree.ElementTree as E
root = E.parse(sys.argv[1]).getroot()
series = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "series"]
names = sorted({g.get("data-series") for g in series})
assert names == ["allreduce, Coll", "allreduce, Open MPI"], names
assert len(series) == 4, f"{len(series)} series groups, not 2 per panel"
dashed = [g for g in series if "stroke-dasharray" in E.tostring(g, encoding="unicode")]
assert all(g.get("data-series") == "allreduce, Open MPI" for g in dashed) and len(dashed) == 2
points = len(series[0].findall("{http://www.w3.org/2000/svg}circle"))
assert points == 4, f"{points} points for 4, 16, 64 and 256 bytes"
print("plot-check: ok")
PY
left=$(ls /dev/shm 2>/dev/null | grep '^coll-' || true)
[ -z "$left" ] || { echo "plot-check: left in /dev/shm: $left" >&2; exit 1; }
