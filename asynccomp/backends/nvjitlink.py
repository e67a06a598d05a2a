"""PTX -> cubin with nvJitLink, in worker processes, where it is installed.

nvJitLink is the CUDA library that links and JIT-compiles device code (it runs ptxas's
compiler inside the process: no subprocess, no work folder). It is not a dependency of
asynccomp: ``pip install nvidia-nvjitlink`` (the release of your NVRTC) installs it, and
``cuda-python`` finds it. Without it a job for this backend is
:class:`~asynccomp.ToolkitNotFound`, saying so; the ``ptx`` backend (the toolkit's
ptxas, :mod:`.ptx`) takes the same jobs.

- **Checks** as the ``ptx`` backend's: the PTX's ``.target`` against the job's
  architecture, ``-arch`` refused in options (the job's arch is the architecture).
- **Options** are nvJitLink's (``-O3``, ``-maxrregcount=64``, ``-lineinfo``,
  ``-Xptxas=...``); asynccomp adds ``-arch=<arch>`` and ``-verbose``, whose report is
  ptxas's, so ``result.resources`` is filled in.
- **Worker processes** (:class:`asynccomp.workers.WorkerPool`, forked from a template
  that loaded nvJitLink once): at most ``workers`` at once (one per CPU by default,
  capped by memory). nvJitLink cannot be stopped from another thread, and one job can
  wedge it for every later one of its process (nvJitLink 13.5, given
  ``-Xptxas=-arch=sm_100a``, fails with ``ERROR_INVALID_INPUT`` and leaves an internal
  lock held: the next ``nvJitLinkAddData`` of another thread blocks for ever): so each
  compile runs in a process that can be killed. A job past its timeout is killed with
  its worker (``timeout``), its slot comes back, and a fresh worker takes the next job.
- **Identity** in cache keys: nvJitLink's version and the library's path.

>>> import pytest; _ = pytest.importorskip("cuda.bindings.nvjitlink")
>>> if NvJitLinkBackend.version(None) is None: pytest.skip("nvJitLink is not installed")
>>> from asynccomp import CompileJob, SyncEngine
>>> PTX = '''
... .version 8.0
... .target sm_80
... .address_size 64
... .visible .entry k() { ret; }
... '''
>>> with SyncEngine(arch="sm_90a", cache=False) as engine:
...     result = engine.compile(CompileJob(PTX, name="k", backend="nvjitlink"))
>>> result.ok, result.output, result.resources["k"].arch, result.command
(True, 'cubin', 'sm_90a', ('-arch=sm_90a', '-verbose'))
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

from ..errors import ToolkitNotFound
from ..job import CompileJob
from ..toolkit import Toolkit
from ..workers import PoolSettings, WorkerPool
from ._base import (
    BackendOptions,
    BackendOutput,
    BackendSettings,
    CompilerBackend,
    PreparedCompile,
    safe_stem,
)
from ._registry import compiler_info
from .ptx import PtxBackend, check_ptx_job, ptx_flags

__all__ = ("NvJitLinkBackend",)


_REFUSED = {"-arch": "the job's arch is the architecture (CompileJob(arch=...))"}
_INSTALL = "pip install nvidia-nvjitlink (the release of your NVRTC)"


@functools.cache
def _library() -> tuple[str | None, str]:
    """nvJitLink's version (``"13.5"``) and library path, or ``None`` and why not
    (blocking: loads the library; once per process)."""
    try:
        from cuda.bindings import nvjitlink

        major, minor = nvjitlink.version()
    except Exception as exc:  # ImportError, or the library failing to load
        return None, f"{type(exc).__name__}: {exc}"
    try:
        from cuda import pathfinder

        path: str = pathfinder.load_nvidia_dynamic_lib("nvJitLink").abs_path
    except Exception:
        path = "libnvJitLink (loaded by cuda.bindings)"
    return f"{major}.{minor}", path


class NvJitLinkBackend(CompilerBackend):
    """PTX to cubin, in at most ``workers`` nvJitLink threads at once."""

    name = "nvjitlink"
    outputs = ("cubin",)
    source_language = "PTX"
    source_suffix = ".ptx"
    cost_prior = PtxBackend.cost_prior  # ptxas's compiler, without the process
    worker_memory = 2**29
    worker_noun = "nvJitLink worker"
    runs = "worker processes of the compiling process"

    def __init__(self, toolkit: Toolkit, workers: int = 1) -> None:
        super().__init__(toolkit)
        self.workers = workers
        self._pool: WorkerPool | None = None  # made at the first compile

    @property
    def pool(self) -> WorkerPool:
        if self._pool is None:
            self._pool = WorkerPool(
                PoolSettings("nvjitlink", self.workers, [_library], eager=False, start_timeout=60)
            )
        return self._pool

    @classmethod
    def create(cls, toolkit: Toolkit, settings: BackendSettings) -> CompilerBackend:
        return cls(toolkit, settings.workers)

    @classmethod
    def version(cls, toolkit: Toolkit | None) -> str | None:
        return _library()[0]

    @classmethod
    def path(cls, toolkit: Toolkit) -> str | None:
        version, path = _library()
        return None if version is None else path

    @classmethod
    def archs(cls, toolkit: Toolkit) -> tuple[int, ...]:
        # nvJitLink comes with NVRTC, of its release (the wheels and toolkits pair them).
        return toolkit.nvrtc_archs

    @classmethod
    def identity(cls, toolkit: Toolkit) -> tuple[str, tuple[Path, ...]]:
        version, path = _library()
        return f"nvjitlink {version} {path}", ()  # PTX reads no headers

    @classmethod
    def fingerprint(cls) -> list[object]:
        from importlib import metadata

        versions: list[object] = []
        for package in ("nvidia-nvjitlink", "nvidia-nvjitlink-cu12", "nvidia-nvjitlink-cu13"):
            try:
                versions.append([package, metadata.version(package)])
            except metadata.PackageNotFoundError:
                continue
        return versions

    @classmethod
    def check_job(cls, job: CompileJob) -> None:
        super().check_job(job)
        check_ptx_job(job, "nvJitLink", _REFUSED)

    def prepare(self, job: CompileJob, options: BackendOptions) -> PreparedCompile:
        # What the toolkit says of nvJitLink (a compile server's, for its clients: they
        # need no nvJitLink of their own), else this process's.
        version = compiler_info(self.name, self.toolkit).version
        if version is None:
            why_not = _library()[1]
            raise ToolkitNotFound(
                f"nvJitLink is not installed ({why_not}): {_INSTALL}; or compile PTX with "
                'the toolkit\'s ptxas, backend="ptx"',
                searched=("cuda.bindings.nvjitlink",),
                job=job,
            )
        flags = ptx_flags(job, options, "-verbose")  # -verbose: ptxas's resource report
        return PreparedCompile(
            backend=self.name,
            output="cubin",
            arch=options.arch,
            source=job.source,
            filename=f"{safe_stem(job.name)}.ptx",
            options=tuple(flags),
            timeout=job.timeout,
        )

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        # The version is in every cache key: asked now (loading the library), off the
        # event loop.
        await anyio.to_thread.run_sync(_library)

    def worker_count(self) -> int:
        return 0 if self._pool is None else len(self._pool.pids())

    async def run(self, prepared: PreparedCompile) -> BackendOutput:
        # nvJitLink cannot be asked to stop: its worker is killed at the timeout itself.
        task = await self.pool.run(_link, prepared, timeout=prepared.timeout)
        if task.outcome == "done":
            out: BackendOutput = task.value
            return out
        if task.outcome == "timeout":
            return BackendOutput(
                "timeout",
                None,
                "",
                f"nvJitLink did not finish within {prepared.timeout:g} s; its worker process "
                "was killed",
            )
        if task.outcome == "start_failed":
            why = f"no nvJitLink worker could be started: {task.value}"
            return BackendOutput("crashed", None, "", why)
        if task.outcome == "error":
            why = f"nvJitLink's worker failed: {task.value!r}"
            return BackendOutput("internal", None, "", why, cause=task.value)
        return BackendOutput("crashed", None, "", f"{task.value} while linking")

    async def aclose(self) -> None:
        if self._pool is not None:
            await anyio.to_thread.run_sync(self._pool.close)


def _link(prepared: PreparedCompile) -> BackendOutput:
    """Blocking: compile ``prepared``'s PTX to a cubin with nvJitLink."""
    from cuda.bindings import nvjitlink

    flags = list(prepared.options)
    try:
        handle = nvjitlink.create(len(flags), flags)
    except nvjitlink.nvJitLinkError as exc:  # an option it does not take
        return BackendOutput("failed", None, "", f"nvJitLink refused the options {flags}: {exc}")
    try:
        source = prepared.source.encode()
        try:
            nvjitlink.add_data(
                handle, nvjitlink.InputType.PTX, source, len(source), prepared.filename
            )
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            log = _log(handle, nvjitlink.get_error_log_size, nvjitlink.get_error_log)
            log += _log(handle, nvjitlink.get_info_log_size, nvjitlink.get_info_log)
            return BackendOutput("failed", None, log, f"nvJitLink: {exc}")
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
        info = _log(handle, nvjitlink.get_info_log_size, nvjitlink.get_info_log)
        return BackendOutput("ok" if cubin else "empty", bytes(cubin) or None, info)
    finally:
        nvjitlink.destroy(handle)


def _log(handle: int, size_of: Any, read: Any) -> str:
    size = int(size_of(handle))
    if size <= 1:
        return ""
    buffer = bytearray(size)
    read(handle, buffer)
    return buffer.rstrip(b"\0").decode(errors="replace")
