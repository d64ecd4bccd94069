"""A job's results channel: metrics sent from the ranks while they train, received by the client as they happen.

In the spirit of dask-pytorch-ddp's ``DaskResultsHandler``, on distributed's
structured events (its Pub/Sub, which that handler used, was removed from
distributed in 2025). Inside the job, ``publish(msg)`` logs an event
(``Worker.log_event``) on the job's topic; the client's :class:`Results`,
subscribed to that topic (``Client.subscribe_topic``) before the job's tasks
were submitted, keeps each rank's messages in order, can write them to a
folder and plot them::

    with ringreduce.dask.Results(client) as results:
        futures = ringreduce.dask.run(client, train, 10, results=results)
        states = client.gather(futures)          # checkpoints: task results
        results.wait()                           # every rank's last message is in
        results.write("metrics/")                # rank-0.jsonl, rank-1.jsonl, ...
        print(results.series("loss"))            # {rank: [loss, ...]}

What events are, and so what a message may be: small (at most
``MAX_MESSAGE_BYTES`` packed), msgpack-serializable (dicts with string keys,
lists, str, int, float, bool, bytes, None; NumPy and torch scalars and
arrays are turned into Python numbers and lists here), ordered per rank (each rank's messages
travel through its worker's one connection to the scheduler and on through
the client's, so they arrive in the order sent; each carries the rank's
sequence number, which the client checks). The scheduler keeps the last
``distributed.admin.low-level-log-length`` events of each topic (1000 by
default): beyond that the oldest leave the scheduler's log, but a
subscribed client has already been sent each one as it was logged (the
broker sends to subscribers on every publish), so a Results misses none.
Checkpoints are large: return them from the function (they come back as its
future's result, and stay on the worker until gathered), never as events.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import threading
import time
import uuid
from typing import Any, Dict, List, Optional, Sequence

import distributed
import msgpack

__all__ = ["Results", "publish", "MAX_MESSAGE_BYTES"]

# Events are small: each is kept by the scheduler (up to its per-topic
# length) and sent through the same connections as the tasks' messages.
MAX_MESSAGE_BYTES = 64 * 1024

# --- worker side ----------------------------------------------------------------------------


class _Channel:
    """The running job's topic in this worker process (one job at a time, as the environment)."""

    def __init__(self, worker: Any, topic: str, rank: int) -> None:
        self.worker, self.topic, self.rank = worker, topic, rank
        self.seq = 0
        self.ended = False  # the end mark went: nothing follows it
        self.lock = threading.Lock()  # one sequence number per message, logged in that order

    def send(self, data: Any = None, end: Optional[bool] = None) -> bool:
        with self.lock:
            if self.ended:
                return False
            msg = {"rank": self.rank, "seq": self.seq, "data": data}
            if end is not None:
                msg["end"] = True
                msg["ok"] = end
                self.ended = True
            self.worker.log_event(self.topic, msg)
            self.seq += 1
            return True


_channel: Optional[_Channel] = None


def _open(topic: str, rank: int) -> None:
    global _channel
    _channel = _Channel(distributed.get_worker(), topic, rank)


def _close(ok: bool) -> None:
    """The rank's last message: the client knows then that it has all of them."""
    global _channel
    channel, _channel = _channel, None
    if channel is not None:
        channel.send(end=ok)


def _plain(value: Any, where: str = "message") -> Any:
    """``value`` as msgpack takes it: NumPy/torch scalars become numbers, arrays and tuples lists."""
    if value is None or type(value) in (str, bool, int, float, bytes):
        return value
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"ringreduce.dask.publish: {where} has a key {k!r} that is not a str")
            out[k] = _plain(v, f"{where}[{k!r}]")
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    for plain in (bool, int, float, str):  # subclasses: numpy.float64, IntEnum, ...
        if isinstance(value, plain):
            return plain(value)
    tolist = getattr(value, "tolist", None)  # NumPy scalars and arrays, torch tensors
    if callable(tolist):
        return _plain(tolist(), where)
    raise TypeError(f"ringreduce.dask.publish: {where} is a {type(value).__name__}: events take dicts with "
                    "str keys, lists, str, int, float, bool, bytes and None (return large or other data "
                    "from the function instead)")


def publish(data: Any) -> bool:
    """Sends ``data`` to the client's :class:`Results` of the running job, now.

    Called by the function that ``ringreduce.dask.run`` runs, from any of its
    threads while it runs. ``data`` is small and msgpack-serializable (see
    the module's notes); the client receives each rank's messages in the
    order sent. Returns False, sending nothing, when the job has no Results
    (``run`` without ``results=``), outside a ``run`` task, and once the
    function returned (the rank's last message has gone: a thread it
    started must be done publishing before it returns), so the same
    training code runs without a channel.
    """
    channel = _channel
    if channel is None:
        return False
    data = _plain(data)
    size = len(msgpack.packb(data, use_bin_type=True))
    if size > MAX_MESSAGE_BYTES:
        raise ValueError(f"ringreduce.dask.publish: a {size}-byte message; events are at most "
                         f"{MAX_MESSAGE_BYTES} bytes (return checkpoints and other large data from the "
                         "function: they come back as its future's result)")
    return channel.send(data)


