#!/usr/bin/env bash
# bench/net/rr-net-bench with several ranks per host, placed cyclically:
# 2 namespaced hosts x 2 ranks, 1 KiB..64 KiB, ringreduce and Gloo. Proves
# that the results are correct and the JSON well formed with 4 ranks; that
# the placement is the one asked for, as the script prints it (rank r on host
# r mod 2: host 0 holds ranks 0 2, host 1 ranks 1 3), as it records it in
# the JSON ("net"), and as the engine itself saw it: each rank reaches a rank of
# another host over TCP on its own host's veth, one of its own host over
# shared memory, and rank 0 counts 2 ranks on its host; and that nothing of the run
# is left: no namespace, no link, no process. Then --delay: the ping between
# two hosts takes at least 2 x the delay, and the qdiscs show netem and tbf,
# or tbf with rr-delay-line holding the packets where the kernel has no netem
# (a refusal, 77, is still taken where neither can be had), and it leaves
# nothing. Skips (77) where network
# namespaces are not allowed. No timing is asserted beyond the delay's floor.
# Usage: rr_net_bench_placement_test.sh rr-net-bench rr-bench check_rr_bench_json.py
set -u
SCRIPT=${1:?usage: rr_net_bench_placement_test.sh rr-net-bench rr-bench checker}
BENCH=${2:?}
CHECKER=${3:?}
source "$(dirname "${BASH_SOURCE[0]}")/../common/require_netns.sh"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failed=0
fail() { echo "FAIL: $1"; failed=1; }
# Every process of a run carries the run's marker in its environment (zombies
# show an empty one and are not counted).
marker=rr_net_bench_placement_test.$$
marked_pids() { grep -lsx --null-data "RR_NET_BENCH_PLACEMENT_TEST=$1" /proc/[0-9]*/environ | sed 's|/proc/\([0-9]*\)/environ|\1|'; }
namespaces() { ip netns list | awk '{print $1}' | sort; }
links() { ip -o link show | awk -F': ' '{print $2}' | sort; }
# What a run ($1: its marker) left, beside the namespaces and links there were.
check_left() {
  local left
  [[ $before_ns == "$(namespaces)" ]] || fail "$1: namespaces left behind: $(comm -13 <(echo "$before_ns") <(namespaces) | tr '\n' ' ')"
  [[ $before_links == "$(links)" ]] || fail "$1: links left behind: $(comm -13 <(echo "$before_links") <(links) | tr '\n' ' ')"
  left=$(marked_pids "$2")
  [[ -z $left ]] || fail "$1: processes left behind: $(ps -o pid=,args= -p "$(echo $left | tr ' ' ,)" | tr '\n' ';')"
}
before_ns=$(namespaces)
before_links=$(links)

# --- 2 hosts x 2 ranks, cyclic ------------------------------------------------
RR_NET_BENCH_PLACEMENT_TEST=$marker.cyclic timeout 80 bash "$SCRIPT" --bench "$BENCH" --backend ringreduce --backend gloo \
  -n 2 --ranks-per-host 2 --placement cyclic -b 1K -e 64K -f 8 --iters 2 --warmup 1 \
  --timeout 40 --out "$TMP/out" --debug >"$TMP/log" 2>&1
rc=$?
if [[ $rc -eq 77 ]]; then
  echo "SKIP: $(tail -n 1 "$TMP/log")"
  exit 77
