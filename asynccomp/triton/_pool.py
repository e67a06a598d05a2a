"""The Triton workers: one process-wide :class:`~asynccomp.workers.WorkerPool`, Triton
imported and warmed up once in the template they are forked from (:func:`._worker.warm_up`),
shared by every compile of the process (the JIT's, the autotuner's, ``compile_many``'s)."""

from __future__ import annotations

import functools
import os
import sys
import threading

from ..workers import PoolSettings, WorkerPool, shared_folder
from ._worker import TASK_VARIABLES, warm_up

__all__ = ("close", "cpus", "current", "pool", "set_size", "size")

#: End idle workers after this many seconds; recycle one past this resident memory.
IDLE_RELEASE = 600.0
MAX_RSS = 4 << 30

_lock = threading.Lock()
_pool: WorkerPool | None = None
_size = 0


def cpus() -> int:
    return len(os.sched_getaffinity(0))


def size() -> int:
    """Workers to run: as last asked (``register(workers=...)``), else one per CPU."""
    return _size or cpus()


def set_size(count: int | None) -> None:
    global _size
    if count is not None and count < 1:
        from ..errors import SettingsError

        raise SettingsError("workers", count, "must be at least 1")
    _size = count or 0


def pool() -> WorkerPool:
    """The process-wide pool, started (in the background) if there is none, it was
    closed, or another size was asked for since."""
    global _pool
    with _lock:
        if _pool is None or _pool.closed or _pool.settings.size != size():
            if _pool is not None:
                _pool.close()
            _pool = WorkerPool(
                PoolSettings(
                    "triton",
                    size(),
                    [functools.partial(warm_up, list(sys.path))],
                    max_rss=MAX_RSS,
                    idle_release=IDLE_RELEASE,
                    share_in=shared_folder(),
                    task_variables=TASK_VARIABLES,  # each compile sets them (_worker._apply)
                )
            )
        return _pool


def current() -> WorkerPool | None:
    """The pool if one runs (for statistics), without starting one."""
    with _lock:
        return _pool if _pool is not None and not _pool.closed else None


def close() -> None:
    """End the workers now (the next compile starts new ones)."""
    global _pool
    with _lock:
        if _pool is not None:
            _pool.close()
            _pool = None
