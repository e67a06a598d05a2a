"""The job model: what to compile, and how.

A :class:`CompileJob` is a frozen, hashable description of one compile. It checks its
values when it is built (no I/O, no GPU query), so a sweep learns about a typo before
any compiler starts.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from .backends._registry import backend_class
from .errors import InvalidJob

__all__ = (
    "Backend",
    "CompileJob",
    "DEFAULT_BACKEND",
    "MAX_SOURCE_CHARS",
    "OutputFormat",
    "nvrtc_arch",
    "parse_arch",
)

#: The longest source a job takes (256 Mi characters), in every engine and on every
#: door (a compile server's messages are sized from it). No compiler gets far with more.
MAX_SOURCE_CHARS = 256 * 2**20

#: A backend's name: one registered in :mod:`asynccomp.backends` (``"nvrtc"``,
#: ``"nvcc"``, ``"ptx"``); an unknown one is :class:`~asynccomp.UnknownBackend`.
Backend = str
OutputFormat = Literal["cubin", "fatbin", "ptx"]

OUTPUT_FORMATS: tuple[str, ...] = get_args(OutputFormat)
#: The backend a job gets when it names none (the user's default, as a facade's).
DEFAULT_BACKEND: Backend = "nvrtc"

# sm_90, sm_90a, sm_100f, compute_90a: a family prefix, a compute capability of two or
# three digits, and an optional "a" (architecture-specific) or "f" (family) suffix.
_ARCH_RE = re.compile(r"(sm|compute)_(\d{2,3})([af]?)")


def _check_encodable(field: str, text: str) -> None:
    """Compilers read bytes: ``text`` must have some. Lone surrogates that stand for
    undecodable bytes (``bytes.decode("utf-8", "surrogateescape")``, as ``open()`` does
    with ``errors="surrogateescape"``) are those bytes again; any other lone surrogate
    stands for nothing."""
    try:
        text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise InvalidJob(
            field,
            text[max(0, exc.start - 20) : exc.end + 20],
            f"holds a lone surrogate {text[exc.start]!r} at index {exc.start}, which no "
            "bytes stand for (decode files with errors='surrogateescape' to keep bytes "
            "that are not UTF-8)",
        ) from None


def parse_arch(arch: str) -> tuple[str, int, str]:
    """Split ``"sm_90a"`` into ``("sm", 90, "a")``; raise :class:`InvalidJob` if malformed."""
    match = _ARCH_RE.fullmatch(arch) if isinstance(arch, str) else None
    if match is None:
        raise InvalidJob(
            "arch",
            arch,
            'expected "sm_XY" or "compute_XY" with an optional a/f suffix, e.g. "sm_90a"',
        )
    return match.group(1), int(match.group(2)), match.group(3)


def nvrtc_arch(arch: str, output: str) -> str:
    """NVRTC wants ``compute_XX`` for PTX and ``sm_XX`` for cubin (as TVM renders it).

    >>> nvrtc_arch("sm_90a", "ptx"), nvrtc_arch("compute_80", "cubin")
    ('compute_90a', 'sm_80')
    """
    _, number, suffix = parse_arch(arch)
    return f"{'compute' if output == 'ptx' else 'sm'}_{number}{suffix}"


@dataclass(frozen=True)
class CompileJob:
    """One CUDA source to compile.

    Args:
        source: the CUDA C++ source text (PTX for ``backend="ptx"``).
        name: a label for logs, dumps and results; need not be unique.
        backend: ``"nvrtc"`` (in-process, fast), ``"nvcc"`` (a subprocess per job) or
            ``"ptx"`` (PTX -> cubin with ptxas, a subprocess per job): a name registered
            in :mod:`asynccomp.backends`.
        output: ``"cubin"``, ``"fatbin"`` (nvcc only) or ``"ptx"`` (not for ``"ptx"``);
            ``None`` picks the backend's default: cubin for NVRTC and ptxas, fatbin for
            nvcc.
        arch: e.g. ``"sm_90a"``, ``"sm_80"``, ``"compute_90"``; ``None`` uses the engine's
            architecture, then the local GPU's.
        options: extra compiler flags, appended after the ones asynccomp adds.
        timeout: seconds the compile may run before it is stopped (queueing not counted).
        dump: write this job's dump folder even if the engine does not dump every job:
            ``True`` puts it under the engine's dump root (or the default root), a path
            under that folder instead (created when the job runs; a folder that cannot
            be written is a warning on the result, not a failed compile).
        tvm_fast_path: for NVRTC, whether to apply the TVM preamble fast path to this
            job; ``None`` (the default) follows ``Engine(tvm_fast_path=...)``.
        exact_options: pass ``options`` to the compiler as the complete option list; the
            engine then adds no architecture, include or report flags of its own (the TVM
            facade uses this to reproduce TVM's command lines exactly).
        pch: NVRTC only: compile with an automatic precompiled header (NVRTC's ``-pch``)
            of the source's leading ``#include`` lines, kept by the NVRTC worker that
            made it for later jobs with the same header prefix and options (they are
            sent to that worker). Same binary as without; pays off for header-heavy
            sources (TileLang's, CUTLASS's): a reuse takes about half the time, the
            first compile about twice as long, and each PCH is a file of 250-450 MB
            kept until its worker ends (see :mod:`asynccomp.backends.nvrtc`).

    >>> job = CompileJob('extern "C" __global__ void k() {}', name="k", arch="sm_90a")
    >>> job.output_format
    'cubin'
    """

    source: str
    name: str = "kernel"
    backend: Backend = DEFAULT_BACKEND
    output: OutputFormat | None = None
    arch: str | None = None
    options: Sequence[str] = ()
    timeout: float | None = None
    dump: bool | str | os.PathLike[str] = False
    tvm_fast_path: bool | None = None
    exact_options: bool = field(default=False, repr=False)
    pch: bool = False

    def __post_init__(self) -> None:
        source: object = self.source  # checked at run time: callers may not be typed
        if isinstance(source, (bytes, bytearray, memoryview)):
            raise InvalidJob("source", source, "must be str (decode the bytes first)")
        if not isinstance(source, str):
            raise InvalidJob("source", self.source, "must be a str of CUDA C++ source")
        if len(self.source) > MAX_SOURCE_CHARS:
            raise InvalidJob(
                "source",
                self.source[:60],
                f"is over {MAX_SOURCE_CHARS} characters ({len(self.source)})",
            )
        if not self.source.strip():
            raise InvalidJob("source", self.source, "is empty")
        if "\x00" in self.source:
            raise InvalidJob("source", self.source, "contains a NUL byte; not text")
        _check_encodable("source", self.source)
        if not isinstance(self.name, str) or not self.name:
            raise InvalidJob("name", self.name, "must be a non-empty str")
        _check_encodable("name", self.name)
        backend = backend_class(self.backend)  # UnknownBackend, listing the known ones
        if self.output is not None and self.output not in OUTPUT_FORMATS:
            raise InvalidJob(
                "output", self.output, f"expected one of {', '.join(OUTPUT_FORMATS)} or None"
            )
        if self.arch is not None:
            parse_arch(self.arch)
        if isinstance(self.options, str):
            raise InvalidJob("options", self.options, "must be a sequence of str, not one str")
        if not isinstance(self.options, Iterable):
            raise InvalidJob("options", self.options, "must be a sequence of str (() for none)")
        options = tuple(self.options)
        for option in options:
            if not isinstance(option, str):
                raise InvalidJob("options", option, "every option must be a str")
            if "\x00" in option:
                raise InvalidJob("options", option, "contains a NUL byte")
            _check_encodable("options", option)
        object.__setattr__(self, "options", options)
        if self.timeout is not None:
            if isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float)):
                raise InvalidJob("timeout", self.timeout, "must be a number of seconds or None")
            if not (self.timeout > 0 and math.isfinite(self.timeout)):
                raise InvalidJob("timeout", self.timeout, "must be positive and finite")
        if not isinstance(self.dump, bool):
            root = os.fspath(self.dump) if isinstance(self.dump, (str, os.PathLike)) else None
            if not root:
                raise InvalidJob("dump", self.dump, "must be True, False or a folder path")
            if not isinstance(root, str) or "\x00" in root:
                raise InvalidJob("dump", self.dump, "must be a str path without NUL bytes")
            # Absolute now: the engine may write it from a thread long after a chdir.
            object.__setattr__(self, "dump", Path(root).absolute())
        if self.tvm_fast_path is not None and not isinstance(self.tvm_fast_path, bool):
            raise InvalidJob("tvm_fast_path", self.tvm_fast_path, "must be True, False or None")
        if not isinstance(self.pch, bool):
            raise InvalidJob("pch", self.pch, "must be True or False")
        backend.check_job(self)  # what this backend refuses (outputs, options, pch)

    @property
    def dump_root(self) -> Path | None:
        """The dump root this job names itself (``dump`` given as a path), else ``None``."""
        return self.dump if isinstance(self.dump, Path) else None

    @property
    def output_format(self) -> OutputFormat:
        """The output this job makes, with the backend's default filled in."""
        return self.output if self.output is not None else backend_class(self.backend).outputs[0]
