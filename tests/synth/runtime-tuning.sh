#!/usr/bin/env bash
#===- tests/synth/runtime-tuning.sh - colltune's output in a real job -----===#
#
# runtime-tuning.sh BIN_DIR TOPOLOGY_DIR WORK_DIR
#
# Writes colltune's table and programs for the DGX-1 and for GPUs 0,1,2,4 of
# it, then runs the runtime's `collectives` scenario (coll-rank-check: every
# collective, several sizes, types and roots, both modes, each result
# checked) on as many processes as the topology has GPUs, with
# COLL_TUNING_FILE and COLL_ALGO_DIR pointing at them. Passes when every
# rank's checks pass and rank 0's selection report (COLL_DEBUG=INFO) shows
# every tuned collective served by a synthesized program through a rule of
# the table.
#
# Then the same without colltune: the runtime synthesizes at communicator
# creation (COLL_TOPO_FILE, COLL_TOPO_GPUS) for GPUs 0,1,2,4 of the DGX-1;
# the report must show every synthesized collective served by a program
# "synthesized for" it. And where synthesis cannot apply (a rank count the
# GPU list does not match, ranks sharing a GPU), every rank says why and the
# job runs on the built-in programs.
#
#===------------------------------------------------------------------------===#
set -euo pipefail
bin=$1 topo=$2 work=$3
# shellcheck source=../support/time-scale.sh
. "$(dirname "${BASH_SOURCE[0]}")/../support/time-scale.sh"
rm -rf "$work"
mkdir -p "$work"

# The `collectives` scenario on N processes (the caller's environment
# passed on), each rank's log in $work/NAME/rankR.log; exits unless all pass.
run_ranks() { # name nranks port-salt
  local name=$1 n=$2 salt=$3
  local dir="$work/$name"
  # Below the ephemeral range (32768): no passing connection holds it.
  local port=$((10000 + ($$ * salt + n) % 22000))
  local pids=()
  for ((r = 0; r < n; r++)); do
    RANK=$r WORLD_SIZE=$n COLL_COMM_ID=127.0.0.1:$port COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=INIT,TUNING \
      COLL_TEST_SMALL=1 COLL_WATCHDOG_MS="$(scaled 60000)" \
      timeout "$(scaled 300)" "$bin/coll-rank-check" collectives --env >"$dir/rank$r.log" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for ((r = 0; r < n; r++)); do
    wait "${pids[$r]}" || failed=1
    if ! grep -q "^rank $r: ok [0-9]* checks" "$dir/rank$r.log"; then
      echo "FAIL: $name rank $r"; tail -n 20 "$dir/rank$r.log"; failed=1
    fi
  done
  ((failed == 0)) || exit 1
}

run_job() { # name nranks [ranks]
  local name=$1 n=$2 ranks=${3:-}
  local dir="$work/$name"
  local args=(--topology "$topo/dgx1-v100.topo" -o "$dir/table" --out-dir "$dir/algos")
  [[ -n $ranks ]] && args+=(--ranks "$ranks")
  mkdir -p "$dir"
  "$bin/colltune" "${args[@]}"
  COLL_TUNING_FILE="$dir/table" COLL_ALGO_DIR="$dir/algos" run_ranks "$name" "$n" 7
  for coll in allreduce allgather reducescatter broadcast reduce; do
    if ! grep -Eq "^  $coll +\[[^)]*\)  ${coll}_[a-z0-9]+ \(Simple, $dir/algos/${coll}_[a-z0-9]+\.coll\): tuning rule $dir/table:" \
        "$dir/rank0.log"; then
      echo "FAIL: $name: $coll is not served by a synthesized program through the table"
      grep -n "$coll" "$dir/rank0.log" | head; exit 1
    fi
  done
  echo "ok: $name ($n ranks)"
}

run_job dgx1 8
run_job dgx1-0-1-2-4 4 0,1,2,4

run_at_creation() { # name nranks gpus expect-synthesis
  local name=$1 n=$2 gpus=$3 expect=$4
  local dir="$work/$name"
  mkdir -p "$dir"
  COLL_TOPO_FILE="$topo/dgx1-v100.xml" COLL_TOPO_GPUS="$gpus" run_ranks "$name" "$n" 11
  if [[ $expect == yes ]]; then
    for coll in allreduce allgather reducescatter broadcast reduce; do
      if ! grep -Eq "^  $coll +\[[^)]*\)  ${coll}_[a-z0-9]+ \(Simple, synthesized for $topo/dgx1-v100.xml GPUs $gpus\): tuning rule synthesized for" \
          "$dir/rank0.log"; then
        echo "FAIL: $name: $coll is not served by a program synthesized at creation"
        grep -n "$coll" "$dir/rank0.log" | head; exit 1
      fi
    done
  else
    if ! grep -q "COLL_TOPO_FILE=$topo/dgx1-v100.xml: no synthesis: $expect" "$dir/rank0.log"; then
      echo "FAIL: $name: rank 0 does not say why there is no synthesis ($expect)"
      grep -n "COLL_TOPO_FILE" "$dir/rank0.log" | head; exit 1
    fi
  fi
  echo "ok: $name ($n ranks)"
}

run_at_creation at-creation-0-1-2-4 4 0,1,2,4 yes
run_at_creation at-creation-wrong-count 3 0,1,2,4 "COLL_TOPO_GPUS=0,1,2,4 names 4 GPUs for 3 ranks"
run_at_creation at-creation-shared-gpu 2 3,3 "ranks share GPU 3"
