"""The ``processes`` cluster of test_dask.py: ``dask scheduler`` and ``dask worker`` processes on a test host.

The host is a network namespace joined to this one by a veth pair (see
NetnsHost); the workers may be on fake hosts in it (UTS namespaces). Where
neither can be made, the cluster is on loopback, on one host, and says why.
"""

from __future__ import annotations

import ipaddress
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time


def can_fake_hosts() -> bool:
    if os.geteuid() != 0:
        return False
    return subprocess.run(["unshare", "--uts", "true"], capture_output=True).returncode == 0


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True)


class NetnsHost:
    """A network namespace ``rrdask<pid>`` joined to this one by a veth pair, lo up in it.

    This side of the veth is 10.77.N.1/24, the namespace's 10.77.N.2/24, for
    the first N (from this process's id on) whose /24 no address or route of
    this namespace touches. make() returns None, or why it could not make it
    (having removed what it made); remove() kills what still runs in the
    namespace and removes it, the veth with it; it may be called at any point.
    """

    def __init__(self) -> None:
        self.netns = f"rrdask{os.getpid()}"
        self.veth = f"{self.netns}r"  # this side; {netns}n is the namespace's (15 characters at most)
        self.address = None
        self.added = False  # the namespace is this one's (a name left by a run killed before its teardown is not)

    def _free_subnet(self):
        used = []
        for args in (("-4", "-o", "addr", "show"), ("-4", "route", "show", "table", "all")):
            for line in _ip(*args).stdout.splitlines():
                for word in line.split():
                    if re.fullmatch(r"\d+\.\d+\.\d+\.\d+(/\d+)?", word):
                        used.append(ipaddress.ip_network(word, strict=False))
        start = os.getpid() % 256
        for i in range(256):
            subnet = ipaddress.ip_network(f"10.77.{(start + i) % 256}.0/24")
            if not any(subnet.overlaps(u) for u in used):
                return subnet
        return None

    def make(self):
        if os.geteuid() != 0:
            return "a network namespace needs root"
        if shutil.which("ip") is None:
            return "no ip command (iproute2)"
        subnet = self._free_subnet()
        if subnet is None:
            return "no free /24 in 10.77.0.0/16"
        here, there = (str(subnet.network_address + i) for i in (1, 2))
        peer = f"{self.netns}n"
        steps = [("netns", "add", self.netns),
                 ("-n", self.netns, "link", "set", "lo", "up"),
                 ("link", "add", self.veth, "type", "veth", "peer", "name", peer, "netns", self.netns),
                 ("addr", "add", f"{here}/24", "dev", self.veth),
                 ("link", "set", self.veth, "up"),
                 ("-n", self.netns, "addr", "add", f"{there}/24", "dev", peer),
                 ("-n", self.netns, "link", "set", peer, "up")]
        for step in steps:
            done = _ip(*step)
            if done.returncode != 0:
                self.remove()
                return f"ip {' '.join(step)}: {done.stderr.strip()}"
            self.added = True
        self.address = there
        return None

    def exec_prefix(self) -> list:
        return ["ip", "netns", "exec", self.netns]

    def remove(self) -> None:
        if not self.added:
            return
        # A process left inside would keep the namespace alive, the veth with it.
        for pid in _ip("netns", "pids", self.netns).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        _ip("link", "del", self.veth)  # takes its peer along, not waiting for the namespace to go
        _ip("netns", "del", self.netns)
        self.added, self.address = False, None


class ProcessCluster:
    """``dask scheduler`` and ``dask worker`` processes, each in a session of its own, on a NetnsHost.

    ``path`` goes on the processes' PYTHONPATH (the scheduler and the workers
    unpickle the tasks, which name the test module's functions); the
    scheduler keeps ``log_length`` events per topic.
    """

    def __init__(self, tmp: pathlib.Path, nworkers: int, path: pathlib.Path, log_length: int) -> None:
        self.tmp = tmp
        self.nworkers, self.path, self.log_length = nworkers, path, log_length
        self.procs = []
        self.host = NetnsHost()
        self.scheduler_file = tmp / "scheduler.json"

    def start(self) -> None:
        """Makes the host, starts the scheduler and the workers; close() undoes what it did, even if it fails."""
        self.no_test_host = self.host.make()  # why there is none, or None
        self.address = self.host.address or "127.0.0.1"
        self.fake_hosts = can_fake_hosts()
        # The first two workers on one fake host, the others on a second.
        self.hosts = ([f"rrfakehost{min(i // 2, 1)}" for i in range(self.nworkers)] if self.fake_hosts
                      else [None] * self.nworkers)
        dask_cli = [sys.executable, "-m", "dask"]  # the dask command, wherever its script is
        # The scheduler unpickles the tasks: it needs ringreduce and this module as the workers do.
        path = os.pathsep.join(p for p in (str(self.path), os.environ.get("PYTHONPATH")) if p)
        env = dict(os.environ, PYTHONPATH=path, DASK_DISTRIBUTED__ADMIN__LOW_LEVEL_LOG_LENGTH=str(self.log_length))
        self._start([*dask_cli, "scheduler", "--host", self.address, "--port", "0", "--no-dashboard",
                     "--scheduler-file", str(self.scheduler_file)], env, "scheduler")
        deadline = time.monotonic() + 60
        while not self.scheduler_file.exists():  # written once the scheduler listens
            if time.monotonic() > deadline or self.procs[0].poll() is not None:
                raise RuntimeError(f"the scheduler did not start:\n{self.log('scheduler')}")
            time.sleep(0.05)
        for i, host in enumerate(self.hosts):
            self._start([*dask_cli, "worker", "--scheduler-file", str(self.scheduler_file), "--nthreads", "1",
                         "--no-nanny", "--no-dashboard", "--host", self.address, "--name", f"w{i}"],
                        env, f"worker{i}", host)

    def _start(self, cmd, env, name, hostname=None):
        if hostname:
            cmd = ["unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', hostname, *cmd]
        if self.host.address:
            cmd = [*self.host.exec_prefix(), *cmd]  # ip netns exec and unshare exec the command: one pid
        with open(self.tmp / f"{name}.log", "w") as log:
            self.procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                               start_new_session=True))

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text()

    def close(self) -> None:
        """After Client.shutdown() (which closes them all), or without it; none is left behind, nor the host."""
        try:
            deadline = time.monotonic() + 5
            for p in self.procs:
                try:
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
            for p in self.procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(timeout=10)
        finally:
            self.host.remove()
