#!/usr/bin/env bash
# first-use-check.sh RANK_CHECK HAVE_EMU
# Compiling the built-in programs on first use (docs/RUNTIME.md, "Compiling
# on first use"), forced at small jobs with COLL_COMPILE_ON_FIRST_USE=1:
#  - at 6 ranks, every collective is right; the programs a call chose were
#    compiled at its first use, and those that do not compile for 6 ranks
#    (power-of-two algorithms) served nothing: the call took the next one;
#  - with a program cache, twice: the second job reads what the first stored;
#  - on the emulated device (HAVE_EMU=1), every collective bit for bit;
#  - a rank killed: the survivors shrink, and the shrunk communicator compiles
#    its programs on first use too;
#  - a wrong value is an error naming the variable; unset, a small job
#    compiles at creation.
set -u
prog=$1
have_emu=${2:-0}
# shellcheck source=../../support/time-scale.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../support/time-scale.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
  echo "first-use-check: $*" >&2
  exit 1
}

# job NAME SCENARIO N [VAR=VALUE...]: runs the job with INFO into $dir/NAME.
job() {
  local name=$1 scenario=$2 n=$3
  shift 3
  env COLL_DEBUG=INFO COLL_COMPILE_ON_FIRST_USE=1 "$@" timeout "$(scaled 300)" \
    "$prog" "$scenario" --fork "$n" >"$dir/$name" 2>&1 ||
    { cat "$dir/$name" >&2; fail "$name: the job failed"; }
  grep -q "built-in programs are compiled at their first use by a call (COLL_COMPILE_ON_FIRST_USE=1)" \
    "$dir/$name" || { cat "$dir/$name" >&2; fail "$name: nothing was deferred"; }
}
oks() { grep -c "^rank [0-9]*: ok " "$dir/$1"; }

job six collectives 6 COLL_CACHE_DISABLE=1
[ "$(oks six)" -eq 6 ] || { cat "$dir/six" >&2; fail "six: not every rank is ok"; }
compiled=$(grep -c "at its first use: [0-9.]* s, [0-9]* plan steps held" "$dir/six")
refused=$(grep -c "at its first use: does not compile for 6 ranks: .*power-of-two.*serves nothing" "$dir/six")
echo "6 ranks: $compiled first uses compiled, $refused refused"
[ "$compiled" -gt 0 ] || fail "six: no program was compiled on first use"
[ "$refused" -gt 0 ] || fail "six: no power-of-two program was tried and refused"
# Every rank compiled and refused the same programs.
[ $((compiled % 6)) -eq 0 ] && [ $((refused % 6)) -eq 0 ] || fail "six: the ranks differ"

job cached-1 collectives 4 COLL_CACHE_PATH="$dir/cache"
entries=$(find "$dir/cache" -type f | wc -l)
[ "$entries" -gt 0 ] || fail "cached: nothing was stored"
job cached-2 collectives 4 COLL_CACHE_PATH="$dir/cache"
[ "$(oks cached-1)" -eq 4 ] && [ "$(oks cached-2)" -eq 4 ] || fail "cached: not every rank is ok"
# The second job parsed nothing (the headers are kept) and stored nothing new:
# its first uses read what the first job's stored.
[ "$(grep -c "; 0 parsed for their parameters" "$dir/cached-2")" -eq 4 ] ||
  { cat "$dir/cached-2" >&2; fail "cached: the second job parsed programs"; }
[ "$(find "$dir/cache" -type f | wc -l)" -eq "$entries" ] || fail "cached: the second job stored again"
echo "4 ranks with a program cache: $entries entries, both jobs ok"

if [ "$have_emu" = 1 ]; then
  job device device 4 COLL_CACHE_DISABLE=1
  [ "$(oks device)" -eq 4 ] || { cat "$dir/device" >&2; fail "device: not every rank is ok"; }
  grep -q "at its first use: [0-9.]* s" "$dir/device" || fail "device: nothing compiled on first use"
  echo "emulated device, 4 ranks: ok"
fi

job lost lost-rank 4 COLL_CACHE_DISABLE=1
[ "$(grep -c "^rank [0-9]*: ok " "$dir/lost")" -eq 3 ] || { cat "$dir/lost" >&2; fail "lost: not every survivor is ok"; }
grep -q "for 3 ranks at its first use: [0-9.]* s" "$dir/lost" ||
  { cat "$dir/lost" >&2; fail "lost: the shrunk communicator compiled nothing on first use"; }
echo "a rank lost at 4: the 3 survivors compiled on first use after the shrink"

out=$(COLL_COMPILE_ON_FIRST_USE=2 timeout "$(scaled 120)" "$prog" collectives --fork 2 2>&1) &&
  fail "COLL_COMPILE_ON_FIRST_USE=2 was taken"
grep -q "COLL_COMPILE_ON_FIRST_USE=2: 1 (" <<<"$out" || { echo "$out" >&2; fail "the error does not name the variable"; }
out=$(COLL_DEBUG=INFO COLL_CACHE_DISABLE=1 timeout "$(scaled 300)" "$prog" collectives --fork 2 2>&1) ||
  { echo "$out" >&2; fail "the job with the variable unset failed"; }
if grep -q "compiled at their first use" <<<"$out"; then fail "unset, 2 ranks deferred programs"; fi
echo "first-use-check: ok"
