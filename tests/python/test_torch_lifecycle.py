"""The life of a "ringreduce" group in torch: made, ended, made again, forked.

Proves: shutdown (destroy_process_group) and abort returning within a second
with a collective pending on a dead peer or on one alive that never joins
(abort also from another thread while a blocking call waits on its caller's);
get_error() after a peer left, a timeout and an abort; the default group and
a new_group made again five times in the same processes over a store that
outlives them (torch names them as before, so the store holds the last
making's keys); a process forked after init exiting normally, one destroying
the group it inherited, and the parent's group going on; a script ending
without destroy_process_group; torch's flight recorder listing completed
operations with their durations and a hung one as scheduled, and writing its
trace when a peer dies.
"""

from __future__ import annotations

import datetime
import os
import time

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.distributed.distributed_c10d as c10d  # noqa: E402  (SHRINK_DEFAULT, SHRINK_ABORT: not in torch.distributed)

from ranks import run_ranks  # noqa: E402

try:
    import ringreduce.torch  # noqa: F401
except ImportError as e:  # pragma: no cover - a build without the backend
    pytest.skip(f"the ringreduce torch backend is not built: {e}", allow_module_level=True)

from test_torch_api import init  # noqa: E402


# --- what the ranks run ---------------------------------------------------------------------

def _ends_with_a_peer_gone(rank: int, size: int, how: str, peer: str) -> tuple[float, bool]:
    # The last rank never joins the second all_reduce: it has died ("dead"),
    # or it is alive and elsewhere ("absent") until the others have ended
    # their group. The group's timeout is long (120 s), so returning within
    # a second is the call ending the communicator, not the timeout.
    #
    # torch's flight recorder is off here: on a failure its abort hook
    # writes the trace, with stack traces, before the call fails: a
    # process's first dump costs torch 0.8 s on this machine whatever the
    # backend (bench/torch/fr_dump.py), torch's time, not the engine's.
    # _flight_recorder below proves the dump itself.
    os.environ["TORCH_FR_BUFFER_SIZE"] = "0"
    init(timeout=120.0)
    store = dist.distributed_c10d._get_default_store()
    t = torch.ones(1000)
    dist.all_reduce(t)
    if rank == size - 1:
        if peer == "absent":
            store.wait([f"ended{r}" for r in range(size - 1)], datetime.timedelta(seconds=60))
            store.set("released", "1")
        os._exit(0)  # with no collective pending: the others start one it never joins
    if how == "abort, blocking":
        # The call waits on this thread (torch's blocking form runs on the
        # caller's thread); another thread aborts the group meanwhile: both
        # return at once.
        import threading
        aborted = {}

        def abort_later() -> None:
            time.sleep(0.2)
            aborted["start"] = time.monotonic()
            dist.distributed_c10d._abort_process_group()
            aborted["returned"] = time.monotonic()

        aborter = threading.Thread(target=abort_later)
        aborter.start()
        # A dead peer may end it first (its death is found in ~0.1 s).
        with pytest.raises(RuntimeError, match="abort" if peer == "absent" else ""):
            dist.all_reduce(torch.ones(10))
        failed = time.monotonic()
        aborter.join()
        elapsed = max(aborted["returned"], failed) - aborted["start"]
        pending = failed > aborted["start"]  # the abort, not a peer's end, ended it
    else:
        work = dist.all_reduce(torch.ones(10), async_op=True)
        time.sleep(0.2)
        pending = not work.is_completed()  # a peer's end may have ended it already
        start = time.monotonic()
        if how == "abort":
            dist.distributed_c10d._abort_process_group()
        else:
            dist.destroy_process_group()
        elapsed = time.monotonic() - start
        with pytest.raises(RuntimeError):
            work.wait()
    if peer == "absent":
        store.set(f"ended{rank}", "1")
        if rank == 0:  # its process serves the store: it stays until the absent rank has read it
            store.wait(["released"], datetime.timedelta(seconds=60))
    return elapsed, pending


