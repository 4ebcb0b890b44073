#!/usr/bin/env bash
# Installs the Debian 12 packages Coll builds with, skipping those already
# present, and with --torch also PyTorch (below). Used by scripts/test.sh
# (--torch) and scripts/demo.sh; safe to run repeatedly.
set -euo pipefail

pkgs=(
  cmake ninja-build g++ python3
  llvm-14-dev llvm-14-tools clang-14 libclang-rt-14-dev
  antlr4 libantlr4-runtime-dev
  libtinyxml2-dev
  librsvg2-bin
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  libibverbs-dev
  openmpi-bin libopenmpi-dev python3-mpi4py python3-numpy python3-venv libucx-dev iproute2 pkg-config
  gdb # the process tests show where a rank that outlives its timeout waits
)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "coll setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# With --torch (scripts/test.sh passes it): PyTorch (from PyPI, CPU use; its
# wheel pulls CUDA libraries, which import without a GPU) and
# scikit-build-core (pyproject.toml's build backend: scripts/test.sh runs
# `pip install .` there without build isolation) in a virtual environment of
# its own, for coll.torch and its tests. Kept between runs; COLL_SKIP_TORCH=1
# skips it, and a failed install only warns: the torch tests then skip with
# the reason.
venv=${XDG_CACHE_HOME:-$HOME/.cache}/coll/torch-venv
if [ "${1:-}" = --torch ] && [ "${COLL_SKIP_TORCH:-0}" != 1 ] &&
  ! "$venv/bin/python" -c "import torch, numpy, scikit_build_core" 2>/dev/null; then
  echo "coll setup: installing PyTorch and scikit-build-core into $venv (large: several GB)"
  mkdir -p "$(dirname "$venv")"
  if ! { python3 -m venv "$venv" && "$venv/bin/pip" install -q torch numpy scikit-build-core; }; then
    echo "coll setup: WARNING: could not install PyTorch; the torch tests will skip" >&2
  fi
fi
