"""Reaching a compile server: starting one, connecting, and deciding to trust it.

:func:`start_server` makes sure one listens (many clients calling it at once start
one). :func:`open_connection` connects and says hello; the answer is trusted only from
a server of this user (``SO_PEERCRED``: a socket path can be anyone's) that compiles
with this process's toolkit (its identity, :func:`~asynccomp.server.server_identity`),
and it says which toolkit that is. A :class:`Connection` then carries one message at a
time; :func:`request` is one request on a connection of its own (``serve --status``).
"""

from __future__ import annotations

import fcntl
import itertools
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel

from .._os import child_environ, listening
from .._version import __version__
from ..errors import ServerError
from ._paths import SERVER_DIR_ENV, ServerPaths, check_socket_path
from ._pending import Pending
from ._protocol import (
    PROTOCOL,
    Error,
    Hello,
    Status,
    Stop,
    Welcome,
    Workers,
    parse,
    send_form,
)
from ._stream import MessageStream, open_stream
from ._wire import WireError, encode

__all__ = (
    "ANSWER_TIMEOUT",
    "GONE",
    "SILENCE_LIMIT",
    "START_TIMEOUT",
    "Connection",
    "NoServer",
    "open_connection",
    "request",
    "start_server",
)

#: Seconds a server may take to come up after a client started it.
START_TIMEOUT = 60.0
#: Seconds a server has to answer hello (and a status or stop request).
ANSWER_TIMEOUT = 30.0
#: Seconds a server may send nothing while a client waits on it (a call, a warm-up, a
#: status) before the client gives up on it: every job waiting ends ServerLost. A
#: server says something at least every KEEPALIVE (5) seconds (asynccomp.server._session),
#: so only a stopped or hung one is this silent.
SILENCE_LIMIT = 30.0
#: What using a connection that went away raises.
GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


class NoServer(Exception):
    """Nothing answers at the socket (yet): start one, or say so."""


