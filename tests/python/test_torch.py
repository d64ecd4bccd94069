"""torch.distributed's backend "ringreduce" (ringreduce.torch), on 1-4 ranks.

Proves: every operation torch 2.x routes to a backend, for every dtype it
applies to, against a reference each rank computes locally in float64 from
every rank's seeded input (counts 0, 1, primes and multi-chunk); results equal
Gloo's where Gloo is correct; non-contiguous tensors give the right answer;
new_group with subsets and overlapping groups; async work waited out of order;
Work.wait(timeout) expiring and then succeeding; DDP replicas bit-identical
and within float tolerance of the same run on Gloo; a rank that dies in the
middle of an allreduce makes the others raise within the timeout;
torch.ops.ringreduce.all_reduce_ against the same references, eager and
under torch.compile(fullgraph=True). The
dtypes beyond the engine's own: test_torch_dtypes.py.

Each spawned job runs many checks: starting a rank costs a torch import.
"""

from __future__ import annotations

import datetime
import os
import time

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from ranks import run_ranks  # noqa: E402

try:
    import ringreduce.torch  # noqa: F401
except ImportError as e:  # pragma: no cover - a build without the backend
    pytest.skip(f"the ringreduce torch backend is not built: {e}", allow_module_level=True)

FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INTS = [torch.int8, torch.uint8, torch.int32, torch.int64]
DTYPES = FLOATS + INTS + [torch.bool]
R = dist.ReduceOp
OPS = [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.AVG, R.BAND, R.BOR, R.BXOR]
BITWISE = (R.BAND, R.BOR, R.BXOR)
COUNTS = [0, 1, 13]
BIG_COUNTS = [0, 1, 1009, 300_007]  # 300,007 float32 span several chunks


# --- inputs and references ------------------------------------------------------------------

def applies(op, dtype) -> bool:
    if op in BITWISE:
        return not dtype.is_floating_point
    if op == R.AVG:
        return dtype != torch.bool
    return True


def make(case: int, rank: int, count: int, dtype, op=R.SUM) -> torch.Tensor:
    """Rank `rank`'s input for `case`: the same on every rank that asks."""
    g = torch.Generator().manual_seed(1_000_003 * case + rank)
    if dtype == torch.bool:
        return torch.randint(0, 2, (count,), generator=g).bool()
    if dtype.is_floating_point:
        if op == R.PRODUCT:
            return (torch.rand(count, generator=g, dtype=torch.float64) + 0.5).to(dtype)
        return torch.randn(count, generator=g, dtype=torch.float64).to(dtype)
    lo, hi = (-3, 4) if op == R.PRODUCT else ((0, 100) if dtype == torch.uint8 else (-60, 60))
    if op in BITWISE:
        lo, hi = (0, 256) if dtype == torch.uint8 else (-128, 128)
    return torch.randint(lo, hi, (count,), generator=g).to(dtype)


def reference(inputs, op, dtype) -> torch.Tensor:
    """op over ranks, computed in float64 (floats) or int64 (integers, wrapped back)."""
    n = len(inputs)
    if dtype == torch.bool:
        x = torch.stack([t.to(torch.int64) for t in inputs])
        if op in (R.SUM, R.MAX, R.BOR):
            return x.amax(0).bool() if x.numel() else x.sum(0).bool()
        if op in (R.PRODUCT, R.MIN, R.BAND):
            return x.amin(0).bool() if x.numel() else x.sum(0).bool()
        return (x.sum(0) % 2).bool()
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    x = torch.stack([t.to(wide) for t in inputs])
    if op == R.SUM:
        out = x.sum(0)
    elif op == R.PRODUCT:
        out = x.prod(0)
    elif op == R.MAX:
        out = x.amax(0) if x.numel() else x.sum(0)
    elif op == R.MIN:
        out = x.amin(0) if x.numel() else x.sum(0)
    elif op == R.AVG:
        if dtype.is_floating_point:
            out = x.sum(0) / n
        else:  # as NCCL: the sum wraps in the element type, then divides, truncating
            out = torch.div(x.sum(0).to(dtype).to(torch.int64), n, rounding_mode="trunc")
    else:
        fn = {R.BAND: torch.bitwise_and, R.BOR: torch.bitwise_or, R.BXOR: torch.bitwise_xor}[op]
        out = x[0]
        for row in x[1:]:
            out = fn(out, row)
    return out.to(dtype)


