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
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from asynccomp._os import listening, running
from asynccomp._version import __version__
from asynccomp.server import ServerPaths, server_paths
from asynccomp.server._paths import MAX_SOCKET_PATH
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
    "short_root",
    "start_serve",
    "stop_servers_in",
    "wait_for_socket",
    "wait_gone",
    "wait_listening",
)


def short_root(room: int) -> Path:
    """The system's temporary folder as the session started (a test may point
    ``tempfile`` elsewhere), unless a socket ``room`` bytes below it would be over a
    Unix socket's limit (a long ``$TMPDIR``): then ``/tmp``, where asynccomp's own
    default goes."""
    given = Path(tempfile.gettempdir())
    if len(os.fsencode(given)) + room <= MAX_SOCKET_PATH or not Path("/tmp").is_dir():
        return given
    return Path("/tmp")


#: Where server folders go (and any other folder of the tests' that holds a socket:
#: a Unix socket's path is limited to 107 bytes, and pytest's ``tmp_path`` is deep):
#: room for ``/acs-<pid>-<8 random>/server-<16 hex>.sock``, a pid of up to 10 digits.
ROOT = short_root(len(f"/acs-{'9' * 10}-{'x' * 8}/server-{'0' * 16}.sock"))


def folder_prefix() -> str:
    """How the server folders of this test session begin: ``acs-<its pid>-`` (short: a
    socket's path is limited to about 100 bytes). The session's check (conftest.py)
    looks for its own only: other sessions may be running on the machine."""
    return f"acs-{os.getpid()}-"


@contextlib.contextmanager
def server_folder(room: int | None = None) -> Iterator[Path]:
    """A fresh private folder for compile servers, removed afterwards (the servers
    started in it killed first), whatever happened in the block. ``room``: the longest
    socket path below it, from its ``/acs-...`` on, where deeper than a server's own."""
    root = ROOT if room is None else short_root(room)
    folder = Path(tempfile.mkdtemp(prefix=folder_prefix(), dir=root))
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


#: How long a server may take to listen: an interpreter importing asynccomp and a
#: toolkit's lookup, on a loaded machine.
START = 60.0


def start_serve(
    folder: Path, *args: str, stderr: IO[bytes], env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``asynccomp serve --server-dir folder ARGS`` as a child of the test (in ``env``,
    default this process's), its stderr to ``stderr``, which :func:`wait_listening`
    shows when the server does not start."""
    return subprocess.Popen(
        [sys.executable, "-m", "asynccomp", "serve", "--server-dir", str(folder), *args],
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        env=None if env is None else dict(env),
    )


def _said(stderr: IO[bytes]) -> str:
    """What the file holds, from its start (read in place: the server may still write)."""
    fd = stderr.fileno()
    return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")


def wait_listening(
    process: subprocess.Popen[bytes], socket_path: Path, stderr: IO[bytes], within: float = START
) -> None:
    """Until the server ``process`` listens at ``socket_path``; if it ends or does not
    listen within ``within`` seconds, an error that shows what it wrote to ``stderr``
    (a socket's path over the limit, a bad setting: the server says why)."""
    wait_for_socket(process, socket_path.parent, stderr, within, name=socket_path.name)


def wait_for_socket(
    process: subprocess.Popen[bytes],
    folder: Path,
    stderr: IO[bytes],
    within: float = START,
    *,
    name: str = "*.sock",
) -> Path:
    """The socket (``name``, a glob) in ``folder`` at which the server ``process``
    listens, once it does; an error showing its ``stderr`` if it ends or does not
    listen within ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        for path in sorted(folder.glob(name)):
            if listening(path):
                return path
        status = process.poll()
        if status is not None or time.monotonic() > deadline:
            why = f"exit status {status}" if status is not None else f"not within {within} s"
            raise RuntimeError(
                f"the server did not start in {folder} ({why}); its stderr:\n{_said(stderr)}"
            )
        time.sleep(0.05)


@contextlib.contextmanager
def running_server(
    folder: Path, *args: str, log: Path | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], ServerPaths]]:
    """``asynccomp serve --server-dir folder ARGS`` in the foreground, as a child of the
    test, ready to take clients (its stderr to ``log``, if given, else to a temporary
    file: shown if it does not start); killed afterwards."""
    paths = server_paths(folder)
    with log.open("w+b") if log is not None else tempfile.TemporaryFile() as stderr:
        process = start_serve(folder, *args, stderr=stderr)
        try:
            wait_listening(process, paths.socket, stderr)
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