def start_server(paths: ServerPaths, environ: Mapping[str, str] | None = None) -> None:
    """Blocking: make sure a server listens on ``paths.socket``, starting one (detached:
    it outlives this process) if none does, in ``environ`` (default: this process's).
    Many processes calling this at once start one server: they queue on the ``spawn``
    lock, and all but the first find it up."""
    try:
        fd = os.open(paths.spawn, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ServerError(
            f"cannot open {paths.spawn}, the lock that keeps clients from starting two "
            f"compile servers at once: {exc.strerror or exc}; remove what is there, or set "
            f"{SERVER_DIR_ENV} to a folder of your own"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if listening(paths.socket):
            return
        command = [
            sys.executable,
            "-m",
            "asynccomp",
            "serve",
            "--detach",
            "--server-dir",
            str(paths.folder),
        ]
        env = child_environ(environ)
        try:
            done = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                env=env,
                timeout=START_TIMEOUT + 5,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ServerError(
                f"the compile server did not come up within {START_TIMEOUT:g} s; see {paths.log}"
            ) from None
        if done.returncode != 0 and not listening(paths.socket):
            said = done.stderr.decode(errors="replace").strip()
            raise ServerError(
                f"the compile server did not start (exit status {done.returncode}): {said}; "
                f"its log, {paths.log}, ends with:\n{_tail(paths.log)}"
            )
    finally:
        os.close(fd)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class Connection:
    """A connection to a server that welcomed this client: its calls and answers by id."""

    def __init__(self, stream: MessageStream) -> None:
        self.stream = stream
        self.send_lock = anyio.Lock()
        self.ids = itertools.count(1)
        self.calls: dict[int, Pending] = {}
        self.answers: dict[int, tuple[anyio.Event, list[Any]]] = {}
        self.alive = True
        self.reason = ""
        self.workers = 0
        #: When the server last said something (``time.monotonic()``).
        self.heard = time.monotonic()
        #: Set once the reader has closed the stream.
        self.closed = anyio.Event()

    @property
    def waiting(self) -> bool:
        """Whether anything on this connection waits for the server."""
        return bool(self.calls or self.answers)

    def shut(self) -> None:
        """End both directions now, from any task: the reader sees the end and closes
        the stream itself."""
        self.stream.shut()

    async def send(self, message: Any, blobs: Sequence[bytes] = ()) -> None:
        """Send one message, whole. A cancellation while its frames go out waits for
        the last one (the server would take the next message's bytes for the rest of
        this one: a stream out of step, every call on it stalled), within a bound past
        which the connection is given up instead."""
        frames = encode(*send_form(message, blobs))
        # One message at a time: frames never interleave. Taken without a turn of the
        # event loop when nobody holds it (the usual case: a turn is a good part of a
        # cache hit's time).
        try:
            self.send_lock.acquire_nowait()
        except anyio.WouldBlock:
            await self.send_lock.acquire()
        try:
            for frame in frames:  # straight into the socket's buffer, as far as it takes
                self.stream.write(frame)
            if self.stream.buffered:
                # Shielded, and at least 1 MiB/s: a server that reads slower is stuck.
                size = self.stream.buffered
                with anyio.move_on_after(ANSWER_TIMEOUT + size / 2**20, shield=True) as bound:
                    await self.stream.drain()
                if bound.cancelled_caught:
                    self.shut()
                    raise anyio.BrokenResourceError("the compile server stopped reading")
        finally:
            self.send_lock.release()
        await anyio.lowlevel.checkpoint_if_cancelled()  # a cancelled caller stops here

    async def ask(self, message: Any, blobs: Sequence[bytes] = ()) -> Any:
        """Send a request (with ``blobs``) and wait for its answer (by id)."""
        waiter: tuple[anyio.Event, list[Any]] = (anyio.Event(), [])
        self.answers[message.id] = waiter
        try:
            await self.send(message, blobs)
            await waiter[0].wait()
        finally:
            self.answers.pop(message.id, None)
        if not waiter[1]:
            raise ServerError(self.reason or "the compile server closed the connection")
        answer = waiter[1][0]
        if isinstance(answer, Error):
            raise ServerError(f"the compile server: {answer.message}")
        return answer


async def open_connection(path: Path, *, identity: str | None) -> tuple[Connection, Welcome]:
    """Connect, check who answers, say hello. NoServer when nothing listens (or it
    closed at hello: a server stopping at its idle deadline); ServerError for a
    server this process must not use, or a path that cannot be one."""
    check_socket_path(path)
    try:
        connected = await anyio.connect_unix(path)
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        raise NoServer(f"no compile server is running at {path} ({exc.strerror})") from None
    except OSError as exc:  # a path under a file, a folder we may not enter, ...
        raise ServerError(
            f"cannot reach a compile server at {path}: {exc.strerror or exc}"
        ) from None
    try:
        stream = await open_stream(connected)
    except BaseException:
        await connected.aclose()
        raise
    try:
        return await _handshake(stream, path, identity)
    except TimeoutError:
        await stream.aclose()
        raise ServerError(
            f"the compile server at {path} did not answer hello within {ANSWER_TIMEOUT:g} s "
            "(a stopped or hung process?)"
        ) from None
    except WireError as exc:
        await stream.aclose()
        raise ServerError(
            f"the compile server at {path} does not speak the protocol: {exc}"
        ) from exc
    except anyio.BrokenResourceError:
        await stream.aclose()
        raise NoServer(f"the compile server at {path} closed the connection at hello") from None
    except BaseException:
        await stream.aclose()
        raise


async def _handshake(
    stream: MessageStream, path: Path, identity: str | None
) -> tuple[Connection, Welcome]:
    uid = stream.peer_uid
    if uid is not None and uid != os.getuid():
        raise ServerError(
            f"the compile server at {path} runs as uid {uid}, not as this user (uid "
            f"{os.getuid()}): refusing it (it could answer with any bytes)"
        )
    for frame in encode(*send_form(Hello(PROTOCOL, __version__, os.getpid()))):
        stream.write(frame)
    with anyio.fail_after(ANSWER_TIMEOUT):
        await stream.drain()
        message = await stream.receive()
    if message is None:
        raise NoServer(f"the compile server at {path} closed the connection at hello")
    theirs = message.fields.get("protocol")
    if message.type == Welcome.TYPE and theirs != PROTOCOL:
        # Checked before the rest of the welcome, whose shape may differ in theirs.
        raise ServerError(
            f"the compile server at {path} speaks protocol {theirs!r} (asynccomp "
            f"{message.fields.get('version')!r}); this client speaks protocol {PROTOCOL} "
            f"(asynccomp {__version__}): stop it (asynccomp serve --stop) and start one of "
            "this version"
        )
    answer = parse(message)
    if isinstance(answer, Error):
        raise ServerError(f"the compile server at {path}: {answer.message}")
    if not isinstance(answer, Welcome):
        raise WireError(f"{message.type!r} in answer to hello")
    if identity is not None and answer.identity != identity:
        raise ServerError(
            f"the compile server at {path} compiles for identity {answer.identity} "
            f"(asynccomp {answer.version}, nvcc {answer.toolkit.get('nvcc')}, NVRTC "
            f"{answer.toolkit.get('nvrtc_version')}); this process's identity is "
            f"{identity}: another toolkit or asynccomp version, refusing it"
        )
    return Connection(stream), answer


async def request(path: Path, message: Status | Stop) -> Any:
    """One request and its answer, on a connection of its own (``serve --status``)."""
    try:
        connection, _ = await open_connection(path, identity=None)
    except NoServer as exc:
        raise ServerError(str(exc)) from None
    try:
        await connection.send(message)
        with anyio.move_on_after(ANSWER_TIMEOUT) as bound:
            answer = await connection.stream.receive()
            # A worker count said in between (it changed, or a keepalive) is no answer.
            while answer is not None and answer.type == Workers.TYPE:
                answer = await connection.stream.receive()
        if bound.cancelled_caught:
            raise ServerError(
                f"the compile server at {path} did not answer within {ANSWER_TIMEOUT:g} s "
                "(a stopped or hung process?)"
            )
        if answer is None:
            raise ServerError("the compile server closed the connection")
        return parse(answer)
    finally:
        await connection.stream.aclose()
