"""The compile server's protocol: one typed message per request and per answer.

Every message is a frozen dataclass with a ``TYPE``; :func:`send_form` turns one into
fields and blobs for the wire (:mod:`._wire`), :func:`parse` turns a wire message back
into one, checking every field's type (a message of another shape is a
:class:`~._wire.WireError`). Requests that can be in flight together on one connection
(``compile``, ``warm_up``, ``status``) carry an ``id``, and every answer names the id it
answers.

A connection::

    client                                   server
    Hello(protocol, version, pid)       ->
                                        <-   Welcome(pid, uid, identity, toolkit, slots, ...)
    Compile(id=1, want=True)            ->
    Jobs(id=1, jobs=[...]) + sources    ->   (as many as the call has chunks)
    End(id=1)                           ->
                                        <-   Started(id=1, indices=[0, 3])
                                        <-   Output(id=1, index=3, ...) + log, binary
                                        <-   Done(id=1, index=0, ...)      (want=False)
                                        <-   Ended(id=1)
                                        <-   Workers(n)   (whenever the count changes)
    Cancel(id=1)                        ->   (a call cancelled before it ended)
    WarmUp(id=2)                        ->
                                        <-   WarmedUp(id=2, workers)
    Status(id=3)                        ->
                                        <-   StatusReply(id=3, status)
    Stop(id=4)                          ->
                                        <-   Stopping(id=4)
                                        <-   Error(id, message)   (a request it refuses)
                                        <-   Closing(reason)      (the server stops)
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar, Union, get_args, get_origin, get_type_hints

from ..backends import BackendOutput, PreparedCompile
from ..job import OutputFormat
from ..runner import CompileRequest, Outcome
from ..toolkit import Toolkit
from ._wire import Message, WireError

__all__ = (
    "PROTOCOL",
    "Cancel",
    "Closing",
    "Compile",
    "Done",
    "End",
    "Ended",
    "Error",
    "Hello",
    "JobSpec",
    "Jobs",
    "Output",
    "Started",
    "Status",
    "StatusReply",
    "Stop",
    "Stopping",
    "WarmUp",
    "WarmedUp",
    "Welcome",
    "Workers",
    "outcome_of",
    "output_form",
    "parse",
    "prepared_of",
    "request_id",
    "send_form",
    "spec_of",
    "toolkit_from",
    "toolkit_to",
)

#: Bumped when a message changes shape; a client and a server of different protocols
#: refuse each other, naming both versions.
PROTOCOL = 2

M = TypeVar("M")
_STATUSES = ("ok", "failed", "empty", "timeout", "crashed", "internal", "lost")
_ANSWERS = ("compiled", "cache", "shared", "none")


# -- requests (client -> server) -----------------------------------------------------------


@dataclass(frozen=True)
class Hello:
    TYPE: ClassVar[str] = "hello"
    protocol: int
    version: str
    pid: int


@dataclass(frozen=True)
class Compile:
    """Opens request ``id``: its jobs follow in :class:`Jobs` messages, then :class:`End`."""

    TYPE: ClassVar[str] = "compile"
    id: int
    want: bool


@dataclass(frozen=True)
class JobSpec:
    """One rendered compile (its source, and the original source when the TVM fast path
    rewrote it, travel as blobs)."""

    index: int
    estimate: float
    backend: str
    output: str
    arch: str
    filename: str
    options: list[str]
    timeout: float | None
    keep_dir: str | None
    fallback: bool


@dataclass(frozen=True)
class Jobs:
    TYPE: ClassVar[str] = "jobs"
    id: int
    jobs: list[JobSpec]


@dataclass(frozen=True)
class End:
    TYPE: ClassVar[str] = "end"
    id: int


@dataclass(frozen=True)
class Cancel:
    TYPE: ClassVar[str] = "cancel"
    id: int


@dataclass(frozen=True)
class WarmUp:
    TYPE: ClassVar[str] = "warm_up"
    id: int


@dataclass(frozen=True)
class Status:
    TYPE: ClassVar[str] = "status"
    id: int


@dataclass(frozen=True)
class Stop:
    TYPE: ClassVar[str] = "stop"
    id: int


# -- answers (server -> client) --------------------------------------------------------------


@dataclass(frozen=True)
class Welcome:
    TYPE: ClassVar[str] = "welcome"
    protocol: int
    version: str
    pid: int
    uid: int
    identity: str
    toolkit: dict[str, Any]
    slots: dict[str, int]
    workers: int
    #: What the server's engine uses that a client might have set for itself: its
    #: cache folder, remote cache (password redacted), worker counts, executor.
    settings: dict[str, Any]


@dataclass(frozen=True)
class Started:
    TYPE: ClassVar[str] = "started"
    id: int
    indices: list[int]
    workers: int


@dataclass(frozen=True)
class Output:
    """A job's outcome, with its log and binary as blobs."""

    TYPE: ClassVar[str] = "output"
    id: int
    index: int
    status: str
    answer: str
    elapsed: float
    filename: str
    message: str
    warnings: list[str]
    binary: bool
    cause: list[Any] | None  # [errno or None, message] of an OSError
    workers: int


