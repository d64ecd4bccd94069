"""The dtypes torch has beyond the engine's own, on "ringreduce", at 1 and 3 ranks.

Proves: int16, uint16 and the float8s moving bit for bit as bytes in the
operations that do not reduce (broadcast, all_gather_into_tensor, uneven
all_to_all_single, gather, send/recv) and refused by name where something
would reduce them; uint32 and uint64 reduced (SUM, MAX, MIN, the bitwise ops)
exactly; complex32/64/128 moving, reduced with SUM and AVG (all_reduce and
reduce_scatter_tensor) against a complex128 reference, and MAX refused by
name; counts 0, 1 and 13.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from ranks import run_ranks  # noqa: E402

try:
    import ringreduce.torch  # noqa: F401
except ImportError as e:  # pragma: no cover - a build without the backend
    pytest.skip(f"the ringreduce torch backend is not built: {e}", allow_module_level=True)

from test_torch import R, init  # noqa: E402


MOVED_ONLY = [torch.int16, torch.uint16, torch.float8_e4m3fn, torch.float8_e5m2]
UNSIGNED = [torch.uint32, torch.uint64]
COMPLEX = [torch.complex32, torch.complex64, torch.complex128]


def make_any(case: int, rank: int, count: int, dtype) -> torch.Tensor:
    """make() for the dtypes the engine has no type of, or reduces in parts."""
    g = torch.Generator().manual_seed(1_000_003 * case + rank)
    if dtype.is_complex:
        parts = torch.randn(count, 2, generator=g, dtype=torch.float64)
        return torch.view_as_complex(parts).to(dtype)
    if dtype.is_floating_point:
        return torch.randn(count, generator=g, dtype=torch.float64).to(dtype)
    return torch.randint(0, 1 << 15, (count,), generator=g).to(dtype)


def same_bits(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, f"{what}: {got.dtype} {got.shape}"
    assert torch.equal(got.contiguous().view(torch.uint8), want.contiguous().view(torch.uint8)), what


def _dtypes_the_engine_lacks(rank: int, size: int) -> int:
    """int16, uint16, float8 move as bytes; uint32, uint64 reduce; complex reduces with SUM and AVG."""
    init()
    checks, case = 0, 9000
    for dtype in MOVED_ONLY + UNSIGNED + COMPLEX:
        for count in (0, 1, 13):
            case += 1
            mine = make_any(case, rank, count, dtype)
            every = [make_any(case, r, count, dtype) for r in range(size)]
            root = size - 1
            t = mine.clone()
            dist.broadcast(t, src=root)
            same_bits(t, every[root], f"broadcast {dtype} {count}")
            out = torch.empty(size * count, dtype=dtype)
            dist.all_gather_into_tensor(out, mine)
            same_bits(out, torch.cat(every), f"all_gather_into_tensor {dtype} {count}")
            # Rank r sends r + 1 rows to each peer (sizes that differ).
            rows = lambda r: make_any(case + 500, r, size * (r + 1), dtype)  # noqa: E731
            got = torch.empty(sum(r + 1 for r in range(size)), dtype=dtype)
            dist.all_to_all_single(got, rows(rank), output_split_sizes=[r + 1 for r in range(size)],
                                   input_split_sizes=[rank + 1] * size)
            want = torch.cat([rows(r)[rank * (r + 1):(rank + 1) * (r + 1)] for r in range(size)])
            same_bits(got, want, f"all_to_all_single {dtype} {count}")
            gathered = [torch.empty(count, dtype=dtype) for _ in range(size)] if rank == 0 else None
            dist.gather(mine, gathered, dst=0)
            if rank == 0:
                for r in range(size):
                    same_bits(gathered[r], every[r], f"gather {dtype} {count}")
            if size > 1:
                recv = torch.empty(count, dtype=dtype)
                ops = [dist.P2POp(dist.isend, mine, (rank + 1) % size), dist.P2POp(dist.irecv, recv, (rank - 1) % size)]
                for w in dist.batch_isend_irecv(ops):
                    w.wait()
                same_bits(recv, every[(rank - 1) % size], f"send/recv {dtype} {count}")
            checks += 1
            if dtype in MOVED_ONLY:
                with pytest.raises(ValueError, match="cannot be reduced"):
                    dist.all_reduce(mine.clone())
                continue
            ops = [R.SUM, R.AVG] if dtype.is_complex else [R.SUM, R.MAX, R.MIN, R.BAND, R.BOR, R.BXOR]
            for op in ops:
                t = mine.clone()
                dist.all_reduce(t, op=op)
                if dtype.is_complex:
                    want = torch.stack([e.to(torch.complex128) for e in every]).sum(0)
                    want = (want / size if op == R.AVG else want)
                    tol = {torch.complex32: 3e-3, torch.complex64: 1e-6, torch.complex128: 1e-13}[dtype] * size
                    torch.testing.assert_close(t.to(torch.complex128), want, rtol=tol, atol=tol * 4)
                else:
                    x = torch.stack([e.to(torch.int64) for e in every])
                    if op == R.SUM:
                        want = x.sum(0)
                    elif op in (R.MAX, R.MIN):
                        want = (x.amax(0) if op == R.MAX else x.amin(0)) if count else x.sum(0)
                    else:
                        fn = {R.BAND: torch.bitwise_and, R.BOR: torch.bitwise_or, R.BXOR: torch.bitwise_xor}[op]
                        want = x[0]
                        for row in x[1:]:
                            want = fn(want, row)
                    assert torch.equal(t.to(torch.int64), want), f"all_reduce {op} {dtype} {count}"
                checks += 1
            if dtype.is_complex:
                # torch's all_reduce hands complex over as pairs of reals, and
                # refuses MAX itself; reduce_scatter_tensor passes it on as complex.
                blocks = [make_any(case + 700, r, size * count, dtype) for r in range(size)]
                for op in (R.SUM, R.AVG):
                    out = torch.empty(count, dtype=dtype)
                    dist.reduce_scatter_tensor(out, blocks[rank], op=op)
                    want = torch.stack([b.to(torch.complex128) for b in blocks]).sum(0)[rank * count:(rank + 1) * count]
                    want = want / size if op == R.AVG else want
                    tol = {torch.complex32: 3e-3, torch.complex64: 1e-6, torch.complex128: 1e-13}[dtype] * size
                    torch.testing.assert_close(out.to(torch.complex128), want, rtol=tol, atol=tol * 4)
                    checks += 1
                out = torch.empty(count, dtype=dtype)
                with pytest.raises(ValueError, match="reduce op MAX is not supported for dtype Complex"):
                    dist.reduce_scatter_tensor(out, torch.cat([mine] * size), op=R.MAX)
    dist.destroy_process_group()
    return checks


@pytest.mark.parametrize("size", [1, 3])
def test_dtypes_the_engine_lacks(size):
    checks = run_ranks(_dtypes_the_engine_lacks, size, timeout=300)
    assert min(checks) >= 9 * 3, checks
