"""What a compile gives back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from .errors import CompileError
from .job import CompileJob, OutputFormat

if TYPE_CHECKING:
    from .ptxas import KernelResources

__all__ = ("CompileResult",)

_NO_RESOURCES: Mapping[str, KernelResources] = MappingProxyType({})


@dataclass(frozen=True)
class CompileResult:
    """The outcome of one :class:`~asynccomp.CompileJob`; compile failures are kept here,
    not raised.

    Attributes:
        job: the job this answers.
        output: the format of ``binary`` (``"cubin"``, ``"fatbin"`` or ``"ptx"``).
        arch: the architecture it was compiled for.
        binary: the compiled bytes, or ``None`` when the compile failed.
        log: the compiler's whole output: diagnostics, warnings, the ptxas ``-v`` report.
        error: why there is no binary, or ``None``.
        elapsed: seconds spent compiling.
        queued: seconds the job waited for a free worker.
        command: the NVRTC option list, or nvcc's argv, exactly as the compiler got them.
        resources: per kernel function, what ptxas reported (registers, spills, smem...).
        dump_dir: this job's dump folder, when dumping was asked for.
        cached: ``True`` when the binary came from the compile cache.
        warnings: problems that did not stop the compile (e.g. a dump that failed).
        shared: ``True`` when an identical job's compile, already under way, answered
            this job too: it ran no compile of its own (``elapsed`` is that compile's).
    """

    job: CompileJob
    output: OutputFormat
    arch: str | None
    binary: bytes | None
    log: str = ""
    error: CompileError | None = None
    elapsed: float = 0.0
    queued: float = 0.0
    command: tuple[str, ...] = ()
    resources: Mapping[str, KernelResources] = field(default_factory=lambda: _NO_RESOURCES)
    dump_dir: Path | None = None
    cached: bool = False
    warnings: tuple[str, ...] = ()
    shared: bool = False

    @property
    def ok(self) -> bool:
        """``True`` when there is a binary."""
        return self.error is None and self.binary is not None

    def unwrap(self) -> bytes:
        """The binary, or raise :attr:`error`."""
        if self.error is not None:
            raise self.error
        if self.binary is None:  # pragma: no cover - a result is built with one or the other
            raise CompileError("no binary", log=self.log, job=self.job)
        return self.binary
