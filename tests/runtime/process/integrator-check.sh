#!/usr/bin/env bash
# integrator-check.sh BUILD_DIR SOURCE_DIR MPIRUN
# What a new user does: install Coll into a prefix, build
# examples/integrator/mpi/collectives.c against the installed package twice
# (find_package(Coll), and mpicc with pkg-config coll), and run it under
# mpirun -np 2 and -np 4 with COLL_DEBUG=INFO. Passes when every rank
# printed "ok", rank 0 printed its algorithm selection (with the rules for
# crowded hosts exactly where the processes outnumber the CPUs), and nothing
# of Coll's is left in /dev/shm.
set -u
build=$1 src=$2 mpirun=$3
# shellcheck source=../../support/time-scale.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../support/time-scale.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "integrator-check: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "cmake --install failed"; }
for f in include/coll.h lib/libcoll.so lib/cmake/Coll/CollConfig.cmake lib/pkgconfig/coll.pc \
  lib/python/coll/__init__.py lib/python/coll/torch.py bin/collc bin/collrun; do
  [ -e "$tmp/prefix/$f" ] || fail "cmake --install did not install $f"
done

# The Python package finds the installed library beside it.
got=$(cd "$tmp" && PYTHONPATH="$tmp/prefix/lib/python" python3 -c \
  "import coll; print(coll.library_path, coll.version())" 2>&1) ||
  fail "import coll from the install failed: $got"
case $got in "$tmp/prefix/lib/python/coll/../../libcoll.so "*) ;; *) fail "import coll loaded $got" ;; esac

cmake -S "$src/examples/integrator/mpi" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; fail "find_package(Coll) project did not configure"; }
cmake --build "$tmp/cmake-build" >"$tmp/build.log" 2>&1 ||
  { cat "$tmp/build.log"; fail "find_package(Coll) project did not build"; }
PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" mpicc -O2 "$src/examples/integrator/mpi/collectives.c" \
  $(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs coll) \
  -o "$tmp/pkgconfig-collectives" || fail "mpicc with pkg-config coll failed"

# shellcheck source=../../support/mpirun-env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../support/mpirun-env.sh"
status=0
for run in "2 $tmp/cmake-build/coll-mpi-collectives" "4 $tmp/pkgconfig-collectives"; do
  set -- $run
  out=$(COLL_DEBUG=INFO timeout "$(scaled 300)" "$mpirun" --oversubscribe -np "$1" "$2" 2>&1)
  rc=$?
  echo "== mpirun -np $1 $(basename "$2")"
  echo "$out"
  ok=$(grep -o "rank [0-9]*: ok" <<<"$out" | wc -l)
  [ "$rc" -eq 0 ] && [ "$ok" -eq "$1" ] || { echo "exit $rc, $ok of $1 ranks ok" >&2; status=1; }
  grep -q "COLL INFO algorithm selection for $1 ranks" <<<"$out" ||
    { echo "COLL_DEBUG=INFO printed no algorithm selection" >&2; status=1; }
  # More processes than CPUs on this host: the rules for crowded hosts come
  # first (a 64 KiB broadcast by binomial tree rather than by chain).
  crowded=$(grep -c "built-in rule for crowded hosts" <<<"$out")
  if [ "$1" -gt "$(nproc)" ]; then
    grep -q "broadcast *\[64K, 32M)  broadcast_binomial .*built-in rule for crowded hosts" <<<"$out" ||
      { echo "$1 processes on $(nproc) CPUs: no broadcast by the rules for crowded hosts" >&2; status=1; }
  elif [ "$crowded" -ne 0 ]; then
    echo "$1 processes on $(nproc) CPUs: the rules for crowded hosts were used" >&2; status=1
  fi
done
left=$(ls /dev/shm 2>/dev/null | grep '^coll-' || true)
[ -z "$left" ] || fail "left in /dev/shm: $left"
exit $status
