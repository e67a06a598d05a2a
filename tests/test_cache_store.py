"""The compile cache's storage layer (asynccomp.cache): keys, memory LRU, disk store.

Real files under tmp_path throughout; a fault is simulated only by changing what is on
disk (a truncated file, a folder replaced by a file), never by mocking the filesystem.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import random
import shutil
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from asynccomp.cache import (
    CACHE_FORMAT_VERSION,
    CacheCorruptionWarning,
    CacheEntry,
    CacheUnavailable,
    CacheWriteWarning,
    DiskCache,
    MemoryCache,
    cache_key,
    clear_include_identity_cache,
    default_cache_dir,
    entry_size,
    include_identity,
)
from asynccomp.errors import AsyncCompError

from .filesystems import full_disk

KEY_FIELDS: dict[str, Any] = {
    "source": 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1; }',
    "backend": "nvrtc",
    "output": "cubin",
    "arch": "sm_90a",
    "options": ["-O3", "--use_fast_math"],
    "compiler_identity": "nvrtc 13.0",
    "include_identity": "abc123",
    "program_name": "k.cu",
}


def key_of(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


def make_entry(binary: bytes = b"\x7fELF" + bytes(range(256)) * 4, **kw: Any) -> CacheEntry:
    fields: dict[str, Any] = {
        "log": "ptxas info    : Used 8 registers\n",
        "metadata": {"backend": "nvrtc", "arch": "sm_90a", "elapsed": 0.25},
    }
    fields.update(kw)
    return CacheEntry(binary=binary, **fields)


# --------------------------------------------------------------------------- keys


def test_key_is_stable_sha256_hex() -> None:
    key = cache_key(**KEY_FIELDS)
    assert key == cache_key(**dict(KEY_FIELDS, options=tuple(KEY_FIELDS["options"])))
    assert len(key) == 64
    assert int(key, 16) >= 0


@pytest.mark.parametrize("field", sorted(KEY_FIELDS))
def test_key_changes_with_each_field(field: str) -> None:
    base = cache_key(**KEY_FIELDS)
    value = KEY_FIELDS[field]
    changed = [*value, "-lineinfo"] if isinstance(value, list) else value + "x"
    assert cache_key(**dict(KEY_FIELDS, **{field: changed})) != base


def test_key_encoding_is_unambiguous() -> None:
    def key(**kw: Any) -> str:
        return cache_key(**dict(KEY_FIELDS, **kw))

    # A boundary moved between two fields, options split or joined, or reordered.
    assert key(backend="ab", output="c") != key(backend="a", output="bc")
    assert key(options=["-a", "-b"]) != key(options=["-a -b"])
    assert key(options=["-a", "-b"]) != key(options=["-b", "-a"])
    assert key(options=[]) != key(options=[""])
    assert key(program_name="") != key(program_name='"')


def test_key_rejects_options_as_one_string() -> None:
    with pytest.raises(TypeError):
        cache_key(**dict(KEY_FIELDS, options="-O3"))


def test_key_handles_any_text() -> None:
    odd = "// \u00e9\u4e2d\ud800 \x00\n"  # non-ASCII, a lone surrogate, a NUL
    assert cache_key(**dict(KEY_FIELDS, source=odd)) != cache_key(**KEY_FIELDS)


def test_default_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ASYNCCOMP_CACHE_DIR", str(tmp_path / "here"))
    assert default_cache_dir() == tmp_path / "here"
    monkeypatch.setenv("ASYNCCOMP_CACHE_DIR", "")
    assert default_cache_dir().name == "asynccomp"
    monkeypatch.delenv("ASYNCCOMP_CACHE_DIR")
    assert default_cache_dir().name == "asynccomp"


def test_include_identity(tmp_path: Path) -> None:
    inc = tmp_path / "include"
    (inc / "cuda" / "std").mkdir(parents=True)
    (inc / "cuda_runtime.h").write_text("// runtime\n")
    version = inc / "cuda" / "std" / "version"
    version.write_text("#define CCCL 3\n")
    other = tmp_path / "other"
    other.mkdir()
    clear_include_identity_cache()

    first = include_identity([inc])
    assert first == include_identity((inc,))
    assert len(first) == 64
    assert include_identity([inc, other]) != first
    assert include_identity([other, inc]) != include_identity([inc, other])
    # Missing folders are allowed (and differ from present ones).
    assert include_identity([tmp_path / "missing"]) != include_identity([other])

    # Upgrading the headers: a version file in a subfolder, or a top-level header.
    os.utime(version, ns=(1, 1_000_000_000))
    assert include_identity([inc]) == first, "cached per process until cleared"
    clear_include_identity_cache()
    second = include_identity([inc])
    assert second != first
    (inc / "cuda_runtime.h").write_text("// runtime, longer\n")
    clear_include_identity_cache()
    assert include_identity([inc]) not in (first, second)


def test_include_identity_is_fast_warm(tmp_path: Path) -> None:
    dirs = [tmp_path]
    include_identity(dirs)
    n = 1000
    start = time.perf_counter()
    for _ in range(n):
        include_identity(dirs)
    assert (time.perf_counter() - start) / n < 1e-3


# --------------------------------------------------------------------------- memory


def test_memory_lru_eviction() -> None:
    one = make_entry(b"x" * 100)
    size = entry_size(one)
    cache = MemoryCache(max_bytes=3 * size)
    for n in range(3):
        cache.put(f"k{n}", make_entry(b"x" * 100))
    assert len(cache) == 3
    assert cache.size_bytes == 3 * size
    assert cache.get("k0") is not None  # k0 becomes the most recently used
    cache.put("k3", one)
    assert "k1" not in cache
    assert [k for k in ("k0", "k2", "k3") if k in cache] == ["k0", "k2", "k3"]
    assert cache.size_bytes == 3 * size
    assert cache.get("k1") is None

    # Replacing a key does not count it twice.
    cache.put("k3", one)
    assert len(cache) == 3
    assert cache.size_bytes == 3 * size

    # Too large to keep at all: not kept, nothing else evicted for it.
    cache.put("big", make_entry(b"x" * (4 * size)))
    assert "big" not in cache
    assert len(cache) == 3

    cache.clear()
    assert len(cache) == 0
    assert cache.size_bytes == 0


def test_memory_cache_threads() -> None:
    cache = MemoryCache(max_bytes=20 * entry_size(make_entry()))
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(2000):
                k = f"k{rng.randrange(50)}"
                if rng.random() < 0.5:
                    cache.put(k, make_entry())
                else:
                    cache.get(k)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(cache) <= 20
    assert cache.size_bytes == len(cache) * entry_size(make_entry())


# --------------------------------------------------------------------------- disk


def entry_files(cache: DiskCache) -> list[Path]:
    return sorted(p for p in cache.directory.rglob("*") if p.is_file())


def test_disk_round_trip(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path / "c")
    key = key_of(1)
    binary = os.urandom(50_000)
    metadata = {"backend": "nvcc", "resources": {"k": {"registers": 32}}, "elapsed": 1.5}
    entry = CacheEntry(binary=binary, log="warning: caf\u00e9 \ud800\n", metadata=metadata)
    assert cache.get(key) is None
    cache.put(key, entry)
    got = cache.get(key)
    assert got is not None
    assert got.binary == binary
    assert got.log == entry.log
    assert got.metadata == metadata
    assert got.ok is True
    assert got == entry
    assert cache.path_of(key) == tmp_path / "c" / f"v{CACHE_FORMAT_VERSION}" / key[:2] / (
        key + ".entry"
    )
    assert entry_files(cache) == [cache.path_of(key)]
    assert cache.size_bytes() == cache.path_of(key).stat().st_size


def test_disk_failure_entry_and_empty_binary(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    failed = CacheEntry(b"", "error: expected ';'", {"error": "CompileError"}, ok=False)
    cache.put(key_of(2), failed)
    assert cache.get(key_of(2)) == failed


def test_disk_hit_across_instances(tmp_path: Path) -> None:
    writer = DiskCache(tmp_path)
    entry = make_entry()
    writer.put(key_of(3), entry)
    assert DiskCache(tmp_path).get(key_of(3)) == entry


def test_disk_rejects_bad_keys_and_metadata(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    for bad in ("../../etc/passwd", "ABC", key_of(1).upper(), ""):
        with pytest.raises(ValueError):
            cache.get(bad)
    with pytest.raises(TypeError):
        cache.put(key_of(1), make_entry(metadata={"x": object()}))
    assert entry_files(cache) == []


def test_disk_overwrite(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    cache.put(key_of(4), make_entry(b"old"))
    cache.put(key_of(4), make_entry(b"new"))
    got = cache.get(key_of(4))
    assert got is not None
    assert got.binary == b"new"
    assert len(entry_files(cache)) == 1


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _flip_last(data: bytes) -> bytes:  # a byte of the binary
    return data[:-1] + bytes([data[-1] ^ 0x01])


def _flip_log(data: bytes) -> bytes:  # a letter of the log, inside the JSON header
    at = data.index(b"registers")
    return data[:at] + b"R" + data[at + 1 :]


def _garbage(data: bytes) -> bytes:
    return random.Random(0).randbytes(len(data))


def _empty(data: bytes) -> bytes:
    return b""


def _other_version(data: bytes) -> bytes:
    return data[:8] + (CACHE_FORMAT_VERSION + 1).to_bytes(4, "little") + data[12:]


@pytest.mark.parametrize(
    "damage", [_truncate, _flip_last, _flip_log, _garbage, _empty, _other_version]
)
def test_disk_corrupt_file_is_miss_warned_and_removed(tmp_path: Path, damage: Any) -> None:
    cache = DiskCache(tmp_path)
    key = key_of(5)
    cache.put(key, make_entry())
    path = cache.path_of(key)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.warns(CacheCorruptionWarning, match="corrupt"):
        assert cache.get(key) is None
    assert not path.exists()
    assert cache.get(key) is None  # a plain miss now, no second warning
    cache.put(key, make_entry())
    assert cache.get(key) == make_entry()


def test_disk_entry_under_another_key_is_corrupt(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    cache.put(key_of(6), make_entry())
    wrong = cache.path_of(key_of(7))
    wrong.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cache.path_of(key_of(6)), wrong)
    with pytest.warns(CacheCorruptionWarning, match="another key"):
        assert cache.get(key_of(7)) is None
    assert not wrong.exists()


def test_disk_lru_eviction(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    keys = [key_of(10 + n) for n in range(5)]
    for key in keys:
        cache.put(key, make_entry(os.urandom(1000)))
    sizes = [cache.path_of(k).stat().st_size for k in keys]
    base = time.time_ns() - 10_000 * 10**9  # well in the past
    for n, key in enumerate(keys):
        os.utime(cache.path_of(key), ns=(base + n * 10**9, base + n * 10**9))
    # A hit makes keys[0] the most recently used.
    assert cache.get(keys[0]) is not None
    assert cache.path_of(keys[0]).stat().st_mtime_ns > base + 5 * 10**9

    small = DiskCache(tmp_path, max_bytes=sizes[0] + sizes[3] + sizes[4])
    freed = small.evict()
    assert freed == sizes[1] + sizes[2]
    assert [k for k in keys if small.path_of(k).exists()] == [keys[0], keys[3], keys[4]]
    assert small.size_bytes() <= small.max_bytes
    assert small.evict() == 0


def test_disk_put_keeps_the_bound(tmp_path: Path) -> None:
    probe = DiskCache(tmp_path / "probe")
    probe.put(key_of(0), make_entry(bytes(1000)))
    size = probe.path_of(key_of(0)).stat().st_size

    cache = DiskCache(tmp_path / "c", max_bytes=5 * size)
    for n in range(40):
        cache.put(key_of(n), make_entry(bytes(1000)))
        assert cache.size_bytes() <= 5 * size
    assert cache.get(key_of(39)) is not None, "the newest entry survives"

    # An entry larger than the whole bound is not written at all.
    cache.put(key_of(99), make_entry(bytes(10 * size)))
    assert not cache.path_of(key_of(99)).exists()


def test_disk_eviction_removes_stale_temp_files(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    cache.put(key_of(1), make_entry())
    shard = cache.path_of(key_of(1)).parent
    stale = shard / f".{key_of(1)}.123.abc.tmp"
    fresh = shard / f".{key_of(1)}.456.def.tmp"  # a writer still at work
    stale.write_bytes(b"half an entry")
    fresh.write_bytes(b"half an entry")
    old = time.time_ns() - 2 * 3600 * 10**9
    os.utime(stale, ns=(old, old))
    assert cache.evict() == len(b"half an entry")
    assert not stale.exists()
    assert fresh.exists()
    assert cache.get(key_of(1)) is not None


# --------------------------------------------------------------------------- faults


def test_unusable_root_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    # A path under a regular file fails even for root, unlike chmod.
    with pytest.raises(CacheUnavailable) as info:
        DiskCache(blocker / "cache")
    assert isinstance(info.value, OSError)
    assert isinstance(info.value, AsyncCompError)
    assert info.value.errno is not None


def test_a_shard_that_is_a_file_is_healed(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    key = key_of(20)
    other = next(key_of(n) for n in range(21, 10_000) if key_of(n)[:2] == key[:2])
    cache.put(key, make_entry())
    shard = cache.path_of(key).parent
    shutil.rmtree(shard)
    shard.write_text("a file where the shard folder was")
    assert cache.get(other) is None  # a miss, quietly
    cache.put(other, make_entry())  # the shard is made again
    assert cache.get(other) == make_entry()
    assert cache.write_errors == 0


def test_an_entry_that_is_a_folder_is_healed(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    key = key_of(22)
    path = cache.path_of(key)
    path.mkdir(parents=True)
    (path / "junk").write_text("x")
    with pytest.warns(CacheCorruptionWarning, match="not a regular file"):
        assert cache.get(key) is None
    assert not path.exists()
    cache.put(key, make_entry())
    assert cache.get(key) == make_entry()
    # A folder that appears between a lookup and a put is replaced by the put.
    path.unlink()
    path.mkdir()
    cache.put(key, make_entry())
    assert cache.get(key) == make_entry()


def test_a_fifo_or_a_link_in_an_entrys_place_never_hangs_or_reads_forever(
    tmp_path: Path,
) -> None:
    cache = DiskCache(tmp_path)
    fifo_key, zero_key = key_of(23), key_of(24)
    fifo = cache.path_of(fifo_key)
    fifo.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(fifo)  # opened normally, a read would wait for a writer forever
    zero = cache.path_of(zero_key)
    zero.parent.mkdir(parents=True, exist_ok=True)
    zero.symlink_to("/dev/zero")  # followed, a read would fill memory
    with pytest.warns(CacheCorruptionWarning):
        assert cache.get(fifo_key) is None
    with pytest.warns(CacheCorruptionWarning):
        assert cache.get(zero_key) is None
    assert not fifo.exists() and not zero.is_symlink()
    cache.put(fifo_key, make_entry())
    assert cache.get(fifo_key) == make_entry()


def test_a_full_disk_warns_once_and_leaves_nothing_behind(tmp_path: Path) -> None:
    with full_disk(tmp_path) as full:
        # The folder exists but nothing more fits: the probe file fails half-written.
        with pytest.raises(CacheUnavailable):
            DiskCache(full / "cache")
        assert [p.name for p in full.rglob("*") if p.is_file()] == ["filler"]
    # A cache made in the room there was, on a disk that then has none for an entry.
    with full_disk(tmp_path, leave=16384) as full:
        (full / "room").unlink()
        cache = DiskCache(full / "cache")
        big = CacheEntry(b"x" * 200_000, "", {})
        with pytest.warns(CacheWriteWarning, match="write failed"):
            cache.put(key_of(25), big)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            cache.put(key_of(26), big)  # warned once already: silent now
        assert cache.write_errors == 2
        assert list(full.rglob("*.tmp")) == []  # nothing half-written left behind


def test_cache_folder_deleted_under_us(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path / "c")
    cache.put(key_of(30), make_entry())
    shutil.rmtree(tmp_path / "c")
    assert cache.get(key_of(30)) is None
    assert cache.size_bytes() == 0
    cache.put(key_of(31), make_entry())  # recreates the folders
    assert cache.get(key_of(31)) == make_entry()


# --------------------------------------------------------------------------- processes

N_KEYS = 20


def _payload(key: str, writer: int, n: int) -> CacheEntry:
    binary = f"{key}:{writer}:{n}:".encode() * random.Random(n).randint(10, 2000)
    digest = hashlib.sha256(binary).hexdigest()
    return CacheEntry(binary, f"log {writer} {n}", {"key": key, "sha256": digest})


def _valid(key: str, entry: CacheEntry) -> bool:
    meta = entry.metadata
    return bool(meta["key"] == key and meta["sha256"] == hashlib.sha256(entry.binary).hexdigest())


def _hammer(root: str, writer: int, seconds: float, max_bytes: int, out: Any) -> None:
    """A worker process: puts and gets the shared keys; reports what went wrong."""
    problems: list[str] = []
    hits = 0
    try:
        warnings.simplefilter("error")  # any cache warning is a failure here
        cache = DiskCache(Path(root), max_bytes=max_bytes)
        keys = [key_of(n) for n in range(N_KEYS)]
        rng = random.Random(writer)
        deadline = time.monotonic() + seconds
        n = 0
        while time.monotonic() < deadline:
            key = rng.choice(keys)
            if rng.random() < 0.5:
                cache.put(key, _payload(key, writer, n))
            else:
                got = cache.get(key)
                if got is not None:
                    hits += 1
                    if not _valid(key, got):
                        problems.append(f"invalid entry for {key}")
            if rng.random() < 0.02:
                cache.evict()
            n += 1
    except BaseException as exc:
        problems.append(repr(exc))
    out.put((writer, (problems, hits)))


def _run_processes(root: Path, max_bytes: int, seconds: float) -> None:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_hammer, args=(str(root), w, seconds, max_bytes, out)) for w in range(4)
    ]
    for p in procs:
        p.start()
    reports = dict(out.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert {w: problems for w, (problems, _) in reports.items()} == {w: [] for w in range(4)}
    assert all(hits > 0 for _, hits in reports.values()), "the workers did not overlap"


def test_concurrent_processes_same_keys(tmp_path: Path) -> None:
    DiskCache(tmp_path)  # create it once, so the workers race on entries only
    _run_processes(tmp_path, max_bytes=2**30, seconds=1.5)
    cache = DiskCache(tmp_path)
    for n in range(N_KEYS):
        key = key_of(n)
        got = cache.get(key)
        assert got is not None, f"key {n} lost"
        assert _valid(key, got)
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".entry"]
    assert leftovers == []


def test_concurrent_processes_with_eviction(tmp_path: Path) -> None:
    # A bound far below the working set: entries vanish under readers and evictors.
    _run_processes(tmp_path, max_bytes=200_000, seconds=1.0)
    cache = DiskCache(tmp_path, max_bytes=200_000)
    cache.evict()
    assert cache.size_bytes() <= 200_000
    for n in range(N_KEYS):
        got = cache.get(key_of(n))
        assert got is None or _valid(key_of(n), got)
    assert list(tmp_path.rglob("*.tmp")) == []


def test_file_format_is_documented_layout(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    key = key_of(40)
    entry = make_entry(b"BIN")
    cache.put(key, entry)
    data = cache.path_of(key).read_bytes()
    assert data[:8] == b"ACCACHE\0"
    assert int.from_bytes(data[8:12], "little") == CACHE_FORMAT_VERSION
    json_len = int.from_bytes(data[12:16], "little")
    header = json.loads(data[48 : 48 + json_len])
    assert header["key"] == key
    assert header["binary_len"] == 3
    assert data[48 + json_len :] == b"BIN"
