"""The face of the worker kernel: :class:`WorkerPool`, for async and blocking callers alike."""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import itertools
import os
import queue
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from .._wakers import soon_caller
from . import _frames
from ._core import Core, Task
from ._model import WorkerState
from ._settings import PoolSettings, PoolStatistics, TaskResult

__all__ = ("TaskHandle", "WorkerPool")

_pools: weakref.WeakSet[WorkerPool] = weakref.WeakSet()


def _abandon(core: Core) -> None:
    """In a forked child: forget the parent's processes (they are its, not ours)."""
    for worker in [*core.workers.values(), *(w for w, _ in core.dying)]:
        for fd in (worker.tasks, worker.results):
            with contextlib.suppress(OSError):
                os.close(fd)
    if core.template is not None:
        core.template.control.close()
    for fd in (core.wake_read, core.wake_write):
        with contextlib.suppress(OSError):
            os.close(fd)
    core.workers.clear()
    core.dying.clear()
    core.template = None
    core.closed = True


def _forget_in_child() -> None:
    for pool in list(_pools):
        _abandon(pool._core)
        pool._holder[0] = Core(pool.settings)


os.register_at_fork(after_in_child=_forget_in_child)


def _close(holder: list[Core]) -> None:
    """The pool was collected, or the interpreter exits: end its processes (only the
    process that made them: a forked child's copy is not their owner)."""
    core = holder[0]
    if core.owner == os.getpid():
        with core.lock:
            core.close()
        core.settle()


class TaskHandle:
    """A task submitted to a pool: its result (a :class:`TaskResult`, never raised) once
    it ends; :meth:`cancel` stops it."""

    def __init__(self, pool: WorkerPool, task: Task) -> None:
        self._pool, self._task = pool, task

    def result(self, timeout: float | None = None) -> TaskResult:
        return self._task.future.result(timeout)

    def done(self) -> bool:
        return self._task.future.done()

    def add_done_callback(self, fn: Callable[[TaskHandle], None]) -> None:
        self._task.future.add_done_callback(lambda _: fn(self))

    def cancel(self) -> None:
        """Drop it if it waits; tell it to stop if it runs (a task that watches
        :func:`~asynccomp.workers.cancel_event` stops and keeps its worker; past the
        pool's ``cancel_grace`` its worker is killed and replaced). Its result is then
        ``cancelled``."""
        self._pool._cancel(self._task)

    def withdraw(self) -> bool:
        """Take the task back if it still waits for a worker: ``True``, and it never
        runs (its result is ``cancelled``); ``False`` once a worker has it or it ended.
        For a caller that can do the work itself meanwhile (TileLang's autotune lowers
        configs in its own process while the workers start)."""
        return self._pool._withdraw(self._task)


