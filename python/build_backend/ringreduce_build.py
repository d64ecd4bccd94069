"""The package's PEP 517 build backend: meson-python's (mesonpy), plus the
metadata it cannot write: what only a wheel with the torch backend has.

The torch backend (ringreduce._torch) is compiled against the C++ ABI of the
torch it was built with, so a wheel must require exactly that torch. The
version is known only at build time (it is the torch of the environment,
hence ``--no-build-isolation``), and meson-python takes dependencies from
pyproject.toml only. This wraps ``build_wheel``: once mesonpy made the wheel,
``Requires-Dist: torch==<version>`` is added to its METADATA when the wheel
holds the torch backend, and so is the entry point through which torch finds
the backend by name (``init_process_group("ringreduce")`` without ``import
ringreduce.torch``: torch 2.15 loads the ``torch.distributed.backends``
group's entry of that name and calls it), in entry_points.txt; RECORD is
updated.
"""

from __future__ import annotations

import base64
import hashlib
import os
import zipfile

import mesonpy
from mesonpy import build_sdist, get_requires_for_build_sdist, get_requires_for_build_wheel  # noqa: F401

__all__ = ["build_wheel", "build_sdist", "get_requires_for_build_wheel", "get_requires_for_build_sdist"]


def _torch_pin() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return "torch==" + torch.__version__.split("+")[0]


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


#: entry_points.txt: torch's name for the backend -> its registrar.
ENTRY_POINTS = "[torch.distributed.backends]\nringreduce = ringreduce.torch:register\n"


def _add_torch_metadata(wheel_path: str, requirement: str) -> None:
    tmp = wheel_path + ".tmp"
    with zipfile.ZipFile(wheel_path) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        names = src.namelist()
        metadata_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        record_name = next(n for n in names if n.endswith(".dist-info/RECORD"))
        entry_points_name = metadata_name.rsplit("/", 1)[0] + "/entry_points.txt"
        if entry_points_name in names:
            raise RuntimeError(f"{entry_points_name}: mesonpy wrote one; merge the torch backend's entry into it")
        metadata = src.read(metadata_name).decode()
        head, sep, body = metadata.partition("\n\n")
        metadata = head + f"\nRequires-Dist: {requirement}" + sep + body
        records = []
        for info in src.infolist():
            if info.filename == record_name:
                continue
            data = metadata.encode() if info.filename == metadata_name else src.read(info.filename)
            dst.writestr(info, data)
            records.append(_record_line(info.filename, data))
        dst.writestr(zipfile.ZipInfo(entry_points_name, date_time=src.getinfo(metadata_name).date_time),
                     ENTRY_POINTS)
        records.append(_record_line(entry_points_name, ENTRY_POINTS.encode()))
        records.append(f"{record_name},,")
        dst.writestr(src.getinfo(record_name), "\n".join(records) + "\n")
    os.replace(tmp, wheel_path)


def build_wheel(wheel_directory: str, config_settings: dict | None = None,
                metadata_directory: str | None = None) -> str:
    name = mesonpy.build_wheel(wheel_directory, config_settings, metadata_directory)
    path = os.path.join(wheel_directory, name)
    pin = _torch_pin()
    with zipfile.ZipFile(path) as wheel:
        has_backend = any(os.path.basename(n).startswith("_torch.") for n in wheel.namelist())
    if pin and has_backend:
        _add_torch_metadata(path, pin)
    return name
