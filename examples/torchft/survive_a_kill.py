"""Training that survives a lost replica: torchft on a ringreduce process group.

Starts a torchft lighthouse and --replicas replica groups (replica.py, one
process each) training the same model under torchft's Manager, with the
replica dimension's process group --pg. Then:

  one kill (default): the last replica joins step --kill-at-step's quorum and
      stops before its gradients' allreduce, so the others wait in that
      collective; after a second it is SIGKILLed. The survivors' allreduce
      fails, they do not commit that step, the lighthouse forms a quorum
      without it and they commit the following steps. The killed replica is
      then restarted, heals (torchft copies the weights from a peer) and
      rejoins.
  --random-kills N: N times, once every replica is training, a random replica
      is SIGKILLed after a delay drawn uniformly from [0, --max-delay)
      seconds (any moment of a step: data, quorum, allreduce, commit, a
      checkpoint being served), and restarted once the survivors commit.

At the end every replica stops after the same committed step and the driver
checks that the replicas' model and optimizer states are identical. It
prints a summary (and writes it as JSON with --json):

  recovery: seconds from each kill to the survivors' next committed step
      (and to the end of the last step they failed: the process group's
      share, where the rest is the lighthouse's heartbeat timeout)
  step time: median seconds of a step with every replica committing,
      before the first kill

Exits 1 when a check fails or a replica does not make progress within
--stall seconds (a hang), 0 otherwise.

    python examples/torchft/survive_a_kill.py --pg ringreduce
    python examples/torchft/survive_a_kill.py --pg gloo --random-kills 20 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Optional

import torch
from torchft._torchft import LighthouseServer

HERE = os.path.dirname(os.path.abspath(__file__))


class Stalled(Exception):
    """A replica made no progress within the allowed time."""


class Replica:
    """One replica process and the JSON lines it printed."""

    def __init__(self, job: "Job", index: int, hold_at_step: int = -1) -> None:
        self.index = index
        self.events: list[dict] = []
        self.log = os.path.join(job.folder, f"replica{index}.{len(job.started)}.log")
        command = [sys.executable, os.path.join(HERE, "replica.py"), "--pg", job.args.pg,
                   "--replica-id", str(index), "--replicas", str(job.args.replicas),
                   "--lighthouse", job.lighthouse.address(), "--stop-file", job.stop_file,
                   "--state-out", job.state_path(index), "--hold-at-step", str(hold_at_step),
                   "--hidden", str(job.args.hidden), "--step-sleep", str(job.args.step_sleep),
                   "--timeout", str(job.args.timeout)] + (["--as-shipped"] if job.args.as_shipped else [])
        with open(self.log, "w") as log:
            # Its own session: a kill reaches the Baby group's subprocess too.
            self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True,
                                            start_new_session=True)
        self._job = job
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            with self._job.changed:
                self.events.append(event)
                self._job.changed.notify_all()
        with self._job.changed:
            self.events.append({"event": "exit", "t": time.time()})
            self._job.changed.notify_all()

    def kill(self) -> float:
        killed_at = time.time()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        return killed_at

    def steps(self, after: float = 0.0) -> list[dict]:
        return [e for e in self.events if e["event"] == "step" and e["t"] > after]


class Job:
    def __init__(self, args: argparse.Namespace, folder: str) -> None:
        self.args = args
        self.folder = folder
        self.stop_file = os.path.join(folder, "stop")
        self.changed = threading.Condition()
        self.lighthouse = LighthouseServer(bind="[::]:0", min_replicas=2,
                                           heartbeat_timeout_ms=args.heartbeat_timeout_ms,
                                           join_timeout_ms=args.join_timeout_ms)
        self.started: list[Replica] = []
        self.live: dict[int, Replica] = {}

    def state_path(self, index: int) -> str:
        return os.path.join(self.folder, f"state{index}.pt")

    def start(self, index: int, hold_at_step: int = -1) -> Replica:
        replica = Replica(self, index, hold_at_step)
        self.started.append(replica)
        self.live[index] = replica
        return replica

    def wait_for(self, what: str, ready: Callable[[], bool], seconds: Optional[float] = None) -> None:
        """Waits until ready() (checked under the lock) or raises Stalled."""
        deadline = time.monotonic() + (seconds or self.args.stall)
        with self.changed:
            while not ready():
                for replica in self.live.values():
                    if replica.events and replica.events[-1]["event"] == "exit" and replica.process.poll():
                        raise Stalled(f"waiting for {what}: replica {replica.index} exited with "
                                      f"{replica.process.returncode} (log: {replica.log})")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Stalled(f"waiting for {what}: nothing within {seconds or self.args.stall:.0f} s")
                self.changed.wait(min(left, 0.5))

    def all_committing(self, after: float, count: int = 1) -> Callable[[], bool]:
        """Every live replica committed `count` steps with every replica in."""
        def ready() -> bool:
            return all(sum(1 for e in r.steps(after) if e["committed"] and e["participants"] == self.args.replicas)
                       >= count for r in self.live.values())
        return ready

    def recover(self, victim: Replica, killed_at: float, survivors: list[Replica]) -> dict:
        """After a kill: the survivors' next commits, then the victim restarted and back in."""
        def survivors_commit(count: int) -> Callable[[], bool]:
            return lambda: all(sum(1 for e in r.steps(killed_at) if e["committed"]) >= count for r in survivors)

        self.wait_for(f"the survivors' first commit after killing replica {victim.index}", survivors_commit(1))
        first = [next(e for e in r.steps(killed_at) if e["committed"]) for r in survivors]
        failed = [e for r in survivors for e in r.steps(killed_at) if not e["committed"]
                  and e["t"] < max(f["t"] for f in first)]
        self.wait_for("the survivors' second commit without the victim", survivors_commit(2))
        restarted_at = time.time()
        back = self.start(victim.index)
        self.wait_for(f"replica {victim.index} rejoining after its restart", self.all_committing(restarted_at))
        rejoin = next(e for e in back.steps() if e["committed"])
        return {"victim": victim.index, "recovery_seconds": max(f["t"] for f in first) - killed_at,
                "survivor_failed_steps": len(failed),
                "failed_step_seconds": max(e["t"] for e in failed) - killed_at if failed else None,
                "rejoin_seconds": rejoin["t"] - restarted_at,
                "rejoin_step": rejoin["step"]}

    def stop(self) -> None:
        with self.changed:
            last = max((e["step"] for r in self.live.values() for e in r.steps()), default=0)
        with open(self.stop_file, "w") as f:
            f.write(str(last + 2))
        self.wait_for("every replica to stop", lambda: all(
            any(e["event"] == "done" for e in r.events) for r in self.live.values()))
        for replica in self.live.values():
            if replica.process.wait(timeout=self.args.stall) != 0:
                raise Stalled(f"replica {replica.index} exited with {replica.process.returncode} after it was done "
                              f"(log: {replica.log})")

    def close(self) -> None:
        for replica in self.started:
            if replica.process.poll() is None:
                replica.kill()
        self.lighthouse.shutdown()