def _get_error(rank: int, size: int, how: str) -> str:
    # The group's timeout: 2 s where a peer is to time out, else long.
    init(timeout=2.0 if how == "timeout" else 60.0)
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))  # torch's handle on it
    assert backend.get_error() == torch._C._distributed_c10d.ErrorType.SUCCESS
    dist.all_reduce(torch.ones(10))
    assert backend.get_error() == torch._C._distributed_c10d.ErrorType.SUCCESS
    if how == "abort":
        dist.distributed_c10d._abort_process_group()
        return str(backend.get_error())
    if rank == size - 1:
        if how == "timeout":
            time.sleep(4)  # alive, in no collective: the others time out (2 s)
        os._exit(0)
    with pytest.raises(RuntimeError):
        dist.all_reduce(torch.ones(10))
    return str(backend.get_error())




_FORK_THEN_EXIT = r"""
import datetime, os, sys, time
import torch, torch.distributed as dist
import ringreduce.torch
dist.init_process_group("ringreduce", init_method="env://", timeout=datetime.timedelta(seconds=60))
t = torch.ones(4)
dist.all_reduce(t)
def fork_and_wait(child):
    pid = os.fork()
    if pid == 0:
        child()
        sys.exit(0)
    deadline = time.monotonic() + 30
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            sys.exit("a forked child did not exit within 30 s")
        time.sleep(0.05)
    print("child exit status", os.waitstatus_to_exitcode(status), flush=True)
# A child (a DataLoader worker, say) computes, never touches the group, and
# exits normally; another destroys the group it inherited first.
fork_and_wait(lambda: torch.ones(3).sum())
fork_and_wait(dist.destroy_process_group)
# The group still works in the parent; the last collective's Work may still
# be held by the backend's thread when the script ends without
# destroy_process_group.
s = torch.sparse_coo_tensor(torch.tensor([[0, 1, 1]]), torch.ones(3), (4,))
dist.all_reduce(s)
dist.all_reduce(t)
print("parent sum", float(t.sum()), flush=True)
"""


def _fork_then_exit(rank: int, size: int) -> tuple:
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", _FORK_THEN_EXIT], capture_output=True, text=True, timeout=90)
    return p.returncode, p.stdout, p.stderr[-3000:]


def _made_again(rank: int, size: int, rounds: int) -> list:
    # One store for every making: torch names the groups "0", "1", ... again
    # after each destroy_process_group, so the store still holds the keys the
    # last making left under the same names.
    store = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), size, rank == 0,
                          timeout=datetime.timedelta(seconds=60))
    out = []
    for i in range(rounds):
        if rank == 0 and i % 2 == 1:
            time.sleep(0.3)  # the others come first and find the last making's keys
        dist.init_process_group("ringreduce", store=store, rank=rank, world_size=size,
                                timeout=datetime.timedelta(seconds=10))
        t = torch.full((7,), float(rank + 10 * i))
        dist.all_reduce(t)
        assert torch.equal(t, torch.full((7,), float(sum(range(size)) + 10 * i * size))), (i, t)
        pair = dist.new_group([0, size - 1])
        if rank in (0, size - 1):
            u = torch.full((3,), float(rank + i))
            dist.all_reduce(u, group=pair)
            assert torch.equal(u, torch.full((3,), float(size - 1 + 2 * i))), (i, u)
        dist.destroy_process_group()
        out.append("ok")
    return out


def _flight_recorder(rank: int, size: int, dump_prefix: str) -> dict:
    # torch's flight recorder hears of every Work that completed (with its
    # duration) through the completion hooks, and dumps its trace to
    # TORCH_FR_DUMP_TEMP_FILE<rank> from the abort hook when a peer fails.
    import json
    fr = torch._C._distributed_c10d
    init(timeout=60.0)
    t = torch.ones(1000)
    dist.all_reduce(t)
    dist.broadcast(t, 0)
    if rank == 0:
        dist.send(t, 1)
    elif rank == 1:
        dist.recv(t, 0)
    timed = dist.all_reduce(t, async_op=True)
    timed.wait()
    assert timed._get_duration() > 0
    done = json.loads(fr._dump_fr_trace_json(backend="ringreduce"))["entries"]
    if rank == size - 1:
        time.sleep(1.0)  # the others' next all_reduce waits for this rank, which then dies
        os._exit(0)
    work = dist.all_reduce(t, async_op=True)
    time.sleep(0.2)
    hung = json.loads(fr._dump_fr_trace_json(backend="ringreduce"))["entries"]
    with pytest.raises(RuntimeError, match="no duration until the operation completed successfully"):
        work._get_duration()
    with pytest.raises(RuntimeError):
        work.wait()
    return {"done": [(e["profiling_name"], e["state"], e.get("duration_ms")) for e in done],
            "hung": [(e["profiling_name"], e["state"]) for e in hung],
            "dumped": os.path.exists(dump_prefix + str(rank))}


