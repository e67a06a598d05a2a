"""Building :class:`~asynccomp.CompileResult` s, the one place they are made: from a
runner's :class:`~asynccomp.runner.Outcome` (whatever the runner: this process, the
compile server, a Ray cluster), or for a job that could not be run at all."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType

from ..backends import PreparedCompile
from ..errors import (
    CompileError,
    CompileTimeout,
    EmptyOutput,
    InternalError,
    ServerLost,
    WorkerCrashed,
)
from ..job import CompileJob
from ..ptxas import KernelResources, parse_resource_report
from ..result import CompileResult
from ..runner import Outcome

__all__ = (
    "failure",
    "from_outcome",
    "internal_failure",
    "renamed_log",
    "resources_of",
    "with_warnings",
)

# The error each failed status becomes (timeouts are built apart: they carry the job's
# timeout).
_FAILURE_TYPES: dict[str, type[CompileError]] = {
    "failed": CompileError,
    "empty": EmptyOutput,
    "crashed": WorkerCrashed,
    "internal": InternalError,
    "lost": ServerLost,
}


def failure(job: CompileJob, arch: str | None, error: CompileError) -> CompileResult:
    """The result of a job that could not run at all (no compiler, no architecture)."""
    return CompileResult(
        job=job,
        output=job.output_format,
        arch=arch,
        binary=None,
        log=error.log,
        error=error.for_job(job),
    )


def internal_failure(
    job: CompileJob, prepared: PreparedCompile | None, exc: BaseException
) -> CompileResult:
    """The result of a job that asynccomp itself failed on (``__cause__`` is ``exc``)."""
    error = InternalError(f"asynccomp failed on {job.backend} job {job.name!r}: {exc!r}", job=job)
    error.__cause__ = exc
    return CompileResult(
        job=job,
        output=job.output_format if prepared is None else prepared.output,
        arch=None if prepared is None else prepared.arch,
        binary=None,
        error=error,
        command=() if prepared is None else prepared.options,
    )


def renamed_log(log: str, old: str, new: str) -> str:
    """A log's diagnostics, ``old.cu(3): warning ...``, as the compile of ``new`` would
    have written them."""
    if not log or old == new or not old:
        return log
    return re.sub(rf"(?m)^{re.escape(old)}(?=[(:])", lambda _: new, log)


@functools.lru_cache(maxsize=4096)
def resources_of(log: str, arch: str | None = None) -> Mapping[str, KernelResources]:
    """The ptxas report in ``log``, per kernel; a report that names no architecture
    (nvJitLink 13.0's ``info    : Function properties for 'k':`` form) is for ``arch``,
    the one the job was compiled for. Cached: a cache hit hands back the log object its
    entry holds, whose hash Python keeps, so the report of a hot entry is parsed once,
    not on every hit (it was half a hit's cost)."""
    if not log:
        return MappingProxyType({})
    report = parse_resource_report(log)
    if arch is not None:
        report = {
            name: r if r.arch is not None else dataclasses.replace(r, arch=arch)
            for name, r in report.items()
        }
    return MappingProxyType(report)


def from_outcome(
    job: CompileJob, prepared: PreparedCompile, outcome: Outcome, *, queued: float
) -> CompileResult:
    """The result of ``job`` (rendered as ``prepared``) from its runner's outcome."""
    out = outcome.output
    log = renamed_log(out.log, outcome.filename, prepared.filename)
    error: CompileError | None = None
    what = f"{job.backend} job {job.name!r} ({prepared.arch})"
    if out.status == "timeout" and job.timeout is None:
        error = CompileError(f"{what} was stopped: {out.message}", log=log, job=job)
    elif out.status == "timeout":
        assert job.timeout is not None
        error = CompileTimeout(
            f"{what} timed out after {job.timeout:g} s: {out.message}",
            timeout=job.timeout,
            log=log,
            job=job,
        )
    elif out.status != "ok":
        kind = _FAILURE_TYPES[out.status]
        error = kind(f"{what}: {out.message}\n{log}".rstrip(), log=log, job=job)
        error.__cause__ = out.cause
    return CompileResult(
        job=job,
        output=prepared.output,
        arch=prepared.arch,
        binary=out.binary if error is None else None,
        log=log,
        error=error,
        elapsed=outcome.elapsed,
        queued=queued,
        command=prepared.options,
        resources=resources_of(log, prepared.arch),
        cached=outcome.answer == "cache",
        warnings=out.warnings,
        shared=outcome.answer == "shared",
    )


def with_warnings(result: CompileResult, warnings: list[str]) -> CompileResult:
    """``result`` with ``warnings`` (e.g. a dump that failed) before its own."""
    return replace(result, warnings=(*warnings, *result.warnings)) if warnings else result
