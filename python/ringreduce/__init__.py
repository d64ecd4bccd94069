"""ringreduce: a chunked, pipelined ring-allreduce engine (Python package).

The buffer-protocol binding, in mpi4py's shape::

    import numpy as np
    import ringreduce

    with ringreduce.Comm.from_env() as comm:          # MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
        x = np.arange(1000, dtype=np.float32)
        y = np.empty_like(x)
        comm.allreduce(x, y, op="sum")                 # out of place
        comm.allreduce(ringreduce.IN_PLACE, x)         # in place: the input is in recvbuf
        req = comm.iallreduce(ringreduce.IN_PLACE, x)  # non-blocking
        req.wait()

Buffers are numpy arrays or any C-contiguous object with the buffer protocol;
counts and element types come from them. In place means ``IN_PLACE`` as the
send buffer (for ``scatter``, as MPI's, as the receive buffer on the root).
Errors raise the classes of ringreduce.errors, carrying the engine's message.
Modules: ``ringreduce.errors`` (exceptions), ``ringreduce.ops`` (Op),
``ringreduce.unique_id``; ``ringreduce.torch`` and ``ringreduce.dask`` are
imported on their own.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from ringreduce import errors
from ringreduce.errors import (
    CudaError,
    Error,
    InternalError,
    InvalidArgumentError,
    InvalidUsageError,
    RemoteError,
    Result,
    RevokedError,
    TimeoutError,  # noqa: A004 (ringreduce.TimeoutError is also the built-in's subclass)
    UnhandledSystemError,
)
from ringreduce.ops import Op
from ringreduce import _cuda_runtime

_cuda_runtime.share_torchs()  # before _core loads the engine

from ringreduce import _core  # noqa: E402
from ringreduce._core import IN_PLACE, Comm, Request, Status  # noqa: E402
from ringreduce.unique_id import UniqueId, get_unique_id

__all__ = [
    "Comm",
    "Request",
    "Status",
    "IN_PLACE",
    "ANY_SOURCE",
    "Op",
    "UniqueId",
    "get_unique_id",
    "group",
    "get_version",
    "errors",
    "Result",
    "Error",
    "CudaError",
    "UnhandledSystemError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidUsageError",
    "RemoteError",
    "TimeoutError",
    "RevokedError",
]

#: The peer of a recv / irecv from whichever rank sends first (its Status says which).
ANY_SOURCE: int = _core.ANY_SOURCE


def get_version() -> int:
    """rrGetVersion: major * 10000 + minor * 100 + patch of libringreduce."""
    return _core.get_version()


def _version_string(code: int) -> str:
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


__version__: str = _version_string(get_version())


@contextlib.contextmanager
def group() -> Iterator[None]:
    """rrGroupStart / rrGroupEnd around a block of ``send`` and ``recv`` calls.

    Inside the block they only queue; leaving it posts every one of them
    together and returns once all finished, so that a ring shift (every rank
    sends right and receives from the left) cannot deadlock. The buffers are
    held until then. Per thread, nestable, as NCCL's groups.
    """
    _core._group_start()
    try:
        yield
    finally:
        _core._group_end()