class WorkerPool:
    """Worker processes that run ``fn(*args)`` tasks: the one process layer under NVRTC's
    workers, MetaSchedule's builder, TileLang's lowering (and what comes next).

    What it promises (see :class:`PoolSettings` for each setting):

    - workers forked from a warm template that ran the initializers once, or spawned
      where forking is not safe; each dies with this process, whichever thread made it;
    - a task's timeout counts its own run (from when it reaches a worker), never
      queueing or a start; a task past it, a worker that crashes, stays stopped or
      passes its memory limit costs that task alone, and a replacement starts;
    - a task's own failure is its result (an exception or a value that does not
      pickle included): the worker serves on;
    - many threads (or tasks) share the workers task by task: nothing is held for a
      batch, and :meth:`statistics` never waits on one;
    - a failed batch (Ctrl-C, a failed start, an exception in a callback) cancels its
      own tasks and leaves the pool usable;
    - in a forked child the pool starts afresh: the parent's workers are the parent's.

    >>> import operator
    >>> pool = WorkerPool(PoolSettings("doc", 2))
    >>> [r.value for r in pool.map(operator.add, [(1, 2), (3, 4)])]
    [3, 7]
    >>> pool.close()
    """

    def __init__(self, settings: PoolSettings) -> None:
        self.settings = settings
        self._holder = [Core(settings)]  # a forked child puts a fresh one there
        self._ids = itertools.count()
        self._finalizer = weakref.finalize(self, _close, self._holder)
        _pools.add(self)
        if settings.eager:
            with self._core.lock:
                self._core.wake()

    @property
    def _core(self) -> Core:
        return self._holder[0]

    # -- tasks ---------------------------------------------------------------------------

    def submit(
        self,
        fn: Callable[..., Any],
        *args: Any,
        timeout: float | None = None,
        affinity: str | None = None,
    ) -> TaskHandle:
        """Queue ``fn(*args)``; ``timeout``: seconds it may run once a worker has it;
        ``affinity``: a tag (:meth:`tag`) the worker it goes to should hold."""
        task_id = next(self._ids)
        task = Task(task_id, _frames.dumps((task_id, fn, args)), timeout, affinity)
        core = self._core
        with core.lock:
            closed = core.closed
            if not closed:
                core.submit(task)
        if closed:
            task.future.set_result(TaskResult("crashed", "the worker pool is closed"))
        return TaskHandle(self, task)

    def map(
        self,
        fn: Callable[..., Any],
        tasks: Sequence[tuple[Any, ...]],
        on_result: Callable[[int, TaskResult], None] | None = None,
        *,
        timeout: float | None = None,
    ) -> list[TaskResult]:
        """Blocking: ``fn(*args)`` for every ``args``; results in order. ``on_result(i,
        result)`` is called in this thread as each ends (completion order). An exception
        here (Ctrl-C, or one ``on_result`` raises) cancels this call's tasks that have
        not ended, and propagates; the pool serves on."""
        handles = [self.submit(fn, *args, timeout=timeout) for args in tasks]
        ended: queue.SimpleQueue[int] = queue.SimpleQueue()

        def report(index: int, _: TaskHandle) -> None:
            ended.put(index)

        for index, handle in enumerate(handles):
            handle.add_done_callback(functools.partial(report, index))
        try:
            for _ in handles:
                while True:
                    try:  # in slices, so a Ctrl-C is seen between them
                        index = ended.get(timeout=0.2)
                        break
                    except queue.Empty:
                        continue
                if on_result is not None:
                    on_result(index, handles[index].result())
        except BaseException:
            for handle in handles:
                handle.cancel()
            raise
        return [handle.result() for handle in handles]

    async def run(
        self,
        fn: Callable[..., Any],
        *args: Any,
        timeout: float | None = None,  # noqa: ASYNC109 - the task's limit in its worker
        affinity: str | None = None,
    ) -> TaskResult:
        """``fn(*args)`` on a worker, awaited (always a checkpoint). Cancelled, the task
        is cancelled in its worker, and this waits (shielded, at most the pool's
        ``cancel_grace`` and a second) until it has stopped or its worker is killed."""
        handle = self.submit(fn, *args, timeout=timeout, affinity=affinity)
        ended = anyio.Event()
        call_soon = soon_caller()
        handle.add_done_callback(lambda _: call_soon(ended.set))
        try:
            await ended.wait()
        except BaseException:
            handle.cancel()
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(self.settings.cancel_grace + 1.0):
                    await ended.wait()
            raise
        return handle.result()

    def _cancel(self, task: Task) -> None:
        core = self._core
        with core.lock:
            core.cancel(task)
        core.settle()

    def _withdraw(self, task: Task) -> bool:
        core = self._core
        with core.lock:
            taken = task in core.queue and not task.future.done()
            if taken:
                core.cancel(task)  # still queued: dropped, never sent
        core.settle()
        return taken

    # -- workers -------------------------------------------------------------------------

    def warm(self) -> concurrent.futures.Future[None]:
        """Start every worker (in the background); the future is done once all are
        ready (:class:`~asynccomp.WorkerStartFailed` if they cannot start)."""
        waiter: concurrent.futures.Future[None] = concurrent.futures.Future()
        with self._core.lock:
            if self._core.closed:
                waiter.set_result(None)
            else:
                self._core.warm(waiter)
        return waiter

    def prime(self) -> None:
        """Start the template now, in the background, and no worker: the first tasks
        then fork their workers at once (a pool that cannot fork: nothing to do)."""
        with self._core.lock:
            if not self._core.closed:
                self._core.primed = True
                self._core.last_use = time.monotonic()
                self._core.wake()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Blocking: start every worker and wait until all are ready (``False`` if
        ``timeout`` passes first; :class:`~asynccomp.WorkerStartFailed` if they cannot
        start)."""
        try:
            self.warm().result(timeout)
        except concurrent.futures.TimeoutError:
            return False
        return True

    async def ready(self) -> None:
        """Start every worker and wait until all are ready."""
        waiter = self.warm()
        ended = anyio.Event()
        call_soon = soon_caller()
        waiter.add_done_callback(lambda _: call_soon(ended.set))
        await ended.wait()
        waiter.result()

    def pids(self) -> list[int]:
        """The workers alive now (ready or starting, whose pid is known)."""
        with self._core.lock:
            return [w.pid for w in self._core.workers.values() if w.pid is not None]

    def tags(self) -> dict[int, tuple[str, ...]]:
        """Each live worker's tags (:meth:`tag`), by pid."""
        with self._core.lock:
            return {w.pid: tuple(w.tags) for w in self._core.workers.values() if w.pid}

    def folders(self) -> dict[int, Any]:
        """Each live worker's folder (``PoolSettings.folder``), by pid."""
        with self._core.lock:
            return {w.pid: w.folder for w in self._core.workers.values() if w.pid and w.folder}

    def tag(self, pid: int, tag: str, *, retire_over: int | None = None) -> str:
        """Note that worker ``pid`` holds ``tag`` (tasks with that ``affinity`` go to it
        first); past ``retire_over`` tags it is recycled once idle. Says which:
        ``"held"``, ``"retired"``, or ``"gone"`` (no such worker now)."""
        core = self._core
        with core.lock:
            worker = next((w for w in core.workers.values() if w.pid == pid), None)
            if worker is None:
                return "gone"
            if tag not in worker.tags:
                worker.tags.append(tag)
            if retire_over is None or len(worker.tags) <= retire_over:
                return "held"
            worker.retire = True  # recycled by the pool's thread once it is idle
            core.wake()
        return "retired"

    def watch(self, changed: Callable[[], None]) -> None:
        """Call ``changed()`` (from the pool's thread) when workers start or end."""
        self._core.watchers.append(changed)

    def statistics(self) -> PoolStatistics:
        with self._core.lock:
            return _statistics(self._core)

    def close(self) -> None:
        """End every worker and the template now (idempotent); tasks not ended end
        ``crashed``. The pool takes no more tasks."""
        self._finalizer()

    def wait_closed(self, timeout: float = 30.0) -> None:
        """Blocking: until the pool's thread has ended (after :meth:`close`)."""
        thread = self._core.thread
        deadline = time.monotonic() + timeout
        while thread is not None and thread.is_alive() and time.monotonic() < deadline:
            thread.join(min(0.1, max(0.0, deadline - time.monotonic())))

    @property
    def closed(self) -> bool:
        return self._core.closed


def _statistics(core: Core) -> PoolStatistics:
    c = core.counts
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
        alive=len(core.workers),
        busy=sum(w.state is WorkerState.BUSY for w in core.workers.values()),
        ready=sum(w.state is not WorkerState.STARTING for w in core.workers.values()),
        queued=len(core.queue),
        template=core.template is not None and core.template.ready,
        joined=c["joined"],
    )