def assert_close(got: torch.Tensor, want: torch.Tensor, what: str, nranks: int = 1) -> None:
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    if got.dtype.is_floating_point:
        tol = {torch.float16: 4e-3, torch.bfloat16: 3e-2, torch.float32: 2e-6, torch.float64: 1e-13}[got.dtype]
        torch.testing.assert_close(got.double(), want.double(), rtol=tol * nranks, atol=tol * nranks * 4,
                                   msg=lambda m: f"{what}: {m}")
    else:
        assert torch.equal(got, want), f"{what}: {got[:8].tolist()} != {want[:8].tolist()}"


def init(backend: str = "ringreduce", timeout: float = 60.0) -> None:
    import ringreduce.torch  # noqa: F401  (registers the backend in this rank)
    dist.init_process_group(backend, init_method="env://", timeout=datetime.timedelta(seconds=timeout))
    assert dist.get_backend() == backend


# --- what the ranks run ---------------------------------------------------------------------

def _every_collective(rank: int, size: int) -> int:
    init()
    checks = 0
    case = 0
    # allreduce: every dtype x op x count
    for dtype in DTYPES:
        for op in OPS:
            if not applies(op, dtype):
                # Refused by name on every rank alike, with the reason both bindings give
                # (python/ringreduce/_common/op_policy.hpp); the group goes on.
                why = "bool reduces logically" if op == R.AVG else "bitwise ops are for integer and bool types"
                with pytest.raises(ValueError, match=f"reduce op {op.name} is not supported for dtype .* \\({why}"):
                    dist.all_reduce(make(0, rank, 3, dtype), op=op)
                continue
            for count in COUNTS:
                case += 1
                t = make(case, rank, count, dtype, op)
                dist.all_reduce(t, op=op)
                want = reference([make(case, r, count, dtype, op) for r in range(size)], op, dtype)
                assert_close(t, want, f"all_reduce {dtype} {op} count={count}", size)
                checks += 1
    for count in BIG_COUNTS:
        case += 1
        t = make(case, rank, count, torch.float32)
        dist.all_reduce(t)
        assert_close(t, reference([make(case, r, count, torch.float32) for r in range(size)], R.SUM,
                                  torch.float32), f"all_reduce count={count}", size)
        checks += 1
    # reduce, broadcast to every root
    for root in range(size):
        for dtype in (torch.float32, torch.int64, torch.bfloat16, torch.bool):
            case += 1
            t = make(case, rank, 1009, dtype, R.MAX)
            dist.reduce(t, dst=root, op=R.MAX)
            if rank == root:
                assert_close(t, reference([make(case, r, 1009, dtype, R.MAX) for r in range(size)], R.MAX, dtype),
                             f"reduce root={root} {dtype}", size)
            case += 1
            t = make(case, rank, 13, dtype)
            dist.broadcast(t, src=root)
            assert_close(t, make(case, root, 13, dtype), f"broadcast root={root} {dtype}")
            checks += 2
    # gathers
    for dtype in (torch.float64, torch.int8, torch.float16):
        for count in (0, 1, 7):
            case += 1
            mine = make(case, rank, count, dtype).reshape(count, 1)
            everyone = [make(case, r, count, dtype).reshape(count, 1) for r in range(size)]
            out = [torch.empty_like(mine) for _ in range(size)]
            dist.all_gather(out, mine)
            for r in range(size):
                assert_close(out[r], everyone[r], f"all_gather from {r}")
            flat = torch.empty(size * count, 1, dtype=dtype)
            dist._all_gather_base(flat, mine)
            assert_close(flat, torch.cat(everyone), "_all_gather_base")
            for root in range(size):
                out = [torch.empty_like(mine) for _ in range(size)] if rank == root else None
                dist.gather(mine, gather_list=out, dst=root)
                if rank == root:
                    for r in range(size):
                        assert_close(out[r], everyone[r], f"gather root={root} from {r}")
                # gather_single: one output, flat on even roots, stacked on odd ones
                shape = (size * count, 1) if root % 2 == 0 else (size, count, 1)
                one = torch.full(shape, 3, dtype=dtype) if rank == root else None
                dist.gather_single(mine, one, dst=root)
                if rank == root:
                    assert_close(one.reshape(size * count, 1), torch.cat(everyone), f"gather_single root={root}")
                got = torch.empty_like(mine)
                pieces = [make(case * 7 + root, r, count, dtype).reshape(count, 1) for r in range(size)]
                dist.scatter(got, scatter_list=pieces if rank == root else None, src=root)
                assert_close(got, pieces[rank], f"scatter root={root}")
            if size == 1:  # only the root checks its output: elsewhere the others would wait for it
                with pytest.raises(ValueError, match="gather_single: the root's output has 5 elements"):
                    dist.gather_single(torch.ones(3, dtype=dtype), torch.empty(5, dtype=dtype), dst=0)
            checks += 5
    # all_gather_coalesced: two tensors of different shapes per rank
    case += 1
    a, b = make(case, rank, 5, torch.float32).reshape(5, 1), make(case + 1, rank, 6, torch.float32).reshape(2, 3)
    out = [[torch.empty(5, 1), torch.empty(2, 3)] for _ in range(size)]
    dist.all_gather_coalesced(out, [a, b])
    for r in range(size):
        assert_close(out[r][0], make(case, r, 5, torch.float32).reshape(5, 1), "all_gather_coalesced a")
        assert_close(out[r][1], make(case + 1, r, 6, torch.float32).reshape(2, 3), "all_gather_coalesced b")
    case += 1
    # reduce_scatter (list and base), every op on int32 and float32
    for dtype in (torch.float32, torch.int32):
        for op in (R.SUM, R.MAX, R.AVG, R.BXOR):
            if not applies(op, dtype):
                continue
            for count in (0, 1, 11):
                case += 1
                inputs = {r: make(case, r, size * count, dtype, op) for r in range(size)}
                want = reference(list(inputs.values()), op, dtype)
                out = torch.empty(count, dtype=dtype)
                dist.reduce_scatter(out, list(inputs[rank].chunk(size)) if count else
                                    [torch.empty(0, dtype=dtype) for _ in range(size)], op=op)
                assert_close(out, want[rank * count:(rank + 1) * count], f"reduce_scatter {dtype} {op}", size)
                out2 = torch.empty(count, dtype=dtype)
                dist._reduce_scatter_base(out2, inputs[rank].clone(), op=op)
                assert_close(out2, want[rank * count:(rank + 1) * count], f"_reduce_scatter_base {dtype} {op}", size)
                checks += 2
    # all_reduce_coalesced
    case += 1
    ts = [make(case, rank, n, torch.float64) for n in (3, 0, 17)]
    dist.all_reduce_coalesced(ts)
    for i, n in enumerate((3, 0, 17)):
        assert_close(ts[i], reference([make(case, r, n, torch.float64) for r in range(size)], R.SUM, torch.float64),
                     f"all_reduce_coalesced tensor {i}", size)
    # all_to_all: equal blocks, uneven splits, lists of uneven tensors
    case += 1
    rows = lambda src, dst: (src + 2 * dst) % 3  # noqa: E731  rows src sends dst
    send = torch.cat([torch.full((rows(rank, d), 2), 100 * rank + d, dtype=torch.int64) for d in range(size)])
    recv = torch.empty(sum(rows(s, rank) for s in range(size)), 2, dtype=torch.int64)
    dist.all_to_all_single(recv, send, output_split_sizes=[rows(s, rank) for s in range(size)],
                           input_split_sizes=[rows(rank, d) for d in range(size)])
    want = torch.cat([torch.full((rows(s, rank), 2), 100 * s + rank, dtype=torch.int64) for s in range(size)])
    assert torch.equal(recv, want), f"all_to_all_single uneven: {recv.tolist()} != {want.tolist()}"
    even = torch.arange(size * 3, dtype=torch.float32) + 1000 * rank
    got = torch.empty_like(even)
    dist.all_to_all_single(got, even)
    want = torch.cat([torch.arange(rank * 3, rank * 3 + 3, dtype=torch.float32) + 1000 * s for s in range(size)])
    assert torch.equal(got, want), "all_to_all_single even"
    outs = [torch.empty(rows(s, rank), dtype=torch.float64) for s in range(size)]
    dist.all_to_all(outs, [torch.full((rows(rank, d),), float(10 * rank + d), dtype=torch.float64)
                           for d in range(size)])
    for s in range(size):
        assert torch.equal(outs[s], torch.full((rows(s, rank),), float(10 * s + rank), dtype=torch.float64)), \
            "all_to_all lists"
    checks += 3
    dist.barrier()
    dist.destroy_process_group()
    return checks + 1


