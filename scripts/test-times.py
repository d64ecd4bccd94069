#!/usr/bin/env python3
"""Where a `meson test` run's time goes: each test's wall and CPU time.

    meson test -C build --wrapper "$PWD/scripts/test-times.py wrap $PWD/times.jsonl --"
    scripts/test-times.py report TESTLOG... [--cpu times.jsonl] [--top N] [--markdown]

`wrap LOG -- CMD...` runs one test's command as Meson gives it, then appends
a line to LOG: the command, the RR_*/UCX_* variables it ran with, its wall
time and the CPU time (user + system) of it and all its descendants. The
wrapper is their subreaper: a descendant whose parent went first (a Python
fork server's ranks, whose server pytest never waits for) is reaped by the
wrapper, within 5 s of the command's end, so its time is counted too. It
exits as the command did, so Meson's verdict is unchanged.

`report TESTLOG...` reads Meson's testlog.json of one or more runs (every
`meson test` writes one, with each test's wall time; testlog-<wrapper>.json
under --wrapper, <logbase>.json under --logbase) and prints the tests
slowest first, the CPU column from LOG when given, and the totals. `.ci/run` prints its ten slowest
this way; bench/RESULTS.md ("Test time") keeps the full table.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import signal
import subprocess
import sys
import time


def _env_key(env: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(("RR_", "UCX_"))))


def _become_subreaper() -> None:
    """Orphaned descendants come to us (Linux's PR_SET_CHILD_SUBREAPER), so their CPU time can be counted."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass  # not Linux: the CPU column misses what the command did not wait for


def _reap_orphans(grace_s: float) -> None:
    """Waits up to grace_s for the descendants the command left (a fork server ending after it)."""
    deadline = time.monotonic() + grace_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # none left
        if pid == 0:
            if time.monotonic() >= deadline:
                return  # still running: not counted
            time.sleep(0.02)


def wrap(log: str, cmd: list) -> int:
    start = time.monotonic()
    _become_subreaper()
    proc = subprocess.Popen(cmd)
    # Meson stops a test past its timeout by signalling the process group: the
    # command gets that signal itself; passing on what reaches only us keeps a
    # terminal's Ctrl-C working too.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, _f: proc.send_signal(s))
    rc = proc.wait()
    wall = time.monotonic() - start
    _reap_orphans(5.0)
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = json.dumps({"command": cmd, "env": _env_key(os.environ), "wall": round(wall, 3),
                       "cpu": round(use.ru_utime + use.ru_stime, 3), "returncode": rc})
    with open(log, "a") as f:  # one write of a short line: whole, beside concurrent tests
        f.write(line + "\n")
    if rc < 0:  # died of a signal: die of it too, as Meson expects
        signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
    return rc if rc >= 0 else 128 - rc


def _strip_wrapper(cmd: list) -> list:
    return cmd[cmd.index("--") + 1:] if "--" in cmd and any(c.endswith("test-times.py") for c in cmd) else cmd


def _short(name: str) -> str:
    """'ringreduce:unit / store_test' -> 'store_test' (the suite is its own column)."""
    return name.split(" / ", 1)[-1]


def report(testlogs: list, cpu_log: str | None, top: int | None, markdown: bool) -> int:
    tests = []
    testlogs = [t for t in testlogs if os.path.exists(t)]  # a run that stopped early wrote fewer
    for testlog in testlogs:
        # build-asan/meson-logs/x.json -> "build-asan": which build ran it, when several are reported.
        where = pathlib.Path(testlog).resolve().parent.parent.name if len(testlogs) > 1 else ""
        with open(testlog) as f:
            for line in f:
                if line.strip():
                    tests.append((where, json.loads(line)))
    cpu: dict = {}
    if cpu_log:
        with open(cpu_log) as f:
            for line in f:
                r = json.loads(line)
                key = (tuple(r["command"]), tuple(tuple(e) for e in r["env"]))
                cpu.setdefault(key, []).append(r["cpu"])
    rows = []
    for where, t in tests:
        key = (tuple(_strip_wrapper(t["command"])), _env_key(t.get("env") or {}))
        c = cpu[key].pop(0) if cpu.get(key) else None
        name = _short(t["name"]) if not where else f"{where}: {_short(t['name'])}"
        rows.append((name, float(t["duration"]), c, t["result"]))
    rows.sort(key=lambda r: -r[1])
    total_wall = sum(r[1] for r in rows)
    total_cpu = sum(r[2] for r in rows if r[2] is not None)
    shown = rows[:top] if top else rows
    if markdown:
        print("| test | wall (s) | CPU (s) | result |")
        print("|---|---:|---:|---|")
        for name, wall, c, result in shown:
            print(f"| `{name}` | {wall:.1f} | {'' if c is None else f'{c:.1f}'} | {result} |")
        print(f"| all {len(rows)} tests | {total_wall:.1f} | {f'{total_cpu:.1f}' if cpu else ''} | |")
    else:
        width = max([len(r[0]) for r in shown] + [20])
        print(f"{'test':{width}} {'wall s':>8} {'CPU s':>8}  result")
        for name, wall, c, result in shown:
            print(f"{name:{width}} {wall:8.1f} {'' if c is None else f'{c:8.1f}':>8}  {result}")
        label = f"all {len(rows)} tests (sum)"
        print(f"{label:{width}} {total_wall:8.1f} {f'{total_cpu:8.1f}' if cpu else '':>8}")
    return 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "wrap":
        if len(sys.argv) < 5 or sys.argv[3] != "--":
            print("usage: test-times.py wrap LOG -- CMD...", file=sys.stderr)
            return 2
        return wrap(sys.argv[2], sys.argv[4:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    r = sub.add_parser("report", help="the tests of a testlog.json, slowest first")
    r.add_argument("testlog", nargs="+", help="meson-logs/testlog*.json of one or more runs")
    r.add_argument("--cpu", help="the LOG that `wrap` wrote")
    r.add_argument("--top", type=int, help="only the N slowest")
    r.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    return report(args.testlog, args.cpu, args.top, args.markdown)


if __name__ == "__main__":
    sys.exit(main())
