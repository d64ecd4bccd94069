"""The torch backend's device path (CUDA tensors), on a machine without a GPU.

Proves what can be proven here, and claims nothing that needs a GPU: the
backend's CUDA build loads one CUDA runtime (torch's) in either import order
and registers for "cuda" without a driver; init_process_group(device_id=cuda)
fails by name without a GPU; and, through a recording fake of the CUDA calls
(_torch._use_fake_device_seam, device_seam.hpp) that sends host tensors down
the device path, every collective on it gives the float64 reference's result
at 1 to 3 ranks, makes its CUDA calls in the contract's order (torch's
current stream, the capture check, recordStream for each tensor the engine
holds, the engine call on that stream, the Work's event after it and after
the copies back, the device-aware future), and Work.wait() makes the current
stream wait on that event; torch's eager connect orders a barrier on the
device's stream; a call under CUDA graph capture is refused by
name before the engine is called; send and recv refuse device tensors by
name.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from ranks import run_ranks  # noqa: E402

try:
    import ringreduce.torch  # noqa: F401
except ImportError as e:  # pragma: no cover - a build without the backend
    pytest.skip(f"the ringreduce torch backend is not built: {e}", allow_module_level=True)

# The fake's tests run in every build (the device path's logic is compiled
# without CUDA too); these need the backend's CUDA build.
cuda_build = pytest.mark.skipif("cuda" not in ringreduce.torch.DEVICES,
                                reason="this build of the backend takes CPU tensors only")

R = dist.ReduceOp

# What a collective on the device path calls, in order (device_seam.hpp):
# the group's side stream ("side_stream" at a group's first call only) waits
# for the caller's stream, "record_stream" once for each tensor the engine
# reads or writes, the call on the side stream, then with the side stream
# current the copies back, the Work's event and future.
ISSUE_HEAD = ["current_stream", "capturing"]
FIRST = ["side_stream"]
ISSUE_READY = ["record_event", "stream_wait"]
ISSUE_TAIL = ["enqueue", "run_on", "record_event", "completed_future"]
WAIT = ["current_stream", "stream_wait"]


def init(timeout: float = 60.0):
    import ringreduce.torch  # noqa: F401  (registers the backend in this rank)
    dist.init_process_group("ringreduce", init_method="env://", timeout=datetime.timedelta(seconds=timeout))
    return ringreduce.torch.backend_of()._use_fake_device_seam()


def seeded(case: int, rank: int, n: int, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(7919 * case + rank)
    return torch.randn(n, generator=g, dtype=torch.float64).to(dtype)


def ordered(trace: list) -> list:
    """The calls of `trace` that order work: without the queries (torch asks
    is_completed() of a Work it is handed, which asks the event)."""
    return [call for call in trace if call != "reached"]


def issued(trace: list, holds: int, waited: bool, first: bool = False) -> None:
    """Asserts that `trace` is one issue holding `holds` tensors, then a wait if `waited`."""
    trace = ordered(trace)
    expected = (ISSUE_HEAD + (FIRST if first else []) + ISSUE_READY + ["record_stream"] * holds + ISSUE_TAIL +
                (WAIT if waited else []))
    assert trace == expected, f"{trace} != {expected}"


# --- what the ranks run ---------------------------------------------------------------------


def _every_collective(rank: int, size: int) -> int:
    seam = init()
    n = 1000 + 7  # not a multiple of any rank count
    ref = lambda case: sum(seeded(case, r, n).double() for r in range(size))  # noqa: E731

    # all_reduce, waited at once (torch calls wait()): issue, then the wait.
    t = seeded(1, rank, n)
    dist.all_reduce(t)
    issued(seam.take_trace(), holds=1, waited=True, first=True)
    assert torch.allclose(t.double(), ref(1), rtol=1e-5, atol=1e-5)

    # async_op: no wait until asked; the future is the seam's.
    t = seeded(2, rank, n)
    work = dist.all_reduce(t, op=R.MAX, async_op=True)
    issued(seam.take_trace(), holds=1, waited=False)
    assert work.get_future().wait()[0] is t
    work.wait()
    assert ordered(seam.take_trace()) == WAIT
    assert torch.equal(t.double(), torch.stack([seeded(2, r, n).double() for r in range(size)]).max(0).values)
    assert work.is_completed() and work.is_success() and work.exception() is None
    assert ordered(seam.take_trace()) == []  # queries only

    # A non-contiguous tensor: staged and copied back before the event.
    base = seeded(3, rank, 2 * n).view(n, 2)
    col = base[:, 1]
    expect_col = sum(seeded(3, r, 2 * n).view(n, 2)[:, 1].double() for r in range(size))
    dist.all_reduce(col)
    issued(seam.take_trace(), holds=1, waited=True)
    assert torch.allclose(col.double(), expect_col, rtol=1e-5, atol=1e-5)

    # broadcast from the last rank; reduce to rank 0.
    t = seeded(4, rank, n)
    dist.broadcast(t, src=size - 1)
    issued(seam.take_trace(), holds=1, waited=True)
    assert torch.equal(t, seeded(4, size - 1, n))
    t = seeded(5, rank, n)
    dist.reduce(t, dst=0)
    issued(seam.take_trace(), holds=1, waited=True)
    if rank == 0:
        assert torch.allclose(t.double(), ref(5), rtol=1e-5, atol=1e-5)

    # all_gather (a list: the flat buffer is held too) and its tensor form.
    outs = [torch.empty(n) for _ in range(size)]
    dist.all_gather(outs, seeded(6, rank, n))
    issued(seam.take_trace(), holds=2, waited=True)
    for r in range(size):
        assert torch.equal(outs[r], seeded(6, r, n))
    flat = torch.empty(size * n)
    dist.all_gather_into_tensor(flat, seeded(7, rank, n))
    issued(seam.take_trace(), holds=2, waited=True)
    assert torch.equal(flat, torch.cat([seeded(7, r, n) for r in range(size)]))

    # reduce_scatter_tensor: the sum's slice of this rank.
    out = torch.empty(n)
    dist.reduce_scatter_tensor(out, seeded(8, rank, size * n))
    issued(seam.take_trace(), holds=2, waited=True)
    full = sum(seeded(8, r, size * n).double() for r in range(size))
    assert torch.allclose(out.double(), full[rank * n:(rank + 1) * n], rtol=1e-5, atol=1e-5)

    # all_to_all_single and the list form with equal blocks (rrAllToAll on
    # the device path); uneven blocks are refused by name, before any call.
    x = torch.arange(size * 5, dtype=torch.float32) + 1000 * rank
    y = torch.empty(size * 5)
    dist.all_to_all_single(y, x)
    issued(seam.take_trace(), holds=2, waited=True)
    for p in range(size):
        assert torch.equal(y[5 * p:5 * p + 5], torch.arange(5 * rank, 5 * rank + 5, dtype=torch.float32) + 1000 * p)
    outs = [torch.empty(3) for _ in range(size)]
    dist.all_to_all(outs, [torch.full((3,), float(10 * rank + p)) for p in range(size)])
    issued(seam.take_trace(), holds=2, waited=True)
    for p in range(size):
        assert torch.equal(outs[p], torch.full((3,), float(10 * p + rank)))
    if size > 1:
        splits = [1 + (p == 0) for p in range(size)]
        with pytest.raises(RuntimeError, match="blocks of different sizes are not supported on CUDA tensors"):
            dist.all_to_all_single(torch.empty(sum(splits)), torch.zeros(sum(splits)), splits, splits)
        assert ordered(seam.take_trace()) == []

    # gather and scatter at root 0.
    gathered = [torch.empty(n) for _ in range(size)] if rank == 0 else None
    dist.gather(seeded(9, rank, n), gathered, dst=0)
    issued(seam.take_trace(), holds=2 if rank == 0 else 1, waited=True)
    if rank == 0:
        for r in range(size):
            assert torch.equal(gathered[r], seeded(9, r, n))
    got = torch.empty(n)
    dist.scatter(got, [seeded(10, r, n) for r in range(size)] if rank == 0 else None, src=0)
    issued(seam.take_trace(), holds=2 if rank == 0 else 1, waited=True)
    assert torch.equal(got, seeded(10, rank, n))

    # Zero elements and one: still one ordered call each.
    empty = torch.empty(0)
    dist.all_reduce(empty)
    issued(seam.take_trace(), holds=1, waited=True)
    one = torch.full((1,), float(rank + 1), dtype=torch.float64)
    dist.all_reduce(one, op=R.PRODUCT)
    issued(seam.take_trace(), holds=1, waited=True)
    assert one.item() == float(torch.arange(1, size + 1, dtype=torch.float64).prod())

    # A barrier has no tensors: the host path, no CUDA call.
    dist.barrier()
    assert seam.take_trace() == []

    dist.destroy_process_group()
    return 1


def _works_after_abort_and_shutdown(rank: int, size: int) -> int:
    seam = init()
    # A Work whose event the GPU has not passed: not completed, and
    # wait(timeout) waits on the host and then says so by name.
    seam.set_reached(False)
    t = torch.ones(4)
    pending = dist.all_reduce(t, async_op=True)
    assert not pending.is_completed()
    with pytest.raises(RuntimeError, match="expired before the GPU reached"):
        pending.wait(datetime.timedelta(milliseconds=50))
    # One the GPU passed: a success, also after an orderly shutdown.
    seam.set_reached(True)
    done = dist.all_reduce(t, async_op=True)
    assert done.is_completed() and done.is_success() and done.exception() is None
    seam.set_reached(False)
    late = dist.all_reduce(t, async_op=True)  # not yet passed when the group is aborted
    # Every rank's call has ended before any aborts (through the store: an
    # engine barrier's last word could still be in flight at the abort).
    store = dist.distributed_c10d._get_default_store()
    store.add("late_issued", 1)
    while store.add("late_issued", 0) < size:
        time.sleep(0.01)
    ringreduce.torch.backend_of().abort()
    # The aborted group's Work is completed, failed, and wait() raises it.
    assert late.is_completed() and not late.is_success()
    assert "aborted" in str(late.exception())
    with pytest.raises(RuntimeError, match="ordered on a CUDA stream.*aborted"):
        late.wait()
    assert done.is_success()  # its end was seen before the abort
    dist.destroy_process_group()
    return 1


def _shutdown_keeps_successes(rank: int, size: int) -> int:
    seam = init()
    t = torch.ones(4)
    seam.set_reached(False)  # torch's own look at the new Work finds it pending
    work = dist.all_reduce(t, async_op=True)
    assert not work.is_completed()
    held = ringreduce.torch.backend_of()  # the group outlives its shutdown here
    dist.destroy_process_group()
    seam.set_reached(True)
    # Its end first seen after the orderly shutdown: not a failure.
    assert work.is_completed() and work.is_success() and work.exception() is None
    work.wait()
    assert ordered(seam.take_trace())[-2:] == WAIT
    del held
    return 1


def _capture_refused(rank: int, size: int) -> str:
    seam = init()
    seam.set_capturing(True)
    t = torch.ones(10)
    try:
        dist.all_reduce(t)
        message = ""
    except RuntimeError as e:
        message = str(e)
    # Refused before the engine was called: nothing recorded on the stream.
    assert seam.take_trace() == ISSUE_HEAD
    seam.set_capturing(False)
    # Every rank refused it, so the group goes on in step.
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((10,), float(size)))
    dist.destroy_process_group()
    return message


def _point_to_point_refused(rank: int, size: int) -> str:
    init()
    try:
        dist.send(torch.ones(4), dst=1 - rank)
        message = ""
    except RuntimeError as e:
        message = str(e)
    dist.destroy_process_group()
    return message


def _eager_connect(rank: int, size: int) -> int:
    seam = init()
    backend = ringreduce.torch.backend_of()
    # What init_process_group(device_id=cuda:i) calls on a backend that
    # splits: a barrier ordered on the group's stream on the device, which
    # sets the communicator's stream path up there now.
    backend.eager_connect_single_device(torch.device("cuda", 0))
    assert seam.take_trace() == ["side_stream", "enqueue"]  # on the group's stream, never NULL
    backend.eager_connect_single_device(torch.device("cpu"))  # nothing to set up
    assert seam.take_trace() == []
    t = torch.ones(3)
    dist.all_reduce(t)  # the ranks are still in step
    assert torch.equal(t, torch.full((3,), float(size)))
    dist.destroy_process_group()
    return 1


def _device_id_without_a_gpu(rank: int, size: int) -> str:
    import ringreduce.torch  # noqa: F401
    try:
        dist.init_process_group("ringreduce", init_method="env://", device_id=torch.device("cuda", 0))
    except Exception as e:  # noqa: BLE001 - the message is what is checked
        return f"{type(e).__name__}: {e}"
    dist.destroy_process_group()
    return ""


def _registered_for_cuda(rank: int, size: int, backend: str) -> dict:
    import ringreduce.torch
    dist.init_process_group(backend, init_method="env://")
    world = dist.group.WORLD
    kinds = {device: type(world._get_backend(torch.device(device))).__name__ for device in ("cpu", "cuda")}
    kinds["one backend"] = world._get_backend(torch.device("cpu")) is world._get_backend(torch.device("cuda"))
    t = torch.ones(3)
    dist.all_reduce(t)  # a CPU tensor, on whichever backend "cpu" names
    assert torch.equal(t, torch.full((3,), float(size)))
    dist.destroy_process_group()
    return kinds


# --- the tests --------------------------------------------------------------------------------


@cuda_build
@pytest.mark.parametrize("first", ["torch", "ringreduce"])
def test_one_cuda_runtime_in_the_process_in_either_import_order(first):
    second = "ringreduce" if first == "torch" else "torch"
    code = (f"import {first}, {second}, ringreduce.torch\n"
            "maps = open('/proc/self/maps').read().splitlines()\n"
            "print(sorted({l.split()[-1] for l in maps if 'libcudart' in l}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    loaded = eval(out.stdout.strip())  # noqa: S307 - our own child's list of paths
    assert len(loaded) == 1, loaded
    assert "nvidia" in loaded[0], f"{loaded[0]} is not torch's CUDA runtime"


no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="what a machine without a GPU does")


@cuda_build
@no_gpu
@pytest.mark.parametrize("backend,cpu,one", [
    ("ringreduce", "ProcessGroupRingreduce", True),
    ("cpu:ringreduce,cuda:ringreduce", "ProcessGroupRingreduce", True),
    ("cpu:gloo,cuda:ringreduce", "ProcessGroupGloo", False),
])
def test_registered_for_cuda_without_a_driver(backend, cpu, one):
    (kinds,) = run_ranks(_registered_for_cuda, 1, backend, timeout=300)
    assert kinds == {"cpu": cpu, "cuda": "ProcessGroupRingreduce", "one backend": one}, kinds


@no_gpu
def test_device_id_without_a_gpu_fails_by_name():
    (message,) = run_ranks(_device_id_without_a_gpu, 1, timeout=300)
    assert "device_id" in message and "cuda:0" in message, message


@pytest.mark.parametrize("size", [1, 2, 3])
def test_every_collective_on_the_device_path_in_order(size):
    run_ranks(_every_collective, size, timeout=300)


def test_a_pending_work_an_aborted_one_and_an_orderly_shutdown():
    run_ranks(_works_after_abort_and_shutdown, 2, timeout=300)
    run_ranks(_shutdown_keeps_successes, 2, timeout=300)


def test_eager_connect_orders_a_barrier_on_the_device_stream():
    run_ranks(_eager_connect, 2, timeout=300)


def test_a_call_under_graph_capture_is_refused_by_name():
    messages = run_ranks(_capture_refused, 2, timeout=300)
    for m in messages:
        assert "CUDA graph" in m and "cudaStreamIsCapturing" in m and "ringreduce allreduce" in m, m


def test_send_and_recv_refuse_device_tensors_by_name():
    for message in run_ranks(_point_to_point_refused, 2, timeout=300):
        assert "ringreduce send" in message and "point-to-point" in message, message
