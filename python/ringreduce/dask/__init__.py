"""Runs a torch.distributed program on every worker of a Dask cluster.

``run(client, fn, *args)`` submits one task per Dask worker, pinned to it,
that sets the ``env://`` variables torchrun would set (MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE) and a fresh
RR_AUTH_TOKEN, makes the default process group, calls ``fn(*args,
**kwargs)`` and destroys the group again, also when ``fn`` raises::

    from dask.distributed import Client, LocalCluster
    import ringreduce.dask

    def train(epochs):
        model = torch.nn.parallel.DistributedDataParallel(make_model())
        for epoch in range(epochs):
            ...
            ringreduce.dask.publish({"epoch": epoch, "loss": loss.item()})
        return model.state_dict()

    with LocalCluster(n_workers=4, threads_per_worker=1) as cluster, Client(cluster) as client:
        with ringreduce.dask.Results(client) as results:
            futures = ringreduce.dask.run(client, train, 10, results=results)
            states = client.gather(futures)
            results.wait()
            print(results.series("loss"))        # {rank: [loss, ...]}, as the ranks sent them

This is dask-pytorch-ddp's ``dispatch.run`` done as it should be: the port
is one the operating system found free on rank 0's host (not a fixed number
that a second job or a lingering socket already holds), the tasks are not
pure (two runs of the same function are two runs, never one cached result),
and each worker's environment is put back after the task, so the cluster
can run the next job. Its ``DaskResultsHandler`` is :class:`Results` and
:func:`publish`, on distributed's structured events (``results.py``).

When ``fn`` raises on one rank, that rank destroys its process group at once;
the collectives the other ranks are waiting in then fail (the engine reports
the departed peer; at worst they give up after ``timeout``), and each future
reports its rank's exception. When a rank's worker leaves the cluster (its
process dies, the scheduler retires it), a scheduler plugin fails that
rank's task with :class:`WorkerLost`, naming the rank and the worker,
instead of leaving it to wait for a worker that will not come back
(``watch.py``). With ``on_lost_worker="continue"`` the survivors can go on
instead: ``fn`` catches its collective's error and calls :func:`shrink_lost`,
which makes the default group anew from the ranks still alive (``lost.py``).
"""

from .job import ENV_VARIABLES, run, worker_ranks
from .lost import ON_LOST_WORKER, Shrunk, shrink_lost
from .results import MAX_MESSAGE_BYTES, Results, publish
from .watch import WorkerLost

__all__ = ["run", "worker_ranks", "Results", "publish", "WorkerLost", "shrink_lost", "Shrunk", "ON_LOST_WORKER",
           "ENV_VARIABLES", "MAX_MESSAGE_BYTES"]
