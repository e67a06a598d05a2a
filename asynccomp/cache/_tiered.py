"""One cache over its tiers: what the scheduler sees of caching.

The scheduler asks a :class:`Cache` three things: a rendered compile's :meth:`~Cache.key`
(what identical compiles in flight share too), :meth:`~Cache.lookup` for a chunk of
keys, and :meth:`~Cache.store` for a compile's output. It knows nothing of tiers, of
threads, of dependency checks or of statistics: :class:`TieredCache` owns them, as
sccache's ``MultiLevelStorage`` is itself a storage (:class:`NoCache`: ``cache=False``).

A lookup asks the tiers (:mod:`._tiers`) in order, fastest first: memory, disk, remote.
What a tier finds has its dependencies checked (:mod:`._freshness`), the cheapest
checks first; an entry whose dependencies changed, or that was not checked in time,
is asked of the slower tiers still. A hit is kept in the faster tiers (a disk hit in
memory, a remote hit in memory and on disk). Every blocking step runs in the lookup
pools (:mod:`._lookups`) under one deadline for the chunk: the earliest timeout of its
jobs, at most :data:`~._lookups.LOOKUP_LIMIT`; whatever is answered by then keeps its
answer, the rest is a miss, compiled instead.

A store records what the compile read (in a thread), keeps the entry in the fastest
tier while the requests are answered (an identical request that comes next is a hit),
then writes it to the slower ones. Failures are not cached unless ``cache_failures``.

The statistics (:class:`~._stats.CacheStats`) add up: every key looked up is a hit of
one tier or a miss; ``stale`` counts the lookups that found an entry whose
dependencies had changed.

Every call into a tier (reads, dependency checks, backfills, writes before and after the
requests are answered) goes through one guard, :meth:`TieredCache._guarded`: a tier that
raises (a bug in a tier of one's own, a store answering what nobody expected) costs that
call its answer (a miss, a write not kept), is logged once per tier and kind of call and
counted (``tier_errors``), and never ends a lookup or a compile: every result of the
call arrives.
"""

from __future__ import annotations

import abc
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from .._perms import UMASK_ENV
from .._warn import warn
from ..backends import BackendOutput, PreparedCompile
from ..errors import CacheUnavailable
from ..toolkit import Toolkit
from ._compile_key import CacheKey, Identities, KeyMaker, compiler_identity
from ._disk import DiskCache
from ._entry import CacheDirWarning, CacheEntry, CacheTrustWarning
from ._freshness import check_cost, fresh, has_dependencies, record, toolkit_roots
from ._lookups import LOOKUP_LIMIT, Lookups
from ._memory import MemoryCache
from ._records import Cached, cached_output, entry_of
from ._remote import RemoteCache
from ._remote_tier import RemoteTier
from ._settings import disk_bound, max_size
from ._stats import CacheStats
from ._tiers import DiskTier, MemoryTier, Tier
from ._trust import untrusted

__all__ = ("Cache", "NoCache", "TieredCache", "open_cache")

logger = logging.getLogger("asynccomp")
T = TypeVar("T")


class Cache(abc.ABC):
    """What a scheduler asks of a cache."""

    @abc.abstractmethod
    def key(self, prepared: PreparedCompile) -> CacheKey | None:
        """``prepared``'s key (``None``: nothing to look up, keep or share)."""

    @abc.abstractmethod
    async def lookup(
        self, keys: Sequence[CacheKey], *, within: float | None = None
    ) -> list[Cached | None]:
        """Each key's hit, ``None`` for a miss, in ``within`` seconds at most.

        Checkpoints only when a tier or a check waits (a thread, the network): a chunk
        of memory hits makes no pass through the event loop (one cost 30 us of a 270 us
        hit, measured), so the caller checkpoints once per chunk."""

    @abc.abstractmethod
    def store(
        self,
        key: CacheKey | None,
        prepared: PreparedCompile,
        output: BackendOutput,
        *,
        elapsed: float,
        started_ns: int,
        quote_folder: Callable[[], str],
    ) -> AbstractAsyncContextManager[None]:
        """Keep a compile's output: in the fastest tier as the block is entered, in
        the others as it ends. ``quote_folder``: where the compiler looked first for a
        quoted include (asked only when the output does not list what it read)."""

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:  # noqa: B027 - optional
        """Called once as the scheduler starts; ``task_group`` lives until it closes."""

    async def aclose(self) -> None:  # noqa: B027 - optional
        """Write what is queued (briefly), release the tiers, save the statistics."""


