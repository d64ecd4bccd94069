"""One replica group (one rank) training under torchft's Manager.

Run by survive_a_kill.py, one process per replica; each prints one JSON line
per step on stdout:

    {"event": "step", "replica": 0, "step": 5, "participants": 3,
     "committed": true, "t": <time.time()>, "seconds": <the step's duration>}

and at the end saves {"model": ..., "optim": ...} to --state-out.

The process group of the replica dimension is --pg:
  ringreduce  ringreduce.torchft.ProcessGroupRingreduce (in process, abortable)
  ringreduce-reconfigure
              ringreduce.torchft.ReconfiguredProcessGroupRingreduce (the same
              on torch's reconfigure contract: one group, reconfigured per quorum)
  gloo        torchft's ProcessGroupGloo (in process)
  baby-gloo   torchft's ProcessGroupBabyGloo (Gloo in a subprocess it can kill)
Every replica uses ringreduce.torchft.DistributedDataParallel (torchft's,
fixed for models of several buckets), and torchft 0.2.0's Gloo groups get
fixes (GlooFailingSoftly, BabyWorkFailingSoftly) without which a peer's
death crashes or stalls the survivors; --as-shipped leaves all of them out
(docs/torchft.md says what each does).

Training stops at the first step >= the step written in --stop-file (the
driver writes it) at which every replica participates, so all replicas stop
after the same committed step.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from datetime import timedelta

import torch
from torch import nn, optim

import torchft
from torchft import Manager, Optimizer
from torchft import process_group as ft_pg

from ringreduce.torchft import (DistributedDataParallel, FailingSoftlyWork, ProcessGroupRingreduce,
                                ReconfiguredProcessGroupRingreduce)


class GlooFailingSoftly(ft_pg.ProcessGroupGloo):
    """torchft's in-process Gloo group with its works' failures in their
    futures, as ProcessGroupRingreduce's: torchft 0.2.0's DDP hook asserts on
    a work whose wait() raised, so a peer's death kills the survivors."""

    def _wrap_work(self, work, opts):
        return FailingSoftlyWork(work)


class BabyWorkFailingSoftly(FailingSoftlyWork):
    """A Baby group's work whose future is complete when the Manager chains
    it: torchft 0.2.0's Manager reads a work's future in a callback that only
    works when it is (manager.py, _ManagedWork._set_future_callback: the
    closure reads `managed_fut` after the loop has moved it on); the Baby
    group's future completes later, on its pipe thread, or never when the
    subprocess died."""

    def __init__(self, work, timeout_seconds: float) -> None:
        super().__init__(work)
        self._timeout = timeout_seconds

    def get_future(self) -> torch.futures.Future:
        if self.error is not None:  # the subprocess may be gone: its future would never complete
            failed = torch.futures.Future()
            failed.set_exception(self.error)
            return failed
        future = self._work.get_future()
        done = threading.Event()
        future.add_done_callback(lambda _: done.set())
        if done.wait(self._timeout):
            return future
        failed = torch.futures.Future()
        failed.set_exception(TimeoutError(f"the Baby group's result did not come within {self._timeout} s"))
        return failed


class BabyGlooFailingSoftly(ft_pg.ProcessGroupBabyGloo):
    """The same for torchft's subprocess Gloo group, which returns its works
    unwrapped."""

    def allreduce(self, *args, **kwargs):
        return BabyWorkFailingSoftly(super().allreduce(*args, **kwargs), self._timeout)  # seconds here


def make_pg(kind: str, timeout: timedelta, as_shipped: bool) -> ft_pg.ProcessGroup:
    if kind == "ringreduce":
        return ProcessGroupRingreduce(timeout=timeout)
    if kind == "ringreduce-reconfigure":
        return ReconfiguredProcessGroupRingreduce(timeout=timeout)
    if kind == "gloo":
        return ft_pg.ProcessGroupGloo(timeout=timeout) if as_shipped else GlooFailingSoftly(timeout=timeout)
    if kind == "baby-gloo":
        # The subprocess imports torch afresh at every quorum change.
        baby_timeout = max(timeout, timedelta(seconds=60))
        return ft_pg.ProcessGroupBabyGloo(timeout=baby_timeout) if as_shipped \
            else BabyGlooFailingSoftly(timeout=baby_timeout)
    raise ValueError(f"--pg: unknown process group {kind!r} (ringreduce, ringreduce-reconfigure, gloo, baby-gloo)")


