"""The compile server's wire format: length-prefixed frames of a JSON header and blobs.

A frame is a 4-byte big-endian length ``N`` and ``N`` bytes: a 4-byte big-endian length
``J``, ``J`` bytes of a JSON object (the message), then the message's blobs back to back
(sources going out, binaries coming back), whose lengths the message lists under
``"blobs"``. Nothing is pickled: whatever bytes arrive, decoding either gives a message
of known shape or raises :class:`WireError`, which costs the sender its connection and
the server nothing.

Messages (``"type"``): a client says ``hello`` and gets ``welcome`` (or ``error``);
then ``submit`` (a batch of jobs; ``result`` messages come back one per job, in
completion order), ``cancel``, ``warm_up`` (answered by ``warmed``), ``status`` and
``stop``. A server that closes says ``closing``.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from .. import errors
from ..errors import CompileError
from ..job import CompileJob
from ..ptxas import parse_resource_report
from ..result import CompileResult

__all__ = (
    "MAX_FRAME",
    "PROTOCOL",
    "Message",
    "WireError",
    "decode_job",
    "decode_result",
    "encode_frame",
    "encode_job",
    "encode_result",
    "read_message",
)

#: Bumped when a message changes shape; a client and a server of different protocols
#: refuse each other, naming both versions.
PROTOCOL = 1
#: The largest frame accepted (sources and binaries run to tens of MB, not more).
MAX_FRAME = 512 * 2**20

_LENGTH = struct.Struct(">I")


class WireError(Exception):
    """A frame or message that does not follow the protocol."""


class Message:
    """A decoded message: its JSON fields and its blobs."""

    __slots__ = ("blobs", "fields")

    def __init__(self, fields: dict[str, Any], blobs: list[bytes]) -> None:
        self.fields = fields
        self.blobs = blobs

    @property
    def type(self) -> str:
        return str(self.fields["type"])


def encode_frame(fields: Mapping[str, Any], blobs: Sequence[bytes] = ()) -> bytes:
    """One frame: ``fields`` (with ``"blobs"`` set to the blob lengths) and the blobs."""
    header = json.dumps(
        {**fields, "blobs": [len(b) for b in blobs]}, ensure_ascii=True, separators=(",", ":")
    ).encode("ascii")
    size = _LENGTH.size + len(header) + sum(len(b) for b in blobs)
    if size > MAX_FRAME:
        raise WireError(f"a frame of {size} bytes is over the limit of {MAX_FRAME}")
    return b"".join([_LENGTH.pack(size), _LENGTH.pack(len(header)), header, *blobs])


def decode_frame(frame: bytes) -> Message:
    """The message in one frame's bytes (without its length prefix)."""
    if len(frame) < _LENGTH.size:
        raise WireError("a frame shorter than its header")
    (header_size,) = _LENGTH.unpack_from(frame)
    end = _LENGTH.size + header_size
    if end > len(frame):
        raise WireError("a header that runs past the frame")
    try:
        fields = json.loads(frame[_LENGTH.size : end].decode("ascii"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise WireError(f"a header that is not JSON: {exc}") from None
    if not isinstance(fields, dict) or not isinstance(fields.get("type"), str):
        raise WireError("a header that is not a message (no type)")
    sizes = fields.get("blobs")
    if not isinstance(sizes, list) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in sizes
    ):
        raise WireError("a header without a valid blob list")
    if end + sum(sizes) != len(frame):
        raise WireError("blobs that do not fill the frame")
    blobs = []
    for size in sizes:
        blobs.append(frame[end : end + size])
        end += size
    return Message(fields, blobs)


async def read_message(stream: BufferedByteReceiveStream) -> Message | None:
    """The next message, or ``None`` when the other side closed between frames."""
    try:
        prefix = await stream.receive_exactly(_LENGTH.size)
    except anyio.IncompleteRead:
        return None
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        return None
    (size,) = _LENGTH.unpack(prefix)
    if size > MAX_FRAME:
        raise WireError(f"a frame of {size} bytes is over the limit of {MAX_FRAME}")
    try:
        frame = await stream.receive_exactly(size)
    except (anyio.IncompleteRead, anyio.EndOfStream) as exc:
        raise WireError("the connection closed inside a frame") from exc
    return decode_frame(frame)


# -- fields ------------------------------------------------------------------------------


def _get(fields: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = fields.get(name)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float)):
        raise WireError(f"field {name!r} is {type(value).__name__}, not {kind}")
    return value


