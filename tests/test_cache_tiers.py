"""The tiered cache asks its tiers in order and owns what happens between them: a hit
of a slower tier is kept in the faster ones, an entry whose dependencies changed falls
through to the slower tiers, and every key looked up is one tier's hit or a miss. A tier
of one's own (here a store in a dict, as an S3 bucket would be a module of its own)
takes its place beside the memory and disk tiers; real files for the dependencies, real
NVRTC compiles for the engine."""

from __future__ import annotations

import hashlib
import os
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest

import asynccomp.cache._tiered as tiered_module
from asynccomp import CompileJob, Engine
from asynccomp.cache import CacheEntry, CacheKey, CacheStats, DiskCache, MemoryCache
from asynccomp.cache._compile_key import KeyMaker
from asynccomp.cache._deps import Dependency
from asynccomp.cache._lookups import Lookups
from asynccomp.cache._tiered import TieredCache
from asynccomp.cache._tiers import DiskTier, MemoryTier, Tier, TierKind

from .kernels import ARCH
from .redis_server import team_key

__all__ = ("team_key",)

KEY = "cd" * 32


class DictTier(Tier):
    """A store of one's own behind the local tiers: what it was asked, what it holds."""

    kind: ClassVar[TierKind] = "remote"

    def __init__(self) -> None:
        self.entries: dict[str, CacheEntry] = {}
        self.asked: list[list[str]] = []

    async def get_many(
        self, keys: Sequence[str], pools: Lookups, deadline: float
    ) -> list[CacheEntry | None]:
        self.asked.append(list(keys))
        return [self.entries.get(key) for key in keys]

    async def put_many(self, entries: Sequence[tuple[str, CacheEntry]]) -> None:
        self.entries.update(entries)


def _cache_of(folder: Path, *tiers: Tier) -> tuple[TieredCache, MemoryCache, DiskCache]:
    memory, disk = MemoryCache(2**20), DiskCache(folder)
    cache = TieredCache(
        [MemoryTier(memory), DiskTier(disk), *tiers],
        keys=KeyMaker(lambda backend: (backend, ())),
        roots=[],
        stats=CacheStats(),
    )
    return cache, memory, disk


def _entry(binary: bytes, deps: Sequence[Dependency] = ()) -> CacheEntry:
    metadata = {"filename": "k.cu", "deps": [d.to_json() for d in deps]}
    return CacheEntry(binary, "", metadata)


def _header(folder: Path, text: bytes) -> Dependency:
    """A header written in the past, recorded as it is now."""
    header = folder / "factor.h"
    header.write_bytes(text)
    past = time.time_ns() - 10 * 10**9
    os.utime(header, ns=(past, past))
    st = header.stat()
    digest = hashlib.sha256(text).hexdigest()
    return Dependency(str(header), st.st_size, st.st_mtime_ns, digest, st.st_ctime_ns, st.st_ino)


def _lookups(stats: CacheStats) -> int:
    counts = stats.as_dict()
    return sum(counts[f"{kind}_hits"] for kind in ("memory", "disk", "remote")) + counts["misses"]


async def test_a_hit_of_a_tier_of_ones_own_is_kept_in_the_faster_tiers(tmp_path: Path) -> None:
    store = DictTier()
    cache, memory, disk = _cache_of(tmp_path / "cache", store)
    store.entries[KEY] = _entry(b"from the store")
    [hit] = await cache.lookup([CacheKey(KEY)])
    assert hit is not None and hit.output.binary == b"from the store"
    assert KEY in memory and disk.get(KEY) == store.entries[KEY]
    [again] = await cache.lookup([CacheKey(KEY)])
    assert again is not None and store.asked == [[KEY]]  # answered by memory
    counts = cache.stats.as_dict()
    assert (counts["remote_hits"], counts["memory_hits"], counts["misses"]) == (1, 1, 0)


async def test_a_store_writes_every_tier_and_the_fastest_before_the_block(tmp_path: Path) -> None:
    from asynccomp.backends import BackendOutput, PreparedCompile

    store = DictTier()
    cache, memory, disk = _cache_of(tmp_path / "cache", store)
    prepared = PreparedCompile("nvrtc", "cubin", ARCH, "__global__ void k() {}", "k.cu", ())
    key = cache.key(prepared)
    output = BackendOutput("ok", b"\x7fELF", "", dependencies=())
    async with cache.store(
        key, prepared, output, elapsed=0.1, started_ns=time.time_ns(), quote_folder=os.getcwd
    ):
        assert key.digest in memory  # an identical request that comes now is a hit
        assert disk.get(key.digest) is None and not store.entries
    assert disk.get(key.digest) is not None and key.digest in store.entries
    assert cache.stats.as_dict()["stores"] == 1


async def test_an_entry_whose_header_changed_falls_through_to_a_slower_tiers_fresh_one(
    tmp_path: Path,
) -> None:
    cache, memory, disk = _cache_of(tmp_path / "cache")
    old = _header(tmp_path, b"#define FACTOR 2.0f\n")
    memory.put(KEY, _entry(b"old", [old]))
    new = _header(tmp_path, b"#define FACTOR 3.0f\n")  # same size, another digest
    disk.put(KEY, _entry(b"new", [new]))  # another process compiled it since
    [hit] = await cache.lookup([CacheKey(KEY)])
    assert hit is not None and hit.output.binary == b"new"
    counts = cache.stats.as_dict()
    assert (counts["stale"], counts["disk_hits"], counts["memory_hits"]) == (1, 1, 0)
    again, _ = await cache.lookup([CacheKey(KEY), CacheKey("ef" * 32)])
    assert again is not None and again.output.binary == b"new"  # kept in memory
    assert _lookups(cache.stats) == 3 and cache.stats.as_dict()["misses"] == 1


