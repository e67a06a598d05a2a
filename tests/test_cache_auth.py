"""Nobody without the team's key can make asynccomp serve an entry, on a real
redis-server and real NVRTC compiles: another kernel's cubin, a forged failure or a
forged log written to the Redis is a miss, recompiled, counted, warned about once per
engine, and never copied into the local tiers; a remote tier without a key is refused;
key files that others can read are refused; the key is shown nowhere."""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from asynccomp import CompileJob, Engine, InvalidJob
from asynccomp.cache import (
    REMOTE_CACHE_ENV,
    REMOTE_CACHE_KEY_ENV,
    REMOTE_CACHE_KEY_FILE_ENV,
    CacheAuthWarning,
    CacheEntry,
    DiskCache,
    RedisCache,
    RemoteAuth,
    RemoteCacheWarning,
    remote_cache_from_environment,
    remote_cache_from_url,
)
from asynccomp.cache._format import decode_entry, encode_entry

from .kernels import ARCH, scale_kernel
from .processes import run_cli
from .redis_server import TEAM_KEY, RedisServer, redis_server

__all__ = ("redis_server",)

ATTACKER_KEY = "not the team's key, but as long"

Forgery = Callable[[str, CacheEntry, CacheEntry], CacheEntry]


def _other_kernel(key: str, genuine: CacheEntry, other: CacheEntry) -> CacheEntry:
    return other  # another kernel's cubin (and log) under this job's key


def _failure(key: str, genuine: CacheEntry, other: CacheEntry) -> CacheEntry:
    metadata = {**genuine.metadata, "error": "compile failed: forged"}
    return CacheEntry(b"", "forged.cu(1): error: nothing wrong here", metadata, ok=False)


def _log(key: str, genuine: CacheEntry, other: CacheEntry) -> CacheEntry:
    log = "ptxas info    : Used 255 registers, used 0 barriers\n"
    return CacheEntry(genuine.binary, log, genuine.metadata)


FORGERIES: dict[str, Forgery] = {
    "another kernel's cubin": _other_kernel,
    "a failure": _failure,
    "a log": _log,
}
SEALS: dict[str, Callable[[str, bytes], bytes]] = {
    # The disk format: a valid SHA-256 and the key inside, as today's checks want.
    "unsealed": lambda key, data: data,
    "sealed with another key": lambda key, data: RemoteAuth(ATTACKER_KEY).seal(key, data),
}


def _stored(server: RedisServer) -> dict[str, bytes]:
    """The cache key of each stored value -> the Redis key it is under."""
    return {name.decode()[-64:]: name for name in server.stored_keys()}


def _genuine(server: RedisServer, name: bytes) -> CacheEntry:
    sealed = server.get(name)
    assert sealed is not None
    data = RemoteAuth(TEAM_KEY).unseal(name.decode()[-64:], sealed)
    assert data is not None
    entry = decode_entry(name.decode()[-64:], data)
    assert entry is not None
    return entry


