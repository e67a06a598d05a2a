"""The memory tier: an in-process LRU of cache entries, bounded in bytes."""

from __future__ import annotations

import threading
from collections import OrderedDict

from ._entry import CacheEntry

__all__ = ("MemoryCache", "entry_size")

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
