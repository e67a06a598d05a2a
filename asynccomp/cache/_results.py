"""The engine's side of the cache: results keyed by what decides the output bytes.

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
import copy
import fcntl
import functools
import json
import os
import re
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import anyio.to_thread

from ..backends import PreparedCompile
from ..errors import CacheUnavailable, CompileError
from ..job import CompileJob
from ..ptxas import KernelResources, parse_resource_report
from ..result import CompileResult
from ..toolkit import Toolkit
from ._deps import Dependency, dependencies_changed
from ._disk import DiskCache, decode_entry
from ._entry import CacheDirWarning, CacheEntry
from ._keys import cache_key, include_identity
from ._memory import MemoryCache
from ._remote import RemoteCache, warn_forged

__all__ = (
    "CacheStats",
    "ResultCache",
    "compiler_identity",
    "key_identity",
    "name_reaches_output",
    "renamed_log",
    "with_log",
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


def renamed_log(log: str, old: str, new: str) -> str:
    """A log's diagnostics, ``old.cu(3): warning ...``, as the compile of ``new`` would
    have written them."""
    if not log or old == new or not old:
        return log
    return re.sub(rf"(?m)^{re.escape(old)}(?=[(:])", lambda _: new, log)


@functools.lru_cache(maxsize=4096)
def _resources(log: str) -> Mapping[str, KernelResources]:
    # A hit hands back the log object its entry holds, whose hash Python keeps: the
    # report of a hot entry is parsed once, not on every hit (it was half a hit's cost).
    return MappingProxyType(parse_resource_report(log))


def compiler_identity(backend: str, toolkit: Toolkit) -> tuple[str, tuple[Path, ...]]:
    """(identity string, include folders) of the compiler a backend runs."""
    if backend == "nvrtc":
        version = toolkit.compiler_versions["nvrtc"]
        return f"nvrtc {version} {toolkit.nvrtc_library}", toolkit.include_dirs
    includes = (toolkit.cuda_root / "include",) if toolkit.cuda_root is not None else ()
    return f"nvcc {toolkit.nvcc_version} {toolkit.nvcc}", includes


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

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return {f.name: getattr(self, f.name) for f in fields(self) if f.name[0] != "_"}

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
        """Add these counts to the cache folder's totals (under a lock: processes share
        the folder)."""
        counts = self.as_dict()
        if not any(counts.values()):
            return
        with contextlib.suppress(OSError):
            fd = os.open(root / f"{STATS_FILE}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                totals = self.load(root)
                for name, value in counts.items():
                    totals[name] += value
                tmp = root / f".{STATS_FILE}.{os.getpid()}.tmp"
                tmp.write_text(json.dumps(totals, indent=2) + "\n")
                tmp.replace(root / STATS_FILE)
            finally:
                os.close(fd)


class ResultCache:
    """Memory + optional disk + optional remote cache of
    :class:`~asynccomp.CompileResult` s.

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
        return cache_key(
            source=prepared.source,
            backend=prepared.backend,
            output=prepared.output,
            arch=prepared.arch,
            options=prepared.options if named else _unnamed(prepared),
            compiler_identity=ident[0],
            include_identity=ident[1],
            program_name=prepared.filename if named else "",
        )

    # -- lookups -------------------------------------------------------------------------

    def from_memory(self, key: str) -> CacheEntry | None:
        """The memory tier's entry (its dependencies not checked yet)."""
        return self.memory.get(key)

    def local(
        self, keys: Sequence[str], in_memory: Sequence[CacheEntry | None]
    ) -> list[CacheEntry | None]:
        """Blocking: each key's entry from memory (``in_memory``) or disk, with its
        dependencies checked; ``None`` for a miss (or a stale entry)."""
        found: list[CacheEntry | None] = []
        memory_hits = disk_hits = stale = 0
        for key, entry in zip(keys, in_memory, strict=True):
            from_disk = False
            if entry is None and self.disk is not None:
                entry = self.disk.get(key)
                from_disk = entry is not None
            if entry is not None and _stale(entry):
                stale += 1
                entry = None
            if entry is not None:
                if from_disk:
                    disk_hits += 1
                    self.memory.put(key, entry)
                else:
                    memory_hits += 1
            found.append(entry)
        self.stats.add(memory_hits=memory_hits, disk_hits=disk_hits, stale=stale)
        return found

    async def from_remote(self, keys: Sequence[str]) -> list[CacheEntry | None]:
        """The remote tier's entries (authenticated, verified as disk entries are,
        dependencies checked, kept in the local tiers); ``None`` for a miss. An entry
        that fails authentication is a miss, counted in ``stats.forged``, never kept
        locally, and the engine's first one issues a ``CacheAuthWarning``. Never raises."""
        remote = self.remote
        if remote is None or not keys or not remote.available:
            return [None] * len(keys)
        errors = remote.errors
        blobs = await remote.get_many(keys)
        self.stats.add(remote_errors=remote.errors - errors)
        forged: list[str] = []

        def verify() -> list[CacheEntry | None]:
            entries: list[CacheEntry | None] = []
            for key, blob in zip(keys, blobs, strict=True):
                entry = None
                if blob is not None:
                    data = remote.auth.unseal(key, blob)
                    if data is None:
                        forged.append(key)  # not decoded, not kept: nobody vouches for it
                    else:
                        entry = decode_entry(key, data)
                if entry is not None and _stale(entry):
                    entry = None
                if entry is not None:
                    self.memory.put(key, entry)
                    if self.disk is not None:
                        self.disk.put(key, entry)
                entries.append(entry)
            self.stats.add(remote_hits=sum(e is not None for e in entries))
            return entries

        entries = await anyio.to_thread.run_sync(verify)
        if forged:
            first = self.stats.forged == 0  # no await since: one warning per engine
            self.stats.add(forged=len(forged))
            if first:
                warn_forged(remote, len(forged))
        return entries

    @staticmethod
    def result(entry: CacheEntry, job: CompileJob, prepared: PreparedCompile) -> CompileResult:
        """The result a cache entry gives ``job`` (whose file name may differ from the
        one the entry was compiled under: its log says this job's)."""
        log = renamed_log(entry.log, str(entry.metadata.get("filename", "")), prepared.filename)
        error = None
        if not entry.ok:
            message = str(entry.metadata.get("error", "compile failed (cached)"))
            error = CompileError(message, log=log, job=job)
        return CompileResult(
            job=job,
            output=prepared.output,
            arch=prepared.arch,
            binary=entry.binary if entry.ok else None,
            log=log,
            error=error,
            command=prepared.options,
            resources=_resources(entry.log),
            cached=True,
        )

    # -- storing -------------------------------------------------------------------------

    def remember(
        self,
        key: str,
        result: CompileResult,
        prepared: PreparedCompile,
        deps: Sequence[Dependency],
    ) -> CacheEntry | None:
        """Keep ``result`` in memory; returns the entry the other tiers should get
        (``None`` when it is not to be cached: a timeout, a crash, an unasked failure)."""
        metadata = _metadata(result, prepared, deps)
        if result.ok:
            assert result.binary is not None
            entry = CacheEntry(result.binary, result.log, metadata)
        elif self.cache_failures and type(result.error) is CompileError:
            # Only real compile errors: a timeout or a crash may not happen next time.
            entry = CacheEntry(b"", result.log, {**metadata, "error": str(result.error)}, ok=False)
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


def _stale(entry: CacheEntry) -> bool:
    recorded = entry.metadata.get("deps")
    if not recorded:
        return False
    try:
        deps = [Dependency.from_json(d) for d in recorded]
    except (TypeError, ValueError):
        return True  # unreadable: not to be trusted
    return dependencies_changed(deps)


def _metadata(
    result: CompileResult, prepared: PreparedCompile, deps: Sequence[Dependency]
) -> dict[str, Any]:
    return {
        "name": result.job.name,
        "filename": prepared.filename,
        "backend": result.job.backend,
        "output": result.output,
        "arch": result.arch,
        "elapsed": result.elapsed,
        "pid": os.getpid(),
        "deps": [d.to_json() for d in deps],
    }


def with_log(result: CompileResult, log: str) -> CompileResult:
    """``result`` with ``log`` (and its error's log) in place of its own."""
    error = result.error
    if error is not None:
        error = copy.copy(error)
        error.log = log
    return replace(result, log=log, error=error)
