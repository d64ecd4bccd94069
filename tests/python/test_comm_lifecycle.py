"""ringreduce.Comm's life: every init method, split, destroy, abort, refused
arguments, a dead peer; and the package's pure-Python parts (errors, UniqueId,
docstrings), which need no ranks.
"""

from __future__ import annotations

import builtins
import os
import pickle
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import ringreduce
from ringreduce import IN_PLACE
from comm_cases import TIMEOUT_S, raises
from ranks import free_port, run_ranks


# ---- errors -----------------------------------------------------------------

def _argument_errors(rank: int, size: int) -> None:
    with ringreduce.Comm.from_env(timeout=TIMEOUT_S) as comm:
        return _argument_errors_on(comm, rank, size)


def _argument_errors_on(comm: ringreduce.Comm, rank: int, size: int) -> None:
    x = np.arange(12, dtype=np.float32)
    y = np.empty_like(x)
    IA = ringreduce.InvalidArgumentError
    # Refused by the binding, naming the argument.
    raises(IA, comm.allreduce, x[::2], y[:6], match="sendbuf is not C-contiguous")
    raises(IA, comm.allreduce, x, np.empty((12, 2), np.float32)[:, 0], match="recvbuf is not C-contiguous")
    ro = np.empty_like(x)
    ro.flags.writeable = False
    raises(IA, comm.allreduce, x, ro, match="recvbuf (numpy.ndarray) is read-only")
    raises(IA, comm.allreduce, x, bytes(48), match="recvbuf (bytes) is read-only")
    raises(IA, comm.allreduce, x, np.empty(12, np.float64), match="sendbuf holds float32 but recvbuf holds float64")
    raises(IA, comm.allreduce, x, np.empty(11, np.float32), match="sendbuf has 12 elements but 11")
    raises(IA, comm.allreduce, np.zeros(3, np.int16), np.zeros(3, np.int16), match="format 'h'")
    raises(IA, comm.allreduce, np.zeros(3, np.complex64), np.zeros(3, np.complex64), match="no type for")
    raises(IA, comm.allreduce, np.zeros(3, ">f4"), np.zeros(3, ">f4"), match="native byte order")
    raises(IA, comm.allreduce, [1.0, 2.0], y, match="sendbuf (list) does not support the buffer protocol")
    raises(IA, comm.allreduce, x, None, match="recvbuf is None")
    raises(IA, comm.allreduce, x, y, "mean", match="op='mean' is not an op")
    raises(IA, comm.allreduce, x, y, 9, match="op=9 is not an op")
    raises(IA, comm.allreduce, x, y, 1.5, match="op must be a ringreduce.Op or its name")
    raises(IA, comm.allreduce, x, y, "band",
           match="op=band of a float32 array is refused (bitwise ops are for integer and bool types)")
    b = np.zeros(4, bool)
    raises(IA, comm.allreduce, b, b.copy(), "avg", match="avg of a bool array is refused")
    raises(IA, comm.alltoall, IN_PLACE, np.zeros(size * 2, np.int32), match="IN_PLACE is not supported")
    if size > 1:
        raises(IA, comm.alltoall, np.zeros(size * 2 + 1, np.int32), np.zeros(size * 2 + 1, np.int32),
                match=f"do not split into {size} equal blocks")
    raises(IA, comm.allgather, x[:2], np.empty(2 * size + 1, np.float32), match="recvbuf has")
    raises(IA, comm.reduce_scatter, x[:size * 2], np.empty(3, np.float32), match="one block per rank")
    if size > 1:
        root = (rank + 1) % size
        raises(IA, comm.gather, IN_PLACE, np.empty(size, np.float32), root, match="IN_PLACE is for the root only")
        raises(IA, comm.scatter, None, IN_PLACE, root, match="is for the root only")
    raises(IA, comm.broadcast, None, y, root=rank, match="sendbuf (on the root) is None")
    raises(IA, ringreduce.Comm.init, "env://", timeout=-1.0, match="timeout=-1.0")
    with pytest.raises(ValueError):  # InvalidArgumentError is also a ValueError
        comm.allreduce(x, y, "nope")
    # Refused by the engine, with its message.
    raises(IA, comm.broadcast, x, y, root=size, match=f"root={size} out of range for {size} ranks")
    raises(IA, comm.reduce, x, y, "sum", -1, match="root=-1 out of range")
    raises(IA, comm.gather, x, y, size + 3, match="out of range")
    raises(IA, comm.send, x, size, match="out of range")
    raises(IA, comm.bytes_sent, size, match=f"peer={size} out of range")
    raises(IA, comm.send, x, ringreduce.ANY_SOURCE, match="is for receives only")
    # The timeout of later calls (rrCommSetTimeout), in seconds, rounded up to milliseconds.
    before = comm.timeout
    comm.timeout = 2.0001
    assert comm.timeout == 2.001, comm.timeout
    raises(IA, setattr, comm, "timeout", 0.0, match="timeout=0.0")
    comm.timeout = before
    # Argument errors leave the communicator healthy.
    assert comm.async_error() is None
    comm.allreduce(IN_PLACE, y)

    # Mismatched counts between ranks: every rank fails, quoting both calls.
    if size > 1:
        n = 10 if rank == 0 else 11
        e = raises(ringreduce.InvalidUsageError, comm.allreduce, np.ones(n, np.float32), np.empty(n, np.float32),
                    match="different")
        assert "count=10" in str(e) and "count=11" in str(e), str(e)
        broken = comm.async_error()
        assert isinstance(broken, ringreduce.Error) and broken.result != ringreduce.Result.SUCCESS
        with pytest.raises(ringreduce.Error):
            comm.allreduce(IN_PLACE, y)
    comm.destroy()
    comm.destroy()  # a second destroy does nothing
    raises(ringreduce.InvalidUsageError, comm.allreduce, x, y, match="allreduce: the communicator was destroyed")
    assert comm.closed and "closed" in repr(comm)


