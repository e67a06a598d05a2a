"""The compile server: one scheduler for every process of this user.

:class:`Server` listens on its Unix socket, checks each peer's uid (``SO_PEERCRED``),
greets it (protocol and version must match; the welcome says which toolkit it compiles
with, so the client renders jobs for exactly that one) and runs its requests on one
:class:`~asynccomp._scheduler._pipeline.Scheduler`: NVRTC workers, nvcc slots, the
cache and the coalescing of identical compiles are shared by every client, so identical
jobs from two processes are compiled once, and the longest compiles start first across
all of them. A client sends rendered compiles and gets outcomes back; results are built
on its side, as for every engine.

A client that cancels a request, or goes away, has its own compiles cancelled and
nobody else's. A request the server refuses (a job for another toolkit, a malformed
message) is answered with an ``Error`` naming it, and the connection goes on; bytes
that are not frames at all cost their sender the connection, never the server.

The server runs in a folder that holds nothing (a quoted ``#include`` never finds a
header of the server's), stops after ``idle_timeout`` seconds without a client, at
``asynccomp serve --stop``, and on SIGTERM, SIGINT or SIGHUP: clients are told, the
socket and lock go first (a new server can start at once), then running compiles are
cancelled (nvcc killed with its children) and the workers end.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import math
import os
import re
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from .._scheduler._assembly import default_backends, local_workers, remote_cache, start_local
from .._scheduler._pipeline import Scheduler
from .._scheduler._tally import Tally
from .._version import __version__
from ..backends import PreparedCompile
from ..backends._base import empty_folder
from ..cache import ResultCache
from ..config import EngineConfig
from ..errors import ServerError
from ..job import parse_arch
from ..runner import CompileRequest, Outcome
from ..toolkit import Toolkit
from ._paths import ServerPaths, peer_uid
from ._protocol import (
    PROTOCOL,
    Cancel,
    Closing,
    Compile,
    End,
    Ended,
    Error,
    Hello,
    Jobs,
    Started,
    Status,
    StatusReply,
    Stop,
    Stopping,
    WarmedUp,
    WarmUp,
    Welcome,
    Workers,
    output_form,
    parse,
    prepared_of,
    request_id,
    send_form,
    toolkit_to,
)
from ._wire import Message, WireError, encode, read_message

__all__ = ("DEFAULT_IDLE_TIMEOUT", "Server")

logger = logging.getLogger("asynccomp.server")

#: Seconds without a client before a server stops by itself.
DEFAULT_IDLE_TIMEOUT = 300.0
#: Seconds a new connection has to say hello.
_HELLO_TIMEOUT = 10.0
# What writing to a client that went away raises.
_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)
_FILENAME = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*\.cu")


class _Request:
    """One compile request of a client: its jobs as they arrive, and its events."""

    def __init__(self, connection: _Connection, number: int, want: bool, tally: Tally) -> None:
        self.connection = connection
        self.id = number
        self.want = want
        self.tally = tally
        self.scope = anyio.CancelScope()
        self.send, self.receive = anyio.create_memory_object_stream[Sequence[CompileRequest]](
            math.inf
        )
        self.timeouts: dict[int, float | None] = {}

    def started(self, index: int) -> None:
        self.tally.started()
        self.connection.post(Started(self.id, [index], self.connection.server.workers()))

    def finished(self, index: int, outcome: Outcome) -> None:
        status = outcome.output.status
        self.tally.answered(outcome.answer)
        timeout = self.timeouts.pop(index, None)
        self.tally.ended(ok=status == "ok", timed_out=status == "timeout" and timeout is not None)
        message, blobs = output_form(
            self.id, index, outcome, self.connection.server.workers(), self.want
        )
        self.connection.post(message, blobs)


class _Connection:
    """One client: its stream, what goes out to it, and its requests."""

    def __init__(self, server: Server, stream: anyio.abc.SocketStream) -> None:
        self.server = server
        self.stream = stream
        self.receive = BufferedByteReceiveStream(stream)
        self.requests: dict[int, _Request] = {}
        self.pid: int | None = None
        # Answers are posted from plain code (the scheduler's events) and written by one
        # task, in order.
        self._out, self._queue = anyio.create_memory_object_stream[
            tuple[Mapping[str, Any], Sequence[bytes]]
        ](math.inf)
        self.drained = anyio.Event()

    def post(self, message: Any, blobs: Sequence[bytes] = ()) -> None:
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._out.send_nowait(send_form(message, blobs))

    async def write_all(self) -> None:
        """Write what is posted until the queue is closed."""
        try:
            async for fields, blobs in self._queue:
                for frame in encode(fields, blobs):
                    await self.stream.send(frame)
        finally:
            self._queue.close()
            self.drained.set()

    async def say(self, message: Any) -> None:
        """Write one message now (before the writer runs: hello's answer)."""
        for frame in encode(*send_form(message)):
            await self.stream.send(frame)

    def close_queue(self) -> None:
        self._out.close()


class Server:
    """A compile server on ``paths`` (see :mod:`._paths`), compiling with ``config``'s
    runner settings (workers, cache, executor; job settings are each client's).

    ``warm``: start every NVRTC worker (and compile a small program in each) as soon as
    the server listens. Off by default: workers start as jobs need them, and stay warm
    for the server's life; a warm-up competing for the CPU with clients that are busy
    themselves (MetaSchedule's builder workers lowering their candidates) costs more
    than it saves (measured: the first builder batch on 2 cores, 5.4 s warm against
    2.5-2.8 s without).

    :meth:`serve` holds the lock file while it serves, so a second server of the same
    identity cannot start (:class:`~asynccomp.ServerError`), and removes a socket that
    a crashed server left behind before it listens.
    """

    def __init__(
        self,
        paths: ServerPaths,
        *,
        config: EngineConfig | None = None,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        warm: bool = False,
    ) -> None:
        self.paths = paths
        self.config = config or EngineConfig()
        self.idle_timeout = idle_timeout
        self.warm = warm
        self.started = time.time()
        self.tally = Tally()
        self._remote = remote_cache(self.config.remote_cache) if self.config.cache else None
        self._workers, self._mode = local_workers(self.config)
        self._scheduler: Scheduler | None = None
        self._toolkit: Toolkit | None = None
        self._cache: ResultCache | None = None
        self._on_cluster = False
        self._connections: set[_Connection] = set()
        self._idle_since = time.monotonic()
        self._stop = anyio.Event()
        self._lock_fd: int | None = None

    # -- life --------------------------------------------------------------------------------

    def _take_lock(self) -> None:
        fd = os.open(self.paths.lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise ServerError(
                f"a compile server for this toolkit is already running (pid {holder}, "
                f"socket {self.paths.socket})"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def _retire(self) -> None:
        """Take no more clients: the socket and the lock go, so that a client that comes
        now starts a new server at once (this one still finishes what it runs)."""
        if self._lock_fd is None:
            return
        with contextlib.suppress(OSError):
            self.paths.socket.unlink()
        os.close(self._lock_fd)  # closing the descriptor releases the flock
        self._lock_fd = None

    def stop(self) -> None:
        """Stop serving (from the server's event loop): clients are told, requests end."""
        self._stop.set()

    def workers(self) -> int:
        return 0 if self._scheduler is None else self._scheduler.workers()

    async def serve(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until stopped, signalled or idle for ``idle_timeout``; ``task_status`` is
        told when the socket is listening."""
        self._take_lock()
        try:
            os.chdir(empty_folder())
            # The lock is ours: a socket still there is a dead server's.
            self.paths.socket.unlink(missing_ok=True)
            listener = await anyio.create_unix_listener(self.paths.socket, mode=0o600)
            async with (
                listener,
                anyio.create_task_group() as background,
                contextlib.AsyncExitStack() as stack,
            ):
                local = await start_local(
                    self.config,
                    remote=self._remote,
                    workers=self._workers,
                    make_backends=lambda toolkit: default_backends(
                        toolkit, self._mode, self._workers, self.config.arch
                    ),
                    task_group=background,
                    stack=stack,
                )
                self._scheduler, self._toolkit = local.scheduler, local.toolkit
                self._on_cluster = local.on_cluster
                self._cache = local.cache
                async with anyio.create_task_group() as serving:
                    serving.start_soon(listener.serve, self._handle)
                    serving.start_soon(self._watch_idle)
                    serving.start_soon(self._watch_signals)
                    serving.start_soon(self._watch_workers)
                    if self.warm:
                        serving.start_soon(self._warm_up_now)
                    logger.info(
                        "asynccomp server %s (pid %d) listening on %s",
                        __version__,
                        os.getpid(),
                        self.paths.socket,
                    )
                    task_status.started()
                    await self._stop.wait()
                    self._retire()
                    await self._say_closing()
                    serving.cancel_scope.cancel()
                background.cancel_scope.cancel()
        finally:
            self._retire()
            logger.info("asynccomp server (pid %d) stopped", os.getpid())

    async def _watch_signals(self) -> None:
        try:
            receiver = anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
        except (ValueError, RuntimeError):  # not the main thread: a server inside a test
            return
        with receiver as signals:
            async for signum in signals:
                logger.info("%s: stopping", signal.Signals(signum).name)
                self.stop()
                return

    async def _watch_workers(self) -> None:
        """Tell every client when the worker count changes (their statistics show it
        live, as an engine in process does)."""
        told = self.workers()
        while True:
            await anyio.sleep(0.2)
            now = self.workers()
            if now != told:
                told = now
                for connection in list(self._connections):
                    connection.post(Workers(now))

    async def _warm_up_now(self) -> None:
        assert self._scheduler is not None
        started = time.monotonic()
        await self._scheduler.warm_up()
        logger.info("%d NVRTC workers warm in %.2f s", self.workers(), time.monotonic() - started)

    async def _say_closing(self) -> None:
        """Tell every client, and let what was posted to them be written (briefly)."""
        for connection in list(self._connections):
            connection.post(Closing("the server stops"))
            connection.close_queue()
        with anyio.move_on_after(2, shield=True):
            for connection in list(self._connections):
                await connection.drained.wait()

    async def _watch_idle(self) -> None:
        if self.idle_timeout <= 0:
            return
        while True:
            await anyio.sleep(min(1.0, self.idle_timeout))
            idle = not self._connections
            if idle and time.monotonic() - self._idle_since >= self.idle_timeout:
                logger.info("no client for %g s: stopping", self.idle_timeout)
                self.stop()
                return

    # -- one client --------------------------------------------------------------------------

    async def _handle(self, stream: anyio.abc.SocketStream) -> None:
        connection = _Connection(self, stream)
        try:
            uid = peer_uid(stream.extra(anyio.abc.SocketAttribute.raw_socket))
            if uid is not None and uid != os.getuid():
                logger.warning("refused a client of uid %d", uid)
                # Its hello is read first: closing with unread data would reset the
                # connection, and the refusal would never be read.
                with anyio.move_on_after(1), contextlib.suppress(WireError):
                    await read_message(connection.receive)
                await connection.say(
                    Error(
                        None,
                        f"refused: this compile server serves uid {os.getuid()}, not uid {uid}",
                        True,
                    )
                )
                return
            if not await self._greet(connection):
                return
            self._connections.add(connection)
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._write, connection, tg.cancel_scope)
                await self._serve_client(connection, tg)
                tg.cancel_scope.cancel()
        except WireError as exc:  # bytes that are not frames: the stream is lost
            logger.warning("a client broke the protocol: %s", exc)
            with contextlib.suppress(*_GONE, WireError):
                await connection.say(Error(None, f"protocol error: {exc}", True))
        except _GONE:
            pass  # the client went away while we wrote to it
        except Exception:  # a bug: it costs this client its connection, not the server
            logger.exception("asynccomp server: a connection failed")
        finally:
            self._connections.discard(connection)
            connection.close_queue()
            if not self._connections:
                self._idle_since = time.monotonic()
            with anyio.CancelScope(shield=True):
                await stream.aclose()

    async def _write(self, connection: _Connection, scope: anyio.CancelScope) -> None:
        try:
            await connection.write_all()
        except _GONE:
            scope.cancel()  # the client is gone: its requests stop

    async def _greet(self, connection: _Connection) -> bool:
        with anyio.move_on_after(_HELLO_TIMEOUT):
            message = await read_message(connection.receive)
            if message is None:
                return False
            try:
                hello = _hello(message)
            except WireError as exc:
                await connection.say(Error(None, f"protocol error: {exc}", True))
                return False
            if hello.protocol != PROTOCOL or hello.version != __version__:
                await connection.say(
                    Error(
                        None,
                        f"version mismatch: this compile server is asynccomp {__version__} "
                        f"(protocol {PROTOCOL}); the client is asynccomp {hello.version} "
                        f"(protocol {hello.protocol})",
                        True,
                    )
                )
                return False
            connection.pid = hello.pid
            await connection.say(self._welcome())
            return True
        return False

    def _welcome(self) -> Welcome:
        assert self._scheduler is not None and self._toolkit is not None
        return Welcome(
            protocol=PROTOCOL,
            version=__version__,
            pid=os.getpid(),
            uid=os.getuid(),
            identity=self.paths.identity,
            toolkit=toolkit_to(self._toolkit),
            slots=dict(self._scheduler.slots()),
            workers=self.workers(),
            settings=self.settings(),
        )

    def settings(self) -> dict[str, Any]:
        """What this server's engine uses that a client might have set for itself."""
        cache = self._cache
        return {
            "cache": cache is not None,
            "cache_dir": None
            if cache is None or cache.disk is None
            else str(cache.disk.root.resolve()),
            "remote_cache": None if cache is None or cache.remote is None else cache.remote.name,
            "slots": None if self._scheduler is None else dict(self._scheduler.slots()),
            "nvrtc_mode": self._mode,
            "executor": "ray" if self._on_cluster else "local",
        }

    async def _serve_client(self, connection: _Connection, tg: anyio.abc.TaskGroup) -> None:
        try:
            while True:
                message = await read_message(connection.receive)
                if message is None:
                    break  # the client left: what it has running is dropped below
                try:
                    self._dispatch(connection, message, tg)
                except (WireError, ValueError) as exc:
                    # A message of the wrong shape, or a job this server will not run:
                    # that request is refused, the connection goes on.
                    number = request_id(message)
                    connection.post(Error(number, f"refused: {exc}", False))
                    request = connection.requests.get(number) if number is not None else None
                    if request is not None:
                        request.scope.cancel()
        finally:
            for request in list(connection.requests.values()):
                request.scope.cancel()

    def _dispatch(self, connection: _Connection, message: Message, tg: anyio.abc.TaskGroup) -> None:
        request = parse(message)
        assert self._scheduler is not None
        if isinstance(request, Compile):
            if request.id in connection.requests:
                raise WireError(f"request {request.id} is already open")
            opened = _Request(connection, request.id, request.want, self.tally)
            connection.requests[request.id] = opened
            tg.start_soon(self._run, opened)
        elif isinstance(request, Jobs):
            opened = self._open(connection, request.id)
            chunk = self._jobs(request, message.blobs)
            for item in chunk:
                opened.timeouts[item.index] = item.prepared.timeout
            self.tally.submitted += len(chunk)
            try:
                opened.send.send_nowait(chunk)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                raise WireError(f"request {request.id} has ended; no more jobs") from None
        elif isinstance(request, End):
            self._open(connection, request.id).send.close()
        elif isinstance(request, Cancel):
            cancelled = connection.requests.get(request.id)
            if cancelled is not None:
                cancelled.scope.cancel()
        elif isinstance(request, WarmUp):
            tg.start_soon(self._warm_up, connection, request.id)
        elif isinstance(request, Status):
            connection.post(StatusReply(request.id, self.status(asking=connection)))
        elif isinstance(request, Stop):
            connection.post(Stopping(request.id))
            self.stop()
        else:
            raise WireError(f"a {message.type!r} message is not a request")

    @staticmethod
    def _open(connection: _Connection, number: int) -> _Request:
        request = connection.requests.get(number)
        if request is None:
            raise WireError(f"request {number} is not open")
        return request

    def _jobs(self, message: Jobs, blobs: list[bytes]) -> list[CompileRequest]:
        """The requests a ``jobs`` message carries, each checked (ValueError: refused)."""
        needed = sum(2 if spec.fallback else 1 for spec in message.jobs)
        if needed != len(blobs):
            raise WireError(f"{len(message.jobs)} jobs with {len(blobs)} sources")
        chunk: list[CompileRequest] = []
        at = 0
        for spec in message.jobs:
            count = 2 if spec.fallback else 1
            request = prepared_of(spec, blobs[at : at + count])
            at += count
            self._check(request.prepared)
            chunk.append(request)
        return chunk

    def _check(self, prepared: PreparedCompile) -> None:
        """A compile this server may run: one of its backends, an architecture its
        compiler takes, rendered for its toolkit (ValueError naming what is wrong)."""
        assert self._scheduler is not None and self._toolkit is not None
        toolkit = self._toolkit
        what = f"job {prepared.filename!r}"
        if prepared.backend not in self._scheduler.backends:
            raise ValueError(f"{what}: no backend {prepared.backend!r} here")
        if prepared.backend == "nvrtc" and prepared.output == "fatbin":
            raise ValueError(f"{what}: NVRTC makes no fatbin")
        parse_arch(prepared.arch)
        if not toolkit.supports(prepared.backend, prepared.arch):
            raise ValueError(
                f"{what}: {prepared.backend} here does not take {prepared.arch} "
                f"(it supports {toolkit.supported_archs(prepared.backend)})"
            )
        if not _FILENAME.fullmatch(prepared.filename):
            raise ValueError(f"{what}: not a plain .cu file name")
        if prepared.backend == "nvcc" and (
            not prepared.options or prepared.options[0] != str(toolkit.nvcc)
        ):
            raise ValueError(f"{what}: rendered for another nvcc than this server's {toolkit.nvcc}")
        if any("\x00" in option for option in prepared.options):
            raise ValueError(f"{what}: an option holds a NUL byte")
        if prepared.timeout is not None and prepared.timeout <= 0:
            raise ValueError(f"{what}: timeout {prepared.timeout}")
        if prepared.keep_dir is not None and not Path(prepared.keep_dir).is_absolute():
            raise ValueError(f"{what}: keep_dir {prepared.keep_dir!r} is not absolute")

    async def _run(self, request: _Request) -> None:
        assert self._scheduler is not None
        connection = request.connection
        try:
            with request.scope:
                await self._scheduler.run(request.receive, request, want=request.want)
                connection.post(Ended(request.id))
        finally:
            request.send.close()
            request.receive.close()
            connection.requests.pop(request.id, None)

    async def _warm_up(self, connection: _Connection, number: int) -> None:
        assert self._scheduler is not None
        await self._scheduler.warm_up()
        connection.post(WarmedUp(number, self.workers()))

    def status(self, asking: _Connection | None = None) -> dict[str, Any]:
        """What ``asynccomp serve --status`` prints (``clients`` leaves out the one
        asking)."""
        assert self._scheduler is not None and self._toolkit is not None
        scheduler = self._scheduler
        stats = self.tally.snapshot(
            queued=scheduler.waiting, running=scheduler.running, workers=self.workers()
        )
        cache = self._cache
        return {
            "pid": os.getpid(),
            "version": __version__,
            "protocol": PROTOCOL,
            "identity": self.paths.identity,
            "socket": str(self.paths.socket),
            "uptime": round(time.time() - self.started, 3),
            "idle_timeout": self.idle_timeout,
            "clients": len(self._connections - {asking}),
            "requests": sum(len(c.requests) for c in self._connections),
            "queued": stats.queued,
            "running": stats.running,
            "compiled": stats.compiled,
            "hits": stats.cache_hits,
            "deduplicated": stats.deduplicated,
            "workers": stats.workers,
            "executor": "ray" if self._on_cluster else "local",
            "statistics": asdict(stats),
            "cache_stats": None if cache is None else cache.stats.as_dict(),
            "settings": self.settings(),
            "toolkit": self._toolkit.compiler_versions,
        }


def _hello(message: Message) -> Hello:
    hello = parse(message)
    if not isinstance(hello, Hello):
        raise WireError(f"expected hello, got {message.type!r}")
    return hello
