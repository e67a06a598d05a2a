"""The remote tier's settings: a bad URL or value is refused when the store is made, with
an InvalidJob naming it (never one failing request after another); a bad
$ASYNCCOMP_REMOTE_CACHE can be turned into "no remote tier" and one warning; and the
Redis password is shown nowhere: not in errors, warnings, logs, repr, `asynccomp
doctor` or `asynccomp cache stats` (run as a user runs them)."""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from asynccomp import CompileJob, Engine, InvalidJob
from asynccomp.cache import (
    REMOTE_CACHE_ENV,
    RedisCache,
    RemoteAuth,
    RemoteCacheWarning,
    remote_cache_from_environment,
    remote_cache_from_url,
)

from .kernels import ARCH, scale_kernel
from .redis_server import TEAM_KEY, RedisServer, free_port, team_key

__all__ = ("team_key",)

REPO = Path(__file__).resolve().parent.parent
PASSWORD = "pa55-w0rd-that-must-not-leak"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("redis://[::1", "not a URL that can be used: Invalid IPv6 URL"),
        (f"redis://:{PASSWORD}@[::1", "not a URL that can be used"),
        ("redis://localhost:0/0", "port 0: must be a port number, 1 to 65535"),
        ("redis://localhost:70000/0", "not a URL that can be used: Port out of range"),
        ("redis://localhost:port/0", "not a URL that can be used"),
        ("redis://localhost/x", "db='x': must be a database number"),
        ("redis://localhost/0?ttl=-5", "ttl -5: must be a whole number of seconds >= 1"),
        ("redis://localhost/0?ttl=0", "ttl 0: must be"),
        ("redis://localhost/0?ttl=1.5", "ttl='1.5': must be"),
        ("redis://localhost/0?ttl=", "ttl='': must be"),
        ("redis://localhost/0?timeout=0", "timeout 0.0: must be a finite number of seconds > 0"),
        ("redis://localhost/0?timeout=nan", "timeout nan: must be"),
        ("redis://localhost/0?timeout=inf", "timeout inf: must be"),
        ("redis://localhost/0?timeout=-1", "timeout -1.0: must be"),
        ("redis://localhost/0?timeout=soon", "timeout='soon': must be"),
        ("redis://localhost/0?max_entry=0", "max_entry 0: must be a number of bytes"),
        ("redis://localhost/0?max_entry=1073741824", "max_entry 1073741824: must be"),
        (f"redis://localhost/0?password={PASSWORD}", "unknown parameters: password"),
        (f"redis://{PASSWORD}@localhost/0", "a user name without a password"),
        ("unix://", "no socket path"),
        ("unix://host/tmp/redis.sock", "a unix:// URL names a path"),
        ("unix:///tmp/redis.sock?db=-1", "db -1: must be a database number >= 0"),
        (f"memcached://:{PASSWORD}@localhost", "unknown store"),
    ],
)
def test_a_bad_url_is_refused_naming_the_problem_and_hiding_the_password(
    team_key: str, url: str, problem: str
) -> None:
    with pytest.raises(InvalidJob, match=problem.replace("?", r"\?").replace("(", r"\(")) as e:
        remote_cache_from_url(url)
    assert e.value.field == "remote_cache"
    assert PASSWORD not in str(e.value) and PASSWORD not in repr(e.value.value)
    # Engine(remote_cache=...) refuses it the same way, at construction.
    with pytest.raises(InvalidJob, match="remote_cache"):
        Engine(arch=ARCH, remote_cache=url)


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"port": 0}, "port"),
        ({"port": 65536}, "port"),
        ({"port": True}, "port"),
        ({"db": -1}, "db"),
        ({"ttl": -5}, "ttl"),
        ({"ttl": 0}, "ttl"),
        ({"ttl": 2.5}, "ttl"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": math.nan}, "timeout"),
        ({"timeout": math.inf}, "timeout"),
        ({"connect_timeout": -1.0}, "connect_timeout"),
        ({"max_entry_bytes": 0}, "max_entry_bytes"),
        ({"retry_after": math.nan}, "retry_after"),
        ({"retry_after": -1}, "retry_after"),
        ({"host": ""}, "host"),
        ({"unix_socket": ""}, "unix_socket"),
        ({"username": "alice"}, "username"),
    ],
)
def test_bad_constructor_arguments_are_refused_naming_the_field(
    team_key: str, settings: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidJob) as raised:
        RedisCache(**settings)
    assert raised.value.field == field


