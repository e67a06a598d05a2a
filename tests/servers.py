"""Real compile servers for the tests: started as processes, found through their lock
files, stopped at the end."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from asynccomp.server import ServerPaths, server_paths

__all__ = (
    "ROOT",
    "folder_prefix",
    "running_server",
    "server_folder",
    "server_pid",
    "stop_servers_in",
    "wait_gone",
)


#: Where server folders go: the system's temporary folder as the session started (a
#: test may point ``tempfile`` elsewhere; a socket's path must stay short).
ROOT = Path(tempfile.gettempdir())


def folder_prefix() -> str:
    """How the server folders of this test session begin: ``acs-<its pid>-`` (short: a
    socket's path is limited to about 100 bytes). The session's check (conftest.py)
    looks for its own only: other sessions may be running on the machine."""
    return f"acs-{os.getpid()}-"


@contextlib.contextmanager
def server_folder() -> Iterator[Path]:
    """A fresh private folder for compile servers, removed afterwards (the servers
    started in it killed first), whatever happened in the block."""
    folder = Path(tempfile.mkdtemp(prefix=folder_prefix(), dir=ROOT))
    try:
        folder.chmod(0o700)
        yield folder
    finally:
        stop_servers_in(folder)
        shutil.rmtree(folder, ignore_errors=True)


def server_pid(paths: ServerPaths) -> int | None:
    """The pid the server's lock file names, if that process is alive."""
    try:
        pid = int(paths.lock.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if psutil.pid_exists(pid) else None


def _connectable(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def wait_gone(pid: int, within: float = 30.0) -> bool:
    """Whether process ``pid`` ended (or is a zombie) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def running_server(
    folder: Path, *args: str
) -> Iterator[tuple[subprocess.Popen[bytes], ServerPaths]]:
    """``asynccomp serve --server-dir folder ARGS`` in the foreground, as a child of the
    test, ready to take clients; killed afterwards."""
    paths = server_paths(folder)
    process = subprocess.Popen(
        [sys.executable, "-m", "asynccomp", "serve", "--server-dir", str(folder), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not _connectable(paths.socket):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start (exit status {process.poll()})")
            time.sleep(0.05)
        yield process, paths
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def stop_servers_in(folder: Path) -> None:
    """Kill every server whose lock file is in ``folder`` (detached ones too)."""
    for lock in folder.glob("*.lock"):
        try:
            pid = int(lock.read_text().strip())
        except (OSError, ValueError):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        wait_gone(pid, 10)
