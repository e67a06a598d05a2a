"""What every backend takes and gives back.

A backend works in two steps so that the engine can look at a compile before it runs:

- ``prepare(job, arch)`` renders the exact source text and option list (plain function,
  no I/O). The engine hashes it for the cache and writes it into dump folders.
- ``run(prepared)`` compiles (async; blocking work goes to threads or subprocesses) and
  returns a :class:`BackendOutput`. Compile failures and timeouts are reported there,
  not raised; exceptions mean a bug or a cancellation.
"""

from __future__ import annotations

import abc
import re
from dataclasses import dataclass
from typing import ClassVar, Literal

from ..job import CompileJob, OutputFormat
from ..toolkit import Toolkit

__all__ = (
    "BackendOutput",
    "CompilerBackend",
    "PreparedCompile",
    "Status",
    "add_lineinfo",
    "safe_stem",
)

Status = Literal["ok", "failed", "empty", "timeout", "crashed"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_stem(name: str, limit: int = 60) -> str:
    """A file-name-safe form of a job name (``"a/b c"`` -> ``"a_b_c"``), never empty."""
    stem = _UNSAFE.sub("_", name).strip("._")[:limit]
    return stem or "kernel"


def add_lineinfo(options: list[str]) -> None:
    """Append ``-lineinfo`` unless the options already ask for line info (either spelling)."""
    if "-lineinfo" not in options and "--generate-line-info" not in options:
        options.append("-lineinfo")


@dataclass(frozen=True)
class PreparedCompile:
    """A compile rendered down to what the compiler receives. Picklable.

    ``options`` is NVRTC's option list, or nvcc's whole argv (``argv[0]`` is nvcc) with
    file names relative to the folder it runs in.
    """

    backend: str
    output: OutputFormat
    arch: str
    source: str
    filename: str
    options: tuple[str, ...]
    timeout: float | None = None
    keep_dir: str | None = None
    # The user's own source, when ``source`` is a faster rewrite of it (the TVM preamble
    # fast path): compiled instead if the rewrite fails, so diagnostics are the user's.
    fallback_source: str | None = None

    @property
    def binary_name(self) -> str:
        return self.filename.rsplit(".", 1)[0] + "." + self.output


@dataclass(frozen=True)
class BackendOutput:
    """What a compile produced: the binary when ``status == "ok"``, and the whole log."""

    status: Status
    binary: bytes | None
    log: str
    message: str = ""
    warnings: tuple[str, ...] = ()


class CompilerBackend(abc.ABC):
    """One compiler. Instances live as long as their engine."""

    name: ClassVar[str]

    def __init__(self, toolkit: Toolkit) -> None:
        self.toolkit = toolkit

    @abc.abstractmethod
    def prepare(self, job: CompileJob, arch: str, *, dump: bool = False) -> PreparedCompile:
        """Render ``job`` for ``arch``. Raises ToolkitNotFound if the compiler is missing.

        ``dump`` asks for what a dump folder needs: ``-lineinfo`` (so profilers map SASS
        back to the dumped source) and, for nvcc, ``--keep``.
        """

    @abc.abstractmethod
    async def run(self, prepared: PreparedCompile) -> BackendOutput:
        """Compile; honour ``prepared.timeout``; stop the compiler if cancelled."""

    async def warm_up(self) -> None:  # noqa: B027 - optional hook
        """Pay first-compile costs now (start workers, load libraries)."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        """Release what the backend holds (worker processes, ...)."""
