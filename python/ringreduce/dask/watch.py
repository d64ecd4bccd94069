"""A job's rank whose worker leaves the cluster fails, naming the worker, instead of waiting forever.

Each rank's task is pinned to one worker. When that worker leaves (its
process dies, the scheduler retires or removes it), the scheduler sends the
task back to ``no-worker``: it cannot run anywhere else, and its future would
never resolve. ``watch`` registers a scheduler plugin for the job
(``_scheduler.LostWorkerWatch``) that fails such a task at once with
:class:`WorkerLost`; the other ranks' collectives fail with the engine's
error for the departed peer, as they do when a rank raises.
"""

from __future__ import annotations

import pickle
import warnings
from typing import Any, List, Sequence

import distributed

from . import _scheduler


class WorkerLost(RuntimeError):
    """A rank's worker left the Dask cluster before the rank's task finished.

    ``rank`` is the rank, ``worker`` the address of the worker it was pinned
    to, ``key`` the task's key.
    """

    def __init__(self, rank: int, worker: str, key: str, detail: str = "") -> None:
        self.rank, self.worker, self.key, self.detail = rank, worker, key, detail
        super().__init__(
            f"ringreduce.dask: rank {rank}'s worker {worker} left the cluster before the rank's task "
            f"{key!r} finished{detail}; the task is pinned to that worker and runs nowhere else "
            "(the job's other ranks fail with it)")

    def __reduce__(self):
        return (type(self), (self.rank, self.worker, self.key, self.detail))


def _plugin_name(job: str) -> str:
    return f"ringreduce-watch-{job}"


def watch(client: distributed.Client, job: str, keys: Sequence[str], workers: Sequence[Any]) -> bool:
    """Registers the job's LostWorkerWatch before its tasks are submitted.

    ``workers[rank]`` has ``address`` and ``id`` (the worker's server id).
    Returns False, with a warning, where the scheduler refuses the plugin: a
    lost worker's rank then waits as the scheduler leaves it.
    """
    watched = {}
    for rank, (key, worker) in enumerate(zip(keys, workers)):
        error = WorkerLost(rank, worker.address, key)
        watched[key] = (worker.address, worker.id, pickle.dumps(error), str(error))
    name = _plugin_name(job)
    try:
        client.register_plugin(_scheduler.LostWorkerWatch(name, watched), name=name)
    except Exception as e:  # noqa: BLE001  the job can run without it
        warnings.warn(f"ringreduce.dask: the scheduler refused the plugin that fails a rank whose worker "
                      f"leaves ({type(e).__name__}: {e}); such a rank's future would not resolve",
                      RuntimeWarning, stacklevel=3)
        return False
    return True


def unwatch(client: distributed.Client, job: str) -> None:
    """Removes the job's LostWorkerWatch now: for a job whose tasks were not all submitted.

    (A job that started needs no call: the plugin removes itself once the
    client has released every one of the job's futures.)
    """
    try:
        client.unregister_scheduler_plugin(_plugin_name(job))
    except Exception:  # noqa: BLE001  already gone, or the scheduler with it; the submit's error is the one to report
        pass


def check_worker(rank: int, address: str, worker_id: str, key: str) -> None:
    """In the task, before anything else: is this the worker the rank was pinned to?

    A worker restarted at the same address (``dask worker --worker-port``,
    a nanny restarting it) is a new worker that the scheduler may hand the
    pinned task to; the rank's peers and rendezvous are gone by then.
    """
    worker = distributed.get_worker()
    if worker.id != worker_id:
        raise WorkerLost(rank, address, key, f" (the task came back on the worker that replaced it, {worker.id})")


__all__: List[str] = ["WorkerLost", "watch", "unwatch", "check_worker"]