class NoCache(Cache):
    """Caching off: nothing is looked up, kept, or shared in flight."""

    def key(self, prepared: PreparedCompile) -> CacheKey | None:
        return None

    async def lookup(
        self, keys: Sequence[CacheKey], *, within: float | None = None
    ) -> list[Cached | None]:
        return [None] * len(keys)

    def store(
        self,
        key: CacheKey | None,
        prepared: PreparedCompile,
        output: BackendOutput,
        *,
        elapsed: float,
        started_ns: int,
        quote_folder: Callable[[], str],
    ) -> AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()


class TieredCache(Cache):
    """Compiler outputs in ``tiers``, fastest first. Made by :func:`open_cache`."""

    def __init__(
        self,
        tiers: Sequence[Tier],
        *,
        keys: KeyMaker,
        roots: Sequence[str],
        stats: CacheStats,
        cache_failures: bool = False,
    ) -> None:
        if not tiers:
            raise ValueError("a tiered cache needs a tier")
        self.tiers = tuple(tiers)
        self.stats = stats
        self.cache_failures = cache_failures
        self._keys = keys
        self._roots = list(roots)
        self._failed: set[tuple[str, str]] = set()  # (tier, call) already logged
        #: The lookups' own threads.
        self.pools = Lookups()

    async def _guarded(self, tier: str, call: str, work: Awaitable[T], otherwise: T) -> T:
        """``await work``, or ``otherwise`` if it raises (cancellation propagates): the
        one boundary between the cache and its tiers (see the module's doc)."""
        try:
            return await work
        except Exception as exc:
            self.stats.add(tier_errors=1)
            if (tier, call) not in self._failed:
                self._failed.add((tier, call))
                logger.warning(
                    "asynccomp: the %s cache tier failed a %s (%s: %s); it counts as a miss "
                    "or a write not kept, and the compiles go on (logged once)",
                    tier,
                    call,
                    type(exc).__name__,
                    exc,
                    exc_info=exc,
                )
            return otherwise

    # -- what the cache is made of (reports, tests) ---------------------------------------

    def _tier(self, kind: type[Tier]) -> Tier | None:
        return next((tier for tier in self.tiers if isinstance(tier, kind)), None)

    @property
    def memory(self) -> MemoryCache:
        tier = self._tier(MemoryTier)
        assert isinstance(tier, MemoryTier)
        return tier.memory

    @property
    def disk(self) -> DiskCache | None:
        tier = self._tier(DiskTier)
        return tier.disk if isinstance(tier, DiskTier) else None

    @property
    def remote(self) -> RemoteCache | None:
        tier = self._tier(RemoteTier)
        return tier.store if isinstance(tier, RemoteTier) else None

    # -- the scheduler's side -----------------------------------------------------------------

    def key(self, prepared: PreparedCompile) -> CacheKey:
        return self._keys.key(prepared)

    async def lookup(
        self, keys: Sequence[CacheKey], *, within: float | None = None
    ) -> list[Cached | None]:
        limit = LOOKUP_LIMIT if within is None else min(LOOKUP_LIMIT, within)
        deadline = anyio.current_time() + limit
        found: list[CacheEntry | None] = [None] * len(keys)
        source = [0] * len(keys)  # the tier that answered
        stale = [False] * len(keys)
        first = [0] * len(keys)  # the first tier still to ask
        asking = list(range(len(keys)))
        while asking:
            entries: dict[int, CacheEntry] = {}
            for t, tier in enumerate(self.tiers):
                ask = [i for i in asking if i not in entries and first[i] <= t]
                if not ask:
                    continue
                digests = [keys[i].digest for i in ask]
                misses: list[CacheEntry | None] = [None] * len(ask)
                answers = await self._guarded(
                    tier.kind, "lookup", tier.get_many(digests, self.pools, deadline), misses
                )
                if len(answers) != len(ask):  # a tier answering other keys: all misses
                    answers = misses
                for i, entry in zip(ask, answers, strict=True):
                    if entry is not None:
                        entries[i], source[i] = entry, t
            verdicts = await self._check(entries, keys, deadline)
            asking = []
            for i, entry in entries.items():
                if verdicts.get(i, True) is True:
                    found[i] = entry
                    continue
                stale[i] |= verdicts[i] is False  # else: not checked in time
                first[i] = source[i] + 1
                if first[i] < len(self.tiers) and anyio.current_time() < deadline:
                    asking.append(i)
        if any(source):
            await self._backfill(keys, found, source)
        hits = {tier.kind: 0 for tier in self.tiers}
        for entry, t in zip(found, source, strict=True):
            if entry is not None:
                hits[self.tiers[t].kind] += 1
        self.stats.add(
            **{f"{kind}_hits": count for kind, count in hits.items()},
            misses=sum(entry is None for entry in found),
            stale=sum(stale),
        )
        return [None if entry is None else cached_output(entry) for entry in found]

    async def _check(
        self, entries: dict[int, CacheEntry], keys: Sequence[CacheKey], deadline: float
    ) -> dict[int, bool | None]:
        """Whether the dependencies of each entry that has some hold (``None``: not
        known by the deadline), the cheapest checks first: one entry with many large
        headers does not cost the others their answers."""
        checks = [i for i, entry in entries.items() if has_dependencies(entry)]
        if not checks:
            return {}
        checks.sort(key=lambda i: check_cost(entries[i]))
        work = self.pools.each(
            "checks", _fresh, [(entries[i], keys[i].cwd) for i in checks], deadline=deadline
        )
        unknown: list[bool | None] = [None] * len(checks)
        answers = await self._guarded("dependency", "check", work, unknown)
        return dict(zip(checks, answers, strict=True))

    async def _backfill(
        self, keys: Sequence[CacheKey], found: Sequence[CacheEntry | None], source: Sequence[int]
    ) -> None:
        """Keep each hit in the tiers faster than the one that answered it."""
        for t, tier in enumerate(self.tiers[:-1]):
            slower = [
                (key.digest, entry)
                for key, entry, s in zip(keys, found, source, strict=True)
                if entry is not None and s > t
            ]
            if slower:
                await self._guarded(tier.kind, "backfill", tier.put_many(slower), None)

    @contextlib.asynccontextmanager
    async def store(
        self,
        key: CacheKey | None,
        prepared: PreparedCompile,
        output: BackendOutput,
        *,
        elapsed: float,
        started_ns: int,
        quote_folder: Callable[[], str],
    ) -> AsyncIterator[None]:
        entry = None
        cached = output.status == "ok" or (self.cache_failures and output.status == "failed")
        if key is not None and cached:
            entry = await self._entry(prepared, output, elapsed, started_ns, quote_folder)
        if entry is not None:
            assert key is not None
            first = self.tiers[0]
            await self._guarded(first.kind, "write", first.put_many([(key.digest, entry)]), None)
            self.stats.add(stores=1)
        yield
        if entry is not None:
            assert key is not None
            for tier in self.tiers[1:]:
                await self._guarded(tier.kind, "write", tier.put_many([(key.digest, entry)]), None)

    async def _entry(
        self,
        prepared: PreparedCompile,
        output: BackendOutput,
        elapsed: float,
        started_ns: int,
        quote_folder: Callable[[], str],
    ) -> CacheEntry | None:
        """The entry for ``output``, its dependencies recorded; ``None`` when they
        cannot be known for sure (then it is not cached)."""

        def recorded() -> CacheEntry | None:
            folder = quote_folder() if output.dependencies is None else ""
            kept = record(
                prepared, output, roots=self._roots, quote_folder=folder, started_ns=started_ns
            )
            if kept is None:
                return None
            deps, extra = kept
            return entry_of(
                prepared, output, elapsed, deps, extra, cache_failures=self.cache_failures
            )

        try:
            return await anyio.to_thread.run_sync(recorded)
        except Exception:  # a bug: the result stands, only it is not cached
            logger.exception("asynccomp: recording %r for the cache failed", prepared.filename)
            return None

    # -- life -------------------------------------------------------------------------------

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        for tier in self.tiers:
            await tier.start(task_group)

    async def aclose(self) -> None:
        for tier in self.tiers:
            await tier.aclose()
        await anyio.to_thread.run_sync(self.save_stats)

    def save_stats(self) -> None:
        """Blocking: add this cache's counts to its folder's totals."""
        if self.disk is not None:
            self.stats.save(self.disk.root, self.disk.umask)


