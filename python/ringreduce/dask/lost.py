"""A job that goes on when a worker is lost: ``run(..., on_lost_worker="continue")`` and :func:`shrink_lost`.

In such a job, when a rank's worker dies the survivors' collectives raise
the engine's error naming the lost rank (a ``RuntimeError`` from torch.distributed),
as in any job; ``fn`` catches it and calls :func:`shrink_lost`, which makes
the default group anew from the ranks still alive, with no store and no new
rendezvous, and says who this rank now is::

    def train(steps):
        model, opt = make_model(), make_optimizer()
        step = 0
        while step < steps:
            try:
                loss = train_step(model, opt)          # its collectives fail when a peer is lost
                step += 1
            except RuntimeError:
                shrunk = ringreduce.dask.shrink_lost()  # rank, size, the lost ranks
                rescale(opt, shrunk.size)
        return model.state_dict()

    futures = ringreduce.dask.run(client, train, 1000, on_lost_worker="continue")

The lost rank's future raises :class:`ringreduce.dask.WorkerLost` naming it
and its worker; the others return what ``fn`` returned. The survivors agree
among themselves which ranks failed (``rrCommAgreeFailed``: a rank the
transport reports gone, or one silent for the group's timeout), then
``torch.distributed.shrink_group`` makes the new default group from that
list. ``fn`` keeps its own state (model, optimizer, data position): it is
its to reshard. Only the ``ringreduce`` backend can shrink (torch 2.15's
Gloo cannot; NCCL's needs a GPU).
"""

from __future__ import annotations

import os
from typing import NamedTuple, Optional, Tuple

__all__ = ["Shrunk", "shrink_lost", "ON_LOST_WORKER"]

#: The values of ``run``'s ``on_lost_worker``: "fail" (the default: the job's
#: ranks fail with the lost one's peers' error) or "continue".
ON_LOST_WORKER = ("fail", "continue")

# The running task's on_lost_worker (None outside a task of ringreduce.dask.run).
_mode: Optional[str] = None


class Shrunk(NamedTuple):
    """What :func:`shrink_lost` made: this rank's place in the new default group."""

    rank: int  # this rank in the new default group (RANK is set to it too)
    size: int  # the new group's size (WORLD_SIZE too)
    lost: Tuple[int, ...]  # the ranks left out, as they were numbered in the group before


def _enter(mode: str) -> None:
    global _mode
    _mode = mode


def _leave() -> None:
    global _mode
    _mode = None


def shrink_lost() -> Shrunk:
    """In ``fn`` of a job run with ``on_lost_worker="continue"``: goes on without the lost ranks.

    Every rank still alive must call it (each once its collective failed):
    it ends what is still in flight on the default group here and on the
    peers (``rrCommRevoke``), has the ranks agree which failed, and makes
    the default group anew from the others (``dist.shrink_group``), ranked
    in the old order. Sets RANK and WORLD_SIZE to the new rank and size.
    Raises RuntimeError outside such a job, and when no rank was lost;
    the engine's error when the agreement or the shrink fails (a rank that
    did not call within the group's timeout is counted as failed, not
    waited for). A rank that dies after the agreement, before the new group
    is made, makes ``shrink_group`` raise on every survivor: calling
    ``shrink_lost`` again agrees anew, counting it.
    """
    if _mode != "continue":
        where = "outside a task of ringreduce.dask.run" if _mode is None else f"in a job run with on_lost_worker={_mode!r}"
        raise RuntimeError(f"ringreduce.dask.shrink_lost: called {where}; run the job with "
                           "on_lost_worker='continue' to go on without a lost rank")
    import torch.distributed as dist

    import ringreduce.torch

    lost = ringreduce.torch.agree_on_failed(revoke=True)
    if not lost:
        # torch's shrink_group needs a rank to exclude; the group is revoked.
        raise RuntimeError("ringreduce.dask.shrink_lost: every rank of the default group is alive and called it: "
                           "no rank was lost, so there is nothing to shrink away (the group's collective "
                           "failed for another reason, and the group is revoked: end the job)")
    dist.shrink_group(lost)
    rank, size = dist.get_rank(), dist.get_world_size()
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(size)
    return Shrunk(rank, size, tuple(lost))
