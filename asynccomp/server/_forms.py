"""What the compile server's messages carry, to and from the runner's types.

A :class:`~asynccomp.runner.CompileRequest` travels as a :class:`~._protocol.JobSpec`
and its sources as blobs; an :class:`~asynccomp.runner.Outcome` comes back as an
:class:`~._protocol.OutcomeSpec` (log and binary as blobs) or, for a call nobody reads
(a prefetch), the status alone; the welcome describes the server's
:class:`~asynccomp.toolkit.Toolkit`. Each conversion back checks what the
message's types cannot say (statuses, blob counts), raising
:class:`~._wire.WireError`.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..backends import BackendOutput, CompilerInfo, PreparedCompile
from ..job import OutputFormat
from ..runner import CompileRequest, Outcome
from ..toolkit import Toolkit
from ._fields import build
from ._protocol import JobSpec, OutcomeSpec
from ._wire import WireError

__all__ = (
    "blob_count",
    "outcome_form",
    "outcome_of",
    "prepared_of",
    "spec_of",
    "toolkit_from",
    "toolkit_to",
)

_STATUSES = ("ok", "failed", "empty", "timeout", "crashed", "internal", "lost")
_ANSWERS = ("compiled", "cache", "shared", "none")


def _text(blob: bytes) -> str:
    # Sources are bytes: those that are not UTF-8 travel as they are (surrogateescape).
    return blob.decode("utf-8", "surrogateescape")


def spec_of(request: CompileRequest) -> tuple[JobSpec, list[bytes]]:
    """A request as a job spec and its blobs (source, and the fast path's original)."""
    p = request.prepared
    spec = JobSpec(
        index=request.index,
        estimate=request.estimate,
        backend=p.backend,
        output=p.output,
        arch=p.arch,
        filename=p.filename,
        options=list(p.options),
        timeout=p.timeout,
        keep_dir=p.keep_dir,
        fallback=p.fallback_source is not None,
        base_dir=p.base_dir,
        cwd=p.cwd,
    )
    blobs = [p.source.encode("utf-8", "surrogateescape")]
    if p.fallback_source is not None:
        blobs.append(p.fallback_source.encode("utf-8", "surrogateescape"))
    return spec, blobs


def prepared_of(spec: JobSpec, blobs: Sequence[bytes]) -> CompileRequest:
    """The request again (shapes checked here; the server checks the values)."""
    if len(blobs) != (2 if spec.fallback else 1):
        raise WireError(f"job {spec.index}: {len(blobs)} sources")
    if spec.output not in ("cubin", "fatbin", "ptx"):
        raise WireError(f"job {spec.index}: output {spec.output!r}")
    prepared = PreparedCompile(
        backend=spec.backend,
        output=typing.cast(OutputFormat, spec.output),
        arch=spec.arch,
        source=_text(blobs[0]),
        filename=spec.filename,
        options=tuple(spec.options),
        timeout=spec.timeout,
        keep_dir=spec.keep_dir,
        fallback_source=_text(blobs[1]) if spec.fallback else None,
        base_dir=spec.base_dir,
        cwd=spec.cwd,
    )
    return CompileRequest(spec.index, prepared, spec.estimate)


def blob_count(spec: OutcomeSpec, want: bool) -> int:
    """How many blobs follow an outcome in a call made with ``want`` (checked by
    :func:`outcome_of`)."""
    return (2 if spec.binary else 1) if want else 0


def outcome_of(spec: OutcomeSpec, blobs: Sequence[bytes], want: bool) -> Outcome:
    """The outcome an :class:`OutcomeSpec` and its blobs carry."""
    if spec.status not in _STATUSES or spec.answer not in _ANSWERS:
        raise WireError(f"an outcome with status {spec.status!r}, answer {spec.answer!r}")
    if spec.elapsed < 0:
        raise WireError("an outcome with a negative time")
    status = typing.cast(Any, spec.status)
    answer = typing.cast(Any, spec.answer)
    if not want:
        if blobs or spec.binary:
            raise WireError("an outcome with blobs in a call made without want")
        return Outcome(BackendOutput(status, None, ""), answer, spec.elapsed, "")
    if len(blobs) != (2 if spec.binary else 1) or (spec.binary != (status == "ok")):
        raise WireError("an output whose log or binary is missing or extra")
    cause = None
    if spec.cause is not None:
        if len(spec.cause) != 2 or not isinstance(spec.cause[1], str):
            raise WireError("a cause that is not [errno, message]")
        errno = spec.cause[0] if isinstance(spec.cause[0], int) else None
        cause = OSError(errno, spec.cause[1]) if errno is not None else OSError(spec.cause[1])
    out = BackendOutput(
        status,
        blobs[1] if spec.binary else None,
        blobs[0].decode("utf-8", "replace"),
        spec.message,
        tuple(spec.warnings),
        cause=cause,
    )
    return Outcome(out, answer, spec.elapsed, spec.filename)


def outcome_form(index: int, outcome: Outcome, want: bool) -> tuple[OutcomeSpec, list[bytes]]:
    """An outcome as the spec that carries it, and its blobs (none without ``want``)."""
    out = outcome.output
    if not want:
        spec = OutcomeSpec(
            index, out.status, outcome.answer, outcome.elapsed, "", "", [], False, None
        )
        return spec, []
    cause = None
    if out.cause is not None:
        errno = getattr(out.cause, "errno", None)
        text = getattr(out.cause, "strerror", None) or str(out.cause)
        cause = [errno if isinstance(errno, int) else None, text]
    spec = OutcomeSpec(
        index=index,
        status=out.status,
        answer=outcome.answer,
        elapsed=outcome.elapsed,
        filename=outcome.filename,
        message=out.message,
        warnings=list(out.warnings),
        binary=out.binary is not None and out.status == "ok",
        cause=cause,
    )
    blobs = [out.log.encode("utf-8", "surrogateescape")]
    if spec.binary:
        assert out.binary is not None
        blobs.append(out.binary)
    return spec, blobs


def toolkit_to(toolkit: Toolkit) -> dict[str, Any]:
    """A toolkit as a welcome carries it."""
    return {
        "nvcc": None if toolkit.nvcc is None else str(toolkit.nvcc),
        "nvcc_version": toolkit.nvcc_version,
        "cuda_root": None if toolkit.cuda_root is None else str(toolkit.cuda_root),
        "include_dirs": [str(d) for d in toolkit.include_dirs],
        "nvrtc_version": None if toolkit.nvrtc_version is None else list(toolkit.nvrtc_version),
        "nvrtc_library": toolkit.nvrtc_library,
        "searched": list(toolkit.searched),
        "nvrtc_error": toolkit.nvrtc_error,
        "nvrtc_archs": list(toolkit.nvrtc_archs),
        "nvcc_archs": list(toolkit.nvcc_archs),
        # Each backend's own description of its compiler (version, path, identity,
        # architectures, where it runs): the client reports and renders with these.
        "compilers": {name: info.to_json() for name, info in toolkit.compilers},
        "described_fields": toolkit.described_fields,
    }


@dataclass(frozen=True)
class _ToolkitFields:
    nvcc: str | None
    nvcc_version: str | None
    cuda_root: str | None
    include_dirs: list[str]
    nvrtc_version: list[int] | None
    nvrtc_library: str | None
    searched: list[str]
    nvrtc_error: str | None
    nvrtc_archs: list[int]
    nvcc_archs: list[int]
    compilers: dict[str, Any]
    described_fields: str


def toolkit_from(fields: dict[str, Any]) -> Toolkit:
    """The toolkit a welcome describes (WireError if it is not one)."""
    t = build(_ToolkitFields, fields, "toolkit")
    if t.nvrtc_version is not None and len(t.nvrtc_version) != 2:
        raise WireError("toolkit.nvrtc_version: expected [major, minor]")
    return Toolkit(
        nvcc=None if t.nvcc is None else Path(t.nvcc),
        nvcc_version=t.nvcc_version,
        cuda_root=None if t.cuda_root is None else Path(t.cuda_root),
        include_dirs=tuple(Path(d) for d in t.include_dirs),
        nvrtc_version=None if t.nvrtc_version is None else (t.nvrtc_version[0], t.nvrtc_version[1]),
        nvrtc_library=t.nvrtc_library,
        searched=tuple(t.searched),
        nvrtc_error=t.nvrtc_error,
        nvrtc_archs=tuple(t.nvrtc_archs),
        nvcc_archs=tuple(t.nvcc_archs),
        compilers=_compilers_from(t.compilers),
        described_fields=t.described_fields,
    )


def _compilers_from(fields: dict[str, Any]) -> tuple[tuple[str, CompilerInfo], ...]:
    compilers = []
    for name, info in fields.items():
        if not isinstance(info, dict):
            raise WireError(f"toolkit.compilers.{name}: expected an object")
        try:
            compilers.append((str(name), CompilerInfo.from_json(info)))
        except ValueError as exc:
            raise WireError(f"toolkit.compilers.{name}: {exc}") from None
    return tuple(compilers)
