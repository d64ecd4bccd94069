"""Timeouts that hold, through torch.distributed on "ringreduce".

Proves: dist.set_timeout (and the deprecated _set_pg_timeout) after init bounds
the next collective on a group made with a 60 s timeout: with a peer that
never comes, rank 0 fails within 0.5 s of the 2 s set, where before the
setting was ignored and rank 0 waited for the peer to exit; an operation's own
opts.timeout bounds that operation alone, and the next one takes the group's
again (a peer 3 s late to it is waited for); set_timeout reaches sends and
receives too; a timeout below 1 ms is refused by name. Gloo beside it, where
Gloo does the same.
"""

from __future__ import annotations

import datetime
import time

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from ranks import run_ranks  # noqa: E402

try:
    import ringreduce.torch  # noqa: F401
except ImportError as e:  # pragma: no cover - a build without the backend
    pytest.skip(f"the ringreduce torch backend is not built: {e}", allow_module_level=True)

SET_S = 2.0
GROUP_S = 60.0
# torch's flight recorder is off in the ranks: on a failure its abort hook
# writes the trace before the call fails, and a process's first dump costs
# torch about 0.8 s on this machine whatever the backend (as
# test_torch_lifecycle.py says): torch's time, not the timeout's.
NO_FR = {"TORCH_FR_BUFFER_SIZE": "0"}


def init(backend: str) -> None:
    import ringreduce.torch  # noqa: F401  (registers the backend in this rank)
    dist.init_process_group(backend, init_method="env://", timeout=datetime.timedelta(seconds=GROUP_S))


def timed_failure(fn) -> tuple:
    """(seconds, message) of fn(), which must raise."""
    t0 = time.monotonic()
    try:
        fn()
    except Exception as e:  # torch wraps the engine's error in its own types
        return time.monotonic() - t0, f"{type(e).__name__}: {e}"
    raise AssertionError("the call did not fail")


# --- what the ranks run ---------------------------------------------------------------------

def _set_timeout(rank: int, size: int, backend: str, setter: str) -> object:
    init(backend)
    t = torch.ones(1000)
    dist.all_reduce(t)  # every rank is there once
    if rank == 1:
        time.sleep(GROUP_S / 10)  # never comes to rank 0's next call; leaves long after its timeout
        return None
    timeout = datetime.timedelta(seconds=SET_S)
    if setter == "set_timeout":
        dist.set_timeout(timeout)
    else:
        with pytest.warns(FutureWarning):
            dist.distributed_c10d._set_pg_timeout(timeout)
    return timed_failure(lambda: dist.all_reduce(t))


def _op_timeout(rank: int, size: int, backend: str) -> object:
    init(backend)
    t = torch.ones(1000)
    dist.all_reduce(t)
    cpu = dist.group.WORLD._get_backend(torch.device("cpu"))
    opts = dist.AllreduceOptions()
    opts.timeout = datetime.timedelta(seconds=SET_S)
    # Its own timeout, met: every rank comes.
    cpu.allreduce([t], opts).wait()
    # The next call takes the group's 60 s again: rank 1 comes 3 s late.
    if rank == 1:
        time.sleep(1.5 * SET_S)
    dist.all_reduce(t)
    if rank == 1:
        time.sleep(GROUP_S / 10)  # never comes to rank 0's last call
        return None
    return timed_failure(lambda: cpu.allreduce([t], opts).wait())


def _p2p_and_refusals(rank: int, size: int, backend: str) -> object:
    init(backend)
    with pytest.raises(Exception, match="at least 1 ms"):
        dist.set_timeout(datetime.timedelta(0))
    dist.barrier()
    if rank == 1:
        time.sleep(GROUP_S / 10)  # sends nothing
        return None
    dist.set_timeout(datetime.timedelta(seconds=SET_S))
    t = torch.zeros(10)
    return timed_failure(lambda: dist.recv(t, src=1))


# --- the tests ------------------------------------------------------------------------------

@pytest.mark.parametrize("setter", ["set_timeout", "_set_pg_timeout"])
@pytest.mark.parametrize("backend", ["ringreduce", "gloo"])
def test_set_timeout_bounds_the_next_collective(backend, setter):
    out = run_ranks(_set_timeout, 2, backend, setter, timeout=120, env=NO_FR)
    elapsed, message = out[0]
    assert "timed out" in message.lower() or "timeout" in message.lower(), message
    if backend == "ringreduce":
        assert SET_S - 0.1 < elapsed < SET_S + 0.5, f"rank 0 failed after {elapsed:.2f} s: {message}"
    else:
        assert elapsed < GROUP_S / 10, f"Gloo failed after {elapsed:.2f} s: {message}"


@pytest.mark.parametrize("backend", ["ringreduce", "gloo"])
def test_an_operations_own_timeout_bounds_it_alone(backend):
    out = run_ranks(_op_timeout, 2, backend, timeout=120, env=NO_FR)
    elapsed, message = out[0]
    if backend == "ringreduce":
        assert SET_S - 0.1 < elapsed < SET_S + 0.5, f"rank 0 failed after {elapsed:.2f} s: {message}"
    else:
        assert elapsed < GROUP_S / 10, f"Gloo failed after {elapsed:.2f} s: {message}"


def test_set_timeout_bounds_a_receive_and_refuses_zero():
    out = run_ranks(_p2p_and_refusals, 2, "ringreduce", timeout=120, env=NO_FR)
    elapsed, message = out[0]
    assert SET_S - 0.1 < elapsed < SET_S + 0.5, f"rank 0's receive failed after {elapsed:.2f} s: {message}"
