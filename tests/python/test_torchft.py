"""ringreduce.torchft: torchft's reconfigurable process group over ringreduce.

The group on its own (configure per quorum, allreduce against a float64
reference, a peer killed during a collective, abort, set_timeout), then the
whole scenario of examples/torchft/survive_a_kill.py: 3 replicas training
under torchft's Manager and lighthouse, one SIGKILLed while the others wait
in the gradients' allreduce, the survivors committing without it, the
replica restarted, healed and back, every replica's state identical.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import timedelta

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchft")

import torch.distributed as dist  # noqa: E402

from ranks import run_ranks  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def store_address(quorum: int) -> str:
    return f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}/torchft/{quorum}/0"


def serve_store(rank: int) -> dist.TCPStore:
    # torchft's Manager serves each replica group's store; here rank 0 does.
    return dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=rank == 0,
                         wait_for_workers=False, timeout=timedelta(seconds=60))


def seeded(quorum: int, rank: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 * quorum + rank)
    return (torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1).to(dtype)


def check_allreduce(pg, quorum: int, rank: int, size: int) -> int:
    checks = 0
    for dtype in (torch.float32, torch.float64):
        for n in (0, 1, 7, 4099, 65536 * 3 + 5):
            tensor = seeded(quorum, rank, n, dtype)
            opts = dist.AllreduceOptions()
            opts.reduceOp = dist.ReduceOp.SUM
            work = pg.allreduce([tensor], opts)
            assert work.wait() is True
            expected = sum((seeded(quorum, r, n, dtype).double() for r in range(size)), torch.zeros(n, dtype=torch.float64))
            tol = 1e-5 * size if dtype == torch.float32 else 1e-12 * size
            torch.testing.assert_close(tensor.double(), expected, atol=tol, rtol=tol,
                                       msg=lambda m: f"quorum {quorum} {dtype} n={n}: {m}")
            assert work.get_future().value()[0] is tensor
            checks += 1
    return checks


GROUPS = ["ProcessGroupRingreduce", "ReconfiguredProcessGroupRingreduce"]
NAMES = {"ProcessGroupRingreduce": "torchft-ringreduce",
         "ReconfiguredProcessGroupRingreduce": "torchft-ringreduce-reconfigure"}


def make_group(kind: str, **kwargs):
    import ringreduce.torchft
    return getattr(ringreduce.torchft, kind)(**kwargs)


def _reconfigured(rank: int, size: int, kind: str) -> int:
    store = serve_store(rank)
    pg = make_group(kind, timeout=timedelta(seconds=60))
    assert pg.getBackendName() == NAMES[kind]
    assert pg.errored() is None
    checks = 0
    # torchft reconfigures at every quorum change: a new communicator each time.
    for quorum in (1, 2, 3):
        pg.configure(store_address(quorum), str(rank), rank, size, quorum_id=quorum)
        assert pg.size() == size and pg.errored() is None
        checks += check_allreduce(pg, quorum, rank, size)
    pg.shutdown()
    del store
    return checks


def _peer_killed_in_a_collective(rank: int, size: int, kind: str) -> dict:
    timeout = 60.0  # a survivor that returns well within it was told, it did not time out
    store = serve_store(rank)
    pg = make_group(kind, timeout=timedelta(seconds=timeout))
    pg.configure(store_address(1), str(rank), rank, size, quorum_id=1)
    check_allreduce(pg, 1, rank, size)
    if rank == size - 1:
        os._exit(0)  # the others' next allreduce waits for it
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.SUM
    work = pg.allreduce([torch.ones(1 << 16)], opts)
    start = time.monotonic()
    ok = work.wait()  # as torchft's Manager expects: False, the error in the future
    failed_after = time.monotonic() - start
    assert ok is False
    with pytest.raises(RuntimeError) as raised:
        work.get_future().value()
    assert f"rank {size - 1}" in str(raised.value), str(raised.value)
    errored = pg.errored()
    assert errored is not None and f"rank {size - 1}" in str(errored), str(errored)
    # The survivors form the next quorum; configure aborts the broken
    # communicator and makes a new one of the two of them.
    start = time.monotonic()
    pg.configure(store_address(2), str(rank), rank, size - 1, quorum_id=2)
    reconfigured_after = time.monotonic() - start
    assert pg.errored() is None
    check_allreduce(pg, 2, rank, size - 1)
    pg.abort()
    assert pg.errored() is None  # no communicator until the next configure
    del store
    return {"failed_after": failed_after, "reconfigured_after": reconfigured_after, "timeout": timeout}


def _a_quorum_member_that_never_joins(rank: int, size: int, kind: str) -> float:
    store = serve_store(rank)
    pg = make_group(kind)  # torchft's default, 60 s
    pg.set_timeout(timedelta(seconds=3))  # takes effect at the next configure
    start = time.monotonic()
    with pytest.raises(Exception) as raised:
        pg.configure(store_address(1), "0", 0, 2, quorum_id=1)  # rank 1 of 2 never comes
    elapsed = time.monotonic() - start
    assert "rank 1" in str(raised.value) or "timed out" in str(raised.value).lower(), str(raised.value)
    del store
    return elapsed


@pytest.mark.parametrize("kind", GROUPS)
@pytest.mark.parametrize("size", [1, 2, 3])
def test_configure_per_quorum_and_allreduce(size, kind):
    checks = run_ranks(_reconfigured, size, kind, timeout=300)
    assert checks == [30] * size


@pytest.mark.parametrize("kind", GROUPS)
def test_peer_killed_during_a_collective(kind):
    out = run_ranks(_peer_killed_in_a_collective, 3, kind, timeout=300, expect_failure=[2])
    for rank in (0, 1):
        assert out[rank]["failed_after"] < out[rank]["timeout"] / 2, out[rank]
        assert out[rank]["reconfigured_after"] < out[rank]["timeout"] / 2, out[rank]


@pytest.mark.parametrize("kind", GROUPS)
def test_set_timeout_applies_to_the_next_quorum(kind):
    elapsed = run_ranks(_a_quorum_member_that_never_joins, 1, kind, timeout=120)[0]
    assert elapsed < 30, f"configure gave up after {elapsed:.1f} s with a 3 s timeout"


@pytest.mark.parametrize("pg", ["ringreduce", "ringreduce-reconfigure"])
def test_three_replicas_survive_a_kill_mid_collective(tmp_path, pg):
    """The example's scenario: the killed replica was holding the others in
    the gradients' allreduce; they commit without it, it comes back healed,
    and all three end with identical model and optimizer state."""
    summary_path = tmp_path / "summary.json"
    env = dict(os.environ, RUST_LOG="warn")
    proc = subprocess.run([sys.executable, os.path.join(REPO, "examples", "torchft", "survive_a_kill.py"),
                           # 1.5 MB of gradients: two DDP buckets (the first is 1 MiB), so the
                           # step's second allreduce meets the first's failure.
                           "--pg", pg, "--hidden", "600", "--stall", "60", "--json", str(summary_path)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    summary = json.loads(summary_path.read_text())
    assert summary["ok"] and not summary["different_state_keys"], summary
    (kill,) = summary["kills"]
    assert kill["victim"] == 2
    assert kill["survivor_failed_steps"] >= 1, kill  # the step it was killed in was not committed
    assert kill["rejoin_step"] > 6, kill  # it came back at the others' step: healed, not from scratch
    assert summary["final_step"] > kill["rejoin_step"]
