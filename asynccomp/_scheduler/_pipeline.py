"""The scheduler: where a rendered compile goes, cache -> coalesce -> queue -> compile.

:class:`Scheduler` is the :class:`~asynccomp.runner.Runner` of an engine that compiles
in this process (its backends: NVRTC workers, nvcc subprocesses, or Ray actors), and
of the compile server, which runs one for every client of the machine. For each call
(:meth:`Scheduler.run`), chunk by chunk as the requests arrive:

1. Each request gets its cache key and its place in the queue: ``(call number,
   -estimate, sequence)``, so calls are served in the order they came and the longest
   compiles of a call start first.
2. The cache is asked: the memory tier at once, the disk tier with one thread call per
   chunk, the dependency checks of what was found, then the remote tier, all in threads
   of the cache's own under one deadline per chunk (:mod:`._lookups`). Hits end there.
3. A miss whose key is being compiled already follows that compile (:mod:`._coalesce`);
   otherwise it is queued for a slot of its backend (:mod:`._dispatch`).
4. When a slot frees, the queue starts the compile as a task of its call's task group;
   its output goes to the cache and to the requests that waited for it.

Only compiles that hold a slot have a task; a queued request or a follower is a small
entry. Every exception a request can cause ends as that request's outcome (status
``internal``), never as an exception that would cost the call its other requests.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import time
from collections.abc import AsyncIterable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from ..backends import BackendOutput, CompilerBackend, PreparedCompile
from ..backends._base import empty_folder
from ..cache import CacheEntry
from ..cache._deps import Dependency, include_dirs_of, scan_includes, snapshot
from ..cache._remote import RemoteWriter
from ..cache._results import (
    RemoteVerdict,
    ResultCache,
    check_cost,
    dependencies_as_kept,
    has_dependencies,
)
from ..runner import Answer, CompileRequest, Outcome, RunEvents, Runner
from ..toolkit import Toolkit
from ._coalesce import Coalescer
from ._dispatch import Entry, SlotQueue
from ._lookups import LOOKUP_LIMIT, Lookups

__all__ = ("CHUNK", "Scheduler")

#: A compile's dependencies as its cache entry keeps them, and what its metadata says
#: of them (see ResultCache.remember).
Kept = tuple[list[Dependency], dict[str, Any]]

logger = logging.getLogger("asynccomp")

#: Requests looked up per step: small enough that a step never holds the event loop for
#: long, large enough that a disk lookup's thread hop is shared.
CHUNK = 64


class _SchedulerRun:
    """One :meth:`Scheduler.run`: its requests' events, and what it has waiting."""

    def __init__(self, events: RunEvents, number: int) -> None:
        self.events = events
        self.number = float(number)
        self.task_group: anyio.abc.TaskGroup | None = None
        self.pending = 0
        self.all_submitted = False
        self.finished = anyio.Event()
        # What this call has waiting, withdrawn if it is cancelled: its queue entries,
        # and its requests that wait for another request's compile.
        self.queued: dict[int, Entry[_Item]] = {}
        self.following: dict[int, _Item] = {}

    def end(self, index: int, outcome: Outcome) -> None:
        self.pending -= 1
        self.events.finished(index, outcome)
        self._check()

    def _check(self) -> None:
        if self.all_submitted and self.pending == 0:
            self.finished.set()


@dataclass(eq=False, slots=True)
class _Item:
    """A request inside the scheduler."""

    call: _SchedulerRun
    request: CompileRequest
    key: str | None  # None when there is no cache (nothing to share or keep)
    priority: tuple[float, float, float]
    submitted: float = field(default_factory=time.monotonic)

    @property
    def prepared(self) -> PreparedCompile:
        return self.request.prepared

    @property
    def index(self) -> int:
        return self.request.index

    @property
    def flight(self) -> str | None:
        """What identical compiles in flight share: the key, and with
        ``$ASYNCCOMP_BASE_DIR`` the working folder too (one key, two trees: each reads
        its own headers, which only the cache's dependency check compares)."""
        if self.key is None or self.prepared.base_dir is None:
            return self.key
        return f"{self.key}\0{self.prepared.cwd}"


