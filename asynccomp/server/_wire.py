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
    "MessageReader",
    "WireError",
    "encode",
    "read_message",
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


class MessageReader:
    """Bytes in, messages out, with no I/O of its own (so a socket's protocol and an
    anyio stream read the wire the same way): :meth:`feed` takes bytes as they arrive
    and gives the messages they complete. Sizes are checked as their prefixes arrive,
    and memory grows only as bytes do."""

    __slots__ = ("_body", "_buffer", "_end", "_fields", "_header_end")

    def __init__(self) -> None:
        self._buffer = bytearray()  # bytes of the frame under way
        self._body = bytearray()  # the message under way, from its earlier frames
        self._fields: dict[str, Any] | None = None
        self._header_end = 0
        self._end = 0

    @property
    def idle(self) -> bool:
        """Between messages: nothing of one has arrived."""
        return not self._buffer and not self._body

    @property
    def needed(self) -> int:
        """The bytes that complete the next frame's length, or else the frame."""
        have = len(self._buffer)
        if have < _LENGTH.size:
            return _LENGTH.size - have
        (size,) = _LENGTH.unpack_from(self._buffer)
        return max(1, _LENGTH.size + int(size) - have)

    def feed(self, data: bytes) -> list[Message]:
        """The messages ``data`` completes (raises :class:`WireError` for bytes that
        do not follow the protocol; the reader is then of no more use)."""
        buffer = self._buffer
        buffer += data
        messages = []
        at, have = 0, len(buffer)
        while have - at >= _LENGTH.size:
            (size,) = _LENGTH.unpack_from(buffer, at)
            if size == 0 or size > FRAME_LIMIT:
                raise WireError(f"a frame of {size} bytes (frames are 1 to {FRAME_LIMIT} bytes)")
            if have - at - _LENGTH.size < size:
                break
            frame = bytes(buffer[at + _LENGTH.size : at + _LENGTH.size + size])
            at += _LENGTH.size + size
            message = self._frame(frame)
            if message is not None:
                messages.append(message)
        del buffer[:at]
        return messages

    def _frame(self, frame: bytes) -> Message | None:
        if not self._body and self._fields is None:
            whole = _whole(frame)  # the usual case: a message in one frame
            if whole is not None:
                return whole
        body = self._body
        body += frame
        if self._fields is None:
            if len(body) < _LENGTH.size:
                return None
            (header_size,) = _LENGTH.unpack_from(body)
            if _LENGTH.size + header_size > MESSAGE_LIMIT:
                raise WireError(f"a header of {header_size} bytes")
            self._header_end = _LENGTH.size + header_size
            if len(body) < self._header_end:
                return None
            self._fields = _header(bytes(body[_LENGTH.size : self._header_end]))
            self._end = self._header_end + sum(self._fields["blobs"])
            if self._end > MESSAGE_LIMIT:
                raise WireError(
                    f"a message of {self._end} bytes is over the limit of {MESSAGE_LIMIT}"
                )
        if len(body) > self._end:
            raise WireError("a frame that runs past its message")
        if len(body) < self._end:
            return None
        message = Message(self._fields, _blobs(body, self._header_end, self._fields["blobs"]))
        self._body = bytearray()
        self._fields = None
        return message


def _whole(frame: bytes) -> Message | None:
    """The message ``frame`` holds whole, or ``None`` if it holds only a part."""
    if len(frame) < _LENGTH.size:
        return None
    (header_size,) = _LENGTH.unpack_from(frame)
    header_end = _LENGTH.size + header_size
    if header_end > len(frame):
        return None
    fields = _header(frame[_LENGTH.size : header_end])
    sizes = fields["blobs"]
    end = header_end + sum(sizes)
    if end > len(frame):
        return None  # more frames follow (the limits are checked as they come)
    if end < len(frame):
        raise WireError("a frame that runs past its message")
    return Message(fields, _blobs(frame, header_end, sizes))


def _blobs(body: bytes | bytearray, start: int, sizes: list[int]) -> list[bytes]:
    blobs = []
    for size in sizes:
        blobs.append(bytes(body[start : start + size]))
        start += size
    return blobs


async def read_message(stream: BufferedByteReceiveStream) -> Message | None:
    """The next message on ``stream``, read to its last byte and no further, or
    ``None`` when the other side closed between messages. Raises :class:`WireError`
    for anything else (a closed or broken connection inside a message included)."""
    reader = MessageReader()
    while True:
        try:
            data = await stream.receive_exactly(reader.needed)
        except (anyio.IncompleteRead, anyio.EndOfStream):
            if reader.idle:
                return None
            raise WireError("the connection closed inside a message") from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            if reader.idle:
                return None
            raise WireError(f"the connection broke inside a message ({exc!r})") from None
        messages = reader.feed(data)
        if messages:
            return messages[0]


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
