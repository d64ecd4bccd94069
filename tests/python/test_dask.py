"""ringreduce.dask.run on a real Dask cluster (a LocalCluster of 3 worker processes).

Proves: the env:// variables each task sees (rank order, the port, local
ranks) and that they are put back afterwards; DDP training through run()
leaves every replica bit-identical (and equal to one process training on
all the data, up to rounding); a rank whose function raises makes the other
ranks' collectives fail within the timeout instead of hanging, every future
says so, and the same cluster then runs the next job.
"""

from __future__ import annotations

import logging
import os
import sys
import time

import pytest

torch = pytest.importorskip("torch")
distributed = pytest.importorskip("distributed")
import cloudpickle  # noqa: E402  (Dask's serializer; present with distributed)

import ringreduce.dask  # noqa: E402

NWORKERS = 3

# The backend under test. RR_TEST_DASK_BACKEND=gloo runs the same tests on
# PyTorch's own backend (the reference for what the tests expect).
BACKEND = os.environ.get("RR_TEST_DASK_BACKEND", "ringreduce")

# The workers import this module's functions by value: they cannot import
# the test file itself.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def client():
    if BACKEND == "ringreduce":
        try:
            import ringreduce.torch  # noqa: F401
        except ImportError as e:
            pytest.skip(f"the ringreduce torch backend is not built: {e}")
    cluster = distributed.LocalCluster(n_workers=NWORKERS, processes=True, threads_per_worker=1,
                                       dashboard_address=":0", silence_logs=logging.ERROR)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


# --- what runs on the workers ---------------------------------------------------------------

def _environment() -> dict:
    return {name: os.environ.get(name) for name in ringreduce.dask.ENV_VARIABLES}


def _report_env() -> dict:
    import torch.distributed as dist
    env = _environment()
    env["worker"] = distributed.get_worker().address
    env["group"] = dist.is_initialized()
    return env


def _make_model() -> "torch.nn.Module":
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def _batch(rank: int, step: int, n: int = 8):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(n, 16, generator=g)
    y = torch.randn(n, 4, generator=g)
    return x, y


