"""The compile server: one :class:`~asynccomp.Engine` for every process of this user.

:class:`Server` listens on its Unix socket, checks each peer's uid (``SO_PEERCRED``),
greets it (protocol and version must match) and runs its batches on the one engine:
NVRTC workers, nvcc slots, the cache and in-flight coalescing are shared by all
clients, so identical jobs from two processes are compiled once. A client that cancels
a batch, or goes away, has its own jobs cancelled and nobody else's. With no client for
``idle_timeout`` seconds the server stops; ``stop`` (``asynccomp serve --stop``) stops
it at once. A malformed frame costs its sender the connection, never the server.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
import struct
import time
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from .._version import __version__
from ..engine import Engine
from ..errors import InvalidJob, ServerError
from ..job import CompileJob
from ._paths import ServerPaths
from ._wire import (
    PROTOCOL,
    Message,
    WireError,
    decode_job,
    encode_frame,
    encode_result,
    read_message,
)

__all__ = ("DEFAULT_IDLE_TIMEOUT", "Server", "peer_uid")

logger = logging.getLogger("asynccomp.server")

#: Seconds without a client before a server stops by itself.
DEFAULT_IDLE_TIMEOUT = 300.0
#: Seconds a new connection has to say hello.
_HELLO_TIMEOUT = 10.0
# What writing to a client that went away raises.
_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


def peer_uid(stream: anyio.abc.SocketStream) -> int | None:
    """The uid of the process at the other end of a Unix socket (Linux), else ``None``."""
    sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (AttributeError, OSError):
        return None
    _pid, uid, _gid = struct.unpack("3i", raw)
    return int(uid)


class _Connection:
    """One client: its stream, and the batches it has running."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.receive = BufferedByteReceiveStream(stream)
        self.send_lock = anyio.Lock()
        self.batches: dict[int, anyio.CancelScope] = {}
        self.pid: int | None = None

    async def send(self, fields: Mapping[str, Any], blobs: list[bytes] | None = None) -> None:
        frame = encode_frame(fields, blobs or [])
        async with self.send_lock:
            await self.stream.send(frame)


