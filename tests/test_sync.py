"""SyncEngine: the blocking facade over the async engine."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from asynccomp import CompileJob, EngineClosed, SyncEngine

from .kernels import ARCH, broken_kernel, scale_kernel


def test_sync_engine_methods() -> None:
    jobs = [CompileJob(scale_kernel(float(i)), name=f"s{i}") for i in range(4)]
    with SyncEngine(arch=ARCH, nvrtc_workers=2) as engine:
        single = engine.compile(jobs[0])
        many = engine.compile_many(jobs)
        done = sorted(r.job.name for r in engine.as_completed(jobs))
        stats = engine.statistics()
    assert single.ok
    assert [r.job for r in many] == jobs and all(r.ok for r in many)
    assert done == ["s0", "s1", "s2", "s3"]
    assert stats.completed == 9


def test_sync_engine_from_many_threads() -> None:
    with SyncEngine(arch=ARCH, nvrtc_workers=2) as engine, ThreadPoolExecutor(8) as pool:
        futures = [
            pool.submit(engine.compile, CompileJob(scale_kernel(float(i)), name=f"t{i}"))
            for i in range(12)
        ]
        results = [f.result() for f in futures]
    assert all(r.ok for r in results)


def test_sync_engine_inside_a_running_event_loop() -> None:
    async def caller() -> bool:
        # A caller whose own thread runs a loop (as in a notebook) must not deadlock.
        with SyncEngine(arch=ARCH) as engine:
            return engine.compile(CompileJob(broken_kernel())).ok

    assert asyncio.run(caller()) is False


def test_sync_engine_not_started() -> None:
    with pytest.raises(EngineClosed):
        SyncEngine(arch=ARCH).compile(CompileJob(scale_kernel()))


def test_breaking_out_of_as_completed_stops_cleanly() -> None:
    jobs = [CompileJob(scale_kernel(float(i))) for i in range(6)]
    with SyncEngine(arch=ARCH, nvrtc_workers=1) as engine:
        for result in engine.as_completed(jobs):
            assert result.ok
            break
        assert engine.compile(jobs[0]).ok
