#!/usr/bin/env python3
"""Non-blocking point-to-point communication.

PyTorch's "Writing Distributed Applications with PyTorch", its isend/irecv
example, with backend="ringreduce": the requests return at once and the
tensor may be read or written only after wait().

    PYTHONPATH=build/python .venv/bin/python examples/torch/p2p_nonblocking.py
"""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import ringreduce.torch  # registers the "ringreduce" backend


def run(rank, size):
    tensor = torch.zeros(1)
    req = None
    if rank == 0:
        tensor += 1
        # Send the tensor to process 1
        req = dist.isend(tensor=tensor, dst=1)
        print('Rank 0 started sending')
    else:
        # Receive tensor from process 0
        req = dist.irecv(tensor=tensor, src=0)
        print('Rank 1 started receiving')
    req.wait()
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
