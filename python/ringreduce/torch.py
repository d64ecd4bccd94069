"""torch.distributed backend "ringreduce" (torch 2.x).

Importing this module registers the backend (once; importing again is
harmless)::

    import ringreduce.torch
    import torch.distributed as dist
    dist.init_process_group("ringreduce", init_method="env://")

An installed wheel also declares the backend to torch (the entry point
``ringreduce = ringreduce.torch:register`` in the group
``torch.distributed.backends``), so there ``init_process_group("ringreduce")``
works without the import: torch imports this module and calls ``register``.

or for one device type beside another backend:
``init_process_group("cpu:ringreduce,cuda:nccl")``.

Every group (the default one and each ``new_group``) is one ringreduce
communicator: its rank 0 makes a unique id (and serves the rendezvous), puts
it in the group's c10d store, and the other ranks read it there. The group's
``timeout`` is every operation's deadline in the engine: a peer that died or
stopped answering makes the others raise within it instead of hanging. The
engine's other settings come from ``pg_options``::

    opts = ringreduce.torch.Options(chunk_bytes=1 << 20, pipeline_depth=4)
    dist.init_process_group("ringreduce", pg_options=opts)   # or new_group(..., pg_options=opts)

For inference code under ``torch.compile(fullgraph=True)`` the in-place
all-reduce is an operator too::

    ringreduce.torch.all_reduce_(hidden, dist.group.WORLD.group_name)  # SUM

A group the script never destroyed is shut down at exit (``atexit``), as
``destroy_process_group`` would; in a process forked after a group was made,
the group is closed without touching the parent's threads.

Failures raise ``ringreduce.Error`` subclasses (RuntimeErrors) carrying the
engine's message, which names the peer, the step and the chunk.
"""

from __future__ import annotations

import atexit
import datetime
from typing import Any, List, Optional

import torch
import torch.distributed as dist

from ringreduce import _torch
from ringreduce._torch import ProcessGroupRingreduce
from ringreduce.unique_id import get_unique_id

__all__ = ["ProcessGroupRingreduce", "Options", "BACKEND", "DEVICES", "abort", "agree_on_failed", "all_reduce_", "backend_of",
           "register"]

#: The engine's settings for a group, as ``pg_options``.
Options = ProcessGroupRingreduce.Options

#: The name to pass to ``init_process_group`` and ``new_group``.
BACKEND = "ringreduce"

#: The device types whose tensors this build of the backend takes: ("cpu",),
#: and "cuda" where it was built against a CUDA toolkit of torch's CUDA
#: version. torch itself refuses the others for a "ringreduce" group, naming
#: the device type.
DEVICES: tuple[str, ...] = tuple(_torch.DEVICES)

# The keys are per group: torch gives each group's creator a store prefixed
# with the group's name. A name comes back when a group is made again after
# destroy_process_group (torch counts groups from 0 again), over a store that
# may have outlived the last one: so each making of a group has keys of its
# own, numbered by a count every member adds to (members make a group
# together, so the n-th making's adds return n * size + 1 .. (n + 1) * size).
_MAKINGS_KEY = "ringreduce/makings"
_UNIQUE_ID_KEY = "ringreduce/unique_id/{}"


def _make_backend(store: Any, rank: int, size: int, timeout: datetime.timedelta,
                  options: Optional[Options] = None) -> ProcessGroupRingreduce:
    """A group's backend: its rank 0 makes the unique id and puts it in ``store``."""
    making = (store.add(_MAKINGS_KEY, 1) - 1) // size
    key = _UNIQUE_ID_KEY.format(making)
    if rank == 0:
        unique_id = bytes(get_unique_id())
        store.set(key, unique_id)
        if making > 0:
            # Every member read the last making's id to make that group.
            try:
                store.delete_key(_UNIQUE_ID_KEY.format(making - 1))
            except (RuntimeError, NotImplementedError):
                pass  # a store without deletion keeps it: only space
    else:
        unique_id = store.get(key)
    return ProcessGroupRingreduce(rank, size, bytes(unique_id), timeout, options)


def _make_unconfigured(rank: int, size: int, timeout: datetime.timedelta,
                       options: Optional[Options] = None) -> ProcessGroupRingreduce:
    """A backend for reconfigure: its communicator comes from the members'
    handles (``dist._get_reconfigure_handle``), exchanged out of band."""
    if not _torch.RECONFIGURE:
        raise ValueError("ringreduce: enable_reconfigure=True needs torch >= 2.14 (this backend was built "
                         f"against torch {torch.__version__} headers without the reconfigure API)")
    return ProcessGroupRingreduce.unconfigured(rank, size, timeout, options)


def _create_backend(dist_options: Any, backend_options: Any) -> ProcessGroupRingreduce:
    """torch's creator function (the extended API): the group's store, rank,
    size and timeout, and the ``pg_options`` given to ``init_process_group``
    or ``new_group`` (None, or an ``Options``)."""
    if backend_options is not None and not isinstance(backend_options, Options):
        raise TypeError("ringreduce: pg_options must be a ringreduce.torch.Options, not "
                        f"{type(backend_options).__module__}.{type(backend_options).__qualname__}")
    if getattr(dist_options, "enable_reconfigure", False):
        # torch's fault-tolerance regime: no communicator until
        # dist._reconfigure(uuid, handles) makes one, with no store.
        return _make_unconfigured(dist_options.group_rank, dist_options.group_size, dist_options.timeout,
                                  backend_options)
    return _make_backend(dist_options.store, dist_options.group_rank, dist_options.group_size,
                         dist_options.timeout, backend_options)