def _against_gloo(rank: int, size: int) -> None:
    """The same inputs through Gloo and ringreduce give the same results."""
    init()
    gloo = dist.new_group(backend="gloo")
    for case, (dtype, op) in enumerate([(torch.float64, R.SUM), (torch.float32, R.MAX), (torch.int64, R.PRODUCT),
                                        (torch.int32, R.BXOR), (torch.uint8, R.MIN)]):
        mine = make(case, rank, 4099, dtype, op)
        ours, theirs = mine.clone(), mine.clone()
        dist.all_reduce(ours, op=op)
        dist.all_reduce(theirs, op=op, group=gloo)
        assert_close(ours, theirs, f"vs gloo {dtype} {op}", size)
        out_ours = [torch.empty_like(mine) for _ in range(size)]
        out_theirs = [torch.empty_like(mine) for _ in range(size)]
        dist.all_gather(out_ours, mine)
        dist.all_gather(out_theirs, mine, group=gloo)
        for a, b in zip(out_ours, out_theirs):
            assert torch.equal(a, b)
    dist.destroy_process_group()


def _non_contiguous(rank: int, size: int) -> None:
    """Strided views reduce element by element (torch 1.13's Gloo reduced
    the first numel() elements of the storage instead)."""
    init()
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) * (rank + 1)
    view = base.t()[1:5]  # 4 x 4, not contiguous
    assert not view.is_contiguous()
    expect_view = view * sum(range(1, size + 1)) / (rank + 1)
    untouched = base.t()[0].clone()
    dist.all_reduce(view)
    assert torch.equal(view, expect_view), "all_reduce on a transposed view"
    assert torch.equal(base.t()[0], untouched), "elements outside the view changed"
    col = torch.zeros(5, 3)[:, 1]  # stride 3
    if rank == 0:
        col.copy_(torch.arange(5.0))
    dist.broadcast(col, src=0)
    assert torch.equal(col, torch.arange(5.0)), "broadcast into a strided column"
    # Strided outputs and inputs of the gathering, scattering and all-to-all forms.
    mine = torch.arange(6.0).reshape(3, 2).t()[0] + 10 * rank  # 3 elements, stride 2
    out = torch.zeros(size * 3, 2)[:, 1]
    dist._all_gather_base(out, mine)
    assert torch.equal(out, torch.cat([torch.arange(0.0, 6.0, 2) + 10 * r for r in range(size)])), "_all_gather_base"
    full = (torch.arange(size * 4.0) * (rank + 1)).repeat_interleave(2)[::2]  # stride 2
    got = torch.zeros(4, 3)[:, 2]
    dist._reduce_scatter_base(got, full)
    want = torch.arange(rank * 4.0, rank * 4.0 + 4) * sum(range(1, size + 1))
    assert torch.equal(got, want), "_reduce_scatter_base into a strided column"
    send = (torch.arange(size * 2.0) + 100 * rank).repeat_interleave(2)[::2]
    recv = torch.zeros(size * 2, 2)[:, 0]
    dist.all_to_all_single(recv, send)
    want = torch.cat([torch.arange(rank * 2.0, rank * 2.0 + 2) + 100 * s for s in range(size)])
    assert torch.equal(recv, want), "all_to_all_single strided"
    got = torch.zeros(3, 2)[:, 1]
    pieces = [torch.full((3,), float(r)) for r in range(size)]
    dist.scatter(got, scatter_list=pieces if rank == 0 else None, src=0)
    assert torch.equal(got, torch.full((3,), float(rank))), "scatter into a strided column"
    if size > 1:
        buf = torch.zeros(4, 4)[:, 2]
        if rank == 0:
            dist.send(torch.arange(8.0)[::2], dst=1, tag=3)
        elif rank == 1:
            dist.recv(buf, src=0, tag=3)
            assert torch.equal(buf, torch.arange(8.0)[::2]), "recv into a strided column"
    dist.destroy_process_group()


