"""The engine's side of every call, whatever runs its compiles.

:meth:`Front.run` takes a batch (one ``compile``, ``compile_many``, ``as_completed`` or
``prefetch``) from jobs to results:

1. The planner outlines the whole batch (:mod:`._plan`); jobs that cannot run become
   failed results at once.
2. Chunk by chunk, longest first, jobs are rendered, dumped jobs get their folder (with
   the source and command in it, so a compile that hangs still leaves a reproduction),
   and each chunk goes to the runner (:class:`~asynccomp.runner.Runner`) as a chunk of
   :class:`~asynccomp.runner.CompileRequest` s.
3. The runner reports when a request starts compiling and how it ended; the result is
   built here (:mod:`._results`), the cost model learns the compile's time, the dump
   folder is completed, and the result goes to the batch's sink.

So results, dumps and counts are made in one place for every door: in process, on the
compile server, on a Ray cluster, through :class:`~asynccomp.SyncEngine`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import replace
from pathlib import Path

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from .._scheduler.local import Tally
from ..backends import backend_class
from ..cache._relocate import base_dir_from_environment
from ..cost import CostModel
from ..job import CompileJob
from ..result import CompileResult
from ..runner import CompileRequest, Outcome, Runner
from ..statistics import EngineStatistics
from ._batch import Batch
from ._dumps import DumpRegistry
from ._plan import Outline, PlannedJob, Planner
from ._results import from_outcome, internal_failure, with_warnings

__all__ = ("CHUNK", "Front")

logger = logging.getLogger("asynccomp")

#: Jobs rendered per step: small enough that a step never holds the event loop for long.
CHUNK = 64


class Front:
    """One engine's calls: their planning, results, dumps and counts."""

    def __init__(
        self,
        *,
        planner: Planner,
        runner: Runner,
        cost_model: CostModel,
        versions: Callable[[], dict[str, str | None]],
    ) -> None:
        self.planner = planner
        self.runner = runner
        self.dumps: DumpRegistry = planner.dumps
        self.cost_model = cost_model
        self.versions = versions
        self.tally = Tally()
        self._handed = 0  # requests given to the runner and not ended
        self._running: dict[tuple[int, int], tuple[CompileJob, float]] = {}

    def statistics(self) -> EngineStatistics:
        running = len(self._running)
        return self.tally.snapshot(
            queued=self._handed - running, running=running, workers=self.runner.workers()
        )

    def running_jobs(self) -> list[tuple[CompileJob, float]]:
        """The jobs compiling now and how long each has run, longest first."""
        now = time.monotonic()
        jobs = [(job, now - started) for job, started in self._running.values()]
        return sorted(jobs, key=lambda item: -item[1])

    async def run(self, batch: Batch, jobs: Sequence[CompileJob]) -> None:
        """Take ``batch`` (made for ``jobs``) to its end; its results go to its sink.
        Cancelled, what is still queued or compiling for it is cancelled."""
        # Read per batch, as the working folder is (a bad one: InvalidJob, nothing run).
        base_dir = base_dir_from_environment()
        outlines, failed = self.planner.outline(jobs)
        self.tally.submit(len(jobs))
        for index, result in failed:
            self.deliver(batch, index, result, None, None)
        if not outlines:
            return
        call = _BatchRun(self, batch, jobs, base_dir)
        dumping = any(self.dumps.wants(jobs[o.index]) for o in outlines)
        if not dumping:
            # No dump to write, so no task group for their writers (its exit is a turn of
            # the event loop, a good part of a one-job cache hit).
            await self._hand_over(call, outlines, batch.wanted)
            return
        async with anyio.create_task_group() as tg:
            call.task_group = tg
            await self._hand_over(call, outlines, True)

    async def make_pch(self, job: CompileJob) -> bool:
        """Render ``job`` as a compile would (raising what its result would hold: no
        architecture, no compiler), then have the runner make its PCH."""
        outlines, failed = self.planner.outline([job])
        if failed:
            raise _error_of(failed[0][1])
        plan = self.planner.plan(job, outlines[0], _working_folder() or "/")
        if isinstance(plan, CompileResult):
            raise _error_of(plan)
        return await self.runner.make_pch(plan.prepared)

    async def _hand_over(self, call: _BatchRun, outlines: list[Outline], want: bool) -> None:
        """Run ``call``'s requests on the runner (``want``: with their outputs)."""
        requests = call.requests(outlines)
        try:
            await self.runner.run(requests, call, want=want)
        finally:
            try:
                await requests.aclose()
                await call.close_dumps()
            finally:
                call.forget()  # whatever the dumps raised: the front's counts stay true

    def deliver(
        self,
        batch: Batch,
        index: int,
        result: CompileResult | None,
        status: str | None,
        timeout: float | None,
    ) -> None:
        """Count job ``index`` as ended (``status``: its compile's, ``None`` if it never
        ran; ``timeout``: its own) and hand its result (``None``: nobody reads it) on."""
        self.tally.ended(status, timeout)
        batch.deliver(index, result)