@pytest.mark.parametrize("size", [1, 3])
def test_bad_arguments_raise_with_a_message_naming_them(size):
    """Binding refusals (layout, type, op, sizes) and engine refusals (root, peer, mismatched counts)."""
    run_ranks(_argument_errors, size, timeout=120)


# The dead peer's communicators time out far past run_ranks' deadline: a rank
# that learned of the death only by waiting out its timeout would still be
# waiting when the deadline fails the test. So passing means the death itself
# was noticed, and a rank that hangs fails rather than hanging the suite.
DEAD_PEER_DEADLINE_S = 60
DEAD_PEER_COMM_TIMEOUT_S = 10 * DEAD_PEER_DEADLINE_S


def _dead_peer(rank: int, size: int) -> str:
    comm = ringreduce.Comm.from_env(timeout=DEAD_PEER_COMM_TIMEOUT_S)
    comm.barrier()
    if rank == size - 1:
        os._exit(3)  # dies without a word
    x = np.ones(4099, np.float64)
    with pytest.raises((ringreduce.RemoteError, ringreduce.TimeoutError)) as info:
        for _ in range(1000):  # the first may finish before the death is seen
            comm.allreduce(IN_PLACE, x)
    assert f"rank {size - 1}" in str(info.value), str(info.value)
    assert comm.async_error() is not None
    comm.abort()
    return type(info.value).__name__


def test_a_dead_peer_raises_instead_of_hanging():
    """A rank that exits mid-job: the others raise RemoteError (or TimeoutError) naming it, long
    before their own timeout could have expired (see DEAD_PEER_DEADLINE_S)."""
    outcomes = run_ranks(_dead_peer, 3, timeout=DEAD_PEER_DEADLINE_S, expect_failure=[2])
    assert outcomes[2] is None, outcomes  # the dead rank reported nothing: it really died
    assert all(name in ("RemoteError", "TimeoutError") for name in outcomes[:2]), outcomes


def _call_timeout(rank: int, size: int) -> None:
    # A call's own timeout (timeout=, its per-call config) bounds it alone,
    # whatever the communicator's.
    comm = ringreduce.Comm.from_env(timeout=60.0)
    x = np.ones(8, np.float32)
    raises(ringreduce.InvalidArgumentError, comm.allreduce, IN_PLACE, x, timeout=0.0, match="allreduce: timeout=0.0")
    raises(ringreduce.InvalidArgumentError, comm.ibarrier, timeout=-1.0, match="ibarrier: timeout=-1.0")
    comm.barrier(timeout=30.0)
    # Rank 1 comes 2.5 s late: rank 0's 1 s call times out, its 30 s one
    # (under a communicator timeout of 1 s) does not.
    if rank == 1:
        time.sleep(2.5)
        comm.allreduce(IN_PLACE, x)
    else:
        comm.timeout = 1.0
        t0 = time.monotonic()
        comm.allreduce(IN_PLACE, x, timeout=30.0)
        assert time.monotonic() - t0 > 2.0, "rank 1 came late: rank 0 waited for it"
        assert x[0] == 2.0, x
        comm.timeout = 60.0
    comm.barrier()
    if rank == 0:
        t0 = time.monotonic()
        request = comm.ibroadcast(IN_PLACE, x, root=1, timeout=1.0)
        with pytest.raises(ringreduce.TimeoutError):
            request.wait()
        took = time.monotonic() - t0
        assert 0.9 < took < 1.6, f"the call's 1 s, not the communicator's 60 s: {took:.2f} s"
        assert comm.timeout == 60.0
        comm.abort()
    else:
        time.sleep(3.0)  # never joins the broadcast
        comm.abort()


