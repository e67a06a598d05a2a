"""A real Ray cluster of two nodes on this machine (``ray.cluster_utils.Cluster``), and
ways to find and kill the compile actors of one node."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from .servers import short_root

__all__ = (
    "RAY_ROOT",
    "LocalHead",
    "RayCluster",
    "actor_processes",
    "compiling_actors",
    "needs_ray",
    "short_ray_tmpdir",
)

#: For tests that need Ray but no cluster of :class:`RayCluster` (which skips by itself).
needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="needs Ray (pip install '.[ray]')"
)

#: How deep Ray puts its sockets below its temporary folder (``$RAY_TMPDIR``, else
#: ``$TMPDIR``): ``ray/session_<date>_<time>_<µs>_<pid>/sockets/plasma_store``, a pid of up
#: to 7 digits. Ray refuses to start where that passes a Unix socket's 107 bytes.
RAY_SOCKET_ROOM = len("/ray/session_2026-12-06_05-05-29_241939_1234567/sockets/plasma_store")

#: Where the tests' own Ray folders go (``rh-`` folders of :class:`LocalHead`).
RAY_ROOT = short_root(len("/rh-xxxxxxxx") + RAY_SOCKET_ROOM)


def short_ray_tmpdir() -> Path | None:
    """A fresh short folder for Ray (to be ``$RAY_TMPDIR``), where Ray's own default
    below ``$TMPDIR`` is too deep for its sockets (a long ``$TMPDIR``); ``None`` where
    that default fits, or ``$RAY_TMPDIR`` is set already."""
    if os.environ.get("RAY_TMPDIR") or short_root(RAY_SOCKET_ROOM) == Path(tempfile.gettempdir()):
        return None
    return Path(tempfile.mkdtemp(prefix="rt-", dir=RAY_ROOT))


#: Node deaths noticed in about a second and a half (Ray's default is 15 s and more).
FAST_HEALTH_CHECKS = {
    "health_check_period_ms": 500,
    "health_check_failure_threshold": 3,
    "health_check_initial_delay_ms": 0,
}


class RayCluster:
    """A head and one worker node of one CPU each, this test process their driver."""

    def __init__(self) -> None:
        ray = pytest.importorskip("ray")
        from ray.cluster_utils import Cluster

        self.ray = ray
        self.cluster: Any = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "include_dashboard": False,
                "_system_config": FAST_HEALTH_CHECKS,
            },
        )
        self.head = self.cluster.head_node
        self.worker = self.cluster.add_node(num_cpus=1)
        self.address: str = self.cluster.address
        ray.init(address=self.address, log_to_driver=False, logging_level="WARNING")
        self.cluster.wait_for_nodes()

    def add_node(self) -> Any:
        node = self.cluster.add_node(num_cpus=1)
        self.cluster.wait_for_nodes()
        return node

    def remove_node(self, node: Any) -> None:
        self.cluster.remove_node(node, allow_graceful=False)

    @contextlib.contextmanager
    def extra_node(self) -> Iterator[Any]:
        """A third node for one test, removed at its end if the test has not removed it
        (a node left behind gives the next tests an actor more than they expect)."""
        node = self.add_node()
        try:
            yield node
        finally:
            if node in self.cluster.worker_nodes:
                self.remove_node(node)

    def free_cpus(self) -> float:
        return float(self.ray.available_resources().get("CPU", 0))

    def shutdown(self) -> None:
        self.ray.shutdown()
        self.cluster.shutdown()


def _raylet_pid(node: Any) -> int:
    return int(node.all_processes["raylet"][0].process.pid)


#: The ``ray start --head`` instances this test process runs (their raylets are not its
#: children).
_LOCAL_HEADS: list[LocalHead] = []


def _our_raylets() -> set[int]:
    """The pids of every process that may be the parent of one of our actors: the
    descendants of this test process (a :class:`RayCluster`'s nodes) and the processes
    of our :class:`LocalHead` instances. Another program's Ray on the machine (another
    test process, a user's cluster) is not ours to count."""
    ours = {p.pid for p in psutil.Process().children(recursive=True)}
    for head in _LOCAL_HEADS:
        ours.update(p.pid for p in head.processes())
    return ours


def actor_processes(node: Any | None = None) -> list[psutil.Process]:
    """Our compile actors' processes (of ``node`` only, when given): Ray names each
    ``ray::CompileActor`` (``ray::CompileActor.compile`` while it compiles)."""
    found = []
    parents = {_raylet_pid(node)} if node is not None else _our_raylets()
    for process in psutil.process_iter():
        try:
            title = process.cmdline()
            if not title or not title[0].startswith("ray::CompileActor"):
                continue
            if process.ppid() not in parents:
                continue
            found.append(process)
        except psutil.Error:
            pass
    return found


def compiling_actors() -> list[psutil.Process]:
    """The compile actors running a job now."""
    busy = []
    for process in actor_processes():
        try:
            if process.cmdline()[0].startswith("ray::CompileActor.compile"):
                busy.append(process)
        except (psutil.Error, IndexError):
            pass
    return busy


class LocalHead:
    """A head started as a user starts one, ``ray start --head`` (two CPUs), with Ray's
    temporary folder one of the test's (``$RAY_TMPDIR``: its ``ray_current_cluster``
    file is what ``--ray auto`` finds). Stopped by killing its processes by pid:
    ``ray stop`` would stop every Ray instance on the machine."""

    def __init__(self, folder: Path) -> None:
        pytest.importorskip("ray")
        self.folder = folder
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        # The `ray` command: next to this Python (a venv), else on PATH (pip --target).
        beside = Path(sys.executable).with_name("ray")
        found = str(beside) if beside.exists() else shutil.which("ray")
        if found is None:
            pytest.skip("the `ray` command is not installed")
        ray = found
        command = [ray, "start", "--head", "--port", str(port), "--num-cpus", "2"]
        command += ["--include-dashboard=false", "--disable-usage-stats"]
        try:
            subprocess.run(command, env=self.env, capture_output=True, check=True, timeout=120)
        except BaseException:
            self.stop()
            raise
        self.address = (folder / "ray" / "ray_current_cluster").read_text().strip()
        _LOCAL_HEADS.append(self)

    @property
    def env(self) -> dict[str, str]:
        """The environment of a command run on this head: the test's as it is now (a
        copy kept from the head's start would miss the test's own settings, such as
        its cache folder), with the head's ``$RAY_TMPDIR``."""
        env = {**os.environ, "RAY_TMPDIR": str(self.folder)}
        env.pop("RAY_ADDRESS", None)
        return env

    def processes(self) -> list[psutil.Process]:
        """The head's processes (they name its folder) and everything below them."""
        found: dict[int, psutil.Process] = {}
        for process in psutil.process_iter():
            try:
                if str(self.folder) in " ".join(process.cmdline()):
                    for one in (process, *process.children(recursive=True)):
                        found[one.pid] = one
            except psutil.Error:
                pass
        return list(found.values())

    def stop(self) -> None:
        if self in _LOCAL_HEADS:
            _LOCAL_HEADS.remove(self)
        processes = self.processes()
        for process in processes:
            try:
                process.send_signal(signal.SIGKILL)
            except psutil.Error:
                pass
        psutil.wait_procs(processes, timeout=15)