def _maybe(fields: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    return None if fields.get(name) is None else _get(fields, name, kind)


def _strings(fields: Mapping[str, Any], name: str) -> list[str]:
    value = _get(fields, name, list)
    if not all(isinstance(item, str) for item in value):
        raise WireError(f"field {name!r} holds something other than strings")
    return [str(item) for item in value]


def _number(fields: Mapping[str, Any], name: str) -> float:
    value = _get(fields, name, (int, float))
    if not math.isfinite(value):
        raise WireError(f"field {name!r} is not finite")
    return float(value)


def _text(blob: bytes) -> str:
    # Sources are bytes: those that are not UTF-8 travel as they are (surrogateescape).
    return blob.decode("utf-8", "surrogateescape")


# -- jobs --------------------------------------------------------------------------------


def encode_job(job: CompileJob) -> tuple[dict[str, Any], bytes]:
    """A job's fields, and its source as a blob."""
    dump = job.dump if isinstance(job.dump, bool) else str(job.dump)
    fields = {
        "name": job.name,
        "backend": job.backend,
        "output": job.output,
        "arch": job.arch,
        "options": list(job.options),
        "timeout": job.timeout,
        "dump": dump,
        "tvm_fast_path": job.tvm_fast_path,
        "exact_options": job.exact_options,
    }
    return fields, job.source.encode("utf-8", "surrogateescape")


def decode_job(fields: Any, source: bytes) -> CompileJob:
    """The job again; a malformed one raises :class:`WireError`, a bad value
    :class:`~asynccomp.InvalidJob` (from ``CompileJob`` itself)."""
    if not isinstance(fields, dict):
        raise WireError("a job that is not an object")
    dump = fields.get("dump")
    if not isinstance(dump, (bool, str)):
        raise WireError("field 'dump' is neither a bool nor a path")
    if isinstance(dump, str) and not Path(dump).is_absolute():
        raise WireError("field 'dump' is not an absolute path")
    timeout = fields.get("timeout")
    return CompileJob(
        _text(source),
        name=_get(fields, "name", str),
        backend=_get(fields, "backend", str),
        output=_maybe(fields, "output", str),
        arch=_maybe(fields, "arch", str),
        options=_strings(fields, "options"),
        timeout=None if timeout is None else _number(fields, "timeout"),
        dump=dump,
        tvm_fast_path=_maybe(fields, "tvm_fast_path", bool),
        exact_options=bool(_get(fields, "exact_options", bool)),
    )


# -- results -----------------------------------------------------------------------------

# The errors a result can carry, by name (anything else arrives as a CompileError).
_ERRORS: dict[str, type[CompileError]] = {
    name: kind
    for name in errors.__all__
    if isinstance(kind := getattr(errors, name), type) and issubclass(kind, CompileError)
}


def encode_result(result: CompileResult) -> tuple[dict[str, Any], list[bytes]]:
    """A result's fields (its job is the client's, named by index), and its binary."""
    error = result.error
    described: dict[str, Any] | None = None
    if error is not None:
        described = {"type": type(error).__name__, "message": str(error)}
        if isinstance(error, errors.CompileTimeout):
            described["timeout"] = error.timeout
        if isinstance(error, errors.ToolkitNotFound):
            described["searched"] = list(error.searched)
    fields = {
        "output": result.output,
        "arch": result.arch,
        "log": result.log,
        "error": described,
        "elapsed": result.elapsed,
        "queued": result.queued,
        "command": list(result.command),
        "dump_dir": None if result.dump_dir is None else str(result.dump_dir),
        "cached": result.cached,
        "warnings": list(result.warnings),
        "binary": result.binary is not None,
    }
    return fields, [result.binary] if result.binary is not None else []


def _error(described: Any, log: str, job: CompileJob) -> CompileError:
    if not isinstance(described, dict):
        raise WireError("an error that is not an object")
    kind = _ERRORS.get(str(described.get("type")), CompileError)
    message = _get(described, "message", str)
    if kind is errors.CompileTimeout:
        return errors.CompileTimeout(
            message, timeout=_number(described, "timeout"), log=log, job=job
        )
    if kind is errors.ToolkitNotFound:
        return errors.ToolkitNotFound(message, searched=_strings(described, "searched"), job=job)
    return kind(message, log=log, job=job)


def decode_result(fields: Any, blobs: list[bytes], job: CompileJob) -> CompileResult:
    """The result of ``job`` again (its ptxas report parsed from the log here)."""
    if not isinstance(fields, dict):
        raise WireError("a result that is not an object")
    log = _get(fields, "log", str)
    has_binary = _get(fields, "binary", bool)
    if has_binary != (len(blobs) == 1) or len(blobs) > 1:
        raise WireError("a result whose binary is missing or extra")
    error = None if fields.get("error") is None else _error(fields["error"], log, job)
    dump_dir = _maybe(fields, "dump_dir", str)
    return CompileResult(
        job=job,
        output=_get(fields, "output", str),
        arch=_maybe(fields, "arch", str),
        binary=blobs[0] if has_binary else None,
        log=log,
        error=error,
        elapsed=_number(fields, "elapsed"),
        queued=_number(fields, "queued"),
        command=tuple(_strings(fields, "command")),
        resources=parse_resource_report(log) if log else {},
        dump_dir=None if dump_dir is None else Path(dump_dir),
        cached=_get(fields, "cached", bool),
        warnings=tuple(_strings(fields, "warnings")),
    )
