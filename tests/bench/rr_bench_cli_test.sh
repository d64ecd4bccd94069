#!/usr/bin/env bash
# rr-bench's command line as a user meets it: every bad command line gives a
# message naming the fault and exit status 2, before any rank starts; --help
# and --list-backends exit 0. Usage: rr_bench_cli_test.sh path/to/rr-bench
set -u

BENCH=${1:?usage: rr_bench_cli_test.sh path/to/rr-bench}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0

# expect STATUS PATTERN [env assignments...] -- args...: runs rr-bench without
# any launcher variable (unless given), checks the exit status and that
# stdout+stderr contain PATTERN.
expect() {
  local want=$1 pattern=$2
  shift 2
  local assignments=()
  while [[ $# -gt 0 && $1 != -- ]]; do assignments+=("$1"); shift; done
  shift
  env -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE \
    "${assignments[@]}" timeout 20 "$BENCH" "$@" >"$TMP/out" 2>&1 </dev/null
  local rc=$?
  if [[ $rc -eq $want ]] && grep -qF -- "$pattern" "$TMP/out"; then
    passed=$((passed + 1))
    echo "PASS: rr-bench $* -> $rc"
  else
    failed=$((failed + 1))
    echo "FAIL: rr-bench $* (env ${assignments[*]}): exit $rc, wanted $want with '$pattern'"
    sed 's/^/  | /' "$TMP/out"
  fi
}

expect 2 "unknown flag '-q'" -- -q 1
expect 2 "unknown flag '--bogus'" -- --bogus=1
expect 2 "--maxbytes needs a value" -- -e
expect 2 "-b takes a size" -- -b 12Q
expect 2 "-n must be between 1" -- -n 0
expect 2 "unknown datatype 'float8'" -- -d float8
expect 2 "unknown op 'xor'" -- -o xor
expect 2 "-c takes 0 or 1" -- -c yes
expect 2 "larger than -e" -- -b 2M -e 1M
expect 2 "unknown collective 'hypercube'" -- --coll hypercube
expect 2 "unknown backend 'rccl'" -- --backend rccl
expect 2 "no ranks to run" -- -b 1K -e 1K
expect 2 "MASTER_ADDR" OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 -- --backend ringreduce
if "$BENCH" --list-backends | grep -qx mpi; then
  expect 2 "must be started by mpirun" RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 -- --backend mpi
else
  expect 2 "built without mpi" RANK=0 WORLD_SIZE=1 -- --backend mpi
fi
if ! "$BENCH" --list-backends | grep -qx gloo; then
  expect 2 "built without gloo" RANK=0 WORLD_SIZE=1 -- --backend gloo
fi
if ! "$BENCH" --list-backends | grep -qx nccl; then
  expect 2 "built without nccl" RANK=0 WORLD_SIZE=1 -- --backend nccl
fi
expect 0 "usage: rr-bench" -- --help
expect 0 "ringreduce" -- --list-backends

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
