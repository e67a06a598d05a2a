"""Planning: turning a batch's jobs into :class:`PlannedJob` s, ready to queue.

Two steps, both plain code (no I/O), the same whatever runs the compiles:

1. :meth:`Planner.outline` looks at the whole batch at once: each job's architecture,
   its estimated compile time (:class:`~asynccomp.cost.CostModel`), its order (longest
   first), and whether it is long enough to be compiled with ``--split-compile``. Jobs
   that cannot run at all (no architecture) become failed results here.
2. :meth:`Planner.plan` renders one outlined job for its backend, with the caller's
   working folder for relative include paths. The engine does this chunk by chunk,
   longest jobs first, handing each chunk to its runner as it is ready, so that a batch
   of 10,000 never holds the event loop for long and the first compiles start early.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..backends import BackendOptions, CompilerBackend, PreparedCompile, backend_class
from ..cost import CostModel
from ..errors import ArchitectureNotFound, CompileError
from ..gpu import local_gpu_arch
from ..job import CompileJob
from ..result import CompileResult
from ._dumps import DumpRegistry
from ._results import failure

__all__ = ("Outline", "PlannedJob", "Planner")


@dataclass(frozen=True, slots=True)
class Outline:
    """A job's place in its batch, before it is rendered."""

    index: int
    arch: str
    estimate: float  # seconds
    split: bool


@dataclass(frozen=True, slots=True, eq=False)
class PlannedJob:
    """A job ready to run: rendered for its backend."""

    index: int
    job: CompileJob
    prepared: PreparedCompile
    estimate: float
    dumps: bool


class Planner:
    """What planning needs to know of its engine. ``renderers`` are the backends by
    name, used only to render (``prepare``); ``slots`` how many compiles of each run at
    once where the jobs go."""

    def __init__(
        self,
        *,
        arch: str | None,
        renderers: Mapping[str, CompilerBackend],
        slots: Mapping[str, int],
        cost_model: CostModel,
        split_compile: int,
        tvm_fast_path: bool,
        dumps: DumpRegistry,
    ) -> None:
        self.arch = arch
        self.renderers = renderers
        self.slots = slots
        self.cost_model = cost_model
        self.split_compile = split_compile
        self.tvm_fast_path = tvm_fast_path
        self.dumps = dumps

    def outline(
        self, jobs: Sequence[CompileJob]
    ) -> tuple[list[Outline], list[tuple[int, CompileResult]]]:
        """The batch's outlines, longest first, and the failed results of jobs that
        cannot run."""
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
            shares = {b: total / max(1, self.slots.get(b, 1)) for b, total in shares.items()}
        outlines = [
            Outline(
                index,
                arch,
                estimate,
                self.split_compile > 0 and estimate > shares[jobs[index].backend],
            )
            for index, arch, estimate in drafts
        ]
        outlines.sort(key=lambda o: -o.estimate)  # stable: equals keep their order
        return outlines, failed

    def plan(self, job: CompileJob, outline: Outline, cwd: str) -> PlannedJob | CompileResult:
        """Render one job; a job whose compiler is missing becomes a failed result."""
        dumps = self.dumps.wants(job)
        options = BackendOptions(
            arch=outline.arch,
            line_info=dumps,
            keep_intermediates=dumps and backend_class(job.backend).keeps_intermediates,
            split_compile=self.split_compile if outline.split else 0,
            tvm_fast_path=self.tvm_fast_path if job.tvm_fast_path is None else job.tvm_fast_path,
            cwd=cwd,
        )
        try:
            prepared = self.renderers[job.backend].prepare(job, options)
        except CompileError as exc:  # no compiler, or a source it cannot take (ptx's target)
            return failure(job, outline.arch, exc)
        return PlannedJob(outline.index, job, prepared, outline.estimate, dumps)
