#!/usr/bin/python3
"""Time per allreduce call on one path alone: where a small call's time goes.

usage (one path per launch, so that no other communicator's threads compete):

    PYTHONPATH=build/python build/tools/rr-run -n 2 /usr/bin/python3 bench/torch/call_paths.py PATH

PATH is one of
  blocking   ringreduce.Comm.allreduce(IN_PLACE, v): the C API's blocking call
  async      ringreduce.Comm.iallreduce(IN_PLACE, v).wait(): the non-blocking call
  torch      torch.distributed.all_reduce(t) on backend "ringreduce"
  split      the torch call's issue (async_op=True) and its wait() timed apart,
             1 KiB, on backend "ringreduce" and then "gloo" (two groups)

float32 sum in place on the same tensor's memory (v = t.numpy()); rank 0
prints its mean per call after a warm-up (200 calls up to 1 MiB, 40 above).
"""

import datetime
import sys
import time

import torch

SIZES = [1 << 10, 1 << 16, 1 << 20, 4 << 20, 16 << 20]


def split_issue_and_wait() -> None:
    import torch.distributed as dist
    import ringreduce.torch  # noqa: F401
    dist.init_process_group("ringreduce", timeout=datetime.timedelta(seconds=120))
    for name, group in (("ringreduce", None), ("gloo", dist.new_group(backend="gloo"))):
        t = torch.zeros(256)
        for _ in range(20):
            dist.all_reduce(t, group=group)
        dist.barrier()
        issue = wait = 0.0
        n = 300
        for _ in range(n):
            a = time.perf_counter()
            work = dist.all_reduce(t, group=group, async_op=True)
            b = time.perf_counter()
            work.wait()
            c = time.perf_counter()
            issue += b - a
            wait += c - b
        if dist.get_rank() == 0:
            print(f"{name:10s} {dist.get_world_size()} ranks  issue {issue / n * 1e6:.1f} us  "
                  f"wait {wait / n * 1e6:.1f} us", flush=True)
        dist.barrier()
    dist.destroy_process_group()


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else ""
    torch.set_num_threads(1)
    if path == "split":
        split_issue_and_wait()
        return 0
    if path == "torch":
        import torch.distributed as dist
        import ringreduce.torch  # noqa: F401
        dist.init_process_group("ringreduce", timeout=datetime.timedelta(seconds=120))
        rank, barrier = dist.get_rank(), dist.barrier
    elif path in ("blocking", "async"):
        import ringreduce
        comm = ringreduce.Comm.from_env(timeout=120)
        rank, barrier = comm.rank, comm.barrier
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for nbytes in SIZES:
        t = torch.zeros(nbytes // 4)
        v = t.numpy()
        if path == "blocking":
            call = lambda: comm.allreduce(ringreduce.IN_PLACE, v)  # noqa: E731
        elif path == "async":
            call = lambda: comm.iallreduce(ringreduce.IN_PLACE, v).wait()  # noqa: E731
        else:
            call = lambda: dist.all_reduce(t)  # noqa: E731
        iters = 200 if nbytes <= 1 << 20 else 40
        for _ in range(10):
            call()
        barrier()
        start = time.perf_counter()
        for _ in range(iters):
            call()
        seconds = (time.perf_counter() - start) / iters
        if rank == 0:
            print(f"{path:9s} {nbytes:>10d} B {seconds * 1e6:10.1f} us  busbw {nbytes / seconds / 1e9:6.2f} GB/s",
                  flush=True)
    barrier()
    if path == "torch":
        dist.destroy_process_group()
    else:
        comm.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
