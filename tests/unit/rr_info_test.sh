#!/usr/bin/env bash
# rr-info's output: a setting from each source (default, environment,
# --config), the UCX version and transports, the topology section, every
# RR_* variable lib/ reads listed, a secret never printed, bad values and bad
# flags refused, and --json well formed.
# Usage: rr_info_test.sh path/to/rr-info path/to/lib

set -u

INFO=${1:?usage: rr_info_test.sh path/to/rr-info path/to/lib}
LIB=${2:?usage: rr_info_test.sh path/to/rr-info path/to/lib}

# Start from no RR_* setting, whatever the caller's environment has.
while read -r name; do unset "$name"; done < <(compgen -e | grep '^RR_')

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0

# Runs rr-info with the given environment assignments and arguments
# (`run [VAR=VALUE...] -- [args...]`); sets rc, output in $TMP/out.
run() {
  local assignments=()
  while [[ $1 != -- ]]; do assignments+=("$1"); shift; done
  shift
  env "${assignments[@]}" timeout 30 "$INFO" "$@" >"$TMP/out" 2>&1
  rc=$?
}

# expect DESCRIPTION EXIT_STATUS EXTENDED_REGEX: the last run exited so and
# printed a line matching the pattern.
expect() {
  if [[ $rc -eq $2 ]] && grep -Eq -- "$3" "$TMP/out"; then
    passed=$((passed + 1))
    echo "PASS: $1"
  else
    failed=$((failed + 1))
    echo "FAIL: $1 (exit status $rc, expected $2; wanted a line matching: $3)"
    sed 's/^/  | /' "$TMP/out"
  fi
}

run --
expect "default: RR_CHUNK_BYTES is 512 KiB from the default" 0 '^ +RR_CHUNK_BYTES +524288 +default +chunk_bytes$'
expect "default: RR_WAIT_POLICY is auto by default" 0 '^ +RR_WAIT_POLICY +auto +default +- *$'
expect "default: RR_PIPELINE_DEPTH is auto, sized at init from the default floor" 0 \
  '^ +RR_PIPELINE_DEPTH +auto \(>= 4\) +default +pipeline_depth$'
expect "default: RR_LINK_GBPS is auto (an interface's speed, or the default)" 0 \
  '^ +RR_LINK_GBPS +auto \(([0-9.e+]+ Gbit/s, [^ ]+|no interface reports a speed: 10)\) +default +- *$'
expect "the build section names the version" 0 '^ringreduce [0-9]+\.[0-9]+\.[0-9]+$'
expect "the UCX version line" 0 '^UCX$'
expect "the UCX version line has a version" 0 '^  version +[0-9]+\.[0-9]+\.[0-9]+'
expect "UCX's self transport is listed" 0 '^ +self +self +[^ ]+ +loopback'
expect "the topology section" 0 '^Topology$'
if grep -Eq '^  hwloc +yes$' "$TMP/out"; then
  expect "hwloc counts at least one NUMA node" 0 '^  NUMA nodes +[1-9][0-9]*$'
  expect "hwloc counts cores" 0 '^  cores +[1-9][0-9]*$'
  expect "the GPU table" 0 '^  GPUs$'
  expect "the network device table" 0 '^  network devices$'
else
  expect "without hwloc, the topology section says why" 0 'built without hwloc'
fi

# Every RR_* variable lib/ names is listed with a value and a source.
while read -r name; do
  expect "lib/ reads $name: listed" 0 "^ +$name +.* (default|env $name|config) +[a-z_-]+ *\$"
done < <(grep -rhoE '"RR_[A-Z0-9_]+"' "$LIB" | tr -d '"' | sort -u)

run RR_CHUNK_BYTES=1048576 RR_WAIT_POLICY=yield --
expect "env: RR_CHUNK_BYTES=1048576 from the environment" 0 \
  '^ +RR_CHUNK_BYTES +1048576 +env RR_CHUNK_BYTES +chunk_bytes$'
expect "env: RR_WAIT_POLICY read outside Settings" 0 '^ +RR_WAIT_POLICY +yield +env RR_WAIT_POLICY +- *$'

