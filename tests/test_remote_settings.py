"""The remote tier's settings: a bad URL or value is refused when the store is made, with
an InvalidJob naming it (never one failing request after another); a bad
$ASYNCCOMP_REMOTE_CACHE can be turned into "no remote tier" and one warning; and the
Redis password is shown nowhere: not in errors, warnings, logs, repr, `asynccomp
doctor` or `asynccomp cache stats` (run as a user runs them)."""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import pickle
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
from asynccomp.cache._remote import redacted_url

from .kernels import ARCH, scale_kernel
from .processes import run_cli
from .redis_server import TEAM_KEY, RedisServer, free_port, team_key

__all__ = ("team_key",)

PASSWORD = "pa55-w0rd-that-must-not-leak"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("redis://[::1", "not a URL that can be used: it does not parse"),
        (f"redis://:{PASSWORD}@[::1", "not a URL that can be used"),
        ("redis://localhost:0/0", "port 0: must be a port number, 1 to 65535"),
        ("redis://localhost:70000/0", "the port is not a number from 1 to 65535"),
        ("redis://localhost:port/0", "the port is not a number from 1 to 65535"),
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
    assert store.username == "alice"
    assert store.password is not None and store.password.reveal() == PASSWORD
    assert repr(store) == (
        f"RedisCache('rediss://alice:***@cache.example:6380/3', key_id="
        f"'{RemoteAuth(TEAM_KEY).key_id}')"
    )
    ipv6 = remote_cache_from_url("redis://[::1]:6379/0")
    assert isinstance(ipv6, RedisCache) and ipv6.host == "::1"
    assert "[::1]:6379" in repr(ipv6)
    unix = remote_cache_from_url(f"unix://:{PASSWORD}@/run/redis.sock?db=2")
    assert isinstance(unix, RedisCache)
    assert (unix.unix_socket, unix.db) == ("/run/redis.sock", 2)
    assert unix.password is not None and unix.password.reveal() == PASSWORD
    assert PASSWORD not in repr(unix) + str(unix.describe())


@pytest.mark.parametrize("made", ["from a URL", "by hand"])
def test_the_store_keeps_its_password_out_of_vars_repr_and_pickles(
    team_key: str, made: str
) -> None:
    if made == "by hand":
        store = RedisCache("cache.example", username="alice", password=PASSWORD)
    else:
        store = RedisCache.from_url(f"redis://alice:{PASSWORD}@cache.example:6380/0")
    assert store.password is not None and store.password.reveal() == PASSWORD
    shown = [
        repr(store),
        str(store),
        str(vars(store)),
        repr(vars(store)),
        repr(store.password),
        str(store.password),
        f"{store.password}",
        f"{store.password!r:>20}",
        store.describe(),
        store.url(),
    ]
    assert [s for s in shown if PASSWORD in s] == []
    assert "'_password': ***" in str(vars(store))
    with pytest.raises(TypeError):
        vars(store.password)  # no __dict__ of its own either
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(store.password)
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(store)  # nor the store that holds it
    with pytest.raises(TypeError, match="not pickled"):
        copy.deepcopy(store.password)


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
    tmp_path: Path, caplog: pytest.LogCaptureFixture, team_key: str
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
        proc = run_cli(*args, env=env)
        # doctor probes the remote tier: nothing listens there, a problem (exit 1).
        assert proc.returncode == (1 if args[0] == "doctor" else 0), proc.stderr
        assert PASSWORD not in proc.stdout + proc.stderr
        return proc.stdout

    assert shown in run("doctor")
    assert json.loads(run("doctor", "--json"))["remote_cache"].startswith(shown)
    assert shown in run("cache", "stats")
    remote = json.loads(run("cache", "stats", "--json"))["remote"]
    assert remote["url"].startswith(shown) and remote["reachable"] is False


# -- passwords a URL parser splits --------------------------------------------------------

# Passwords as a user pastes them, unescaped. Each ends the host part early for a URL
# parser, whose errors quote what it could not take ("Port could not be cast to integer
# value as ':S3cr3tHead'"), or makes later parts (the port, the db) pieces of it.
HOSTILE = [
    "S3cr3tHead/T4ilPart",
    "S3cr3tHead?T4ilPart",
    "S3cr3tHead#T4ilPart",
    "S3cr3tHead/x@y?T4ilPart",
    "12/S3cr3tHead@T4ilPart",
    "S3cr3tHead[T4ilPart",
    "S3cr3tHead]T4ilPart",
    "S3cr3tHead:T4ilPart/",
    "\uff03S3cr3tHead/T4ilPart",
]


