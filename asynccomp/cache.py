"""The storage layer of asynccomp's content-addressed compile cache.

A compiled kernel is stored under a key that hashes everything that decides its bytes
(:func:`cache_key`): the source, the backend and output format, the architecture, the
options, the compiler's identity and a fingerprint of the include folders
(:func:`include_identity`). Two levels hold the entries:

* :class:`MemoryCache`, an LRU dictionary bounded in bytes, for repeated jobs in one
  process (an autotuner re-asking for a kernel it built a minute ago);
* :class:`DiskCache`, one file per entry under ``<root>/v2/<key[:2]>/<key>.entry``,
  shared by every process and every run on the machine, bounded in bytes and trimmed
  least-recently-used first.

Both are safe to use from several threads; :class:`DiskCache` is also safe to share
between processes writing and reading the same keys at once: a write goes to a temp
file in the same folder and is renamed into place, so a reader sees either no entry or
a whole one. Every read is checked (magic bytes, format version, lengths, a sha256 over
the whole entry): a damaged file is a miss, is deleted, and raises a
:class:`CacheCorruptionWarning`. An I/O error while reading is a miss; one while writing
is a :class:`CacheWriteWarning` (once per cache) and the entry is simply not kept. Only
the :class:`DiskCache` constructor raises, :class:`CacheUnavailable`, when the folder
cannot be created or written.

>>> import tempfile
>>> from pathlib import Path
>>> key = cache_key(source="__global__ void k() {}", backend="nvrtc", output="cubin",
...                 arch="sm_90a", options=["-O3"], compiler_identity="nvrtc 13.0",
...                 include_identity="")
>>> entry = CacheEntry(binary=b"\\x7fELF...", log="", metadata={"elapsed": 0.12})
>>> with tempfile.TemporaryDirectory() as folder:
...     disk = DiskCache(Path(folder))
...     disk.put(key, entry)
...     disk.get(key) == entry
True

The cache folder defaults to ``$ASYNCCOMP_CACHE_DIR``, else the user cache folder
(``~/.cache/asynccomp`` on Linux); see :func:`default_cache_dir`. Deleting it at any
time is safe, even while processes use it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import secrets
import struct
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import platformdirs

from .errors import AsyncCompError

__all__ = (
    "CACHE_FORMAT_VERSION",
    "CacheCorruptionWarning",
    "CacheEntry",
    "CacheReadWarning",
    "CacheUnavailable",
    "CacheWarning",
    "CacheWriteWarning",
    "DiskCache",
    "MemoryCache",
    "cache_key",
    "clear_include_identity_cache",
    "default_cache_dir",
    "entry_size",
    "include_identity",
)

#: Bumped whenever the key recipe or the file format changes: it is hashed into every
#: key and names the on-disk subfolder, so old entries are never misread, only unused.
CACHE_FORMAT_VERSION: int = 2

#: The environment variable that overrides :func:`default_cache_dir`.
CACHE_DIR_ENV = "ASYNCCOMP_CACHE_DIR"


class CacheUnavailable(AsyncCompError, OSError):
    """The disk cache folder cannot be created or written."""


class CacheWarning(UserWarning):
    """Base class of the warnings the compile cache issues."""


class CacheCorruptionWarning(CacheWarning):
    """A cache file was damaged (truncated, altered, not a cache entry); it was deleted."""


class CacheReadWarning(CacheWarning):
    """An I/O error made a cache read fail; the lookup counted as a miss."""


class CacheWriteWarning(CacheWarning):
    """An I/O error made a cache write fail; the entry was not kept."""


@dataclass(frozen=True)
class CacheEntry:
    """One cached compile.

    Attributes:
        binary: the compiled bytes (cubin, fatbin or PTX).
        log: the compiler log of the original compile.
        metadata: JSON-serialisable details (backend, output, arch, elapsed, resources...).
            Entries are shared between callers: treat it as read-only.
        ok: ``False`` when the entry records a failed compile (failures are only
            cached when asked for).
    """

    binary: bytes
    log: str
    metadata: Mapping[str, Any]
    ok: bool = True


# --------------------------------------------------------------------------- keys


def cache_key(
    *,
    source: str,
    backend: str,
    output: str,
    arch: str,
    options: Sequence[str],
    compiler_identity: str,
    include_identity: str,
    program_name: str = "",
) -> str:
    """The cache key of one compile: a sha256 hex digest (64 characters).

    The small fields are encoded as one JSON list, which is unambiguous (``("ab", "c")``
    and ``("a", "bc")`` differ, as do ``["-a", "-b"]`` and ``["-a -b"]``), followed by
    the source's UTF-8 bytes, whose length the JSON records. The source is hashed as it
    is rather than JSON-escaped: escaping a 100 KB kernel cost half a millisecond, most
    of a cache hit. Option order is kept: it can change what the compiler does.
    ``program_name`` is included because NVRTC writes it into diagnostics and debug info.
    """
    if isinstance(options, (str, bytes)):
        # A string is a Sequence[str] of characters: almost surely a caller's mistake.
        raise TypeError("options must be a sequence of strings, not a single string")
    # surrogatepass: any Python str encodes, and distinct strs give distinct bytes.
    text = source.encode("utf-8", "surrogatepass")
    fields = [
        "asynccomp-compile-cache",
        CACHE_FORMAT_VERSION,
        len(text),
        backend,
        output,
        arch,
        list(options),
        compiler_identity,
        include_identity,
        program_name,
    ]
    # ensure_ascii escapes lone surrogates too, so any Python str encodes.
    header = json.dumps(fields, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    digest = hashlib.sha256(header)
    digest.update(b"\n")
    digest.update(text)
    return digest.hexdigest()


def default_cache_dir() -> Path:
    """``$ASYNCCOMP_CACHE_DIR`` when set (and not empty), else the user cache folder
    (``platformdirs.user_cache_dir("asynccomp")``, e.g. ``~/.cache/asynccomp``)."""
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_cache_dir("asynccomp"))


# Files whose change means the headers changed: the version headers of CUDA and CCCL
# sit in subfolders that the top-level listing below does not see.
_VERSION_FILES: tuple[str, ...] = (
    "cuda/std/version",
    "cuda/version",
    "cuda/std/__cccl/version.h",
    "thrust/version.h",
    "cub/version.cuh",
    "crt/host_config.h",
    "crt/host_defines.h",
)


def include_identity(dirs: Sequence[Path]) -> str:
    """A cheap fingerprint (sha256 hex) of the include folders, for :func:`cache_key`.

    For each folder, in order: its resolved path, its own mtime and size, the mtime and
    size of every file directly inside it, and of a few version headers in subfolders
    (``cuda/std/version``, ``thrust/version.h``...). Installing or upgrading a toolkit
    or the CCCL/runtime wheels changes it; missing folders are allowed.

    It does not read file contents, so a header edited in place in a *subfolder* (other
    than those version files) goes unnoticed; hash such headers into
    ``compiler_identity`` yourself when you edit them. The result is cached per process
    (keyed by the tuple of paths) so repeated calls cost about a microsecond; call
    :func:`clear_include_identity_cache` after changing headers in a running process.
    """
    return _include_identity(tuple(dirs))


def clear_include_identity_cache() -> None:
    """Forget the fingerprints :func:`include_identity` computed in this process."""
    _include_identity.cache_clear()


def _stat_pair(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


@functools.lru_cache(maxsize=64)
def _include_identity(dirs: tuple[Path, ...]) -> str:
    parts: list[object] = []
    for d in dirs:
        resolved = os.path.realpath(d)
        listing: list[list[object]] = []
        try:
            with os.scandir(resolved) as it:
                for item in it:
                    try:
                        if item.is_file():
                            st = item.stat()
                            listing.append([item.name, st.st_mtime_ns, st.st_size])
                    except OSError:
                        continue  # vanished or unreadable: leave it out
        except OSError:
            pass  # missing or not a folder: its (missing) stat says so below
        listing.sort()
        base = Path(resolved)
        versions = [[v, _stat_pair(base / v)] for v in _VERSION_FILES]
        parts.append([resolved, _stat_pair(base), listing, versions])
    encoded = json.dumps(parts, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(encoded.encode("ascii")).hexdigest()


# --------------------------------------------------------------------------- memory

# What an entry costs beyond its binary and log (the objects, the metadata dict): a
# fixed guess, because measuring the metadata on every put would cost more than it tells.
_ENTRY_OVERHEAD = 512


def entry_size(entry: CacheEntry) -> int:
    """The bytes :class:`MemoryCache` charges for ``entry`` (an estimate)."""
    return len(entry.binary) + len(entry.log) + _ENTRY_OVERHEAD


class MemoryCache:
    """An in-process LRU cache of entries, bounded by :func:`entry_size` in bytes.

    Thread-safe: the engine uses it from the event loop and from worker threads.
    """

    def __init__(self, max_bytes: int = 256 * 2**20) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, not {max_bytes}")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, tuple[CacheEntry, int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, key: str) -> CacheEntry | None:
        """The entry under ``key`` (now the most recently used one), or ``None``."""
        with self._lock:
            item = self._entries.get(key)
            if item is None:
                return None
            self._entries.move_to_end(key)
            return item[0]

    def put(self, key: str, entry: CacheEntry) -> None:
        """Keep ``entry`` under ``key``, evicting least-recently-used entries to stay
        within ``max_bytes``. An entry larger than ``max_bytes`` is not kept."""
        size = entry_size(entry)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._size -= old[1]
            if size > self.max_bytes:
                return
            self._entries[key] = (entry, size)
            self._size += size
            while self._size > self.max_bytes:
                _, (_, evicted) = self._entries.popitem(last=False)
                self._size -= evicted

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is held (without refreshing its recency)."""
        with self._lock:
            return key in self._entries

    @property
    def size_bytes(self) -> int:
        """The bytes held, as :func:`entry_size` counts them."""
        with self._lock:
            return self._size

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()
            self._size = 0

    def __repr__(self) -> str:
        return f"MemoryCache({len(self)} entries, {self.size_bytes}/{self.max_bytes} bytes)"


