"""The remote tier: a store shared by machines (:class:`~asynccomp.cache.RemoteCache`),
its entries sealed with the team's key.

A lookup asks the store under the lookup's deadline (the store has short timeouts of
its own), then opens each value in the lookup pools' ``checks`` threads: a value whose
seal does not verify is a miss, counted as forged, never decoded nor kept (nobody
vouches for it; the store does not ask for that name again for a while), and the
engine's first forgery issues one :class:`~asynccomp.cache.CacheAuthWarning`. A value
that verifies decodes as a disk entry does (:mod:`._format`).

Writes are queued for a writer task (:class:`RemoteWriter`), so that no job waits for
the network: a full queue drops the write (the entry is in the local tiers; the remote
gets it next time), and closing gives the queue a few seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from ._entry import CacheAuthWarning, CacheEntry, warn_or_log
from ._format import decode_entry, encode_entry
from ._lookups import Lookups
from ._remote import RemoteCache
from ._stats import CacheStats
from ._tiers import Tier

__all__ = ("RemoteTier", "RemoteWriter")


class _Opened(NamedTuple):
    entry: CacheEntry | None
    forged: bool


class RemoteTier(Tier):
    """A remote store as a tier; counts its errors, stores and forgeries in ``stats``."""

    kind = "remote"

    def __init__(self, store: RemoteCache, stats: CacheStats) -> None:
        self.store = store
        self.stats = stats
        self.writer = RemoteWriter(store, stored=lambda: stats.add(remote_stores=1))
        self._warned = False

    async def get_many(
        self, keys: Sequence[str], pools: Lookups, deadline: float
    ) -> list[CacheEntry | None]:
        store = self.store
        blobs: list[bytes | None] = [None] * len(keys)
        if not keys or not store.available:
            await anyio.lowlevel.checkpoint()
            return [None] * len(keys)
        with anyio.CancelScope(deadline=deadline):
            errors = store.errors
            blobs = await store.get_many(keys)
            self.stats.add(remote_errors=store.errors - errors)
        asked = [(key, blob) for key, blob in zip(keys, blobs, strict=True) if blob is not None]
        opened = await pools.each("checks", self._open, asked, deadline=deadline)
        self._count_forged(sum(o is not None and o.forged for o in opened))
        found = {key: o.entry for (key, _), o in zip(asked, opened, strict=True) if o is not None}
        return [found.get(key) for key in keys]

    def _open(self, each: tuple[str, bytes], stopped: Callable[[], bool]) -> _Opened:
        """Blocking: the entry in a stored value, if it was sealed with the team's key
        for this cache key and decodes whole."""
        key, blob = each
        data = self.store.auth.unseal(key, blob)
        if data is None:
            self.store.refuse(key)  # not asked for again for a while
            return _Opened(None, True)
        return _Opened(decode_entry(key, data), False)

    def _count_forged(self, forged: int) -> None:
        if not forged:
            return
        self.stats.add(forged=forged)
        if self._warned:
            return
        self._warned = True  # once per engine; the statistics count them all
        store = self.store
        warn_or_log(
            f"{forged} entr{'y' if forged == 1 else 'ies'} from remote compile cache "
            f"{store.name} failed authentication (not sealed with this key, id "
            f"{store.auth.key_id}: forged, damaged, or written with another key); they "
            "were recompiled and not kept locally (asynccomp cache stats counts them)",
            CacheAuthWarning,
        )

    async def put_many(self, entries: Sequence[tuple[str, CacheEntry]]) -> None:
        for key, entry in entries:
            self.writer.submit(key, entry)
        await anyio.lowlevel.checkpoint()

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        task_group.start_soon(self.writer.run)
        await anyio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await self.writer.aclose()  # what is queued, for a few seconds
        await self.store.aclose()


class RemoteWriter:
    """Writes entries to a remote store from a task of the engine's, so that no job
    waits for the network. A full queue drops the write (the entry is in the local
    tiers; the remote gets it next time); closing gives the queue ``drain`` seconds."""

    def __init__(
        self,
        remote: RemoteCache,
        *,
        queue: int = 1024,
        drain: float = 5.0,
        stored: Callable[[], None] | None = None,
    ) -> None:
        self.remote = remote
        self.stored = stored  # told of each entry the store took (the cache's counts)
        self.drain = drain
        self.dropped = 0
        self.written = 0
        self._send, self._receive = anyio.create_memory_object_stream[tuple[str, CacheEntry]](queue)
        self._done = anyio.Event()
        self._running = False

    def submit(self, key: str, entry: CacheEntry) -> None:
        """Queue ``entry`` for ``key``."""
        try:
            self._send.send_nowait((key, entry))
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.dropped += 1

    def _sealed(self, key: str, entry: CacheEntry) -> bytes:
        return self.remote.auth.seal(key, encode_entry(key, entry))

    async def run(self) -> None:
        """The writer task: encode and seal (in a thread) and store, until closed."""
        self._running = True
        try:
            async with self._receive:
                async for key, entry in self._receive:
                    data = await anyio.to_thread.run_sync(self._sealed, key, entry)
                    if await self.remote.put(key, data) and self.stored is not None:
                        self.stored()
                    self.written += 1
        finally:
            self._done.set()

    async def aclose(self) -> None:
        """Stop taking entries; wait up to ``drain`` seconds for the queued ones."""
        self._send.close()
        if not self._running:  # never started (a cache that was not): nothing to wait for
            self._receive.close()
            return
        with anyio.move_on_after(self.drain, shield=True):
            await self._done.wait()