@pytest.mark.parametrize("seal", SEALS)
@pytest.mark.parametrize("forgery", FORGERIES)
async def test_a_forged_entry_is_a_counted_miss_never_kept_locally(
    tmp_path: Path, redis_server: RedisServer, forgery: str, seal: str
) -> None:
    jobs = [CompileJob(scale_kernel(2.0 + i), name=f"victim{i}") for i in range(2)]
    bait = CompileJob(scale_kernel(99.0), name="bait")
    async with Engine(arch=ARCH, cache_dir=tmp_path / "a", remote_cache=redis_server.url) as a:
        genuine = [await a.compile(job) for job in jobs]
        await a.compile(bait)
    assert all(r.ok and not r.cached for r in genuine)
    stored = _stored(redis_server)
    keys = _keys(tmp_path / "a", jobs)
    [bait_key] = _keys(tmp_path / "a", [bait])
    assert set(stored) == {*keys, bait_key}
    other = _genuine(redis_server, stored[bait_key])
    # Whoever can reach the Redis writes entries in the public format under the keys.
    for key in keys:
        forged = FORGERIES[forgery](key, _genuine(redis_server, stored[key]), other)
        redis_server.set(stored[key], SEALS[seal](key, encode_entry(key, forged)))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with Engine(arch=ARCH, cache_dir=tmp_path / "b", remote_cache=redis_server.url) as b:
            results = [await b.compile(job) for job in jobs]  # two lookups, two forgeries
            assert b.cache is not None
            stats = b.cache.stats.as_dict()
    for result, first in zip(results, genuine, strict=True):
        assert result.ok and not result.cached, result.error
        assert result.binary == first.binary and result.resources == first.resources
    assert (stats["forged"], stats["remote_hits"], b.statistics().compiled) == (2, 0, 2)
    auth_warnings = [w for w in caught if issubclass(w.category, CacheAuthWarning)]
    assert len(auth_warnings) == 1, [str(w.message) for w in caught]
    assert "failed authentication" in str(auth_warnings[0].message)
    assert TEAM_KEY not in str(auth_warnings[0].message)

    # Nothing forged reached the disk tier: with the Redis flushed, it answers with
    # what this machine compiled.
    redis_server.command("FLUSHALL")
    disk = DiskCache(tmp_path / "b")
    for key, first in zip(keys, genuine, strict=True):
        kept = disk.get(key)
        assert kept is not None and kept.ok and kept.binary == first.binary
    async with Engine(arch=ARCH, cache_dir=tmp_path / "b", remote_cache=False) as c:
        again = [await c.compile(job) for job in jobs]
    assert all(r.cached for r in again)
    assert [r.binary for r in again] == [r.binary for r in genuine]


def _keys(folder: Path, jobs: list[CompileJob]) -> list[str]:
    """The cache keys of ``jobs``, as the disk tier in ``folder`` holds them."""
    disk = DiskCache(folder)
    named = {}
    for path in disk.directory.rglob("*.entry"):
        entry = disk.get(path.name[:64])
        assert entry is not None
        named[entry.metadata["filename"]] = path.name[:64]  # the job's name, made safe
    return [named[f"{job.name}.cu"] for job in jobs]