@dataclass(frozen=True)
class Done:
    """A job's outcome for a request made with ``want=False``: no log, no binary."""

    TYPE: ClassVar[str] = "done"
    id: int
    index: int
    status: str
    answer: str
    elapsed: float
    workers: int


@dataclass(frozen=True)
class Workers:
    """The server's worker count changed (a worker started or ended)."""

    TYPE: ClassVar[str] = "workers"
    workers: int


@dataclass(frozen=True)
class Ended:
    """Every job of request ``id`` has had its outcome."""

    TYPE: ClassVar[str] = "ended"
    id: int


@dataclass(frozen=True)
class WarmedUp:
    TYPE: ClassVar[str] = "warmed_up"
    id: int
    workers: int


@dataclass(frozen=True)
class StatusReply:
    TYPE: ClassVar[str] = "status_reply"
    id: int
    status: dict[str, Any]


@dataclass(frozen=True)
class Stopping:
    TYPE: ClassVar[str] = "stopping"
    id: int


@dataclass(frozen=True)
class Error:
    """A request refused (``id``), or the connection's own error (``id`` None). The
    connection goes on unless ``fatal``."""

    TYPE: ClassVar[str] = "error"
    id: int | None
    message: str
    fatal: bool


@dataclass(frozen=True)
class Closing:
    TYPE: ClassVar[str] = "closing"
    reason: str


_MESSAGES: dict[str, type] = {
    cls.TYPE: cls
    for cls in (
        Hello,
        Compile,
        Jobs,
        End,
        Cancel,
        WarmUp,
        Status,
        Stop,
        Welcome,
        Started,
        Output,
        Done,
        Workers,
        Ended,
        WarmedUp,
        StatusReply,
        Stopping,
        Error,
        Closing,
    )
}


# -- fields, checked ---------------------------------------------------------------------------


