#!/usr/bin/env bash
# End-to-end checks of rr-run, the local launcher: the env:// variables each
# rank sees, output tagging, failure propagation, and every exit status it
# promises. Usage: rr_run_test.sh path/to/rr-run
#
# Every rr-run call runs under `timeout 20`, so a launcher that fails to take
# its ranks down makes a test fail instead of hanging the suite.
#
# The rank scripts are single-quoted on purpose: $RANK and friends must expand
# in each rank's shell, not here.
# shellcheck disable=SC2016

set -u

RR=${1:?usage: rr_run_test.sh path/to/rr-run}
if [[ ! -x $RR ]]; then
  echo "rr_run_test: '$RR' is not an executable" >&2
  exit 1
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

passed=0
failed=0
# A tag unique to this run, so survivor checks never see another run's processes.
MARK="rrtest$$x$RANDOM"
sleep_serial=0

pass() {
  passed=$((passed + 1))
  echo "PASS: $1"
}

fail() {
  failed=$((failed + 1))
  echo "FAIL: $1"
  echo "  rr-run exit status: $rc (after ${elapsed_ms} ms)"
  echo "  --- stdout"; sed 's/^/  | /' "$TMP/out"
  echo "  --- stderr"; sed 's/^/  | /' "$TMP/err"
}

# Runs rr-run with the given arguments; sets rc and elapsed_ms, and leaves its
# output in $TMP/out and $TMP/err. stdin is /dev/null so rank 0 never waits on
# whatever stdin the test harness has.
run_rr() {
  local start
  start=$(date +%s%N)
  timeout 20 "$RR" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
  rc=$?
  elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
}

# Sets nap to a sleep duration unique to this test (GNU sleep takes fractions),
# so pgrep -f finds the sleeps it started even after the shells around them
# died. It sets a variable rather than echoing: a $(...) subshell would lose
# the counter.
next_nap() {
  sleep_serial=$((sleep_serial + 1))
  nap="30.$$0$sleep_serial"
}

# True when no process whose command line matches $1 is left; waits up to 2 s
# for the kernel to finish tearing killed processes down.
none_survive() {
  local _
  for _ in $(seq 20); do
    pgrep -f "$1" >/dev/null || return 0
    sleep 0.1
  done
  echo "  survivors:"; pgrep -af "$1" | sed 's/^/  | /'
  return 1
}

# --- environment and output ------------------------------------------------

run_rr -n 3 sh -c 'echo hello $RANK of $WORLD_SIZE'
expected=$'[0] hello 0 of 3\n[1] hello 1 of 3\n[2] hello 2 of 3'
if [[ $rc -eq 0 && "$(sort "$TMP/out")" == "$expected" && ! -s $TMP/err ]]; then
  pass "three ranks print exactly their three tagged lines"
else
  fail "three ranks print exactly their three tagged lines"
fi

run_rr -n 3 --no-tag-output sh -c 'echo "$MASTER_ADDR $MASTER_PORT $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE"'
ports=$(awk '{print $2}' "$TMP/out" | sort -u)
if [[ $rc -eq 0 && $(wc -l <"$TMP/out") -eq 3 && $ports =~ ^[0-9]+$ && $ports -ge 1 && $ports -le 65535 ]]; then
  pass "MASTER_PORT is numeric and the same in every rank"
else
  fail "MASTER_PORT is numeric and the same in every rank"
fi
# Drawn from below the kernel's ephemeral range, where no bind(0) or outgoing
# connection can take it before rank 0 listens.
ephemeral_low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range)
if [[ $ports =~ ^[0-9]+$ && $ports -ge 1024 && $ports -lt $ephemeral_low && $ports -lt 29500 ]]; then
  pass "MASTER_PORT is drawn from below the ephemeral range ($ports < $ephemeral_low)"
else
  fail "MASTER_PORT is drawn from below the ephemeral range (got $ports, range starts at $ephemeral_low)"
fi
if [[ $rc -eq 0 ]] && awk '$1 != "127.0.0.1" || $3 != $4 || $5 != 3 || $6 != 3 { bad = 1 } END { exit bad }' "$TMP/out" &&
   [[ "$(awk '{print $3}' "$TMP/out" | sort | tr '\n' ' ')" == "0 1 2 " ]]; then
  pass "MASTER_ADDR, RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE are set per rank"
else
  fail "MASTER_ADDR, RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE are set per rank"
fi

run_rr -n 2 --master-port 12345 --master-addr localhost sh -c 'echo $MASTER_ADDR:$MASTER_PORT'
if [[ $rc -eq 0 && "$(sort -u "$TMP/out")" == $'[0] localhost:12345\n[1] localhost:12345' ]]; then
  pass "--master-addr and --master-port are passed on unchanged"
