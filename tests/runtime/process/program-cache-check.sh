#!/usr/bin/env bash
# program-cache-check.sh RANK_CHECK
# The program cache (docs/RUNTIME.md "The program cache") across jobs: in a
# job of 2 ranks, the host's first rank compiles the built-in programs and
# stores them while the other waits and reads them; the next job of
# that shape reads every one and compiles none; entries whose content was
# damaged are compiled again and rewritten; COLL_CACHE_DISABLE=1 neither reads
# nor writes. Every job's collectives are checked by the rank program.
set -u
prog=$1
# shellcheck source=../../support/time-scale.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../support/time-scale.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
  echo "program-cache-check: $*" >&2
  exit 1
}

# Runs a 2-rank job; prints each rank's "C R" (compiled, read from cache).
job() {
  local out
  out=$(COLL_DEBUG=INFO COLL_CACHE_PATH="$dir/cache" timeout "$(scaled 300)" \
    "$prog" collectives --fork 2 2>&1) || { echo "$out" >&2; fail "the job failed"; }
  [ "$(grep -c "^rank [0-9]*: ok " <<<"$out")" -eq 2 ] || { echo "$out" >&2; fail "not every rank is ok"; }
  printf '%s\n' "$out" >"$dir/last-job"
  grep -o "[0-9]* programs compiled for this shape[^/]*" <<<"$out" |
    sed -E 's/([0-9]+) programs compiled for this shape(, ([0-9]+) read from the program cache)?.*/\1 \3/'
}

first=$(job)
echo "first job (compiled, read): ${first//$'\n'/; }"
total=$(awk '{print $1 + $2; exit}' <<<"$first")
[ "$total" -gt 0 ] || fail "the first job compiled nothing"
awk -v t="$total" '$1 + $2 != t {exit 1}' <<<"$first" || fail "ranks loaded different numbers of programs"
# The host's first rank compiled and stored them; the other read its own
# plans.
[ "$(awk '$1 > 0' <<<"$first" | wc -l)" -eq 1 ] || fail "more than one rank of the host compiled"
# Rooted collectives for other roots are compiled (and stored) on first use.
entries=$(find "$dir/cache" -type f | wc -l)
[ "$entries" -ge "$total" ] || fail "$entries cache entries for $total programs"
[ -z "$(find "$dir/cache" -name '*.tmp')" ] || fail "temporary files were left in the cache"

second=$(job)
echo "second job: ${second//$'\n'/; }"
awk -v t="$total" '$1 != 0 || $2 != t {exit 1}' <<<"$second" || fail "the second job compiled again"
# Nor did it parse a program for its parameters: the cache keeps them.
[ "$(grep -c "; 0 parsed for their parameters" "$dir/last-job")" -eq 2 ] ||
  { cat "$dir/last-job" >&2; fail "the second job parsed programs for their parameters"; }

# Damage every entry's body (the last byte): each is a miss, compiled again
# and rewritten.
for f in "$dir"/cache/*; do
  printf 'x' | dd of="$f" bs=1 seek=$(($(stat -c %s "$f") - 1)) conv=notrunc status=none
done
third=$(job)
echo "after damaging every entry: ${third//$'\n'/; }"
awk '$1 > 0 {found = 1} END {exit !found}' <<<"$third" || fail "damaged entries were used"
fourth=$(job)
echo "then: ${fourth//$'\n'/; }"
awk -v t="$total" '$1 != 0 || $2 != t {exit 1}' <<<"$fourth" || fail "damaged entries were not rewritten"

# Disabled: nothing read, nothing written.
rm -rf "$dir/cache"
out=$(COLL_DEBUG=INFO COLL_CACHE_DISABLE=1 COLL_CACHE_PATH="$dir/cache" timeout "$(scaled 300)" \
  "$prog" collectives --fork 2 2>&1) || { echo "$out" >&2; fail "the job without a cache failed"; }
[ "$(grep -c "programs compiled for this shape (no program cache)" <<<"$out")" -eq 2 ] ||
  { echo "$out" >&2; fail "COLL_CACHE_DISABLE=1 did not disable the cache"; }
[ ! -e "$dir/cache" ] || fail "COLL_CACHE_DISABLE=1 wrote $dir/cache"
echo "program-cache-check: ok"
