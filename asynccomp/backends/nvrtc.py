"""NVRTC through ``cuda.bindings.nvrtc``, run in worker threads.

cuda-bindings releases the GIL inside ``nvrtcCompileProgram``, so NVVM and ptxas of
several programs overlap across threads. NVRTC's front end, however, runs one program at
a time per process (measured: threads alone gain nothing on header-heavy TVM kernels);
process workers lift that limit.

A running compile is cancelled through ``nvrtcSetFlowCallback`` (NVRTC 12.8+): NVRTC
calls back at points during the compile and stops with ``NVRTC_ERROR_CANCELLED`` once
the callback returns 1. That serves both per-job timeouts and task cancellation.
"""

from __future__ import annotations

import ctypes
import threading
import time
from dataclasses import replace
from typing import Any, Literal

import anyio
import anyio.lowlevel
import anyio.to_thread

from ..errors import ToolkitNotFound
from ..job import CompileJob, parse_arch
from ..preamble import rewrite_tvm_preamble
from ..toolkit import Toolkit
from .base import BackendOutput, CompilerBackend, PreparedCompile, add_lineinfo, safe_stem
from .nvrtc_pool import NvrtcProcessPool

__all__ = ("NvrtcBackend", "NvrtcMode", "compile_prepared", "nvrtc_arch")

_FLOW_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


def nvrtc_arch(arch: str, output: str) -> str:
    """NVRTC wants ``compute_XX`` for PTX and ``sm_XX`` for cubin (as TVM renders it)."""
    _, number, suffix = parse_arch(arch)
    return f"{'compute' if output == 'ptx' else 'sm'}_{number}{suffix}"


def _program_log(nvrtc: Any, prog: Any) -> str:
    err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS or size <= 1:
        return ""
    buf = b" " * int(size)
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return bytes(buf).rstrip(b"\x00").decode("utf-8", errors="replace")


def _output(nvrtc: Any, prog: Any, output: str) -> bytes:
    if output == "ptx":
        err, size = nvrtc.nvrtcGetPTXSize(prog)
        _check(nvrtc, err, "nvrtcGetPTXSize")
        buf = b" " * int(size)
        _check(nvrtc, nvrtc.nvrtcGetPTX(prog, buf)[0], "nvrtcGetPTX")
        # PTX is text: drop the terminating NUL (asynccomp.tvm puts it back, as TVM keeps it).
        return buf.rstrip(b"\x00")
    err, size = nvrtc.nvrtcGetCUBINSize(prog)
    _check(nvrtc, err, "nvrtcGetCUBINSize")
    cubin = b" " * int(size)
    _check(nvrtc, nvrtc.nvrtcGetCUBIN(prog, cubin)[0], "nvrtcGetCUBIN")
    return cubin


def _check(nvrtc: Any, err: Any, what: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"{what} failed: {err}")


def compile_prepared(
    prepared: PreparedCompile, cancel: threading.Event | None = None
) -> BackendOutput:
    """Compile with NVRTC in the calling thread (or worker process). Never raises for a
    compile failure; returns status ``"timeout"`` when ``cancel`` was set or
    ``prepared.timeout`` ran out while compiling."""
    from cuda.bindings import nvrtc

    deadline = None if prepared.timeout is None else time.monotonic() + prepared.timeout
    stopped = False

    def flow(_payload: int | None, _reserved: int | None) -> int:
        nonlocal stopped
        if not stopped and (
            (cancel is not None and cancel.is_set())
            or (deadline is not None and time.monotonic() > deadline)
        ):
            stopped = True
        return 1 if stopped else 0

    callback = _FLOW_CALLBACK(flow)  # kept referenced until the compile returns
    err, prog = nvrtc.nvrtcCreateProgram(
        prepared.source.encode(), prepared.filename.encode(), 0, [], []
    )
    _check(nvrtc, err, "nvrtcCreateProgram")
    try:
        if cancel is not None or deadline is not None:
            address = ctypes.cast(callback, ctypes.c_void_p).value
            _check(nvrtc, nvrtc.nvrtcSetFlowCallback(prog, address, 0)[0], "nvrtcSetFlowCallback")
        options = [o.encode() for o in prepared.options]
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(options), options)
        log = _program_log(nvrtc, prog)
        if result == nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return BackendOutput("ok", _output(nvrtc, prog, prepared.output), log)
        if result == nvrtc.nvrtcResult.NVRTC_ERROR_CANCELLED or stopped:
            return BackendOutput("timeout", None, log, "NVRTC compile cancelled")
        _, text = nvrtc.nvrtcGetErrorString(result)
        message = text.decode() if isinstance(text, bytes) else str(text)
        return BackendOutput("failed", None, log, f"NVRTC compilation failed ({message})")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


