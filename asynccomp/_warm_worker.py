"""A warm worker: ``python -m asynccomp._warm_worker TASKS_FD RESULTS_FD PARENT_PID``.

Started by :class:`asynccomp._warm_pool.WarmPool` as the leader of a session of its own
(so a terminal's Ctrl-C reaches the pool's owner, never a build half done, and a kill of
the group takes whatever the worker started below it). Every message is a frame: 8 bytes
of length, then a pickle (:func:`dumps`). The first frame it reads holds the initializers, run once
as it starts; it answers ``("ready", pid)`` (or ``("init_error", traceback)``), then one
``("done", value)`` or ``("error", traceback)`` per ``(fn, args)`` task, until its tasks'
pipe closes.

It dies with its parent, however the parent ends: a thread waits on a pidfd of the
parent (readable once every thread of it has ended, as nvcc's guard does in
:mod:`asynccomp.backends._nvcc_guard`) and kills the worker's whole group.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import sys
import threading
import time
import traceback
from typing import IO, Any

_HEADER = struct.Struct("<Q")
_POLL = 0.5  # how often the parent is looked for where pidfds are missing


def _watch_parent(parent: int) -> None:
    try:
        watch: int | None = os.pidfd_open(parent)
    except (AttributeError, OSError):
        watch = None
    if os.getppid() != parent:  # gone before the pidfd was taken
        os.killpg(0, signal.SIGKILL)
    while True:
        if watch is not None:
            select.select([watch], [], [])
        else:
            time.sleep(_POLL)
            if os.getppid() == parent:
                continue
        os.killpg(0, signal.SIGKILL)


def read_frame(stream: IO[bytes]) -> bytes | None:
    """One frame's payload, ``None`` at the end of the stream."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    payload = stream.read(size)
    return payload if len(payload) == size else None


def frame(payload: bytes) -> bytes:
    return _HEADER.pack(len(payload)) + payload


def dumps(value: object) -> bytes:
    """By cloudpickle where it is installed (TVM's extra has it: functions defined
    anywhere travel), else by pickle (functions of importable modules, by name: enough
    for the pool itself, which needs no TVM). Either loads with :func:`pickle.loads`."""
    try:
        import cloudpickle
    except ImportError:
        return pickle.dumps(value)
    return cloudpickle.dumps(value)  # type: ignore[no-any-return]


def _send(stream: IO[bytes], message: Any) -> None:
    stream.write(frame(dumps(message)))
    stream.flush()


def main(argv: list[str]) -> int:
    tasks_fd, results_fd, parent = (int(arg) for arg in argv)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    tasks = os.fdopen(tasks_fd, "rb")
    results = os.fdopen(results_fd, "wb")
    payload = read_frame(tasks)
    if payload is None:
        return 0
    try:
        for initializer in pickle.loads(payload):
            initializer()
    except BaseException:
        _send(results, ("init_error", traceback.format_exc()))
        return 1
    _send(results, ("ready", os.getpid()))
    while (payload := read_frame(tasks)) is not None:
        try:
            fn, args = pickle.loads(payload)
            message: tuple[str, Any] = ("done", fn(*args))
        except Exception:  # a failed task is its result; the worker serves on
            message = ("error", traceback.format_exc())
        _send(results, message)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
