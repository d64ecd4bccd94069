"""ringreduce.Comm, the buffer-protocol binding, on 1-4 ranks.

Each spawned job runs many checks (a spawn costs about a second): every rank
regenerates every rank's input from a case number, computes the reference
(in float64 for floating types, exactly for integers) and compares its own
result. Inputs are drawn so that the engine's result is exact: integer sums
that do not overflow, float sums of multiples of 1/8, products of powers of
two.
"""

from __future__ import annotations

import array
import builtins
import gc
import itertools
import os
import pickle
import random
import threading
import time
import weakref

import numpy as np
import pytest

import ringreduce
from ringreduce import IN_PLACE
from ranks import free_port, run_ranks

DTYPES = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64,
          np.float16, np.float32, np.float64, np.bool_]
# 0, 1, primes: remainders in every split, count < size, and (with the small
# chunk below) several chunks per ring segment.
COUNTS = [0, 1, 2, 7, 13, 131, 1031]
CHUNK_BYTES = 256
TIMEOUT_S = 60.0


def ops_for(dtype) -> list:
    kind = np.dtype(dtype).kind
    ops = ["sum", "prod", "max", "min"]
    if kind == "b":
        ops += ["band", "bor", "bxor"]
    else:
        ops += ["avg"]
        if kind in "iu":
            ops += ["band", "bor", "bxor"]
    return ops


def make_input(case: int, rank: int, dtype, op, n: int, size: int) -> np.ndarray:
    """Rank `rank`'s input of case `case`: the same on every rank that asks."""
    rng = np.random.default_rng([case, rank])
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        if op in ("band", "bor", "bxor", "max", "min", None):
            lo, hi = info.min, info.max
        elif op == "prod":
            lo, hi = (-2, 2) if dt.kind == "i" else (0, 3)
        else:  # sum, avg: the sum over ranks fits
            hi = info.max // size
            lo = -hi if dt.kind == "i" else 0
        return rng.integers(lo, hi, n, dtype=dt, endpoint=True)
    if op == "prod":
        return rng.choice([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], n).astype(dt)
    if op in ("sum", "avg"):
        return (rng.integers(-256, 256, n) / 8).astype(dt)
    return (rng.standard_normal(n) * 100).astype(dt)


