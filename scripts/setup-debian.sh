#!/usr/bin/env bash
# Installs what ringreduce needs on Debian 12, makes the project's Python
# environment (.venv, scripts/setup-python.sh: torch from PyPI, about 3 GB),
# then configures and builds it in ./build. Safe to run again. Root or sudo is
# needed for apt-get only.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ meson ninja-build pkg-config python3 libucx-dev ucx-utils libhwloc-dev
          libcli11-dev nlohmann-json3-dev  # the tools' command lines and JSON (header-only)
          libgtest-dev libbenchmark-dev iproute2 iputils-ping procps
          iptables  # rr-net-bench --delay where the kernel has no netem (rr-delay-line's NFQUEUE rule)
          libopenmpi-dev openmpi-bin libgloo-dev python3-matplotlib
          clang libclang-rt-14-dev  # the fuzz suite (libFuzzer) and .ci/run's ASan + UBSan build (their runtimes)
          # the project's Python environment (.venv: torch, numpy, pytest,
          # dask, meson-python from python/requirements.lock) for the Python
          # package, its torch.distributed backend and their pytest suites
          python3-venv python3-dev
          patchelf  # meson-python: the wheel's RPATHs
          ccache)  # the wheel test's build reuses build/'s objects (tests/python/meson.build)
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

scripts/setup-python.sh

# The package and the torch backend are built for the environment's Python.
interpreter="$PWD/.venv/bin/python"
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release -Dpython_interpreter="$interpreter"
elif ! meson introspect build --buildoptions | "$interpreter" -c '
import json, sys
opts = {o["name"]: o["value"] for o in json.load(sys.stdin)}
sys.exit(opts.get("python_interpreter") != sys.argv[1])' "$interpreter"; then
  meson configure build -Dpython_interpreter="$interpreter"
fi
ninja -C build
