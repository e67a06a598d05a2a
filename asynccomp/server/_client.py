"""The client side: an :class:`~asynccomp.Engine` whose batches run on a compile server.

:class:`ServerClient` is what ``Engine(server=...)`` runs its batches through, in place
of the in-process scheduler: ``run(batch, jobs)`` sends the jobs and delivers each
result as it comes back. Jobs are made whole on this side first: the engine's ``arch``,
``tvm_fast_path`` and dump folder (made absolute, so a relative one means this
process's working directory) are written into each job, so the server needs nothing of
the client but its jobs.

If the server goes away (killed, stopped), every job still waiting ends with
:class:`~asynccomp.ServerLost`; results already delivered stay delivered; the next call
connects again, starting a new server if this client starts them (``server="auto"``).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
from anyio.streams.buffered import BufferedByteReceiveStream

from .._scheduler._batch import Batch
from .._scheduler._counters import Counters
from .._scheduler._results import failure
from .._version import __version__
from ..dumps import default_dump_root
from ..errors import (
    CompileError,
    CompileTimeout,
    InternalError,
    ServerError,
    ServerLost,
)
from ..job import CompileJob
from ..result import CompileResult
from ._paths import ServerPaths, server_paths
from ._wire import (
    PROTOCOL,
    Message,
    WireError,
    decode_result,
    encode_frame,
    encode_job,
    read_message,
)

__all__ = ("ClientSettings", "ServerClient", "request", "start_server")

logger = logging.getLogger("asynccomp.server")

#: Seconds a server may take to come up after a client started it.
START_TIMEOUT = 60.0
_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


@dataclass(frozen=True)
class ClientSettings:
    """What the client's engine decides for its jobs before they leave."""

    arch: str | None
    tvm_fast_path: bool
    dump_dir: Path | None


def _can_connect(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


def _server_env() -> dict[str, str]:
    # A server started from a source checkout must import the same asynccomp.
    package_parent = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    return env


def start_server(paths: ServerPaths) -> None:
    """Blocking: make sure a server listens on ``paths.socket``, starting one (detached,
    it outlives this process) if none does. Many processes calling this at once start
    one server: they queue on the ``spawn`` lock, and all but the first find it up."""
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
        with open(paths.log, "ab") as log:
            done = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=_server_env(),
                timeout=START_TIMEOUT,
                check=False,
            )
        if done.returncode != 0 and not _can_connect(paths.socket):
            raise ServerError(
                f"the compile server did not start (exit status {done.returncode}); "
                f"its log, {paths.log}, ends with:\n{_tail(paths.log)}"
            )
    except subprocess.TimeoutExpired:
        raise ServerError(
            f"the compile server did not come up within {START_TIMEOUT:g} s; see {paths.log}"
        ) from None
    finally:
        os.close(fd)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class _Connection:
    def __init__(self, stream: anyio.abc.SocketStream, welcome: dict[str, Any]) -> None:
        self.stream = stream
        self.receive = BufferedByteReceiveStream(stream)
        self.welcome = welcome
        self.send_lock = anyio.Lock()
        self.pending: dict[int, _Pending] = {}
        self.warmed = anyio.Event()
        self.alive = True

    async def send(self, frame: bytes) -> None:
        async with self.send_lock:
            await self.stream.send(frame)


class _Pending:
    """A batch sent and not yet answered in full."""

    def __init__(self, batch: Batch, jobs: Sequence[CompileJob], counters: Counters) -> None:
        self.batch = batch
        self.jobs = jobs
        self.counters = counters
        self.delivered: set[int] = set()
        self.rejected: str | None = None  # why the server refused the batch

    def index_of(self, index: int) -> int:
        """``index``, if it names a job of this batch still waiting."""
        if index in self.delivered or not 0 <= index < len(self.jobs):
            raise WireError(f"a result for job {index}, which is not waiting")
        return index

    def deliver(self, index: int, result: CompileResult) -> None:
        if index in self.delivered or not 0 <= index < len(self.jobs):
            raise WireError(f"a result for job {index}, which is not waiting")
        self.delivered.add(index)
        counters = self.counters
        counters.completed += 1
        counters.cache_hits += result.cached
        if result.ok:
            counters.succeeded += 1
        else:
            counters.failed += 1
            counters.timed_out += isinstance(result.error, CompileTimeout)
        self.batch.deliver(index, result)

    def fail_the_rest(self, error: CompileError) -> None:
        for index, job in enumerate(self.jobs):
            if index not in self.delivered:
                self.deliver(index, failure(job, job.arch, error))  # a copy per job


