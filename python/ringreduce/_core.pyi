"""Type stub of ringreduce._core, the buffer-protocol binding of the C API.

Buffers: numpy arrays or any C-contiguous object with the buffer protocol
(bytearray, memoryview, array.array, ...). Receive buffers must be writable.
Element types: int8, uint8, int32, uint32, int64, uint64, float16, float32,
float64, and bool (as uint8, reducing logically). Counts come from the
buffers' sizes. In place: IN_PLACE as sendbuf (scatter: as recvbuf, root).
"""

from __future__ import annotations

import sys
from typing import NamedTuple, Optional, Sequence, Union

if sys.version_info >= (3, 12):
    from collections.abc import Buffer as _Buffer
else:
    from typing_extensions import Buffer as _Buffer  # PEP 688

from ringreduce.errors import Error
from ringreduce.ops import Op

BufferLike = _Buffer
OpLike = Union[Op, int, str]

class _InPlaceType: ...

IN_PLACE: _InPlaceType
SendBuffer = Union[BufferLike, _InPlaceType]
# The peer of a recv / irecv from whichever rank sends first.
ANY_SOURCE: int
UNIQUE_ID_BYTES: int

class Status(NamedTuple):
    """A point-to-point message: the sender's rank (for a send, this rank), its tag, its element count."""

    source: int
    tag: int
    count: int

def get_version() -> int:
    """rrGetVersion: major * 10000 + minor * 100 + patch."""

def error_string(result: int) -> str:
    """rrGetErrorString: the fixed text of a result code."""

def _get_unique_id() -> bytes: ...
def _group_start() -> None: ...
def _group_end() -> None: ...

class Request:
    """A non-blocking call in flight; keeps its buffers alive until it finished."""

    def test(self) -> bool:
        """True once the call finished, False while it runs; raises its error if it failed."""
    def wait(self, timeout: Optional[float] = None) -> None:
        """Waits until the call finished; raises its error if it failed.

        timeout: seconds (None: the communicator's own timeout). On expiry
        raises ringreduce.TimeoutError and the request stays valid.
        """
    @property
    def done(self) -> bool:
        """Whether the call finished."""
    @property
    def status(self) -> Optional[Status]:
        """A finished point-to-point request's Status; None before it finished, and for collectives."""
    @property
    def source(self) -> Optional[int]:
        """status.source: a finished receive's sender (the rank ANY_SOURCE matched); None otherwise."""

