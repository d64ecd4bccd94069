"""ringreduce.Comm on 1-4 ranks: every collective against its reference, for
every dtype x op x count, in and out of place.

Each spawned job runs many checks (a spawn costs about a second); the inputs
and references are comm_cases'.
"""

from __future__ import annotations

import array
import itertools

import numpy as np
import pytest

import ringreduce
from ringreduce import IN_PLACE
from comm_cases import (CHUNK_BYTES, COUNTS, DTYPES, TIMEOUT_S, check, garbage, make_input, ops_for,
                        reference)
from ranks import run_ranks


# ---- the sweep: every collective, dtype, op and count ---------------------

def _reductions(rank: int, size: int) -> int:
    # Leaving the block by an exception aborts: the peers fail at once
    # instead of waiting out the timeout.
    with ringreduce.Comm.from_env(timeout=TIMEOUT_S, chunk_bytes=CHUNK_BYTES) as comm:
        return _reductions_on(comm, rank, size)


def _reductions_on(comm: ringreduce.Comm, rank: int, size: int) -> int:
    assert (comm.rank, comm.size) == (rank, size)
    cases = itertools.count(1000)
    checks = 0
    for dtype in DTYPES:
        name = np.dtype(dtype).name
        for op in ops_for(dtype):
            for n in COUNTS:
                what = f"{name} {op} n={n} size={size} rank={rank}"
                # allreduce: out of place, then in place; the op by name and as an Op.
                c = next(cases)
                xs = [make_input(c, r, dtype, op, n, size) for r in range(size)]
                want = reference(op, xs, dtype, size)
                out = garbage(n, dtype)
                comm.allreduce(xs[rank], out, op)
                check(out, want, "allreduce " + what)
                buf = xs[rank].copy()
                comm.allreduce(IN_PLACE, buf, op=ringreduce.Op[op.upper()])
                check(buf, want, "allreduce in place " + what)

                # reduce_scatter: size blocks of n each; this rank's block.
                c = next(cases)
                xs = [make_input(c, r, dtype, op, n * size, size) for r in range(size)]
                want = reference(op, xs, dtype, size)[rank * n:(rank + 1) * n]
                out = garbage(n, dtype)
                comm.reduce_scatter(xs[rank], out, op)
                check(out, want, "reduce_scatter " + what)
                buf = xs[rank].copy()
                comm.reduce_scatter(IN_PLACE, buf, op)
                check(buf[rank * n:(rank + 1) * n], want, "reduce_scatter in place " + what)

                # reduce, to a root that moves with the case.
                c = next(cases)
                root = c % size
                xs = [make_input(c, r, dtype, op, n, size) for r in range(size)]
                want = reference(op, xs, dtype, size)
                out = garbage(n, dtype) if rank == root or c % 2 else None
                before = None if out is None else out.copy()
                comm.reduce(xs[rank], out, op, root=root)
                if rank == root:
                    check(out, want, f"reduce root={root} " + what)
                elif out is not None:
                    np.testing.assert_array_equal(out.view(np.uint8), before.view(np.uint8),
                                                  err_msg="reduce wrote a non-root's recvbuf " + what)
                buf = xs[rank].copy()
                comm.reduce(IN_PLACE, buf, op, root)
                if rank == root:
                    check(buf, want, f"reduce in place root={root} " + what)
                checks += 6
    # One buffer of many chunks at the default chunk size.
    for dtype, n in ((np.float32, 65537), (np.float64, 131071)):
        c = next(cases)
        xs = [make_input(c, r, dtype, "sum", n, size) for r in range(size)]
        out = garbage(n, dtype)
        comm.allreduce(xs[rank], out)
        check(out, reference("sum", xs, dtype, size), f"allreduce large {np.dtype(dtype).name} n={n}")
        checks += 1
    comm.destroy()
    return checks


def _data_movement(rank: int, size: int) -> int:
    with ringreduce.Comm.from_env(timeout=TIMEOUT_S, chunk_bytes=CHUNK_BYTES) as comm:
        return _data_movement_on(comm, rank, size)