def test_a_calls_own_timeout_bounds_it_alone():
    run_ranks(_call_timeout, 2, timeout=60)


def _call_algorithm(rank: int, size: int) -> None:
    # allreduce's own schedule (algorithm=, its per-call config): each gives
    # the right sums; an unknown one is refused naming it; ranks that pass
    # different ones fail saying so.
    comm = ringreduce.Comm.from_env(timeout=60.0)
    raises(ringreduce.InvalidArgumentError, comm.allreduce, IN_PLACE, np.ones(4, np.float32),
           algorithm="bogus", match='config->algorithm="bogus"')
    for algorithm in ("ring", "rd", "hd", "oneshot", "auto"):
        for n in (1, 5, 70001):
            x = np.arange(n, dtype=np.int64) + 1000 * rank
            comm.allreduce(IN_PLACE, x, algorithm=algorithm)
            want = size * np.arange(n, dtype=np.int64) + 1000 * sum(range(size))
            assert np.array_equal(x, want), (algorithm, n)
            y = np.arange(n, dtype=np.int64) + 1000 * rank
            comm.iallreduce(IN_PLACE, y, algorithm=algorithm).wait()
            assert np.array_equal(y, want), (algorithm, n, "i")
    with pytest.raises(ringreduce.InvalidUsageError):
        comm.allreduce(IN_PLACE, np.ones(64, np.float32), algorithm="ring" if rank == 0 else "rd")
    comm.abort()


def test_an_allreduces_own_algorithm_is_the_one_it_takes():
    run_ranks(_call_algorithm, 2, timeout=60)


def _abort(rank: int, size: int) -> None:
    # A timeout far past run_ranks' deadline: raising at all proves the abort
    # (not the timeout) ended the waits.
    comm = ringreduce.Comm.from_env(timeout=600)
    comm.barrier()
    if rank == 0:
        # A receive nobody sends, aborted from another thread: the waiting
        # thread raises at once, the peer hears of it.
        buf = np.zeros(3, np.int32)
        req = comm.irecv(buf, 1)
        threading.Timer(0.3, comm.abort).start()
        with pytest.raises(ringreduce.InvalidUsageError, match="abort"):
            req.wait()
        assert comm.closed
        raises(ringreduce.InvalidUsageError, comm.barrier, match="aborted")
        comm.abort()  # again: nothing
        comm.destroy()  # after abort: nothing
    else:
        with pytest.raises(ringreduce.Error, match="rank 0"):
            comm.allreduce(IN_PLACE, np.ones(8, np.float32))
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


def _revoke(rank: int, size: int) -> None:
    comm = ringreduce.Comm.from_env(timeout=60.0)
    x = np.ones(1 << 16, np.float32)
    comm.allreduce(IN_PLACE, x)
    if rank == 0:
        # A thread waits in a call that rank 1 never makes; revoking ends it.
        caught = []

        def waiting() -> None:
            try:
                comm.allreduce(IN_PLACE, np.ones(1 << 16, np.float32))
            except ringreduce.Error as e:  # noqa: PERF203
                caught.append(e)

        thread = threading.Thread(target=waiting)
        thread.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        comm.revoke()
        thread.join(10)
        assert not thread.is_alive()
        assert time.monotonic() - t0 < 5, "the revocation, not the 60 s timeout, ended it"
        assert len(caught) == 1 and isinstance(caught[0], ringreduce.RevokedError), caught
        assert caught[0].result == ringreduce.Result.REVOKED
        comm.revoke()  # again: fine
    else:
        time.sleep(0.8)
    # Every later call, on either rank, raises RevokedError at once; the
    # communicator answers queries and is destroyed.
    raises(ringreduce.RevokedError, comm.barrier, match="revoked")
    assert isinstance(comm.async_error(), ringreduce.RevokedError)
    assert comm.rank == rank and not comm.closed
    comm.destroy()
    assert comm.closed


def test_revoke_ends_every_ranks_calls_with_revoked_error():
    run_ranks(_revoke, 2, timeout=60)


def _shrink(rank: int, size: int) -> None:
    comm = ringreduce.Comm.from_env(timeout=60.0)
    comm.barrier()
    if rank == 1:
        os._exit(0)  # leaves without a word: its peers' next call fails naming it
    with pytest.raises(ringreduce.RemoteError, match="rank 1"):
        comm.allreduce(IN_PLACE, np.ones(1 << 16, np.float32))
    comm.revoke()
    with pytest.raises(ringreduce.InvalidArgumentError, match="excludeRanks holds this rank"):
        comm.shrink([rank])
    survivors = comm.shrink([1])
    assert (survivors.rank, survivors.size) == ({0: 0, 2: 1}[rank], 2)
    x = np.full(1000, rank + 1, np.int64)
    survivors.allreduce(IN_PLACE, x)
    assert (x == 1 + 3).all(), x[:4]
    survivors.destroy()
    comm.destroy()