def _fresh(each: tuple[CacheEntry, str | None], stopped: Callable[[], bool]) -> bool:
    entry, cwd = each
    return fresh(entry, stopped, cwd)


def open_cache(
    toolkit: Toolkit,
    *,
    folder: Path | None,
    memory_bytes: int,
    disk_bytes: int | None = None,
    cache_failures: bool = False,
    remote: RemoteCache | None = None,
    identities: Identities | None = None,
    umask: int | None = None,
) -> TieredCache:
    """Blocking: the engine's cache, as an engine or a compile server makes it: memory,
    the disk tier in ``folder`` (``None``: none; a folder that cannot be used issues a
    :class:`~asynccomp.cache.CacheDirWarning` and is left out, and so does one that
    users the ``umask`` does not share it with can write,
    :class:`~asynccomp.cache.CacheTrustWarning`), the ``remote`` store. ``umask``: the
    modes of what the disk tier writes (:mod:`asynccomp._perms`).
    ``disk_bytes``: the disk tier's bound (``None``: the folder's, the environment's or
    the default, :func:`~._settings.max_size`). ``identities``: each backend's compiler
    identity and header folders (default: the built-in backends' in ``toolkit``)."""
    stats = CacheStats()
    tiers: list[Tier] = [MemoryTier(MemoryCache(memory_bytes))]
    if folder is not None:
        bound, _ = max_size(folder, disk_bytes)
        try:
            disk = DiskCache(folder, disk_bound(bound), umask=umask)
        except CacheUnavailable as exc:
            warn(
                f"compile cache folder {folder} is not usable ({exc}); caching in memory only",
                CacheDirWarning,
            )
        else:
            why = untrusted(disk.directory, disk.umask)
            if why is None:
                tiers.append(DiskTier(disk))
            else:
                warn(
                    f"compile cache folder {folder} is not used: {why}, and whoever can "
                    "write there can forge entries; caching in memory only (chmod go-w it, "
                    "or share the cache on purpose: Engine(umask=0o002), "
                    f"${UMASK_ENV}=002)",
                    CacheTrustWarning,
                )
    if remote is not None:
        tiers.append(RemoteTier(remote, stats))
    if identities is None:

        def identities(backend: str) -> tuple[str, Sequence[Path]]:
            return compiler_identity(backend, toolkit)

    return TieredCache(
        tiers,
        keys=KeyMaker(identities),
        roots=toolkit_roots(toolkit),
        stats=stats,
        cache_failures=cache_failures,
    )
