#!/usr/bin/env bash
# bench/gpu/torch_build.sh: builds the Python package (its `_core` and `_torch`
# extensions) against the torch of the `python3` at hand and an engine built
# elsewhere, without Meson's project: what the GPU machine runs, whose torch
# (2.11 with CUDA 13 at last look) and Python differ from this project's
# environment (../shared/DEVICE.md). check.sh --dry-run runs it here against
# the build tree and the project's environment.
#
# Usage: torch_build.sh LIBDIR INCDIR OUT
#   LIBDIR  holds libringreduce.so.0 (a bundle's lib/, or build/lib)
#   INCDIR  holds ringreduce/version.h (the build's generated header; the rest
#           of include/ringreduce comes from the repository)
#   OUT     the package is made in OUT/ringreduce (PYTHONPATH=OUT imports it)
# PYTHON: the interpreter (default python3). JOBS: parallel compiles (default
# nproc). The backend takes CUDA tensors when torch was built with CUDA and
# its CUDA runtime headers are found (NVIDIA's wheel beside torch, else
# CUDA_HOME or /usr/local/cuda), as python/meson.build decides.
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: torch_build.sh LIBDIR INCDIR OUT" >&2; exit 2; }
libdir=$(cd "$1" && pwd)
incdir=$(cd "$2" && pwd)
out=$3
python=${PYTHON:-python3}
jobs=${JOBS:-$(nproc)}
root=$(cd "$(dirname "$0")/../.." && pwd)
src=$root/python/ringreduce

[ -e "$libdir/libringreduce.so.0" ] || [ -e "$libdir/libringreduce.so" ] ||
  { echo "torch_build: no libringreduce.so under $libdir" >&2; exit 1; }
[ -e "$incdir/ringreduce/version.h" ] || { echo "torch_build: no ringreduce/version.h under $incdir" >&2; exit 1; }
engine=-lringreduce
[ -e "$libdir/libringreduce.so" ] || engine=-l:libringreduce.so.0

# torch's include and library folders, ABI and CUDA (python/torch_config.py).
declare -A cfg
while IFS='=' read -r key value; do cfg[$key]=$value; done < <("$python" "$root/python/torch_config.py")
py_include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
suffix=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')

common=(-O2 -fPIC -fvisibility=hidden -DNDEBUG -I"$root/include" -I"$incdir" -isystem "$py_include")
torch_flags=(-std=c++20 "-D_GLIBCXX_USE_CXX11_ABI=${cfg[cxx11_abi]}")
IFS=':' read -r -a torch_includes <<< "${cfg[include]}"
for d in "${torch_includes[@]}"; do torch_flags+=(-isystem "$d"); done
torch_libs=(-L"${cfg[lib]}" -Wl,-rpath,"${cfg[lib]}" -ltorch -ltorch_cpu -lc10 -ltorch_python)

# CUDA: torch's runtime headers and library, as python/meson.build finds them.
cuda_major=None  # the engine's CUDA runtime, for _build.py (_cuda_runtime.py)
engine_cudart=$(readelf -d "$libdir/libringreduce.so.0" 2>/dev/null | sed -n 's/.*\[libcudart\.so\.\([0-9]*\)\].*/\1/p')
[ -n "$engine_cudart" ] && cuda_major="\"$engine_cudart\""
torch_cuda=no
cuda_root=${cfg[cuda_root]}
if [ "${cfg[cuda]}" != none ]; then
  major=${cfg[cuda]%%.*}
  if [ "$cuda_root" = none ]; then
    for candidate in "${CUDA_HOME:-}" /usr/local/cuda; do
      if [ -n "$candidate" ] && [ -e "$candidate/include/cuda_runtime_api.h" ]; then
        cuda_root=$candidate
        break
      fi
    done
  fi
  if [ "$cuda_root" != none ]; then
    cuda_lib=$cuda_root/lib
    [ -d "$cuda_root/lib64" ] && cuda_lib=$cuda_root/lib64
    torch_flags+=(-DRR_TORCH_CUDA=1 -isystem "$cuda_root/include")
    torch_libs+=(-lc10_cuda -L"$cuda_lib" -Wl,-rpath,"$cuda_lib" "-l:libcudart.so.$major")
    torch_cuda="yes, runtime from $cuda_root"
  fi
fi
[ "$torch_cuda" = no ] && torch_flags+=(-DRR_TORCH_CUDA=0)
# Interfaces newer than torch 2.7 that the backend overrides where the headers
# have them (python/meson.build makes the same check).
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <torch/csrc/distributed/c10d/Backend.hpp>\nauto f = &c10d::Backend::gather_single;\n' > "$probe/p.cpp"
if g++ "${common[@]}" "${torch_flags[@]}" -fsyntax-only "$probe/p.cpp" 2>/dev/null; then
  torch_flags+=(-DRR_TORCH_HAS_GATHER_SINGLE=1)
fi
echo "torch_build: torch ${cfg[version]} (CUDA ${cfg[cuda]}), CUDA tensors: $torch_cuda"

pkg=$out/ringreduce
objects=$out/objects
mkdir -p "$pkg" "$objects/core" "$objects/torch"
# compile OBJDIR FLAGS...: every file of ${sources[@]}, JOBS at a time;
# fails when one did.
compile() {
  local dir=$1 f pid status=0
  shift
  local pids=()
  for f in "${sources[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || status=1; done
    g++ "$@" -c "$f" -o "$dir/$(basename "$f" .cpp).o" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  for f in "${sources[@]}"; do [ -s "$dir/$(basename "$f" .cpp).o" ] || status=1; done
  return $status
}
sources=("$src"/_core/*.cpp)
compile "$objects/core" -std=c++17 "${common[@]}" -isystem "${torch_includes[0]}"  # torch's pybind11
g++ -shared -o "$pkg/_core$suffix" "$objects"/core/*.o -L"$libdir" -Wl,-rpath,"$libdir" $engine
sources=("$src"/_torch/*.cpp)
compile "$objects/torch" "${common[@]}" "${torch_flags[@]}"
g++ -shared -o "$pkg/_torch$suffix" "$objects"/torch/*.o -L"$libdir" -Wl,-rpath,"$libdir" $engine "${torch_libs[@]}"

# The pure-Python modules, and what the package must know of the engine.
cp "$src"/*.py "$src"/py.typed "$pkg/"
rm -rf "$pkg/dask"
cp -r "$src/dask" "$pkg/dask"
sed "s/@CUDA_MAJOR@/$cuda_major/" "$src/_build.py.in" > "$pkg/_build.py"
echo "torch_build: $pkg"
