#!/usr/bin/env bash
# build-torch-backend.sh PYTHON SOURCES INCLUDE LIBCOLL OUTDIR
# Builds coll.torch's C++ backend (the module coll._c10d, from the .cpp files
# of the folder SOURCES: runtime/python/backend) against the torch of PYTHON
# with g++, as runtime/python/CMakeLists.txt does, into OUTDIR (a coll
# package folder); INCLUDE holds coll.h, LIBCOLL is libcoll.so.0. For
# machines where only a staged tree and another torch are (scripts/gpu-check.sh
# on the lent GPU, whose PyTorch is not the one the build machine has).
# Prints the module's path; exits non-zero, saying why, when it cannot.
set -euo pipefail
py=$1 src=$2 inc=$3 lib=$4 out=$5
mapfile -t q < <("$py" -E -c '
import os, sysconfig, torch
print(os.path.join(os.path.dirname(torch.__file__), "include"))
print(os.path.join(os.path.dirname(torch.__file__), "lib"))
print(sysconfig.get_paths()["include"])
print(sysconfig.get_config_var("EXT_SUFFIX"))
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(torch.__version__)')
[ "${#q[@]}" -eq 6 ] || { echo "build-torch-backend: $py does not import torch" >&2; exit 1; }
[ -f "${q[2]}/Python.h" ] || { echo "build-torch-backend: no Python.h in ${q[2]}" >&2; exit 1; }
module=$out/_c10d${q[3]}
"${CXX:-g++}" -O2 -std=c++20 -shared -fPIC -fvisibility=hidden \
  -D_GLIBCXX_USE_CXX11_ABI="${q[4]}" -DTORCH_API_INCLUDE_EXTENSION_H -DTORCH_EXTENSION_NAME=_c10d \
  -DCOLL_TORCH_VERSION="\"${q[5]}\"" \
  -isystem "${q[0]}" -isystem "${q[0]}/torch/csrc/api/include" -isystem "${q[2]}" -I "$inc" \
  "$src"/*.cpp -o "$module" "$lib" "${q[1]}/libtorch_python.so" "${q[1]}/libtorch_cpu.so" \
  "${q[1]}/libtorch.so" "${q[1]}/libc10.so" -Wl,-rpath,'$ORIGIN/../../lib'
echo "$module"