def _data_movement_on(comm: ringreduce.Comm, rank: int, size: int) -> int:
    cases = itertools.count(500000)
    checks = 0
    for dtype in DTYPES:
        name = np.dtype(dtype).name
        for n in COUNTS:
            c = next(cases)
            root = c % size
            what = f"{name} n={n} root={root} size={size} rank={rank}"
            xs = [make_input(c, r, dtype, None, n, size) for r in range(size)]
            everything = np.concatenate(xs)

            # allgather
            out = garbage(n * size, dtype)
            comm.allgather(xs[rank], out)
            check(out, everything, "allgather " + what)
            buf = garbage(n * size, dtype)
            buf[rank * n:(rank + 1) * n] = xs[rank]
            comm.allgather(IN_PLACE, buf)
            check(buf, everything, "allgather in place " + what)

            # broadcast: sendbuf read on the root only (None elsewhere, sometimes)
            out = garbage(n, dtype)
            comm.broadcast(xs[rank] if rank == root or c % 2 else None, out, root=root)
            check(out, xs[root], "broadcast " + what)
            buf = xs[rank].copy()
            comm.broadcast(IN_PLACE, buf, root)
            check(buf, xs[root], "broadcast in place " + what)

            # gather: recvbuf on the root only
            out = garbage(n * size, dtype) if rank == root else None
            comm.gather(xs[rank], out, root=root)
            if rank == root:
                check(out, everything, "gather " + what)
            if rank == root:
                buf = garbage(n * size, dtype)
                buf[root * n:(root + 1) * n] = xs[root]
                comm.gather(IN_PLACE, buf, root)
                check(buf, everything, "gather in place " + what)
            else:
                comm.gather(xs[rank], None, root)

            # scatter: block r of the root's sendbuf to rank r
            blocks = make_input(c + 7, root, dtype, None, n * size, size)
            out = garbage(n, dtype)
            comm.scatter(blocks if rank == root else None, out, root=root)
            check(out, blocks[rank * n:(rank + 1) * n], "scatter " + what)
            if rank == root:
                buf = blocks.copy()
                comm.scatter(buf, IN_PLACE, root)
                check(buf, blocks, "scatter in place (root's block stays) " + what)
            else:
                out = garbage(n, dtype)
                comm.scatter(None, out, root)
                check(out, blocks[rank * n:(rank + 1) * n], "scatter (with in-place root) " + what)

            # alltoall: block p of rank p's... recvbuf block p = block `rank` of rank p's sendbuf
            ins = [make_input(c + 11, r, dtype, None, n * size, size) for r in range(size)]
            out = garbage(n * size, dtype)
            comm.alltoall(ins[rank], out)
            want = np.concatenate([ins[p][rank * n:(rank + 1) * n] for p in range(size)])
            check(out, want, "alltoall " + what)
            checks += 9

            # Uneven blocks (some empty), packed on the send side, spread
            # out backwards on the receive side.
            def blocks_from(r: int) -> list:
                return [(n * (r + 1) + p) % (n + 2) for p in range(size)]
            send_counts = blocks_from(rank)
            recv_counts = [blocks_from(p)[rank] for p in range(size)]
            ins = [make_input(c + 13, r, dtype, None, sum(blocks_from(r)), size) for r in range(size)]
            starts = np.cumsum([0] + recv_counts)
            rdispls = [int(starts[-1] - starts[p + 1]) + 2 * (size - 1 - p) for p in range(size)]
            out = garbage(int(starts[-1]) + 2 * size, dtype)
            comm.alltoallv(ins[rank], out, send_counts, recv_counts, rdispls=rdispls)
            for p in range(size):
                first = int(np.sum(blocks_from(p)[:rank]))
                check(out[rdispls[p]:rdispls[p] + recv_counts[p]], ins[p][first:first + recv_counts[p]],
                      f"alltoallv block from {p} " + what)
            checks += 1
    # Multi-dimensional arrays: the count is their size.
    x = np.arange(size * 6, dtype=np.int32).reshape(size, 2, 3) * (rank + 1)
    y = np.empty_like(x)
    comm.allreduce(x, y)
    np.testing.assert_array_equal(y, np.arange(size * 6, dtype=np.int32).reshape(size, 2, 3) * (size * (size + 1) // 2))
    # Any buffer-protocol object: bytearray, memoryview, array.array, a 0-d array.
    raw = bytearray(range(rank, rank + 16))
    got = bytearray(16 * size)
    comm.allgather(raw, memoryview(got))
    assert got == b"".join(bytes(range(r, r + 16)) for r in range(size))
    a = array.array("d", [float(rank)] * 5)
    comm.allreduce(IN_PLACE, a, "max")
    assert list(a) == [float(size - 1)] * 5
    scalar = np.array(rank + 1, dtype=np.int64)
    comm.allreduce(IN_PLACE, scalar, "prod")
    assert int(scalar) == int(np.prod(np.arange(1, size + 1)))
    comm.barrier()
    comm.destroy()
    return checks + 4


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_every_reduction_matches_the_float64_reference(size):
    """allreduce, reduce_scatter and reduce for every dtype x op x count, in and out of place."""
    checks = run_ranks(_reductions, size, timeout=240)
    assert all(c == checks[0] and c > 0 for c in checks)


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_every_data_movement_collective_delivers_each_block(size):
    """allgather, broadcast, gather, scatter, alltoall for every dtype x count x root, in and out of place."""
    run_ranks(_data_movement, size, timeout=180)
