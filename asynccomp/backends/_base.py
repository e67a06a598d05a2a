"""What every backend takes and gives back.

A backend works in two steps so that the scheduler can look at a compile before it runs:

- ``prepare(job, options)`` renders the exact source text and command line (a plain
  function, no I/O). :class:`BackendOptions` carries what asynccomp asks of the compiler
  besides the job's own flags; each backend renders it its own way, and nothing outside
  the backend edits the result. The scheduler hashes the result for the cache and
  writes it into dump folders.
- ``run(prepared)`` compiles (async; blocking work goes to threads or subprocesses) and
  returns a :class:`BackendOutput`. Compile failures, timeouts and failures of the
  backend's own files are reported there, not raised; an exception means a bug or a
  cancellation.

Everything else asynccomp needs to know of a backend is a member of its class, asked
through the registry (:mod:`._registry`) by name, never by comparing names: the outputs
it makes and the options it refuses (:meth:`CompilerBackend.check_job`, as a job is
built), the architectures its compiler takes, its version and identity (hashed into
cache keys), its cost prior, its worker count, what a dump keeps, how the compile
server checks a compile rendered elsewhere, and how an engine, a server or a Ray actor
makes it (:meth:`CompilerBackend.create`).
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import anyio.abc
import anyio.lowlevel

from ..errors import InvalidJob
from ..job import CompileJob, OutputFormat
from ..toolkit import Toolkit
from ._named_files import check_named_files

__all__ = (
    "CompilerInfo",
    "BackendOptions",
    "BackendOutput",
    "BackendSettings",
    "CompilerBackend",
    "PreparedCompile",
    "Status",
    "add_shared_options",
    "has_line_info",
    "safe_stem",
    "with_caller_folders",
)

#: ``ok``: a binary; ``failed``: the compiler rejected the source or options (its
#: verdict on the input: the only failure a cache may keep); ``empty``: it succeeded but
#: wrote nothing; ``timeout``: stopped at the job's timeout or by a cancel; ``crashed``:
#: the worker process died (or none could start); ``internal``: the backend's own files
#: or calls failed (a full disk, an API error, a compiler that could not be started or
#: was killed by a signal: nothing the source decides); ``lost``: the compile server
#: running it went away.
Status = Literal["ok", "failed", "empty", "timeout", "crashed", "internal", "lost"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
# What safe_stem makes: a compile server takes no other file name.
_PLAIN_STEM = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*")


def safe_stem(name: str, limit: int = 60) -> str:
    """A file-name-safe form of a job name (``"a/b c"`` -> ``"a_b_c"``), never empty and
    never starting with ``-`` (a file name a compiler would take for an option)."""
    stem = _UNSAFE.sub("_", name).strip("._-")[:limit].rstrip("._-")
    return stem or "kernel"


def has_line_info(options: tuple[str, ...] | list[str]) -> bool:
    """Whether the options already ask for line info (either spelling)."""
    return "-lineinfo" in options or "--generate-line-info" in options


# A quoted or computed include (#include "x.h", #include MACRO), which a compiler may
# resolve against a folder of the caller's. Angle includes search -I folders only.
_LOCAL_INCLUDE = re.compile(r"^[ \t]*(?:#|%:)[ \t]*include(?:_next)?[ \t]*[^<\s]", re.M)


#: Options whose value is a folder the caller means relative to its own folder: include
#: folders (``-I``, and nvcc's system include folders). Each is spelled ``NAME VALUE``
#: or ``NAME=VALUE`` (and ``-IVALUE``).
FOLDER_OPTIONS = ("-I", "--include-path", "-isystem", "--system-include")
#: Options that name a header to read before the source. A relative name is found as a
#: quoted ``#include`` of the source is: in the compiler's folder, then the ``-I`` chain.
HEADER_OPTIONS = ("-include", "--pre-include")


def with_caller_folders(
    flags: list[str], source: str, cwd: str | None, *, lists: bool = False
) -> list[str]:
    """``flags`` with the relative folders of :data:`FOLDER_OPTIONS` made absolute
    against ``cwd``, and ``cwd`` itself added as the last ``-I`` when ``source`` has a
    quoted or computed include or a relative header is pre-included
    (:data:`HEADER_OPTIONS`: found as a quoted include is): the compile then reads the
    caller's headers wherever it runs, never those of the compiling process's folder.
    ``lists``: a value may be a comma list (nvcc's ``-I a,b``)."""
    if cwd is None:
        return flags

    def parts(value: str) -> list[str]:
        return value.split(",") if lists else [value]

    out: list[str] = []
    local = _LOCAL_INCLUDE.search(source) is not None
    pending: str | None = None  # the option whose value is this flag
    for flag in flags:
        name, value, prefix = _path_option(flag, pending)
        pending = flag if pending is None and flag in _PATH_OPTIONS else None
        if name in FOLDER_OPTIONS and value:
            flag = prefix + ",".join(str(Path(cwd, p)) if p else p for p in parts(value))
        elif name in HEADER_OPTIONS and value:
            local = local or any(p and not Path(p).is_absolute() for p in parts(value))
        out.append(flag)
    if local:
        out.append(f"-I{cwd}")
    return out


_PATH_OPTIONS = (*FOLDER_OPTIONS, *HEADER_OPTIONS)


def _path_option(flag: str, pending: str | None) -> tuple[str, str, str]:
    """``(option, path, what comes before the path in flag)`` for a flag that gives a
    path option's value (``pending``: the flag before was the option alone), else
    ``("", "", "")``."""
    if pending is not None:
        return pending, flag, ""
    name, equals, value = flag.partition("=")
    if equals and name in _PATH_OPTIONS:
        return name, value, name + "="
    if flag.startswith("-I") and len(flag) > 2:
        return "-I", flag[2:], "-I"
    return "", "", ""


def add_shared_options(flags: list[str], options: BackendOptions) -> None:
    """Append what NVRTC and nvcc spell alike: ``-lineinfo`` and ``--split-compile=N``,
    each unless the flags already ask for it."""
    if options.line_info and not has_line_info(flags):
        flags.append("-lineinfo")
    if options.split_compile > 0 and not any("split-compile" in f for f in flags):
        flags.append(f"--split-compile={options.split_compile}")


@dataclass(frozen=True)
class BackendOptions:
    """What asynccomp asks of a compiler for one job, besides the job's own flags.

    Each backend renders it into its command line (``NvrtcBackend.prepare``,
    ``NvccBackend.prepare``): the one place an option is spelled.

    Attributes:
        arch: the architecture, ``sm_90a`` style (already resolved).
        line_info: add ``-lineinfo`` (dumps: profilers map SASS back to the source).
        keep_intermediates: nvcc's ``--keep`` (dumps).
        split_compile: ``--split-compile=N`` when positive.
        tvm_fast_path: NVRTC: compile TVM's preamble with the fast path.
        cwd: the folder relative paths mean (the caller's working folder when the job
            was planned): relative ``-I`` folders are made absolute against it, and a
            source with a quoted (or computed) ``#include`` gets it as ``-I``, so the
            compile reads the caller's headers wherever it runs (a compile server, a
            worker process started elsewhere). ``None``: the compiling process's own.
    """

    arch: str
    line_info: bool = False
    keep_intermediates: bool = False
    split_compile: int = 0
    tvm_fast_path: bool = True
    cwd: str | None = None


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
    # $ASYNCCOMP_BASE_DIR and the caller's working folder, when the base folder is set:
    # the cache key hashes the paths under it relative to the working folder
    # (asynccomp.cache._relocate). The compile itself uses the options as they are.
    base_dir: str | None = None
    cwd: str | None = None

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
    #: The files the compile read, as the compiler reported them (nvcc ``-MMD``), or
    #: ``None`` when it cannot say (NVRTC): the cache then finds them itself.
    dependencies: tuple[str, ...] | None = None
    #: nvcc's intermediate files (name, bytes), when a compile on another machine was
    #: asked to keep them (:mod:`asynccomp.ray`): written into the dump folder here.
    intermediates: tuple[tuple[str, bytes], ...] = ()
    #: Why an ``internal`` status happened (an ``OSError``, or a
    #: ``subprocess.CalledProcessError`` for a tool killed by a signal): the result's
    #: error has it as ``__cause__``.
    cause: BaseException | None = None


@dataclass(frozen=True)
class CompilerInfo:
    """What a backend says of its compiler in a toolkit (:meth:`CompilerBackend.describe`),
    as reports, cache keys and a compile server's welcome carry it.

    Attributes:
        version: its version (``None``: not found here).
        path: the program or library it runs.
        identity: what every cache key of its compiles hashes (name, version, path).
        headers: the header folders it reads (their fingerprint is hashed too).
        archs: the architecture numbers it takes (empty: unknown).
        runs: where its compiles run (``"worker processes"``, ``"subprocesses"``...).
    """

    version: str | None
    path: str | None
    identity: str
    headers: tuple[str, ...] = ()
    archs: tuple[int, ...] = ()
    runs: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "version": self.version,
            "path": self.path,
            "identity": self.identity,
            "headers": list(self.headers),
            "archs": list(self.archs),
            "runs": self.runs,
        }

    @classmethod
    def from_json(cls, fields: dict[str, object]) -> CompilerInfo:
        """One from :meth:`to_json`'s fields (``ValueError`` if they are not)."""
        version, path = fields.get("version"), fields.get("path")
        identity, runs = fields.get("identity"), fields.get("runs")
        headers, archs = fields.get("headers"), fields.get("archs")
        if not (
            (version is None or isinstance(version, str))
            and (path is None or isinstance(path, str))
            and isinstance(identity, str)
            and isinstance(runs, str)
            and isinstance(headers, list)
            and all(isinstance(h, str) for h in headers)
            and isinstance(archs, list)
            and all(isinstance(a, int) for a in archs)
        ):
            raise ValueError(f"not a compiler's description: {fields!r:.200}")
        return cls(version, path, identity, tuple(headers), tuple(archs), runs)