class _BatchRun:
    """One batch on its way through the runner: the runner's events come here."""

    def __init__(
        self, front: Front, batch: Batch, jobs: Sequence[CompileJob], base_dir: str | None
    ) -> None:
        self.front = front
        self.base_dir = base_dir
        self.batch = batch
        self.jobs = jobs
        self.task_group: anyio.abc.TaskGroup | None = None
        self.planned: dict[int, PlannedJob] = {}  # handed to the runner, not ended
        self.folders: dict[int, Path] = {}  # dump folders opened, the job not ended
        self.dumped: dict[int, PlannedJob] = {}
        self.warnings: dict[int, list[str]] = {}

    async def requests(self, outlines: list[Outline]) -> AsyncGenerator[list[CompileRequest]]:
        """The batch, rendered, in chunks (longest first), as the runner takes them."""
        front, planner = self.front, self.front.planner
        cwd = _working_folder()
        base_dir = self.base_dir
        for start in range(0, len(outlines), CHUNK):
            if start:
                # Between chunks other tasks run, and a cancelled caller stops here (the
                # call checkpointed as it began: a turn of the loop is a good part of a
                # one-job cache hit).
                await anyio.lowlevel.checkpoint()
            chunk: list[PlannedJob] = []
            for outline in outlines[start : start + CHUNK]:
                job = self.jobs[outline.index]
                try:
                    plan = planner.plan(job, outline, cwd or "/")
                except Exception as exc:  # a bug: that job's result, not the batch's
                    logger.exception("asynccomp: planning job %r failed", job.name)
                    plan = internal_failure(job, None, exc)
                if isinstance(plan, CompileResult):
                    front.deliver(self.batch, outline.index, plan, None, None)
                    continue
                if base_dir is not None and cwd is not None:
                    prepared = replace(plan.prepared, base_dir=base_dir, cwd=cwd)
                    plan = replace(plan, prepared=prepared)
                chunk.append(plan)
            dumped = [p for p in chunk if p.dumps]
            if dumped:
                opened = await anyio.to_thread.run_sync(self._open_folders, dumped)
                chunk = [opened.get(p.index, p) for p in chunk]
            for plan in chunk:
                self.planned[plan.index] = plan
            front._handed += len(chunk)
            yield [CompileRequest(p.index, p.prepared, p.estimate) for p in chunk]

    def _open_folders(self, dumped: list[PlannedJob]) -> dict[int, PlannedJob]:
        """Blocking: each dumped job's folder, with its source and command; nvcc keeps
        its intermediates there. A folder that cannot be made is a warning."""
        out = {}
        for plan in dumped:
            try:
                folder = self.front.dumps.open_folder(plan.job, plan.prepared)
            except OSError as exc:  # DumpDirError is one too
                self.warnings[plan.index] = [f"dump not written: {exc}"]
                continue
            self.folders[plan.index] = folder
            self.dumped[plan.index] = plan
            if backend_class(plan.prepared.backend).keeps_intermediates:
                plan = replace(plan, prepared=replace(plan.prepared, keep_dir=str(folder)))
            out[plan.index] = plan
        return out

    # -- the runner's events -----------------------------------------------------------------

    def started(self, index: int) -> None:
        plan = self.planned.get(index)
        if plan is not None:
            self.front.tally.started()
            self.front._running[(id(self), index)] = (plan.job, time.monotonic())

    def finished(self, index: int, outcome: Outcome) -> None:
        plan = self.planned.pop(index, None)
        if plan is None:  # pragma: no cover - a runner's bug; nothing to deliver to
            logger.error("asynccomp: an outcome for job %d, which is not waiting", index)
            return
        front = self.front
        front._handed -= 1
        started = front._running.pop((id(self), index), None)
        front.tally.answered(outcome.answer)
        job, prepared, out = plan.job, plan.prepared, outcome.output
        if outcome.answer == "compiled" and out.status in ("ok", "failed"):
            # Timeouts and crashes say nothing of cost.
            front.cost_model.observe(
                job.backend, (prepared.arch, *job.options), job.source, outcome.elapsed
            )
        now = time.monotonic()
        queued = (started[1] if started is not None else now) - self.batch.submitted
        folder = self.folders.pop(index, None)
        if not self.batch.wanted and folder is None:
            # Nobody reads it (a prefetch): counted, not built.
            front.deliver(self.batch, index, None, out.status, job.timeout)
            return
        result = with_warnings(
            from_outcome(job, prepared, outcome, queued=queued), self.warnings.pop(index, [])
        )
        if folder is None:
            front.deliver(self.batch, index, result, out.status, job.timeout)
            return
        assert self.task_group is not None
        self.task_group.start_soon(self._dump_and_deliver, index, folder, plan, result, out.status)

    async def _dump_and_deliver(
        self, index: int, folder: Path, plan: PlannedJob, result: CompileResult, status: str
    ) -> None:
        try:
            result = await self.front.dumps.finish(
                folder, plan.prepared, result, self.front.versions()
            )
        finally:
            self.front.deliver(self.batch, index, result, status, plan.job.timeout)

    async def close_dumps(self) -> None:
        """The batch ended (finished or cancelled): each dump folder of a job that did
        not end gets a ``result.json`` and a manifest line saying it was interrupted, so
        that every folder of a stopped sweep says what became of its job."""
        left = [(folder, self.dumped[index]) for index, folder in self.folders.items()]
        self.folders.clear()
        if not left:
            return
        versions = self.front.versions()
        items = [(folder, plan.job, plan.prepared) for folder, plan in left]
        with anyio.CancelScope(shield=True):  # the batch is being cancelled, most likely
            await anyio.to_thread.run_sync(self.front.dumps.interrupted, items, versions)

    def forget(self) -> None:
        """The runner is done with this batch (finished or cancelled): what it still
        had is no longer in flight."""
        front = self.front
        front._handed -= len(self.planned)
        for index in self.planned:
            front._running.pop((id(self), index), None)
        self.planned.clear()


def _working_folder() -> str | None:
    """This process's working folder; ``None`` if it was removed (relative paths then
    mean nothing)."""
    try:
        return str(Path.cwd())
    except OSError:
        return None


def _error_of(result: CompileResult) -> Exception:
    assert result.error is not None  # a failed result holds its error
    return result.error
