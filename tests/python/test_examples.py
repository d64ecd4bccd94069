"""Runs every Python example (examples/torch, examples/dask) and bench/torch and bench/dask so that none can rot.

Each example runs as its users run it (``.venv/bin/python examples/...``,
the package found through PYTHONPATH), with a port of its own in
MASTER_PORT and a deadline; the test checks the exit status, that no rank
printed a traceback, and what the example says it proves (the tutorial
programs' main() does not report a failed rank in its exit status, so their
output is what shows that every rank got there).
"""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from ranks import free_port  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _backend_registered() -> bool:
    try:
        import ringreduce.torch  # noqa: F401
    except ImportError:
        return False
    import torch.distributed as dist
    dist.Backend("ringreduce")  # raises when importing did not register it: a failure, not a skip
    return True


pytestmark = pytest.mark.skipif(not _backend_registered(),
                                reason="the ringreduce torch backend is not built (-Dtorch)")

def _row(backend: str) -> "re.Pattern[str]":
    """A result row of bench/torch/allreduce_bench.py (they start with the size; comments with '#')."""
    return re.compile(rf"^ +\d+ .* {re.escape(backend)}$", re.M)


# example -> [(text or pattern, how many times it must appear in the output)], extra arguments. The
# tutorial's prints pass several arguments, and the ranks' words can interleave between them:
# count the pieces.
CASES = {
    "torch/p2p_blocking.py": ([(" has data ", 2), ("tensor(1.)", 2)], []),
    "torch/p2p_nonblocking.py": ([("Rank 0 started sending", 1), ("Rank 1 started receiving", 1),
                                  (" has data ", 2), ("tensor(1.)", 2)], []),
    "torch/allreduce_group.py": ([(" has data ", 2), ("tensor(2.)", 2)], []),
    "torch/collectives.py": ([("checked every collective", 4)], []),
    "torch/ring_allreduce.py": ([("as dist.all_reduce", 4)], []),
    "torch/sgd.py": ([(", epoch ", 2 * 3)], []),
    "torch/ddp.py": ([("3 replicas bit-identical after 3 epochs", 1)], ["--world-size", "3", "--epochs", "3"]),
    "dask/ddp_on_dask.py": ([("2 replicas bit-identical after 3 epochs", 1),
                             # each rank's loss curve from the results channel: 3 epochs of
                             # 1024 samples (of 2048) in batches of 32, a loss every 8 steps
                             (re.compile(r"^rank [01] loss every 8 steps:( \d+\.\d{3}){12}$", re.M), 2)],
                            ["--workers", "2", "--epochs", "3"]),
}
CASES = {f"examples/{name}": case for name, case in CASES.items()}
# The torch benchmarks, as small as they go: their rows and checks, not their figures.
CASES["bench/torch/allreduce_bench.py"] = (
    [(_row("torch-ringreduce"), 3), (_row("torch-gloo"), 3), (_row("ringreduce"), 3),
     ("Out of bounds values : 0 OK", 1)],
    ["--ranks", "2", "-b", "1K", "-e", "64K", "-f", "8", "-n", "2", "-w", "1"])
CASES["bench/torch/ddp_bench.py"] = (
    [(re.compile(r"^  torch-(ringreduce|gloo) .* identical$", re.M), 2), (re.compile(r"^  no_sync +\d", re.M), 1)],
    ["--ranks", "2", "--layers", "2", "--width", "64", "--steps", "2", "--warmup", "1"])

# (Gloo's rounds run the same code with another backend's name: left out for the suite's time.)
CASES["bench/dask/lost_worker.py"] = (
    [(re.compile(r"^ +ringreduce +1 +\d+\.\d+ / ", re.M), 1)],
    ["--workers", "2", "--kills", "1", "--backend", "ringreduce"])


@pytest.mark.parametrize("example", sorted(CASES))
def test_example_runs(example):
    expected, extra = CASES[example]
    env = dict(os.environ, MASTER_PORT=str(free_port()), PYTHONDONTWRITEBYTECODE="1")
    # A session of its own: a hung example's ranks are killed with it (they
    # hold the output pipe open).
    proc = subprocess.Popen([sys.executable, str(ROOT / example), *extra], env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"{example} still running after 240 s; output:\n{output}")
    assert proc.returncode == 0, f"{example} exited with {proc.returncode}:\n{output}"
    assert "Traceback" not in output, f"{example} printed a traceback:\n{output}"
    for text, times in expected:
        found = len(text.findall(output)) if isinstance(text, re.Pattern) else output.count(text)
        assert found == times, f"{example}: {text!r} {found} times, not {times}:\n{output}"


@pytest.mark.parametrize("way", ["shrink", "gloo"])
def test_shrink_bench_runs(way, tmp_path):
    """bench/torch/shrink_bench.py on 3 ranks started here as a launcher would
    (env://, the last rank killing itself): the 2 survivors go on and report."""
    port, new_port = free_port(), free_port()
    kill_file = tmp_path / "killed"
    procs = []
    for rank in range(3):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="3",
                   TORCH_FR_BUFFER_SIZE="0", PYTHONDONTWRITEBYTECODE="1")
        procs.append(subprocess.Popen([sys.executable, str(ROOT / "bench/torch/shrink_bench.py"), way,
                                       "--kill-file", str(kill_file), "--port", str(new_port)],
                                      env=env, start_new_session=True, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=120)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert procs[2].returncode == -signal.SIGKILL, outputs[2]
    for rank in (0, 1):
        assert procs[rank].returncode == 0, outputs[rank]
        assert re.search(rf"^rank {rank}: {way}: detect .* ms from the kill$", outputs[rank], re.M), outputs[rank]
