"""The engine's side of the cache: compiler outputs keyed by what decides their bytes.

Three tiers, checked in order: an in-memory LRU bounded in bytes
(:class:`~asynccomp.cache.MemoryCache`), an on-disk store shared between processes
(:class:`~asynccomp.cache.DiskCache`), and optionally a remote store shared between
machines (:class:`~asynccomp.cache.RemoteCache`, e.g. Redis). The key
(:func:`~asynccomp.cache.cache_key`) is a SHA-256 over:

- the source text exactly as the compiler receives it;
- its program (file) name, but only when the name can reach the output: line or debug
  info among the options, or ``__FILE__`` (or ``assert``, which expands to it) in the
  source. Otherwise identical sources under different job names share one entry, and
  one compile in flight (the bytes are the same: tested);
- the backend, the output format and the architecture;
- the final option list (NVRTC's options, or nvcc's whole argv, nvcc's path included);
- the compiler's identity and version (NVRTC version and library path; nvcc's version
  and path), and a fingerprint of the toolkit's include folders;
- the cache format version.

Headers read from outside the toolkit are not in the key: each entry lists them with
their digests (:mod:`._deps`), and a hit whose dependencies changed is a miss.

Failed compiles are not cached unless ``Engine(cache_failures=True)``. Memory lookups
are plain calls; disk lookups, dependency checks and writes block, and the scheduler
runs them in threads; remote lookups are async and remote writes go through a writer
task of the engine's.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, NamedTuple

import anyio.to_thread

from ..backends import BackendOutput, PreparedCompile, backend_class
from ..errors import CacheUnavailable
from ..toolkit import Toolkit
from ._deps import Dependency, dependencies_changed
from ._disk import DiskCache, decode_entry
from ._entry import CacheDirWarning, CacheEntry
from ._keys import cache_key, include_identity
from ._memory import MemoryCache
from ._relocate import relocated_dependencies, relocated_options, rooted_dependencies
from ._remote import RemoteCache, warn_forged

__all__ = (
    "CacheStats",
    "RemoteVerdict",
    "ResultCache",
    "check_cost",
    "compiler_identity",
    "has_dependencies",
    "key_identity",
    "name_reaches_output",
)

STATS_FILE = "stats.json"

_NAME_IN_OUTPUT_OPTIONS = (
    "-lineinfo",
    "--generate-line-info",
    "-G",
    "--device-debug",
    "-g",
    "--debug",
)
# Plain substring tests: fast on sources of megabytes (a regular expression with these
# alternatives cost 0.6 ms a hit). "assert" also matches static_assert: a conservative
# answer, which only costs sharing.
_NAME_IN_SOURCE = ("__FILE__", "__FILE_NAME__", "__BASE_FILE__", "assert")


def name_reaches_output(prepared: PreparedCompile) -> bool:
    """Whether the program (file) name can change the output bytes: line or debug info,
    or a source that spells ``__FILE__`` (``assert`` expands to it)."""
    options = prepared.options
    if any(o in _NAME_IN_OUTPUT_OPTIONS or o.startswith("-G") for o in options):
        return True
    source = prepared.source
    return any(word in source for word in _NAME_IN_SOURCE)


def relocates(prepared: PreparedCompile) -> bool:
    """Whether the key hashes the paths under ``$ASYNCCOMP_BASE_DIR`` relative to the
    working folder (:mod:`._relocate`): the base folder is set and no path can reach
    the output through the options or the source."""
    return (
        prepared.base_dir is not None
        and prepared.cwd is not None
        and not name_reaches_output(prepared)
    )


def _unnamed(prepared: PreparedCompile) -> tuple[str, ...]:
    """The options with the job's own file names (nvcc's argv names its source, output
    and dependency file) in a form that does not depend on the name."""
    stem = prepared.filename.rsplit(".", 1)[0]
    names = {
        prepared.filename: "<source>",
        prepared.binary_name: "<output>",
        f"{stem}.d": "<depfile>",
    }
    return tuple(names.get(option, option) for option in prepared.options)


def compiler_identity(backend: str, toolkit: Toolkit) -> tuple[str, tuple[Path, ...]]:
    """(identity string, include folders) of the compiler a backend runs: the
    backend's own (:meth:`~asynccomp.backends.CompilerBackend.identity`)."""
    return backend_class(backend).identity(toolkit)


def key_identity(backend: str, toolkit: Toolkit) -> tuple[str, str]:
    """What a cache key says of the compiler a backend runs: its identity string and
    the fingerprint of the headers it reads (both hashed into every key)."""
    compiler, includes = compiler_identity(backend, toolkit)
    return compiler, include_identity(includes)


