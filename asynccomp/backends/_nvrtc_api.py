"""One NVRTC compile through ``cuda.bindings.nvrtc``, in the calling thread or process.

Used by the thread runner of :class:`~asynccomp.backends.NvrtcBackend` and by the worker
processes (:mod:`._nvrtc_workers`). It never raises for anything a job can cause: compile
errors, an empty output and NVRTC API errors all come back as a
:class:`~asynccomp.backends._base.BackendOutput`, so one job never takes its batch (or
its worker process) down.

Only NVRTC's verdict on the job's input is status ``failed``, the one failure a cache may
keep (``Engine(cache_failures=True)``): ``NVRTC_ERROR_COMPILATION`` (the source does not
compile) and ``NVRTC_ERROR_INVALID_OPTION`` (an option NVRTC does not take: the job's
own options, in its cache key, refused the same way every time). Every other result
(``NVRTC_ERROR_OUT_OF_MEMORY``, ``NVRTC_ERROR_INTERNAL_ERROR``,
``NVRTC_ERROR_BUILTIN_OPERATION_FAILURE``, ``NVRTC_ERROR_TIME_FILE_WRITE_FAILED``, a
result this module does not know...) says something about this machine or NVRTC at
that moment, not about the source: status ``internal``, with an :class:`NvrtcError`
naming the result as its cause, never cached (:func:`status_of`).

A running compile is cancelled through ``nvrtcSetFlowCallback`` (NVRTC 12.8+): NVRTC
calls back at points during the compile and stops with ``NVRTC_ERROR_CANCELLED`` once
the callback returns 1. Those points can be seconds apart in a long front end, which is
why the callers also enforce a deadline of their own.

A compile with a precompiled header (``-pch``) first makes sure NVRTC's PCH heap is at
least :data:`PCH_HEAP_BYTES`: NVRTC's default (256 MiB in 13.0 and 13.5) is too small for
TileLang's and CUTLASS's headers with NVRTC 13.5 (422 MiB), and then NVRTC makes no PCH
(warning #639-D) while every compile pays for trying, about 1.6x slower than without
``-pch``. A compile that still finds the heap too small raises it to what NVRTC says it
needs, so the next one makes the PCH. The heap is per process and is only raised, at
the first such compile: processes that never compile with ``-pch`` keep NVRTC's default.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from ._base import BackendOutput, PreparedCompile

__all__ = (
    "PCH_HEAP_BYTES",
    "VERDICTS",
    "NvrtcApiError",
    "NvrtcError",
    "compile_prepared",
    "status_of",
    "uses_pch",
)

#: The PCH heap a compile with ``-pch`` asks for (bytes); ``$ASYNCCOMP_NVRTC_PCH_HEAP``
#: (bytes, as NVRTC's own ``$NVRTC_PCH_HEAP_SIZE``) changes it. A larger heap that
#: NVRTC already has (from ``$NVRTC_PCH_HEAP_SIZE``) is kept.
PCH_HEAP_BYTES = 512 * 2**20

_PCH_OPTIONS = ("-pch", "--pch")
_PCH_FILE_OPTIONS = ("-create-pch", "--create-pch", "-use-pch", "--use-pch")
_heap_lock = threading.Lock()

_FLOW_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


#: The results of ``nvrtcCompileProgram`` that are NVRTC's verdict on the job's input.
VERDICTS = frozenset({"NVRTC_ERROR_COMPILATION", "NVRTC_ERROR_INVALID_OPTION"})


class NvrtcApiError(Exception):
    """An NVRTC call other than the compile itself failed (internal to this module)."""


class NvrtcError(Exception):
    """NVRTC failed a compile for a reason of its own, not a verdict on the source:
    ``code`` is NVRTC's result (``"NVRTC_ERROR_OUT_OF_MEMORY"``). The cause of the job's
    :class:`~asynccomp.InternalError`; plain arguments, so it crosses from a worker
    process as it is."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" if self.message != self.code else self.code


def status_of(code: str) -> str:
    """The status a compile whose ``nvrtcCompileProgram`` gave ``code`` (a result's
    name) ends with: ``ok``, ``timeout`` (cancelled), ``failed`` (a verdict:
    :data:`VERDICTS`) or ``internal`` (anything else, unknown results too)."""
    if code == "NVRTC_SUCCESS":
        return "ok"
    if code == "NVRTC_ERROR_CANCELLED":
        return "timeout"
    return "failed" if code in VERDICTS else "internal"


