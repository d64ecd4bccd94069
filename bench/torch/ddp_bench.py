#!/usr/bin/env python3
"""DistributedDataParallel step time: Gloo beside ringreduce, on a ~25 M parameter model.

The model is a stack of Linear layers (default 6 x 2048 x 2048 with biases and
ReLUs between: 25.2 M parameters, 100.7 MB of float32 gradients per step),
trained with SGD on random data. In each rank, in one launch, the same model
(same initial weights) is wrapped in DDP once per backend, on a process group
of that backend, and timed for the same steps. A third row, "no_sync", runs
the same steps inside DDP's no_sync() (no gradient all-reduce at all): the
compute-only step time, so step - no_sync is what the communication costs.
"noop-hook" runs the same steps under DDP with a communication hook that
returns each bucket at once (a completed Future of bucket.buffer()): DDP's
bucketing and hooks without any all-reduce, so step - noop-hook is what the
backend's all-reduce adds to a DDP step. "capi" times ringreduce's C API
(ringreduce.Comm.allreduce on a NumPy float32 array, in place) on the
gradient bytes in the same launch: as one call ("capi") and as one call per
DDP bucket, in the sizes the no-op hook saw ("capi-buckets"; one call of
everything when noop-hook did not run).

usage: bench/torch/ddp_bench.py [--ranks N] [--layers 6] [--width 2048] [--batch 16]
                                [--steps 20] [--warmup 3] [--rounds 1] [--bucket-view]
                                [--backend NAME ...] [--json OUT]

  --ranks N     ranks to start with torch.multiprocessing (default 2); without
                it, under a launcher that sets RANK and WORLD_SIZE, this
                process is one rank
  --backend     torch-ringreduce, torch-gloo, noop-hook, no_sync, capi
                (repeatable; default all)
  --threads T   torch intra-op threads per rank (default: cores / ranks, at least 1)
  --rounds R    run every backend R times in turn (a fresh DDP each time,
                --warmup then --steps); the figures pool all rounds' timed
                steps, so slow drift of a shared machine hits every row alike
  --bucket-view DDP(..., gradient_as_bucket_view=True)

A step is zero_grad, forward, MSE loss, backward (DDP all-reduces the
gradient buckets during it), optimizer step. Step time: per step the slowest
rank's, then the mean and median over the timed steps. capi rows: per
repetition the slowest rank's time for the call(s), same statistics.
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

BACKENDS = ("torch-ringreduce", "torch-gloo", "noop-hook", "no_sync", "capi")
NO_REPLICA_CHECK = ("no_sync", "noop-hook", "capi", "capi-buckets")  # diverge by design / no model


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--bucket-view", action="store_true")
    p.add_argument("--backend", action="append", choices=BACKENDS, dest="backends")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--json")
    args = p.parse_args(argv)
    if min(args.steps, args.layers, args.width, args.batch, args.rounds) < 1 or args.warmup < 0:
        p.error("need --steps, --layers, --width, --batch, --rounds >= 1 and --warmup >= 0")
    args.backends = args.backends or list(BACKENDS)
    return args


def make_model(layers: int, width: int) -> nn.Module:
    stack: List[nn.Module] = []
    for i in range(layers):
        stack.append(nn.Linear(width, width))
        if i + 1 < layers:
            stack.append(nn.ReLU())
    return nn.Sequential(*stack)


def noop_hook(state, bucket):  # no annotations: DDP checks them, and this file's are strings
    """A DDP communication hook that communicates nothing: the bucket, at once.

    ``state`` (a dict) records each bucket's size in bytes by its index: what
    DDP's (rebuilt) buckets are, for the capi-buckets row."""
    buf = bucket.buffer()
    state[bucket.index()] = buf.numel() * buf.element_size()
    fut = torch.futures.Future()
    fut.set_result(buf)
    return fut


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
        elif name == "capi":
            import ringreduce
            box = [ringreduce.get_unique_id() if rank == 0 else None]
            dist.broadcast_object_list(box, src=0)
            groups[name] = ringreduce.Comm.init_rank(size, box[0], rank, timeout=timeout.total_seconds())
        else:  # no_sync, noop-hook: a Gloo group that DDP uses only to broadcast the initial weights
            groups[name] = groups.get("torch-gloo") or dist.new_group(backend="gloo", timeout=timeout)

    torch.manual_seed(0)
    template = make_model(args.layers, args.width)
    params = sum(p.numel() for p in template.parameters())
    gen = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(args.batch, args.width, generator=gen)
    y = torch.randn(args.batch, args.width, generator=gen)

    times_of: Dict[str, List[float]] = {}
    identical_of: Dict[str, bool] = {}
    bucket_bytes: List[int] = []  # DDP's buckets (bytes) in the order DDP reduces them, as the no-op hook saw them
    seen_buckets: Dict[int, int] = {}

    def run_ddp(name: str) -> None:
        model = make_model(args.layers, args.width)
        model.load_state_dict(template.state_dict())
        ddp = nn.parallel.DistributedDataParallel(model, process_group=groups[name],
                                                  gradient_as_bucket_view=args.bucket_view)
        if name == "noop-hook":
            seen_buckets.clear()
            ddp.register_comm_hook(seen_buckets, noop_hook)
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
        times_of.setdefault(name, []).extend(times)
        if name not in NO_REPLICA_CHECK:
            flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
            replicas = [torch.empty_like(flat) for _ in range(size)]
            dist.all_gather(replicas, flat)
            same = all(torch.equal(replicas[0], r) for r in replicas)
            identical_of[name] = identical_of.get(name, True) and same
        if name == "noop-hook" and sum(seen_buckets.values()) == params * 4:
            bucket_bytes[:] = [seen_buckets[i] for i in sorted(seen_buckets)]
        del ddp, model, opt

    def run_capi(comm: Any) -> None:
        import numpy as np
        import ringreduce
        grad = np.zeros(params, dtype=np.float32)  # zeros: in place, the sums stay 0
        pieces, at = [], 0
        for b in bucket_bytes or [grad.nbytes]:
            pieces.append(grad[at // 4:(at + b) // 4])
            at += b
        for label, bufs in (("capi", [grad]), ("capi-buckets", pieces)):
            times = []
            dist.barrier()
            for i in range(args.warmup + args.steps):
                start = time.perf_counter()
                for buf in bufs:
                    comm.allreduce(ringreduce.IN_PLACE, buf)
                if i >= args.warmup:
                    times.append(time.perf_counter() - start)
            times_of.setdefault(label, []).extend(times)

    order = [n for n in args.backends if n not in skipped]
    if "capi" in order:  # after the no-op hook's DDP, so that DDP's bucket sizes are known
        order.remove("capi")
        order.append("capi")
    for _ in range(args.rounds):
        for name in order:
            run_capi(groups[name]) if name == "capi" else run_ddp(name)
    if "capi" in groups:
        groups["capi"].destroy()

    results: Dict[str, Dict[str, Any]] = {}
    for name, times in times_of.items():  # same keys, same order on every rank
        slowest = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        ms = [t * 1e3 for t in slowest.tolist()]
        results[name] = {"mean_ms": statistics.fmean(ms), "median_ms": statistics.median(ms), "min_ms": min(ms),
                         "max_ms": max(ms), "replicas_identical": identical_of.get(name, True)}
    dist.destroy_process_group()
    if rank != 0:
        return

    grad_mb = params * 4 / 1e6
    print(f"# DDP step time: {size} ranks ({launcher}), torch {torch.__version__}, {threads} intra-op thread(s) "
          f"per rank, {os.cpu_count()} cores")
    print(f"# model: {args.layers} x Linear({args.width}, {args.width}), {params / 1e6:.1f} M parameters "
          f"({grad_mb:.1f} MB of float32 gradients per step), batch {args.batch}, SGD, "
          f"gradient_as_bucket_view={args.bucket_view}; {args.rounds} round(s) of {args.steps} timed steps after "
          f"{args.warmup} warm-ups")
    if bucket_bytes:
        print(f"# DDP buckets (bytes, as the no-op hook saw them after the rebuild): "
              f"{','.join(str(b) for b in bucket_bytes)}")
    print("# step: the slowest rank's time per step; -no_sync / -noop = mean - that row's mean (comm's cost); "
          "vs-gloo = mean / torch-gloo mean; capi rows: the C API all-reduce of the gradient bytes alone")
    for name, why in skipped.items():
        print(f"# {name} skipped: {why}")
    base = results.get("no_sync", {}).get("mean_ms")
    noop = results.get("noop-hook", {}).get("mean_ms")
    gloo = results.get("torch-gloo", {}).get("mean_ms")
    ddp_rows = ("torch-ringreduce", "torch-gloo")
    print(f"# {'backend':<17} {'mean':>9} {'median':>9} {'min':>9} {'max':>9} {'-no_sync':>9} {'-noop':>9} "
          f"{'vs-gloo':>8}  replicas")
    print(f"# {'':<17} {'(ms)':>9} {'(ms)':>9} {'(ms)':>9} {'(ms)':>9} {'(ms)':>9} {'(ms)':>9}")
    for name, r in results.items():
        d1 = f"{r['mean_ms'] - base:9.1f}" if base is not None and name in ddp_rows + ("noop-hook",) else f"{'-':>9}"
        d2 = f"{r['mean_ms'] - noop:9.1f}" if noop is not None and name in ddp_rows else f"{'-':>9}"
        vs = f"{r['mean_ms'] / gloo:8.2f}" if gloo and name not in ("capi", "capi-buckets") else f"{'-':>8}"
        same = "identical" if r["replicas_identical"] else "DIFFER"
        same = "-" if name in NO_REPLICA_CHECK else same
        print(f"  {name:<17} {r['mean_ms']:9.1f} {r['median_ms']:9.1f} {r['min_ms']:9.1f} {r['max_ms']:9.1f} "
              f"{d1} {d2} {vs}  {same}")
    rr = results.get("torch-ringreduce", {}).get("mean_ms")
    capi = results.get("capi", {}).get("mean_ms")
    if rr is not None and noop is not None:
        line = f"# ringreduce - noop-hook = {rr - noop:.1f} ms"
        if capi:
            line += f"; / C API one call = {(rr - noop) / capi:.2f}"
        if "capi-buckets" in results:
            line += f"; / C API per bucket = {(rr - noop) / results['capi-buckets']['mean_ms']:.2f}"
        if gloo is not None and gloo - noop > 0:
            line += f"; / (gloo - noop-hook = {gloo - noop:.1f} ms) = {(rr - noop) / (gloo - noop):.2f}"
        print(line)
    if args.json:
        doc = {"tool": "bench/torch/ddp_bench.py", "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
               "launcher": launcher, "nranks": size, "threads_per_rank": threads, "cores": os.cpu_count(),
               "torch": torch.__version__, "layers": args.layers, "width": args.width, "parameters": params,
               "batch": args.batch, "steps": args.steps, "warmup": args.warmup, "rounds": args.rounds,
               "gradient_as_bucket_view": args.bucket_view, "bucket_bytes": bucket_bytes, "skipped": skipped,
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
