"""A cache entry's dependencies cannot hang a lookup: a recorded header that became a
FIFO, a link to one, a link to /dev/zero or /dev/urandom, a folder, or a file larger
than recorded is a miss, found in milliseconds, and recording (the include scan, the
snapshot) never reads such a file either. Real FIFOs and devices, real compiles."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from asynccomp import CompileJob, CompileTimeout, Engine, find_toolkit
from asynccomp.cache import CacheKey, DiskCache, RedisCache, open_cache
from asynccomp.cache._deps import (
    Dependency,
    UnknownIncludes,
    dependencies_changed,
    include_dirs_of,
    scan_includes,
    snapshot,
)

from .kernels import ARCH
from .redis_server import RedisServer, redis_server

__all__ = ("redis_server",)

# Every test here would hang (or spin a CPU) forever without the bounds.
pytestmark = pytest.mark.timeout(30)

#: "At once" for a check that would otherwise block for good (a FIFO's open, a device
#: read to its end): any finite bound tells the two apart; this one holds on a loaded machine.
AT_ONCE = 10.0

USES_EMPTY_HEADER = """\
#include "config.h"
extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }
"""


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _link_to_fifo(path: Path) -> None:
    os.mkfifo(path.with_name("real-fifo"))
    path.symlink_to(path.with_name("real-fifo"))


def _link_to(target: str) -> Callable[[Path], None]:
    return lambda path: path.symlink_to(target)


def _folder(path: Path) -> None:
    path.mkdir()


def _grown(path: Path) -> None:
    path.write_bytes(b"// now it says something\n")


# What a recorded header may become. An empty header (size 0) is the case that hung:
# a FIFO's or a device's size is 0 too, so only reading told them apart.
REPLACEMENTS: dict[str, Callable[[Path], None]] = {
    "fifo": _fifo,
    "link to a fifo": _link_to_fifo,
    "link to /dev/zero": _link_to("/dev/zero"),
    "link to /dev/urandom": _link_to("/dev/urandom"),
    "folder": _folder,
    "grown": _grown,
}


def _recorded(folder: Path) -> tuple[Path, Dependency]:
    header = folder / "config.h"
    header.write_bytes(b"")
    past = time.time_ns() - 10 * 10**9
    os.utime(header, ns=(past, past))
    deps = snapshot([str(header)], [], not_before_ns=time.time_ns())
    assert deps is not None
    [dep] = deps
    return header, dep


@pytest.mark.parametrize("replacement", REPLACEMENTS)
def test_a_dependency_that_became_anything_else_is_changed_at_once(
    tmp_path: Path, replacement: str
) -> None:
    header, dep = _recorded(tmp_path)
    header.unlink()
    REPLACEMENTS[replacement](header)
    started = time.monotonic()
    assert dependencies_changed([dep])
    assert time.monotonic() - started < AT_ONCE


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/urandom", "/proc/self/status"])
def test_a_recorded_device_or_proc_file_is_changed_at_once(path: str) -> None:
    # What an odd (or hostile) entry may record: a device, or a file whose size says 0
    # and whose reading gives more. Its mtime differs from the recorded one, so only its
    # bytes could tell: they are read to the recorded size plus one, no further.
    mtime = Path(path).stat().st_mtime_ns
    started = time.monotonic()
    assert dependencies_changed([Dependency(path, 0, mtime - 1, "0" * 64)])
    if path.startswith("/dev/"):  # a device is never taken for the file recorded
        assert dependencies_changed([Dependency(path, 0, mtime, "0" * 64)])
    assert time.monotonic() - started < AT_ONCE


def test_an_unchanged_or_only_touched_dependency_still_holds(tmp_path: Path) -> None:
    header, dep = _recorded(tmp_path)
    assert not dependencies_changed([dep])
    os.utime(header)  # touched, same bytes: the digest is compared, and agrees
    assert not dependencies_changed([dep])
    absent = Dependency(str(tmp_path / "nothing.h"), 0, 0, None)
    assert not dependencies_changed([absent])
    (tmp_path / "nothing.h").write_bytes(b"")
    assert dependencies_changed([absent])


def test_a_record_without_ctime_and_inode_is_checked_by_its_digest(tmp_path: Path) -> None:
    # Entries written before ctime and inode were recorded: never trusted on size and
    # mtime alone, never refused either when the bytes are those recorded.
    header = tmp_path / "config.h"
    header.write_bytes(b"#define A 1\n")
    past = time.time_ns() - 10 * 10**9
    os.utime(header, ns=(past, past))
    deps = snapshot([str(header)], [], not_before_ns=time.time_ns())
    assert deps is not None
    old = Dependency.from_json(deps[0].to_json()[:4])
    assert (old.ctime_ns, old.inode) == (None, None)
    assert not dependencies_changed([old])
    header.write_bytes(b"#define A 2\n")
    os.utime(header, ns=(past, past))
    assert dependencies_changed([old]) and dependencies_changed(deps)


@pytest.mark.parametrize("replacement", [r for r in REPLACEMENTS if r != "grown"])
def test_recording_never_reads_a_fifo_or_a_device(tmp_path: Path, replacement: str) -> None:
    header = tmp_path / "config.h"
    REPLACEMENTS[replacement](header)
    started = time.monotonic()
    assert snapshot([str(header)], [], not_before_ns=time.time_ns()) is None
    found, absent = scan_includes(
        USES_EMPTY_HEADER.encode(), include_dirs_of([f"-I{tmp_path}"]), [], str(tmp_path / "x")
    )
    assert isinstance(found, UnknownIncludes) and absent == []
    assert "config.h" in found.reason
    assert snapshot(found, absent, not_before_ns=time.time_ns()) is None
    assert time.monotonic() - started < AT_ONCE


def test_recording_a_file_whose_size_lies_is_refused() -> None:
    # /proc files say 0 bytes and hold more: read to their size plus one, and refused.
    assert snapshot(["/proc/self/status"], [], not_before_ns=time.time_ns()) is None


async def _compiled_entry(tmp_path: Path) -> tuple[Path, str]:
    """A real compile of a kernel that includes an empty header, cached on disk;
    the header, and the entry's key."""
    include = tmp_path / "include"
    include.mkdir()
    header = include / "config.h"
    header.write_bytes(b"")
    past = time.time_ns() - 10 * 10**9
    os.utime(header, ns=(past, past))
    job = CompileJob(USES_EMPTY_HEADER, name="k", options=[f"-I{include}"])
    async with Engine(arch=ARCH, cache_dir=tmp_path / "cache") as engine:
        assert (await engine.compile(job)).ok
        assert (await engine.compile(job)).cached
    [entry] = DiskCache(tmp_path / "cache").directory.rglob("*.entry")
    return header, entry.name[:64]


