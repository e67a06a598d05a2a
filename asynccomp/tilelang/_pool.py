"""The lowering workers (one process-wide :class:`~asynccomp._warm_pool.WarmPool`,
TileLang imported once in each) and :class:`Batch`, which runs TileLang's compile units
on them.

A batch sends every config's recipe to the workers at once (one dispatcher thread
drives the pool); as soon as all the configs of a unit are lowered, the unit's
``finish`` (TileLang's own codegen and CUDA compile, answered from the workers' IR) runs
on one of ``finishers`` threads, which spend their time waiting on asynccomp's engine,
not holding the interpreter lock. Each unit's result is a ``concurrent.futures.Future``,
as TileLang's own thread pool gives it.
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

from .._warm_pool import TaskResult, WarmPool
from ._errors import TileLangLoweringCrashed
from ._lowering import Lowered, Raised, lower, warm_up
from ._transport import Packed

__all__ = ("Batch", "Outcome", "Unavailable", "Unit", "close", "pool")

logger = logging.getLogger("asynccomp.tilelang")

#: End idle workers after this many seconds; recycle one past this resident memory.
IDLE_RELEASE = 600.0
MAX_RSS = 4 << 30


@dataclasses.dataclass(frozen=True)
class Unavailable:
    """No worker could run the recipe (it did not load there, or the workers did not
    start): the parent lowers this config itself, as TileLang does; ``reason`` says why."""

    reason: str


Outcome = Lowered | Raised | Unavailable


@dataclasses.dataclass(frozen=True)
class Unit:
    """One of TileLang's compile units: its configs' packed recipes, and what the
    parent does with their outcomes (in the same order)."""

    recipes: Sequence[Packed]
    finish: Callable[[list[Outcome]], Any]


_lock = threading.Lock()
_pool: WarmPool | None = None


def pool(workers: int) -> WarmPool:
    """The process-wide lowering pool, started (with ``workers`` workers) if needed."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = WarmPool(
                workers,
                [functools.partial(warm_up, list(sys.path))],
                max_rss=MAX_RSS,
                idle_release=IDLE_RELEASE,
            )
        return _pool


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
    if task.outcome == "error":  # asynccomp's side failed there: the recipe did not load
        return Unavailable(f"the lowering worker could not run it:\n{task.value}")
    return Raised(
        TileLangLoweringCrashed(
            "the asynccomp worker process elaborating and lowering this config died "
            "(TileLang crashed in it; in TileLang's own process it would have taken the "
            "whole autotune down); the other configs are unaffected"
        )
    )


class Batch:
    """Runs ``units`` (see the module's doc); ``futures[i]`` is unit ``i``'s result.
    Call :meth:`shutdown` once done with it (TileLang's autotuner does, as with its own
    thread pool)."""

    def __init__(self, workers: WarmPool, units: Sequence[Unit], finishers: int) -> None:
        self.futures: list[concurrent.futures.Future[Any]] = [
            concurrent.futures.Future() for _ in units
        ]
        self._pool = workers
        self._units = list(units)
        self._outcomes: list[list[Outcome | None]] = [[None] * len(u.recipes) for u in units]
        self._submitted = [False] * len(units)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max(1, finishers), thread_name_prefix="asynccomp-tilelang"
        )
        self._thread = threading.Thread(
            target=self._dispatch, name="asynccomp-tilelang-lowering", daemon=True
        )
        self._thread.start()

    def shutdown(self, wait: bool = True) -> None:
        self._thread.join()
        self._executor.shutdown(wait=wait)

    def _dispatch(self) -> None:
        places = [(u, r) for u, unit in enumerate(self._units) for r in range(len(unit.recipes))]
        for u, unit in enumerate(self._units):
            if not unit.recipes:
                self._submit(u)

        def on_result(index: int, task: TaskResult) -> None:
            u, r = places[index]
            self._outcomes[u][r] = _outcome(task)
            if all(o is not None for o in self._outcomes[u]):
                self._submit(u)

        path = list(sys.path)
        tasks = [(self._units[u].recipes[r], path) for u, r in places]
        try:
            if tasks:
                self._pool.map(_lower, tasks, on_result)
        except BaseException as exc:  # the workers did not start: lower in this process
            logger.warning(
                "asynccomp.tilelang: lowering in this process: the lowering workers failed (%s)",
                exc,
            )
            for u, outcomes in enumerate(self._outcomes):
                for r, outcome in enumerate(outcomes):
                    if outcome is None:
                        outcomes[r] = Unavailable(f"the lowering workers failed: {exc}")
                if not self._submitted[u]:
                    self._submit(u)

    def _submit(self, u: int) -> None:
        self._submitted[u] = True
        outcomes = [o for o in self._outcomes[u] if o is not None]
        future = self.futures[u]
        for outcome in outcomes:
            if isinstance(outcome, Unavailable):
                logger.warning(
                    "asynccomp.tilelang: lowering a config in this process: %s", outcome.reason
                )

        def run() -> None:
            try:
                future.set_result(self._units[u].finish(outcomes))
            except BaseException as exc:
                future.set_exception(exc)

        self._executor.submit(run)