fi
[[ $rc -eq 0 ]] || fail "rr-net-bench exited $rc"
backends=(ringreduce)
"$BENCH" --list-backends | grep -qx gloo && backends+=(gloo-ring gloo-ringchunked)
for json in "$TMP"/out/ringreduce.json "$TMP"/out/gloo.json; do
  [[ -e $json || $json == */gloo.json && ${#backends[@]} -eq 1 ]] || fail "no $(basename "$json")"
done
if [[ -e $TMP/out/ringreduce.json ]]; then
  python3 - "$TMP"/out/ringreduce.json "$TMP"/out/gloo.json >"$TMP/merged.json" <<'PY' || fail "merging the JSON files"
import json, os, sys
docs = [json.load(open(p)) for p in sys.argv[1:] if os.path.exists(p)]
merged = docs[0]
for d in docs[1:]:
    merged["rows"] += d["rows"]
    merged["backends"].update(d["backends"])
    merged["wrong"] += d["wrong"]
print(json.dumps(merged))
PY
  python3 "$CHECKER" "$TMP/merged.json" "${backends[@]}" || fail "JSON of ${backends[*]}"
  python3 -c 'import json, sys; n = [json.load(open(p))["nranks"] for p in sys.argv[1:]]; sys.exit(n != [4] * len(n))' \
    "$TMP"/out/ringreduce.json $([[ -e $TMP/out/gloo.json ]] && echo "$TMP/out/gloo.json") || fail "rr-bench did not run 4 ranks"
fi

# The placement as printed: "#   host H  ADDRESS  HOSTNAME  ranks R...".
table=$(sed -n 's/^#   host \([0-9]*\) .* ranks \(.*\)$/\1: \2/p' "$TMP/log")
[[ $table == $'0: 0 2\n1: 1 3' ]] || fail "placement table is not cyclic (host 0: ranks 0 2, host 1: ranks 1 3): $(echo "$table" | tr '\n' ';')"
grep -q '^# rr-net-bench: 2 hosts x 2 rank(s) per host = 4 ranks, placement cyclic; rate 1gbit, delay none, MTU 1500' "$TMP/log" ||
  fail "no report header naming hosts, ranks per host, placement, rate, delay and MTU"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))["net"]; sys.exit(d["rank_host"] != [0, 1, 0, 1] or d["ranks_per_host"] != 2 or d["placement"] != "cyclic")' \
  "$TMP/out/ringreduce.json" || fail "ringreduce.json's \"net\" does not record rank_host [0, 1, 0, 1], 2 ranks per host, cyclic"

# The placement as the engine saw it (RR_DEBUG=INFO): "rank R -> rank P over
# lane[...]: ...". A peer on another host is reached over TCP on this rank's
# own host's veth (<id>h<host>), a peer on this host over shared memory.
id=$(sed -n 's/^# hosts: .*network namespaces \(rrn[0-9]*\)-h0\..*/\1/p' "$TMP/log")
[[ -n $id ]] || fail "no run id in the header"
for r in 0 1 2 3; do
  logf=$TMP/out/ringreduce.rank$r.log
  lines=$(grep -o "rank $r -> rank [0-9]* over .*" "$logf" 2>/dev/null)
  [[ -n $lines ]] || fail "rank $r: its log names no lane to a peer"
  while read -r _ _ _ _ p _ lane; do
    [[ -n $p ]] || continue
    if [[ $((r % 2)) -eq $((p % 2)) ]]; then
      [[ $lane == */memory* ]] || fail "rank $r -> rank $p (same host) is not over shared memory: $lane"
    else
      [[ $lane == *tcp/${id}h$((r % 2)).* ]] || fail "rank $r -> rank $p (other host) is not over TCP on host $((r % 2))'s veth: $lane"
    fi
  done <<<"$lines"
done
# Rank 0 says how many ranks share its host (its wait policy's reason).
grep -q '2 ranks on this host' "$TMP/out/ringreduce.rank0.log" 2>/dev/null || fail "rank 0 does not count 2 ranks on its host"
check_left "cyclic run" "$marker.cyclic"

# --- --delay ------------------------------------------------------------------
delay_ms=5
RR_NET_BENCH_PLACEMENT_TEST=$marker.delay timeout 60 bash "$SCRIPT" --bench "$BENCH" --backend ringreduce \
  -n 2 --delay ${delay_ms}ms -b 1K -e 1K --iters 1 --warmup 1 --timeout 30 --out "$TMP/delay" >"$TMP/delay.log" 2>&1
rc=$?
delay_note=""
if [[ $rc -eq 77 ]] && grep -q 'netem' "$TMP/delay.log"; then
  delay_note="; --delay refused (this kernel has no netem): $(tail -n 1 "$TMP/delay.log")"
elif [[ $rc -eq 0 ]]; then
  python3 - "$TMP/delay/ringreduce.json" "$delay_ms" <<'PY' || fail "--delay ${delay_ms}ms: the ping or the qdiscs do not show it"
import json, sys
d = json.load(open(sys.argv[1]))["net"]
floor = 2 * float(sys.argv[2])
qdiscs = " ".join(d["qdiscs"])
# netem in the qdiscs, or (a kernel without it) the delay lines on the hosts' ingress.
held = "netem" in qdiscs if d.get("delay_by") == "netem" else d.get("delay_by") == "rr-delay-line"
ok = d["ping_rtt_ms"] is not None and d["ping_rtt_ms"]["min"] >= 0.95 * floor and held and "tbf" in qdiscs
print(f"--delay: rtt {d['ping_rtt_ms']}, by {d.get('delay_by')}, qdiscs {d['qdiscs']}")
sys.exit(0 if ok else 1)
PY
  delay_note="; --delay ${delay_ms}ms: ping >= $((2 * delay_ms)) ms, $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["net"]["delay_by"])' "$TMP/delay/ringreduce.json") + tbf"
else
  fail "rr-net-bench --delay exited $rc"
fi
check_left "--delay run" "$marker.delay"

if [[ $failed -ne 0 ]]; then
  sed 's/^/  | /' "$TMP/log"
  sed 's/^/  delay | /' "$TMP/delay.log"
  exit 1
fi
echo "PASS: 2 hosts x 2 ranks, cyclic: ${backends[*]} correct, placed rank r on host r mod 2 (table, JSON, the engine's lanes), nothing left behind$delay_note"
