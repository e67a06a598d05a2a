"""The scheduler: where a rendered compile goes, cache -> coalesce -> queue -> compile.

:class:`Scheduler` is the :class:`~asynccomp.runner.Runner` of an engine that compiles
in this process (its backends: NVRTC workers, nvcc subprocesses, or Ray actors), and
of the compile server, which runs one for every client of the machine. For each call
(:meth:`Scheduler.run`), chunk by chunk as the requests arrive:

1. key: each request gets its cache key and its place in the queue: ``(call number,
   -estimate, sequence)``, so calls are served in the order they came and the longest
   compiles of a call start first.
2. lookup: the cache is asked for the chunk, under the earliest timeout of its jobs
   (:class:`~asynccomp.cache.TieredCache`: its tiers, threads and checks are its own).
   Hits end there.
3. coalesce: a miss whose key is being compiled already follows that compile
   (:mod:`._coalesce`);
4. dispatch: otherwise it is queued for a slot of its backend (:mod:`._dispatch`).
5. run: when a slot frees, the queue starts the compile as a task of its call's task
   group;
6. store: its output goes to the cache and to the requests that waited for it.

Only compiles that hold a slot have a task; a queued request or a follower is a small
entry. Every exception a request can cause ends as that request's outcome (status
``internal``), never as an exception that would cost the call its other requests.
"""

from __future__ import annotations

import functools
import itertools
import logging
import time
from collections.abc import AsyncIterable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from ..backends import BackendOutput, CompilerBackend, PreparedCompile, backend_class
from ..cache._compile_key import CacheKey
from ..cache._tiered import Cache, NoCache
from ..runner import Answer, CompileRequest, Outcome, RunEvents, Runner
from ._coalesce import Coalescer
from ._dispatch import Entry, SlotQueue

__all__ = ("CHUNK", "Scheduler")

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
        self.chunks = 0  # chunks submitted
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
    key: CacheKey | None  # None when there is no cache (nothing to share or keep)
    priority: tuple[float, float, float]
    submitted: float = field(default_factory=time.monotonic)

    @property
    def prepared(self) -> PreparedCompile:
        return self.request.prepared

    @property
    def index(self) -> int:
        return self.request.index


