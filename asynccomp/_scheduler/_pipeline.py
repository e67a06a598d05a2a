"""The way of a job through the engine: plan -> cache -> coalesce -> queue -> compile.

:meth:`Scheduler.run` takes a batch through it:

1. The whole batch is outlined (:mod:`._plan`): architectures, estimates, queue order.
2. Chunk by chunk, longest jobs first, jobs are rendered and looked up: in the memory
   tier at once, in the disk tier with one thread call per chunk. Hits are delivered.
3. A miss whose key is already being compiled follows that compile (:mod:`._coalesce`);
   otherwise it is queued for a slot of its backend (:mod:`._dispatch`).
4. When a slot frees, the queue starts the job's compile as a task of its batch's task
   group: dump folder, compile, result, memory tier, delivery to the job and to its
   followers, then the disk tier.

Only compiles that hold a slot have a task; a queued job or a follower is a small entry.
Every exception a job can cause ends as that job's result (a ``CompileError``), never
as an exception that would cost the other jobs of the batch theirs.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import anyio
import anyio.lowlevel
import anyio.to_thread

from ..backends import BackendOutput, PreparedCompile
from ..cache._deps import Dependency, include_dirs_of, scan_includes, snapshot
from ..cache._remote import RemoteWriter
from ..errors import CompileTimeout
from ..job import CompileJob
from ..result import CompileResult
from ._batch import Batch
from ._coalesce import Coalescer
from ._counters import Counters
from ._dispatch import SlotQueue
from ._plan import PlannedJob, Planner
from ._results import from_output, internal_failure, shared

__all__ = ("CHUNK", "Scheduler")

logger = logging.getLogger("asynccomp")

#: Jobs rendered and looked up per step: small enough that a step never holds the event
#: loop for long, large enough that a disk lookup's thread hop is shared.
CHUNK = 64


class Scheduler:
    """The shared state of one engine's jobs: queues, in-flight compiles, counters."""

    def __init__(
        self,
        *,
        planner: Planner,
        counters: Counters,
        writer: RemoteWriter | None = None,
        shared_slots: bool = False,
    ) -> None:
        # The planner's toolkit, backends, slots, cache, dumps and cost model: one engine
        # has one of each.
        self.planner = planner
        toolkit = self.toolkit = planner.toolkit
        self.backends = planner.backends
        self.cache = planner.cache
        self.dumps = planner.dumps
        self.cost_model = planner.cost_model
        self.counters = counters
        slots = planner.slots
        if shared_slots:  # one set of slots for every backend (a cluster's actors)
            shared = SlotQueue(max(slots.values()), self._start)
            self.queues = dict.fromkeys(slots, shared)
        else:
            self.queues = {name: SlotQueue(total, self._start) for name, total in slots.items()}
        self.coalescer: Coalescer[PlannedJob] = Coalescer()
        self.writer = writer
        #: The compiles running now, with when each started (time.monotonic()).
        self.running: dict[int, tuple[PlannedJob, float]] = {}
        # What the toolkit's include fingerprint covers: headers under these are not
        # dependencies of a compile's cache entry.
        roots = [*toolkit.include_dirs]
        if toolkit.cuda_root is not None:
            roots.append(toolkit.cuda_root)
        self._toolkit_roots = sorted({os.path.realpath(r) for r in roots})

    def running_jobs(self) -> list[tuple[CompileJob, float]]:
        """The jobs compiling now and how long each has run, longest first."""
        now = time.monotonic()
        jobs = [(p.job, now - started) for p, started in self.running.values()]
        return sorted(jobs, key=lambda item: -item[1])

    @property
    def waiting(self) -> int:
        """Jobs queued for a slot now."""
        return sum(queue.waiting for queue in set(self.queues.values()))

    # -- a batch -------------------------------------------------------------------------

    async def run(self, batch: Batch, jobs: Sequence[CompileJob]) -> None:
        """Take ``batch`` (made for ``jobs``) to its end; its results go to its sink.
        Cancelled, it withdraws what it has queued and cancels its compiles."""
        async with anyio.create_task_group() as tg:
            batch.task_group = tg
            try:
                await self._submit(batch, jobs)
                await batch.finished.wait()
            finally:
                self._withdraw(batch)

    async def _submit(self, batch: Batch, jobs: Sequence[CompileJob]) -> None:
        outlines, failed = self.planner.outline(jobs)
        self.counters.submitted += len(jobs)
        for index, result in failed:
            self._deliver(batch, index, result)
        for start in range(0, len(outlines), CHUNK):
            # Between chunks other tasks run, and a cancelled caller stops here.
            await anyio.lowlevel.checkpoint()
            planned: list[PlannedJob] = []
            for outline in outlines[start : start + CHUNK]:
                job = jobs[outline.index]
                try:
                    plan = self.planner.plan(batch, job, outline)
                except Exception as exc:  # a bug: that job's result, not the batch's
                    logger.exception("asynccomp: planning job %r failed", job.name)
                    plan = internal_failure(job, None, exc)
                if isinstance(plan, CompileResult):
                    self._deliver(batch, outline.index, plan)
                else:
                    planned.append(plan)
            await self._look_up(planned)

    async def _look_up(self, planned: list[PlannedJob]) -> None:
        """Deliver the cache hits among ``planned``; queue (or coalesce) the misses."""
        cache = self.cache
        if cache is None:
            for p in planned:
                self._enqueue(p)
            return
        keys = [p.key for p in planned if p.key is not None]
        assert len(keys) == len(planned)
        in_memory = [cache.from_memory(key) for key in keys]
        # Memory hits without dependencies are answered here; disk reads and dependency
        # checks block, and go to a thread in one hop for the chunk.
        blocking = [
            i
            for i, e in enumerate(in_memory)
            if (e is None and cache.disk is not None) or (e is not None and e.metadata.get("deps"))
        ]
        entries = list(in_memory)
        cache.stats.add(
            memory_hits=len([e for e in in_memory if e is not None])
            - len([i for i in blocking if in_memory[i] is not None])
        )
        if blocking:
            checked = await anyio.to_thread.run_sync(
                cache.local, [keys[i] for i in blocking], [in_memory[i] for i in blocking]
            )
            for i, entry in zip(blocking, checked, strict=True):
                entries[i] = entry
        missing = [i for i, entry in enumerate(entries) if entry is None]
        if missing and cache.remote is not None:
            remote = await cache.from_remote([keys[i] for i in missing])
            for i, entry in zip(missing, remote, strict=True):
                entries[i] = entry
        cache.stats.add(misses=sum(entry is None for entry in entries))
        for p, entry in zip(planned, entries, strict=True):
            if entry is None:
                self._enqueue(p)
        for p, entry in zip(planned, entries, strict=True):
            if entry is None:
                continue
            result = replace(
                cache.result(entry, p.job, p.prepared), queued=time.monotonic() - p.submitted
            )
            self.counters.cache_hits += 1
            if p.dumps:
                result = await self.dumps.dump(p.prepared, result, self._versions())
            self._deliver(p.batch, p.index, result)

    def _enqueue(self, p: PlannedJob) -> None:
        """Follow an identical compile under way, or queue for a slot."""
        if p.key is not None and self.coalescer.follow_or_lead(p.key, p):
            p.batch.following[p.index] = p
            return
        entry = self.queues[p.backend].submit(p.priority, p)
        if entry.live:  # not started at once
            p.batch.queued[p.index] = entry

    def _withdraw(self, batch: Batch) -> None:
        """The batch is over (done or cancelled): nothing of it may start any more."""
        for p in batch.following.values():
            assert p.key is not None
            self.coalescer.leave(p.key, p)
        batch.following.clear()
        entries = list(batch.queued.values())
        batch.queued.clear()
        for entry in entries:
            self.queues[entry.item.backend].withdraw(entry)
            # It was queued as a leader: followers from other batches need a new one.
            self._hand_on(entry.item)

    # -- one compile ---------------------------------------------------------------------

    def _start(self, p: PlannedJob) -> None:
        """A slot is free for ``p`` (called by its queue)."""
        p.batch.queued.pop(p.index, None)
        assert p.batch.task_group is not None
        p.batch.task_group.start_soon(self._compile, p)

    async def _compile(self, p: PlannedJob) -> None:
        done: tuple[CompileResult, list[Dependency] | None] | None = None
        try:
            done = await self._compile_one(p)
        except Exception as exc:  # a bug or an OS error of ours: this job's result only
            logger.exception("asynccomp: job %r failed inside asynccomp", p.job.name)
            done = internal_failure(p.job, p.prepared, exc), None
        finally:
            self.queues[p.backend].release()
            if done is None:  # cancelled
                self._hand_on(p)
        await self._complete(p, *done)

    async def _compile_one(self, p: PlannedJob) -> tuple[CompileResult, list[Dependency] | None]:
        """The job's result, and the files it read outside the toolkit (``None`` when
        they cannot be known for sure: the result is then not cached)."""
        job, prepared = p.job, p.prepared
        warnings: list[str] = []
        folder = await self.dumps.start(job, prepared, warnings) if p.dumps else None
        if folder is not None and prepared.backend == "nvcc":
            prepared = replace(prepared, keep_dir=str(folder))
        counters = self.counters
        counters.compiled += 1
        counters.running += 1
        started = time.monotonic()
        started_ns = time.time_ns()
        self.running[id(p)] = (p, started)
        try:
            out = await self.backends[prepared.backend].run(prepared)
        finally:
            counters.running -= 1
            del self.running[id(p)]
        elapsed = time.monotonic() - started
        if out.status in ("ok", "failed"):  # timeouts and crashes say nothing of cost
            self.cost_model.observe(job.backend, (prepared.arch, *job.options), job.source, elapsed)
        result = from_output(job, prepared, out, elapsed=elapsed, queued=started - p.submitted)
        if warnings:
            result = replace(result, warnings=(*warnings, *result.warnings))
        deps: list[Dependency] | None = None
        if self.cache is not None and out.status in ("ok", "failed"):
            deps = await anyio.to_thread.run_sync(self._dependencies, prepared, out, started_ns)
        if folder is not None:
            result = await self.dumps.finish(folder, prepared, result, self._versions())
        return result, deps

    def _dependencies(
        self, prepared: PreparedCompile, out: BackendOutput, started_ns: int
    ) -> list[Dependency] | None:
        """Blocking: the files the compile read outside the toolkit, as they are now."""
        if out.dependencies is not None:  # the compiler said (nvcc)
            found = [d for d in out.dependencies if not _under(d, self._toolkit_roots)]
            absent: list[str] = []
        else:  # NVRTC cannot say: follow the includes
            found, absent = scan_includes(
                prepared.source.encode("utf-8", "surrogateescape"),
                include_dirs_of(prepared.options),
                self._toolkit_roots,
                str(Path.cwd()),
            )
        return snapshot(found, absent, not_before_ns=started_ns)

    async def _complete(
        self, leader: PlannedJob, result: CompileResult, deps: list[Dependency] | None
    ) -> None:
        """Deliver ``result`` to its job and to the jobs that waited for it; cache it."""
        cache, key = self.cache, leader.key
        entry = None
        if cache is not None and key is not None and deps is not None:
            entry = cache.remember(key, result, leader.prepared, deps)
        followers = self.coalescer.finish(key, leader) if key is not None else []
        self._deliver(leader.batch, leader.index, result)
        now = time.monotonic()
        for f in followers:
            del f.batch.following[f.index]
            if not _answers(result, f.job):
                self._enqueue(f)  # e.g. it allows more time than the compile that timed out
                continue
            mine = shared(result, f.job, f.prepared, leader.prepared, queued=now - f.submitted)
            self.counters.deduplicated += 1
            if f.dumps:
                assert f.batch.task_group is not None
                f.batch.task_group.start_soon(self._dump_and_deliver, f, mine)
            else:
                self._deliver(f.batch, f.index, mine)
        if entry is not None and cache is not None:
            assert key is not None
            if self.writer is not None:
                self.writer.submit(key, entry)  # the remote tier, off this job's path
            if cache.disk is not None:
                await anyio.to_thread.run_sync(cache.write, key, entry)

    async def _dump_and_deliver(self, p: PlannedJob, result: CompileResult) -> None:
        try:
            result = await self.dumps.dump(p.prepared, result, self._versions())
        finally:
            self._deliver(p.batch, p.index, result)

    def _hand_on(self, leader: PlannedJob) -> None:
        """``leader`` will not compile after all: its followers queue again (the first
        becomes the new leader, the others follow it)."""
        if leader.key is None:
            return
        for f in self.coalescer.finish(leader.key, leader):
            del f.batch.following[f.index]
            self._enqueue(f)

    # -- results -------------------------------------------------------------------------

    def _deliver(self, batch: Batch, index: int, result: CompileResult) -> None:
        counters = self.counters
        counters.completed += 1
        if result.ok:
            counters.succeeded += 1
        else:
            counters.failed += 1
            if isinstance(result.error, CompileTimeout):
                counters.timed_out += 1
        batch.deliver(index, result)

    def _versions(self) -> dict[str, str | None]:
        return self.toolkit.compiler_versions


def _under(path: str, roots: Sequence[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == root or real.startswith(root + os.sep) for root in roots)


def _answers(result: CompileResult, job: CompileJob) -> bool:
    """Whether another job's compile answers ``job`` too: always, but for a timeout
    that ``job``, allowed more time, might not have run into."""
    error = result.error
    if not isinstance(error, CompileTimeout):
        return True
    return job.timeout is not None and job.timeout <= error.timeout
