#!/usr/bin/python3
"""Chaos harness: jobs of 2-5 ranks of chaos_rank, one rank struck at a
random moment, and what every other rank and the machine show afterwards.

Each trial draws, from --seed and its own index (so one trial reruns alone
with --seed S --only I), a rank count, a victim, a strike kind (kill, stop,
abort, socket), a moment (init, split, collective, p2p, destroy) and a delay
into that moment. Kinds and moments are dealt so that every 20 trials hold
each pair once (every 4 consecutive trials each kind, every 5 each moment);
their order, the rank count, the victim and the delay are random.

The harness starts the ranks itself, each in its own session and process
group (not through rr-run, which ends the whole job when one rank fails),
with env:// variables on a free port and RR_TIMEOUT_MS. The socket kind runs
with UCX_TLS=tcp on every rank: ranks on one host otherwise reach each other
through shared memory, and shutting the TCP sockets then breaks only the
rendezvous store's connections. A stopped victim is resumed (SIGCONT) once
every other rank has exited, and must then exit by itself within the bound.

A trial passes when:
  - every surviving rank prints its outcome and exits, either finished
    ("ok": allowed only if the victim had reached every step this rank needed
    it for, see chaos_rank.cpp) or with an error that names its cause (a
    rank, the rendezvous address, "abort", "timed out"), never with a wrong
    result, never on a signal;
  - no failed call lasted longer than RR_TIMEOUT_MS + --margin-s (LATE), and
    no rank failed before the strike (EARLY);
  - the victim, if it lives on (abort, socket, stop after SIGCONT), does the
    same;
  - the job ends before a hard deadline (else HANG: ranks get SIGUSR1 for a
    state dump on stderr, then SIGKILL);
  - nothing is left (LEAK): no process of the trial (process groups, and
    /proc/*/environ carrying the trial's token), no file in the trial's
    /dev/shm, no System V segment a rank created, no socket on the trial's
    port other than TIME_WAIT.
The trial's /dev/shm: as root, each rank runs in a mount namespace of its own
(unshare) whose /dev/shm is a bind mount of a fresh directory
/dev/shm/rr-chaos-PID-TRIAL, so a leftover segment is this trial's and no
other program's on a shared machine; otherwise (or --shm global) /dev/shm is
compared before and after, which other programs can disturb. The harness
makes no network namespace; a change of `ip netns list` during a trial is
printed as a warning (other programs make them), not counted.

Prints one line per trial, details of every violation, a table of outcomes by
strike kind x the phase the strike landed in, and error latencies; exits 1 on
any violation. --json PATH writes every trial's record.
"""

import argparse
import collections
import itertools
import json
import os
import random
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

KINDS = ["kill", "stop", "abort", "socket"]
MOMENTS = ["init", "split", "collective", "p2p", "destroy"]
PHASES = MOMENTS + ["done"]
# Largest delay into each moment, ms: about the phase's length with 2-5
# ranks on two cores (chaos_rank's "entered" times), so most strikes land in
# the moment drawn; each strike reports where it landed.
MAX_DELAY_MS = {"init": 100, "split": 30, "collective": 150, "p2p": 30, "destroy": 20}
# An error "names its cause": a rank, the rendezvous address, an abort or a
# timeout.
NAMED = re.compile(r"rank \d+|abort|timed out|timeout|\d+\.\d+\.\d+\.\d+:\d+|rendezvous|store", re.I)
TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1", "05": "FIN_WAIT2",
              "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN",
              "0B": "CLOSING"}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--only", type=int, action="append", default=[],
                   help="run only trial I of this seed (repeatable): reproduces it")
    p.add_argument("--timeout-ms", type=int, default=3000, help="RR_TIMEOUT_MS of every rank")
    p.add_argument("--margin-s", type=float, default=2.0,
                   help="a failed call may last RR_TIMEOUT_MS + this; longer is LATE")
    p.add_argument("--worker", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "chaos_rank"),
                   help="path of chaos_rank")
    p.add_argument("--deadline-s", type=float,
                   help="a trial still running after this long is a HANG (default: 15 + 2 x (bound + 1.5))")
    p.add_argument("--rounds", type=int, default=2, help="chaos_rank --rounds")
    p.add_argument("--ranks", default="2-5", help="rank counts drawn from, MIN-MAX")
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--moments", default=",".join(MOMENTS))
    p.add_argument("--socket-tls", default="tcp",
                   help="UCX_TLS for socket trials ('' leaves UCX's default: shared memory between ranks)")
    p.add_argument("--shm", choices=["auto", "private", "global"], default="auto",
                   help="where leftover segments are looked for (see above); auto: private when root")
    p.add_argument("--json", metavar="PATH", help="write every trial's record here")
    p.add_argument("--verbose", "-v", action="store_true", help="print every rank's lines, not only on violation")
    return p.parse_args()


