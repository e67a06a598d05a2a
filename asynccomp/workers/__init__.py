"""The process-worker kernel: one pool of worker processes under every client that
needs processes (NVRTC's front end is serialized per process; TVM's and TileLang's
Python holds the interpreter lock; nvJitLink and Triton's C++ cannot be stopped
from another thread).

- :class:`WorkerPool` runs ``fn(*args)`` tasks on worker processes, for async
  (:meth:`WorkerPool.run`) and blocking (:meth:`WorkerPool.submit`,
  :meth:`WorkerPool.map`) callers alike, with per-task futures, timeouts, cancellation
  that stops the task in its worker (or kills and replaces the worker), recycling by
  count and memory, a memory limit while a task runs, and idle release.
- Workers are forked from a warm template process that ran the pool's initializers
  once (imports of seconds: TVM, TileLang; NVRTC loaded and run once), or spawned
  where forking is not safe (:mod:`._template`).
- A template can be shared by every process of a user whose pools have the same
  settings (:attr:`PoolSettings.share_in`, :func:`shared_folder`): a tuning process's
  workers fork at once from imports an earlier process paid (:mod:`._sharing`).
- One frame codec (:mod:`._frames`), one watch that makes every process die with its
  owner whichever thread started it (:mod:`._watch`), one worker loop
  (:mod:`._child`).

A task that can stop early watches :func:`cancel_event`; :func:`template_pid` tells a
task whether its worker is a fork of a template, and of which.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._child import cancel_event, template_pid
    from ._model import describe_exit
    from ._pool import TaskHandle, WorkerPool
    from ._settings import Outcome, PoolSettings, PoolStatistics, TaskResult
    from ._sharing import SHARED_TEMPLATES_ENV, shared_folder, stop_shared

# Imported when first used: a worker process (``python -m asynccomp.workers._child``)
# imports only what serves tasks, not the pool's side.
_LAZY = {
    "cancel_event": "._child",
    "template_pid": "._child",
    "describe_exit": "._model",
    "TaskHandle": "._pool",
    "WorkerPool": "._pool",
    "Outcome": "._settings",
    "PoolSettings": "._settings",
    "PoolStatistics": "._settings",
    "TaskResult": "._settings",
    "SHARED_TEMPLATES_ENV": "._sharing",
    "shared_folder": "._sharing",
    "stop_shared": "._sharing",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # once
    return value


__all__ = (
    "Outcome",
    "PoolSettings",
    "PoolStatistics",
    "SHARED_TEMPLATES_ENV",
    "TaskHandle",
    "TaskResult",
    "WorkerPool",
    "cancel_event",
    "describe_exit",
    "shared_folder",
    "stop_shared",
    "template_pid",
)
