"""What :mod:`asynccomp.tilelang`'s callback raises, and how a failed compile reads.

TileLang calls its compile callback from C++ (``BuildTileLangCUDA``); an exception raised
there reaches ``tilelang.compile``'s caller rebuilt by tvm-ffi from its *registered type
name and message only*: attributes and ``__cause__`` are lost, and an unregistered class
arrives as a plain ``RuntimeError`` (so does ``TimeoutError``). Both classes here are
registered with tvm-ffi (:func:`register_errors`), so they arrive as themselves, and
derive from ``RuntimeError`` (what TileLang's own callback raises, and what its
autotuner and ``par_compile`` catch) as well as from asynccomp's ``CompileError``. Their
messages are TileLang's own, which carry what a reader needs (the source, the compiler's
output, the command); called from Python (:func:`asynccomp.tilelang.compile_cuda`) they
also keep ``log``, ``job`` and ``__cause__`` (asynccomp's error).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import CompileError, CompileTimeout, EmptyOutput
from ..result import CompileResult

if TYPE_CHECKING:
    from ..job import CompileJob

__all__ = (
    "TileLangCompileError",
    "TileLangCompileTimeout",
    "TileLangLoweringCrashed",
    "message_for",
    "register_errors",
)


class TileLangCompileError(CompileError, RuntimeError):
    """A TileLang kernel did not compile (the compiler refused it, wrote nothing, or
    asynccomp could not run it); the message is TileLang's for the same failure."""

    def __init__(self, message: str = "", *, log: str = "", job: CompileJob | None = None):
        CompileError.__init__(self, message, log=log, job=job)


class TileLangCompileTimeout(TileLangCompileError, CompileTimeout):
    """The compile ran past ``TILELANG_COMPILE_TIMEOUT_SECONDS`` and was stopped."""

    def __init__(
        self,
        message: str = "",
        *,
        timeout: float = 0.0,
        log: str = "",
        job: CompileJob | None = None,
    ):
        TileLangCompileError.__init__(self, message, log=log, job=job)
        self.timeout = timeout


class TileLangLoweringCrashed(TileLangCompileError):
    """The worker process elaborating and lowering a config died (TileLang crashed in
    it); only that config fails."""


_registered = False


def register_errors() -> None:
    """Register both classes with tvm-ffi (idempotent), so they cross TileLang's C++."""
    global _registered
    if _registered:
        return
    import tvm_ffi

    tvm_ffi.register_error("asynccomp.tilelang.TileLangCompileError", TileLangCompileError)
    tvm_ffi.register_error("asynccomp.tilelang.TileLangCompileTimeout", TileLangCompileTimeout)
    _registered = True


def message_for(result: CompileResult, code: str) -> str:
    """TileLang's message for the failure ``result`` records (``code``: the kernel source
    TileLang passed, which its messages start with)."""
    error = result.error
    command = " ".join(result.command)
    log = result.log
    nvrtc = result.job.backend == "nvrtc"
    compiler = "NVRTC" if nvrtc else "NVCC"
    if isinstance(error, CompileTimeout):
        # tilelang/contrib/nvcc.py:187-200
        message = f"{compiler} compilation timed out after {error.timeout} seconds.\n"
        message += f"Command: {command}\n"
        return message + (f"Output:\n{log}\n" if log.strip() else "")
    if isinstance(error, EmptyOutput):
        return "Compilation error: empty result is generated"  # contrib/nvcc.py:218-219
    if type(error) is CompileError:  # the compiler's verdict on the source
        if nvrtc:  # contrib/nvrtc.py:84-95, with the log TileLang shows when verbose
            return f"{result.job.source}\nCompilation error:\n{log}\nOptions: {command}\n"
        return f"{code}\nCompilation error:\n{log}\nCommand: {command}\n"  # nvcc.py:206-214
    # No compiler verdict: the toolkit is missing, a worker died, the compile server went
    # away, asynccomp failed. TileLang's own callback would raise (a FileNotFoundError
    # for a missing nvcc, seen as a RuntimeError); say what happened.
    return f"asynccomp could not compile the kernel ({type(error).__name__}): {error}"


def error_for(result: CompileResult, code: str) -> TileLangCompileError:
    """The exception the callback raises for a failed ``result``."""
    message = message_for(result, code)
    if isinstance(result.error, CompileTimeout):
        return TileLangCompileTimeout(
            message, timeout=result.error.timeout, log=result.log, job=result.job
        )
    return TileLangCompileError(message, log=result.log, job=result.job)
