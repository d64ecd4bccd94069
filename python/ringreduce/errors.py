"""The exceptions ringreduce raises: one class per rrResult_t, all under Error.

Every exception carries the engine's result code (``.result``, a Result) and
its message (``str(e)``, also ``.message``): the text of rrGetLastError, which
names the argument, the peer, the operation, step and chunk at fault. The
binding raises the same classes for arguments it refuses itself (a buffer that
is not C-contiguous, an element type the engine has no type for).
"""

from __future__ import annotations

import builtins
import enum
from typing import Dict, Type

__all__ = [
    "Result",
    "Error",
    "CudaError",
    "UnhandledSystemError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidUsageError",
    "RemoteError",
    "TimeoutError",
    "RevokedError",
]


class Result(enum.IntEnum):
    """rrResult_t: the result code of every C API call."""

    SUCCESS = 0
    UNHANDLED_CUDA_ERROR = 1
    SYSTEM_ERROR = 2
    INTERNAL_ERROR = 3
    INVALID_ARGUMENT = 4
    INVALID_USAGE = 5
    REMOTE_ERROR = 6
    IN_PROGRESS = 7
    TIMEOUT = 8
    REVOKED = 9


class Error(RuntimeError):
    """A ringreduce call failed; ``str(e)`` is the engine's message.

    Attributes:
        result: the rrResult_t code (a Result; a plain int if the engine
            returned one this package does not know).
        message: the engine's text (rrGetLastError), the same as ``str(e)``.
    """

    #: The result code this class stands for (the default of ``result``).
    default_result: int = Result.INTERNAL_ERROR

    def __init__(self, message: str, result: int | None = None) -> None:
        super().__init__(message)
        code = self.default_result if result is None else result
        try:
            self.result: int = Result(code)
        except ValueError:
            self.result = code
        self.message = message


class CudaError(Error):
    """rrUnhandledCudaError: a CUDA call failed (CUDA build only)."""

    default_result = Result.UNHANDLED_CUDA_ERROR


class UnhandledSystemError(Error):
    """rrSystemError: a system call, a memory allocation or UCX failed.

    Not named ``SystemError``, which Python reserves for its own internal
    errors.
    """

    default_result = Result.SYSTEM_ERROR


class InternalError(Error):
    """rrInternalError: a bug in ringreduce (please report it)."""

    default_result = Result.INTERNAL_ERROR


class InvalidArgumentError(Error, ValueError):
    """rrInvalidArgument: a bad argument (root or peer out of range, a
    non-contiguous or read-only buffer, sizes that do not fit, an unknown op).
    Also a ValueError."""

    default_result = Result.INVALID_ARGUMENT


class InvalidUsageError(Error):
    """rrInvalidUsage: a call that is wrong in this state: ranks that called
    different collectives or passed different counts, a communicator that was
    destroyed, aborted or broken by an earlier failure."""

    default_result = Result.INVALID_USAGE


class RemoteError(Error):
    """rrRemoteError: a peer failed or disappeared (the message names it)."""

    default_result = Result.REMOTE_ERROR


class TimeoutError(Error, builtins.TimeoutError):  # noqa: A001 (ringreduce.TimeoutError, as asyncio's)
    """rrTimeout: a peer did not answer within the communicator's timeout, or
    ``Request.wait(timeout)`` expired (that request stays valid). Also the
    built-in TimeoutError, so ``except TimeoutError`` catches it either way."""

    default_result = Result.TIMEOUT


class RevokedError(Error):
    """rrRevoked: the communicator was revoked (``Comm.revoke()``, here or
    on a peer, as ULFM's MPI_Comm_revoke): every call on it raises this."""

    default_result = Result.REVOKED


_BY_RESULT: Dict[int, Type[Error]] = {
    Result.UNHANDLED_CUDA_ERROR: CudaError,
    Result.SYSTEM_ERROR: UnhandledSystemError,
    Result.INTERNAL_ERROR: InternalError,
    Result.INVALID_ARGUMENT: InvalidArgumentError,
    Result.INVALID_USAGE: InvalidUsageError,
    Result.REMOTE_ERROR: RemoteError,
    Result.TIMEOUT: TimeoutError,
    Result.REVOKED: RevokedError,
}


def error_class(result: int) -> Type[Error]:
    """The exception class that stands for rrResult_t ``result`` (Error for
    codes without a class of their own)."""
    return _BY_RESULT.get(result, Error)


def from_result(result: int, message: str) -> Error:
    """The exception for a failed call: its class by ``result``, carrying
    ``message``. The extension calls this to raise."""
    return error_class(result)(message, result)
