"""The unique-id bootstrap, as NCCL's: one process makes the id, every rank
gets a copy (pickle it, send its bytes) and passes it to Comm.init_rank."""

from __future__ import annotations

from ringreduce import _core

__all__ = ["UniqueId", "get_unique_id"]


class UniqueId(bytes):
    """An rrUniqueId: 128 bytes naming a rendezvous and carrying its secret.

    A bytes object (so it pickles, compares and travels as bytes); its repr
    hides the secret. Give it to this job's ranks only: it admits a rank to
    the rendezvous.
    """

    SIZE = _core.UNIQUE_ID_BYTES

    def __new__(cls, data: bytes) -> "UniqueId":
        value = super().__new__(cls, data)
        if len(value) != cls.SIZE:
            from ringreduce.errors import InvalidArgumentError
            raise InvalidArgumentError(f"UniqueId: {len(value)} bytes; an rrUniqueId has {cls.SIZE}")
        return value

    def __repr__(self) -> str:
        return f"<ringreduce.UniqueId, {len(self)} bytes>"

    def __reduce__(self):  # bytes' own reduce would lose the class
        return (UniqueId, (bytes(self),))


def get_unique_id() -> UniqueId:
    """rrGetUniqueId: a new id; this process serves its rendezvous.

    The calling process must stay alive until every rank has joined with
    ``Comm.init_rank(nranks, unique_id, rank)``.
    """
    return UniqueId(_core._get_unique_id())
