"""The state of one pool and the thread that drives it: :class:`Core`.

Everything a pool knows (its workers, its template, its tasks) is changed under one lock,
by the callers' threads (a task queued, cancelled) and by one I/O thread of the pool's
own, which waits on every pipe at once (a selector), writes tasks without ever blocking
(a stopped worker never holds the pool), reads answers, and keeps every deadline: a
worker's start, a task's run, a cancel's grace, a stopped worker, a memory ceiling, idle
release. The lock is never held across a wait, so callers of many threads (a batch each)
share the workers task by task: no lock is held for a batch.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import math
import os
import pickle
import selectors
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from .. import _os
from . import _frames
from ._model import (
    RECEIVE_GRACE,
    SEND_ATTEMPTS,
    STATUS_GRACE,
    WATCH,
    Task,
    Template,
    Worker,
    WorkerState,
    describe_exit,
    wait_status,
)
from ._settings import Outcome, PoolSettings, TaskResult
from ._starts import Starts

__all__ = ("Core", "Task", "describe_exit")


class Core(Starts):
    """See the module's doc; :class:`~asynccomp.workers.WorkerPool` is its face."""

    def __init__(self, settings: PoolSettings) -> None:
        self.settings = settings
        self.owner = os.getpid()
        self.environ, self.path = _os.child_environ(), list(sys.path)  # see Starts.environ
        self.lock = threading.Lock()
        self.queue: collections.deque[Task] = collections.deque()
        self.workers: dict[int, Worker] = {}  # by results fd
        self.dying: list[tuple[Worker, Task | None]] = []  # pipe closed, status awaited
        self.template: Template | None = None
        self.fork = settings.fork and sys.platform.startswith("linux")
        self.counts = collections.Counter[str]()
        self.failed_starts = 0
        self.closed = False
        self.wanted = settings.size if settings.eager else 0  # workers to keep alive
        self.primed = settings.eager  # keep a template ready, workers or not
        self.last_use = time.monotonic()
        self.next_watch = 0.0
        self.requests = itertools.count(1)
        self.watchers: list[Callable[[], None]] = []
        self.ready_waiters: list[Future[None]] = []
        self.exits: dict[int, int] = {}  # wait statuses the template reported, by pid
        self.changed = False
        self.settled: list[tuple[Future[TaskResult], TaskResult]] = []  # set outside the lock
        self.selector = selectors.DefaultSelector()
        self.wake_read, self.wake_write = os.pipe()
        os.set_blocking(self.wake_read, False)
        os.set_blocking(self.wake_write, False)
        self.selector.register(self.wake_read, selectors.EVENT_READ, None)
        self.thread: threading.Thread | None = None

    # -- called by any thread, under the lock --------------------------------------------

    def wake(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(
                target=self._loop, name=f"asynccomp-{self.settings.name}-pool", daemon=True
            )
            self.thread.start()
        with contextlib.suppress(OSError):
            os.write(self.wake_write, b"\0")

    def submit(self, task: Task) -> None:
        self.queue.append(task)
        self.last_use = time.monotonic()
        self.wake()

    def warm(self, waiter: Future[None]) -> None:
        """Start every worker; ``waiter`` is resolved once all are ready."""
        self.wanted = self.settings.size
        self.last_use = time.monotonic()
        self.ready_waiters.append(waiter)
        self.wake()

    def cancel(self, task: Task) -> None:
        if task.future.done() or task.cancelled:
            return
        task.cancelled = True
        if task in self.queue:
            self.queue.remove(task)
            self._resolve(task, TaskResult("cancelled", None))
            return
        worker = next((w for w in self.workers.values() if w.task is task), None)
        if worker is not None:
            worker.outbox += _frames.number(_frames.CANCEL, task.id)
            self._flush(worker)
            worker.deadline = min(worker.deadline, time.monotonic() + self.settings.cancel_grace)
            self.wake()

    def close(self) -> None:
        self.closed = True
        for task in list(self.queue):
            self._resolve(task, TaskResult("crashed", "the worker pool was closed"))
        self.queue.clear()
        for worker in list(self.workers.values()):
            if worker.task is not None:
                self._resolve(worker.task, TaskResult("crashed", "the worker pool was closed"))
            self.drop(worker, None)
        for worker, pending in self.dying:
            self._bury(worker, pending, None)
        self.dying.clear()
        self._end_template()
        self._resolve_waiters(None)
        self.wake()

    # -- the I/O thread ----------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self.lock:
                if self.closed and not self.workers and not self.dying:
                    self.selector.close()
                    for fd in (self.wake_read, self.wake_write):
                        with contextlib.suppress(OSError):
                            os.close(fd)
                    self.thread = None
                    return
                self._step()
                wait = self._wait()
                tell, self.changed = self.changed, False
            self.settle()
            if tell:
                for watcher in list(self.watchers):
                    watcher()
            events = self.selector.select(wait)
            with self.lock:
                for key, mask in events:
                    self._event(key.fileobj, key.data, mask)
                self._check(time.monotonic())
            self.settle()

    def _step(self) -> None:
        """Release idle workers, start what is missing, hand queued tasks out."""
        if self.closed:
            return
        release = self.settings.idle_release
        # Idle: nothing queued, running, starting or awaited (the idle clock starts again
        # as the last start ends: a template importing TVM may outlast the release).
        idle = not self.queue and not self.ready_waiters
        idle = idle and all(w.state is WorkerState.IDLE for w in self.workers.values())
        idle = idle and (self.template is None or self.template.ready)
        if release is not None and idle and time.monotonic() - self.last_use >= release:
            if self.workers or self.template is not None:
                for worker in list(self.workers.values()):
                    self.drop(worker, "released")
                self._end_template()
            self.wanted = 0
            self.primed = False
            return
        for worker in list(self.workers.values()):
            if worker.retire and worker.state is WorkerState.IDLE:
                self.drop(worker, "recycled")
        if self.queue:
            busy = sum(w.state is WorkerState.BUSY for w in self.workers.values())
            self.wanted = max(self.wanted, min(self.settings.size, len(self.queue) + busy))
        self._dispatch()
        self._fill()
        starting = any(w.state is WorkerState.STARTING for w in self.workers.values())
        if self.ready_waiters and len(self.workers) >= self.wanted and not starting:
            self._resolve_waiters(None)

    def _wait(self) -> float | None:
        now = time.monotonic()
        until = math.inf
        for worker in self.workers.values():
            if worker.state is not WorkerState.IDLE:
                until = min(until, worker.deadline, self.next_watch)
        if self.dying:
            until = min(until, now + 0.02)  # a spawned worker's end is not an event here
        if self.template is not None and not self.template.ready:
            until = min(until, self.template.deadline)
        release = self.settings.idle_release
        if release is not None and (self.workers or self.template is not None):
            until = min(until, self.last_use + release)
        return None if until == math.inf else max(0.0, until - now)

    def _event(self, fileobj: Any, data: Any, mask: int) -> None:
        if data is None:  # the wake pipe
            with contextlib.suppress(OSError):
                os.read(self.wake_read, 4096)
        elif isinstance(data, Template):
            if data is self.template:
                self._template_message(data)
        elif isinstance(data, Worker) and self.workers.get(data.results) is data:
            if fileobj == data.tasks:
                self._flush(data)
            else:
                self._read(data)

    def _dispatch(self) -> None:
        idle = [w for w in self.workers.values() if w.state is WorkerState.IDLE]
        while self.queue and idle:
            task = self.queue.popleft()
            worker = self._pick(idle, task.affinity)
            idle.remove(worker)
            worker.state, worker.task = WorkerState.BUSY, task
            task.attempts += 1
            task.received = False
            task.sent = time.monotonic()
            worker.deadline = task.sent + RECEIVE_GRACE  # then its own timeout
            worker.outbox += _frames.encode(_frames.TASK, task.payload)
            self._flush(worker)

    @staticmethod
    def _pick(idle: list[Worker], affinity: str | None) -> Worker:
        """The holder of ``affinity`` first, then a worker holding no tags, then the one
        idle the shortest time."""
        if affinity is not None:
            for worker in reversed(idle):
                if affinity in worker.tags:
                    return worker
        return next((w for w in reversed(idle) if not w.tags), idle[-1])

    def _flush(self, worker: Worker) -> None:
        try:
            while worker.outbox:
                del worker.outbox[: os.write(worker.tasks, worker.outbox)]
        except BlockingIOError:
            if worker.tasks not in self.selector.get_map():
                self.selector.register(worker.tasks, selectors.EVENT_WRITE, worker)
            return
        except OSError:
            worker.outbox.clear()  # it died: its end of file tells
        if worker.tasks in self.selector.get_map():
            self.selector.unregister(worker.tasks)

    def _read(self, worker: Worker) -> None:
        try:
            chunk = os.read(worker.results, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._died(worker)
            return
        for kind, payload in worker.parser.feed(chunk):
            if self.workers.get(worker.results) is not worker:
                return
            self._message(worker, kind, payload)

    def _message(self, worker: Worker, kind: bytes, payload: bytes) -> None:
        if kind == _frames.READY:
            worker.pid = _frames.read_number(payload)
            worker.state, worker.deadline = WorkerState.IDLE, math.inf
            self.last_use = time.monotonic()  # idle from now, not from its start
            self.failed_starts = 0
            self.changed = True
        elif kind == _frames.INIT_ERROR:
            self.drop(worker, None)
            self._init_error(pickle.loads(payload))
        elif kind == _frames.RECEIVED and worker.task is not None:
            task = worker.task
            task.received = True
            worker.deadline = task.sent + (task.timeout if task.timeout is not None else math.inf)
            if task.cancelled:
                worker.deadline = min(
                    worker.deadline, time.monotonic() + self.settings.cancel_grace
                )
        elif kind in (_frames.DONE, _frames.FAILED) and worker.task is not None:
            task, worker.task = worker.task, None
            worker.state, worker.deadline = WorkerState.IDLE, math.inf
            worker.uses += 1
            elapsed = time.monotonic() - task.sent
            if task.cancelled:
                result = TaskResult("cancelled", None, pid=worker.pid, elapsed=elapsed)
            elif kind == _frames.DONE:
                _, value = pickle.loads(payload)
                result = TaskResult("done", value, pid=worker.pid, elapsed=elapsed)
            else:
                _, error, text = pickle.loads(payload)
                result = TaskResult("error", error, text, worker.pid, elapsed)
            self._resolve(task, result)
            s = self.settings
            rss = _os.rss(worker.pid) if s.max_rss is not None and worker.pid else 0
            used_up = s.max_uses is not None and worker.uses >= s.max_uses
            if worker.retire or used_up or (s.max_rss is not None and rss > s.max_rss):
                self.drop(worker, "recycled")

    def _resolve(self, task: Task, result: TaskResult) -> None:
        if result.outcome in ("timeout", "cancelled", "memory"):
            self.counts[result.outcome] += 1
        if not task.future.done():
            self.settled.append((task.future, result))
        self.last_use = time.monotonic()

    def settle(self) -> None:
        """Set the results decided under the lock, outside it (their callbacks may call
        the pool again). Any thread, after it released the lock."""
        with self.lock:
            settled, self.settled = self.settled, []
        for future, result in settled:
            if not future.done():
                future.set_result(result)

    def _died(self, worker: Worker) -> None:
        """Its pipe closed: it is ending. Its task (if it had one that reached it) is
        answered once its exit status is known, or :data:`STATUS_GRACE` later."""
        task, starting = worker.task, worker.state is WorkerState.STARTING
        self._forget(worker)
        if starting:
            self.dying.append((worker, None))
            worker.ends_by = time.monotonic() + STATUS_GRACE
            return
        if task is not None and not task.received and task.attempts < SEND_ATTEMPTS:
            if task.cancelled:
                self._resolve(task, TaskResult("cancelled", None))
            else:
                self.queue.appendleft(task)  # it never reached the worker: another takes it
            task = None
        worker.ends_by = time.monotonic() + STATUS_GRACE
        self.dying.append((worker, task))

    def _bury(self, worker: Worker, task: Task | None, status: int | None) -> None:
        self._kill(worker)
        how = describe_exit(status)
        if not self.closed and worker.state is not WorkerState.STARTING:
            self.counts["crashed"] += 1
        if worker.state is WorkerState.STARTING:
            self._start_failed(
                f"{self.settings.name} workers exit before they are ready ({how}; see "
                "their standard error)"
            )
        elif task is not None and task.cancelled:
            self._resolve(task, TaskResult("cancelled", None, pid=worker.pid))
        elif task is not None:
            why = f"the {self.settings.name} worker process (pid {worker.pid}) {how}"
            self._resolve(task, TaskResult("crashed", why, pid=worker.pid))

    def _forget(self, worker: Worker) -> None:
        for fd in (worker.results, worker.tasks):
            if fd in self.selector.get_map():
                self.selector.unregister(fd)
        self.workers.pop(worker.results, None)
        self.changed = True

    def drop(self, worker: Worker, why: str | None) -> None:
        """Kill ``worker`` with its group and forget it (``why`` is counted). A forked
        worker whose pid is not known yet finds its pipes closed and ends."""
        if why is not None:
            self.counts[why] += 1
        self._forget(worker)
        self._kill(worker)

    def _check(self, now: float) -> None:
        """Every deadline and watch: starts, tasks, cancels, stopped workers, memory."""
        for worker, task in list(self.dying):
            status = (
                wait_status(worker.process)
                if worker.process is not None
                else self.exits.get(worker.pid or 0)
            )
            if status is not None or now >= worker.ends_by:
                self.dying.remove((worker, task))
                self._bury(worker, task, status)
        template = self.template
        if template is not None and not template.ready and now >= template.deadline:
            self._end_template()
            self._start_failed(
                f"the {self.settings.name} template is not ready within start_timeout="
                f"{self.settings.start_timeout} s; do its initializers hang?"
            )
        watch = now >= self.next_watch
        if watch:
            self.next_watch = now + WATCH
        for worker in list(self.workers.values()):
            if worker.state is not WorkerState.IDLE:
                self._check_worker(worker, now, watch)

    def _check_worker(self, worker: Worker, now: float, watch: bool) -> None:
        name = self.settings.name
        stopped = watch and self._stopped(worker, now)
        if worker.state is WorkerState.STARTING:
            if stopped or now >= worker.deadline:
                self.drop(worker, None)
                self._start_failed(
                    f"{name} workers stay stopped (SIGSTOP) as they start"
                    if stopped
                    else f"{name} workers are not ready within start_timeout="
                    f"{self.settings.start_timeout} s; do their initializers hang?"
                )
            return
        task = worker.task
        assert task is not None
        if not task.received and (stopped or now >= worker.deadline):
            self.drop(worker, "crashed")  # it never took the task: another one does
            if task.cancelled or task.attempts >= SEND_ATTEMPTS:
                why = f"{task.attempts} {name} workers in a row did not take the task"
                self._resolve(task, TaskResult("cancelled" if task.cancelled else "crashed", why))
            else:
                self.queue.appendleft(task)
            return
        limit = self.settings.memory_limit
        rss = _os.rss(worker.pid) if watch and limit is not None and worker.pid else 0
        if stopped:
            self.drop(worker, "stopped")
            limit_s = self.settings.stopped_limit
            why = f"the {name} worker (pid {worker.pid}) stayed stopped (SIGSTOP) {limit_s:g} s"
            result = TaskResult("crashed", why, pid=worker.pid)
        elif limit is not None and rss > limit:
            self.drop(worker, None)
            why = (
                f"the {name} worker (pid {worker.pid}) used {rss >> 20} MiB, over its "
                f"memory_limit of {limit >> 20} MiB, and was killed"
            )
            result = TaskResult("memory", why, pid=worker.pid)
        elif now >= worker.deadline:
            self.drop(worker, None)
            outcome: Outcome = "cancelled" if task.cancelled else "timeout"
            result = TaskResult(outcome, None, pid=worker.pid, elapsed=now - task.sent)
        else:
            return
        self._resolve(task, result)

    def _stopped(self, worker: Worker, now: float) -> bool:
        if worker.pid is None or not _os.stopped(worker.pid):
            worker.stopped_since = None
            return False
        if worker.stopped_since is None:
            worker.stopped_since = now
        return now - worker.stopped_since >= self.settings.stopped_limit
