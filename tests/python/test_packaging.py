"""`pip install` of ringreduce, as a user does it.

Builds the wheel with `python -m build --wheel --no-isolation` (meson-python,
against the project environment's torch), installs it into a fresh virtual
environment (which sees the project environment's torch and numpy through a
.pth file instead of installing 3 GB again), and from there, with nothing of
the build tree on the path: imports ringreduce and ringreduce.torch, checks
that the one version (meson.build's) is what importlib.metadata, __version__
and rrGetVersion report and that the wheel pins the torch it was built
against, runs a 2-rank all_reduce under torchrun (torch finding the backend
through the wheel's entry point, with no `import ringreduce.torch`), runs a torch suite against
the installed package, and uninstalls it without a trace.

RR_WHEEL_BUILD_DIR (set by tests/python/meson.build: build-wheel beside
build) keeps meson-python's build folder between runs, so that later runs
only relink, and puts it where its compile commands are build's own, so that
even the first run takes build's objects from ccache instead of compiling
the library again.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import sysconfig
import textwrap

import pytest

from ranks import free_port

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Without `import ringreduce.torch`: torch finds the backend through the
# wheel's entry point (group torch.distributed.backends).
ALL_REDUCE = textwrap.dedent("""
    import sys
    import torch
    import torch.distributed as dist
    assert "ringreduce.torch" not in sys.modules
    dist.init_process_group("ringreduce")
    backend = sys.modules["ringreduce.torch"]
    rank, size = dist.get_rank(), dist.get_world_size()
    t = torch.full((1000,), float(rank + 1))
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((1000,), float(size * (size + 1) // 2))), t
    print(f"rank {rank}: all_reduce ok from {backend.__file__}")
    dist.destroy_process_group()
""")


def _clean_env() -> dict:
    """The environment without the build tree on the path (meson test puts it there)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_clean_env(), timeout=kw.pop("timeout", 900),
                          **kw)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("dist")
    build_dir = os.environ.get("RR_WHEEL_BUILD_DIR", str(tmp_path_factory.mktemp("wheel-build")))
    _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "-o", str(out), f"-Cbuild-dir={build_dir}",
          str(ROOT)], timeout=1800)
    wheels = list(out.glob("ringreduce-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def env(tmp_path_factory, wheel) -> pathlib.Path:
    """A fresh environment with the wheel installed."""
    env_dir = tmp_path_factory.mktemp("env")
    _run(["/usr/bin/python3", "-m", "venv", str(env_dir)])
    py = env_dir / "bin" / "python"
    site = _run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    # torch, numpy, pytest from the project environment, below the env's own packages.
    (pathlib.Path(site) / "project_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # Python 3.11's venv seeds an old setuptools, which would hide the one
    # torch requires.
    _run([str(py), "-m", "pip", "uninstall", "-q", "-y", "setuptools"])
    _run([str(py), "-m", "pip", "install", "--no-index", "--no-build-isolation", str(wheel)])
    return env_dir


def test_wheel_metadata_pins_the_torch_it_was_built_against(wheel):
    import torch
    import zipfile
    with zipfile.ZipFile(wheel) as z:
        metadata = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
        names = z.namelist()
    assert f"Requires-Dist: torch=={torch.__version__.split('+')[0]}" in metadata, metadata
    with zipfile.ZipFile(wheel) as z:
        entry_points = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert "[torch.distributed.backends]\nringreduce = ringreduce.torch:register\n" in entry_points, entry_points
    assert any(n.startswith("ringreduce/_torch.") for n in names), names
    assert any(n.startswith(".ringreduce.mesonpy.libs/libringreduce.so") for n in names), names
    # Every module of the source package, subpackages included, is in it.
    package = ROOT / "python" / "ringreduce"
    sources = {str(p.relative_to(package.parent)) for p in package.rglob("*")
               if p.suffix in (".py", ".pyi") or p.name == "py.typed"}
    assert sources <= set(names), f"missing from the wheel: {sorted(sources - set(names))}"


def test_installed_package_imports_with_one_version(env):
    meson_version = re.search(r"version\s*:\s*'([^']+)'", (ROOT / "meson.build").read_text()).group(1)
    out = _run([str(env / "bin" / "python"), "-c", textwrap.dedent("""
        import importlib.metadata, ringreduce, ringreduce.torch, ringreduce.dask, ringreduce.torchft
        code = ringreduce.get_version()
        print(importlib.metadata.version("ringreduce"), ringreduce.__version__,
              f"{code // 10000}.{code // 100 % 100}.{code % 100}", ringreduce.__file__, ringreduce.torch.DEVICES)
    """)], cwd="/").stdout.split()
    assert out[0] == out[1] == out[2] == meson_version, out
    assert out[3].startswith(str(env)), f"imported from {out[3]}, not the installed package"


def test_two_ranks_all_reduce_under_torchrun(env):
    script = env / "all_reduce.py"
    script.write_text(ALL_REDUCE)
    out = _run([str(env / "bin" / "python"), "-m", "torch.distributed.run", "--nproc-per-node", "2",
                "--master-addr", "127.0.0.1", "--master-port", str(free_port()), str(script)], cwd=str(env),
               timeout=300)
    assert out.stdout.count("all_reduce ok from " + str(env)) == 2, out.stdout + out.stderr


def test_torch_suite_against_the_installed_package(env):
    _run([str(env / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
          str(ROOT / "tests" / "python" / "test_torch_api.py"), "-k", "coalesced or work_future"],
         cwd=str(env), timeout=900)


def test_device_path_through_the_fake_in_the_wheels_cpu_build(env):
    # The wheel is built without CUDA: its backend's device path still takes
    # the fake's calls (test_torch_device.py; the CUDA build's own cases skip).
    _run([str(env / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
          str(ROOT / "tests" / "python" / "test_torch_device.py")], cwd=str(env), timeout=900)


def test_uninstall_leaves_nothing(env):
    py = str(env / "bin" / "python")
    site = pathlib.Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"]).stdout.strip())
    _run([py, "-m", "pip", "uninstall", "-y", "ringreduce"])
    left = [p.name for p in site.iterdir() if "ringreduce" in p.name]
    assert not left, left
    proc = subprocess.run([py, "-c", "import ringreduce"], capture_output=True, text=True, cwd="/",
                          env=_clean_env())
    assert proc.returncode != 0
