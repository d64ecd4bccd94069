"""torch's fault-tolerance contract (dist._reconfigure) on "ringreduce".

Proves: a group made with enable_reconfigure=True has no communicator, and
refuses operations by name, until dist._reconfigure(uuid, handles) makes one
from the members' handles (dist._get_reconfigure_handle), with no store; a
list of handles ranks the members by position (reversed: every rank's rank
and torch's get_rank() follow), a set by the handles' order; collectives are
right (random data against a float64 reference) after each; a reused uuid, a
handle not ours, a list without this rank's handle and a handle listed twice
are refused at once with the group kept; members that disagree on the uuid
all fail naming one, and the next reconfigure works; a member that never
comes makes the others fail within the reconfigure's own timeout; a rank
killed in training is replaced by a new process joining with a fresh handle
and training goes on, every member's parameters identical; torch refuses
reconfigure on a group of several backends. Gloo beside it where it does
the same.
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

if not ringreduce.torch._torch.RECONFIGURE:  # pragma: no cover - torch < 2.14
    pytest.skip("this torch has no reconfigure API", allow_module_level=True)

NO_FR = {"TORCH_FR_BUFFER_SIZE": "0"}


def init(backend: str, timeout_s: float = 60.0) -> None:
    import ringreduce.torch  # noqa: F401  (registers the backend in this rank)
    dist.init_process_group(backend, init_method="env://", enable_reconfigure=True,
                            timeout=datetime.timedelta(seconds=timeout_s))


def exchange(quorum: int, rank: int, members: list) -> list:
    """Every member's handle in the order of `members` (original ranks),
    through the default group's store (out of band, as torchft's)."""
    store = dist.distributed_c10d._get_default_store()
    store.set(f"test/{quorum}/{rank}", dist._get_reconfigure_handle())
    return [store.get(f"test/{quorum}/{r}").decode() for r in members]


def seeded(seed: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    values = torch.rand(n, generator=g, dtype=torch.float64) * 200 - 100
    return values.to(dtype)


def check_allreduce(quorum: int) -> int:
    """all_reduce on the default group against a float64 reference; the
    data are keyed by the group's rank now."""
    rank, size = dist.get_rank(), dist.get_world_size()
    checks = 0
    for dtype in (torch.float32, torch.float64, torch.int64):
        for op, reduce in ((dist.ReduceOp.SUM, lambda xs: torch.stack(xs).sum(0)),
                           (dist.ReduceOp.MAX, lambda xs: torch.stack(xs).max(0).values)):
            for n in (0, 1, 7, 4099):
                t = seeded(quorum * 1000 + rank, n, dtype)
                dist.all_reduce(t, op=op)
                expected = reduce([seeded(quorum * 1000 + r, n, dtype).double() for r in range(size)])
                torch.testing.assert_close(t.double(), expected, rtol=1e-5, atol=1e-3,
                                           msg=lambda m: f"quorum {quorum} {dtype} {op} n={n}: {m}")
                checks += 1
    return checks


# --- what the ranks run ---------------------------------------------------------------------

def _orders(rank: int, size: int, backend: str) -> dict:
    init(backend)
    out = {"supports": dist._supports_reconfigure()}
    if backend == "ringreduce":
        with pytest.raises(RuntimeError, match="enable_reconfigure=True, so dist._reconfigure"):
            dist.all_reduce(torch.ones(3))
        assert dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu")).async_error() == 0
    everyone = list(range(size))
    # A list: ranks by position, in order and reversed.
    handles = exchange(1, rank, everyone)
    dist._reconfigure(uuid=101, handles=handles).wait()
    out["ranks"] = [(dist.get_rank(), dist.get_world_size())]
    checks = check_allreduce(1)
    handles = exchange(2, rank, everyone)
    dist._reconfigure(uuid=102, handles=list(reversed(handles))).wait()
    out["ranks"].append((dist.get_rank(), dist.get_world_size()))
    checks += check_allreduce(2)
    # A set: the backend ranks them.
    handles = exchange(3, rank, everyone)
    out["mine"] = dist._get_reconfigure_handle()  # the one in the set (a member's is fresh after it served)
    dist._reconfigure(uuid=103, handles=set(handles)).wait()
    out["ranks"].append((dist.get_rank(), dist.get_world_size()))
    checks += check_allreduce(3)
    out["checks"] = checks
    dist.destroy_process_group()
    return out


def _refusals(rank: int, size: int) -> dict:
    init("ringreduce")
    handles = exchange(1, rank, list(range(size)))
    dist._reconfigure(uuid=7, handles=handles).wait()
    # Refused here, before anything ends: the group goes on.
    with pytest.raises(ValueError, match="uuid=7 was used before on this group"):
        dist._reconfigure(uuid=7, handles=exchange(2, rank, list(range(size))))
    with pytest.raises(ValueError, match=r"handles\[1\] is not a ringreduce handle"):
        dist._reconfigure(uuid=8, handles=[handles[0], "tcp://10.0.0.1:1234"])
    with pytest.raises(ValueError, match="this rank's handle is not among the 1 handles"):
        dist._reconfigure(uuid=8, handles=[h for h in exchange(3, rank, list(range(size)))
                                           if h != dist._get_reconfigure_handle()][:1])
    mine = dist._get_reconfigure_handle()
    with pytest.raises(ValueError, match=r"handles\[1\] is listed twice"):
        dist._reconfigure(uuid=8, handles=[mine, mine])
    checks = check_allreduce(1)
    # Members that disagree on the uuid: all fail, naming a member; the
    # group has no communicator until the next reconfigure, which works.
    handles = exchange(4, rank, list(range(size)))
    with pytest.raises(ValueError, match="passes the same uuid") as failed:
        dist._reconfigure(uuid=9 if rank != 1 else 10, handles=handles)
    with pytest.raises(RuntimeError, match="has no communicator yet"):
        dist.all_reduce(torch.ones(2))
    handles = exchange(5, rank, list(range(size)))
    dist._reconfigure(uuid=11, handles=handles).wait()
    checks += check_allreduce(5)
    dist.destroy_process_group()
    return {"checks": checks, "mismatch": str(failed.value)}


