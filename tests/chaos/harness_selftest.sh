#!/usr/bin/env bash
# The chaos harness must be able to fail: each case runs chaos.py with a
# worker wrapped to misbehave in one way after the real chaos_rank finished,
# and expects a nonzero exit with the violation it causes named:
#   hang    rank 0 never exits                         -> HANG
#   shm     every rank leaves a file in /dev/shm       -> LEAK (/dev/shm)
#   orphan  rank 0 leaves a process in a new session   -> LEAK (processes)
#   unnamed rank 0 reports a nameless error            -> UNNAMED
#   slow    rank 0 reports a call longer than the bound -> LATE
#   needy   rank 0 reports finishing a step that needed the victim after
#           its strike                                  -> FINISHED
# and, as a control, the unwrapped worker on the same trials passes.
# usage: harness_selftest.sh chaos.py chaos_rank
set -u
CHAOS=${1:?usage: harness_selftest.sh chaos.py chaos_rank}
WORKER=$(realpath "${2:?usage: harness_selftest.sh chaos.py chaos_rank}")
TMP=$(mktemp -d "${TMPDIR:-/tmp}/chaos_selftest.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
failed=0

# A wrapper: runs the real worker (its output passes through), then
# misbehaves as $1 says. The trials below strike with kill at destroy, so the
# victim's peers normally finish.
wrapper() {
  local how=$1 path=$TMP/worker-$1
  cat >"$path" <<EOF
#!/usr/bin/env bash
# unnamed, slow, needy: rank 0's own outcome is replaced by a forged one.
if [[ $how == unnamed || $how == slow || $how == needy ]] && [[ \$RANK == 0 ]]; then
  "$WORKER" "\$@" >/dev/null
else
  "$WORKER" "\$@"
fi
rc=\$?
case $how in
  hang)    [[ \$RANK == 0 ]] && exec sleep 600 ;;
  shm)     : >/dev/shm/chaos-selftest-\$RANK-\$\$ ;;
  orphan)  if [[ \$RANK == 0 ]]; then setsid sleep 30 </dev/null >/dev/null 2>&1 & fi ;;
  unnamed) [[ \$RANK == 0 ]] && { echo 'CHAOS {"event":"outcome","rank":0,"result":"rrSystemError","phase":"p2p","call":"x","call_start":0,"t":0.1,"seconds":0.1,"error":"something broke","needed":[]}'; exit 1; } ;;
  slow)    [[ \$RANK == 0 ]] && { echo 'CHAOS {"event":"outcome","rank":0,"result":"rrTimeout","phase":"p2p","call":"x","call_start":0,"t":99,"seconds":99,"error":"timed out waiting for rank 1","needed":[]}'; exit 1; } ;;
  needy)   [[ \$RANK == 0 ]] && { echo 'CHAOS {"event":"outcome","rank":0,"result":"ok","phase":"done","call":"none","needed":[1000,1000,1000]}'; exit 0; } ;;
esac
exit \$rc
EOF
  chmod +x "$path"
  echo "$path"
}

# Trials of kill at destroy only, on 2-3 ranks, short timeout.
run() { /usr/bin/python3 "$CHAOS" --trials 2 --seed 5 --kinds kill --moments destroy --ranks 2-3 --timeout-ms 1500 --deadline-s 10 "$@"; }

# expect HOW CODE [ARGS...]: ARGS go to chaos.py after run's own (the last wins).
expect() {
  local how=$1 code=$2 out
  shift 2
  out=$(run --worker "$(wrapper "$how")" "$@" 2>&1)
  local rc=$?
  if [[ $rc -ne 0 ]] && grep -q "^    $code: " <<<"$out"; then
    echo "ok: a worker that does '$how' fails the harness with $code"
    grep -m1 "^    $code: " <<<"$out"
  else
    echo "FAIL: a worker that does '$how' gave exit $rc, expected nonzero with $code:"
    sed 's/^/  | /' <<<"$out" | tail -40
    failed=1
  fi
}

out=$(run --worker "$WORKER" 2>&1) || { echo "FAIL: the control run failed:"; sed 's/^/  | /' <<<"$out"; failed=1; }
[[ $failed -eq 0 ]] && echo "ok: the real worker passes the same trials"
# The hung rank is only found at the deadline: a short one (the real
# worker's trials end in about a second) instead of waiting out 10 s twice.
expect hang HANG --deadline-s 4
expect shm LEAK
expect orphan LEAK
expect unnamed UNNAMED
expect slow LATE
expect needy FINISHED
# The orphans were killed by the harness; nothing of this test may remain.
rm -f /dev/shm/chaos-selftest-* 2>/dev/null
exit $failed
