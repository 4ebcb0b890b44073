#!/usr/bin/env bash
# netns-check.sh PROGRAM SCENARIO HOSTS RANKS_PER_HOST [FAULT]
#
# Runs coll-rank-check as one job over HOSTS "hosts": network namespaces
# joined through a bridge in a switch namespace by veth pairs, each with its
# own COLL_HOSTID, so the runtime puts shared memory inside a namespace and
# UCX across them. Ranks start with the launcher variables (RANK,
# WORLD_SIZE) and the TCP bootstrap at host 0's address.
#
# FAULT: none (every rank must print "ok"), kill (the scenario kills the last
# rank mid-call: the others must end with an error), linkdown (SCENARIO
# loop: once every rank runs, the last host's link goes down; every rank must
# end with an error within the watchdog period, plus slack), or lost-host
# (SCENARIO lost-rank with COLL_TEST_VICTIMS set to every rank of the last
# host, which are killed mid-call: every rank of the others must see the
# error within 2 s, shrink without them and print "ok").
#
# Extra environment for the ranks: COLL_NETNS_ENV ("A=1 B=2"). The test
# checks COLL_DEBUG=INFO's report that UCX carries the cross-host
# connections and shared memory the local ones, and, where COLL_NETNS_EXPECT
# is set, that some rank's output holds that text. It removes its namespaces
# and processes, and checks nothing is left in /dev/shm. Exits 77 (skip)
# where namespaces cannot be made.
set -u
prog=$1 scenario=$2 hosts=$3 per=$4 fault=${5:-none}
n=$((hosts * per))
# shellcheck source=../../support/time-scale.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../support/time-scale.sh"
watchdog_ms=$(scaled 4000)

skip() { echo "SKIP: $*"; exit 77; }

tag="coll$$"
work=$(mktemp -d)
pids=()
# shellcheck source=netns-lib.sh
. "$(dirname "$0")/netns-lib.sh"
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  netns_remove "$tag" "$hosts"
  rm -rf "$work"
}
trap cleanup EXIT
why=$(netns_make "$tag" "$hosts") || skip "$why"

victims=""
if [ "$fault" = lost-host ]; then
  victims=$(seq -s, $((n - per)) $((n - 1)))
fi
port=$((20000 + $$ % 20000))
start=$(date +%s%N)
for r in $(seq 0 $((n - 1))); do
  h=$((r / per))
  # shellcheck disable=SC2086
  ip netns exec "${tag}h$h" env COLL_HOSTID="host$h" RANK="$r" WORLD_SIZE="$n" COLL_TEST_DIR="$work" \
    COLL_COMM_ID="10.77.0.1:$port" COLL_SOCKET_IFNAME=eth0 UCX_NET_DEVICES=eth0 \
    COLL_WATCHDOG_MS=$watchdog_ms COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=INIT,NET,COLL,TUNING \
    COLL_TEST_VICTIMS="$victims" ${COLL_NETNS_ENV:-} timeout "$(scaled 300)" "$prog" "$scenario" --env >"$work/rank$r.log" 2>&1 &
  pids+=($!)
done

down_at=0
if [ "$fault" = linkdown ]; then
  for i in $(seq 1 "$(scaled 600)"); do # 60 s for every rank to be running
    running=$(cat "$work"/rank*.log 2>/dev/null | grep -c ": running$")
    [ "$running" -eq "$n" ] && break
    sleep 0.1
  done
  sleep "$(scaled 0.3)"
  ip -n "${tag}h$((hosts - 1))" link set eth0 down
  down_at=$(date +%s%N)
  echo "netns-check: host $((hosts - 1))'s link is down"
fi

rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
end=$(date +%s%N)
pids=()
for r in $(seq 0 $((n - 1))); do
  sed "s/^/[rank $r] /" "$work/rank$r.log"
done

fail() { echo "netns-check: FAIL: $*" >&2; exit 1; }
left=$(ls /dev/shm 2>/dev/null | grep '^coll-' || true)
[ -z "$left" ] || fail "left in /dev/shm: $left"
all=$(cat "$work"/rank*.log)
case "$fault" in
  none)
    ok=$(grep -o "rank [0-9]*: ok " <<<"$all" | wc -l)
    [ "$rc" -eq 0 ] && [ "$ok" -eq "$n" ] || fail "exit status $rc, $ok of $n ranks ok"
    # What carries each connection, as COLL_DEBUG=INFO reports it.
    if [ "$hosts" -gt 1 ]; then
      grep -q "<-> rank .*: UCX tcp" <<<"$all" || fail "no connection reported over UCX"
      [ "$per" -eq 1 ] || grep -q "<-> rank .*: shared memory" <<<"$all" ||
        fail "no connection reported over shared memory"
      grep -q "node shape $hosts x $per" <<<"$all" || fail "node shape $hosts x $per not reported"
    fi
    [ -z "${COLL_NETNS_EXPECT:-}" ] || grep -qF -- "$COLL_NETNS_EXPECT" <<<"$all" ||
      fail "no rank reported: $COLL_NETNS_EXPECT"
    ;;
  kill)
    errs=$(grep -c "^rank [0-9]*: error " <<<"$all")
    [ "$errs" -eq $((n - 1)) ] || fail "$errs of $((n - 1)) surviving ranks reported an error"
    ;;
  lost-host)
    survivors=$((n - per))
    ok=$(grep -c "^rank [0-9]*: ok " <<<"$all")
    [ "$ok" -eq "$survivors" ] || fail "$ok of $survivors surviving ranks finished"
    while read -r ms; do
      [ "$ms" -le "$(scaled 2000)" ] || fail "a survivor saw the loss $ms ms after the kill"
    done < <(sed -nE 's/^rank [0-9]+: error 6 after (-?[0-9]+) ms: .*/\1/p' <<<"$all")
    errs=$(grep -c "^rank [0-9]*: error 6 after" <<<"$all")
    [ "$errs" -eq "$survivors" ] || fail "$errs of $survivors survivors reported the loss"
    shrunk=$(grep -c "^rank [0-9]*: shrunk to rank [0-9]* of $survivors in" <<<"$all")
    [ "$shrunk" -eq "$survivors" ] || fail "$shrunk of $survivors survivors shrank to $survivors ranks"
    ;;
  linkdown)
    errs=$(grep -c "^rank [0-9]*: error " <<<"$all")
    [ "$errs" -eq "$n" ] || fail "$errs of $n ranks reported an error after the link went down"
    ms=$(((end - down_at) / 1000000))
    echo "netns-check: every rank ended $ms ms after the link went down (watchdog $watchdog_ms ms)"
    [ "$ms" -le $((watchdog_ms + $(scaled 6000))) ] ||
      fail "ranks took $ms ms to end, watchdog $watchdog_ms ms"
    ;;
esac
echo "netns-check: $scenario on $hosts hosts x $per ranks ($fault): passed"
