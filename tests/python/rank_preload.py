"""What every test rank imports, imported once by the fork server that starts them (ranks.py).

A module that cannot be imported here is left to the rank that needs it,
which then fails (or skips) with its own error.
"""

import importlib

for _name in ("numpy", "pytest", "ringreduce", "torch", "torch.distributed", "ringreduce.torch"):
    try:
        importlib.import_module(_name)
    except BaseException:  # noqa: B036 - pytest.skip and the like are BaseExceptions too
        pass
