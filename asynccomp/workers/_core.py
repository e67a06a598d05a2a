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
import dataclasses
import enum
import itertools
import math
import os
import pickle
import select
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from .. import _os
from ..errors import WorkerStartFailed
from . import _frames
from ._settings import Outcome, PoolSettings, PoolStatistics, TaskResult

__all__ = ("Core", "Task", "describe_exit")

# A worker (or template) that ends before it is ready this many times in a row means the
# initializers cannot run here: say so rather than start one forever.
START_ATTEMPTS = 3
# A task whose worker died before receiving it goes to another worker, this many times.
SEND_ATTEMPTS = 3
# How long a task sent to an idle worker may take to reach it (its RECEIVED comes at
# once from a live worker): one that does not answer (stopped idle) is killed, and the
# task goes to another.
RECEIVE_GRACE = 5.0
# How often busy and starting workers are looked at (stopped by a signal, memory).
WATCH = 1.0
# How long a worker whose pipe closed may take to be seen ended (its exit status tells
# how it died), and how long a killed spawned worker may take to be reaped.
STATUS_GRACE = 2.0
REAP = 10.0


class _State(enum.Enum):
    STARTING = "starting"
    IDLE = "idle"
    BUSY = "busy"


@dataclasses.dataclass(eq=False)
class Task:
    """One call of ``fn(*args)``: its pickled form, limits, and the future of its result."""

    id: int
    payload: bytes
    timeout: float | None
    affinity: str | None
    future: Future[TaskResult] = dataclasses.field(default_factory=Future)
    attempts: int = 0
    sent: float = 0.0
    received: bool = False
    cancelled: bool = False


@dataclasses.dataclass(eq=False)
class _Worker:
    tasks: int  # fd, non-blocking: tasks go here
    results: int  # fd, non-blocking: answers come here
    deadline: float  # STARTING: its start's; BUSY: its task's (inf: none)
    process: subprocess.Popen[bytes] | None  # spawned; None: forked by the template
    folder: Path | None
    request: int = 0  # forked: the fork request's number
    pid: int | None = None
    state: _State = _State.STARTING
    task: Task | None = None
    uses: int = 0
    tags: list[str] = dataclasses.field(default_factory=list)
    retire: bool = False
    parser: _frames.Parser = dataclasses.field(default_factory=_frames.Parser)
    outbox: bytearray = dataclasses.field(default_factory=bytearray)
    stopped_since: float | None = None
    ends_by: float = math.inf  # its pipe closed: seen ended by then


@dataclasses.dataclass(eq=False)
class _Template:
    control: socket.socket
    process: subprocess.Popen[bytes]
    deadline: float
    ready: bool = False


def describe_exit(status: int | None) -> str:
    """How a process ended, from its wait status (``None``: unknown)."""
    if status is None:
        return "ended (its exit status is unknown)"
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"was killed by {signal.Signals(number).name}"
        except ValueError:
            return f"was killed by signal {number}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def _wait_status(process: subprocess.Popen[bytes]) -> int | None:
    code = process.poll()
    if code is None:
        return None
    return (-code) & 0x7F if code < 0 else (code & 0xFF) << 8


