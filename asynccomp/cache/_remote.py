"""The remote tier: a cache shared by machines, behind the memory and disk tiers.

A remote store holds entries in the disk tier's format (magic, format version, a SHA-256
over the whole entry, the key inside), so a remote hit is verified exactly as a disk hit
is, and a store shared by machines with other toolkits can never answer with their
binaries: the compiler's identity is in the key.

A remote store must never fail or stall a compile: an implementation answers a lookup
it cannot make with misses, within its own short timeouts, and stops asking for a
while after a failure (:class:`RemoteCache` keeps that state and issues one
:class:`RemoteCacheWarning` per outage). Writes are made by a writer task of the engine's,
off every job's critical path.

:func:`remote_cache_from_url` makes the store a URL names (``redis://``, ``rediss://``,
``unix://``: :class:`~asynccomp.cache.RedisCache`); other stores implement
:class:`RemoteCache`'s three methods.
"""

from __future__ import annotations

import abc
import logging
import time
import warnings
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.to_thread

from ..errors import CacheWarning, InvalidJob

__all__ = (
    "REMOTE_CACHE_ENV",
    "RemoteCache",
    "RemoteCacheWarning",
    "RemoteWriter",
    "remote_cache_from_url",
)

logger = logging.getLogger("asynccomp.cache")

#: The environment variable that names a remote store (``redis://host:6379/0``).
REMOTE_CACHE_ENV = "ASYNCCOMP_REMOTE_CACHE"


class RemoteCacheWarning(CacheWarning):
    """The remote cache could not be used (down, slow, refused); the engine goes on with
    its local tiers and asks the remote again after a while."""


class RemoteCache(abc.ABC):
    """A store of encoded entries by key. Subclasses implement :meth:`_get_many`,
    :meth:`_put` and :meth:`aclose`; failures there may raise anything: this class turns
    them into misses, one warning, and a pause of ``retry_after`` seconds."""

    #: Entries larger than this are not stored.
    max_entry_bytes: int = 64 * 2**20

    def __init__(self, name: str, *, retry_after: float = 30.0) -> None:
        self.name = name
        self.retry_after = retry_after
        self._down_until = 0.0
        self._warned = False
        #: Lookups and writes that failed, and writes skipped while down or too large.
        self.errors = 0
        self.skipped = 0

    @property
    def available(self) -> bool:
        """False while the store is paused after a failure."""
        return time.monotonic() >= self._down_until

    def _failed(self, what: str, exc: BaseException) -> None:
        self.errors += 1
        self._down_until = time.monotonic() + self.retry_after
        logger.warning("asynccomp: remote cache %s: %s failed: %r", self.name, what, exc)
        if not self._warned:
            self._warned = True
            try:
                warnings.warn(
                    f"remote compile cache {self.name} is not usable ({what}: {exc!r}); "
                    f"compiling with the local cache alone, asking again every "
                    f"{self.retry_after:g} s",
                    RemoteCacheWarning,
                    stacklevel=2,
                )
            except RemoteCacheWarning:
                pass  # warnings made errors (-W error): the log line above says it

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """The stored bytes of each key, ``None`` for a miss; never raises."""
        if not keys:
            return []
        if not self.available:
            return [None] * len(keys)
        try:
            found = await self._get_many(keys)
        except Exception as exc:
            self._failed("a lookup", exc)
            return [None] * len(keys)
        if len(found) != len(keys):
            self._failed("a lookup", ValueError("answers do not match the keys"))
            return [None] * len(keys)
        return found

    async def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``; never raises."""
        if len(data) > self.max_entry_bytes or not self.available:
            self.skipped += 1
            return
        try:
            await self._put(key, data)
        except Exception as exc:
            self._failed("a write", exc)

    @abc.abstractmethod
    async def _get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """The store's answer (may raise)."""

    @abc.abstractmethod
    async def _put(self, key: str, data: bytes) -> None:
        """Store (may raise)."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Release the connection."""

    def describe(self) -> str:
        return self.name


class RemoteWriter:
    """Writes entries to a remote store from a task of the engine's, so that no job
    waits for the network. A full queue drops the write (the entry is in the local
    tiers; the remote gets it next time); closing gives the queue ``drain`` seconds."""

    def __init__(self, remote: RemoteCache, *, queue: int = 1024, drain: float = 5.0) -> None:
        self.remote = remote
        self.drain = drain
        self.dropped = 0
        self.written = 0
        self._send, self._receive = anyio.create_memory_object_stream[tuple[str, Any]](queue)
        self._done = anyio.Event()

    def submit(self, key: str, entry: Any) -> None:
        """Queue ``entry`` (a :class:`~asynccomp.cache.CacheEntry`) for ``key``."""
        try:
            self._send.send_nowait((key, entry))
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.dropped += 1

    async def run(self) -> None:
        """The writer task: encode (in a thread) and store, until closed."""
        from ._disk import encode_entry

        try:
            async with self._receive:
                async for key, entry in self._receive:
                    data = await anyio.to_thread.run_sync(encode_entry, key, entry)
                    await self.remote.put(key, data)
                    self.written += 1
        finally:
            self._done.set()

    async def aclose(self) -> None:
        """Stop taking entries; wait up to ``drain`` seconds for the queued ones."""
        self._send.close()
        with anyio.move_on_after(self.drain, shield=True):
            await self._done.wait()


def remote_cache_from_url(url: str) -> RemoteCache:
    """The remote store ``url`` names: ``redis://[user:password@]host[:port][/db]``,
    ``rediss://...`` (TLS), ``unix:///path/to/redis.sock[?db=N]``; options as query
    parameters: ``ttl`` (seconds, default 7 days), ``max_entry`` (bytes), ``timeout``
    (seconds per request, default 1)."""
    from ._redis import RedisCache

    if not isinstance(url, str) or not url.strip():
        raise InvalidJob("remote_cache", url, "must be a URL such as redis://localhost:6379/0")
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("redis", "rediss", "unix"):
        return RedisCache.from_url(url)
    raise InvalidJob(
        "remote_cache", url, "unknown store: expected redis://, rediss:// or unix:// (Redis)"
    )