def states_identical(paths: list[str]) -> list[str]:
    """The keys whose tensors differ between the replicas' saved states."""
    def flatten(value: object, prefix: str = "") -> dict[str, object]:
        if isinstance(value, dict):
            out: dict[str, object] = {}
            for key, item in value.items():
                out.update(flatten(item, f"{prefix}{key}/"))
            return out
        if isinstance(value, (list, tuple)):
            return flatten(dict(enumerate(value)), prefix)
        return {prefix: value}

    states = [flatten(torch.load(p, weights_only=True)) for p in paths]
    differing = []
    for key, first in states[0].items():
        for other in states[1:]:
            value = other.get(key)
            same = torch.equal(first, value) if isinstance(first, torch.Tensor) and isinstance(value, torch.Tensor) \
                else first == value
            if not same:
                differing.append(key)
                break
    return differing


def step_seconds(job: Job, before: float) -> list[float]:
    """Durations of steps every replica committed together before `before`,
    leaving out each replica's first two (the first quorum, the sync)."""
    out = []
    for replica in job.started:
        together = [e for e in replica.steps() if e["t"] < before and e["committed"]
                    and e["participants"] == job.args.replicas]
        out += [e["seconds"] for e in together[2:]]
    return out


def run(args: argparse.Namespace, folder: str) -> dict:
    rng = random.Random(args.seed)
    job = Job(args, folder)
    summary: dict = {"pg": args.pg + (" (as shipped)" if args.as_shipped else ""), "replicas": args.replicas,
                     "kills": []}
    try:
        began = time.time()
        victim_index = args.replicas - 1
        for index in range(args.replicas):
            job.start(index, hold_at_step=args.kill_at_step if (index == victim_index and not args.random_kills)
                      else -1)
        if not args.random_kills:
            victim = job.live[victim_index]
            job.wait_for(f"replica {victim_index} to hold at step {args.kill_at_step}",
                         lambda: any(e["event"] == "holding" for e in victim.events))
            time.sleep(1.0)  # the survivors sit in the gradients' allreduce, waiting for it
            summary["step_seconds"] = step_seconds(job, time.time())
            killed_at = victim.kill()
            del job.live[victim_index]
            summary["kills"].append(job.recover(victim, killed_at, list(job.live.values())))
        else:
            job.wait_for("every replica training together", job.all_committing(began, args.steady_steps))
            summary["step_seconds"] = step_seconds(job, time.time())
            for _ in range(args.random_kills):
                job.wait_for("every replica training together", job.all_committing(time.time()))
                time.sleep(rng.uniform(0.0, args.max_delay))
                victim = job.live.pop(rng.randrange(args.replicas))
                killed_at = victim.kill()
                summary["kills"].append(job.recover(victim, killed_at, list(job.live.values())))
        job.stop()
        summary["different_state_keys"] = states_identical([job.state_path(i) for i in range(args.replicas)])
        summary["final_step"] = max(e["step"] for r in job.live.values() for e in r.steps())
        summary["ok"] = not summary["different_state_keys"]
    except Stalled as stalled:
        summary["ok"] = False
        summary["stalled"] = str(stalled)
    finally:
        job.close()
    return summary


