"""The engine: its settings and its public calls.

Users meet it as :class:`asynccomp.Engine`; :mod:`asynccomp.engine` shows it at work.
What it says of itself is :mod:`._view`'s; its life (:class:`EngineState`) is
:mod:`._lifecycle`'s; what it is made of is put together in :mod:`._assembly`; what a
call does, in :mod:`._front`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Literal, TypeVar

import anyio
import anyio.abc
import anyio.lowlevel

from .._scheduler.local import InProcessRunner, check_arch, default_backends
from .._warn import CallSite, call_site, calls_from
from ..backends import BackendSettings
from ..config import (
    KEYWORDS,
    CacheSettings,
    EngineConfig,
    JobSettings,
    NvrtcModeSetting,
    OnServer,
    RunMode,
    WorkerSettings,
    engine_config,
)
from ..cost import CostModel
from ..errors import EngineClosed, InvalidJob, SettingsError
from ..job import CompileJob
from ..result import CompileResult
from ..runner import Runner
from ..statistics import EngineStatistics
from ..toolkit import Toolkit
from ._assembly import Parts, assemble
from ._batch import Batch
from ._completed import CompletedResults
from ._lifecycle import EngineState, Lifecycle
from ._view import EngineView

if TYPE_CHECKING:
    from ..backends import CompilerBackend
    from ..cache import RemoteCache
    from ..ray import RayExecutor

__all__ = ("Engine", "EngineState")

logger = logging.getLogger("asynccomp")

T = TypeVar("T")
_Engine = TypeVar("_Engine", bound="Engine")
# Where the defaults are written, once (the keywords' defaults are these objects').
_JOB, _WORKERS, _CACHE = JobSettings(), WorkerSettings(), CacheSettings()


class Engine(EngineView):
    """Compiles :class:`~asynccomp.CompileJob` s concurrently. Use as ``async with``.

    Args:
        arch: architecture for jobs that name none (e.g. ``"sm_90a"``); ``None`` asks the
            local GPU. A job's own ``arch`` always wins.
        nvrtc_workers: NVRTC compiles at once (default: one per CPU). Given or not, it is
            capped at one per GiB of available memory (a given count that is lowered
            issues a :class:`~asynccomp.errors.ResourceLimitWarning`). Worker processes
            start as jobs need them: never more than the most jobs in flight at once.
        nvcc_workers: nvcc subprocesses at once (default: one per CPU; capped at one per
            512 MiB of available memory the same way).
        workers: compiles at once of every backend (an int), or of some by name
            (``{"ptx": 2, "nvjitlink": 4}``; a backend of one's own too), capped by
            memory the same way; ``nvrtc_workers``/``nvcc_workers`` win over an int.
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
            (:mod:`asynccomp.cache`); ``False`` compiles every job.
        cache_dir: the on-disk cache folder; ``None`` uses ``$ASYNCCOMP_CACHE_DIR`` or the
            user cache folder, ``False`` keeps the cache in memory only.
        memory_cache_bytes, disk_cache_bytes: size bounds of the two tiers (LRU);
            ``disk_cache_bytes=None`` takes ``$ASYNCCOMP_CACHE_MAX_SIZE``, else the cache
            folder's setting (``asynccomp cache --max-size``), else 4 GiB; ``0`` (from any
            of them) is no limit, as ccache's ``-M 0`` (``cache_dir=False`` keeps nothing
            on disk).
        cache_failures: also cache compile errors (never timeouts or crashes).
        cost_model: compile-time estimates for longest-first dispatch (default: a fresh
            :class:`~asynccomp.cost.CostModel`; share one between engines to carry the
            times it learned).
        split_compile: when positive, a job whose estimated time exceeds its batch's
            share per worker (it would finish last even if started first) is compiled
            with ``--split-compile=N``, so its optimizer runs on N threads. Changes the
            cubin bytes but not the SASS. ``0`` (the default) never splits.
        umask: the modes of every file and folder the engine writes (its dumps, and its
            cache when it compiles in process), as ccache's ``umask``: files
            ``0o666 & ~umask``, folders ``0o777 & ~umask``. ``None`` (the default) takes
            ``$ASYNCCOMP_UMASK`` (octal, e.g. ``007``), else ``0o077``: private to the
            user. Share a cache folder with a group on purpose with ``0o007`` (or
            ``0o002``); a cache folder others may write is not used (a
            :class:`~asynccomp.cache.CacheTrustWarning` says why). A compile server
            writes its cache with its own setting (``asynccomp serve --umask``).
        remote_cache: a remote tier behind the memory and disk tiers, shared by
            machines: a URL (``"redis://host:6379/0"``, see
            :func:`~asynccomp.cache.remote_cache_from_url`) or a
            :class:`~asynccomp.cache.RemoteCache`; ``None`` (the default) uses
            ``$ASYNCCOMP_REMOTE_CACHE`` when it is set, ``False`` none. A remote that is
            down or slow never fails or stalls a compile. On a compile server the remote
            tier is the server's; ``False`` is the one value taken there: a server this
            engine starts is started without ``$ASYNCCOMP_REMOTE_CACHE`` (and without the
            key's variables), and this process's ``$ASYNCCOMP_REMOTE_CACHE`` is not
            compared with the server's (one warning if the server has a remote tier all
            the same); what the TVM facade does with a remote setting it cannot use.
        server: ``"auto"``: run the compiles on this user's compile server
            (:mod:`asynccomp.server`), starting it if none runs, instead of starting
            workers in this process; a path: the socket of a running server (checked to
            belong to this user and this toolkit); ``None`` (the default) or ``"off"``:
            compile in this process (the words of ``$ASYNCCOMP_SERVER``, read by one
            parser: :func:`~asynccomp.config.parse_server`). The engine is used the
            same way, with the same results, errors and statistics; the job settings (``arch``,
            ``tvm_fast_path``, ``dump_dir``, ``split_compile``, ``cost_model``, ``umask``) still
            apply, the others are the server's (giving one is a
            :class:`~asynccomp.SettingsError`).
        executor: where the compiles run instead of local workers: an
            :class:`asynccomp.ray.RayExecutor` sends them to actors on a Ray cluster
            (one per CPU it offers; their count is the engine's number of slots, for
            NVRTC and nvcc together, so worker settings are refused unless the
            executor may fall back to local workers). ``None``: local workers.
        mode: where the compiles run, as one object instead of the keywords above
            (:class:`~asynccomp.config.InProcess`, :class:`~asynccomp.config.OnServer`,
            :class:`~asynccomp.config.OnRay`); the keywords other than the job settings
            are then refused.
        runner: a :class:`~asynccomp.runner.Runner` of one's own that runs the compiles
            (the engine starts and closes it with itself; one runner, one engine): the
            engine plans, renders (with ``toolkit``, else the one found), builds the
            results, dumps and counts as ever. Only the job settings and ``toolkit``
            are taken with it.

    The keywords map onto :mod:`asynccomp.config`'s mode objects
    (:class:`~asynccomp.config.EngineConfig`, the engine's ``config``), where each is
    checked (a bad value, or one the mode does not use, is a
    :class:`~asynccomp.SettingsError` naming it) and its default written.

    Closing (leaving ``async with`` normally) stops taking calls (they raise
    :class:`~asynccomp.EngineClosed`) and waits for the calls already made, from any task
    or thread, and for prefetched compiles (unless :meth:`cancel_prefetched` was called):
    no caller loses a result. If the block is left by an exception or a cancellation,
    or the closing task is cancelled while it waits, what is still queued or running is
    cancelled instead and each unfinished call raises ``EngineClosed``.
    """

    def __init__(
        self,
        arch: str | None = _JOB.arch,
        nvrtc_workers: int | None = _WORKERS.nvrtc_workers,
        nvcc_workers: int | None = _WORKERS.nvcc_workers,
        *,
        nvrtc_mode: NvrtcModeSetting = _WORKERS.nvrtc_mode,
        workers: int | Mapping[str, int] | None = _WORKERS.workers,
        tvm_fast_path: bool = _JOB.tvm_fast_path,
        toolkit: Toolkit | None = None,
        dump_dir: str | os.PathLike[str] | None = _JOB.dump_dir,
        cache: bool = _CACHE.cache,
        cache_dir: str | os.PathLike[str] | Literal[False] | None = _CACHE.cache_dir,
        memory_cache_bytes: int = _CACHE.memory_cache_bytes,
        disk_cache_bytes: int | None = _CACHE.disk_cache_bytes,
        cache_failures: bool = _CACHE.cache_failures,
        cost_model: CostModel | None = _JOB.cost_model,
        split_compile: int = _JOB.split_compile,
        umask: int | None = _JOB.umask,
        server: str | os.PathLike[str] | None = None,
        remote_cache: str | RemoteCache | Literal[False] | None = _CACHE.remote_cache,
        executor: RayExecutor | None = None,
        mode: RunMode | None = None,
        runner: Runner | None = None,
    ) -> None:
        # The signature is the one list of the keywords (a test holds it to
        # asynccomp.config.KEYWORDS); their values go on as they are.
        given = locals()
        settings = {name: given[name] for name in KEYWORDS}
        self._setup(engine_config(settings, mode=mode, custom_runner=runner), runner)

    @classmethod
    def from_config(
        cls: type[_Engine], config: EngineConfig, *, runner: Runner | None = None
    ) -> _Engine:
        """An engine with these settings (and ``runner``: see :class:`Engine`)."""
        engine = cls.__new__(cls)
        if not isinstance(config, EngineConfig):
            raise SettingsError("config", config, "must be an asynccomp.config.EngineConfig")
        if runner is not None:  # the rules of Engine(runner=...): a job config alone
            engine_config(config.keywords(), custom_runner=runner)
        engine._setup(config, runner)
        return engine

    def _setup(self, config: EngineConfig, runner: Runner | None) -> None:
        self.config = config
        self._backend_settings: dict[str, BackendSettings] = {}  # in process: each backend's
        self._runner: Runner | None = runner
        if runner is None and not isinstance(config.mode, OnServer):
            local = InProcessRunner(
                config.mode,
                arch=config.job.arch,
                make_backends=self._make_backends,
                umask=config.job.umask,
            )
            self._backend_settings = local.backend_settings
            self._runner = local
        elif runner is not None and not isinstance(runner, Runner):
            raise SettingsError("runner", runner, "must be an asynccomp.runner.Runner")
        model = config.job.cost_model
        self.cost_model = CostModel() if model is None else model
        self._life = Lifecycle()
        self._started_from: CallSite | None = None  # set by a SyncEngine's start

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def state(self) -> EngineState:
        """Where this engine is in its life."""
        return self._life.state

    async def __aenter__(self: _Engine) -> _Engine:
        # Warnings of the start, and of the tasks and threads it starts, name this call
        # (or the one that started a SyncEngine) when they have no caller's frame.
        with calls_from(self._started_from or call_site(2)):
            await self._life.start(
                lambda task_group, stack: assemble(
                    self.config,
                    runner=self._runner,
                    cost_model=self.cost_model,
                    make_backends=self._make_backends,
                    task_group=task_group,
                    stack=stack,
                )
            )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._life.close(clean=exc_type is None)

    def _make_backends(self, toolkit: Toolkit) -> dict[str, CompilerBackend]:
        """The backends by name, made as the engine starts (a subclass may return its
        own: the scheduler's lifecycle tests use a backend that compiles nothing)."""
        return default_backends(toolkit, self._backend_settings)

    def statistics(self) -> EngineStatistics:
        """An immutable snapshot of the counters (and of what is queued and running
        now, and the workers alive: a compile server's, on one)."""
        if self._life.parts is None:
            return EngineStatistics()
        return self._life.parts.front.statistics()

    def running(self) -> list[tuple[CompileJob, float]]:
        """This engine's jobs compiling now, with how long each has run (seconds),
        longest first; a progress display shows them."""
        return [] if self._life.parts is None else self._life.parts.front.running_jobs()

    def estimate(self, job: CompileJob) -> float:
        """The cost model's estimate of ``job``'s compile, in seconds (for an ETA)."""
        _check_job(job)
        arch = job.arch or self.arch or ""
        return self.cost_model.estimate(job.backend, (arch, *job.options), job.source)

    # -- public API --------------------------------------------------------------------------

    async def compile(self, job: CompileJob) -> CompileResult:
        """Compile one job. A compile failure is returned in ``result.error``, not raised."""
        jobs = self._check_jobs([job])
        return (await self._guarded(lambda parts: self._run_list(parts, jobs)))[0]

    async def compile_many(self, jobs: Iterable[CompileJob]) -> list[CompileResult]:
        """Compile all ``jobs`` concurrently; results come back in the order of ``jobs``."""
        checked = self._check_jobs(jobs)
        return await self._guarded(lambda parts: self._run_list(parts, checked))

    async def _guarded(self, call: Callable[[Parts], Awaitable[T]]) -> T:
        """Run one public call on the engine's parts: counted for closing, cancelled by
        a forced close (which the caller sees as ``EngineClosed``). Always checkpoints.
        (Here, not in the lifecycle's module: every time a call's task resumes, each
        frame of its stack resumes too, and a frame in between two modules is paid for
        on each.)"""
        await anyio.lowlevel.checkpoint()
        scope, parts = self._life.open_call()
        try:
            with scope:
                return await call(parts)
        finally:
            self._life.close_call(scope)
        raise EngineClosed("the engine was closed before this call finished")

    def _check_jobs(self, jobs: Iterable[CompileJob]) -> list[CompileJob]:
        """The jobs, once each is a CompileJob whose architecture its compiler takes (an
        unknown one is :class:`~asynccomp.InvalidJob` before anything runs)."""
        checked = [_check_job(job) for job in jobs]
        parts = self._life.parts
        if parts is not None:
            default = self.arch
            for job in checked:
                arch = job.arch or default
                # A (compiler, architecture) pair is looked up once per engine.
                if arch is not None and (job.backend, arch) not in parts.archs_taken:
                    check_arch(parts.toolkit, job.backend, arch, f"job {job.name!r}")
                    parts.archs_taken.add((job.backend, arch))
        return checked

    @staticmethod
    async def _run_list(parts: Parts, jobs: list[CompileJob]) -> list[CompileResult]:
        batch = Batch(len(jobs))
        await parts.front.run(batch, jobs)
        return batch.ordered_results()

    def as_completed(self, jobs: Iterable[CompileJob]) -> CompletedResults:
        """Compile all ``jobs`` concurrently; iterate over the results as they finish::

            async with engine.as_completed(jobs) as results:
                async for result in results:
                    ...

        Leaving the block (a ``break``, an exception) cancels the jobs still queued or
        running; nothing of them outlives it.
        """
        return CompletedResults(self, self._check_jobs(jobs))

    async def warm_up(self) -> None:
        """Start every NVRTC worker and compile a small program in each, now (on a
        compile server: its workers). Calls made while one runs wait for that one.

        The first compiles in a fresh process are slow and erratic; a sweep that is timed
        calls this right after starting the engine. Without it, workers start as jobs
        need them (and the first job a worker gets pays that cost).
        """
        await self._guarded(lambda parts: parts.runner.warm_up())

    async def make_pch(self, job: CompileJob) -> bool:
        """Make the precompiled header that ``job`` (``pch=True``, NVRTC) would use, now,
        before any job needs it; whether the engine's NVRTC workers share it when this
        returns.

        A PCH covers a source's leading ``#include`` lines and the job's options, so
        ``job`` stands for every job with the same ones: one worker compiles its header
        lines and an empty kernel, and the jobs that need that PCH meanwhile wait for it
        (up to 30 s) instead of compiling without one. Once asked for, the PCH is the
        engine's: cancelling this call does not stop it. Call it when the headers are
        known before the kernels are (a tuner's template, at start-up); each compile
        after uses the PCH::

            job = CompileJob(kernel_source, arch="sm_90a", backend="nvrtc", pch=True)
            await engine.make_pch(job)   # True: the workers share its PCH

        ``False`` where no PCH is shared: nothing is made for a job without ``pch``,
        another backend, NVRTC in threads, a Ray executor, or a PCH a job is making
        already; workers that cannot share (spawned, not forked) make one for the
        worker that compiled it; a prefix that does not compile is logged (the job's
        own compile reports the error). Raises what the job's compile would for a job
        that cannot run at all: :class:`~asynccomp.InvalidJob`,
        :class:`~asynccomp.errors.ArchitectureNotFound`, a missing compiler; on a
        compile server, :class:`~asynccomp.ServerError` for one it refuses or a
        connection lost.
        """
        (checked,) = self._check_jobs([job])
        return await self._guarded(lambda parts: parts.front.make_pch(checked))

    def prefetch(self, jobs: Iterable[CompileJob]) -> None:
        """Start compiling ``jobs`` in the background and return at once.

        The results go to the cache, so later ``compile`` calls for the same jobs are cache
        hits (or wait for the compile in flight). The compiles belong to the engine: it
        waits for them when it closes (unless :meth:`cancel_prefetched` was called).
        """
        parts = self._life.require_running()
        checked = self._check_jobs(jobs)
        if not checked:
            return
        batch = Batch(len(checked), wanted=False)
        self._life.spawn(
            anyio.CancelScope(), lambda: parts.front.run(batch, checked), prefetch=True
        )

    def cancel_prefetched(self) -> None:
        """Stop every prefetched compile still queued or running (nothing is cached for
        them; a caller waiting for one of them compiles it itself). For a quick exit: an
        autotuner that pushed a large batch ahead need not wait for all of it."""
        self._life.cancel_prefetched()


def _check_job(job: object) -> CompileJob:
    if not isinstance(job, CompileJob):
        raise InvalidJob("job", job, "expected a CompileJob")
    return job
