"""The engine's compile cache: results keyed by everything that decides the output bytes.

Two levels, checked in order: an in-memory LRU bounded in bytes
(:class:`~asynccomp.cache.MemoryCache`) and an on-disk store shared between processes
(:class:`~asynccomp.cache.DiskCache`). The key (:func:`~asynccomp.cache.cache_key`) is a
SHA-256 over:

- the source text exactly as the compiler receives it, and its program/file name;
- the backend, the output format and the architecture;
- the final option list (NVRTC's options, or nvcc's whole argv, nvcc's path included);
- the compiler's identity and version (NVRTC version and library path; nvcc's version
  and path), and a fingerprint of the include folders it reads;
- the cache format version.

Failed compiles are not cached unless ``Engine(cache_failures=True)``.
"""

from __future__ import annotations

import functools
import os
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import anyio.to_thread

from .backends.base import PreparedCompile
from .cache import CacheEntry, CacheUnavailable, DiskCache, MemoryCache, cache_key, include_identity
from .errors import CompileError
from .job import CompileJob
from .ptxas import KernelResources, parse_resource_report
from .result import CompileResult
from .toolkit import Toolkit

__all__ = ("ResultCache",)


@functools.lru_cache(maxsize=4096)
def _resources(log: str) -> Mapping[str, KernelResources]:
    # A hit hands back the log object its entry holds, whose hash Python keeps: the
    # report of a hot entry is parsed once, not on every hit (it was half a hit's cost).
    return MappingProxyType(parse_resource_report(log))


class CacheDirWarning(UserWarning):
    """The disk cache could not be used; the engine goes on with the memory level alone."""


def compiler_identity(backend: str, toolkit: Toolkit) -> tuple[str, tuple[Path, ...]]:
    """(identity string, include folders) of the compiler a backend runs."""
    if backend == "nvrtc":
        version = toolkit.compiler_versions["nvrtc"]
        return f"nvrtc {version} {toolkit.nvrtc_library}", toolkit.include_dirs
    includes = (toolkit.cuda_root / "include",) if toolkit.cuda_root is not None else ()
    return f"nvcc {toolkit.nvcc_version} {toolkit.nvcc}", includes


class ResultCache:
    """Memory + optional disk cache of :class:`~asynccomp.CompileResult` s."""

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

    async def lookup(
        self, key: str, job: CompileJob, prepared: PreparedCompile
    ) -> CompileResult | None:
        started = time.monotonic()
        entry = self.memory.get(key)
        if entry is None and self.disk is not None:
            entry = await anyio.to_thread.run_sync(self.disk.get, key)
            if entry is not None:
                self.memory.put(key, entry)
        if entry is None:
            return None
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
            elapsed=time.monotonic() - started,
            queued=0.0,
            command=prepared.options,
            resources=_resources(entry.log),
            cached=True,
        )

    async def store(self, key: str, result: CompileResult) -> None:
        if result.ok:
            assert result.binary is not None
            entry = CacheEntry(result.binary, result.log, _metadata(result))
        elif self.cache_failures and type(result.error) is CompileError:
            # Only real compile errors: a timeout or a crash may not happen next time.
            entry = CacheEntry(
                b"", result.log, {**_metadata(result), "error": str(result.error)}, ok=False
            )
        else:
            return
        self.memory.put(key, entry)
        if self.disk is not None:
            await anyio.to_thread.run_sync(self.disk.put, key, entry)


def _metadata(result: CompileResult) -> dict[str, object]:
    return {
        "name": result.job.name,
        "backend": result.job.backend,
        "output": result.output,
        "arch": result.arch,
        "elapsed": result.elapsed,
        "pid": os.getpid(),
    }
