#!/usr/bin/env python3
"""A group made, used and destroyed again and again in the same processes.

usage:

    PYTHONPATH=build/python build/tools/rr-run -n 3 .venv/bin/python bench/torch/made_again.py \\
        BACKEND {store,env} [--rounds N] [--late SECONDS]

Each round: init_process_group(BACKEND), an all_reduce checked against the
sum, destroy_process_group. "store": one TCPStore made before the first
round and passed to every init_process_group (it outlives each group; torch
names the groups as before, so it holds the last round's keys). "env":
init_method="env://", a new TCPStore each round on the same MASTER_PORT.
--late makes rank 0 start each destroy_process_group that many seconds after
its all_reduce returned (the other ranks then start the next round first).
Every rank prints, per round, "ok" or the first line of its error, and stops
at the first error; the exit status is 1 then.
"""

import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import ringreduce.torch  # noqa: F401  (registers "ringreduce")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("backend")
    p.add_argument("mode", choices=["store", "env"])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--late", type=float, default=0.0)
    args = p.parse_args()
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    timeout = datetime.timedelta(seconds=10)
    store = None
    if args.mode == "store":
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), size, rank == 0,
                              timeout=timeout)
    for i in range(args.rounds):
        try:
            if store is not None:
                dist.init_process_group(args.backend, store=store, rank=rank, world_size=size, timeout=timeout)
            else:
                dist.init_process_group(args.backend, init_method="env://", timeout=timeout)
            t = torch.full((5,), float(rank + i))
            dist.all_reduce(t)
            want = float(sum(range(size)) + i * size)
            if not torch.equal(t, torch.full((5,), want)):
                raise AssertionError(f"all_reduce gave {t.tolist()}, not {want}")
            if rank == 0 and args.late:
                time.sleep(args.late)
            dist.destroy_process_group()
        except Exception as e:
            print(f"rank {rank} round {i}: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
            return 1
        print(f"rank {rank} round {i}: ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
