"""The NVRTC worker process: ``python -m asynccomp.backends._nvrtc_worker``.

NVRTC's front end runs one program at a time per process, so parallel front ends need
processes. Workers are plain subprocesses of ``sys.executable`` rather than
``multiprocessing`` ones: spawn re-imports the parent's ``__main__`` (a script without a
``__name__`` guard would run again), and fork copies a parent whose threads (event loop,
NVRTC) may hold locks.

It reads requests and writes replies in the frames of :mod:`._nvrtc_protocol`. A reader
thread takes frames off stdin so that a cancel reaches the compile running in the main
thread (through NVRTC's flow callback). End of input means the engine is gone: the
worker exits. Nothing in the package imports this module: it runs as ``__main__``.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import queue
import signal
import sys
import threading
from typing import BinaryIO

from asynccomp.backends._base import BackendOutput, PreparedCompile
from asynccomp.backends._nvrtc_protocol import (
    CANCEL,
    COMPILE,
    RECEIVED,
    RESULT,
    SEQ,
    read_frame,
    write_frame,
)


class _Current:
    """The job the main thread is compiling, for the reader thread's cancels."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seq = -1
        self.cancel = threading.Event()
        self.early: set[int] = set()  # cancels that came before their job started

    def start(self, seq: int) -> threading.Event:
        with self.lock:
            self.seq, self.cancel = seq, threading.Event()
            if seq in self.early:
                self.early.discard(seq)
                self.cancel.set()
            return self.cancel

    def cancel_if_running(self, seq: int) -> None:
        with self.lock:
            if self.seq == seq:
                self.cancel.set()
            elif seq > self.seq:
                self.early.add(seq)


def _read_requests(
    requests: BinaryIO, jobs: queue.Queue[tuple[int, PreparedCompile] | None], current: _Current
) -> None:
    try:
        while True:
            frame = read_frame(requests)
            if frame is None:
                return
            kind, payload = frame
            if kind == COMPILE:
                seq, prepared = pickle.loads(payload)
                jobs.put((seq, prepared))
            elif kind == CANCEL:
                current.cancel_if_running(SEQ.unpack(payload)[0])
    finally:
        jobs.put(None)


def _die_with_parent() -> None:
    """Linux: be killed when the engine's process dies, even by SIGKILL (otherwise a
    worker would finish its compile first, and only then see its input close)."""
    parent = os.environ.get("ASYNCCOMP_WORKER_PARENT")
    if not sys.platform.startswith("linux") or not parent:
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if str(os.getppid()) != parent:  # the parent died before the line above
        os._exit(1)


_PR_SET_PDEATHSIG = 1


def main() -> int:
    _die_with_parent()
    # Ctrl-C in a terminal is the parent's to handle; it stops workers by closing
    # their input or killing them (they also run in a session of their own).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Import only now: the NVRTC library is loaded once, before the first request.
    from asynccomp.backends._nvrtc_api import compile_prepared

    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    # Nothing else may write to the reply channel.
    sys.stdout = sys.stderr
    jobs: queue.Queue[tuple[int, PreparedCompile] | None] = queue.Queue()
    current = _Current()
    reader = threading.Thread(
        target=_read_requests, args=(requests, jobs, current), daemon=True, name="requests"
    )
    reader.start()
    while True:
        item = jobs.get()
        if item is None:
            return 0
        seq, prepared = item
        cancel = current.start(seq)
        write_frame(replies, RECEIVED, SEQ.pack(seq))
        try:
            out = compile_prepared(prepared, cancel)
        except Exception as exc:  # report, don't die: the parent maps it to a failure
            out = BackendOutput("internal", None, "", f"NVRTC worker error: {exc!r}")
        write_frame(replies, RESULT, pickle.dumps((seq, out), protocol=pickle.HIGHEST_PROTOCOL))


if __name__ == "__main__":
    sys.exit(main())
