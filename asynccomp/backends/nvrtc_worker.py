"""The NVRTC worker process: ``python -m asynccomp.backends.nvrtc_worker``.

NVRTC's front end runs one program at a time per process, so parallel front ends need
processes. A worker reads pickled :class:`~asynccomp.backends.base.PreparedCompile`
requests from stdin and writes pickled :class:`~asynccomp.backends.base.BackendOutput`
replies to stdout, one at a time, each framed by an 8-byte little-endian length.

Workers are started as plain subprocesses of ``sys.executable`` rather than through
``multiprocessing``: spawn re-imports the parent's ``__main__`` (a script without a
``__name__`` guard would run again), and fork copies a parent whose threads (event loop,
NVRTC) may hold locks.
"""

from __future__ import annotations

import pickle
import struct
import sys
from typing import BinaryIO

from .base import BackendOutput, PreparedCompile

__all__ = ("read_frame", "write_frame")

_HEADER = struct.Struct("<Q")


def write_frame(stream: BinaryIO, payload: bytes) -> None:
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


def read_frame(stream: BinaryIO) -> bytes | None:
    """One frame, or ``None`` at end of input (the parent went away)."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    payload = stream.read(size)
    return payload if len(payload) == size else None


def main() -> int:
    # Import only now: the NVRTC library is loaded once, in the worker, before "ready".
    from .nvrtc import compile_prepared

    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    # Nothing else may write to the reply channel.
    sys.stdout = sys.stderr
    while True:
        frame = read_frame(requests)
        if frame is None:
            return 0
        prepared = pickle.loads(frame)
        assert isinstance(prepared, PreparedCompile)
        try:
            out = compile_prepared(prepared)
        except Exception as exc:  # report, don't die: the parent maps it to a failure
            out = BackendOutput("failed", None, "", f"NVRTC worker error: {exc!r}")
        write_frame(replies, pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL))


if __name__ == "__main__":
    sys.exit(main())
