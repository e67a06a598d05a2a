"""The client side: :class:`ServerClient`, the runner of an engine on a compile server.

An ``Engine(server=...)`` plans, renders, builds results, writes dumps and counts as
every engine does (:mod:`asynccomp._scheduler`); only its compiles run on the server,
through a :class:`ServerClient` (a :class:`~asynccomp.runner.Runner`). A call's requests
go out in messages of bounded size as the engine plans them; each comes back as an
outcome (compiled, from the server's cache, or shared with an identical compile of any
client's).

The client trusts a server only when it is this user's (``SO_PEERCRED``: a socket path
can be anyone's) and compiles with this process's toolkit (its identity, see
:func:`~asynccomp.server.server_identity`), whether the socket was found (``"auto"``)
or named; the welcome says which toolkit that is, and the jobs are rendered for it.

If the server goes away (killed, stopped), every job still waiting ends with
:class:`~asynccomp.ServerLost`; results already delivered stay delivered; the next call
connects again, starting a new server if this client starts them (``server="auto"``).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.abc
import anyio.to_thread
from anyio.streams.buffered import BufferedByteReceiveStream

from .._version import __version__
from ..backends import BackendOutput
from ..errors import ServerError
from ..runner import CompileRequest, Outcome, RunEvents, Runner
from ..toolkit import Toolkit
from ._paths import ServerPaths, check_socket_path, peer_uid, server_identity, server_paths
from ._protocol import (
    PROTOCOL,
    Cancel,
    Closing,
    Compile,
    Done,
    End,
    Ended,
    Error,
    Hello,
    Jobs,
    Output,
    Started,
    Status,
    StatusReply,
    Stop,
    Stopping,
    WarmedUp,
    WarmUp,
    Welcome,
    Workers,
    outcome_of,
    parse,
    send_form,
    spec_of,
    toolkit_from,
)
from ._wire import WireError, encode, read_message

__all__ = ("ServerClient", "request", "start_server")

logger = logging.getLogger("asynccomp.server")

#: Seconds a server may take to come up after a client started it.
START_TIMEOUT = 60.0
#: Seconds a server has to answer hello (and a status or stop request).
ANSWER_TIMEOUT = 30.0
#: A call's jobs go out in messages of about this many bytes (a larger job goes alone,
#: in as many frames as it needs).
PACK_BYTES = 2**20
_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


class _NoServer(Exception):
    """Nothing answers at the socket (yet): start one, or say so."""


def _can_connect(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


def start_server(paths: ServerPaths, environ: Mapping[str, str] | None = None) -> None:
    """Blocking: make sure a server listens on ``paths.socket``, starting one (detached:
    it outlives this process) if none does, in ``environ`` (default: this process's).
    Many processes calling this at once start one server: they queue on the ``spawn``
    lock, and all but the first find it up."""
    import fcntl

    from ..backends._nvrtc_pool import python_path

    fd = os.open(paths.spawn, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if _can_connect(paths.socket):
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
        env = {**(os.environ if environ is None else environ), "PYTHONPATH": python_path()}
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
        if done.returncode != 0 and not _can_connect(paths.socket):
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


class _Pending:
    """A call sent (or being sent) and not answered in full."""

    def __init__(self, events: RunEvents) -> None:
        self.events = events
        self.waiting: set[int] = set()
        self.all_sent = False
        self.done = anyio.Event()
        self.failed: tuple[str, str] | None = None  # (status, message) once lost or refused

    def expect(self, indices: Sequence[int]) -> None:
        if self.failed is not None:  # lost before these went out: they fail at once
            for index in indices:
                self.events.finished(index, _failed(*self.failed))
            return
        self.waiting.update(indices)

    def started(self, index: int) -> None:
        if index in self.waiting:
            self.events.started(index)

    def finish(self, index: int, outcome: Outcome) -> None:
        if index not in self.waiting:
            raise WireError(f"an outcome for job {index}, which is not waiting")
        self.waiting.discard(index)
        self.events.finished(index, outcome)
        self.check()

    def fail(self, status: str, message: str) -> None:
        """End every job still waiting with ``status`` (``lost``: the server went away;
        ``internal``: it refused the call)."""
        self.failed = (status, message)
        for index in sorted(self.waiting):
            self.events.finished(index, _failed(status, message))
        self.waiting.clear()
        self.done.set()

    def check(self) -> None:
        if self.all_sent and not self.waiting:
            self.done.set()


def _failed(status: str, message: str) -> Outcome:
    return Outcome(BackendOutput(status, None, "", message), "none", 0.0, "")  # type: ignore[arg-type]


class _Connection:
    def __init__(self, stream: anyio.abc.SocketStream, receive: BufferedByteReceiveStream) -> None:
        self.stream = stream
        self.receive = receive
        self.send_lock = anyio.Lock()
        self.ids = itertools.count(1)
        self.calls: dict[int, _Pending] = {}
        self.answers: dict[int, tuple[anyio.Event, list[Any]]] = {}
        self.alive = True
        self.reason = ""
        self.workers = 0

    async def send(self, message: Any, blobs: Sequence[bytes] = ()) -> None:
        frames = encode(*send_form(message, blobs))
        async with self.send_lock:  # one message at a time: frames never interleave
            for frame in frames:
                await self.stream.send(frame)

    async def ask(self, message: Any) -> Any:
        """Send a request and wait for its answer (by id)."""
        waiter: tuple[anyio.Event, list[Any]] = (anyio.Event(), [])
        self.answers[message.id] = waiter
        try:
            await self.send(message)
            await waiter[0].wait()
        finally:
            self.answers.pop(message.id, None)
        if not waiter[1]:
            raise ServerError(self.reason or "the compile server closed the connection")
        answer = waiter[1][0]
        if isinstance(answer, Error):
            raise ServerError(f"the compile server: {answer.message}")
        return answer


async def _open(path: Path, *, identity: str | None) -> tuple[_Connection, Welcome]:
    """Connect, check who answers, say hello. _NoServer when nothing listens (or it
    closed at hello: a server stopping at its idle deadline); ServerError for a
    server this process must not use, or a path that cannot be one."""
    check_socket_path(path)
    try:
        stream = await anyio.connect_unix(path)
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        raise _NoServer(f"no compile server is running at {path} ({exc.strerror})") from None
    except OSError as exc:  # a path under a file, a folder we may not enter, ...
        raise ServerError(
            f"cannot reach a compile server at {path}: {exc.strerror or exc}"
        ) from None
    try:
        return await _handshake(stream, path, identity)
    except (WireError, TimeoutError) as exc:
        await stream.aclose()
        raise ServerError(
            f"the compile server at {path} does not speak the protocol: {exc}"
        ) from exc
    except anyio.BrokenResourceError:
        await stream.aclose()
        raise _NoServer(f"the compile server at {path} closed the connection at hello") from None
    except BaseException:
        await stream.aclose()
        raise


async def _handshake(
    stream: anyio.abc.SocketStream, path: Path, identity: str | None
) -> tuple[_Connection, Welcome]:
    uid = peer_uid(stream.extra(anyio.abc.SocketAttribute.raw_socket))
    if uid is not None and uid != os.getuid():
        raise ServerError(
            f"the compile server at {path} runs as uid {uid}, not as this user (uid "
            f"{os.getuid()}): refusing it (it could answer with any bytes)"
        )
    receive = BufferedByteReceiveStream(stream)
    for frame in encode(*send_form(Hello(PROTOCOL, __version__, os.getpid()))):
        await stream.send(frame)
    with anyio.fail_after(ANSWER_TIMEOUT):
        message = await read_message(receive)
    if message is None:
        raise _NoServer(f"the compile server at {path} closed the connection at hello")
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
    return _Connection(stream, receive), answer


async def request(path: Path, message: Status | Stop) -> Any:
    """One request and its answer, on a connection of its own (``serve --status``)."""
    try:
        connection, _ = await _open(path, identity=None)
    except _NoServer as exc:
        raise ServerError(str(exc)) from None
    try:
        await connection.send(message)
        with anyio.fail_after(ANSWER_TIMEOUT):
            answer = await read_message(connection.receive)
        if answer is None:
            raise ServerError("the compile server closed the connection")
        return parse(answer)
    finally:
        await connection.stream.aclose()


class ServerClient(Runner):
    """Runs an engine's compiles on a compile server.

    ``socket`` names a server's socket; ``None`` finds the server of this user and
    toolkit (:func:`~asynccomp.server.server_paths`), starting one when none is running
    (``auto_start``, the default then). Either way the server must be this user's and
    compile with this process's toolkit, or :class:`~asynccomp.ServerError` says why
    not. An engine makes one with ``Engine(server=...)``; it needs no more than that::

        async with Engine(arch="sm_90a", server="auto") as engine:
            ...

    ``remote_cache=False``: this client asks for no remote tier: a server it starts is
    started without ``$ASYNCCOMP_REMOTE_CACHE`` and the key's variables (a setting the
    caller cannot use, such as the TVM facade's, never stops the server), and a running
    server that has one is a line of :meth:`overridden_settings`. ``None`` (the
    default): this process's environment, as it is.
    """

    def __init__(
        self,
        socket: Path | None = None,
        *,
        auto_start: bool | None = None,
        remote_cache: Literal[False] | None = None,
    ) -> None:
        from ..cache import REMOTE_CACHE_ENV, REMOTE_CACHE_KEY_ENV, REMOTE_CACHE_KEY_FILE_ENV

        self._socket = socket
        self.auto_start = socket is None if auto_start is None else auto_start
        self.remote_cache = remote_cache
        #: What this client speaks for: a server it starts gets it, and the settings it
        #: names are compared with the server's.
        self._environ = dict(os.environ)
        if remote_cache is False:
            for name in (REMOTE_CACHE_ENV, REMOTE_CACHE_KEY_ENV, REMOTE_CACHE_KEY_FILE_ENV):
                self._environ.pop(name, None)
        self._connection: _Connection | None = None
        self._welcome: Welcome | None = None
        self._toolkit: Toolkit | None = None
        self._connecting = anyio.Lock()
        self._task_group: anyio.abc.TaskGroup | None = None

    # -- what the server said ----------------------------------------------------------------

    @property
    def welcome(self) -> Welcome:
        if self._welcome is None:
            raise ServerError("not connected to a compile server yet")
        return self._welcome

    @property
    def toolkit(self) -> Toolkit:
        """The server's toolkit, which jobs are rendered for."""
        if self._toolkit is None:
            self._toolkit = toolkit_from(self.welcome.toolkit)
        return self._toolkit

    @property
    def where(self) -> str:  # type: ignore[override]
        return f"on the compile server (pid {self.welcome.pid})"

    @property
    def server_pid(self) -> int | None:
        return None if self._welcome is None else self._welcome.pid

    def slots(self) -> Mapping[str, int]:
        return {} if self._welcome is None else self._welcome.slots

    def workers(self) -> int:
        connection = self._connection
        return 0 if connection is None else connection.workers

    def overridden_settings(self) -> list[str]:
        """One line per setting this client's environment asks for that the server
        overrides (its cache folder, its remote cache)."""
        from ..cache import CACHE_DIR_ENV, REMOTE_CACHE_ENV, default_cache_dir

        theirs = self.welcome.settings
        pid = self.welcome.pid
        lines = []
        if self._environ.get(CACHE_DIR_ENV):
            mine = str(default_cache_dir().resolve())
            if theirs.get("cache_dir") != mine:
                lines.append(
                    f"${CACHE_DIR_ENV} is {mine} here, but the compile server (pid {pid}) "
                    f"caches in {theirs.get('cache_dir')}: its cache is used"
                )
        url = self._environ.get(REMOTE_CACHE_ENV, "").strip()
        if self.remote_cache is False and theirs.get("remote_cache"):
            lines.append(
                f"this engine asks for no remote cache (remote_cache=False), but the "
                f"compile server (pid {pid}) uses {theirs['remote_cache']}: its setting is "
                "used"
            )
        if url:
            from ..cache import remote_cache_from_url

            try:
                mine = remote_cache_from_url(url).name
            except Exception:  # a bad value here: the server's is used anyway
                mine = "(not usable here)"
            if theirs.get("remote_cache") != mine:
                lines.append(
                    f"${REMOTE_CACHE_ENV} names {mine} here, but the compile server (pid "
                    f"{pid}) uses {theirs.get('remote_cache') or 'no remote cache'}: "
                    "its setting is used"
                )
        return lines

    # -- connecting --------------------------------------------------------------------------

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        """Connect now (as the engine starts), so a server that cannot be had fails the
        ``async with``, not the first job."""
        self._task_group = task_group
        await self._connected()

    async def _connected(self) -> _Connection:
        async with self._connecting:
            connection = self._connection
            if connection is not None and connection.alive:
                return connection
            path, paths = self._socket, None
            if path is None:
                paths = await anyio.to_thread.run_sync(server_paths)
                path = paths.socket
            identity = await anyio.to_thread.run_sync(server_identity)
            opened = await self._open(path, paths, identity)
            self._connection, self._welcome = opened
            opened[0].workers = opened[1].workers
            assert self._task_group is not None
            self._task_group.start_soon(self._read, opened[0])
            return opened[0]

    async def _open(
        self, path: Path, paths: ServerPaths | None, identity: str
    ) -> tuple[_Connection, Welcome]:
        for attempt in range(3):
            try:
                return await _open(path, identity=identity)
            except _NoServer as exc:
                if not self.auto_start or paths is None or attempt == 2:
                    raise ServerError(str(exc)) from None
                # None listens, or one was stopping at its idle deadline: start one.
                await anyio.to_thread.run_sync(start_server, paths, self._environ)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _read(self, connection: _Connection) -> None:
        reason = "the compile server closed the connection"
        try:
            while True:
                message = await read_message(connection.receive)
                if message is None:
                    break
                answer = parse(message)
                said = self._dispatch(connection, answer, message.blobs)
                if said is not None:
                    reason = said
                    break
        except WireError as exc:
            reason = f"the compile server broke the protocol: {exc}"
            logger.warning("asynccomp: %s", reason)
        except _GONE as exc:
            reason = f"the connection to the compile server failed: {exc!r}"
        finally:
            self._lost(connection, reason)
            with anyio.CancelScope(shield=True):
                await connection.stream.aclose()

    def _dispatch(self, connection: _Connection, answer: Any, blobs: list[bytes]) -> str | None:
        """Hand one answer on; the reason to stop reading, if it is one."""
        if isinstance(answer, (Output, Done)):
            connection.workers = answer.workers
            pending = connection.calls.get(answer.id)
            if pending is not None:  # else a call this side has given up on
                pending.finish(answer.index, outcome_of(answer, blobs))
        elif isinstance(answer, Started):
            connection.workers = answer.workers
            pending = connection.calls.get(answer.id)
            if pending is not None:
                for index in answer.indices:
                    pending.started(index)
        elif isinstance(answer, Workers):
            connection.workers = answer.workers
        elif isinstance(answer, Ended):
            pending = connection.calls.get(answer.id)
            if pending is not None and pending.waiting:
                pending.fail("internal", "the compile server ended the call without these jobs")
        elif isinstance(answer, (WarmedUp, StatusReply, Stopping)):
            if isinstance(answer, WarmedUp):
                connection.workers = answer.workers
            waiter = connection.answers.get(answer.id)
            if waiter is not None:
                waiter[1].append(answer)
                waiter[0].set()
        elif isinstance(answer, Error):
            if answer.id is not None and answer.id in connection.calls:
                connection.calls[answer.id].fail(
                    "internal", f"the compile server refused the call: {answer.message}"
                )
            elif answer.id is not None and answer.id in connection.answers:
                waiter = connection.answers[answer.id]
                waiter[1].append(answer)
                waiter[0].set()
            else:
                logger.warning("asynccomp: the compile server: %s", answer.message)
            if answer.fatal:
                return f"the compile server: {answer.message}"
        elif isinstance(answer, Closing):
            return f"the compile server: {answer.reason}"
        else:
            raise WireError(f"a {type(answer).__name__} message from the server")
        return None

    def _lost(self, connection: _Connection, reason: str) -> None:
        if not connection.alive:
            return
        connection.alive = False
        connection.reason = reason
        for pending in list(connection.calls.values()):
            pending.fail("lost", f"{reason} before this job finished")
        for event, _ in connection.answers.values():
            event.set()

    # -- the Runner interface ----------------------------------------------------------------

    async def run(
        self,
        requests: AsyncIterable[Sequence[CompileRequest]],
        events: RunEvents,
        *,
        want: bool = True,
    ) -> None:
        pending = _Pending(events)
        try:
            connection = await self._connected()
        except ServerError as exc:
            pending.fail("lost", f"no compile server to run this job: {exc}")
            async for chunk in requests:
                pending.expect([r.index for r in chunk])
            return
        number = next(connection.ids)
        connection.calls[number] = pending
        finished = False
        try:
            await connection.send(Compile(number, want))
            async for chunk in requests:
                pending.expect([r.index for r in chunk])
                if connection.alive:
                    for message, blobs in _packed(number, chunk):
                        await connection.send(message, blobs)
            pending.all_sent = True
            pending.check()
            if connection.alive:
                await connection.send(End(number))
            await pending.done.wait()
            finished = True
        except _GONE as exc:
            self._lost(connection, f"sending to the compile server failed ({exc!r})")
        finally:
            connection.calls.pop(number, None)
            if not finished and connection.alive:
                # Cancelled: the server drops this call's compiles (nobody else's).
                with anyio.CancelScope(shield=True), contextlib.suppress(*_GONE):
                    await connection.send(Cancel(number))

    async def warm_up(self) -> None:
        connection = await self._connected()
        await connection.ask(WarmUp(next(connection.ids)))

    async def status(self) -> dict[str, Any]:
        """The server's status (what ``asynccomp serve --status`` prints)."""
        connection = await self._connected()
        answer = await connection.ask(Status(next(connection.ids)))
        assert isinstance(answer, StatusReply)
        return answer.status

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.alive = False
            await connection.stream.aclose()


def _packed(number: int, chunk: Sequence[CompileRequest]) -> list[tuple[Jobs, list[bytes]]]:
    """A chunk's jobs in messages of about PACK_BYTES each (a larger job alone)."""
    messages: list[tuple[Jobs, list[bytes]]] = []
    specs: list[Any] = []
    blobs: list[bytes] = []
    size = 0
    for request in chunk:
        spec, sources = spec_of(request)
        weight = sum(len(s) for s in sources) + 256
        if specs and size + weight > PACK_BYTES:
            messages.append((Jobs(number, specs), blobs))
            specs, blobs, size = [], [], 0
        specs.append(spec)
        blobs.extend(sources)
        size += weight
    if specs:
        messages.append((Jobs(number, specs), blobs))
    return messages
