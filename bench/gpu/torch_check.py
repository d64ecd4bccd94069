"""The torch backend on CUDA tensors, on the GPU machine (bench/gpu/check.sh).

Runs the package torch_build.sh made (PYTHONPATH) against that machine's torch:
  * every reduce op x dtype of all_reduce, and each other collective, on CUDA
    tensors at 1, 2 and 4 ranks sharing the one GPU (NCCL refuses that),
    against a float64 reference on the host;
  * the stream contract: a kernel writes the tensor on the current stream
    right before all_reduce (after a spin, so the call is issued long before
    the data is there) and the result is copied out right after it on the
    same stream, with no synchronisation between, many times; with
    async_op=True and Work.wait() too; never stale;
  * a call under CUDA graph capture refused by name, the group going on;
  * init_process_group(device_id=...) (torch's eager connect);
  * DDP of a 25 M-parameter model, ringreduce at 2 ranks on the GPU against
    NCCL at 1 rank on the same data (the averaged gradients are the same, so
    the parameters must agree), with the time per step of each;
  * a DeviceMesh on "cpu:ringreduce,cuda:nccl" with device_id (1 rank);
  * all_reduce's microseconds per call at 1 rank (ringreduce and NCCL) and
    busbw at 64 MiB at 2 and 4 ranks.
Prints one table last (also LOGS/torch_summary.txt) with torch's and NCCL's
versions. --dry-run: the same rank code on CPU tensors through ringreduce
(no GPU, no NCCL): rehearses the script and the package it imports.

Exit status: 0 all passed, 77 no GPU (and not a dry run), 1 otherwise.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import os
import sys
import time
from typing import Any, Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from ranks import run_ranks  # noqa: E402  (the test suites' launcher: spawned ranks, env://)

R = dist.ReduceOp
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32,
          torch.int64, torch.bool]
FLOAT_OPS = [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.AVG]
INT_OPS = [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR]
BOOL_OPS = [R.SUM, R.PRODUCT, R.MIN, R.MAX]


def device_of(kind: str) -> torch.device:
    return torch.device("cuda", 0) if kind == "cuda" else torch.device("cpu")


def init(kind: str, backend: str = "ringreduce", device_id: bool = True) -> None:
    import ringreduce.torch  # noqa: F401  (registers "ringreduce")
    kwargs: Dict[str, Any] = {}
    if kind == "cuda":
        torch.cuda.set_device(0)
        if device_id:
            kwargs["device_id"] = torch.device("cuda", 0)
    dist.init_process_group(backend, init_method="env://", timeout=datetime.timedelta(seconds=120), **kwargs)


def values(case: int, rank: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    """Small values, so that products and sums stay exact in every dtype."""
    g = torch.Generator().manual_seed(1000 * case + rank)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if dtype.is_floating_point:
        return (torch.randint(1, 4, (n,), generator=g).double() / 2).to(dtype)
    return torch.randint(1, 4, (n,), generator=g).to(dtype)


def reference(op, tensors: List[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.bool:
        stack = torch.stack([t.long() for t in tensors])
        out = {R.SUM: stack.amax(0), R.MAX: stack.amax(0), R.PRODUCT: stack.amin(0), R.MIN: stack.amin(0)}[op]
        return out.bool()
    stack = torch.stack([t.double() if dtype.is_floating_point else t.long() for t in tensors])
    if op == R.SUM:
        out = stack.sum(0)
    elif op == R.PRODUCT:
        out = stack.prod(0)
    elif op == R.MIN:
        out = stack.amin(0)
    elif op == R.MAX:
        out = stack.amax(0)
    elif op == R.AVG:
        out = stack.sum(0) / len(tensors)
    else:
        out = stack[0].clone()
        for t in stack[1:]:
            out = {R.BAND: out & t, R.BOR: out | t, R.BXOR: out ^ t}[op]
    return out.to(dtype)


def _collectives(rank: int, size: int, kind: str) -> Dict[str, Any]:
    """Every op x dtype of all_reduce, each other collective, the stream
    contract, and busbw: one job per rank count."""
    init(kind)
    dev = device_of(kind)
    wrong: List[str] = []
    n = 1031
    case = 0
    for dtype in DTYPES:
        ops = BOOL_OPS if dtype == torch.bool else FLOAT_OPS if dtype.is_floating_point else INT_OPS
        for op in ops:
            case += 1
            t = values(case, rank, n, dtype).to(dev)
            dist.all_reduce(t, op=op)
            want = reference(op, [values(case, r, n, dtype) for r in range(size)], dtype)
            got = t.cpu()
            ok = torch.allclose(got.double(), want.double(), rtol=1e-2, atol=1e-2) if dtype.is_floating_point \
                else torch.equal(got, want)
            if not ok:
                wrong.append(f"all_reduce {dtype} {op}")
    # The other collectives, float32, with a count no rank count divides.
    x = values(90, rank, n, torch.float32).to(dev)
    dist.broadcast(x, src=size - 1)
    if not torch.equal(x.cpu(), values(90, size - 1, n, torch.float32)):
        wrong.append("broadcast")
    x = values(91, rank, n, torch.float32).to(dev)
    dist.reduce(x, dst=0)
    if rank == 0 and not torch.equal(x.cpu(), reference(R.SUM, [values(91, r, n, torch.float32)
                                                                  for r in range(size)], torch.float32)):
        wrong.append("reduce")
    outs = [torch.empty(n, device=dev) for _ in range(size)]
    dist.all_gather(outs, values(92, rank, n, torch.float32).to(dev))
    if not all(torch.equal(outs[r].cpu(), values(92, r, n, torch.float32)) for r in range(size)):
        wrong.append("all_gather")
    flat = torch.empty(size * n, device=dev)
    dist.all_gather_into_tensor(flat, values(93, rank, n, torch.float32).to(dev))
    if not torch.equal(flat.cpu(), torch.cat([values(93, r, n, torch.float32) for r in range(size)])):
        wrong.append("all_gather_into_tensor")
    out = torch.empty(n, device=dev)
    dist.reduce_scatter_tensor(out, values(94, rank, size * n, torch.float32).to(dev))
    full = reference(R.SUM, [values(94, r, size * n, torch.float32) for r in range(size)], torch.float32)
    if not torch.equal(out.cpu(), full[rank * n:(rank + 1) * n]):
        wrong.append("reduce_scatter_tensor")
    a2a = torch.empty(size * 7, device=dev)
    dist.all_to_all_single(a2a, (torch.arange(size * 7, dtype=torch.float32) + 1000 * rank).to(dev))
    expect = torch.cat([torch.arange(7 * rank, 7 * rank + 7, dtype=torch.float32) + 1000 * p for p in range(size)])
    if not torch.equal(a2a.cpu(), expect):
        wrong.append("all_to_all_single")
    gathered = [torch.empty(n, device=dev) for _ in range(size)] if rank == 0 else None
    dist.gather(values(95, rank, n, torch.float32).to(dev), gathered, dst=0)
    if rank == 0 and not all(torch.equal(gathered[r].cpu(), values(95, r, n, torch.float32)) for r in range(size)):
        wrong.append("gather")
    got = torch.empty(n, device=dev)
    dist.scatter(got, [values(96, r, n, torch.float32).to(dev) for r in range(size)] if rank == 0 else None, src=0)
    if not torch.equal(got.cpu(), values(96, rank, n, torch.float32)):
        wrong.append("scatter")
    col = values(97, rank, 2 * n, torch.float32).to(dev).view(n, 2)[:, 1]  # not contiguous
    dist.all_reduce(col)
    if not torch.equal(col.cpu(), reference(R.SUM, [values(97, r, 2 * n, torch.float32).view(n, 2)[:, 1]
                                                   for r in range(size)], torch.float32)):
        wrong.append("all_reduce of a non-contiguous tensor")

    # The stream contract: written right before, read right after, on the
    # current stream, with no synchronisation between; many times.
    stale = 0
    if kind == "cuda":
        iterations = 100
        m = 1 << 18
        buf = torch.empty(m, device=dev)
        results = torch.empty(iterations, m, device=dev)
        for i in range(iterations):
            torch.cuda._sleep(200_000)  # the caller's stream is busy: the call is issued long before the data
            buf.fill_(float(i + rank))
            if i % 2:
                dist.all_reduce(buf, async_op=True).wait()
            else:
                dist.all_reduce(buf)
            results[i].copy_(buf)
        torch.cuda.synchronize()
        for i in range(iterations):
            if not torch.all(results[i] == float(size * i + size * (size - 1) // 2)).item():
                stale += 1
        if stale:
            wrong.append(f"stream contract: {stale} of {iterations} results stale")

    # Under CUDA graph capture: refused by name on every rank, before the
    # call stages anything, and the group goes on in step.
    if kind == "cuda":
        graph = torch.cuda.CUDAGraph()
        t = torch.ones(10, device=dev)
        message = ""
        try:
            with torch.cuda.graph(graph):
                dist.all_reduce(t)
        except RuntimeError as e:
            message = str(e)
        if "CUDA graph" not in message:
            wrong.append(f"all_reduce under graph capture: {message or 'not refused'}")
        t = torch.ones(10, device=dev)
        dist.all_reduce(t)
        if not torch.equal(t.cpu(), torch.full((10,), float(size))):
            wrong.append("all_reduce after a refused capture")

    # busbw at 64 MiB (float32 sum), 2 warm-up calls and 5 timed.
    busbw = None
    if size > 1:
        big = torch.ones(16 << 20, device=dev)
        for _ in range(2):
            dist.all_reduce(big)
        if kind == "cuda":
            torch.cuda.synchronize()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(5):
            dist.all_reduce(big)
        if kind == "cuda":
            torch.cuda.synchronize()
        seconds = (time.perf_counter() - start) / 5
        busbw = big.numel() * 4 / seconds / 1e9 * 2 * (size - 1) / size
    us = per_call_us(dev) if size == 1 else None
    dist.destroy_process_group()
    return {"wrong": wrong, "busbw": busbw, "us": us}


def per_call_us(dev: torch.device) -> float:
    """all_reduce of 1 KiB, waited: microseconds per call."""
    t = torch.ones(256, device=dev)
    for _ in range(50):
        dist.all_reduce(t)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    calls = 500
    start = time.perf_counter()
    for _ in range(calls):
        dist.all_reduce(t)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    layers: List[torch.nn.Module] = []
    for _ in range(6):  # 6 x (2048 x 2048 + 2048): 25.2 M parameters
        layers += [torch.nn.Linear(2048, 2048), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def _ddp(rank: int, size: int, kind: str, backend: str) -> Dict[str, Any]:
    """Steps of SGD under DDP on the same data on every rank (20 on the GPU,
    4 in a dry run): the parameters, and the seconds per step after the
    first quarter."""
    init(kind, backend)
    dev = device_of(kind)
    net = model().to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(net, device_ids=[0] if kind == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(5)
    data = [torch.randn(64, 2048, generator=g).to(dev) for _ in range(4)]
    times = []
    steps = 20 if kind == "cuda" else 4
    for step in range(steps):
        start = time.perf_counter()
        opt.zero_grad()
        ddp(data[step % 4]).square().mean().backward()
        opt.step()
        if kind == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    # What rank 0 sends back: a digest of every parameter's bytes and every
    # 1000th parameter (the whole 100 MB would not cross the result queue).
    params = digest = None
    if rank == 0:
        flat = torch.cat([p.detach().flatten().cpu() for p in net.parameters()])
        digest = hashlib.sha256(flat.numpy().tobytes()).hexdigest()
        params = flat[::1000].tolist()  # plain floats: a tensor would cross as a file descriptor
    group_kind = type(dist.group.WORLD._get_backend(dev)).__name__  # which process group `backend` is here
    mesh_ok = None
    if backend != "ringreduce" and kind == "cuda":
        dist.destroy_process_group()
        # A DeviceMesh on "cpu:ringreduce,cuda:nccl" with device_id.
        init(kind, "cpu:ringreduce,cuda:nccl")
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cuda", (size,))
        a = torch.ones(4, device=dev)
        b = torch.ones(4)
        dist.all_reduce(a, group=mesh.get_group())
        dist.all_reduce(b, group=mesh.get_group())
        mesh_ok = bool(torch.equal(a.cpu(), torch.full((4,), float(size))) and
                       torch.equal(b, torch.full((4,), float(size))))
    us = per_call_us(dev) if backend != "ringreduce" and size == 1 else None
    dist.destroy_process_group()
    timed = times[steps // 4:]
    return {"kind": group_kind, "params": params, "digest": digest, "step_s": sum(timed) / len(timed),
            "mesh": mesh_ok, "us": us}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU tensors, no NCCL: rehearse the script")
    parser.add_argument("--logs", default=os.environ.get("OUT", "."), help="where torch_summary.txt goes")
    args = parser.parse_args()
    import ringreduce
    import ringreduce.torch
    kind = "cpu" if args.dry_run else "cuda"
    rows: List[str] = []

    def row(text: str) -> None:
        rows.append(text)
        print(text, flush=True)

    nccl = torch.cuda.nccl.version() if torch.cuda.is_available() else None
    row(f"torch {torch.__version__} (CUDA {torch.version.cuda}), NCCL {nccl}, ringreduce {ringreduce.__version__} "
        f"from {os.path.dirname(ringreduce.__file__)}, backend devices {ringreduce.torch.DEVICES}")
    if not args.dry_run:
        if not torch.cuda.is_available():
            print("SKIP: no GPU (torch.cuda.is_available() is False)")
            return 77
        row(f"GPU {torch.cuda.get_device_name(0)}")
        if "cuda" not in ringreduce.torch.DEVICES:
            row("FAIL: the backend was built without CUDA tensors")
            return 1
    failed = False
    for size in (1, 2, 4):
        started = time.perf_counter()
        try:
            results = run_ranks(_collectives, size, kind, timeout=300)
            wrong = sorted({w for r in results for w in r["wrong"]})
            status = "PASS" if not wrong else "FAIL: " + "; ".join(wrong)
            failed |= bool(wrong)
            extra = f", busbw 64 MiB {results[0]['busbw']:.2f} GB/s" if results[0]["busbw"] else ""
            extra += f", {results[0]['us']:.1f} us/call (1 KiB)" if results[0]["us"] else ""
        except Exception as e:  # noqa: BLE001 - one row per job, whatever broke
            status, extra, failed = f"FAIL: {str(e).splitlines()[0]}", "", True
        row(f"{kind} ops x dtypes, {size} rank(s): {status}{extra} ({time.perf_counter() - started:.0f} s)")
    try:
        ours = run_ranks(_ddp, 2, kind, "ringreduce", timeout=300)
        theirs = run_ranks(_ddp, 1, kind, "gloo" if args.dry_run else "nccl", timeout=300)
        diff = (torch.tensor(ours[0]["params"]) - torch.tensor(theirs[0]["params"])).abs().max().item()
        peer = "gloo" if args.dry_run else "NCCL"
        same = ours[0]["digest"] == theirs[0]["digest"]
        ok = diff <= 1e-5
        failed |= not ok
        row(f"DDP 25 M parameters: {'PASS' if ok else 'FAIL'}: "
            f"{'bit for bit' if same else f'max |param - {peer}' + chr(39) + f's| {diff:.3g} (every 1000th)'} "
            f"beside {peer}; "
            f"{ours[0]['step_s'] * 1e3:.1f} ms/step ringreduce at 2 ranks, "
            f"{theirs[0]['step_s'] * 1e3:.1f} ms/step {peer} at 1 rank ({theirs[0]['kind']})")
        if theirs[0]["mesh"] is not None:
            failed |= not theirs[0]["mesh"]
            row(f"DeviceMesh cpu:ringreduce,cuda:nccl: {'PASS' if theirs[0]['mesh'] else 'FAIL'}")
        if theirs[0]["us"] is not None:
            row(f"{peer} all_reduce 1 KiB, 1 rank: {theirs[0]['us']:.1f} us/call")
    except Exception as e:  # noqa: BLE001
        failed = True
        row(f"DDP / DeviceMesh: FAIL: {str(e).splitlines()[0]}")
    os.makedirs(args.logs, exist_ok=True)
    with open(os.path.join(args.logs, "torch_summary.txt"), "w") as f:
        f.write("\n".join(rows) + "\n")
    print("\n== torch backend on " + ("CPU tensors (dry run)" if args.dry_run else "CUDA tensors"))
    for r in rows:
        print(r)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
