#!/usr/bin/env python3
"""torch.distributed.all_reduce bus bandwidth: Gloo beside ringreduce, and ringreduce's C API.

In each rank, in one launch: a Gloo process group and a "ringreduce" process
group (ringreduce.torch), and a ringreduce.Comm (the NumPy binding of the C
API) reducing a NumPy view of the very same tensor. Every size runs through
each in turn on the same tensor, so the torch-ringreduce row against the
ringreduce row is the backend's overhead (c10d, the Work object, the worker
thread), and the torch-gloo row is PyTorch's own CPU backend.

usage: bench/torch/allreduce_bench.py [--ranks N] [-b 1K] [-e 256M] [-f 4] [-n 20] [-w 5]
                                      [-d float] [-o sum] [-c 1] [--backend NAME ...] [--json OUT]

  --ranks N     ranks to start with torch.multiprocessing (default 2); without
                it, under a launcher that sets RANK and WORLD_SIZE (rr-run,
                torchrun), this process is one rank
  -b, -e, -f    smallest and largest size in bytes (K, M, G suffixes) and the
                factor between sizes, as rr-bench and nccl-tests
  -n, -w        timed and warm-up calls per size and backend
  -d, -o        element type (float, double, half, bfloat16, int32, int64) and
                reduction (sum, prod, max, min)
  -c 0|1        check one call's result per size and backend (default 1)
  --backend     which to run (repeatable): ringreduce (the C API), torch-ringreduce,
                torch-gloo; default all three
  --timeout S   every group's timeout in seconds (default 600)
  --json OUT    rr-bench's JSON (bench/plot --in-place draws it)

The table has nccl-tests' columns. torch.distributed.all_reduce works in
place, so every row is an in-place one (the out-of-place fields are null).
time: the slowest rank's mean per call; algbw = size / time; busbw = algbw x
2(N-1)/N; bus/cpy = busbw / the single-thread memcpy bandwidth rank 0 measured
at the start; vs-rr = this row's busbw / the ringreduce (C API) row's. The
timed calls reduce a zero-filled tensor (in place, a sum of data would grow
every call); the check runs on a pattern before them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import torch
import torch.distributed as dist

import launch  # bench/torch/launch.py: rank startup shared by the benchmarks

DTYPES = {
    "float": torch.float32, "double": torch.float64, "half": torch.float16, "bfloat16": torch.bfloat16,
    "int32": torch.int32, "int64": torch.int64,
}
OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}
BACKENDS = ("ringreduce", "torch-ringreduce", "torch-gloo")
DESCRIPTIONS = {
    "ringreduce": "ringreduce.Comm.allreduce(IN_PLACE, tensor.numpy()): the C API's rrAllReduce, blocking, "
                  "through the NumPy binding",
    "torch-ringreduce": "torch.distributed.all_reduce on a process group of backend 'ringreduce' (ringreduce.torch)",
    "torch-gloo": "torch.distributed.all_reduce on a process group of backend 'gloo' (PyTorch's own, TCP)",
}


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def size_text(size: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}iB"
    return f"{size} B"


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=True)
    p.add_argument("--ranks", type=int)
    p.add_argument("-b", "--minbytes", type=parse_size, default=parse_size("1K"))
    p.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("256M"))
    p.add_argument("-f", "--stepfactor", type=int, default=4)
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup_iters", type=int, default=5)
    p.add_argument("-d", "--datatype", choices=sorted(DTYPES), default="float")
    p.add_argument("-o", "--op", choices=sorted(OPS), default="sum")
    p.add_argument("-c", "--check", type=int, choices=(0, 1), default=1)
    p.add_argument("--backend", action="append", choices=BACKENDS, dest="backends")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--json")
    args = p.parse_args(argv)
    if args.minbytes <= 0 or args.maxbytes < args.minbytes or args.stepfactor < 2:
        p.error("need 0 < -b <= -e and -f >= 2")
    if args.iters < 1 or args.warmup_iters < 0:
        p.error("need -n >= 1 and -w >= 0")
    args.backends = args.backends or list(BACKENDS)
    return args


def memcpy_gbps(nbytes: int = 256 << 20, repeats: int = 5) -> float:
    """Single-thread memcpy bandwidth (copied bytes per second), best of ``repeats``."""
    src = np.full(nbytes, 1, dtype=np.uint8)  # both filled: every page faulted in before timing
    dst = np.full(nbytes, 2, dtype=np.uint8)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return nbytes / best / 1e9


class Runner:
    """One way to all-reduce a tensor in place.

    ``prepare(tensor)`` returns the call to time (whatever it needs, such as a
    NumPy view, made once per size, outside the timing); None when the
    backend cannot run here, and ``why`` says why.
    """

    def __init__(self, name: str, prepare: Optional[Callable[[torch.Tensor], Callable[[], None]]], why: str = "",
                 close: Callable[[], None] = lambda: None):
        self.name, self.prepare, self.why, self.close = name, prepare, why, close


def make_runners(args: argparse.Namespace, rank: int, size: int, timeout: datetime.timedelta) -> List[Runner]:
    """The backends, made in the same order on every rank (each is a collective)."""
    runners = []
    op = OPS[args.op]
    for name in args.backends:
        if name == "torch-gloo":
            pg = dist.new_group(backend="gloo", timeout=timeout)
            runners.append(Runner(name, lambda t, pg=pg: lambda: dist.all_reduce(t, op=op, group=pg)))
        elif name == "torch-ringreduce":
            why = ""
            try:
                import ringreduce.torch  # noqa: F401  (registers the backend)
                dist.Backend("ringreduce")
            except (ImportError, ValueError) as e:
                why = f"the ringreduce torch backend is not available: {e}"
            # Every rank must agree before new_group (a collective).
            whys: List[Any] = [None] * size
            dist.all_gather_object(whys, why)
            why = next((w for w in whys if w), "")
            if why:
                runners.append(Runner(name, None, why))
                continue
            pg = dist.new_group(backend="ringreduce", timeout=timeout)
            runners.append(Runner(name, lambda t, pg=pg: lambda: dist.all_reduce(t, op=op, group=pg)))
        elif name == "ringreduce":
            import ringreduce
            if args.datatype == "bfloat16":
                runners.append(Runner(name, None, "NumPy has no bfloat16 (no view of the tensor to pass)"))
                continue
            box = [ringreduce.get_unique_id() if rank == 0 else None]
            dist.broadcast_object_list(box, src=0)
            comm = ringreduce.Comm.init_rank(size, box[0], rank, timeout=timeout.total_seconds())
            rr_op = args.op

            def prepare(t: torch.Tensor, comm=comm) -> Callable[[], None]:
                view = t.numpy()  # the tensor's own memory
                return lambda: comm.allreduce(ringreduce.IN_PLACE, view, rr_op)

            runners.append(Runner(name, prepare, close=comm.destroy))
    return runners


def expected_result(pattern: torch.Tensor, size: int, op: str) -> torch.Tensor:
    """The reduction of every rank's input, rank r's being pattern + r + 1 (small integers: exact)."""
    out = pattern + 1
    for r in range(1, size):
        x = pattern + (r + 1)
        out = {"sum": torch.add, "prod": torch.mul, "max": torch.maximum, "min": torch.minimum}[op](out, x)
    return out


def bench_rank(rank: int, size: int, args: argparse.Namespace, launcher: str) -> None:
    torch.set_num_threads(1)  # ranks share the machine's cores; the check's tensor ops need no more
    timeout = datetime.timedelta(seconds=args.timeout)
    dist.init_process_group("gloo", rank=rank, world_size=size, timeout=timeout)  # coordination only

    memcpy = memcpy_gbps() if rank == 0 else 0.0  # the others wait, idle, in the barrier
    dist.barrier()
    runners = make_runners(args, rank, size, timeout)
    dtype = DTYPES[args.datatype]
    elem = torch.tensor([], dtype=dtype).element_size()
    factor = 2.0 * (size - 1) / size

    rows: List[Dict[str, Any]] = []
    if rank == 0:
        print(f"# torch.distributed all_reduce benchmark: {size} ranks ({launcher}), torch {torch.__version__}, "
              f"{args.iters} iterations after {args.warmup_iters} warm-ups, check {'on' if args.check else 'off'}")
        for r in runners:
            print(f"# backend {r.name:<17} {DESCRIPTIONS[r.name]}")
            if r.prepare is None:
                print(f"# {r.name} skipped: {r.why}")
        print(f"# physical reference: single-thread memcpy {memcpy:.2f} GB/s (rank 0, 256 MiB, best of 5)")
        print("# time: the slowest rank's mean per call; algbw = size / time; busbw = algbw x 2(N-1)/N; "
              "bus/cpy = busbw / memcpy; vs-rr = busbw / ringreduce (C API) busbw")
        print("#")
        print(f"# {'':>50}{'in-place':>26}")
        print(f"# {'size':>10} {'count':>13} {'type':>9} {'redop':>7} {'root':>7} {'time':>8} {'algbw':>7} "
              f"{'busbw':>7} {'#wrong':>7} {'bus/cpy':>8} {'vs-rr':>6}  backend")
        print(f"# {'(B)':>10} {'(elements)':>13} {'':>9} {'':>7} {'':>7} {'(us)':>8} {'(GB/s)':>7} {'(GB/s)':>7}")

    nbytes = args.minbytes
    while nbytes <= args.maxbytes:
        count = max(1, nbytes // elem)
        nbytes = count * elem
        tensor = torch.empty(count, dtype=dtype)
        pattern = (torch.arange(count, dtype=torch.int32) % 7).to(dtype) if args.check else None
        capi_busbw = None
        for runner in runners:
            if runner.prepare is None:
                continue
            call = runner.prepare(tensor)
            wrong = 0
            if args.check:
                tensor.copy_(pattern + (rank + 1))
                call()
                wrong = int((tensor != expected_result(pattern, size, args.op)).sum())
            tensor.zero_()
            for _ in range(args.warmup_iters):
                call()
            dist.barrier()
            start = time.perf_counter()
            for _ in range(args.iters):
                call()
            elapsed = (time.perf_counter() - start) / args.iters
            # The slowest rank's mean, and every rank's wrong elements.
            stats = torch.tensor([elapsed, float(wrong)], dtype=torch.float64)
            dist.all_reduce(stats[:1], op=dist.ReduceOp.MAX)
            dist.all_reduce(stats[1:], op=dist.ReduceOp.SUM)
            seconds, wrong = float(stats[0]), int(stats[1])
            algbw = nbytes / seconds / 1e9
            busbw = algbw * factor
            if runner.name == "ringreduce":
                capi_busbw = busbw
            if rank == 0:
                vs = f"{busbw / capi_busbw:6.2f}" if capi_busbw else f"{'-':>6}"
                print(f"  {nbytes:>10} {count:>13} {args.datatype:>9} {args.op:>7} {-1:>7} {seconds * 1e6:>8.1f} "
                      f"{algbw:>7.3f} {busbw:>7.3f} {wrong:>7} {busbw / memcpy:>8.3f} {vs}  {runner.name}",
                      flush=True)
                rows.append({
                    "backend": runner.name, "collective": "allreduce", "size": nbytes, "count": count,
                    "type": args.datatype, "redop": args.op, "root": -1, "bus_factor": factor,
                    "out_of_place": None,
                    "in_place": {"time_us": seconds * 1e6, "algbw_GBps": algbw, "busbw_GBps": busbw, "wrong": wrong},
                    "busbw_over_memcpy": busbw / memcpy,
                    "busbw_over_ringreduce": busbw / capi_busbw if capi_busbw else None,
                })
        del tensor, pattern, call
        nbytes *= args.stepfactor

    for runner in runners:
        runner.close()
    dist.destroy_process_group()

    if rank == 0:
        for name in [r.name for r in runners if r.prepare is not None]:
            mine = [r["in_place"]["busbw_GBps"] for r in rows if r["backend"] == name]
            avg = sum(mine) / len(mine)
            print(f"# Avg bus bandwidth    : {avg:.3f} GB/s  ({avg / memcpy:.3f} x memcpy)  {name}")
        wrong = sum(r["in_place"]["wrong"] for r in rows)
        print(f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}")
        if args.json:
            import ringreduce
            doc = {
                "tool": "bench/torch/allreduce_bench.py",
                "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
                "launcher": launcher, "nranks": size, "iters": args.iters, "warmup_iters": args.warmup_iters,
                "check": bool(args.check), "memcpy_GBps": memcpy,
                "libraries": {"torch": f"torch {torch.__version__}",
                              "ringreduce": f"ringreduce {ringreduce.__version__}"},
                "backends": {r.name: DESCRIPTIONS[r.name] if r.prepare else f"skipped: {r.why}" for r in runners},
                "rows": rows,
            }
            with open(args.json, "w") as f:
                json.dump(doc, f, indent=1)
            print(f"# wrote {args.json}")
        if wrong:
            raise SystemExit(1)


def main() -> int:
    return launch.run(bench_rank, parse_args())


if __name__ == "__main__":
    sys.exit(main())
