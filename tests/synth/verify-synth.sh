#!/usr/bin/env bash
#===- tests/synth/verify-synth.sh - Every synthesized program runs --------===#
#
# verify-synth.sh BIN_DIR TOPOLOGY_DIR WORK_DIR
#
# For every bundled topology, and for partial allocations of the DGX-1 (3 to
# 8 GPUs, some with no NVLink ring), writes every program collsynth makes
# (all collectives, all generators that apply), compiles it with collc and
# runs it on the host interpreter with collrun, which checks every output
# element. Fails on the first program that does not compile or verify.
#
#===------------------------------------------------------------------------===#
set -euo pipefail
bin=$1 topo=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
count=0

run_case() { # name topology-file [ranks] [collsynth options...]
  local name=$1 file=$2 ranks=${3:-}
  shift 3 || shift $#
  local dir="$work/$name"
  local args=(--topology "$file" --out-dir "$dir" "$@")
  [[ -n $ranks ]] && args+=(--ranks "$ranks")
  "$bin/collsynth" "${args[@]}"
  for prog in "$dir"/*.coll; do
    local xml=${prog%.coll}.xml
    if ! "$bin/collc" "$prog" -o "$xml" >"$xml.log" 2>&1; then
      echo "FAIL: collc $prog"; cat "$xml.log"; exit 1
    fi
    if ! "$bin/collrun" "$xml" --size 4K,64K --iters 1 --watchdog-ms 60000 >"$xml.run" 2>&1 ||
       ! grep -q '^# verified \([0-9]*\) of \1$' "$xml.run"; then
      echo "FAIL: collrun $xml"; cat "$xml.run"; exit 1
    fi
    count=$((count + 1))
  done
  echo "ok: $name ($(ls "$dir"/*.coll | wc -l) programs)"
}

run_case dgx1-v100 "$topo/dgx1-v100.topo"
run_case dgx1-v100-xml "$topo/dgx1-v100.xml"
run_case ndv2 "$topo/ndv2.topo"
run_case dgx-a100 "$topo/dgx-a100.xml"
run_case dgx-h100 "$topo/dgx-h100.xml"
run_case cluster-2x8 "$topo/cluster-2x8.topo"
# Partial DGX-1 allocations; 0,4,5 / 0,1,5 / 0,1,2,4 / 0,1,2,3,4 have no NVLink ring,
# and NVLink does not even join 0,5,6.
for ranks in 0,4,5 0,1,5 0,5,6 0,1,2 0,1,2,4 0,1,2,3 0,1,2,3,4 0,1,4,5,6 0,1,2,3,4,5 \
             1,2,3,5,6,7,0 0,1,2,3,4,5,6,7; do
  run_case "dgx1-${ranks//,/-}" "$topo/dgx1-v100.topo" "$ranks"
done
# Rooted collectives from another root.
run_case dgx1-root5 "$topo/dgx1-v100.topo" "" --root 5 --coll broadcast,reduce
run_case dgx1-0-1-2-4-root3 "$topo/dgx1-v100.topo" 0,1,2,4 --root 3 --coll broadcast,reduce
echo "verified $count synthesized programs"
