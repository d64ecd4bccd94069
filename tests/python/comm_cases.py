"""What the test_comm_* suites of ringreduce.Comm share: the sweep's dtypes,
counts and settings, each rank's input, the references and the checks.

Every rank regenerates every rank's input from a case number, computes the
reference (in float64 for floating types, exactly for integers) and compares
its own result. Inputs are drawn so that the engine's result is exact:
integer sums that do not overflow, float sums of multiples of 1/8, products
of powers of two.
"""

from __future__ import annotations

import numpy as np
import pytest

import ringreduce

DTYPES = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64,
          np.float16, np.float32, np.float64, np.bool_]
# 0, 1, primes: remainders in every split, count < size, and (with the small
# chunk below) several chunks per ring segment.
COUNTS = [0, 1, 2, 7, 13, 131, 1031]
CHUNK_BYTES = 256
TIMEOUT_S = 60.0


def ops_for(dtype) -> list:
    kind = np.dtype(dtype).kind
    ops = ["sum", "prod", "max", "min"]
    if kind == "b":
        ops += ["band", "bor", "bxor"]
    else:
        ops += ["avg"]
        if kind in "iu":
            ops += ["band", "bor", "bxor"]
    return ops


def make_input(case: int, rank: int, dtype, op, n: int, size: int) -> np.ndarray:
    """Rank `rank`'s input of case `case`: the same on every rank that asks."""
    rng = np.random.default_rng([case, rank])
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        if op in ("band", "bor", "bxor", "max", "min", None):
            lo, hi = info.min, info.max
        elif op == "prod":
            lo, hi = (-2, 2) if dt.kind == "i" else (0, 3)
        else:  # sum, avg: the sum over ranks fits
            hi = info.max // size
            lo = -hi if dt.kind == "i" else 0
        return rng.integers(lo, hi, n, dtype=dt, endpoint=True)
    if op == "prod":
        return rng.choice([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], n).astype(dt)
    if op in ("sum", "avg"):
        return (rng.integers(-256, 256, n) / 8).astype(dt)
    return (rng.standard_normal(n) * 100).astype(dt)


def reference(op: str, xs, dtype, size: int) -> np.ndarray:
    dt = np.dtype(dtype)
    stack = np.stack(xs)
    if dt.kind == "b":
        logical = {"sum": np.logical_or, "max": np.logical_or, "bor": np.logical_or,
                   "prod": np.logical_and, "min": np.logical_and, "band": np.logical_and,
                   "bxor": np.logical_xor}[op]
        return logical.reduce(stack, axis=0)
    if dt.kind in "iu":
        if op == "sum":
            return stack.sum(axis=0, dtype=dt)
        if op == "prod":
            return stack.prod(axis=0, dtype=dt)
        if op == "max":
            return stack.max(axis=0, initial=np.iinfo(dt).min)
        if op == "min":
            return stack.min(axis=0, initial=np.iinfo(dt).max)
        if op == "avg":  # the integer sum, divided truncating toward zero
            s = stack.sum(axis=0, dtype=dt)
            return (np.sign(s) * (np.abs(s) // size)).astype(dt) if dt.kind == "i" else s // size
        return {"band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}[op].reduce(stack, axis=0)
    wide = stack.astype(np.float64)
    if op == "sum":
        return wide.sum(axis=0).astype(dt)
    if op == "prod":
        return wide.prod(axis=0).astype(dt)
    if op == "max":
        return wide.max(axis=0, initial=-np.inf).astype(dt)
    if op == "min":
        return wide.min(axis=0, initial=np.inf).astype(dt)
    assert op == "avg"
    return (wide.sum(axis=0) / size).astype(dt)


def check(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype, what
    if "avg" in what and np.dtype(want.dtype).kind == "f":
        # One rounding of sum / size in the element type.
        np.testing.assert_allclose(got, want, rtol=float(np.finfo(want.dtype).eps), atol=0, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def garbage(n: int, dtype) -> np.ndarray:
    """A receive buffer whose old contents must not survive."""
    return np.frombuffer(np.random.default_rng().bytes(n * np.dtype(dtype).itemsize), dtype=dtype).copy()


def raises(cls, fn, *args, match=None, **kwargs):
    """Calls fn, which must raise ringreduce error class `cls` (its own result code, a message
    that is its str, containing `match` if given); returns the error."""
    with pytest.raises(cls) as info:
        fn(*args, **kwargs)
    e = info.value
    assert isinstance(e, ringreduce.Error) and e.result == cls.default_result, (type(e), e.result)
    assert str(e) == e.message and e.message
    if match is not None:
        assert match in str(e), (match, str(e))
    return e
