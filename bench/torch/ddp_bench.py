#!/usr/bin/python3
"""DistributedDataParallel step time: Gloo beside ringreduce, on a ~25 M parameter model.

The model is a stack of Linear layers (default 6 x 2048 x 2048 with biases and
ReLUs between: 25.2 M parameters, 100.7 MB of float32 gradients per step),
trained with SGD on random data. In each rank, in one launch, the same model
(same initial weights) is wrapped in DDP once per backend, on a process group
of that backend, and timed for the same steps. A third row, "no_sync", runs
the same steps inside DDP's no_sync() (no gradient all-reduce at all): the
compute-only step time, so step - no_sync is what the communication costs.

usage: bench/torch/ddp_bench.py [--ranks N] [--layers 6] [--width 2048] [--batch 16]
                                [--steps 20] [--warmup 3] [--backend NAME ...] [--json OUT]

  --ranks N     ranks to start with torch.multiprocessing (default 2); without
                it, under a launcher that sets RANK and WORLD_SIZE, this
                process is one rank
  --backend     torch-ringreduce, torch-gloo, no_sync (repeatable; default all)
  --threads T   torch intra-op threads per rank (default: cores / ranks, at least 1)

A step is zero_grad, forward, MSE loss, backward (DDP all-reduces the
gradient buckets during it), optimizer step. Step time: per step the slowest
rank's, then the mean and median over the timed steps.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from typing import Any, Dict, List, Optional

import torch
import torch.distributed as dist

import launch  # bench/torch/launch.py: rank startup shared by the benchmarks
import torch.nn as nn

BACKENDS = ("torch-ringreduce", "torch-gloo", "no_sync")


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int)
    p.add_argument("--backend", action="append", choices=BACKENDS, dest="backends")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--json")
    args = p.parse_args(argv)
    if args.steps < 1 or args.warmup < 0 or args.layers < 1 or args.width < 1 or args.batch < 1:
        p.error("need --steps, --layers, --width, --batch >= 1 and --warmup >= 0")
    args.backends = args.backends or list(BACKENDS)
    return args


def make_model(layers: int, width: int) -> nn.Module:
    stack: List[nn.Module] = []
    for i in range(layers):
        stack.append(nn.Linear(width, width))
        if i + 1 < layers:
            stack.append(nn.ReLU())
    return nn.Sequential(*stack)


def bench_rank(rank: int, size: int, args: argparse.Namespace, launcher: str) -> None:
    threads = args.threads or max(1, (os.cpu_count() or 1) // size)
    torch.set_num_threads(threads)
    timeout = datetime.timedelta(seconds=args.timeout)
    dist.init_process_group("gloo", rank=rank, world_size=size, timeout=timeout)  # coordination only

    groups: Dict[str, Any] = {}
    skipped: Dict[str, str] = {}
    for name in args.backends:
        if name == "torch-gloo":
            groups[name] = dist.new_group(backend="gloo", timeout=timeout)
        elif name == "torch-ringreduce":
            why = ""
            try:
                import ringreduce.torch  # noqa: F401  (registers the backend)
                dist.Backend("ringreduce")
            except (ImportError, ValueError) as e:
                why = f"the ringreduce torch backend is not available: {e}"
            whys: List[Any] = [None] * size
            dist.all_gather_object(whys, why)  # every rank must agree before new_group
            why = next((w for w in whys if w), "")
            if why:
                skipped[name] = why
            else:
                groups[name] = dist.new_group(backend="ringreduce", timeout=timeout)
        else:
            groups[name] = groups.get("torch-gloo") or dist.new_group(backend="gloo", timeout=timeout)

    torch.manual_seed(0)
    template = make_model(args.layers, args.width)
    params = sum(p.numel() for p in template.parameters())
    gen = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(args.batch, args.width, generator=gen)
    y = torch.randn(args.batch, args.width, generator=gen)

    results: Dict[str, Dict[str, Any]] = {}
    for name in args.backends:
        if name in skipped:
            continue
        model = make_model(args.layers, args.width)
        model.load_state_dict(template.state_dict())
        ddp = nn.parallel.DistributedDataParallel(model, process_group=groups[name])
        opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)

        def step() -> None:
            opt.zero_grad(set_to_none=False)
            nn.functional.mse_loss(ddp(x), y).backward()
            opt.step()

        times = []
        dist.barrier()
        for i in range(args.warmup + args.steps):
            start = time.perf_counter()
            if name == "no_sync":
                with ddp.no_sync():
                    step()
            else:
                step()
            if i >= args.warmup:
                times.append(time.perf_counter() - start)
        slowest = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        identical = True
        if name != "no_sync":  # no_sync replicas diverge by design
            flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
            replicas = [torch.empty_like(flat) for _ in range(size)]
            dist.all_gather(replicas, flat)
            identical = all(torch.equal(replicas[0], r) for r in replicas)
        ms = [t * 1e3 for t in slowest.tolist()]
        results[name] = {"mean_ms": statistics.fmean(ms), "median_ms": statistics.median(ms), "min_ms": min(ms),
                         "max_ms": max(ms), "replicas_identical": identical}
        del ddp, model, opt

    dist.destroy_process_group()
    if rank != 0:
        return

    grad_mb = params * 4 / 1e6
    print(f"# DDP step time: {size} ranks ({launcher}), torch {torch.__version__}, {threads} intra-op thread(s) "
          f"per rank, {os.cpu_count()} cores")
    print(f"# model: {args.layers} x Linear({args.width}, {args.width}), {params / 1e6:.1f} M parameters "
          f"({grad_mb:.1f} MB of float32 gradients per step), batch {args.batch}, SGD; "
          f"{args.steps} timed steps after {args.warmup} warm-ups")
    print("# step: the slowest rank's time per step; comm = mean - no_sync mean (the all-reduce's cost beyond "
          "compute); vs-gloo = mean / torch-gloo mean")
    for name, why in skipped.items():
        print(f"# {name} skipped: {why}")
    base = results.get("no_sync", {}).get("mean_ms")
    gloo = results.get("torch-gloo", {}).get("mean_ms")
    print(f"# {'backend':<17} {'mean':>9} {'median':>9} {'min':>9} {'max':>9} {'comm':>9} {'vs-gloo':>8}  replicas")
    print(f"# {'':<17} {'(ms)':>9} {'(ms)':>9} {'(ms)':>9} {'(ms)':>9} {'(ms)':>9}")
    for name, r in results.items():
        comm = f"{r['mean_ms'] - base:9.1f}" if base is not None and name != "no_sync" else f"{'-':>9}"
        vs = f"{r['mean_ms'] / gloo:8.2f}" if gloo else f"{'-':>8}"
        same = "-" if name == "no_sync" else ("identical" if r["replicas_identical"] else "DIFFER")
        print(f"  {name:<17} {r['mean_ms']:9.1f} {r['median_ms']:9.1f} {r['min_ms']:9.1f} {r['max_ms']:9.1f} "
              f"{comm} {vs}  {same}")
    if args.json:
        doc = {"tool": "bench/torch/ddp_bench.py", "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
               "launcher": launcher, "nranks": size, "threads_per_rank": threads, "cores": os.cpu_count(),
               "torch": torch.__version__, "layers": args.layers, "width": args.width, "parameters": params,
               "batch": args.batch, "steps": args.steps, "warmup": args.warmup, "skipped": skipped,
               "results": results}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"# wrote {args.json}")
    if not all(r["replicas_identical"] for r in results.values()):
        raise SystemExit(1)


def main() -> int:
    return launch.run(bench_rank, parse_args())


if __name__ == "__main__":
    sys.exit(main())