def make_model(hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(16, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 4))


def stop_step(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except FileNotFoundError:
        return None
    return int(text) if text else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pg", default="ringreduce", choices=["ringreduce", "ringreduce-reconfigure", "gloo", "baby-gloo"])
    parser.add_argument("--replica-id", type=int, required=True)
    parser.add_argument("--replicas", type=int, required=True, help="replica groups in the job")
    parser.add_argument("--lighthouse", required=True, help="the lighthouse's address")
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--state-out", required=True)
    parser.add_argument("--hold-at-step", type=int, default=-1,
                        help="at this step, join the quorum and then stop before the gradients' allreduce "
                             "(the peers wait in it) until killed")
    parser.add_argument("--as-shipped", action="store_true",
                        help="torchft's DDP and Gloo groups without the fixes above (a peer's death fails the survivors)")
    parser.add_argument("--hidden", type=int, default=64, help="the model's hidden width")
    parser.add_argument("--step-sleep", type=float, default=0.05, help="seconds of 'data loading' per step")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds: collectives, RPCs, checkpoints")
    args = parser.parse_args()

    # Each replica group serves its own store (torchft configures the replica
    # dimension's process group over the store of a quorum's member).
    store = torch.distributed.TCPStore("localhost", 0, is_master=True, wait_for_workers=False)
    torch.manual_seed(1000 + args.replica_id)  # different weights: the first quorum syncs them
    model = make_model(args.hidden)
    optimizer = optim.Adam(model.parameters(), lr=1e-3)

    def load_state_dict(state: dict) -> None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optim"])

    timeout = timedelta(seconds=args.timeout)
    manager = Manager(
        pg=make_pg(args.pg, timeout, args.as_shipped), min_replica_size=2, load_state_dict=load_state_dict,
        state_dict=lambda: {"model": model.state_dict(), "optim": optimizer.state_dict()},
        replica_id=str(args.replica_id), store_addr="localhost", store_port=store.port, rank=0, world_size=1,
        lighthouse_addr=args.lighthouse, hostname="localhost", timeout=timeout,
        quorum_timeout=timedelta(seconds=60), connect_timeout=timedelta(seconds=30))
    ddp = (torchft.DistributedDataParallel if args.as_shipped else DistributedDataParallel)(manager, model)
    ft_optimizer = Optimizer(manager, optimizer)
    loss_fn = nn.CrossEntropyLoss()
    data = torch.Generator().manual_seed(args.replica_id)

    def say(**fields: object) -> None:
        print(json.dumps({"replica": args.replica_id, "t": time.time(), **fields}), flush=True)

    say(event="start", pid=os.getpid())
    while True:
        begin = time.monotonic()
        time.sleep(args.step_sleep)
        inputs = torch.rand(32, 16, generator=data)
        labels = torch.randint(0, 4, (32,), generator=data)
        ft_optimizer.zero_grad()  # starts this step's quorum (in the background)
        if manager.current_step() == args.hold_at_step:
            say(event="holding", step=manager.current_step())
            while True:
                time.sleep(1)
        loss = loss_fn(ddp(inputs), labels)
        loss.backward()  # the gradients' allreduce over the replica dimension
        step = manager.current_step()
        ft_optimizer.step()  # commits only if every rank of this replica group succeeded
        committed = manager.current_step() > step
        participants = manager.num_participants()
        say(event="step", step=manager.current_step(), participants=participants, committed=committed,
            seconds=time.monotonic() - begin, loss=loss.item())
        stop = stop_step(args.stop_file)
        if stop is not None and manager.current_step() >= stop and participants == args.replicas and committed:
            break

    torch.save({"model": model.state_dict(), "optim": optimizer.state_dict()}, args.state_out)
    say(event="done", step=manager.current_step())
    manager.shutdown(wait=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
