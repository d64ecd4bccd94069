#!/usr/bin/env bash
# bench/gpu/check.sh: every GPU test and GPU benchmark in one go, on a machine
# with a GPU (../shared/DEVICE.md). It builds nothing: it runs binaries built
# and bundled elsewhere, keeps their logs under $OUT when that is set (else a
# temporary folder, named at the end), and prints a short table last, with
# only the figures this run measured.
#
# Build and bundle, on the build machine, from the repository root:
#   meson setup build-gpu -Dcuda=enabled -Dgpu_archs=9.0 \
#     -Dmpi=disabled -Dgloo=disabled -Dmicro_benchmarks=disabled
#   meson compile -C build-gpu
#   ../shared/tools/device-bundle .devbundle \
#     build-gpu/tests/gpu/device_reduce_test build-gpu/tests/gpu/device_collectives_test \
#     build-gpu/tests/gpu/host_context_test \
#     build-gpu/bench/gpu/rr-gpu-bench build-gpu/bench/gpu/rr-gpu-allreduce-bench \
#     build-gpu/bench/rr-bench build-gpu/tools/rr-run
#   mkdir -p .devbundle/include/ringreduce   # the torch backend's build there
#   cp build-gpu/include/ringreduce/version.h .devbundle/include/ringreduce/
# (.devbundle/ is a build output: keep /.devbundle/ in .git/info/exclude, and
# with the device tool name it in `carry`.) On the GPU machine:
#   source .devbundle/env.sh && bash bench/gpu/check.sh
#
# Usage: check.sh [--dry-run] [--parts engine,torch] [DIR]
#   DIR holds the binaries: a bundle (DIR/bin/NAME) or a build folder
#   (DIR/tests/gpu/NAME, DIR/bench/gpu/NAME, DIR/bench/NAME, DIR/tools/NAME);
#   default .devbundle, then $PATH; DIR/lib holds libringreduce.so.0 and
#   DIR/include ringreduce/version.h for the torch part.
#   --parts: the engine's tests and benchmarks, the torch backend, or both
#     (the default).
#   --dry-run: on a machine without a GPU (this one: `check.sh --dry-run
#     build`): finds every binary without running it, builds the torch
#     backend as the GPU machine would (torch_build.sh, against
#     RR_TORCH_PYTHON's torch, default .venv/bin/python) and runs
#     torch_check.py --dry-run (the same rank code on CPU tensors).
#   RR_TORCH_PYTHON: the interpreter whose torch the backend is built for
#     (default python3; its torch must import).
#   RR_GPU_BENCH_ARGS: extra arguments for rr-gpu-bench (e.g. --sizes-mib 64).
#   RR_GPU_ALLREDUCE_ARGS: extra arguments for rr-gpu-allreduce-bench
#     (e.g. --max-mib 256 for a shorter sweep).
#   RR_GPU_TEST_LIMIT_S: seconds a test binary may run (default 300).
# Each row of the summary is also appended to summary.txt in the log folder
# as soon as it is known, so a run cut short still leaves the rows it made.
# Exit status: 0 when everything ran and passed, 77 when no GPU could be
# used (everything skipped), 1 otherwise.
set -uo pipefail

dry_run=0
parts=engine,torch
dir=.devbundle
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) dry_run=1 ;;
    --parts) parts=${2:?--parts needs a list}; shift ;;
    --parts=*) parts=${1#*=} ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0 ;;
    -*) echo "check.sh: unknown option $1" >&2; exit 2 ;;
    *) dir=$1 ;;
  esac
  shift
done
case ",$parts," in *,engine,*|*,torch,*) ;; *) echo "check.sh: --parts takes engine, torch or both" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
test_limit=${RR_GPU_TEST_LIMIT_S:-300}
gpu_tests=(device_reduce_test device_collectives_test host_context_test)
bench=rr-gpu-bench
allreduce_bench=rr-gpu-allreduce-bench

logs=${OUT:-}
if [ -z "$logs" ]; then
  logs=$(mktemp -d "${TMPDIR:-/tmp}/rr-gpu-check.XXXXXX")
fi
mkdir -p "$logs"

find_binary() {
  local name=$1 candidate
  for candidate in "$dir/bin/$name" "$dir/tests/gpu/$name" "$dir/bench/gpu/$name" \
    "$dir/bench/$name" "$dir/tools/$name"; do
    if [ -x "$candidate" ]; then
      echo "$candidate"
      return 0
    fi
  done
  command -v "$name" 2>/dev/null
}

# Runs one binary with a time limit, its output to the terminal and to a log.
# Prints nothing else; returns the binary's status.
run_logged() {
  local log=$1 limit=$2
  shift 2
  if command -v timeout >/dev/null; then
    timeout "$limit" "$@" 2>&1 | tee "$log"
  else
    "$@" 2>&1 | tee "$log"
  fi
  return "${PIPESTATUS[0]}"
}

