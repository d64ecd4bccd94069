"""What torch 2.x adds around a plugin backend, on "ringreduce".

Proves: the coalesced tensor forms (allgather_into_tensor_coalesced,
reduce_scatter_tensor_coalesced through torch's _coalescing_manager, and with
a device the backend's own coalescing: a list's all_reduce, batch_isend_irecv
as one Work) against
a float64 reference; per-device backend strings ("cpu:ringreduce,cuda:gloo"),
new_subgroups and a 2-D init_device_mesh("cpu"); functional collectives;
collectives named in a torch.profiler trace; everything under
TORCH_DISTRIBUTED_DEBUG=DETAIL, where torch wraps the backend and
ringreduce.torch still finds it; CUDA tensors refused with a message naming
the device type; shutdown (destroy_process_group) and abort returning within
a second with a collective pending on a dead peer; getFuture, wait(timeout)
and exception() on a Work; monitored_barrier naming the ranks that did not
come, in Gloo's words and beside Gloo, within its timeout; get_error() after
a peer left, a timeout and an abort; split_group (list order, a non-member,
a 2 x 2 mesh) beside Gloo, and new_group on a group bound to a device;
all_reduce of sparse COO tensors (uncoalesced, nnz different on every rank
and 0 on one, 1 and 2 sparse dims, six dtypes) against a float64 dense
reference and bit for bit beside Gloo, with mismatched sizes and ops other
than SUM refused by name on every rank, and DDP with a sparse embedding
training to Gloo's parameters bit for bit; pg_options (the extended backend
API) kept by the group, inherited by a split group and checked by the engine
naming the field, and a foreign options type refused.

Each spawned job runs many checks: starting a rank costs a torch import.
"""

from __future__ import annotations

import datetime
import os
import time

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from ranks import run_ranks  # noqa: E402

try:
    import ringreduce.torch  # noqa: F401
except ImportError as e:  # pragma: no cover - a build without the backend
    pytest.skip(f"the ringreduce torch backend is not built: {e}", allow_module_level=True)

R = dist.ReduceOp


def init(backend: str = "ringreduce", timeout: float = 60.0) -> None:
    import ringreduce.torch  # noqa: F401  (registers the backend in this rank)
    dist.init_process_group(backend, init_method="env://", timeout=datetime.timedelta(seconds=timeout))


