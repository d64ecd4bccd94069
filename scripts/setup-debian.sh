#!/usr/bin/env bash
# Installs what ringreduce needs on Debian 12, then configures and builds it
# in ./build. Safe to run again. Root or sudo is needed for apt-get only.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ meson ninja-build pkg-config python3 libucx-dev ucx-utils libhwloc-dev
          libgtest-dev libbenchmark-dev iproute2 iputils-ping procps
          iptables  # rr-net-bench --delay where the kernel has no netem (rr-delay-line's NFQUEUE rule)
          libopenmpi-dev openmpi-bin libgloo-dev python3-matplotlib
          clang libclang-rt-14-dev  # the fuzz suite: clang and its libFuzzer runtime
          # the Python package (python/ringreduce), its torch.distributed
          # backend and Dask bootstrapping, and their pytest suites
          python3-dev pybind11-dev python3-numpy python3-pytest
          python3-torch libtorch-dev python3-distributed)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release
fi
ninja -C build