# figure KIND NAME MIB: the GB/s column of one rr-gpu-bench row.
figure() {
  awk -v k="$1" -v n="$2" -v m="$3" '$1 == k && $2 == n && $3 == m {print $4}' "$bench_log"
}

failed=0
ran=0
declare -a table
# row LINE: a line of the summary table, also appended to summary.txt at
# once, so a run cut short (the device tool's limit) still leaves its rows.
row() {
  table+=("$1")
  printf '%s\n' "$1" >> "$logs/summary.txt"
}
: > "$logs/summary.txt"

echo "== GPU checks: binaries from $dir, logs in $logs$([ "$dry_run" = 1 ] && echo ' (dry run)')"

# The engine's GPU tests and benchmarks.
engine_checks() {
echo "== GPU checks: binaries from $dir, logs in $logs"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 |
    sed 's/^/GPU: /' | tee "$logs/gpu.txt"
fi

# run_test LABEL LOG BINARY ARGS...: a GoogleTest binary, its line in the table.
run_test() {
  local label=$1 log=$2 status passed failures result
  shift 2
  run_logged "$log" "$test_limit" "$@" --gtest_color=no
  status=$?
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  failures=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  case $status in
    0) result="PASS (${passed:-?} tests)"; ran=1 ;;
    77) result="SKIP: $(grep -m1 '^SKIP' "$log" | sed 's/^SKIP: //')" ;;
    124) result="FAIL: timed out after $test_limit s"; failed=1; ran=1 ;;
    *) result="FAIL: exit $status (${failures:-?} failed, ${passed:-0} passed)"; failed=1; ran=1 ;;
  esac
  row "$(printf '%-28s %s' "$label" "$result")"
}

for name in "${gpu_tests[@]}"; do
  binary=$(find_binary "$name")
  if [ -z "$binary" ]; then
    row "$(printf '%-28s %s' "$name" "FAIL: binary not found under $dir or on PATH")"
    failed=1
    continue
  fi
  echo "== $name"
  run_test "$name" "$logs/$name.log" "$binary"
done

# One hardware queue for every stream: the staging lanes and the caller's
# stream then run in one FIFO, where a wait issued before what releases it
# would hang the stream (lib/memory/copy_engine.hpp).
binary=$(find_binary device_collectives_test)
if [ -n "$binary" ]; then
  echo "== device_collectives_test, CUDA_DEVICE_MAX_CONNECTIONS=1, RR_GPU_REDUCE=device, 2 ranks"
  # (With the reductions on the GPU too: each segment's server runs in that queue.)
  RR_GPU_REDUCE=device CUDA_DEVICE_MAX_CONNECTIONS=1 RR_GPU_TEST_RANKS=2 run_test "  ... one hardware queue" \
    "$logs/device_collectives_one_queue.log" "$binary" \
    --gtest_filter='StreamOrdering.*:DeviceAllReduce.LargeTensorThroughManySegments:DeviceCollectives.*'
  # The counters by one-thread kernels instead of stream memory operations.
  echo "== device_collectives_test, RR_GPU_STREAM_MEMOPS=0, one hardware queue, 2 ranks"
  RR_GPU_STREAM_MEMOPS=0 CUDA_DEVICE_MAX_CONNECTIONS=1 RR_GPU_TEST_RANKS=2 run_test "  ... counter kernels" \
    "$logs/device_collectives_kernels.log" "$binary" \
    --gtest_filter='StreamOrdering.*:DeviceAllReduce.LargeTensorThroughManySegments'
  # The received chunks reduced on the GPU (kernels/reduce_server.hpp).
  echo "== device_collectives_test, RR_GPU_REDUCE=device, 2 and 3 ranks"
  RR_GPU_REDUCE=device RR_GPU_TEST_RANKS="2 3" run_test "  ... RR_GPU_REDUCE=device" \
    "$logs/device_collectives_device_reduce.log" "$binary" --gtest_filter='DeviceAllReduce.*:StreamOrdering.*'
fi

binary=$(find_binary "$bench")
bench_log=$logs/$bench.log
if [ -z "$binary" ]; then
  row "$(printf '%-28s %s' "$bench" "FAIL: binary not found under $dir or on PATH")"
  failed=1
