#!/usr/bin/env python3
"""Runs PyTorch's distributed test suite (distributed_test.py, in the
installed torch) on ringreduce, or on gloo to compare, with 2 ranks.

    PYTHONPATH=build/python .venv/bin/python tests/torch_suite/run_suite.py \\
        --list tests/torch_suite/quick.txt        # the named tests
    ... run_suite.py --all                        # every test (about an hour)
    ... run_suite.py --backend gloo --all         # the same on gloo
    ... run_suite.py test_broadcast test_barrier  # some tests by name

Each test spawns its ranks (torch's MultiProcessTestCase) and is given
--timeout seconds (torch's own per-test limit, DISTRIBUTED_TESTS_DEFAULT_TIMEOUT;
the few tests torch allows longer keep their allowance); a watchdog kills
a test's ranks a minute past that, and ends the run if even that does not
free it. Prints a line per test, the skip reasons, and the counts
(passed / skipped / failed); exits 1 on any failure or error, 2 on a usage
error. --json writes every test's outcome, time and message.
"""

from __future__ import annotations

import argparse
import collections
import faulthandler
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("tests", nargs="*", help="test names (test_broadcast ...)")
    p.add_argument("--backend", default="ringreduce", choices=["ringreduce", "gloo"])
    p.add_argument("--list", dest="list_file", help="a file of test names, one a line (# comments)")
    p.add_argument("--all", action="store_true", help="every test of the suite")
    p.add_argument("-k", dest="substrings", action="append", default=[],
                   help="keep only tests whose name contains this (repeatable: any of them)")
    p.add_argument("--start-method", choices=["fork", "spawn"], default="fork",
                   help="how each test's ranks start (default fork: a test in a second or two; "
                        "spawn: as torch's test_distributed_spawn.py, a new interpreter per rank)")
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--timeout", type=int, default=300, help="seconds per test (default 300)")
    p.add_argument("--json", dest="json_out", help="write per-test results here")
    p.add_argument("--list-tests", action="store_true", help="print the names that would run, and exit")
    args = p.parse_args(argv)
    if not (args.tests or args.list_file or args.all):
        p.error("name tests, or give --list FILE or --all")
    return args


def read_list(path: str) -> list[str]:
    names = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                names.append(line)
    return names


class Result(unittest.TextTestResult):
    """Records each test's outcome and time, and guards it with a watchdog."""

    def __init__(self, *a, grace: float = 60.0, **kw):
        super().__init__(*a, **kw)
        self.grace = grace
        self.records: dict[str, dict] = {}
        self._start = 0.0
        self._timers: list[threading.Timer] = []

    def _name(self, test) -> str:
        return test.id().rsplit(".", 1)[-1]

    def _limit(self, test) -> float:
        from torch.testing._internal.common_distributed import get_timeout
        return get_timeout(test.id()) + self.grace

    def startTest(self, test):
        super().startTest(test)
        self._start = time.monotonic()
        limit = self._limit(test)
        kill = threading.Timer(limit, self._kill_ranks, args=(test, limit))
        end = threading.Timer(limit + self.grace, self._end_run, args=(test,))
        for t in (kill, end):
            t.daemon = True
            t.start()
        self._timers = [kill, end]

    def stopTest(self, test):
        for t in self._timers:
            t.cancel()
        self._timers = []
        super().stopTest(test)

    def _kill_ranks(self, test, limit):
        print(f"\nWATCHDOG: {self._name(test)} still running after {limit:.0f} s; killing its ranks",
              file=sys.stderr, flush=True)
        for p in list(getattr(test, "processes", []) or []):
            try:
                p.kill()
            except Exception:  # noqa: BLE001 (already gone)
                pass

    def _end_run(self, test):
        print(f"\nWATCHDOG: {self._name(test)} did not end after its ranks were killed; "
              "ending the run. Driver's threads:", file=sys.stderr, flush=True)
        faulthandler.dump_traceback(file=sys.stderr)
        self._record(test, "failed", "watchdog: the test did not end")
        print_summary(self, sys.stdout)
        sys.stdout.flush()
        os._exit(1)

    def _record(self, test, outcome, message=""):
        self.records[self._name(test)] = {
            "outcome": outcome,
            "seconds": round(time.monotonic() - self._start, 2),
            "message": message,
        }

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", str(reason))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", self.failures[-1][1][-4000:])

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "failed", self.errors[-1][1][-4000:])

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        import dist_suite
        self._record(test, "xfail", dist_suite.KNOWN_FAILURES.get(self._name(test), ""))

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "failed", "unexpected success")