class Scheduler(Runner):
    """Compiles on ``backends`` (by name), ``slots[name]`` at once each (one set of slots
    for all of them with ``shared_slots``: a cluster's actors run either compiler),
    answering from ``cache`` when it can (none: :class:`~asynccomp.cache._tiered.NoCache`)."""

    def __init__(
        self,
        *,
        backends: Mapping[str, CompilerBackend],
        slots: Mapping[str, int],
        cache: Cache | None = None,
        shared_slots: bool = False,
        where: str = "in process",
    ) -> None:
        self.backends = backends
        self.cache = NoCache() if cache is None else cache
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
        #: Compiles running now.
        self.running = 0

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
        await self.cache.start(task_group)

    async def warm_up(self) -> None:
        """Warm the backends that warm up (NVRTC); calls made while a warm-up runs wait
        for that one."""
        warming = self._warming
        if warming is not None:
            await warming.wait()
            return
        self._warming = warming = anyio.Event()
        try:
            # The backends that warm up (NVRTC's workers); one object serving several
            # names (a fake's, a cluster's) is warmed once.
            for backend in {id(b): b for b in self.backends.values()}.values():
                if backend_class(backend.name).warms_up:
                    await backend.warm_up()
        finally:
            self._warming = None
            warming.set()

    async def make_pch(self, prepared: PreparedCompile) -> bool:
        """The job's backend makes its precompiled header (beside the compile slots: it
        comes before the jobs that need it)."""
        backend = self.backends.get(prepared.backend)
        if backend is None:
            await anyio.lowlevel.checkpoint()
            return False
        return await backend.make_pch(prepared)

    async def aclose(self) -> None:
        for backend in {id(b): b for b in self.backends.values()}.values():
            await backend.aclose()
        await self.cache.aclose()

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
                if not call.finished.is_set():  # (a set Event's wait is a turn of the loop)
                    await call.finished.wait()
            finally:
                self._withdraw(call)

    # -- a call ------------------------------------------------------------------------------

    async def _submit(self, call: _SchedulerRun, requests: Sequence[CompileRequest]) -> None:
        call.pending += len(requests)
        for start in range(0, len(requests), CHUNK):
            if call.chunks:
                # Between chunks other tasks run, and a cancelled caller stops here. (Not
                # before a call's first: its caller has just checkpointed or started it,
                # and a turn of the loop is a good part of a one-job cache hit.)
                await anyio.lowlevel.checkpoint()
            call.chunks += 1
            items = []
            for request in requests[start : start + CHUNK]:
                try:
                    key = self.cache.key(request.prepared)
                except Exception as exc:  # a bug: that request's outcome, not the call's
                    logger.exception("asynccomp: keying %r failed", request.prepared.filename)
                    call.end(request.index, _internal(request.prepared, exc, "none"))
                    continue
                priority = (call.number, -request.estimate, float(next(self._sequence)))
                items.append(_Item(call, request, key, priority))
            await self._look_up(items)

    async def _look_up(self, items: list[_Item]) -> None:
        """End the cache hits among ``items``; queue (or coalesce) the misses. Whatever
        the cache has not answered by the earliest timeout of their jobs is a miss.
        An item whose key is being compiled follows that compile without a lookup: a
        lookup made while it runs could miss, and end after the compile had stored its
        output and let its followers go, and the item would compile it again."""
        rest = []
        for item in items:
            if item.key is not None and item.key in self.coalescer:
                self._enqueue(item)  # follows
            else:
                rest.append(item)
        items = rest
        keyed = [item for item in items if item.key is not None]
        if not keyed:  # no cache
            for item in items:
                self._enqueue(item)
            return
        timeouts = [i.prepared.timeout for i in keyed if i.prepared.timeout is not None]
        hits = await self.cache.lookup(
            [item.key for item in keyed if item.key is not None],
            within=min(timeouts) if timeouts else None,
        )
        answered = {id(item): hit for item, hit in zip(keyed, hits, strict=True)}
        for item in items:
            if answered.get(id(item)) is None:
                self._enqueue(item)
        for item in items:
            hit = answered.get(id(item))
            if hit is not None:
                item.call.end(item.index, Outcome(hit.output, "cache", 0.0, hit.filename))

    def _enqueue(self, item: _Item) -> None:
        """Follow an identical compile under way, or queue for a slot."""
        if item.key is not None and self.coalescer.follow_or_lead(item.key, item):
            item.call.following[item.index] = item
            return
        entry = self.queues[item.prepared.backend].submit(item.priority, item)
        if entry.live:  # not started at once
            item.call.queued[item.index] = entry

    def _withdraw(self, call: _SchedulerRun) -> None:
        """The call is over (done or cancelled): nothing of it may start any more."""
        for item in call.following.values():
            assert item.key is not None
            self.coalescer.leave(item.key, item)
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
        done: tuple[Outcome, BackendOutput, int] | None = None
        try:
            # A call cancelled between its item's start and this task's first turn (a
            # slot freed by its own cancelled compile: cancel_prefetched) starts nothing:
            # it is neither counted compiled nor run.
            await anyio.lowlevel.checkpoint_if_cancelled()
            done = await self._compile_one(item)
        except Exception as exc:  # a bug or an OS error of ours: this request's outcome only
            logger.exception("asynccomp: %r failed inside asynccomp", item.prepared.filename)
            outcome = _internal(item.prepared, exc, "compiled")
            done = outcome, outcome.output, 0
        finally:
            self.queues[item.prepared.backend].release()
            if done is None:  # cancelled
                self._hand_on(item)
        outcome, out, started_ns = done
        backend = self.backends[item.prepared.backend]
        completed = False
        try:
            # In the fastest tier before anyone is answered (an identical request that
            # comes next is a hit), in the slower ones after.
            async with self.cache.store(
                item.key,
                item.prepared,
                out,
                elapsed=outcome.elapsed,
                started_ns=started_ns,
                quote_folder=backend.quote_folder,
            ):
                self._complete(item, outcome)
                completed = True
        finally:
            if not completed:  # cancelled while its output was recorded
                self._hand_on(item)

    async def _compile_one(self, item: _Item) -> tuple[Outcome, BackendOutput, int]:
        """The request's outcome, what the compiler gave (with the files it read, when
        it says) and when it started (``time.time_ns()``)."""
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
        outcome = Outcome(replace(out, dependencies=None), "compiled", elapsed, prepared.filename)
        return outcome, out, started_ns

    def _complete(self, leader: _Item, outcome: Outcome) -> None:
        """End ``leader`` and the requests that waited for its compile."""
        followers = self.coalescer.finish(leader.key, leader) if leader.key is not None else []
        leader.call.end(leader.index, outcome)
        shared = replace(outcome, answer="shared") if followers else outcome
        for f in followers:
            del f.call.following[f.index]
            if not _answers(outcome, leader.prepared, f.prepared):
                self._enqueue(f)  # e.g. it allows more time than the compile that timed out
            else:
                f.call.end(f.index, shared)

    def _hand_on(self, leader: _Item) -> None:
        """``leader`` will not compile after all: its followers queue again (the first
        becomes the new leader, the others follow it)."""
        if leader.key is None:
            return
        for f in self.coalescer.finish(leader.key, leader):
            del f.call.following[f.index]
            self._enqueue(f)


def _internal(prepared: PreparedCompile, exc: BaseException, answer: Answer) -> Outcome:
    out = BackendOutput("internal", None, "", f"asynccomp failed: {exc!r}", cause=exc)
    return Outcome(out, answer, 0.0, prepared.filename)


def _answers(outcome: Outcome, compiled: PreparedCompile, prepared: PreparedCompile) -> bool:
    """Whether the compile of ``compiled`` answers ``prepared`` too: always, but for a
    timeout that ``prepared``, allowed more time, might not have run into."""
    if outcome.output.status != "timeout" or compiled.timeout is None:
        return True
    return prepared.timeout is not None and prepared.timeout <= compiled.timeout
