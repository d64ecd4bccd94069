"""One CUDA runtime per process: torch's, where the engine was built with CUDA.

libringreduce asks for the CUDA runtime by its soname (libcudart.so.13), and
torch loads NVIDIA's wheel of it by path. Imported after torch, the engine
finds torch's already loaded; imported first, it would load the toolkit's
copy, and torch then its own beside it: two runtimes in one process. So the
package loads torch's copy first when that wheel is installed (without
importing torch), and the engine's soname then resolves to it.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os

from ringreduce import _build


def share_torchs() -> str | None:
    """Loads the CUDA runtime of NVIDIA's wheel (torch's) if the engine uses
    CUDA and that wheel is installed; returns its path, or None."""
    major = _build.CUDA_MAJOR
    if major is None:
        return None
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for base in spec.submodule_search_locations:
        for name in (f"cu{major}", "cuda_runtime"):  # CUDA 13's layout, then 12's
            path = os.path.join(base, name, "lib", f"libcudart.so.{major}")
            if os.path.exists(path):
                ctypes.CDLL(path)
                return path
    return None
