"""What ringreduce.dask runs inside the Dask scheduler.

The scheduler imports it as it unpickles the plugin: like the tasks' graph,
which distributed 2026 deserializes on the scheduler too, it needs the
client's software there. It imports only the standard library and
distributed (the scheduler need not have torch), and the exceptions it
reports come pickled from the client.
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.metrics import time


class LostWorkerWatch(SchedulerPlugin):
    """Fails a job's rank whose pinned worker left the cluster, with the job's own error.

    A rank's task is restricted to one worker (``workers=[address]``,
    ``allow_other_workers=False``). When that worker leaves, because its
    process died (its connection to the scheduler closes and the scheduler
    removes it), or the scheduler retired or removed it, the scheduler sends
    the task back to ``no-worker`` (``Scheduler.remove_worker``: processing
    tasks are released, and ``valid_workers`` finds none), where it would
    wait for that address forever. This plugin moves such a task to
    ``erred`` as the scheduler's own ``no-workers-timeout`` does
    (``Scheduler._check_unrunnable_task_timeouts``): its future then raises
    the given exception in the client.

    ``keys`` maps each task's key to ``(address, worker_id, exception,
    exception_text)``: the address it is pinned to, the id of the worker
    that was there when the job started (a worker restarted at the same
    address is a different worker, and the task must not run there), and
    the pickled exception to report. The plugin removes itself once every
    key is forgotten (the client released its futures).
    """

    idempotent = False

    def __init__(self, name: str, keys: Dict[Any, Tuple[str, str, bytes, str]]) -> None:
        self.name = name
        self.keys = dict(keys)
        self.forgotten: set = set()
        self.scheduler: Any = None

    async def start(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    def transition(self, key: Any, start: str, finish: str, *args: Any, stimulus_id: str = "",
                   **kwargs: Any) -> None:
        if key not in self.keys:
            return
        if finish == "no-worker":
            # Not from inside a transition: once the scheduler is done with it.
            self.scheduler.loop.add_callback(self._fail_if_lost, key)
        elif finish == "forgotten":
            self.forgotten.add(key)
            if len(self.forgotten) == len(self.keys):
                self.scheduler.loop.add_callback(self._remove)

    def remove_worker(self, scheduler: Any, worker: str, **kwargs: Any) -> None:
        # A task already in no-worker (its worker was paused when the job
        # was submitted) makes no new transition when that worker leaves.
        for key, (address, _, _, _) in self.keys.items():
            if address == worker:
                scheduler.loop.add_callback(self._fail_if_lost, key)

    def _fail_if_lost(self, key: Any) -> None:
        scheduler = self.scheduler
        ts = scheduler.tasks.get(key)
        if ts is None or ts.state != "no-worker":
            return
        address, worker_id, exception, text = self.keys[key]
        ws = scheduler.workers.get(address)
        if ws is not None and ws.server_id == worker_id:
            return  # still there (paused, or retiring): it may yet run the task
        stimulus_id = f"ringreduce-worker-lost-{time()}"
        recommendations = scheduler.transition(key, "erred", exception=exception, cause=key,
                                               exception_text=text, stimulus_id=stimulus_id)
        scheduler.transitions(recommendations, stimulus_id=stimulus_id)

    def _remove(self) -> None:
        if self.scheduler.plugins.get(self.name) is self:
            self.scheduler.remove_plugin(self.name)


def drop_topic(topic: str, client: str, dask_scheduler: Any = None) -> bool:
    """Forgets an event topic's log on the scheduler (run with ``Client.run_on_scheduler``).

    The scheduler keeps the last ``distributed.admin.low-level-log-length``
    events of every topic until it restarts; a job's results topic is of no
    use once its Results is closed. ``client`` (the closing client's id) is
    unsubscribed here too: its own unsubscribe message may not have arrived.
    The topic stays while others subscribe to it. Uses the scheduler's event
    broker, which has no public call for this; returns False where it has
    changed.
    """
    broker = getattr(dask_scheduler, "_broker", None)
    topics = getattr(broker, "_topics", None)
    if not isinstance(topics, dict):
        return False
    topic_state = topics.get(topic)
    if topic_state is not None:
        topic_state.subscribers.discard(client)
        if not topic_state.subscribers:
            del topics[topic]
    return True
