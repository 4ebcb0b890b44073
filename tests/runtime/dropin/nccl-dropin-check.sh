#!/usr/bin/env bash
# nccl-dropin-check.sh CHECK SCENARIO NRANKS
# Runs one scenario of nccl-dropin-check at COLL_DEBUG=INFO and checks the
# log: every fallback said once per process and reason.
set -uo pipefail
check=$1 scenario=$2 n=$3
log=$(mktemp)
table=$(mktemp)
trap 'rm -f "$log" "$table"' EXIT
if [[ $scenario == tuning ]]; then
  printf '# collective   ranks   bytes   target\nallreduce      *       0-4K    nccl\n' >"$table"
  export COLL_TUNING_FILE=$table
fi
COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=COLL,TUNING "$check" "$scenario" "$n" 2>"$log"
status=$?
fail() { echo "FAIL: $*"; cat "$log"; exit 1; }
(( status == 0 )) || fail "$scenario exited with $status"
said() { grep -c -- "$1" "$log" || true; }
case $scenario in
fallback)
  [[ $(said 'ncclAllReduce: falls back to NCCL: device buffers') == "$n" ]] ||
    fail "device-buffer fallback not said exactly once per rank"
  [[ $(said 'ncclAllReduce: falls back to NCCL: datatype ncclFloat8e4m3 is not one Coll has') == "$n" ]] ||
    fail "fp8 fallback not said once per rank"
  [[ $(said 'ncclAllGather: Coll runs it with') == "$n" ]] ||
    fail "Coll's allgather not said once per rank" ;;
forced)
  [[ $(said 'ncclAllReduce: falls back to NCCL: COLL_FORCE_FALLBACK=allreduce') == "$n" ]] ||
    fail "forced fallback not said once per rank" ;;
tuning)
  [[ $(said 'ncclAllReduce: NCCL runs it by tuning rule') == "$n" ]] ||
    fail "the tuning rule's choice not said once per rank"
  [[ $(said 'library nccl: tuning rule') -ge 1 ]] || fail "rank 0 did not print the table" ;;
host)
  [[ $(said 'falls back') == 0 ]] || fail "a host call fell back" ;;
esac
grep -h 'ok$\|passed\|FAIL' "$log" || true
echo "ok: $scenario with $n ranks"