def _check(value: Any, hint: Any, where: str) -> Any:
    """``value`` if it has the type ``hint`` (as JSON gives it), else WireError."""
    origin = get_origin(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        for option in get_args(hint):
            try:
                return _check(value, option, where)
            except WireError:
                continue
        raise WireError(f"{where}: {_shown(value)} is none of {hint}")
    if hint is type(None):
        if value is not None:
            raise WireError(f"{where}: expected null, got {_shown(value)}")
        return None
    if hint is bool:
        if not isinstance(value, bool):
            raise WireError(f"{where}: expected a bool, got {_shown(value)}")
        return value
    if hint is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise WireError(f"{where}: expected an int, got {_shown(value)}")
        return value
    if hint is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise WireError(f"{where}: expected a number, got {_shown(value)}")
        if not math.isfinite(value):
            raise WireError(f"{where}: not a finite number")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise WireError(f"{where}: expected a string, got {_shown(value)}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise WireError(f"{where}: expected a list, got {_shown(value)}")
        (item,) = get_args(hint)
        return [_check(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise WireError(f"{where}: expected an object, got {_shown(value)}")
        _, item = get_args(hint)
        return {str(k): _check(v, item, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _build(hint, value, where)
    raise TypeError(f"no wire check for {hint!r}")  # pragma: no cover - a bug here


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _build(cls: type[M], fields: Any, where: str) -> M:
    if not isinstance(fields, dict):
        raise WireError(f"{where}: expected an object")
    hints = get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name not in fields:
            raise WireError(f"{where}: no field {f.name!r}")
        values[f.name] = _check(fields[f.name], hints[f.name], f"{where}.{f.name}")
    return cls(**values)


def parse(message: Message) -> Any:
    """The typed message in a wire message; WireError if it has another shape."""
    cls = _MESSAGES.get(message.type)
    if cls is None:
        raise WireError(f"unknown message type {message.type!r}")
    return _build(cls, message.fields, message.type)


def send_form(message: Any, blobs: Sequence[bytes] = ()) -> tuple[dict[str, Any], Sequence[bytes]]:
    """A typed message as the wire's fields and blobs."""
    fields = dataclasses.asdict(message)
    fields["type"] = message.TYPE
    return fields, blobs


def request_id(message: Message) -> int | None:
    """The ``id`` a message names, if it names one (for an error about it)."""
    value = message.fields.get("id")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# -- what the messages carry -----------------------------------------------------------------


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
    )
    return CompileRequest(spec.index, prepared, spec.estimate)


def outcome_of(message: Output | Done, blobs: Sequence[bytes]) -> Outcome:
    """The outcome an :class:`Output` or :class:`Done` message carries."""
    if message.status not in _STATUSES or message.answer not in _ANSWERS:
        raise WireError(f"an outcome with status {message.status!r}, answer {message.answer!r}")
    if message.elapsed < 0:
        raise WireError("an outcome with a negative time")
    status = typing.cast(Any, message.status)
    answer = typing.cast(Any, message.answer)
    if isinstance(message, Done):
        if blobs:
            raise WireError("a done message with blobs")
        return Outcome(BackendOutput(status, None, ""), answer, message.elapsed, "")
    if len(blobs) != (2 if message.binary else 1) or (message.binary != (status == "ok")):
        raise WireError("an output whose log or binary is missing or extra")
    cause = None
    if message.cause is not None:
        if len(message.cause) != 2 or not isinstance(message.cause[1], str):
            raise WireError("a cause that is not [errno, message]")
        errno = message.cause[0] if isinstance(message.cause[0], int) else None
        cause = OSError(errno, message.cause[1]) if errno is not None else OSError(message.cause[1])
    out = BackendOutput(
        status,
        blobs[1] if message.binary else None,
        blobs[0].decode("utf-8", "replace"),
        message.message,
        tuple(message.warnings),
        cause=cause,
    )
    return Outcome(out, answer, message.elapsed, message.filename)


def output_form(
    request_id: int, index: int, outcome: Outcome, workers: int, want: bool
) -> tuple[Output | Done, list[bytes]]:
    """An outcome as the message that carries it (with its blobs)."""
    out = outcome.output
    if not want:
        return Done(request_id, index, out.status, outcome.answer, outcome.elapsed, workers), []
    cause = None
    if out.cause is not None:
        errno = getattr(out.cause, "errno", None)
        text = getattr(out.cause, "strerror", None) or str(out.cause)
        cause = [errno if isinstance(errno, int) else None, text]
    message = Output(
        id=request_id,
        index=index,
        status=out.status,
        answer=outcome.answer,
        elapsed=outcome.elapsed,
        filename=outcome.filename,
        message=out.message,
        warnings=list(out.warnings),
        binary=out.binary is not None and out.status == "ok",
        cause=cause,
        workers=workers,
    )
    blobs = [out.log.encode("utf-8", "surrogateescape")]
    if message.binary:
        assert out.binary is not None
        blobs.append(out.binary)
    return message, blobs


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


def toolkit_from(fields: dict[str, Any]) -> Toolkit:
    """The toolkit a welcome describes (WireError if it is not one)."""
    t = _build(_ToolkitFields, fields, "toolkit")
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
    )