def report(summary: dict) -> str:
    lines = [f"pg {summary['pg']}: {'ok' if summary['ok'] else 'FAILED'}"]
    if summary.get("step_seconds"):
        lines.append(f"  step time, {summary['replicas']} replicas: median "
                     f"{statistics.median(summary['step_seconds']) * 1e3:.1f} ms over "
                     f"{len(summary['step_seconds'])} steps")
    for kill in summary["kills"]:
        failed = f", the last ended {kill['failed_step_seconds']:.2f} s after the kill" \
            if kill["failed_step_seconds"] is not None else ""
        lines.append(f"  kill replica {kill['victim']}: survivors committed {kill['recovery_seconds']:.2f} s later "
                     f"({kill['survivor_failed_steps']} failed steps{failed}); restarted, it rejoined in "
                     f"{kill['rejoin_seconds']:.2f} s at step {kill['rejoin_step']}")
    if "stalled" in summary:
        lines.append(f"  stalled: {summary['stalled']}")
    if summary.get("different_state_keys"):
        lines.append(f"  replicas differ in {summary['different_state_keys']}")
    elif "final_step" in summary:
        lines.append(f"  step {summary['final_step']}: every replica's model and optimizer state identical")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pg", default="ringreduce", choices=["ringreduce", "ringreduce-reconfigure", "gloo", "baby-gloo"])
    parser.add_argument("--as-shipped", action="store_true",
                        help="torchft's Gloo groups without replica.py's fixes")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--kill-at-step", type=int, default=6, help="one kill: the step the victim holds at")
    parser.add_argument("--random-kills", type=int, default=0, help="kill at random moments this many times")
    parser.add_argument("--max-delay", type=float, default=1.0, help="random kills: delays in [0, this) seconds")
    parser.add_argument("--steady-steps", type=int, default=10,
                        help="random kills: steps every replica commits before the first kill")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--step-sleep", type=float, default=0.05)
    parser.add_argument("--timeout", type=float, default=10.0, help="the process group's and Manager's timeout")
    parser.add_argument("--heartbeat-timeout-ms", type=int, default=3000,
                        help="the lighthouse's: a replica silent this long is left out of the next quorum")
    parser.add_argument("--join-timeout-ms", type=int, default=10000)
    parser.add_argument("--stall", type=float, default=90.0, help="seconds without the awaited progress: a hang")
    parser.add_argument("--json", help="write the summary here")
    parser.add_argument("--keep", action="store_true", help="keep the replicas' logs and states")
    args = parser.parse_args()
    if args.replicas < 3:
        parser.error("--replicas: at least 3 (2 must survive a kill: the quorum's minimum is 2)")

    folder = tempfile.mkdtemp(prefix="survive_a_kill.")
    summary = run(args, folder)
    print(report(summary), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    if args.keep or not summary["ok"]:
        print(f"logs and states: {folder}")
    else:
        for name in os.listdir(folder):
            os.unlink(os.path.join(folder, name))
        os.rmdir(folder)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