# --------------------------------------------------------------------------- disk

# File layout (all integers little-endian):
#   magic    8 bytes   b"ACCACHE\0"
#   version  u32       CACHE_FORMAT_VERSION
#   json_len u32       length of the JSON header
#   digest   32 bytes  sha256 over bytes [0:16] and everything after the fixed header
#   JSON header        {"key", "ok", "log", "metadata", "binary_len"}
#   binary             binary_len bytes
# The digest sits in the fixed header rather than in the JSON so that it covers the JSON
# too: a flipped byte in the log or the metadata is caught, not only one in the binary.
# sha256 rather than blake2b because OpenSSL's (SHA-NI) is about twice as fast here.
_MAGIC = b"ACCACHE\0"
_FIXED = struct.Struct("<8sII32s")
_FIXED_SIZE = _FIXED.size  # 48
_SUFFIX = ".entry"
_TMP_SUFFIX = ".tmp"
_KEY_RE = re.compile(r"[0-9a-f]{64}")

# A hit rewrites the mtime (the LRU clock) only when it is older than this: repeated
# hits on a hot entry then cost no inode write, and LRU order finer than this is moot.
_TOUCH_AFTER_NS = 10 * 10**9
# Temp files older than this belong to a writer that died; eviction removes them.
_STALE_TMP_NS = 3600 * 10**9
# When a put finds the cache over its bound, it trims to this fraction of it, so that
# a full cache does not rescan the folder on every following put.
_LOW_WATER = 0.9
# The running size estimate only sees this process's writes; rescan this often so the
# growth due to other processes is noticed too.
_RESCAN_NS = 300 * 10**9