else
  fail "--master-addr and --master-port are passed on unchanged"
fi

run_rr -n 2 --timeout 60 -- sh -c 'echo "after -- $RANK"'
if [[ $rc -eq 0 && "$(sort "$TMP/out")" == $'[0] after -- 0\n[1] after -- 1' ]]; then
  pass "-- ends rr-run's flags and the program follows"
else
  fail "-- ends rr-run's flags and the program follows"
fi

run_rr -n2 -np 3 --no-tag-output -xRR_TEST_C=gamma sh -c 'echo "$RR_TEST_C"'
if [[ $rc -eq 0 && "$(cat "$TMP/out")" == $'gamma\ngamma\ngamma' ]]; then
  pass "mpirun's spellings: -n2, -np 3 (the last -n wins), -xVAR=VALUE"
else
  fail "mpirun's spellings: -n2, -np 3 (the last -n wins), -xVAR=VALUE"
fi

run_rr -n 2 -x RR_TEST_A=alpha -x RR_TEST_B='two words' sh -c 'echo "$RR_TEST_A|$RR_TEST_B"'
if [[ $rc -eq 0 && "$(sort "$TMP/out")" == $'[0] alpha|two words\n[1] alpha|two words' ]]; then
  pass "-x VAR=VALUE reaches every rank"
else
  fail "-x VAR=VALUE reaches every rank"
fi

# Each job gets a fresh random RR_AUTH_TOKEN, the same in every rank; one the
# user set (in the environment or with -x) is passed on instead.
unset RR_AUTH_TOKEN
run_rr -n 3 --no-tag-output sh -c 'echo "$RR_AUTH_TOKEN"'
first_token=$(sort -u "$TMP/out")
run_rr -n 2 --no-tag-output sh -c 'echo "$RR_AUTH_TOKEN"'
second_token=$(sort -u "$TMP/out")
if [[ $rc -eq 0 && $first_token =~ ^[0-9a-f]{64}$ && $second_token =~ ^[0-9a-f]{64}$ &&
      $first_token != "$second_token" ]]; then
  pass "every rank gets the job's random RR_AUTH_TOKEN, a new one per job"
else
  fail "every rank gets the job's random RR_AUTH_TOKEN, a new one per job"
fi
RR_AUTH_TOKEN=mine run_rr -n 2 --no-tag-output sh -c 'echo "$RR_AUTH_TOKEN"'
from_env=$(sort -u "$TMP/out")
run_rr -n 2 --no-tag-output -x RR_AUTH_TOKEN=given sh -c 'echo "$RR_AUTH_TOKEN"'
if [[ $rc -eq 0 && $from_env == mine && "$(sort -u "$TMP/out")" == given ]]; then
  pass "a user's RR_AUTH_TOKEN is passed on unchanged"
else
  fail "a user's RR_AUTH_TOKEN is passed on unchanged"
fi

run_rr -n 2 sh -c 'echo out $RANK; echo err $RANK >&2'
if [[ $rc -eq 0 && "$(sort "$TMP/out")" == $'[0] out 0\n[1] out 1' &&
      "$(sort "$TMP/err")" == $'[0] err 0\n[1] err 1' ]]; then
  pass "stderr lines go to stderr and stdout lines to stdout, both tagged"
else
  fail "stderr lines go to stderr and stdout lines to stdout, both tagged"
fi

run_rr -n 2 sh -c 'printf "first "; sleep 0.2; printf "second\nno newline $RANK"'
if [[ $rc -eq 0 && "$(sort "$TMP/out")" == $'[0] first second\n[0] no newline 0\n[1] first second\n[1] no newline 1' ]]; then
  pass "partial lines are joined, and a trailing partial line is flushed at exit"
else
  fail "partial lines are joined, and a trailing partial line is flushed at exit"
fi

run_rr -n 2 --no-tag-output sh -c 'echo plain'
if [[ $rc -eq 0 && "$(cat "$TMP/out")" == $'plain\nplain' ]]; then
  pass "--no-tag-output prints lines without the rank tag"
else
  fail "--no-tag-output prints lines without the rank tag"
fi

# --- failures --------------------------------------------------------------

next_nap
run_rr -n 3 sh -c '[ $RANK = 1 ] && exit 3; sleep '"$nap" "$MARK-exit3"
if [[ $rc -eq 3 && $elapsed_ms -lt 15000 ]] &&
   grep -Eq '^rr-run: rank 1 \(pid [0-9]+\) exited with status 3$' "$TMP/err"; then
  pass "a rank exiting 3 makes rr-run exit 3 at once and say which rank"
