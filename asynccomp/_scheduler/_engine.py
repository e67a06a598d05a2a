"""The engine: lifecycle and public API over the scheduler (:mod:`._pipeline`).

Users meet it as :class:`asynccomp.Engine`; :mod:`asynccomp.engine` shows it at work.
"""

from __future__ import annotations

import enum
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream

from ..cost import CostModel
from ..errors import EngineClosed, InvalidJob
from ..gpu import local_gpu_arch
from ..job import CompileJob, parse_arch
from ..result import CompileResult
from ..statistics import EngineStatistics
from ..toolkit import Toolkit, find_toolkit
from . import _limits
from ._batch import Batch
from ._counters import Counters

if TYPE_CHECKING:
    from ..backends import CompilerBackend
    from ..cache import RemoteCache, ResultCache
    from ..cache._remote import RemoteWriter
    from ..ray import RayExecutor
    from ..server import ServerClient

__all__ = ("Engine", "EngineState")

logger = logging.getLogger("asynccomp")

T = TypeVar("T")
NvrtcMode = Literal["threads", "processes"]
_Engine = TypeVar("_Engine", bound="Engine")


class _Runner(Protocol):
    """Where an engine's batches run: the in-process scheduler, or a compile server."""

    @property
    def waiting(self) -> int: ...

    async def run(self, batch: Batch, jobs: Sequence[CompileJob]) -> None: ...

    def running_jobs(self) -> list[tuple[CompileJob, float]]: ...


class EngineState(enum.Enum):
    """Where an engine is in its life. Calls are taken only while ``RUNNING``."""

    NEW = "new"  #: made, not started
    RUNNING = "running"  #: inside ``async with``
    CLOSING = "closing"  #: leaving ``async with``: finishing the calls already made
    CLOSED = "closed"  #: done; an engine is not started twice


def _is_path(value: object) -> bool:
    # "" would be the working directory: never what a caller meant.
    return isinstance(value, (str, os.PathLike)) and bool(os.fspath(value))


