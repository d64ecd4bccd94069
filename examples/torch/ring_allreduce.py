#!/usr/bin/env python3
"""The tutorial's hand-written ring allreduce, over isend/recv.

"Writing Distributed Applications with PyTorch", its "Our Own Ring-Allreduce"
section, with backend="ringreduce": each rank passes its buffer to the right
and adds what comes from the left, size - 1 times. (The naive ring the
tutorial writes: every step moves the whole buffer, where ringreduce's own
all_reduce moves 2(N-1)/N of it in total.) The tutorial gives only
allreduce(); run() calls it and compares with dist.all_reduce.

    PYTHONPATH=build/python .venv/bin/python examples/torch/ring_allreduce.py
"""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import ringreduce.torch  # registers the "ringreduce" backend


""" Implementation of a ring-reduce with addition. """
def allreduce(send, recv):
    rank = dist.get_rank()
    size = dist.get_world_size()
    send_buff = send.clone()
    recv_buff = send.clone()
    accum = send.clone()

    left = ((rank - 1) + size) % size
    right = (rank + 1) % size

    for i in range(size - 1):
        if i % 2 == 0:
            # Send send_buff
            send_req = dist.isend(send_buff, right)
            dist.recv(recv_buff, left)
            accum[:] += recv_buff[:]
        else:
            # Send recv_buff
            send_req = dist.isend(recv_buff, right)
            dist.recv(send_buff, left)
            accum[:] += send_buff[:]
        send_req.wait()
    recv[:] = accum[:]


def run(rank, size):
    send = torch.arange(8, dtype=torch.float32) + 100 * rank
    recv = torch.zeros(8)
    allreduce(send, recv)
    expected = send.clone()
    dist.all_reduce(expected, op=dist.ReduceOp.SUM)
    assert torch.equal(recv, expected), (recv, expected)
    print(f'Rank {rank} has data {recv}, as dist.all_reduce')


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
