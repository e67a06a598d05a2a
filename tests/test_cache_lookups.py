"""Cache lookups cannot hold a job up for long, nor starve the others: they run in threads
of their own (reads, and checks that may be slow), under the earliest timeout of their
chunk's jobs and their caller's cancellation, and stop when those end; what was answered
by then keeps its answer. Real entries on a real disk and a real redis-server, real
FIFOs, real slow checks (headers of 64 MiB whose mtime changed, read and hashed), real
NVRTC and nvcc compiles."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import anyio
import pytest

from asynccomp import CompileJob, Engine
from asynccomp.cache import CacheEntry, DiskCache, RedisCache, RemoteAuth
from asynccomp.cache._deps import Dependency
from asynccomp.cache._format import encode_entry
from asynccomp.cache._includes import READ_LIMIT

from .kernels import ARCH, needs_nvcc, scale_kernel
from .processes import wait_until
from .redis_server import TEAM_KEY, RedisServer, redis_server

__all__ = ("redis_server",)

pytestmark = pytest.mark.timeout(120)

# A slow check: this many dependencies on one header of 64 MiB (the most a check reads)
# whose mtime differs from the recorded one and whose bytes do not: each is read and
# hashed (about 0.1 s here), and all hold, so the check goes on for minutes.
SLOW_DEPENDENCIES = 1000


def _including(i: int) -> str:
    return f'#include "dep{i}.h"\n' + scale_kernel(float(i), name=f"k{i}")


def _headers(folder: Path, count: int) -> Path:
    include = folder / "include"
    include.mkdir()
    past = time.time_ns() - 10 * 10**9
    for i in range(count):
        header = include / f"dep{i}.h"
        header.write_text(f"// header {i}\n")
        os.utime(header, ns=(past, past))
    return include


def _jobs(include: Path, count: int, timeout: float | None = None) -> list[CompileJob]:
    return [
        CompileJob(_including(i), name=f"k{i}", options=[f"-I{include}"], timeout=timeout)
        for i in range(count)
    ]


def _entries(folder: Path) -> dict[str, tuple[str, CacheEntry]]:
    """The job name of each entry in the disk tier -> (its key, the entry)."""
    disk = DiskCache(folder)
    found = {}
    for path in disk.directory.rglob("*.entry"):
        entry = disk.get(path.name[:64])
        assert entry is not None
        found[str(entry.metadata["filename"]).removesuffix(".cu")] = (path.name[:64], entry)
    return found


def _with_deps(entry: CacheEntry, deps: list[Dependency]) -> CacheEntry:
    recorded = [*entry.metadata["deps"], *(d.to_json() for d in deps)]
    return dataclasses.replace(entry, metadata={**entry.metadata, "deps": recorded})


def _big_header(folder: Path) -> list[Dependency]:
    """A sparse header of 64 MiB, recorded as it is but for its mtime: a slow check."""
    big = folder / "big.h"
    with big.open("wb") as f:
        f.truncate(READ_LIMIT)
    digest = hashlib.sha256(b"\0" * READ_LIMIT).hexdigest()
    recorded_mtime = big.stat().st_mtime_ns - 10**9
    return [Dependency(str(big), READ_LIMIT, recorded_mtime, digest)] * SLOW_DEPENDENCIES


def _bytes_read() -> int:
    """What this process has read so far (all its threads): /proc/self/io's rchar."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


async def _nothing_reads_on() -> None:
    """No lookup thread reads on in the background: over half a second this process
    reads less than a check reads in a tenth of one."""
    await anyio.sleep(0.2)  # a thread told to stop stops at its next MiB
    before = _bytes_read()
    await anyio.sleep(0.5)
    assert _bytes_read() - before < 16 * 2**20


async def _cached(folder: Path, jobs: list[CompileJob], **settings: object) -> None:
    async with Engine(arch=ARCH, cache_dir=folder, **settings) as engine:  # type: ignore[arg-type]
        results = await engine.compile_many(jobs)
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]


@pytest.fixture
def slow_entry(tmp_path: Path) -> Iterator[tuple[Path, CompileJob]]:
    """A cache folder with one job's entry whose dependency check takes minutes."""
    include = _headers(tmp_path, 1)
    [job] = _jobs(include, 1)
    anyio.run(_cached, tmp_path / "cache", [job])
    [(key, entry)] = _entries(tmp_path / "cache").values()
    DiskCache(tmp_path / "cache").put(key, _with_deps(entry, _big_header(tmp_path)))
    yield tmp_path / "cache", job


# -- (a) a dependency that became a FIFO -------------------------------------------------


async def test_of_twenty_hits_the_one_whose_dependency_became_a_fifo_is_recompiled(
    tmp_path: Path,
) -> None:
    include = _headers(tmp_path, 20)
    jobs = _jobs(include, 20)
    cache = tmp_path / "cache"
    await _cached(cache, jobs)
    # Job 7's entry also records a header that was an empty file then and is a FIFO
    # now (opening it for reading would wait for a writer forever).
    extra = tmp_path / "extra.h"
    extra.write_bytes(b"")
    past = time.time_ns() - 10 * 10**9
    os.utime(extra, ns=(past, past))
    key, entry = _entries(cache)["k7"]
    recorded = Dependency(str(extra), 0, past, hashlib.sha256(b"").hexdigest())
    DiskCache(cache).put(key, _with_deps(entry, [recorded]))
    extra.unlink()
    os.mkfifo(extra)
    started = time.monotonic()
    async with Engine(arch=ARCH, cache_dir=cache) as engine:
        results = await engine.compile_many(jobs)
        assert engine.cache is not None
        stats = engine.cache.stats.as_dict()
    took = time.monotonic() - started
    assert all(r.ok for r in results)
    assert [r.job.name for r in results if not r.cached] == ["k7"]
    assert (stats["disk_hits"], stats["stale"], stats["misses"]) == (19, 1, 1)
    assert took < 15, took  # one NVRTC compile and twenty reads: no wait for anything


