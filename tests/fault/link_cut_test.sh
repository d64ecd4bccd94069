#!/usr/bin/env bash
# A network link cut in the middle of a large allreduce. Three namespaced
# hosts on a bridge (as bench/net/rr-net-bench builds them) each run one rank
# of link_cut_rank, which allreduces 64 MiB over UCX's TCP transport in a
# loop; once every rank has finished one, host 1's veth goes down. Proves:
#   - every rank, the cut one included (it runs on, it just reaches no one),
#     fails within RR_TIMEOUT_MS + a margin, from the start of its failing
#     call and from the cut alike;
#   - the errors of hosts 0 and 2 name rank 1, the peer they lost;
#   - nothing is left: no namespace, veth or bridge of this run, no rank.
# Skips (77) without root, iproute2 or permission to add a namespace.
# Usage: link_cut_test.sh link_cut_rank
set -u
RANK_BIN=${1:?usage: link_cut_test.sh link_cut_rank}
RANK_BIN=$(realpath "$RANK_BIN")
source "$(dirname "${BASH_SOURCE[0]}")/../common/require_netns.sh"

hosts=3
cut_host=1
timeout_ms=4000
margin_s=6                            # UCX's error path, the abort, a loaded machine
limit_s=$((timeout_ms / 1000 + margin_s))
id=rrlc$$                             # every name this run creates starts with it
subnet=10.78.0
sw=$id-sw
port=29500                            # host 0's own namespace: no other run can hold it
TMP=$(mktemp -d "${TMPDIR:-/tmp}/link_cut.XXXXXX")
pids=()

ns_of() { echo "$id-h$1"; }
addr_of() { echo "$subnet.$(($1 + 1))"; }
dev_of() { echo "${id}h$1"; }

# Idempotent: the trap calls it on any exit, the end of the test once before
# checking that nothing is left. Deleting a namespace deletes its veth end,
# which takes the peer end with it; the bridge lives in $sw.
cleanup() {
  local pid ns
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
  pids=()
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$id-"); do
    # A process left inside would keep the namespace's links alive.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
}
trap 'cleanup; rm -rf "$TMP"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

failed=0
fail() { echo "FAIL: $1"; failed=1; }
now() { date +%s.%N; }
# Floating point without bc: a - b, and a <= b as an exit status.
minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }
at_most() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
# Ranks carry LINK_CUT_RUN=$id in their environment, so "no rank of this run
# is left" can be asked of /proc without matching a parallel run's ranks.
run_ranks_alive() { grep -lsz "^LINK_CUT_RUN=$id\$" /proc/[0-9]*/environ | wc -l; }

# --- the network: 3 hosts on a bridge, no shaping -----------------------------
ip netns add "$sw" || exit 1
ip -n "$sw" link add "${id}br" type bridge || exit 1
ip -n "$sw" link set "${id}br" up || exit 1
for ((i = 0; i < hosts; i++)); do
  ns=$(ns_of $i)
  ip netns add "$ns" || exit 1
  ip -n "$ns" link set lo up || exit 1
  ip link add "$(dev_of $i)" netns "$ns" type veth peer name "${id}s$i" netns "$sw" || exit 1
  ip -n "$sw" link set "${id}s$i" master "${id}br" up || exit 1
  ip -n "$ns" addr add "$(addr_of $i)/24" dev "$(dev_of $i)" || exit 1
  ip -n "$ns" link set "$(dev_of $i)" up || exit 1
done
# The bridge forwards once its ports are up (no STP: at once). Asked of the
# bridge, not of ping, which is not always installed.
for ((t = 0; t < 50; t++)); do
  [[ $(bridge -n "$sw" link show 2>/dev/null | grep -c 'state forwarding') -eq $hosts ]] && break
  sleep 0.1
done

# --- the ranks -----------------------------------------------------------------
# UCX_TLS=tcp and UCX_NET_DEVICES keep UCX on the veth (same kernel: it would
# otherwise pick shared memory, which a link cut does not touch), and
# RR_SAME_HOST=ucx keeps ringreduce's own same-host path (the slot rings and
# the board, which these namespaces could share for the same reason) off.
# RR_AUTH_TOKEN: the secret every rank of a non-loopback rendezvous shares.
auth_token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
run_seconds=60                        # far past the cut: the ranks end by failing
for ((i = 0; i < hosts; i++)); do
  ip netns exec "$(ns_of $i)" env LINK_CUT_RUN="$id" \
    MASTER_ADDR="$(addr_of 0)" MASTER_PORT="$port" RANK=$i WORLD_SIZE=$hosts \
    RR_TIMEOUT_MS=$timeout_ms RR_AUTH_TOKEN="$auth_token" \
    RR_BOOTSTRAP_HOST="$(addr_of $i)" RR_SOCKET_IFNAME="$(dev_of $i)" \
    UCX_TLS=tcp UCX_NET_DEVICES="$(dev_of $i)" RR_SAME_HOST=ucx \
    timeout -k 5 $((run_seconds + 20)) "$RANK_BIN" "$run_seconds" >"$TMP/rank$i.log" 2>&1 </dev/null &
  pids+=($!)