def _groups_and_async(rank: int, size: int) -> None:
    """Subsets and overlapping groups, async work waited out of order, p2p
    with tags and from any source."""
    init()
    pairs = [dist.new_group([i, (i + 1) % size]) if size > 1 else None for i in range(size)]
    evens = dist.new_group([r for r in range(size) if r % 2 == 0])
    for i, g in enumerate(pairs):
        if g is None or rank not in (i, (i + 1) % size):
            continue
        t = torch.tensor([float(rank + 1)])
        dist.all_reduce(t, group=g)
        assert t.item() == (i + 1) + ((i + 1) % size + 1), f"pair group {i}"
    if rank % 2 == 0:
        t = torch.tensor([rank])
        dist.all_reduce(t, group=evens)
        assert t.item() == sum(r for r in range(size) if r % 2 == 0)
    # several async collectives in flight, waited in reverse order
    ts = [torch.full((1000,), float(rank + k)) for k in range(5)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for k in reversed(range(5)):
        works[k].wait()
        assert torch.all(ts[k] == sum(r + k for r in range(size))), f"async allreduce {k}"
        assert works[k].is_completed() and works[k].is_success()
    if size > 1:
        nxt, prv = (rank + 1) % size, (rank - 1) % size
        # tags: sent 1 then 2, received 2 then 1
        a, b = torch.empty(3), torch.empty(3)
        s1 = dist.isend(torch.full((3,), 1.0 + rank), dst=nxt, tag=1)
        s2 = dist.isend(torch.full((3,), 2.0 + rank), dst=nxt, tag=2)
        r2 = dist.irecv(b, src=prv, tag=2)
        r1 = dist.irecv(a, src=prv, tag=1)
        for w in (r2, r1, s2, s1):
            w.wait()
        assert torch.all(a == 1.0 + prv) and torch.all(b == 2.0 + prv), "tag matching"
        # any source: rank 0 hears from every other rank, in whatever order
        if rank == 0:
            heard = set()
            for _ in range(size - 1):
                t = torch.empty(1, dtype=torch.int64)
                src = dist.recv(t, tag=9)
                assert t.item() == 1000 + src, "recvAnysource payload"
                heard.add(src)
            assert heard == set(range(1, size)), f"heard from {heard}"
        else:
            dist.send(torch.tensor([1000 + rank]), dst=0, tag=9)
        # Work.wait(timeout) expires, then the same work finishes: rank 1
        # sends only once rank 0 tells it the wait expired.
        if rank == 0:
            t = torch.empty(2)
            w = dist.irecv(t, src=1, tag=5)
            with pytest.raises(RuntimeError, match="expired") as info:
                w.wait(datetime.timedelta(milliseconds=200))
            assert isinstance(info.value, ringreduce.TimeoutError)
            assert not w.is_completed()
            dist.send(torch.ones(1), dst=1, tag=6)
            w.wait()
            assert torch.all(t == 5.0) and w.is_completed()
        elif rank == 1:
            dist.recv(torch.empty(1), src=0, tag=6)
            dist.send(torch.full((2,), 5.0), dst=0, tag=5)
    dist.barrier()
    dist.destroy_process_group()


def _inference_op(rank: int, size: int) -> int:
    """torch.ops.ringreduce.all_reduce_ eager and under torch.compile(fullgraph=True)."""
    import ringreduce.torch as rt
    init()
    name = dist.group.WORLD.group_name
    checks, case = 0, 7000
    for op, red in (("sum", R.SUM), ("max", R.MAX), ("avg", R.AVG), ("bxor", R.BXOR)):
        dtype = torch.int32 if op == "bxor" else torch.float32
        for count in (0, 1, 1009):
            case += 1
            t = make(case, rank, count, dtype, red)
            rt.all_reduce_(t, name, op)
            want = reference([make(case, r, count, dtype, red) for r in range(size)], red, dtype)
            assert_close(t, want, f"all_reduce_ {op} {count}", size)
            checks += 1
    strided = make(case + 1, rank, 20, torch.float32)[::2]
    rt.all_reduce_(strided, name)
    assert_close(strided, reference([make(case + 1, r, 20, torch.float32)[::2] for r in range(size)], R.SUM,
                                    torch.float32), "all_reduce_ strided", size)

    def step(x):
        y = torch.relu(x) * 2
        torch.ops.ringreduce.all_reduce_(y, name, "sum")
        return y + 1

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    x = make(case + 2, rank, 64, torch.float32)
    want = reference([torch.relu(make(case + 2, r, 64, torch.float32)) * 2 for r in range(size)], R.SUM,
                     torch.float32) + 1
    assert_close(compiled(x), want, "all_reduce_ compiled", size)
    with pytest.raises(RuntimeError, match='op="mean" is not one of'):
        rt.all_reduce_(torch.ones(2), name, "mean")
    gloo = dist.new_group(backend="gloo")
    with pytest.raises(RuntimeError, match="has no ringreduce backend for CPU tensors"):
        rt.all_reduce_(torch.ones(2), gloo.group_name)
    dist.destroy_process_group()
    return checks + 3


def _refused(rank: int, size: int) -> None:
    """What cannot be done raises, naming the op, dtype or device."""
    init()
    with pytest.raises(ValueError, match="AVG"):
        dist.all_reduce(torch.ones(3, dtype=torch.bool), op=R.AVG)
    with pytest.raises(ValueError, match="BAND"):
        dist.all_reduce(torch.ones(3), op=R.BAND)
    with pytest.raises(ValueError, match="Short"):
        dist.all_reduce(torch.ones(3, dtype=torch.int16))
    with pytest.raises(ValueError, match="root"):
        dist.broadcast(torch.ones(3), src=size + 5, group=dist.group.WORLD)  # torch maps global ranks first

    # still healthy
    t = torch.ones(2)
    dist.all_reduce(t)
    assert torch.all(t == size)
    dist.destroy_process_group()


def _object_and_batch_apis(rank: int, size: int) -> None:
    """torch.distributed's helpers built on the backend's operations:
    batch_isend_irecv (a ring shift, posted together), the *_object
    collectives, all_gather_into_tensor and reduce_scatter_tensor."""
    init()
    send, recv = torch.full((3,), float(rank)), torch.empty(3)
    ops = [dist.P2POp(dist.isend, send, (rank + 1) % size), dist.P2POp(dist.irecv, recv, (rank - 1) % size)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    assert torch.all(recv == (rank - 1) % size), recv
    objects = [None] * size
    dist.all_gather_object(objects, {"rank": rank})
    assert objects == [{"rank": r} for r in range(size)]
    box = [{"x": [1, 2]}] if rank == 0 else [None]
    dist.broadcast_object_list(box, src=0)
    assert box == [{"x": [1, 2]}]
    out = [None]
    dist.scatter_object_list(out, [r * 10 for r in range(size)] if rank == 0 else None, src=0)
    assert out[0] == rank * 10
    gathered = [None] * size if rank == size - 1 else None
    dist.gather_object(rank * 2, gathered, dst=size - 1)
    assert rank != size - 1 or gathered == [r * 2 for r in range(size)]
    flat = torch.empty(size * 2)
    dist.all_gather_into_tensor(flat, torch.full((2,), float(rank)))
    assert torch.equal(flat, torch.arange(size).float().repeat_interleave(2))
    mine = torch.empty(2)
    dist.reduce_scatter_tensor(mine, torch.arange(size * 2.0))
    assert torch.equal(mine, torch.arange(rank * 2.0, rank * 2.0 + 2) * size)
    dist.destroy_process_group()


def _ddp(rank: int, size: int, backend: str, steps: int) -> list:
    """A few DDP steps; returns the final parameters."""
    import torch.nn as nn
    init(backend)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5))
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)  # several buckets
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x, y = torch.randn(16, 20, generator=g), torch.randn(16, 5, generator=g)
        opt.zero_grad()
        nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    # As NumPy arrays: tensors would travel back through shared memory that
    # is gone once the rank exited.
    params = [p.detach().numpy().copy() for p in model.parameters()]
    dist.destroy_process_group()
    return params