async def _open(path: Path) -> _Connection:
    """Connect and say hello; raises ServerError for a server that refuses us."""
    stream = await anyio.connect_unix(path)
    try:
        await stream.send(
            encode_frame(
                {"type": "hello", "protocol": PROTOCOL, "version": __version__, "pid": os.getpid()}
            )
        )
        receive = BufferedByteReceiveStream(stream)
        with anyio.fail_after(30):
            answer = _welcome(await read_message(receive), path)
    except (WireError, TimeoutError) as exc:
        await stream.aclose()
        raise ServerError(
            f"the compile server at {path} does not speak the protocol: {exc}"
        ) from exc
    except BaseException:
        await stream.aclose()
        raise
    connection = _Connection(stream, answer.fields)
    connection.receive = receive
    return connection


def _welcome(answer: Message | None, path: Path) -> Message:
    if answer is None:
        raise ServerError(f"the compile server at {path} closed the connection at hello")
    if answer.type == "error":
        raise ServerError(f"the compile server at {path}: {answer.fields.get('message')}")
    if answer.type != "welcome":
        raise ServerError(f"the compile server at {path} answered {answer.type!r} to hello")
    return answer


async def request(path: Path, fields: dict[str, Any]) -> Message:
    """One request and its answer, on a connection of its own (``serve --status``)."""
    try:
        connection = await _open(path)
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        raise ServerError(f"no compile server is running at {path} ({exc.strerror})") from None
    try:
        await connection.send(encode_frame(fields))
        with anyio.fail_after(30):
            answer = await read_message(connection.receive)
        if answer is None:
            raise ServerError("the compile server closed the connection")
        return answer
    finally:
        await connection.stream.aclose()


