"""A connection of the compile server's wire, as messages: :func:`open_stream`.

Both ends (a client's :class:`~._connect.Connection`, the server's
:class:`~._session.Session`) read and write through a :class:`MessageStream`, made from
the socket stream anyio connected or accepted. On asyncio (always, for the server) it is
an :class:`asyncio.Protocol` on the socket's transport: the event loop hands it bytes as
they arrive, in the turn the socket became readable, and a small answer is written
straight into the socket. A one-job cache hit through the server is a few turns of the
loop on each side, and each turn is a good part of its time: anyio's socket stream takes
three to read (a checkpoint, the readiness callback, the task's wake-up) and registers
the socket with the selector for each wait. On another anyio backend (trio) it is
anyio's stream, read in chunks.

Both read with one :class:`~._wire.MessageReader`, and hold what they buffer to a bound:
reading stops while :data:`PAUSE_AT` messages wait to be taken (the socket's buffer then
fills and the peer waits), and what the socket would not take waits in
:attr:`MessageStream.buffered` until :meth:`MessageStream.drain` (which a writer bounds
in time).
"""

from __future__ import annotations

import abc
import asyncio
import collections
import contextlib
import socket

import anyio
import anyio.abc
import anyio.lowlevel

from ._paths import peer_uid
from ._wire import Message, MessageReader, WireError

__all__ = ("PAUSE_AT", "MessageStream", "open_stream")

#: Messages read and not yet taken past which a stream reads no more from its socket.
PAUSE_AT = 8
# What a read from anyio's stream raises when the peer went away.
_BROKEN = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


class MessageStream(abc.ABC):
    """One connection's messages: read as they arrive, written whole, in order."""

    #: The uid of the process at the other end (``SO_PEERCRED``), or ``None``.
    peer_uid: int | None

    @abc.abstractmethod
    async def receive(self) -> Message | None:
        """The next message, or ``None`` when the other side closed between messages.
        Raises :class:`~._wire.WireError` for anything else (bytes that are not the
        protocol, the connection ending inside a message). Returns without a turn of the
        event loop when a message has arrived already."""

    @abc.abstractmethod
    def write(self, data: bytes) -> None:
        """Hand ``data`` to the socket now; what it does not take waits in
        :attr:`buffered`, ahead of later writes. Raises ``anyio.BrokenResourceError``
        once the connection is lost."""

    @property
    @abc.abstractmethod
    def buffered(self) -> int:
        """Bytes written that the socket has not taken yet."""

    @abc.abstractmethod
    async def drain(self) -> None:
        """Until :attr:`buffered` is empty (the peer reads); raises
        ``anyio.BrokenResourceError`` if the connection is lost first."""

    @abc.abstractmethod
    def shut(self) -> None:
        """End both directions now, from any task: a reader sees the end."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Close the connection (what is still buffered is dropped)."""


async def open_stream(stream: anyio.abc.SocketStream) -> MessageStream:
    """``stream`` as messages; from here on the returned stream owns its socket."""
    raw: socket.socket = stream.extra(anyio.abc.SocketAttribute.raw_socket)
    uid = peer_uid(raw)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio: anyio's other backend, trio
        return _AnyioMessages(stream, uid)
    # The socket leaves anyio's stream (whose close is then a no-op) for a transport.
    sock = socket.socket(fileno=raw.detach())
    protocol = _ProtocolMessages(loop, uid)
    try:
        await loop.connect_accepted_socket(lambda: protocol, sock)
    except BaseException:
        sock.close()
        raise
    return protocol


