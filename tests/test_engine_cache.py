"""The engine's compile cache: hits across engines, misses on any change (compiler
version too), dedupe, prefetch, healing of corrupt entries, eviction, and several
processes sharing one folder."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from asynccomp import CompileJob, Engine, find_toolkit
from asynccomp.cache import CacheCorruptionWarning, DiskCache, RemoteAuth, RemoteCache

from .filesystems import few_inodes
from .kernels import ARCH, scale_kernel, slow_kernel


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


async def test_cancelled_prefetch_leaves_nothing_behind_and_recompiles_on_demand() -> None:
    slow = CompileJob(slow_kernel(), name="slow")
    quick = CompileJob(scale_kernel(9.0), name="quick")
    async with Engine(arch=ARCH, cache_dir=False, nvrtc_workers=1) as engine:
        engine.prefetch([slow, quick])  # one worker: "quick" waits behind "slow"
        with anyio.fail_after(120):  # the worker may still be starting on a loaded machine
            while [job.name for job, _ in engine.running()] != ["slow"]:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        engine.cancel_prefetched()
        result = await engine.compile(quick)  # not cached: compiled now
        stats = engine.statistics()
    assert result.ok and not result.cached
    assert stats.completed == 1 and stats.compiled == 2  # slow (stopped) and quick


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


async def test_another_compiler_version_is_a_miss(tmp_path: Path) -> None:
    job = CompileJob(scale_kernel(), name="k")
    toolkit = find_toolkit()
    assert toolkit.nvrtc_version is not None
    major, minor = toolkit.nvrtc_version
    upgraded = dataclasses.replace(toolkit, nvrtc_version=(major, minor + 1))
    async with Engine(arch=ARCH, cache_dir=tmp_path) as engine:
        await engine.compile(job)
    async with Engine(arch=ARCH, cache_dir=tmp_path, toolkit=upgraded) as engine:
        again = await engine.compile(job)
        assert (engine.statistics().compiled, engine.statistics().cache_hits) == (1, 0)
    assert again.ok and not again.cached


async def test_corrupt_entry_is_healed(tmp_path: Path) -> None:
    job = CompileJob(scale_kernel(), name="k")
    async with Engine(arch=ARCH, cache_dir=tmp_path) as engine:
        first = await engine.compile(job)
    (entry,) = tmp_path.rglob("*.entry")  # noqa: ASYNC240 - a test's own bookkeeping
    data = bytearray(entry.read_bytes())
    data[-10] ^= 0xFF  # one flipped byte inside the cubin
    entry.write_bytes(bytes(data))
    with pytest.warns(CacheCorruptionWarning, match="checksum"):
        async with Engine(arch=ARCH, cache_dir=tmp_path) as engine:
            healed = await engine.compile(job)
            assert engine.statistics().compiled == 1
    assert healed.ok and not healed.cached and healed.binary == first.binary
    # The entry was rewritten whole: the next engine gets a verified hit.
    async with Engine(arch=ARCH, cache_dir=tmp_path) as engine:
        hit = await engine.compile(job)
    assert hit.cached and hit.binary == first.binary


async def test_eviction_keeps_the_disk_bound(tmp_path: Path) -> None:
    jobs = [CompileJob(scale_kernel(float(i)), name=f"e{i}") for i in range(6)]
    async with Engine(arch=ARCH, cache_dir=tmp_path, disk_cache_bytes=12_000) as engine:
        for job in jobs:  # one at a time, so recency follows the job order
            assert (await engine.compile(job)).ok
    sizes = [p.stat().st_size for p in tmp_path.rglob("*.entry")]  # noqa: ASYNC240
    assert 0 < len(sizes) < len(jobs) and sum(sizes) <= 12_000
    async with Engine(arch=ARCH, cache_dir=tmp_path, disk_cache_bytes=12_000) as engine:
        newest = await engine.compile(jobs[-1])
    assert newest.cached  # least recently used went first


_TWO_PROCESSES = """
import sys, anyio
from asynccomp import CompileJob, Engine
sys.path.insert(0, sys.argv[2])
from tests.kernels import scale_kernel

