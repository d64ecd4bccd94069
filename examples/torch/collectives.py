#!/usr/bin/env python3
"""The collectives "Writing Distributed Applications with PyTorch" lists.

The tutorial names them (broadcast, reduce, all_reduce, scatter, gather,
all_gather, barrier, all_to_all) and the reduction ops (SUM, PRODUCT, MAX,
MIN) without a program; this is one, in its run.py skeleton, with
backend="ringreduce". Each rank checks what it got and prints it.

    PYTHONPATH=build/python .venv/bin/python examples/torch/collectives.py
"""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import ringreduce.torch  # registers the "ringreduce" backend


def run(rank, size):
    group = dist.new_group(list(range(size)))
    ranks = torch.arange(size, dtype=torch.float32)

    # dist.broadcast(tensor, src, group): copies tensor from src to all other processes.
    tensor = torch.full((3,), float(rank))
    dist.broadcast(tensor, src=0, group=group)
    assert tensor.eq(0).all(), tensor
    print(f'Rank {rank} broadcast {tensor}')

    # dist.reduce(tensor, dst, op, group): applies op to every tensor and stores the result in dst.
    tensor = torch.full((3,), float(rank + 1))
    dist.reduce(tensor, dst=0, op=dist.ReduceOp.SUM, group=group)
    if rank == 0:
        assert tensor.eq((ranks + 1).sum()).all(), tensor
        print(f'Rank {rank} reduce {tensor}')

    # dist.all_reduce(tensor, op, group): same as reduce, but the result is stored in all processes.
    for op, expected in ((dist.ReduceOp.SUM, (ranks + 1).sum()), (dist.ReduceOp.PRODUCT, (ranks + 1).prod()),
                         (dist.ReduceOp.MAX, (ranks + 1).max()), (dist.ReduceOp.MIN, (ranks + 1).min())):
        tensor = torch.full((3,), float(rank + 1))
        dist.all_reduce(tensor, op=op, group=group)
        assert tensor.eq(expected).all(), (op, tensor)
        print(f'Rank {rank} all_reduce {op} {tensor}')

    # dist.scatter(tensor, scatter_list, src, group): copies the i-th tensor scatter_list[i] to the i-th process.
    tensor = torch.zeros(2)
    scatter_list = [torch.full((2,), 10.0 * i) for i in range(size)] if rank == 0 else None
    dist.scatter(tensor, scatter_list, src=0, group=group)
    assert tensor.eq(10.0 * rank).all(), tensor
    print(f'Rank {rank} scatter {tensor}')

    # dist.gather(tensor, gather_list, dst, group): copies tensor from all processes in dst.
    tensor = torch.full((2,), float(rank))
    gather_list = [torch.zeros(2) for _ in range(size)] if rank == 0 else None
    dist.gather(tensor, gather_list, dst=0, group=group)
    if rank == 0:
        assert all(t.eq(i).all() for i, t in enumerate(gather_list)), gather_list
        print(f'Rank {rank} gather {gather_list}')

    # dist.all_gather(tensor_list, tensor, group): copies tensor from all processes to tensor_list, on all processes.
    tensor = torch.full((2,), float(rank))
    tensor_list = [torch.zeros(2) for _ in range(size)]
    dist.all_gather(tensor_list, tensor, group=group)
    assert all(t.eq(i).all() for i, t in enumerate(tensor_list)), tensor_list
    print(f'Rank {rank} all_gather {tensor_list}')

    # dist.barrier(group): blocks all processes in group until each one has entered this function.
    dist.barrier(group=group)

    # dist.all_to_all(output_tensor_list, input_tensor_list, group): scatters the list of input
    # tensors to all processes in a group and returns the gathered list of tensors in the output list.
    input_list = [torch.full((2,), float(100 * rank + i)) for i in range(size)]
    output_list = [torch.zeros(2) for _ in range(size)]
    dist.all_to_all(output_list, input_list, group=group)
    assert all(t.eq(100 * i + rank).all() for i, t in enumerate(output_list)), output_list
    print(f'Rank {rank} all_to_all {output_list}')
    print(f'Rank {rank} checked every collective')


def init_process(rank, size, fn, backend='ringreduce'):
    """ Initialize the distributed environment. """
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    # The tutorial's port, unless the caller chose one (the smoke test does).
    os.environ.setdefault('MASTER_PORT', '29500')
    dist.init_process_group(backend, rank=rank, world_size=size)
    fn(rank, size)


if __name__ == "__main__":
    size = 4
    processes = []
    mp.set_start_method("spawn")
    for rank in range(size):
        p = mp.Process(target=init_process, args=(rank, size, run))
        p.start()
        processes.append(p)

    for p in processes:
        p.join()
