"""Real compile servers for the tests: started as processes, found through their lock
files, stopped at the end."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from asynccomp._os import listening, running
from asynccomp._version import __version__
from asynccomp.server import ServerPaths, server_paths
from asynccomp.server._protocol import PROTOCOL, Welcome, Workers, parse
from asynccomp.server._wire import Message, encode

__all__ = (
    "ROOT",
    "folder_prefix",
    "raw_client",
    "raw_receive",
    "raw_send",
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
    """The pid the server's lock file names, if that process runs (a zombie has ended)."""
    try:
        pid = int(paths.lock.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if running(pid) else None


def wait_gone(pid: int, within: float = 30.0) -> bool:
    """Whether process ``pid`` ended (a zombie has) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@contextlib.contextmanager
def running_server(
    folder: Path, *args: str, log: Path | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], ServerPaths]]:
    """``asynccomp serve --server-dir folder ARGS`` in the foreground, as a child of the
    test, ready to take clients (its log to ``log``, if given); killed afterwards."""
    paths = server_paths(folder)
    with contextlib.ExitStack() as files:
        stderr = files.enter_context(log.open("wb")) if log is not None else subprocess.DEVNULL
        process = subprocess.Popen(
            [sys.executable, "-m", "asynccomp", "serve", "--server-dir", str(folder), *args],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 60
        while not listening(paths.socket):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start (exit status {process.poll()})")
            time.sleep(0.05)
        yield process, paths
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def raw_send(sock: socket.socket, fields: dict[str, Any], blobs: list[bytes]) -> None:
    """One message on a plain socket: a client that does only what the test says."""
    sock.sendall(b"".join(encode(fields, blobs)))


def raw_receive(sock: socket.socket) -> Any:
    """The next message on a plain socket (one frame's worth), typed; a worker count the
    server says in between (a keepalive) is skipped."""

    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            assert chunk, "the server closed the connection"
            data += chunk
        return data

    while True:
        (size,) = struct.unpack(">I", exactly(4))
        frame = exactly(size)
        (header,) = struct.unpack(">I", frame[:4])
        fields = json.loads(frame[4 : 4 + header])
        message = parse(Message(fields, [frame[4 + header :]] if fields["blobs"] else []))
        if not isinstance(message, Workers):
            return message


@contextlib.contextmanager
def raw_client(paths: ServerPaths) -> Iterator[socket.socket]:
    """A plain socket connected to the server at ``paths`` and welcomed."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(60)
        sock.connect(str(paths.socket))
        raw_send(
            sock, {"type": "hello", "protocol": PROTOCOL, "version": __version__, "pid": 1}, []
        )
        assert isinstance(raw_receive(sock), Welcome)
        yield sock


def stop_servers_in(folder: Path) -> None:
    """Kill every server whose lock file is in ``folder`` (detached ones too), but not
    this process: a test's in-process server, left by a failing test, is no process."""
    for lock in folder.glob("*.lock"):
        try:
            pid = int(lock.read_text().strip())
        except (OSError, ValueError):
            continue
        if pid == os.getpid():
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        wait_gone(pid, 10)