class Scheduler(Runner):
    """Compiles on ``backends`` (by name), ``slots[name]`` at once each (one set of slots
    for all of them with ``shared_slots``: a cluster's actors run either compiler),
    answering from ``cache`` when it can."""

    def __init__(
        self,
        *,
        toolkit: Toolkit,
        backends: Mapping[str, CompilerBackend],
        slots: Mapping[str, int],
        cache: ResultCache | None,
        writer: RemoteWriter | None = None,
        shared_slots: bool = False,
        where: str = "in process",
    ) -> None:
        self.toolkit = toolkit
        self.backends = backends
        self.cache = cache
        self.writer = writer
        self.where = where
        self._slots = dict(slots)
        if shared_slots:
            shared = SlotQueue(max(slots.values()), self._start)
            self.queues = dict.fromkeys(slots, shared)
        else:
            self.queues = {name: SlotQueue(total, self._start) for name, total in slots.items()}
        self.coalescer: Coalescer[_Item] = Coalescer()
        self._calls = itertools.count()
        self._sequence = itertools.count()
        self._warming: anyio.Event | None = None
        #: The cache lookups' own threads (:mod:`._lookups`).
        self.lookups = Lookups()
        #: Compiles running now.
        self.running = 0
        # What the toolkit's include fingerprint covers: headers under these are not
        # dependencies of a compile's cache entry.
        roots = [*toolkit.include_dirs]
        if toolkit.cuda_root is not None:
            roots.append(toolkit.cuda_root)
        self._toolkit_roots = sorted({os.path.realpath(r) for r in roots})

    # -- the Runner interface ----------------------------------------------------------------

    def slots(self) -> Mapping[str, int]:
        return self._slots

    def workers(self) -> int:
        return sum(backend.worker_count() for backend in self.backends.values())

    def watch_workers(self, changed: Callable[[], None]) -> None:
        """Call ``changed()`` when :meth:`workers` may have changed (pushed by the
        backends as their workers start and end)."""
        for backend in {id(b): b for b in self.backends.values()}.values():
            backend.watch_workers(changed)

    def resize(self, backend: str, total: int) -> None:
        """``backend`` now runs ``total`` compiles at once (its queue's other backends,
        with shared slots, too): what waits is dispatched by the new count, so the
        longest-first order holds over the slots that really exist."""
        queue = self.queues[backend]
        queue.resize(total)
        for name, other in self.queues.items():
            if other is queue:
                self._slots[name] = queue.total

    @property
    def waiting(self) -> int:
        """Requests queued for a slot now."""
        return sum(queue.waiting for queue in set(self.queues.values()))

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        for name, backend in self.backends.items():
            backend.watch_capacity(functools.partial(self.resize, name))
        for backend in {id(b): b for b in self.backends.values()}.values():
            await backend.start(task_group)
        if self.writer is not None:
            task_group.start_soon(self.writer.run)

    async def warm_up(self) -> None:
        """Warm the NVRTC backend; calls made while a warm-up runs wait for that one."""
        warming = self._warming
        if warming is not None:
            await warming.wait()
            return
        self._warming = warming = anyio.Event()
        try:
            await self.backends["nvrtc"].warm_up()
        finally:
            self._warming = None
            warming.set()

    async def aclose(self) -> None:
        for backend in {id(b): b for b in self.backends.values()}.values():
            await backend.aclose()
        if self.writer is not None:
            await self.writer.aclose()  # what is queued, for a few seconds
        if self.cache is not None:
            if self.cache.remote is not None:
                await self.cache.remote.aclose()
            await anyio.to_thread.run_sync(self.cache.save_stats)

    async def run(
        self,
        requests: AsyncIterable[Sequence[CompileRequest]],
        events: RunEvents,
        *,
        want: bool = True,
    ) -> None:
        call = _SchedulerRun(events, next(self._calls))
        async with anyio.create_task_group() as tg:
            call.task_group = tg
            try:
                async for chunk in requests:
                    await self._submit(call, chunk)
                call.all_submitted = True
                call._check()
                await call.finished.wait()
            finally:
                self._withdraw(call)

    # -- a call ------------------------------------------------------------------------------

    async def _submit(self, call: _SchedulerRun, requests: Sequence[CompileRequest]) -> None:
        call.pending += len(requests)
        for start in range(0, len(requests), CHUNK):
            # Between chunks other tasks run, and a cancelled caller stops here.
            await anyio.lowlevel.checkpoint()
            items = []
            for request in requests[start : start + CHUNK]:
                try:
                    key = (
                        None
                        if self.cache is None
                        else self.cache.key(request.prepared, self.toolkit)
                    )
                except Exception as exc:  # a bug: that request's outcome, not the call's
                    logger.exception("asynccomp: keying %r failed", request.prepared.filename)
                    call.end(request.index, _internal(request.prepared, exc, "none"))
                    continue
                priority = (call.number, -request.estimate, float(next(self._sequence)))
                items.append(_Item(call, request, key, priority))
            await self._look_up(items)

    async def _look_up(self, items: list[_Item]) -> None:
        """End the cache hits among ``items``; queue (or coalesce) the misses.

        The blocking steps run in the lookup pools under one deadline for the chunk: the
        earliest timeout of its jobs, at most LOOKUP_LIMIT. Whatever is answered by then
        keeps its answer; the rest is a miss, compiled instead."""
        cache = self.cache
        if cache is None:
            for item in items:
                self._enqueue(item)
            return
        keys = [item.key for item in items if item.key is not None]
        assert len(keys) == len(items)
        limit = min(
            [LOOKUP_LIMIT, *(i.prepared.timeout for i in items if i.prepared.timeout is not None)]
        )
        deadline = anyio.current_time() + limit
        entries: list[CacheEntry | None] = [cache.from_memory(key) for key in keys]
        in_memory = [entry is not None for entry in entries]
        # 1. The disk tier, for what memory does not hold (bounded reads).
        reads = [i for i, entry in enumerate(entries) if entry is None]
        if reads and cache.disk is not None:
            found = await self.lookups.each(
                "reads", _read_disk(cache), [keys[i] for i in reads], deadline=deadline
            )
            for i, entry in zip(reads, found, strict=True):
                entries[i] = entry
        # 2. The dependency checks of what was found (these may take a while), the
        # cheapest first: what is answered by the deadline keeps its answer, so one
        # entry with many large headers does not cost the others theirs.
        checks = [i for i, e in enumerate(entries) if e is not None and has_dependencies(e)]
        checks.sort(key=lambda i: check_cost(entries[i]))
        stale = 0
        if checks:
            fresh = await self.lookups.each(
                "checks",
                _check(cache),
                [(entries[i], items[i].prepared.cwd) for i in checks],
                deadline=deadline,
            )
            for i, verdict in zip(checks, fresh, strict=True):
                if verdict is not True:  # stale (False), or not checked in time (None)
                    stale += verdict is False
                    entries[i] = None
        disk_hits = 0
        for i, entry in enumerate(entries):
            if entry is not None and not in_memory[i]:
                disk_hits += 1
                cache.keep(keys[i], entry)
        memory_hits = sum(e is not None for e in entries) - disk_hits
        cache.count_local(memory_hits=memory_hits, disk_hits=disk_hits, stale=stale)
        # 3. The remote tier, for what is missing still.
        missing = [i for i, entry in enumerate(entries) if entry is None]
        if missing and cache.remote is not None:
            remote = await self._remote(
                cache,
                [keys[i] for i in missing],
                [items[i].prepared.cwd for i in missing],
                deadline,
            )
            for i, entry in zip(missing, remote, strict=True):
                entries[i] = entry
        cache.stats.add(misses=sum(entry is None for entry in entries))
        for item, entry in zip(items, entries, strict=True):
            if entry is None:
                self._enqueue(item)
        for item, entry in zip(items, entries, strict=True):
            if entry is not None:
                output, filename = cache.output(entry)
                item.call.end(item.index, Outcome(output, "cache", 0.0, filename))

    async def _remote(
        self, cache: ResultCache, wanted: list[str], cwds: list[str | None], deadline: float
    ) -> list[CacheEntry | None]:
        """The remote tier's verified entries for ``wanted``: the network under the
        chunk's deadline too (the store has short timeouts of its own), the
        verification in the ``checks`` pool."""
        blobs: list[bytes | None] = [None] * len(wanted)
        with anyio.CancelScope(deadline=deadline):
            blobs = await cache.remote_blobs(wanted)
        if not any(blob is not None for blob in blobs):
            return [None] * len(wanted)
        pairs = list(zip(wanted, blobs, cwds, strict=True))
        verdicts = await self.lookups.each(
            "checks", _verify_remote(cache), pairs, deadline=deadline
        )
        cache.count_remote(verdicts)
        return [None if v is None else v.entry for v in verdicts]

    def _enqueue(self, item: _Item) -> None:
        """Follow an identical compile under way, or queue for a slot."""
        if item.flight is not None and self.coalescer.follow_or_lead(item.flight, item):
            item.call.following[item.index] = item
            return
        entry = self.queues[item.prepared.backend].submit(item.priority, item)
        if entry.live:  # not started at once
            item.call.queued[item.index] = entry

    def _withdraw(self, call: _SchedulerRun) -> None:
        """The call is over (done or cancelled): nothing of it may start any more."""
        for item in call.following.values():
            assert item.flight is not None
            self.coalescer.leave(item.flight, item)
        call.following.clear()
        entries = list(call.queued.values())
        call.queued.clear()
        for entry in entries:
            self.queues[entry.item.prepared.backend].withdraw(entry)
            # It was queued as a leader: followers from other calls need a new one.
            self._hand_on(entry.item)

    # -- one compile -------------------------------------------------------------------------

    def _start(self, item: _Item) -> None:
        """A slot is free for ``item`` (called by its queue)."""
        item.call.queued.pop(item.index, None)
        assert item.call.task_group is not None
        item.call.task_group.start_soon(self._compile, item)

    async def _compile(self, item: _Item) -> None:
        done: tuple[Outcome, Kept | None] | None = None
        try:
            done = await self._compile_one(item)
        except Exception as exc:  # a bug or an OS error of ours: this request's outcome only
            logger.exception("asynccomp: %r failed inside asynccomp", item.prepared.filename)
            done = _internal(item.prepared, exc, "compiled"), None
        finally:
            self.queues[item.prepared.backend].release()
            if done is None:  # cancelled
                self._hand_on(item)
        await self._complete(item, *done)

    async def _compile_one(self, item: _Item) -> tuple[Outcome, Kept | None]:
        """The request's outcome, and the files the compile read outside the toolkit
        (``None`` when they cannot be known for sure: the output is then not cached)."""
        prepared = item.prepared
        item.call.events.started(item.index)
        self.running += 1
        started = time.monotonic()
        started_ns = time.time_ns()
        try:
            out = await self.backends[prepared.backend].run(prepared)
        finally:
            self.running -= 1
        elapsed = time.monotonic() - started
        deps: Kept | None = None
        if self.cache is not None and out.status in ("ok", "failed"):
            deps = await anyio.to_thread.run_sync(self._dependencies, prepared, out, started_ns)
        return Outcome(
            replace(out, dependencies=None), "compiled", elapsed, prepared.filename
        ), deps

    def _dependencies(
        self, prepared: PreparedCompile, out: BackendOutput, started_ns: int
    ) -> Kept | None:
        """Blocking: the files the compile read outside the toolkit, as they are now, as
        its cache entry keeps them (and what its metadata says of them)."""
        if out.dependencies is not None:  # the compiler said (nvcc)
            found = [d for d in out.dependencies if not _under(d, self._toolkit_roots)]
            absent: list[str] = []
        else:  # NVRTC cannot say: follow the includes
            # From the folder NVRTC looks in first for a quoted include: its process's,
            # which for a worker process is an empty one, not this process's.
            backend = self.backends.get(prepared.backend)
            threads = getattr(backend, "mode", "threads") != "processes"
            found, absent = scan_includes(
                prepared.source.encode("utf-8", "surrogateescape"),
                include_dirs_of(prepared.options),
                self._toolkit_roots,
                str(Path.cwd()) if threads else empty_folder(),
            )
        deps = snapshot(found, absent, not_before_ns=started_ns)
        if deps is None:
            return None
        return dependencies_as_kept(deps, prepared, places_known=out.dependencies is None)

    async def _complete(self, leader: _Item, outcome: Outcome, kept: Kept | None) -> None:
        """End ``leader`` and the requests that waited for its compile; cache the output."""
        cache, key = self.cache, leader.key
        entry = None
        if cache is not None and key is not None and kept is not None:
            deps, extra = kept
            entry = cache.remember(
                key, leader.prepared, outcome.output, outcome.elapsed, deps, extra
            )
        flight = leader.flight
        followers = self.coalescer.finish(flight, leader) if flight is not None else []
        leader.call.end(leader.index, outcome)
        shared = replace(outcome, answer="shared")
        for f in followers:
            del f.call.following[f.index]
            if not _answers(outcome, leader.prepared, f.prepared):
                self._enqueue(f)  # e.g. it allows more time than the compile that timed out
            else:
                f.call.end(f.index, shared)
        if entry is not None and cache is not None:
            assert key is not None
            if self.writer is not None:
                self.writer.submit(key, entry)  # the remote tier, off this request's path
            if cache.disk is not None:
                await anyio.to_thread.run_sync(cache.write, key, entry)

    def _hand_on(self, leader: _Item) -> None:
        """``leader`` will not compile after all: its followers queue again (the first
        becomes the new leader, the others follow it)."""
        if leader.flight is None:
            return
        for f in self.coalescer.finish(leader.flight, leader):
            del f.call.following[f.index]
            self._enqueue(f)


