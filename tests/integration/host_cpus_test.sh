#!/usr/bin/env bash
# Whether ranks share cores is judged from the CPUs they may use together
# (the union of their affinity masks, comm/same_host_path.cpp), not from one
# rank's own mask: ranks a launcher bound to a CPU each (mpirun -np 2 binds
# by default; rr-run --bind-to core) share none and wait by sleeping, with
# the selector pricing them as ranks with a core each; ranks bound to one
# CPU, or more ranks than CPUs, share cores and yield.
# Usage: host_cpus_test.sh path/to/rr-run path/to/collectives_test
set -u
RR=${1:?usage: host_cpus_test.sh rr-run collectives_test}
PROGRAM=${2:?usage: host_cpus_test.sh rr-run collectives_test}
ncpus=$(python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
first=$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')
failed=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# Runs N ranks (under the given prefix and rr-run flags) and checks rank 0's wait-policy line.
check() {
  local what=$1 expect=$2 n=$3; shift 3
  local -a prefix=()
  while [[ $1 != -- ]]; do prefix+=("$1"); shift; done
  shift
  timeout 120 "${prefix[@]}" "$RR" -n "$n" "$@" -x RR_DEBUG=INFO -- "$PROGRAM" \
    --gtest_filter=RecursiveDoubling.TheChoiceIsReported >"$TMP/out" 2>&1
  local rc=$?
  local line
  line=$(grep -m1 "rank 0: wait policy" "$TMP/out")
  if [[ $rc -eq 0 && $line == *"$expect"* ]]; then
    echo "PASS: $what: $line"
  else
    echo "FAIL: $what (exit $rc; expected '$expect' in rank 0's wait-policy line)"
    sed 's/^/  | /' "$TMP/out" | tail -20
    failed=$((failed + 1))
  fi
}

if [[ $ncpus -ge 2 ]]; then
  check "2 ranks bound to a CPU each" "policy sleep (RR_WAIT_POLICY=auto; 2 ranks on this host, 2 CPUs for them together)" 2 -- --bind-to core
fi
check "2 ranks on one CPU" "policy yield (RR_WAIT_POLICY=auto; 2 ranks on this host, 1 CPUs for them together)" 2 taskset -c "$first" --
n=$((ncpus + 1))
check "$n ranks bound round robin to $ncpus CPUs" "policy yield (RR_WAIT_POLICY=auto; $n ranks on this host, $ncpus CPUs for them together)" "$n" -- --bind-to core
[[ $failed -eq 0 ]]