class Core:
    """See the module's doc; :class:`~asynccomp.workers.WorkerPool` is its face."""

    def __init__(self, settings: PoolSettings) -> None:
        self.settings = settings
        self.owner = os.getpid()
        self.lock = threading.Lock()
        self.queue: collections.deque[Task] = collections.deque()
        self.workers: dict[int, _Worker] = {}  # by results fd
        self.dying: list[tuple[_Worker, Task | None]] = []  # pipe closed, status awaited
        self.template: _Template | None = None
        self.fork = settings.fork and sys.platform.startswith("linux")
        self.counts = collections.Counter[str]()
        self.failed_starts = 0
        self.closed = False
        self.wanted = settings.size if settings.eager else 0  # workers to keep alive
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

    def statistics(self) -> PoolStatistics:
        c = self.counts
        return PoolStatistics(
            started=c["started"],
            forked=c["forked"],
            timed_out=c["timeout"],
            crashed=c["crashed"] + c["stopped"],
            start_failed=c["start_failed"],
            recycled=c["recycled"],
            released=c["released"],
            cancelled=c["cancelled"],
            over_memory=c["memory"],
            alive=len(self.workers),
            busy=sum(w.state is _State.BUSY for w in self.workers.values()),
            queued=len(self.queue),
            template=self.template is not None and self.template.ready,
        )

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

    def abandon(self) -> None:
        """In a forked child: forget the parent's processes (they are its, not ours)."""
        for worker in [*self.workers.values(), *(w for w, _ in self.dying)]:
            for fd in (worker.tasks, worker.results):
                with contextlib.suppress(OSError):
                    os.close(fd)
        if self.template is not None:
            self.template.control.close()
        for fd in (self.wake_read, self.wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.workers.clear()
        self.dying.clear()
        self.template = None
        self.closed = True

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
        idle = not self.queue and all(w.state is not _State.BUSY for w in self.workers.values())
        if release is not None and idle and time.monotonic() - self.last_use >= release:
            if self.workers or self.template is not None:
                for worker in list(self.workers.values()):
                    self.drop(worker, "released")
                self._end_template()
            self.wanted = 0
            return
        for worker in list(self.workers.values()):
            if worker.retire and worker.state is _State.IDLE:
                self.drop(worker, "recycled")
        if self.queue:
            busy = sum(w.state is _State.BUSY for w in self.workers.values())
            self.wanted = max(self.wanted, min(self.settings.size, len(self.queue) + busy))
        self._dispatch()
        self._fill()
        starting = any(w.state is _State.STARTING for w in self.workers.values())
        if self.ready_waiters and len(self.workers) >= self.wanted and not starting:
            self._resolve_waiters(None)

    def _wait(self) -> float | None:
        now = time.monotonic()
        until = math.inf
        for worker in self.workers.values():
            if worker.state is not _State.IDLE:
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
        elif isinstance(data, _Template):
            if data is self.template:
                self._template_message(data)
        elif isinstance(data, _Worker) and self.workers.get(data.results) is data:
            if fileobj == data.tasks:
                self._flush(data)
            else:
                self._read(data)

    # -- starting ----------------------------------------------------------------------

    def _fill(self) -> None:
        if self.fork and self.template is None and len(self.workers) < self.wanted:
            self._start_template()
        if self.template is not None and not self.template.ready:
            return  # workers are forked from it once it is ready
        # Each failed start counts; the third in a row lowers ``wanted``: this ends.
        while len(self.workers) < self.wanted:
            self._start_worker()

    def _command(self, module: str, *args: object) -> list[str]:
        return [self.settings.python, "-m", f"asynccomp.workers.{module}", *map(str, args)]

    def _start_template(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            process = subprocess.Popen(
                self._command("_template", theirs.fileno(), self.owner, self.settings.name),
                pass_fds=(theirs.fileno(),),
                env={**_os.child_environ(), **self.settings.environ},
                cwd=self.settings.cwd,
                start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            self.fork = False  # spawn workers instead
            self._start_failed(f"no {self.settings.name} template could be started: {exc}")
            return
        finally:
            theirs.close()
        start = self.settings.start_timeout
        self.template = _Template(ours, process, time.monotonic() + (start or math.inf))
        self.selector.register(ours, selectors.EVENT_READ, self.template)
        with contextlib.suppress(OSError):  # it died: its end of file tells
            ours.send(_frames.dumps(("init", list(self.settings.initializers))))

    def _end_template(self) -> int | None:
        """Kill the template; its wait status."""
        template, self.template = self.template, None
        if template is None:
            return None
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(template.control)
        template.control.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(template.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            template.process.wait(REAP)
        return _wait_status(template.process)

    def _template_message(self, template: _Template) -> None:
        try:
            data = template.control.recv(1 << 20)
        except OSError:
            data = b""
        if not data:  # it ended: the next worker needs a new one
            status = self._end_template()
            if not template.ready:
                self._start_failed(
                    f"the {self.settings.name} template exited before it was ready "
                    f"({describe_exit(status)}; see its standard error)"
                )
            return
        message = pickle.loads(data)
        if message[0] == "ready":
            template.ready = True
            self.failed_starts = 0
            if not message[2]:  # threads after the initializers: no fork is safe
                self.fork = False
                self._end_template()
        elif message[0] == "init_error":
            self._end_template()
            self._init_error(message[1])
        elif message[0] == "forked":
            for worker in list(self.workers.values()):
                if worker.request == message[1] and message[2] > 0:
                    worker.pid = message[2]
                elif worker.request == message[1]:  # the template cannot fork: spawn
                    self.fork = False
                    self.drop(worker, None)
                    self._end_template()
        elif message[0] == "exit":
            self.exits[message[1]] = message[2]
            if len(self.exits) > 1000:  # statuses nobody asked for
                self.exits.pop(next(iter(self.exits)))

    def _start_worker(self) -> bool:
        """Start one worker (forked or spawned); ``False`` when none could start."""
        folder = self.settings.folder() if self.settings.folder is not None else None
        environ = dict(self.settings.environ)
        if folder is not None:
            environ["TMPDIR"] = str(folder)
        tasks_read, tasks_write = os.pipe()
        results_read, results_write = os.pipe()
        theirs = (tasks_read, results_write)
        start = self.settings.start_timeout
        process = None
        try:
            if self.template is None:
                process = subprocess.Popen(
                    self._command("_child", *theirs, self.owner, self.settings.name),
                    pass_fds=theirs,
                    env={**_os.child_environ(), **environ},
                    cwd=self.settings.cwd,
                    start_new_session=True,
                )
        except OSError as exc:
            for fd in (*theirs, tasks_write, results_read):
                os.close(fd)
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
            self._start_failed(f"no {self.settings.name} worker could be started: {exc}")
            return False
        worker = _Worker(
            tasks_write, results_read, time.monotonic() + (start or math.inf), process, folder
        )
        initializers = list(self.settings.initializers)
        if process is not None:
            worker.pid = process.pid
        else:
            assert self.template is not None
            worker.request = next(self.requests)
            request = _frames.dumps(("fork", worker.request))
            with contextlib.suppress(OSError):  # the template died: the start fails
                socket.send_fds(self.template.control, [request], list(theirs))
            self.counts["forked"] += 1
            initializers = []  # the template ran them
        for fd in theirs:
            os.close(fd)
        os.set_blocking(results_read, False)
        os.set_blocking(tasks_write, False)
        self.workers[results_read] = worker
        self.selector.register(results_read, selectors.EVENT_READ, worker)
        self.counts["started"] += 1
        self.changed = True
        worker.outbox += _frames.encode(_frames.INIT, _frames.dumps((environ, initializers)))
        self._flush(worker)
        return True

    def _start_failed(self, message: str) -> None:
        """A start failed; the third in a row fails every task waiting (the pool stays
        usable: the next task tries again)."""
        self.failed_starts += 1
        self.counts["start_failed"] += 1
        if self.failed_starts >= START_ATTEMPTS:
            self.failed_starts = 0
            self._give_up(WorkerStartFailed(f"{message} ({START_ATTEMPTS} in a row)"))

    def _init_error(self, text: str) -> None:
        self.counts["start_failed"] += 1
        name = self.settings.name
        self._give_up(WorkerStartFailed(f"a {name} worker's initializer failed:\n{text}"))

    def _give_up(self, error: WorkerStartFailed) -> None:
        for task in list(self.queue):
            self._resolve(task, TaskResult("start_failed", error))
        self.queue.clear()
        self.wanted = sum(w.state is not _State.STARTING for w in self.workers.values())
        self._resolve_waiters(error)

    def _resolve_waiters(self, error: BaseException | None) -> None:
        waiters, self.ready_waiters = self.ready_waiters, []
        for waiter in waiters:
            if waiter.done():
                continue
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)

    # -- running tasks -----------------------------------------------------------------

    def _dispatch(self) -> None:
        idle = [w for w in self.workers.values() if w.state is _State.IDLE]
        while self.queue and idle:
            task = self.queue.popleft()
            worker = self._pick(idle, task.affinity)
            idle.remove(worker)
            worker.state, worker.task = _State.BUSY, task
            task.attempts += 1
            task.received = False
            task.sent = time.monotonic()
            worker.deadline = task.sent + RECEIVE_GRACE  # then its own timeout
            worker.outbox += _frames.encode(_frames.TASK, task.payload)
            self._flush(worker)

    @staticmethod
    def _pick(idle: list[_Worker], affinity: str | None) -> _Worker:
        """The holder of ``affinity`` first, then a worker holding no tags, then the one
        idle the shortest time."""
        if affinity is not None:
            for worker in reversed(idle):
                if affinity in worker.tags:
                    return worker
        return next((w for w in reversed(idle) if not w.tags), idle[-1])

    def _flush(self, worker: _Worker) -> None:
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

    def _read(self, worker: _Worker) -> None:
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

    def _message(self, worker: _Worker, kind: bytes, payload: bytes) -> None:
        if kind == _frames.READY:
            worker.pid = _frames.read_number(payload)
            worker.state, worker.deadline = _State.IDLE, math.inf
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
            worker.state, worker.deadline = _State.IDLE, math.inf
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

    def _died(self, worker: _Worker) -> None:
        """Its pipe closed: it is ending. Its task (if it had one that reached it) is
        answered once its exit status is known, or :data:`STATUS_GRACE` later."""
        task, starting = worker.task, worker.state is _State.STARTING
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

    def _bury(self, worker: _Worker, task: Task | None, status: int | None) -> None:
        self._kill(worker)
        how = describe_exit(status)
        if not self.closed and worker.state is not _State.STARTING:
            self.counts["crashed"] += 1
        if worker.state is _State.STARTING:
            self._start_failed(
                f"{self.settings.name} workers exit before they are ready ({how}; see "
                "their standard error)"
            )
        elif task is not None and task.cancelled:
            self._resolve(task, TaskResult("cancelled", None, pid=worker.pid))
        elif task is not None:
            why = f"the {self.settings.name} worker process (pid {worker.pid}) {how}"
            self._resolve(task, TaskResult("crashed", why, pid=worker.pid))

    def _forget(self, worker: _Worker) -> None:
        for fd in (worker.results, worker.tasks):
            if fd in self.selector.get_map():
                self.selector.unregister(fd)
        self.workers.pop(worker.results, None)
        self.changed = True

    def _kill(self, worker: _Worker) -> None:
        """Kill ``worker``'s group; return once it has ended (reaped here, or reported
        reaped by the template: a SIGKILL takes milliseconds; at most a few seconds)."""
        if worker.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(worker.pid, signal.SIGKILL)
        if worker.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.process.wait(REAP)
        elif worker.pid is not None:
            deadline = time.monotonic() + STATUS_GRACE
            while worker.pid not in self.exits and self.template is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.template.control], [], [], left)[0]:
                    break
                self._template_message(self.template)
        if worker.pid is not None:
            self.exits.pop(worker.pid, None)
        for fd in (worker.tasks, worker.results):
            with contextlib.suppress(OSError):
                os.close(fd)
        if worker.folder is not None:
            shutil.rmtree(worker.folder, ignore_errors=True)

    def drop(self, worker: _Worker, why: str | None) -> None:
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
                _wait_status(worker.process)
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
            if worker.state is not _State.IDLE:
                self._check_worker(worker, now, watch)

    def _check_worker(self, worker: _Worker, now: float, watch: bool) -> None:
        name = self.settings.name
        stopped = watch and self._stopped(worker, now)
        if worker.state is _State.STARTING:
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

    def _stopped(self, worker: _Worker, now: float) -> bool:
        if worker.pid is None or not _os.stopped(worker.pid):
            worker.stopped_since = None
            return False
        if worker.stopped_since is None:
            worker.stopped_since = now
        return now - worker.stopped_since >= self.settings.stopped_limit