class _ProtocolMessages(MessageStream, asyncio.Protocol):
    """On asyncio: the loop calls :meth:`data_received` as bytes arrive."""

    def __init__(self, loop: asyncio.AbstractEventLoop, uid: int | None) -> None:
        self.peer_uid = uid
        self._loop = loop
        self._reader = MessageReader()
        self._messages: collections.deque[Message] = collections.deque()
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._error: WireError | None = None
        self._ended = False  # the peer closed its side (or the connection is lost)
        self._lost = False
        self._reading = True
        self._write_paused = False

    # -- the transport's calls -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        # Told to pause as soon as anything waits to be written, to resume once it all
        # has gone: drain() is "until the peer has taken it".
        transport.set_write_buffer_limits(high=0, low=0)

    def data_received(self, data: bytes) -> None:
        if self._error is not None:
            return
        try:
            self._messages.extend(self._reader.feed(data))
        except WireError as exc:
            self._error = exc
            self._pause()
        if len(self._messages) >= PAUSE_AT:
            self._pause()
        self._wake()

    def eof_received(self) -> bool:
        self._ended = True
        self._wake()
        return True  # half-closed: what is still to say to the peer may be written

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended = self._lost = True
        self._wake()
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    # -- MessageStream -----------------------------------------------------------------------

    async def receive(self) -> Message | None:
        while not self._messages:
            if self._error is not None:
                raise self._error
            if self._ended:
                if self._reader.idle:
                    return None
                raise WireError("the connection closed inside a message")
            self._resume()
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        message = self._messages.popleft()
        if len(self._messages) < PAUSE_AT // 2 and self._error is None:
            self._resume()
        return message

    def write(self, data: bytes) -> None:
        if self._lost or self._transport is None or self._transport.is_closing():
            raise anyio.BrokenResourceError("the connection is closed")
        self._transport.write(data)

    @property
    def buffered(self) -> int:
        transport = self._transport
        return 0 if transport is None or self._lost else transport.get_write_buffer_size()

    async def drain(self) -> None:
        while self._write_paused:
            if self._lost:
                raise anyio.BrokenResourceError("the connection was lost with bytes unsent")
            self._drained = self._loop.create_future()
            await self._drained

    def shut(self) -> None:
        if self._transport is not None:
            self._transport.abort()  # connection_lost follows: a reader sees the end

    async def aclose(self) -> None:
        if self._transport is not None:
            self._transport.abort()
        await anyio.lowlevel.checkpoint()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _pause(self) -> None:
        if self._reading and self._transport is not None and not self._lost:
            self._reading = False
            self._transport.pause_reading()

    def _resume(self) -> None:
        if not self._reading and self._transport is not None and not self._lost:
            self._reading = True
            self._transport.resume_reading()


class _AnyioMessages(MessageStream):
    """On anyio's other backends: its socket stream, read in chunks."""

    def __init__(self, stream: anyio.abc.SocketStream, uid: int | None) -> None:
        self.peer_uid = uid
        self._stream = stream
        self._raw: socket.socket = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        self._reader = MessageReader()
        self._messages: collections.deque[Message] = collections.deque()
        self._unsent: collections.deque[bytes] = collections.deque()
        self._unsent_bytes = 0

    async def receive(self) -> Message | None:
        while not self._messages:
            try:
                data = await self._stream.receive()
            except (anyio.EndOfStream, *_BROKEN) as exc:
                if self._reader.idle:
                    return None
                if isinstance(exc, anyio.EndOfStream):
                    raise WireError("the connection closed inside a message") from None
                raise WireError(f"the connection broke inside a message ({exc!r})") from None
            self._messages.extend(self._reader.feed(data))
        return self._messages.popleft()

    def write(self, data: bytes) -> None:
        if not self._unsent:
            try:
                sent = self._raw.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:  # as anyio's stream says it
                raise anyio.BrokenResourceError from exc
            data = data[sent:]
        if data:
            self._unsent.append(data)
            self._unsent_bytes += len(data)

    @property
    def buffered(self) -> int:
        return self._unsent_bytes

    async def drain(self) -> None:
        while self._unsent:
            await self._stream.send(self._unsent[0])
            self._unsent_bytes -= len(self._unsent.popleft())

    def shut(self) -> None:
        with contextlib.suppress(OSError):
            self._raw.shutdown(socket.SHUT_RDWR)

    async def aclose(self) -> None:
        await self._stream.aclose()
