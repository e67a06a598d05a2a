"""The compile server's wire: messages in frames of bounded size.

A **frame** is a 4-byte big-endian length ``N`` (at most :data:`FRAME_LIMIT`) and ``N``
bytes. A **message** is a 4-byte big-endian length ``J``, ``J`` bytes of a JSON object
(its fields, with ``"type"`` and ``"blobs"``: the sizes of the blobs), then the blobs
back to back (sources going out, binaries and logs coming back). A message is cut into
as many frames as it needs: a 50 MB source is a few frames, never one huge one, and a
sender holds the connection for one message at a time, so other requests interleave
between messages.

A reader checks sizes before it reads: a frame over :data:`FRAME_LIMIT` or a message
announcing more than :data:`MESSAGE_LIMIT` (four times the largest source a
:class:`~asynccomp.CompileJob` takes) is a :class:`WireError`, and memory grows only as
bytes arrive. Nothing is unpickled: whatever bytes arrive, decoding gives a message of
known shape or raises ``WireError``. What the messages are is :mod:`._protocol`.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from ..job import MAX_SOURCE_CHARS

__all__ = (
    "FRAME_LIMIT",
    "MESSAGE_LIMIT",
    "Message",
    "WireError",
    "encode",
    "read_message",
    "send_now",
)

#: The largest frame, in bytes.
FRAME_LIMIT = 4 * 2**20
#: The largest message: a source of MAX_SOURCE_CHARS characters is at most four bytes
#: each in UTF-8, and a job may carry it twice (the TVM fast path's rewrite and the
#: original), with room for a header.
MESSAGE_LIMIT = 8 * MAX_SOURCE_CHARS + 2**20

_LENGTH = struct.Struct(">I")


class WireError(Exception):
    """Bytes that do not follow the protocol (a frame, a message, a field)."""


class Message:
    """A message: its JSON fields and its blobs."""

    __slots__ = ("blobs", "fields")

    def __init__(self, fields: dict[str, Any], blobs: list[bytes]) -> None:
        self.fields = fields
        self.blobs = blobs

    @property
    def type(self) -> str:
        return str(self.fields["type"])


def encode(fields: Mapping[str, Any], blobs: Sequence[bytes] = ()) -> list[bytes]:
    """The frames of one message (write them back to back, as one unit)."""
    header = json.dumps(
        {**fields, "blobs": [len(b) for b in blobs]},
        ensure_ascii=True,
        separators=(",", ":"),
        allow_nan=False,
    ).encode("ascii")
    size = _LENGTH.size + len(header) + sum(len(b) for b in blobs)
    if size > MESSAGE_LIMIT:
        raise WireError(f"a message of {size} bytes is over the limit of {MESSAGE_LIMIT}")
    body = b"".join([_LENGTH.pack(len(header)), header, *blobs])
    view = memoryview(body)
    return [
        _LENGTH.pack(len(view[i : i + FRAME_LIMIT])) + view[i : i + FRAME_LIMIT]
        for i in range(0, len(body), FRAME_LIMIT)
    ]


def send_now(raw: socket.socket, frame: bytes) -> bytes:
    """What of ``frame`` the socket's buffer did not take at once (its non-blocking
    ``send``): a small answer goes out without a turn of the event loop, which the
    stream's ``send`` takes first; the rest is for the stream. Errors are the socket's
    (a peer gone: ``OSError``)."""
    try:
        sent = raw.send(frame)
    except (BlockingIOError, InterruptedError):
        return frame
    return frame[sent:]


async def _frame(stream: BufferedByteReceiveStream, first: bool) -> bytes | None:
    """The next frame's bytes; ``None`` when the other side closed between messages."""
    try:
        prefix = await stream.receive_exactly(_LENGTH.size)
    except (anyio.IncompleteRead, anyio.EndOfStream):
        if first:
            return None
        raise WireError("the connection closed inside a message") from None
    (size,) = _LENGTH.unpack(prefix)
    if size == 0 or size > FRAME_LIMIT:
        raise WireError(f"a frame of {size} bytes (frames are 1 to {FRAME_LIMIT} bytes)")
    try:
        return await stream.receive_exactly(size)
    except (anyio.IncompleteRead, anyio.EndOfStream):
        raise WireError("the connection closed inside a frame") from None


async def _fill(stream: BufferedByteReceiveStream, body: bytearray, size: int) -> None:
    while len(body) < size:
        frame = await _frame(stream, first=False)
        assert frame is not None
        body += frame
    if len(body) > size:
        raise WireError("a frame that runs past its message")


async def read_message(stream: BufferedByteReceiveStream) -> Message | None:
    """The next message, or ``None`` when the other side closed between messages.
    Raises :class:`WireError` for anything else (a closed or broken connection inside a
    message included)."""
    try:
        first = await _frame(stream, first=True)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        return None
    if first is None:
        return None
    body = bytearray(first)
    try:
        await _fill_partly(stream, body, _LENGTH.size)
        (header_size,) = _LENGTH.unpack_from(body)
        if _LENGTH.size + header_size > MESSAGE_LIMIT:
            raise WireError(f"a header of {header_size} bytes")
        await _fill_partly(stream, body, _LENGTH.size + header_size)
        fields = _header(bytes(body[_LENGTH.size : _LENGTH.size + header_size]))
        sizes = fields["blobs"]
        end = _LENGTH.size + header_size + sum(sizes)
        if end > MESSAGE_LIMIT:
            raise WireError(f"a message of {end} bytes is over the limit of {MESSAGE_LIMIT}")
        await _fill(stream, body, end)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
        raise WireError(f"the connection broke inside a message ({exc!r})") from None
    blobs = []
    start = _LENGTH.size + header_size
    for size in sizes:
        blobs.append(bytes(body[start : start + size]))
        start += size
    return Message(fields, blobs)


async def _fill_partly(stream: BufferedByteReceiveStream, body: bytearray, size: int) -> None:
    """At least ``size`` bytes of the message (more may have come in the same frame)."""
    while len(body) < size:
        frame = await _frame(stream, first=False)
        assert frame is not None
        body += frame


def _header(raw: bytes) -> dict[str, Any]:
    try:
        fields = json.loads(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise WireError(f"a header that is not JSON: {exc}") from None
    if not isinstance(fields, dict) or not isinstance(fields.get("type"), str):
        raise WireError("a header that is not a message (no type)")
    sizes = fields.get("blobs")
    if not isinstance(sizes, list) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in sizes
    ):
        raise WireError("a header without a valid blob list")
    return fields
