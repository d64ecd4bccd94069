#!/usr/bin/env python3
"""Checks an rr-bench --json file: well formed, the expected backends present,
every row complete, and every result correct (or, with --expect-wrong, at
least one wrong element counted).

usage: check_rr_bench_json.py FILE.json BACKEND... [--expect-wrong] [--csv FILE.csv]
"""
import csv
import json
import sys


def fail(message):
    print(f"check_rr_bench_json: {message}", file=sys.stderr)
    sys.exit(1)


def main(argv):
    expect_wrong = "--expect-wrong" in argv
    argv = [a for a in argv if a != "--expect-wrong"]
    csv_path = None
    if "--csv" in argv:
        at = argv.index("--csv")
        csv_path = argv[at + 1]
        del argv[at:at + 2]
    if len(argv) < 2:
        fail(__doc__.strip())
    path, backends = argv[0], argv[1:]
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path} is not valid JSON: {e}")

    for key in ("tool", "command", "nranks", "memcpy_GBps", "copy_at_once_GBps", "reduce_at_once_GBps", "built",
                "backends", "rows", "avg_busbw_GBps", "wrong"):
        if key not in doc:
            fail(f"{path} has no '{key}'")
    if doc["tool"] != "rr-bench" or doc["nranks"] < 1 or not doc["memcpy_GBps"] > 0 \
            or not doc["copy_at_once_GBps"] > 0 or not doc["reduce_at_once_GBps"] > 0:
        fail(f"{path}: bad header {doc['tool']!r} nranks={doc['nranks']} memcpy={doc['memcpy_GBps']}")
    rows = doc["rows"]
    if not rows:
        fail(f"{path} has no rows")
    seen = {row["backend"] for row in rows}
    for backend in backends:
        if backend not in seen:
            fail(f"{path} has no row of backend {backend} (rows of: {sorted(seen)})")
        if backend not in doc["backends"] or not doc["backends"][backend]:
            fail(f"{path} does not say the settings of backend {backend}")
    wrong = 0
    for row in rows:
        for key in ("backend", "algorithm", "collective", "size", "count", "type", "redop", "root", "bus_factor",
                    "out_of_place", "in_place", "busbw_over_memcpy", "bound_busbw_GBps", "busbw_over_bound"):
            if key not in row:
                fail(f"row {row} has no '{key}'")
        # The memory-traffic bound prices allreduce on more than one rank, nothing else.
        bounded = row["collective"] == "allreduce" and doc["nranks"] > 1
        if bounded != (row["bound_busbw_GBps"] > 0):
            fail(f"row {row['backend']} {row['collective']} {row['size']} B: bound {row['bound_busbw_GBps']}")
        if bounded and row["out_of_place"] is not None:
            ratio = row["out_of_place"]["busbw_GBps"] / row["bound_busbw_GBps"]
            if abs(ratio - row["busbw_over_bound"]) > 1e-3 * max(1.0, ratio):
                fail(f"row {row['backend']} {row['size']} B: busbw_over_bound {row['busbw_over_bound']}, "
                     f"busbw / bound {ratio}")
        # ringreduce names the schedule each row took (rrCommGetAlgorithm).
        if row["backend"] == "ringreduce" and row["algorithm"] not in (
                "ring", "ring (shared memory)", "one-shot (shared memory)", "recursive doubling", "halving-doubling", "binomial tree", "chain", "direct", "local copy",
                "point-to-point"):
            fail(f"ringreduce row {row['collective']} {row['size']} B names no algorithm: {row['algorithm']!r}")
        for placement in ("out_of_place", "in_place"):
            m = row[placement]
            if m is None:
                # No in-place form: alltoall and sendrecv, MPI's reduce-scatter.
                if placement == "in_place":
                    continue
                fail(f"row {row['backend']} {row['collective']} {row['size']} B has no out-of-place result")
            if m["time_us"] is None or m["time_us"] <= 0:
                fail(f"row {row['backend']} {row['size']} B: {placement} time {m['time_us']}")
            if m["wrong"] is None:
                fail(f"row {row['backend']} {row['size']} B: {placement} was not checked")
            wrong += m["wrong"]
            if m["wrong"] and not expect_wrong:
                fail(f"{row['backend']} {row['collective']} {row['size']} B {row['type']} {row['redop']} "
                     f"{placement}: {m['wrong']} wrong elements")
    if expect_wrong and wrong == 0:
        fail(f"{path}: a corrupted result was not detected (#wrong is 0 everywhere)")
    if doc["wrong"] != wrong:
        fail(f"{path}: total wrong {doc['wrong']} is not the rows' sum {wrong}")

    if csv_path:
        with open(csv_path, newline="") as f:
            records = list(csv.DictReader(f))
        if len(records) != len(rows):
            fail(f"{csv_path} has {len(records)} rows, the JSON {len(rows)}")
    print(f"check_rr_bench_json: {path}: {len(rows)} rows of {sorted(seen)}, {wrong:.0f} wrong")


if __name__ == "__main__":
    main(sys.argv[1:])