def seeded(case: int, rank: int, n: int, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(7919 * case + rank)
    return torch.randn(n, generator=g, dtype=torch.float64).to(dtype)


# --- what the ranks run ---------------------------------------------------------------------

def _coalesced_tensor_forms(rank: int, size: int) -> int:
    # A per-device backend string: ringreduce for CPU tensors beside another
    # backend for CUDA ones (Gloo here: NCCL will not start without a GPU).
    init("cpu:ringreduce,cuda:gloo")
    assert dist.get_backend() == "cpu:ringreduce,cuda:gloo", dist.get_backend()
    cpu = dist.group.WORLD._get_backend(torch.device("cpu"))
    assert isinstance(cpu, ringreduce.torch.ProcessGroupRingreduce), type(cpu)
    assert not isinstance(dist.group.WORLD._get_backend(torch.device("cuda")), ringreduce.torch.ProcessGroupRingreduce)
    checks = 0
    lengths = [0, 1, 7, 1000]
    for dtype in (torch.float32, torch.float64, torch.int32):
        # allgather_into_tensor_coalesced: output i = every rank's input i, rank-major
        inputs = [seeded(1, rank, n).to(dtype) for n in lengths]
        outputs = [torch.empty(n * size, dtype=dtype) for n in lengths]
        with dist._coalescing_manager(async_ops=True) as cm:
            for o, i in zip(outputs, inputs):
                dist.all_gather_into_tensor(o, i)
        cm.wait()
        for n, o in zip(lengths, outputs):
            want = torch.cat([seeded(1, r, n).to(dtype) for r in range(size)])
            assert torch.equal(o, want), f"all_gather_into_tensor coalesced {dtype} n={n}"
            checks += 1
        # reduce_scatter_tensor_coalesced: output i = block `rank` of the sum of inputs i
        inputs = [seeded(2, rank, n * size).to(dtype) for n in lengths]
        outputs = [torch.empty(n, dtype=dtype) for n in lengths]
        with dist._coalescing_manager(async_ops=True) as cm:
            for o, i in zip(outputs, inputs):
                dist.reduce_scatter_tensor(o, i, op=R.SUM)
        cm.wait()
        for n, o in zip(lengths, outputs):
            total = sum(seeded(2, r, n * size).to(dtype).to(torch.float64) for r in range(size))
            want = total[rank * n:(rank + 1) * n]
            torch.testing.assert_close(o.to(torch.float64), want, rtol=1e-5, atol=1e-5)
            checks += 1
    # torch's coalescing with a device (the backend's startCoalescing /
    # endCoalescing): all_reduce of a list as one engine call, async and not,
    # and batch_isend_irecv handing back the one Work that covers the batch.
    cpu_device = torch.device("cpu")
    for async_ops in (True, False):
        tensors = [seeded(7, rank, n) for n in lengths]
        with dist._coalescing_manager(device=cpu_device, async_ops=async_ops) as cm:
            for t in tensors:
                dist.all_reduce(t)
        if async_ops:
            assert len(cm.works) == 1, cm.works
            cm.wait()
        for n, t in zip(lengths, tensors):
            want = sum(seeded(7, r, n).to(torch.float64) for r in range(size))
            torch.testing.assert_close(t.to(torch.float64), want, rtol=1e-5, atol=1e-5)
            checks += 1
    if size > 1:
        right, left = (rank + 1) % size, (rank - 1) % size
        sends = [seeded(8, rank, n) for n in lengths]
        recvs = [torch.empty(n) for n in lengths]
        ops = [op for s_, r_, tag in zip(sends, recvs, range(len(lengths)))
               for op in (dist.P2POp(dist.isend, s_, right, tag=tag), dist.P2POp(dist.irecv, r_, left, tag=tag))]
        works = dist.batch_isend_irecv(ops)
        assert len(works) == 1, works
        works[0].wait()
        assert works[0].is_completed()
        for n, r_ in zip(lengths, recvs):
            assert torch.equal(r_, seeded(8, left, n)), f"batch_isend_irecv n={n}"
            checks += 1
        # The batch's Work waited with a timeout that expires, then in full.
        late = torch.empty(3)
        if rank == 0:
            (batch,) = dist.batch_isend_irecv([dist.P2POp(dist.irecv, late, 1, tag=99)])
            with pytest.raises(RuntimeError, match="expired"):
                batch.wait(timeout=datetime.timedelta(milliseconds=200))
        dist.barrier()
        if rank == 1:
            dist.send(torch.full((3,), 9.0), 0, tag=99)
        elif rank == 0:
            batch.wait()
            assert torch.equal(late, torch.full((3,), 9.0))
    # The group's entry points directly, with a non-contiguous output (a
    # transposed view): its elements in logical order are the gathered ones.
    world = dist.group.WORLD
    ins = [seeded(3, rank, 6), seeded(4, rank, 10)]
    outs = [torch.empty(3, 2 * size).t(), torch.empty(10 * size)]
    world.allgather_into_tensor_coalesced(outs, ins).wait()
    for o, n, case in zip(outs, (6, 10), (3, 4)):
        want = torch.cat([seeded(case, r, n) for r in range(size)])
        assert torch.equal(o.reshape(-1), want), f"allgather_into_tensor_coalesced n={n}"
        checks += 1
    ins = [seeded(5, rank, 4 * size).reshape(2 * size, 2).t(), seeded(6, rank, 3 * size)]
    outs = [torch.empty(4), torch.empty(3)]
    world.reduce_scatter_tensor_coalesced(outs, ins).wait()
    for o, n, case, i in zip(outs, (4, 3), (5, 6), ins):
        total = sum(seeded(case, r, n * size).reshape(i.shape[::-1]).t().reshape(-1).to(torch.float64)
                    for r in range(size)) if case == 5 else \
            sum(seeded(case, r, n * size).to(torch.float64) for r in range(size))
        torch.testing.assert_close(o.to(torch.float64), total[rank * n:(rank + 1) * n], rtol=1e-5, atol=1e-5)
        checks += 1
    dist.destroy_process_group()
    return checks


def _groups_and_mesh(rank: int, size: int) -> int:
    from torch.distributed.device_mesh import init_device_mesh
    init()
    checks = 0
    # new_subgroups: consecutive pairs
    sub, subgroups = dist.new_subgroups(group_size=2)
    t = torch.full((5,), float(rank))
    dist.all_reduce(t, group=sub)
    first = rank - rank % 2
    want = float(first + min(first + 1, size - 1)) if first + 1 < size else float(first)
    assert torch.equal(t, torch.full((5,), want)), (t, want)
    checks += 1
    # a 2-D mesh: rows and columns are ringreduce groups
    mesh = init_device_mesh("cpu", (2, size // 2), mesh_dim_names=("dp", "tp"))
    for dim in ("dp", "tp"):
        group = mesh.get_group(dim)
        members = dist.get_process_group_ranks(group)
        t = torch.full((3,), float(rank + 1))
        dist.all_reduce(t, group=group)
        assert torch.equal(t, torch.full((3,), float(sum(m + 1 for m in members)))), (dim, t)
        assert isinstance(ringreduce.torch.backend_of(group), ringreduce.torch.ProcessGroupRingreduce)
        checks += 1
    # functional collectives on a ringreduce group
    import torch.distributed._functional_collectives as funcol
    x = seeded(5, rank, 11)
    y = funcol.all_reduce(x, "sum", dist.group.WORLD)
    torch.testing.assert_close(y.to(torch.float64), sum(seeded(5, r, 11).to(torch.float64) for r in range(size)),
                               rtol=1e-5, atol=1e-5)
    g = funcol.all_gather_tensor(x, 0, dist.group.WORLD)
    assert torch.equal(g, torch.cat([seeded(5, r, 11) for r in range(size)]))
    rs = funcol.reduce_scatter_tensor(torch.cat([x] * size), "sum", 0, dist.group.WORLD)
    torch.testing.assert_close(rs.to(torch.float64),
                               sum(seeded(5, r, 11).to(torch.float64) for r in range(size)), rtol=1e-5, atol=1e-5)
    checks += 3
    dist.destroy_process_group()
    return checks


def _profiled(rank: int, size: int) -> list:
    init()
    from torch.profiler import ProfilerActivity, profile
    t = torch.ones(1000)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with dist._coalescing_manager(async_ops=True) as cm:
            dist.all_gather_into_tensor(torch.empty(10 * size), torch.ones(10))
            dist.all_gather_into_tensor(torch.empty(20 * size), torch.ones(20))
        cm.wait()
        dist.all_reduce(t)
        dist.broadcast(t, src=0)
        dist.all_gather_into_tensor(torch.empty(1000 * size), t)
        dist.barrier()
    names = sorted({e.name for e in prof.events() if e.name.startswith("ringreduce:")})
    shapes = [e.input_shapes for e in prof.events() if e.name == "ringreduce:all_reduce"]
    dist.destroy_process_group()
    return [names, shapes]


def _wrapped_by_torch_debug(rank: int, size: int) -> int:
    # TORCH_DISTRIBUTED_DEBUG=DETAIL (set by the test): torch wraps every
    # plugin backend in its _ProcessGroupWrapper, which checks each call's
    # shapes across ranks on a helper Gloo group first.
    init()
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    assert not isinstance(backend, ringreduce.torch.ProcessGroupRingreduce), type(backend)
    assert isinstance(ringreduce.torch.backend_of(), ringreduce.torch.ProcessGroupRingreduce)
    t = torch.full((100,), float(rank))
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((100,), float(sum(range(size)))))
    out = torch.empty(100 * size)
    dist.all_gather_into_tensor(out, t)
    dist.barrier()
    if rank == 1:
        # a mismatch the wrapper reports before our engine sees it
        with pytest.raises(RuntimeError):
            dist.all_reduce(torch.ones(7 + rank))
    elif rank == 0:
        with pytest.raises(RuntimeError):
            dist.all_reduce(torch.ones(7 + rank))
    ringreduce.torch.abort()
    with pytest.raises(RuntimeError, match="aborted"):
        ringreduce.torch.backend_of().allreduce([torch.ones(1)]).wait()
    dist.destroy_process_group()
    return 1


def _cuda_refused(rank: int, size: int) -> str:
    init()
    if "cuda" in ringreduce.torch.DEVICES:
        return "cuda supported"
    # What torch does with a CUDA tensor's collective on this group: it looks
    # up the group's backend for the tensor's device type (no GPU is needed
    # to ask).
    with pytest.raises(RuntimeError) as info:
        dist.group.WORLD._get_backend(torch.device("cuda"))
    message = str(info.value)
    dist.destroy_process_group()
    return message


def _work_objects(rank: int, size: int) -> int:
    init()
    t = torch.full((1000,), float(rank))
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    value = fut.wait()
    assert torch.equal(value[0], torch.full((1000,), float(sum(range(size)))))
    assert work.is_completed() and work.is_success() and work.exception() is None
    # chained callbacks run on completion without anyone calling wait()
    t2 = torch.ones(10)
    chained = dist.all_reduce(t2, async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    assert torch.equal(chained.wait(), torch.full((10,), 2.0 * size))
    # wait(timeout) expires on a receive nobody sends, and the work is still usable
    if size > 1:
        buf = torch.empty(4)
        peer = (rank + 1) % size
        recv = dist.irecv(buf, src=peer, tag=77)
        with pytest.raises(RuntimeError, match="wait"):
            recv.wait(timeout=datetime.timedelta(milliseconds=50))
        dist.barrier()
        dist.send(torch.full((4,), float(rank)), dst=(rank - 1) % size, tag=77)
        recv.wait()
        assert torch.equal(buf, torch.full((4,), float(peer)))
    dist.destroy_process_group()
    return 1


def _monitored_barrier(rank: int, size: int, backend: str) -> dict:
    init(backend, timeout=60.0)
    ten, two = datetime.timedelta(seconds=10), datetime.timedelta(seconds=2)
    dist.monitored_barrier(timeout=ten)
    dist.monitored_barrier(timeout=ten, wait_all_ranks=True)
    if size == 1:
        dist.destroy_process_group()
        return {}
    out = {}
    absent = {2, 3}
    group = None
    for wait_all in (True, False):
        if rank not in absent:
            start = time.monotonic()
            with pytest.raises(RuntimeError) as info:
                dist.monitored_barrier(group, timeout=two, wait_all_ranks=wait_all)
            out[wait_all] = (time.monotonic() - start, str(info.value))
        if backend == "gloo":
            # A failed monitored barrier closes Gloo's pairs: the next call
            # needs a new group (which all ranks make).
            group = dist.new_group(backend="gloo")
    # Every rank is here: the group still works.
    t = torch.ones(10)
    dist.all_reduce(t, group=group)
    assert torch.equal(t, torch.full((10,), float(size)))
    if backend == "ringreduce":
        # On the same group: the absent ranks' reports, now that they come,
        # meet the receives the failed calls left for them.
        dist.monitored_barrier(timeout=ten)
        dist.monitored_barrier(timeout=ten, wait_all_ranks=True)
        for tag in (2**31 - 1, 2**31 - 2):
            with pytest.raises(RuntimeError, match=f"send: tag={tag} is reserved for monitored_barrier"):
                dist.send(torch.ones(1), dst=(rank + 1) % size, tag=tag)
            with pytest.raises(RuntimeError, match=f"recv: tag={tag} is reserved for monitored_barrier"):
                dist.recv(torch.ones(1), src=(rank + 1) % size, tag=tag)
    dist.destroy_process_group()
    return out


def _split_groups(rank: int, size: int, backend: str) -> int:
    init(backend)
    checks = 0

    def summed(group, members):
        t = torch.full((5,), float(rank + 1))
        dist.all_reduce(t, group=group)
        return torch.equal(t, torch.full((5,), float(sum(m + 1 for m in members))))

    # Every rank in one of the lists; each list in its own order.
    lists = [[1, 0], [2]] if size == 3 else [[0, 1], [3, 2]]
    g = dist.split_group(split_ranks=lists)
    mine = next(m for m in lists if rank in m)
    assert dist.get_world_size(g) == len(mine) and dist.get_rank(g) == mine.index(rank), (rank, mine)
    assert summed(g, mine)
    # The backend's ranks are the list's order too (torch's get_rank is its own bookkeeping).
    gathered = [torch.zeros(1) for _ in mine]
    dist.all_gather(gathered, torch.full((1,), float(rank)), group=g)
    assert [int(x.item()) for x in gathered] == mine, (rank, gathered)
    checks += 1
    # A rank in no list: a non-member, while the others' group works.
    g = dist.split_group(split_ranks=[[0, 1]])
    if rank in (0, 1):
        assert summed(g, [0, 1])
    else:
        assert g == dist.GroupMember.NON_GROUP_MEMBER, g
    checks += 1
    if size == 4:
        # A 2 x 2 mesh of split groups: rows {0, 1}, {2, 3}; columns {0, 2}, {1, 3}.
        row = dist.split_group(split_ranks=[[0, 1], [2, 3]])
        col = dist.split_group(split_ranks=[[0, 2], [1, 3]])
        t = torch.full((3,), float(rank))
        dist.all_reduce(t, group=row)
        dist.all_reduce(t, group=col)
        assert torch.equal(t, torch.full((3,), 6.0)), t
        checks += 1
    dist.destroy_process_group()
    return checks


def _new_group_on_a_bound_group(rank: int, size: int, backend: str) -> int:
    # new_group on a group bound to a device: the non-members call
    # perform_nocolor_split on the parent's backend.
    import ringreduce.torch  # noqa: F401
    dist.init_process_group(backend, init_method="env://", device_id=torch.device("cpu", 0),
                            timeout=datetime.timedelta(seconds=60))
    g = dist.new_group([0, 1])
    t = torch.full((5,), float(rank + 1))
    if rank in (0, 1):
        dist.all_reduce(t, group=g)
        assert torch.equal(t, torch.full((5,), 3.0)), t
    else:
        assert g == dist.GroupMember.NON_GROUP_MEMBER, g
    dist.barrier()
    dist.destroy_process_group()
    return 1


def _sparse_case(case: int, rank: int, shape, sparse_dim: int, nnz: int, dtype) -> torch.Tensor:
    """A COO tensor with repeated indices (uncoalesced), seeded by case and rank."""
    g = torch.Generator().manual_seed(7919 * case + rank)
    indices = torch.stack([torch.randint(0, shape[d], (nnz,), generator=g) for d in range(sparse_dim)])
    values = torch.randn((nnz, *shape[sparse_dim:]), generator=g, dtype=torch.float64)
    if not dtype.is_floating_point:
        values = (values * 1000).round()
    return torch.sparse_coo_tensor(indices, values.to(dtype), shape)


_SPARSE_CASES = [  # shape, sparse_dim, dtype
    ((40, 8), 1, torch.float32),  # an embedding's gradient: rows
    ((6, 7), 2, torch.float64),
    ((30, 3), 1, torch.int64),
    ((9, 4, 2), 2, torch.bfloat16),
    ((12,), 1, torch.int32),
    ((8, 2), 1, torch.int16),  # moves as bytes: the engine has no int16 (Gloo refuses it)
]


def _sparse_all_reduce(rank: int, size: int, backend: str) -> list:
    init(backend)
    results = []
    for case, (shape, sparse_dim, dtype) in enumerate(_SPARSE_CASES):
        if backend == "gloo" and dtype == torch.int16:
            results.append(None)  # "Invalid scalar type"
            continue
        # Every rank a different nnz; rank 1 none.
        nnzs = [5 + 7 * r if r != 1 else 0 for r in range(size)]
        parts = [_sparse_case(case, r, shape, sparse_dim, nnzs[r], dtype) for r in range(size)]
        t = parts[rank].clone()
        work = dist.all_reduce(t, async_op=True)
        work.wait()
        assert t.is_sparse, (case, t)
        # The future's value is the input, which holds the result (DDP reads it there).
        assert torch.equal(work.get_future().value()[0].to_dense(), t.to_dense()), case
        want = sum(p.to_dense().to(torch.float64) for p in parts)
        got = t.to_dense().to(want.dtype)
        tol = {torch.bfloat16: 0.05, torch.float32: 1e-5}.get(dtype, 1e-12)
        assert torch.allclose(got, want, rtol=tol, atol=tol), (case, (got - want).abs().max())
        # Bytes, for the comparison with Gloo (tensors would cross processes by shared memory).
        results.append((t._indices().numpy().tobytes(), t._values().contiguous().view(torch.uint8).numpy().tobytes()))
    # Every rank with nothing.
    t = torch.sparse_coo_tensor(torch.zeros((1, 0), dtype=torch.long), torch.zeros(0), (10,))
    dist.all_reduce(t)
    assert t._nnz() == 0 and t.shape == (10,)
    if backend == "ringreduce":
        # Refused by name, on every rank alike; the group goes on.
        t = _sparse_case(0, rank, (10, 4), 1, 3, torch.float32)
        with pytest.raises(RuntimeError, match="sparse tensors reduce with SUM only, not MAX"):
            dist.all_reduce(t, op=R.MAX)
        t = _sparse_case(0, rank, (10 + (rank == size - 1), 4), 1, 3, torch.float32)
        if size > 1:
            with pytest.raises(RuntimeError, match=f"differ across ranks: rank {size - 1}'s has sizes \\[11, 4\\]"):
                dist.all_reduce(t)
        d = torch.ones(5)
        dist.all_reduce(d)
        assert torch.equal(d, torch.full((5,), float(size)))
    dist.destroy_process_group()
    return results


def _sparse_ddp(rank: int, size: int, backend: str) -> list:
    init(backend)
    torch.manual_seed(0)  # the same model on every rank
    model = torch.nn.Sequential(torch.nn.Embedding(50, 6, sparse=True), torch.nn.Linear(6, 1))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.5)
    g = torch.Generator().manual_seed(rank)
    for _ in range(4):
        words = torch.randint(0, 50, (16,), generator=g)
        loss = ddp(words).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    params = [p.detach().numpy().tobytes() for p in model.parameters()]
    gathered = [None] * size
    dist.all_gather_object(gathered, params)
    assert all(other == params for other in gathered), "ranks differ"
    dist.destroy_process_group()
    return params


# A rank as its own script, so that its processes end as scripts do: the
# interpreter finalizes (atexit, then the destructors), which a rank run by
# run_ranks never does (multiprocessing ends it with os._exit).
def _pg_options(rank: int, size: int) -> int:
    # pg_options reach the engine (torch's extended backend API): the group
    # keeps them (Backend.options), a split group inherits them, and the
    # engine checks them, naming the field.
    import ringreduce.torch as rt
    opts = rt.Options(chunk_bytes=1 << 16, pipeline_depth=3, check_arguments=1)
    dist.init_process_group("ringreduce", init_method="env://", timeout=datetime.timedelta(seconds=45),
                            pg_options=opts)
    cpu = torch.device("cpu")
    mine = dist.group.WORLD._get_backend(cpu).options
    assert isinstance(mine, rt.Options) and mine is not opts
    assert (mine.chunk_bytes, mine.pipeline_depth, mine.check_arguments) == (1 << 16, 3, 1)
    assert mine._timeout == datetime.timedelta(seconds=45)
    t = seeded(1, rank, 100_003)  # several 64 KiB chunks
    want = sum(seeded(1, r, 100_003).double() for r in range(size))
    dist.all_reduce(t)
    torch.testing.assert_close(t.double(), want, rtol=1e-5, atol=1e-5)
    child = dist.split_group(split_ranks=[list(range(size))], timeout=datetime.timedelta(seconds=30))
    theirs = child._get_backend(cpu).options
    assert (theirs.chunk_bytes, theirs.pipeline_depth) == (1 << 16, 3), theirs
    assert theirs._timeout == datetime.timedelta(seconds=30)
    assert mine._timeout == datetime.timedelta(seconds=45)  # the parent's are its own
    other = dist.split_group(split_ranks=[list(range(size))], pg_options=rt.Options(chunk_bytes=1 << 17))
    assert other._get_backend(cpu).options.chunk_bytes == 1 << 17
    u = torch.ones(5)
    dist.all_reduce(u, group=other)
    assert torch.equal(u, torch.full((5,), float(size)))
    for bad, field in ((rt.Options(pipeline_depth=0), "config.pipeline_depth=0"),
                       (rt.Options(chunk_bytes=3), "config.chunk_bytes=3")):
        with pytest.raises(RuntimeError, match=field):
            dist.new_group(list(range(size)), pg_options=bad)
    with pytest.raises(TypeError, match="pg_options must be a ringreduce.torch.Options"):
        dist.new_group(list(range(size)), pg_options=dist.ProcessGroupGloo._Options())
    # The extended API passes enable_reconfigure on, with pg_options: a
    # group for dist._reconfigure has them and no communicator until then
    # (torch's creator call, as init_process_group makes it;
    # test_torch_reconfigure.py reconfigures such groups).
    reconfigurable = torch._C._distributed_c10d._DistributedBackendOptions()
    reconfigurable.enable_reconfigure = True
    reconfigurable.group_rank, reconfigurable.group_size = 0, 1
    reconfigurable.timeout = datetime.timedelta(seconds=12)
    waiting = rt._create_backend(reconfigurable, rt.Options(chunk_bytes=1 << 16))
    assert waiting.options.chunk_bytes == 1 << 16 and waiting.options._timeout == datetime.timedelta(seconds=12)
    with pytest.raises(RuntimeError, match="ringreduce barrier: the process group has no communicator yet"):
        waiting.barrier()
    waiting.shutdown()
    dist.destroy_process_group()
    return 1


# --- the tests ------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [1, 2, 3])
def test_coalesced_tensor_forms(size):
    checks = run_ranks(_coalesced_tensor_forms, size, timeout=300)
    assert checks[0] >= 24


@pytest.mark.parametrize("size", [2, 4])
def test_subgroups_device_mesh_and_functional_collectives(size):
    run_ranks(_groups_and_mesh, size, timeout=300)


def test_profiler_trace_names_the_collectives():
    out = run_ranks(_profiled, 2, timeout=300)
    names, shapes = out[0]
    for name in ("ringreduce:all_reduce", "ringreduce:broadcast", "ringreduce:all_gather_into_tensor",
                 "ringreduce:barrier", "ringreduce:all_gather_into_tensor_coalesced"):
        assert name in names, names
    assert [[1000]] in shapes, shapes


def test_under_torch_distributed_debug_detail(monkeypatch):
    monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL")
    run_ranks(_wrapped_by_torch_debug, 2, timeout=300)


def test_cuda_tensors_refused_naming_the_device():
    messages = run_ranks(_cuda_refused, 2, timeout=300)
    if messages[0] == "cuda supported":
        pytest.skip("this build takes CUDA tensors")
    assert "cuda" in messages[0], messages[0]


@pytest.mark.parametrize("size", [1, 3])
def test_work_future_wait_timeout_and_exception(size):
    run_ranks(_work_objects, size, timeout=300)


@pytest.mark.parametrize("backend,size", [("ringreduce", 1), ("ringreduce", 4), ("gloo", 4)])
def test_monitored_barrier_names_the_ranks_that_did_not_come(backend, size):
    out = run_ranks(_monitored_barrier, size, backend, timeout=120)
    if size == 1:
        return
    elapsed, message = out[0][True]
    assert "[Rank 0]: Ranks 2, 3 failed to pass monitoredBarrier in 2000 ms" in message, message
    if backend == "ringreduce":
        # All reports share the one deadline: not 2 s per missing rank.
        assert 1.9 < elapsed < 3.5, f"wait_all_ranks: rank 0 raised after {elapsed:.2f} s"
    elapsed, message = out[0][False]
    assert "[Rank 0]: Rank 2 failed to pass monitoredBarrier in 2000 ms" in message, message
    if backend == "ringreduce":
        assert 1.9 < elapsed < 3.5, f"rank 0 raised after {elapsed:.2f} s"
    for wait_all in (True, False):
        elapsed, message = out[1][wait_all]
        assert ("Rank 1 successfully reached monitoredBarrier, but received errors while waiting for send/recv "
                "from rank 0") in message, message


@pytest.mark.parametrize("backend,size", [("ringreduce", 3), ("ringreduce", 4), ("gloo", 3)])
def test_split_group_new_group_with_a_device_and_a_mesh(backend, size):
    checks = run_ranks(_split_groups, size, backend, timeout=300)
    assert checks == [2 if size == 3 else 3] * size, checks
    if size == 3 and backend == "ringreduce":
        # (Gloo's non-member raises AttributeError here: it has no perform_nocolor_split.)
        run_ranks(_new_group_on_a_bound_group, size, backend, timeout=300)


@pytest.mark.parametrize("size", [1, 3, 4])
def test_sparse_all_reduce_beside_gloo(size):
    # At 4 ranks three add to each index (rank 1 has none): rank order shows in the bits.
    ours = run_ranks(_sparse_all_reduce, size, "ringreduce", timeout=300)
    gloo = run_ranks(_sparse_all_reduce, size, "gloo", timeout=300)
    for rank in range(size):
        for case, (a, b) in enumerate(zip(ours[rank], gloo[rank])):
            assert b is None or a == b, f"rank {rank}, case {case}: the result differs from Gloo's"


def test_sparse_embedding_ddp_trains_as_gloo_does():
    ours = run_ranks(_sparse_ddp, 2, "ringreduce", timeout=300)
    gloo = run_ranks(_sparse_ddp, 2, "gloo", timeout=300)
    for i, (a, b) in enumerate(zip(ours[0], gloo[0])):
        assert a == b, f"parameter {i} differs from Gloo's after training"


@pytest.mark.parametrize("size", [1, 2])
def test_pg_options_reach_the_engine(size):
    assert run_ranks(_pg_options, size, timeout=300) == [1] * size
