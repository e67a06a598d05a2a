"""Warm worker processes that outlive a batch: :class:`WarmPool`.

What MetaSchedule's ``LocalBuilder`` lacks (a fresh ``PopenPoolExecutor`` per batch, each
worker importing TVM and its tensor intrinsics inside its first candidate's timeout), kept
generic so that any facade with a slow import can use it:

- workers (:mod:`asynccomp._warm_worker`, spawned interpreters, each the leader of a
  session of its own) start when the pool is made and run the initializers once; one
  not ready within ``start_timeout`` seconds is killed and counts as a failed start;
- a task goes only to a worker that is ready, and its deadline starts when it is sent: a
  task's timeout counts its own run, never queueing or a worker's start-up;
- a worker that passes its deadline is killed with its group, one that crashes is reaped;
  only its task fails, and a replacement starts at once, ahead of the next task;
- a worker is recycled after ``max_uses`` tasks or once its resident memory passes
  ``max_rss`` bytes (TVM's popen workers leak, apache/tvm#11096), a replacement started
  as it goes;
- a worker that stays stopped (SIGSTOP) for ``STOPPED_LIMIT`` seconds while the pool
  waits on it is lost, as a crashed one, even with no ``timeout``; the pool writes to
  workers without blocking, so a stopped one never holds it either;
- with no task for ``idle_release`` seconds (from the pool's making or the last
  :meth:`map`) every worker ends; the next :meth:`map` starts them again;
- :meth:`close`, an exception (Ctrl-C included) out of :meth:`map`, the pool's garbage
  collection or the interpreter's exit kill every worker's group, and each worker kills
  its own group if the pool's process dies first.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import enum
import math
import os
import pickle
import selectors
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Literal

from . import _os
from ._warm_worker import dumps, frame
from .errors import WorkerStartFailed

Outcome = Literal["done", "error", "timeout", "crashed"]

# A worker that ends before it is ready this many times in a row (with no worker ready
# in between) means the initializers cannot run here: say so rather than respawn forever.
_START_ATTEMPTS = 3

#: Default ``start_timeout``: room for TVM's imports (13-20 s of CPU) on a loaded machine.
START_TIMEOUT = 300.0
#: A worker stopped by a signal for this long while the pool waits on it is lost.
STOPPED_LIMIT = 10.0
# How often the pool looks at the workers it waits on (for a stop) when nothing else
# wakes it; and how long it waits for a killed worker to be reaped (one in the kernel's
# uninterruptible sleep dies only once that ends: not worth holding the pool for).
_WATCH = 1.0
_REAP = 30.0


@dataclasses.dataclass(frozen=True)
class TaskResult:
    """What became of one task: ``value`` is its return value (``done``), the worker's
    traceback (``error``), or ``None`` (``timeout``, ``crashed``)."""

    outcome: Outcome
    value: Any


class _State(enum.Enum):
    STARTING = "starting"
    IDLE = "idle"
    BUSY = "busy"


@dataclasses.dataclass(eq=False)
class _Worker:
    process: subprocess.Popen[bytes]
    tasks: int  # fd, non-blocking: the pool writes tasks here
    results: int  # fd, non-blocking: the pool reads results here
    deadline: float  # STARTING: its start's, BUSY: its task's (math.inf: none)
    state: _State = _State.STARTING
    uses: int = 0
    task: int | None = None
    buffer: bytearray = dataclasses.field(default_factory=bytearray)  # read, not yet parsed
    outbox: bytearray = dataclasses.field(default_factory=bytearray)  # not yet written
    stopped_since: float | None = None


@dataclasses.dataclass(frozen=True)
class PoolStatistics:
    started: int  # workers started over the pool's life
    timed_out: int
    crashed: int  # stopped ones included
    start_timed_out: int  # workers not ready within start_timeout
    recycled: int
    released: int  # workers ended by idle release
    alive: int


def _kill(worker: _Worker) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(worker.process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        worker.process.wait(_REAP)
    for fd in (worker.tasks, worker.results):
        with contextlib.suppress(OSError):
            os.close(fd)


def _kill_all(workers: dict[int, _Worker]) -> None:
    for worker in list(workers.values()):
        _kill(worker)
    workers.clear()


class WarmPool:
    """``workers`` warm processes running ``(fn, args)`` tasks; see the module's docstring.

    ``initializers`` and every task's function and arguments travel by cloudpickle
    (without it, by pickle: functions of importable modules only), so functions of
    importable modules go by name. ``timeout`` is each task's own limit in seconds
    (``None``: none), ``start_timeout`` each worker's to get ready, ``max_uses`` and
    ``max_rss`` recycle a worker (``None``: never), ``idle_release`` ends idle workers
    after that many seconds (``None``: never).
    """

    def __init__(
        self,
        workers: int,
        initializers: Sequence[Callable[[], object]] = (),
        *,
        timeout: float | None = None,
        max_uses: int | None = None,
        max_rss: int | None = None,
        idle_release: float | None = None,
        start_timeout: float | None = START_TIMEOUT,
    ) -> None:
        if workers < 1:
            raise ValueError(f"a warm pool needs at least one worker, not {workers}")
        self._size = workers
        self._init = frame(dumps(list(initializers)))
        self._timeout = timeout
        self._start_timeout = start_timeout
        self._failed_starts = 0  # in a row, with no worker ready in between
        self._max_uses = max_uses
        self._max_rss = max_rss
        self._idle_release = idle_release
        self._lock = threading.RLock()
        self._workers: dict[int, _Worker] = {}  # by results fd
        self._selector = selectors.DefaultSelector()
        self._idle_timer: threading.Timer | None = None
        self._closed = False
        self._counts = collections.Counter[str]()
        self._finalizer = weakref.finalize(self, _kill_all, self._workers)
        self._fill()
        self._start_idle_timer()  # a pool never used holds no worker forever either

    # -- the public calls ------------------------------------------------------------

    def map(
        self,
        fn: Callable[..., Any],
        tasks: Sequence[tuple[Any, ...]],
        on_result: Callable[[int, TaskResult], None] | None = None,
    ) -> list[TaskResult]:
        """Run ``fn(*args)`` for every ``args`` on the warm workers; results in order.

        ``on_result(index, result)``, if given, is called in this thread as each task
        ends (in completion order), so a caller can act on early results while later
        tasks still run; an exception it raises ends the batch as any other would."""
        payloads = [frame(dumps((fn, args))) for args in tasks]
        with self._lock:
            if self._closed:
                raise RuntimeError("this warm pool is closed")
            self._cancel_idle_timer()
            try:
                self._fill()
                results = self._run(payloads, on_result)
            except BaseException:
                self.close()
                raise
            self._start_idle_timer()
            return results

    def pids(self) -> list[int]:
        """The process ids of the workers alive now, ready or starting."""
        with self._lock:
            return [worker.process.pid for worker in self._workers.values()]

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until every worker is ready (``False`` if ``timeout`` passes first;
        :class:`WorkerStartFailed`, the pool closed, if they cannot start)."""
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        with self._lock:
            try:
                while any(w.state is _State.STARTING for w in self._workers.values()):
                    if deadline - time.monotonic() <= 0:
                        return False
                    self._poll(self._wait(deadline), [])
                    self._check([])
                return True
            except BaseException:
                self.close()
                raise

    def statistics(self) -> PoolStatistics:
        with self._lock:
            return PoolStatistics(
                started=self._counts["started"],
                timed_out=self._counts["timeout"],
                crashed=self._counts["crashed"] + self._counts["stopped"],
                start_timed_out=self._counts["start_timeout"],
                recycled=self._counts["recycled"],
                released=self._counts["released"],
                alive=len(self._workers),
            )

    def close(self) -> None:
        """Kill every worker (idempotent)."""
        with self._lock:
            self._closed = True
            self._cancel_idle_timer()
            for worker in list(self._workers.values()):
                self._drop(worker)
            self._selector.close()

    # -- workers ----------------------------------------------------------------------

    def _fill(self) -> None:
        while len(self._workers) < self._size:
            self._spawn()

    def _spawn(self) -> None:
        tasks_read, tasks_write = os.pipe()
        results_read, results_write = os.pipe()
        try:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "asynccomp._warm_worker",
                    *(str(arg) for arg in (tasks_read, results_write, os.getpid())),
                ],
                pass_fds=(tasks_read, results_write),
                # The asynccomp this process runs, however it was found (a checkout put
                # on sys.path imports in the worker too, not another one installed).
                env=_os.child_environ(),
                start_new_session=True,
            )
        except BaseException:
            for fd in (tasks_read, tasks_write, results_read, results_write):
                os.close(fd)
            raise
        os.close(tasks_read)
        os.close(results_write)
        os.set_blocking(results_read, False)
        os.set_blocking(tasks_write, False)
        start = math.inf if self._start_timeout is None else self._start_timeout
        worker = _Worker(process, tasks_write, results_read, time.monotonic() + start)
        self._workers[results_read] = worker
        self._selector.register(results_read, selectors.EVENT_READ, worker)
        self._counts["started"] += 1
        worker.outbox += self._init
        self._flush(worker)  # if it died already, its end of file tells

    def _flush(self, worker: _Worker) -> bool:
        """Write what the pipe takes of ``worker``'s outbox, the rest when it is writable
        (a stopped worker never holds the pool); ``False`` if it is dead."""
        try:
            while worker.outbox:
                del worker.outbox[: os.write(worker.tasks, worker.outbox)]
        except BlockingIOError:
            if worker.tasks not in self._selector.get_map():
                self._selector.register(worker.tasks, selectors.EVENT_WRITE, worker)
            return True
        except OSError:
            worker.outbox.clear()
            ok = False
        else:
            ok = True
        if worker.tasks in self._selector.get_map():
            self._selector.unregister(worker.tasks)
        return ok

    def _drop(self, worker: _Worker) -> None:
        for fd in (worker.results, worker.tasks):
            if fd in self._selector.get_map():
                self._selector.unregister(fd)
        del self._workers[worker.results]
        _kill(worker)

    def _replace(self, worker: _Worker, why: str) -> None:
        self._counts[why] += 1
        self._drop(worker)
        if not self._closed:
            self._spawn()

    def _release(self, timer: list[threading.Timer]) -> None:
        with self._lock:
            # A timer that fired while a batch held the lock is no longer the pool's.
            if self._closed or self._idle_timer is not timer[0]:
                return
            self._idle_timer = None
            for worker in list(self._workers.values()):
                self._counts["released"] += 1
                self._drop(worker)

    def _cancel_idle_timer(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _start_idle_timer(self) -> None:
        if self._idle_release is not None:
            holder: list[threading.Timer] = []
            holder.append(threading.Timer(self._idle_release, self._release, (holder,)))
            self._idle_timer = holder[0]
            self._idle_timer.daemon = True
            self._idle_timer.start()

    # -- running tasks ----------------------------------------------------------------

    def _run(
        self,
        payloads: list[bytes],
        on_result: Callable[[int, TaskResult], None] | None = None,
    ) -> list[TaskResult]:
        results: list[TaskResult | None] = [None] * len(payloads)
        reported = [False] * len(payloads)
        queue = collections.deque(range(len(payloads)))
        while queue or any(w.state is _State.BUSY for w in self._workers.values()):
            for worker in [w for w in self._workers.values() if w.state is _State.IDLE]:
                if not queue:
                    break
                task = queue.popleft()
                if not self._send(worker, task, payloads[task]):
                    queue.appendleft(task)  # it died idle: the task never started
            self._poll(self._wait(), results)
            self._check(results)
            if on_result is not None:
                for index, result in enumerate(results):
                    if result is not None and not reported[index]:
                        reported[index] = True
                        on_result(index, result)
        return [result for result in results if result is not None]

    def _wait(self, deadline: float = math.inf) -> float | None:
        """How long the pool may sleep: until the nearest start or task deadline, and no
        longer than ``_WATCH`` while a worker it waits on may be stopped."""
        waiting = [w for w in self._workers.values() if w.state is not _State.IDLE]
        until = min([deadline, *(w.deadline for w in waiting)])
        if waiting:
            until = min(until, time.monotonic() + _WATCH)
        return None if until == math.inf else max(0.0, until - time.monotonic())

    def _check(self, results: list[TaskResult | None]) -> None:
        """Replace the workers past their start or task deadline, or stopped too long
        (read what they sent first: :meth:`_poll` runs before)."""
        now = time.monotonic()
        for worker in list(self._workers.values()):
            if worker.state is _State.IDLE:
                continue
            if not _os.stopped(worker.process.pid):
                worker.stopped_since = None
            elif worker.stopped_since is None:
                worker.stopped_since = now
            stopped = worker.stopped_since is not None and (
                now - worker.stopped_since >= STOPPED_LIMIT
            )
            if not stopped and now < worker.deadline:
                continue
            if worker.state is _State.STARTING:
                why = "stopped" if stopped else "start_timeout"
                self._start_failed(
                    worker,
                    why,
                    f"warm workers stay stopped (SIGSTOP) for {STOPPED_LIMIT} s as they start"
                    if stopped
                    else f"warm workers are not ready within start_timeout="
                    f"{self._start_timeout} s; their initializers hang?",
                )
            else:
                if worker.task is not None:
                    outcome: Outcome = "crashed" if stopped else "timeout"
                    results[worker.task] = TaskResult(outcome, None)
                self._replace(worker, "stopped" if stopped else "timeout")

    def _start_failed(self, worker: _Worker, why: str, message: str) -> None:
        self._failed_starts += 1
        if self._failed_starts >= _START_ATTEMPTS:
            self._failed_starts = 0
            self._counts[why] += 1
            self._drop(worker)
            raise WorkerStartFailed(f"{message} ({_START_ATTEMPTS} in a row)")
        self._replace(worker, why)

    def _send(self, worker: _Worker, task: int, payload: bytes) -> bool:
        """Hand ``task`` to an idle worker; ``False`` if it turns out to be dead."""
        worker.state, worker.task = _State.BUSY, task
        timeout = math.inf if self._timeout is None else self._timeout
        worker.deadline = time.monotonic() + timeout
        worker.outbox += payload
        if not self._flush(worker):
            worker.task = None
            self._replace(worker, "crashed")
            return False
        return True

    def _poll(self, wait: float | None, results: list[TaskResult | None]) -> None:
        for key, _ in self._selector.select(wait):
            worker: _Worker = key.data
            if self._workers.get(worker.results) is not worker:
                continue  # replaced by an earlier event of this round
            if key.fd == worker.tasks:
                self._flush(worker)  # a dead worker's end of file tells
                continue
            try:
                chunk = os.read(worker.results, 1 << 20)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:  # it ended
                if worker.state is _State.STARTING:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        worker.process.wait(_REAP)  # it closed its end: it is ending
                    self._start_failed(
                        worker,
                        "crashed",
                        f"warm workers exit before they are ready (status "
                        f"{worker.process.returncode}); see their standard error",
                    )
                    continue
                if worker.task is not None:
                    results[worker.task] = TaskResult("crashed", None)
                self._replace(worker, "crashed")
                continue
            worker.buffer += chunk
            while len(worker.buffer) >= 8:
                size = int.from_bytes(worker.buffer[:8], "little")
                if len(worker.buffer) < 8 + size:
                    break
                kind, value = pickle.loads(bytes(worker.buffer[8 : 8 + size]))
                del worker.buffer[: 8 + size]
                if kind == "init_error":
                    self._drop(worker)
                    raise WorkerStartFailed(f"a warm worker's initializer failed:\n{value}")
                if kind == "ready":
                    worker.state = _State.IDLE
                    self._failed_starts = 0
                    continue
                if worker.task is not None:
                    results[worker.task] = TaskResult(kind, value)
                worker.state, worker.task = _State.IDLE, None
                worker.uses += 1
                if (self._max_uses is not None and worker.uses >= self._max_uses) or (
                    self._max_rss is not None and _os.rss(worker.process.pid) > self._max_rss
                ):
                    self._replace(worker, "recycled")
                    break