async def test_an_engine_answers_from_the_disk_entry_another_engine_wrote_after_an_edit(
    tmp_path: Path,
) -> None:
    include = tmp_path / "include"
    include.mkdir()
    header = include / "factor.h"
    job = CompileJob(
        '#include "factor.h"\n'
        'extern "C" __global__ void scaled(float* x) { x[threadIdx.x] *= FACTOR; }\n',
        name="scaled",
        options=[f"-I{include}"],
    )

    def edit(text: str, age: int) -> None:
        header.write_text(text)
        past = time.time_ns() - age * 10**9
        os.utime(header, ns=(past, past))

    edit("#define FACTOR 2.0f\n", 20)
    cache = tmp_path / "cache"
    # Threads: two engines of one process with NVRTC worker processes collide on their
    # workers' folder names (a bug of the pool's, reported apart).
    async with Engine(arch=ARCH, cache_dir=cache, nvrtc_mode="threads") as a:
        first = await a.compile(job)
        assert first.ok and not first.cached, first.error
        edit("#define FACTOR 3.0f\n", 10)
        async with Engine(arch=ARCH, cache_dir=cache, nvrtc_mode="threads") as b:
            edited = await b.compile(job)  # its entry replaces a's on disk
        assert edited.ok and not edited.cached, edited.error
        assert edited.binary != first.binary
        again = await a.compile(job)  # a's memory entry is stale; the disk's is not
        assert again.cached and again.binary == edited.binary
        assert a.cache is not None
        counts = a.cache.stats.as_dict()
    assert (counts["stale"], counts["disk_hits"], counts["misses"]) == (1, 1, 1)
    assert a.statistics().compiled == 1


async def test_a_failure_to_record_a_compile_costs_its_entry_not_its_result(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug in recording")

    monkeypatch.setattr(tiered_module, "record", broken)
    job = CompileJob('extern "C" __global__ void k(float* x) { x[0] = 1.0f; }', name="k")
    async with Engine(arch=ARCH, cache_dir=False, nvrtc_mode="threads") as engine:
        first = await engine.compile(job)
        second = await engine.compile(job)
        assert engine.cache is not None
        stores = engine.cache.stats.as_dict()["stores"]
    assert first.ok and second.ok and not second.cached, (first.error, second.error)
    assert stores == 0 and "recording 'k.cu' for the cache failed" in caplog.text


@pytest.mark.parametrize("call", ["get_many", "put_many"])
async def test_a_tier_that_raises_costs_no_result(
    call: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """N6: a tier that raises (a bug in a tier, a store answering what nobody expected)
    on its reads, backfills or writes (the slower tiers are written after the requests
    are answered) is a miss or a write not kept: every result of the call arrives, the
    failure is counted and logged once."""

    async def broken(self: DiskTier, *args: object, **kwargs: object) -> object:
        raise RuntimeError(f"a bug in the disk tier's {call}")

    jobs = [CompileJob(f'extern "C" __global__ void k{i}() {{}}', name=f"k{i}") for i in range(3)]
    async with Engine(arch=ARCH, cache_dir=tmp_path / "cache", nvrtc_mode="threads") as engine:
        monkeypatch.setattr(DiskTier, call, broken)
        first = await engine.compile_many(jobs)
        again = await engine.compile_many(jobs)  # memory hits: no tier is needed
        cache = engine.cache
        assert cache is not None
        errors = cache.stats.tier_errors
    assert all(r.ok for r in first + again), [str(r.error) for r in first + again]
    assert errors >= 1
    logged = [r for r in caplog.records if f"disk tier's {call}" in r.getMessage()]
    assert len(logged) == 1, [r.getMessage() for r in caplog.records]


async def test_a_remote_that_answers_garbage_or_stalls_costs_no_result(
    tmp_path: Path, team_key: str
) -> None:
    """A real misbehaving remote: a TCP server at the Redis URL that answers nonsense to
    half the connections and nothing at all to the others. Every result arrives."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    connections: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            connections.append(conn)
            if len(connections) % 2:
                threading.Thread(target=_answer_garbage, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    jobs = [CompileJob(f'extern "C" __global__ void g{i}() {{}}', name=f"g{i}") for i in range(4)]
    try:
        with pytest.warns(Warning, match="not usable"):
            async with Engine(
                arch=ARCH,
                cache_dir=tmp_path / "cache",
                remote_cache=f"redis://127.0.0.1:{port}",
                nvrtc_mode="threads",
            ) as engine:
                results = await engine.compile_many(jobs)
    finally:
        listener.close()
        for conn in connections:
            conn.close()
    assert all(r.ok for r in results), [str(r.error) for r in results]


def _answer_garbage(conn: socket.socket) -> None:
    try:
        while conn.recv(65536):
            conn.sendall(b"*2\r\n$-9\r\n:what\r\n")
    except OSError:
        pass
