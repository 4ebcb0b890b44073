#!/usr/bin/env bash
# What a step costs in ordering and synchronisation, counted on the CPU
# emulation of the CUDA kernel (docs/CUDA.md, "Step costs"). No GPU needed.
#   scripts/cuda-step-costs.sh                  print the counts
#   scripts/cuda-step-costs.sh --write FILE     record them (the expected counts)
#   scripts/cuda-step-costs.sh --check FILE     compare with FILE; exit 1 on any change
# Options: --bin DIR (where collc and collrun are; default build/bin).
#
# The programs, fixed and small: the ring allreduce of algorithms/ at 4
# ranks in each protocol (Simple, LL, LL128: the compiled file with its proto
# attribute replaced), the one-shot allreduce at 4 ranks (Simple) and the
# all-pairs allreduce at 4 ranks (LL, what the built-in rules pick for small
# calls; its reducing step waits on three receives at once), each run
# once in place at 1 KiB (`collrun --backend cuda-emu --size 1K --iters 1
# --mode inplace --step-costs`). Per program, FILE holds collrun's table:
# per protocol and step kind, the executions and, per execution, the block
# barriers, warp barriers, fence.acq_rel, fence.sys, st.release and the strong
# loads, stores and atomics of the block's busiest thread, then the totals.
#
# --check fails when any line differs, better or worse, and prints the diff:
# a step that costs more is a regression to fix; one that costs less is to be
# recorded on purpose with --write FILE (and the change explained in the
# commit). The test CudaEmuStepCosts (label cuda-emu) runs --check on
# interpreter/cuda/step-costs.expected.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=pinned.sh
source "$root/scripts/pinned.sh"
pinned_options cuda-step-costs 22 "$@"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin/collc" "$root/algorithms/allreduce_ring.coll" -D N=4 -o "$tmp/ring.xml"
"$bin/collc" "$root/algorithms/allreduce_oneshot.coll" -D N=4 -o "$tmp/oneshot.xml"
"$bin/collc" "$root/algorithms/allreduce_allpairs.coll" -D N=4 --protocol=LL -o "$tmp/allpairs-LL.xml"
for p in Simple LL LL128; do
  sed -E "s/proto=\"[A-Za-z0-9]+\"/proto=\"$p\"/" "$tmp/ring.xml" > "$tmp/ring-$p.xml"
done
sed -E 's/proto="[A-Za-z0-9]+"/proto="Simple"/' "$tmp/oneshot.xml" > "$tmp/oneshot-Simple.xml"

{
  echo "# scripts/cuda-step-costs.sh: per program, collrun --step-costs at 1K in place"
  for prog in ring-Simple ring-LL ring-LL128 oneshot-Simple allpairs-LL; do
    echo "## $prog (4 ranks)"
    if ! out=$("$bin/collrun" "$tmp/$prog.xml" --backend cuda-emu --size 1K --iters 1 \
      --mode inplace --step-costs 2>&1); then
      echo "$out" >&2
      echo "cuda-step-costs: collrun failed on $prog" >&2
      exit 1
    fi
    # The table: from its heading to the totals.
    echo "$out" | sed -n '/^# step costs per step execution/,/ totals over /p'
  done
} > "$tmp/costs"

pinned_finish cuda-step-costs "$tmp/costs" "the step costs"
