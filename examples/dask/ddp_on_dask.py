#!/usr/bin/env python3
"""DistributedDataParallel training dispatched on a Dask cluster.

The training of examples/torch/ddp.py (a small MLP learning a fixed linear
map from synthetic data), run by ringreduce.dask.run on every worker of a
Dask LocalCluster instead of by mp.spawn: run() ranks the workers, sets
MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE in each, makes the "ringreduce"
process group before train() and destroys it after. Each rank publishes its
loss every few steps through the job's results channel
(ringreduce.dask.publish); the client receives them while the job runs,
prints each rank's loss curve, and with --plot draws them (matplotlib, if
installed). The final parameters come back as the tasks' results: the
client checks that the replicas are bit-identical.

    PYTHONPATH=build/python .venv/bin/python examples/dask/ddp_on_dask.py [--workers 2] [--epochs 5] \
        [--metrics DIR] [--plot loss.png]

To use a cluster of your own, pass its scheduler's address (--scheduler
tcp://host:8786); every worker must be able to import ringreduce and torch.
"""
import argparse
import logging

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
from distributed import Client, LocalCluster
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import ringreduce.dask

PUBLISH_EVERY = 8  # steps between two published losses


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 64)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(64, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def synthetic_regression(n=2048, seed=0):
    """y = x A + noise, the same on every rank (the sampler splits it)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 10, generator=g)
    a = torch.randn(10, 5, generator=g)
    return TensorDataset(x, x @ a + 0.01 * torch.randn(n, 5, generator=g))


def train(epochs):
    """One rank's training; the default process group is already made."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)  # the workers share this machine's cores
    torch.manual_seed(rank)  # different initial weights: DDP broadcasts rank 0's
    model = DDP(ToyModel())

    dataset = synthetic_regression()
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(model.parameters(), lr=0.05)
    losses = []
    step = 0
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        total = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()  # DDP all-reduces (averages) the gradients here
            optimizer.step()
            total += loss.item()
            if step % PUBLISH_EVERY == 0:  # to the client, now: small messages, in order per rank
                ringreduce.dask.publish({"epoch": epoch, "step": step, "loss": loss.item()})
            step += 1
        losses.append(total / len(loader))
    # The checkpoint is large: it comes back as the task's result, not as an event.
    return {"rank": rank, "losses": losses,
            "state": {k: v.detach().clone() for k, v in model.module.state_dict().items()}}


def print_curves(results):
    """Each rank's published losses, as text: the curve without a plotting library."""
    for rank, losses in results.series("loss").items():
        print(f"rank {rank} loss every {PUBLISH_EVERY} steps: " + " ".join(f"{v:.3f}" for v in losses))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--scheduler", help="a running cluster's scheduler address, instead of a LocalCluster")
    parser.add_argument("--metrics", help="write each rank's published messages to DIR/rank-<r>.jsonl")
    parser.add_argument("--plot", help="plot each rank's loss curve into this image (needs matplotlib)")
    args = parser.parse_args()

    if args.scheduler:
        cluster, client = None, Client(args.scheduler)
    else:
        cluster = LocalCluster(n_workers=args.workers, processes=True, threads_per_worker=1,
                               dashboard_address=":0", silence_logs=logging.ERROR)
        client = Client(cluster)
    try:
        with ringreduce.dask.Results(client) as channel:
            futures = ringreduce.dask.run(client, train, args.epochs, backend="ringreduce", timeout=300,
                                          results=channel)
            results = client.gather(futures)
            channel.wait()  # every rank's last message is in
    finally:
        client.close()
        if cluster is not None:
            cluster.close()

    print_curves(channel)
    if args.metrics:
        print("wrote " + ", ".join(str(p) for p in channel.write(args.metrics)))
    if args.plot:
        try:
            print(f"plotted {channel.plot(args.plot, key='loss', xlabel=f'every {PUBLISH_EVERY} steps')}")
        except ImportError as e:
            print(f"no plot: {e}")

    for epoch in range(args.epochs):
        mean = sum(r["losses"][epoch] for r in results) / len(results)
        print(f"epoch {epoch}: mean loss over ranks {mean:.4f}")
    first = results[0]["state"]
    for r in results[1:]:
        for name, value in first.items():
            assert torch.equal(value, r["state"][name]), f"rank {r['rank']}'s {name} differs from rank 0's"
    print(f"{len(results)} replicas bit-identical after {args.epochs} epochs")


if __name__ == "__main__":
    main()