# The lookups' work, as the pools take it: (item, stopped) -> answer.


def _read_disk(cache: ResultCache) -> Callable[[str, Callable[[], bool]], CacheEntry | None]:
    return lambda key, stopped: cache.read_disk(key)


def _check(
    cache: ResultCache,
) -> Callable[[tuple[CacheEntry | None, str | None], Callable[[], bool]], bool]:
    def check(pair: tuple[CacheEntry | None, str | None], stopped: Callable[[], bool]) -> bool:
        entry, cwd = pair
        assert entry is not None
        return cache.fresh(entry, stopped, cwd)

    return check


def _verify_remote(
    cache: ResultCache,
) -> Callable[[tuple[str, bytes | None, str | None], Callable[[], bool]], RemoteVerdict]:
    return lambda each, stopped: cache.verify_remote(each[0], each[1], stopped, each[2])


def _internal(prepared: PreparedCompile, exc: BaseException, answer: Answer) -> Outcome:
    out = BackendOutput("internal", None, "", f"asynccomp failed: {exc!r}", cause=exc)
    return Outcome(out, answer, 0.0, prepared.filename)


def _under(path: str, roots: Sequence[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == root or real.startswith(root + os.sep) for root in roots)


def _answers(outcome: Outcome, compiled: PreparedCompile, prepared: PreparedCompile) -> bool:
    """Whether the compile of ``compiled`` answers ``prepared`` too: always, but for a
    timeout that ``prepared``, allowed more time, might not have run into."""
    if outcome.output.status != "timeout" or compiled.timeout is None:
        return True
    return prepared.timeout is not None and prepared.timeout <= compiled.timeout
