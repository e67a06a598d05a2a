"""Planning: turning a batch's jobs into :class:`PlannedJob` s, ready to queue.

Two steps, both plain code (no I/O):

1. :meth:`Planner.outline` looks at the whole batch at once: each job's architecture,
   its estimated compile time (:class:`~asynccomp.cost.CostModel`), its place in the
   queue, and whether it is long enough to be compiled with ``--split-compile``. Jobs
   that cannot run at all (no architecture) become failed results here.
2. :meth:`Planner.plan` renders one outlined job for its backend and computes its cache
   key. The scheduler does this chunk by chunk, longest jobs first, so that a batch of
   10,000 never holds the event loop for long and never keeps 10,000 rendered command
   lines around before they are needed.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..backends import BackendOptions, CompilerBackend, PreparedCompile
from ..cache import ResultCache
from ..cost import CostModel
from ..errors import ArchitectureNotFound, ToolkitNotFound
from ..gpu import local_gpu_arch
from ..job import CompileJob
from ..result import CompileResult
from ..toolkit import Toolkit
from ._dumps import DumpRegistry
from ._results import failure

if TYPE_CHECKING:
    from ._batch import Batch

__all__ = ("Outline", "PlannedJob", "Planner")


@dataclass(frozen=True, slots=True)
class Outline:
    """A job's place in its batch, before it is rendered."""

    index: int
    arch: str
    estimate: float  # seconds
    priority: tuple[float, float, float]  # (batch number, -estimate, sequence)
    split: bool


@dataclass(frozen=True, slots=True, eq=False)
class PlannedJob:
    """A job ready to run: rendered for its backend, with its cache key and its place
    in the queue. What changes while it waits (its queue entry, the jobs that wait for
    its compile) is kept by the scheduler, not here."""

    batch: Batch
    index: int
    job: CompileJob
    prepared: PreparedCompile
    key: str | None  # None when the engine has no cache
    estimate: float
    priority: tuple[float, float, float]
    submitted: float  # time.monotonic() when the batch arrived
    dumps: bool

    @property
    def backend(self) -> str:
        return self.prepared.backend


class Planner:
    """What planning needs to know of its engine."""

    def __init__(
        self,
        *,
        arch: str | None,
        toolkit: Toolkit,
        backends: Mapping[str, CompilerBackend],
        slots: Mapping[str, int],
        cost_model: CostModel,
        split_compile: int,
        tvm_fast_path: bool,
        dumps: DumpRegistry,
        cache: ResultCache | None,
    ) -> None:
        self.arch = arch
        self.toolkit = toolkit
        self.backends = backends
        self.slots = slots
        self.cost_model = cost_model
        self.split_compile = split_compile
        self.tvm_fast_path = tvm_fast_path
        self.dumps = dumps
        self.cache = cache
        self._batches = itertools.count()
        self._sequence = itertools.count()

    def outline(
        self, jobs: Sequence[CompileJob]
    ) -> tuple[list[Outline], list[tuple[int, CompileResult]]]:
        """The batch's outlines, longest first, and the failed results of jobs that
        cannot run."""
        batch = float(next(self._batches))
        # Estimates only order jobs within a batch (and pick jobs to split): a batch of
        # one, such as each synchronous TVM callback, does not pay for one.
        estimating = len(jobs) > 1 or self.split_compile > 0
        drafts: list[tuple[int, str, float]] = []
        failed: list[tuple[int, CompileResult]] = []
        for index, job in enumerate(jobs):
            arch = job.arch or self.arch or local_gpu_arch()
            if arch is None:
                error = ArchitectureNotFound(
                    "no architecture was given and no GPU was found to ask: pass "
                    'CompileJob(arch="sm_90a") or Engine(arch="sm_90a")',
                    job=job,
                )
                failed.append((index, failure(job, None, error)))
                continue
            estimate = (
                self.cost_model.estimate(job.backend, (arch, *job.options), job.source)
                if estimating
                else 0.0
            )
            drafts.append((index, arch, estimate))
        shares: dict[str, float] = {}
        if self.split_compile > 0:
            # A job that would finish last even if started first: estimated longer than
            # its backend's share of the batch per slot.
            for index, _, estimate in drafts:
                backend = jobs[index].backend
                shares[backend] = shares.get(backend, 0.0) + estimate
            shares = {b: total / self.slots[b] for b, total in shares.items()}
        outlines = [
            Outline(
                index,
                arch,
                estimate,
                (batch, -estimate, float(next(self._sequence))),
                self.split_compile > 0 and estimate > shares[jobs[index].backend],
            )
            for index, arch, estimate in drafts
        ]
        outlines.sort(key=lambda o: o.priority)
        return outlines, failed

    def plan(self, batch: Batch, job: CompileJob, outline: Outline) -> PlannedJob | CompileResult:
        """Render one job; a job whose compiler is missing becomes a failed result."""
        dumps = self.dumps.wants(job)
        options = BackendOptions(
            arch=outline.arch,
            line_info=dumps,
            keep_intermediates=dumps and job.backend == "nvcc",
            split_compile=self.split_compile if outline.split else 0,
            tvm_fast_path=self.tvm_fast_path if job.tvm_fast_path is None else job.tvm_fast_path,
        )
        try:
            prepared = self.backends[job.backend].prepare(job, options)
        except ToolkitNotFound as exc:
            return failure(job, outline.arch, exc)
        key = None if self.cache is None else self.cache.key(prepared, self.toolkit)
        return PlannedJob(
            batch=batch,
            index=outline.index,
            job=job,
            prepared=prepared,
            key=key,
            estimate=outline.estimate,
            priority=outline.priority,
            submitted=batch.submitted,
            dumps=dumps,
        )
