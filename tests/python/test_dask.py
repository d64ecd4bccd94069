"""ringreduce.dask on real Dask clusters of two kinds, each with 3 single-threaded workers.

``local``: a LocalCluster (worker processes under nannies, the scheduler in
this process). ``processes``: ``dask scheduler`` and ``dask worker
--no-nanny`` started as separate processes, as on a real cluster, on a test
host that ``dask_cluster.py`` makes: a network namespace joined to this one
by a veth pair (10.77.N.1 here, 10.77.N.2 there, N a free /24), where the
scheduler and the workers listen on 10.77.N.2 and this process's Client
reaches them through the veth; the workers are on two fake hosts in it (UTS
namespaces named rrfakehost0, with 2 workers, and rrfakehost1). The address
is off loopback, so the rendezvous needs RR_AUTH_TOKEN. Where a network
namespace cannot be made (it needs root and iproute2), the ``processes``
cluster is on loopback, and where UTS namespaces cannot, one host; the tests
that need more are skipped, saying why.

Proves: the env:// variables each task sees (rank order by host, local ranks,
the port, a fresh RR_AUTH_TOKEN per job) and that they are put back;
``backend=None`` with ``ringreduce.Comm.from_env()`` across hosts, and that
without the token the rendezvous refuses it; DDP training through run()
leaves every replica bit-identical (and equal to one process training on
all the data, up to rounding); a rank whose function raises makes the other
ranks' collectives fail within the timeout, every future says so, and the
same cluster runs the next job; the results channel delivers every rank's
messages in order (more than the scheduler keeps per topic) and the
checkpoints come back as the futures' results; a worker process killed
mid-job fails its rank's future with WorkerLost naming it, within the
timeout, the others with the engine's error, and the next job succeeds; a
second job's task on a worker still running the first's is refused, leaving
the first alone; a job whose submission fails leaves no task, plugin or
claim on its Results; a closed Results is held neither by the client nor by
the scheduler, and writes strict JSON.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import pathlib
import random
import signal
import socket
import time
import weakref

import pytest

torch = pytest.importorskip("torch")
distributed = pytest.importorskip("distributed")
np = pytest.importorskip("numpy")
import dask  # noqa: E402

import ringreduce  # noqa: E402
import ringreduce.dask  # noqa: E402
from dask_cluster import ProcessCluster  # noqa: E402

NWORKERS = 3
# The scheduler's per-topic event log, made short so that a job outruns it.
LOG_LENGTH = 40
# What a hang gets before a test fails: far beyond what a prompt answer takes.
DEADLINE = 90.0

# The backend under test. RR_TEST_DASK_BACKEND=gloo runs the same tests on
# PyTorch's own backend (the reference for what the tests expect).
BACKEND = os.environ.get("RR_TEST_DASK_BACKEND", "ringreduce")

# The scheduler and the workers unpickle the tasks, which name this module's
# functions: the processes cluster has this folder on its path (the
# LocalCluster's processes inherit it).
HERE = pathlib.Path(__file__).resolve().parent


# --- the clusters ---------------------------------------------------------------------------

@pytest.fixture(scope="module", params=["local", "processes"])
def cluster(request, tmp_path_factory):
    """(kind, client, ProcessCluster or None)."""
    if BACKEND == "ringreduce":
        try:
            import ringreduce.torch  # noqa: F401
        except ImportError as e:
            pytest.skip(f"the ringreduce torch backend is not built: {e}")
    if request.param == "local":
        with dask.config.set({"distributed.admin.low-level-log-length": LOG_LENGTH}):
            local = distributed.LocalCluster(n_workers=NWORKERS, processes=True, threads_per_worker=1,
                                             dashboard_address=":0", silence_logs=logging.ERROR)
        try:
            with distributed.Client(local) as client:
                yield "local", client, None
        finally:
            local.close()
    else:
        procs = ProcessCluster(tmp_path_factory.mktemp("dask"), NWORKERS, HERE, LOG_LENGTH)
        try:
            procs.start()
            client = distributed.Client(scheduler_file=str(procs.scheduler_file), timeout=30)
            try:
                client.wait_for_workers(NWORKERS, timeout=60)
                yield "processes", client, procs
                client.shutdown()
            finally:
                client.close()
        finally:
            procs.close()


@pytest.fixture
def client(cluster):
    return cluster[1]


# --- what runs on the workers ---------------------------------------------------------------

def _environment() -> dict:
    return {name: os.environ.get(name) for name in ringreduce.dask.ENV_VARIABLES}


def _report_env() -> dict:
    import torch.distributed as dist
    env = _environment()
    env["worker"] = distributed.get_worker().address
    env["hostname"] = socket.gethostname()
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


def _data(seed: int, rank: int, n: int = 4096) -> "np.ndarray":
    return np.random.default_rng([seed, rank]).integers(-1000, 1000, n, dtype=np.int64)


def _from_env_allreduce(seed: int, drop_token: bool) -> dict:
    """backend=None: the program makes its own communicator from the variables run() set."""
    if drop_token:
        del os.environ["RR_AUTH_TOKEN"]  # run() puts the environment back after the task
    rank = int(os.environ["RANK"])
    x = _data(seed, rank)
    y = np.empty_like(x)
    with ringreduce.Comm.from_env(timeout=30) as comm:
        comm.allreduce(x, y, op="sum")
        return {"rank": comm.rank, "size": comm.size, "hostname": socket.gethostname(), "sum": y}


def _metric(seed: int, rank: int, i: int) -> float:
    return random.Random(f"{seed}-{rank}-{i}").random()


def _publish_and_checkpoint(seed: int, count: int) -> dict:
    """Publishes ``count`` metrics, checks what publish refuses, returns a checkpoint too big for an event."""
    rank = int(os.environ["RANK"])
    refused = []
    for bad in ({"big": b"x" * (ringreduce.dask.MAX_MESSAGE_BYTES + 1)}, {"obj": object()}, {1: "int key"}):
        try:
            ringreduce.dask.publish(bad)
        except (ValueError, TypeError) as e:
            refused.append(type(e).__name__)
    for i in range(count):
        # A NumPy scalar and a 0-d tensor: publish makes them Python numbers.
        assert ringreduce.dask.publish({"step": np.int64(i), "loss": torch.tensor(_metric(seed, rank, i),
                                                                                  dtype=torch.float64)})
    return {"refused": refused, "checkpoint": _data(seed, rank, 1 << 17)}  # 1 MiB


def _publish_outside_a_channel() -> bool:
    return ringreduce.dask.publish({"loss": 1.0})


def _all_reduce_until_peers_fail(timeout: float) -> str:
    """Says it is running, then all-reduces until a peer is gone (the test kills one)."""
    import torch.distributed as dist
    ringreduce.dask.publish("running")
    end = time.monotonic() + timeout
    t = torch.ones(1)
    while time.monotonic() < end:
        dist.all_reduce(t)
        t.fill_(1)
    return "no peer failed"


# --- tests ----------------------------------------------------------------------------------

def _unset_on_workers(client) -> bool:
    return all(all(v is None for v in env.values()) for env in client.run(_environment).values())


def test_env_tokens_and_rank_order(cluster):
    kind, client, procs = cluster
    assert _unset_on_workers(client)
    futures = ringreduce.dask.run(client, _report_env, backend=None)
    envs = client.gather(futures, errors="raise")
    hostnames = {e["worker"]: e["hostname"] for e in envs}
    assert len(hostnames) == NWORKERS  # one task per worker
    expected_order = sorted(hostnames, key=lambda a: (hostnames[a], a))
    assert [e["worker"] for e in envs] == expected_order  # ranks by host, then address
    assert [w for w, _ in ringreduce.dask.worker_ranks(client)] == expected_order
    assert [e["RANK"] for e in envs] == [str(r) for r in range(NWORKERS)]
    assert {e["WORLD_SIZE"] for e in envs} == {str(NWORKERS)}
    if procs is not None and procs.fake_hosts:
        assert [e["hostname"] for e in envs] == ["rrfakehost0", "rrfakehost0", "rrfakehost1"]
        assert [e["LOCAL_RANK"] for e in envs] == ["0", "1", "0"]
        assert [e["LOCAL_WORLD_SIZE"] for e in envs] == ["2", "2", "1"]
    else:  # one host: local ranks are the ranks
        assert [e["LOCAL_RANK"] for e in envs] == [str(r) for r in range(NWORKERS)]
        assert {e["LOCAL_WORLD_SIZE"] for e in envs} == {str(NWORKERS)}
    assert {e["MASTER_ADDR"] for e in envs} == {distributed.comm.get_address_host(expected_order[0])}
    ports = {e["MASTER_PORT"] for e in envs}
    assert len(ports) == 1 and 0 < int(ports.pop()) < 65536
    tokens = {e["RR_AUTH_TOKEN"] for e in envs}
    assert len(tokens) == 1 and len(tokens.pop()) == 64  # one secret per job, 32 random bytes
    assert not any(e["group"] for e in envs)  # backend=None makes no process group
    assert _unset_on_workers(client)

    # Not pure: the same call again runs again (new tasks, a new token).
    again = client.gather(ringreduce.dask.run(client, _report_env, backend=None))
    assert [e["RANK"] for e in again] == [str(r) for r in range(NWORKERS)]
    assert {e["RR_AUTH_TOKEN"] for e in again}.isdisjoint({e["RR_AUTH_TOKEN"] for e in envs})


def test_comm_from_env_across_hosts_needs_the_token(cluster):
    kind, client, procs = cluster
    if kind == "local":
        pytest.skip("one host on loopback: the processes cluster has the hosts")
    seed = random.randrange(1 << 30)
    results = client.gather(ringreduce.dask.run(client, _from_env_allreduce, seed, False, backend=None))
    expected = sum(_data(seed, r) for r in range(NWORKERS))
    for rank, r in enumerate(results):
        assert (r["rank"], r["size"]) == (rank, NWORKERS)
        np.testing.assert_array_equal(r["sum"], expected)
    if procs.no_test_host:
        pytest.skip(f"no test host ({procs.no_test_host}): on loopback the token is not required")
    if not procs.fake_hosts:
        pytest.skip("no fake hosts (UTS namespaces need root and unshare)")
    assert len({r["hostname"] for r in results}) == 2

    # Without the secret run() sets, the rendezvous off loopback refuses every rank at once.
    futures = ringreduce.dask.run(client, _from_env_allreduce, seed, True, backend=None)
    distributed.wait(futures, timeout=DEADLINE)
    for f in futures:
        assert isinstance(f.exception(), ringreduce.InvalidArgumentError), repr(f.exception())
        assert "RR_AUTH_TOKEN" in str(f.exception())
    assert _unset_on_workers(client)


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
def test_failing_rank_fails_the_others_within_timeout_and_cluster_recovers(cluster, job, fail_rank):
    kind, client, _ = cluster
    if kind == "processes" and (job, fail_rank) != ("ddp", 1):
        pytest.skip("the local cluster runs every case; the processes cluster one")
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


def test_results_channel_in_order_beyond_the_log_and_checkpoints_as_futures(client, tmp_path):
    seed, count = random.randrange(1 << 30), 2 * LOG_LENGTH  # each rank alone outruns the scheduler's log
    assert client.gather(ringreduce.dask.run(client, _publish_outside_a_channel, backend=None)) == [False] * NWORKERS
    with ringreduce.dask.Results(client) as results:
        futures = ringreduce.dask.run(client, _publish_and_checkpoint, seed, count, backend=None, results=results)
        # Checkpoints: the futures' results, as large as they are.
        outcomes = client.gather(futures)
        results.wait(timeout=DEADLINE)
        for rank, outcome in enumerate(outcomes):
            assert outcome["refused"] == ["ValueError", "TypeError", "TypeError"]
            np.testing.assert_array_equal(outcome["checkpoint"], _data(seed, rank, 1 << 17))
        # Every message of every rank, in the order sent.
        for rank in range(NWORKERS):
            expected = [{"step": i, "loss": _metric(seed, rank, i)} for i in range(count)]
            assert results.messages(rank) == expected, f"rank {rank}"
            assert [r["seq"] for r in results.records(rank)] == list(range(count))
        assert results.series("loss") == {r: [_metric(seed, r, i) for i in range(count)] for r in range(NWORKERS)}
        # The scheduler kept only the last LOG_LENGTH of the topic's events, each
        # rank's newest ones up to its end mark (the seq after its last
        # message); the subscriber got them all.
        kept = client.get_events(results.topic)
        assert len(kept) == LOG_LENGTH
        for rank in range(NWORKERS):
            seqs = [m["seq"] for _, m in kept if m["rank"] == rank]
            assert seqs == list(range(count + 1 - len(seqs), count + 1)), f"rank {rank}: {seqs}"

        paths = results.write(tmp_path / "metrics")
        assert [p.name for p in paths] == [f"rank-{r}.jsonl" for r in range(NWORKERS)]
        lines = paths[1].read_text().splitlines()
        assert len(lines) == count and '"loss": ' in lines[0]
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            with pytest.raises(ImportError, match="matplotlib"):
                results.plot(tmp_path / "loss.png")
        else:
            assert results.plot(tmp_path / "loss.png").stat().st_size > 0
    # Closed: the topic's log is gone from the scheduler, what was received stays.
    assert client.get_events(results.topic) == ()
    assert len(results.messages(0)) == count


def test_task_refuses_a_worker_that_replaced_its_own(client):
    # A worker restarted at the pinned address has a new id: the rank's task must not run there.
    address = ringreduce.dask.worker_ranks(client)[0][0]
    future = client.submit(ringreduce.dask.watch.check_worker, 0, address, "Worker-gone", "k", workers=[address],
                           allow_other_workers=False, pure=False)
    distributed.wait([future], timeout=DEADLINE)
    error = future.exception()
    assert isinstance(error, ringreduce.dask.WorkerLost) and (error.rank, error.worker) == (0, address)
    assert "came back on the worker that replaced it" in str(error)


def test_timeout_must_be_positive(client):
    with pytest.raises(ValueError, match="timeout"):
        ringreduce.dask.run(client, _report_env, timeout=-1)


def _watches(dask_scheduler) -> list:
    return [name for name in dask_scheduler.plugins if name.startswith("ringreduce-watch-")]


def _hold_until(path: str, timeout: float) -> dict:
    """Says it runs, then waits for ``path`` to appear; the job's token as it began and as it ends."""
    token = os.environ["RR_AUTH_TOKEN"]
    ringreduce.dask.publish("running")
    end = time.monotonic() + timeout
    while not os.path.exists(path) and time.monotonic() < end:
        time.sleep(0.02)
    ringreduce.dask.publish("done")
    return {"began": token, "ends": os.environ.get("RR_AUTH_TOKEN")}