def reference(op: str, xs, dtype, size: int) -> np.ndarray:
    dt = np.dtype(dtype)
    stack = np.stack(xs)
    if dt.kind == "b":
        logical = {"sum": np.logical_or, "max": np.logical_or, "bor": np.logical_or,
                   "prod": np.logical_and, "min": np.logical_and, "band": np.logical_and,
                   "bxor": np.logical_xor}[op]
        return logical.reduce(stack, axis=0)
    if dt.kind in "iu":
        if op == "sum":
            return stack.sum(axis=0, dtype=dt)
        if op == "prod":
            return stack.prod(axis=0, dtype=dt)
        if op == "max":
            return stack.max(axis=0, initial=np.iinfo(dt).min)
        if op == "min":
            return stack.min(axis=0, initial=np.iinfo(dt).max)
        if op == "avg":  # the integer sum, divided truncating toward zero
            s = stack.sum(axis=0, dtype=dt)
            return (np.sign(s) * (np.abs(s) // size)).astype(dt) if dt.kind == "i" else s // size
        return {"band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}[op].reduce(stack, axis=0)
    wide = stack.astype(np.float64)
    if op == "sum":
        return wide.sum(axis=0).astype(dt)
    if op == "prod":
        return wide.prod(axis=0).astype(dt)
    if op == "max":
        return wide.max(axis=0, initial=-np.inf).astype(dt)
    if op == "min":
        return wide.min(axis=0, initial=np.inf).astype(dt)
    assert op == "avg"
    return (wide.sum(axis=0) / size).astype(dt)


def check(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype, what
    if "avg" in what and np.dtype(want.dtype).kind == "f":
        # One rounding of sum / size in the element type.
        np.testing.assert_allclose(got, want, rtol=float(np.finfo(want.dtype).eps), atol=0, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def garbage(n: int, dtype) -> np.ndarray:
    """A receive buffer whose old contents must not survive."""
    return np.frombuffer(np.random.default_rng().bytes(n * np.dtype(dtype).itemsize), dtype=dtype).copy()


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


# ---- non-blocking calls and point-to-point ---------------------------------

def _nonblocking(rank: int, size: int) -> None:
    with ringreduce.Comm.from_env(timeout=TIMEOUT_S, chunk_bytes=CHUNK_BYTES) as comm:
        return _nonblocking_on(comm, rank, size)


def _nonblocking_on(comm: ringreduce.Comm, rank: int, size: int) -> None:
    n = 1031
    xs = [make_input(10 + r, r, np.float32, "sum", n, size) for r in range(size)]
    ints = [make_input(20 + r, r, np.int64, None, n * size, size) for r in range(size)]
    root = size - 1
    sum_ = reference("sum", xs, np.float32, size)
    max_ = reference("max", ints, np.int64, size)

    out_ar = garbage(n, np.float32)
    out_rs = garbage(n, np.int64)
    out_ag = garbage(n * size, np.float32)
    out_bc = garbage(n, np.float32)
    out_rd = garbage(n * size, np.int64)
    out_ga = garbage(n * size, np.float32) if rank == root else None
    out_sc = garbage(n, np.int64)
    out_aa = garbage(n * size, np.int64)
    in_place = xs[rank].copy()
    requests = {
        "allreduce": comm.iallreduce(xs[rank], out_ar),
        "reduce_scatter": comm.ireduce_scatter(ints[rank], out_rs, "max"),
        "allgather": comm.iallgather(xs[rank], out_ag),
        "broadcast": comm.ibroadcast(xs[rank], out_bc, root=root),
        "reduce": comm.ireduce(ints[rank], out_rd, ringreduce.Op.MAX, root),
        "gather": comm.igather(xs[rank], out_ga, root),
        "scatter": comm.iscatter(ints[root], out_sc, root),
        "alltoall": comm.ialltoall(ints[rank], out_aa),
        "barrier": comm.ibarrier(),
        "allreduce in place": comm.iallreduce(IN_PLACE, in_place, "sum"),
    }
    # Every rank waits in its own order; some by polling test().
    order = list(requests)
    random.Random(rank).shuffle(order)
    for i, name in enumerate(order):
        req = requests[name]
        if i % 3 == 0:
            deadline = time.monotonic() + TIMEOUT_S
            while not req.test():
                assert time.monotonic() < deadline, name
                time.sleep(0.0005)
        else:
            req.wait(timeout=TIMEOUT_S if i % 3 == 1 else None)
        assert req.done and req.test(), name
        req.wait()  # a finished request answers at once
    check(out_ar, sum_, "iallreduce")
    check(in_place, sum_, "iallreduce in place")
    check(out_rs, max_[rank * n:(rank + 1) * n], "ireduce_scatter")
    check(out_ag, np.concatenate(xs), "iallgather")
    check(out_bc, xs[root], "ibroadcast")
    if rank == root:
        check(out_rd, max_, "ireduce")
        check(out_ga, np.concatenate(xs), "igather")
    check(out_sc, ints[root][rank * n:(rank + 1) * n], "iscatter")
    check(out_aa, np.concatenate([ints[p][rank * n:(rank + 1) * n] for p in range(size)]), "ialltoall")

    if size >= 2:
        right, left = (rank + 1) % size, (rank - 1) % size
        # isend / irecv around the ring, waited receive first.
        got = garbage(n, np.float32)
        r_recv = comm.irecv(got, left)
        r_send = comm.isend(xs[rank], right)
        r_recv.wait(TIMEOUT_S)
        r_send.wait()
        check(got, xs[left], "irecv from the left")
        # A ring shift of blocking sends and receives, posted together by group().
        got = garbage(n, np.float32)
        with ringreduce.group():
            comm.send(xs[rank], right)
            comm.recv(got, left)
        check(got, xs[left], "group() ring shift")
        # Blocking send / recv between ranks 0 and 1, a bytearray both ways.
        if rank == 0:
            comm.send(bytearray(b"ping" * 9), 1)
            back = bytearray(36)
            comm.recv(back, 1)
            assert back == b"pong" * 9
        elif rank == 1:
            got_b = bytearray(36)
            comm.recv(got_b, 0)
            assert got_b == b"ping" * 9
            comm.send(b"pong" * 9, 0)
        # wait(timeout) runs out: TimeoutError, and the request stays valid.
        if rank == 1:
            late = np.zeros(5, np.uint32)
            req = comm.irecv(late, 0)
            t0 = time.monotonic()
            with pytest.raises(ringreduce.TimeoutError) as info:
                req.wait(timeout=0.05)
            assert time.monotonic() - t0 < 5
            assert "still in flight" in str(info.value) and info.value.result == ringreduce.Result.TIMEOUT
            assert isinstance(info.value, builtins.TimeoutError)
            assert not req.done and not req.test()
            comm.barrier()  # now rank 0 sends
            req.wait(TIMEOUT_S)
            np.testing.assert_array_equal(late, np.arange(5, dtype=np.uint32) + 40)
        elif rank == 0:
            comm.barrier()
            comm.send(np.arange(5, dtype=np.uint32) + 40, 1)
        else:
            comm.barrier()
    if size >= 2:
        # Blocking calls and wait() let go of the GIL: a Python thread keeps
        # running while this rank waits for a late peer.
        ticks = [0]
        stop = threading.Event()

        def tick():
            while not stop.is_set():
                ticks[0] += 1
                time.sleep(0.001)

        late = np.zeros(3, np.int64)
        if rank == 0:
            ticker = threading.Thread(target=tick)
            ticker.start()
            time.sleep(0.05)
            before = ticks[0]
            comm.recv(late, 1)  # rank 1 sends 0.5 s late
            during_recv = ticks[0] - before
            before = ticks[0]
            comm.irecv(late, 1).wait()
            during_wait = ticks[0] - before
            before = ticks[0]
            comm.barrier()
            during_barrier = ticks[0] - before
            stop.set()
            ticker.join()
            # A held GIL would let the ticker run once or twice at most.
            assert min(during_recv, during_wait, during_barrier) > 5, (during_recv, during_wait, during_barrier)
        elif rank == 1:
            for _ in range(2):
                time.sleep(0.5)
                comm.send(np.arange(3, dtype=np.int64), 0)
            time.sleep(0.5)
            comm.barrier()
        else:
            comm.barrier()
    # A request holds its buffers: an array whose last reference is the
    # request's stays alive until the request finished.
    kept = np.ones(n, np.float32)
    alive = weakref.ref(kept)
    req = comm.iallreduce(IN_PLACE, kept)
    del kept
    gc.collect()
    assert alive() is not None
    req.wait()
    assert alive() is None
    # A request dropped unfinished keeps its buffers alive (its communicator
    # holds them); destroy() finishes it and lets them go.
    kept = np.ones(n, np.float64)
    alive = weakref.ref(kept)
    comm.iallreduce(IN_PLACE, kept)
    del kept
    gc.collect()
    assert alive() is not None
    # Temporaries on purpose.
    comm.iallreduce(np.ones(n, np.float64) * rank, np.empty(n, np.float64))
    comm.iallgather(np.arange(3, dtype=np.int8), np.empty(3 * size, np.int8))
    comm.destroy()
    assert alive() is None


@pytest.mark.parametrize("size", [1, 3])
def test_nonblocking_calls_finish_in_any_wait_order(size):
    """Every i-collective in flight at once, waited in a different order on each rank; isend/irecv;
    group(); blocking send/recv; wait(timeout) expiring without losing the request."""
    run_ranks(_nonblocking, size, timeout=120)


def _tags_and_alltoallv(rank: int, size: int) -> None:
    with ringreduce.Comm.from_env(timeout=TIMEOUT_S) as comm:
        _tags_and_alltoallv_on(comm, rank, size)


def _tags_and_alltoallv_on(comm: ringreduce.Comm, rank: int, size: int) -> None:
    # Untagged receives report their peer, tag 0 and the count.
    right, left = (rank + 1) % size, (rank - 1) % size
    got = np.empty(4, np.int32)
    with ringreduce.group():
        comm.send(np.full(4, rank, np.int32), right)
        status = comm.recv(got, left)
    assert status == ringreduce.Status(left, 0, 4) and status.source == left
    np.testing.assert_array_equal(got, np.full(4, left, np.int32))
    # Different tags match independently: rank 0 sends tag 1 then tag 2,
    # rank 1 waits for tag 2 first.
    if rank == 0:
        first = comm.isend(np.arange(3, dtype=np.float64), 1, tag=1)
        second = comm.isend(np.arange(5, dtype=np.float64) + 100, 1, tag=2)
        second.wait()
        first.wait()
        assert first.status == ringreduce.Status(0, 1, 3)
    elif rank == 1:
        one, two = np.empty(3), np.empty(5)
        r1 = comm.irecv(one, 0, tag=1)
        r2 = comm.irecv(two, 0, tag=2)
        assert r2.status is None  # not finished yet, or not waited
        r2.wait()
        assert r2.status == ringreduce.Status(0, 2, 5) and r2.source == 0
        np.testing.assert_array_equal(two, np.arange(5) + 100)
        r1.wait()
        np.testing.assert_array_equal(one, np.arange(3))
    # ANY_SOURCE: rank 0 takes one message of tag 7 from each other rank, in
    # whatever order they come; the status says who sent which.
    if rank == 0:
        received = []
        for _ in range(size - 1):
            buf = np.empty(2, np.int64)
            st = comm.recv(buf, ringreduce.ANY_SOURCE, tag=7)
            assert st.tag == 7 and st.count == 2, st
            received.append((st, buf.tolist()))
        assert sorted(data for _, data in received) == [[r, r * r] for r in range(1, size)], received
        assert all(st.source == data[0] for st, data in received), f"status.source is not the sender: {received}"
        last = comm.irecv(np.empty(1, np.int64), ringreduce.ANY_SOURCE, tag=8)
        last.wait(TIMEOUT_S)
        assert last.status.source == size - 1, last.status
    else:
        comm.send(np.array([rank, rank * rank], np.int64), 0, tag=7)
        if rank == size - 1:
            comm.send(np.array([5], np.int64), 0, tag=8)
    IA = ringreduce.InvalidArgumentError
    _raises(IA, comm.isend, got, right, -3, match="tag=-3 is negative")
    _raises(ringreduce.InvalidUsageError, lambda: _send_in_group(comm, right), match="cannot be grouped")
    # alltoallv, non-blocking too, with its own argument checks.
    counts = [rank + p for p in range(size)]
    recv_counts = [p + rank for p in range(size)]
    x = np.concatenate([np.full(c, rank * 10 + p, np.int32) for p, c in enumerate(counts)])
    y = garbage(sum(recv_counts), np.int32)
    comm.ialltoallv(x, y, counts, recv_counts).wait()
    np.testing.assert_array_equal(y, np.concatenate([np.full(c, p * 10 + rank, np.int32)
                                                      for p, c in enumerate(recv_counts)]))
    _raises(IA, comm.alltoallv, x, y, counts[:-1] if size > 1 else [], recv_counts, match="one per rank")
    _raises(IA, comm.alltoallv, x, y, counts, recv_counts, [len(x)] * size, match="does not fit in sendbuf")
    _raises(IA, comm.alltoallv, x, y, counts, ["a"] * size, match="sequence of ints")
    _raises(IA, comm.alltoallv, IN_PLACE, y, counts, recv_counts, match="IN_PLACE")
    comm.barrier()
    if size > 1:
        # A count that disagrees with the peer's: both fail, naming each other.
        bad = list(recv_counts)
        if rank == 0:
            bad[1] += 1
        _raises(ringreduce.InvalidUsageError, comm.alltoallv, x, np.empty(sum(bad), np.int32), counts, bad,
                match="rank 1 sends 1 elements to rank 0 (its sendcounts[0]), but rank 0 expects 2")


def _send_in_group(comm: ringreduce.Comm, peer: int) -> None:
    with ringreduce.group():
        comm.send(np.zeros(1), peer, tag=4)


@pytest.mark.parametrize("size", [2, 3])
def test_tags_any_source_status_and_alltoallv(size):
    """Tags match independently, ANY_SOURCE reports the sender, recv returns a Status; alltoallv with
    uneven blocks, its non-blocking form and its refusals."""
    run_ranks(_tags_and_alltoallv, size, timeout=120)


# ---- errors -----------------------------------------------------------------

def _raises(cls, fn, *args, match=None, **kwargs):
    with pytest.raises(cls) as info:
        fn(*args, **kwargs)
    e = info.value
    assert isinstance(e, ringreduce.Error) and e.result == cls.default_result, (type(e), e.result)
    assert str(e) == e.message and e.message
    if match is not None:
        assert match in str(e), (match, str(e))
    return e


def _argument_errors(rank: int, size: int) -> None:
    with ringreduce.Comm.from_env(timeout=TIMEOUT_S) as comm:
        return _argument_errors_on(comm, rank, size)


def _argument_errors_on(comm: ringreduce.Comm, rank: int, size: int) -> None:
    x = np.arange(12, dtype=np.float32)
    y = np.empty_like(x)
    IA = ringreduce.InvalidArgumentError
    # Refused by the binding, naming the argument.
    _raises(IA, comm.allreduce, x[::2], y[:6], match="sendbuf is not C-contiguous")
    _raises(IA, comm.allreduce, x, np.empty((12, 2), np.float32)[:, 0], match="recvbuf is not C-contiguous")
    ro = np.empty_like(x)
    ro.flags.writeable = False
    _raises(IA, comm.allreduce, x, ro, match="recvbuf (numpy.ndarray) is read-only")
    _raises(IA, comm.allreduce, x, bytes(48), match="recvbuf (bytes) is read-only")
    _raises(IA, comm.allreduce, x, np.empty(12, np.float64), match="sendbuf holds float32 but recvbuf holds float64")
    _raises(IA, comm.allreduce, x, np.empty(11, np.float32), match="sendbuf has 12 elements but 11")
    _raises(IA, comm.allreduce, np.zeros(3, np.int16), np.zeros(3, np.int16), match="format 'h'")
    _raises(IA, comm.allreduce, np.zeros(3, np.complex64), np.zeros(3, np.complex64), match="no type for")
    _raises(IA, comm.allreduce, np.zeros(3, ">f4"), np.zeros(3, ">f4"), match="native byte order")
    _raises(IA, comm.allreduce, [1.0, 2.0], y, match="sendbuf (list) does not support the buffer protocol")
    _raises(IA, comm.allreduce, x, None, match="recvbuf is None")
    _raises(IA, comm.allreduce, x, y, "mean", match="op='mean' is not an op")
    _raises(IA, comm.allreduce, x, y, 9, match="op=9 is not an op")
    _raises(IA, comm.allreduce, x, y, 1.5, match="op must be a ringreduce.Op or its name")
    _raises(IA, comm.allreduce, x, y, "band", match="is for integer types")
    b = np.zeros(4, bool)
    _raises(IA, comm.allreduce, b, b.copy(), "avg", match="avg of a bool array is refused")
    _raises(IA, comm.alltoall, IN_PLACE, np.zeros(size * 2, np.int32), match="IN_PLACE is not supported")
    if size > 1:
        _raises(IA, comm.alltoall, np.zeros(size * 2 + 1, np.int32), np.zeros(size * 2 + 1, np.int32),
                match=f"do not split into {size} equal blocks")
    _raises(IA, comm.allgather, x[:2], np.empty(2 * size + 1, np.float32), match="recvbuf has")
    _raises(IA, comm.reduce_scatter, x[:size * 2], np.empty(3, np.float32), match="one block per rank")
    if size > 1:
        root = (rank + 1) % size
        _raises(IA, comm.gather, IN_PLACE, np.empty(size, np.float32), root, match="IN_PLACE is for the root only")
        _raises(IA, comm.scatter, None, IN_PLACE, root, match="is for the root only")
    _raises(IA, comm.broadcast, None, y, root=rank, match="sendbuf (on the root) is None")
    _raises(IA, ringreduce.Comm.init, "env://", timeout=-1.0, match="timeout=-1.0")
    with pytest.raises(ValueError):  # InvalidArgumentError is also a ValueError
        comm.allreduce(x, y, "nope")
    # Refused by the engine, with its message.
    _raises(IA, comm.broadcast, x, y, root=size, match=f"root={size} out of range for {size} ranks")
    _raises(IA, comm.reduce, x, y, "sum", -1, match="root=-1 out of range")
    _raises(IA, comm.gather, x, y, size + 3, match="out of range")
    _raises(IA, comm.send, x, size, match="out of range")
    _raises(IA, comm.bytes_sent, size, match=f"peer={size} out of range")
    _raises(IA, comm.send, x, ringreduce.ANY_SOURCE, match="is for receives only")
    # Argument errors leave the communicator healthy.
    assert comm.async_error() is None
    comm.allreduce(IN_PLACE, y)

    # Mismatched counts between ranks: every rank fails, quoting both calls.
    if size > 1:
        n = 10 if rank == 0 else 11
        e = _raises(ringreduce.InvalidUsageError, comm.allreduce, np.ones(n, np.float32), np.empty(n, np.float32),
                    match="different")
        assert "count=10" in str(e) and "count=11" in str(e), str(e)
        broken = comm.async_error()
        assert isinstance(broken, ringreduce.Error) and broken.result != ringreduce.Result.SUCCESS
        with pytest.raises(ringreduce.Error):
            comm.allreduce(IN_PLACE, y)
    comm.destroy()
    comm.destroy()  # a second destroy does nothing
    _raises(ringreduce.InvalidUsageError, comm.allreduce, x, y, match="allreduce: the communicator was destroyed")
    assert comm.closed and "closed" in repr(comm)


@pytest.mark.parametrize("size", [1, 3])
def test_bad_arguments_raise_with_a_message_naming_them(size):
    """Binding refusals (layout, type, op, sizes) and engine refusals (root, peer, mismatched counts)."""
    run_ranks(_argument_errors, size, timeout=120)


def _dead_peer(rank: int, size: int) -> float:
    comm = ringreduce.Comm.from_env(timeout=10)
    comm.barrier()
    if rank == size - 1:
        os._exit(3)  # dies without a word
    x = np.ones(4099, np.float64)
    t0 = time.monotonic()
    with pytest.raises((ringreduce.RemoteError, ringreduce.TimeoutError)) as info:
        for _ in range(1000):  # the first may finish before the death is seen
            comm.allreduce(IN_PLACE, x)
    elapsed = time.monotonic() - t0
    assert f"rank {size - 1}" in str(info.value), str(info.value)
    assert comm.async_error() is not None
    comm.abort()
    return elapsed


def test_a_dead_peer_raises_instead_of_hanging():
    """A rank that exits mid-job: the others raise RemoteError (or TimeoutError) naming it, well
    within the 10 s timeout."""
    times = run_ranks(_dead_peer, 3, timeout=60, expect_failure=[2])
    assert all(t < 8 for t in times[:2]), times


def _abort(rank: int, size: int) -> None:
    comm = ringreduce.Comm.from_env(timeout=30)
    comm.barrier()
    if rank == 0:
        # A receive nobody sends, aborted from another thread: the waiting
        # thread raises at once, the peer hears of it.
        buf = np.zeros(3, np.int32)
        req = comm.irecv(buf, 1)
        threading.Timer(0.3, comm.abort).start()
        t0 = time.monotonic()
        with pytest.raises(ringreduce.InvalidUsageError, match="abort"):
            req.wait()
        assert time.monotonic() - t0 < 10
        assert comm.closed
        _raises(ringreduce.InvalidUsageError, comm.barrier, match="aborted")
        comm.abort()  # again: nothing
        comm.destroy()  # after abort: nothing
    else:
        t0 = time.monotonic()
        with pytest.raises(ringreduce.Error, match="rank 0"):
            comm.allreduce(IN_PLACE, np.ones(8, np.float32))
        assert time.monotonic() - t0 < 10
        comm.abort()
    # A with-block that raises aborts; one that does not, destroys.
    with pytest.raises(KeyError):
        with ringreduce.Comm.init(f"tcp://127.0.0.1:{free_port()}", 1, 0) as solo:
            solo.barrier()
            raise KeyError("out")
    assert solo.closed
    with ringreduce.Comm.init(f"tcp://127.0.0.1:{free_port()}", 1, 0) as solo:
        solo.barrier()
    assert solo.closed


def test_abort_interrupts_a_waiting_thread_and_tells_the_peers():
    run_ranks(_abort, 2, timeout=60)


def _destroy_with_requests(rank: int, size: int) -> None:
    comm = ringreduce.Comm.from_env(timeout=1.0)
    comm.barrier()
    if rank == 0:
        # Nobody sends: destroy() waits the request out (1 s), then destroys;
        # the request keeps its error for its own wait().
        req = comm.irecv(np.zeros(3, np.int32), 1)
        t0 = time.monotonic()
        comm.destroy()
        assert time.monotonic() - t0 < 10
        assert req.done and comm.closed
        with pytest.raises((ringreduce.TimeoutError, ringreduce.RemoteError)) as info:
            req.wait()
        assert "rank 1" in str(info.value), str(info.value)
        with pytest.raises(type(info.value)):
            req.test()  # the same error, again
    else:
        time.sleep(3)
        comm.destroy()


def test_destroy_finishes_requests_in_flight_first():
    run_ranks(_destroy_with_requests, 2, timeout=60)


# ---- communicators -------------------------------------------------------------

def _split(rank: int, size: int) -> None:
    with ringreduce.Comm.from_env(timeout=TIMEOUT_S) as comm:
        return _split_on(comm, rank, size)


def _split_on(comm: ringreduce.Comm, rank: int, size: int) -> None:
    # Parity, ranked backwards.
    sub = comm.split(rank % 2, key=-rank)
    members = [r for r in range(size) if r % 2 == rank % 2]
    assert sub.size == len(members)
    assert sub.rank == sorted(members, reverse=True).index(rank)
    x = np.array([rank], np.int64)
    sub.allreduce(IN_PLACE, x)
    assert x[0] == sum(members)
    # The parent keeps working beside it.
    y = np.array([1], np.int64)
    comm.allreduce(IN_PLACE, y)
    assert y[0] == size
    # A negative color gets None.
    low = comm.split(0 if rank < size - 1 else -1)
    if rank == size - 1:
        assert low is None
    else:
        with low:
            assert (low.rank, low.size) == (rank, size - 1)
            z = np.full(5, rank, np.float32)
            out = np.empty(5 * (size - 1), np.float32)
            low.allgather(z, out)
            np.testing.assert_array_equal(out, np.repeat(np.arange(size - 1, dtype=np.float32), 5))
    sub.destroy()
    comm.destroy()


def test_split_by_color_and_key():
    run_ranks(_split, 4, timeout=120)


def _init_methods(rank: int, size: int, tcp_port: int, file_path: str, uid) -> None:
    def exercise(comm, how):
        assert (comm.rank, comm.size) == (rank, size), how
        x = np.array([rank + 1.0])
        comm.allreduce(IN_PLACE, x)
        assert x[0] == size * (size + 1) / 2, how
        assert comm.bytes_sent((rank + 1) % size) > 0 or size == 1, how
        comm.destroy()

    exercise(ringreduce.Comm.from_env(timeout=TIMEOUT_S), "from_env")
    exercise(ringreduce.Comm.init(f"tcp://127.0.0.1:{tcp_port}", size, rank, timeout=TIMEOUT_S), "tcp://")
    exercise(ringreduce.Comm.init(f"file://{file_path}", size, rank, timeout=TIMEOUT_S), "file://")
    assert isinstance(uid, ringreduce.UniqueId)
    exercise(ringreduce.Comm.init_rank(size, uid, rank, timeout=TIMEOUT_S), "init_rank")


def test_every_init_method(tmp_path):
    """env://, tcp://, file:// and a UniqueId made here, pickled to the ranks."""
    uid = ringreduce.get_unique_id()
    run_ranks(_init_methods, 3, free_port(), str(tmp_path / "rendezvous"), uid, timeout=120)


def _init_timeout(rank: int, size: int) -> float:
    # Rank 1 never comes: rank 0's init gives up after the timeout, naming it.
    t0 = time.monotonic()
    if rank == 0:
        e = _raises(ringreduce.TimeoutError, ringreduce.Comm.from_env, timeout=1.0)
        assert "rank 1" in str(e), str(e)
    return time.monotonic() - t0


def test_init_gives_up_after_its_timeout():
    times = run_ranks(_init_timeout, 2, timeout=60)
    assert times[0] < 10, times


# ---- pure Python: no ranks ---------------------------------------------------

def test_error_classes_carry_result_and_message():
    assert issubclass(ringreduce.TimeoutError, ringreduce.Error)
    assert issubclass(ringreduce.TimeoutError, builtins.TimeoutError)
    assert issubclass(ringreduce.InvalidArgumentError, ValueError)
    assert issubclass(ringreduce.Error, RuntimeError)
    for code, cls in [(1, ringreduce.CudaError), (2, ringreduce.UnhandledSystemError),
                      (3, ringreduce.InternalError), (4, ringreduce.InvalidArgumentError),
                      (5, ringreduce.InvalidUsageError), (6, ringreduce.RemoteError), (8, ringreduce.TimeoutError)]:
        e = ringreduce.errors.from_result(code, f"text {code}")
        assert type(e) is cls and e.result == code and str(e) == f"text {code}"
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is cls and back.result == code and str(back) == f"text {code}"


def test_unique_id_is_bytes_that_pickle_and_hide_their_secret():
    uid = ringreduce.get_unique_id()
    assert isinstance(uid, bytes) and len(uid) == 128
    assert pickle.loads(pickle.dumps(uid)) == uid
    assert type(pickle.loads(pickle.dumps(uid))) is ringreduce.UniqueId
    assert ringreduce.UniqueId(bytes(uid)) == uid
    assert "128 bytes" in repr(uid) and bytes(uid).hex()[:16] not in repr(uid)
    with pytest.raises(ringreduce.InvalidArgumentError, match="127 bytes"):
        ringreduce.UniqueId(bytes(127))
    with pytest.raises(ringreduce.InvalidArgumentError, match="has 3 bytes"):
        ringreduce.Comm.init_rank(2, b"abc", 0)


def test_public_names_have_docstrings():
    assert ringreduce.__version__.count(".") == 2
    assert repr(ringreduce.IN_PLACE) == "ringreduce.IN_PLACE"
    assert pickle.loads(pickle.dumps(ringreduce.IN_PLACE)) is ringreduce.IN_PLACE
    names = [n for n in dir(ringreduce.Comm) if not n.startswith("_")]
    for n in ["allreduce", "iallreduce", "reduce_scatter", "ireduce_scatter", "allgather", "iallgather",
              "broadcast", "ibroadcast", "reduce", "ireduce", "gather", "igather", "scatter", "iscatter",
              "alltoall", "ialltoall", "barrier", "ibarrier", "send", "recv", "isend", "irecv", "split",
              "destroy", "abort", "async_error", "rank", "size", "from_env", "init", "init_rank"]:
        assert n in names, n
    for n in names:
        assert getattr(ringreduce.Comm, n).__doc__, n
    for n in ["test", "wait", "done"]:
        assert getattr(ringreduce.Request, n).__doc__, n
    for fn in [ringreduce.get_unique_id, ringreduce.group, ringreduce.get_version]:
        assert fn.__doc__ and fn.__annotations__.get("return") is not None, fn
    assert [op.name.lower() for op in ringreduce.Op] == ["sum", "prod", "max", "min", "avg", "band", "bor", "bxor"]
