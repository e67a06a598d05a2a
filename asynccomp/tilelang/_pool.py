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

from ..workers import PoolSettings, TaskHandle, TaskResult, WorkerPool
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
    back, or the workers did not start): the parent lowers this config itself, as
    TileLang does; ``reason`` says why."""

    reason: str


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
        self._handles: list[TaskHandle] = []
        for u, unit in enumerate(self._units):
            if not unit.recipes:
                self._finish(u)
            for r, recipe in enumerate(unit.recipes):
                handle = workers.submit(_lower, recipe, path, timeout=_timeout)
                handle.add_done_callback(functools.partial(self._lowered, u, r))
                self._handles.append(handle)

    def shutdown(self, wait: bool = True) -> None:
        with self._lock:
            self._shut = True
        for handle in self._handles:
            handle.cancel()  # those still lowering: nobody will take their kernels
        for future in self.futures:
            future.cancel()  # units never finished
        self._executor.shutdown(wait=wait)

    def _lowered(self, u: int, r: int, handle: TaskHandle) -> None:
        """A config's outcome (from the pool's thread: only bookkeeping here)."""
        outcome = _outcome(handle.result())
        with self._lock:
            self._outcomes[u][r] = outcome
            complete = all(o is not None for o in self._outcomes[u]) and not self._shut
        if complete:
            self._finish(u)

    def _finish(self, u: int) -> None:
        outcomes = [o for o in self._outcomes[u] if o is not None]
        for outcome in outcomes:
            if isinstance(outcome, Unavailable):
                logger.warning(
                    "asynccomp.tilelang: lowering a config in this process: %s", outcome.reason
                )
        future = self.futures[u]

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(self._units[u].finish(outcomes))
            except BaseException as exc:
                future.set_exception(exc)

        try:
            self._executor.submit(run)
        except RuntimeError:  # shut down meanwhile
            future.cancel()