done

# Every rank has finished one allreduce: the next is under way on every link.
# A rank that exits first (init failed) ends the wait.
ready=0
all_running=1
for ((t = 0; t < 300 && ready < hosts && all_running; t++)); do
  ready=$(cat "$TMP"/rank*.log 2>/dev/null | grep -c ': ready$')
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null || all_running=0; done
  [[ $ready -lt $hosts && $all_running -eq 1 ]] && sleep 0.1
done
if [[ $ready -lt $hosts ]]; then
  fail "only $ready of $hosts ranks were ready, after $((t / 10)) s"
else
  sleep 0.5                           # into the middle of a later allreduce
  cut_at=$(now)
  ip -n "$(ns_of $cut_host)" link set "$(dev_of $cut_host)" down || fail "could not cut host $cut_host's link"
  echo "cut: $(dev_of $cut_host) (host $cut_host, $(addr_of $cut_host)) down"

  # Wait for every rank to exit, each for at most limit_s after the cut.
  declare -A exit_rc=() exit_after=()
  while [[ ${#exit_rc[@]} -lt $hosts ]]; do
    elapsed=$(minus "$(now)" "$cut_at")
    for ((i = 0; i < hosts; i++)); do
      [[ -n ${exit_rc[$i]:-} ]] && continue
      if ! kill -0 "${pids[$i]}" 2>/dev/null; then
        wait "${pids[$i]}"
        exit_rc[$i]=$?
        exit_after[$i]=$elapsed
      fi
    done
    at_most "$elapsed" "$limit_s" || break
    sleep 0.05
  done
fi

# --- what each rank said --------------------------------------------------------
for ((i = 0; i < hosts; i++)); do
  line=$(grep -m 1 -E '^rank [0-9?]+: (FAILED|OK|init)' "$TMP/rank$i.log")
  echo "host $i: ${line:-<no result line>}"
  [[ $ready -lt $hosts ]] && continue
  rc=${exit_rc[$i]:-}
  if [[ -z $rc ]]; then
    fail "host $i: rank still running ${limit_s} s after the cut"
    continue
  fi
  echo "host $i:   exited $rc, ${exit_after[$i]} s after the cut"
  [[ $rc -eq 1 ]] || fail "host $i: exit status $rc, not 1 (FAILED)"
  # rrGetErrorString's text has spaces: the first " after S s: " ends it.
  if [[ ! $line =~ ^rank\ $i:\ FAILED\ result=[^:]+\ after\ ([0-9]+\.[0-9]+)\ s:\ (.*)$ ]]; then
    fail "host $i: no 'rank $i: FAILED result=... after S s: ...' line"
    continue
  fi
  call_s=${BASH_REMATCH[1]}
  error=${BASH_REMATCH[2]}
  at_most "$call_s" "$limit_s" || fail "host $i: the failing call took $call_s s, over $limit_s s"
  if [[ $i -ne $cut_host && ! $error =~ rank\ $cut_host([^0-9]|$) ]]; then
    fail "host $i: its error does not name rank $cut_host"
  fi
done

# --- nothing left ------------------------------------------------------------------
cleanup
left_ns=$(ip netns list | awk '{print $1}' | grep "^$id-")
[[ -z $left_ns ]] || fail "namespaces left behind: $(echo $left_ns)"
left_links=$(ip -o link show | awk -F': ' '{print $2}' | grep "^$id")
[[ -z $left_links ]] || fail "links left behind: $(echo $left_links)"
left_ranks=$(run_ranks_alive)
[[ $left_ranks -eq 0 ]] || fail "$left_ranks link_cut_rank process(es) of this run left behind"

if [[ $failed -ne 0 ]]; then
  for ((i = 0; i < hosts; i++)); do sed "s/^/  host $i | /" "$TMP/rank$i.log"; done
  exit 1
fi
echo "PASS: link of host $cut_host cut; every rank failed within $limit_s s, hosts 0 and 2 naming rank $cut_host; nothing left behind"