# The Python tests' port picker: reserved below the ephemeral range, so no
# UCX listener or outgoing connection takes it before rank 0 listens.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from ranks import free_port  # noqa: E402


def plan(seed, index, kinds, moments, ranks):
    """The trial's draw: a function of (seed, index) alone."""
    block, i = divmod(index, 20)
    deal = random.Random(f"{seed}/deal/{block}")
    kind_order, moment_order = KINDS[:], MOMENTS[:]
    deal.shuffle(kind_order)
    deal.shuffle(moment_order)
    rng = random.Random(f"{seed}/trial/{index}")
    # i % 4 and i % 5 run through all 20 pairs (4 and 5 are coprime).
    kind = kind_order[i % 4]
    moment = moment_order[i % 5]
    if kind not in kinds:
        kind = rng.choice(kinds)
    if moment not in moments:
        moment = rng.choice(moments)
    n = rng.randint(*ranks)
    return {"trial": index, "seed": seed, "ranks": n, "victim": rng.randrange(n), "kind": kind, "moment": moment,
            "delay_ms": rng.randint(0, MAX_DELAY_MS[moment])}


def list_dir(path):
    try:
        return set(os.listdir(path))
    except FileNotFoundError:
        return set()


def netns_list():
    try:
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def sysv_segments():
    """{shmid: (cpid, nattch)} of every System V segment."""
    segs = {}
    try:
        with open("/proc/sysvipc/shm") as f:
            next(f)
            for line in f:
                col = line.split()
                segs[int(col[1])] = (int(col[4]), int(col[6]))
    except OSError:
        pass
    return segs


def sockets_on_port(port):
    """(file, state, inode) of every TCP socket whose local or remote port is `port`."""
    found = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    col = line.split()
                    local, remote, state, inode = col[1], col[2], col[3], col[9]
                    if int(local.rsplit(":", 1)[1], 16) == port or int(remote.rsplit(":", 1)[1], 16) == port:
                        found.append((name, TCP_STATES.get(state, state), inode))
        except OSError:
            pass
    return found


def socket_owners(inode):
    """[(pid, command)] of the processes holding socket `inode` open."""
    target = f"socket:[{inode}]"
    owners = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{entry}/fd"):
                if os.readlink(f"/proc/{entry}/fd/{fd}") == target:
                    with open(f"/proc/{entry}/cmdline", "rb") as f:
                        owners.append((int(entry), f.read().replace(b"\0", b" ").decode(errors="replace").strip()))
                    break
        except OSError:
            pass
    return owners


def processes_with_token(token):
    needle = f"CHAOS_TRIAL={token}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    pids.append(int(entry))
        except OSError:
            pass
    return pids


def process_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def backtrace(pid):
    """Every thread's stack of `pid` from gdb, or its kernel stacks."""
    if shutil.which("gdb"):
        try:
            out = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt 25"],
                                 capture_output=True, text=True, timeout=60).stdout
            return "\n".join(line for line in out.splitlines() if line.startswith(("#", "Thread")))
        except (OSError, subprocess.TimeoutExpired):
            pass
    stacks = []
    for tid in os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}/task") else []:
        try:
            with open(f"/proc/{pid}/task/{tid}/stack") as f:
                stacks.append(f"thread {tid}:\n{f.read()}")
        except OSError:
            pass
    return "\n".join(stacks)


def catches(pid, sig):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except OSError:
        pass
    return False


