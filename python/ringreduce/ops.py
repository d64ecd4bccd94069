"""Reduction operations (rrRedOp_t).

Every reducing call takes ``op`` as an Op or by name ("sum", "prod", "max",
"min", "avg", "band", "bor", "bxor"; case does not matter).

- avg: floating types divide the sum by the rank count once, at the end;
  integer types divide the integer sum, truncating toward zero (as NCCL).
- band, bor, bxor: bitwise, integer types only.
- max and min propagate NaN.
- numpy bool arrays reduce logically, as uint8 bytes: sum, max and bor are
  "or"; prod, min and band are "and"; bxor is "xor"; avg is refused.
"""

from __future__ import annotations

import enum

__all__ = ["Op"]


class Op(enum.IntEnum):
    """rrRedOp_t, same numbering as ncclRedOp_t."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4
    BAND = 5
    BOR = 6
    BXOR = 7
