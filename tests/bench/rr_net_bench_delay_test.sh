#!/usr/bin/env bash
# bench/net/rr-net-bench --delay 5ms once, small: 2 namespaced hosts on a
# shaped 1 Gbit/s link with a 5 ms one-way delay, ringreduce, 64 KiB and
# 256 KiB. Proves that the delay is really there, by netem or, on a kernel
# without it, by rr-delay-line (the ping's round trip is at least 2 x 5 ms,
# and each host's delay line carried packets), that ringreduce sized its
# pipeline to a round trip of at least that much, that its results are
# correct and its JSON well formed (its "net" object naming the delay and
# what made it), and that nothing it created is left: no namespace, veth or
# bridge of its run, no rr-delay-line process, no change to the caller's
# iptables mangle table. Skips (77) where network namespaces are not allowed,
# or where the kernel has no netem and there is no rr-delay-line or iptables.
# No timing is asserted beyond the delay's floor.
# Usage: rr_net_bench_delay_test.sh rr-net-bench rr-bench check_rr_bench_json.py
set -u
SCRIPT=${1:?usage: rr_net_bench_delay_test.sh rr-net-bench rr-bench checker}
BENCH=${2:?}
CHECKER=${3:?}
source "$(dirname "${BASH_SOURCE[0]}")/../common/require_netns.sh"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
delay_ms=5
min_rtt_ms=9.5 # 2 x the delay, less a little for the clocks' rounding
# rr-net-bench runs the rr-delay-line built beside rr-bench.
delay_line=$(realpath -m "$(dirname "$BENCH")/rr-delay-line")
iptables=$(command -v iptables-legacy 2>/dev/null)
ipt_state() { [[ -z $iptables ]] || "$iptables" -t mangle -S 2>&1; }
delay_line_pids() { pgrep -f -- "$delay_line( |\$)" | sort; }
before_ns=$(ip netns list | awk '{print $1}' | sort)
before_links=$(ip -o link show | awk -F': ' '{print $2}' | sort)
before_ipt=$(ipt_state)
before_dl=$(delay_line_pids)

# 64 KiB chunks: at 1 Gbit/s and a 10 ms round trip the link then wants about
# 16 columns in flight, far above the floor of 4 that no sizing would give.
chunk=65536
RR_CHUNK_BYTES=$chunk timeout 55 bash "$SCRIPT" --bench "$BENCH" --backend ringreduce -n 2 --delay ${delay_ms}ms -b 64K -e 256K -f 4 \
  --iters 2 --warmup 1 --timeout 40 --out "$TMP/out" --debug >"$TMP/log" 2>&1
rc=$?
failed=0
fail() { echo "FAIL: $1"; failed=1; }
if [[ $rc -eq 77 ]]; then
  echo "SKIP: $(tail -n 1 "$TMP/log")"
  exit 77
fi
[[ $rc -eq 0 ]] || fail "rr-net-bench exited $rc"
json=$TMP/out/ringreduce.json
delay_by=""
if [[ -s $json ]]; then
  python3 "$CHECKER" "$json" ringreduce || fail "JSON of ringreduce"
  # The "net" object: the delay asked for, what made it, and a ping that shows
  # it. Prints delay_by for the checks below.
  delay_by=$(python3 - "$json" "$delay_ms" "$min_rtt_ms" 2>"$TMP/net.err" <<'PY'
import json, sys
net = json.load(open(sys.argv[1])).get("net") or {}
delay, low = sys.argv[2] + "ms", float(sys.argv[3])
print(net.get("delay_by"))
bad = []
if net.get("delay") != delay:
    bad.append(f"delay {net.get('delay')!r}, not {delay!r}")
if net.get("delay_by") not in ("netem", "rr-delay-line"):
    bad.append(f"delay_by {net.get('delay_by')!r}, not netem or rr-delay-line")
rtt = net.get("ping_rtt_ms")
if not isinstance(rtt, dict) or not isinstance(rtt.get("min"), (int, float)):
    bad.append(f"no ping_rtt_ms min: {rtt!r}")
elif not low <= rtt["min"] < 200:
    bad.append(f"ping_rtt_ms min {rtt['min']} ms, not in [{low}, 200): the delay is not on the link")
for b in bad:
    print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
  ) || fail "the JSON's net object does not show a ${delay_ms} ms delay: $(tr '\n' ';' <"$TMP/net.err")"
