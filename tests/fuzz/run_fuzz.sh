#!/usr/bin/env bash
# Builds one libFuzzer target with clang (-fsanitize=fuzzer,address,undefined)
# into the build directory and runs it for a bounded time, starting from its
# seed corpus. Any crash, sanitizer report or failed check fails the test, and
# the input that caused it is kept beside the binary: fix the bug, then copy
# the input into the seed directory as a regression seed.
#
# Exits 77 (skip) when clang++ or clang's fuzzer runtime is missing; the build
# itself may use gcc. FUZZ_CXX picks another clang++ (e.g. clang++-14).
#
# Usage: run_fuzz.sh NAME OUT_DIR SEED_DIR SECONDS [COMPILER_FLAGS...] -- SOURCES...
set -u

name=${1:?usage: run_fuzz.sh NAME OUT_DIR SEED_DIR SECONDS [FLAGS...] -- SOURCES...}
out=${2:?}
seeds=${3:?}
seconds=${4:?}
shift 4
flags=()
while [[ $# -gt 0 && $1 != -- ]]; do
  flags+=("$1")
  shift
done
if [[ ${1:-} != -- || $# -lt 2 ]]; then
  echo "run_fuzz: expected -- and the sources of $name" >&2
  exit 1
fi
shift
sources=("$@")
[[ -d $seeds ]] || { echo "run_fuzz: no seed corpus at $seeds" >&2; exit 1; }

cxx=${FUZZ_CXX:-clang++}
if ! command -v "$cxx" >/dev/null; then
  echo "SKIP: $cxx not found (Debian: apt-get install clang)"
  exit 77
fi
sanitize=(-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all)
mkdir -p "$out"
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
  >"$probe_dir/probe.cpp"
if ! "$cxx" "${sanitize[@]}" "$probe_dir/probe.cpp" -o "$probe_dir/probe" 2>"$probe_dir/log"; then
  echo "SKIP: $cxx cannot link a libFuzzer target (clang's fuzzer runtime; Debian: apt-get install libclang-rt-14-dev):"
  sed 's/^/  | /' "$probe_dir/log" | tail -n 5
  exit 77
fi

binary=$out/${name}_fuzzer
echo "run_fuzz: building $binary"
if ! "$cxx" -std=c++17 -g -O1 "${sanitize[@]}" "${flags[@]}" "${sources[@]}" -o "$binary"; then
  echo "FAIL: $name does not build with $cxx"
  exit 1
fi

# New inputs the fuzzer finds go to a scratch corpus in the build directory,
# so that the seed directory changes only by hand.
scratch=$out/${name}_corpus
mkdir -p "$scratch"
rm -f "$out/$name"-crash-* "$out/$name"-leak-* "$out/$name"-timeout-* "$out/$name"-oom-*
echo "run_fuzz: $name for ${seconds} s from $(find "$seeds" -type f | wc -l) seeds in $seeds"
"$binary" "$scratch" "$seeds" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$out/$name-" -print_final_stats=1
rc=$?
if [[ $rc -ne 0 ]]; then
  echo "FAIL: $name exited $rc; the input is $(ls "$out/$name"-* 2>/dev/null | tr '\n' ' ')"
  echo "  Fix the bug, then keep the input as a regression seed: cp it to $seeds/"
  exit 1
fi
echo "PASS: $name ran ${seconds} s without a finding"