def _train_ddp(steps: int, fail_rank: int = -1, fail_step: int = -1) -> dict:
    """DDP of a small MLP, each rank on its own batches; returns the trained parameters."""
    import torch.distributed as dist
    torch.set_num_threads(1)
    rank = dist.get_rank()
    torch.manual_seed(rank)  # different initial weights: DDP must broadcast rank 0's
    model = torch.nn.parallel.DistributedDataParallel(_make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        if rank == fail_rank and step == fail_step:
            raise ValueError(f"rank {rank} fails at step {step} on purpose")
        x, y = _batch(rank, step)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return {k: v.detach().clone() for k, v in model.module.state_dict().items()}


def _all_reduce_ranks() -> float:
    import torch.distributed as dist
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    return t.item()


def _fail_on_rank(fail_rank: int) -> float:
    import torch.distributed as dist
    if dist.get_rank() == fail_rank:
        raise ValueError(f"rank {fail_rank} fails on purpose")
    return _all_reduce_ranks()  # the others wait for it here (or, when it serves the store, still in init)


# --- tests ----------------------------------------------------------------------------------

def _unset_on_workers(client) -> bool:
    return all(all(v is None for v in env.values()) for env in client.run(_environment).values())


def test_backend_none_sets_env_and_puts_it_back(client):
    assert _unset_on_workers(client)
    futures = ringreduce.dask.run(client, _report_env, backend=None)
    envs = client.gather(futures, errors="raise")
    workers = client.scheduler_info()["workers"]
    expected_order = sorted(workers, key=lambda a: (workers[a]["host"], a))
    assert [e["worker"] for e in envs] == expected_order  # one task per worker, in rank order
    assert [e["RANK"] for e in envs] == [str(r) for r in range(NWORKERS)]
    assert {e["WORLD_SIZE"] for e in envs} == {str(NWORKERS)}
    # A LocalCluster is one host: local ranks are the ranks.
    assert [e["LOCAL_RANK"] for e in envs] == [str(r) for r in range(NWORKERS)]
    assert {e["LOCAL_WORLD_SIZE"] for e in envs} == {str(NWORKERS)}
    assert {e["MASTER_ADDR"] for e in envs} == {workers[expected_order[0]]["host"]}
    ports = {e["MASTER_PORT"] for e in envs}
    assert len(ports) == 1 and 0 < int(ports.pop()) < 65536
    assert not any(e["group"] for e in envs)  # backend=None makes no process group
    assert _unset_on_workers(client)

    # Not pure: the same call again runs again (new tasks, a new port found).
    again = ringreduce.dask.run(client, _report_env, backend=None)
    assert {f.key for f in again}.isdisjoint({f.key for f in futures})
    assert [e["RANK"] for e in client.gather(again)] == [str(r) for r in range(NWORKERS)]


def test_ddp_replicas_bit_identical(client):
    steps = 4
    futures = ringreduce.dask.run(client, _train_ddp, steps, backend=BACKEND, timeout=120)
    states = client.gather(futures, errors="raise")
    for rank, state in enumerate(states[1:], 1):
        for name, value in states[0].items():
            assert torch.equal(value, state[name]), f"rank {rank}'s {name} differs from rank 0's"

    # The same training in one process on every rank's batches: DDP averages
    # the ranks' gradients, the mean loss over the whole batch does the same.
    torch.manual_seed(0)
    model = _make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        batches = [_batch(r, step) for r in range(NWORKERS)]
        x, y = torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    for name, value in model.state_dict().items():
        assert torch.allclose(value, states[0][name], rtol=1e-5, atol=1e-6), name
    assert _unset_on_workers(client)


# Rank 0 serves the rendezvous store: when it fails at once, the others may
# still be in init_process_group's closing barrier, and the group that init
# made before it failed must be destroyed too.
@pytest.mark.parametrize("job,fail_rank", [("all_reduce", 1), ("ddp", 1), ("all_reduce", 0)])
def test_failing_rank_fails_the_others_within_timeout_and_cluster_recovers(client, job, fail_rank):
    timeout = 30.0
    start = time.monotonic()
    if job == "all_reduce":
        futures = ringreduce.dask.run(client, _fail_on_rank, fail_rank, backend=BACKEND, timeout=timeout)
    else:
        futures = ringreduce.dask.run(client, _train_ddp, 5, backend=BACKEND, timeout=timeout,
                                      fail_rank=fail_rank, fail_step=2)
    # Far longer than a prompt failure takes: a hang fails here, not in the suite's timeout.
    done, not_done = distributed.wait(futures, timeout=timeout + 60)
    elapsed = time.monotonic() - start
    assert not not_done, f"ranks {[futures.index(f) for f in not_done]} still running after {elapsed:.0f} s"
    assert elapsed < timeout, f"the failure took {elapsed:.0f} s to reach the other ranks"
    assert [f.status for f in futures] == ["error"] * NWORKERS
    failed = futures[fail_rank].exception()
    assert isinstance(failed, ValueError) and "on purpose" in str(failed)
    for rank in set(range(NWORKERS)) - {fail_rank}:
        assert isinstance(futures[rank].exception(), RuntimeError), repr(futures[rank].exception())
    assert _unset_on_workers(client)

    # The same cluster runs the next job.
    results = client.gather(ringreduce.dask.run(client, _all_reduce_ranks, backend=BACKEND, timeout=60))
    assert results == [float(sum(range(1, NWORKERS + 1)))] * NWORKERS
    assert _unset_on_workers(client)


def test_timeout_must_be_positive(client):
    with pytest.raises(ValueError, match="timeout"):
        ringreduce.dask.run(client, _report_env, timeout=-1)