def _initial_params() -> list:
    import torch.nn as nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5))
    return [p.detach().numpy().copy() for p in model.parameters()]


def _dies_mid_allreduce(rank: int, size: int) -> str:
    # A group timeout far past run_ranks' deadline: a survivor that only gave
    # up by waiting it out would still be waiting when the test fails it, so
    # raising at all means the engine saw the death.
    init(timeout=600.0)
    t = torch.ones(100_000_000)  # 400 MB: several tenths of a second on the ring here
    dist.barrier()
    if rank == 1:
        dist.all_reduce(t, async_op=True)
        time.sleep(0.15)  # the ring is moving
        os._exit(17)
    with pytest.raises(RuntimeError) as info:
        dist.all_reduce(t)
        dist.all_reduce(t)  # in case the first finished before rank 1 left
    assert isinstance(info.value, ringreduce.RemoteError), f"{type(info.value)}: {info.value}"
    assert "rank 1" in str(info.value), str(info.value)
    return f"{type(info.value).__name__}: {info.value}"


# --- the tests ------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_every_collective(size):
    checks = run_ranks(_every_collective, size, timeout=600)
    assert all(c == checks[0] for c in checks)


def test_results_equal_gloo():
    run_ranks(_against_gloo, 3, timeout=300)


@pytest.mark.parametrize("size", [1, 2])
def test_non_contiguous_tensors(size):
    run_ranks(_non_contiguous, size, timeout=300)


