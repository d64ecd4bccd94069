"""torch.distributed backend "ringreduce".

Importing this module registers the backend (once; importing again is
harmless)::

    import ringreduce.torch
    import torch.distributed as dist
    dist.init_process_group("ringreduce", init_method="env://")

Every group (the default one and each ``new_group``) is one ringreduce
communicator: its rank 0 makes a unique id (and serves the rendezvous), puts
it in the group's c10d store, and the other ranks read it there. The group's
``timeout`` is every operation's deadline in the engine: a peer that died or
stopped answering makes the others raise within it instead of hanging.

Failures raise ``ringreduce.Error`` subclasses (RuntimeErrors) carrying the
engine's message, which names the peer, the step and the chunk.
"""

from __future__ import annotations

import datetime
from typing import Any

import torch.distributed as dist

from ringreduce import _torch
from ringreduce._torch import ProcessGroupRingreduce

__all__ = ["ProcessGroupRingreduce", "BACKEND", "abort"]

#: The name to pass to ``init_process_group`` and ``new_group``.
BACKEND = "ringreduce"

# The key is per group: torch gives each group's creator a store prefixed
# with the group's name.
_UNIQUE_ID_KEY = "ringreduce/unique_id"


def _create_process_group(store: Any, rank: int, size: int,
                          timeout: datetime.timedelta) -> ProcessGroupRingreduce:
    """torch's creator function: (store, group rank, group size, timeout)."""
    if rank == 0:
        unique_id = _torch.unique_id()
        store.set(_UNIQUE_ID_KEY, unique_id)
    else:
        unique_id = store.get(_UNIQUE_ID_KEY)
    return ProcessGroupRingreduce(rank, size, bytes(unique_id), timeout)


def abort(group: Any = None) -> None:
    """Ends ``group``'s communicator now (default: the default group).

    Operations in flight on this rank fail at once; the peers' fail naming
    this rank instead of waiting out the timeout. The group must still be
    destroyed (``destroy_process_group``) afterwards.
    """
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if not isinstance(pg, ProcessGroupRingreduce):
        raise TypeError(f"ringreduce.torch.abort: {pg!r} is not a ringreduce process group")
    pg.abort()


if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create_process_group)
