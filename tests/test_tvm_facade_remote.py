"""The TVM facade and a remote cache setting it cannot use (a bad URL, no key, a refused
key file): one RemoteCacheWarning, never a failed build, and otherwise the facade as
usual: on the compile server by default (a real one, started by the facade without the
remote setting, which it would refuse at start), with a full engine in this process with
ASYNCCOMP_SERVER=off. Called as TVM calls it, through tvm_ffi's global function, and as
a Python function."""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

import asynccomp.tvm
from asynccomp import AsyncCompWarning
from asynccomp._scheduler import _limits
from asynccomp.backends import NvrtcBackend
from asynccomp.cache import (
    REMOTE_CACHE_ENV,
    REMOTE_CACHE_KEY_ENV,
    REMOTE_CACHE_KEY_FILE_ENV,
    RedisCache,
    RemoteCacheWarning,
    remote_cache_from_url,
)
from asynccomp.server import server_paths, status

from .kernels import ARCH, scale_kernel
from .redis_server import TEAM_KEY, RedisServer, redis_server
from .servers import server_folder, server_pid

__all__ = ("redis_server",)

ELF = b"\x7fELF"


def _hostile_password(folder: Path, env: pytest.MonkeyPatch) -> None:
    env.setenv(REMOTE_CACHE_ENV, "redis://:S3cr3tHead/T4ilPart@127.0.0.1:6379/0")
    env.setenv(REMOTE_CACHE_KEY_ENV, TEAM_KEY)


def _no_key(folder: Path, env: pytest.MonkeyPatch) -> None:
    env.setenv(REMOTE_CACHE_ENV, "redis://127.0.0.1:6379/0")


def _refused_key_file(folder: Path, env: pytest.MonkeyPatch) -> None:
    key = folder / "team.key"
    key.write_text(TEAM_KEY)
    key.chmod(0o644)
    env.setenv(REMOTE_CACHE_ENV, "redis://127.0.0.1:6379/0")
    env.setenv(REMOTE_CACHE_KEY_FILE_ENV, str(key))


BAD: dict[str, Callable[[Path, pytest.MonkeyPatch], None]] = {
    "a password a parser splits": _hostile_password,
    "no key": _no_key,
    "a key file others can read": _refused_key_file,
}


