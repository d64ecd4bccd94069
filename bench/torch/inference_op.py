#!/usr/bin/env python3
"""The inference all-reduce operator beside DeepSpeed's, in one launch.

usage:

    PYTHONPATH=build/python:DEEPSPEED DS_ACCELERATOR=cpu build/tools/rr-run -n 2 -x LOCAL_SIZE=2 \\
        .venv/bin/python bench/torch/inference_op.py [--sizes LIST] [--dtypes float32,bfloat16]

DEEPSPEED: a folder where DeepSpeed is installed (``pip install --target``;
the project's environment does not carry it). Rank 0 prints, for each size
and dtype, the wall time and the process's CPU time (every thread) per call
of ``torch.ops.ringreduce.all_reduce_`` (the default group, "ringreduce")
and of ``torch.ops.deepspeed.inference_all_reduce_`` (DeepSpeed's
shared-memory all-reduce on its CPU accelerator, over the same processes),
in place, SUM, timed alternately in rounds so that both see the same
machine. Each result is checked: DeepSpeed's op returns dtypes it does not
handle unreduced without a word.

--sizes   comma-separated sizes in bytes (K, M suffixes): default 8,1K,16K,256K,1M
--dtypes  default float32,bfloat16
--rounds  alternations per size and dtype (default 5); calls per round:
          2000 up to 16 KiB, 400 up to 256 KiB, 100 above
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import time

import torch
import torch.distributed as dist

import ringreduce.torch  # noqa: F401  (registers the backend and its operator)


def parse_sizes(text: str) -> list:
    units = {"K": 1 << 10, "M": 1 << 20}
    out = []
    for item in text.split(","):
        item = item.strip().upper().rstrip("B")
        out.append(int(item[:-1]) * units[item[-1]] if item[-1] in units else int(item))
    return out


def calls_per_round(nbytes: int) -> int:
    return 2000 if nbytes <= 16 << 10 else 400 if nbytes <= 256 << 10 else 100


def timed(call, n: int) -> tuple:
    """(wall, cpu) seconds per call over n calls."""
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        call()
    return (time.perf_counter() - w0) / n, (time.process_time() - c0) / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="8,1K,16K,256K,1M")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    torch.set_num_threads(1)
    dist.init_process_group("ringreduce", timeout=datetime.timedelta(seconds=120))
    import deepspeed.comm as dscomm  # after: DeepSpeed takes the default group as it is

    dscomm.init_distributed(dist_backend="gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    group = dist.group.WORLD.group_name
    ours = torch.ops.ringreduce.all_reduce_
    theirs = torch.ops.deepspeed.inference_all_reduce_
    if rank == 0:
        print(f"{size} ranks; µs per call, median of {args.rounds} rounds (wall / CPU of the process)", flush=True)
        print(f"{'dtype':9s} {'bytes':>8s} {'ringreduce wall':>16s} {'cpu':>7s} {'deepspeed wall':>15s} {'cpu':>7s}",
              flush=True)
    for dtype in (getattr(torch, d) for d in args.dtypes.split(",")):
        for nbytes in parse_sizes(args.sizes):
            n = max(1, nbytes // torch.tensor([], dtype=dtype).element_size())
            t = torch.ones(n, dtype=dtype)
            # Checked first: every rank's ones sum to the group size.
            for name, op in (("ringreduce", lambda: ours(t, group)), ("deepspeed", lambda: theirs(t))):
                t.fill_(1)
                op()
                if not torch.equal(t, torch.full_like(t, size)):
                    raise SystemExit(f"inference_op.py: {name}'s all-reduce of {dtype} gave {t[:4].tolist()}, "
                                     f"expected {size}")
            calls = calls_per_round(nbytes)
            results = {"ringreduce": [], "deepspeed": []}
            for _ in range(args.rounds):
                for name, op in (("ringreduce", lambda: ours(t, group)), ("deepspeed", lambda: theirs(t))):
                    t.fill_(0)  # zeros stay zeros: no overflow in bf16 over many calls
                    dist.barrier()
                    results[name].append(timed(op, calls))
            if rank == 0:
                cells = []
                for name in ("ringreduce", "deepspeed"):
                    cells.append(statistics.median(w for w, _ in results[name]) * 1e6)
                    cells.append(statistics.median(c for _, c in results[name]) * 1e6)
                print(f"{str(dtype).replace('torch.', ''):9s} {nbytes:>8d} {cells[0]:16.1f} {cells[1]:7.1f} "
                      f"{cells[2]:15.1f} {cells[3]:7.1f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
