"""The engine's side of the cache: results keyed by everything that decides the output bytes.

Two tiers, checked in order: an in-memory LRU bounded in bytes
(:class:`~asynccomp.cache.MemoryCache`) and an on-disk store shared between processes
(:class:`~asynccomp.cache.DiskCache`). The key (:func:`~asynccomp.cache.cache_key`) is a
SHA-256 over:

- the source text exactly as the compiler receives it, and its program/file name;
- the backend, the output format and the architecture;
- the final option list (NVRTC's options, or nvcc's whole argv, nvcc's path included);
- the compiler's identity and version (NVRTC version and library path; nvcc's version
  and path), and a fingerprint of the include folders it reads;
- the cache format version.

Failed compiles are not cached unless ``Engine(cache_failures=True)``. Lookups in memory
are plain calls; disk lookups and writes block, and the scheduler runs them in threads.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

from ..backends import PreparedCompile
from ..errors import CacheUnavailable, CompileError
from ..job import CompileJob
from ..ptxas import KernelResources, parse_resource_report
from ..result import CompileResult
from ..toolkit import Toolkit
from ._disk import DiskCache
from ._entry import CacheDirWarning, CacheEntry
from ._keys import cache_key, include_identity
from ._memory import MemoryCache

__all__ = ("ResultCache", "compiler_identity")


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


class ResultCache:
    """Memory + optional disk cache of :class:`~asynccomp.CompileResult` s.

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
    ) -> None:
        self.memory = MemoryCache(memory_bytes)
        self.disk: DiskCache | None = None
        self.cache_failures = cache_failures
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

    def key(self, prepared: PreparedCompile, toolkit: Toolkit) -> str:
        ident = self._identities.get(prepared.backend)
        if ident is None:
            compiler, includes = compiler_identity(prepared.backend, toolkit)
            ident = self._identities[prepared.backend] = (compiler, include_identity(includes))
        return cache_key(
            source=prepared.source,
            backend=prepared.backend,
            output=prepared.output,
            arch=prepared.arch,
            options=prepared.options,
            compiler_identity=ident[0],
            include_identity=ident[1],
            program_name=prepared.filename,
        )

    def from_memory(self, key: str) -> CacheEntry | None:
        return self.memory.get(key)

    def from_disk(self, keys: Sequence[str]) -> list[CacheEntry | None]:
        """Blocking: the disk entries of ``keys`` (hits are kept in memory too)."""
        if self.disk is None:
            return [None] * len(keys)
        entries = []
        for key in keys:
            entry = self.disk.get(key)
            if entry is not None:
                self.memory.put(key, entry)
            entries.append(entry)
        return entries

    @staticmethod
    def result(entry: CacheEntry, job: CompileJob, prepared: PreparedCompile) -> CompileResult:
        """The result a cache entry gives ``job``."""
        error = None
        if not entry.ok:
            error = CompileError(
                str(entry.metadata.get("error", "compile failed (cached)")), log=entry.log, job=job
            )
        return CompileResult(
            job=job,
            output=prepared.output,
            arch=prepared.arch,
            binary=entry.binary if entry.ok else None,
            log=entry.log,
            error=error,
            command=prepared.options,
            resources=_resources(entry.log),
            cached=True,
        )

    def remember(self, key: str, result: CompileResult) -> CacheEntry | None:
        """Keep ``result`` in memory; returns the entry the disk should get (``None``
        when the result is not to be cached: a timeout, a crash, an unasked failure)."""
        if result.ok:
            assert result.binary is not None
            entry = CacheEntry(result.binary, result.log, _metadata(result))
        elif self.cache_failures and type(result.error) is CompileError:
            # Only real compile errors: a timeout or a crash may not happen next time.
            entry = CacheEntry(
                b"", result.log, {**_metadata(result), "error": str(result.error)}, ok=False
            )
        else:
            return None
        self.memory.put(key, entry)
        return entry

    def write(self, key: str, entry: CacheEntry) -> None:
        """Blocking: store ``entry`` on disk (a no-op without the disk tier)."""
        if self.disk is not None:
            self.disk.put(key, entry)


def _metadata(result: CompileResult) -> dict[str, object]:
    return {
        "name": result.job.name,
        "backend": result.job.backend,
        "output": result.output,
        "arch": result.arch,
        "elapsed": result.elapsed,
        "pid": os.getpid(),
    }
