#!/usr/bin/env python3
"""From a rank's death to a working group again, through torch.distributed, three ways.

usage:

    PYTHONPATH=build/python build/tools/rr-run --enable-recovery -n 8 .venv/bin/python \\
        bench/torch/shrink_bench.py WAY --kill-file FILE [--port PORT]

The ranks all_reduce 64K floats in a loop; at step 50 the last rank writes
the monotonic time to FILE and SIGKILLs itself. Each survivor catches its
collective's error, then goes on, by WAY:

  shrink      ringreduce: ringreduce.torch.agree_on_failed() (the survivors
              agree who died) and dist.shrink_group(that list): no store,
              no new rendezvous (what ringreduce.dask.shrink_lost does);
  rendezvous  ringreduce: abort and destroy the group, then a new TCPStore
              on PORT (the survivors' rank 0 serves it) and a new
              init_process_group of the survivors: the way torch programs
              and torchft's reconfiguration go on today;
  gloo        the same with Gloo (which cannot shrink, nor abort: its group
              is only destroyed).

Each survivor then runs one all_reduce on the new group, checked, and prints
"rank R: detect D ms, reconfigure C ms, first all_reduce F ms: T ms from
the kill". Exit status 1 if a survivor failed (rr-run reports the victim's
death and, with --enable-recovery, lets the others finish).
"""

import argparse
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import ringreduce.torch  # noqa: F401  (registers "ringreduce")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("way", choices=["shrink", "rendezvous", "gloo"])
    p.add_argument("--kill-file", required=True)
    p.add_argument("--port", type=int, default=0, help="the new store's port (default: MASTER_PORT + 1)")
    args = p.parse_args()
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    victim = size - 1
    backend = "gloo" if args.way == "gloo" else "ringreduce"
    timeout = datetime.timedelta(seconds=30)
    dist.init_process_group(backend, init_method="env://", timeout=timeout)
    t = torch.ones(1 << 16)
    step = 0
    try:
        while True:
            if rank == victim and step == 50:
                with open(args.kill_file, "w") as f:
                    f.write(repr(time.monotonic()))
                os.kill(os.getpid(), signal.SIGKILL)
            dist.all_reduce(t)
            t.fill_(1)
            step += 1
            if step > 10000:
                print(f"rank {rank}: no collective failed", flush=True)
                return 1
    except RuntimeError:
        failed = time.monotonic()
    if args.way == "shrink":
        lost = ringreduce.torch.agree_on_failed()
        assert lost == [victim], lost
        dist.shrink_group(lost)
    else:
        if args.way == "rendezvous":
            ringreduce.torch.abort()
        dist.destroy_process_group()
        port = args.port or int(os.environ["MASTER_PORT"]) + 1
        store = dist.TCPStore(os.environ["MASTER_ADDR"], port, size - 1, rank == 0, timeout=timeout)
        dist.init_process_group(backend, store=store, rank=rank, world_size=size - 1, timeout=timeout)
    reconfigured = time.monotonic()
    x = torch.full((1 << 16,), float(dist.get_rank() + 1))
    dist.all_reduce(x)
    done = time.monotonic()
    n = size - 1
    if not torch.equal(x, torch.full_like(x, float(n * (n + 1) // 2))):
        print(f"rank {rank}: the first all_reduce gave {x[:4].tolist()}", flush=True)
        return 1
    with open(args.kill_file) as f:
        killed = float(f.read())
    print(f"rank {rank}: {args.way}: detect {1e3 * (failed - killed):.1f} ms, reconfigure "
          f"{1e3 * (reconfigured - failed):.1f} ms, first all_reduce {1e3 * (done - reconfigured):.1f} ms: "
          f"{1e3 * (done - killed):.1f} ms from the kill", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
