"""ringreduce.dask.run: one job, one pinned task per worker, the env:// variables, the process group.

See the package's docstring for the whole story; this module holds the
launch (the ranks, the variables, the tasks) and the task each rank runs.
"""

from __future__ import annotations

import datetime
import gc
import os
import secrets
import socket
import threading
import traceback
import uuid
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import distributed
from distributed.comm import get_address_host

from . import lost as _lost
from . import results as _results
from .watch import check_worker, unwatch, watch

__all__ = ["run", "worker_ranks", "ENV_VARIABLES"]

# The variables a task sets; each is put back (or removed) when it ends.
ENV_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                 "RR_AUTH_TOKEN")

Timeout = Union[None, float, int, datetime.timedelta]


class _Worker(NamedTuple):
    address: str  # the worker's Dask address
    ip: str  # the host part of that address: what the other ranks reach it at
    hostname: str  # its machine's name: ranks with the same one are on one host
    id: str  # the worker's server id: a worker restarted at the same address has a new one
    port: int  # a TCP port free on its host when asked


def _describe(dask_worker: Any) -> Tuple[str, str, int]:
    """Runs on every worker (Client.run): its hostname, its id and a port free on its host.

    The port serves the rendezvous store if this worker is rank 0's. It is
    released before the store binds it, as torchrun's is; the window is short.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    return socket.gethostname(), dask_worker.id, port


def _workers(client: distributed.Client) -> List[_Worker]:
    """Every worker of the cluster, in rank order: by hostname, then by address."""
    described = client.run(_describe)
    workers = [_Worker(address, get_address_host(address), hostname, worker_id, port)
               for address, (hostname, worker_id, port) in described.items()]
    return sorted(workers, key=lambda w: (w.hostname, w.address))


def worker_ranks(client: distributed.Client) -> List[Tuple[str, str]]:
    """The cluster's workers as ``(address, hostname)`` pairs in rank order.

    Ranks are ordered by the hostname each worker's machine reports, then by
    worker address, so that each host's ranks are consecutive (LOCAL_RANK
    counts within a host: workers that share a machine share its hostname,
    whichever of its addresses they listen on) and the order is the same for
    every call on an unchanged cluster.
    """
    return [(w.address, w.hostname) for w in _workers(client)]


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


# One job at a time per worker process: the variables, the default process
# group and the results channel are process-wide. Held by a rank's task from
# before it sets the variables until it has put them back; a second job's
# task on the same worker (one with more than one thread) is refused at once
# rather than made to wait, since waiting could deadlock two jobs whose ranks
# got their workers in different orders.
_busy = threading.Lock()
_running: Optional[str] = None  # the key of the task that holds _busy


def _run_rank(fn: Callable[..., Any], args: Sequence[Any], kwargs: Dict[str, Any], env: Dict[str, str],
              backend: Optional[str], timeout: Optional[datetime.timedelta], worker: _Worker, key: str,
              topic: Optional[str], on_lost_worker: str = "fail") -> Any:
    """The task run on each worker: its check, environment, results channel, ``fn``, clean-up."""
    global _running
    rank = int(env["RANK"])
    check_worker(rank, worker.address, worker.id, key)
    if not _busy.acquire(blocking=False):
        raise RuntimeError(
            f"ringreduce.dask: rank {rank}'s worker {worker.address} is running another job's task "
            f"({_running!r}); a worker runs one job at a time (the environment and the process group "
            "are process-wide): wait for that job's futures before running the next")
    _running = key
    saved: Dict[str, Optional[str]] = {}
    opened = ok = False
    try:
        saved = {name: os.environ.get(name) for name in env}
        os.environ.update(env)
        if topic is not None:
            _results._open(topic, rank)
            opened = True
        _lost._enter(on_lost_worker)
        result = _call(fn, args, kwargs, env, backend, timeout)
        ok = True
        return result
    finally:
        try:
            if opened:
                _results._close(ok)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            _lost._leave()
            _running = None
            _busy.release()


def _call(fn: Callable[..., Any], args: Sequence[Any], kwargs: Dict[str, Any], env: Dict[str, str],
          backend: Optional[str], timeout: Optional[datetime.timedelta]) -> Any:
    """``fn`` inside the default process group of ``backend`` (none when None)."""
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


def run(client: distributed.Client, fn: Callable[..., Any], *args: Any, backend: Optional[str] = "ringreduce",
        timeout: Timeout = None, results: Optional[_results.Results] = None, on_lost_worker: str = "fail",
        **kwargs: Any) -> List[distributed.Future]:
    """Runs ``fn(*args, **kwargs)`` once on every worker of ``client``'s cluster, as one job.

    Each worker gets one task, pinned to it (never moved to another worker),
    with RANK (by hostname, then worker address), WORLD_SIZE (the number of
    workers), LOCAL_RANK and LOCAL_WORLD_SIZE (within its host), MASTER_ADDR
    (the address of rank 0's worker), MASTER_PORT (a port found free on rank
    0's host) and RR_AUTH_TOKEN (a fresh random secret for this job, which
    ``ringreduce.Comm.from_env()`` shows to the rendezvous) in its process
    environment while it runs.

    Args:
        client: a synchronous Dask client; every worker it has takes part, so
            each must be able to run the job (and reach rank 0's host).
        fn: the program; it must pickle (a module-level function, or one that
            cloudpickle can send). Its return value is the future's result:
            checkpoints come back this way.
        backend: the torch.distributed backend of the default process group
            made before ``fn`` runs and destroyed after it: "ringreduce"
            (imports ringreduce.torch, which registers it), "gloo", ... None
            makes no group and only sets the environment (for programs that
            make their own, or that use ringreduce.Comm.from_env()).
        timeout: the group's timeout (seconds or a datetime.timedelta): a
            collective waiting on a rank that failed gives up after it. None
            is torch's default (30 minutes).
        results: a :class:`ringreduce.dask.Results` made for this job: what
            ``fn`` hands to ``ringreduce.dask.publish`` reaches it while the
            job runs.
        on_lost_worker: "fail" (the default): when a rank's worker is lost,
            the others' collectives raise and, unless ``fn`` handles that,
            their futures fail. "continue": ``fn`` may catch that error and
            call :func:`ringreduce.dask.shrink_lost`, which makes the default
            group anew from the ranks still alive and returns the new rank,
            size and the lost ranks; the job goes on with them. Needs the
            ringreduce backend (torch 2.15's Gloo cannot shrink).

    Returns:
        One future per worker, in rank order. When ``fn`` raises on a rank,
        that future holds its exception, and the ranks left waiting in a
        collective with it report an error too. When a rank's worker leaves
        the cluster before its task finished (its process died, the
        scheduler retired it), that future raises
        :class:`ringreduce.dask.WorkerLost` naming the rank and the worker
        as soon as the scheduler has removed the worker.

    A worker runs one job at a time: the process group and the variables are
    process-wide, and a task that finds a default group already made fails.
    """
    if getattr(client, "asynchronous", False):
        raise TypeError("ringreduce.dask.run needs a synchronous distributed.Client")
    if results is not None and results.client is not client:
        raise ValueError("results was made for another client")
    group_timeout = _timedelta(timeout)
    if on_lost_worker not in _lost.ON_LOST_WORKER:
        raise ValueError(f"on_lost_worker must be one of {_lost.ON_LOST_WORKER}, not {on_lost_worker!r}")
    if on_lost_worker == "continue" and backend != "ringreduce":
        raise ValueError(f"on_lost_worker='continue' needs backend='ringreduce' (the default group must shrink), "
                         f"not {backend!r}")
    workers = _workers(client)
    if not workers:
        raise ValueError("the Dask cluster has no workers")

    master = workers[0]
    local_sizes: Dict[str, int] = {}
    for w in workers:
        local_sizes[w.hostname] = local_sizes.get(w.hostname, 0) + 1

    name = getattr(fn, "__name__", "fn")
    job = uuid.uuid4().hex[:12]
    token = secrets.token_hex(32)
    keys = [f"ringreduce-{name}-{job}-rank{rank}" for rank in range(len(workers))]
    topic = None
    if results is not None:
        results._attach(len(workers))  # refuses a Results that served a job already
        topic = results.topic
    watched = False
    futures: List[distributed.Future] = []
    try:
        watched = watch(client, job, keys, workers)
        local_ranks: Dict[str, int] = {}
        for rank, (w, key) in enumerate(zip(workers, keys)):
            local_rank = local_ranks.get(w.hostname, 0)
            local_ranks[w.hostname] = local_rank + 1
            env = {
                "MASTER_ADDR": master.ip,
                "MASTER_PORT": str(master.port),
                "RANK": str(rank),
                "WORLD_SIZE": str(len(workers)),
                "LOCAL_RANK": str(local_rank),
                "LOCAL_WORLD_SIZE": str(local_sizes[w.hostname]),
                "RR_AUTH_TOKEN": token,
            }
            futures.append(client.submit(
                _run_rank, fn, args, kwargs, env, backend, group_timeout, w, key, topic, on_lost_worker,
                key=key, workers=[w.address], allow_other_workers=False, pure=False))
    except BaseException:
        # Nothing of a job that did not start is left: the ranks already
        # submitted are cancelled (one in its rendezvous gives up after its
        # timeout), the plugin goes, and the Results can serve another job.
        if futures:
            client.cancel(futures)
        if watched:
            unwatch(client, job)
        if results is not None:
            results._detach()
        raise
    if results is not None:
        results._attach_futures(futures)
    return futures
