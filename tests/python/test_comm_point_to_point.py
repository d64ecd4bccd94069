"""ringreduce.Comm on 1-3 ranks: non-blocking collectives waited out of order,
requests, send/recv, group(), tags, ANY_SOURCE, alltoallv.
"""

from __future__ import annotations

import builtins
import gc
import random
import threading
import time
import weakref

import numpy as np
import pytest

import ringreduce
from ringreduce import IN_PLACE
from comm_cases import CHUNK_BYTES, TIMEOUT_S, check, garbage, make_input, raises, reference
from ranks import run_ranks


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
            with pytest.raises(ringreduce.TimeoutError) as info:
                req.wait(timeout=0.05)
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
    raises(IA, comm.isend, got, right, -3, match="tag=-3 is negative")
    raises(ringreduce.InvalidUsageError, lambda: _send_in_group(comm, right), match="cannot be grouped")
    # alltoallv, non-blocking too, with its own argument checks.
    counts = [rank + p for p in range(size)]
    recv_counts = [p + rank for p in range(size)]
    x = np.concatenate([np.full(c, rank * 10 + p, np.int32) for p, c in enumerate(counts)])
    y = garbage(sum(recv_counts), np.int32)
    comm.ialltoallv(x, y, counts, recv_counts).wait()
    np.testing.assert_array_equal(y, np.concatenate([np.full(c, p * 10 + rank, np.int32)
                                                      for p, c in enumerate(recv_counts)]))
    raises(IA, comm.alltoallv, x, y, counts[:-1] if size > 1 else [], recv_counts, match="one per rank")
    raises(IA, comm.alltoallv, x, y, counts, recv_counts, [len(x)] * size, match="does not fit in sendbuf")
    raises(IA, comm.alltoallv, x, y, counts, ["a"] * size, match="sequence of ints")
    raises(IA, comm.alltoallv, IN_PLACE, y, counts, recv_counts, match="IN_PLACE")
    comm.barrier()
    if size > 1:
        # A count that disagrees with the peer's: both fail, naming each other.
        bad = list(recv_counts)
        if rank == 0:
            bad[1] += 1
        raises(ringreduce.InvalidUsageError, comm.alltoallv, x, np.empty(sum(bad), np.int32), counts, bad,
                match="rank 1 sends 1 elements to rank 0 (its sendcounts[0]), but rank 0 expects 2")


def _send_in_group(comm: ringreduce.Comm, peer: int) -> None:
    with ringreduce.group():
        comm.send(np.zeros(1), peer, tag=4)


@pytest.mark.parametrize("size", [2, 3])
def test_tags_any_source_status_and_alltoallv(size):
    """Tags match independently, ANY_SOURCE reports the sender, recv returns a Status; alltoallv with
    uneven blocks, its non-blocking form and its refusals."""
    run_ranks(_tags_and_alltoallv, size, timeout=120)
