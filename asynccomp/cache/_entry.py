"""One cached compile, and the warnings the cache issues (:func:`warn_or_log`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._warn import warn
from ..errors import CacheWarning

__all__ = (
    "CacheAuthWarning",
    "CacheCorruptionWarning",
    "CacheDirWarning",
    "CacheEntry",
    "CacheReadWarning",
    "CacheTrustWarning",
    "CacheWriteWarning",
    "warn_or_log",
)

logger = logging.getLogger("asynccomp.cache")


class CacheCorruptionWarning(CacheWarning):
    """A cache file was damaged (truncated, altered, not a cache entry); it was deleted."""


class CacheAuthWarning(CacheWarning):
    """Remote entries failed authentication (forged, or sealed with another key): they
    were misses, recompiled, and were not kept in the local tiers. Issued once per
    engine; ``CacheStats.forged`` counts them all."""


class CacheReadWarning(CacheWarning):
    """An I/O error made a cache read fail; the lookup counted as a miss."""


class CacheWriteWarning(CacheWarning):
    """An I/O error made a cache write fail; the entry was not kept."""


class CacheDirWarning(CacheWarning):
    """The disk cache could not be used; the engine goes on with the memory level alone."""


class CacheTrustWarning(CacheDirWarning):
    """The disk cache folder (or a folder above it) can be written by users the umask
    does not share the cache with: anyone who can write there can forge entries, so it
    is not used (ccache, likewise, tells which folders must be trusted). Make the folder
    the user's own (``chmod go-w``), or share it on purpose (``Engine(umask=0o002)``,
    ``$ASYNCCOMP_UMASK``)."""


def warn_or_log(message: str, category: type[Warning]) -> None:
    """Log ``message`` and issue it as a ``category`` warning (naming the caller's
    line, :func:`asynccomp._warn.warn`), which never raises.

    A cache's trouble costs a hit or an entry, never a compile: under ``-W error``
    (pytest's ``filterwarnings = error``) a warning raised from a write would end the
    batch that wrote it, and its results with it. The log line says it then."""
    logger.warning("asynccomp: %s", message)
    try:
        warn(message, category)
    except category:
        pass  # made an error (-W error): the log line above says it


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
