"""PTX -> cubin with the toolkit's ptxas, as concurrent subprocesses.

The sources are PTX: Triton's, NVRTC's or nvcc's ``-ptx`` output, hand-written. Each
job is one ``ptxas`` run (:class:`._tool.ProgramBackend`: a work folder of its own, a
guard that kills it with the engine, failures that are not the source's told apart),
asked for its ``-v`` resource report like every compile, so ``result.resources`` is
filled in; dumps get ``rerun.sh``.

- **ptxas** is the toolkit's: ``<CUDA root>/bin/ptxas``, else the one beside the found
  nvcc (the ``nvidia-cuda-nvcc`` wheel has both). Its version (``ptxas --version``,
  asked once per process) and path are its identity in cache keys. It is nvcc's back
  end, of the same release, so it takes nvcc's architectures.
- **nvJitLink** compiles PTX in process where it is installed: that is the
  ``nvjitlink`` backend (:mod:`.nvjitlink`), with the same checks.
- **The PTX's ``.target`` and the job's architecture** must agree as ptxas has them: a
  plain ``sm_80`` target compiles for ``sm_80`` and newer, an ``a`` target (``sm_90a``)
  for that one architecture only, an ``f`` target for its family (``sm_100f``: 100 and
  up, below 110). A mismatch is :class:`~asynccomp.InvalidJob` when the job names its
  arch, else the job's :class:`~asynccomp.CompileError` (the engine's arch), before
  ptxas runs; a virtual architecture (``compute_90``) is refused (ptxas makes SASS).
- **Options**: the job's are ptxas's own (``-O2``, ``--maxrregcount=64``,
  ``-lineinfo``...). ``-o``/``--output-file`` and ``-arch``/``--gpu-name`` are refused
  (asynccomp names the files, the job's arch is the architecture), and so are input
  files besides the source and options files (the cache key would not cover them:
  :mod:`._named_files`).

>>> from asynccomp import CompileJob, SyncEngine
>>> PTX = '''
... .version 8.0
... .target sm_80
... .address_size 64
... .visible .entry k() { ret; }
... '''
>>> with SyncEngine(arch="sm_90a", cache=False) as engine:
...     result = engine.compile(CompileJob(PTX, name="k", backend="ptx"))
>>> result.ok, result.output, result.resources["k"].arch, result.command[1:3]
(True, 'cubin', 'sm_90a', ('-arch=sm_90a', '-v'))
>>> CompileJob(PTX, backend="ptx", arch="sm_75")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
asynccomp.errors.InvalidJob: invalid arch 'sm_75': the PTX's .target sm_80 compiles ...

Where a ptxas option is rendered: :func:`ptx_flags` (which the ``nvjitlink`` backend
shares) and :meth:`PtxBackend.prepare`, here, and nowhere else.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path

import anyio.abc
import anyio.to_thread

from ..errors import CompileError, InvalidJob, ToolkitNotFound
from ..job import CompileJob, parse_arch
from ..toolkit import Toolkit, tool_version
from ._base import (
    BackendOptions,
    BackendSettings,
    CompilerBackend,
    PreparedCompile,
    has_line_info,
    safe_stem,
)
from ._tool import ProgramBackend

__all__ = (
    "PtxBackend",
    "arch_problem",
    "check_ptx_job",
    "newer_ptx",
    "ptx_flags",
    "ptx_target",
    "target_mismatch",
)

# PTX as ptxas reads it, one lexeme at a time: a comment (// to the end of the line,
# /* to */, or to the end of an unterminated one) or a string, neither of which holds a
# directive; else a word (group 1). ".target sm_90a" (maybe followed by ", debug") is
# the word ".target", then the architecture, comments and line breaks allowed anywhere
# between, and other statements before it on its line.
_LEXEME = re.compile(r'//[^\n]*|/\*.*?(?:\*/|\Z)|"(?:\\.|[^"\\\n])*"|([^\s/"]+|/)', re.S)
_ARCH_WORD = re.compile(r"[A-Za-z0-9_]+")
# Options that would name another output or architecture than the job's.
_REFUSED = {
    "-o": "asynccomp names the output file",
    "--output-file": "asynccomp names the output file",
    "-arch": "the job's arch is the architecture (CompileJob(arch=...))",
    "--gpu-name": "the job's arch is the architecture (CompileJob(arch=...))",
}


def ptx_target(source: str) -> str | None:
    """The architecture of the PTX's first ``.target`` directive (``"sm_80"``), or
    ``None``; one inside a comment or a string does not count.

    >>> ptx_target(".version 8.0 /* .target sm_100a */\\n.target // x\\n sm_80, debug")
    'sm_80'
    """
    after_target = False
    for match in _LEXEME.finditer(source):
        word = match.group(1)
        if word is None:
            continue  # a comment or a string
        if after_target:
            arch = _ARCH_WORD.match(word)
            return None if arch is None else arch.group()
        after_target = word == ".target"
    return None


def target_mismatch(target: str, arch: str) -> str | None:
    """Why PTX whose ``.target`` is ``target`` cannot be compiled for ``arch``, as ptxas
    would refuse it (``None``: it can).

    >>> target_mismatch("sm_80", "sm_90a") is None, target_mismatch("sm_90a", "sm_90a") is None
    (True, True)
    >>> target_mismatch("sm_90a", "sm_100a")
    "the PTX's .target sm_90a compiles for sm_90a only, not sm_100a"
    """
    family, number, suffix = parse_arch(arch)
    if family == "compute":
        return f"ptxas makes SASS for a real GPU (sm_{number}{suffix}), not for {arch}"
    try:
        _, wanted, kind = parse_arch(target)
    except InvalidJob:
        return None  # a target ptxas knows and asynccomp does not: ptxas decides
    if kind == "a" and (number, suffix) != (wanted, "a"):
        return f"the PTX's .target {target} compiles for {target} only, not {arch}"
    if kind == "f" and not (wanted <= number and number // 10 == wanted // 10):
        return f"the PTX's .target {target} compiles for its family ({target} and up), not {arch}"
    if number < wanted:
        return f"the PTX's .target {target} compiles for {target} and newer GPUs, not {arch}"
    return None


def arch_problem(source: str, arch: str) -> str | None:
    """Why the PTX ``source`` cannot be made SASS for ``arch`` (the engine's, already
    resolved), or ``None``."""
    target = ptx_target(source)
    why = None if target is None else target_mismatch(target, arch)
    if why is None and arch.startswith("compute_"):
        why = target_mismatch(arch, arch)
    return why


def ptx_flags(job: CompileJob, options: BackendOptions, report: str) -> list[str]:
    """A PTX job's flags for either PTX backend: the job's options as they are with
    ``exact_options``, else ``-arch``, ``report`` (the flag that asks for ptxas's
    resource report), the job's options and ``-lineinfo`` for dumps. A ``.target`` the
    arch cannot take is the job's :class:`~asynccomp.CompileError`, before anything runs."""
    why = arch_problem(job.source, options.arch)
    if why is not None:
        raise CompileError(why, job=job)
    if job.exact_options:
        return list(job.options)
    flags = [f"-arch={options.arch}", report, *job.options]
    if options.line_info and not has_line_info(flags):
        flags.append("-lineinfo")
    return flags


