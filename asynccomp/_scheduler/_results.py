"""Building :class:`~asynccomp.CompileResult` s: from a backend's output, for a job that
could not run, for a job answered by another job's compile."""

from __future__ import annotations

from dataclasses import replace

from ..backends import BackendOutput, PreparedCompile
from ..cache._results import renamed_log
from ..errors import (
    CompileError,
    CompileTimeout,
    EmptyOutput,
    InternalError,
    WorkerCrashed,
)
from ..job import CompileJob
from ..ptxas import parse_resource_report
from ..result import CompileResult

__all__ = ("failure", "from_output", "internal_failure", "shared")

# The error each failed backend status becomes (timeouts are built apart: they carry
# the job's timeout).
_FAILURE_TYPES: dict[str, type[CompileError]] = {
    "failed": CompileError,
    "empty": EmptyOutput,
    "crashed": WorkerCrashed,
    "internal": InternalError,
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


def from_output(
    job: CompileJob,
    prepared: PreparedCompile,
    out: BackendOutput,
    *,
    elapsed: float,
    queued: float,
) -> CompileResult:
    """The result of a compile that ran."""
    error: CompileError | None = None
    what = f"{job.backend} job {job.name!r} ({prepared.arch})"
    if out.status == "timeout" and job.timeout is None:
        error = CompileError(f"{what} was stopped: {out.message}", log=out.log, job=job)
    elif out.status == "timeout":
        assert job.timeout is not None
        error = CompileTimeout(
            f"{what} timed out after {job.timeout:g} s: {out.message}",
            timeout=job.timeout,
            log=out.log,
            job=job,
        )
    elif out.status != "ok":
        kind = _FAILURE_TYPES[out.status]
        error = kind(f"{what}: {out.message}\n{out.log}".rstrip(), log=out.log, job=job)
    resources = parse_resource_report(out.log) if out.log else {}
    return CompileResult(
        job=job,
        output=prepared.output,
        arch=prepared.arch,
        binary=out.binary if error is None else None,
        log=out.log,
        error=error,
        elapsed=elapsed,
        queued=queued,
        command=prepared.options,
        resources=resources,
        warnings=out.warnings,
    )


def shared(
    result: CompileResult,
    job: CompileJob,
    prepared: PreparedCompile,
    compiled: PreparedCompile,
    *,
    queued: float,
) -> CompileResult:
    """``result`` (the compile of ``compiled``, another job's) as the result of ``job``:
    its own job, command, error object, waiting time and file name in the log's
    diagnostics; no dump folder of the other job's."""
    error = None if result.error is None else result.error.for_job(job)
    log = renamed_log(result.log, compiled.filename, prepared.filename)
    if error is not None and log != result.log:
        error.log = log
    return replace(
        result,
        job=job,
        error=error,
        queued=queued,
        dump_dir=None,
        command=prepared.options,
        log=log,
    )
