#!/usr/bin/env bash
# rr-bench end to end with 2 ranks and small sizes, every built backend:
#   - under rr-run: ringreduce (+ Gloo), every type and op, JSON and CSV checked;
#   - a result corrupted on purpose (RR_BENCH_INJECT_CORRUPTION) is caught by
#     -c 1: #wrong > 0, the footer says FAILED, exit status 1;
#   - 3 ranks, every collective (ringreduce);
#   - under mpirun (when Open MPI was built in): ringreduce beside both MPI
#     rows, every collective;
#   - NCCL (when built): on a GPU per rank its rows are checked; without, it
#     is skipped with the reason and the other rows stand.
# Correctness and well-formed output only; no timing is asserted.
# Usage: rr_bench_smoke_test.sh rr-bench rr-run [mpirun|""] check_rr_bench_json.py
set -u

BENCH=${1:?usage: rr_bench_smoke_test.sh rr-bench rr-run mpirun checker}
RUN=${2:?}
MPIRUN=${3:-}
CHECKER=${4:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0
BUILT=$("$BENCH" --list-backends)
SMALL=(-b 1K -e 64K -f 8 -n 2 -w 1 -c 1 -T 60)

pass() { passed=$((passed + 1)); echo "PASS: $1"; }
fail() {
  failed=$((failed + 1))
  echo "FAIL: $1"
  sed 's/^/  | /' "$TMP/out"
}
built() { grep -qx "$1" <<<"$BUILT"; }

# 1. rr-run: ringreduce and Gloo, every type and op.
backends=(--backend ringreduce)
names=(ringreduce)
if built gloo; then
  backends+=(--backend gloo)
  names+=(gloo-ring gloo-ringchunked)
fi
timeout 90 "$RUN" -n 2 --timeout 80 -- "$BENCH" "${backends[@]}" "${SMALL[@]}" -d all -o all \
  --json "$TMP/env.json" --csv "$TMP/env.csv" >"$TMP/out" 2>&1 </dev/null
rc=$?
if [[ $rc -eq 0 ]] && grep -q "# Out of bounds values : 0 OK" "$TMP/out" &&
   python3 "$CHECKER" "$TMP/env.json" "${names[@]}" --csv "$TMP/env.csv" >>"$TMP/out" 2>&1; then
  pass "rr-run -n 2: ${names[*]}, every type and op, correct, JSON and CSV well formed"
else
  fail "rr-run -n 2: ${names[*]} (exit $rc)"
fi

# 1b. Every collective on 3 ranks (blocks that do not divide evenly, the root
#     last), checked element by element.
timeout 90 "$RUN" -n 3 --timeout 80 -- "$BENCH" --backend ringreduce --coll all -r 2 "${SMALL[@]}" -d float -d int8 \
  -o sum -o max --json "$TMP/coll.json" >"$TMP/out" 2>&1 </dev/null
rc=$?
if [[ $rc -eq 0 ]] && python3 "$CHECKER" "$TMP/coll.json" ringreduce >>"$TMP/out" 2>&1 &&
   [[ $(grep -c '# collective ' "$TMP/out") -eq 7 ]]; then
  pass "rr-run -n 3: ringreduce, every collective, correct"
else
  fail "rr-run -n 3: ringreduce --coll all (exit $rc)"
fi

# 2. A corrupted result must be counted and fail the run.
timeout 60 "$RUN" -n 2 --timeout 50 -x RR_BENCH_INJECT_CORRUPTION=ringreduce -- "$BENCH" --backend ringreduce \
  -b 4K -e 4K -n 1 -w 0 -c 1 --json "$TMP/bad.json" >"$TMP/out" 2>&1 </dev/null
rc=$?
if [[ $rc -eq 1 ]] && grep -q "# Out of bounds values : [1-9][0-9]* FAILED" "$TMP/out" &&
   python3 "$CHECKER" "$TMP/bad.json" ringreduce --expect-wrong >>"$TMP/out" 2>&1; then
  pass "-c 1 catches an injected corruption (exit 1, #wrong > 0)"
else
  fail "-c 1 with an injected corruption (exit $rc, wanted 1 and #wrong > 0)"
fi

# 3. mpirun: ringreduce beside MPI's default and ring rows.
if built mpi && [[ -n $MPIRUN ]]; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  root_flags=()
  [[ $(id -u) -eq 0 ]] && root_flags=(--allow-run-as-root)
  timeout 90 "$MPIRUN" "${root_flags[@]}" --oversubscribe -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" \
    "$BENCH" --backend ringreduce --backend mpi --coll all -r 1 "${SMALL[@]}" -d float -d int32 -o sum -o max \
    --json "$TMP/mpi.json" >"$TMP/out" 2>&1 </dev/null
  rc=$?
  if [[ $rc -eq 0 ]] && python3 "$CHECKER" "$TMP/mpi.json" ringreduce mpi-default mpi-ring mpi-alg5 >>"$TMP/out" 2>&1; then
    pass "mpirun -np 2: ringreduce, mpi-default, mpi-ring, mpi-alg5, every collective, correct, JSON well formed"
  else
    fail "mpirun -np 2: ringreduce + mpi (exit $rc)"
  fi
else
  echo "SKIP: mpirun run (rr-bench built without mpi, or no mpirun)"
fi

# 4. NCCL (when built): it runs only with a GPU per rank, and otherwise must
#    say why and leave the other backends' rows intact.
if built nccl; then
  timeout 90 "$RUN" -n 2 --timeout 80 -- "$BENCH" --backend ringreduce --backend nccl "${SMALL[@]}" \
    --json "$TMP/nccl2.json" >"$TMP/out" 2>&1 </dev/null
  rc=$?
  if [[ $rc -eq 0 ]] && grep -q "^\[0\] # nccl skipped: " "$TMP/out" &&
     python3 "$CHECKER" "$TMP/nccl2.json" ringreduce >>"$TMP/out" 2>&1; then
    pass "rr-run -n 2: nccl skipped with its reason ($(grep -o 'nccl skipped: .*' "$TMP/out" | head -1 | cut -c1-60)...), ringreduce correct"
  elif [[ $rc -eq 0 ]] && python3 "$CHECKER" "$TMP/nccl2.json" ringreduce nccl >>"$TMP/out" 2>&1; then
    pass "rr-run -n 2: ringreduce and nccl (a GPU per rank), correct"
  else
    fail "rr-run -n 2: ringreduce + nccl (exit $rc)"
  fi
  timeout 90 "$RUN" -n 1 --timeout 80 -- "$BENCH" --backend nccl --coll all "${SMALL[@]}" -d all -o all \
    --json "$TMP/nccl1.json" >"$TMP/out" 2>&1 </dev/null
  rc=$?
  if [[ $rc -eq 2 ]] && grep -q "nccl skipped: no GPU" "$TMP/out" && grep -q "no backend left" "$TMP/out"; then
    pass "rr-run -n 1: nccl alone without a GPU says so and exits 2"
  elif [[ $rc -eq 0 ]] && python3 "$CHECKER" "$TMP/nccl1.json" nccl >>"$TMP/out" 2>&1; then
    pass "rr-run -n 1: nccl on its GPU, every collective, type and op, correct"
  else
    fail "rr-run -n 1: nccl alone (exit $rc)"
  fi
else
  echo "SKIP: nccl runs (rr-bench built without nccl)"
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
