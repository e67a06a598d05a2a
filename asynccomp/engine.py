"""The scheduler: an async engine that runs many compile jobs at once.

A job is first *planned* (architecture resolved, options rendered by its backend, cost
estimated), then answered from the cache or an identical compile in flight, else it
waits for a free slot of its backend (:class:`~asynccomp.dispatch.PrioritySlots`: NVRTC
workers, nvcc subprocesses) and runs. Within a batch (one ``compile_many``,
``as_completed`` or ``prefetch`` call) the longest jobs get slots first
(:class:`~asynccomp.cost.CostModel` estimates); batches are served in the order they
came. Every compile runs in a task owned by the caller (``compile``, ``compile_many``)
or by the engine's own task group (``as_completed``, ``prefetch``, the background
warm-up), so exceptions always propagate and nothing outlives the engine.

Example::

    import anyio
    from asynccomp import CompileJob, Engine

    SOURCE = 'extern "C" __global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }'

    async def main() -> None:
        jobs = [CompileJob(SOURCE, name=f"scale{i}") for i in range(8)]
        async with Engine(arch="sm_90a") as engine:
            for result in await engine.compile_many(jobs):
                print(result.job.name, len(result.unwrap()), "bytes of cubin")

    anyio.run(main)
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Literal

import anyio
import anyio.abc
import anyio.to_thread

from .backends import BackendOutput, CompilerBackend, NvccBackend, NvrtcBackend, PreparedCompile
from .backends.nvrtc import NvrtcMode
from .cache import default_cache_dir
from .cost import CostModel
from .dispatch import PrioritySlots, Ticket
from .dumps import DumpRoot, default_dump_root
from .errors import (
    ArchitectureNotFound,
    CompileError,
    CompileTimeout,
    EmptyOutput,
    EngineClosed,
    InvalidJob,
    ToolkitNotFound,
    WorkerCrashed,
)
from .gpu import local_gpu_arch
from .job import CompileJob, parse_arch
from .ptxas import parse_resource_report
from .result import CompileResult
from .result_cache import ResultCache
from .statistics import Counters, EngineStatistics
from .toolkit import Toolkit, find_toolkit
from .workers import default_nvrtc_workers, default_workers

__all__ = ("Engine", "EngineStatistics", "default_nvrtc_workers", "default_workers")

logger = logging.getLogger("asynccomp")


class _InFlight:
    """A compile others wait for: ``result`` is set (or left None if cancelled), then ``done``."""

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: CompileResult | None = None


@dataclass
class _Planned:
    """A job made ready to run: rendered for its backend, with its place in the queue."""

    job: CompileJob
    prepared: PreparedCompile
    estimate: float  # seconds, from the cost model
    # Sort key for a backend slot: (batch number, -estimate, sequence).
    priority: tuple[float, ...]
    submitted: float  # time.monotonic() when planned
    ticket: Ticket | None = None  # its place in its backend's queue, once reserved


def _check_workers(name: str, value: int | None) -> int:
    if value is None:
        return default_workers()
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidJob(name, value, "must be a positive int or None")
    return value


class Engine:
    """Compiles :class:`~asynccomp.CompileJob` s concurrently. Use as ``async with``.

    Args:
        arch: architecture for jobs that name none (e.g. ``"sm_90a"``); ``None`` asks the
            local GPU. A job's own ``arch`` always wins.
        nvrtc_workers: NVRTC compiles at once (default: one per CPU, fewer when memory is
            short: see :func:`default_nvrtc_workers`).
        nvcc_workers: nvcc subprocesses at once (default: one per CPU).
        nvrtc_mode: ``"processes"`` (long-lived worker processes: NVRTC front ends run in
            parallel), ``"threads"`` (in this process: only NVRTC's back end overlaps), or
            ``"auto"`` (the default): processes when more than one NVRTC worker is allowed.
        tvm_fast_path: for NVRTC jobs whose source carries TVM's exact preamble, compile
            it with the ``<cuda/std/type_traits>`` include replaced by small equivalent
            definitions (:mod:`asynccomp.preamble`; same SASS, about 2x faster), falling
            back to the original source if that fails. ``False`` compiles sources as given.
        toolkit: the toolkit to use (default: :func:`~asynccomp.toolkit.find_toolkit`).
        dump_dir: dump every job into its own folder under this root (see
            :mod:`asynccomp.dumps`); jobs with ``dump=True`` are dumped here too, or under
            :func:`~asynccomp.dumps.default_dump_root` when this is ``None``.
        cache: keep compiled results and answer identical jobs from them
            (:mod:`asynccomp.result_cache`); ``False`` compiles every job.
        cache_dir: the on-disk cache folder; ``None`` uses ``$ASYNCCOMP_CACHE_DIR`` or the
            user cache folder, ``False`` keeps the cache in memory only.
        memory_cache_bytes, disk_cache_bytes: size bounds of the two levels (LRU).
        cache_failures: also cache compile errors (never timeouts or crashes).
        warm_start: in ``"processes"`` mode, start and warm up the NVRTC worker processes
            in the background as soon as the engine starts, so the first jobs find them
            ready (jobs that come sooner start their own, never more than
            ``nvrtc_workers`` in all). ``False`` starts workers on first need.
        cost_model: compile-time estimates for longest-first dispatch (default: a fresh
            :class:`~asynccomp.cost.CostModel`; share one between engines to carry the
            times it learned).
        split_compile: when positive, a job whose estimated time exceeds its batch's
            share per worker (it would finish last even if started first) is compiled
            with ``--split-compile=N``, so its optimizer runs on N threads. Changes the
            cubin bytes but not the SASS. ``0`` (the default) never splits.
    """

    def __init__(
        self,
        arch: str | None = None,
        nvrtc_workers: int | None = None,
        nvcc_workers: int | None = None,
        *,
        nvrtc_mode: Literal["auto", "threads", "processes"] = "auto",
        tvm_fast_path: bool = True,
        toolkit: Toolkit | None = None,
        dump_dir: str | os.PathLike[str] | None = None,
        cache: bool = True,
        cache_dir: str | os.PathLike[str] | Literal[False] | None = None,
        memory_cache_bytes: int = 256 * 2**20,
        disk_cache_bytes: int = 4 * 2**30,
        cache_failures: bool = False,
        warm_start: bool = True,
        cost_model: CostModel | None = None,
        split_compile: int = 0,
    ) -> None:
        if arch is not None:
            parse_arch(arch)
        self.arch = arch
        self.nvrtc_workers = (
            default_nvrtc_workers()
            if nvrtc_workers is None
            else _check_workers("nvrtc_workers", nvrtc_workers)
        )
        if nvrtc_mode not in ("auto", "threads", "processes"):
            raise InvalidJob("nvrtc_mode", nvrtc_mode, "expected auto, threads or processes")
        self.nvrtc_mode: NvrtcMode = (
            ("processes" if self.nvrtc_workers > 1 else "threads")
            if nvrtc_mode == "auto"
            else nvrtc_mode
        )
        self.nvcc_workers = _check_workers("nvcc_workers", nvcc_workers)
        self._toolkit = toolkit
        self.tvm_fast_path = tvm_fast_path
        self.dump_dir = None if dump_dir is None else Path(dump_dir)
        self._dump_roots: dict[Path, DumpRoot] = {}
        if (
            cache_dir is not None
            and cache_dir is not False
            and not isinstance(cache_dir, (str, os.PathLike))
        ):
            raise InvalidJob("cache_dir", cache_dir, "must be a path, None or False")
        self._cache_settings = (
            cache,
            cache_dir,
            memory_cache_bytes,
            disk_cache_bytes,
            cache_failures,
        )
        self._cache: ResultCache | None = None
        self._in_flight: dict[str, _InFlight] = {}
        self.warm_start = warm_start
        self.cost_model = CostModel() if cost_model is None else cost_model
        if (
            isinstance(split_compile, bool)
            or not isinstance(split_compile, int)
            or split_compile < 0
        ):
            raise InvalidJob("split_compile", split_compile, "must be an int >= 0")
        self.split_compile = split_compile
        self._counters = Counters()
        self._batches = itertools.count()
        self._sequence = itertools.count()
        self._backends: dict[str, CompilerBackend] = {}
        self._slots: dict[str, PrioritySlots] = {}
        self._task_group: anyio.abc.TaskGroup | None = None
        self._warm_start_scope: anyio.CancelScope | None = None
        # Prefetched compiles now running, and the generation cancel_prefetched() ends.
        self._prefetch_scopes: set[anyio.CancelScope] = set()
        self._prefetch_generation = 0

    # -- lifecycle -----------------------------------------------------------------------

    async def __aenter__(self) -> Engine:
        if self._task_group is not None:
            raise EngineClosed("this Engine is already running; make a new one")
        if self.dump_dir is not None:
            # An unusable dump root fails here, before any job runs.
            root = await anyio.to_thread.run_sync(DumpRoot, self.dump_dir)
            self._dump_roots[self.dump_dir] = root
        if self._toolkit is None:
            # The first lookup runs nvcc --version: keep it off the event loop.
            self._toolkit = await anyio.to_thread.run_sync(find_toolkit)
        if self.arch is None:
            # Asked once, off the event loop (cuInit can take a while); cached after.
            await anyio.to_thread.run_sync(local_gpu_arch)
        self._cache = await anyio.to_thread.run_sync(self._make_cache)
        self._backends = {
            "nvrtc": NvrtcBackend(
                self._toolkit,
                self.nvrtc_mode,
                self.nvrtc_workers,
                warmup_arch=self.arch or "sm_80",
                tvm_fast_path=self.tvm_fast_path,
            ),
            "nvcc": NvccBackend(self._toolkit),
        }
        self._slots = {
            "nvrtc": PrioritySlots(self.nvrtc_workers),
            "nvcc": PrioritySlots(self.nvcc_workers),
        }
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        if self.warm_start and self.nvrtc_mode == "processes":
            self._warm_start_scope = anyio.CancelScope()
            task_group.start_soon(self._warm_start, self._warm_start_scope)
        return self

    async def _warm_start(self, scope: anyio.CancelScope) -> None:
        with scope:
            try:
                await self._backends["nvrtc"].warm_up()
            except (OSError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
                # Not fatal: jobs start workers themselves, and report it if they can't.
                logger.warning("asynccomp: starting NVRTC workers failed: %r", exc)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        task_group, self._task_group = self._task_group, None
        assert task_group is not None
        if self._warm_start_scope is not None:
            # Jobs still running will start the workers they need themselves.
            self._warm_start_scope.cancel()
        try:
            return await task_group.__aexit__(exc_type, exc, tb)
        finally:
            with anyio.CancelScope(shield=True):
                for backend in self._backends.values():
                    await backend.aclose()

    def _make_cache(self) -> ResultCache | None:
        enabled, cache_dir, memory_bytes, disk_bytes, failures = self._cache_settings
        if not enabled:
            return None
        if cache_dir is False:
            disk = None
        else:
            disk = default_cache_dir() if cache_dir is None else Path(cache_dir)
        return ResultCache(
            disk, memory_bytes=memory_bytes, disk_bytes=disk_bytes, cache_failures=failures
        )

    @property
    def cache(self) -> ResultCache | None:
        """The engine's result cache (``None`` when caching is off)."""
        return self._cache

    @property
    def toolkit(self) -> Toolkit:
        """The toolkit this engine compiles with (known once the engine has started)."""
        if self._toolkit is None:
            raise EngineClosed("the toolkit is looked up when the engine starts")
        return self._toolkit

    def statistics(self) -> EngineStatistics:
        """An immutable snapshot of the counters."""
        return self._counters.snapshot()

    # -- public API ----------------------------------------------------------------------

    async def compile(self, job: CompileJob) -> CompileResult:
        """Compile one job. A compile failure is returned in ``result.error``, not raised."""
        self._require_running()
        (planned,) = self._plan([_check_job(job)])
        return await self._run_job(planned)

    async def compile_many(self, jobs: Iterable[CompileJob]) -> list[CompileResult]:
        """Compile all ``jobs`` concurrently; results come back in the order of ``jobs``."""
        self._require_running()
        batch = self._plan([_check_job(job) for job in jobs])
        results: list[CompileResult | None] = [None] * len(batch)

        async def run(index: int, planned: _Planned | CompileResult) -> None:
            results[index] = await self._run_job(planned)

        async with anyio.create_task_group() as tg:
            for index, planned in enumerate(batch):
                tg.start_soon(run, index, planned)
        return [r for r in results if r is not None]

    async def warm_up(self) -> None:
        """Start NVRTC's workers and compile a small program in each, now.

        The first compiles in a fresh process are slow and erratic; a sweep that is timed
        (or that wants its first results fast) calls this right after starting the engine.
        Without it, workers start with the first NVRTC job.
        """
        self._require_running()
        await self._backends["nvrtc"].warm_up()

    def prefetch(self, jobs: Iterable[CompileJob]) -> None:
        """Start compiling ``jobs`` in the background and return at once.

        The results go to the cache, so later ``compile`` calls for the same jobs are cache
        hits (or wait for the compile in flight). The compiles belong to the engine: it
        waits for them when it closes (unless :meth:`cancel_prefetched` was called), and an
        unexpected error in one propagates there.
        """
        task_group = self._require_running()
        for planned in self._plan([_check_job(job) for job in jobs]):
            task_group.start_soon(self._prefetched, planned, self._prefetch_generation)

    async def _prefetched(self, planned: _Planned | CompileResult, generation: int) -> None:
        with anyio.CancelScope() as scope:
            if generation != self._prefetch_generation:
                scope.cancel()  # cancelled before this task started
            self._prefetch_scopes.add(scope)
            try:
                await self._run_job(planned)  # gives its slot back when cancelled
            finally:
                self._prefetch_scopes.discard(scope)

    def cancel_prefetched(self) -> None:
        """Stop every prefetched compile still queued or running (nothing is cached for
        them; a caller waiting for one of them compiles it itself). For a quick exit: an
        autotuner that pushed a large batch ahead need not wait for all of it."""
        self._prefetch_generation += 1
        for scope in self._prefetch_scopes:
            scope.cancel()

    async def as_completed(self, jobs: Iterable[CompileJob]) -> AsyncIterator[CompileResult]:
        """Compile all ``jobs`` concurrently and yield each result as soon as it is ready.

        Leaving the loop early cancels the jobs still running.
        """
        task_group = self._require_running()
        batch = self._plan([_check_job(job) for job in jobs])
        send, receive = anyio.create_memory_object_stream[CompileResult](len(batch) or 1)
        scope = anyio.CancelScope()

        async def run_all() -> None:
            async with send:
                with scope:
                    async with anyio.create_task_group() as tg:
                        for planned in batch:
                            tg.start_soon(run_one, planned)

        async def run_one(planned: _Planned | CompileResult) -> None:
            await send.send(await self._run_job(planned))

        # Run in the engine's task group, not in this generator: a cancel scope must not
        # stay open across a ``yield``.
        task_group.start_soon(run_all)
        try:
            async with receive:
                async for result in receive:
                    yield result
        finally:
            scope.cancel()

    # -- one job -------------------------------------------------------------------------

    def _require_running(self) -> anyio.abc.TaskGroup:
        if self._task_group is None:
            raise EngineClosed("the engine is not running: use it inside `async with Engine()`")
        return self._task_group

    def _withdraw(self, planned: _Planned) -> None:
        if planned.ticket is not None:
            self._slots[planned.prepared.backend].withdraw(planned.ticket)

    def _dumps(self, job: CompileJob) -> bool:
        return job.dump is not False or self.dump_dir is not None

    def _resolve_arch(self, job: CompileJob) -> str | None:
        return job.arch or self.arch or local_gpu_arch()

    def _plan(self, jobs: list[CompileJob]) -> list[_Planned | CompileResult]:
        """Render a batch for its backends and give each job its place in the queue.

        Jobs that cannot run at all (no architecture, no compiler) come back as failed
        results right away. Plain code, no I/O: the batch's jobs are counted as submitted
        here, before any of them can finish.
        """
        batch = next(self._batches)
        planned: list[_Planned | CompileResult] = []
        for job in jobs:
            self._counters.submitted += 1
            arch = self._resolve_arch(job)
            if arch is None:
                error = ArchitectureNotFound(
                    "no architecture was given and no GPU was found to ask: pass "
                    'CompileJob(arch="sm_90a") or Engine(arch="sm_90a")',
                    job=job,
                )
                planned.append(_failure(job, None, error))
                continue
            try:
                prepared = self._backends[job.backend].prepare(job, arch, dump=self._dumps(job))
            except ToolkitNotFound as exc:
                planned.append(_failure(job, arch, exc))
                continue
            # Estimates only order jobs within a batch (and pick jobs to split): a batch of
            # one, such as each synchronous TVM callback, does not pay for one.
            estimate = (
                self.cost_model.estimate(prepared.backend, prepared.options, prepared.source)
                if len(jobs) > 1 or self.split_compile > 0
                else 0.0
            )
            priority = (float(batch), -estimate, float(next(self._sequence)))
            planned.append(_Planned(job, prepared, estimate, priority, time.monotonic()))
        if self.split_compile > 0:
            self._split_long_jobs(planned)
        # The whole batch queues before any of it runs, so the longest go first whatever
        # order the jobs' tasks start in.
        for backend, slots in self._slots.items():
            mine = [p for p in planned if isinstance(p, _Planned) and p.prepared.backend == backend]
            if mine:
                tickets = slots.reserve_batch(p.priority for p in mine)
                for p, ticket in zip(mine, tickets, strict=True):
                    p.ticket = ticket
        return planned

    def _split_long_jobs(self, batch: list[_Planned | CompileResult]) -> None:
        """Give ``--split-compile`` to the jobs that would finish last even if started
        first: those estimated longer than their backend's share of the batch per slot."""
        jobs = [p for p in batch if isinstance(p, _Planned)]
        totals: dict[str, float] = {}
        for p in jobs:
            totals[p.prepared.backend] = totals.get(p.prepared.backend, 0.0) + p.estimate
        flag = f"--split-compile={self.split_compile}"
        for p in jobs:
            backend, options = p.prepared.backend, p.prepared.options
            share = totals[backend] / self._slots[backend].total
            if p.estimate > share and not any("split-compile" in o for o in options):
                # nvcc's argv ends with ``-o <output> <source>``: flags go before.
                at = len(options) - 3 if backend == "nvcc" else len(options)
                p.prepared = replace(p.prepared, options=(*options[:at], flag, *options[at:]))

    async def _run_job(self, planned: _Planned | CompileResult) -> CompileResult:
        if isinstance(planned, CompileResult):  # failed before it could run
            return self._finish(planned)
        job, prepared = planned.job, planned.prepared
        warnings: list[str] = []
        try:
            folder = await self._start_dump(job, prepared, warnings) if self._dumps(job) else None
            if folder is not None and prepared.backend == "nvcc":
                prepared = planned.prepared = replace(prepared, keep_dir=str(folder))
            result = await self._cached_compile(planned)
        finally:
            self._withdraw(planned)  # unless the compile used it
        warnings += result.warnings
        if folder is not None:
            result = replace(result, dump_dir=folder)
            await self._finish_dump(folder, prepared, result, warnings)
        if warnings != list(result.warnings):
            result = replace(result, warnings=tuple(warnings))
        return self._finish(result)

    async def _cached_compile(self, planned: _Planned) -> CompileResult:
        """The cache, then an identical compile in flight, then the compiler."""
        cache = self._cache
        job, prepared = planned.job, planned.prepared
        if cache is None:
            return await self._compile(planned)
        key = cache.key(prepared, self.toolkit)
        while True:
            hit = await cache.lookup(key, job, prepared)
            if hit is not None:
                self._counters.cache_hits += 1
                return hit
            pending = self._in_flight.get(key)
            if pending is None:
                break
            self._counters.deduplicated += 1
            self._withdraw(planned)  # no slot held idle while waiting for another's compile
            await pending.done.wait()
            if pending.result is not None:
                queued = time.monotonic() - planned.submitted
                return replace(pending.result, job=job, queued=queued)
            # The compile we waited for was cancelled: try again (and maybe compile).
            planned.ticket = self._slots[prepared.backend].reserve(planned.priority)
        pending = self._in_flight[key] = _InFlight()
        try:
            result = await self._compile(planned)
            pending.result = result
            await cache.store(key, result)
            return result
        finally:
            del self._in_flight[key]
            pending.done.set()

    async def _compile(self, planned: _Planned) -> CompileResult:
        job, prepared = planned.job, planned.prepared
        counters = self._counters
        counters.queued += 1
        waiting = True
        try:
            assert planned.ticket is not None
            async with self._slots[prepared.backend].use(planned.ticket):
                counters.queued -= 1
                waiting = False
                started = time.monotonic()
                counters.running += 1
                counters.compiled += 1
                try:
                    output = await self._backends[prepared.backend].run(prepared)
                finally:
                    counters.running -= 1
                elapsed = time.monotonic() - started
        finally:
            if waiting:
                counters.queued -= 1
        if output.status in ("ok", "failed"):  # timeouts and crashes say nothing of cost
            self.cost_model.observe(prepared.backend, prepared.options, prepared.source, elapsed)
        queued = started - planned.submitted
        return _result(job, prepared, output, elapsed=elapsed, queued=queued)

    # -- dumps ---------------------------------------------------------------------------

    def _dump_root(self, job: CompileJob) -> DumpRoot:
        # Made in a worker thread (it creates and probes the folder); a job's own root
        # wins over the engine's.
        path = job.dump_root or self.dump_dir or default_dump_root()
        root = self._dump_roots.get(path)
        if root is None:
            root = self._dump_roots[path] = DumpRoot(path)
        return root

    async def _start_dump(
        self, job: CompileJob, prepared: PreparedCompile, warnings: list[str]
    ) -> Path | None:
        def start() -> Path:
            root = self._dump_root(job)
            folder = root.make_job_folder(job, prepared)
            root.write_inputs(folder, prepared)
            return folder

        try:
            return await anyio.to_thread.run_sync(start)
        except OSError as exc:  # DumpDirError is one too
            warnings.append(f"dump not written: {exc}")
            return None

    async def _finish_dump(
        self,
        folder: Path,
        prepared: PreparedCompile,
        result: CompileResult,
        warnings: list[str],
    ) -> None:
        root = self._dump_root(result.job)
        versions = self.toolkit.compiler_versions
        final = replace(result, warnings=tuple(warnings))
        try:
            await anyio.to_thread.run_sync(root.write_outputs, folder, prepared, final, versions)
        except OSError as exc:
            warnings.append(f"dump not completed in {folder}: {exc}")

    def _finish(self, result: CompileResult) -> CompileResult:
        counters = self._counters
        counters.completed += 1
        if result.ok:
            counters.succeeded += 1
        else:
            counters.failed += 1
            if isinstance(result.error, CompileTimeout):
                counters.timed_out += 1
        return result


def _check_job(job: object) -> CompileJob:
    if not isinstance(job, CompileJob):
        raise InvalidJob("job", job, "expected a CompileJob")
    return job


def _failure(job: CompileJob, arch: str | None, error: CompileError) -> CompileResult:
    if error.job is None:
        error.job = job
    return CompileResult(
        job=job, output=job.output_format, arch=arch, binary=None, log=error.log, error=error
    )


# The error each failed backend status becomes (timeouts are built apart: they carry
# the job's timeout).
_FAILURE_TYPES: dict[str, type[CompileError]] = {
    "failed": CompileError,
    "empty": EmptyOutput,
    "crashed": WorkerCrashed,
}


def _result(
    job: CompileJob,
    prepared: PreparedCompile,
    out: BackendOutput,
    *,
    elapsed: float,
    queued: float,
) -> CompileResult:
    error: CompileError | None = None
    what = f"{job.backend} job {job.name!r} ({prepared.arch})"
    if out.status == "timeout" and job.timeout is None:
        error = CompileError(f"{what} was stopped: {out.message}", log=out.log, job=job)
    elif out.status == "timeout":
        assert job.timeout is not None
        error = CompileTimeout(
            f"{what} timed out after {job.timeout:g} s: {out.message}",
            timeout=job.timeout,
            log=out.log,
            job=job,
        )
    elif out.status != "ok":
        kind = _FAILURE_TYPES[out.status]
        error = kind(f"{what}: {out.message}\n{out.log}".rstrip(), log=out.log, job=job)
    resources = parse_resource_report(out.log) if out.log else {}
    return CompileResult(
        job=job,
        output=prepared.output,
        arch=prepared.arch,
        binary=out.binary if error is None else None,
        log=out.log,
        error=error,
        elapsed=elapsed,
        queued=queued,
        command=prepared.options,
        resources=resources,
        warnings=out.warnings,
    )
