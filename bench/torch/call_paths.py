#!/usr/bin/env python3
"""Time per allreduce call on one path alone: where a small call's time goes.

usage (one path per launch, so that no other communicator's threads compete):

    PYTHONPATH=build/python build/tools/rr-run -n 2 .venv/bin/python bench/torch/call_paths.py PATH [--sizes LIST]

PATH is one of
  blocking   ringreduce.Comm.allreduce(IN_PLACE, v): the C API's blocking call
  async      ringreduce.Comm.iallreduce(IN_PLACE, v).wait(): the non-blocking call
  torch      torch.distributed.all_reduce(t) on backend "ringreduce"
  op         torch.ops.ringreduce.all_reduce_(t, group name): the dispatcher
             operator for torch.compile'd inference, on the same group
  gloo       torch.distributed.all_reduce(t) on backend "gloo" (the peer)
  fake       torch.distributed.all_reduce(t) on torch's "fake" backend, which
             completes at once without moving data: the dispatcher's floor
  burst      16 iallreduce calls on 16 buffers, then their waits, the last
             first (a thread that waits for the last of calls the worker
             runs): the time printed is the burst's over 16
  torch-burst  the same through dist.all_reduce(t, async_op=True)
  split      the torch call's issue (async_op=True) and its wait() timed apart,
             on backend "ringreduce" and then "gloo" (two groups); 1 KiB
             unless --sizes says otherwise

--sizes LIST  comma-separated sizes in bytes (K, M suffixes; a multiple of 4):
              default 1K,64K,1M,4M,16M (split: 1K). 8 is the per-call
              overhead (2 floats); -n 1 under rr-run is a 1-rank group.

float32 sum in place on the same tensor's memory (v = t.numpy()); rank 0
prints its mean per call after a warm-up (200 calls up to 1 MiB, 40 above;
2000 calls up to 1 KiB), and the 10th, 50th and 90th percentiles of the
calls timed one by one (on a noisy machine the median says more).
"""

import datetime
import sys
import time

import torch

SIZES = [1 << 10, 1 << 16, 1 << 20, 4 << 20, 16 << 20]
BURST = 16  # calls per burst (burst, torch-burst)


def parse_sizes(text: str) -> list:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    out = []
    for item in text.split(","):
        item = item.strip().upper().rstrip("B")
        n = int(item[:-1]) * units[item[-1]] if item and item[-1] in units else int(item)
        if n < 4 or n % 4:
            raise SystemExit(f"call_paths.py: size {item} is not a positive multiple of 4 bytes")
        out.append(n)
    return out


def iterations(nbytes: int) -> int:
    return 2000 if nbytes <= 1 << 10 else 200 if nbytes <= 1 << 20 else 40


def split_issue_and_wait(sizes: list) -> None:
    import torch.distributed as dist
    import ringreduce.torch  # noqa: F401
    dist.init_process_group("ringreduce", timeout=datetime.timedelta(seconds=120))
    gloo = dist.new_group(backend="gloo")
    for nbytes, (name, group) in [(b, g) for b in sizes for g in (("ringreduce", None), ("gloo", gloo))]:
        t = torch.zeros(nbytes // 4)
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
            print(f"{name:10s} {dist.get_world_size()} ranks {nbytes:>8d} B  issue {issue / n * 1e6:.1f} us  "
                  f"wait {wait / n * 1e6:.1f} us", flush=True)
        dist.barrier()
    dist.destroy_process_group()


def main() -> int:
    args = sys.argv[1:]
    path = args[0] if args else ""
    sizes = None
    if len(args) == 3 and args[1] == "--sizes":
        sizes = parse_sizes(args[2])
    elif len(args) != 1:
        path = ""
    torch.set_num_threads(1)
    if path == "split":
        split_issue_and_wait(sizes or [1 << 10])
        return 0
    if path in ("torch", "op", "gloo", "fake", "torch-burst"):
        import torch.distributed as dist
        if path in ("torch", "op", "torch-burst"):
            import ringreduce.torch  # noqa: F401
        if path == "fake":
            import os
            from torch.testing._internal.distributed.fake_pg import FakeStore
            dist.init_process_group("fake", store=FakeStore(), rank=int(os.environ["RANK"]),
                                    world_size=int(os.environ["WORLD_SIZE"]))
        else:
            dist.init_process_group("gloo" if path == "gloo" else "ringreduce",
                                    timeout=datetime.timedelta(seconds=120))
        rank, barrier = dist.get_rank(), dist.barrier
    elif path in ("blocking", "async", "burst"):
        import ringreduce
        comm = ringreduce.Comm.from_env(timeout=120)
        rank, barrier = comm.rank, comm.barrier
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for nbytes in sizes or SIZES:
        t = torch.zeros(nbytes // 4)
        v = t.numpy()
        if path == "blocking":
            call = lambda: comm.allreduce(ringreduce.IN_PLACE, v)  # noqa: E731
        elif path == "async":
            call = lambda: comm.iallreduce(ringreduce.IN_PLACE, v).wait()  # noqa: E731
        elif path == "op":
            name = dist.group.WORLD.group_name
            call = lambda: torch.ops.ringreduce.all_reduce_(t, name)  # noqa: E731
        elif path == "burst":
            buffers = [torch.zeros(nbytes // 4).numpy() for _ in range(BURST)]
            call = lambda: [r.wait() for r in reversed([comm.iallreduce(ringreduce.IN_PLACE, b) for b in buffers])]  # noqa: E731
        elif path == "torch-burst":
            tensors = [torch.zeros(nbytes // 4) for _ in range(BURST)]
            call = lambda: [w.wait() for w in reversed([dist.all_reduce(x, async_op=True) for x in tensors])]  # noqa: E731
        else:
            call = lambda: dist.all_reduce(t)  # noqa: E731
        per = BURST if path.endswith("burst") else 1
        iters = max(10, iterations(nbytes) // per)
        for _ in range(10):
            call()
        barrier()
        times = []
        for _ in range(iters):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        seconds = sum(times) / iters / per
        times.sort()
        p10, p50, p90 = (times[iters * k // 10] * 1e6 / per for k in (1, 5, 9))
        if rank == 0:
            print(f"{path:9s} {nbytes:>10d} B {seconds * 1e6:10.1f} us  busbw {nbytes / seconds / 1e9:6.2f} GB/s  "
                  f"p10 {p10:.1f}  p50 {p50:.1f}  p90 {p90:.1f} us", flush=True)
    barrier()
    if path in ("torch", "op", "gloo", "fake", "torch-burst"):
        dist.destroy_process_group()
    else:
        comm.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
