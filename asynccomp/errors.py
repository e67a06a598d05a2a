"""The exceptions asynccomp raises or records.

One tree, so ``except AsyncCompError`` catches everything this library means to raise::

    AsyncCompError
    ├── InvalidJob (also a ValueError)   bad input, raised when a CompileJob is built
    ├── EngineClosed (also a RuntimeError) the engine was used outside ``async with``
    ├── DumpDirError (also an OSError)   the dump root cannot be created or written
    └── CompileError                     a job produced no binary (kept in ``result.error``)
        ├── CompileTimeout               the job ran past its ``timeout`` and was stopped
        ├── ToolkitNotFound              the compiler it needs is not installed
        ├── ArchitectureNotFound         no architecture given and no GPU to ask
        ├── EmptyOutput                  the compiler succeeded but wrote no binary
        └── WorkerCrashed                the worker process running it died

Compile failures do not raise out of ``Engine.compile``: they come back as
``CompileResult.error`` so that one broken kernel never costs a sweep its other results.
``CompileResult.unwrap()`` raises the recorded error when you want exceptions instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .job import CompileJob

__all__ = (
    "ArchitectureNotFound",
    "AsyncCompError",
    "CompileError",
    "CompileTimeout",
    "DumpDirError",
    "EmptyOutput",
    "EngineClosed",
    "InvalidJob",
    "ToolkitNotFound",
    "WorkerCrashed",
)


class AsyncCompError(Exception):
    """Base class of every exception asynccomp defines."""


class InvalidJob(AsyncCompError, ValueError):
    """A :class:`~asynccomp.CompileJob` (or an engine setting) has a bad value.

    ``field`` names the offending attribute and ``value`` holds what was given.
    """

    def __init__(self, field: str, value: object, problem: str) -> None:
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(f"invalid {field} {shown}: {problem}")
        self.field = field
        self.value = value


class EngineClosed(AsyncCompError, RuntimeError):
    """The engine is not running: use it inside ``async with Engine(...)``."""


class DumpDirError(AsyncCompError, OSError):
    """The dump root cannot be created or is not writable."""


class CompileError(AsyncCompError):
    """A job produced no binary.

    ``log`` holds the full compiler output (diagnostics included) and ``job`` the job.
    """

    def __init__(self, message: str, *, log: str = "", job: CompileJob | None = None) -> None:
        super().__init__(message)
        self.log = log
        self.job = job


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
    nvcc's ``--dryrun`` among the options. TVM reports this as "empty result"."""


class WorkerCrashed(CompileError):
    """The worker process compiling the job died (a crash or an out-of-memory kill)."""