def test_a_second_job_on_a_busy_worker_is_refused_and_the_first_runs_on(tmp_path):
    # One worker with two threads: the second job's task runs beside the first one's.
    go = tmp_path / "go"
    local = distributed.LocalCluster(n_workers=1, processes=True, threads_per_worker=2, dashboard_address=":0",
                                     silence_logs=logging.ERROR)
    try:
        with distributed.Client(local) as client:
            with ringreduce.dask.Results(client) as first:
                held = ringreduce.dask.run(client, _hold_until, str(go), DEADLINE, backend=None, results=first)
                first.wait_messages(1, timeout=DEADLINE)
                with ringreduce.dask.Results(client) as second:
                    refused = ringreduce.dask.run(client, _hold_until, str(go), DEADLINE, backend=None,
                                                  results=second)
                    distributed.wait(refused, timeout=DEADLINE)
                    error = refused[0].exception()
                    assert isinstance(error, RuntimeError), repr(error)
                    assert "is running another job's task" in str(error) and held[0].key in str(error)
                    second.wait(timeout=DEADLINE)  # a rank that failed is not waited for
                    assert second.messages(0) == []
                    del refused, error
                go.touch()
                outcome = held[0].result(timeout=DEADLINE)
                assert outcome["began"] == outcome["ends"]  # its variables were left alone
                first.wait(timeout=DEADLINE)
                assert first.messages(0) == ["running", "done"]
            assert _unset_on_workers(client)
            assert client.gather(ringreduce.dask.run(client, _report_env, backend=None))[0]["RANK"] == "0"
    finally:
        local.close()


