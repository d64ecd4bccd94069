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
