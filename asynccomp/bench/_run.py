"""Running a benchmark: one engine per configuration, warm-up passes, timed rounds.

Every configuration gets its own engine (``cache=False``: a benchmark must compile),
started one after the other, warmed up (``Engine.warm_up``) and then run over the corpus
``warmup`` times untimed; the first of all its passes is its cold pass. A pass submits
the whole corpus as one batch (``Engine.as_completed``), as a sweep would, so the engine
orders it (longest first, by what its cost model learned in earlier passes). Then come
``repeat`` timed rounds over all configurations, every other round in reverse order, so
that drift in the machine (clock, page cache, other load) falls on all of them alike.
All engines stay open until the end, so each keeps its warm workers; idle workers cost
memory but no CPU.

Every pass compiles sources no cache has seen, as an autotuner's candidates are: each
source gets a comment naming the run, its configuration and the pass, and asynccomp's
cache is off. NVRTC 12.9 and later keep a cache of their own (in ``~/.nv``, shared by
every process, on machines with a CUDA driver) that ignores such a comment: the run turns
it off unless ``BenchSettings(nvrtc_cache=True)`` (:mod:`._nvrtc_cache`).

The baseline (``"tvm"``) is what TVM's ``tvm_callback_cuda_compile`` does: one kernel
at a time, in this process, NVRTC, the original source (no fast path).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from ..engine import Engine
from ..examples import EXAMPLES_DIR
from ..job import Backend, CompileJob, OutputFormat
from ..result import CompileResult
from ._memory import MemorySampler, child_pids
from ._model import BenchConfig, BenchError, BenchSettings, ConfigRun, Kernel, PassResult
from ._nvrtc_cache import nvrtc_cache

__all__ = ("BenchRun", "Progress", "build_jobs", "load_corpus", "run_bench")


@dataclass(frozen=True)
class Progress:
    """Where a running benchmark is, for a progress display.

    Sent when a pass starts (``done == 0``), after every job, and when the pass ends
    (``seconds`` set). ``index`` counts configurations from 1; ``number`` counts the
    passes of this ``phase`` from 1; ``cold`` marks the first pass of a fresh engine.
    """

    config: BenchConfig
    index: int
    configs: int
    phase: Literal["warm-up", "timed"]
    number: int
    passes: int
    cold: bool
    done: int
    total: int
    seconds: float | None = None


ProgressCallback = Callable[[Progress], None]


@dataclass(frozen=True)
class BenchRun:
    """What :func:`run_bench` measured, with what it needs to describe it: ``rounds``
    timed rounds of the ``settings.repeat`` asked for."""

    settings: BenchSettings
    kernels: tuple[Kernel, ...]
    runs: tuple[ConfigRun, ...]
    toolkit_versions: dict[str, str | None]
    rounds: int


def load_corpus(folder: Path | None = None, limit: int | None = None) -> tuple[Kernel, ...]:
    """The ``*.cu`` files of ``folder`` and its subfolders, sorted by path (default: the
    built-in examples); the first ``limit`` of them when given."""
    root = EXAMPLES_DIR if folder is None else folder
    if not root.is_dir():
        raise BenchError(f"no such folder: {root}")
    files = sorted(root.rglob("*.cu"))
    if limit is not None:
        if limit < 1:
            raise BenchError("limit must be at least 1")
        files = files[:limit]
    if not files:
        raise BenchError(f"no .cu files in {root}")
    kernels = []
    for path in files:
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BenchError(f"cannot read {path}: {exc}") from exc
        kernels.append(Kernel(str(path.relative_to(root).with_suffix("")), source, path))
    return tuple(kernels)


def build_jobs(
    kernels: Sequence[Kernel], backend: Backend, settings: BenchSettings
) -> list[CompileJob]:
    """The jobs of one pass: NVRTC -> cubin, or nvcc -> fatbin, for ``settings.arch``."""
    output: OutputFormat = "fatbin" if backend == "nvcc" else "cubin"
    if settings.style == "plain":
        return [
            CompileJob(k.source, name=k.name, backend=backend, output=output, arch=settings.arch)
            for k in kernels
        ]
    from ..tvm import make_job  # the TVM facade; imported only when this style is asked for

    # TVM names every program "tvm_kernels": keep its name, so the compile is the same.
    return [
        make_job(k.source, target_format=output, arch=settings.arch, compiler=backend)
        for k in kernels
    ]


def _engine(config: BenchConfig, arch: str) -> Engine:
    if config.kind == "nvcc":
        # nvcc jobs never touch NVRTC: keep its side to one idle thread.
        return Engine(
            arch, 1, config.workers, nvrtc_mode="threads", tvm_fast_path=False, cache=False
        )
    mode: Literal["threads", "processes"] = "processes" if config.kind == "processes" else "threads"
    return Engine(
        arch,
        config.workers,
        1,
        nvrtc_mode=mode,
        tvm_fast_path=bool(config.fast_path),
        cache=False,
    )


class _Config:
    """One configuration while it runs: its engine, jobs, worker pids and passes."""

    def __init__(
        self, config: BenchConfig, index: int, count: int, kernels: Sequence[Kernel], run: str
    ) -> None:
        self.config = config
        self.run = run
        self.index = index
        self.count = count
        self.names = tuple(k.name for k in kernels)
        self.corpus_jobs: list[CompileJob] = []  # each pass compiles them with its tag
        self.jobs: list[CompileJob] = []  # this pass's
        self._index: dict[int, int] = {}
        self.engine: Engine | None = None
        self.worker_pids: set[int] = set()
        self.startup = 0.0
        self.passes: list[PassResult] = []

    def use_jobs(self, jobs: list[CompileJob]) -> None:
        self.corpus_jobs = jobs

    def _new_sources(self) -> None:
        """This pass's jobs: the corpus's, each source tagged (see the module docstring)."""
        number = len(self.passes)
        tag = f"\n// asynccomp bench {self.run}: configuration {self.index}, pass {number}\n"
        self.jobs = [replace(job, source=job.source + tag) for job in self.corpus_jobs]
        self._index = {id(job): i for i, job in enumerate(self.jobs)}

    def _position(self, result: CompileResult, results: list[CompileResult | None]) -> int:
        """Where ``result`` belongs in corpus order: its job is one of ``self.jobs``."""
        index = self._index.get(id(result.job))
        if index is None or results[index] is not None:
            # Not the very object submitted: the first equal job still without a result.
            index = next(
                i for i, job in enumerate(self.jobs) if job == result.job and results[i] is None
            )
        return index

    async def start(self, stack: AsyncExitStack, arch: str) -> None:
        before = child_pids()
        started = time.perf_counter()
        engine = await stack.enter_async_context(_engine(self.config, arch))
        if self.config.backend == "nvrtc":  # nvcc has no workers to warm up
            await engine.warm_up()
        self.startup = time.perf_counter() - started
        self.engine = engine
        self.worker_pids = child_pids() - before

    async def run_pass(
        self,
        phase: Literal["warm-up", "timed"],
        number: int,
        passes: int,
        exclude: set[int],
        progress: ProgressCallback | None,
    ) -> PassResult:
        engine = self.engine
        assert engine is not None
        self._new_sources()
        total = len(self.jobs)
        results: list[CompileResult | None] = [None] * total
        cold = not self.passes
        done = 0

        def report(seconds: float | None = None) -> None:
            if progress is not None:
                progress(
                    Progress(
                        self.config,
                        self.index,
                        self.count,
                        phase,
                        number,
                        passes,
                        cold,
                        done,
                        total,
                        seconds,
                    )
                )

        def finished_one(result: CompileResult) -> None:
            nonlocal done
            results[self._position(result, results)] = result
            done += 1
            report()

        report()
        with MemorySampler(exclude=exclude) as memory:
            started = time.perf_counter()
            if self.config.kind == "tvm":
                for job in self.jobs:  # TVM's way: one after another
                    finished_one(await engine.compile(job))
            else:
                # One batch, as a sweep submits it: the engine orders a batch's jobs
                # (longest first), which single compile() calls would not let it do.
                async with engine.as_completed(self.jobs) as completed:
                    async for result in completed:
                        finished_one(result)
            wall = time.perf_counter() - started
        report(wall)
        finished = [r for r in results if r is not None]
        assert len(finished) == total
        return PassResult(
            wall=wall,
            elapsed=tuple(r.elapsed for r in finished),
            queued=tuple(r.queued for r in finished),
            failures=tuple(
                (name, str(r.error))
                for name, r in zip(self.names, finished, strict=True)
                if not r.ok
            ),
            peak_rss=memory.peak,
        )


async def run_bench(
    kernels: Sequence[Kernel],
    settings: BenchSettings,
    progress: ProgressCallback | None = None,
    on_round: Callable[[BenchRun], None] | None = None,
) -> BenchRun:
    """Run every configuration of ``settings`` over ``kernels``; see the module docstring
    for the order of passes. Compile failures are recorded in the passes, not raised.

    ``progress`` hears about every pass and job; ``on_round`` gets what was measured so
    far after each timed round (so that a long run that is stopped still leaves results).
    """
    if not kernels:
        raise BenchError("the corpus is empty")
    jobs: dict[Backend, list[CompileJob]] = {}
    run = secrets.token_hex(4)
    states = [
        _Config(config, index, len(settings.configs), kernels, run)
        for index, config in enumerate(settings.configs, 1)
    ]
    for state in states:
        backend = state.config.backend
        if backend not in jobs:
            jobs[backend] = build_jobs(kernels, backend, settings)
        state.use_jobs(jobs[backend])

    def others(state: _Config) -> set[int]:
        return {pid for s in states if s is not state for pid in s.worker_pids}

    versions: dict[str, str | None] = {}

    def measured(rounds: int) -> BenchRun:
        runs = tuple(
            ConfigRun(s.config, s.startup, tuple(s.passes), settings.warmup) for s in states
        )
        return BenchRun(settings, tuple(kernels), runs, versions, rounds)

    async with AsyncExitStack() as stack:
        stack.enter_context(nvrtc_cache(settings.nvrtc_cache))  # before any engine starts
        for state in states:
            await state.start(stack, settings.arch)
            assert state.engine is not None
            versions = state.engine.compiler_versions
            for number in range(1, settings.warmup + 1):
                state.passes.append(
                    await state.run_pass(
                        "warm-up", number, settings.warmup, others(state), progress
                    )
                )
        for round_ in range(settings.repeat):
            for state in states if round_ % 2 == 0 else states[::-1]:
                state.passes.append(
                    await state.run_pass(
                        "timed", round_ + 1, settings.repeat, others(state), progress
                    )
                )
            if on_round is not None and round_ + 1 < settings.repeat:
                on_round(measured(round_ + 1))
    return measured(settings.repeat)