def group_kill(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def parse_lines(path):
    events = []
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("CHAOS "):
                try:
                    events.append(json.loads(line[6:]))
                except json.JSONDecodeError:
                    events.append({"event": "garbled", "line": line.rstrip()})
    return events


class Trial:
    def __init__(self, args, draw, workdir, private_shm):
        self.args = args
        self.draw = draw
        self.workdir = workdir
        self.private_shm = private_shm
        self.timeout_s = args.timeout_ms / 1000.0
        self.bound_s = self.timeout_s + args.margin_s
        self.violations = []  # (code, text)
        self.warnings = []
        self.leaks = []

    def violate(self, code, text):
        self.violations.append((code, text))

    def command(self, rank):
        d = self.draw
        cmd = [self.args.worker, "--rounds", str(self.args.rounds), "--victim", str(d["victim"]), "--kind", d["kind"],
               "--moment", d["moment"], "--delay-ms", str(d["delay_ms"])]
        if self.private_shm:
            cmd = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                   'mount --bind "$0" /dev/shm && exec "$@"', self.shm_dir] + cmd
        return cmd

    def run(self):
        d, args = self.draw, self.args
        n, victim = d["ranks"], d["victim"]
        token = secrets.token_hex(8)
        port = free_port()
        self.port = port
        tag = f"rr-chaos-{os.getpid()}-{d['trial']}"
        self.shm_dir = os.path.join("/dev/shm", tag)
        if self.private_shm:
            os.mkdir(self.shm_dir)
        shm_before = list_dir("/dev/shm")
        sysv_before = sysv_segments()
        netns_before = netns_list()

        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(n),
                   RR_TIMEOUT_MS=str(args.timeout_ms), CHAOS_TRIAL=token)
        env.pop("UCX_TLS", None)
        if d["kind"] == "socket" and args.socket_tls:
            env["UCX_TLS"] = args.socket_tls
        # The slowest legitimate trial: startup and the work (a few seconds on
        # a loaded machine), one failed call per rank, and for a stop the
        # resumed victim's own failure after the others'.
        deadline_s = args.deadline_s or 15 + 2 * (self.bound_s + 1.5)
        procs, outs, errs = [], [], []
        start = time.monotonic()
        # Interrupted (SIGINT, SIGTERM): the ranks and the directory go too.
        self.cleanup = lambda: ([group_kill(p.pid) for p in procs], shutil.rmtree(self.shm_dir, ignore_errors=True))
        for r in range(n):
            out = open(os.path.join(self.workdir, f"{tag}.rank{r}.out"), "w+")
            err = open(os.path.join(self.workdir, f"{tag}.rank{r}.err"), "w+")
            procs.append(subprocess.Popen(self.command(r), env=dict(env, RANK=str(r)), stdout=out, stderr=err,
                                          stdin=subprocess.DEVNULL, start_new_session=True))
            outs.append(out)
            errs.append(err)
        pids = [p.pid for p in procs]
        exited = [None] * n
        resumed_at = None
        hung = []
        while True:
            now = time.monotonic()
            for r, p in enumerate(procs):
                if exited[r] is None and p.poll() is not None:
                    exited[r] = now
            if all(e is not None for e in exited):
                break
            others_done = all(exited[r] is not None for r in range(n) if r != victim)
            if d["kind"] == "stop" and others_done and resumed_at is None and exited[victim] is None:
                state = process_state(pids[victim])
                # Resume it only once it stopped; a victim not stopped yet
                # (strike still to come) is left alone until then.
                if state == "T":
                    os.kill(pids[victim], signal.SIGCONT)
                    resumed_at = now
            if resumed_at is not None and exited[victim] is None and now - resumed_at > self.bound_s + 1.5:
                hung = [victim]
                self.violate("HANG", f"rank {victim} (the stopped victim) did not exit within "
                             f"{self.bound_s + 1.5:.1f} s after SIGCONT")
                break
            if now - start > deadline_s:
                hung = [r for r in range(n) if exited[r] is None]
                self.violate("HANG", f"ranks {hung} still running after the trial's {deadline_s:.0f} s deadline "
                             f"(states {[process_state(pids[r]) for r in hung]})")
                break
            time.sleep(0.01)
        self.backtraces = {}
        self.killed = set(hung)
        if hung:
            # Where each hung rank is (gdb, when installed), then a state dump
            # of its communicators on stderr (SIGUSR1, only where the engine
            # installed its handler: before init the signal would just kill).
            for r in hung:
                self.backtraces[r] = backtrace(pids[r])
                if process_state(pids[r]) == "T":
                    os.kill(pids[r], signal.SIGCONT)
                if catches(pids[r], signal.SIGUSR1):
                    os.kill(pids[r], signal.SIGUSR1)
            time.sleep(0.5)
            for r in hung:
                try:
                    os.killpg(pids[r], signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for r in hung:
                procs[r].wait()
                exited[r] = time.monotonic()
        self.wall_s = time.monotonic() - start

        # Nothing of the trial may be left.
        for r, pid in enumerate(pids):
            if group_alive(pid):
                self.leaks.append(f"process group {pid} (rank {r}) still has processes")
                os.killpg(pid, signal.SIGKILL)
        stray = processes_with_token(token)
        if stray:
            self.leaks.append(f"processes of the trial still running: {stray}")
            for pid in stray:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if self.private_shm:
            for name in sorted(list_dir(self.shm_dir)):
                self.leaks.append(f"/dev/shm/{name} (in the trial's private /dev/shm)")
            shutil.rmtree(self.shm_dir, ignore_errors=True)
            elsewhere = {x for x in list_dir("/dev/shm") - shm_before if not x.startswith("rr-chaos-")}
            if elsewhere:
                self.warnings.append(f"new in the shared /dev/shm during the trial, not the trial's: {sorted(elsewhere)}")
        else:
            for name in sorted(list_dir("/dev/shm") - shm_before):
                if not name.startswith("rr-chaos-"):
                    self.leaks.append(f"/dev/shm/{name} (new during the trial)")
        for shmid, (cpid, nattch) in sysv_segments().items():
            if shmid not in sysv_before and cpid in pids:
                self.leaks.append(f"System V segment {shmid} made by rank {pids.index(cpid)} (nattch {nattch})")
                subprocess.run(["ipcrm", "-m", str(shmid)], capture_output=True)
        for name, state, inode in sockets_on_port(port):
            if state == "TIME_WAIT":
                continue  # the kernel's, after an orderly close
            # Every rank has exited, so a socket some process holds is that
            # process's: another program that took the same port number.
            owners = socket_owners(inode) if inode != "0" else []
            if owners and not any(pid in pids for pid, _ in owners):
                self.warnings.append(f"port {port} taken by another program: {state} {owners}")
            else:
                self.leaks.append(f"socket on port {port}: {state} inode {inode} ({name}), held by {owners or 'no process'}")
        netns_after = netns_list()
        if netns_after != netns_before:
            self.warnings.append(f"ip netns list changed during the trial (this harness makes none): "
                                 f"+{sorted(netns_after - netns_before)} -{sorted(netns_before - netns_after)}")
        if self.leaks:
            self.violate("LEAK", "; ".join(self.leaks))

        self.ranks = []
        for r in range(n):
            outs[r].close()
            errs[r].close()
            events = parse_lines(outs[r].name)
            with open(errs[r].name, errors="replace") as f:
                stderr = f.read()
            self.ranks.append({
                "rank": r, "pid": pids[r], "returncode": procs[r].returncode,
                "exit_s": exited[r] - start,
                "strike": next((e for e in events if e.get("event") == "strike"), None),
                "outcome": next((e for e in events if e.get("event") == "outcome"), None),
                "garbled": [e["line"] for e in events if e.get("event") == "garbled"],
                "outcomes": sum(1 for e in events if e.get("event") == "outcome"),
                "ucx_error_lines": stderr.count(" UCX  ERROR "),
                "ucx_warn_lines": stderr.count(" UCX  WARN "),
                "stderr_tail": stderr[-3000:],
            })
            os.unlink(outs[r].name)
            os.unlink(errs[r].name)
        self.judge(resumed_at, start)
        return self

    def judge(self, resumed_at, start):
        d = self.draw
        victim, kind = d["victim"], d["kind"]
        strike = self.ranks[victim]["strike"]
        self.strike = strike
        self.landed = strike["phase"] if strike else "none"
        if not strike:
            self.violate("NO_STRIKE", f"rank {victim} (victim) printed no strike line "
                         f"(exit {self.ranks[victim]['returncode']})")
        self.latencies = []  # (rank, result, seconds of the failed call, seconds after the strike)
        for rr in self.ranks:
            r, o, rc = rr["rank"], rr["outcome"], rr["returncode"]
            is_victim = r == victim
            if rr["garbled"]:
                self.violate("GARBLED", f"rank {r} printed {rr['garbled']}")
            if rr["outcomes"] > 1:
                self.violate("GARBLED", f"rank {r} printed {rr['outcomes']} outcome lines")
            if r in self.killed:
                continue  # the HANG says it
            if is_victim and kind == "kill":
                if rc != -signal.SIGKILL:
                    self.violate("VICTIM", f"rank {r} (victim) exited {rc}, not by its SIGKILL")
                continue
            if o is None:
                if rc is not None and rc < 0:
                    self.violate("CRASH", f"rank {r} died of signal {-rc} without an outcome")
                elif not any(c == "HANG" for c, _ in self.violations):
                    self.violate("NO_OUTCOME", f"rank {r} exited {rc} without an outcome")
                continue
            expected_rc = {"ok": 0, "wrong": 3}.get(o["result"], 1)
            if rc != expected_rc:
                self.violate("EXIT", f"rank {r} printed result {o['result']} but exited {rc}")
            rr["named"] = None
            if o["result"] == "wrong":
                self.violate("WRONG", f"rank {r}: {o['error']}")
            elif o["result"] == "ok":
                self.judge_finished(rr, is_victim, strike)
            else:
                self.judge_error(rr, is_victim, strike, resumed_at, start)

    def judge_finished(self, rr, is_victim, strike):
        """A rank that finished must not have needed the victim after its strike."""
        r, o = rr["rank"], rr["outcome"]
        d = self.draw
        if is_victim or strike is None or d["kind"] == "socket":
            return  # a shut socket may break nothing: the table shows it
        needed = o["needed"][d["victim"]]
        reached = strike["step"]
        if d["kind"] == "abort" and self.ranks[d["victim"]]["outcome"] and \
                self.ranks[d["victim"]]["outcome"].get("stopped"):
            reached += 0.5  # the victim's call finished before the abort took hold
        if needed > reached:
            self.violate("FINISHED", f"rank {r} finished, but needed rank {d['victim']} at step {needed}, "
                         f"and the victim's {d['kind']} came at step {strike['step']} ({strike['call']})")

    def judge_error(self, rr, is_victim, strike, resumed_at, start):
        r, o = rr["rank"], rr["outcome"]
        d = self.draw
        rr["named"] = bool(NAMED.search(o["error"]))
        rr["names_victim"] = f"rank {d['victim']}" in o["error"] or (is_victim and "abort" in o["error"])
        if not rr["named"]:
            self.violate("UNNAMED", f"rank {r}: {o['result']}: {o['error']!r}")
        seconds = o["seconds"]
        if is_victim and d["kind"] == "stop" and resumed_at is not None:
            # Its call was frozen: count from the resume.
            seconds = o["t"] - max(o["call_start"], resumed_at)
        if seconds > self.bound_s:
            self.violate("LATE", f"rank {r}: {o['call']} failed after {seconds:.3f} s > {self.bound_s:.1f} s "
                         f"(timeout {self.timeout_s:.1f} s + margin {self.args.margin_s:.1f} s): {o['error']}")
        if strike and o["t"] < strike["t"] and not (is_victim and d["kind"] in ("abort", "socket")):
            self.violate("EARLY", f"rank {r}: {o['call']} failed {strike['t'] - o['t']:.3f} s before the strike: "
                         f"{o['error']}")
        if strike and not is_victim:
            after = o["t"] - max(o["call_start"], strike["t"])
            self.latencies.append((r, o["result"], o["seconds"], after))


def pct(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def summarize(trials, args):
    rows = collections.OrderedDict()
    for kind in KINDS:
        for phase in PHASES + ["none"]:
            rows[(kind, phase)] = collections.Counter()
    for t in trials:
        c = rows[(t.draw["kind"], t.landed)]
        c["trials"] += 1
        c["moved"] += t.landed != t.draw["moment"]
        for rr in t.ranks:
            o = rr["outcome"]
            if rr["rank"] == t.draw["victim"]:
                if o and t.draw["kind"] != "kill":
                    c["victim_ok" if o["result"] == "ok" else "victim_err"] += 1
                continue
            if not o:
                continue
            if o["result"] == "ok":
                c["finished"] += 1
            elif o["result"] != "wrong":
                c["named" if rr.get("named") else "unnamed"] += 1
                c["names_victim"] += bool(rr.get("names_victim"))
        codes = {code for code, _ in t.violations}
        c["late"] += sum(1 for code, _ in t.violations if code == "LATE")
        c["hang"] += "HANG" in codes
        c["leak"] += "LEAK" in codes
        c["other"] += len(codes - {"LATE", "HANG", "LEAK", "CRASH"})
        for code, text in t.violations:
            if code == "CRASH":
                c["crash_victim" if text.startswith(f"rank {t.draw['victim']} ") else "crash_survivor"] += 1
        c["ucx_err"] += sum(rr["ucx_error_lines"] for rr in t.ranks)
    head = ("kind", "landed in", "trials", "moved", "finished", "named err", "of them victim", "unnamed", "late",
            "hang", "leak", "crash surv./victim", "other viol.", "victim ok/err", "UCX ERROR lines")
    lines = [head]
    for (kind, phase), c in rows.items():
        if not c["trials"]:
            continue
        lines.append((kind, phase, c["trials"], c["moved"], c["finished"], c["named"], c["names_victim"],
                      c["unnamed"], c["late"], c["hang"], c["leak"], f"{c['crash_survivor']}/{c['crash_victim']}",
                      c["other"],
                      "-" if kind == "kill" else f"{c['victim_ok']}/{c['victim_err']}", c["ucx_err"]))
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    out = ["| " + " | ".join(str(v).ljust(widths[i]) for i, v in enumerate(line)) + " |" for line in lines]
    out.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    print("\nOutcomes by strike kind x the phase the victim was in when it struck (rows), counted per")
    print("surviving rank (finished .. late) and per trial (hang, leak, other); 'moved': trials whose")
    print("strike landed in another phase than the moment drawn; 'victim ok/err': the victim's own")
    print("outcome where it lives on (abort, socket, stop after SIGCONT); 'crash': a rank that died of a signal")
    print("without its outcome line (survivors / the victim where it should live on).")
    print("\n".join(out))

    print(f"\nError latency of surviving ranks (s): 'call' from the start of the failed call, 'after strike'")
    print(f"from the later of that and the strike; timeout {args.timeout_ms / 1000:.1f} s, bound "
          f"{args.timeout_ms / 1000 + args.margin_s:.1f} s.")
    for kind in KINDS:
        lat = [x for t in trials if t.draw["kind"] == kind for x in t.latencies]
        if not lat:
            continue
        calls = [x[2] for x in lat]
        after = [x[3] for x in lat]
        timeouts = [x[2] - args.timeout_ms / 1000 for x in lat if x[1] == "rrTimeout"]
        line = (f"  {kind:6s} n={len(lat):3d}  call p50 {pct(calls, .5):.3f} max {max(calls):.3f}   "
                f"after strike p50 {pct(after, .5):.3f} max {max(after):.3f}")
        if timeouts:
            line += (f"   rrTimeout over RR_TIMEOUT_MS: n={len(timeouts)} p50 {pct(timeouts, .5):+.3f} "
                     f"max {max(timeouts):+.3f}")
        print(line)
    crashes = collections.Counter()
    for t in trials:
        for code, text in t.violations:
            if code != "CRASH":
                continue
            r = int(text.split()[1])
            tail = t.ranks[r]["stderr_tail"]
            where = re.search(r"(\S+\.c:\d+)\s+(Assertion `[^']*')|(Caught signal \d+ \([^:)]*)", tail)
            entry = re.findall(r"\((rr\w+)\+0x", tail)
            crashes[(t.draw["kind"], "victim" if r == t.draw["victim"] else "survivor",
                     " ".join(x for x in where.groups() if x) if where else "no UCX report",
                     entry[-1] if entry else "?")] += 1
    if crashes:
        print("\nCrashes (kind, whose, what UCX reported, the ringreduce call it was in): count")
        for key, count in crashes.most_common():
            print(f"  {', '.join(key)}: {count}")
    allt = [x[2] - args.timeout_ms / 1000 for t in trials for x in t.latencies if x[1] == "rrTimeout"]
    if allt:
        print(f"  all rrTimeout results: over RR_TIMEOUT_MS p50 {pct(allt, .5):+.3f} s, max {max(allt):+.3f} s")


def main():
    args = parse_args()
    args.worker = os.path.abspath(args.worker)
    if not os.access(args.worker, os.X_OK):
        print(f"chaos.py: no worker at {args.worker} (--worker)", file=sys.stderr)
        return 2
    kinds = args.kinds.split(",")
    moments = args.moments.split(",")
    lo, _, hi = args.ranks.partition("-")
    ranks = (int(lo), int(hi or lo))
    if not set(kinds) <= set(KINDS) or not set(moments) <= set(MOMENTS) or not 2 <= ranks[0] <= ranks[1]:
        print("chaos.py: bad --kinds, --moments or --ranks", file=sys.stderr)
        return 2
    private = args.shm == "private" or (args.shm == "auto" and os.geteuid() == 0 and shutil.which("unshare"))
    if private:
        probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                                "mount --bind /dev/shm /dev/shm"], capture_output=True)
        if probe.returncode != 0:
            if args.shm == "private":
                print(f"chaos.py: cannot make a private /dev/shm: {probe.stderr.decode().strip()}", file=sys.stderr)
                return 2
            private = False
    indices = args.only or list(range(args.trials))
    print(f"chaos.py: seed {args.seed}, trials {indices if args.only else len(indices)}, timeout "
          f"{args.timeout_ms} ms, bound timeout + {args.margin_s} s, ranks {ranks[0]}-{ranks[1]}, "
          f"/dev/shm {'private per trial' if private else 'global (before/after)'}, socket trials "
          f"UCX_TLS={args.socket_tls or '(default)'}", flush=True)
    trials = []
    workdir = tempfile.mkdtemp(prefix="rr-chaos-")
    failed = 0
    running = None

    def interrupted(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGHUP, interrupted)
    try:
        for index in indices:
            draw = plan(args.seed, index, kinds, moments, ranks)
            t = running = Trial(args, draw, workdir, private)
            t.run()
            running = None
            trials.append(t)
            codes = sorted({c for c, _ in t.violations})
            survivors = [rr for rr in t.ranks if rr["rank"] != draw["victim"]]
            results = collections.Counter((rr["outcome"] or {}).get("result", "none") for rr in survivors)
            print(f"trial {index:3d}: {draw['ranks']} ranks, rank {draw['victim']} {draw['kind']:6s} at "
                  f"{draw['moment']:10s} +{draw['delay_ms']:3d} ms -> landed {t.landed:10s} "
                  f"({t.strike['call'] if t.strike else '-'}); survivors "
                  f"{dict(results)}; {t.wall_s:5.2f} s{'  ' + ' '.join(codes) if codes else ''}", flush=True)
            if args.verbose:
                for w in t.warnings:
                    print(f"    warning: {w}")
            if t.violations or args.verbose:
                failed += bool(t.violations)
                for code, text in t.violations:
                    print(f"    {code}: {text}")
                print(f"    reproduce: {sys.argv[0]} --seed {args.seed} --only {index} --timeout-ms "
                      f"{args.timeout_ms} --worker {args.worker}")
                for rr in t.ranks:
                    print(f"    rank {rr['rank']} exit {rr['returncode']} at {rr['exit_s']:.3f} s")
                    for key in ("strike", "outcome"):
                        if rr[key]:
                            shown = {k: v for k, v in rr[key].items() if k not in ("entered", "needed")}
                            print(f"      {key}: {json.dumps(shown)}")
                    if rr["rank"] in t.backtraces:
                        print("      backtrace when hung:\n        " +
                              "\n        ".join(t.backtraces[rr["rank"]].splitlines()[:60]))
                    if t.violations and rr["stderr_tail"].strip():
                        tail = rr["stderr_tail"].strip().splitlines()[-30:]
                        print("      stderr: " + "\n              ".join(tail))
    except KeyboardInterrupt:
        if running and hasattr(running, "cleanup"):
            running.cleanup()
        print(f"chaos.py: interrupted in trial {running.draw['trial'] if running else '-'}; its ranks were killed",
              file=sys.stderr)
        return 130
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    summarize(trials, args)
    warned = [t for t in trials if t.warnings]
    if warned:
        print(f"\n{len(warned)} trials saw another program change /dev/shm or the network namespaces "
              f"(warnings, not counted; -v or --json shows them)")
    counts = collections.Counter(c for t in trials for c, _ in t.violations)
    print(f"\n{len(trials)} trials, {failed} with violations" + (f": {dict(counts)}" if counts else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": args.seed, "timeout_ms": args.timeout_ms, "margin_s": args.margin_s,
                       "private_shm": bool(private),
                       "trials": [{"draw": t.draw, "landed": t.landed, "wall_s": t.wall_s, "violations": t.violations,
                                   "warnings": t.warnings, "ranks": t.ranks, "latencies": t.latencies,
                                   "backtraces": t.backtraces}
                                  for t in trials]}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