class _Corrupt(Exception):
    """An entry file failed verification (internal)."""


class _FileInfo(NamedTuple):
    mtime_ns: int
    size: int
    path: str


def _encode(key: str, entry: CacheEntry) -> list[bytes]:
    """The file's bytes, in pieces (so the binary is not copied once more)."""
    try:
        header = json.dumps(
            {
                "key": key,
                "ok": bool(entry.ok),
                "log": entry.log,
                "metadata": dict(entry.metadata),
                "binary_len": len(entry.binary),
            },
            ensure_ascii=True,
            separators=(",", ":"),
        ).encode("ascii")
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cache entry metadata is not JSON-serialisable: {exc}") from exc
    prefix = _MAGIC + struct.pack("<II", CACHE_FORMAT_VERSION, len(header))
    digest = hashlib.sha256(prefix)
    digest.update(header)
    digest.update(entry.binary)
    return [prefix, digest.digest(), header, entry.binary]


def _decode(key: str, data: bytes) -> CacheEntry:
    if len(data) < _FIXED_SIZE:
        raise _Corrupt(f"{len(data)} bytes, shorter than the header")
    magic, version, json_len, digest = _FIXED.unpack_from(data)
    if magic != _MAGIC:
        raise _Corrupt("not a cache entry (bad magic bytes)")
    if version != CACHE_FORMAT_VERSION:
        raise _Corrupt(f"format version {version}, expected {CACHE_FORMAT_VERSION}")
    body = memoryview(data)[_FIXED_SIZE:]
    if json_len > len(body):
        raise _Corrupt("truncated (header runs past the end)")
    check = hashlib.sha256(memoryview(data)[:16])
    check.update(body)
    if check.digest() != digest:
        raise _Corrupt("checksum mismatch")
    try:
        header = json.loads(bytes(body[:json_len]))
    except ValueError as exc:
        raise _Corrupt(f"bad JSON header: {exc}") from None
    if not isinstance(header, dict):
        raise _Corrupt("bad JSON header: not an object")
    log, metadata, ok = header.get("log"), header.get("metadata"), header.get("ok")
    binary_len = header.get("binary_len")
    if header.get("key") != key:
        raise _Corrupt("the entry belongs to another key")
    if not (isinstance(log, str) and isinstance(metadata, dict) and isinstance(ok, bool)):
        raise _Corrupt("bad JSON header: missing or mistyped fields")
    if binary_len != len(body) - json_len:
        raise _Corrupt("binary length mismatch")
    return CacheEntry(binary=data[_FIXED_SIZE + json_len :], log=log, metadata=metadata, ok=ok)


