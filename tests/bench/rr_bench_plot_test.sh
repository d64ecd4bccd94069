#!/usr/bin/env bash
# bench/plot on a fresh rr-bench run (2 ranks, small sizes): a PNG from the
# JSON, one from the CSV, one against a link rate; a bad command line exits 2.
# Skips (77) where Debian's python3-matplotlib is not installed.
# Usage: rr_bench_plot_test.sh plot rr-bench rr-run
set -u
PLOT=${1:?usage: rr_bench_plot_test.sh plot rr-bench rr-run}
BENCH=${2:?}
RUN=${3:?}
source "$(dirname "${BASH_SOURCE[0]}")/plot_common.sh"

timeout 60 "$RUN" -n 2 --timeout 50 -- "$BENCH" --backend ringreduce -b 1K -e 64K -f 8 -n 1 -w 0 \
  --json "$TMP/run.json" --csv "$TMP/run.csv" >"$TMP/out" 2>&1 </dev/null || fail "rr-bench run"
"$PLOT" "$TMP/run.json" -o "$TMP/json.png" >"$TMP/out" 2>&1 && is_png "$TMP/json.png" || fail "PNG from the JSON"
"$PLOT" "$TMP/run.csv" -o "$TMP/csv.png" >"$TMP/out" 2>&1 && is_png "$TMP/csv.png" || fail "PNG from the CSV"
"$PLOT" "$TMP/run.json" "$TMP/run.csv" --link 1gbit -o "$TMP/link.png" >"$TMP/out" 2>&1 &&
  is_png "$TMP/link.png" && grep -q "2 lines, reference 0.125 GB/s" "$TMP/out" || fail "two files against a 1gbit link"
"$PLOT" "$TMP/run.json" >"$TMP/out" 2>&1
[[ $? -eq 2 ]] || fail "no -o: wanted exit 2"
"$PLOT" "$TMP/run.json" -o "$TMP/x.png" --coll nosuch >"$TMP/out" 2>&1
[[ $? -eq 1 ]] || fail "a collective with no rows: wanted exit 1"
[[ $failed -eq 0 ]] && echo "PASS: PNGs from JSON, CSV and against a link rate; bad usage exits 2"
exit $failed