# --- the tests ------------------------------------------------------------------------------

def _shrink_group(rank: int, size: int, flags: int) -> list:
    # Rank 1 leaves; the others' next all_reduce fails naming it, and
    # dist.shrink_group makes a new default group of the two left (one
    # rrCommShrink: no store, no new rendezvous), which works.
    os.environ["TORCH_FR_BUFFER_SIZE"] = "0"
    init(timeout=60.0)
    dist.all_reduce(torch.ones(1000))
    if rank == 1:
        os._exit(0)
    with pytest.raises(RuntimeError, match="rank 1"):
        dist.all_reduce(torch.ones(1000))
    dist.shrink_group([1], shrink_flags=flags)
    mine = (dist.get_rank(), dist.get_world_size())
    x = torch.full((1000,), float(rank + 1))
    dist.all_reduce(x)
    dist.destroy_process_group()
    return [mine, x[0].item(), bool((x == x[0]).all())]


@pytest.mark.parametrize("peer", ["dead", "absent"])
@pytest.mark.parametrize("how", ["shutdown", "abort", "abort, blocking"])
def test_ending_with_a_peer_gone_returns_at_once(how, peer):
    out = run_ranks(_ends_with_a_peer_gone, 3, how, peer, timeout=120, expect_failure=[2])
    for r in (0, 1):
        elapsed, _ = out[r]
        assert elapsed < 1.0, f"rank {r}: {how} with a peer {peer} took {elapsed:.2f} s (its timeout: 120 s)"
    if peer == "absent":  # the first to end its group ended a call still pending
        assert out[0][1] or out[1][1], out


@pytest.mark.parametrize("how", ["peer_exits", "timeout", "abort"])
def test_get_error_says_what_broke_the_group(how):
    out = run_ranks(_get_error, 3, how, timeout=120, expect_failure=[] if how == "abort" else [2])
    if how == "abort":
        assert out == ["ErrorType.COMM_ERROR"] * 3, out
    elif how == "peer_exits":
        assert out[:2] == ["ErrorType.REMOTE_ERROR"] * 2, out
    else:
        # The first rank to time out says TIMEOUT; its notice may reach the
        # other before its own deadline, which then says REMOTE_ERROR.
        assert "ErrorType.TIMEOUT" in out[:2], out
        assert set(out[:2]) <= {"ErrorType.TIMEOUT", "ErrorType.REMOTE_ERROR"}, out




def test_fork_after_init_and_exit_without_destroy():
    out = run_ranks(_fork_then_exit, 2, timeout=150)
    for rank, (code, stdout, stderr) in enumerate(out):
        assert code == 0 and stdout.count("child exit status 0") == 2, f"rank {rank}: exit {code}\n{stdout}\n{stderr}"
        assert f"parent sum {4.0 * 2 * 2}" in stdout, f"rank {rank}: {stdout}"
        assert "terminate" not in stderr, f"rank {rank}: {stderr}"


def test_made_again_five_times_over_one_store():
    # Before each making had keys of its own, the second making read the
    # first's unique id and timed out joining a rendezvous that was gone.
    # (Gloo fails this at its second making: bench/RESULTS.md.)
    assert run_ranks(_made_again, 3, 5, timeout=300) == [["ok"] * 5] * 3


