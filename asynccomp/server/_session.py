"""One client of the compile server, from its connection to its leaving.

A :class:`Session` checks the peer's uid (``SO_PEERCRED``: the server serves its own
user only), reads its hello (protocol and version must match), welcomes it, then reads
its requests (:mod:`._requests`) until it leaves. What goes back to it is posted from
plain code (the scheduler's events) and written by one task, in order.

A client that leaves, or whose stream breaks, has its compiles cancelled (nobody
else's); bytes that are not frames cost it the connection (it is told why, in an error
frame), never the server.

What a session holds is bounded. Its answers wait to be written in a queue; while the
queue holds :data:`MAX_UNSENT_ANSWERS` answers or :data:`MAX_UNSENT_BYTES` bytes it
reads no more requests and hands no more of its jobs to the scheduler
(:mod:`._requests`: a client that reads slowly slows itself down, nobody else); it reads
none either while it holds :data:`~._requests.MAX_WAITING_JOBS` of the client's jobs not
yet handed to the scheduler (a client that sends faster than it compiles), and a
client that reads nothing for :data:`WRITE_TIMEOUT` seconds while answers wait for it
(a stopped process) is dropped: its compiles are cancelled and what was waiting for it
is freed. Every :data:`KEEPALIVE` seconds without an answer the session says the worker
count again (a timer of its own, not a poll), so a client can tell a silent server from a
busy one (:mod:`._client` gives up on one silent for much longer).

A call's answers are not posted one by one: the call gathers them and posts one drain
(:meth:`Session.post_later`), which the writer runs when it comes to it, so what is
ready by then (a chunk's cache hits, a job's outcome and the call's end) goes out as
one message.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import anyio
import anyio.abc

from .._version import __version__
from ._protocol import PROTOCOL, Closing, Error, Hello, Welcome, Workers, parse, send_form
from ._requests import Drained, Host, Requests
from ._stream import MessageStream
from ._wire import Message, WireError, encode

__all__ = (
    "HELLO_TIMEOUT",
    "KEEPALIVE",
    "MAX_UNSENT_ANSWERS",
    "MAX_UNSENT_BYTES",
    "WRITE_TIMEOUT",
    "Greeter",
    "Session",
)

logger = logging.getLogger("asynccomp.server")

#: Seconds a new connection has to say hello.
HELLO_TIMEOUT = 10.0
#: Answers waiting to be written past which a session reads no more of its requests.
MAX_UNSENT_ANSWERS = 64
#: The same in bytes (one answer may carry a binary and a log of megabytes).
MAX_UNSENT_BYTES = 32 * 2**20
#: Seconds a client may leave a frame of its answers unread before it is dropped.
WRITE_TIMEOUT = 60.0
#: Seconds without an answer after which a session says the worker count again.
KEEPALIVE = 5.0
# What writing to a client that went away raises.
_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


class Greeter(Host, Protocol):
    """What a session needs of its server besides running requests."""

    def accepting(self) -> bool:
        """Whether the server still takes clients (it stops: it welcomes none)."""
        ...

    def welcome(self) -> Welcome: ...

    def workers(self) -> int: ...


class Session:
    """One client: its stream, what goes out to it, and its requests."""

    def __init__(
        self,
        server: Greeter,
        stream: MessageStream,
        *,
        write_timeout: float = WRITE_TIMEOUT,
    ) -> None:
        self.server = server
        self.stream = stream
        self.write_timeout = write_timeout
        self.pid: int | None = None
        self.greeted = False
        self.requests: Requests | None = None
        # Posted from plain code (the scheduler's events), so never refused here: the
        # bound is on reading requests and feeding jobs (``room``), which make answers.
        self._out, self._queue = anyio.create_memory_object_stream[
            tuple[Mapping[str, Any], Sequence[bytes], int] | Callable[[], Drained] | _Written
        ](math.inf)
        self._writing = False  # the writer is writing an item
        self._posts_ended = False
        self.drained = anyio.Event()
        #: Answers posted and not yet written, and their size in bytes.
        self.unsent = 0
        self.unsent_bytes = 0
        self.last_post = time.monotonic()
        self._room = anyio.Event()

    @property
    def open_requests(self) -> int:
        return 0 if self.requests is None else len(self.requests.calls)

    def post(self, message: Any, blobs: Sequence[bytes] = ()) -> None:
        fields, blobs = send_form(message, blobs)
        size = 256 + sum(len(blob) for blob in blobs)
        self._enqueue((fields, blobs, size), 1, size)

    def post_later(
        self, drain: Callable[[], Drained], answers: int, size: int, *, now: bool = False
    ) -> None:
        if now and self._idle():
            self._write_now(drain)
        else:
            self._enqueue(drain, answers, size)

    def _enqueue(
        self,
        item: tuple[Mapping[str, Any], Sequence[bytes], int] | Callable[[], Drained] | _Written,
        answers: int,
        size: int,
    ) -> None:
        if self._posts_ended:
            return
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._out.send_nowait(item)
            self.hold(answers, size)

    def _idle(self) -> bool:
        """Whether nothing waits to be written (nor is being written) to this client."""
        return (
            self.greeted
            and not self._posts_ended
            and not self._out.statistics().current_buffer_used  # posted, not taken
            and not self._writing
            and not self.stream.buffered
        )

    def _write_now(self, drain: Callable[[], Drained]) -> None:
        """Write what ``drain()`` gives now, in the caller's step, as the writer would (it
        is idle: nothing can come between). A call's last answers go out without the
        writer's turn of the event loop; what the socket does not take at once is left
        for the writer to see out, within its deadline."""
        answers = size = 0
        try:
            for frames, its_answers, its_size in _frames_of(drain):
                for frame in frames:
                    self.stream.write(frame)
                answers += its_answers
                size += its_size
        except _GONE:
            return  # the client is gone: its reader sees the end
        self.last_post = time.monotonic()
        if self.stream.buffered:
            self._enqueue(_Written(answers, size), answers, size)

    def _end_posts(self) -> None:
        self._posts_ended = True
        self._out.close()

    def hold(self, answers: int, size: int) -> None:
        self.unsent += answers
        self.unsent_bytes += size
        self.last_post = time.monotonic()

    def _full(self) -> bool:
        return self.unsent >= MAX_UNSENT_ANSWERS or self.unsent_bytes >= MAX_UNSENT_BYTES

    async def room(self) -> None:
        """Until this client's answers waiting to be written are under the bounds: a
        client that reads nothing has no more of its requests read, nor of its jobs
        handed to the scheduler. (Every waiter waits on the same event.)"""
        while self._full():
            if self._room.is_set():
                self._room = anyio.Event()
            await self._room.wait()

    def close(self, reason: str) -> None:
        """The server stops: tell a welcomed client why, then write no more."""
        if self.greeted:
            self.post(Closing(reason))
        self._end_posts()

    async def run(self) -> None:
        """Serve this client until it leaves (or the server cancels it)."""
        try:
            if not await self._trusted() or not await self._greet():
                return
            self.greeted = True
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._write, tg.cancel_scope)
                tg.start_soon(self._keep_alive)
                self.requests = Requests(self.server, self, tg)
                try:
                    await self._read(self.requests)
                except WireError as exc:  # bytes that are not frames: the stream is lost
                    # Caught here, not around the task group (which would wrap it in an
                    # exception group): the client is told why, after what was posted
                    # before, and the connection closes.
                    logger.warning(
                        "a client (pid %s) broke the protocol: %s; its connection is closed",
                        self.pid,
                        exc,
                    )
                    self.requests.cancel_all()
                    self.post(Error(None, f"protocol error: {exc}", True))
                    self._end_posts()
                    await self.drained.wait()  # the writer's deadline bounds this
                finally:
                    self.requests.cancel_all()
                tg.cancel_scope.cancel()
        except WireError as exc:  # at hello, bytes that are not frames: the stream is lost
            logger.warning("a client broke the protocol at hello: %s", exc)
            with contextlib.suppress(*_GONE, WireError):
                await self._say(Error(None, f"protocol error: {exc}", True))
        except _GONE:
            pass  # the client went away while we wrote to it
        except Exception:  # a bug: it costs this client its connection, not the server
            logger.exception("asynccomp server: a connection failed")
        finally:
            self._end_posts()
            if not self.greeted:
                self.drained.set()  # nothing was written by a writer
            with anyio.CancelScope(shield=True):
                await self.stream.aclose()

    async def _read(self, requests: Requests) -> None:
        while True:
            await self.room()
            await requests.room()
            message = await self.stream.receive()
            if message is None:
                return  # the client left: what it has running is dropped
            requests.take(message)

    async def _write(self, scope: anyio.CancelScope) -> None:
        """Write what is posted until the queue is closed; a client that leaves a frame
        unread for ``write_timeout`` seconds is dropped (its requests stop)."""
        try:
            # One scope whose deadline is set around each frame's wait (a scope per
            # frame cost a cache hit more than its send).
            with anyio.CancelScope() as bound:
                async for item in self._queue:
                    self._writing = True
                    for frames, answers, size in _frames_of(item):
                        for frame in frames:
                            self.stream.write(frame)
                            if self.stream.buffered:  # most answers: none
                                await self._drain(bound)
                        if self.stream.buffered:  # what _write_now left (a _Written)
                            await self._drain(bound)
                        self.unsent -= answers
                        self.unsent_bytes -= size
                    self._writing = False
                    self._room.set()
        except _GONE:
            scope.cancel()  # the client is gone: its requests stop
        finally:
            self._queue.close()
            self.drained.set()
        if bound.cancelled_caught:
            logger.warning(
                "a client (pid %s) read nothing for %g s with %d answers waiting: dropped, "
                "its %d open requests cancelled",
                self.pid,
                self.write_timeout,
                self.unsent,
                self.open_requests,
            )
            scope.cancel()

    async def _drain(self, bound: anyio.CancelScope) -> None:
        """Until the client has taken what waits for it, within ``write_timeout``."""
        bound.deadline = anyio.current_time() + self.write_timeout
        await self.stream.drain()
        bound.deadline = math.inf

    async def _keep_alive(self) -> None:
        """Say the worker count after KEEPALIVE seconds without an answer: a client
        takes a server silent for long for a stopped one."""
        while True:
            quiet = time.monotonic() - self.last_post
            if quiet >= KEEPALIVE:
                self.post(Workers(self.server.workers()))
                quiet = 0.0
            await anyio.sleep(KEEPALIVE - quiet)

    async def _say(self, message: Any) -> None:
        """Write one message now (before the writer runs: hello's answer)."""
        for frame in encode(*send_form(message)):
            self.stream.write(frame)
        await self.stream.drain()

    async def _trusted(self) -> bool:
        uid = self.stream.peer_uid
        if uid is None or uid == os.getuid():
            return True
        logger.warning("refused a client of uid %d", uid)
        # Its hello is read first: closing with unread data would reset the connection,
        # and the refusal would never be read.
        with anyio.move_on_after(1), contextlib.suppress(WireError):
            await self.stream.receive()
        await self._say(
            Error(
                None, f"refused: this compile server serves uid {os.getuid()}, not uid {uid}", True
            )
        )
        return False

    async def _greet(self) -> bool:
        with anyio.move_on_after(HELLO_TIMEOUT):
            message = await self.stream.receive()
            if message is None:
                return False
            try:
                hello = _hello(message)
            except WireError as exc:
                await self._say(Error(None, f"protocol error: {exc}", True))
                return False
            if hello.protocol != PROTOCOL or hello.version != __version__:
                await self._say(
                    Error(
                        None,
                        f"version mismatch: this compile server is asynccomp {__version__} "
                        f"(protocol {PROTOCOL}); the client is asynccomp {hello.version} "
                        f"(protocol {hello.protocol})",
                        True,
                    )
                )
                return False
            if not self.server.accepting():
                # It stops (idle, or told to): closed at hello, the client starts a new
                # server rather than losing its first job to a Closing.
                return False
            self.pid = hello.pid
            await self._say(self.server.welcome())
            return True
        return False


class _Written:
    """In the writer's queue: ``answers`` (``size`` bytes) written already
    (:meth:`Session._write_now`) that wait in the stream's buffer for the client."""

    __slots__ = ("answers", "size")

    def __init__(self, answers: int, size: int) -> None:
        self.answers = answers
        self.size = size


def _frames_of(
    item: tuple[Mapping[str, Any], Sequence[bytes], int] | Callable[[], Drained] | _Written,
) -> list[tuple[list[bytes], int, int]]:
    """What the writer writes for a queued item: frames of each message, with how many
    answers and bytes of the session's bounds each frees."""
    if isinstance(item, _Written):
        return [([], item.answers, item.size)]
    if callable(item):  # a call's drain: what it has gathered by now
        return [
            (encode(*send_form(message, blobs)), answers, size)
            for message, blobs, answers, size in item()
        ]
    fields, blobs, size = item
    return [(encode(fields, blobs), 1, size)]


def _hello(message: Message) -> Hello:
    hello = parse(message)
    if not isinstance(hello, Hello):
        raise WireError(f"expected hello, got {message.type!r}")
    return hello
