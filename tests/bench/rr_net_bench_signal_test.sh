#!/usr/bin/env bash
# bench/net/rr-net-bench stopped by SIGINT, SIGTERM and SIGHUP, each at two
# moments: while it builds its network (some hosts' namespaces exist, others
# not yet) and while its ranks run. Every signal is sent the way timeout(1)
# sends it, to the script and then to its whole process group, and then to
# the group again every 50 ms until the script is gone (Ctrl-C pressed over
# and over), so that it also arrives while the teardown runs. After each
# stop: the script died of that signal (status 128 + its number), and nothing
# of its run is left: no namespace, no link in this namespace, no process it
# started, no scratch directory. A run that does not end within 30 s of the
# signal fails. Skips (77) where network namespaces are not allowed. No
# timing is asserted.
# Usage: rr_net_bench_signal_test.sh rr-net-bench rr-bench
set -u
SCRIPT=${1:?usage: rr_net_bench_signal_test.sh rr-net-bench rr-bench}
BENCH=${2:?}
source "$(dirname "${BASH_SOURCE[0]}")/../common/require_netns.sh"

TMP=$(mktemp -d)
failed=0
fail() { echo "FAIL: $1"; failed=$((failed + 1)); }

# The processes of a run: each inherits the run's marker in its environment
# (zombies show an empty environment and are not counted).
marked_pids() {
  grep -lsx --null-data "RR_NET_BENCH_SIGNAL_TEST=$1" /proc/[0-9]*/environ | sed 's|/proc/\([0-9]*\)/environ|\1|'
}
# What a run leaves, one line per thing: namespaces, links, processes, files.
leftovers() { # $1 script pid, $2 marker, $3 its TMPDIR
  ip netns list | awk '{print $1}' | grep "^rrn$1-" | sed 's/^/namespace /'
  ip -o link show | awk -F': ' '{print $2}' | grep "^rrn$1" | sed 's/^/link /'
  marked_pids "$2" | sed 's/^/process /'
  find "$3" -mindepth 1 -maxdepth 1 | sed 's/^/file /'
}
# Whatever a failed run left is removed, so that no run leaves anything.
sweep() { # $1 script pid, $2 marker
  local pid ns
  for pid in $(marked_pids "$2"); do kill -KILL "$pid" 2>/dev/null; done
  for ns in $(ip netns list | awk '{print $1}' | grep "^rrn$1-"); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
}
# Polls up to $1 seconds for the command in $2... to succeed.
poll() {
  local limit=$1 t
  shift
  for ((t = 0; t < limit * 20; t++)); do
    "$@" && return 0
    sleep 0.05
  done
  return 1
}
trap 'rm -rf "$TMP"' EXIT

netns_exists() { ip netns list | awk '{print $1}' | grep -qx "$1"; }
ranks_running() { # $1 marker, $2 hosts: every rank is an rr-bench process
  local n=0 pid
  for pid in $(marked_pids "$1"); do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == rr-bench ]] && n=$((n + 1))
  done
  [[ $n -ge $2 ]]
}

hosts=4
runs=0
for sig in INT TERM HUP; do
  signo=$(kill -l "$sig")
  for moment in setup run; do
    runs=$((runs + 1))
    failed_before=$failed
    # Job control: the run gets its own process group. And the three signals
    # at their defaults whatever this test inherited: a non-interactive shell
    # starts background commands with SIGINT ignored, nohup (or a CI runner)
    # ignores SIGHUP, and bash cannot trap a signal ignored when it started.
    set -m
    dir=$TMP/$sig.$moment
    mkdir -p "$dir/tmp"
    marker=$$.$sig.$moment
    # Sizes and iterations enough to run far longer than the test waits.
    RR_NET_BENCH_SIGNAL_TEST=$marker TMPDIR=$dir/tmp env --default-signal=INT,TERM,HUP bash "$SCRIPT" --bench "$BENCH" --backend ringreduce \
      -n "$hosts" -b 64M -e 64M --iters 1000 --warmup 1 --timeout 60 --out "$dir/out" >"$dir/log" 2>&1 </dev/null &
    pid=$!
    set +m # its own group is made; no "Terminated" notices from the shell
    case $moment in
      # Host 1's namespace exists, host 3's not yet (or only just).
      setup) poll 20 netns_exists "rrn$pid-h1" || fail "$sig at $moment: host 1's namespace never appeared" ;;
      run) poll 30 ranks_running "$marker" "$hosts" || fail "$sig at $moment: the $hosts ranks never ran" ;;
    esac
    kill -s "$sig" "$pid" 2>/dev/null
    kill -s "$sig" -- -"$pid" 2>/dev/null
    # And again to the group every 50 ms until it is gone, as a user pressing
    # Ctrl-C over and over would: the teardown must not be cut short.
    again() { kill -s "$sig" -- -"$pid" 2>/dev/null; ! kill -0 "$pid" 2>/dev/null; }
    if poll 30 again; then
      wait "$pid" 2>/dev/null
      rc=$?
      [[ $rc -eq $((128 + signo)) ]] || fail "$sig at $moment: exit status $rc, not $((128 + signo)) (SIG$sig)"
    else
      fail "$sig at $moment: still running 30 s after the signal"
      kill -KILL -- -"$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
    fi
    left=$(leftovers "$pid" "$marker" "$dir/tmp")
    if [[ -n $left ]]; then
      fail "$sig at $moment left: $(echo "$left" | tr '\n' ' ')"
      sweep "$pid" "$marker"
    fi
    if [[ $failed -ne $failed_before ]]; then
      sed 's/^/  | /' "$dir/log"
    else
      echo "ok: SIG$sig during $moment: died of it, nothing left"
    fi
  done
done
[[ $failed -eq 0 ]] || { echo "FAIL: $failed of $runs runs"; exit 1; }
echo "PASS: SIGINT, SIGTERM and SIGHUP, during setup and during a run ($runs runs): each ended the script with its status and left nothing"