#: ``all_reduce_(tensor, group_name, op="sum")``: an in-place all-reduce over
#: the ringreduce group named ``group_name`` (``group.group_name``) as an
#: operator of torch's dispatcher (``torch.ops.ringreduce.all_reduce_``,
#: registered by the backend's extension), so that inference code under
#: ``torch.compile(fullgraph=True)`` keeps it in the graph, as DeepSpeed's
#: ``inference_all_reduce_``. ``op``: "sum", "avg", "product", "min", "max",
#: "band", "bor" or "bxor". Returns once the result is in ``tensor``.
all_reduce_ = torch.ops.ringreduce.all_reduce_


def backend_of(group: Any = None) -> ProcessGroupRingreduce:
    """The ringreduce backend behind ``group`` (default: the default group).

    ``group`` may be a ``ProcessGroup`` (what ``init_process_group`` and
    ``new_group`` make), the backend itself, or torch's debug wrapper around
    it (``TORCH_DISTRIBUTED_DEBUG=DETAIL`` wraps every plugin backend in a
    ``_ProcessGroupWrapper``). Raises TypeError when no ringreduce backend is
    behind it.
    """
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    candidates = [pg]
    if isinstance(pg, dist.ProcessGroup):
        candidates = []
        for device in DEVICES:
            try:
                candidates.append(pg._get_backend(torch.device(device)))
            except RuntimeError:
                continue  # no backend for this device type in the group
    for backend in candidates:
        # The debug wrapper keeps the real backend as wrapped_pg.
        while backend is not None and not isinstance(backend, ProcessGroupRingreduce) \
                and hasattr(backend, "wrapped_pg"):
            backend = backend.wrapped_pg
        if isinstance(backend, ProcessGroupRingreduce):
            return backend
    raise TypeError(f"ringreduce.torch: {pg!r} is not a ringreduce process group")


def abort(group: Any = None) -> None:
    """Ends ``group``'s ringreduce communicator now (default: the default group).

    Operations in flight on this rank fail at once; the peers' fail naming
    this rank instead of waiting out the timeout. The group must still be
    destroyed (``destroy_process_group``) afterwards. torch's own
    ``ProcessGroup.abort()`` reaches the same call.
    """
    backend_of(group).abort()


def agree_on_failed(group: Any = None, revoke: bool = True) -> List[int]:
    """The ranks of ``group`` (default: the default group) that every survivor agrees failed.

    Every rank of the group still alive must call it (after its collective
    failed naming the lost rank, say); they agree among themselves with no
    coordinator (``rrCommAgreeFailed``): a rank the transport reports gone
    is counted, one silent for the group's timeout too. ``revoke`` first
    ends whatever is still in flight on the group, here and on the peers
    (``rrCommRevoke``). Pass the list to ``dist.shrink_group`` to go on
    without them.
    """
    return list(backend_of(group).agree_on_failed(revoke))


def register() -> None:
    """Registers the backend with torch.distributed; once (again: nothing).

    Importing this module calls it; torch calls it through the wheel's entry
    point when a group asks for "ringreduce" before anyone imported it.
    """
    if BACKEND.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND, _create_backend, extended_api=True, devices=list(DEVICES))


def _register_shrunk_groups_as_custom() -> None:
    """Makes ``dist.shrink_group``'s new group of a ringreduce backend say so.

    torch 2.15's ``_create_shrunk_process_group`` registers the backend that
    ``shrink`` returned under ``BackendType.GLOO`` for CPU (NCCL for CUDA)
    whatever it is, and DistributedDataParallel's construction on such a
    group then crashes the process (a segmentation fault in its logger's
    ``set_construction_data_and_log``). A ringreduce backend is a custom one,
    as ``init_process_group`` registers it: so once torch made the group, it
    is registered again under ``BackendType.CUSTOM`` for its device. Other
    backends' groups are left as torch made them; a torch without the
    function is left alone.
    """
    c10d = dist.distributed_c10d
    make = getattr(c10d, "_create_shrunk_process_group", None)
    if make is None or getattr(make, "_ringreduce_custom", False):
        return

    def create(new_backend: Any, remaining_ranks: Any, metadata: Any, is_default_group: bool) -> Any:
        group = make(new_backend, remaining_ranks, metadata, is_default_group)
        if isinstance(new_backend, ProcessGroupRingreduce):
            device = metadata.get("bound_device_id") or torch.device("cpu")
            custom = dist.ProcessGroup.BackendType.CUSTOM
            group._register_backend(torch.device(device.type), custom, new_backend)
            group._set_default_backend(custom)
        return group

    create._ringreduce_custom = True  # type: ignore[attr-defined]
    c10d._create_shrunk_process_group = create


register()
_register_shrunk_groups_as_custom()
# Groups the script never destroyed end before the interpreter finalizes,
# while their threads may still take the GIL (see shutdown_all).
atexit.register(_torch.shutdown_all)