else
  echo "== $bench ${RR_GPU_BENCH_ARGS:-}"
  # shellcheck disable=SC2086  # the extra arguments are words
  run_logged "$bench_log" 600 "$binary" ${RR_GPU_BENCH_ARGS:-}
  status=$?
  case $status in
    0) row "$(printf '%-28s %s' "$bench" "ran")"; ran=1 ;;
    77) row "$(printf '%-28s %s' "$bench" "SKIP: $(grep -m1 '^SKIP' "$bench_log" | sed 's/^SKIP: //')")" ;;
    *) row "$(printf '%-28s %s' "$bench" "FAIL: exit $status")"; failed=1; ran=1 ;;
  esac
  # The figures, per size, from the rows rr-gpu-bench printed (columns: kind
  # name MiB GB/s ratio of) and its summary lines; nothing else is shown.
  if [ "$status" = 0 ]; then
    while read -r mib; do
      row "$(printf '  %-26s %s GB/s' "D2D copy, $mib MiB" "$(figure copy d2d "$mib")")"
      row "$(printf '  %-26s %s / %s / %s GB/s' "pinned H2D / D2H / both" \
        "$(figure copy h2d_pinned "$mib")" "$(figure copy d2h_pinned "$mib")" \
        "$(figure copy h2d+d2h_pinned "$mib")")"
      row "$(printf '  %-26s %s' "reductions" \
        "$(sed -n "s/^summary  $mib MiB: reductions \([^;]*\);.*/\1/p" "$bench_log")")"
      row "$(awk -v m="$mib" '$1 == "divide" && $3 == m {
          n++; if (n == 1 || $5 < low) { low = $5; which = $2 } }
        END { if (n) printf "  %-26s lowest %.3f of d2d (%s)", "avg division alone", low, which }' \
        "$bench_log")"
      row "$(printf '  %-26s %s GB/s copy+reduce, %s GB/s mapped' "received float32 chunk" \
        "$(figure recv float32.sum.h2d+reduce "$mib")" "$(figure recv float32.sum.mapped "$mib")")"
    done < <(awk '$1 == "copy" && $2 == "d2d" {print $3}' "$bench_log")
  fi
fi

# The staging pipeline: allreduce on device buffers, 2 and 4 ranks on the GPU,
# beside its stages alone (rows: allreduce ranks MiB time_ms algbw busbw
# d2h_ms host_ms h2d_ms overlap slowest).
# run_allreduce_bench LABEL LOG LIMIT ARGS...: one run, its rows in the table.
run_allreduce_bench() {
  local label=$1 log=$2 limit=$3 status line
  shift 3
  echo "== $label $*"
  run_logged "$log" "$limit" "$binary" "$@"
  status=$?
  case $status in
    0) row "$(printf '%-28s %s' "$label" "ran")"; ran=1 ;;
    77) row "$(printf '%-28s %s' "$label" "SKIP: $(grep -m1 '^SKIP' "$log" | sed 's/^SKIP: //')")" ;;
    *) row "$(printf '%-28s %s' "$label" "FAIL: exit $status")"; failed=1; ran=1 ;;
  esac
  while read -r line; do
    row "$line"
  done < <(awk '$1 == "allreduce" {
      printf "  %d ranks %5d MiB: busbw %7.2f GB/s, %9.3f ms; overlap %.2f, slowest stage x%.2f\n",
        $2, $3, $6, $4, $10, $11 }' "$log")
}

binary=$(find_binary "$allreduce_bench")
if [ -z "$binary" ]; then
  row "$(printf '%-28s %s' "$allreduce_bench" "FAIL: binary not found under $dir or on PATH")"
  failed=1
else
  # shellcheck disable=SC2086  # the extra arguments are words
  RR_GPU_REDUCE=host run_allreduce_bench "$allreduce_bench" "$logs/$allreduce_bench.log" 1800 \
    ${RR_GPU_ALLREDUCE_ARGS:-}
  # The received chunks reduced on the GPU instead of the host (up to 256 MiB).
  # shellcheck disable=SC2086
  RR_GPU_REDUCE=device run_allreduce_bench "  ... RR_GPU_REDUCE=device" "$logs/$allreduce_bench-device.log" 900 \
    --max-mib 256 ${RR_GPU_ALLREDUCE_ARGS:-}
fi

# rr-bench's NCCL backend: correctness only. One GPU holds one NCCL rank
# (busbw of one rank is 0 by definition), and with two ranks on it rr-bench
# must skip NCCL, saying why, and still run ringreduce.
rr_bench=$(find_binary rr-bench)
rr_run=$(find_binary rr-run)
if [ "$ran" = 0 ]; then
  # Nothing above ran on a GPU (none usable, or no binaries): NCCL would not either.
  row "$(printf '%-28s %s' "rr-bench nccl" "SKIP: nothing above ran on a GPU")"
