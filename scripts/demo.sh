#!/usr/bin/env bash
# The main job: compile a .coll algorithm to MSCCL XML, run it on emulated
# ranks (every rank a set of threads in this process), verify every rank's
# output against the collective's definition, and print an nccl-tests-style
# table.
#
#   scripts/demo.sh                                  ring allreduce, 8 ranks
#   scripts/demo.sh PROG.coll [-D NAME=VALUE]... [collrun options...]
#   scripts/demo.sh ALGO.xml [collrun options...]    run an existing IR file
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"

build="$root/build"
if [ ! -f "$build/build.ninja" ]; then
  mkdir -p "$build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; exit 1; }
fi
cmake --build "$build" -j "${COLL_JOBS:-$(nproc)}" --target collc collrun >/dev/null

input=${1:-$root/algorithms/allreduce_ring.coll}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || [ "$input" != "$root/algorithms/allreduce_ring.coll" ] || set -- -D N=8

case "$input" in
  *.coll)
    defines=()
    while [ $# -gt 1 ] && [ "$1" = "-D" ]; do defines+=("$1" "$2"); shift 2; done
    xml="$build/demo/$(basename "${input%.coll}").xml"
    mkdir -p "$build/demo"
    echo "\$ collc $input ${defines[*]} -o $xml"
    "$build/bin/collc" "$input" "${defines[@]}" -o "$xml"
    ;;
  *) xml=$input ;;
esac
[ $# -gt 0 ] || set -- --size 1K,64K,1M,3145732 --dtype fp32 --op sum
echo "\$ collrun $xml $*"
exec "$build/bin/collrun" "$xml" "$@"