WARMUP_SOURCE = """\
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>
#include <cuda/std/limits>
extern "C" __global__ void asynccomp_warmup(float* x) {
  x[threadIdx.x] = cuda::std::numeric_limits<float>::infinity();
}
"""

NvrtcMode = Literal["threads", "processes"]


class NvrtcBackend(CompilerBackend):
    """NVRTC in threads of this process, or in long-lived worker processes.

    ``mode="threads"`` overlaps NVRTC's back ends only; ``mode="processes"`` runs up to
    ``workers`` whole compiles in parallel (see :mod:`.nvrtc_pool`). The engine bounds how
    many jobs run at once either way.
    """

    name = "nvrtc"
    _threads: anyio.CapacityLimiter | None = None

    def __init__(
        self,
        toolkit: Toolkit,
        mode: NvrtcMode = "threads",
        workers: int = 1,
        warmup_arch: str = "sm_80",
        tvm_fast_path: bool = True,
    ) -> None:
        super().__init__(toolkit)
        self.tvm_fast_path = tvm_fast_path
        self.mode = mode
        self.workers = workers
        self._warmup = PreparedCompile(
            backend=self.name,
            output="cubin",
            arch=warmup_arch,
            source=WARMUP_SOURCE,
            filename="asynccomp_warmup.cu",
            options=(
                f"--gpu-architecture={nvrtc_arch(warmup_arch, 'cubin')}",
                *(f"-I{d}" for d in toolkit.include_dirs),
            ),
        )
        self.pool = NvrtcProcessPool(workers, self._warmup) if mode == "processes" else None

    async def warm_up(self) -> None:
        """Start the workers and compile a small program in each (threads: once)."""
        if self.pool is not None:
            await self.pool.warm_up()
        else:
            await anyio.to_thread.run_sync(compile_prepared, self._warmup)

    async def aclose(self) -> None:
        if self.pool is not None:
            await self.pool.aclose()

    def prepare(self, job: CompileJob, arch: str, *, dump: bool = False) -> PreparedCompile:
        if self.toolkit.nvrtc_version is None:
            raise ToolkitNotFound(
                f"NVRTC could not be loaded ({self.toolkit.nvrtc_error}); "
                "install the nvidia-cuda-nvrtc wheel or a CUDA toolkit",
                searched=("cuda.bindings.nvrtc",),
                job=job,
            )
        output = job.output_format
        if job.exact_options:
            options = list(job.options)
        else:
            options = [f"--gpu-architecture={nvrtc_arch(arch, output)}"]
            options += [f"-I{d}" for d in self.toolkit.include_dirs]
            if output != "ptx":
                options.append("--ptxas-options=-v")  # the resource report, always
            options += job.options
        if dump:
            add_lineinfo(options)
        fast_path = self.tvm_fast_path if job.tvm_fast_path is None else job.tvm_fast_path
        fast = rewrite_tvm_preamble(job.source) if fast_path else None
        return PreparedCompile(
            backend=self.name,
            output=output,
            arch=arch,
            source=fast or job.source,
            fallback_source=job.source if fast else None,
            filename=f"{safe_stem(job.name)}.cu",
            options=tuple(options),
            timeout=job.timeout,
        )

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
        cancel = threading.Event()
        async with anyio.create_task_group() as tg:
            # The thread cannot be abandoned (NVRTC would go on compiling unseen), so
            # to_thread waits for it even when cancelled; this watcher turns that
            # cancellation into NVRTC's own, through the flow callback.
            tg.start_soon(_set_when_cancelled, cancel)
            out = await anyio.to_thread.run_sync(
                compile_prepared, prepared, cancel, limiter=self._thread_limiter()
            )
            tg.cancel_scope.cancel()
        # If NVRTC stopped because this task was cancelled, raise that now, not a result.
        await anyio.lowlevel.checkpoint()
        return out

    def _thread_limiter(self) -> anyio.CapacityLimiter:
        # The engine's own CapacityLimiter bounds NVRTC concurrency; anyio's default thread
        # limiter (40 threads) must not add a second, hidden queue. Made on first use,
        # inside the engine's event loop.
        if self._threads is None:
            self._threads = anyio.CapacityLimiter(1_000_000)
        return self._threads


async def _set_when_cancelled(cancel: threading.Event) -> None:
    try:
        await anyio.sleep_forever()
    finally:
        cancel.set()
