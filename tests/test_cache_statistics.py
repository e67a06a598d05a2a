"""The cache folder's statistics and size setting, as a ccache user expects them: totals
that every process adds to (a compile server too, whether it is told to stop, stops when
idle or has clients when it stops), ``asynccomp cache -z`` and ``-M``, the environment's
bound, and what ``asynccomp compile`` says a server did for it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from asynccomp import CompileJob, Engine, SettingsError
from asynccomp.cache import CacheStats

from .kernels import ARCH, scale_kernel
from .servers import running_server, server_folder
from .test_cli import asynccomp


@pytest.fixture
def server_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with server_folder() as folder:
        monkeypatch.setenv("ASYNCCOMP_SERVER_DIR", str(folder))
        yield folder


def _stats(cache: Path, **env: str) -> dict[str, object]:
    done = asynccomp("cache", "stats", "--json", cache=cache, env=env)
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


def _hits(report: dict[str, object]) -> int:
    return sum(int(report[k]) for k in ("memory_hits", "disk_hits", "remote_hits"))  # type: ignore[call-overload]


def _kernels(folder: Path, count: int) -> Path:
    folder.mkdir()
    for i in range(count):
        (folder / f"k{i}.cu").write_text(scale_kernel(1.0 + i))
    return folder


async def test_a_servers_counts_are_kept_when_it_is_stopped_with_a_client_connected(
    server_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counts of a client still connected when ``serve --stop`` comes are in the
    folder's totals afterwards (they were lost: the server's engine closed cancelled)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("ASYNCCOMP_CACHE_DIR", str(cache))
    jobs = [CompileJob(scale_kernel(1.0 + i), name=f"k{i}", arch=ARCH) for i in range(3)]
    with running_server(server_dir, "--cache-dir", str(cache)) as (process, paths):
        async with Engine(arch=ARCH, server=str(paths.socket)) as engine:
            for _ in range(2):  # misses, then hits
                assert all(r.ok for r in await engine.compile_many(jobs))
            before = _stats(cache)
            assert _hits(before) == 3 and before["misses"] == 3
            stop = asynccomp("serve", "--stop", cache=cache, env={})
            assert stop.returncode == 0, stop.stderr
            assert process.wait(timeout=120) == 0
    after = _stats(cache)
    assert after["server"] is None
    assert (_hits(after), after["misses"], after["stores"]) == (3, 3, 3)


def test_an_idle_servers_counts_are_in_the_totals_after_it_stops(
    server_dir: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    src = _kernels(tmp_path / "src", 2)
    with running_server(server_dir, "--cache-dir", str(cache), "--idle-timeout", "2") as (
        process,
        _,
    ):
        for _ in range(2):
            done = asynccomp("compile", str(src), "--arch", ARCH, cache=cache)
            assert done.returncode == 0, done.stderr
            assert f"on the compile server (pid {process.pid})" in done.stdout
        assert process.wait(timeout=120) == 0  # stopped by itself, idle
    report = _stats(cache)
    assert (_hits(report), report["misses"], report["stores"]) == (2, 2, 2)


def test_zero_stats_resets_the_totals_of_every_process(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    src = _kernels(tmp_path / "src", 2)
    for _ in range(2):
        done = asynccomp("compile", str(src), "--arch", ARCH, "--no-server", cache=cache)
        assert done.returncode == 0, done.stderr
    assert _hits(_stats(cache)) == 2
    for flag in ("-z", "--zero-stats"):
        zeroed = asynccomp("cache", flag, cache=cache)
        assert zeroed.returncode == 0, zeroed.stderr
        assert "statistics zeroed" in zeroed.stdout
        report = _stats(cache)
        assert (_hits(report), report["misses"], report["stores"]) == (0, 0, 0)
        assert report["entries"] == 2  # the entries stay
    # And counting starts again from zero.
    done = asynccomp("compile", str(src), "--arch", ARCH, "--no-server", cache=cache)
    assert done.returncode == 0, done.stderr
    assert _hits(_stats(cache)) == 2


async def test_max_size_from_the_folder_the_environment_and_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """argument > $ASYNCCOMP_CACHE_MAX_SIZE > ``asynccomp cache -M`` > 4 GiB."""
    cache = tmp_path / "cache"
    monkeypatch.delenv("ASYNCCOMP_CACHE_MAX_SIZE", raising=False)
    assert _stats(cache)["max_bytes"] == 4 * 2**30
    stored = asynccomp("cache", "-M", "5G", cache=cache)
    assert stored.returncode == 0, stored.stderr
    report = _stats(cache)
    assert report["max_bytes"] == 5 * 10**9
    assert report["max_bytes_from"] == "settings.json in the cache folder"
    assert asynccomp("cache", "--max-size", "3MiB", cache=cache).returncode == 0
    assert _stats(cache)["max_bytes"] == 3 * 2**20
    env = {"ASYNCCOMP_CACHE_MAX_SIZE": "1GiB"}
    assert _stats(cache, **env)["max_bytes"] == 2**30
    bad = asynccomp("cache", "-M", "lots", cache=cache)
    assert bad.returncode == 2 and "invalid --max-size 'lots'" in bad.stderr

    job = CompileJob(scale_kernel(), arch=ARCH)
    async with Engine(arch=ARCH, cache_dir=cache, server=None) as engine:
        assert engine.cache is not None and engine.cache.disk is not None
        assert engine.cache.disk.max_bytes == 3 * 2**20  # the folder's
        assert (await engine.compile(job)).ok
    monkeypatch.setenv("ASYNCCOMP_CACHE_MAX_SIZE", "2M")
    async with Engine(arch=ARCH, cache_dir=cache, server=None) as engine:
        assert engine.cache is not None and engine.cache.disk is not None
        assert engine.cache.disk.max_bytes == 2 * 10**6  # the environment's
    async with Engine(arch=ARCH, cache_dir=cache, disk_cache_bytes=12_000, server=None) as engine:
        assert engine.cache is not None and engine.cache.disk is not None
        assert engine.cache.disk.max_bytes == 12_000  # the caller's
    monkeypatch.setenv("ASYNCCOMP_CACHE_MAX_SIZE", "big")
    with pytest.raises(SettingsError, match="ASYNCCOMP_CACHE_MAX_SIZE"):
        async with Engine(arch=ARCH, cache_dir=cache, server=None):
            pass


@pytest.mark.parametrize("args", [("cache", "stats"), ("cache",), ("cache", "-M", "1G")])
def test_a_bad_max_size_in_the_environment_is_one_line_and_a_failure(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    """R21: a bad ``$ASYNCCOMP_CACHE_MAX_SIZE`` is an error naming it, not a traceback."""
    done = asynccomp(*args, cache=tmp_path / "cache", env={"ASYNCCOMP_CACHE_MAX_SIZE": "lots"})
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "asynccomp: error: invalid ASYNCCOMP_CACHE_MAX_SIZE 'lots': expected a size such as "
        "5G, 512MiB or 1000000 (bytes)"
    ]


async def test_a_max_size_of_0_means_no_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ccache's ``-M 0``: from the folder's setting, the environment or the caller, 0
    keeps every entry (keeping nothing on disk is ``cache_dir=False``)."""
    cache = tmp_path / "cache"
    monkeypatch.delenv("ASYNCCOMP_CACHE_MAX_SIZE", raising=False)
    stored = asynccomp("cache", "-M", "0", cache=cache)
    assert stored.returncode == 0 and "no limit" in stored.stdout, stored.stderr
    assert _stats(cache)["max_bytes"] == 0
    text = asynccomp("cache", "stats", cache=cache).stdout
    assert "of no limit (settings.json in the cache folder)" in text
    jobs = [CompileJob(scale_kernel(float(i)), name=f"k{i}") for i in range(3)]
    for given in (None, 0):
        for env in ("", "0"):
            monkeypatch.setenv("ASYNCCOMP_CACHE_MAX_SIZE", env)
            async with Engine(arch=ARCH, cache_dir=cache, disk_cache_bytes=given) as engine:
                assert (await engine.compile_many(jobs))[0].ok
            async with Engine(arch=ARCH, cache_dir=cache, disk_cache_bytes=given) as engine:
                again = await engine.compile_many(jobs)
            assert all(r.cached for r in again), (given, env)
    assert _stats(cache)["entries"] == 3


