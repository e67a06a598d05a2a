"""The lowering workers (one process-wide :class:`~asynccomp.workers.WorkerPool`, TileLang
imported once in the template they are forked from) and :class:`Batch`, which runs
TileLang's compile units on them.

A batch sends every config's recipe to the workers at once; as soon as all the configs of
a unit are lowered, the unit's ``finish`` (TileLang's own codegen and CUDA compile,
answered from the workers' IR) runs on one of ``finishers`` threads, which spend their
time waiting on asynccomp's engine, not holding the interpreter lock. Each unit's result
is a ``concurrent.futures.Future``, as TileLang's own thread pool gives it. A batch shut
down before its configs are lowered (Ctrl-C in TileLang's loop) cancels the rest: their
workers stop, and the pool serves the next batch.

A batch that comes while the workers are still starting (the template importing
TileLang: seconds, at a process's first autotune) does not wait idle for them: this
process takes units back from the end of the queue, :data:`LOWER_HERE` at a time, and
lowers them itself as TileLang does, until a worker is ready; the workers take the rest
from the front.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import logging
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ..workers import PoolSettings, TaskHandle, TaskResult, WorkerPool, shared_folder
from ._errors import TileLangCompileTimeout, TileLangLoweringCrashed
from ._lowering import Lowered, Raised, lower, warm_up
from ._transport import Packed

__all__ = ("Batch", "Outcome", "Unavailable", "Unit", "close", "pool", "set_timeout")

logger = logging.getLogger("asynccomp.tilelang")

#: End idle workers after this many seconds; recycle one past this resident memory.
IDLE_RELEASE = 600.0
MAX_RSS = 4 << 30
#: Seconds one config's elaboration and lowering may take in its worker (a config whose
#: elaboration never ends would hold the autotune for ever): past it, the worker is
#: killed and the config fails with a timeout (``register(lowering_timeout=...)``).
LOWERING_TIMEOUT = 600.0


@dataclasses.dataclass(frozen=True)
class Unavailable:
    """No worker could run the recipe (it did not load there, its result did not travel
    back, or the workers did not start), or this process took it back to lower itself
    while the workers start (``taken_back``): the parent lowers this config itself, as
    TileLang does; ``reason`` says why."""

    reason: str
    taken_back: bool = False


#: Units this process lowers itself at once while the workers start: one. Each unit
#: taken back is lowered at TileLang's own pace, in this one interpreter, which also
#: finishes the workers' units (code generation, the compile) once they come. And two at
#: once are not safe on CPython 3.11 (at least): TileLang's elaboration parses its kernel's
#: source (``ast.parse``), whose conversion to Python objects keeps its depth count in
#: state every thread shares; two threads parsing at once can fail one config with
#: ``SystemError: AST constructor recursion depth mismatch`` (python/cpython#106905;
#: seen in CI on 3.11.7 with two).
LOWER_HERE = 1


Outcome = Lowered | Raised | Unavailable


@dataclasses.dataclass(frozen=True)
class Unit:
    """One of TileLang's compile units: its configs' packed recipes, and what the
    parent does with their outcomes (in the same order)."""

    recipes: Sequence[Packed]
    finish: Callable[[list[Outcome]], Any]


_lock = threading.Lock()
_pool: WorkerPool | None = None
_timeout: float | None = LOWERING_TIMEOUT


def pool(workers: int) -> WorkerPool:
    """The process-wide lowering pool (``workers`` workers), started in the background
    if there is none (or it was closed: a new one takes its place)."""
    global _pool
    with _lock:
        if _pool is None or _pool.closed or _pool.settings.size != workers:
            if _pool is not None:
                _pool.close()
            _pool = WorkerPool(
                PoolSettings(
                    "tilelang",
                    workers,
                    [functools.partial(warm_up, list(sys.path))],
                    max_rss=MAX_RSS,
                    idle_release=IDLE_RELEASE,
                    share_in=shared_folder(),
                )
            )
        return _pool


def set_timeout(seconds: float | None) -> None:
    global _timeout
    _timeout = seconds


def close() -> None:
    """End the lowering workers now (the next batch starts new ones)."""
    global _pool
    with _lock:
        if _pool is not None:
            _pool.close()
            _pool = None


def _lower(packed: Packed, sys_path: list[str]) -> Lowered | Raised:
    """A task: the parent's import path as it is now (a test folder added after the
    workers started), then :func:`~._lowering.lower`."""
    for entry in reversed(sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    return lower(packed)


def _outcome(task: TaskResult) -> Outcome:
    if task.outcome == "done":
        value: Lowered | Raised = task.value
        return value
    if task.outcome in ("error", "start_failed"):  # asynccomp's side: lower it here
        return Unavailable(f"the lowering worker could not run it: {task.value!r}")
    if task.outcome == "timeout":
        return Raised(
            TileLangCompileTimeout(
                f"elaborating and lowering this config took more than {_timeout} s "
                "(asynccomp.tilelang.register(lowering_timeout=...)); its worker was "
                "killed, the other configs are unaffected",
                timeout=_timeout or 0.0,
            )
        )
    return Raised(
        TileLangLoweringCrashed(
            "the asynccomp worker process elaborating and lowering this config died "
            f"({task.value}; TileLang crashed in it, or it ran out of memory: in "
            "TileLang's own process it would have taken the whole autotune down); the "
            "other configs are unaffected"
        )
    )


class Batch:
    """Runs ``units`` (see the module's doc); ``futures[i]`` is unit ``i``'s result.
    Call :meth:`shutdown` once done with it (TileLang's autotuner does, as with its own
    thread pool): configs not lowered by then are cancelled."""

    def __init__(self, workers: WorkerPool, units: Sequence[Unit], finishers: int) -> None:
        self.futures: list[concurrent.futures.Future[Any]] = [
            concurrent.futures.Future() for _ in units
        ]
        self._units = list(units)
        self._outcomes: list[list[Outcome | None]] = [[None] * len(u.recipes) for u in units]
        self._lock = threading.Lock()
        self._shut = False
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max(1, finishers), thread_name_prefix="asynccomp-tilelang"
        )
        path = list(sys.path)
        self._workers = workers
        self._handles: list[list[TaskHandle]] = []  # each unit's, config by config
        self._taken: set[int] = set()  # units this process tried to take back
        self._here_units: set[int] = set()  # taken back, lowering here (module's doc)
        self._here = 0  # slots of LOWER_HERE in use
        for u, unit in enumerate(self._units):
            if not unit.recipes:
                self._finish(u)
            handles = []
            for r, recipe in enumerate(unit.recipes):
                handle = workers.submit(_lower, recipe, path, timeout=_timeout)
                handle.add_done_callback(functools.partial(self._lowered, u, r))
                handles.append(handle)
            self._handles.append(handles)
        for _ in range(LOWER_HERE):
            self._take_back()

    def shutdown(self, wait: bool = True) -> None:
        with self._lock:
            self._shut = True
        for handles in self._handles:
            for handle in handles:
                handle.cancel()  # those still lowering: nobody will take their kernels
        for future in self.futures:
            future.cancel()  # units never finished
        self._executor.shutdown(wait=wait)

    def _take_back(self) -> None:
        """While no worker is ready and the template is not either (it imports TileLang:
        a ready template forks workers in a moment), take back the last unit no worker
        has begun, to lower it here (its finish, on a finisher thread, as TileLang
        lowers). A config of it a worker took meanwhile stays the worker's."""
        stats = self._workers.statistics()
        if stats.ready or stats.template or self._workers.closed:
            return
        with self._lock:
            if self._shut or self._here >= LOWER_HERE:
                return
            self._here += 1  # a slot, held while we look
        for u in reversed(range(len(self._units))):
            with self._lock:
                if u in self._taken:
                    continue
                self._taken.add(u)
            withdrawn = [handle.withdraw() for handle in self._handles[u]]
            with self._lock:
                if any(withdrawn) and not self.futures[u].done():
                    self._here_units.add(u)  # its finish gives the slot back
                    return
        with self._lock:
            self._here -= 1

    def _lowered(self, u: int, r: int, handle: TaskHandle) -> None:
        """A config's outcome (from the pool's thread: only bookkeeping here)."""
        result = handle.result()
        if result.outcome == "cancelled":  # taken back (_take_back), or the batch shut
            outcome: Outcome = Unavailable("lowered here while the workers start", True)
        else:
            outcome = _outcome(result)
        with self._lock:
            self._outcomes[u][r] = outcome
            complete = all(o is not None for o in self._outcomes[u]) and not self._shut
        if complete:
            self._finish(u)

    def _finish(self, u: int) -> None:
        outcomes = [o for o in self._outcomes[u] if o is not None]
        for outcome in outcomes:
            if isinstance(outcome, Unavailable) and not outcome.taken_back:
                logger.warning(
                    "asynccomp.tilelang: lowering a config in this process: %s", outcome.reason
                )
        future = self.futures[u]

        def run() -> None:
            try:
                if not future.set_running_or_notify_cancel():
                    return
                try:
                    future.set_result(self._units[u].finish(outcomes))
                except BaseException as exc:
                    future.set_exception(exc)
            finally:
                with self._lock:
                    mine = u in self._here_units
                    if mine:
                        self._here_units.discard(u)
                        self._here -= 1
                if mine:  # lowered here: the next one, if still no worker is ready
                    self._take_back()

        try:
            self._executor.submit(run)
        except RuntimeError:  # shut down meanwhile
            future.cancel()
