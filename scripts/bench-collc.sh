#!/usr/bin/env bash
# Compile-time benchmark of collc (not a test): wall time of tracing,
# compiling, verifying and writing the XML of large programs, and the time
# per emitted step as the rank count grows. Prints a Markdown table for
# docs/PERFORMANCE.md; each time is the median of 5 runs.
#
#   scripts/bench-collc.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
collc=${1:-$root/build}/bin/collc
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

run() { # program, then -D arguments
  local prog=$1
  shift
  local times=()
  for _ in 1 2 3 4 5; do
    local t0 t1
    t0=$(date +%s%N)
    "$collc" "$root/algorithms/$prog.coll" "$@" -o "$out/x.xml"
    t1=$(date +%s%N)
    times+=($(((t1 - t0) / 1000)))
  done
  local us steps
  us=$(printf '%s\n' "${times[@]}" | median)
  steps=$(grep -c '<step ' "$out/x.xml")
  printf '| %s | %s | %d | %.3f | %.2f |\n' "$prog" "$*" "$steps" \
    "$(echo "$us / 1000000" | bc -l)" "$(echo "$us / $steps" | bc -l)"
}

echo "| program | parameters | IR steps | wall time (s) | µs per step |"
echo "|---|---|---|---|---|"
run alltoall_allpairs -D N=128
run allreduce_ring -D N=128
run allreduce_ring -D N=256
run allreduce_allpairs -D N=32
run allreduce_hierarchical -D NODES=16 -D GPUS=8
for n in 8 16 32 64 128 256; do
  run allreduce_ring -D N=$n
done