@pytest.mark.parametrize("replacement", REPLACEMENTS)
async def test_a_disk_lookup_whose_header_became_anything_else_is_a_fast_miss(
    tmp_path: Path, replacement: str
) -> None:
    header, key = await _compiled_entry(tmp_path)
    header.unlink()
    REPLACEMENTS[replacement](header)
    cache = open_cache(find_toolkit(), folder=tmp_path / "cache", memory_bytes=2**20)
    started = time.monotonic()
    assert await cache.lookup([CacheKey(key)]) == [None]
    assert time.monotonic() - started < AT_ONCE
    await cache.aclose()
    assert cache.stats.as_dict()["stale"] == 1


async def test_a_remote_lookup_whose_header_became_a_fifo_is_a_fast_miss(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    include = tmp_path / "include"
    include.mkdir()
    header = include / "config.h"
    header.write_bytes(b"")
    past = time.time_ns() - 10 * 10**9
    os.utime(header, ns=(past, past))
    job = CompileJob(USES_EMPTY_HEADER, name="k", options=[f"-I{include}"])
    async with Engine(arch=ARCH, cache_dir=tmp_path / "a", remote_cache=redis_server.url) as a:
        assert (await a.compile(job)).ok
    [name] = redis_server.stored_keys()
    header.unlink()
    os.mkfifo(header)
    remote = RedisCache.from_url(redis_server.url)
    cache = open_cache(find_toolkit(), folder=tmp_path / "b", memory_bytes=2**20, remote=remote)
    started = time.monotonic()
    assert await cache.lookup([CacheKey(name.decode()[-64:])]) == [None]
    assert time.monotonic() - started < AT_ONCE
    await cache.aclose()
    assert cache.disk is not None and cache.disk.count() == (0, 0)  # nothing kept


async def test_an_engine_whose_cached_header_became_a_fifo_does_not_hang_its_lookup(
    tmp_path: Path,
) -> None:
    header, _ = await _compiled_entry(tmp_path)
    header.unlink()
    os.mkfifo(header)
    # The lookup is a fast miss; the compile then waits on the FIFO (NVRTC opens it),
    # and its own deadline stops it.
    job = CompileJob(USES_EMPTY_HEADER, name="k", options=[f"-I{header.parent}"], timeout=3)
    started = time.monotonic()
    async with Engine(arch=ARCH, cache_dir=tmp_path / "cache") as engine:
        result = await engine.compile(job)
        assert engine.cache is not None
        stats = engine.cache.stats.as_dict()
    assert isinstance(result.error, CompileTimeout) and not result.cached
    assert stats["stale"] == 1
    assert time.monotonic() - started < 20
