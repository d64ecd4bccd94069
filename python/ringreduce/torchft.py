"""torchft process groups backed by ringreduce (torchft 0.2).

torchft (PyTorch's fault-tolerance library) keeps training going when a
replica group dies: a lighthouse forms quorums, a ``Manager`` decides each
step whether to commit, and the process group of the replica dimension is
reconfigured at every quorum change. :class:`ProcessGroupRingreduce` is that
process group::

    from torchft import Manager, Optimizer
    from ringreduce.torchft import DistributedDataParallel, ProcessGroupRingreduce

    manager = Manager(pg=ProcessGroupRingreduce(timeout=timedelta(seconds=10)),
                      min_replica_size=2, load_state_dict=..., state_dict=...,
                      replica_id="0", lighthouse_addr=..., ...)
    model = DistributedDataParallel(manager, model)
    optimizer = Optimizer(manager, optimizer)

It is torchft's reconfigurable wrapper, as torchft's own in-process
``ProcessGroupGloo`` is: each ``configure`` (one per quorum) aborts the
previous communicator and makes a new one over the store torchft hands it
(its rank 0 puts a unique id there, the others read it). What Gloo cannot
do, this group does in process, without torchft's subprocess ("Baby")
groups: ``abort`` ends the communicator at once (operations in flight fail
here, and at the peers naming this rank), a peer that died makes the
survivors' collectives fail within the timeout naming it, and ``errored``
reports a communicator that broke.

A failed operation is reported the way torchft's Manager expects of its
process groups ("tracked asynchronously"): the work's ``wait()`` returns
False instead of raising, its future carries the error (the Manager reports
it there, and the step is not committed), and ``errored()`` returns it.
torchft's DistributedDataParallel needs this: its gradient hook asserts on a
work whose ``wait()`` raised. Use :class:`DistributedDataParallel` from here
rather than torchft's: it is torchft's with a hook that survives a failure in
a model of more than one bucket.

The timeout (constructor or ``set_timeout``, which takes effect at the next
``configure`` as for torchft's other wrappers) bounds the store client, the
rendezvous of each new communicator and every operation on it.

:class:`ReconfiguredProcessGroupRingreduce` is the same group on torch's
own fault-tolerance contract (``dist._reconfigure``, torch >= 2.14), which
torchft 0.2.0 does not use yet: one process group for the whole run, made
with ``enable_reconfigure``, and at each quorum the members' reconfigure
handles exchanged through torchft's store and ``reconfigure`` making the
next communicator from them, without a rendezvous through the store. Use
either: the Manager sees no difference.

Needs torchft (``pip install torchft``; the project's environment pins
0.2.0): importing this module without it raises ImportError.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any, Optional

import torch
import torch.distributed as dist
import torchft
from torchft.manager import _ManagedFuture
from torchft.process_group import ProcessGroupWrapper, create_store_client

from ringreduce.errors import from_result
from ringreduce.torch import _make_backend, _make_unconfigured, backend_of

__all__ = ["ProcessGroupRingreduce", "ReconfiguredProcessGroupRingreduce", "DistributedDataParallel",
           "FailingSoftlyWork"]

_CUSTOM = dist.ProcessGroup.BackendType.CUSTOM


class FailingSoftlyWork(dist._Work):
    """A work whose failure is its future's: ``wait()`` returns False.

    What torchft's Manager expects of a process group's work (its
    DistributedDataParallel hook asserts on a ``wait()`` that raised).
    :class:`ProcessGroupRingreduce` wraps every work in it; wrapping the
    works of torchft's own Gloo groups in it lets them survive a peer's
    death under DistributedDataParallel too.
    """

    def __init__(self, work: dist._Work) -> None:
        super().__init__()
        self._work = work
        self.error: Optional[Exception] = None  # what wait() caught

    def wait(self, timeout: Optional[timedelta] = None) -> bool:
        try:
            return self._work.wait() if timeout is None else self._work.wait(timeout)
        except Exception as error:  # the future holds it, and errored() reports it
            self.error = error
            return False

    def get_future(self) -> torch.futures.Future:
        return self._work.get_future()

    def result(self) -> list:
        return self._work.result()

    def synchronize(self) -> None:
        self._work.synchronize()

    def is_completed(self) -> bool:
        return self._work.is_completed()

    def is_success(self) -> bool:
        return self._work.is_success()

    def exception(self) -> Optional[BaseException]:
        return self._work.exception()


class ProcessGroupRingreduce(ProcessGroupWrapper):
    """torchft's reconfigurable process group over a ringreduce communicator.

    Args:
        timeout: the store client's, each rendezvous's and every operation's
            deadline (default 60 s, torchft's).
    """

    def _create_pg(self, store: Any, rank: int, world_size: int) -> dist.ProcessGroup:
        # The same rendezvous as init_process_group("ringreduce"): blocks
        # (without the GIL) until every rank of the quorum has joined, or
        # raises naming the ranks that did not within the timeout.
        backend = _make_backend(store, rank, world_size, self._timeout)
        pg = dist.ProcessGroup(store, rank, world_size)
        pg._set_default_backend(_CUSTOM)
        pg._register_backend(torch.device("cpu"), _CUSTOM, backend)
        return pg

    def _wrap_work(self, work: dist._Work, opts: object) -> dist._Work:
        return FailingSoftlyWork(work)

    def getBackendName(self) -> str:
        return "torchft-ringreduce"

    def errored(self) -> Optional[Exception]:
        """The error that broke the current communicator, or None.

        torchft's Manager asks before each commit: a communicator that a dead
        peer or an abort ended reports it here, and the step is not committed.
        """
        pg = self._pg
        if pg is None:
            return None
        backend = backend_of(pg)
        code = backend.async_error()
        if code == 0:
            return None
        return from_result(code, f"ringreduce.torchft: the replica group's communicator failed: "
                                 f"{backend.last_error()}")

    def shutdown(self) -> None:
        """Ends the current communicator in order (torchft's wrapper only
        drops the reference): destroyed when nothing is in flight, else
        aborted, so that it returns at once either way."""
        pg = self._pg
        self._pg = None
        if pg is not None:
            backend_of(pg).shutdown()


class ReconfiguredProcessGroupRingreduce(ProcessGroupRingreduce):
    """torchft's process group on torch's reconfigure contract.

    One ``ProcessGroup`` with a ringreduce backend made for reconfigure
    (``enable_reconfigure``) lives for the whole run. Each ``configure``
    (one per quorum) puts this rank's reconfigure handle and, on rank 0, a
    fresh uuid in torchft's store, reads the quorum's handles in rank order,
    and reconfigures the group with them: the backend ends the previous
    communicator (aborted when something was in flight) and makes the next
    one over the handles. ``abort`` ends the communicator and keeps the group
    for the next quorum; ``shutdown`` ends the group. Everything else
    (failures in the work's future, ``errored``, the timeout) is
    :class:`ProcessGroupRingreduce`'s.

    Args:
        timeout: the store client's, each reconfigure's and every
            operation's deadline (default 60 s, torchft's).
    """

    _HANDLE_KEY = "ringreduce/reconfigure/handle/{}"
    _UUID_KEY = "ringreduce/reconfigure/uuid"

    def __init__(self, timeout: timedelta = timedelta(seconds=60)) -> None:
        super().__init__(timeout=timeout)
        self._group: Optional[dist.ProcessGroup] = None  # made at the first configure

    def configure(self, store_addr: str, replica_id: str, rank: int, world_size: int,
                  quorum_id: Optional[int] = None, group_rank: Optional[int] = None,
                  group_world_size: Optional[int] = None, global_ranks: Optional[list[int]] = None) -> None:
        # What torchft's wrapper keeps of each quorum (its error log reads it).
        self._replica_id, self._quorum_id, self._rank = replica_id, quorum_id, rank
        self._group_rank, self._group_world_size, self._global_ranks = group_rank, group_world_size, global_ranks
        self._pg = None  # until the group has this quorum's communicator
        # torchft's store for this quorum: its keys are the quorum's own.
        store = create_store_client(store_addr, timeout=self._timeout)
        if self._group is None:
            backend = _make_unconfigured(rank, world_size, self._timeout)
            group = dist.ProcessGroup(store, rank, world_size)
            group._set_default_backend(_CUSTOM)
            group._register_backend(torch.device("cpu"), _CUSTOM, backend)
            self._group = group
        backend = backend_of(self._group)
        store.set(self._HANDLE_KEY.format(rank), backend.get_reconfigure_handle())
        if rank == 0:
            store.set(self._UUID_KEY, str(int.from_bytes(os.urandom(8), "little") >> 1))
        uuid = int(self._read(store, self._UUID_KEY, 0, "the quorum's uuid"))
        handles = [self._read(store, self._HANDLE_KEY.format(r), r, "its reconfigure handle")
                   for r in range(world_size)]
        opts = dist.distributed_c10d.ReconfigureOptions()
        opts.uuid = uuid
        opts.handles = handles
        opts.timeout = self._timeout
        # Blocks (without the GIL) until every member has joined, or raises
        # naming the members that did not within the timeout.
        self._group.reconfigure(opts).wait()
        self._pg = self._group

    def _read(self, store: Any, key: str, rank: int, what: str) -> str:
        try:
            return store.get(key).decode()
        except dist.DistStoreError as e:
            raise TimeoutError(f"ringreduce.torchft: rank {rank} of the quorum did not put {what} in torchft's "
                               f"store within the timeout ({self._timeout.total_seconds():g} s): {e}") from e

    def abort(self, errored: bool = True) -> None:
        """Ends the current communicator at once (torchft's abort), keeping
        the group for the next ``configure``."""
        pg = self._pg
        super().abort(errored)  # aborts pg's backend and forgets pg
        if pg is None and self._group is not None:
            backend_of(self._group).abort()

    def shutdown(self) -> None:
        """Ends the group: its communicator in order (destroyed when nothing
        is in flight, else aborted)."""
        group, self._group, self._pg = self._group, None, None
        if group is not None:
            backend_of(group).shutdown()

    def getBackendName(self) -> str:
        return "torchft-ringreduce-reconfigure"


class DistributedDataParallel(torchft.DistributedDataParallel):
    """torchft's DistributedDataParallel, surviving a failure in a model of
    more than one bucket.

    Once a step's allreduce failed, torchft's Manager answers the step's
    later buckets with a plain completed future, and torchft 0.2.0's gradient
    hook asserts on it (``ddp.py``, ``_comm_hook``: ``fut._fut``): a peer's
    death then kills the survivors of any model whose gradients take more
    than one DDP bucket (1 MiB, then 25 MiB). This hook takes either future.
    Used exactly as torchft's: ``DistributedDataParallel(manager, module)``.
    """

    @staticmethod
    def _comm_hook(manager, bucket):  # unannotated: DDP checks annotations, and this module's are strings
        work = manager.allreduce(bucket.buffer())
        work.wait()
        future = work.get_future()
        return future._fut if isinstance(future, _ManagedFuture) else future
