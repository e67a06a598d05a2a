"""The engine's compile cache: hits across engines, misses on any change, dedupe, prefetch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asynccomp import CompileJob, Engine

from .kernels import ARCH, scale_kernel

pytestmark = pytest.mark.asyncio


async def test_hit_across_engine_instances(tmp_path: Path) -> None:
    job = CompileJob(scale_kernel(), name="k")
    async with Engine(arch=ARCH, cache_dir=tmp_path) as first:
        compiled = await first.compile(job)
    async with Engine(arch=ARCH, cache_dir=tmp_path) as second:
        hit = await second.compile(job)
        stats = second.statistics()
    assert compiled.ok and not compiled.cached
    assert hit.cached and hit.binary == compiled.binary and hit.log == compiled.log
    assert hit.resources == compiled.resources
    assert (stats.cache_hits, stats.compiled) == (1, 0)


async def test_any_change_is_a_miss(tmp_path: Path) -> None:
    base = CompileJob(scale_kernel(), name="k")
    variants = [
        base,
        CompileJob(scale_kernel(), name="k", arch="sm_80"),
        CompileJob(scale_kernel(), name="k", options=["-DX=1"]),
        CompileJob(scale_kernel(3.0), name="k"),
        CompileJob(scale_kernel(), name="k", output="ptx"),
    ]
    async with Engine(arch=ARCH, cache_dir=tmp_path) as engine:
        await engine.compile_many(variants)
        assert engine.statistics().compiled == len(variants)
        again = await engine.compile_many(variants)
        assert all(r.cached for r in again)
        assert engine.statistics().compiled == len(variants)


async def test_identical_jobs_in_flight_compile_once(tmp_path: Path) -> None:
    jobs = [CompileJob(scale_kernel(7.0), name="same")] * 5
    async with Engine(arch=ARCH, cache_dir=False) as engine:
        results = await engine.compile_many(jobs)
        stats = engine.statistics()
    assert all(r.ok for r in results)
    assert len({r.binary for r in results}) == 1
    assert stats.compiled == 1
    assert stats.deduplicated + stats.cache_hits == 4


async def test_prefetch_makes_later_compiles_hits() -> None:
    jobs = [CompileJob(scale_kernel(float(i)), name=f"p{i}") for i in range(4)]
    async with Engine(arch=ARCH, cache_dir=False) as engine:
        engine.prefetch(jobs)
        results = await engine.compile_many(jobs)
        stats = engine.statistics()
    assert all(r.ok for r in results)
    assert stats.compiled == 4 and stats.deduplicated + stats.cache_hits == 4


async def test_failures_are_not_cached_unless_asked(tmp_path: Path) -> None:
    bad = CompileJob("this is not CUDA", name="bad")
    async with Engine(arch=ARCH, cache_dir=tmp_path) as engine:
        await engine.compile(bad)
        await engine.compile(bad)
        assert engine.statistics().compiled == 2
    async with Engine(arch=ARCH, cache_dir=tmp_path, cache_failures=True) as engine:
        first, second = await engine.compile(bad), await engine.compile(bad)
        assert engine.statistics().compiled == 1
    assert second.cached and not second.ok and str(first.error) == str(second.error)


async def test_cache_hit_is_dumped_and_marked(tmp_path: Path) -> None:
    job = CompileJob(scale_kernel(), name="k")
    async with Engine(arch=ARCH, cache_dir=tmp_path / "cache", dump_dir=tmp_path / "d") as e:
        await e.compile(job)
        hit = await e.compile(job)
    assert hit.cached and hit.dump_dir is not None
    record = json.loads((hit.dump_dir / "result.json").read_text())
    assert record["status"] == "cached" and record["cached"] is True
    assert (hit.dump_dir / "k.cubin").read_bytes() == hit.binary


async def test_unusable_cache_folder_warns_and_goes_on(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.warns(UserWarning, match="not usable"):
        engine = Engine(arch=ARCH, cache_dir=blocker / "cache")
        async with engine:
            result = await engine.compile(CompileJob(scale_kernel()))
    assert result.ok
