"""A cheap fingerprint of include folders: what stands for a toolkit's headers.

Used by cache keys (:func:`asynccomp.cache.cache_key` hashes it) and by the toolkit's
own fingerprint (:func:`asynccomp.toolkit.toolkit_fingerprint`); it lives below both,
so that finding the toolkit never loads the cache.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ("clear_include_identity_cache", "include_identity")

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