# --- client side ----------------------------------------------------------------------------


def _json_value(value: Any) -> Any:
    """A received message as strict JSON takes it: bytes as hex, NaN and infinities as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    return value


def _ignore_event(event: Any) -> None:
    """A closed Results' handler: the topic's events still on the way are dropped."""


class Results:
    """The client's end of one job's results channel.

    Make it before the job (it subscribes to a fresh topic), hand it to
    ``ringreduce.dask.run(..., results=...)``, and read it while or after
    the job runs: ``messages(rank)``, ``series(key)``, ``wait()``,
    ``write(folder)``, ``plot(path)``. One Results serves one job. ``close()``
    (or leaving a ``with`` block) unsubscribes and drops the topic's log on
    the scheduler; what was received stays readable.
    """

    def __init__(self, client: distributed.Client, name: str = "results") -> None:
        if getattr(client, "asynchronous", False):
            raise TypeError("ringreduce.dask.Results needs a synchronous distributed.Client")
        self.client = client
        self.topic = f"ringreduce-{name}-{uuid.uuid4().hex[:12]}"
        self.nranks: Optional[int] = None
        self._futures: Sequence[distributed.Future] = ()
        self._cond = threading.Condition()
        self._received: Dict[int, Dict[int, dict]] = {}  # rank -> seq -> record
        self._ends: Dict[int, int] = {}  # rank -> the seq of its last message
        self._closed = False
        client.subscribe_topic(self.topic, self._receive)

    # Called on the client's event loop for each event of the topic.
    def _receive(self, event: Any) -> None:
        timestamp, msg = event
        self._add(timestamp, msg)

    def _add(self, timestamp: float, msg: Any) -> None:
        if not isinstance(msg, dict) or "rank" not in msg or "seq" not in msg:
            return  # not ours (someone else logged on the topic)
        with self._cond:
            if self._closed:
                return
            rank, seq = msg["rank"], msg["seq"]
            if msg.get("end"):
                self._ends[rank] = seq
            else:
                self._received.setdefault(rank, {})[seq] = {"seq": seq, "time": timestamp, "data": msg["data"]}
            self._cond.notify_all()

    def _attach(self, nranks: int) -> None:
        """``run`` hands the job's size over before it submits the tasks."""
        with self._cond:
            if self.nranks is not None:
                raise ValueError(f"this Results already serves a job (topic {self.topic}); make one per job")
            if self._closed:
                raise ValueError("this Results is closed")
            self.nranks = nranks

    def _detach(self) -> None:
        """``run`` failed before the job started: this Results may serve another."""
        with self._cond:
            self.nranks = None
            self._futures = ()
            self._cond.notify_all()

    def _attach_futures(self, futures: Sequence[distributed.Future]) -> None:
        self._futures = list(futures)
        for f in self._futures:
            f.add_done_callback(self._future_done)

    def _future_done(self, _future: Any) -> None:
        with self._cond:
            self._cond.notify_all()

    def _missing(self) -> Dict[int, List[int]]:
        """Per rank that ended, the sequence numbers not received."""
        missing = {}
        for rank, end in self._ends.items():
            got = self._received.get(rank, {})
            gaps = [s for s in range(end) if s not in got]
            if gaps:
                missing[rank] = gaps
        return missing

    def _pending(self) -> List[int]:
        """The ranks whose last message has not come, and that may still send it."""
        pending = []
        for rank in range(self.nranks or 0):
            if rank in self._ends:
                continue
            future = self._futures[rank] if rank < len(self._futures) else None
            # A rank that finished or failed sent its last message before its
            # result (one connection, in order); only a lost worker's never comes.
            if future is not None and future.done() and future.status != "finished":
                continue
            pending.append(rank)
        return pending

    def wait(self, timeout: Optional[float] = 60.0) -> None:
        """Waits until every rank's last message arrived (or its worker was lost).

        Then checks each rank's sequence numbers for gaps; a message missing
        is looked for in the scheduler's log of the topic (its last
        ``distributed.admin.low-level-log-length`` events). Raises
        TimeoutError naming the ranks still sending after ``timeout``
        seconds, and RuntimeError naming messages neither received nor in
        that log.
        """
        if self.nranks is None:
            raise ValueError("no job was run with this Results")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._pending():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"ringreduce.dask.Results: ranks {self._pending()} still sending after "
                                       f"{timeout} s")
                self._cond.wait(left)
            missing = self._missing()
        if missing:
            for timestamp, msg in self.client.get_events(self.topic):
                self._add(timestamp, msg)
            with self._cond:
                missing = self._missing()
            if missing:
                raise RuntimeError(f"ringreduce.dask.Results: messages lost (rank: sequence numbers) {missing}: "
                                   "not received, and gone from the scheduler's log of the topic")

    def wait_messages(self, count: int, timeout: Optional[float] = 60.0) -> None:
        """Waits until every rank has sent at least ``count`` messages, or finished, or was lost.

        For a client that follows the job as it runs. Raises TimeoutError
        naming the ranks that have not after ``timeout`` seconds.
        """
        if self.nranks is None:
            raise ValueError("no job was run with this Results")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                behind = [r for r in self._pending() if len(self._received.get(r, ())) < count]
                if not behind:
                    return
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"ringreduce.dask.Results: ranks {behind} sent fewer than {count} "
                                       f"messages in {timeout} s")
                self._cond.wait(left)

    def messages(self, rank: int) -> List[Any]:
        """Rank ``rank``'s messages so far, in the order it sent them."""
        return [r["data"] for r in self.records(rank)]

    def records(self, rank: int) -> List[dict]:
        """Rank ``rank``'s messages with their sequence number and scheduler time: ``{"seq", "time", "data"}``."""
        with self._cond:
            got = self._received.get(rank, {})
            return [dict(got[s]) for s in sorted(got)]

    def ranks(self) -> List[int]:
        """The ranks of the job (those that sent something, before ``run`` said how many)."""
        with self._cond:
            if self.nranks is not None:
                return list(range(self.nranks))
            return sorted(self._received)

    def series(self, key: str = "loss") -> Dict[int, List[Any]]:
        """``{rank: [msg[key], ...]}`` over each rank's dict messages that have ``key``."""
        return {rank: [m[key] for m in self.messages(rank) if isinstance(m, dict) and key in m]
                for rank in self.ranks()}

    def write(self, folder: "os.PathLike[str] | str") -> List[pathlib.Path]:
        """Writes each rank's records to ``folder/rank-<rank>.jsonl`` (one JSON object a line); returns the paths.

        JSON has no NaN or infinity: such a float is written as null (a loss
        that diverged reads as a missing value), and bytes as hex strings.
        """
        folder = pathlib.Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for rank in self.ranks():
            path = folder / f"rank-{rank}.jsonl"
            with open(path, "w", encoding="utf-8") as f:
                for record in self.records(rank):
                    f.write(json.dumps({"rank": rank, "seq": record["seq"], "time": record["time"],
                                        "data": _json_value(record["data"])}, allow_nan=False) + "\n")
            paths.append(path)
        return paths

    def plot(self, path: "os.PathLike[str] | str", key: str = "loss", xlabel: str = "message",
             title: Optional[str] = None) -> pathlib.Path:
        """Plots ``series(key)``, one line per rank, into an image file (PNG, SVG, PDF: by its suffix).

        Needs matplotlib, which ringreduce does not require: without it this
        raises ImportError saying so (``write`` keeps the same data).
        """
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise ImportError("ringreduce.dask.Results.plot needs matplotlib (pip install matplotlib); "
                              "Results.write(folder) writes the same data as JSON lines") from e
        fig, ax = plt.subplots(figsize=(6, 4))
        for rank, values in self.series(key).items():
            ys = [float(v) for v in values]
            ax.plot(range(len(ys)), ys, label=f"rank {rank}")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(key)
        ax.set_title(title or key)
        ax.legend()
        fig.tight_layout()
        path = pathlib.Path(path)
        fig.savefig(path)
        plt.close(fig)
        return path

    def close(self) -> None:
        """Unsubscribes and drops the topic's log on the scheduler; what was received stays.

        The client then holds nothing of this Results (its handler for the
        topic is replaced by one that ignores what may still be on the way).
        """
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._futures = ()  # the user's: holding them would keep their results on the workers
        dropped = False
        if self.client.status == "running":
            from ._scheduler import drop_topic
            try:
                # Unsubscribes this client there too. Not unsubscribe_topic as
                # well: its message, arriving after the topic was dropped,
                # would make the scheduler's broker make it again, empty.
                dropped = self.client.run_on_scheduler(drop_topic, self.topic, self.client.id)
            except Exception:  # noqa: BLE001  the log is bounded: leaving it is harmless
                pass
        if not dropped:
            try:
                self.client.unsubscribe_topic(self.topic)
            except Exception:  # noqa: BLE001  the client no longer knows the topic, or is closed
                pass
        # distributed's unsubscribe_topic keeps the handler (and through it this
        # Results and every message received) for the client's lifetime, and
        # an event that arrives for a topic without one makes it raise in
        # its event loop: so a handler stays, one that holds nothing.
        handlers = getattr(self.client, "_event_handlers", None)
        if isinstance(handlers, dict) and self.topic in handlers:
            handlers[self.topic] = _ignore_event

    def __enter__(self) -> "Results":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