def counts(result: Result, ungated: bool | None = None) -> collections.Counter:
    """Outcomes of the suite's tests (ungated False), the ungated copies
    (True) or all (None)."""
    return collections.Counter(
        r["outcome"] for n, r in result.records.items()
        if ungated is None or n.startswith("test_ungated__") == ungated)


def print_summary(result: Result, out) -> None:
    recs = result.records
    skips = collections.Counter(r["message"] for r in recs.values() if r["outcome"] == "skipped")
    if skips:
        print("\nSkip reasons:", file=out)
        for reason, n in skips.most_common():
            print(f"  {n:4d}  {reason}", file=out)
    failed = sorted(n for n, r in recs.items() if r["outcome"] == "failed")
    if failed:
        print("\nFailed:", file=out)
        for n in failed:
            print(f"  {n}", file=out)
    slow = sorted(recs.items(), key=lambda kv: -kv[1]["seconds"])[:10]
    if slow:
        print("\nSlowest:", file=out)
        for n, r in slow:
            print(f"  {r['seconds']:8.1f} s  {n} ({r['outcome']})", file=out)
    total = sum(r["seconds"] for r in recs.values())
    print(f"\n{len(recs)} tests in {total:.0f} s", file=out)
    for label, which in (("suite", False), ("ungated", True), (os.environ.get("BACKEND", "all"), None)):
        c = counts(result, which)
        if sum(c.values()):
            xfail = f" ({c['xfail']} expected failures)" if c["xfail"] else ""
            print(f"{label}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped{xfail}",
                  file=out)


def main(argv: list[str]) -> int:
    args = parse_args(argv)

    # What distributed_test.py and its spawned ranks read (at import time).
    os.environ["BACKEND"] = args.backend
    os.environ["WORLD_SIZE"] = str(args.world_size)
    os.environ["DISTRIBUTED_TESTS_DEFAULT_TIMEOUT"] = str(args.timeout)
    os.environ["TORCH_SUITE_START_METHOD"] = args.start_method
    temp_dir = tempfile.mkdtemp(prefix=f"torch_suite_{args.backend}_")
    os.environ["TEMP_DIR"] = temp_dir
    # As torch's run_test.py sets it for its file:// configuration; each
    # test's setUp points it at a file of its own.
    os.environ["INIT_METHOD"] = "file://" + os.path.join(temp_dir, "shared_init_file")
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    if HERE not in sys.path:
        sys.path.insert(0, HERE)

    import dist_suite  # after the environment above

    known = dist_suite.all_test_names()
    if args.all:
        names = list(known)
    else:
        names = list(args.tests)
        if args.list_file:
            names += read_list(args.list_file)
        unknown = [n for n in names if n not in known]
        if unknown:
            print(f"run_suite.py: not tests of the suite: {', '.join(unknown)}", file=sys.stderr)
            return 2
        names = list(dict.fromkeys(names))
    if args.substrings:
        names = [n for n in names if any(s in n for s in args.substrings)]
    if args.list_tests:
        print("\n".join(names))
        return 0

    suite = unittest.TestSuite(dist_suite.TestDistBackendWithSpawn(n) for n in names)
    print(f"run_suite.py: {len(names)} tests on {args.backend}, world size {args.world_size}, "
          f"{args.timeout} s each", flush=True)
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=2, resultclass=Result)
    try:
        result = runner.run(suite)
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)
    print_summary(result, sys.stdout)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"backend": args.backend, "world_size": args.world_size,
                       "counts": dict(counts(result, False)), "ungated_counts": dict(counts(result, True)),
                       "tests": result.records}, f, indent=1)
    return 1 if counts(result)["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
