#!/usr/bin/env bash
# bench/plot on rr-sim's JSON: predicted busbw against rank count, one line
# per algorithm; mixing rr-sim and rr-bench files, or a size no file has,
# is refused. Skips (77) where Debian's python3-matplotlib is not installed.
# Usage: rr_sim_plot_test.sh plot rr-sim
set -u
PLOT=${1:?usage: rr_sim_plot_test.sh plot rr-sim}
SIM=${2:?}
source "$(dirname "${BASH_SOURCE[0]}")/plot_common.sh"

for n in 2 4 8 16 32; do
  for algo in ring rd; do
    "$SIM" --ranks $n --ranks-per-host 2 --placement cyclic --size 1M -e 64M -f 64 --alpha 5us --link 100Gbit \
      --algo $algo --json "$TMP/$algo-$n.json" >"$TMP/out" 2>&1 || fail "rr-sim $n ranks $algo"
  done
done
"$PLOT" "$TMP"/*.json -o "$TMP/ranks.png" >"$TMP/out" 2>&1 && is_png "$TMP/ranks.png" &&
  grep -q "2 lines, 67108864 bytes, link 12.5 GB/s" "$TMP/out" || fail "busbw against ranks at the largest size"
"$PLOT" "$TMP"/*.json --size 1048576 -o "$TMP/small.png" >"$TMP/out" 2>&1 && is_png "$TMP/small.png" &&
  grep -q "2 lines, 1048576 bytes" "$TMP/out" || fail "--size 1048576"
"$PLOT" "$TMP"/*.json --size 12345 -o "$TMP/none.png" >"$TMP/out" 2>&1
[[ $? -eq 1 ]] || fail "a size no file has: wanted exit 1"
echo '{"tool": "rr-bench", "rows": []}' >"$TMP/bench.json"
"$PLOT" "$TMP/ring-2.json" "$TMP/bench.json" -o "$TMP/mixed.png" >"$TMP/out" 2>&1
[[ $? -eq 2 ]] || fail "rr-sim and rr-bench files mixed: wanted exit 2"
[[ $failed -eq 0 ]] && echo "PASS: busbw against rank count from rr-sim, at the largest and a chosen size; bad input refused"
exit $failed
