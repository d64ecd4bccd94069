#!/usr/bin/env python3
"""DistributedDataParallel training on the ringreduce backend.

After PyTorch's "Getting Started with Distributed Data Parallel" (setup,
cleanup, ToyModel, mp.spawn), with backend="ringreduce" and a few epochs of
real training: a small MLP learns a fixed random linear map from synthetic
data, each rank reading its own shard through a DistributedSampler. DDP
all-reduces the gradients in buckets during backward, so every replica
stays the same; the program checks that they are bit-identical at the end.

    PYTHONPATH=build/python .venv/bin/python examples/torch/ddp.py [--world-size 2] [--epochs 5]
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import ringreduce.torch  # registers the "ringreduce" backend


def setup(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ.setdefault('MASTER_PORT', '12355')  # the DDP tutorial's port, unless the caller chose one
    dist.init_process_group("ringreduce", rank=rank, world_size=world_size)


def cleanup():
    dist.destroy_process_group()


class ToyModel(nn.Module):
    def __init__(self):
        super(ToyModel, self).__init__()
        self.net1 = nn.Linear(10, 64)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(64, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def synthetic_regression(n=2048, seed=0):
    """ y = x A + noise, the same on every rank (the sampler splits it). """
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 10, generator=g)
    a = torch.randn(10, 5, generator=g)
    return TensorDataset(x, x @ a + 0.01 * torch.randn(n, 5, generator=g))


def demo_basic(rank, world_size, epochs):
    print(f"Running basic DDP example on rank {rank}.")
    setup(rank, world_size)
    torch.set_num_threads(1)  # the ranks share this machine's cores

    # create model and move it to GPU with id rank (here: the CPU), wrap it in DDP
    torch.manual_seed(rank)  # different initial weights: DDP broadcasts rank 0's
    ddp_model = DDP(ToyModel())

    dataset = synthetic_regression()
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.05)

    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        total = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(ddp_model(x), y)
            loss.backward()  # DDP all-reduces (averages) the gradients here
            optimizer.step()
            total += loss.item()
        mean = torch.tensor([total / len(loader)])
        dist.all_reduce(mean)
        if rank == 0:
            print(f"epoch {epoch}: mean loss over ranks {mean.item() / world_size:.4f}")

    # Every replica must hold the same parameters, bit for bit.
    flat = torch.cat([p.detach().reshape(-1) for p in ddp_model.parameters()])
    replicas = [torch.empty_like(flat) for _ in range(world_size)]
    dist.all_gather(replicas, flat)
    assert all(torch.equal(replicas[0], r) for r in replicas), "replicas differ"
    if rank == 0:
        print(f"{world_size} replicas bit-identical after {epochs} epochs")
    cleanup()


def run_demo(demo_fn, world_size, epochs):
    mp.spawn(demo_fn,
             args=(world_size, epochs),
             nprocs=world_size,
             join=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    run_demo(demo_basic, args.world_size, args.epochs)
