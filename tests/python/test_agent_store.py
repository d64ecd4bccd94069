"""env:// under torchrun: every rank a client of the store torchrun's agent serves.

torchrun's agent serves a torch TCPStore at MASTER_ADDR:MASTER_PORT and tells
its workers so with TORCHELASTIC_USE_AGENT_STORE=True; rank 0 cannot serve a
store of its own on that port. Here the test process plays the agent, holding
the port, as torchrun does. Proves: ringreduce.Comm.from_env and torch's own
init_process_group (gloo) share the agent's store on 3 ranks and the engine's
allreduce is right; a rank whose peer never comes times out naming the wait,
and its connection stays usable (CANCEL_WAIT answered); a port where no torch
store answers is named as such at once; and the same under torchrun itself.
"""

from __future__ import annotations

import datetime
import socket
import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import ringreduce  # noqa: E402
from ranks import run_ranks  # noqa: E402

AGENT = {"TORCHELASTIC_USE_AGENT_STORE": "True"}


def _both_on_the_agent_store(rank: int, size: int, seed: int) -> float:
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
    data = np.random.default_rng([seed, rank]).standard_normal(1001)
    expected = sum(np.random.default_rng([seed, r]).standard_normal(1001) for r in range(size))
    with ringreduce.Comm.from_env(timeout=60) as comm:
        got = data.copy()
        comm.allreduce(ringreduce.IN_PLACE, got)
    t = torch.ones(3)
    dist.all_reduce(t)
    dist.destroy_process_group()
    assert t.tolist() == [float(size)] * 3
    return float(np.max(np.abs(got - expected)))


def test_env_init_is_a_client_of_the_agents_store():
    agent = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    errors = run_ranks(_both_on_the_agent_store, 3, 7, env=dict(AGENT, MASTER_PORT=str(agent.port)), timeout=120)
    assert max(errors) < 1e-12
    # The engine's keys are on the agent's store, under ringreduce/<restart>/.
    assert agent.add("ringreduce/0/c0/probe", 1) == 1 and agent.num_keys() > 3


def test_a_missing_peer_times_out_and_the_connection_stays_in_step(monkeypatch):
    agent = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    for name, value in dict(AGENT, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(agent.port), RANK="0",
                            WORLD_SIZE="2").items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ringreduce.TimeoutError, match="agent store") as e:
        ringreduce.Comm.from_env(timeout=1.0)
    assert "unusable" not in str(e.value), e.value
    # Rank 0 told the others why it gave up, over the same connection after
    # taking its wait back: its "heard" count is on the store.
    assert agent.check(["ringreduce/0/c0/setup-failure/heard"])


def test_no_torch_store_at_the_port_is_named(monkeypatch):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def hang_up():
        conn, _ = listener.accept()
        conn.close()

    threading.Thread(target=hang_up, daemon=True).start()
    for name, value in dict(AGENT, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(listener.getsockname()[1]), RANK="0",
                            WORLD_SIZE="2").items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ringreduce.Error, match="no torch.distributed TCPStore answers at 127.0.0.1:"):
        ringreduce.Comm.from_env(timeout=10.0)
    listener.close()


_WORKER = """
import os
import numpy as np
import ringreduce
rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
with ringreduce.Comm.from_env(timeout=60) as comm:
    x = np.full(1000, rank + 1, np.float64)
    comm.allreduce(ringreduce.IN_PLACE, x)
assert (x == size * (size + 1) / 2).all(), x[:4]
print(f"rank {rank}: sum ok", flush=True)
"""


def test_under_torchrun(tmp_path):
    # torchrun itself: its agent picks the port, serves the store and starts
    # the workers; before the agent-store client, rank 0 failed to listen.
    import subprocess
    import sys

    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          str(script)], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("sum ok") == 2, out.stdout
