"""The tier interface, and the two local tiers.

A :class:`Tier` is one level of the tiered cache (:class:`~._tiered.TieredCache`, which
asks them in order, fastest first, as sccache's ``MultiLevelStorage`` asks its levels):
it answers ``get_many`` with whole, verified entries of the keys asked for (as this tier
verifies what it holds: a checksum, a seal), and keeps what ``put_many`` gives it. It
knows nothing of the other tiers, of dependency checks (the tiered cache checks what
any tier found) or of the order it is asked in. Neither method raises for trouble of
the tier's own: a lookup it cannot make is a miss, a write it cannot make is not kept
(a warning says so, once).

- :class:`MemoryTier`: an in-process LRU (:class:`~asynccomp.cache.MemoryCache`);
- :class:`DiskTier`: the folder shared by every process of the machine
  (:class:`~asynccomp.cache.DiskCache`), read in the lookup pools' threads;
- :class:`~._remote_tier.RemoteTier`: a store shared by machines
  (:class:`~asynccomp.cache.RemoteCache`), its entries sealed with the team's key.

A store of another kind is a module of its own. An S3 bucket beside the Redis, say, is
a :class:`~asynccomp.cache.RemoteCache` (its three requests; sealing, verification,
the writer task and the pauses after failures are the remote tier's) plus its URL
scheme in :mod:`._stores`::

    class S3Cache(RemoteCache):
        async def _get_many(self, keys): ...   # GET each object, at most max_entry_bytes
        async def _put(self, key, data): ...   # PUT the sealed entry
        async def aclose(self): ...

and a store that needs no seal (one only you can write) would implement :class:`Tier`
itself, its ``kind`` saying which statistics count its hits.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import ClassVar, Literal

import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from ._disk import DiskCache
from ._entry import CacheEntry
from ._lookups import Lookups
from ._memory import MemoryCache

__all__ = ("DiskTier", "MemoryTier", "Tier", "TierKind")

#: Which statistics count a tier's hits (``CacheStats.<kind>_hits``).
TierKind = Literal["memory", "disk", "remote"]


class Tier(abc.ABC):
    """One level of the tiered cache: entries by key."""

    #: Which statistics count its hits.
    kind: ClassVar[TierKind]

    @abc.abstractmethod
    async def get_many(
        self, keys: Sequence[str], pools: Lookups, deadline: float
    ) -> list[CacheEntry | None]:
        """Each key's entry (whole, this key's, as this tier verifies them; its
        dependencies not checked yet), ``None`` for a miss. Blocking work runs in
        ``pools`` (:meth:`Lookups.each`); what is not answered by ``deadline`` (anyio's
        clock) is a miss. Never raises for the tier's own trouble."""

    @abc.abstractmethod
    async def put_many(self, entries: Sequence[tuple[str, CacheEntry]]) -> None:
        """Keep each ``(key, entry)``: a compile's, or a slower tier's verified hit.
        Never raises for the tier's own trouble (the entry is not kept)."""

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:  # noqa: B027 - optional
        """Called once as the cache starts; ``task_group`` lives until it closes."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release what the tier holds (connections; queued writes, briefly)."""


class MemoryTier(Tier):
    """The process's own LRU: plain calls, no thread."""

    kind = "memory"

    def __init__(self, memory: MemoryCache) -> None:
        self.memory = memory

    async def get_many(
        self, keys: Sequence[str], pools: Lookups, deadline: float
    ) -> list[CacheEntry | None]:
        return [self.memory.get(key) for key in keys]

    async def put_many(self, entries: Sequence[tuple[str, CacheEntry]]) -> None:
        for key, entry in entries:
            self.memory.put(key, entry)


class DiskTier(Tier):
    """The machine's folder: reads in the lookup pools (bounded: an entry is a regular
    file of bounded size, opened without blocking), writes in one thread call per
    batch."""

    kind = "disk"

    def __init__(self, disk: DiskCache) -> None:
        self.disk = disk

    async def get_many(
        self, keys: Sequence[str], pools: Lookups, deadline: float
    ) -> list[CacheEntry | None]:
        return await pools.each("reads", self._read, keys, deadline=deadline)

    def _read(self, key: str, stopped: Callable[[], bool]) -> CacheEntry | None:
        return self.disk.get(key)

    async def put_many(self, entries: Sequence[tuple[str, CacheEntry]]) -> None:
        if not entries:
            await anyio.lowlevel.checkpoint()
            return
        await anyio.to_thread.run_sync(self._write, entries)

    def _write(self, entries: Sequence[tuple[str, CacheEntry]]) -> None:
        for key, entry in entries:
            self.disk.put(key, entry)
