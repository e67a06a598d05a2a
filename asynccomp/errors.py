"""The exceptions and warnings asynccomp raises, records or issues.

One tree, so ``except AsyncCompError`` catches everything this library means to raise::

    AsyncCompError
    ├── InvalidJob (also a ValueError)      bad input: a CompileJob field, a job's arch
    │   ├── SettingsError                   a bad setting: of an engine, its mode (in
    │   │                                   process, on a server, on Ray), a server, the
    │   │                                   cache; or one given to a mode that does not
    │   │                                   use it
    │   └── UnknownBackend                  a backend name no backend is registered under
    ├── EngineClosed (also a RuntimeError)  the engine is not running (or belongs to the
    │                                       parent of a forked process)
    ├── DumpDirError (also an OSError)      the dump root cannot be created or written
    ├── CacheUnavailable (also an OSError)  the disk cache folder cannot be used
    ├── BenchError (also a ValueError)      ``asynccomp bench`` cannot run as asked
    ├── ServerError (also a RuntimeError)   the compile server cannot be started, reached
    │                                       or used (another version, another user)
    ├── ClusterError (also a RuntimeError)  the Ray cluster cannot be used (Ray not
    │                                       installed, unreachable, no CPU, no node with
    │                                       this process's toolkit)
    ├── WorkerStartFailed (a RuntimeError)  worker processes (asynccomp.workers: TVM's
    │                                       builder, TileLang's lowering) cannot start
    │                                       (their initializer raised or hangs)
    ├── TaskFailed (a RuntimeError)         a task in a worker process raised something
    │                                       that cannot travel back as itself, or
    │                                       returned a value that cannot
    └── CompileError                        a job produced no binary (kept in ``result.error``)
        ├── CompileTimeout                  the job ran past its ``timeout`` and was stopped
        ├── ToolkitNotFound                 the compiler it needs is not installed
        ├── ArchitectureNotFound            no architecture given and no GPU to ask
        ├── EmptyOutput                     the compiler succeeded but wrote no binary
        ├── WorkerCrashed                   the worker process running it died
        ├── ServerLost                      the compile server went away before it finished
        └── InternalError                   asynccomp itself failed on this job

    AsyncCompWarning (a UserWarning)        something went wrong that cost no result
    ├── CacheWarning                        the compile cache (see asynccomp.cache)
    ├── ClusterWarning                      the Ray cluster (fell back to local workers,
    │                                       refused or lost actors)
    ├── ServerWarning                       the compile server's shared folder was taken
    │                                       or open to others: a private one is used
    └── ResourceLimitWarning                a worker count was lowered to fit memory

Compile failures do not raise out of ``Engine.compile``: they come back as
``CompileResult.error`` so that one broken kernel never costs a sweep its other results.
``CompileResult.unwrap()`` raises the recorded error when you want exceptions instead.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from .job import CompileJob

__all__ = (
    "ArchitectureNotFound",
    "AsyncCompError",
    "AsyncCompWarning",
    "BenchError",
    "CacheUnavailable",
    "CacheWarning",
    "ClusterError",
    "ClusterWarning",
    "CompileError",
    "CompileTimeout",
    "DumpDirError",
    "EmptyOutput",
    "EngineClosed",
    "InternalError",
    "InvalidJob",
    "ResourceLimitWarning",
    "ServerError",
    "ServerLost",
    "ServerWarning",
    "SettingsError",
    "TaskFailed",
    "ToolkitNotFound",
    "UnknownBackend",
    "WorkerCrashed",
    "WorkerStartFailed",
)

E = TypeVar("E", bound="CompileError")


class AsyncCompError(Exception):
    """Base class of every exception asynccomp defines."""


class InvalidJob(AsyncCompError, ValueError):
    """A :class:`~asynccomp.CompileJob` has a bad value (bad settings raise its
    subclass :class:`SettingsError`).

    ``field`` names the offending attribute, ``value`` holds what was given and
    ``problem`` says what is wrong with it.
    """

    def __init__(self, field: str, value: object, problem: str) -> None:
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(f"invalid {field} {shown}: {problem}")
        self.field = field
        self.value = value
        self.problem = problem


class SettingsError(InvalidJob):
    """A setting has a bad value, or was given to a mode that does not use it (an
    engine on a compile server given worker counts: they are the server's).

    ``field`` names the setting (as ``Engine(...)`` or the mode object spells it) and
    ``value`` holds what was given. Raised as an engine, a mode object
    (:mod:`asynccomp.config`) or a server is made, before anything starts: a settings
    error is the caller's to fix, never one job's fate.

    It is an :class:`InvalidJob` for compatibility: settings were refused with
    ``InvalidJob`` before this class existed, and ``except InvalidJob`` (or
    ``ValueError``) around an ``Engine(...)`` keeps working. ``except SettingsError``
    catches the settings alone, never a bad job.
    """


class UnknownBackend(InvalidJob):
    """A backend name that no backend is registered under (:mod:`asynccomp.backends`);
    ``registered`` holds the names there are."""

    def __init__(self, value: object, registered: tuple[str, ...]) -> None:
        super().__init__("backend", value, f"expected one of {', '.join(registered)}")
        self.registered = registered


class EngineClosed(AsyncCompError, RuntimeError):
    """The engine is not running: use it inside ``async with Engine(...)`` (or
    ``with SyncEngine(...)``), before it closes, in the process that started it."""


class DumpDirError(AsyncCompError, OSError):
    """The dump root cannot be created or is not writable."""


class CacheUnavailable(AsyncCompError, OSError):
    """The disk cache folder cannot be created or written."""


class BenchError(AsyncCompError, ValueError):
    """The benchmark cannot run as asked: a bad setting, an empty corpus, a missing
    optional part (the TVM facade, matplotlib for a plot)."""


class ServerError(AsyncCompError, RuntimeError):
    """The compile server cannot be started, reached or used: it did not come up, it
    speaks another protocol or version (both are named), or it refused this user."""


class ClusterError(AsyncCompError, RuntimeError):
    """The Ray cluster an engine was given cannot be used (:mod:`asynccomp.ray`): Ray is
    not installed, the cluster cannot be reached, it offers no CPU, or none of its
    actors runs the toolkit this process's cache keys name."""


class CompileError(AsyncCompError):
    """A job produced no binary.

    ``log`` holds the full compiler output (diagnostics included) and ``job`` the job.
    """

    def __init__(self, message: str, *, log: str = "", job: CompileJob | None = None) -> None:
        super().__init__(message)
        self.log = log
        self.job = job

    def for_job(self: E, job: CompileJob) -> E:
        """A copy of this error that names ``job`` (jobs answered by one compile, or by
        one cache entry, each get their own error object)."""
        if self.job is job:
            return self
        clone = copy.copy(self)
        clone.job = job
        return clone


class CompileTimeout(CompileError):
    """The compile ran longer than the job's ``timeout`` and was stopped."""

    def __init__(
        self, message: str, *, timeout: float, log: str = "", job: CompileJob | None = None
    ) -> None:
        super().__init__(message, log=log, job=job)
        self.timeout = timeout


class ToolkitNotFound(CompileError):
    """The compiler a job needs was not found; ``searched`` lists every place looked at."""

    def __init__(
        self, message: str, *, searched: Sequence[str] = (), job: CompileJob | None = None
    ) -> None:
        super().__init__(message, job=job)
        self.searched = tuple(searched)


class ArchitectureNotFound(CompileError):
    """No architecture was given and no GPU could be asked for one."""


class EmptyOutput(CompileError):
    """The compiler exited successfully but left no binary (or an empty one), e.g. with
    nvcc's ``--dryrun`` or NVRTC's ``-dlto`` among the options. TVM reports this as
    "empty result"."""


class WorkerCrashed(CompileError):
    """The worker process compiling the job died (a crash or an out-of-memory kill), or
    no worker process could be started for it."""


class ServerLost(CompileError):
    """The compile server this engine uses went away (killed, stopped) before the job
    finished; the engine's next call starts (or finds) a new one."""


class InternalError(CompileError):
    """asynccomp could not run this job for a reason outside the compiler's verdict on
    the source: an OS error on its own files (a full disk), a compiler that could not be
    started or was killed by a signal, or a bug. ``__cause__`` holds the original
    exception (an ``OSError``, or a ``subprocess.CalledProcessError`` naming the tool a
    signal killed); such a failure is never cached. The other jobs of the batch are not
    affected."""


class WorkerStartFailed(AsyncCompError, RuntimeError):
    """Worker processes (:mod:`asynccomp.workers`: ``asynccomp.tvm.Builder``'s,
    TileLang's lowering) cannot start: their initializer raised (the message holds its
    traceback), or they keep exiting first or not getting ready within their
    ``start_timeout``. The pool stays usable: its next task tries again."""


class TaskFailed(AsyncCompError, RuntimeError):
    """A task in a worker process failed in a way that cannot travel back as itself: it
    raised an exception that does not pickle, or returned a value that does not (the
    worker serves on either way). ``type_name`` is the exception's type (``TypeError``
    for a value that did not pickle), ``traceback`` the worker's traceback text."""

    def __init__(self, message: str, *, type_name: str = "", traceback: str = "") -> None:
        super().__init__(message)
        self.type_name = type_name
        self.traceback = traceback

    def __reduce__(self) -> tuple[object, ...]:
        return (_task_failed, (str(self), self.type_name, self.traceback))


def _task_failed(message: str, type_name: str, traceback: str) -> TaskFailed:
    return TaskFailed(message, type_name=type_name, traceback=traceback)


class AsyncCompWarning(UserWarning):
    """Base class of the warnings asynccomp issues: problems that cost no result."""


class CacheWarning(AsyncCompWarning):
    """Base class of the warnings the compile cache issues."""


class ClusterWarning(AsyncCompWarning):
    """The Ray cluster cost no result but something is off: the engine fell back to
    local workers, or actors were refused (another toolkit) or lost."""


class ServerWarning(AsyncCompWarning):
    """The compile server's folder in the shared temporary folder belongs to another
    user or is open to others (another user made it first): a private folder of this
    user's is used instead (:mod:`asynccomp.server`)."""


class ResourceLimitWarning(AsyncCompWarning):
    """A worker count asked for was more than this machine's memory holds, and was
    lowered (each NVRTC worker process or nvcc run needs memory of its own)."""