def test_the_summary_says_what_the_server_did_and_json_says_where(
    server_dir: Path, tmp_path: Path
) -> None:
    """Two identical files compile once (one deduplicated); a second run is all from
    the cache; every ``--json`` record says where it ran."""
    cache = tmp_path / "cache"
    src = _kernels(tmp_path / "src", 2)
    (src / "copy.cu").write_text((src / "k0.cu").read_text())
    with running_server(server_dir, "--cache-dir", str(cache)) as (process, _):
        where = f"on the compile server (pid {process.pid})"
        out = tmp_path / "records.json"
        first = asynccomp("compile", str(src), "--arch", ARCH, "--json", str(out), cache=cache)
        assert first.returncode == 0, first.stderr
        assert (
            "3 jobs: 3 succeeded (2 compiled, 0 from the cache, 1 deduplicated), 0 failed"
            in first.stdout
        )
        assert f", {where}\n" in first.stdout
        records = json.loads(out.read_text())
        assert [r["where"] for r in records] == [where] * 3
        second = asynccomp("compile", str(src), "--arch", ARCH, cache=cache)
        assert "3 succeeded (0 compiled, 3 from the cache), 0 failed" in second.stdout
    here = asynccomp(
        "compile", str(src), "--arch", ARCH, "--no-server", "--json", str(out), cache=cache
    )
    assert here.returncode == 0, here.stderr
    assert {r["where"] for r in json.loads(out.read_text())} == {"in process"}


def test_a_cache_command_without_an_action_shows_the_stats(tmp_path: Path) -> None:
    done = asynccomp("cache", cache=tmp_path / "cache")
    assert done.returncode == 0 and "hits             0 of 0 lookups" in done.stdout


def test_saves_at_once_add_the_counts_once(tmp_path: Path) -> None:
    """Sessions that end together on a server save the same engine's counts from
    several threads at once: the folder's totals get each count once."""
    stats = CacheStats()
    stats.add(memory_hits=5, misses=2)
    start = threading.Barrier(8)

    def save() -> None:
        start.wait()
        stats.save(tmp_path)

    threads = [threading.Thread(target=save) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    totals = CacheStats.load(tmp_path)
    assert (totals["memory_hits"], totals["misses"]) == (5, 2)
    stats.add(memory_hits=1)
    stats.save(tmp_path)
    assert CacheStats.load(tmp_path)["memory_hits"] == 6
