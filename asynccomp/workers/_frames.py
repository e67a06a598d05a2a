"""The one frame codec between a pool and its processes (workers and templates).

A frame is an 8-byte little-endian length, one byte that says what the frame is, then
the payload: a pickle (:func:`dumps`) or an 8-byte number. Pickles go by cloudpickle where
it is installed (functions defined anywhere travel: a test's, a notebook's), else by
pickle (functions of importable modules, by name); either loads with :func:`pickle.loads`.

Kinds, pool -> process: ``INIT`` (the initializers and environment), ``TASK`` ((id, fn,
args)), ``CANCEL`` (an id). Process -> pool: ``READY`` (its pid), ``INIT_ERROR`` (a
traceback), ``RECEIVED`` (an id: the task reached it), ``DONE`` ((id, value)),
``FAILED`` ((id, exception)).
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Callable
from typing import IO, Any

__all__ = (
    "CANCEL",
    "DONE",
    "FAILED",
    "INIT",
    "INIT_ERROR",
    "READY",
    "RECEIVED",
    "TASK",
    "Parser",
    "dumps",
    "encode",
    "number",
    "read_frame",
)

HEADER = struct.Struct("<Q")
NUMBER = struct.Struct("<q")

INIT, TASK, CANCEL = b"I", b"T", b"X"
READY, INIT_ERROR, RECEIVED, DONE, FAILED = b"R", b"E", b"A", b"D", b"F"


def _pickler() -> Callable[..., bytes]:
    try:
        import cloudpickle
    except ImportError:
        return pickle.dumps
    return cloudpickle.dumps  # type: ignore[no-any-return]


_dumps = _pickler()


def dumps(value: object) -> bytes:
    return _dumps(value, pickle.HIGHEST_PROTOCOL)


def encode(kind: bytes, payload: bytes) -> bytes:
    return HEADER.pack(len(payload) + 1) + kind + payload


def number(kind: bytes, value: int) -> bytes:
    return encode(kind, NUMBER.pack(value))


def read_number(payload: bytes) -> int:
    return int(NUMBER.unpack(payload)[0])


def read_frame(stream: IO[bytes]) -> tuple[bytes, bytes] | None:
    """Blocking: ``(kind, payload)``, or ``None`` at the end of the stream."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (size,) = HEADER.unpack(header)
    body = stream.read(size)
    return (body[:1], body[1:]) if size >= 1 and len(body) == size else None


class Parser:
    """Frames out of bytes as they arrive (no I/O of its own)."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[tuple[bytes, bytes]]:
        self._buffer += chunk
        frames = []
        while len(self._buffer) >= HEADER.size:
            (size,) = HEADER.unpack_from(self._buffer)
            end = HEADER.size + size
            if len(self._buffer) < end:
                break
            body = bytes(self._buffer[HEADER.size : end])
            del self._buffer[:end]
            frames.append((body[:1], body[1:]))
        return frames


def loads(payload: bytes) -> Any:
    return pickle.loads(payload)