def _absent_member(rank: int, size: int) -> object:
    init("ringreduce")
    handles = exchange(1, rank, list(range(size)))
    if rank == size - 1:
        time.sleep(8)  # never joins; leaves long after the others' timeout
        return None
    t0 = time.monotonic()
    try:
        dist._reconfigure(uuid=1, handles=handles, timeout=datetime.timedelta(seconds=2))
    except Exception as e:  # noqa: BLE001 - the message is checked
        return time.monotonic() - t0, f"{type(e).__name__}: {e}"
    raise AssertionError("reconfigure did not fail")


STEPS = 6
KILLED_AT = 3


def train_steps(model: torch.nn.Linear, first: int, last: int, rank: int) -> None:
    """SGD on every member's own batch, gradients averaged with all_reduce."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(first, last):
        g = torch.Generator().manual_seed(step * 100 + rank)
        x = torch.randn(16, 8, generator=g)
        loss = (model(x) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
        opt.step()


def _replaced(rank: int, size: int) -> dict:
    # Ranks 0-2 train; rank 2 dies at step KILLED_AT, in the middle of the
    # step's all_reduce for the others; rank 3, a new process (it joined no
    # communicator yet), takes its place with a fresh handle.
    init("ringreduce", timeout_s=20)
    spare = size - 1
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    failed = None
    if rank != spare:
        dist._reconfigure(uuid=1, handles=exchange(1, rank, [0, 1, 2])).wait()
        if rank == 2:
            train_steps(model, 0, KILLED_AT, rank)
            os._exit(1)
        try:
            train_steps(model, 0, STEPS, rank)
        except Exception as e:  # noqa: BLE001 - the dead member, named
            failed = f"{type(e).__name__}: {e}"
    if rank == spare:
        # An abort before any communicator (torchft aborts at every quorum
        # change) leaves the group to be made by the next reconfigure.
        dist.distributed_c10d._get_default_group().abort()
    # The survivors and the new process: handles through the store again.
    members = [0, 1, spare]
    dist._reconfigure(uuid=2, handles=exchange(2, rank, members)).wait()
    for p in model.parameters():  # the new member takes the state of the new rank 0
        dist.broadcast(p.data, src=0)
    train_steps(model, KILLED_AT + 1, STEPS + 4, dist.get_rank())
    flat = torch.cat([p.data.reshape(-1) for p in model.parameters()]).double()
    everyone = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, flat)
    same = all(torch.equal(e, everyone[0]) for e in everyone)
    out = {"failed": failed, "rank": dist.get_rank(), "size": dist.get_world_size(), "same": same}
    dist.destroy_process_group()
    return out


def _several_backends(rank: int, size: int) -> str:
    import ringreduce.torch  # noqa: F401
    dist.init_process_group("cpu:ringreduce,cuda:gloo", init_method="env://", enable_reconfigure=True)
    with pytest.raises(RuntimeError) as refused:
        dist._get_reconfigure_handle()
    dist.destroy_process_group()
    return str(refused.value)


# --- the tests ------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["ringreduce", "gloo"])
def test_handles_make_the_communicator_ranked_by_list_or_set(backend):
    size = 3
    out = run_ranks(_orders, size, backend, timeout=180, env=NO_FR)
    order = sorted(range(size), key=lambda r: out[r]["mine"])
    for rank in range(size):
        assert out[rank]["supports"] is True
        assert out[rank]["ranks"][0] == (rank, size)
        assert out[rank]["ranks"][1] == (size - 1 - rank, size)
        if backend == "ringreduce":  # Gloo chooses its own order for a set
            assert out[rank]["ranks"][2] == (order.index(rank), size), out
        assert out[rank]["checks"] == 3 * 3 * 2 * 4


def test_bad_handles_and_uuids_are_refused_by_name():
    out = run_ranks(_refusals, 3, timeout=180, env=NO_FR)
    for rank in range(3):
        assert out[rank]["checks"] == 2 * 3 * 2 * 4
        assert "member" in out[rank]["mismatch"] and "uuid=" in out[rank]["mismatch"], out[rank]


def test_a_member_that_never_comes_fails_the_others_within_the_timeout():
    out = run_ranks(_absent_member, 3, timeout=120, env=NO_FR)
    for rank in (0, 1):
        elapsed, message = out[rank]
        assert 1.9 < elapsed < 2.5, f"rank {rank} failed after {elapsed:.2f} s: {message}"
        assert "2" in message, message


def test_a_killed_rank_is_replaced_and_training_goes_on():
    out = run_ranks(_replaced, 4, timeout=240, env=NO_FR, expect_failure=[2])
    for rank in (0, 1):
        assert out[rank]["failed"] is not None and "2" in out[rank]["failed"], out[rank]
    assert sorted(out[r]["rank"] for r in (0, 1, 3)) == [0, 1, 2]
    for rank in (0, 1, 3):
        assert out[rank]["size"] == 3 and out[rank]["same"], out[rank]


def test_torch_refuses_reconfigure_on_a_group_of_several_backends():
    out = run_ranks(_several_backends, 2, timeout=120, env=NO_FR)
    for message in out:
        assert "do not support process groups with multiple backends" in message, message