def test_flight_recorder_sees_completions_a_hang_and_dumps_on_failure(tmp_path):
    prefix = str(tmp_path / "fr_trace_rank_")
    out = run_ranks(_flight_recorder, 3, prefix, timeout=120, expect_failure=[2],
                    env={"TORCH_FR_DUMP_TEMP_FILE": prefix, "TORCH_FR_BUFFER_SIZE": "100"})
    for rank in (0, 1):
        done, hung = out[rank]["done"], out[rank]["hung"]
        names = [name for name, _, _ in done]
        assert names[:2] == ["ringreduce:all_reduce", "ringreduce:broadcast"], done
        assert names[-1] == "ringreduce:all_reduce" and len(done) == 4, done
        for name, state, duration in done:
            assert state == "completed" and duration is not None and duration > 0, done
        # The one the dead rank never joined stays scheduled, after the four.
        assert hung[:4] == [(name, "completed") for name in names], hung
        assert hung[4:] == [("ringreduce:all_reduce", "scheduled")], hung
        assert out[rank]["dumped"], f"rank {rank}: no trace at {prefix}{rank}"


def _ddp_goes_on_after_a_shrink(rank: int, size: int) -> list:
    # DDP training on 4 ranks; rank 3 leaves after 3 steps. The others'
    # next step raises naming it; each shrinks the default group, wraps the
    # same model in a new DDP (the new default group) and trains on: the
    # survivors' parameters stay identical, and match a 3-rank reference
    # computed here in one process from the same batches.
    import torch.nn as nn
    os.environ["TORCH_FR_BUFFER_SIZE"] = "0"
    init(timeout=60.0)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(16, 20, generator=torch.Generator().manual_seed(1000 * r + i)),
                torch.randn(16, 5, generator=torch.Generator().manual_seed(1000 * r + i + 500)))
               for r in range(size) for i in range(8)]

    def step(module, i: int) -> None:
        x, y = batches[8 * rank + i]
        opt.zero_grad()
        nn.functional.mse_loss(module(x), y).backward()
        opt.step()

    for i in range(3):
        step(ddp, i)
    if rank == 3:
        os._exit(0)
    snapshot = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(RuntimeError, match="rank 3"):
        step(ddp, 3)
    # A failed step may have applied nothing or a local gradient: go back to
    # the parameters every survivor had after step 2.
    with torch.no_grad():
        for p, q in zip(model.parameters(), snapshot):
            p.copy_(q)
    dist.shrink_group([3])  # a new DDP on it crashed before ringreduce.torch re-registered it as CUSTOM
    ddp = nn.parallel.DistributedDataParallel(model)
    for i in range(3, 8):
        step(ddp, i)
    params = [p.detach().numpy().copy() for p in model.parameters()]
    dist.destroy_process_group()
    # The reference: the same 3 steps on 4 ranks' batches, then 5 on the 3 survivors'.
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5))
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for i in range(8):
        ranks = range(4) if i < 3 else range(3)
        ref_opt.zero_grad()
        grads = []
        for r in ranks:
            ref.zero_grad()
            x, y = batches[8 * r + i]
            nn.functional.mse_loss(ref(x), y).backward()
            grads.append([p.grad.clone() for p in ref.parameters()])
        with torch.no_grad():
            for k, p in enumerate(ref.parameters()):
                p.grad = sum(g[k] for g in grads) / len(grads)
        ref_opt.step()
    reference = [p.detach().numpy().copy() for p in ref.parameters()]
    return [params, reference]


def test_ddp_training_goes_on_in_the_shrunk_group():
    import numpy as np
    values = run_ranks(_ddp_goes_on_after_a_shrink, 4, timeout=120, expect_failure=[3])
    for r in (1, 2):
        for a, b in zip(values[0][0], values[r][0]):
            assert np.array_equal(a, b), f"rank {r}'s parameters differ from rank 0's"
    for a, b in zip(values[0][0], values[0][1]):
        assert np.allclose(a, b, rtol=1e-5, atol=1e-6), np.abs(a - b).max()


@pytest.mark.parametrize("flags", ["default", "abort"])
def test_shrink_group_goes_on_without_a_lost_rank(flags):
    values = run_ranks(_shrink_group, 3, c10d.SHRINK_DEFAULT if flags == "default" else c10d.SHRINK_ABORT,
                       timeout=90, expect_failure=[1])
    assert values[0] == [(0, 2), 4.0, True], values
    assert values[2] == [(1, 2), 4.0, True], values