@dataclass
class CacheStats:
    """Lookups answered by each tier, and what the cache did (an engine's, or summed
    over every engine that used a cache folder: ``asynccomp cache stats``)."""

    memory_hits: int = 0
    disk_hits: int = 0
    remote_hits: int = 0
    misses: int = 0
    stale: int = 0  # entries whose dependencies changed (counted as misses too)
    stores: int = 0
    remote_stores: int = 0
    remote_errors: int = 0
    forged: int = 0  # remote entries that failed authentication (counted as misses too)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _save_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    # What :meth:`save` has added to the folder's totals already.
    _saved: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return {f.name: getattr(self, f.name) for f in fields(self) if f.name[0] != "_"}

    def unsaved(self) -> dict[str, int]:
        """The counts not added to the folder's totals yet."""
        with self._lock:
            return {
                f.name: getattr(self, f.name) - self._saved.get(f.name, 0)
                for f in fields(self)
                if f.name[0] != "_"
            }

    @staticmethod
    def load(root: Path) -> dict[str, int]:
        """The totals saved in a cache folder (zeros when there are none)."""
        try:
            saved = json.loads((root / STATS_FILE).read_text())
        except (OSError, ValueError):
            saved = {}
        totals = CacheStats().as_dict()
        for name in totals:
            value = saved.get(name) if isinstance(saved, dict) else None
            if isinstance(value, int):
                totals[name] = value
        return totals

    def save(self, root: Path) -> None:
        """Add the counts not saved yet to the cache folder's totals (as ccache's stats
        files: under a lock, replaced atomically, so every process using the folder, a
        compile server and in-process engines alike, adds to the same totals). Called
        again, it adds only what was counted since."""
        # What is unsaved is read under the locks: two saves at once (sessions ending
        # together on a server) would otherwise both add the same counts.
        with self._save_lock, contextlib.suppress(OSError), stats_lock(root):
            counts = self.unsaved()
            if not any(counts.values()):
                return
            totals = self.load(root)
            for name, value in counts.items():
                totals[name] += value
            _write_totals(root, totals)
            with self._lock:
                for name, value in counts.items():
                    self._saved[name] = self._saved.get(name, 0) + value

    @staticmethod
    def zero(root: Path) -> None:
        """Reset the cache folder's totals (``asynccomp cache --zero-stats``)."""
        with stats_lock(root):
            _write_totals(root, CacheStats().as_dict())


