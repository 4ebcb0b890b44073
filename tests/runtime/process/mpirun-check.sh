#!/usr/bin/env bash
# mpirun-check.sh MPIRUN N PROGRAM SCENARIO MODE
# Runs PROGRAM on N ranks under mpirun (oversubscribed: CI has 2 cores) and
# passes when every rank printed "ok" and nothing of Coll's is left in
# /dev/shm. COLL_TEST_WRAPPER, when set, starts each rank (PROGRAM and its
# arguments become the wrapper's).
set -u
mpirun=$1 n=$2 prog=$3 scenario=$4 mode=$5
# shellcheck source=../../support/time-scale.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../support/time-scale.sh"
# shellcheck source=../../support/mpirun-env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../support/mpirun-env.sh"
# --env: the ranks derive rank 0's loopback port from the job id; it must lie
# below the ephemeral range, where no connection of a busy host can hold it.
[ "$mode" = --env ] && export COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=ENV
out=$(timeout "$(scaled 500)" "$mpirun" --oversubscribe -np "$n" ${COLL_TEST_WRAPPER:+"$COLL_TEST_WRAPPER"} \
  "$prog" "$scenario" "$mode" 2>&1)
rc=$?
echo "$out"
ok=$(grep -o "rank [0-9]*: ok " <<<"$out" | wc -l)
left=$(ls /dev/shm 2>/dev/null | grep '^coll-' || true)
if [ "$mode" = --env ] && [ "$rc" -eq 0 ] && [ -z "${COLL_COMM_ID:-}" ]; then
  port=$(grep -o "root 127.0.0.1:[0-9]*" <<<"$out" | head -1 | cut -d: -f2)
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range
  if [ -z "$port" ] || { [ "$low" -ge 14096 ] && [ "$port" -ge "$low" ]; }; then
    echo "mpirun-check: the derived root port '${port}' is not below the ephemeral range ($low)" >&2
    exit 1
  fi
fi
if [ "$rc" -ne 0 ] || [ "$ok" -ne "$n" ] || [ -n "$left" ]; then
  echo "mpirun-check: exit $rc, $ok of $n ranks ok, left in /dev/shm: ${left:-nothing}" >&2
  exit 1
fi
