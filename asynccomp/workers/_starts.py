"""How a pool's processes start and end: the template it forks workers from, spawned
workers where it cannot fork, failed starts, kills (the :class:`Starts` half of
:class:`~._core.Core`, which holds the state both halves change under its lock)."""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import math
import os
import pickle
import select
import selectors
import shutil
import signal
import socket
import subprocess
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Literal

from .. import _os
from ..errors import WorkerStartFailed
from . import _frames
from ._model import (
    REAP,
    START_ATTEMPTS,
    STATUS_GRACE,
    Task,
    Template,
    Worker,
    WorkerState,
    describe_exit,
    wait_status,
)
from ._settings import PoolSettings, TaskResult
from ._sharing import OWN_VARIABLES, share_path

__all__ = ("Starts",)

logger = logging.getLogger("asynccomp.workers")

# A template must stay one thread to fork from (its initializers' imports included):
# numpy's OpenBLAS starts a thread pool at import, as OpenMP runtimes may; the workers,
# many to the cores, run them one thread each anyway. And it must not start CUDA's
# driver, whose threads start with it: TileLang's import asks `torch.cuda.is_available()`
# (tilelang/utils/device.py), which by default initializes CUDA on a GPU machine; torch's
# NVML check is its documented way to stay fork-safe, but on the H100 the templates still
# had a CUDA thread with it, so the template also answers torch's device count itself
# (_torch_devices.py). What the user set is kept.
_TEMPLATE_DEFAULTS = {
    **dict.fromkeys(("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"), "1"),
    "PYTORCH_NVML_BASED_CUDA_CHECK": "1",
}


#: Shared templates this process started and left to other processes: polled (reaped
#: once they end) as the next template starts.
_LEFT_RUNNING: list[subprocess.Popen[bytes]] = []


def _own_variables() -> dict[str, str]:
    """asynccomp's own variables as this process has them now: a worker's, whatever the
    rest of its environment (read as they are used, they are no template's)."""
    return {k: v for k, v in os.environ.items() if k.startswith(OWN_VARIABLES)}


def _others(environ: dict[str, str]) -> dict[str, str]:
    """``environ`` without asynccomp's own variables."""
    return {k: v for k, v in environ.items() if not k.startswith(OWN_VARIABLES)}


def _output() -> list[int]:
    """This process's standard output and error (where both are open): its forked
    workers write there, not to the template's (a shared one may be another process's)."""
    try:
        os.fstat(1)
        os.fstat(2)
    except OSError:
        return []
    return [1, 2]


class Starts:
    """Starting and ending processes; the state is the pool's (:class:`~._core.Core`)."""

    settings: PoolSettings
    owner: int
    #: This process's environment and import path as the pool was made, not as they are
    #: when a template or worker starts on the pool's thread: the caller may go on
    #: changing them meanwhile (TileLang's import sets four variables and adds two
    #: import folders), and a shared template's name must not depend on how far it got.
    environ: dict[str, str]
    path: list[str]
    queue: collections.deque[Task]
    workers: dict[int, Worker]
    template: Template | None
    fork: bool
    primed: bool
    counts: collections.Counter[str]
    failed_starts: int
    wanted: int
    last_use: float
    requests: itertools.count[int]
    ready_waiters: list[Future[None]]
    exits: dict[int, int]
    changed: bool
    selector: selectors.BaseSelector
    #: Where the template is shared (``None``: not looked up yet; ``False``: not shared).
    share: Path | Literal[False] | None = None

    def _resolve(self, task: Task, result: TaskResult) -> None:
        raise NotImplementedError

    def _flush(self, worker: Worker) -> None:
        raise NotImplementedError

    def drop(self, worker: Worker, why: str | None) -> None:
        raise NotImplementedError

    def _fill(self) -> None:
        needed = len(self.workers) < self.wanted or self.primed
        if self.fork and self.template is None and needed:
            self._start_template()
        if self.template is not None and not self.template.ready:
            return  # workers are forked from it once it is ready
        # Each failed start counts; the third in a row lowers ``wanted``: this ends.
        while len(self.workers) < self.wanted:
            self._start_worker()

    def _command(self, module: str, *args: object) -> list[str]:
        return [self.settings.python, "-m", f"asynccomp.workers.{module}", *map(str, args)]

    def _environ(self) -> dict[str, str]:
        """A template's environment."""
        return {**_TEMPLATE_DEFAULTS, **self.environ} | dict(self.settings.environ)

    def _start_template(self) -> None:
        environ = self._environ()
        _LEFT_RUNNING[:] = [p for p in _LEFT_RUNNING if p.poll() is None]
        if self.share is None:
            self.share = share_path(self.settings, environ, self.path) or False
        start = self.settings.start_timeout
        deadline = time.monotonic() + (start or math.inf)
        if self.share and self._join_template(self.share, deadline):
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        shared = (self.share, self.settings.share_idle) if self.share else ()
        try:
            process = subprocess.Popen(
                self._command(
                    "_template", theirs.fileno(), self.owner, self.settings.name, *shared
                ),
                pass_fds=(theirs.fileno(),),
                env=environ,
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
        self.template = Template(ours, process, deadline, shared=bool(shared))
        self.selector.register(ours, selectors.EVENT_READ, self.template)
        with contextlib.suppress(OSError):  # it died: its end of file tells
            ours.send(_frames.dumps(("init", list(self.settings.initializers))))

    def _join_template(self, path: Path, deadline: float) -> bool:
        """Use the template another process shares at ``path``, if one listens there
        (its greeting, ``ready``, comes as any template's)."""
        control = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            control.connect(str(path))
            said = _os.peer(control)
        except OSError:  # none listens (or one that was killed left its socket)
            said = None
        if said is None or said[1] != os.getuid():  # (the folder is private; still)
            control.close()
            return False
        self.template = Template(control, None, deadline, shared=True)
        self.selector.register(control, selectors.EVENT_READ, self.template)
        self.counts["joined"] += 1
        return True

    def _end_template(self) -> int | None:
        """Kill the template (leave a shared one that is ready to its other pools); its
        wait status where it was killed."""
        template, self.template = self.template, None
        if template is None:
            return None
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(template.control)
        template.control.close()
        if template.process is None or (template.shared and template.ready):
            if template.process is not None:
                _LEFT_RUNNING.append(template.process)  # reaped as it ends
            return None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(template.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            template.process.wait(REAP)
        return wait_status(template.process)

    def _template_message(self, template: Template) -> None:
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
            self.last_use = time.monotonic()
            self.failed_starts = 0
            if not message[2]:  # threads after the initializers: no fork is safe
                culprit = message[4] or "unknown"  # (a shared template's greeting forks)
                logger.warning(
                    "asynccomp: the %s template has threads after its initializers (%s; "
                    "the first after %s): no fork is safe, so each worker is a fresh "
                    "interpreter that pays the imports again",
                    self.settings.name,
                    ", ".join(message[3]),
                    culprit,
                )
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
                    env={**_others(self.environ), **_own_variables(), **environ},
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
        worker = Worker(
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
                socket.send_fds(self.template.control, [request], [*theirs, *_output()])
            self.counts["forked"] += 1
            initializers = []  # the template ran them
            # asynccomp's own variables as this process has them now (a shared template
            # is not keyed on them); every other one is the template's, which its key
            # says is this process's, with what its initializers set.
            environ = _own_variables() | environ
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
        self.wanted = sum(w.state is not WorkerState.STARTING for w in self.workers.values())
        self.primed = False  # no template started again and again: the next task, or prime()
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

    def _kill(self, worker: Worker) -> None:
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
