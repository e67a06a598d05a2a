"""The disk tier: one verified file per entry, shared by every process on the machine.

Entries live under ``<root>/v<format>/<key[:2]>/<key>.entry``. A write goes to a temp
file in the same folder and is renamed into place, so a reader sees either no entry or a
whole one. Every read is checked (magic bytes, format version, lengths, a sha256 over
the whole entry): a damaged file is a miss, is deleted, and issues a
:class:`CacheCorruptionWarning`. An I/O error while reading is a miss; one while writing
is a :class:`CacheWriteWarning` (once per cache) and the entry is simply not kept. These
warnings are logged too and never raise, not even under ``-W error`` (see
:func:`~asynccomp.cache._entry.warn_or_log`): a cache's trouble never fails a compile.
Only the :class:`DiskCache` constructor raises, :class:`CacheUnavailable`, when the
folder cannot be created or written.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
import threading
import time
from pathlib import Path

from .._perms import make_folders, open_new, umask_of
from ..errors import CacheUnavailable
from ._disk_folder import (
    SUFFIX,
    TMP_SUFFIX,
    FileInfo,
    check_entries,
    check_key,
    remove,
    scan,
    unlink,
)
from ._entry import (
    CacheCorruptionWarning,
    CacheEntry,
    CacheReadWarning,
    CacheWriteWarning,
    warn_or_log,
)
from ._format import Corrupt, decode, encode, read_at_most
from ._keys import CACHE_FORMAT_VERSION

__all__ = ("DiskCache",)

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
        umask: the modes of the files and folders it makes (``None``:
            ``$ASYNCCOMP_UMASK``, else 077, private to the user; see
            :mod:`asynccomp._perms`): entries hold compile logs, which quote sources.

    Raises:
        CacheUnavailable: ``root`` cannot be created or written.
    """

    #: fsync each entry (and its folder) before it becomes visible.
    fsync: bool = False

    def __init__(self, root: Path, max_bytes: int = 4 * 2**30, *, umask: int | None = None) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, not {max_bytes}")
        self.root = Path(root)
        self.umask = umask_of(umask)
        self.max_bytes = max_bytes
        #: The versioned folder the entries live in.
        self.directory = self.root / f"v{CACHE_FORMAT_VERSION}"
        probe = self._tmp_name(self.directory, "probe")
        try:
            make_folders(self.directory, self.umask)
            # Creating the folder is not enough (read-only mounts, foreign owners, a
            # full disk): write and remove a real file to be sure puts can work.
            with open(probe, "xb") as f:
                f.write(b"probe")
        except OSError as exc:
            error = CacheUnavailable(f"cache folder {self.directory} is not usable: {exc}")
            error.errno = exc.errno
            raise error from exc
        finally:
            # Also when the write failed halfway (a full disk): no probe is left behind.
            try:
                probe.unlink()
            except OSError:
                pass
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
        return self._path(check_key(key))

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / (key + SUFFIX)

    @staticmethod
    def _tmp_name(folder: Path, key: str) -> Path:
        # Unique across processes (pid) and threads (random); the leading dot and the
        # suffix keep scans and readers from taking it for an entry.
        return folder / f".{key}.{os.getpid()}.{secrets.token_hex(6)}{TMP_SUFFIX}"

    # -- reading

    def get(self, key: str) -> CacheEntry | None:
        """The entry under ``key``, or ``None`` (missing, damaged or unreadable).

        The file is opened without following a link and without blocking, must be a
        regular file, and is read up to the size it had when opened: a FIFO, a link to
        ``/dev/zero`` or a folder in an entry's place is a miss (and is removed), never a
        hang or an unbounded read.
        """
        path = self._path(check_key(key))
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return None  # no entry (or a file where its shard belongs: a put heals it)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EISDIR):  # a link or a folder
                self._heal(path, "not a regular file")
                return None
            self._read_failed(exc)
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self._heal(path, "not a regular file")
                return None
            data = read_at_most(fd, st.st_size)
            try:
                entry = decode(key, data)
            except Corrupt as exc:
                self._discard(path, st, str(exc))
                return None
            if time.time_ns() - st.st_mtime_ns > _TOUCH_AFTER_NS:
                self._touch(fd, path)
            return entry
        except OSError as exc:
            self._read_failed(exc)
            return None
        finally:
            os.close(fd)

    def _read_failed(self, exc: OSError) -> None:
        with self._lock:
            self.read_errors += 1
            self.last_error = exc
        self._warn_once(CacheReadWarning, f"compile-cache read failed ({exc}); treated as a miss")

    def _heal(self, path: Path, reason: str) -> None:
        """Remove what sits in an entry's place and is not an entry file (a folder, a
        link, a FIFO), so the next put can write one there."""
        try:
            remove(path)
        except OSError:
            return
        warn_or_log(f"compile-cache entry {path} was {reason}; removed", CacheCorruptionWarning)

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
        warn_or_log(f"corrupt compile-cache entry {path} deleted: {reason}", CacheCorruptionWarning)

    # -- writing

    def put(self, key: str, entry: CacheEntry) -> None:
        """Store ``entry`` under ``key`` (atomically; replaces an existing entry).

        Never raises for an I/O error: the first one issues a :class:`CacheWriteWarning`
        and the entry is not kept. An entry larger than ``max_bytes`` is not kept.

        Raises:
            TypeError: the metadata is not JSON-serialisable (a bug in the caller).
        """
        path = self._path(check_key(key))
        pieces = encode(key, entry)
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
            except (FileNotFoundError, NotADirectoryError):
                # First entry of this shard, the folder was deleted under us, or a file
                # sits where the shard folder belongs: make (or heal) the shard.
                if folder.exists() and not folder.is_dir():
                    folder.unlink()
                make_folders(folder, self.umask)
                self._write_new(tmp, pieces)
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)  # a folder in the entry's place: rename cannot replace it
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
        # O_EXCL: never write into another writer's file.
        fd = open_new(tmp, os.O_WRONLY | os.O_EXCL | os.O_CLOEXEC, self.umask)
        with os.fdopen(fd, "wb") as f:
            for piece in pieces:
                f.write(piece)
            if self.fsync:
                f.flush()
                os.fsync(f.fileno())

    def _write_failed(self, exc: OSError) -> None:
        with self._lock:
            self.write_errors += 1
            self.last_error = exc
        self._warn_once(CacheWriteWarning, f"compile-cache write failed ({exc}); not cached")

    def _warn_once(self, category: type[Warning], message: str) -> None:
        # Once per cache and kind: a full disk would otherwise warn for every job of a
        # sweep. The counters and last_error keep the full record.
        with self._lock:
            if category in self._warned:
                return
            self._warned.add(category)
        warn_or_log(f"{message} [cache {self.directory}]", category)

    # -- size and eviction

    def count(self) -> tuple[int, int]:
        """(entries, bytes) in the folder now."""
        try:
            infos = [info for is_entry, info in scan(self.directory) if is_entry]
        except OSError:
            return 0, 0
        return len(infos), sum(info.size for info in infos)

    def verify(self) -> tuple[int, list[tuple[Path, str]]]:
        """Read and check every entry; remove the bad ones. Returns (good entries,
        [(path, what was wrong)] for those removed)."""
        return check_entries(self.directory)

    def clear(self) -> int:
        """Remove every entry (and temp file); returns how many entries went."""
        removed = 0
        try:
            for is_entry, info in list(scan(self.directory)):
                removed += is_entry and unlink(info) > 0
        except OSError:
            pass
        with self._lock:
            self._estimate = 0
        return removed

    def size_bytes(self) -> int:
        """The total size of the entry files now (a fresh scan of the folder)."""
        try:
            total = sum(info.size for is_entry, info in scan(self.directory) if is_entry)
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
            self._write_failed(exc)
            return 0
        finally:
            self._evict_lock.release()

    def _trim_locked(self, target: int) -> int:
        entries: list[FileInfo] = []
        stale: list[FileInfo] = []
        stale_before = time.time_ns() - _STALE_TMP_NS
        for is_entry, info in scan(self.directory):
            if is_entry:
                entries.append(info)
            elif info.mtime_ns < stale_before:
                stale.append(info)
        total = sum(info.size for info in entries)
        freed = sum(unlink(info) for info in stale)
        if total > self.max_bytes:
            entries.sort()  # oldest mtime first: least recently used
            for info in entries:
                if total <= target:
                    break
                # One already gone (another process evicted it) counts as gone but
                # not as freed by us.
                freed += unlink(info)
                total -= info.size
        with self._lock:
            self._estimate = total
            self._scanned_at = time.monotonic_ns()
        return freed


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