@dataclass(frozen=True)
class BackendSettings:
    """How an engine, a compile server or a Ray actor runs a backend.

    Attributes:
        workers: compiles at once (already capped by memory).
        mode: ``"processes"``: compiles in worker processes of the backend's own
            (NVRTC); ``"threads"``: in this process. Backends that run a program per
            compile ignore it.
        warmup_arch: the architecture a warm-up compiles for.
        pch_hints: a folder where the precompiled headers the backend's workers make
            are remembered, and made again as the next backend on it starts (a compile
            server's; ``None``: none remembered).
    """

    workers: int = 1
    mode: Literal["threads", "processes"] = "threads"
    warmup_arch: str = "sm_80"
    pch_hints: Path | None = None


class CompilerBackend(abc.ABC):
    """One compiler. Instances live as long as their engine: :meth:`start` when it
    starts (with a task group the backend may run background work in), :meth:`aclose`
    when it closes.

    The class members describe the backend to the rest of asynccomp (which asks the
    registry, :func:`~asynccomp.backends.backend_class`, by name); a registered backend
    defines :meth:`create`, :meth:`version`, :meth:`archs` and :meth:`identity`.
    """

    name: ClassVar[str]
    #: The outputs it makes, its default first.
    outputs: ClassVar[tuple[OutputFormat, ...]] = ("cubin",)
    #: What its sources are (for messages), and the suffix of their files: the CLI
    #: walks folders for it, and the compiler gets ``<job name><suffix>``.
    source_language: ClassVar[str] = "CUDA C++"
    source_suffix: ClassVar[str] = ".cu"
    #: (seconds of a compile of a tiny source, seconds per source character): where the
    #: cost model starts (it learns the rate from there; only the ordering matters).
    cost_prior: ClassVar[tuple[float, float]] = (0.3, 1e-5)
    #: Memory set aside per compile running at once: default worker counts (one per
    #: CPU) are capped at one per this much available memory.
    worker_memory: ClassVar[int] = 2**29
    #: The engine setting that gives its worker count (``None``: the default count),
    #: and what one worker is called in messages.
    workers_setting: ClassVar[str | None] = None
    worker_noun: ClassVar[str] = "compile"
    #: The engine setting that says whether its compiles run in worker processes or in
    #: threads of this process (``"auto"``: processes when it has more than one worker;
    #: ``None``: it has no such choice).
    mode_setting: ClassVar[str | None] = None
    #: ``PreparedCompile.options`` is the whole argv of a program, file names relative
    #: to its work folder (a dump writes ``rerun.sh``), not an option list for a library.
    runs_program: ClassVar[bool] = False
    #: A dumped job keeps the compiler's intermediate files (``keep_intermediates``; a
    #: Ray actor sends them back).
    keeps_intermediates: ClassVar[bool] = False
    #: An include option's value may be a comma list (nvcc's ``-I a,b``).
    comma_lists: ClassVar[bool] = False
    #: Its options are ptxas's own arguments (a word that is no option's value is an
    #: input file ptxas assembles).
    ptxas_argv: ClassVar[bool] = False
    #: It can warm up (start workers, load libraries): ``Engine.warm_up`` warms it.
    warms_up: ClassVar[bool] = False
    #: It takes ``CompileJob(pch=True)`` (NVRTC's automatic precompiled headers).
    takes_pch: ClassVar[bool] = False
    #: Where its compiles run, for people (``CompilerInfo.runs``).
    runs: ClassVar[str] = "subprocesses"

    def __init__(self, toolkit: Toolkit) -> None:
        self.toolkit = toolkit

    # -- what the class says of the backend (no instance needed) ------------------------

    @classmethod
    def create(cls, toolkit: Toolkit, settings: BackendSettings) -> CompilerBackend:
        """The backend as an engine, a compile server (``settings.workers`` compiles at
        once) or a Ray actor (one at a time, in its process) runs it."""
        raise NotImplementedError(f"{cls.__name__} is not a registered backend")

    @classmethod
    def version(cls, toolkit: Toolkit) -> str | None:
        """Its compiler's version in ``toolkit`` (``None``: not found)."""
        raise NotImplementedError(f"{cls.__name__} is not a registered backend")

    @classmethod
    def archs(cls, toolkit: Toolkit) -> tuple[int, ...]:
        """The architecture numbers its compiler takes (empty: unknown)."""
        raise NotImplementedError(f"{cls.__name__} is not a registered backend")

    @classmethod
    def identity(cls, toolkit: Toolkit) -> tuple[str, tuple[Path, ...]]:
        """(its compiler's identity: name, version, library or program, the header
        folders it reads), hashed into every cache key of its compiles."""
        raise NotImplementedError(f"{cls.__name__} is not a registered backend")

    @classmethod
    def path(cls, toolkit: Toolkit) -> str | None:
        """The program or library its compiler is (``None``: not found)."""
        return None

    @classmethod
    def fingerprint(cls) -> list[object]:
        """What would change its compiler, read cheaply (file names and sizes, package
        versions: nothing run or loaded): part of the compile server's identity, so a
        process finds the server of its own compilers. Default: nothing beyond the
        toolkit's own fingerprint (nvcc, NVRTC, the headers)."""
        return []

    @classmethod
    def describe(cls, toolkit: Toolkit) -> CompilerInfo:
        """Its compiler in ``toolkit``, probed now (blocking: may run it or load it);
        :func:`~asynccomp.backends.compiler_info` asks a toolkit's description first."""
        identity, headers = cls.identity(toolkit)
        return CompilerInfo(
            version=cls.version(toolkit),
            path=cls.path(toolkit),
            identity=identity,
            headers=tuple(str(h) for h in headers),
            archs=cls.archs(toolkit),
            runs=cls.runs,
        )

    @classmethod
    def check_job(cls, job: CompileJob) -> None:
        """Raise :class:`~asynccomp.InvalidJob` naming the field for what this backend
        cannot take (called as the job is built: plain code, no I/O)."""
        if job.output is not None and job.output not in cls.outputs:
            raise InvalidJob(
                "output",
                job.output,
                f"backend {cls.name!r} makes {' or '.join(cls.outputs)}",
            )
        if job.pch and not cls.takes_pch:
            why = f"precompiled headers are NVRTC's; {cls.name} has none"
            raise InvalidJob("pch", job.pch, why)
        # Options naming files the cache key would not cover (._named_files).
        check_named_files(job.options, ptxas_argv=cls.ptxas_argv, comma_lists=cls.comma_lists)

    @classmethod
    def check_prepared(cls, prepared: PreparedCompile, toolkit: Toolkit) -> None:
        """Raise ``ValueError`` (naming what is wrong) unless ``prepared``, rendered by
        another process (a compile server's client), is one this backend runs with
        ``toolkit``: an output it makes, a plain file name of its sources."""
        what = f"job {prepared.filename!r}"
        if prepared.output not in cls.outputs:
            raise ValueError(f"{what}: {cls.name} makes no {prepared.output}")
        stem = prepared.filename.removesuffix(cls.source_suffix)
        if stem == prepared.filename or not _PLAIN_STEM.fullmatch(stem):
            raise ValueError(f"{what}: not a plain {cls.source_suffix} file name")

    # -- an instance: compiles -----------------------------------------------------------

    @abc.abstractmethod
    def prepare(self, job: CompileJob, options: BackendOptions) -> PreparedCompile:
        """Render ``job`` with ``options``. Raises ToolkitNotFound if the compiler is
        missing. Plain code, no I/O."""

    @abc.abstractmethod
    async def run(self, prepared: PreparedCompile) -> BackendOutput:
        """Compile; honour ``prepared.timeout``; stop the compiler if cancelled."""

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:  # noqa: B027 - optional
        """Called once as the engine starts; ``task_group`` lives until it closes."""

    async def warm_up(self) -> None:  # noqa: B027 - optional hook
        """Pay first-compile costs now (start workers, load libraries)."""

    async def make_pch(self, prepared: PreparedCompile) -> bool:
        """Make the precompiled header ``prepared`` would use, now (``Engine.make_pch``);
        whether its workers hold it when this returns. ``False`` for a backend that makes
        none ahead, which is every one but NVRTC's worker processes."""
        await anyio.lowlevel.checkpoint()
        return False

    def worker_count(self) -> int:
        """Worker processes alive now (0 for backends that keep none)."""
        return 0

    def pch_counts(self) -> dict[str, int] | None:
        """Its precompiled headers, counted (made, used, ...; a compile server's status
        shows them), or ``None`` for a backend that keeps none."""
        return None

    def quote_folder(self) -> str:
        """The folder its compiler looks in first for a quoted ``#include``: the
        compiling process's working folder (this process's, by default). The cache's
        dependency scan starts there when a compile's output does not list what it
        read (:attr:`BackendOutput.dependencies`)."""
        return str(Path.cwd())

    def watch_capacity(self, changed: Callable[[int], None]) -> None:  # noqa: B027 - optional
        """Call ``changed(n)`` (on the event loop) whenever the number of compiles this
        backend can run at once changes (a Ray cluster's actors lost and not replaced).
        Backends of a fixed capacity never call it."""

    def watch_workers(self, changed: Callable[[], None]) -> None:  # noqa: B027 - optional
        """Call ``changed()`` (on the event loop) when :meth:`worker_count` may have
        changed (a worker started or ended), so that it is pushed, never polled.
        Backends that keep no workers never call it."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        """Release what the backend holds (worker processes, threads, ...)."""
