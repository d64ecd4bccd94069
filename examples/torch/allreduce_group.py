#!/usr/bin/env python3
"""All-reduce on a group.

PyTorch's "Writing Distributed Applications with PyTorch", its collective
communication example, with backend="ringreduce": ranks 0 and 1 form a group
and sum a tensor of ones over it, so each prints 2.

    PYTHONPATH=build/python .venv/bin/python examples/torch/allreduce_group.py
"""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import ringreduce.torch  # registers the "ringreduce" backend


def run(rank, size):
    """ Simple collective communication. """
    group = dist.new_group([0, 1])
    tensor = torch.ones(1)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    print('Rank ', rank, ' has data ', tensor[0])


def init_process(rank, size, fn, backend='ringreduce'):
    """ Initialize the distributed environment. """
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    # The tutorial's port, unless the caller chose one (the smoke test does).
    os.environ.setdefault('MASTER_PORT', '29500')
    dist.init_process_group(backend, rank=rank, world_size=size)
    fn(rank, size)


if __name__ == "__main__":
    size = 2
    processes = []
    mp.set_start_method("spawn")
    for rank in range(size):
        p = mp.Process(target=init_process, args=(rank, size, run))
        p.start()
        processes.append(p)

    for p in processes:
        p.join()