class ServerClient:
    """The batches of one engine, on a server.

    ``socket`` names a server's socket; ``None`` finds the server of this user and
    toolkit (:func:`~asynccomp.server.server_paths`). ``auto_start`` starts one when
    none is running.
    """

    def __init__(
        self,
        *,
        socket: Path | None,
        auto_start: bool,
        settings: ClientSettings,
        counters: Counters,
    ) -> None:
        self._socket = socket
        self.auto_start = auto_start
        self.settings = settings
        self.counters = counters
        self._connection: _Connection | None = None
        self._connecting = anyio.Lock()
        self._task_group: anyio.abc.TaskGroup | None = None
        self._ids = itertools.count()

    @property
    def waiting(self) -> int:
        """Jobs sent and not answered yet."""
        connection = self._connection
        if connection is None:
            return 0
        return sum(len(p.jobs) - len(p.delivered) for p in connection.pending.values())

    def running_jobs(self) -> list[tuple[CompileJob, float]]:
        """Not known on this side: the server runs them."""
        return []

    @property
    def server_pid(self) -> int | None:
        connection = self._connection
        pid = None if connection is None else connection.welcome.get("pid")
        return pid if isinstance(pid, int) else None

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
            path = self._socket
            paths = None
            if path is None:
                paths = await anyio.to_thread.run_sync(server_paths)
                path = paths.socket
            try:
                connection = await _open(path)
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                if not self.auto_start or paths is None:
                    raise ServerError(
                        f"no compile server is running at {path} ({exc.strerror})"
                    ) from None
                await anyio.to_thread.run_sync(start_server, paths)
                connection = await _open(path)
            self._connection = connection
            assert self._task_group is not None
            self._task_group.start_soon(self._read, connection)
            return connection

    async def _read(self, connection: _Connection) -> None:
        reason = "the compile server closed the connection"
        try:
            while True:
                message = await read_message(connection.receive)
                if message is None:
                    break
                if message.type == "result":
                    pending = connection.pending.get(_int(message, "batch"))
                    if pending is None:
                        continue  # a batch this side has given up on
                    index = pending.index_of(_int(message, "index"))
                    result = message.fields.get("result")
                    pending.deliver(
                        index, decode_result(result, message.blobs, pending.jobs[index])
                    )
                elif message.type == "rejected":
                    pending = connection.pending.get(_int(message, "batch"))
                    if pending is not None:
                        why = str(message.fields.get("error"))
                        pending.rejected = pending.batch.rejected = why
                        pending.fail_the_rest(
                            InternalError(f"the compile server refused the batch: {why}")
                        )
                elif message.type == "warmed":
                    connection.warmed.set()
                elif message.type in ("closing", "error"):
                    said = message.fields.get("reason") or message.fields.get("message")
                    reason = f"the compile server: {said}"
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

    def _lost(self, connection: _Connection, reason: str) -> None:
        connection.alive = False
        connection.warmed.set()
        for pending in list(connection.pending.values()):
            pending.fail_the_rest(ServerLost(f"{reason} before this job finished"))
        connection.pending.clear()

    def _for_server(self, job: CompileJob) -> CompileJob:
        """``job`` with what this engine decides for it written in."""
        settings = self.settings
        changes: dict[str, Any] = {}
        if job.arch is None and settings.arch is not None:
            changes["arch"] = settings.arch
        if job.tvm_fast_path is None:
            changes["tvm_fast_path"] = settings.tvm_fast_path
        if job.dump is True or (job.dump is False and settings.dump_dir is not None):
            changes["dump"] = settings.dump_dir or default_dump_root()
        return replace(job, **changes) if changes else job

    @property
    def toolkit_versions(self) -> dict[str, str | None] | None:
        """The server's compiler versions, as its welcome said."""
        connection = self._connection
        versions = None if connection is None else connection.welcome.get("toolkit")
        return dict(versions) if isinstance(versions, dict) else None

    async def run(self, batch: Batch, jobs: Sequence[CompileJob]) -> None:
        """Run ``batch`` on the server; results are delivered to it as they come."""
        self.counters.submitted += len(jobs)
        pending = _Pending(batch, jobs, self.counters)
        try:
            connection = await self._connected()
        except ServerError as exc:
            pending.fail_the_rest(ServerLost(f"no compile server to run this job: {exc}"))
            return
        if not jobs:
            return
        number = next(self._ids)
        described, sources = [], []
        for job in jobs:
            fields, source = encode_job(self._for_server(job))
            described.append(fields)
            sources.append(source)
        frame = encode_frame(
            {
                "type": "submit",
                "batch": number,
                "jobs": described,
                "want": "all" if batch.wanted else "none",
            },
            sources,
        )
        connection.pending[number] = pending
        try:
            await connection.send(frame)
            await batch.finished.wait()
        except _GONE as exc:
            self._lost(connection, f"sending to the compile server failed ({exc!r})")
        finally:
            connection.pending.pop(number, None)
            if not batch.finished.is_set() and connection.alive:
                # Cancelled: the server drops this batch's jobs (nobody else's).
                with anyio.CancelScope(shield=True), contextlib.suppress(*_GONE):
                    await connection.send(encode_frame({"type": "cancel", "batch": number}))

    async def warm_up(self) -> None:
        connection = await self._connected()
        connection.warmed = anyio.Event()
        await connection.send(encode_frame({"type": "warm_up"}))
        await connection.warmed.wait()

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.alive = False
            await connection.stream.aclose()


def _int(message: Message, name: str) -> int:
    value = message.fields.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise WireError(f"a {message.type} message without {name}")
    return value