else
  fail "no JSON written"
fi
if [[ $delay_by == rr-delay-line ]]; then
  grep -q '^# the delay: this kernel has no netem' "$TMP/log" || fail "no '# the delay: this kernel has no netem' line"
  carried=$(grep -o 'rr-delay-line: carried [0-9]* packets' "$TMP/log" | awk '{print $3}')
  [[ $(wc -l <<<"$carried") -eq 2 ]] || fail "not 2 'rr-delay-line: carried' lines: $(tr '\n' ' ' <<<"$carried")"
  for n in $carried; do
    [[ $n -gt 0 ]] || fail "a delay line carried $n packets"
  done
fi
# ringreduce sized its pipeline to the link's round trip, at least 2 x the delay.
rank0=$TMP/out/ringreduce.rank0.log
depth_line=$(grep -m 1 'ringreduce INFO: rank 0: pipeline depth' "$rank0" 2>/dev/null)
if [[ -z $depth_line ]]; then
  fail "ringreduce's rank 0 log has no 'pipeline depth' line"
else
  rt=$(sed -n 's/.*round trip \([0-9.]*\) ms.*/\1/p' <<<"$depth_line")
  python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)" "${rt:-nan}" "$min_rtt_ms" 2>/dev/null ||
    fail "ringreduce sized its pipeline to a round trip of '${rt}' ms, not >= $min_rtt_ms: $depth_line"
  # The depth is the formula's for that round trip at the shaped 1 Gbit/s
  # (algo/pipeline.hpp), well above the floor, and the one the ring was made with.
  depth=$(sed -n 's/.*pipeline depth \([0-9]*\).*/\1/p' <<<"$depth_line")
  want=$(python3 -c "import math, sys; rt = float(sys.argv[1]); print(min(64, max(4, 1 + math.ceil(1.5 * 1e9 / 8 * rt / 2e3 / $chunk))))" "${rt:-nan}" 2>/dev/null)
  [[ -n $depth && $depth == "$want" && $depth -ge 8 ]] ||
    fail "ringreduce's pipeline depth is '${depth}', not $want (1 + ceil(1.5 x 1 Gbit/s x ${rt} ms / 2 / $chunk B), at least 8): $depth_line"
  grep -q "rank 0 of 2: chunk_bytes=$chunk .* pipeline_depth=$depth (auto: " "$rank0" ||
    fail "ringreduce's init line does not show pipeline_depth=$depth from the sizing: $(grep -m 1 'rank 0 of 2: chunk_bytes' "$rank0")"
fi

after_ns=$(ip netns list | awk '{print $1}' | sort)
after_links=$(ip -o link show | awk -F': ' '{print $2}' | sort)
[[ $before_ns == "$after_ns" ]] || fail "namespaces left behind: $(comm -13 <(echo "$before_ns") <(echo "$after_ns") | tr '\n' ' ')"
[[ $before_links == "$after_links" ]] || fail "links left behind: $(comm -13 <(echo "$before_links") <(echo "$after_links") | tr '\n' ' ')"
ip netns list | grep -q '^rrn' && fail "an rrn* namespace exists after the run"
after_dl=$(delay_line_pids)
left_dl=$(comm -13 <(echo "$before_dl") <(echo "$after_dl") | tr '\n' ' ')
[[ -z ${left_dl// /} ]] || fail "rr-delay-line processes left behind: $left_dl"
[[ $before_ipt == "$(ipt_state)" ]] || fail "the caller's iptables mangle table changed: $(diff <(echo "$before_ipt") <(ipt_state) | tr '\n' ' ')"

if [[ $failed -ne 0 ]]; then
  sed 's/^/  | /' "$TMP/log"
  [[ -n ${depth_line:-} ]] && echo "  rank 0: $depth_line"
  exit 1
fi
echo "PASS: 2 shaped hosts, --delay ${delay_ms}ms by $delay_by: $(grep -m 1 '^# ping host 0' "$TMP/log" | sed 's/^# //'), ringreduce's pipeline sized to a ${rt} ms round trip, correct, nothing left behind"
