"""Runs a test function as N ranks, each in its own process.

Every rank gets MASTER_ADDR, MASTER_PORT (a free port), RANK, WORLD_SIZE,
LOCAL_RANK and LOCAL_WORLD_SIZE, as torchrun sets them, then calls
``fn(rank, size, *args)``. The parent collects each rank's return value (which
must pickle) or its exception, and kills every rank still running once the
deadline passes: a test that hangs fails, it never hangs the suite.

Ranks are forked by a fork server that imported, once per suite, the
libraries the suite itself had imported when it started its first ranks
(numpy, torch, ringreduce, ...: _PRELOAD), so a rank starts in milliseconds
instead of importing torch again (2 s of CPU each, several ranks at once on 2
cores). The server holds the environment it started with: once a test changed
os.environ (monkeypatch.setenv, say, for a variable torch reads at import),
its ranks are spawned fresh instead.
"""

from __future__ import annotations

import fcntl
import multiprocessing as mp
import os
import random
import socket
import sys
import tempfile
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence

_SPAWN = mp.get_context("spawn")
# What the fork server may import for its ranks: the libraries every rank
# imports. Named directly, not through a module of this folder: Python 3.11's
# fork server is started on the default sys.path (it ignores the parent's,
# where pytest put this folder), so such a module is not found there and the
# preload is silently skipped. Only the ones this process imported are
# preloaded: those are known to import without error (the server skips an
# ImportError only), and a suite without torch does not pay for it.
_PRELOAD = ("numpy", "pytest", "torch", "torch.distributed", "ringreduce", "ringreduce.torch")
_forkserver = None
_forkserver_env: Dict[str, str] = {}


def _environment() -> Dict[str, str]:
    """os.environ, less what pytest changes around every test (PYTEST_CURRENT_TEST)."""
    return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}


def _context():
    """The fork server, started on first use; spawn once os.environ differs from what it started with."""
    global _forkserver, _forkserver_env
    if "forkserver" not in mp.get_all_start_methods():
        return _SPAWN
    if _forkserver is None:
        _forkserver = mp.get_context("forkserver")
        _forkserver.set_forkserver_preload([m for m in _PRELOAD if m in sys.modules])
        _forkserver_env = _environment()
    return _forkserver if _environment() == _forkserver_env else _SPAWN


# Where free_port() reserves its ports: one lock file per port, held (flock)
# by the process that picked it until that process exits. The C++ tests'
# free_port() (tests/integration/free_port.hpp) keeps the same directory.
PORT_LOCK_DIR = os.path.join(tempfile.gettempdir(), "ringreduce-test-ports")
_reserved_ports: List[int] = []  # lock descriptors, held for this process's life


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on and that nothing else will take.

    Binding port 0 and closing it (the usual recipe) hands out a port from the
    kernel's ephemeral range, where every other bind(0) and every outgoing
    connection (UCX's listeners and connections, the stores' clients) may take
    it again before rank 0 listens there: a test then fails with EADDRINUSE.
    So the port comes from below that range, at random, and is reserved with
    a lock file that other test processes respect (they skip a port whose lock
    is held); this process holds it until it exits.
    """
    high = min(29500, _ephemeral_low())  # 29500..: rendezvous ports derived from job ids
    low = max(1024, high - 14000)
    os.makedirs(PORT_LOCK_DIR, exist_ok=True)
    rng = random.SystemRandom()
    for _ in range(10 * (high - low)):
        port = rng.randrange(low, high)
        fd = os.open(os.path.join(PORT_LOCK_DIR, str(port)), os.O_CREAT | os.O_RDONLY, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", port))  # nothing listens there, nor lingers in TIME_WAIT
        except OSError:
            os.close(fd)
            continue
        _reserved_ports.append(fd)
        return port
    raise RuntimeError(f"no free port in {low}..{high - 1} (lock files in {PORT_LOCK_DIR})")


class RankFailed(AssertionError):
    """One or more ranks raised, died or ran past the deadline."""


def _child(fn: Callable, rank: int, size: int, args: Sequence[Any], env: Dict[str, str],
           results: Any) -> None:
    os.environ.update(env)
    try:
        value = fn(rank, size, *args)
        results.put((rank, True, value))
    except BaseException as e:  # the parent reports it, with the rank
        results.put((rank, False, f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))


def run_ranks(fn: Callable, size: int, *args: Any, timeout: float = 120.0,
              env: Optional[Dict[str, str]] = None,
              expect_failure: Sequence[int] = ()) -> List[Any]:
    """Runs ``fn(rank, size, *args)`` on ``size`` ranks; returns their values by rank.

    ``fn`` must be a module-level function (the ranks import it). Ranks listed
    in ``expect_failure`` may raise or die (their entry is the error text, or
    None when the process died without a word); any other rank's failure, or
    any rank still running after ``timeout`` seconds, raises RankFailed.
    """
    port = free_port()
    ctx = _context()
    results = ctx.Queue()
    procs = []
    for rank in range(size):
        rank_env = {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "WORLD_SIZE": str(size),
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(size),
        }
        rank_env.update(env or {})
        p = ctx.Process(target=_child, args=(fn, rank, size, args, rank_env, results), daemon=True)
        p.start()
        procs.append(p)

    outcome: Dict[int, Any] = {}
    import queue
    import time
    deadline = time.monotonic() + timeout
    while len(outcome) < size:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            rank, ok, value = results.get(timeout=min(left, 0.5))
            outcome[rank] = (ok, value)
        except queue.Empty:
            # A rank that died without reporting (killed, os._exit) never will.
            if all(not p.is_alive() for p in procs):
                try:
                    while True:
                        rank, ok, value = results.get(timeout=0.5)
                        outcome[rank] = (ok, value)
                except queue.Empty:
                    break
    hung = [r for r, p in enumerate(procs) if p.is_alive() and r not in outcome]
    for p in procs:
        p.join(timeout=5 if not hung else 0.1)
        if p.is_alive():
            p.kill()
            p.join()

    errors = []
    values: List[Any] = []
    for rank in range(size):
        if rank in outcome and outcome[rank][0]:
            values.append(outcome[rank][1])
            continue
        text = outcome[rank][1] if rank in outcome else None
        values.append(text)
        if rank in expect_failure:
            continue
        if rank in hung:
            errors.append(f"rank {rank}: still running after {timeout} s")
        elif text is None:
            errors.append(f"rank {rank}: died with exit code {procs[rank].exitcode}")
        else:
            errors.append(f"rank {rank}: {text}")
    if errors:
        raise RankFailed("\n".join(errors))
    return values