else
  fail "a rank exiting 3 makes rr-run exit 3 at once and say which rank"
fi
if none_survive "$MARK-exit3|sleep $nap"; then
  pass "no rank or grandchild survives a failed rank"
else
  fail "no rank or grandchild survives a failed rank"
fi

next_nap
run_rr -n 3 sh -c '[ $RANK = 1 ] && kill -9 $$; sleep '"$nap" "$MARK-kill9"
if [[ $rc -eq 137 && $elapsed_ms -lt 15000 ]] &&
   grep -Eq '^rr-run: rank 1 \(pid [0-9]+\) was killed by signal 9 \(Killed\)$' "$TMP/err" &&
   none_survive "$MARK-kill9|sleep $nap"; then
  pass "a rank killed by signal 9 makes rr-run exit 137"
else
  fail "a rank killed by signal 9 makes rr-run exit 137"
fi

# --enable-recovery: rank 1 is killed, the others are not stopped, finish
# (after a second) and rr-run exits 0, having reported the loss.
run_rr --enable-recovery -n 3 sh -c '[ $RANK = 1 ] && kill -9 $$; sleep 1; echo done $RANK' "$MARK-recover"
if [[ $rc -eq 0 && "$(sort "$TMP/out")" == $'[0] done 0\n[2] done 2' ]] &&
   grep -Eq '^rr-run: rank 1 \(pid [0-9]+\) was killed by signal 9 \(Killed\); the others go on \(--enable-recovery\)$' "$TMP/err"; then
  pass "--enable-recovery: a killed rank is reported and the others finish"
else
  fail "--enable-recovery: a killed rank is reported and the others finish"
fi
# ... and when every rank fails, the first failure's status.
run_rr --enable-recovery -n 2 sh -c 'exit $((RANK + 3))'
if [[ ($rc -eq 3 || $rc -eq 4) ]] && [[ $(grep -c 'the others go on' "$TMP/err") -eq 2 ]]; then
  pass "--enable-recovery: with no rank left to finish, the first failure's status"
else
  fail "--enable-recovery: with no rank left to finish, the first failure's status"
fi

# Rank 1 ignores SIGTERM (so does its sleep, which inherits the disposition):
# only the SIGKILL after the grace period ends it.
next_nap
run_rr -n 2 --grace-ms 300 sh -c 'trap "" TERM; if [ $RANK = 0 ]; then sleep 0.5; exit 4; fi; sleep '"$nap" "$MARK-grace"
if [[ $rc -eq 4 && $elapsed_ms -lt 15000 ]] && grep -q 'sending SIGKILL' "$TMP/err" &&
   none_survive "$MARK-grace|sleep $nap"; then
  pass "ranks that ignore SIGTERM get SIGKILL after --grace-ms"
else
  fail "ranks that ignore SIGTERM get SIGKILL after --grace-ms"
fi

next_nap
run_rr -n 2 --timeout 1 sh -c 'sleep '"$nap" "$MARK-timeout"
if [[ $rc -eq 124 && $elapsed_ms -lt 15000 ]] && grep -q 'timed out' "$TMP/err" &&
   none_survive "$MARK-timeout|sleep $nap"; then
  pass "--timeout 1 with sleeping ranks exits 124"
else
  fail "--timeout 1 with sleeping ranks exits 124"
fi

# A successful job must not leave its background processes behind either.
next_nap
run_rr -n 2 sh -c 'sleep '"$nap"' </dev/null >/dev/null 2>&1 & echo started' "$MARK-stray"
if [[ $rc -eq 0 && $elapsed_ms -lt 15000 ]] && none_survive "sleep $nap"; then
  pass "grandchildren left behind by successful ranks are stopped"
else
  fail "grandchildren left behind by successful ranks are stopped"
fi

# SIGTERM to rr-run itself is forwarded, and rr-run exits 128+15.
next_nap
start=$(date +%s%N)
timeout 20 "$RR" -n 2 sh -c 'sleep '"$nap" "$MARK-forward" >"$TMP/out" 2>"$TMP/err" </dev/null &
launcher=$!
# Count the sleeps only (anchored): timeout's and rr-run's own command lines
# hold "sleep $nap" too, and counting them let the signal reach rr-run before
# it had set up its handler (a failure seen in CI under ThreadSanitizer).
for _ in $(seq 50); do  # wait until both ranks sleep
  [[ $(pgrep -fc "^sleep $nap") -ge 2 ]] && break
  sleep 0.1
done
# $launcher is timeout(1); signal the rr-run it started.
kill -TERM "$(pgrep -P "$launcher" -f "$MARK-forward" | head -1)"
wait "$launcher"
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
if [[ $rc -eq 143 && $elapsed_ms -lt 15000 ]] && grep -q 'forwarding' "$TMP/err" &&
   none_survive "$MARK-forward|sleep $nap"; then
  pass "SIGTERM to rr-run reaches the ranks and rr-run exits 143"
