#!/usr/bin/env bash
# Builds everything and runs every test, on a fresh Debian 12 machine too:
#   1. the main build (the CUDA backend too when nvcc is present), installed
#      with `pip install .` into the PyTorch environment (from the same
#      build: nothing is built twice): all tests, the torch tests on that
#      install, then the fragile-place tests of the CUDA emulation under a
#      few seeds of its perturbed schedule;
#   2. an AddressSanitizer+UndefinedBehaviorSanitizer build: the host tests;
#   3. a ThreadSanitizer build: the interpreter tests and a subset of the
#      CUDA emulation's tests (each protocol, in and out of place, the
#      dependency-heavy algorithms, the watchdog, direct steps).
# Each build has its own folder (build/, build-asan/, build-tsan/). Any leak,
# undefined behaviour or data race fails the run.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh" --torch

jobs=${COLL_JOBS:-$(nproc)}
configure() {
  local dir=$1
  shift
  cmake -S "$root" -B "$dir" -G Ninja "$@" >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; exit 1; }
}

echo "== [1/3] main build"
configure "$root/build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$root/build" -j "$jobs"
# coll as users install it (pyproject.toml), into a virtual environment of
# this build (build/pip-venv) that sees the PyTorch environment's packages
# (a .pth file): scikit-build-core configures build/ again with the same
# options and installs what is built there; the torch tests then run on
# that environment's Python and import that install (COLL_TORCH_INSTALLED,
# tests/runtime/python/torch-check.sh). Its own environment, so that runs
# from two trees do not test each other's install. Always the PyTorch
# environment's scikit-build-core, without build isolation: another copy of
# it would clear build/'s CMake cache (docs/PYTORCH.md, "Install").
venv=${XDG_CACHE_HOME:-$HOME/.cache}/coll/torch-venv
if "$venv/bin/python" -c "import torch, scikit_build_core" 2>/dev/null; then
  echo "== pip install . into build/pip-venv"
  pv=$root/build/pip-venv
  [ -x "$pv/bin/pip" ] || "$venv/bin/python" -m venv "$pv"
  purelib() { "$1" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"; }
  purelib "$venv/bin/python" >"$(purelib "$pv/bin/python")/coll-torch-venv.pth"
  CMAKE_BUILD_PARALLEL_LEVEL=$jobs "$pv/bin/pip" install -q --no-build-isolation "$root" \
    -C build-dir="$root/build" -C cmake.define.COLL_BUILD_TESTS=ON \
    -C cmake.define.COLL_BUILD_BENCHMARKS=ON
  export COLL_TORCH_INSTALLED=$pv/bin/python
fi
ctest --test-dir "$root/build" --output-on-failure -j "$jobs"
for seed in 1 2 3; do
  COLL_SIMT_SEED=$seed ctest --test-dir "$root/build" -L cuda-emu -R 'EmuFragile|GpuWatchdog' \
    --output-on-failure -j "$jobs"
done

echo "== [2/3] ASan+UBSan build: host tests"
# -O1, as AddressSanitizer's documentation advises: it compiles in half the
# time of -O2 (the sanitizer builds are most of this script's time).
configure "$root/build-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO='-O1 -DNDEBUG' -DCMAKE_C_FLAGS_RELWITHDEBINFO='-O1 -DNDEBUG' \
  -DCOLL_SANITIZE='address;undefined' -DCOLL_BUILD_BENCHMARKS=OFF -DCOLL_ENABLE_CUDA_EMU=OFF
cmake --build "$root/build-asan" -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir "$root/build-asan" -L 'host|interpreter' --output-on-failure -j "$jobs"

echo "== [3/3] TSan build: interpreter tests, CUDA emulation subset"
configure "$root/build-tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCOLL_SANITIZE=thread -DCOLL_ENABLE_LANG=OFF -DCOLL_BUILD_BENCHMARKS=OFF
# Only the programs its tests run (the tools, the drop-ins and the IR tests
# are built and tested in the two builds above): a test executable added to
# the labels below must be added here too, or its tests do not run here.
cmake --build "$root/build-tsan" -j "$jobs" --target InterpreterTests RuntimeProcessTests \
  SupportTests CudaEmuTests example-allreduce
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir "$root/build-tsan" -L interpreter --output-on-failure -j "$jobs"
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir "$root/build-tsan" -L cuda-emu -R 'SimtLauncher|EmuFragile|GpuWatchdog|DirectSteps|CopyEngines|EmuReferences' \
  --output-on-failure -j "$jobs"