run RR_LINK_GBPS=2.5 RR_PIPELINE_DEPTH=auto --
expect "env: RR_LINK_GBPS=2.5 from the environment" 0 '^ +RR_LINK_GBPS +2\.5 +env RR_LINK_GBPS +- *$'
expect "env: RR_PIPELINE_DEPTH=auto accepted" 0 '^ +RR_PIPELINE_DEPTH +auto \(>= 4\) +env RR_PIPELINE_DEPTH +pipeline_depth$'
run RR_PIPELINE_DEPTH=6 --
expect "env: RR_PIPELINE_DEPTH=6 is a fixed depth" 0 '^ +RR_PIPELINE_DEPTH +6 +env RR_PIPELINE_DEPTH +pipeline_depth$'
run RR_LINK_GBPS=-1 --
expect "a bad RR_LINK_GBPS: exit 1, named" 1 'refuse these settings: RR_LINK_GBPS'

run RR_CHUNK_BYTES=1048576 -- --config chunk_bytes=2097152 --config=pipeline_depth=8
expect "config: chunk_bytes wins over RR_CHUNK_BYTES" 0 '^ +RR_CHUNK_BYTES +2097152 +config +chunk_bytes$'
expect "config: --config=FIELD=VALUE form" 0 '^ +RR_PIPELINE_DEPTH +8 +config +pipeline_depth$'

run RR_AUTH_TOKEN=do-not-print-this-secret --
expect "RR_AUTH_TOKEN: said to be set" 0 '^ +RR_AUTH_TOKEN +\(set, 24 bytes, not shown\) +env RR_AUTH_TOKEN'
if grep -q do-not-print-this-secret "$TMP/out"; then
  failed=$((failed + 1)); echo "FAIL: RR_AUTH_TOKEN's value was printed"
else
  passed=$((passed + 1)); echo "PASS: RR_AUTH_TOKEN's value is not printed"
fi

run RR_CHUNKBYTES=1 --
expect "a misspelt RR_* variable is named" 0 'RR_CHUNKBYTES is set, but the engine reads no such variable'

run RR_CHUNK_BYTES=12 --
expect "a bad RR_CHUNK_BYTES: exit 1, named" 1 'refuse these settings: RR_CHUNK_BYTES'
run RR_WAIT_POLICY=nap --
expect "a bad RR_WAIT_POLICY: exit 1, named with the modes" 1 \
  'refuse these settings: RR_WAIT_POLICY=nap: expected auto, sleep, yield or spin'
run -- --config pipeline_depth=0
expect "a config field out of the engine's range: exit 1, named" 1 'refuse these settings: config\.pipeline_depth=0'
run -- --config chunk_size=4096
expect "an unknown config field: exit 2" 2 "no field 'chunk_size'"
run -- --config chunk_bytes=big
expect "a config value that is not a number: exit 2" 2 'expected a decimal integer'
run -- --frobnicate
expect "an unknown flag: exit 2 with the usage" 2 '^usage: rr-info'
run -- --help
expect "--help: usage, exit 0" 0 '^usage: rr-info'

run RR_CHUNK_BYTES=1048576 -- --json
if command -v python3 >/dev/null; then
  if python3 - "$TMP/out" <<'PY'
import json, sys
info = json.load(open(sys.argv[1]))
rows = {r["variable"]: r for r in info["settings"]["variables"]}
assert rows["RR_CHUNK_BYTES"]["value"] == "1048576", rows["RR_CHUNK_BYTES"]
assert rows["RR_CHUNK_BYTES"]["source"] == "env RR_CHUNK_BYTES", rows["RR_CHUNK_BYTES"]
assert info["ucx"]["version"], info["ucx"]
assert "topology" in info and "build" in info
PY
  then
    passed=$((passed + 1)); echo "PASS: --json parses and carries the env setting"
  else
    failed=$((failed + 1)); echo "FAIL: --json"; sed 's/^/  | /' "$TMP/out"
  fi
fi

echo "rr_info_test: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