else
  fail "SIGTERM to rr-run reaches the ranks and rr-run exits 143"
fi

# --- where the ranks run -----------------------------------------------------

# The CPUs this test may use, as rr-run sees them (its own affinity).
mapfile -t cpus < <(python3 -c 'import os; print("\n".join(str(c) for c in sorted(os.sched_getaffinity(0))))')
ncpus=${#cpus[@]}
allowed=$(grep Cpus_allowed_list /proc/self/status | awk '{print $2}')
affinity='echo "$RANK $(grep Cpus_allowed_list /proc/self/status | awk "{print \$2}")"'

# --bind-to core: rank r on the (r mod CPUs)-th CPU alone, with more ranks than CPUs too.
n=$((ncpus + 1))
run_rr -n "$n" --bind-to core --no-tag-output sh -c "$affinity"
expected=""
for ((r = 0; r < n; r++)); do expected+="$r ${cpus[$((r % ncpus))]}"$'\n'; done
if [[ $rc -eq 0 && "$(sort -n "$TMP/out")"$'\n' == "$expected" ]]; then
  pass "--bind-to core: $n ranks on $ncpus CPUs, one each, round robin"
else
  fail "--bind-to core: $n ranks on $ncpus CPUs, one each, round robin (expected: $(echo "$expected" | tr '\n' ';'))"
fi

# The default binds nothing: every rank may run on rr-run's CPUs.
run_rr -n "$n" --no-tag-output sh -c "$affinity"
if [[ $rc -eq 0 && $(wc -l <"$TMP/out") -eq $n ]] && awk -v all="$allowed" '$2 != all { bad = 1 } END { exit bad }' "$TMP/out"; then
  pass "by default no rank is bound: each keeps rr-run's CPUs ($allowed)"
else
  fail "by default no rank is bound: each keeps rr-run's CPUs ($allowed)"
fi

# rr-run's own affinity is what it shares out: under taskset, one CPU for all.
if command -v taskset >/dev/null; then
  start=$(date +%s%N)
  timeout 20 taskset -c "${cpus[-1]}" "$RR" -n 2 --bind-to core --no-tag-output sh -c "$affinity" >"$TMP/out" 2>"$TMP/err" </dev/null
  rc=$?
  elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  if [[ $rc -eq 0 && "$(sort -n "$TMP/out")" == "0 ${cpus[-1]}"$'\n'"1 ${cpus[-1]}" ]]; then
    pass "under taskset -c ${cpus[-1]}, --bind-to core binds both ranks to it"
  else
    fail "under taskset -c ${cpus[-1]}, --bind-to core binds both ranks to it"
  fi
fi

# --- usage and exec errors -------------------------------------------------

usage_cases=(
  ""                       # nothing at all
  "sh -c true"             # missing -n
  "-n 0 true"
  "-n -1 true"
  "-n abc true"
  "-n 2"                   # no program
  "-n 2 --"                # no program after --
  "-n 2 --bogus true"      # unknown option
  "--timeout -1 -n 2 true"
  "-x RANK=7 -n 2 true"    # rr-run owns RANK
  "--bind-to auto -n 2 true"
)
for args in "${usage_cases[@]}"; do
  # Word splitting of $args is the point here.
  # shellcheck disable=SC2086
  run_rr $args
  if [[ $rc -eq 2 ]] && grep -q '^usage: rr-run' "$TMP/err" && [[ ! -s $TMP/out ]]; then
    pass "bad usage '$args' exits 2 with the usage text"
  else
    fail "bad usage '$args' exits 2 with the usage text"
  fi
done

run_rr --help
if [[ $rc -eq 0 ]] && grep -q '^usage: rr-run' "$TMP/out"; then
  pass "--help prints the usage text and exits 0"
else
  fail "--help prints the usage text and exits 0"
fi

missing="rr-run-test-no-such-program-$MARK"
run_rr -n 2 "$missing" arg
if [[ $rc -eq 127 && "$(cat "$TMP/err")" == "rr-run: cannot execute '$missing': No such file or directory" ]]; then
  pass "a missing program exits 127 with 'cannot execute'"
else
  fail "a missing program exits 127 with 'cannot execute'"
fi

run_rr -n 2 /nonexistent/dir/prog
if [[ $rc -eq 127 ]] && grep -q "cannot execute '/nonexistent/dir/prog': No such file or directory" "$TMP/err"; then
  pass "a missing program given by path exits 127"
else
  fail "a missing program given by path exits 127"
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
