"""What a pool is made with, what it says of itself, and what a task comes back as."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

__all__ = ("Outcome", "PoolSettings", "PoolStatistics", "TaskResult")

#: How a task ended: ``done`` (``value`` is what it returned), ``error`` (``value`` is
#: the exception it raised, as itself where it pickles, else a
#: :class:`~asynccomp.TaskFailed`; ``traceback`` is the worker's), ``timeout`` (past
#: its timeout: its worker was killed), ``cancelled``, ``crashed`` (its worker died or
#: stayed stopped; ``value`` says how), ``memory`` (its worker passed ``memory_limit``
#: and was killed; ``value`` says by how much), ``start_failed`` (no worker could start:
#: ``value`` is the :class:`~asynccomp.WorkerStartFailed`).
Outcome = Literal["done", "error", "timeout", "cancelled", "crashed", "memory", "start_failed"]


@dataclasses.dataclass(frozen=True)
class TaskResult:
    outcome: Outcome
    value: Any
    traceback: str = ""
    #: The worker that ran it (``None``: it never ran).
    pid: int | None = None
    #: Seconds from when it was sent to its worker to its answer.
    elapsed: float = 0.0


@dataclasses.dataclass(frozen=True)
class PoolSettings:
    """How a :class:`~asynccomp.workers.WorkerPool` runs its workers.

    Attributes:
        name: what its processes are called (``acw-<name>`` for workers, ``acz-<name>``
            for the template, as ``ps`` shows them) and how messages name them.
        size: workers at most.
        initializers: run once where the workers come from: in the template that they
            are forked from, or in each worker spawned (they travel by cloudpickle where
            it is installed, else by pickle: functions of importable modules).
        fork: fork workers from a warm template process that ran the initializers once
            (Linux; the pool spawns fresh interpreters where the template has threads
            after its initializers, which makes a fork unsafe). The template and its
            workers run BLAS and OpenMP one thread each (``OPENBLAS_NUM_THREADS``,
            ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``: 1 unless set), so that importing
            numpy leaves it one thread.
        eager: start every worker now (in the background) and after an idle release
            ends them, only on the next task; ``False``: start workers as tasks need
            them (never more than the most tasks it was given at once).
        start_timeout: seconds a worker (or the template) may take to get ready; one
            that does not is killed, and the third failed start in a row fails the
            tasks waiting (``start_failed``).
        max_uses, max_rss: recycle a worker after this many tasks, or once its resident
            memory passes this many bytes after a task (``None``: never).
        memory_limit: kill a worker whose resident memory passes this many bytes while
            it runs a task (its task ends ``memory``), looked at every second.
        idle_release: end every worker and the template after this many seconds
            without a task; the next task starts them again.
        cancel_grace: seconds a cancelled task's worker may take to answer (a task that
            watches :func:`~asynccomp.workers.cancel_event` stops early and keeps its
            worker) before it is killed.
        stopped_limit: a busy or starting worker stopped by a signal (SIGSTOP) this long
            is lost, as a crashed one.
        folder: makes a fresh folder for each worker, its ``$TMPDIR``, removed when the
            worker ends (NVRTC's precompiled headers go there).
        environ: more environment variables for the workers.
        cwd: the folder workers run in (``None``: this process's).
        python: the interpreter they run.
        share_in: a private folder (this user's only, mode 0700) where the template is
            shared with this user's other processes whose pools have the same settings
            (initializers, interpreter, environment, folder): the first pool starts
            it; later ones, of any process, fork their workers from it at once instead
            of running the initializers again, and it stays ``share_idle`` seconds
            after its last pool ended. ``None``: the template is this pool's alone.
        share_idle: seconds a shared template waits for another pool.
        task_variables: prefixes of the environment variables the pool's tasks set in
            their worker themselves, from the caller's, each time (Triton's ``TRITON_``
            ones): not part of a shared template's name.
    """

    name: str
    size: int
    initializers: Sequence[Callable[[], object]] = ()
    fork: bool = True
    eager: bool = True
    start_timeout: float | None = 300.0
    max_uses: int | None = None
    max_rss: int | None = None
    memory_limit: int | None = None
    idle_release: float | None = None
    cancel_grace: float = 0.5
    stopped_limit: float = 10.0
    folder: Callable[[], Path] | None = None
    environ: Mapping[str, str] = dataclasses.field(default_factory=dict)
    cwd: str | None = None
    python: str = sys.executable
    share_in: Path | None = None
    share_idle: float = 600.0
    task_variables: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"a worker pool needs at least one worker, not {self.size}")


@dataclasses.dataclass(frozen=True)
class PoolStatistics:
    started: int  # workers started over the pool's life
    forked: int  # of which forked from the template
    timed_out: int
    crashed: int  # stopped ones included
    start_failed: int
    recycled: int
    released: int  # workers ended by idle release
    cancelled: int
    over_memory: int  # killed past memory_limit
    alive: int  # now: starting, idle or busy
    busy: int
    ready: int  # now: idle or busy (started, initializers run)
    queued: int
    template: bool  # a warm template is ready to fork workers
    #: Times this pool found its template shared by another process (and did not start
    #: one): :attr:`PoolSettings.share_in`.
    joined: int = 0