def test_a_job_whose_submission_fails_leaves_nothing_behind(client, monkeypatch):
    submitted = []
    submit = client.submit

    def submit_once(*args, **kwargs):  # rank 0's task goes; rank 1's submission fails
        if submitted:
            raise ConnectionError("the scheduler went away (on purpose)")
        submitted.append(submit(*args, **kwargs))
        return submitted[-1]

    seed = random.randrange(1 << 30)
    with ringreduce.dask.Results(client) as results:
        monkeypatch.setattr(client, "submit", submit_once)
        with pytest.raises(ConnectionError, match="on purpose"):
            ringreduce.dask.run(client, _publish_and_checkpoint, seed, 3, backend=None, results=results)
        monkeypatch.undo()
        assert submitted[0].cancelled()  # the rank already submitted does not run on, alone
        assert client.run_on_scheduler(_watches) == []
        with pytest.raises(ValueError, match="no job"):
            results.wait(timeout=None)  # no job was run: nothing to wait for
        # The same Results serves the next job.
        client.gather(ringreduce.dask.run(client, _publish_and_checkpoint, seed, 3, backend=None, results=results))
        results.wait(timeout=DEADLINE)
        assert results.series("loss") == {r: [_metric(seed, r, i) for i in range(3)] for r in range(NWORKERS)}