def test_good_urls_still_make_stores(team_key: str) -> None:
    store = remote_cache_from_url(
        f"rediss://alice:{PASSWORD}@cache.example:6380/3?ttl=60&timeout=0.25&max_entry=4096"
    )
    assert isinstance(store, RedisCache)
    assert (store.host, store.port, store.db, store.tls) == ("cache.example", 6380, 3, True)
    assert (store.ttl, store.timeout, store.max_entry_bytes) == (60, 0.25, 4096)
    assert (store.username, store.password) == ("alice", PASSWORD)
    assert repr(store) == (
        f"RedisCache('rediss://alice:***@cache.example:6380/3', key_id="
        f"'{RemoteAuth(TEAM_KEY).key_id}')"
    )
    ipv6 = remote_cache_from_url("redis://[::1]:6379/0")
    assert isinstance(ipv6, RedisCache) and ipv6.host == "::1"
    assert "[::1]:6379" in repr(ipv6)
    unix = remote_cache_from_url(f"unix://:{PASSWORD}@/run/redis.sock?db=2")
    assert isinstance(unix, RedisCache)
    assert (unix.unix_socket, unix.db, unix.password) == ("/run/redis.sock", 2, PASSWORD)
    assert PASSWORD not in repr(unix) + str(unix.describe())


def test_a_bad_environment_is_no_remote_tier_and_one_warning(
    team_key: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(REMOTE_CACHE_ENV, f"redis://:{PASSWORD}@localhost:0/0")
    with pytest.raises(InvalidJob, match="port 0"):
        remote_cache_from_environment(strict=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        remote = remote_cache_from_environment(strict=False)
    assert remote is None
    assert [w.category for w in caught] == [RemoteCacheWarning]
    message = str(caught[0].message)
    assert "ASYNCCOMP_REMOTE_CACHE" in message and "port 0" in message
    assert PASSWORD not in message
    # What a facade (TVM) does with it: compiles go on with the local tiers.
    with pytest.raises(InvalidJob):
        Engine(arch=ARCH)  # the engine's own default stays strict
    monkeypatch.delenv(REMOTE_CACHE_ENV)
    assert remote_cache_from_environment(strict=False) is None  # unset: nothing to say


async def test_a_bad_environment_costs_a_facade_no_compile(
    team_key: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(REMOTE_CACHE_ENV, "redis://[::1")
    with pytest.warns(RemoteCacheWarning, match="not used"):
        remote = remote_cache_from_environment(strict=False)
    async with Engine(arch=ARCH, cache_dir=tmp_path, remote_cache=remote or False) as engine:
        assert (await engine.compile(CompileJob(scale_kernel(3.0)))).ok


async def test_the_password_is_used_and_never_shown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisServer(tmp_path, password=PASSWORD)
    try:
        job = CompileJob(scale_kernel(71.0), name="pw")
        async with Engine(arch=ARCH, cache_dir=tmp_path / "a", remote_cache=server.url) as a:
            assert (await a.compile(job)).ok
            assert a.cache is not None and PASSWORD not in repr(a.cache.remote)
        assert len(server.stored_keys()) == 1  # it logged in and wrote
        # A wrong password: the store is not usable; neither password is shown.
        wrong = server.url.replace(PASSWORD, PASSWORD + "-wrong")
        caplog.set_level(logging.WARNING, logger="asynccomp.cache")
        with pytest.warns(RemoteCacheWarning, match="not usable") as caught:
            async with Engine(arch=ARCH, cache_dir=tmp_path / "b", remote_cache=wrong) as b:
                assert (await b.compile(job)).ok
        shown = " ".join(str(w.message) for w in caught) + caplog.text
        assert "WRONGPASS" in shown or "invalid password" in shown
        assert PASSWORD not in shown
    finally:
        server.stop()


@pytest.mark.parametrize("user", ["", "alice"])
def test_doctor_and_cache_stats_hide_the_password(tmp_path: Path, user: str) -> None:
    url = f"redis://{user}:{PASSWORD}@127.0.0.1:{free_port()}/0"
    shown = f"redis://{user}:***@127.0.0.1:"
    env = {**os.environ, "ASYNCCOMP_CACHE_DIR": str(tmp_path), REMOTE_CACHE_ENV: url}
    env["ASYNCCOMP_REMOTE_CACHE_KEY"] = TEAM_KEY

    def run(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "asynccomp", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert PASSWORD not in proc.stdout + proc.stderr
        return proc.stdout

    assert shown in run("doctor")
    assert json.loads(run("doctor", "--json"))["remote_cache"].startswith(shown)
    assert shown in run("cache", "stats")
    remote = json.loads(run("cache", "stats", "--json"))["remote"]
    assert remote["url"].startswith(shown) and remote["reachable"] is False
