#!/usr/bin/env bash
# Compile-time benchmark of collc (not a test): wall time and peak memory of
# tracing, compiling, verifying and writing the XML of large programs, and
# the time per emitted step as the rank count grows, up to 4096 ranks.
# Prints a Markdown table for docs/performance/compiler.md; each time is the median
# of 5 runs (3 for the 2048-rank hierarchy), the memory the
# largest peak resident set of those runs (from GNU time, "-" without it).
#
#   scripts/bench-collc.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
collc=${1:-$root/build}/bin/collc
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
gnutime=
[[ -x /usr/bin/time ]] && gnutime=/usr/bin/time

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

run() { # runs, program, then -D arguments
  local runs=$1 prog=$2
  shift 2
  local times=() peak=0
  for ((i = 0; i < runs; ++i)); do
    local t0 t1
    t0=$(date +%s%N)
    if [[ -n $gnutime ]]; then
      "$gnutime" -f %M -o "$out/mem" "$collc" "$root/algorithms/$prog.coll" "$@" -o "$out/x.xml"
      local kb
      kb=$(tail -1 "$out/mem")
      ((kb > peak)) && peak=$kb
    else
      "$collc" "$root/algorithms/$prog.coll" "$@" -o "$out/x.xml"
    fi
    t1=$(date +%s%N)
    times+=($(((t1 - t0) / 1000)))
  done
  local us steps mem=-
  us=$(printf '%s\n' "${times[@]}" | median)
  steps=$(grep -c '<step ' "$out/x.xml")
  [[ -n $gnutime ]] && mem=$((peak / 1024))
  printf '| %s | %s | %d | %.3f | %s | %.2f |\n' "$prog" "$*" "$steps" \
    "$(echo "$us / 1000000" | bc -l)" "$mem" "$(echo "$us / $steps" | bc -l)"
}

echo "| program | parameters | IR steps | wall time (s) | peak memory (MB) | µs per step |"
echo "|---|---|---|---|---|---|"
run 5 alltoall_allpairs -D N=128
run 5 allreduce_ring -D N=128
run 5 allreduce_ring -D N=256
run 5 allreduce_allpairs -D N=32
run 5 allreduce_hierarchical -D NODES=16 -D GPUS=8
for n in 8 16 32 64 128 256 512; do
  run 5 allreduce_ring -D N=$n
done
# Programs that make sense at 512-4096 ranks.
for nodes in 64 128; do
  run 5 allreduce_hierarchical -D NODES=$nodes -D GPUS=8
done
run 3 allreduce_hierarchical -D NODES=256 -D GPUS=8
for nodes in 64 128 256 512; do
  run 5 allreduce_hierarchical_tree -D NODES=$nodes -D GPUS=8
done
for n in 1024 4096; do
  run 5 allreduce_double_binary_tree -D N=$n
done
run 5 allreduce_rhd -D N=1024
run 5 allgather_recursive_doubling -D N=1024
run 5 broadcast_chain -D N=4096
run 5 broadcast_binomial -D N=4096
run 5 reduce_binomial -D N=4096