class Comm:
    """A communicator (rrComm_t). Destroyed on leaving a ``with`` block (aborted if it raised)."""

    @staticmethod
    def from_env(
        *,
        timeout: Optional[float] = None,
        chunk_bytes: Optional[int] = None,
        pipeline_depth: Optional[int] = None,
        check_arguments: Optional[bool] = None,
    ) -> Comm:
        """env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE (or OpenMPI's, PMI's, Slurm's).

        timeout: seconds, the deadline of init and of each operation
        (RR_TIMEOUT_MS); the others as RR_CHUNK_BYTES, RR_PIPELINE_DEPTH,
        RR_CHECK_ARGUMENTS. None: the environment variable or the default.
        """
    @staticmethod
    def init(
        url: str,
        nranks: int = -1,
        rank: int = -1,
        *,
        timeout: Optional[float] = None,
        chunk_bytes: Optional[int] = None,
        pipeline_depth: Optional[int] = None,
        check_arguments: Optional[bool] = None,
    ) -> Comm:
        """rrCommInitUrl: 'env://', 'tcp://host:port' or 'file:///path'; nranks/rank < 0 from the environment."""
    @staticmethod
    def init_rank(
        nranks: int,
        unique_id: bytes,
        rank: int,
        *,
        timeout: Optional[float] = None,
        chunk_bytes: Optional[int] = None,
        pipeline_depth: Optional[int] = None,
        check_arguments: Optional[bool] = None,
    ) -> Comm:
        """rrCommInitRankConfig with the UniqueId from ringreduce.get_unique_id()."""
    @property
    def rank(self) -> int:
        """This rank, 0 .. size-1."""
    @property
    def size(self) -> int:
        """The number of ranks."""
    @property
    def timeout(self) -> float:
        """Seconds: the deadline of each operation called from now on (rrCommSetTimeout); settable."""
    @timeout.setter
    def timeout(self, seconds: float) -> None: ...
    @property
    def closed(self) -> bool:
        """Whether destroy() or abort() ended it."""
    def split(self, color: int, key: int = 0) -> Optional[Comm]:
        """rrCommSplit (collective): same color >= 0 -> one new Comm ranked by key; negative color -> None."""
    def destroy(self) -> None:
        """rrCommDestroy, after waiting for the requests still in flight. Idempotent."""
    def abort(self) -> None:
        """rrCommAbort: ends it now; calls in other threads and its requests fail ('aborted'). Idempotent."""
    def shrink(self, exclude: Optional[Sequence[int]] = None) -> Comm:
        """rrCommShrink (the ranks not in ``exclude``, all passing it alike, make a new Comm) or, without
        ``exclude``, rrCommShrinkFailed (the ranks still alive agree which failed)."""
    def unique_id(self) -> bytes:
        """rrCommGetUniqueId (collective): the id new processes join with (Comm.init_rank) while these grow()."""
    def grow(self, nranks: int, unique_id: bytes) -> Comm:
        """rrCommGrow: these ranks at their numbers, new ranks (Comm.init_rank on unique_id) after them."""
    @property
    def excluded(self) -> list[int]:
        """The old ranks the shrink that made this Comm left out (empty otherwise)."""
    def revoke(self) -> None:
        """rrCommRevoke: every pending and later call here and on every peer raises RevokedError."""
    def async_error(self) -> Optional[Error]:
        """rrCommGetAsyncError: None while healthy, else the error (not raised) that broke it."""
    def bytes_sent(self, peer: int) -> int:
        """Payload bytes sent to ``peer`` since the communicator was made."""
    def bytes_received(self, peer: int) -> int:
        """Payload bytes received from ``peer`` since the communicator was made."""
    def dump(self) -> None:
        """rrCommDump: this rank's view of the communicator, to stderr."""
    def __enter__(self) -> Comm: ...
    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool: ...

    # Collectives. Blocking forms return None; i-forms return a Request.
    # timeout: this call's own deadline in seconds (its per-call config);
    # algorithm (allreduce's): its schedule, as RR_ALGO spells it. None: the
    # communicator's.
    def allreduce(
        self,
        sendbuf: SendBuffer,
        recvbuf: BufferLike,
        op: OpLike = "sum",
        *,
        timeout: Optional[float] = None,
        algorithm: Optional[str] = None,
    ) -> None:
        """recvbuf[i] = op over every rank's sendbuf[i]. In place: IN_PLACE as sendbuf."""
    def iallreduce(
        self,
        sendbuf: SendBuffer,
        recvbuf: BufferLike,
        op: OpLike = "sum",
        *,
        timeout: Optional[float] = None,
        algorithm: Optional[str] = None,
    ) -> Request:
        """Non-blocking allreduce."""
    def reduce_scatter(
        self,
        sendbuf: SendBuffer,
        recvbuf: BufferLike,
        op: OpLike = "sum",
        *,
        timeout: Optional[float] = None,
    ) -> None:
        """recvbuf = op over every rank's block ``rank`` of sendbuf (size blocks of len(recvbuf)).

        In place: IN_PLACE as sendbuf; recvbuf holds every block and this
        rank's result lands in its block ``rank``.
        """
    def ireduce_scatter(
        self,
        sendbuf: SendBuffer,
        recvbuf: BufferLike,
        op: OpLike = "sum",
        *,
        timeout: Optional[float] = None,
    ) -> Request:
        """Non-blocking reduce_scatter."""
    def allgather(self, sendbuf: SendBuffer, recvbuf: BufferLike, *, timeout: Optional[float] = None) -> None:
        """recvbuf block r = rank r's sendbuf. In place: IN_PLACE as sendbuf; own block already at ``rank``."""
    def iallgather(
        self,
        sendbuf: SendBuffer,
        recvbuf: BufferLike,
        *,
        timeout: Optional[float] = None,
    ) -> Request:
        """Non-blocking allgather."""
    def broadcast(
        self,
        sendbuf: Optional[SendBuffer],
        recvbuf: BufferLike,
        root: int = 0,
        *,
        timeout: Optional[float] = None,
    ) -> None:
        """recvbuf = the root's sendbuf (read on the root only). In place: IN_PLACE as sendbuf."""
    def ibroadcast(
        self,
        sendbuf: Optional[SendBuffer],
        recvbuf: BufferLike,
        root: int = 0,
        *,
        timeout: Optional[float] = None,
    ) -> Request:
        """Non-blocking broadcast."""
    def reduce(
        self,
        sendbuf: SendBuffer,
        recvbuf: Optional[BufferLike],
        op: OpLike = "sum",
        root: int = 0,
        *,
        timeout: Optional[float] = None,
    ) -> None:
        """The root's recvbuf = op over every rank's sendbuf (recvbuf used on the root only).

        In place: IN_PLACE as sendbuf; recvbuf holds the input.
        """
    def ireduce(
        self,
        sendbuf: SendBuffer,
        recvbuf: Optional[BufferLike],
        op: OpLike = "sum",
        root: int = 0,
        *,
        timeout: Optional[float] = None,
    ) -> Request:
        """Non-blocking reduce."""
    def gather(
        self,
        sendbuf: SendBuffer,
        recvbuf: Optional[BufferLike],
        root: int = 0,
        *,
        timeout: Optional[float] = None,
    ) -> None:
        """The root's recvbuf block r = rank r's sendbuf. In place (root only): IN_PLACE as sendbuf."""
    def igather(
        self,
        sendbuf: SendBuffer,
        recvbuf: Optional[BufferLike],
        root: int = 0,
        *,
        timeout: Optional[float] = None,
    ) -> Request:
        """Non-blocking gather."""
    def scatter(
        self,
        sendbuf: Optional[BufferLike],
        recvbuf: SendBuffer,
        root: int = 0,
        *,
        timeout: Optional[float] = None,
    ) -> None:
        """Rank r's recvbuf = block r of the root's sendbuf. In place (root only): IN_PLACE as recvbuf."""
    def iscatter(
        self,
        sendbuf: Optional[BufferLike],
        recvbuf: SendBuffer,
        root: int = 0,
        *,
        timeout: Optional[float] = None,
    ) -> Request:
        """Non-blocking scatter."""
    def alltoall(self, sendbuf: BufferLike, recvbuf: BufferLike, *, timeout: Optional[float] = None) -> None:
        """recvbuf block p = block ``rank`` of rank p's sendbuf. No in-place form."""
    def ialltoall(
        self,
        sendbuf: BufferLike,
        recvbuf: BufferLike,
        *,
        timeout: Optional[float] = None,
    ) -> Request:
        """Non-blocking alltoall."""
    def alltoallv(
        self,
        sendbuf: BufferLike,
        recvbuf: BufferLike,
        sendcounts: Sequence[int],
        recvcounts: Sequence[int],
        sdispls: Optional[Sequence[int]] = None,
        rdispls: Optional[Sequence[int]] = None,
        *,
        timeout: Optional[float] = None,
    ) -> None:
        """All-to-all with a count per peer, in elements.

        Displacements default to the counts' running sum.
        """
    def ialltoallv(
        self,
        sendbuf: BufferLike,
        recvbuf: BufferLike,
        sendcounts: Sequence[int],
        recvcounts: Sequence[int],
        sdispls: Optional[Sequence[int]] = None,
        rdispls: Optional[Sequence[int]] = None,
        *,
        timeout: Optional[float] = None,
    ) -> Request:
        """Non-blocking alltoallv."""
    def barrier(self, *, timeout: Optional[float] = None) -> None:
        """Returns once every rank has called it."""
    def ibarrier(self, *, timeout: Optional[float] = None) -> Request:
        """Non-blocking barrier."""

    # Point-to-point.
    def send(self, buf: BufferLike, peer: int, tag: int = 0) -> None:
        """Sends buf to ``peer`` with ``tag``; inside ringreduce.group() (tag 0) it is posted at the group's end."""
    def recv(self, buf: BufferLike, peer: int, tag: int = 0) -> Status:
        """Receives into buf from ``peer`` (or ANY_SOURCE) a message of ``tag``; returns its Status."""
    def isend(self, buf: BufferLike, peer: int, tag: int = 0) -> Request:
        """Starts sending buf to ``peer`` with ``tag``."""
    def irecv(self, buf: BufferLike, peer: int, tag: int = 0) -> Request:
        """Starts receiving into buf from ``peer`` (or ANY_SOURCE) a message of ``tag``; see Request.status."""