@pytest.fixture
def facade(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh facade engine, a private server folder (its servers stopped, the folder
    removed afterwards), a clean remote setting."""
    for name in (REMOTE_CACHE_ENV, REMOTE_CACHE_KEY_ENV, REMOTE_CACHE_KEY_FILE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ASYNCCOMP_ARCH", ARCH)
    asynccomp.tvm.shutdown()
    with server_folder() as folder:
        monkeypatch.setenv("ASYNCCOMP_SERVER_DIR", str(folder))
        try:
            yield folder
        finally:
            asynccomp.tvm.shutdown()  # before its server is stopped


def _server_mode(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    if mode == "default":
        monkeypatch.delenv("ASYNCCOMP_SERVER", raising=False)  # auto, the default
    else:
        monkeypatch.setenv("ASYNCCOMP_SERVER", "off")


def _compile_twice() -> tuple[bytes, bytes, list[warnings.WarningMessage]]:
    """The same kernel as TVM's C++ calls it, then through the Python function."""
    import tvm_ffi

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asynccomp.tvm.register()
        callback = tvm_ffi.get_global_func(asynccomp.tvm.CALLBACK_NAME)
        first = bytes(callback(scale_kernel(11.0)))
        second = bytes(asynccomp.tvm.compile_cuda(scale_kernel(11.0), arch=ARCH))
    return first, second, [w for w in caught if issubclass(w.category, AsyncCompWarning)]


@pytest.mark.parametrize("mode", ["default", "off"])
@pytest.mark.parametrize("bad", BAD)
def test_a_remote_setting_the_facade_cannot_use_is_one_warning_and_no_remote_tier(
    facade: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, bad: str
) -> None:
    _server_mode(monkeypatch, mode)
    BAD[bad](tmp_path, monkeypatch)
    first, second, said = _compile_twice()
    assert first[:4] == ELF and first == second
    assert [w.category for w in said] == [RemoteCacheWarning], [str(w.message) for w in said]
    message = str(said[0].message)
    assert "ASYNCCOMP_REMOTE_CACHE is not used" in message
    assert "S3cr3tHead" not in message and "T4ilPart" not in message
    engine = asynccomp.tvm.engine()
    stats = engine.statistics()
    assert (stats.compiled, stats.cache_hits) == (1, 1)  # the second was a hit
    if mode == "off":
        # A full engine of this process's (not the one worker of a fallback), no remote.
        assert engine.where == "in process"
        assert engine.engine.nvrtc_workers == _limits.worker_count(
            "nvrtc_workers", None, NvrtcBackend.worker_memory, "NVRTC worker"
        )
        assert engine.cache is not None and engine.cache.remote is None
        return
    # On the compile server the facade started, which has no remote tier and was not
    # given the setting (nor the key) at all.
    paths = server_paths(facade)
    pid = server_pid(paths)
    assert pid is not None and engine.where == f"on the compile server (pid {pid})"
    assert status(paths.socket)["settings"]["remote_cache"] is None
    environ = psutil.Process(pid).environ()
    assert not {REMOTE_CACHE_ENV, REMOTE_CACHE_KEY_ENV, REMOTE_CACHE_KEY_FILE_ENV} & set(environ)


def test_a_usable_remote_setting_goes_to_the_server_the_facade_starts(
    facade: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _server_mode(monkeypatch, "default")
    monkeypatch.setenv(REMOTE_CACHE_ENV, redis_server.url)  # its key is in the environment
    first, second, said = _compile_twice()
    assert first[:4] == ELF and first == second and said == []
    paths = server_paths(facade)
    assert (
        status(paths.socket)["settings"]["remote_cache"] == f"redis 127.0.0.1:{redis_server.port}/0"
    )
    assert os.environ[REMOTE_CACHE_KEY_ENV] == TEAM_KEY
    # The server writes to Redis from a task of its own, after it has answered: wait for
    # that write, which its statistics count, then look in Redis.
    store = remote_cache_from_url(redis_server.url)
    assert isinstance(store, RedisCache)
    _wait_remote_store(paths.socket, store)
    assert len(redis_server.stored_keys()) >= 1  # the server wrote it there


def _wait_remote_store(socket: Path, store: RedisCache) -> None:
    """Until the server at ``socket`` has stored an entry in ``store``. Once the writer
    runs, a write takes at most the store's own timeouts (connecting, then the request);
    60 s more for the writer's turn (a thread that seals the entry) on a loaded machine."""
    within = 60.0 + store.connect_timeout + store.timeout
    deadline = time.monotonic() + within
    while (stats := status(socket)["cache_stats"])["remote_stores"] < 1:
        assert time.monotonic() < deadline, f"no write to Redis within {within} s: {stats}"
        time.sleep(0.05)


# -- the engine setting the facade uses ---------------------------------------------------


def test_on_a_server_remote_cache_false_is_the_one_remote_setting_taken() -> None:
    from asynccomp import Engine, InvalidJob

    Engine(arch=ARCH, server="auto", remote_cache=False)  # taken
    with pytest.raises(InvalidJob, match="remote_cache belong to the server"):
        Engine(arch=ARCH, server="auto", remote_cache="redis://127.0.0.1:6379/0")


async def test_asking_a_server_with_a_remote_tier_for_none_is_one_warning(
    facade: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asynccomp import CompileJob, Engine

    from .servers import running_server

    monkeypatch.setenv(REMOTE_CACHE_ENV, redis_server.url)
    with running_server(facade) as (_, paths):  # a server of the team's remote cache
        with pytest.warns(AsyncCompWarning, match="asks for no remote cache") as caught:
            async with Engine(arch=ARCH, server=str(paths.socket), remote_cache=False) as e:
                assert (await e.compile(CompileJob(scale_kernel(12.0)))).ok
        assert len(caught) == 1 and f"127.0.0.1:{redis_server.port}" in str(caught[0].message)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the same setting as the server's: nothing to say
            async with Engine(arch=ARCH, server=str(paths.socket)) as e:
                assert (await e.compile(CompileJob(scale_kernel(12.5)))).ok


def test_a_server_holding_a_replaced_key_is_not_used_by_the_facade(
    facade: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asynccomp.cache import RemoteAuth

    from .servers import running_server

    _server_mode(monkeypatch, "default")
    monkeypatch.setenv(REMOTE_CACHE_ENV, redis_server.url)
    new_key = "the team's new key, after a leak: 42"
    with running_server(facade):  # started with the team's (old) key
        monkeypatch.setenv(REMOTE_CACHE_KEY_ENV, new_key)
        first, second, said = _compile_twice()
        engine = asynccomp.tvm.engine()
        assert first[:4] == ELF and first == second
        assert len(said) == 1, [str(w.message) for w in said]
        assert RemoteAuth(TEAM_KEY).key_id in str(said[0].message)
        # In this process, under the client's own key.
        assert engine.where == "in process"
        assert engine.cache is not None and engine.cache.remote is not None
        assert engine.cache.remote.auth.key_id == RemoteAuth(new_key).key_id
        asynccomp.tvm.shutdown()  # before its server is stopped