async def test_a_sealed_entry_replayed_under_another_key_is_forged(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    jobs = [CompileJob(scale_kernel(50.0 + i), name=f"r{i}") for i in range(2)]
    async with Engine(arch=ARCH, cache_dir=tmp_path / "a", remote_cache=redis_server.url) as a:
        genuine = [await a.compile(job) for job in jobs]
    first, second = _keys(tmp_path / "a", jobs)
    stored = _stored(redis_server)
    # The team's own seal, for the first kernel, copied under the second's key.
    sealed = redis_server.get(stored[first])
    assert sealed is not None
    redis_server.set(stored[second], sealed)
    with pytest.warns(CacheAuthWarning):
        async with Engine(arch=ARCH, cache_dir=tmp_path / "b", remote_cache=redis_server.url) as b:
            result = await b.compile(jobs[1])
    assert result.ok and not result.cached and result.binary == genuine[1].binary
    assert b.cache is not None and b.cache.stats.forged == 1


async def test_teams_with_other_keys_share_a_redis_without_seeing_each_other(
    tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = CompileJob(scale_kernel(61.0), name="shared")
    async with Engine(arch=ARCH, cache_dir=tmp_path / "a", remote_cache=redis_server.url) as a:
        assert (await a.compile(job)).ok
    monkeypatch.setenv(REMOTE_CACHE_KEY_ENV, ATTACKER_KEY)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with Engine(arch=ARCH, cache_dir=tmp_path / "b", remote_cache=redis_server.url) as b:
            other = await b.compile(job)
    # Another namespace (the key's id): a plain miss, not a forgery.
    assert other.ok and not other.cached
    assert b.cache is not None and b.cache.stats.forged == 0
    assert [w for w in caught if issubclass(w.category, CacheAuthWarning)] == []
    assert len(redis_server.stored_keys()) == 2
    ids = {name.split(b":")[1] for name in redis_server.stored_keys()}
    assert ids == {RemoteAuth(TEAM_KEY).key_id.encode(), RemoteAuth(ATTACKER_KEY).key_id.encode()}


# -- without a key -----------------------------------------------------------------------


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REMOTE_CACHE_KEY_ENV, raising=False)
    monkeypatch.delenv(REMOTE_CACHE_KEY_FILE_ENV, raising=False)


def test_a_remote_tier_without_a_key_is_refused(no_key: None) -> None:
    url = "redis://127.0.0.1:6379/0"
    for make in (
        lambda: Engine(arch=ARCH, remote_cache=url),
        lambda: remote_cache_from_url(url),
        lambda: RedisCache(port=6379),
    ):
        with pytest.raises(InvalidJob, match=f"needs the team's key.*{REMOTE_CACHE_KEY_ENV}"):
            make()
    # Given explicitly, a key needs no environment.
    assert remote_cache_from_url(url, auth=RemoteAuth(TEAM_KEY)).auth.key_id


def test_from_the_environment_no_key_is_no_remote_tier_and_one_warning(
    no_key: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(REMOTE_CACHE_ENV, "redis://:hunter2@127.0.0.1:6379/0")
    with pytest.raises(InvalidJob, match="needs the team's key") as raised:
        remote_cache_from_environment(strict=True)
    assert "hunter2" not in str(raised.value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert remote_cache_from_environment(strict=False) is None
    assert [w.category for w in caught] == [RemoteCacheWarning]
    assert "needs the team's key" in str(caught[0].message)
    assert "hunter2" not in str(caught[0].message)
    monkeypatch.setenv(REMOTE_CACHE_KEY_ENV, TEAM_KEY)
    remote = remote_cache_from_environment(strict=False)
    assert isinstance(remote, RedisCache)
    assert remote.auth.key_id == RemoteAuth(TEAM_KEY).key_id


# -- where the key comes from ------------------------------------------------------------


def _key_file(folder: Path, mode: int, text: str = TEAM_KEY + "\n") -> Path:
    path = folder / "remote-cache.key"
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o600, 0o400, 0o700, 0o500])
def test_a_key_file_of_this_user_without_group_or_other_bits(
    tmp_path: Path, no_key: None, monkeypatch: pytest.MonkeyPatch, mode: int
) -> None:
    # What the README says is taken: any mode with owner bits only (mode & 0o077 == 0).
    path = _key_file(tmp_path, mode)
    linked = tmp_path / "linked-folder"  # a link among the folders is fine
    linked.symlink_to(tmp_path, target_is_directory=True)
    for given in (path, linked / path.name):
        monkeypatch.setenv(REMOTE_CACHE_KEY_FILE_ENV, str(given))
        auth = RemoteAuth.from_environment()
        assert auth is not None and auth.key_id == RemoteAuth(TEAM_KEY).key_id
        assert str(given) in auth.source and TEAM_KEY not in repr(auth)


def _fifo_key(folder: Path) -> Path:
    os.mkfifo(folder / "fifo.key", 0o600)  # opening it for reading would wait forever
    return folder / "fifo.key"


def _link_to(target: Callable[[Path], Path | str]) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        link = folder / "link.key"
        link.symlink_to(target(folder))
        return link

    return make


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda d: _key_file(d, 0o644), "mode 0644: group or others may read"),
        (lambda d: _key_file(d, 0o660), "mode 0660"),
        (lambda d: _key_file(d, 0o602), "mode 0602"),
        (lambda d: d / "missing.key", "cannot be opened: No such file"),
        (lambda d: _key_file(d, 0o710), "mode 0710: group or others"),
        (lambda d: _key_file(d, 0o600, "short\n"), "too short"),
        (lambda d: _key_file(d, 0o600, "k" * 32), "too weak: 1 different bytes"),
        (lambda d: _key_file(d, 0o600, "0123456" * 5), "too weak: 7 different bytes"),
        (lambda d: _key_file(d, 0o600, "x" * 5000), "longer than 4096 bytes"),
        (lambda d: d, "not a regular file"),
        (_fifo_key, "not a regular file"),
        (lambda d: Path("/dev/null"), "not a regular file"),
        (_link_to(lambda d: _key_file(d, 0o600)), "is a symbolic link"),
        (_link_to(_fifo_key), "is a symbolic link"),
        (_link_to(lambda d: "/dev/zero"), "is a symbolic link"),
        (_link_to(lambda d: d / "nothing"), "is a symbolic link"),
    ],
    ids=[
        "0644",
        "0660",
        "0602",
        "missing",
        "0710",
        "short",
        "one byte",
        "seven bytes",
        "long",
        "folder",
        "fifo",
        "device",
        "link to a good file",
        "link to a fifo",
        "link to /dev/zero",
        "dangling link",
    ],
)
def test_a_key_file_is_refused_with_a_clear_error(
    tmp_path: Path,
    no_key: None,
    monkeypatch: pytest.MonkeyPatch,
    make: Callable[[Path], Path],
    problem: str,
) -> None:
    path = make(tmp_path)
    monkeypatch.setenv(REMOTE_CACHE_KEY_FILE_ENV, str(path))
    with pytest.raises(InvalidJob, match=problem) as raised:
        RemoteAuth.from_environment()
    assert raised.value.field == REMOTE_CACHE_KEY_FILE_ENV
    assert TEAM_KEY not in str(raised.value) and "short" not in repr(raised.value.value)
    assert "k" * 32 not in str(raised.value) and "0123456" not in str(raised.value)


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")
def test_a_key_file_of_another_user_is_refused(
    tmp_path: Path, no_key: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _key_file(tmp_path, 0o600)
    os.chown(path, 65534, 65534)  # nobody
    monkeypatch.setenv(REMOTE_CACHE_KEY_FILE_ENV, str(path))
    with pytest.raises(InvalidJob, match="belongs to user id 65534, not to this user"):
        RemoteAuth.from_environment()


def test_two_sources_or_a_short_key_are_refused(
    tmp_path: Path, no_key: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(REMOTE_CACHE_KEY_ENV, TEAM_KEY)
    monkeypatch.setenv(REMOTE_CACHE_KEY_FILE_ENV, str(_key_file(tmp_path, 0o600)))
    with pytest.raises(InvalidJob, match="set one of them, not both"):
        RemoteAuth.from_environment()
    monkeypatch.delenv(REMOTE_CACHE_KEY_FILE_ENV)
    monkeypatch.setenv(REMOTE_CACHE_KEY_ENV, "pass1234")
    with pytest.raises(InvalidJob, match="too short: a key has at least 16 bytes") as raised:
        RemoteAuth.from_environment()
    assert "pass1234" not in str(raised.value)


@pytest.mark.parametrize("weak", ["k" * 32, "ab" * 16, "0123456" * 4, b"\0" * 64])
def test_a_placeholder_key_is_refused_wherever_it_comes_from(
    no_key: None, monkeypatch: pytest.MonkeyPatch, weak: str | bytes
) -> None:
    with pytest.raises(InvalidJob, match=r"too weak: [1-7] different bytes") as raised:
        RemoteAuth(weak)
    shown = str(raised.value)
    if isinstance(weak, str):
        monkeypatch.setenv(REMOTE_CACHE_KEY_ENV, weak)
        with pytest.raises(InvalidJob, match="too weak") as from_env:
            RemoteAuth.from_environment()
        assert from_env.value.field == REMOTE_CACHE_KEY_ENV
        shown += str(from_env.value)
        assert weak not in shown
    assert "secrets.token_hex(32)" in shown  # how to make a real one
    assert RemoteAuth("0123456789abcdef").key_id  # 16 bytes, 16 different: a key


# -- the key is shown nowhere ------------------------------------------------------------


@pytest.mark.parametrize("source", ["variable", "file"])
def test_the_key_is_not_in_doctor_cache_stats_or_repr(
    tmp_path: Path, no_key: None, source: str
) -> None:
    secret = "s3cret-team-key-that-must-not-leak"
    env = {**os.environ, "ASYNCCOMP_CACHE_DIR": str(tmp_path / "cache")}
    env[REMOTE_CACHE_ENV] = "redis://127.0.0.1:1/0"
    if source == "variable":
        env[REMOTE_CACHE_KEY_ENV] = secret
    else:
        env[REMOTE_CACHE_KEY_FILE_ENV] = str(_key_file(tmp_path, 0o600, secret))
    key_id = RemoteAuth(secret).key_id
    outputs = [
        run_cli("doctor", env=env),
        run_cli("doctor", "--json", env=env),
        run_cli("cache", "stats", env=env),
        run_cli("cache", "stats", "--json", env=env),
    ]
    for proc in outputs:
        # doctor probes the remote tier: nothing listens at port 1, a problem (exit 1).
        assert proc.returncode == (1 if "doctor" in proc.args else 0), proc.stderr
        assert secret not in proc.stdout + proc.stderr
        assert key_id in proc.stdout  # the id is how machines compare keys
    auth = RemoteAuth(secret)
    remote = RedisCache(port=1, auth=auth)
    assert secret not in repr(auth) + repr(remote) + str(vars(auth)) + str(vars(remote))
    with pytest.raises(TypeError, match="not pickled"):
        import pickle

        pickle.dumps(auth)


def test_key_file_modes_are_checked_by_bits_not_by_name(tmp_path: Path, no_key: None) -> None:
    # Group- or world-writable alone is refused too: someone could replace the key.
    path = _key_file(tmp_path, 0o620)
    assert stat.S_IMODE(path.stat().st_mode) == 0o620
    with pytest.raises(InvalidJob, match="mode 0620"):
        RemoteAuth.from_file(str(path))


# -- what the tag covers -----------------------------------------------------------------


def _framed_tag(secret: str, magic: bytes, key: bytes, entry: bytes) -> bytes:
    """The tag as the sealed format's documentation defines it (version 2)."""
    message = magic + len(key).to_bytes(8, "big") + key + len(entry).to_bytes(8, "big") + entry
    return hmac.new(secret.encode(), message, "sha256").digest()


def test_the_tag_frames_the_cache_key_and_the_entry_by_their_lengths() -> None:
    auth = RemoteAuth(TEAM_KEY)
    key = hashlib.sha256(b"a kernel").hexdigest()
    entry = b"an encoded entry"
    sealed = auth.seal(key, entry)
    assert sealed[:8] == b"ACAUTH2\0"
    assert sealed[8:40] == _framed_tag(TEAM_KEY, b"ACAUTH2\0", key.encode(), entry)
    assert sealed[40:] == entry and auth.unseal(key, sealed) == entry
    # The first format (key and entry run together, no lengths) is not accepted.
    v1_tag = hmac.new(TEAM_KEY.encode(), b"ACAUTH1\0" + key.encode() + entry, "sha256")
    assert auth.unseal(key, b"ACAUTH1\0" + v1_tag.digest() + entry) is None
    # Bytes moved from the entry to the key's end (what an unframed input allowed).
    moved = _framed_tag(TEAM_KEY, b"ACAUTH2\0", key.encode() + entry[:1], entry[1:])
    assert moved != sealed[8:40]


@pytest.mark.parametrize(
    "bad",
    [
        "AB" * 32,  # upper case: not what a SHA-256 hexdigest gives
        "ab" * 31,
        "ab" * 33,
        "ab" * 31 + "zz",
        "ab" * 32 + "\n",
        " " + "ab" * 31 + "a",
        "\u00e9" * 64,
        "",
    ],
)
def test_only_a_cache_key_is_sealed_or_unsealed(bad: str) -> None:
    auth = RemoteAuth(TEAM_KEY)
    with pytest.raises(InvalidJob, match="64 lowercase hex digits"):
        auth.seal(bad, b"an encoded entry")
    # A value whose tag is right for that key, as the team's own seal would make it.
    tag = _framed_tag(TEAM_KEY, b"ACAUTH2\0", bad.encode(), b"an encoded entry")
    assert auth.unseal(bad, b"ACAUTH2\0" + tag + b"an encoded entry") is None
