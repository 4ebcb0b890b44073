#!/usr/bin/env bash
# The global-memory bytes of the built-in programs, counted on the CPU
# emulation of the CUDA kernel (docs/CUDA.md, "Traffic"). No GPU needed.
#   scripts/cuda-traffic.sh                  print the counts
#   scripts/cuda-traffic.sh --write FILE     record them (the expected counts)
#   scripts/cuda-traffic.sh --check FILE     compare with FILE; exit 1 on any change
# Options: --bin DIR (where collc and collrun are; default build/bin).
#
# The programs: the direct ones of algorithms/ (allreduce two-shot and
# one-shot, allgather, reduce-scatter, alltoall, broadcast) and the FIFO ones
# the built-in rules pick on host and device buffers (ring and all-pairs
# allreduce, ring allgather and reduce-scatter, all-pairs alltoall, chain
# broadcast), each compiled at 2, 4 and 8 ranks and run once at 1 MiB in
# place and out of place (`collrun --backend cuda-emu --size 1M --iters 1
# --traffic`). Per program and mode, FILE holds the bytes per element of
# the call by region (own buffers, peers', FIFO slots, other; read/written)
# and its reference R. Not its flags, nor B and the ratio, which count them:
# where a sender runs ahead of its receiver, a wait that an earlier
# acquire covered polls nothing, and that depends on the schedule
# (docs/CUDA.md, "Traffic").
#
# --check fails when any line differs, better or worse, and prints the diff:
# a program that moves more bytes is a regression to fix; one that moves
# fewer, on purpose, is recorded with --write FILE (and the change explained
# in the commit). The test CudaEmuTraffic (label cuda-emu) runs --check on
# interpreter/cuda/traffic.expected.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=pinned.sh
source "$root/scripts/pinned.sh"
pinned_options cuda-traffic 24 "$@"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

programs=(allreduce_twoshot_direct allreduce_oneshot_direct allgather_direct reducescatter_direct
  alltoall_direct broadcast_direct allreduce_ring allreduce_allpairs allgather_ring
  reducescatter_ring alltoall_allpairs broadcast_chain)
{
  echo "# scripts/cuda-traffic.sh: per program, ranks and mode, collrun --traffic at 1M"
  for prog in "${programs[@]}"; do
    for n in 2 4 8; do
      "$bin/collc" "$root/algorithms/$prog.coll" -D N=$n -o "$tmp/$prog-$n.xml"
      if ! out=$("$bin/collrun" "$tmp/$prog-$n.xml" --backend cuda-emu --size 1M --iters 1 \
        --traffic 2>&1); then
        echo "$out" >&2
        echo "cuda-traffic: collrun failed on $prog at $n ranks" >&2
        exit 1
      fi
      # Each call's mode, its totals and its traffic line.
      echo "$out" | awk -v p="$prog" -v n="$n" '
        /^# traffic of one call/ { m = ($0 ~ /out of place/) ? "out-of-place" : "in-place" }
        /^# total per element:/ { sub(/^# total per element: /, ""); sub(/ flag [^ ]+/, ""); t = $0 }
        /^traffic: / { match($0, /reference [0-9.]+/); printf "%s %s ranks %s: %s; %s\n", p, n, m, t, substr($0, RSTART, RLENGTH) }'
    done
  done
} > "$tmp/traffic"

pinned_finish cuda-traffic "$tmp/traffic" "the counts"
