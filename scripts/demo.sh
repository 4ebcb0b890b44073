#!/usr/bin/env bash
# The main job: run a real MSCCL algorithm on emulated ranks (every rank a
# set of threads in this process), verify every rank's output against the
# collective's definition, and print an nccl-tests-style table.
#
#   scripts/demo.sh [ALGO.xml] [collrun options...]
#
# Without arguments it runs the all-pairs allreduce from ../shared/msccl-xml
# when that folder exists, else the ring allreduce in examples/xml/.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"

build="$root/build"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; exit 1; }
fi
cmake --build "$build" -j "${COLL_JOBS:-$(nproc)}" --target collrun >/dev/null

algo=${1:-}
[ $# -gt 0 ] && shift
if [ -z "$algo" ]; then
  algo="$root/../shared/msccl-xml/msccl-executor-nccl__ndv4__ap2ll.xml"
  [ -f "$algo" ] || algo="$root/examples/xml/ring_allreduce_8ranks_ll.xml"
fi
[ $# -gt 0 ] || set -- --size 1K,64K,1M,3145732 --dtype fp32 --op sum
exec "$build/bin/collrun" "$algo" "$@"
