"""What a Triton compile on asynccomp's workers raises where Triton alone would not have a
worker to lose: both are ``RuntimeError`` (as Triton's own compile failures mostly are)
and asynccomp ``CompileError``\\ s. A compile that fails in a worker otherwise raises
Triton's own exception (``CompilationError``, ``PTXASError``, ``OutOfResources``...),
unchanged."""

from __future__ import annotations

from ..errors import CompileTimeout, WorkerCrashed

__all__ = ("TritonCompileCrashed", "TritonCompileTimeout")


class TritonCompileCrashed(WorkerCrashed, RuntimeError):
    """The worker process compiling the kernel died (Triton's C++ aborted, or the process
    was killed or ran out of memory): in Triton's own process this would have ended the
    program. Only this kernel fails; an autotune drops the config (its timing is
    infinite, as for a config that does not fit) and goes on."""

    def __init__(self, message: str) -> None:
        WorkerCrashed.__init__(self, message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self),))


class TritonCompileTimeout(CompileTimeout, RuntimeError):
    """The kernel's compile ran past its timeout (``register(timeout=...)``,
    ``compile_many(timeout=...)``) and its worker was killed. Only this kernel fails; an
    autotune drops the config and goes on."""

    def __init__(self, message: str, *, timeout: float) -> None:
        CompileTimeout.__init__(self, message, timeout=timeout)

    def __reduce__(self) -> tuple[object, ...]:
        return (_timeout, (str(self), self.timeout))


def _timeout(message: str, timeout: float) -> TritonCompileTimeout:
    return TritonCompileTimeout(message, timeout=timeout)