# -- (b) a slow check ends with the job's timeout, or its caller's cancel ---------------


async def test_a_slow_check_ends_at_the_jobs_timeout_and_stops(
    slow_entry: tuple[Path, CompileJob],
) -> None:
    cache, job = slow_entry
    timed = dataclasses.replace(job, timeout=2.0)
    async with Engine(arch=ARCH, cache_dir=cache) as engine:
        started = time.monotonic()
        result = await engine.compile(timed)
        took = time.monotonic() - started
        assert engine.cache is not None
        stats = engine.cache.stats.as_dict()
        # Checked to the deadline (a real slow check), then compiled instead.
        assert result.ok and not result.cached, result.error
        assert 1.5 < took < 12, took
        assert (stats["disk_hits"], stats["stale"], stats["misses"]) == (0, 0, 1)
        await _nothing_reads_on()


async def test_a_slow_check_ends_with_its_callers_cancel_scope_and_stops(
    slow_entry: tuple[Path, CompileJob],
) -> None:
    cache, job = slow_entry  # no timeout: only the caller ends it (or 30 s)
    async with Engine(arch=ARCH, cache_dir=cache) as engine:
        started = time.monotonic()
        with anyio.move_on_after(1.0) as scope:
            await engine.compile(job)
        assert scope.cancelled_caught
        assert time.monotonic() - started < 10  # at the cancel, not the check's 30 s
        await _nothing_reads_on()
        assert engine.statistics().compiled == 0  # cancelled while it was looked up


async def test_what_was_checked_by_the_deadline_keeps_its_answer(tmp_path: Path) -> None:
    include = _headers(tmp_path, 6)
    jobs = _jobs(include, 6, timeout=2.0)
    cache = tmp_path / "cache"
    await _cached(cache, jobs)
    key, entry = _entries(cache)["k2"]
    DiskCache(cache).put(key, _with_deps(entry, _big_header(tmp_path)))
    async with Engine(arch=ARCH, cache_dir=cache) as engine:  # one chunk, one deadline
        results = await engine.compile_many(jobs)
        assert engine.cache is not None
        stats = engine.cache.stats.as_dict()
    assert all(r.ok for r in results)
    # The five cheap checks answered (hits); only the slow one is compiled.
    assert [r.job.name for r in results if not r.cached] == ["k2"]
    assert (stats["disk_hits"], stats["misses"]) == (5, 1)


# -- (c) slow entries cannot starve an unrelated job -------------------------------------

SLOW_ENTRIES = 41  # more than anyio's 40 shared threads


@needs_nvcc
@pytest.mark.parametrize("tier", ["disk", "remote"])
async def test_slow_entries_do_not_starve_an_unrelated_nvcc_job(
    tmp_path: Path, redis_server: RedisServer, tier: str
) -> None:
    include = _headers(tmp_path, SLOW_ENTRIES)
    jobs = _jobs(include, SLOW_ENTRIES)
    made = tmp_path / "made"
    await _cached(made, jobs, remote_cache=False)
    slow = _big_header(tmp_path)
    namespace = RedisCache.from_url(redis_server.url).namespace
    for key, entry in _entries(made).values():
        slowed = _with_deps(entry, slow)
        if tier == "disk":
            DiskCache(made).put(key, slowed)
        else:  # sealed with the team's key: genuine, only slow to check
            sealed = RemoteAuth(TEAM_KEY).seal(key, encode_entry(key, slowed))
            redis_server.set((namespace + key).encode(), sealed)
    folder = made if tier == "disk" else tmp_path / "empty"
    remote: str | Literal[False] = redis_server.url if tier == "remote" else False
    nvcc_jobs = [CompileJob(scale_kernel(f), backend="nvcc", name=f"n{f}") for f in (0.5, 0.25)]
    async with Engine(arch=ARCH, cache_dir=folder, remote_cache=remote) as engine:
        started = time.monotonic()
        assert (await engine.compile(nvcc_jobs[0])).ok
        alone = time.monotonic() - started
        async with anyio.create_task_group() as tg:
            reading = _bytes_read()
            for job in jobs:  # one call each: 41 lookups at once, each checking for minutes
                tg.start_soon(engine.compile, job)
            # Under way: the slow checks are reading their headers.
            await wait_until(lambda: _bytes_read() - reading > 8 * 2**20)
            started, read = time.monotonic(), _bytes_read()
            result = None
            with anyio.move_on_after(30):
                result = await engine.compile(nvcc_jobs[1])
            among = time.monotonic() - started
            checked = _bytes_read() - read
            tg.cancel_scope.cancel()
        assert result is not None, "the nvcc job waited 30 s"
        assert result.ok and not result.cached, result.error
        # About its own time (the checks share the CPU), not the lookups' 30 s.
        assert among < 3 * alone + 3, (among, alone)
        assert checked > 32 * 2**20  # the slow checks were reading all the while
        await _nothing_reads_on()
