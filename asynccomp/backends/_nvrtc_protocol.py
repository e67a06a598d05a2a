"""The wire format between the engine and its NVRTC worker processes.

Frames over the worker's stdin/stdout: an 8-byte little-endian length, then that many
bytes, the first of which says what the frame is:

- engine -> worker: ``C`` + pickle ``(seq, PreparedCompile)``: compile this;
  ``X`` + 8-byte ``seq``: cancel job ``seq`` if it is still running.
- worker -> engine: ``A`` + 8-byte ``seq``: job ``seq`` was received (so a worker that
  dies before this never saw the job, and the job can go to another worker);
  ``R`` + pickle ``(seq, BackendOutput)``: its result.

Kept apart from the worker's own module, which runs as ``__main__`` and must not be
imported by the engine first.
"""

from __future__ import annotations

import struct
from typing import BinaryIO

__all__ = ("CANCEL", "COMPILE", "HEADER", "RECEIVED", "RESULT", "SEQ", "read_frame", "write_frame")

HEADER = struct.Struct("<Q")
SEQ = struct.Struct("<Q")

COMPILE = b"C"
CANCEL = b"X"
RECEIVED = b"A"
RESULT = b"R"


def write_frame(stream: BinaryIO, kind: bytes, payload: bytes) -> None:
    stream.write(HEADER.pack(len(payload) + 1) + kind + payload)
    stream.flush()


def read_frame(stream: BinaryIO) -> tuple[bytes, bytes] | None:
    """``(kind, payload)``, or ``None`` at end of input (the other side went away)."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (size,) = HEADER.unpack(header)
    frame = stream.read(size)
    if size < 1 or len(frame) != size:
        return None
    return frame[:1], frame[1:]
