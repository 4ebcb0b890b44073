#!/usr/bin/env bash
# Regenerates the MSCCL++ execution plans of tests/lit/Inputs/mscclpp/ from
# a checkout of MSCCL++ (github.com/microsoft/mscclpp, tag v0.10.0) by
# running its Python DSL. It fetches, builds and installs nothing: the DSL
# runs with plain CPython without MSCCL++'s C++ extension once its package
# has an empty __init__.py (this script makes one in a temporary directory
# and links the checkout's python/mscclpp/language/ beside it; the checkout
# is not changed), and it needs the `sortedcontainers` module (e.g. in a
# virtual environment of your own: `pip install sortedcontainers`).
#
#   scripts/mscclpp-plans.sh MSCCLPP-CHECKOUT [OUT-DIR] [PYTHON]
#
# OUT-DIR defaults to tests/lit/Inputs/mscclpp; PYTHON to python3. Each
# plan is the program's standard output, as MSCCL++ writes it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ $# -lt 1 ]]; then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
src=$(cd "$1" && pwd)
out=${2:-$root/tests/lit/Inputs/mscclpp}
python=${3:-python3}
lang=$src/python/mscclpp/language
if [[ ! -f $lang/program.py ]]; then
  echo "mscclpp-plans.sh: $src has no python/mscclpp/language/program.py: not an MSCCL++ checkout" >&2
  exit 2
fi
if ! "$python" -c 'import sortedcontainers' 2>/dev/null; then
  echo "mscclpp-plans.sh: $python cannot import sortedcontainers, which MSCCL++'s DSL needs" >&2
  exit 2
fi
pkg=$(mktemp -d)
trap 'rm -rf "$pkg"' EXIT
mkdir "$pkg/mscclpp"
: >"$pkg/mscclpp/__init__.py"
ln -s "$lang" "$pkg/mscclpp/language"
mkdir -p "$out"

tests=python/mscclpp/language/tests
algos=test/executor-tests/algos
# output file | program (relative to the checkout) | its arguments
plans=(
  "single_node_allgather_fixed.json|$tests/single_node/allgather.py|--name single_node_allgather"
  "single_node_allreduce_2.json|$tests/single_node/allreduce.py|--name single_node_allreduce --num_gpus 2"
  "single_node_allreduce_8.json|$tests/single_node/allreduce.py|--name single_node_allreduce --num_gpus 8"
  "single_node_alltoall_alltoall_2.json|$tests/single_node/alltoall/alltoall.py|--name single_node_alltoall_alltoall --num_gpus 2"
  "single_node_alltoall_alltoall_4.json|$tests/single_node/alltoall/alltoall.py|--name single_node_alltoall_alltoall --num_gpus 4"
  "executor_reduce_fixed.json|$algos/reduce.py|--name executor_reduce"
  "single_node_alltoall_alltoall_ring_oop_2.json|$tests/single_node/alltoall/alltoall_ring_oop.py|--name single_node_alltoall_alltoall_ring_oop --num_gpus 2"
  "unit_tests_copy_test_fixed.json|$tests/unit_tests/copy_test.py|"
  "unit_tests_reduce_send_test_fixed.json|$tests/unit_tests/reduce_send_test.py|"
  "unit_tests_read_reduce_read_reduce_test_fixed.json|$tests/unit_tests/read_reduce/read_reduce_test.py|"
  "unit_tests_get_get_test_fixed.json|$tests/unit_tests/get/get_test.py|"
  "unit_tests_put_put_fuse_test_fixed.json|$tests/unit_tests/put/put_fuse_test.py|"
  "unit_tests_signal_wait_signal_wait_fuse_test_fixed.json|$tests/unit_tests/signal_wait/signal_wait_fuse_test.py|"
  "unit_tests_semaphore_fixed.json|$tests/unit_tests/semaphore.py|"
  "unit_tests_barrier_test_fixed.json|$tests/unit_tests/barrier_test.py|"
  "unit_tests_tbg_tbg_copy_test_fixed.json|$tests/unit_tests/tbg/tbg_copy_test.py|"
  "unit_tests_pipeline_test_fixed.json|$tests/unit_tests/pipeline_test.py|"
  "single_node_alltoall_alltoall_pipeline_2.json|$tests/single_node/alltoall/alltoall_pipeline.py|--name single_node_alltoall_alltoall_pipeline --num_gpus 2"
  "single_node_allgather_pkt_2.json|$tests/single_node/allgather_pkt.py|--name single_node_allgather_pkt --num_gpus 2"
  "single_node_allgather_pkt_rppkt_2.json|$tests/single_node/allgather_pkt_rppkt.py|--name single_node_allgather_pkt_rppkt --num_gpus 2"
  "multi_node_allgather_2.json|$tests/multi_node/allgather.py|--name multi_node_allgather --gpus_per_node 1"
  "multi_node_allgather_8.json|$tests/multi_node/allgather.py|--name multi_node_allgather --gpus_per_node 4"
  "multi_node_reducescatter_2.json|$tests/multi_node/reducescatter.py|--name multi_node_reducescatter --gpus_per_node 1"
  "unit_tests_flush_flush_test_fixed.json|$tests/unit_tests/flush/flush_test.py|"
  "executor_reduce_tbg_fixed.json|$algos/reduce_tbg.py|--name executor_reduce_tbg"
  "multi_node_allgather_tbg_4.json|$tests/multi_node/allgather_tbg.py|--name multi_node_allgather_tbg --num_gpus 4 --gpus_per_node 2 --tbg_size 2"
  "executor_reduce_nvls_8.json|$algos/reduce_nvls.py|--name executor_reduce_nvls --num_gpus 8"
)
for entry in "${plans[@]}"; do
  IFS='|' read -r file prog args <<<"$entry"
  # shellcheck disable=SC2086 # the arguments are words
  if ! (cd "$src" && PYTHONPATH=$pkg "$python" "$prog" $args) >"$out/$file.tmp"; then
    rm -f "$out/$file.tmp"
    echo "mscclpp-plans.sh: $prog $args failed" >&2
    exit 1
  fi
  mv "$out/$file.tmp" "$out/$file"
  echo "$file"
done
