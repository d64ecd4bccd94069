"""ringreduce.dask.run(..., on_lost_worker="continue") and shrink_lost, on a LocalCluster of 4 workers.

Proves: a worker process killed in the middle of a job's collectives makes
the survivors' collectives raise; each catches it, calls
``ringreduce.dask.shrink_lost()``, gets the same lost rank and its new rank
and size, and the job goes on: DDP training on the shrunk default group
keeps the three replicas bit-identical, and sums over the new group are
exact; the lost rank's future raises WorkerLost naming it, the others
return their results. Outside such a job shrink_lost refuses by name, and
run refuses a mode it does not know and "continue" on a backend that cannot
shrink.
"""

from __future__ import annotations

import logging
import os
import pathlib
import signal
import time

import pytest

torch = pytest.importorskip("torch")
distributed = pytest.importorskip("distributed")

import ringreduce  # noqa: E402
import ringreduce.dask  # noqa: E402

NWORKERS = 4
DEADLINE = 90.0
HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def client():
    try:
        import ringreduce.torch  # noqa: F401
    except ImportError as e:
        pytest.skip(f"the ringreduce torch backend is not built: {e}")
    cluster = distributed.LocalCluster(n_workers=NWORKERS, processes=True, threads_per_worker=1,
                                       dashboard_address=":0", silence_logs=logging.ERROR)
    try:
        with distributed.Client(cluster) as c:
            yield c
    finally:
        cluster.close()


def _train_through_a_loss(seconds: float) -> dict:
    """All-reduces until a peer is lost, shrinks it away, then trains DDP on the rest and checks it."""
    import torch.distributed as dist

    ringreduce.dask.publish("running")
    start_rank = dist.get_rank()
    end = time.monotonic() + seconds
    t = torch.ones(1)
    shrunk = None
    while time.monotonic() < end:
        try:
            dist.all_reduce(t)
        except RuntimeError as e:
            error = str(e)
            shrunk = ringreduce.dask.shrink_lost()
            break
        assert t.item() == dist.get_world_size(), t
        t.fill_(1)
    if shrunk is None:
        return {"error": "no peer was lost"}
    # Exact sums over the new group: new rank r adds r + 1 at every element.
    x = torch.full((1000,), float(shrunk.rank + 1), dtype=torch.float64)
    dist.all_reduce(x)
    exact = bool((x == sum(range(1, shrunk.size + 1))).all())
    # DDP on the shrunk default group: replicas stay bit-identical.
    torch.manual_seed(7)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(100 + shrunk.rank)
    for _ in range(5):
        opt.zero_grad()
        model(torch.randn(16, 8, generator=gen)).pow(2).sum().backward()
        opt.step()
    params = [p.detach().clone() for p in model.parameters()]
    gathered = [[torch.empty_like(p) for p in params] for _ in range(shrunk.size)]
    for i, p in enumerate(params):
        dist.all_gather([g[i] for g in gathered], p)
    identical = all(torch.equal(a, b) for g in gathered for a, b in zip(g, params))
    return {"start_rank": start_rank, "rank": shrunk.rank, "size": shrunk.size, "lost": shrunk.lost,
            "env": (os.environ["RANK"], os.environ["WORLD_SIZE"]), "exact": exact, "identical": identical,
            "error": error}


def _shrink_without_a_loss() -> str:
    try:
        ringreduce.dask.shrink_lost()
    except RuntimeError as e:
        return str(e)
    return "no error"


def test_survivors_shrink_the_lost_worker_away_and_go_on(client):
    victim = 2
    pids = client.run(os.getpid)
    with ringreduce.dask.Results(client) as results:
        futures = ringreduce.dask.run(client, _train_through_a_loss, DEADLINE, timeout=30, results=results,
                                      on_lost_worker="continue")
        results.wait_messages(1, timeout=DEADLINE)  # every rank is in its loop of collectives
        address = ringreduce.dask.worker_ranks(client)[victim][0]
        os.kill(pids[address], signal.SIGKILL)
        try:
            distributed.wait(futures, timeout=DEADLINE)
        except TimeoutError:
            pytest.fail(f"ranks {[r for r, f in enumerate(futures) if not f.done()]} still pending")
        lost = futures[victim].exception()
        assert isinstance(lost, ringreduce.dask.WorkerLost) and lost.rank == victim, repr(lost)
        survivors = [r for r in range(NWORKERS) if r != victim]
        outcomes = [futures[r].result() for r in survivors]
        for new_rank, (old_rank, o) in enumerate(zip(survivors, outcomes)):
            assert o["start_rank"] == old_rank, o
            assert (o["rank"], o["size"], o["lost"]) == (new_rank, NWORKERS - 1, (victim,)), o
            assert o["env"] == (str(new_rank), str(NWORKERS - 1)), o
            assert o["exact"] and o["identical"], o
            assert f"rank {victim}" in o["error"], o["error"]
    del futures
    # The nanny brings the worker back; the next job has every worker again.
    client.wait_for_workers(NWORKERS, timeout=DEADLINE)


def test_shrink_lost_refuses_outside_a_continuing_job(client):
    said = client.gather(ringreduce.dask.run(client, _shrink_without_a_loss))
    assert all("on_lost_worker='fail'" in s and "on_lost_worker='continue'" in s for s in said), said
    assert "outside a task" in _shrink_without_a_loss()
    with pytest.raises(ValueError, match="on_lost_worker must be one of"):
        ringreduce.dask.run(client, _shrink_without_a_loss, on_lost_worker="retry")
    with pytest.raises(ValueError, match="needs backend='ringreduce'"):
        ringreduce.dask.run(client, _shrink_without_a_loss, backend="gloo", on_lost_worker="continue")
