"""A worker process: ``python -m asynccomp.workers._child TASKS_FD RESULTS_FD OWNER NAME``,
or :func:`serve` in a process forked from a template (:mod:`._template`).

It leads a session of its own (a terminal's Ctrl-C is the owner's to handle, and a kill
of the group takes whatever the worker started below it), dies with its owner
(:func:`._watch.die_with`), and speaks the frames of :mod:`._frames`: the first it reads
is ``INIT`` (environment and initializers, run once), answered ``READY`` (or
``INIT_ERROR``); then for each ``TASK``: ``RECEIVED`` at once, then ``DONE`` or
``FAILED``. A reader thread takes frames off the pipe so that a ``CANCEL`` reaches the
running task (:func:`cancel_event`) while it runs in the main thread.

Nothing a task does ends the worker but a crash: an exception (``SystemExit`` included),
an exception that does not pickle, a value that does not pickle, each becomes that
task's ``FAILED`` (a :class:`~asynccomp.TaskFailed` where the original cannot travel).
"""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import sys
import threading
import traceback
from typing import Any

from . import _frames
from ._sharing import OWN_VARIABLES
from ._watch import die_with

__all__ = ("cancel_event", "name_process", "serve", "template_pid")

_PR_SET_NAME = 15


class _Running:
    """The task the main thread runs, for the reader thread's cancels."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.task = -1
        self.cancel = threading.Event()
        self.early: set[int] = set()  # cancels that came before their task started

    def start(self, task: int) -> None:
        with self.lock:
            self.task, self.cancel = task, threading.Event()
            if task in self.early:
                self.early.discard(task)
                self.cancel.set()

    def cancel_task(self, task: int) -> None:
        with self.lock:
            if task == self.task:
                self.cancel.set()
            elif task > self.task:
                self.early.add(task)


_running = _Running()
_template: int | None = None  # set by serve() in a worker forked from a template


def template_pid() -> int | None:
    """The template this worker was forked from (its pid), ``None`` in a worker that
    was spawned or outside a worker. Forks of one template have what it loaded at the
    same addresses, so they can share what only one process could use otherwise
    (NVRTC's precompiled headers: :mod:`asynccomp.backends._nvrtc_shared_pch`)."""
    return _template


def cancel_event() -> threading.Event:
    """The running task's cancel: set when its pool cancels it (its caller was
    cancelled, or its deadline passed). A task that can stop early (NVRTC's flow
    callback) watches it; one that does not is killed with its worker after the pool's
    grace."""
    return _running.cancel


def name_process(name: str) -> None:
    """The process's name as ``ps``/``top`` and psutil's ``name()`` show it (15 bytes)."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _failure(task: int, exc: BaseException) -> bytes:
    """A ``FAILED`` frame: the exception itself where it pickles and loads back, else a
    :class:`~asynccomp.TaskFailed` with its type, text and traceback."""
    from ..errors import TaskFailed

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        payload = _frames.dumps((task, exc, text))
        _frames.loads(payload)
    except Exception:
        portable = TaskFailed(
            f"{type(exc).__name__}: {exc}", type_name=type(exc).__name__, traceback=text
        )
        payload = _frames.dumps((task, portable, text))
    return _frames.encode(_frames.FAILED, payload)


def _result(task: int, value: object) -> bytes:
    from ..errors import TaskFailed

    try:
        return _frames.encode(_frames.DONE, _frames.dumps((task, value)))
    except Exception as exc:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        problem = TaskFailed(
            f"the task's result ({type(value).__name__}) cannot be sent back: "
            f"{type(exc).__name__}: {exc}",
            type_name=type(exc).__name__,
            traceback=text,
        )
        return _frames.encode(_frames.FAILED, _frames.dumps((task, problem, text)))


def _read(tasks: Any, work: queue.SimpleQueue[tuple[int, Any, Any] | None]) -> None:
    try:
        while (frame := _frames.read_frame(tasks)) is not None:
            kind, payload = frame
            if kind == _frames.TASK:
                work.put(_frames.loads(payload))
            elif kind == _frames.CANCEL:
                _running.cancel_task(_frames.read_number(payload))
    finally:
        work.put(None)  # the pool is gone or closed the pipe: the worker ends


def serve(
    tasks_fd: int, results_fd: int, owner: int, name: str, template: int | None = None
) -> int:
    """The worker's life; returns its exit status. ``template``: the pid of the
    template it was forked from (:func:`template_pid`)."""
    global _template
    _template = template
    die_with(owner)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    name_process(f"acw-{name}")
    tasks = os.fdopen(tasks_fd, "rb")
    results = os.fdopen(results_fd, "wb")
    frame = _frames.read_frame(tasks)
    if frame is None or frame[0] != _frames.INIT:
        return 0
    try:
        environ, initializers = _frames.loads(frame[1])
        if template is not None:  # asynccomp's variables are its pool's, not the template's
            for name in [k for k in os.environ if k.startswith(OWN_VARIABLES) and k not in environ]:
                del os.environ[name]
        os.environ.update(environ)
        import tempfile

        tempfile.tempdir = None  # $TMPDIR may have changed
        for initializer in initializers:
            initializer()
    except BaseException:
        results.write(_frames.encode(_frames.INIT_ERROR, _frames.dumps(traceback.format_exc())))
        results.flush()
        return 1
    results.write(_frames.number(_frames.READY, os.getpid()))
    results.flush()
    work: queue.SimpleQueue[tuple[int, Any, Any] | None] = queue.SimpleQueue()
    threading.Thread(target=_read, args=(tasks, work), name="tasks", daemon=True).start()
    while (item := work.get()) is not None:
        task, fn, args = item
        _running.start(task)
        results.write(_frames.number(_frames.RECEIVED, task))
        results.flush()
        try:
            reply = _result(task, fn(*args))
        except BaseException as exc:  # a task's failure is its result: the worker serves on
            reply = _failure(task, exc)
        results.write(reply)
        results.flush()
    return 0


if __name__ == "__main__":  # started with start_new_session: it leads its own
    tasks_arg, results_arg, owner_arg, name_arg = sys.argv[1:5]
    sys.exit(serve(int(tasks_arg), int(results_arg), int(owner_arg), name_arg))
