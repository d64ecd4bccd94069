"""Starts a bench/torch benchmark's ranks: this process is one rank under a
launcher that set RANK and WORLD_SIZE (rr-run, torchrun), or --ranks N are
spawned with torch.multiprocessing, meeting at 127.0.0.1 on a free port."""

from __future__ import annotations

import argparse
import os
import random
import socket
from typing import Callable

import torch.multiprocessing

# bench_rank(rank, size, args, launcher): one rank's whole benchmark.
BenchRank = Callable[[int, int, argparse.Namespace, str], None]


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, drawn as rr-run
    draws its own: below the kernel's ephemeral range, where no bind(0) or
    outgoing connection (UCX's, the stores' clients) can take it before rank
    0 listens there (29500 and up is left to ports derived from job ids)."""
    high = min(29500, _ephemeral_low())
    low = max(1024, high - 14000)
    rng = random.SystemRandom()
    for _ in range(1000):
        port = rng.randrange(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"launch.py: no free port in {low}..{high - 1}")


def _spawned(rank: int, size: int, bench_rank: BenchRank, args: argparse.Namespace) -> None:
    bench_rank(rank, size, args, "torch.multiprocessing (spawn)")


def run(bench_rank: BenchRank, args: argparse.Namespace) -> int:
    """Runs ``bench_rank`` as every rank of the job ``args.ranks`` asks for."""
    if args.ranks is None and "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        bench_rank(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args, "env:// (a launcher)")
        return 0
    ranks = args.ranks or 2
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    torch.multiprocessing.spawn(_spawned, args=(ranks, bench_rank, args), nprocs=ranks, join=True)
    return 0