elif [ -n "$rr_bench" ] && [ -n "$rr_run" ] && "$rr_bench" --list-backends | grep -qx nccl; then
  echo "== rr-bench --backend nccl, 1 rank, every collective, type and op"
  run_logged "$logs/rr-bench-nccl1.log" 300 "$rr_run" -n 1 -- "$rr_bench" --backend nccl --coll all -d all -o all \
    -b 1K -e 4M -f 64 -n 2 -w 1 -c 1 -T 120
  status=$?
  case $status in
    0) result="PASS (every row checked, #wrong 0)"; ran=1 ;;
    *) result="FAIL: exit $status"; failed=1; ran=1 ;;
  esac
  row "$(printf '%-28s %s' "rr-bench nccl, 1 rank" "$result")"
  echo "== rr-bench --backend ringreduce --backend nccl, 2 ranks on one GPU"
  run_logged "$logs/rr-bench-nccl2.log" 300 "$rr_run" -n 2 -- "$rr_bench" --backend ringreduce --backend nccl \
    -b 1M -e 16M -f 4 -n 5 -w 1 -c 1 -T 120
  status=$?
  note=$(grep -o 'nccl skipped: .*' "$logs/rr-bench-nccl2.log" | head -1)
  if [ "$status" = 0 ] && [ -n "$note" ]; then
    row "$(printf '%-28s %s' "rr-bench nccl, 2 ranks" "PASS: ${note:0:70}")"
  elif [ "$status" = 0 ]; then
    row "$(printf '%-28s %s' "rr-bench nccl, 2 ranks" "ran (a GPU per rank)")"
  else
    row "$(printf '%-28s %s' "rr-bench nccl, 2 ranks" "FAIL: exit $status")"
    failed=1
  fi
  ran=1
else
  row "$(printf '%-28s %s' "rr-bench nccl" "not run: rr-bench (with nccl) or rr-run not in $dir")"
fi

}

# A dry run finds each binary and runs none.
engine_dry_run() {
  local name binary
  for name in "${gpu_tests[@]}" "$bench" "$allreduce_bench" rr-bench rr-run; do
    binary=$(find_binary "$name")
    if [ -n "$binary" ]; then
      row "$(printf '%-28s %s' "$name" "found: $binary (dry run: not run)")"
    else
      row "$(printf '%-28s %s' "$name" "FAIL: binary not found under $dir or on PATH")"
      failed=1
    fi
  done
}

# The torch backend on CUDA tensors: built here against this machine's torch
# (torch_build.sh, about a minute on 16 cores), then torch_check.py; its rows
# join the table.
torch_checks() {
  local python=${RR_TORCH_PYTHON:-python3} pkg status line check_args=()
  if [ "$dry_run" = 1 ] && [ -z "${RR_TORCH_PYTHON:-}" ] && [ -x "$here/../../.venv/bin/python" ]; then
    python=$here/../../.venv/bin/python
  fi
  if ! "$python" -c 'import torch' >/dev/null 2>&1; then
    row "$(printf '%-28s %s' "torch backend" "SKIP: no torch for $python")"
    return
  fi
  pkg=$(mktemp -d "${TMPDIR:-/tmp}/rr-torch-pkg.XXXXXX")
  echo "== torch backend: building against $python's torch into $pkg"
  PYTHON=$python run_logged "$logs/torch_build.log" 600 bash "$here/torch_build.sh" "$dir/lib" "$dir/include" "$pkg"
  status=$?
  if [ "$status" != 0 ]; then
    row "$(printf '%-28s %s' "torch backend build" "FAIL: exit $status ($logs/torch_build.log)")"
    failed=1
    return
  fi
  row "$(printf '%-28s %s' "torch backend build" "$(grep -m1 'CUDA tensors' "$logs/torch_build.log" | sed 's/^torch_build: //')")"
  [ "$dry_run" = 1 ] && check_args=(--dry-run)
  echo "== torch backend: torch_check.py ${check_args[*]}"
  PYTHONPATH=$pkg run_logged "$logs/torch_check.log" 600 "$python" "$here/torch_check.py" "${check_args[@]}" \
    --logs "$logs"
  status=$?
  case $status in
    0) ran=1 ;;
    77) ;;
    *) failed=1; ran=1 ;;
  esac
  while read -r line; do
    row "  $line"
  done < <(cat "$logs/torch_summary.txt" 2>/dev/null)
  [ "$status" = 77 ] && row "$(printf '%-28s %s' "torch backend" "SKIP: no GPU")"
  [ "$status" != 0 ] && [ "$status" != 77 ] && row "$(printf '%-28s %s' "torch backend" "FAIL: exit $status")"
  rm -rf "$pkg"
}

if [[ ",$parts," == *,engine,* ]]; then
  if [ "$dry_run" = 1 ]; then engine_dry_run; else engine_checks; fi
fi
if [[ ",$parts," == *,torch,* ]]; then
  torch_checks
fi

echo
echo "== GPU checks summary (logs: $logs)"
printf '%s\n' "${table[@]}"
echo "overlap = allreduce time / (D2H + host allreduce + H2D, each alone); slowest = time / the slowest of them"

if [ "$failed" != 0 ]; then
  exit 1
elif [ "$ran" = 0 ] && [ "$dry_run" = 0 ]; then
  exit 77
fi
exit 0
