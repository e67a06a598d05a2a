"""NVRTC through ``cuda.bindings.nvrtc``: in long-lived worker processes or in threads.

NVRTC's front end runs one program at a time per process (measured: threads alone gain
nothing on header-heavy TVM kernels), so ``mode="processes"`` runs whole compiles in
parallel worker processes (:mod:`._nvrtc_workers`). ``mode="threads"`` compiles in threads
of this process: cuda-bindings releases the GIL inside ``nvrtcCompileProgram``, so only
NVVM and ptxas of several programs overlap.

Where an NVRTC option is rendered: :meth:`NvrtcBackend.prepare`, here (with
:func:`._base.add_shared_options` for the two nvcc spells alike), and nowhere else.

**Precompiled headers** (``CompileJob(pch=True)``): ``-pch`` is rendered first (NVRTC
wants its PCH options before the others). NVRTC then writes a PCH of the source's
leading ``#include`` lines the first time it sees that header prefix with those options,
and uses it for every later compile with the same prefix and options *in the same
process*: so the worker pool sends such jobs to the worker that holds their PCH
(:mod:`._nvrtc_workers`), gives every worker a folder of its own for the files (NVRTC puts
them in ``$TMPDIR``) and removes it when the worker ends, killed or not. The PCH heap is
raised to what the headers need (:mod:`._nvrtc_api`): NVRTC 13.5's default of 256 MiB is
too small for TileLang's headers (422 MiB), and then no PCH is ever made while every
compile gets slower. The binary is the same with or without (tested). In threads mode
the PCH lives in this process's ``$TMPDIR`` and NVRTC removes it when the process exits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Literal

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from .._os import empty_folder
from ..errors import InvalidJob, ToolkitNotFound
from ..job import CompileJob, nvrtc_arch
from ..preamble import rewrite_tvm_preamble
from ..toolkit import Toolkit
from ._base import (
    BackendOptions,
    BackendOutput,
    BackendSettings,
    CompilerBackend,
    PreparedCompile,
    add_shared_options,
    safe_stem,
    with_caller_folders,
)
from ._nvrtc_files import sweep_stale_auto_pch
from ._nvrtc_pch_hints import PchHints, ahead_enabled
from ._nvrtc_threads import NvrtcThreads
from ._nvrtc_workers import NvrtcWorkers

logger = logging.getLogger("asynccomp")

__all__ = ("NvrtcBackend", "NvrtcMode", "PCH_OPTION", "WARMUP_SOURCE")

#: NVRTC's automatic precompiled header option, rendered for ``CompileJob(pch=True)``.
PCH_OPTION = "-pch"

NvrtcMode = Literal["threads", "processes"]

WARMUP_SOURCE = """\
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>
#include <cuda/std/limits>
extern "C" __global__ void asynccomp_warmup(float* x) {
  x[threadIdx.x] = cuda::std::numeric_limits<float>::infinity();
}
"""


class NvrtcBackend(CompilerBackend):
    """NVRTC in threads of this process, or in long-lived worker processes.

    Either way at most ``workers`` compiles run at once (the scheduler sends no more,
    and a thread that outlives its job's deadline keeps its place until NVRTC stops,
    or until it is abandoned: :mod:`._nvrtc_threads`; threads mode then goes on in
    worker processes).

    A toolkit without NVRTC (nvcc only) makes a backend all the same: its jobs fail
    with :class:`~asynccomp.ToolkitNotFound` as they are rendered, nothing else does.
    """

    name = "nvrtc"
    outputs = ("cubin", "ptx")
    # Medians over the shared TVM corpus (with the preamble fast path), rounded.
    cost_prior = (0.05, 5e-6)
    worker_memory = 2**30  # see asynccomp._scheduler._limits
    workers_setting = "nvrtc_workers"
    mode_setting = "nvrtc_mode"
    worker_noun = "NVRTC worker"
    warms_up = True
    takes_pch = True
    runs = "worker processes, or threads of the compiling process"

    @classmethod
    def path(cls, toolkit: Toolkit) -> str | None:
        return toolkit.nvrtc_library

    @classmethod
    def create(cls, toolkit: Toolkit, settings: BackendSettings) -> NvrtcBackend:
        return cls(
            toolkit,
            settings.mode,
            settings.workers,
            warmup_arch=settings.warmup_arch,
            pch_hints=settings.pch_hints,
        )

    @classmethod
    def version(cls, toolkit: Toolkit) -> str | None:
        return None if toolkit.nvrtc_version is None else "{}.{}".format(*toolkit.nvrtc_version)

    @classmethod
    def archs(cls, toolkit: Toolkit) -> tuple[int, ...]:
        return toolkit.nvrtc_archs

    @classmethod
    def identity(cls, toolkit: Toolkit) -> tuple[str, tuple[Path, ...]]:
        return f"nvrtc {cls.version(toolkit)} {toolkit.nvrtc_library}", toolkit.include_dirs

    @classmethod
    def check_job(cls, job: CompileJob) -> None:
        if job.output == "fatbin":
            raise InvalidJob(
                "output", job.output, 'NVRTC makes cubin or ptx; use backend="nvcc" for fatbin'
            )
        super().check_job(job)

    def __init__(
        self,
        toolkit: Toolkit,
        mode: NvrtcMode = "threads",
        workers: int = 1,
        warmup_arch: str = "sm_80",
        pch_hints: Path | None = None,
    ) -> None:
        super().__init__(toolkit)
        self.mode = mode
        self.workers = workers
        # Rendered once: every job shares these strings instead of holding copies.
        self._include_flags = tuple(f"-I{d}" for d in toolkit.include_dirs)
        self._own_cache = (toolkit.nvrtc_version or (0, 0)) >= (12, 9)
        self._warmup = None
        if toolkit.nvrtc_version is not None:  # else nothing to warm: jobs fail to render
            self._warmup = self.prepare(
                CompileJob(WARMUP_SOURCE, name="asynccomp_warmup", arch=warmup_arch),
                BackendOptions(warmup_arch, tvm_fast_path=False),
            )
        self.pool = None
        if mode == "processes":
            hints = None if pch_hints is None else PchHints(pch_hints)
            self.pool = NvrtcWorkers(workers, self._warmup, hints=hints)
        self.threads = NvrtcThreads(workers) if mode == "threads" else None

    def prepare(self, job: CompileJob, options: BackendOptions) -> PreparedCompile:
        if self.toolkit.nvrtc_version is None:
            raise ToolkitNotFound(
                f"NVRTC could not be loaded ({self.toolkit.nvrtc_error}); "
                "install the nvidia-cuda-nvrtc wheel or a CUDA toolkit",
                searched=("cuda.bindings.nvrtc",),
                job=job,
            )
        output = job.output_format
        if job.exact_options:
            flags = list(job.options)
        else:
            flags = [f"--gpu-architecture={nvrtc_arch(options.arch, output)}"]
            flags += self._include_flags
            if output != "ptx":
                flags.append("--ptxas-options=-v")  # the resource report, always
            # NVRTC 12.9+ keeps a cache of its own: a hit there skips ptxas, and the report
            # with it (seen on NVRTC 13.0: an empty log, no resources); asynccomp's cache
            # answers repeats. And to consult it, NVRTC 13.5 calls cuInit in the compiling
            # process, PTX output and CUDA_CACHE_DISABLE=1 included (seen with a stand-in
            # libcuda): CUDA's driver threads in a user's process, or a warm template
            # that then may not fork. With --no-cache it loads no driver at all.
            if self._own_cache:
                flags.append("--no-cache")
            flags += job.options
        flags = with_caller_folders(flags, job.source, options.cwd)
        add_shared_options(flags, options)
        if job.pch and PCH_OPTION not in flags:
            flags.insert(0, PCH_OPTION)  # PCH options come first
        fast = rewrite_tvm_preamble(job.source) if options.tvm_fast_path else None
        return PreparedCompile(
            backend=self.name,
            output=output,
            arch=options.arch,
            source=fast or job.source,
            fallback_source=job.source if fast else None,
            filename=f"{safe_stem(job.name)}.cu",
            options=tuple(flags),
            timeout=job.timeout,
        )

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        # NVRTC in the threads of an engine that was killed left its precompiled headers
        # in that process's temporary folder (workers have folders of their own).
        swept = await anyio.to_thread.run_sync(sweep_stale_auto_pch)
        if swept:
            logger.info("asynccomp: removed %d stale NVRTC PCH folders", len(swept))
        if self.pool is not None:
            self.pool.start(task_group)  # where PCHs asked for (make_pch) are made
            if self._warmup is not None:
                self.pool.prime()  # NVRTC loaded once, in the background, for every worker
                if ahead_enabled():  # the PCHs a compile server's workers made last time
                    await self.pool.start_ahead(task_group)

    async def warm_up(self) -> None:
        """Start every worker (processes), or compile a small program (threads: NVRTC
        and the common headers loaded)."""
        if self._warmup is None:
            await anyio.lowlevel.checkpoint()
        elif self.pool is not None:
            await self.pool.warm_up()
        else:
            await self._run_once(self._warmup)

    async def make_pch(self, prepared: PreparedCompile) -> bool:
        """In worker processes that share their PCHs: :meth:`NvrtcWorkers.make_pch`.
        Threads (and spawned workers) keep NVRTC's automatic PCH per thread or process,
        which no compile made here could give the others: none is made."""
        if self.pool is None:
            await anyio.lowlevel.checkpoint()
            return False
        return await self.pool.make_pch(prepared)

    def worker_count(self) -> int:
        return len(self.pool.worker_pids()) if self.pool is not None else 0

    def pch_counts(self) -> dict[str, int] | None:
        return None if self.pool is None else self.pool.pch_counts()

    def quote_folder(self) -> str:
        # A worker process works in an empty folder (threads mode goes on in workers
        # once a thread was abandoned): NVRTC finds nothing there.
        return empty_folder() if self.pool is not None else super().quote_folder()

    def watch_workers(self, changed: Callable[[], None]) -> None:
        if self.pool is not None:
            self.pool.watch(changed)

    async def aclose(self) -> None:
        if self.pool is not None:
            await self.pool.aclose()
        if self.threads is not None:
            await self.threads.aclose()

    async def run(self, prepared: PreparedCompile) -> BackendOutput:
        out = await self._run_once(prepared)
        if out.status == "failed" and prepared.fallback_source is not None:
            original = replace(prepared, source=prepared.fallback_source, fallback_source=None)
            out = await self._run_once(original)
            note = "the TVM preamble fast path failed to compile; compiled the original source"
            out = replace(out, warnings=(*out.warnings, note))
        return out

    async def _run_once(self, prepared: PreparedCompile) -> BackendOutput:
        if self.pool is None:
            assert self.threads is not None
            out = await self.threads.run(prepared)
            if out is not None:
                return out
            # A thread did not stop and was abandoned: worker processes from now on,
            # which a timeout can kill (one pool, whichever job comes back first).
            if self.pool is None:
                self.pool = NvrtcWorkers(self.workers, self._warmup)
        return await self.pool.run(prepared)
