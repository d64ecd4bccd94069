#!/bin/bash
# The soak's check can fail: with the reference of one call made wrong on
# purpose (--corrupt-reference), the run must exit nonzero with a WRONG
# RESULT message naming that call, its communicator and the element.
# usage: corrupted_reference_test.sh RR_RUN SOAK_RANK
set -u
rr_run=$1 soak_rank=$2
out=$("$rr_run" -n 2 --timeout 120 -- "$soak_rank" --seconds 30 --warmup-seconds 5 --max-bytes 1M \
      --seed 5 --corrupt-reference 40 2>&1)
status=$?
echo "$out" | tail -n 20
if [ "$status" -eq 0 ]; then
  echo "FAIL: the soak passed with a corrupted reference" >&2
  exit 1
fi
if ! echo "$out" | grep -q 'WRONG RESULT in call 4[0-9]'; then
  echo "FAIL: exit status $status, but no 'WRONG RESULT in call 40..49' message" >&2
  exit 1
fi
if ! echo "$out" | grep -q "on communicator '" || ! echo "$out" | grep -q "\[[0-9]*\]: expected .*, got "; then
  echo "FAIL: the message does not name the communicator, the expected and the got value" >&2
  exit 1
fi
echo "ok: the corrupted reference was caught (exit status $status)"