async def main() -> None:
    async with Engine(arch="sm_90a", cache_dir=sys.argv[1], nvrtc_workers=1) as engine:
        results = await engine.compile_many(
            [CompileJob(scale_kernel(float(i)), name=f"c{i}") for i in range(4)]
        )
    assert all(r.ok for r in results)
    sys.stdout.write(",".join(r.binary.hex()[:64] for r in results if r.binary))

anyio.run(main)
"""


@pytest.mark.filterwarnings("ignore::pytest.PytestWarning")  # a sync test under the mark
def test_processes_sharing_a_folder_all_end_with_valid_entries(tmp_path: Path) -> None:
    repo = str(Path(__file__).resolve().parents[1])
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _TWO_PROCESSES, str(tmp_path), repo],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err for _, err in outputs]
    assert len({out for out, _ in outputs}) == 1  # the same bytes everywhere
    disk = DiskCache(tmp_path)
    entries = list(tmp_path.rglob("*.entry"))
    assert len(entries) == 4
    assert all(disk.get(p.stem) is not None for p in entries)  # every entry verifies
    assert not list(tmp_path.rglob("*.tmp"))


async def test_a_failed_disk_write_under_warnings_as_errors_loses_no_result(
    tmp_path: Path,
) -> None:
    # A real file system with inodes for the cache's folders (its root, cache/, v3/ and
    # the probe file, then one shard), none for an entry: every write fails with ENOSPC,
    # and pytest turns warnings into errors.
    jobs = [CompileJob(scale_kernel(float(i)), name=f"w{i}") for i in range(3)]
    with few_inodes(tmp_path, 4) as small:
        async with Engine(arch=ARCH, cache_dir=small / "cache", nvrtc_workers=1) as engine:
            results = await engine.compile_many(jobs)
        assert list(small.rglob("*.entry")) == []  # every write failed
    assert all(r.ok and r.binary for r in results)


class _GatedRemote(RemoteCache):
    """A remote tier that misses, and holds every lookup after the first until
    ``release`` is set: a lookup slow enough to outlast a compile."""

    def __init__(self) -> None:
        super().__init__("gated", auth=RemoteAuth(b"0123456789abcdef-gated"))
        self.lookups = 0
        self.release = anyio.Event()

    async def _get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        self.lookups += 1
        if self.lookups > 1:
            await self.release.wait()
        return [None] * len(keys)

    async def _put(self, key: str, data: bytes) -> None:
        pass

    async def aclose(self) -> None:
        pass


async def test_a_request_for_a_key_being_compiled_follows_it_without_a_lookup(
    tmp_path: Path,
) -> None:
    """A second request for a key whose compile is under way follows it. Looked up
    instead, its lookup (here held until the compile is done) would miss, end after the
    compile had stored its output and let its followers go, and compile it again."""
    remote = _GatedRemote()
    job = CompileJob(scale_kernel(7.0), name="k")
    async with Engine(
        arch=ARCH, cache_dir=tmp_path, remote_cache=remote, nvrtc_mode="threads"
    ) as engine:
        results = []
        first_done = anyio.Event()

        async def compile_and_keep() -> None:
            results.append(await engine.compile(job))
            first_done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(compile_and_keep)
            with anyio.fail_after(120):  # until the first request's compile runs
                while not engine.running():  # noqa: ASYNC110 - the engine signals nothing
                    await anyio.sleep(0.01)
            tg.start_soon(compile_and_keep)
            with anyio.fail_after(120):
                await first_done.wait()
            remote.release.set()  # the second's lookup, if it made one, misses now
        stats = engine.statistics()
    assert len(results) == 2 and all(r.ok for r in results)
    assert (stats.compiled, stats.deduplicated) == (1, 1), stats
    assert remote.lookups == 1
