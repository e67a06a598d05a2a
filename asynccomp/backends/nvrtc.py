"""NVRTC through ``cuda.bindings.nvrtc``: in long-lived worker processes or in threads.

NVRTC's front end runs one program at a time per process (measured: threads alone gain
nothing on header-heavy TVM kernels), so ``mode="processes"`` runs whole compiles in
parallel worker processes (:mod:`._nvrtc_pool`). ``mode="threads"`` compiles in threads
of this process: cuda-bindings releases the GIL inside ``nvrtcCompileProgram``, so only
NVVM and ptxas of several programs overlap.

Where an NVRTC option is rendered: :meth:`NvrtcBackend.prepare`, here (with
:func:`._base.add_shared_options` for the two nvcc spells alike), and nowhere else.

**Precompiled headers** (``CompileJob(pch=True)``): ``-pch`` is rendered first (NVRTC
wants its PCH options before the others). NVRTC then writes a PCH of the source's
leading ``#include`` lines the first time it sees that header prefix with those options,
and uses it for every later compile with the same prefix and options *in the same
process*: so the worker pool sends such jobs to the worker that holds their PCH
(:mod:`._nvrtc_pool`), gives every worker a folder of its own for the files (NVRTC puts
them in ``$TMPDIR``) and removes it when the worker ends, killed or not. The PCH heap is
raised to what the headers need (:mod:`._nvrtc_api`): NVRTC 13.5's default of 256 MiB is
too small for TileLang's headers (422 MiB), and then no PCH is ever made while every
compile gets slower. The binary is the same with or without (tested). In threads mode
the PCH lives in this process's ``$TMPDIR`` and NVRTC removes it when the process exits.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import replace
from typing import Literal

import anyio
import anyio.abc
import anyio.to_thread

from ..errors import ToolkitNotFound
from ..job import CompileJob, nvrtc_arch
from ..preamble import rewrite_tvm_preamble
from ..toolkit import Toolkit
from ._base import (
    BackendOptions,
    BackendOutput,
    CompilerBackend,
    PreparedCompile,
    add_shared_options,
    safe_stem,
    with_caller_folders,
)
from ._nvrtc_api import compile_prepared
from ._nvrtc_files import sweep_stale_auto_pch
from ._nvrtc_pool import KILL_GRACE, NvrtcProcessPool

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
    and a thread that outlives its job's deadline keeps its place until NVRTC stops).
    """

    name = "nvrtc"

    def __init__(
        self,
        toolkit: Toolkit,
        mode: NvrtcMode = "threads",
        workers: int = 1,
        warmup_arch: str = "sm_80",
    ) -> None:
        super().__init__(toolkit)
        self.mode = mode
        self.workers = workers
        # Rendered once: every job shares these strings instead of holding copies.
        self._include_flags = tuple(f"-I{d}" for d in toolkit.include_dirs)
        self._own_cache = (toolkit.nvrtc_version or (0, 0)) >= (12, 9)
        self._warmup = self.prepare(
            CompileJob(WARMUP_SOURCE, name="asynccomp_warmup", arch=warmup_arch),
            BackendOptions(warmup_arch, tvm_fast_path=False),
        )
        self.pool = NvrtcProcessPool(workers, self._warmup) if mode == "processes" else None
        self._threads = _ThreadRunner(workers) if mode == "threads" else None

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
                # NVRTC 12.9+ keeps a cache of its own: a hit there skips ptxas, and the
                # report with it (seen on NVRTC 13.0: an empty log, no resources).
                # asynccomp's cache answers repeats; NVRTC's would only hide the report.
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
        if self._threads is not None:
            self._threads.task_group = task_group

    async def warm_up(self) -> None:
        """Start the workers and compile a small program in each (threads: once)."""
        if self.pool is not None:
            await self.pool.warm_up()
        else:
            await self._run_once(self._warmup)

    def worker_count(self) -> int:
        return len(self.pool.worker_pids()) if self.pool is not None else 0

    async def aclose(self) -> None:
        if self.pool is not None:
            await self.pool.aclose()
        if self._threads is not None:
            self._threads.stop_all()

    async def run(self, prepared: PreparedCompile) -> BackendOutput:
        out = await self._run_once(prepared)
        if out.status == "failed" and prepared.fallback_source is not None:
            original = replace(prepared, source=prepared.fallback_source, fallback_source=None)
            out = await self._run_once(original)
            note = "the TVM preamble fast path failed to compile; compiled the original source"
            out = replace(out, warnings=(*out.warnings, note))
        return out

    async def _run_once(self, prepared: PreparedCompile) -> BackendOutput:
        if self.pool is not None:
            return await self.pool.run(prepared)
        assert self._threads is not None
        return await self._threads.run(prepared)


class _ThreadRunner:
    """NVRTC compiles in threads of this process, at most ``workers`` at once.

    A thread cannot be killed, and NVRTC may call the flow callback that stops it only
    seconds after being told to. So a job whose deadline passed (or that was cancelled)
    returns at once, and its thread runs on, as a task of the engine's task group, until
    NVRTC notices; it keeps its place in the limiter until then, so no more than
    ``workers`` threads ever compile.
    """

    def __init__(self, workers: int) -> None:
        self.limiter = anyio.CapacityLimiter(workers)
        # anyio's default thread limiter (40) must not add a second, hidden queue.
        self._threads = anyio.CapacityLimiter(math.inf)
        self.task_group: anyio.abc.TaskGroup | None = None
        self._running: set[threading.Event] = set()

    async def run(self, prepared: PreparedCompile) -> BackendOutput:
        assert self.task_group is not None, "the backend was not started"
        cancel = threading.Event()
        started, done = anyio.Event(), anyio.Event()
        outputs: list[BackendOutput] = []

        async def compile_in_thread() -> None:
            self._running.add(cancel)
            try:
                async with self.limiter:
                    started.set()
                    out = await anyio.to_thread.run_sync(
                        compile_prepared, prepared, cancel, limiter=self._threads
                    )
                    outputs.append(out)
            finally:
                self._running.discard(cancel)
                done.set()

        self.task_group.start_soon(compile_in_thread)
        limit = None if prepared.timeout is None else prepared.timeout + KILL_GRACE
        try:
            await started.wait()  # the timeout counts from the start of the compile
            with anyio.move_on_after(limit):
                await done.wait()
        finally:
            if not done.is_set():
                cancel.set()  # NVRTC stops at its next flow callback
        if outputs:
            return outputs[0]
        return BackendOutput(
            "timeout", None, "", "NVRTC did not stop at the timeout; its thread was left to stop"
        )

    def stop_all(self) -> None:
        for cancel in list(self._running):
            cancel.set()
