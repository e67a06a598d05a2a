"""The engine on both real compilers: batches, failures, timeouts, cancellation."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

import anyio
import psutil
import pytest

from asynccomp import (
    ArchitectureNotFound,
    CompileError,
    CompileJob,
    CompileTimeout,
    EmptyOutput,
    Engine,
    EngineClosed,
    InvalidJob,
    WorkerCrashed,
)
from asynccomp.backends import nvrtc_pool
from asynccomp.gpu import local_gpu_arch

from .kernels import ARCH, broken_kernel, needs_nvcc, scale_kernel, slow_kernel

pytestmark = pytest.mark.asyncio

BACKENDS = ["nvrtc", pytest.param("nvcc", marks=needs_nvcc)]

CUBIN_MAGIC = b"\x7fELF"
FATBIN_MAGIC = bytes.fromhex("50ed55ba")  # the fatbin container's little-endian magic


@pytest.mark.parametrize("backend", BACKENDS)
async def test_batch_larger_than_workers(backend: str) -> None:
    jobs = [
        CompileJob(scale_kernel(1.0 + i), name=f"scale{i}", backend=backend)  # type: ignore[arg-type]
        for i in range(7)
    ]
    async with Engine(arch=ARCH, nvrtc_workers=2, nvcc_workers=2) as engine:
        results = await engine.compile_many(jobs)
        stats = engine.statistics()
    assert [r.job for r in results] == jobs
    magic = CUBIN_MAGIC if backend == "nvrtc" else FATBIN_MAGIC
    for r in results:
        assert r.ok, r.error
        assert r.binary is not None and r.binary.startswith(magic)
        assert r.unwrap() == r.binary
        assert r.elapsed > 0 and r.queued >= 0
        assert r.arch == ARCH
        assert r.output == ("cubin" if backend == "nvrtc" else "fatbin")
    # Two workers for seven jobs: somebody waited.
    assert max(r.queued for r in results) > 0
    assert (stats.submitted, stats.completed, stats.succeeded, stats.failed) == (7, 7, 7, 0)
    assert (stats.running, stats.queued, stats.compiled) == (0, 0, 7)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_one_broken_kernel_among_good_ones(backend: str) -> None:
    sources = [scale_kernel(2.0), broken_kernel(), scale_kernel(3.0)]
    jobs = [CompileJob(s, name=f"k{i}", backend=backend) for i, s in enumerate(sources)]  # type: ignore[arg-type]
    async with Engine(arch=ARCH) as engine:
        good0, bad, good2 = await engine.compile_many(jobs)
        assert engine.statistics().failed == 1
    assert good0.ok and good2.ok
    assert not bad.ok and bad.binary is None
    assert isinstance(bad.error, CompileError)
    assert "undefined_identifier_42" in str(bad.error)
    assert "undefined_identifier_42" in bad.log
    assert bad.error.log == bad.log
    assert bad.error.job is bad.job
    with pytest.raises(CompileError, match="undefined_identifier_42"):
        bad.unwrap()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_ptx_and_cubin_outputs(backend: str) -> None:
    async with Engine(arch=ARCH) as engine:
        ptx = await engine.compile(CompileJob(scale_kernel(), backend=backend, output="ptx"))  # type: ignore[arg-type]
        cubin = await engine.compile(CompileJob(scale_kernel(), backend=backend, output="cubin"))  # type: ignore[arg-type]
    assert ptx.ok and ptx.binary is not None
    text = ptx.binary.decode()
    assert ".entry scale" in text and ".target sm_90a" in text
    assert cubin.ok and cubin.binary is not None and cubin.binary.startswith(CUBIN_MAGIC)


async def test_log_keeps_warnings_and_ptxas_report() -> None:
    source = 'extern "C" __global__ void k(float* x) { int never_used = 1; x[0] = 1.f; }'
    async with Engine(arch=ARCH) as engine:
        result = await engine.compile(CompileJob(source))
    assert result.ok
    assert 'warning #177-D: variable "never_used"' in result.log
    assert "ptxas info" in result.log and "Used" in result.log
    assert result.resources["k"].registers > 0
    assert "--ptxas-options=-v" in result.command


async def test_job_arch_wins_over_engine_arch() -> None:
    async with Engine(arch="sm_80") as engine:
        r80, r90 = await engine.compile_many(
            [CompileJob(scale_kernel()), CompileJob(scale_kernel(), arch="sm_90a")]
        )
    assert (r80.arch, r90.arch) == ("sm_80", "sm_90a")
    assert "--gpu-architecture=sm_80" in r80.command
    assert "--gpu-architecture=sm_90a" in r90.command
    assert r80.binary != r90.binary


@pytest.mark.skipif(local_gpu_arch() is not None, reason="a GPU is present: its arch is used")
async def test_no_arch_and_no_gpu_says_how_to_set_it() -> None:
    async with Engine() as engine:
        result = await engine.compile(CompileJob(scale_kernel()))
    assert isinstance(result.error, ArchitectureNotFound)
    assert 'arch="sm_90a"' in str(result.error)


async def test_as_completed_yields_in_completion_order() -> None:
    jobs = [CompileJob(slow_kernel(3000), name="slowish"), CompileJob(scale_kernel(), name="quick")]
    async with Engine(arch=ARCH, nvrtc_workers=2) as engine:
        names = [r.job.name async for r in engine.as_completed(jobs)]
    assert names == ["quick", "slowish"]


async def test_engine_must_be_running() -> None:
    engine = Engine(arch=ARCH)
    with pytest.raises(EngineClosed):
        await engine.compile(CompileJob(scale_kernel()))
    async with engine:
        with pytest.raises(InvalidJob):
            await engine.compile("not a job")  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_timeout_stops_a_slow_compile(backend: str) -> None:
    job = CompileJob(slow_kernel(), name="slow", backend=backend, timeout=1.0)  # type: ignore[arg-type]
    async with Engine(arch=ARCH) as engine:
        result, quick = await engine.compile_many(
            [job, CompileJob(scale_kernel(), backend=backend)]
        )  # type: ignore[arg-type]
        stats = engine.statistics()
    assert isinstance(result.error, CompileTimeout)
    assert result.error.timeout == 1.0
    assert "timed out after 1 s" in str(result.error)
    assert quick.ok
    assert stats.timed_out == 1
    # Stopped, not left to finish: NVRTC cancelled through its flow callback (a worker
    # that had to be killed after the grace would say so instead), nvcc killed. The
    # messages prove the stop without a wall-clock bound that a loaded machine could miss.
    assert "NVRTC compile cancelled" in str(result.error) or "nvcc was killed" in str(result.error)


def _children() -> list[psutil.Process]:
    """Compiler processes (nvcc and its tools, NVRTC workers) below this test process.

    Other children, such as multiprocessing's resource tracker left by other tests, are
    not ours to judge."""
    ours = ("nvcc", "cicc", "ptxas", "fatbinary", "cudafe", "nvrtc_worker")
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if any(word in " ".join(child.cmdline()) for word in ours):
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


@needs_nvcc
async def test_cancelled_batch_leaves_no_process_or_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    jobs = [CompileJob(slow_kernel(), name=f"slow{i}", backend="nvcc") for i in range(3)]
    jobs.append(CompileJob(slow_kernel(), name="slow_nvrtc"))
    async with Engine(arch=ARCH, nvcc_workers=2) as engine:
        with anyio.move_on_after(1.5) as scope:
            await engine.compile_many(jobs)
        assert scope.cancelled_caught
        assert engine.statistics().running == 0
    assert [(p.pid, p.cmdline()) for p in _children()] == []
    assert list(tmp_path.iterdir()) == []  # noqa: ASYNC240


@needs_nvcc
async def test_nvcc_that_writes_nothing_is_empty_output() -> None:
    # --dryrun: nvcc prints the steps it would run, exits 0, and writes no output file.
    job = CompileJob(scale_kernel(), backend="nvcc", options=("--dryrun",))
    async with Engine(arch=ARCH) as engine:
        result = await engine.compile(job)
    assert isinstance(result.error, EmptyOutput)
    assert "wrote nothing" in str(result.error) and "#$ " in result.log
    assert result.binary is None


async def test_nvrtc_cancellation_returns_promptly() -> None:
    async with Engine(arch=ARCH) as engine:
        start = time.monotonic()
        with anyio.move_on_after(0.5):
            await engine.compile(CompileJob(slow_kernel()))
        assert time.monotonic() - start < 6


async def test_killed_nvrtc_worker_fails_only_its_job() -> None:
    async with Engine(arch=ARCH, nvrtc_workers=2, nvrtc_mode="processes", cache=False) as engine:
        await engine.warm_up()
        nvrtc = engine._backends["nvrtc"]
        pool = nvrtc.pool  # type: ignore[attr-defined]
        assert len(pool.worker_pids()) == 2

        async def kill_soon() -> None:
            await anyio.sleep(1.0)
            busy = [w.pid for w in pool._busy]
            assert busy
            os.kill(busy[0], signal.SIGKILL)  # as an out-of-memory kill would

        async with anyio.create_task_group() as tg:
            tg.start_soon(kill_soon)
            crashed = await engine.compile(CompileJob(slow_kernel(), name="victim"))
        after = await engine.compile_many([CompileJob(scale_kernel(float(i))) for i in range(3)])
    assert isinstance(crashed.error, WorkerCrashed)
    assert "SIGKILL" in str(crashed.error)
    assert all(r.ok for r in after)
    assert _children() == []


async def test_unresponsive_nvrtc_worker_is_killed_after_its_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A stopped worker can neither see NVRTC's flow callback nor answer: the pool must
    # give up on it after timeout + grace, kill it and start a replacement.
    monkeypatch.setattr(nvrtc_pool, "KILL_GRACE", 1.0)
    async with Engine(arch=ARCH, nvrtc_workers=1, nvrtc_mode="processes", cache=False) as engine:
        await engine.warm_up()
        pool = engine._backends["nvrtc"].pool  # type: ignore[attr-defined]
        [frozen] = pool.worker_pids()
        os.kill(frozen, signal.SIGSTOP)
        start = time.monotonic()
        stuck = await engine.compile(CompileJob(scale_kernel(2.0), name="stuck", timeout=0.5))
        waited = time.monotonic() - start
        assert not psutil.pid_exists(frozen)  # killed and reaped
        after = await engine.compile(CompileJob(scale_kernel(3.0)))
        assert pool.worker_pids() not in ([], [frozen])
    assert isinstance(stuck.error, CompileTimeout)
    assert "worker killed" in str(stuck.error)
    assert waited >= 1.5  # it was given the timeout and the grace
    assert after.ok, after.error
    assert _children() == []