def _check(nvrtc: Any, err: Any, what: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise NvrtcApiError(f"{what} failed: {err!r}")


def _program_log(nvrtc: Any, prog: Any) -> str:
    err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS or size <= 1:
        return ""
    buf = b" " * int(size)
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return bytes(buf).rstrip(b"\x00").decode("utf-8", errors="replace")


def uses_pch(options: Sequence[str]) -> bool:
    """Whether NVRTC options ask for a precompiled header (automatic or a file)."""
    return any(o in _PCH_OPTIONS or o.startswith(_PCH_FILE_OPTIONS) for o in options)


def _wanted_heap() -> int:
    text = os.environ.get("ASYNCCOMP_NVRTC_PCH_HEAP", "").strip()
    try:
        return int(text) if text else PCH_HEAP_BYTES
    except ValueError:
        return PCH_HEAP_BYTES  # a bad value must not fail compiles: the default


def _raise_pch_heap(nvrtc: Any, need: int) -> None:
    """Make NVRTC's PCH heap at least ``need`` bytes (never smaller). An NVRTC without
    the PCH calls (before 12.8) fails the ``-pch`` compile itself, with its own message."""
    with _heap_lock:
        try:
            err, size = nvrtc.nvrtcGetPCHHeapSize()
            if err == nvrtc.nvrtcResult.NVRTC_SUCCESS and int(size) < need:
                nvrtc.nvrtcSetPCHHeapSize(need)
        except (AttributeError, RuntimeError):
            pass


def _heap_after(nvrtc: Any, prog: Any) -> bool:
    """After a compile with ``-pch``: when the heap was too small to make the PCH, raise
    it to what NVRTC says it needs (with room to spare), for the next compile. Whether
    NVRTC made a PCH (``nvrtcGetPCHCreateStatus``; never before NVRTC 12.8)."""
    try:
        status = nvrtc.nvrtcGetPCHCreateStatus(prog)[0]
        if status != nvrtc.nvrtcResult.NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED:
            return bool(status == nvrtc.nvrtcResult.NVRTC_SUCCESS)
        err, required = nvrtc.nvrtcGetPCHHeapSizeRequired(prog)
    except (AttributeError, RuntimeError):
        return False
    if err == nvrtc.nvrtcResult.NVRTC_SUCCESS and required:
        _raise_pch_heap(nvrtc, int(required) * 5 // 4)
    return False


def _output(nvrtc: Any, prog: Any, output: str) -> bytes:
    if output == "ptx":
        err, size = nvrtc.nvrtcGetPTXSize(prog)
        _check(nvrtc, err, "nvrtcGetPTXSize")
        buf = b" " * int(size)
        if size:
            _check(nvrtc, nvrtc.nvrtcGetPTX(prog, buf)[0], "nvrtcGetPTX")
        # PTX is text: drop the terminating NUL (asynccomp.tvm puts it back, as TVM keeps it).
        return buf.rstrip(b"\x00")
    err, size = nvrtc.nvrtcGetCUBINSize(prog)
    _check(nvrtc, err, "nvrtcGetCUBINSize")
    cubin = b" " * int(size)
    if size:
        _check(nvrtc, nvrtc.nvrtcGetCUBIN(prog, cubin)[0], "nvrtcGetCUBIN")
    return cubin


def compile_prepared(
    prepared: PreparedCompile,
    cancel: threading.Event | None = None,
    pch_made: list[bool] | None = None,
) -> BackendOutput:
    """Compile with NVRTC in the calling thread. Returns status ``"timeout"`` when
    ``cancel`` was set or ``prepared.timeout`` ran out while compiling, ``"empty"`` when
    NVRTC succeeded without a binary (``-dlto``, a ``compute_`` architecture for cubin),
    ``"internal"`` for an NVRTC API error; never raises for those. ``pch_made`` gets
    whether NVRTC says it made a PCH (``nvrtcGetPCHCreateStatus``), its log aside."""
    try:
        from cuda.bindings import nvrtc
    except Exception as exc:  # ImportError, or the library failing to load
        return BackendOutput("internal", None, "", f"NVRTC could not be loaded: {exc!r}")

    deadline = None if prepared.timeout is None else time.monotonic() + prepared.timeout
    stopped = False

    def flow(_payload: int | None, _reserved: int | None) -> int:
        nonlocal stopped
        if not stopped and (
            (cancel is not None and cancel.is_set())
            or (deadline is not None and time.monotonic() > deadline)
        ):
            stopped = True
        return 1 if stopped else 0

    callback = _FLOW_CALLBACK(flow)  # kept referenced until the compile returns
    try:
        # The job checked that its source and options encode (CompileJob); surrogates
        # could only come from a PreparedCompile built by hand.
        source = prepared.source.encode("utf-8", "surrogateescape")
        err, prog = nvrtc.nvrtcCreateProgram(source, prepared.filename.encode(), 0, [], [])
        _check(nvrtc, err, "nvrtcCreateProgram")
    except (NvrtcApiError, UnicodeEncodeError) as exc:
        return BackendOutput("internal", None, "", f"NVRTC program not created: {exc}", cause=exc)
    log = ""
    pch = uses_pch(prepared.options)
    try:
        if pch:
            _raise_pch_heap(nvrtc, _wanted_heap())
        if cancel is not None or deadline is not None:
            address = ctypes.cast(callback, ctypes.c_void_p).value
            _check(nvrtc, nvrtc.nvrtcSetFlowCallback(prog, address, 0)[0], "nvrtcSetFlowCallback")
        options = [o.encode("utf-8", "surrogateescape") for o in prepared.options]
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(options), options)
        log = _program_log(nvrtc, prog)
        made = _heap_after(nvrtc, prog) if pch else False
        if pch_made is not None:
            pch_made.append(made)
        if result == nvrtc.nvrtcResult.NVRTC_SUCCESS:
            binary = _output(nvrtc, prog, prepared.output)
            if not binary:
                return BackendOutput(
                    "empty", None, log, f"NVRTC succeeded but produced no {prepared.output}"
                )
            return BackendOutput("ok", binary, log)
        code = getattr(result, "name", str(result))
        status = status_of(code)
        if status == "timeout" or stopped:
            return BackendOutput("timeout", None, log, "NVRTC compile cancelled")
        _, text = nvrtc.nvrtcGetErrorString(result)
        message = text.decode() if isinstance(text, bytes) else str(text)
        if status == "failed":
            return BackendOutput("failed", None, log, f"NVRTC compilation failed ({message})")
        # NVRTC's own failure (memory, an internal error, a file it could not write):
        # says nothing of the source, so it is never cached as a verdict.
        return BackendOutput(
            "internal",
            None,
            log,
            f"NVRTC failed for a reason of its own, not the source's ({message})",
            cause=NvrtcError(code, message),
        )
    except NvrtcApiError as exc:
        return BackendOutput("internal", None, log, f"NVRTC API error: {exc}", cause=exc)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
