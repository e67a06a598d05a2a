"""A cache you can trust and share, on the real compilers: headers outside the toolkit
are dependencies (edited: a miss; touched: a hit; deleted: a miss), job names split no
key they cannot change, and a remote tier on a real redis-server that may die, stall or
lie without costing a compile."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import anyio
import pytest

from asynccomp import CompileError, CompileJob, Engine
from asynccomp.cache import CacheAuthWarning, RedisCache, RemoteCacheWarning

from .kernels import ARCH, needs_nvcc, scale_kernel
from .redis_server import RedisServer, free_port, redis_server, team_key

__all__ = ("redis_server", "team_key")

BACKENDS = ["nvrtc", pytest.param("nvcc", marks=needs_nvcc)]

USES_HEADER = """\
#include "factor.h"
extern "C" __global__ void scaled(float* x) { x[threadIdx.x] *= FACTOR; }
"""


def _job(include: Path, backend: str, name: str = "scaled") -> CompileJob:
    return CompileJob(USES_HEADER, name=name, backend=backend, options=[f"-I{include}"])


@pytest.mark.parametrize("backend", BACKENDS)
async def test_an_edited_header_is_a_miss_a_touched_one_a_hit_a_deleted_one_an_error(
    tmp_path: Path, backend: str
) -> None:
    include = tmp_path / "include"
    include.mkdir()
    header = include / "factor.h"
    header.write_text("#define FACTOR 2.0f\n")
    job = _job(include, backend)
    async with Engine(arch=ARCH, cache_dir=tmp_path / "cache") as engine:
        first = await engine.compile(job)
        assert first.ok and not first.cached, first.error
        assert (await engine.compile(job)).cached
        # Edited: a miss, new bytes (through the memory tier and, below, the disk tier).
        # (The same size, and mtimes in the past: a header modified after the compile
        # started is not trusted, and not cached.)
        old = header.stat().st_mtime_ns
        header.write_text("#define FACTOR 3.0f\n")
        os.utime(header, ns=(old - 10 * 10**9, old - 10 * 10**9))
        edited = await engine.compile(job)
        assert edited.ok and not edited.cached
        assert edited.binary != first.binary
        # Touched, not changed: still a hit.
        os.utime(header, ns=(old - 5 * 10**9, old - 5 * 10**9))
        touched = await engine.compile(job)
        assert touched.cached and touched.binary == edited.binary
        stats = engine.cache.stats.as_dict() if engine.cache else {}
    assert stats["stale"] == 1
    async with Engine(arch=ARCH, cache_dir=tmp_path / "cache") as engine:
        assert (await engine.compile(job)).cached  # from disk, dependencies checked
        header.unlink()
        gone = await engine.compile(job)
    assert not gone.cached and isinstance(gone.error, CompileError)
    assert "factor.h" in gone.log


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_header_rewritten_at_its_size_and_mtime_is_a_miss(
    tmp_path: Path, backend: str
) -> None:
    # What tar -x, rsync -t and cp -p make: other bytes, the same size, the mtime put
    # back exactly. Only the ctime (no user can set it) tells.
    include = tmp_path / "include"
    include.mkdir()
    header = include / "factor.h"
    header.write_text("#define FACTOR 2.0f\n")
    recorded = header.stat()
    os.utime(header, ns=(recorded.st_atime_ns, recorded.st_mtime_ns - 10 * 10**9))
    mtime = header.stat().st_mtime_ns
    job = _job(include, backend)
    async with Engine(arch=ARCH, cache_dir=tmp_path / "cache") as engine:
        first = await engine.compile(job)
        assert first.ok and not first.cached, first.error
        header.write_text("#define FACTOR 3.0f\n")
        os.utime(header, ns=(mtime, mtime))
        assert (header.stat().st_size, header.stat().st_mtime_ns) == (recorded.st_size, mtime)
        rewritten = await engine.compile(job)  # through the memory tier
        assert rewritten.ok and not rewritten.cached
        assert rewritten.binary != first.binary
    # Through the disk tier (it holds the rewritten header's entry): the first header
    # put back by a rename (a new inode), its mtime restored, is a miss too...
    (tmp_path / "other.h").write_text("#define FACTOR 2.0f\n")
    (tmp_path / "other.h").replace(header)
    os.utime(header, ns=(mtime, mtime))
    async with Engine(arch=ARCH, cache_dir=tmp_path / "cache") as engine:
        back = await engine.compile(job)
        assert back.ok and back.binary == first.binary
        # ...and so is the second one again, rewritten in place (the same inode).
        header.write_text("#define FACTOR 3.0f\n")
        os.utime(header, ns=(mtime, mtime))
        again = await engine.compile(job)
    assert again.ok and again.binary == rewritten.binary


async def test_a_header_that_appears_earlier_on_the_search_path_is_a_miss(tmp_path: Path) -> None:
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir()
    second_dir.mkdir()
    (second_dir / "factor.h").write_text("#define FACTOR 2.0f\n")
    job = CompileJob(USES_HEADER, name="k", options=[f"-I{first_dir}", f"-I{second_dir}"])
    async with Engine(arch=ARCH, cache_dir=tmp_path / "cache") as engine:
        before = await engine.compile(job)
        (first_dir / "factor.h").write_text("#define FACTOR 5.0f\n")  # now NVRTC finds this
        after = await engine.compile(job)
    assert before.ok and after.ok and not after.cached
    assert after.binary != before.binary


async def test_toolkit_headers_are_no_dependencies(tmp_path: Path) -> None:
    source = "#include <cuda/std/cstdint>\n" + scale_kernel()
    async with Engine(arch=ARCH, cache_dir=tmp_path / "cache") as engine:
        await engine.compile(CompileJob(source))
        assert engine.cache is not None
        [entry] = [e for e, _ in engine.cache.memory._entries.values()]
    assert entry.metadata["deps"] == []


@pytest.mark.parametrize("backend", BACKENDS)
async def test_identical_sources_under_different_names_compile_once(
    tmp_path: Path, backend: str
) -> None:
    jobs = [CompileJob(scale_kernel(), name=f"d{i}", backend=backend) for i in range(8)]
    async with Engine(arch=ARCH, cache_dir=False) as engine:
        results = await engine.compile_many(jobs)
        assert engine.statistics().compiled == 1
    # The bytes are what each name compiled alone gives: the name cannot reach them.
    async with Engine(arch=ARCH, cache=False) as engine:
        alone = await engine.compile_many(jobs[:2])
    assert {r.binary for r in results} == {alone[0].binary} == {alone[1].binary}
    assert [r.job for r in results] == jobs
    if backend == "nvcc":  # each result's command is its own job's
        assert all(f"{r.job.name}.cu" in r.command for r in results)


async def test_names_split_the_key_where_they_reach_the_output(tmp_path: Path) -> None:
    cases = [
        (scale_kernel(7.0), ["-lineinfo"]),  # line info names the file
        (scale_kernel(8.0) + "__device__ const char* where = __FILE__;\n", []),
    ]
    async with Engine(arch=ARCH, cache_dir=False) as engine:
        for source, options in cases:
            a, b = await engine.compile_many(
                [CompileJob(source, name=f"n{i}", options=options) for i in range(2)]
            )
            assert a.ok and b.ok
        stats = engine.statistics()
    assert stats.compiled == 4  # two names, two compiles, in both cases


async def test_a_hit_under_another_name_says_that_name_in_its_log(tmp_path: Path) -> None:
    source = 'extern "C" __global__ void k(float* x) { int unused = 1; x[0] = 1.f; }'
    async with Engine(arch=ARCH, cache_dir=tmp_path / "cache") as engine:
        alpha = await engine.compile(CompileJob(source, name="alpha"))
        beta = await engine.compile(CompileJob(source, name="beta"))
        gamma, delta = await engine.compile_many(
            [CompileJob(source + " ", name="gamma"), CompileJob(source + " ", name="delta")]
        )
    assert "alpha.cu(1): warning" in alpha.log
    assert beta.cached and "beta.cu(1): warning" in beta.log and "alpha.cu" not in beta.log
    assert "gamma.cu(1): warning" in gamma.log and "delta.cu(1): warning" in delta.log


# -- the remote tier ---------------------------------------------------------------------


async def test_a_remote_hit_on_another_machine(tmp_path: Path, redis_server: RedisServer) -> None:
    job = CompileJob(scale_kernel(11.0), name="shared")
    async with Engine(arch=ARCH, cache_dir=tmp_path / "a", remote_cache=redis_server.url) as a:
        compiled = await a.compile(job)
    assert compiled.ok and not compiled.cached
    assert any(k.startswith(b"asynccomp:") for k in redis_server.stored_keys())
    assert a.cache is not None and a.cache.stats.as_dict()["remote_stores"] == 1  # counted
    # "Another machine": an empty local cache, the same remote.
    async with Engine(arch=ARCH, cache_dir=tmp_path / "b", remote_cache=redis_server.url) as b:
        hit = await b.compile(job)
        stats = b.cache.stats.as_dict() if b.cache else {}
    assert hit.cached and hit.binary == compiled.binary
    assert (stats["remote_hits"], b.statistics().compiled) == (1, 0)
    ttl = redis_server.command("TTL", redis_server.stored_keys()[0])
    assert 0 < int(ttl[1:].strip()) <= 7 * 24 * 3600


async def test_a_damaged_remote_entry_is_a_miss(tmp_path: Path, redis_server: RedisServer) -> None:
    job = CompileJob(scale_kernel(12.0))
    async with Engine(arch=ARCH, cache_dir=tmp_path / "a", remote_cache=redis_server.url) as a:
        good = await a.compile(job)
    [key] = redis_server.stored_keys()
    stored = redis_server.get(key)
    assert stored is not None
    redis_server.set(key, stored[: len(stored) // 2] + b"tampered")
    # Damage cannot be told from forgery: the seal fails either way.
    with pytest.warns(CacheAuthWarning, match="1 entry .* failed authentication"):
        async with Engine(arch=ARCH, cache_dir=tmp_path / "b", remote_cache=redis_server.url) as b:
            again = await b.compile(job)
    assert again.ok and not again.cached and again.binary == good.binary
    assert b.cache is not None and b.cache.stats.forged == 1


async def test_entries_over_the_size_cap_stay_local(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    remote = RedisCache(port=redis_server.port, max_entry_bytes=100)
    async with Engine(arch=ARCH, cache_dir=tmp_path / "a", remote_cache=remote) as engine:
        assert (await engine.compile(CompileJob(scale_kernel(13.0)))).ok
    assert redis_server.stored_keys() == [] and remote.skipped == 1


async def test_a_remote_that_is_down_costs_no_compile(tmp_path: Path, team_key: str) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"  # nobody listens there
    jobs = [CompileJob(scale_kernel(20.0 + i)) for i in range(4)]
    with pytest.warns(RemoteCacheWarning, match="not usable"):
        async with Engine(arch=ARCH, cache_dir=tmp_path / "c", remote_cache=url) as engine:
            results = await engine.compile_many(jobs)
    assert all(r.ok for r in results)


async def test_a_remote_that_never_answers_stalls_nothing(tmp_path: Path, team_key: str) -> None:
    # A server that accepts connections and never says a word.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True).start()
    remote = RedisCache(port=listener.getsockname()[1], timeout=0.3)
    try:
        with pytest.warns(RemoteCacheWarning):
            async with Engine(arch=ARCH, cache_dir=tmp_path / "c", remote_cache=remote) as engine:
                started = time.monotonic()
                result = await engine.compile(CompileJob(scale_kernel(30.0)))
                took = time.monotonic() - started
        assert result.ok and took < 10  # one timeout of 0.3 s at most, then local-only
        assert remote.errors >= 1
    finally:
        listener.close()
        for sock in accepted:
            sock.close()


async def test_killing_the_remote_mid_sweep_costs_no_job(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    jobs = [CompileJob(scale_kernel(40.0 + i), name=f"k{i}") for i in range(12)]
    results = []
    with pytest.warns(RemoteCacheWarning):
        async with (
            Engine(
                arch=ARCH, nvrtc_workers=2, cache_dir=tmp_path / "c", remote_cache=redis_server.url
            ) as engine,
            engine.as_completed(jobs) as completed,
        ):
            async for result in completed:
                results.append(result)
                if len(results) == 3:
                    await anyio.to_thread.run_sync(redis_server.stop)
    assert len(results) == 12 and all(r.ok for r in results)
