#!/usr/bin/env bash
# SIGUSR1 to rr-run reaches every rank, and a ringreduce rank then logs each
# communicator's state and what its running operation waits for; rrCommDump
# logs the same on request. Rank 1 of dump_rank arrives 3 s late, so rank 0 is
# caught in the allreduce's argument check, waiting for rank 1.
# Usage: dump_test.sh rr-run dump_rank
set -u
RR=${1:?usage: dump_test.sh rr-run dump_rank}
RANK_BIN=${2:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

timeout 30 "$RR" -n 2 "$RANK_BIN" >"$TMP/out" 2>"$TMP/err" </dev/null &
launcher=$!
for _ in $(seq 100); do
  [[ $(grep -c ready "$TMP/out") -eq 2 ]] && break
  sleep 0.05
done
sleep 0.5
# `timeout` runs rr-run as its child: signal rr-run itself.
kill -USR1 "$(pgrep -P "$launcher" -x rr-run)"
wait "$launcher"
rc=$?
echo "--- stdout"; cat "$TMP/out"
echo "--- stderr"; cat "$TMP/err"
failed=0
check() { grep -q -- "$2" "$TMP/$1" || { echo "FAIL: $1 lacks: $2"; failed=1; }; }
check_re() { grep -Eq -- "$2" "$TMP/$1" || { echo "FAIL: $1 lacks: $2"; failed=1; }; }
[[ $rc -eq 0 ]] || { echo "FAIL: rr-run exited $rc"; failed=1; }
check err "rr-run: got SIGUSR1; forwarding it to all ranks"
# The running allreduce counts as issued: it took its sequence number when the communicator issued it.
check err "dump: rank 0 of 2: 1 collectives issued, one running"
check err "dump: rank 1 of 2: 0 collectives issued, none running"
# The argument check waits on the same-host board (or, across hosts, for the header through UCX).
check_re err "waited (for rank 1's part of the call on the same-host shared-memory board|to receive 32 bytes from rank 1) in progress"
check err "dump: rank 0 of 2: 1 collectives issued, none running, 0 queued; healthy"
[[ $failed -eq 0 ]] && echo "PASS: SIGUSR1 dumped both ranks, rank 0 naming the peer it waited for; rrCommDump after"
exit $failed