def check_ptx_job(job: CompileJob, tool: str, refused: Mapping[str, str]) -> None:
    """What a PTX backend checks of a job as it is made: the options ``tool`` is not
    given (``refused``: option -> why), and the ``.target`` against the job's arch."""
    for option in job.options:
        name = option.partition("=")[0]
        if name in refused and not (job.exact_options and name in ("-arch", "--gpu-name")):
            raise InvalidJob("options", option, f"refused for {tool}: {refused[name]}")
    target = ptx_target(job.source)
    if job.arch is not None and target is not None:
        why = target_mismatch(target, job.arch)
        if why is not None:
            raise InvalidJob("arch", job.arch, why)


@functools.cache
def _ptxas(toolkit: Toolkit) -> Path | None:
    """The toolkit's ptxas: in its root's ``bin``, else beside its nvcc."""
    folders = []
    if toolkit.cuda_root is not None:
        folders.append(toolkit.cuda_root / "bin")
    if toolkit.nvcc is not None:
        folders += [toolkit.nvcc.parent, toolkit.nvcc.resolve().parent]
    for folder in folders:
        if (folder / "ptxas").is_file():
            return folder / "ptxas"
    return None


# ptxas's refusal of PTX newer than it reads (CUDA 12 and 13: checked on 13.0).
_UNSUPPORTED = re.compile(r"Unsupported \.version (\S+); current version is '([^']+)'")


