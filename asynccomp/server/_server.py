"""The compile server's life: one scheduler for every process of this user.

:class:`Server` holds its lock, listens on its Unix socket and runs one
:class:`~asynccomp._scheduler.local.Scheduler` (NVRTC workers, nvcc slots, the cache
and the coalescing of identical compiles) for every client, so identical jobs from two
processes are compiled once and the longest compiles start first across all of them.
Each client is a :class:`~._session.Session`; what its requests do is
:mod:`._requests`. A client sends rendered compiles and gets outcomes back; results
are built on its side, as for every engine.

The server runs in a folder that holds nothing (a quoted ``#include`` never finds a
header of the server's), stops after ``idle_timeout`` seconds without a client, at
``asynccomp serve --stop``, and on SIGTERM, SIGINT or SIGHUP: the socket and lock go
first (a new server can start at once) and it welcomes no one after, clients are told,
then running compiles are cancelled (nvcc killed with its children) and the workers
end. Deciding that it is idle and retiring are one step: a client counts from the
moment it connects, so one that connects at the deadline is either served here or
closed at hello (and starts a new server), never welcomed and then dropped.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import time
from dataclasses import asdict
from typing import Any

import anyio
import anyio.abc

from .._os import empty_folder
from .._scheduler.local import InProcessRunner, LocalRunner, Scheduler, Tally
from .._version import __version__
from ..backends import compiler_versions
from ..config import InProcess, OnRay
from ..errors import ServerError
from ..toolkit import Toolkit
from ._forms import toolkit_to
from ._paths import ServerPaths
from ._protocol import PROTOCOL, Welcome, Workers
from ._session import WRITE_TIMEOUT, Session
from ._stream import open_stream

__all__ = ("DEFAULT_IDLE_TIMEOUT", "Server")

logger = logging.getLogger("asynccomp.server")

#: Seconds without a client before a server stops by itself.
DEFAULT_IDLE_TIMEOUT = 300.0


class Server:
    """A compile server on ``paths`` (see :mod:`._paths`), compiling as ``mode`` says:
    :class:`~asynccomp.config.InProcess` (its workers, cache, toolkit; the default) or
    :class:`~asynccomp.config.OnRay` (job settings are each client's; from
    ``Engine(...)``'s keywords, :func:`~asynccomp.config.server_mode` makes one).

    ``warm``: start every NVRTC worker (and compile a small program in each) as soon as
    the server listens. Off by default: workers start as jobs need them, and stay warm
    for the server's life; a warm-up competing for the CPU with clients that are busy
    themselves (MetaSchedule's builder workers lowering their candidates) costs more
    than it saves (measured: the first builder batch on 2 cores, 5.4 s warm against
    2.5-2.8 s without).

    ``write_timeout``: seconds a client may leave its answers unread before it is
    dropped (:data:`~._session.WRITE_TIMEOUT`).

    :meth:`serve` holds the lock file while it serves, so a second server of the same
    identity cannot start (:class:`~asynccomp.ServerError`), and removes a socket that
    a crashed server left behind before it listens.
    """

    def __init__(
        self,
        paths: ServerPaths,
        *,
        mode: InProcess | OnRay | None = None,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        warm: bool = False,
        write_timeout: float = WRITE_TIMEOUT,
    ) -> None:
        self.paths = paths
        self.write_timeout = write_timeout
        # The one scheduler every client's jobs go to: its settings are checked (and a
        # remote tier made) now, as an engine's are.
        self._runner = InProcessRunner(mode, pch_hints=paths.pch_hints)
        self.mode: InProcess | OnRay = self._runner.mode
        self.idle_timeout = idle_timeout
        self.warm = warm
        self.started = time.time()
        self._tally = Tally()
        self._local: LocalRunner | None = None
        self._sessions: set[Session] = set()
        self._idle_since = time.monotonic()
        self._stop = anyio.Event()
        self._lock_fd: int | None = None
        self._warmed = False
        self._told_workers = 0  # the worker count clients were last told

    # -- what sessions and requests use (asynccomp.server._requests.Host) --------------------

    @property
    def scheduler(self) -> Scheduler:
        if self._local is None:
            raise ServerError("the compile server has not started")
        return self._local.scheduler

    @property
    def toolkit(self) -> Toolkit:
        if self._local is None:
            raise ServerError("the compile server has not started")
        return self._local.toolkit

    @property
    def tally(self) -> Tally:
        return self._tally

    def workers(self) -> int:
        return 0 if self._local is None else self._local.scheduler.workers()

    def _pch_counts(self) -> dict[str, dict[str, int]]:
        counted = {name: backend.pch_counts() for name, backend in self.scheduler.backends.items()}
        return {name: counts for name, counts in counted.items() if counts is not None}

    def accepting(self) -> bool:
        """Whether this server still welcomes clients (it holds its lock and socket)."""
        return self._lock_fd is not None

    def stop(self) -> None:
        """Stop serving (from the server's event loop): clients are told, requests end."""
        self._retire()
        self._stop.set()

    async def warm_up(self) -> None:
        """Warm every NVRTC worker (the scheduler's warm-up: calls made while one runs
        wait for it)."""
        await self.scheduler.warm_up()
        self._warmed = True
        # The pool tells its watchers on a later turn of the loop; tell the clients the
        # count now, so that a client's WarmedUp comes after the Workers that it implies
        # (its statistics() show every worker once warm_up() returns).
        self._workers_changed()

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
                stack.push_async_callback(self._runner.aclose)
                await self._runner.start(background)
                self._local = self._runner.started
                self._told_workers = self.workers()
                self._local.scheduler.watch_workers(self._workers_changed)
                async with anyio.create_task_group() as serving:
                    serving.start_soon(listener.serve, self._handle)
                    serving.start_soon(self._watch_idle)
                    serving.start_soon(self._watch_signals)
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
                    await self._say_closing()
                    serving.cancel_scope.cancel()
                # Shielded, and before the background tasks are cancelled (as an engine
                # closes): closing the engine saves its cache counts to the folder's
                # totals, which a cancelled close would lose.
                with anyio.CancelScope(shield=True):
                    await stack.aclose()
                background.cancel_scope.cancel()
        finally:
            self._retire()
            logger.info("asynccomp server (pid %d) stopped", os.getpid())

    async def _handle(self, stream: anyio.abc.SocketStream) -> None:
        try:
            messages = await open_stream(stream)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await stream.aclose()
            raise
        session = Session(self, messages, write_timeout=self.write_timeout)
        # Counted from now, not from its welcome: the server is not idle while a client
        # says hello.
        self._sessions.add(session)
        try:
            await session.run()
        finally:
            self._sessions.discard(session)
            if not self._sessions:
                self._idle_since = time.monotonic()
            # What this client's jobs counted goes into the cache folder's totals now,
            # as an engine's does when it closes (``asynccomp cache stats``,
            # ``--zero-stats``), not only when the server stops.
            cache = None if self._local is None else self._local.cache
            if cache is not None:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(cache.save_stats)

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

    def _workers_changed(self) -> None:
        """Tell every client when the worker count changes (their statistics show it
        live, as an engine in process does): called by the backends, not polled."""
        now = self.workers()
        if now == self._told_workers:
            return
        self._told_workers = now
        for session in list(self._sessions):
            if session.greeted:
                session.post(Workers(now))

    async def _warm_up_now(self) -> None:
        started = time.monotonic()
        await self.warm_up()
        logger.info("%d NVRTC workers warm in %.2f s", self.workers(), time.monotonic() - started)

    async def _say_closing(self) -> None:
        """Tell every client, and let what was posted to them be written (briefly)."""
        for session in list(self._sessions):
            session.close("the server stops")
        with anyio.move_on_after(2, shield=True):
            for session in [s for s in self._sessions if s.greeted]:
                await session.drained.wait()

    async def _watch_idle(self) -> None:
        if self.idle_timeout <= 0:
            return
        while True:
            await self._idle_check_due()
            if self.retire_if_idle():
                return

    async def _idle_check_due(self) -> None:
        """Until the next idle check (a test's server checks when the test says)."""
        await anyio.sleep(min(1.0, self.idle_timeout))

    def retire_if_idle(self) -> bool:
        """If no client has been connected for ``idle_timeout`` seconds, stop taking
        clients and stop (one step: no client can connect in between); whether it did."""
        if self.idle_timeout <= 0 or self._sessions:
            return False
        if time.monotonic() - self._idle_since < self.idle_timeout:
            return False
        logger.info("no client for %g s: stopping", self.idle_timeout)
        self.stop()
        return True

    # -- what clients are told ---------------------------------------------------------------

    def welcome(self) -> Welcome:
        return Welcome(
            protocol=PROTOCOL,
            version=__version__,
            pid=os.getpid(),
            uid=os.getuid(),
            identity=self.paths.identity,
            toolkit=toolkit_to(self.toolkit),
            slots=dict(self.scheduler.slots()),
            workers=self.workers(),
            settings=self.settings(),
        )

    def settings(self) -> dict[str, Any]:
        """What this server's engine uses that a client might have set for itself."""
        local = self._local
        cache = None if local is None else local.cache
        return {
            "cache": cache is not None,
            "cache_dir": None
            if cache is None or cache.disk is None
            else str(cache.disk.root.resolve()),
            "remote_cache": None if cache is None or cache.remote is None else cache.remote.name,
            # The id of the key it seals and verifies with (never the key): a client
            # holding another one must not get entries verified under this one.
            "remote_cache_key_id": None
            if cache is None or cache.remote is None
            else cache.remote.auth.key_id,
            "slots": None if local is None else dict(local.scheduler.slots()),
            # Where each backend's compiles run: worker processes, or threads/programs.
            "modes": {name: b.mode for name, b in self._runner.backend_settings.items()},
            "executor": "ray" if local is not None and local.on_cluster else "local",
            "where": None if local is None else local.scheduler.where,
        }

    def status(self, asking: object = None) -> dict[str, Any]:
        """What ``asynccomp serve --status`` prints (``clients`` leaves out the one
        asking)."""
        scheduler, local = self.scheduler, self._local
        assert local is not None
        stats = self.tally.snapshot(
            queued=scheduler.waiting, running=scheduler.running, workers=self.workers()
        )
        cache = local.cache
        return {
            "pid": os.getpid(),
            "version": __version__,
            "protocol": PROTOCOL,
            "identity": self.paths.identity,
            "socket": str(self.paths.socket),
            "uptime": round(time.time() - self.started, 3),
            "idle_timeout": self.idle_timeout,
            "clients": len([s for s in self._sessions if s is not asking]),
            "requests": sum(s.open_requests for s in self._sessions),
            "unsent": sum(s.unsent for s in self._sessions),
            # Jobs received and not yet handed to the scheduler, now and at most at once
            # in one session (bounded by MAX_WAITING_JOBS).
            "waiting": sum(s.requests.waiting for s in self._sessions if s.requests),
            "waiting_peak": max(
                (s.requests.waiting_peak for s in self._sessions if s.requests), default=0
            ),
            "queued": stats.queued,
            "running": stats.running,
            "compiled": stats.compiled,
            "hits": stats.cache_hits,
            "deduplicated": stats.deduplicated,
            "workers": stats.workers,
            "warm": self._warmed,
            # Each backend's precompiled headers that keeps them (NVRTC's workers):
            # made, used, shared, made ahead from the last server's hints.
            "pch": self._pch_counts(),
            "executor": "ray" if local.on_cluster else "local",
            "statistics": asdict(stats),
            "cache_stats": None if cache is None else cache.stats.as_dict(),
            "cache_stats_unsaved": None if cache is None else cache.stats.unsaved(),
            "settings": self.settings(),
            "toolkit": compiler_versions(self.toolkit),
        }
