"""asynccomp's content-addressed compile cache.

A compiled kernel is stored under a key that hashes everything that decides its bytes
(:func:`cache_key`): the source, the backend and output format, the architecture, the
options, the compiler's identity and a fingerprint of the include folders
(:func:`include_identity`). Tiers, checked in order:

* :class:`MemoryCache`, an LRU dictionary bounded in bytes, for repeated jobs in one
  process (an autotuner re-asking for a kernel it built a minute ago);
* :class:`DiskCache`, one verified file per entry under ``<root>/v3/<key[:2]>/``,
  shared by every process and every run on the machine, bounded in bytes and trimmed
  least-recently-used first;
* optionally a :class:`RemoteCache` shared by machines: :class:`RedisCache`
  (``Engine(remote_cache="redis://host:6379/0")`` or ``$ASYNCCOMP_REMOTE_CACHE``), whose
  entries are sealed with a key the team shares (:class:`RemoteAuth`:
  ``$ASYNCCOMP_REMOTE_CACHE_KEY`` or ``$ASYNCCOMP_REMOTE_CACHE_KEY_FILE``); an entry
  that fails authentication is a miss, never kept locally.

Entries remember the headers a compile read from outside the toolkit, with their
digests, and a hit whose headers changed is a miss (see :mod:`._deps`). With
``$ASYNCCOMP_BASE_DIR`` keys and headers under it are relative to the working folder
(:mod:`._relocate`); the disk tier's size bound comes from :mod:`._settings`.

Both are safe to use from several threads, and :class:`DiskCache` from several
processes at once. The engine's side is :class:`TieredCache` (made by
:func:`open_cache`): ``lookup`` and ``store`` own the tier order, the lookup threads,
the dependency checks, the statistics and the warnings; the scheduler sees nothing
else (:mod:`._tiered`).

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

from ..errors import CacheUnavailable, CacheWarning
from ._auth import REMOTE_CACHE_KEY_ENV, REMOTE_CACHE_KEY_FILE_ENV, RemoteAuth
from ._compile_key import CacheKey, compiler_identity
from ._disk import DiskCache
from ._entry import (
    CacheAuthWarning,
    CacheCorruptionWarning,
    CacheDirWarning,
    CacheEntry,
    CacheReadWarning,
    CacheTrustWarning,
    CacheWriteWarning,
)
from ._keys import (
    CACHE_DIR_ENV,
    CACHE_FORMAT_VERSION,
    cache_key,
    clear_include_identity_cache,
    default_cache_dir,
    include_identity,
)
from ._memory import MemoryCache, entry_size
from ._redis import RedisCache
from ._remote import REMOTE_CACHE_ENV, RemoteCache, RemoteCacheWarning
from ._stats import CacheStats
from ._stores import remote_cache_from_environment, remote_cache_from_url
from ._tiered import TieredCache, open_cache

__all__ = (
    "CACHE_DIR_ENV",
    "CACHE_FORMAT_VERSION",
    "CacheAuthWarning",
    "CacheCorruptionWarning",
    "CacheDirWarning",
    "CacheEntry",
    "CacheKey",
    "CacheReadWarning",
    "CacheStats",
    "CacheTrustWarning",
    "CacheUnavailable",
    "CacheWarning",
    "CacheWriteWarning",
    "DiskCache",
    "MemoryCache",
    "REMOTE_CACHE_ENV",
    "REMOTE_CACHE_KEY_ENV",
    "REMOTE_CACHE_KEY_FILE_ENV",
    "RedisCache",
    "RemoteAuth",
    "RemoteCache",
    "RemoteCacheWarning",
    "TieredCache",
    "cache_key",
    "clear_include_identity_cache",
    "compiler_identity",
    "default_cache_dir",
    "entry_size",
    "include_identity",
    "open_cache",
    "remote_cache_from_environment",
    "remote_cache_from_url",
)
