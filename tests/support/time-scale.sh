# time-scale.sh - the time bounds of test scripts, times COLL_TEST_TIME_SCALE.
# shellcheck shell=bash
#
# Sourced by the test scripts:
#   . "$(dirname "${BASH_SOURCE[0]}")/../../support/time-scale.sh"
# COLL_TEST_TIME_SCALE is a positive number (3, 1.5, 0.5), 1 when unset or
# empty: e.g. 3 on a slow machine or under a sanitizer. A value that is not
# one ends the script here, with status 2 and a message naming it. Then
#   scaled N   prints N (seconds or milliseconds, as written for scale 1)
#              times the scale: a whole N gives a whole number, rounded to
#              the nearest and at least 1 (timeout "$(scaled 500)"); a
#              fraction, three decimals, at least 0.001 (sleep "$(scaled 0.3)")
# Scale 1 gives every bound as written. The C and C++ tests' counterpart is
# TimeScale.h beside this file; ctest's TIMEOUTs scale in tests/CMakeLists.txt.

coll_time_scale=${COLL_TEST_TIME_SCALE:-1}
if ! [[ $coll_time_scale =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)$ ]] ||
  ! awk -v s="$coll_time_scale" 'BEGIN { exit !(s + 0 > 0) }'; then
  echo "COLL_TEST_TIME_SCALE='$COLL_TEST_TIME_SCALE' is not a positive number (it multiplies" \
    "the tests' time bounds: 1 when unset, e.g. 3 on a slow machine or under a sanitizer)" >&2
  exit 2
fi

scaled() {
  awk -v n="$1" -v s="$coll_time_scale" 'BEGIN {
    if (n ~ /\./) { v = n * s; if (v < 0.001 && n > 0) v = 0.001; printf "%.3f\n", v; exit }
    v = int(n * s + 0.5)
    if (v < 1 && n > 0) v = 1
    printf "%d\n", v
  }'
}