def _publish_specials() -> bool:
    for value in (float("nan"), float("inf"), -float("inf"), 1.5):
        ringreduce.dask.publish({"loss": value, "raw": b"\x01\xff"})
    return True


def _has_topic(topic: str, dask_scheduler=None) -> bool:
    return topic in dask_scheduler._broker._topics


def test_closed_results_leaves_nothing_behind_and_writes_strict_json(client, tmp_path):
    results = ringreduce.dask.Results(client)
    futures = ringreduce.dask.run(client, _publish_specials, backend=None, results=results)
    assert all(client.gather(futures))
    results.wait(timeout=DEADLINE)
    paths = results.write(tmp_path)

    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")
    for path in paths:
        records = [json.loads(line, parse_constant=refuse) for line in path.read_text().splitlines()]
        assert [r["data"] for r in records] == [{"loss": v, "raw": "01ff"} for v in (None, None, None, 1.5)]

    topic, ref = results.topic, weakref.ref(results)
    del futures
    results.close()
    del results
    gc.collect()
    assert ref() is None, gc.get_referrers(ref())  # the client holds nothing of a closed Results
    # Nor does the scheduler, also once what the client sent before has arrived.
    time.sleep(0.5)
    assert not client.run_on_scheduler(_has_topic, topic)


def test_worker_killed_mid_job_is_named_and_the_next_job_runs(cluster):
    # The last test of this module (pytest runs a module-scoped cluster's
    # tests in file order): the processes cluster's workers have no nanny,
    # and the killed one stays gone.
    kind, client, procs = cluster
    timeout, victim = 30.0, 1
    pids = client.run(os.getpid)
    with ringreduce.dask.Results(client) as results:
        futures = ringreduce.dask.run(client, _all_reduce_until_peers_fail, timeout + 30, backend=BACKEND,
                                      timeout=timeout, results=results)
        results.wait_messages(1, timeout=DEADLINE)  # every rank is in its loop of collectives
        address = ringreduce.dask.worker_ranks(client)[victim][0]
        start = time.monotonic()
        os.kill(pids[address], signal.SIGKILL)
        try:
            distributed.wait(futures, timeout=DEADLINE)
        except TimeoutError:
            pytest.fail(f"ranks {[r for r, f in enumerate(futures) if not f.done()]} still pending after "
                        f"{DEADLINE:.0f} s")
        elapsed = time.monotonic() - start
        assert elapsed < timeout, f"the lost worker took {elapsed:.0f} s to be reported"
        lost = futures[victim].exception()
        assert isinstance(lost, ringreduce.dask.WorkerLost), repr(lost)
        assert (lost.rank, lost.worker) == (victim, address)
        assert f"rank {victim}'s worker {address} left the cluster" in str(lost)
        for rank in set(range(NWORKERS)) - {victim}:
            error = futures[rank].exception()
            assert isinstance(error, RuntimeError) and not isinstance(error, ringreduce.dask.WorkerLost), repr(error)
        results.wait(timeout=DEADLINE)  # the lost rank's last message never comes: it is not waited for
        assert all(results.messages(r) == ["running"] for r in range(NWORKERS))
    # (Not futures[victim].result(): distributed raises the exception it keeps with a traceback
    # whose frames hold the future, which the client then never releases.)
    del futures

    # The next job: the local cluster's nanny restarts the worker (at a new
    # address); the processes cluster runs it on the two left.
    if kind == "local":
        client.wait_for_workers(NWORKERS, timeout=DEADLINE)
    n = NWORKERS if kind == "local" else NWORKERS - 1
    assert client.gather(ringreduce.dask.run(client, _all_reduce_ranks, backend=BACKEND, timeout=60)) == \
        [float(sum(range(1, n + 1)))] * n
    assert _unset_on_workers(client)
    # Each job's scheduler plugin leaves with its futures (the client's release is not instant).
    deadline = time.monotonic() + 10
    while client.run_on_scheduler(_watches) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert client.run_on_scheduler(_watches) == []
