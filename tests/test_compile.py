"""The compile path on both real compilers: batches, outputs, logs, architectures,
completion order, and how many worker processes a run starts."""

from __future__ import annotations

from typing import Any

import pytest

from asynccomp import (
    ArchitectureNotFound,
    CompileError,
    CompileJob,
    EmptyOutput,
    Engine,
)
from asynccomp.gpu import local_gpu_arch
from asynccomp.toolkit import find_toolkit

from .kernels import ARCH, broken_kernel, needs_nvcc, scale_kernel, slow_kernel
from .processes import nvrtc_workers

BACKENDS = ["nvrtc", pytest.param("nvcc", marks=needs_nvcc)]

CUBIN_MAGIC = b"\x7fELF"
FATBIN_MAGIC = bytes.fromhex("50ed55ba")  # the fatbin container's little-endian magic


@pytest.mark.parametrize("backend", BACKENDS)
async def test_batch_larger_than_workers(backend: str) -> None:
    jobs = [CompileJob(scale_kernel(1.0 + i), name=f"scale{i}", backend=backend) for i in range(7)]
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
    jobs = [CompileJob(s, name=f"k{i}", backend=backend) for i, s in enumerate(sources)]
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
        ptx = await engine.compile(CompileJob(scale_kernel(), backend=backend, output="ptx"))
        cubin = await engine.compile(CompileJob(scale_kernel(), backend=backend, output="cubin"))
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


async def test_nvrtcs_own_cache_is_off_for_every_output() -> None:
    """NVRTC 12.9+ consults a cache of its own, and to do so NVRTC 13 initializes CUDA's
    driver in the compiling process (the user's, in threads mode), PTX output included;
    ``--no-cache`` keeps it from loading the driver at all (test_nvrtc_no_driver.py
    checks that)."""
    version = find_toolkit().nvrtc_version
    async with Engine(arch=ARCH) as engine:
        results = await engine.compile_many(
            [CompileJob(scale_kernel(), output=output) for output in ("ptx", "cubin")]
        )
    assert version is not None and version >= (12, 9), version
    for result in results:
        assert result.ok, result.log
        assert "--no-cache" in result.command, (result.job.output_format, result.command)


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
    async with (
        Engine(arch=ARCH, nvrtc_workers=2) as engine,
        engine.as_completed(jobs) as results,
    ):
        names = [r.job.name async for r in results]
    assert names == ["quick", "slowish"]


async def test_worker_processes_start_only_for_jobs_in_flight() -> None:
    async with Engine(arch=ARCH, nvrtc_workers=4, nvrtc_mode="processes", cache=False) as engine:
        # None before a job needs one. A pool that started them ahead (in the background)
        # shows below: the first job's compile gives it time to start them all.
        assert nvrtc_workers() == [] and engine.statistics().workers == 0
        assert (await engine.compile(CompileJob(scale_kernel(1.0)))).ok
        assert len(nvrtc_workers()) == 1  # one job in flight: one worker, none warming up
        results = await engine.compile_many([CompileJob(scale_kernel(2.0 + i)) for i in range(2)])
        assert all(r.ok for r in results)
        assert 1 <= len(nvrtc_workers()) <= 2
        assert engine.statistics().workers == len(nvrtc_workers())


async def test_two_engines_of_one_process_each_start_nvrtc_workers() -> None:
    """Each worker process gets a folder of its own (as ``$TMPDIR``), whichever engine of
    the process starts it (two engines' first workers once took the same name)."""
    settings: dict[str, Any] = {"arch": ARCH, "nvrtc_workers": 1, "nvrtc_mode": "processes"}
    async with Engine(**settings, cache=False) as a, Engine(**settings, cache=False) as b:
        first, second = (
            await a.compile(CompileJob(scale_kernel(1.5))),
            await b.compile(CompileJob(scale_kernel(2.5))),
        )
        assert first.ok and second.ok, (first.error, second.error)
        assert len(nvrtc_workers()) == 2


@needs_nvcc
async def test_an_nvcc_run_starts_no_nvrtc_worker() -> None:
    async with Engine(arch=ARCH, nvrtc_workers=4, nvrtc_mode="processes") as engine:
        result = await engine.compile(CompileJob(scale_kernel(), backend="nvcc"))
        assert result.ok
        assert nvrtc_workers() == []


@needs_nvcc
async def test_nvcc_that_writes_nothing_is_empty_output() -> None:
    # --dryrun: nvcc prints the steps it would run, exits 0, and writes no output file.
    job = CompileJob(scale_kernel(), backend="nvcc", options=("--dryrun",))
    async with Engine(arch=ARCH) as engine:
        result = await engine.compile(job)
    assert isinstance(result.error, EmptyOutput)
    assert "wrote nothing" in str(result.error) and "#$ " in result.log
    assert result.binary is None
