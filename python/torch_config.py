"""Prints what python/meson.build needs to build the torch backend against
the torch of the interpreter that runs it, as key=value lines; exits non-zero
(saying why on stderr) where that torch cannot be used."""

import os
import sys

# The lowest torch the backend builds against (it is tested with the pinned
# one, python/requirements.lock): the
# c10d::Backend interface (allgather_into_tensor_coalesced,
# reduce_scatter_tensor_coalesced, and abort and shutdown to override) as it
# is from 2.7 on; 2.6's Backend has no virtual abort or shutdown (checked by
# compiling the backend against its headers).
MINIMUM = (2, 7)

try:
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    import torch
except Exception as e:  # noqa: BLE001 - any failure means "no torch"
    sys.exit(f"torch does not import: {e}")

version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
if version < MINIMUM:
    sys.exit(f"torch {torch.__version__} is older than {MINIMUM[0]}.{MINIMUM[1]}")
root = os.path.dirname(torch.__file__)
print(f"version={torch.__version__}")
print("include=" + ":".join([os.path.join(root, "include"),
                             os.path.join(root, "include", "torch", "csrc", "api", "include")]))
print(f"lib={os.path.join(root, 'lib')}")
print(f"cxx11_abi={int(torch._C._GLIBCXX_USE_CXX11_ABI)}")
print(f"cuda={torch.version.cuda or 'none'}")

# The CUDA runtime torch loads (NVIDIA's wheel beside it: nvidia/cu13 for
# CUDA 13, nvidia/cuda_runtime for 12): the backend's host code compiles
# against its headers and links the same library, so that the process holds
# one CUDA runtime.
cuda_root = "none"
if torch.version.cuda:
    major = torch.version.cuda.split(".")[0]
    try:
        import nvidia  # a namespace package of NVIDIA's wheels
        roots = list(nvidia.__path__)
    except ImportError:
        roots = []
    for base in roots:
        for name in (f"cu{major}", "cuda_runtime"):
            candidate = os.path.join(base, name)
            if (os.path.isfile(os.path.join(candidate, "include", "cuda_runtime_api.h"))
                    and os.path.exists(os.path.join(candidate, "lib", f"libcudart.so.{major}"))):
                cuda_root = candidate
                break
        if cuda_root != "none":
            break
print(f"cuda_root={cuda_root}")
