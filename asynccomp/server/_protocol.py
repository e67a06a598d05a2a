"""The compile server's protocol: one typed message per request and per answer.

Every message is a frozen dataclass with a ``TYPE``; :func:`send_form` turns one into
fields and blobs for the wire (:mod:`._wire`), :func:`parse` turns a wire message back
into one, checking every field's type (:mod:`._fields`: a message of another shape is a
:class:`~._wire.WireError`). What the messages carry, to and from the runner's types,
is :mod:`._forms`. Requests that can be in flight together on one connection
(``compile``, ``warm_up``, ``make_pch``, ``status``) carry an ``id``, and every answer
names the id it answers.

A connection::

    client                                   server
    Hello(protocol, version, pid)       ->
                                        <-   Welcome(pid, uid, identity, toolkit, slots, ...)
    Compile(id=1, want, jobs, end)      ->   (+ sources; ``end``: the call has no more jobs)
    Jobs(id=1, jobs, end)               ->   (a call's further chunks, the last with end)
                                        <-   Results(id=1, started, outcomes, end)
                                                 (+ logs, binaries; as many as needed:
                                                  what is ready at once goes together,
                                                  ``end`` with the call's last outcome)
                                        <-   Workers(n)   (when the count changes, and
                                                      after 5 s without an answer: a
                                                      keepalive)
    Cancel(id=1)                        ->   (a call cancelled before it ended)
    WarmUp(id=2)                        ->
                                        <-   WarmedUp(id=2)
    MakePch(id=5, job)                  ->   (+ its source)
                                        <-   PchMade(id=5, made)
    Status(id=3)                        ->
                                        <-   StatusReply(id=3, status)
    Stop(id=4)                          ->
                                        <-   Stopping(id=4)
                                        <-   Error(id, message)   (a request it refuses)
                                        <-   Closing(reason)      (the server stops)

So a one-job call answered from the cache is two messages: its ``Compile`` (with
``end``) and one ``Results`` (with ``end``); a compile adds a ``Results`` saying it
started.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ._fields import build, plain
from ._wire import Message, WireError

__all__ = (
    "PROTOCOL",
    "Cancel",
    "Closing",
    "Compile",
    "Error",
    "Hello",
    "JobSpec",
    "Jobs",
    "MakePch",
    "OutcomeSpec",
    "PchMade",
    "Results",
    "Status",
    "StatusReply",
    "Stop",
    "Stopping",
    "WarmUp",
    "WarmedUp",
    "Welcome",
    "Workers",
    "parse",
    "request_id",
    "send_form",
)

#: Bumped when a message changes shape; a client and a server of different protocols
#: refuse each other, naming both versions. 4: a call's jobs ride in its ``Compile``, its
#: outcomes come back together in ``Results``; the worker count only in ``Workers``.
#: 5: the welcome's toolkit carries each backend's description of its compiler.
#: 6: ``make_pch``.
PROTOCOL = 6


# -- requests (client -> server) -----------------------------------------------------------


@dataclass(frozen=True)
class Hello:
    TYPE: ClassVar[str] = "hello"
    protocol: int
    version: str
    pid: int


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
    base_dir: str | None  # $ASYNCCOMP_BASE_DIR and the caller's working folder (both
    cwd: str | None  # or neither): the cache key's paths under it are relative


@dataclass(frozen=True)
class Compile:
    """Opens call ``id`` with its first jobs (their sources as blobs); ``end``: it has no
    more (else they follow in :class:`Jobs`, the last with ``end``). ``want=False``:
    nobody reads the outputs, only their statuses come back."""

    TYPE: ClassVar[str] = "compile"
    id: int
    want: bool
    jobs: list[JobSpec]
    end: bool


@dataclass(frozen=True)
class Jobs:
    """More jobs of open call ``id``; ``end``: the last."""

    TYPE: ClassVar[str] = "jobs"
    id: int
    jobs: list[JobSpec]
    end: bool


@dataclass(frozen=True)
class Cancel:
    TYPE: ClassVar[str] = "cancel"
    id: int


@dataclass(frozen=True)
class WarmUp:
    TYPE: ClassVar[str] = "warm_up"
    id: int


@dataclass(frozen=True)
class MakePch:
    """Make the precompiled header ``job`` (its source as a blob) would use
    (``Engine.make_pch``)."""

    TYPE: ClassVar[str] = "make_pch"
    id: int
    job: JobSpec


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
class OutcomeSpec:
    """A job's outcome. In a call made with ``want``, its log follows as a blob, then its
    binary when ``binary``; without, nothing follows (the status says how it went)."""

    index: int
    status: str
    answer: str
    elapsed: float
    filename: str
    message: str
    warnings: list[str]
    binary: bool
    cause: list[Any] | None  # [errno or None, message] of an OSError


@dataclass(frozen=True)
class Results:
    """What happened to call ``id``'s jobs since the last one: those that started
    compiling, and the outcomes (blobs in their order); ``end``: the call is over, every
    job has had its outcome (one still waiting never will)."""

    TYPE: ClassVar[str] = "results"
    id: int
    started: list[int]
    outcomes: list[OutcomeSpec]
    end: bool


@dataclass(frozen=True)
class Workers:
    """The server's worker count: said when it changes, and as a keepalive."""

    TYPE: ClassVar[str] = "workers"
    workers: int


@dataclass(frozen=True)
class WarmedUp:
    TYPE: ClassVar[str] = "warmed_up"
    id: int


@dataclass(frozen=True)
class PchMade:
    """``made``: the server's workers share the PCH now."""

    TYPE: ClassVar[str] = "pch_made"
    id: int
    made: bool


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
        Cancel,
        WarmUp,
        MakePch,
        Status,
        Stop,
        Welcome,
        Results,
        Workers,
        WarmedUp,
        PchMade,
        StatusReply,
        Stopping,
        Error,
        Closing,
    )
}


def parse(message: Message) -> Any:
    """The typed message in a wire message; WireError if it has another shape."""
    cls = _MESSAGES.get(message.type)
    if cls is None:
        raise WireError(f"unknown message type {message.type!r}")
    return build(cls, message.fields, message.type)


def send_form(message: Any, blobs: Sequence[bytes] = ()) -> tuple[dict[str, Any], Sequence[bytes]]:
    """A typed message as the wire's fields and blobs."""
    fields = plain(message)
    fields["type"] = message.TYPE
    return fields, blobs


def request_id(message: Message) -> int | None:
    """The ``id`` a message names, if it names one (for an error about it)."""
    value = message.fields.get("id")
    return value if isinstance(value, int) and not isinstance(value, bool) else None