def _positive_bytes(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidJob(name, value, "must be a number of bytes, 0 or more")
    return value


class Engine:
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
        memory_cache_bytes, disk_cache_bytes: size bounds of the two tiers (LRU).
        cache_failures: also cache compile errors (never timeouts or crashes).
        cost_model: compile-time estimates for longest-first dispatch (default: a fresh
            :class:`~asynccomp.cost.CostModel`; share one between engines to carry the
            times it learned).
        split_compile: when positive, a job whose estimated time exceeds its batch's
            share per worker (it would finish last even if started first) is compiled
            with ``--split-compile=N``, so its optimizer runs on N threads. Changes the
            cubin bytes but not the SASS. ``0`` (the default) never splits.
        remote_cache: a remote tier behind the memory and disk tiers, shared by
            machines: a URL (``"redis://host:6379/0"``, see
            :func:`~asynccomp.cache.remote_cache_from_url`) or a
            :class:`~asynccomp.cache.RemoteCache`; ``None`` (the default) uses
            ``$ASYNCCOMP_REMOTE_CACHE`` when it is set, ``False`` none. A remote that is
            down or slow never fails or stalls a compile.
        server: ``"auto"``: run the jobs on this user's compile server
            (:mod:`asynccomp.server`), starting it if none runs, instead of starting
            workers in this process; a path: the socket of a running server. The engine
            is used the same way, with the same results; ``arch``, ``tvm_fast_path`` and
            ``dump_dir`` still apply (per job), the other settings are the server's.
        executor: where the compiles run instead of local workers: an
            :class:`asynccomp.ray.RayExecutor` sends them to actors on a Ray cluster
            (one per CPU it offers; their count is the engine's number of slots, for
            NVRTC and nvcc together). ``None``: local workers.

    Closing (leaving ``async with`` normally) stops taking calls (they raise
    :class:`~asynccomp.EngineClosed`) and waits for the calls already made, from any task
    or thread, and for prefetched compiles (unless :meth:`cancel_prefetched` was called):
    no caller loses a result. If the block is left by an exception or a cancellation,
    or the closing task is cancelled while it waits, what is still queued or running is
    cancelled instead and each unfinished call raises ``EngineClosed``.
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
        cost_model: CostModel | None = None,
        split_compile: int = 0,
        server: str | os.PathLike[str] | None = None,
        remote_cache: str | RemoteCache | Literal[False] | None = None,
        executor: RayExecutor | None = None,
    ) -> None:
        if arch is not None:
            parse_arch(arch)
        self.server = _check_server(server)
        if self.server is not None:
            # What compiles, and how much at once, is the server's business.
            given = {
                "nvrtc_workers": nvrtc_workers is not None,
                "nvcc_workers": nvcc_workers is not None,
                "nvrtc_mode": nvrtc_mode != "auto",
                "toolkit": toolkit is not None,
                "cache": cache is not True,
                "cache_dir": cache_dir is not None,
                "memory_cache_bytes": memory_cache_bytes != 256 * 2**20,
                "disk_cache_bytes": disk_cache_bytes != 4 * 2**30,
                "cache_failures": cache_failures,
                "cost_model": cost_model is not None,
                "split_compile": split_compile != 0,
                "remote_cache": remote_cache is not None,
                "executor": executor is not None,
            }
            if any(given.values()):
                names = ", ".join(name for name, set_ in given.items() if set_)
                raise InvalidJob(
                    "server",
                    server,
                    f"{names} belong to the server: set them on `asynccomp serve`, or "
                    "leave server=None to compile in this process",
                )
        self.arch = arch
        self.executor = _check_executor(executor)
        #: Whether the jobs compile on the executor's cluster (set as the engine starts;
        #: ``False`` with local workers, also after a fallback).
        self.on_cluster = False
        if nvrtc_mode not in ("auto", "threads", "processes"):
            raise InvalidJob("nvrtc_mode", nvrtc_mode, "expected auto, threads or processes")
        if not isinstance(tvm_fast_path, bool):
            raise InvalidJob("tvm_fast_path", tvm_fast_path, "must be True or False")
        if dump_dir is not None and not _is_path(dump_dir):
            raise InvalidJob("dump_dir", dump_dir, "must be a non-empty folder path or None")
        if cache_dir is not None and cache_dir is not False and not _is_path(cache_dir):
            raise InvalidJob(
                "cache_dir", cache_dir, "must be a non-empty folder path, None or False"
            )
        self._memory_cache_bytes = _positive_bytes("memory_cache_bytes", memory_cache_bytes)
        self._disk_cache_bytes = _positive_bytes("disk_cache_bytes", disk_cache_bytes)
        if (
            isinstance(split_compile, bool)
            or not isinstance(split_compile, int)
            or split_compile < 0
        ):
            raise InvalidJob("split_compile", split_compile, "must be an int >= 0")
        if cost_model is not None and not isinstance(cost_model, CostModel):
            raise InvalidJob("cost_model", cost_model, "must be a CostModel or None")
        # Counts last: a count lowered to fit memory warns, and only for a valid engine.
        self.nvrtc_workers = _limits.nvrtc_workers(nvrtc_workers)
        self.nvrtc_mode: NvrtcMode = (
            ("processes" if self.nvrtc_workers > 1 else "threads")
            if nvrtc_mode == "auto"
            else nvrtc_mode
        )
        self.nvcc_workers = _limits.nvcc_workers(nvcc_workers)
        self.tvm_fast_path = tvm_fast_path
        self.dump_dir = None if dump_dir is None else Path(dump_dir).absolute()
        self._cache_enabled = bool(cache)
        self._remote = None if self.server is not None else _remote_cache(remote_cache)
        self._cache_dir = cache_dir
        self._cache_failures = cache_failures
        self.cost_model = CostModel() if cost_model is None else cost_model
        self.split_compile = split_compile
        self._toolkit = toolkit
        self._state = EngineState.NEW
        self._counters = Counters()
        self._cache: ResultCache | None = None
        self._backends: dict[str, CompilerBackend] = {}
        self._runner: _Runner | None = None
        self._client: ServerClient | None = None
        self._writer: RemoteWriter | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        # Calls under way (compile, compile_many, as_completed, warm_up), and prefetched
        # batches: what closing waits for, or cancels.
        self._calls: set[anyio.CancelScope] = set()
        self._prefetches: set[anyio.CancelScope] = set()
        self._forced = False  # closing cancelled calls instead of waiting for them
        self._changed = anyio.Event()

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def state(self) -> EngineState:
        """Where this engine is in its life."""
        return self._state

    async def __aenter__(self: _Engine) -> _Engine:
        if self._state is not EngineState.NEW:
            raise EngineClosed(f"this Engine is {self._state.value}; an engine starts once")
        if self.server is not None:
            await self._start_client()
        else:
            await self._start_local()
        self._state = EngineState.RUNNING
        return self

    async def _start_local(self) -> None:
        # Imported here, as _start_client imports the server's side: a process that
        # only talks to a compile server (a TVM builder worker) never loads the
        # backends, the cache and the pipeline.
        from ..cache import ResultCache, default_cache_dir
        from ..cache._remote import RemoteWriter
        from ._dumps import DumpRegistry
        from ._pipeline import Scheduler
        from ._plan import Planner

        dumps = DumpRegistry(self.dump_dir)
        # An unusable dump root fails here, before any job runs.
        await anyio.to_thread.run_sync(dumps.open_engine_root)
        if self._toolkit is None:
            # The first lookup runs nvcc --version: keep it off the event loop.
            self._toolkit = await anyio.to_thread.run_sync(find_toolkit)
        if self.arch is None:
            # Asked once, off the event loop (cuInit can take a while); cached after.
            await anyio.to_thread.run_sync(local_gpu_arch)
        elif not self._toolkit.supports("nvrtc", self.arch):
            raise InvalidJob(
                "arch",
                self.arch,
                f"NVRTC {self._toolkit.compiler_versions['nvrtc']} supports "
                f"{self._toolkit.supported_archs('nvrtc')} (a: 90 and up; f: 100 and up)",
            )

        def make_cache() -> ResultCache | None:
            if not self._cache_enabled:
                return None
            if self._cache_dir is False:
                disk = None
            else:
                disk = default_cache_dir() if self._cache_dir is None else Path(self._cache_dir)
            return ResultCache(
                disk,
                memory_bytes=self._memory_cache_bytes,
                disk_bytes=self._disk_cache_bytes,
                cache_failures=self._cache_failures,
                remote=self._remote,
            )

        self._cache = await anyio.to_thread.run_sync(make_cache)
        self._backends = self._make_backends(self._toolkit)
        slots = {"nvrtc": self.nvrtc_workers, "nvcc": self.nvcc_workers}
        shared_slots = False
        if self.executor is not None:
            on_cluster = await self.executor.start(self._toolkit, self._backends)
            if on_cluster is not None:  # None: fell back to local workers (warned)
                self.on_cluster = True
                self._backends, actors = on_cluster
                slots = dict.fromkeys(self._backends, actors)
                shared_slots = True  # an actor runs either compiler
        planner = Planner(
            arch=self.arch,
            toolkit=self._toolkit,
            backends=self._backends,
            slots=slots,
            cost_model=self.cost_model,
            split_compile=self.split_compile,
            tvm_fast_path=self.tvm_fast_path,
            dumps=dumps,
            cache=self._cache,
        )
        if self._cache is not None and self._remote is not None:
            self._writer = RemoteWriter(self._remote)
        self._runner = Scheduler(
            planner=planner,
            counters=self._counters,
            writer=self._writer,
            shared_slots=shared_slots,
        )
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        for backend in self._backends.values():
            await backend.start(task_group)
        if self._writer is not None:
            task_group.start_soon(self._writer.run)

    async def _start_client(self) -> None:
        # Imported here: the server package imports this module.
        from ..server._client import ClientSettings, ServerClient

        client = ServerClient(
            socket=None if self.server == "auto" else Path(self.server or ""),
            auto_start=self.server == "auto",
            settings=ClientSettings(self.arch, self.tvm_fast_path, self.dump_dir),
            counters=self._counters,
        )
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        try:
            await client.start(task_group)
        except BaseException:
            task_group.cancel_scope.cancel()
            await task_group.__aexit__(None, None, None)
            raise
        self._task_group = task_group
        self._client = self._runner = client

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._state is not EngineState.RUNNING:
            return
        self._state = EngineState.CLOSING
        task_group = self._task_group
        assert task_group is not None
        try:
            if exc_type is None:
                while self._calls or self._prefetches:
                    await self._changed.wait()
        finally:
            with anyio.CancelScope(shield=True):
                # Whatever is left was not waited for (an error, a cancellation): cancel
                # it, and let it finish unwinding before the backends go.
                if self._calls or self._prefetches:
                    self._forced = True
                    for scope in (*self._calls, *self._prefetches):
                        scope.cancel()
                    while self._calls or self._prefetches:
                        await self._changed.wait()
                for backend in self._backends.values():
                    await backend.aclose()
                if self._client is not None:
                    await self._client.aclose()
                if self._writer is not None:
                    await self._writer.aclose()  # what is queued, for a few seconds
                if self._remote is not None:
                    await self._remote.aclose()
                if self._cache is not None:
                    await anyio.to_thread.run_sync(self._cache.save_stats)
            # Outside the shield (the task group's scope must be the innermost one when
            # it exits): the background tasks left (threads NVRTC has not stopped yet)
            # are cancelled and waited for. The body's own exception, if any, propagates
            # as it is, not wrapped in a group of this task group's.
            task_group.cancel_scope.cancel()
            await task_group.__aexit__(None, None, None)
            self._task_group = None
            self._state = EngineState.CLOSED

    def _make_backends(self, toolkit: Toolkit) -> dict[str, CompilerBackend]:
        """The backends by name, made as the engine starts (a subclass may return its
        own: the scheduler's lifecycle tests use a backend that compiles nothing)."""
        from ..backends import NvccBackend, NvrtcBackend

        return {
            "nvrtc": NvrtcBackend(
                toolkit, self.nvrtc_mode, self.nvrtc_workers, warmup_arch=self.arch or "sm_80"
            ),
            "nvcc": NvccBackend(toolkit),
        }

    def _notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    @property
    def cache(self) -> ResultCache | None:
        """The engine's result cache (``None`` when caching is off)."""
        return self._cache

    @property
    def toolkit(self) -> Toolkit:
        """The toolkit this engine compiles with (known once the engine has started; an
        engine on a server looks up this process's, which is the server's too)."""
        if self._toolkit is None:
            if self._client is None:
                raise EngineClosed("the toolkit is looked up when the engine starts")
            self._toolkit = find_toolkit()
        return self._toolkit

    @property
    def compiler_versions(self) -> dict[str, str | None]:
        """The versions of the compilers this engine uses (NVRTC, nvcc), for reports."""
        if self._client is not None:
            versions = self._client.toolkit_versions
            if versions is not None:
                return versions
        return self.toolkit.compiler_versions

    def statistics(self) -> EngineStatistics:
        """An immutable snapshot of the counters."""
        runner = self._runner
        self._counters.queued = 0 if runner is None else runner.waiting
        return self._counters.snapshot(sum(b.worker_count() for b in self._backends.values()))

    def running(self) -> list[tuple[CompileJob, float]]:
        """The jobs compiling now in this engine, with how long each has run (seconds),
        longest first; a progress display shows them. Empty for an engine on a server."""
        runner = self._runner
        return [] if runner is None else runner.running_jobs()

    def estimate(self, job: CompileJob) -> float:
        """The cost model's estimate of ``job``'s compile, in seconds (for an ETA)."""
        _check_job(job)
        arch = job.arch or self.arch or ""
        return self.cost_model.estimate(job.backend, (arch, *job.options), job.source)

    def _require_running(self) -> _Runner:
        if self._state is not EngineState.RUNNING:
            if self._state is EngineState.NEW:
                raise EngineClosed("the engine is not running: use it inside `async with Engine()`")
            raise EngineClosed(f"the engine is {self._state.value}: it takes no more calls")
        assert self._runner is not None
        return self._runner

    async def _guarded(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run one public call: counted for closing, cancelled by a forced close (which
        the caller sees as ``EngineClosed``). Always checkpoints."""
        self._require_running()
        await anyio.lowlevel.checkpoint()
        self._require_running()
        scope = anyio.CancelScope()
        self._calls.add(scope)
        try:
            with scope:
                return await call()
        finally:
            self._calls.discard(scope)
            self._notify()
        raise EngineClosed("the engine was closed before this call finished")

    # -- public API ----------------------------------------------------------------------

    async def compile(self, job: CompileJob) -> CompileResult:
        """Compile one job. A compile failure is returned in ``result.error``, not raised."""
        jobs = self._check_archs([job])
        return (await self._guarded(lambda: self._run_list(jobs)))[0]

    async def compile_many(self, jobs: Iterable[CompileJob]) -> list[CompileResult]:
        """Compile all ``jobs`` concurrently; results come back in the order of ``jobs``."""
        checked = self._check_archs(jobs)
        return await self._guarded(lambda: self._run_list(checked))

    def _check_archs(self, jobs: Iterable[CompileJob]) -> list[CompileJob]:
        """The jobs, once their architectures are known to be ones their compilers take
        (an unknown one is :class:`~asynccomp.InvalidJob` before anything runs)."""
        checked = [_check_job(job) for job in jobs]
        toolkit = self._toolkit if self._client is None else None
        if toolkit is not None:
            for job in checked:
                arch = job.arch or self.arch
                if arch is not None and not toolkit.supports(job.backend, arch):
                    raise InvalidJob(
                        "arch",
                        arch,
                        f"{job.backend} ({toolkit.compiler_versions[job.backend]}) here "
                        f"supports {toolkit.supported_archs(job.backend)} (a: 90 and up; "
                        f"f: 100 and up); job {job.name!r}",
                    )
        return checked

    async def _run_list(self, jobs: list[CompileJob]) -> list[CompileResult]:
        batch = Batch(len(jobs), None)
        await self._require_running().run(batch, jobs)
        if batch.rejected is not None:
            # The server found a bad value (an architecture its toolkit lacks): the
            # caller's error, as it would have been in this process.
            raise InvalidJob("jobs", batch.rejected, "refused by the compile server")
        return batch.ordered_results()

    def as_completed(self, jobs: Iterable[CompileJob]) -> CompletedResults:
        """Compile all ``jobs`` concurrently; iterate over the results as they finish::

            async with engine.as_completed(jobs) as results:
                async for result in results:
                    ...

        Leaving the block (a ``break``, an exception) cancels the jobs still queued or
        running; nothing of them outlives it.
        """
        return CompletedResults(self, self._check_archs(jobs))

    async def warm_up(self) -> None:
        """Start every NVRTC worker and compile a small program in each, now.

        The first compiles in a fresh process are slow and erratic; a sweep that is timed
        calls this right after starting the engine. Without it, workers start as jobs
        need them (and the first job a worker gets pays that cost).
        """
        if self._client is not None:
            await self._guarded(self._client.warm_up)
        else:
            await self._guarded(self._backends["nvrtc"].warm_up)

    def prefetch(self, jobs: Iterable[CompileJob]) -> None:
        """Start compiling ``jobs`` in the background and return at once.

        The results go to the cache, so later ``compile`` calls for the same jobs are cache
        hits (or wait for the compile in flight). The compiles belong to the engine: it
        waits for them when it closes (unless :meth:`cancel_prefetched` was called).
        """
        scheduler = self._require_running()
        checked = self._check_archs(jobs)
        if not checked:
            return
        assert self._task_group is not None
        batch = Batch(len(checked), lambda result: None, wanted=False)
        scope = anyio.CancelScope()
        self._prefetches.add(scope)
        self._task_group.start_soon(self._prefetched, scheduler, batch, checked, scope)

    async def _prefetched(
        self, scheduler: _Runner, batch: Batch, jobs: list[CompileJob], scope: anyio.CancelScope
    ) -> None:
        try:
            with scope:
                await scheduler.run(batch, jobs)
        finally:
            self._prefetches.discard(scope)
            self._notify()

    def cancel_prefetched(self) -> None:
        """Stop every prefetched compile still queued or running (nothing is cached for
        them; a caller waiting for one of them compiles it itself). For a quick exit: an
        autotuner that pushed a large batch ahead need not wait for all of it."""
        for scope in self._prefetches:
            scope.cancel()


class CompletedResults:
    """What :meth:`Engine.as_completed` returns: an async context manager whose value is
    an async iterator over the results in completion order."""

    def __init__(self, engine: Engine, jobs: list[CompileJob]) -> None:
        self._engine = engine
        self._jobs = jobs
        self._scope = anyio.CancelScope()
        self._done = anyio.Event()
        self._batch: Batch | None = None
        self._receive: MemoryObjectReceiveStream[CompileResult] | None = None

    async def __aenter__(self) -> AsyncIterator[CompileResult]:
        engine = self._engine
        scheduler = engine._require_running()
        if self._batch is not None:
            raise RuntimeError("as_completed() results can be entered once")
        await anyio.lowlevel.checkpoint()
        scheduler = engine._require_running()
        send, receive = anyio.create_memory_object_stream[CompileResult](len(self._jobs) or 1)
        batch = self._batch = Batch(len(self._jobs), send)
        self._receive = receive

        async def run() -> None:
            try:
                async with send:
                    with self._scope:
                        await scheduler.run(batch, self._jobs)
            finally:
                engine._calls.discard(self._scope)
                engine._notify()
                self._done.set()

        engine._calls.add(self._scope)
        # The batch runs in the engine's task group, not around the caller's block: an
        # exception of the block propagates as it is, and the block can be left any time.
        assert engine._task_group is not None
        engine._task_group.start_soon(run)
        return receive

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._scope.cancel()
        with anyio.CancelScope(shield=True):
            await self._done.wait()
        assert self._receive is not None and self._batch is not None
        self._receive.close()
        if exc_type is None and self._batch.pending and self._engine._forced:
            raise EngineClosed("the engine was closed before these jobs finished")


def _remote_cache(value: object) -> RemoteCache | None:
    """The remote tier ``Engine(remote_cache=...)`` asks for (a URL checked now)."""
    from ..cache import REMOTE_CACHE_ENV, RemoteCache, remote_cache_from_url

    if value is False:
        return None
    if value is None:
        url = os.environ.get(REMOTE_CACHE_ENV, "").strip()
        return remote_cache_from_url(url) if url else None
    if isinstance(value, RemoteCache):
        return value
    if isinstance(value, str):
        return remote_cache_from_url(value)
    raise InvalidJob("remote_cache", value, "must be a URL, a RemoteCache, None or False")


def _check_executor(executor: object) -> RayExecutor | None:
    if executor is None:
        return None
    from ..ray import RayExecutor

    if not isinstance(executor, RayExecutor):
        raise InvalidJob("executor", executor, "must be an asynccomp.ray.RayExecutor or None")
    return executor


def _check_server(server: object) -> str | None:
    if server is None:
        return None
    if server == "auto":
        return "auto"
    if isinstance(server, (str, os.PathLike)) and os.fspath(server):
        return str(Path(os.fspath(server)).absolute())
    raise InvalidJob("server", server, 'expected "auto", the path of a server\'s socket, or None')


def _check_job(job: object) -> CompileJob:
    if not isinstance(job, CompileJob):
        raise InvalidJob("job", job, "expected a CompileJob")
    return job
