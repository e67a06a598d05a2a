"""What others write at the remote tier's names costs a lookup little, on a real
redis-server: a value over ``max_entry`` is never downloaded (the server's own count of
bytes sent says so), one that is not sealed is judged by its first bytes, and either name
is then not asked for again for a while; a genuine entry written there ends that. Real
NVRTC compiles for the engine's view."""

from __future__ import annotations

from pathlib import Path

import pytest

from asynccomp import CompileJob, Engine, find_toolkit
from asynccomp.cache import CacheAuthWarning, CacheKey, RedisCache, RemoteAuth, open_cache
from asynccomp.cache._auth import SEAL_MAGIC

from .kernels import ARCH, scale_kernel
from .redis_server import TEAM_KEY, RedisServer, redis_server

__all__ = ("redis_server",)

BOUND = 2**20  # max_entry for these tests
HUGE = 8 * BOUND  # what someone wrote: sealed-looking, eight times the bound
KEY = "ab" * 32


def _sent(server: RedisServer) -> tuple[int, int]:
    """(bytes the Redis sent its clients, key lookups it made) until now."""
    stats = server.info("stats")
    looked = int(stats["keyspace_hits"]) + int(stats["keyspace_misses"])
    return int(stats["total_net_output_bytes"]), looked


def _store(server: RedisServer) -> RedisCache:
    store = RedisCache.from_url(f"{server.url}?max_entry={BOUND}")
    assert isinstance(store, RedisCache)
    return store


async def test_a_value_over_the_bound_is_a_miss_never_downloaded_nor_asked_again(
    redis_server: RedisServer,
) -> None:
    store = _store(redis_server)
    redis_server.set((store.namespace + KEY).encode(), SEAL_MAGIC + b"\0" * HUGE)
    try:
        before = _sent(redis_server)
        assert await store.get_many([KEY]) == [None]
        first = _sent(redis_server)
        assert await store.get_many([KEY]) == [None]
        second = _sent(redis_server)
    finally:
        await store.aclose()
    # INFO's own replies are in the byte count: a few KiB, not the value's 8 MiB.
    assert first[0] - before[0] < BOUND // 16, first[0] - before[0]
    assert second[1] == first[1]  # the second lookup made no request about it
    assert store.errors == 0 and store.available


async def test_a_value_that_is_not_sealed_is_forged_once_then_not_asked_for(
    redis_server: RedisServer,
) -> None:
    store = _store(redis_server)
    cache = open_cache(find_toolkit(), folder=None, memory_bytes=2**20, remote=store)
    redis_server.set((store.namespace + KEY).encode(), b"\0" * (BOUND // 2))
    try:
        before = _sent(redis_server)
        with pytest.warns(CacheAuthWarning):
            assert await cache.lookup([CacheKey(KEY)]) == [None]
        first = _sent(redis_server)
        assert await cache.lookup([CacheKey(KEY)]) == [None]
        second = _sent(redis_server)
        assert cache.stats.forged == 1
        # Judged by its first bytes: half the bound was not sent.
        assert first[0] - before[0] < BOUND // 16, first[0] - before[0]
        assert second[1] == first[1]
        # A genuine entry written there by this machine is read at once.
        sealed = RemoteAuth(TEAM_KEY).seal(KEY, b"an entry")
        await store.put(KEY, sealed)
        assert await store.get_many([KEY]) == [sealed]
    finally:
        await cache.aclose()  # the store's too


async def test_an_engine_whose_entry_was_replaced_by_a_huge_value_compiles_without_it(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    job = CompileJob(scale_kernel(71.0), name="victim")
    url = f"{redis_server.url}?max_entry={BOUND}"
    async with Engine(arch=ARCH, cache_dir=tmp_path / "a", remote_cache=url) as a:
        genuine = await a.compile(job)
    [name] = redis_server.stored_keys()
    redis_server.set(name, SEAL_MAGIC + b"\0" * HUGE)  # no team key needed to write
    before = _sent(redis_server)
    async with Engine(arch=ARCH, cache_dir=tmp_path / "b", remote_cache=url) as b:
        result = await b.compile(job)
    assert result.ok and not result.cached and result.binary == genuine.binary
    sent = _sent(redis_server)[0] - before[0]
    assert sent < BOUND // 16, sent


async def test_the_doctors_probe_reads_nothing_written_at_its_name(
    redis_server: RedisServer,
) -> None:
    """``asynccomp doctor``'s read (a name no entry has) brings back no value, whatever
    someone wrote there."""
    store = _store(redis_server)
    redis_server.set((store.namespace + "probe").encode(), b"\0" * HUGE)
    try:
        before = _sent(redis_server)
        assert await store.probe() is None
        after = _sent(redis_server)
    finally:
        await store.aclose()
    assert after[0] - before[0] < BOUND // 16, after[0] - before[0]