class DiskCache:
    """A byte-bounded cache of entries on disk, shared between threads and processes.

    Entries live in ``root / "v2" / key[:2] / (key + ".entry")``. A hit refreshes the
    file's mtime, and eviction removes the files with the oldest mtimes first, so the
    bound is kept least-recently-used first across every process using the folder.

    ``put`` keeps a running estimate of the folder's size (one scan the first time,
    then its own writes, rescanned every few minutes) and trims only when the estimate
    passes ``max_bytes``, so hits and puts stay cheap. Other processes' writes can take
    the folder a little past the bound until the next rescan.

    Writes are not fsynced by default (set ``fsync = True`` on the instance to change
    that): every read is verified, so a file torn by a crash reads as a miss and is
    deleted, never as a wrong binary, and a sync per entry would cost milliseconds on
    every compile of a sweep for a cache that can always be rebuilt.

    Args:
        root: the cache folder; created (with its parents) when missing.
        max_bytes: the bound on the total size of the entry files.

    Raises:
        CacheUnavailable: ``root`` cannot be created or written.
    """

    #: fsync each entry (and its folder) before it becomes visible.
    fsync: bool = False

    def __init__(self, root: Path, max_bytes: int = 4 * 2**30) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, not {max_bytes}")
        self.root = Path(root)
        self.max_bytes = max_bytes
        #: The versioned folder the entries live in.
        self.directory = self.root / f"v{CACHE_FORMAT_VERSION}"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            # Creating the folder is not enough (read-only mounts, foreign owners):
            # write and remove a real file to be sure puts can work.
            probe = self._tmp_name(self.directory, "probe")
            with open(probe, "xb") as f:
                f.write(b"probe")
            probe.unlink()
        except OSError as exc:
            error = CacheUnavailable(f"cache folder {self.directory} is not usable: {exc}")
            error.errno = exc.errno
            raise error from exc
        self._lock = threading.Lock()
        self._evict_lock = threading.Lock()
        self._estimate: int | None = None
        self._scanned_at = 0
        self._warned: set[type[Warning]] = set()
        #: How many reads and writes failed with an I/O error, and the last such error.
        self.read_errors = 0
        self.write_errors = 0
        self.last_error: OSError | None = None

    def __repr__(self) -> str:
        return f"DiskCache({str(self.root)!r}, max_bytes={self.max_bytes})"

    # -- paths

    def path_of(self, key: str) -> Path:
        """The file that holds (or would hold) ``key``'s entry."""
        return self._path(_check_key(key))

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / (key + _SUFFIX)

    @staticmethod
    def _tmp_name(folder: Path, key: str) -> Path:
        # Unique across processes (pid) and threads (random); the leading dot and the
        # suffix keep scans and readers from taking it for an entry.
        return folder / f".{key}.{os.getpid()}.{secrets.token_hex(6)}{_TMP_SUFFIX}"

    # -- reading

    def get(self, key: str) -> CacheEntry | None:
        """The entry under ``key``, or ``None`` (missing, damaged or unreadable)."""
        path = self._path(_check_key(key))
        try:
            with open(path, "rb", buffering=0) as f:
                st = os.fstat(f.fileno())
                data = f.read()
                try:
                    entry = _decode(key, data)
                except _Corrupt as exc:
                    self._discard(path, st, str(exc))
                    return None
                if time.time_ns() - st.st_mtime_ns > _TOUCH_AFTER_NS:
                    self._touch(f.fileno(), path)
                return entry
        except FileNotFoundError:
            return None
        except OSError as exc:
            with self._lock:
                self.read_errors += 1
                self.last_error = exc
            self._warn_once(
                CacheReadWarning, f"compile-cache read failed ({exc}); treated as a miss", 3
            )
            return None

    @staticmethod
    def _touch(fd: int, path: Path) -> None:
        try:
            # Through the descriptor where possible: it is the file just verified.
            os.utime(fd if os.utime in os.supports_fd else path)
        except OSError:
            pass  # e.g. a file another user wrote: LRU order is best-effort

    def _discard(self, path: Path, st: os.stat_result, reason: str) -> None:
        try:
            # Only remove the file that was read: a writer may have just replaced it.
            now = path.stat()
            if (now.st_ino, now.st_dev) == (st.st_ino, st.st_dev):
                path.unlink()
        except OSError:
            pass  # already gone (another process got there first) or not removable
        # Warn last: under ``-W error`` the warning raises, and the file is gone by then.
        warnings.warn(
            f"corrupt compile-cache entry {path} deleted: {reason}",
            CacheCorruptionWarning,
            stacklevel=3,
        )

    # -- writing

    def put(self, key: str, entry: CacheEntry) -> None:
        """Store ``entry`` under ``key`` (atomically; replaces an existing entry).

        Never raises for an I/O error: the first one issues a :class:`CacheWriteWarning`
        and the entry is not kept. An entry larger than ``max_bytes`` is not kept.

        Raises:
            TypeError: the metadata is not JSON-serialisable (a bug in the caller).
        """
        path = self._path(_check_key(key))
        pieces = _encode(key, entry)
        size = sum(len(p) for p in pieces)
        if size > self.max_bytes:
            return
        try:
            self._write(path, key, pieces)
        except OSError as exc:
            self._write_failed(exc)
            return
        now = time.monotonic_ns()
        with self._lock:
            if self._estimate is not None:
                self._estimate += size
            due = (
                self._estimate is None
                or self._estimate > self.max_bytes
                or now - self._scanned_at > _RESCAN_NS
            )
        if due:
            self._trim(int(self.max_bytes * _LOW_WATER), blocking=False)

    def _write(self, path: Path, key: str, pieces: list[bytes]) -> None:
        folder = path.parent
        tmp = self._tmp_name(folder, key)
        try:
            try:
                self._write_new(tmp, pieces)
            except FileNotFoundError:
                # First entry of this shard, or the folder was deleted under us.
                folder.mkdir(parents=True, exist_ok=True)
                self._write_new(tmp, pieces)
            # Atomic: readers see the old entry or the new one, never a partial file;
            # of two processes writing one key, the last rename wins, both whole.
            tmp.replace(path)
        except BaseException:
            try:
                tmp.unlink()
            except OSError:
                pass
            raise
        if self.fsync:
            _fsync_dir(folder)

    def _write_new(self, tmp: Path, pieces: list[bytes]) -> None:
        with open(tmp, "xb") as f:  # "x": never write into another writer's file
            for piece in pieces:
                f.write(piece)
            if self.fsync:
                f.flush()
                os.fsync(f.fileno())

    def _write_failed(self, exc: OSError, stacklevel: int = 4) -> None:
        with self._lock:
            self.write_errors += 1
            self.last_error = exc
        self._warn_once(
            CacheWriteWarning, f"compile-cache write failed ({exc}); not cached", stacklevel
        )

    def _warn_once(self, category: type[Warning], message: str, stacklevel: int) -> None:
        # Once per cache and kind: a full disk would otherwise warn for every job of a
        # sweep. The counters and last_error keep the full record.
        with self._lock:
            if category in self._warned:
                return
            self._warned.add(category)
        warnings.warn(f"{message} [cache {self.directory}]", category, stacklevel=stacklevel)

    # -- size and eviction

    def _scan(self) -> Iterator[tuple[bool, _FileInfo]]:
        """``(is_entry, info)`` for every entry file and temp file; tolerates files
        and shard folders vanishing under it."""
        with os.scandir(self.directory) as shards:
            for shard in shards:
                try:
                    if not shard.is_dir(follow_symlinks=False):
                        continue
                    with os.scandir(shard.path) as files:
                        items = list(files)
                except OSError:
                    continue
                for item in items:
                    name = item.name
                    is_entry = name.endswith(_SUFFIX) and not name.startswith(".")
                    if not is_entry and not name.endswith(_TMP_SUFFIX):
                        continue
                    try:
                        st = item.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    yield is_entry, _FileInfo(st.st_mtime_ns, st.st_size, item.path)

    def size_bytes(self) -> int:
        """The total size of the entry files now (a fresh scan of the folder)."""
        try:
            total = sum(info.size for is_entry, info in self._scan() if is_entry)
        except OSError:
            return 0
        with self._lock:
            self._estimate = total
            self._scanned_at = time.monotonic_ns()
        return total

    def evict(self) -> int:
        """Trim the folder to ``max_bytes``, least-recently-used entries first, and
        remove temp files left by dead writers; returns the bytes freed."""
        return self._trim(self.max_bytes, blocking=True)

    def _trim(self, target: int, *, blocking: bool) -> int:
        """Scan the folder (refreshing the size estimate) and, when it holds more than
        ``max_bytes``, delete the oldest entries until it holds at most ``target``."""
        # One sweep at a time per instance; a put that finds one running just goes on.
        if not self._evict_lock.acquire(blocking=blocking):
            return 0
        try:
            return self._trim_locked(target)
        except OSError as exc:
            # Only the listing of the versioned folder itself gets here.
            self._write_failed(exc, stacklevel=5)
            return 0
        finally:
            self._evict_lock.release()

    def _trim_locked(self, target: int) -> int:
        entries: list[_FileInfo] = []
        stale: list[_FileInfo] = []
        stale_before = time.time_ns() - _STALE_TMP_NS
        for is_entry, info in self._scan():
            if is_entry:
                entries.append(info)
            elif info.mtime_ns < stale_before:
                stale.append(info)
        total = sum(info.size for info in entries)
        freed = sum(_unlink(info) for info in stale)
        if total > self.max_bytes:
            entries.sort()  # oldest mtime first: least recently used
            for info in entries:
                if total <= target:
                    break
                # One already gone (another process evicted it) counts as gone but
                # not as freed by us.
                freed += _unlink(info)
                total -= info.size
        with self._lock:
            self._estimate = total
            self._scanned_at = time.monotonic_ns()
        return freed


def _unlink(info: _FileInfo) -> int:
    try:
        Path(info.path).unlink()
    except OSError:
        return 0
    return info.size


def _fsync_dir(folder: Path) -> None:
    # Makes the rename durable on POSIX; not possible (nor needed) on Windows.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _check_key(key: str) -> str:
    # Keys become file names: accept only what cache_key makes, which also rules out
    # path tricks such as "../".
    if not isinstance(key, str) or _KEY_RE.fullmatch(key) is None:
        raise ValueError(f"not a cache key (64 lowercase hex digits): {key!r}")
    return key
