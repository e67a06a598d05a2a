"""The client side: :class:`ServerClient`, the runner of an engine on a compile server.

An ``Engine(server=...)`` plans, renders, builds results, writes dumps and counts as
every engine does (:mod:`asynccomp._front`); only its compiles run on the server,
through a :class:`ServerClient` (a :class:`~asynccomp.runner.Runner`). A call's requests
go out in messages of bounded size as the engine plans them, the first opening the call
and the last saying it ends (one message for a call of one chunk); each comes back as
an outcome (compiled, from the server's cache, or shared with an identical compile of
any client's), gathered in ``results`` messages.

The client trusts a server only when it is this user's (``SO_PEERCRED``: a socket path
can be anyone's) and compiles with this process's toolkit (its identity, see
:func:`~asynccomp.server.server_identity`), whether the socket was found (``"auto"``)
or named (:mod:`._connect`); the welcome says which toolkit that is, and the jobs are
rendered for it. A call's jobs in flight are a :class:`~._pending.Pending`.

If the server goes away (killed, stopped), every job still waiting ends with
:class:`~asynccomp.ServerLost`; results already delivered stay delivered; the next call
connects again, starting a new server if this client starts them (``server="auto"``).
A server that is there but says nothing for :data:`~._connect.SILENCE_LIMIT` seconds
while something waits on it (a live one says something every few seconds: a stopped
one, SIGSTOP or a frozen host, says nothing) is given up the same way, with a reason that
says so: what a job waits for is bounded by its queueing, its timeout and that limit.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.abc
import anyio.to_thread

from ..backends import PreparedCompile
from ..errors import InvalidJob, ServerError
from ..runner import CompileRequest, RunEvents, Runner
from ..toolkit import Toolkit
from ._connect import (
    GONE,
    SILENCE_LIMIT,
    Connection,
    NoServer,
    open_connection,
    start_server,
)
from ._forms import blob_count, outcome_of, spec_of, toolkit_from
from ._paths import ServerPaths, server_identity, server_paths
from ._pending import Pending
from ._protocol import (
    Cancel,
    Closing,
    Compile,
    Error,
    Jobs,
    JobSpec,
    MakePch,
    PchMade,
    Results,
    Status,
    StatusReply,
    Stopping,
    WarmedUp,
    WarmUp,
    Welcome,
    Workers,
    parse,
)
from ._wire import WireError

__all__ = ("ServerClient",)

logger = logging.getLogger("asynccomp.server")

#: A call's jobs go out in messages of about this many bytes (a larger job goes alone,
#: in as many frames as it needs).
PACK_BYTES = 2**20


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
        self._connection: Connection | None = None
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
        here = f"on the compile server (pid {self.welcome.pid})"
        there = self.welcome.settings.get("where")  # "on Ray at HOST:PORT" when it is
        return f"{here}, {there}" if isinstance(there, str) and there.startswith("on Ray") else here

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

    def remote_key_mismatch(self) -> str | None:
        """Why this client's jobs cannot run on the server, or ``None``: both have a
        remote tier, sealed with different keys. A server keeps the key it started
        with; the client's key governs its jobs (after a leaked key is replaced, no
        entry verified under the old one may answer them)."""
        from ..cache import REMOTE_CACHE_ENV, RemoteAuth

        theirs = self.welcome.settings.get("remote_cache_key_id")
        if not theirs or not self._environ.get(REMOTE_CACHE_ENV, "").strip():
            return None
        try:
            auth = RemoteAuth.from_environment(self._environ)
        except InvalidJob:  # a bad key here: overridden_settings says the tier is unusable
            return None
        if auth is None or auth.key_id == theirs:
            return None
        return (
            f"the compile server (pid {self.welcome.pid}) seals and verifies remote cache "
            f"entries with the key of id {theirs}, this process with another key (id "
            f"{auth.key_id}, from {auth.source}); a server keeps the key it started with: "
            "stop it (asynccomp serve --stop) and the next engine starts one with this "
            "key, or compile in this process (Engine(server=None), ASYNCCOMP_SERVER=off)"
        )

    # -- connecting --------------------------------------------------------------------------

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        """Connect now (as the engine starts), so a server that cannot be had fails the
        ``async with``, not the first job."""
        self._task_group = task_group
        await self._connected()

    async def _connected(self) -> Connection:
        connection = self._connection
        if connection is not None and connection.alive:
            return connection  # every call but the first: no lock to take
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
            self._task_group.start_soon(self._watch, opened[0])
            return opened[0]

    async def _open(
        self, path: Path, paths: ServerPaths | None, identity: str
    ) -> tuple[Connection, Welcome]:
        for attempt in range(3):
            try:
                return await open_connection(path, identity=identity)
            except NoServer as exc:
                if not self.auto_start or paths is None or attempt == 2:
                    raise ServerError(str(exc)) from None
                # None listens, or one was stopping at its idle deadline: start one.
                await anyio.to_thread.run_sync(start_server, paths, self._environ)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _read(self, connection: Connection) -> None:
        reason = "the compile server closed the connection"
        try:
            while True:
                message = await connection.stream.receive()
                if message is None:
                    break
                connection.heard = time.monotonic()
                answer = parse(message)
                said = self._dispatch(connection, answer, message.blobs)
                if said is not None:
                    reason = said
                    break
        except WireError as exc:
            reason = f"the compile server broke the protocol: {exc}"
            logger.warning("asynccomp: %s", reason)
        except GONE as exc:
            reason = f"the connection to the compile server failed: {exc!r}"
        finally:
            self._lost(connection, reason)
            with anyio.CancelScope(shield=True):
                await connection.stream.aclose()
            connection.closed.set()

    async def _watch(self, connection: Connection) -> None:
        """Give up on a server that says nothing for SILENCE_LIMIT seconds while
        something waits on it (it keeps a client told every few seconds), until the
        connection closes."""
        while not connection.closed.is_set():
            if not connection.waiting:
                connection.heard = time.monotonic()  # silence counts from the first wait
            quiet = time.monotonic() - connection.heard
            if quiet >= SILENCE_LIMIT and connection.alive:
                self._lost(
                    connection,
                    f"the compile server (pid {self.server_pid}) said nothing for "
                    f"{quiet:.0f} s (the limit is {SILENCE_LIMIT:g} s; a running one "
                    "speaks every few seconds): it is stopped or hung",
                )
                connection.shut()  # the reader sees the end, and closes the stream
            with anyio.move_on_after(min(1.0, max(SILENCE_LIMIT - quiet, 0.01))):
                await connection.closed.wait()

    def _dispatch(self, connection: Connection, answer: Any, blobs: list[bytes]) -> str | None:
        """Hand one answer on; the reason to stop reading, if it is one."""
        if isinstance(answer, Results):
            pending = connection.calls.get(answer.id)
            if pending is not None:  # else a call this side has given up on
                _deliver(pending, answer, blobs)
        elif isinstance(answer, Workers):
            connection.workers = answer.workers
        elif isinstance(answer, (WarmedUp, PchMade, StatusReply, Stopping)):
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

    def _lost(self, connection: Connection, reason: str) -> None:
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
        pending = Pending(events, want)
        try:
            connection = await self._connected()
        except ServerError as exc:
            pending.fail("lost", f"no compile server to run this job: {exc}")
            async for chunk in requests:
                pending.expect([r.index for r in chunk])
            return
        number = next(connection.ids)
        connection.calls[number] = pending
        finished = opened = False
        try:
            # Every chunk is taken from ``requests``, sent or not: once the connection
            # is lost, ``expect`` ends a chunk's jobs at once (ServerLost), so no job of
            # the call is left without an outcome. A chunk goes out once the next one
            # is known (or there is none): the last says so, and a call of one chunk
            # is one message.
            chunks = aiter(requests)
            current = await _next(chunks)
            while current is not None:
                following = await _next(chunks)
                pending.expect([r.index for r in current])
                last = following is None
                if connection.alive and (current or opened or not last):
                    for message, blobs in _packed(number, want, current, opened, last):
                        await self._send(connection, message, blobs)
                    opened = True
                current = following
            pending.all_sent = True
            pending.check()
            await pending.done.wait()
            finished = True
        finally:
            connection.calls.pop(number, None)
            if opened and not finished and connection.alive:
                # Cancelled: the server drops this call's compiles (nobody else's).
                with anyio.CancelScope(shield=True), contextlib.suppress(*GONE):
                    await connection.send(Cancel(number))

    async def _send(
        self, connection: Connection, message: Any, blobs: Sequence[bytes] = ()
    ) -> None:
        """Send on ``connection`` if it is alive; a send that fails loses it (every call
        on it ends ServerLost) and closes it, so its reader stops too."""
        if not connection.alive:
            return
        try:
            await connection.send(message, blobs)
        except GONE as exc:
            self._lost(connection, f"sending to the compile server failed ({exc!r})")
            connection.shut()  # its reader stops, and closes the stream

    async def warm_up(self) -> None:
        connection = await self._connected()
        await connection.ask(WarmUp(next(connection.ids)))

    async def make_pch(self, prepared: PreparedCompile) -> bool:
        connection = await self._connected()
        spec, blobs = spec_of(CompileRequest(0, prepared))
        answer = await connection.ask(MakePch(next(connection.ids), spec), blobs)
        assert isinstance(answer, PchMade)
        return answer.made

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
            # Not aclose() under the reader's feet: it ends the stream and closes it.
            connection.shut()
            with anyio.move_on_after(10, shield=True):
                await connection.closed.wait()
            await connection.stream.aclose()


def _packed(
    number: int, want: bool, chunk: Sequence[CompileRequest], opened: bool, last: bool
) -> list[tuple[Compile | Jobs, list[bytes]]]:
    """A chunk's jobs in messages of about PACK_BYTES each (a larger job alone): the
    first opens call ``number`` unless it is ``opened``, the last says it ends if this is
    its ``last`` chunk."""
    groups: list[tuple[list[JobSpec], list[bytes]]] = []
    specs: list[JobSpec] = []
    blobs: list[bytes] = []
    size = 0
    for request in chunk:
        spec, sources = spec_of(request)
        weight = sum(len(s) for s in sources) + 256
        if specs and size + weight > PACK_BYTES:
            groups.append((specs, blobs))
            specs, blobs, size = [], [], 0
        specs.append(spec)
        blobs.extend(sources)
        size += weight
    if specs or not groups:
        groups.append((specs, blobs))
    messages: list[tuple[Compile | Jobs, list[bytes]]] = []
    for at, (specs, blobs) in enumerate(groups):
        end = last and at == len(groups) - 1
        if not opened and at == 0:
            messages.append((Compile(number, want, specs, end), blobs))
        else:
            messages.append((Jobs(number, specs, end), blobs))
    return messages


async def _next(
    chunks: AsyncIterator[Sequence[CompileRequest]],
) -> Sequence[CompileRequest] | None:
    try:
        return await anext(chunks)
    except StopAsyncIteration:
        return None


def _deliver(pending: Pending, results: Results, blobs: list[bytes]) -> None:
    """A ``results`` message's news, handed to the call it answers."""
    for index in results.started:
        pending.started(index)
    at = 0
    for spec in results.outcomes:
        count = blob_count(spec, pending.want)
        if at + count > len(blobs):
            raise WireError("a results message with fewer blobs than its outcomes")
        pending.finish(spec.index, outcome_of(spec, blobs[at : at + count], pending.want))
        at += count
    if at != len(blobs):
        raise WireError("a results message with more blobs than its outcomes")
    if results.end and pending.waiting:
        pending.fail("internal", "the compile server ended the call without these jobs")