def _leaks(text: str) -> bool:
    return "S3cr3tHead" in text or "T4ilPart" in text


@pytest.mark.parametrize("user", ["", "alice"])
@pytest.mark.parametrize("password", HOSTILE)
def test_a_password_a_parser_splits_is_never_shown(
    team_key: str, monkeypatch: pytest.MonkeyPatch, password: str, user: str
) -> None:
    url = f"redis://{user}:{password}@127.0.0.1:6379/0"
    assert not _leaks(redacted_url(url))
    assert redacted_url(url).startswith(f"redis://{user}:***@127.0.0.1:6379/0")
    refused = []
    for make in (
        lambda: RedisCache.from_url(url),
        lambda: remote_cache_from_url(url),
        lambda: Engine(arch=ARCH, remote_cache=url),
    ):
        with pytest.raises(InvalidJob) as raised:
            make()
        refused.append(raised.value)
    monkeypatch.setenv(REMOTE_CACHE_ENV, url)
    with pytest.raises(InvalidJob) as raised:
        Engine(arch=ARCH)  # from the environment
    refused.append(raised.value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert remote_cache_from_environment(strict=False) is None  # what the facade says
    assert [w.category for w in caught] == [RemoteCacheWarning]
    for error in refused:
        assert error.field == "remote_cache"
        shown = f"{error} {error.args!r} {error.value!r} {error.__cause__!r}"
        assert not _leaks(shown), shown
        assert "percent-encoded" in str(error) or "does not parse" in str(error)
    assert not _leaks(str(caught[0].message)), caught[0].message


@pytest.mark.parametrize("password", HOSTILE[:3] + HOSTILE[5:6])
def test_doctor_and_cache_stats_hide_a_password_a_parser_splits(
    tmp_path: Path, password: str
) -> None:
    env = {**os.environ, "ASYNCCOMP_CACHE_DIR": str(tmp_path)}
    env[REMOTE_CACHE_ENV] = f"redis://:{password}@127.0.0.1:{free_port()}/0"
    env["ASYNCCOMP_REMOTE_CACHE_KEY"] = TEAM_KEY

    def run(*args: str) -> str:
        proc = run_cli(*args, env=env)
        # doctor: a remote cache that cannot be used is a problem (exit 1).
        assert proc.returncode == (1 if args[0] == "doctor" else 0), proc.stderr
        assert not _leaks(proc.stdout + proc.stderr), proc.stdout + proc.stderr
        return proc.stdout

    assert "the remote cache is not used: invalid remote_cache 'redis://:***@" in run("doctor")
    doctor = json.loads(run("doctor", "--json"))
    assert doctor["remote_cache"].startswith("redis://:***@127.0.0.1:")
    assert any("the remote cache is not used" in problem for problem in doctor["problems"])
    assert "(NOT USED: invalid remote_cache 'redis://:***@127.0.0.1:" in run("cache", "stats")
    remote = json.loads(run("cache", "stats", "--json"))["remote"]
    assert remote["url"].startswith("redis://:***@127.0.0.1:") and "error" in remote


def test_a_server_refusing_such_a_password_shows_it_nowhere(
    team_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asynccomp import ServerError, SyncEngine
    from asynccomp.server import server_paths

    from .servers import server_folder

    monkeypatch.setenv(REMOTE_CACHE_ENV, f"redis://:{HOSTILE[0]}@127.0.0.1:6379/0")
    with server_folder() as folder:
        monkeypatch.setenv("ASYNCCOMP_SERVER_DIR", str(folder))
        # Started by a client, as a user's first Engine(server="auto") starts it.
        engine = SyncEngine(arch=ARCH, server="auto")
        with pytest.raises(ServerError, match="did not start") as raised:
            engine.start()
        assert "percent-encoded" in str(raised.value)
        assert not _leaks(str(raised.value)), raised.value
        # In the foreground, as a service manager runs it: its stderr and its log.
        proc = subprocess.run(
            [sys.executable, "-m", "asynccomp", "serve", "--server-dir", str(folder)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 2 and "percent-encoded" in proc.stderr
        assert not _leaks(proc.stdout + proc.stderr)
        log = server_paths(folder).log
        assert not _leaks(log.read_text() if log.exists() else "")
