"""The scheduler that compiles on this machine (or a Ray cluster), started as one piece:
the interface :mod:`asynccomp._scheduler` offers the rest of asynccomp.

An engine that compiles in process starts one with :func:`start_local`; so does the
compile server (:mod:`asynccomp.server`), which runs one for every client. Nothing
here knows of engines or of the server: both build on it, so neither imports the
other's insides.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio.abc
import anyio.to_thread

from ..backends import (
    BackendSettings,
    CompilerBackend,
    PreparedCompile,
    arch_supported,
    backend_class,
    backend_names,
    compiler_info,
)
from ..cache import (
    RemoteCache,
    TieredCache,
    default_cache_dir,
    open_cache,
    remote_cache_from_environment,
    remote_cache_from_url,
)
from ..config import CacheSettings, InProcess, OnRay, WorkerSettings
from ..errors import EngineClosed, InvalidJob, SettingsError
from ..gpu import local_gpu_arch
from ..job import DEFAULT_BACKEND
from ..runner import CompileRequest, RunEvents, Runner
from ..toolkit import Toolkit, find_toolkit
from . import _limits
from ._pipeline import Scheduler
from ._tally import Counting, Tally, timed_out

__all__ = (
    "Counting",
    "InProcessRunner",
    "LocalRunner",
    "MakeBackends",
    "NvrtcMode",
    "Scheduler",
    "Tally",
    "check_arch",
    "default_backends",
    "local_workers",
    "remote_cache",
    "start_local",
    "timed_out",
)

MakeBackends = Callable[[Toolkit], dict[str, CompilerBackend]]
#: How local NVRTC compiles run ("auto" decided).
NvrtcMode = Literal["threads", "processes"]


def check_arch(
    toolkit: Toolkit, backend: str, arch: str, what: str, *, setting: bool = False
) -> None:
    """Raise :class:`~asynccomp.InvalidJob` if ``backend``'s compiler in ``toolkit``
    does not take ``arch``; ``what`` says whose architecture it is (``setting``: the
    engine's, a :class:`~asynccomp.SettingsError`)."""
    info = compiler_info(backend, toolkit)
    known = info.archs
    if not arch_supported(known, arch):
        listed = ", ".join(f"sm_{n}" for n in sorted(known))
        raise (SettingsError if setting else InvalidJob)(
            "arch",
            arch,
            f"{backend} ({info.version}) supports {listed} (a: 90 and up; f: 100 and up); {what}",
        )


@dataclass
class LocalRunner:
    """The scheduler of an engine (or a compile server) that compiles on this machine's
    workers, or on a Ray cluster's actors."""

    toolkit: Toolkit
    scheduler: Scheduler
    renderers: Mapping[str, CompilerBackend]  # the local backends (they render every job)
    cache: TieredCache | None
    on_cluster: bool


async def start_local(
    mode: InProcess | OnRay,
    *,
    arch: str | None,
    umask: int | None = None,
    remote: RemoteCache | None,
    workers: Mapping[str, int],
    make_backends: MakeBackends,
    task_group: anyio.abc.TaskGroup,
    stack: contextlib.AsyncExitStack,
) -> LocalRunner:
    """Start the local scheduler: toolkit, cache, backends (or the Ray executor's)."""
    # The first lookup runs nvcc --version: keep it off the event loop.
    toolkit = (
        mode.toolkit if mode.toolkit is not None else await anyio.to_thread.run_sync(find_toolkit)
    )
    if arch is None:
        # Asked once, off the event loop (cuInit can take a while); cached after.
        await anyio.to_thread.run_sync(local_gpu_arch)
    else:
        check_arch(toolkit, DEFAULT_BACKEND, arch, "Engine(arch=...)", setting=True)
    cache = await anyio.to_thread.run_sync(_make_cache, mode.cache, toolkit, remote, umask)
    local = backends = make_backends(toolkit)
    slots = dict(workers)
    shared_slots = on_cluster = False
    where = "in process"
    if isinstance(mode, OnRay):
        started = await mode.executor.start(toolkit, backends)
        if started is not None:  # None: it fell back to local workers (warned)
            backends, actors, where = started
            slots = dict.fromkeys(backends, actors)
            shared_slots = on_cluster = True  # an actor runs either compiler
    scheduler = Scheduler(
        backends=backends,
        slots=slots,
        cache=cache,
        shared_slots=shared_slots,
        where=where,
    )
    stack.push_async_callback(scheduler.aclose)
    await scheduler.start(task_group)
    return LocalRunner(toolkit, scheduler, local, cache, on_cluster)


class InProcessRunner(Runner):
    """The runner of an engine that compiles in this process (:class:`InProcess`), or on
    a Ray cluster's actors (:class:`OnRay`): the scheduler with its cache, toolkit and
    backends, started with the runner. An engine in process makes one; a runner of
    one's own may wrap one (``Engine(runner=...)``).

    Made with no I/O but the checks of its settings: a bad remote cache URL or key is a
    :class:`~asynccomp.SettingsError` here, and a worker count lowered to fit memory
    warns here. ``arch`` is what the engine renders for (checked against the toolkit as
    it starts; ``None``: the local GPU, asked as it starts); ``make_backends`` makes the
    backends from the toolkit found (default: every registered backend, with these workers).
    ``pch_hints``: a folder where the precompiled headers that NVRTC's workers make are
    remembered, and made again as the next runner on that folder starts (a compile
    server's: :mod:`asynccomp.backends._nvrtc_pch_hints`).
    """

    def __init__(
        self,
        mode: InProcess | OnRay | None = None,
        *,
        arch: str | None = None,
        make_backends: MakeBackends | None = None,
        umask: int | None = None,
        pch_hints: str | os.PathLike[str] | None = None,
    ) -> None:
        self.mode = InProcess() if mode is None else mode
        if not isinstance(self.mode, (InProcess, OnRay)):
            raise SettingsError("mode", self.mode, "must be InProcess or OnRay")
        self.arch = arch
        self.umask = umask  # the cache's file modes (None: $ASYNCCOMP_UMASK, else 077)
        # The remote tier is made (not connected) and checked now: a bad URL or a
        # missing key fails here, as any bad setting does.
        cache = self.mode.cache
        self.remote = remote_cache(cache.remote_cache) if cache.cache else None
        # Counts last: a count lowered to fit memory warns, for valid settings only.
        hints = None if pch_hints is None else Path(pch_hints)
        self.backend_settings = local_workers(self.mode.workers, arch, hints)
        self.worker_counts = {name: b.workers for name, b in self.backend_settings.items()}
        self._make_backends = make_backends or self.default_backends
        self._local: LocalRunner | None = None
        self._stack = contextlib.AsyncExitStack()

    def default_backends(self, toolkit: Toolkit) -> dict[str, CompilerBackend]:
        """Every registered backend, with this runner's settings for it."""
        return default_backends(toolkit, self.backend_settings)

    @property
    def started(self) -> LocalRunner:
        if self._local is None:
            raise EngineClosed("the runner has not started")
        return self._local

    @property
    def where(self) -> str:  # type: ignore[override]
        return "in process" if self._local is None else self._local.scheduler.where

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        async with contextlib.AsyncExitStack() as unwind:
            unwind.push_async_exit(self._stack)  # a start that fails half way unwinds
            self._local = await start_local(
                self.mode,
                arch=self.arch,
                umask=self.umask,
                remote=self.remote,
                workers=self.worker_counts,
                make_backends=self._make_backends,
                task_group=task_group,
                stack=self._stack,
            )
            unwind.pop_all()

    async def run(
        self,
        requests: AsyncIterable[Sequence[CompileRequest]],
        events: RunEvents,
        *,
        want: bool = True,
    ) -> None:
        await self.started.scheduler.run(requests, events, want=want)

    async def warm_up(self) -> None:
        await self.started.scheduler.warm_up()

    async def make_pch(self, prepared: PreparedCompile) -> bool:
        return await self.started.scheduler.make_pch(prepared)

    def slots(self) -> Mapping[str, int]:
        return dict(self.worker_counts) if self._local is None else self._local.scheduler.slots()

    def workers(self) -> int:
        return 0 if self._local is None else self._local.scheduler.workers()

    async def aclose(self) -> None:
        await self._stack.aclose()


def default_backends(
    toolkit: Toolkit, settings: Mapping[str, BackendSettings]
) -> dict[str, CompilerBackend]:
    """Every registered backend, as an engine (or a compile server) with ``settings``
    (:func:`local_workers`) makes them; a backend without settings gets the defaults
    (an engine on a compile server only renders with them)."""
    return {
        name: backend_class(name).create(toolkit, settings.get(name, BackendSettings()))
        for name in backend_names()
    }


def _make_cache(
    settings: CacheSettings, toolkit: Toolkit, remote: RemoteCache | None, umask: int | None
) -> TieredCache | None:
    """Blocking: the engine's cache (``None`` when caching is off)."""
    if not settings.cache:
        return None
    if settings.cache_dir is False:
        folder = None
    else:
        folder = default_cache_dir() if settings.cache_dir is None else Path(settings.cache_dir)
    try:
        return open_cache(
            toolkit,
            folder=folder,
            memory_bytes=settings.memory_cache_bytes,
            disk_bytes=settings.disk_cache_bytes,
            cache_failures=settings.cache_failures,
            remote=remote,
            umask=umask,
        )
    except InvalidJob as exc:  # $ASYNCCOMP_CACHE_MAX_SIZE, or the folder's: a setting
        raise SettingsError(exc.field, exc.value, exc.problem) from None


def remote_cache(value: object) -> RemoteCache | None:
    """The remote tier ``remote_cache`` asks for, made (not connected) and checked now:
    a bad URL, or a missing key, is a :class:`~asynccomp.SettingsError` as the engine
    is made; ``None`` reads ``$ASYNCCOMP_REMOTE_CACHE``."""
    if value is False:
        return None
    if isinstance(value, RemoteCache):
        return value
    try:
        if value is None:
            return remote_cache_from_environment(strict=True)
        assert isinstance(value, str)
        return remote_cache_from_url(value)
    except SettingsError:
        raise
    except InvalidJob as exc:  # the cache's own checks: here, a setting of the engine's
        raise SettingsError(exc.field, exc.value, exc.problem) from None


def local_workers(
    settings: WorkerSettings, arch: str | None, pch_hints: Path | None = None
) -> dict[str, BackendSettings]:
    """How a scheduler that compiles in this process runs each registered backend: its
    worker count (its setting's, else one per CPU; capped by memory, with a warning for
    a count that was given) and the rest of its settings (``arch``: what a warm-up
    compiles for; ``pch_hints``: see :class:`~asynccomp.backends.BackendSettings`)."""
    out = {}
    for name in backend_names():
        cls = backend_class(name)
        setting = cls.workers_setting
        requested = settings.count(name, setting)
        count = _limits.worker_count(
            setting or f"workers[{name!r}]", requested, cls.worker_memory, cls.worker_noun
        )
        asked = "threads" if cls.mode_setting is None else getattr(settings, cls.mode_setting)
        processes = asked == "processes" or (asked == "auto" and count > 1)
        mode: NvrtcMode = "processes" if processes else "threads"
        out[name] = BackendSettings(count, mode, warmup_arch=arch or "sm_80", pch_hints=pch_hints)
    return out