@contextlib.contextmanager
def stats_lock(root: Path) -> Iterator[None]:
    """The stats file's lock, held (processes share the folder)."""
    fd = os.open(root / f"{STATS_FILE}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write_totals(root: Path, totals: dict[str, int]) -> None:
    """Replace the stats file at once: a reader sees the old totals or the new ones."""
    tmp = root / f".{STATS_FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
    tmp.write_text(json.dumps(totals, indent=2) + "\n")
    tmp.replace(root / STATS_FILE)


class RemoteVerdict(NamedTuple):
    """What a remote value was worth: its ``entry`` (``None``: a miss), and whether it
    was ``forged`` (its seal did not verify)."""

    entry: CacheEntry | None
    forged: bool


class ResultCache:
    """Memory + optional disk + optional remote cache of
    compiler outputs (:class:`~asynccomp.backends.BackendOutput`).

    ``disk_dir=None`` keeps the memory tier only; a folder that cannot be used issues a
    :class:`~asynccomp.cache.CacheDirWarning` and does the same.
    """

    def __init__(
        self,
        disk_dir: Path | None,
        *,
        memory_bytes: int,
        disk_bytes: int,
        cache_failures: bool = False,
        remote: RemoteCache | None = None,
    ) -> None:
        self.memory = MemoryCache(memory_bytes)
        self.disk: DiskCache | None = None
        self.remote = remote
        self.cache_failures = cache_failures
        self.stats = CacheStats()
        if disk_dir is not None:
            try:
                self.disk = DiskCache(disk_dir, disk_bytes)
            except CacheUnavailable as exc:
                warnings.warn(
                    f"compile cache folder {disk_dir} is not usable ({exc}); "
                    "caching in memory only",
                    CacheDirWarning,
                    stacklevel=3,
                )
        self._identities: dict[str, tuple[str, str]] = {}

    # -- keys ----------------------------------------------------------------------------

    def key(self, prepared: PreparedCompile, toolkit: Toolkit) -> str:
        ident = self._identities.get(prepared.backend)
        if ident is None:
            ident = self._identities[prepared.backend] = key_identity(prepared.backend, toolkit)
        named = name_reaches_output(prepared)
        relocated = relocates(prepared)
        options = relocated_options(prepared) if relocated else prepared.options
        return cache_key(
            source=prepared.source,
            backend=prepared.backend,
            output=prepared.output,
            arch=prepared.arch,
            options=options if named else _unnamed(replace(prepared, options=options)),
            compiler_identity=ident[0],
            include_identity=ident[1],
            program_name=prepared.filename if named else "",
            relocated=relocated,
        )

    # -- lookups -------------------------------------------------------------------------

    def from_memory(self, key: str) -> CacheEntry | None:
        """The memory tier's entry (its dependencies not checked yet)."""
        return self.memory.get(key)

    def read_disk(self, key: str) -> CacheEntry | None:
        """Blocking: the disk tier's entry for ``key``, its dependencies not checked yet
        (bounded: an entry is a regular file of bounded size, opened without blocking)."""
        return None if self.disk is None else self.disk.get(key)

    @staticmethod
    def fresh(
        entry: CacheEntry, stopped: Callable[[], bool] | None = None, cwd: str | None = None
    ) -> bool:
        """Blocking: whether ``entry``'s dependencies are as recorded (see
        :func:`~asynccomp.cache._deps.dependencies_changed`; raises its ``Stopped``
        once ``stopped()`` is true), for a lookup from the working folder ``cwd`` (where
        a relocatable entry's dependencies are: :mod:`._relocate`)."""
        return not _stale(entry, stopped, cwd)

    def count_local(self, *, memory_hits: int = 0, disk_hits: int = 0, stale: int = 0) -> None:
        """Count what the local tiers answered (a disk hit is also kept in memory by
        :meth:`keep`)."""
        self.stats.add(memory_hits=memory_hits, disk_hits=disk_hits, stale=stale)

    def keep(self, key: str, entry: CacheEntry) -> None:
        """Keep a verified entry of a slower tier in the memory tier."""
        self.memory.put(key, entry)

    def local(
        self, keys: Sequence[str], in_memory: Sequence[CacheEntry | None]
    ) -> list[CacheEntry | None]:
        """Blocking: each key's entry from memory (``in_memory``) or disk, with its
        dependencies checked; ``None`` for a miss (or a stale entry). (The scheduler runs
        the same steps, each under a deadline and stoppable.)"""
        found: list[CacheEntry | None] = []
        memory_hits = disk_hits = stale = 0
        for key, entry in zip(keys, in_memory, strict=True):
            from_disk = False
            if entry is None:
                entry = self.read_disk(key)
                from_disk = entry is not None
            if entry is not None and not self.fresh(entry):
                stale += 1
                entry = None
            if entry is not None:
                if from_disk:
                    disk_hits += 1
                    self.keep(key, entry)
                else:
                    memory_hits += 1
            found.append(entry)
        self.count_local(memory_hits=memory_hits, disk_hits=disk_hits, stale=stale)
        return found

    async def remote_blobs(self, keys: Sequence[str]) -> list[bytes | None]:
        """The remote tier's stored values of ``keys`` (sealed, not verified yet:
        :meth:`verify_remote`); ``None`` for a miss. Never raises."""
        remote = self.remote
        if remote is None or not keys or not remote.available:
            return [None] * len(keys)
        errors = remote.errors
        blobs = await remote.get_many(keys)
        self.stats.add(remote_errors=remote.errors - errors)
        return blobs

    def verify_remote(
        self,
        key: str,
        blob: bytes | None,
        stopped: Callable[[], bool] | None = None,
        cwd: str | None = None,
    ) -> RemoteVerdict:
        """Blocking: what the remote tier's ``blob`` for ``key`` is worth: an entry that
        was sealed with the team's key, decodes as a disk entry does and whose
        dependencies hold (kept in the memory and disk tiers), or none, ``forged`` when
        the seal did not verify (never decoded, never kept: nobody vouches for it).
        Raises ``Stopped`` (see :meth:`fresh`) once ``stopped()`` is true."""
        remote = self.remote
        if blob is None or remote is None:
            return RemoteVerdict(None, False)
        data = remote.auth.unseal(key, blob)
        if data is None:
            remote.refuse(key)  # not asked for again for a while
            return RemoteVerdict(None, True)
        entry = decode_entry(key, data)
        if entry is None or not self.fresh(entry, stopped, cwd):
            return RemoteVerdict(None, False)
        self.keep(key, entry)
        if self.disk is not None:
            self.disk.put(key, entry)
        return RemoteVerdict(entry, False)

    def count_remote(self, verdicts: Sequence[RemoteVerdict | None]) -> None:
        """Count the remote lookups' hits and forgeries (``None``: not verified in
        time); the engine's first forgery issues a ``CacheAuthWarning``."""
        self.stats.add(remote_hits=sum(v is not None and v.entry is not None for v in verdicts))
        forged = sum(v is not None and v.forged for v in verdicts)
        if forged and self.remote is not None:
            first = self.stats.forged == 0  # no await since: one warning per engine
            self.stats.add(forged=forged)
            if first:
                warn_forged(self.remote, forged)

    async def from_remote(self, keys: Sequence[str]) -> list[CacheEntry | None]:
        """The remote tier's entries (authenticated, verified as disk entries are,
        dependencies checked, kept in the local tiers); ``None`` for a miss. An entry
        that fails authentication is a miss, counted in ``stats.forged``, never kept
        locally, and the engine's first one issues a ``CacheAuthWarning``. Never raises.
        (The scheduler runs the same steps under a deadline, in threads of its own.)"""
        blobs = await self.remote_blobs(keys)

        def verify() -> list[RemoteVerdict]:
            return [self.verify_remote(k, b) for k, b in zip(keys, blobs, strict=True)]

        verdicts = await anyio.to_thread.run_sync(verify)
        self.count_remote(verdicts)
        return [v.entry for v in verdicts]

    @staticmethod
    def output(entry: CacheEntry) -> tuple[BackendOutput, str]:
        """What a cache entry says the compiler gave, and the program file name its log
        uses (the engine renames the log's diagnostics for each job it answers)."""
        filename = str(entry.metadata.get("filename", ""))
        if entry.ok:
            return BackendOutput("ok", entry.binary, entry.log), filename
        message = str(entry.metadata.get("error", "compile failed (cached)"))
        return BackendOutput("failed", None, entry.log, message), filename

    # -- storing -------------------------------------------------------------------------

    def remember(
        self,
        key: str,
        prepared: PreparedCompile,
        output: BackendOutput,
        elapsed: float,
        deps: Sequence[Dependency],
        extra: dict[str, Any] | None = None,
    ) -> CacheEntry | None:
        """Keep a compile's output in memory; returns the entry the other tiers should
        get (``None`` when it is not to be cached). Only the compiler's own verdict on
        the input is kept: a binary, or (with ``cache_failures``) a rejected source;
        never a timeout, a crash, an empty output or a failure of asynccomp's own
        (a compiler that could not start, a full disk), which may not happen again."""
        metadata = {**_metadata(prepared, elapsed, deps), **(extra or {})}
        if output.status == "ok":
            assert output.binary is not None
            entry = CacheEntry(output.binary, output.log, metadata)
        elif self.cache_failures and output.status == "failed":
            entry = CacheEntry(b"", output.log, {**metadata, "error": output.message}, ok=False)
        else:
            return None
        self.memory.put(key, entry)
        self.stats.add(stores=1)
        return entry

    def write(self, key: str, entry: CacheEntry) -> None:
        """Blocking: store ``entry`` on disk (a no-op without the disk tier)."""
        if self.disk is not None:
            self.disk.put(key, entry)

    def save_stats(self) -> None:
        """Blocking: add this cache's counts to its folder's totals."""
        if self.disk is not None:
            self.stats.save(self.disk.root)


def has_dependencies(entry: CacheEntry) -> bool:
    """Whether a hit on ``entry`` needs its dependencies checked (files to look at)."""
    return bool(entry.metadata.get("deps"))


def check_cost(entry: CacheEntry | None) -> int:
    """At most how many bytes checking ``entry``'s dependencies reads (their recorded
    sizes; only those whose mtime changed are read), without any I/O."""
    recorded = entry.metadata.get("deps") if entry is not None else None
    if not isinstance(recorded, list):
        return 0
    return sum(
        d[1] for d in recorded if isinstance(d, list) and len(d) in (4, 6) and isinstance(d[1], int)
    )


def _stale(
    entry: CacheEntry, stopped: Callable[[], bool] | None = None, cwd: str | None = None
) -> bool:
    recorded = entry.metadata.get("deps")
    if not recorded:
        return False
    try:
        deps = [Dependency.from_json(d) for d in recorded]
    except (TypeError, ValueError):
        return True  # unreadable: not to be trusted
    rooted = rooted_dependencies(deps, entry.metadata, cwd)
    return rooted is None or dependencies_changed(rooted, stopped)


def dependencies_as_kept(
    deps: list[Dependency], prepared: PreparedCompile, *, places_known: bool = True
) -> tuple[list[Dependency], dict[str, Any]]:
    """Blocking: the dependencies as the entry records them, and what its metadata says
    of them (relocatable, or bound to a working folder: :mod:`._relocate`).

    ``places_known``: whether ``deps`` also record where an include was looked for and
    not found. Without them (nvcc names only what it read) a copy of the tree with a
    header found earlier in the search would pass every check: bound to its folder."""
    if not relocates(prepared):
        return deps, {}
    if not places_known:
        return deps, {"anchor": prepared.cwd}
    return relocated_dependencies(deps, prepared)


def _metadata(
    prepared: PreparedCompile, elapsed: float, deps: Sequence[Dependency]
) -> dict[str, Any]:
    return {
        "filename": prepared.filename,
        "backend": prepared.backend,
        "output": prepared.output,
        "arch": prepared.arch,
        "elapsed": elapsed,
        "pid": os.getpid(),
        "deps": [d.to_json() for d in deps],
    }