def newer_ptx(log: str, ptxas: str | None, version: str | None) -> str | None:
    """One line for a ptxas that refused PTX of a newer ISA than it reads (``log``: its
    output), naming both versions and what compiles it; ``None`` for any other failure.

    NVRTC of a newer release than the toolkit (the pip wheel beside a system toolkit)
    writes such PTX: ``asynccomp compile k.cu --output ptx`` then ``--backend ptx``.

    >>> print(newer_ptx("fatal : Unsupported .version 9.5; current version is '9.0'",
    ...                 "/usr/local/cuda/bin/ptxas", "13.0.88"))  # doctest: +ELLIPSIS
    this PTX is .version 9.5, and the toolkit's ptxas 13.0.88 (...) reads up to 9.0: ...
    """
    match = _UNSUPPORTED.search(log)
    if match is None:
        return None
    wanted, current = match.groups()
    from ..toolkit import find_toolkit
    from ._registry import compiler_info

    linker = compiler_info("nvjitlink", find_toolkit())
    if linker.version is not None:
        works = (
            f"compile it with nvJitLink {linker.version} instead: --backend nvjitlink "
            '(CompileJob(backend="nvjitlink"))'
        )
    else:
        works = (
            "install nvJitLink of your NVRTC's release (pip install nvidia-nvjitlink) and "
            "compile it with --backend nvjitlink, or point CUDA_PATH at a newer toolkit"
        )
    return (
        f"this PTX is .version {wanted}, and the toolkit's ptxas {version} ({ptxas}) "
        f"reads up to {current}: {works}"
    )


@functools.cache
def _ptxas_version(ptxas: Path) -> str | None:
    """``13.0.88`` from ``ptxas --version`` (blocking; once per process)."""
    return tool_version(ptxas)


class PtxBackend(ProgramBackend):
    """PTX to cubin, one ptxas subprocess per running job."""

    name = "ptx"
    tool = "ptxas"
    outputs = ("cubin",)
    source_language = "PTX"
    source_suffix = ".ptx"
    # ptxas is the back half of an nvcc compile; its rate is learned from there.
    cost_prior = (0.05, 2e-6)
    worker_memory = 2**29
    worker_noun = "ptxas run"
    ptxas_argv = True

    @classmethod
    def create(cls, toolkit: Toolkit, settings: BackendSettings) -> CompilerBackend:
        return cls(toolkit)

    @classmethod
    def version(cls, toolkit: Toolkit) -> str | None:
        ptxas = _ptxas(toolkit)
        return None if ptxas is None else _ptxas_version(ptxas)

    @classmethod
    def path(cls, toolkit: Toolkit) -> str | None:
        ptxas = _ptxas(toolkit)
        return None if ptxas is None else str(ptxas)

    @classmethod
    def archs(cls, toolkit: Toolkit) -> tuple[int, ...]:
        return toolkit.nvcc_archs  # nvcc's back end, of its release

    @classmethod
    def identity(cls, toolkit: Toolkit) -> tuple[str, tuple[Path, ...]]:
        return f"ptxas {cls.version(toolkit)} {_ptxas(toolkit)}", ()  # PTX reads no headers

    @classmethod
    def check_job(cls, job: CompileJob) -> None:
        super().check_job(job)
        check_ptx_job(job, "ptxas", _REFUSED)

    def explain(self, prepared: PreparedCompile, log: str) -> str | None:
        return newer_ptx(log, self.path(self.toolkit), self.version(self.toolkit))

    @classmethod
    def check_prepared(cls, prepared: PreparedCompile, toolkit: Toolkit) -> None:
        super().check_prepared(prepared, toolkit)
        ptxas = _ptxas(toolkit)
        if not prepared.options or prepared.options[0] != str(ptxas):
            raise ValueError(
                f"job {prepared.filename!r}: rendered for another ptxas than this server's {ptxas}"
            )

    def prepare(self, job: CompileJob, options: BackendOptions) -> PreparedCompile:
        ptxas = _ptxas(self.toolkit)
        if ptxas is None:
            raise ToolkitNotFound(
                "ptxas was not found (it is looked for in the CUDA toolkit's bin folder and "
                "beside nvcc); searched for nvcc: " + "; ".join(self.toolkit.searched),
                searched=self.toolkit.searched,
                job=job,
            )
        stem = safe_stem(job.name)
        argv = [str(ptxas), *ptx_flags(job, options, "-v")]  # -v: the resource report
        # BackendOptions.split_compile is not rendered: it splits NVVM's work, which
        # PTX has done already. keep_intermediates neither: ptxas writes none.
        argv += ["-o", f"{stem}.cubin", f"{stem}.ptx"]
        return PreparedCompile(
            backend=self.name,
            output="cubin",
            arch=options.arch,
            source=job.source,
            filename=f"{stem}.ptx",
            options=tuple(argv),
            timeout=job.timeout,
        )

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        await super().start(task_group)
        # The version is in every cache key: asked now, off the event loop.
        await anyio.to_thread.run_sync(self.version, self.toolkit)
