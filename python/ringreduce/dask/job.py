"""Runs a torch.distributed program on every worker of a Dask cluster.

``run(client, fn, *args)`` submits one task per Dask worker, pinned to it,
that sets the ``env://`` variables torchrun would set (MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), makes the
default process group, calls ``fn(*args, **kwargs)`` and destroys the group
again, also when ``fn`` raises::

    from dask.distributed import Client, LocalCluster
    import ringreduce.dask

    def train(epochs):
        model = torch.nn.parallel.DistributedDataParallel(make_model())
        ...
        return model.state_dict()

    with LocalCluster(n_workers=4, threads_per_worker=1) as cluster, Client(cluster) as client:
        futures = ringreduce.dask.run(client, train, 10)
        states = client.gather(futures)

This is dask-pytorch-ddp's ``dispatch.run`` done as it should be: the port
is one the operating system found free on rank 0's worker (not a fixed
number that a second job or a lingering socket already holds), the tasks are
not pure (two runs of the same function are two runs, never one cached
result), and each worker's environment is put back after the task, so the
cluster can run the next job.

When ``fn`` raises on one rank, that rank destroys its process group at once;
the collectives the other ranks are waiting in then fail (the engine reports
the departed peer; at worst they give up after ``timeout``), and each future
reports its rank's exception.
"""

from __future__ import annotations

import datetime
import gc
import os
import socket
import traceback
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import distributed

__all__ = ["run", "worker_ranks"]

# The variables a task sets; each is put back (or removed) when it ends.
ENV_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")

Timeout = Union[None, float, int, datetime.timedelta]


def worker_ranks(client: distributed.Client) -> List[Tuple[str, str]]:
    """The cluster's workers as ``(address, host)`` pairs in rank order.

    Ranks are ordered by host, then by worker address, so that each host's
    ranks are consecutive (LOCAL_RANK counts within a host) and the order is
    the same for every call on an unchanged cluster.
    """
    try:
        info = client.scheduler_info(n_workers=-1)  # newer Dask lists only a few workers by default
    except TypeError:
        info = client.scheduler_info()
    workers = info["workers"]
    return sorted(((address, w["host"]) for address, w in workers.items()), key=lambda aw: (aw[1], aw[0]))


