"""A compile server keeps the remote-cache key it started with; a client holding another
one (the README's answer to a leaked key is to replace it) is refused there, naming both
key ids and what to do, and never gets an entry verified under the old key. Real
redis-server, a real server process, real NVRTC."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from asynccomp import CompileJob, Engine, ServerError
from asynccomp.cache import REMOTE_CACHE_ENV, REMOTE_CACHE_KEY_ENV, RemoteAuth

from .kernels import ARCH, scale_kernel
from .redis_server import TEAM_KEY, RedisServer, redis_server
from .servers import running_server, server_folder

__all__ = ("redis_server",)

NEW_KEY = "the team's new key, after a leak: 42"


@pytest.fixture
def server_dir() -> Iterator[Path]:
    with server_folder() as folder:
        yield folder


async def test_a_client_with_another_key_is_refused_by_a_server_keeping_the_old_one(
    server_dir: Path, tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = CompileJob(scale_kernel(83.0), name="leaked")
    monkeypatch.setenv(REMOTE_CACHE_ENV, redis_server.url)
    with running_server(server_dir) as (process, paths):  # started with the team's key
        async with Engine(arch=ARCH, server=str(paths.socket)) as engine:
            assert (await engine.compile(job)).ok  # sealed with the old key, in the Redis
        monkeypatch.setenv(REMOTE_CACHE_KEY_ENV, NEW_KEY)  # the key is replaced here
        with pytest.raises(ServerError) as refused:
            async with Engine(arch=ARCH, server=str(paths.socket)) as engine:
                await engine.compile(job)
        said = str(refused.value)
        old, new = RemoteAuth(TEAM_KEY).key_id, RemoteAuth(NEW_KEY).key_id
        assert f"pid {process.pid}" in said and old in said and new in said, said
        assert "asynccomp serve --stop" in said
        assert TEAM_KEY not in said and NEW_KEY not in said
    # A server started with the new key (and an empty disk tier, as after `asynccomp
    # cache clear`): it answers, and not with the old key's entries.
    monkeypatch.setenv("ASYNCCOMP_CACHE_DIR", str(tmp_path / "cleared"))
    with running_server(server_dir) as (_, paths), warnings.catch_warnings():
        warnings.simplefilter("error")  # the same key, the same tier: nothing to say
        async with Engine(arch=ARCH, server=str(paths.socket)) as engine:
            result = await engine.compile(job)
    assert result.ok and not result.cached
