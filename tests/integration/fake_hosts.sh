#!/usr/bin/env bash
# Runs an env:// program as ranks spread over fake hosts: each host is a UTS
# namespace with its own hostname (rrfakehost<h>), so ringreduce and UCX see
# ranks of different hosts as different machines (TCP between them, shared
# memory within one), on this machine's loopback.
#
#   fake_hosts.sh HOSTS RANKS_PER_HOST block|cyclic PROGRAM [ARGS...]
#
# block: ranks 0..K-1 on host 0, K..2K-1 on host 1, ...; cyclic: rank i on
# host i mod HOSTS (Slurm's cyclic distribution). Each rank's output is
# prefixed "[rank]". Exits 77 (meson's skip) where UTS namespaces cannot be
# made; otherwise with the first failing rank's status, after stopping the
# rest. Leaves no process behind.
set -uo pipefail
hosts=${1:?hosts}; per_host=${2:?ranks per host}; placement=${3:?block or cyclic}; shift 3
[[ $placement == block || $placement == cyclic ]] || { echo "placement must be block or cyclic" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "SKIP: UTS namespaces need root"; exit 77; }
unshare --uts true 2>/dev/null || { echo "SKIP: unshare --uts is not allowed here"; exit 77; }

n=$((hosts * per_host))
# One secret for the job, as rr-run gives every job and as ranks on real
# hosts need (also what names the job's folder of shared checks,
# tests/integration/shared_check.hpp).
if [[ -z ${RR_AUTH_TOKEN:-} ]]; then
  RR_AUTH_TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
  export RR_AUTH_TOKEN
fi
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pids=()
cleanup() { for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

for ((r = 0; r < n; ++r)); do
  if [[ $placement == block ]]; then host=$((r / per_host)); else host=$((r % hosts)); fi
  local_rank=0
  for ((q = 0; q < r; ++q)); do
    if [[ $placement == block ]]; then qh=$((q / per_host)); else qh=$((q % hosts)); fi
    [[ $qh -eq $host ]] && local_rank=$((local_rank + 1))
  done
  echo "fake_hosts: rank $r on rrfakehost$host (local rank $local_rank)"
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$r WORLD_SIZE=$n LOCAL_RANK=$local_rank \
    LOCAL_WORLD_SIZE=$per_host unshare --uts -- sh -c 'hostname "$0" && exec "$@"' "rrfakehost$host" "$@" \
    > >(sed -u "s/^/[$r] /") 2>&1 &
  pids+=($!)
done

status=0
for pid in "${pids[@]}"; do
  wait "$pid"
  rc=$?
  if [[ $rc -ne 0 && $status -eq 0 ]]; then
    status=$rc
    cleanup  # one failed: the others would wait for it until their timeout
  fi
done
exit $status