class Server:
    """A compile server on ``paths`` (see :mod:`._paths`), running ``Engine(**engine)``.

    ``warm``: start every NVRTC worker (and compile a small program in each) as soon as
    the server listens. Off by default: workers start as jobs need them, and stay warm
    for the server's life; a warm-up competing for the CPU with clients that are busy
    themselves (MetaSchedule's builder workers lowering their candidates) costs more
    than it saves (measured: the first builder batch on 2 cores, 5.4 s warm against
    2.5-2.8 s without).

    :meth:`serve` holds the lock file for the server's whole life, so a second server of
    the same identity cannot start (:class:`~asynccomp.ServerError`), and removes a
    socket that a crashed server left behind before it listens.
    """

    def __init__(
        self,
        paths: ServerPaths,
        *,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        engine: Mapping[str, Any] | None = None,
        warm: bool = False,
    ) -> None:
        self.paths = paths
        self.idle_timeout = idle_timeout
        self.warm = warm
        self.engine_options = dict(engine or {})
        self.engine: Engine | None = None
        self.started = time.time()
        self._connections: set[_Connection] = set()
        self._idle_since = time.monotonic()
        self._stop = anyio.Event()
        self._lock_fd: int | None = None

    # -- life ----------------------------------------------------------------------------

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

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def stop(self) -> None:
        """Stop serving (from the server's event loop): clients are told, batches end."""
        self._stop.set()

    async def serve(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until stopped or idle for ``idle_timeout``; ``task_status`` is told when
        the socket is listening."""
        self._take_lock()
        try:
            # The lock is ours: a socket still there is a dead server's.
            self.paths.socket.unlink(missing_ok=True)
            listener = await anyio.create_unix_listener(self.paths.socket, mode=0o600)
            async with Engine(**self.engine_options) as engine, listener:
                self.engine = engine
                async with anyio.create_task_group() as tg:
                    tg.start_soon(listener.serve, self._handle)
                    tg.start_soon(self._watch_idle)
                    if self.warm:
                        tg.start_soon(self._warm_up_now)
                    logger.info(
                        "asynccomp server %s (pid %d) listening on %s",
                        __version__,
                        os.getpid(),
                        self.paths.socket,
                    )
                    task_status.started()
                    await self._stop.wait()
                    await self._say_closing()
                    tg.cancel_scope.cancel()
        finally:
            try:
                self.paths.socket.unlink(missing_ok=True)
            finally:
                self._release_lock()
            logger.info("asynccomp server (pid %d) stopped", os.getpid())

    async def _warm_up_now(self) -> None:
        assert self.engine is not None
        started = time.monotonic()
        await self.engine.warm_up()
        logger.info(
            "%d NVRTC workers warm in %.2f s",
            self.engine.statistics().workers,
            time.monotonic() - started,
        )

    async def _say_closing(self) -> None:
        with anyio.move_on_after(2, shield=True):
            for connection in list(self._connections):
                try:
                    await connection.send({"type": "closing", "reason": "the server stops"})
                except _GONE:
                    pass

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

    # -- one client ----------------------------------------------------------------------

    async def _handle(self, stream: anyio.abc.SocketStream) -> None:
        connection = _Connection(stream)
        try:
            uid = peer_uid(stream)
            if uid is not None and uid != os.getuid():
                logger.warning("refused a client of uid %d", uid)
                # Its hello is read first: closing with unread data would reset the
                # connection, and the refusal would never be read.
                with anyio.move_on_after(1):
                    await read_message(connection.receive)
                await connection.send(
                    {
                        "type": "error",
                        "message": f"refused: this compile server serves uid {os.getuid()}, "
                        f"not uid {uid}",
                    }
                )
                return
            if not await self._greet(connection):
                return
            self._connections.add(connection)
            await self._serve_client(connection)
        except WireError as exc:
            logger.warning("a client broke the protocol: %s", exc)
            try:
                await connection.send({"type": "error", "message": f"protocol error: {exc}"})
            except _GONE:
                pass
        except _GONE:
            pass  # the client went away while we wrote to it
        except Exception:  # a bug: it costs this client its connection, not the server
            logger.exception("asynccomp server: a connection failed")
        finally:
            self._connections.discard(connection)
            if not self._connections:
                self._idle_since = time.monotonic()
            with anyio.CancelScope(shield=True):
                await stream.aclose()

    async def _greet(self, connection: _Connection) -> bool:
        with anyio.move_on_after(_HELLO_TIMEOUT):
            hello = await read_message(connection.receive)
            if hello is None:
                return False
            fields = hello.fields
            if hello.type != "hello":
                raise WireError(f"expected hello, got {hello.type!r}")
            if fields.get("protocol") != PROTOCOL or fields.get("version") != __version__:
                await connection.send(
                    {
                        "type": "error",
                        "message": (
                            f"version mismatch: this compile server is asynccomp "
                            f"{__version__} (protocol {PROTOCOL}); the client is asynccomp "
                            f"{fields.get('version')} (protocol {fields.get('protocol')})"
                        ),
                    }
                )
                return False
            pid = fields.get("pid")
            connection.pid = pid if isinstance(pid, int) else None
            await connection.send(self._welcome())
            return True
        return False

    def _welcome(self) -> dict[str, Any]:
        assert self.engine is not None
        return {
            "type": "welcome",
            "protocol": PROTOCOL,
            "version": __version__,
            "pid": os.getpid(),
            "identity": self.paths.identity,
            "toolkit": self.engine.toolkit.compiler_versions,
        }

    async def _serve_client(self, connection: _Connection) -> None:
        async with anyio.create_task_group() as tg:
            while True:
                message = await read_message(connection.receive)
                if message is None:
                    break  # the client left: what it has running is dropped below
                kind = message.type
                if kind == "submit":
                    batch = _batch_id(message)
                    if batch in connection.batches:
                        raise WireError(f"batch {batch} submitted twice")
                    jobs = _decode_jobs(message)
                    if isinstance(jobs, str):
                        await connection.send({"type": "rejected", "batch": batch, "error": jobs})
                        continue
                    full = message.fields.get("want", "all") != "none"
                    scope = connection.batches[batch] = anyio.CancelScope()
                    tg.start_soon(self._run_batch, connection, batch, jobs, full, scope)
                elif kind == "cancel":
                    running = connection.batches.get(_batch_id(message))
                    if running is not None:
                        running.cancel()
                elif kind == "warm_up":
                    tg.start_soon(self._warm_up, connection)
                elif kind == "status":
                    await connection.send(self.status(asking=connection))
                elif kind == "stop":
                    await connection.send({"type": "stopping"})
                    self.stop()
                else:
                    raise WireError(f"unknown message type {kind!r}")
            tg.cancel_scope.cancel()

    async def _warm_up(self, connection: _Connection) -> None:
        assert self.engine is not None
        await self.engine.warm_up()
        with contextlib.suppress(*_GONE):
            await connection.send({"type": "warmed"})

    async def _run_batch(
        self,
        connection: _Connection,
        batch: int,
        jobs: list[CompileJob],
        full: bool,
        scope: anyio.CancelScope,
    ) -> None:
        assert self.engine is not None
        index = {id(job): i for i, job in enumerate(jobs)}
        try:
            with scope:
                try:
                    completed = self.engine.as_completed(jobs)
                except InvalidJob as exc:  # e.g. an architecture this toolkit lacks
                    await connection.send({"type": "rejected", "batch": batch, "error": str(exc)})
                    return
                async with completed as results:
                    async for result in results:
                        fields, blobs = encode_result(result)
                        if not full:
                            fields.update(log="", binary=False)
                            blobs = []
                        await connection.send(
                            {
                                "type": "result",
                                "batch": batch,
                                "index": index[id(result.job)],
                                "result": fields,
                            },
                            blobs,
                        )
        except _GONE:
            pass  # the client went away: the reader sees it and drops the rest
        finally:
            connection.batches.pop(batch, None)

    def status(self, asking: _Connection | None = None) -> dict[str, Any]:
        """What ``asynccomp serve --status`` prints (``clients`` leaves out the one
        asking)."""
        assert self.engine is not None
        stats = self.engine.statistics()
        return {
            "type": "status",
            "pid": os.getpid(),
            "version": __version__,
            "protocol": PROTOCOL,
            "identity": self.paths.identity,
            "socket": str(self.paths.socket),
            "uptime": round(time.time() - self.started, 3),
            "idle_timeout": self.idle_timeout,
            "clients": len(self._connections - {asking}),
            "batches": sum(len(c.batches) for c in self._connections),
            "queued": stats.queued,
            "running": stats.running,
            "compiled": stats.compiled,
            "hits": stats.cache_hits,
            "deduplicated": stats.deduplicated,
            "workers": stats.workers,
            "executor": "ray" if self.engine.on_cluster else "local",
            "statistics": asdict(stats),
            "toolkit": self.engine.toolkit.compiler_versions,
        }


def _batch_id(message: Message) -> int:
    batch = message.fields.get("batch")
    if not isinstance(batch, int) or isinstance(batch, bool):
        raise WireError("a message without a batch number")
    return batch


def _decode_jobs(message: Message) -> list[CompileJob] | str:
    """The batch's jobs, or why they were refused (a bad value: the client's error)."""
    described = message.fields.get("jobs")
    if not isinstance(described, list) or len(described) != len(message.blobs):
        raise WireError("a batch whose jobs and sources do not pair up")
    try:
        return [decode_job(f, source) for f, source in zip(described, message.blobs, strict=True)]
    except InvalidJob as exc:
        return str(exc)
