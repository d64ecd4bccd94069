#!/usr/bin/env python3
"""A worker killed mid-job under ringreduce.dask.run: how soon each rank's future says so.

On a LocalCluster (worker processes under nannies), each round runs a job
whose ranks all-reduce a float in a loop, waits until every rank has said
(through the job's results channel) that it is in the loop, SIGKILLs one
worker's process (the victim rank drawn uniformly), and times, from the
kill, when the lost rank's future failed (ringreduce.dask.WorkerLost, from
the scheduler's plugin once the scheduler has removed the worker) and when
the last of the other ranks' futures failed (the backend's error for the
departed peer). The nanny restarts the worker before the next round.

usage: bench/dask/lost_worker.py [--workers 3] [--kills 10] [--backend ringreduce gloo]
                                 [--timeout 30] [--seed 1] [--json OUT]

Each backend runs its rounds on a cluster of its own, in turn; --timeout
is the job's (the process group's) timeout, the longest a survivor waits.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import signal
import statistics
import sys
import threading
import time


def _all_reduce_until_peers_fail(seconds: float) -> str:
    import torch
    import torch.distributed as dist

    import ringreduce.dask
    ringreduce.dask.publish("running")
    end = time.monotonic() + seconds
    t = torch.ones(1)
    while time.monotonic() < end:
        dist.all_reduce(t)
        t.fill_(1)
    return "no peer failed"


def _round(client, backend: str, timeout: float, victim: int) -> dict:
    import distributed

    import ringreduce.dask
    pids = client.run(os.getpid)
    done = {}
    recorded = threading.Condition()
    with ringreduce.dask.Results(client) as results:
        futures = ringreduce.dask.run(client, _all_reduce_until_peers_fail, timeout + 60, backend=backend,
                                      timeout=timeout, results=results)
        results.wait_messages(1, timeout=120)
        address = ringreduce.dask.worker_ranks(client)[victim][0]

        def finished(rank):
            def callback(_future):
                with recorded:
                    done[rank] = time.monotonic()
                    recorded.notify_all()
            return callback

        start = time.monotonic()
        for rank, future in enumerate(futures):
            future.add_done_callback(finished(rank))
        os.kill(pids[address], signal.SIGKILL)
        distributed.wait(futures, timeout=timeout + 120)
        # A done callback runs in a thread of its own: wait() can return
        # before the last one has recorded its time.
        with recorded:
            if not recorded.wait_for(lambda: len(done) == len(futures), timeout=30):
                raise RuntimeError(f"done callbacks of ranks {sorted(set(range(len(futures))) - set(done))} "
                                   "did not run within 30 s of their futures finishing")
        lost = futures[victim].exception()
        if not isinstance(lost, ringreduce.dask.WorkerLost):
            raise RuntimeError(f"rank {victim}'s future: {lost!r}, not WorkerLost")
        others = [r for r in range(len(futures)) if r != victim]
        errors = [type(futures[r].exception()).__name__ for r in others]
        del futures, lost
    return {"victim": victim, "lost_s": done[victim] - start,
            "others_s": max(done[r] for r in others) - start, "others_errors": errors}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--backend", nargs="+", default=["ringreduce", "gloo"])
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json")
    args = parser.parse_args()

    import distributed
    import ringreduce.torch  # noqa: F401  registers the backend

    rng = random.Random(args.seed)
    out = {}
    print(f"# {args.workers} workers, {args.kills} kills per backend, job timeout {args.timeout:g} s, "
          f"seed {args.seed}")
    print(f"{'backend':>12} {'kills':>5} {'lost rank: median/max (s)':>26} {'other ranks: median/max (s)':>28}")
    for backend in args.backend:
        rounds = []
        with distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                      # the workers log each failed task: here every round fails them
                                      dashboard_address=":0", silence_logs=logging.CRITICAL) as cluster, \
                distributed.Client(cluster) as client:
            for _ in range(args.kills):
                client.wait_for_workers(args.workers, timeout=120)
                rounds.append(_round(client, backend, args.timeout, rng.randrange(args.workers)))
        lost = [r["lost_s"] for r in rounds]
        others = [r["others_s"] for r in rounds]
        print(f"{backend:>12} {len(rounds):>5} {statistics.median(lost):>12.2f} / {max(lost):<11.2f} "
              f"{statistics.median(others):>13.2f} / {max(others):<12.2f}", flush=True)
        out[backend] = rounds
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rounds": out}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