def _free_port() -> int:
    """A TCP port nothing listens on now, on every address of this host.

    Runs on rank 0's worker: the rendezvous store is served there. The port is
    released before the store binds it, as torchrun's is; the window is short.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _timedelta(timeout: Timeout) -> Optional[datetime.timedelta]:
    if timeout is None or isinstance(timeout, datetime.timedelta):
        return timeout
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0:
        return datetime.timedelta(seconds=timeout)
    raise ValueError(f"timeout must be seconds (> 0), a datetime.timedelta or None, not {timeout!r}")


def _abort_group(backend: str) -> None:
    """Ends a ringreduce default group's communicator now, whoever still holds the group.

    Called when ``fn`` raised: the peers' operations then fail naming this
    rank at once. Gloo cannot be aborted (pytorch/pytorch#130345); for
    other backends _destroy_group's collection is what ends the group.
    """
    if backend != "ringreduce":
        return
    import torch.distributed as dist
    import ringreduce.torch

    if dist.is_initialized():
        try:
            ringreduce.torch.abort()
        except Exception:  # noqa: BLE001  fn's exception is the one to report
            pass


def _destroy_group() -> None:
    """Destroys the default process group and frees it now.

    destroy_process_group() only drops torch's own references; the group ends
    (its connections close, which is what tells the peers) when the last one
    goes. A DistributedDataParallel module holds one, and DDP's hooks make
    reference cycles, so collect them here rather than at some later gc pass.
    """
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    gc.collect()


def _run_rank(fn: Callable[..., Any], args: Sequence[Any], kwargs: Dict[str, Any], env: Dict[str, str],
              backend: Optional[str], timeout: Optional[datetime.timedelta]) -> Any:
    """The task run on each worker: environment, process group, ``fn``, clean-up."""
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        if backend is None:
            return fn(*args, **kwargs)

        import torch.distributed as dist
        if backend == "ringreduce":
            import ringreduce.torch  # noqa: F401  (registers the backend)
        if dist.is_initialized():
            raise RuntimeError(
                f"worker {env['RANK']} already has a default process group: ringreduce.dask.run needs "
                "the worker to itself (one run at a time, no group left by other tasks)")
        failed = False
        try:
            # Inside the try: init_process_group can fail after it made the
            # default group (its closing barrier, when a rank that already
            # failed took the store down), and that group must go too.
            if timeout is None:
                dist.init_process_group(backend)
            else:
                dist.init_process_group(backend, timeout=timeout)
            return fn(*args, **kwargs)
        except BaseException as e:
            failed = True
            # The peers may be waiting for this rank in a collective: end the
            # group now so that theirs fail instead of waiting out the
            # timeout. The traceback's frames hold fn's locals (a DDP model
            # holds the group): clear them so that destroying the group ends
            # it where the backend has no abort.
            _abort_group(backend)
            traceback.clear_frames(e.__traceback__)
            raise
        finally:
            try:
                _destroy_group()
            except Exception:
                if not failed:  # else the first error is the one to report
                    raise
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def run(client: distributed.Client, fn: Callable[..., Any], *args: Any, backend: Optional[str] = "ringreduce",
        timeout: Timeout = None, **kwargs: Any) -> List[distributed.Future]:
    """Runs ``fn(*args, **kwargs)`` once on every worker of ``client``'s cluster, as one job.

    Each worker gets one task, pinned to it (never moved to another worker),
    with RANK (by host, then worker address), WORLD_SIZE (the number of
    workers), LOCAL_RANK and LOCAL_WORLD_SIZE (within its host), MASTER_ADDR
    (rank 0's host) and MASTER_PORT (a port found free on rank 0's worker)
    in its process environment while it runs.

    Args:
        client: a synchronous Dask client; every worker it has takes part, so
            each must be able to run the job (and reach rank 0's host).
        fn: the program; it must pickle (a module-level function, or one that
            cloudpickle can send). Its return value is the future's result.
        backend: the torch.distributed backend of the default process group
            made before ``fn`` runs and destroyed after it: "ringreduce"
            (imports ringreduce.torch, which registers it), "gloo", ... None
            makes no group and only sets the environment (for programs that
            make their own, or that use ringreduce.Comm.from_env()).
        timeout: the group's timeout (seconds or a datetime.timedelta): a
            collective waiting on a rank that failed gives up after it. None
            is torch's default (30 minutes).

    Returns:
        One future per worker, in rank order. When ``fn`` raises on a rank,
        that future holds its exception, and the ranks left waiting in a
        collective with it report an error too.

    A worker runs one job at a time: the process group and the variables are
    process-wide, and a task that finds a default group already made fails.
    """
    if getattr(client, "asynchronous", False):
        raise TypeError("ringreduce.dask.run needs a synchronous distributed.Client")
    group_timeout = _timedelta(timeout)
    ranks = worker_ranks(client)
    if not ranks:
        raise ValueError("the Dask cluster has no workers")

    master_worker, master_host = ranks[0]
    port = client.run(_free_port, workers=[master_worker])[master_worker]
    local_sizes: Dict[str, int] = {}
    for _, host in ranks:
        local_sizes[host] = local_sizes.get(host, 0) + 1

    name = getattr(fn, "__name__", "fn")
    job = uuid.uuid4().hex[:12]
    futures = []
    local_ranks: Dict[str, int] = {}
    for rank, (address, host) in enumerate(ranks):
        local_rank = local_ranks.get(host, 0)
        local_ranks[host] = local_rank + 1
        env = {
            "MASTER_ADDR": master_host,
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "WORLD_SIZE": str(len(ranks)),
            "LOCAL_RANK": str(local_rank),
            "LOCAL_WORLD_SIZE": str(local_sizes[host]),
        }
        futures.append(client.submit(
            _run_rank, fn, args, kwargs, env, backend, group_timeout,
            key=f"ringreduce-{name}-{job}-rank{rank}", workers=[address], allow_other_workers=False,
            pure=False))
    return futures
