#!/usr/bin/env python3
"""What torch's flight recorder costs a failure: the time of its trace dump.

usage:

    PYTHONPATH=build/python build/tools/rr-run -n 2 .venv/bin/python bench/torch/fr_dump.py \\
        [BACKEND] [--dumps N]

On a timeout or a failed peer, the recorder's abort hook writes its trace
(with stack traces) before the failing call raises, once per process. This
times that dump, `torch._C._distributed_c10d._dump_fr_trace`, N times in a
row after one all_reduce on BACKEND (default "ringreduce"): the first dump
of a process is the one a failure pays. Every rank prints its seconds per
dump.
"""

import argparse
import time

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("backend", nargs="?", default="ringreduce")
    parser.add_argument("--dumps", type=int, default=3)
    args = parser.parse_args()
    if args.backend == "ringreduce":
        import ringreduce.torch  # noqa: F401  (registers the backend)
    dist.init_process_group(args.backend)
    dist.all_reduce(torch.ones(1000))
    recorder = torch._C._distributed_c10d
    for i in range(args.dumps):
        start = time.monotonic()
        recorder._dump_fr_trace(backend=args.backend)
        print(f"rank {dist.get_rank()}: dump {i}: {time.monotonic() - start:.3f} s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