def test_survivors_revoke_then_shrink_the_lost_rank_away():
    run_ranks(_shrink, 3, timeout=60, expect_failure=[1])


def _shrink_failed(rank: int, size: int) -> None:
    comm = ringreduce.Comm.from_env(timeout=60.0)
    comm.barrier()
    if rank == 2:
        os._exit(0)
    with pytest.raises(ringreduce.RemoteError, match="rank 2"):
        comm.allreduce(IN_PLACE, np.ones(1 << 16, np.float32))
    comm.revoke()
    # No list: the survivors agree that rank 2 failed.
    survivors = comm.shrink()
    assert survivors.excluded == [2] and comm.excluded == []
    assert (survivors.rank, survivors.size) == ({0: 0, 1: 1, 3: 2}[rank], 3)
    x = np.full(1000, rank + 1, np.int64)
    survivors.allreduce(IN_PLACE, x)
    assert (x == 1 + 2 + 4).all(), x[:4]
    # Grown back to 4 by a new process, which joins as rank 3.
    uid = survivors.unique_id()
    assert isinstance(uid, ringreduce.UniqueId)
    newcomer = None
    if survivors.rank == 0:  # (a rank is a daemonic process: no multiprocessing children)
        newcomer = subprocess.Popen([sys.executable, "-c", _NEWCOMER, bytes(uid).hex()], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
    grown = survivors.grow(4, uid)
    assert (grown.rank, grown.size) == (survivors.rank, 4)
    y = np.full(1000, grown.rank + 1, np.int64)
    grown.allreduce(IN_PLACE, y)
    assert (y == 1 + 2 + 3 + 4).all(), y[:4]
    if newcomer is not None:
        said, _ = newcomer.communicate(timeout=60)
        assert newcomer.returncode == 0 and said.split()[-1] == "10", said
    grown.destroy()
    survivors.destroy()
    comm.destroy()


# The new process: joins the grown communicator as rank 3 and prints its sum.
_NEWCOMER = """
import sys
import numpy as np
import ringreduce
with ringreduce.Comm.init_rank(4, bytes.fromhex(sys.argv[1]), 3, timeout=60.0) as grown:
    y = np.full(1000, 4, np.int64)
    grown.allreduce(ringreduce.IN_PLACE, y)
    assert (y == y[0]).all()
    print(int(y[0]))
"""


def test_survivors_agree_on_the_lost_rank_and_shrink_it_away():
    run_ranks(_shrink_failed, 4, timeout=60, expect_failure=[2])


def _destroy_with_requests(rank: int, size: int) -> None:
    comm = ringreduce.Comm.from_env(timeout=1.0)
    comm.barrier()
    if rank == 0:
        # Nobody sends: destroy() waits the request out (1 s), then destroys;
        # the request keeps its error for its own wait().
        req = comm.irecv(np.zeros(3, np.int32), 1)
        comm.destroy()
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
        # Recursive doubling's partners need not be ring neighbours: some peer.
        assert sum(comm.bytes_sent(p) for p in range(size)) > 0 or size == 1, how
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


def _init_timeout(rank: int, size: int) -> None:
    # Rank 1 never comes: rank 0's init gives up after the timeout, naming it
    # (run_ranks' deadline fails an init that waits on instead).
    if rank == 0:
        e = raises(ringreduce.TimeoutError, ringreduce.Comm.from_env, timeout=1.0)
        assert "rank 1" in str(e), str(e)


def test_init_gives_up_after_its_timeout():
    run_ranks(_init_timeout, 2, timeout=60)


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


# ---- the test launcher's ports ----------------------------------------------

def test_free_port_never_hands_out_a_port_another_process_holds(monkeypatch):
    # Two test processes reserving ports at once never get the same one. The
    # range is narrowed to 76 ports (1024..1099) in both, so that without the
    # lock files 30 picks each would collide about a dozen times.
    import subprocess
    import sys

    import ranks
    monkeypatch.setattr(ranks, "_ephemeral_low", lambda: 1100)
    mine = {free_port() for _ in range(30)}
    script = ("import ranks; ranks._ephemeral_low = lambda: 1100; "
              "print(','.join(str(ranks.free_port()) for _ in range(30)))")
    here = os.path.dirname(os.path.abspath(ranks.__file__))
    out = subprocess.run([sys.executable, "-c", script], cwd=here, check=True, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=here)).stdout
    theirs = {int(p) for p in out.strip().split(",")}
    assert len(mine) == 30 and len(theirs) == 30
    assert not mine & theirs, f"ports handed out twice: {sorted(mine & theirs)}"
    assert max(mine | theirs) < 1100