@pytest.mark.parametrize("size", [1, 3, 4])
def test_groups_async_and_point_to_point(size):
    run_ranks(_groups_and_async, size, timeout=300)


@pytest.mark.parametrize("size", [1, 3])
def test_object_collectives_and_batched_point_to_point(size):
    run_ranks(_object_and_batch_apis, size, timeout=300)


@pytest.mark.parametrize("size", [1, 3])
def test_inference_op_eager_and_compiled(size):
    assert run_ranks(_inference_op, size, timeout=300) == [15] * size


def test_unsupported_input_is_refused():
    run_ranks(_refused, 2, timeout=300)


@pytest.mark.parametrize("size", [2, 3])
def test_ddp_replicas_identical_and_match_gloo(size):
    ours = run_ranks(_ddp, size, "ringreduce", 4, timeout=300)
    theirs = run_ranks(_ddp, size, "gloo", 4, timeout=300)
    for r in range(1, size):
        for a, b in zip(ours[0], ours[r]):
            assert (a == b).all(), f"replica {r} differs from replica 0"
    for a, b in zip(ours[0], theirs[0]):
        torch.testing.assert_close(torch.from_numpy(a), torch.from_numpy(b), rtol=1e-5, atol=1e-6)
    assert any((a != b).any() for a, b in zip(ours[0], _initial_params())), "training changed nothing"


def test_rank_dying_mid_allreduce_makes_the_others_raise():
    out = run_ranks(_dies_mid_allreduce, 3, timeout=120, expect_failure=[1])
    for r in (0, 2):
        assert out[r].startswith("RemoteError"), out[r]
    assert out[1] is None, f"rank 1 reported {out[1]!r} instead of dying"
