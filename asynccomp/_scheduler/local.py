"""The scheduler that compiles on this machine (or a Ray cluster), started as one piece:
the interface :mod:`asynccomp._scheduler` offers the rest of asynccomp.

An engine that compiles in process starts one with :func:`start_local`; so does the
compile server (:mod:`asynccomp.server`), which runs one for every client. Nothing
here knows of engines or of the server: both build on it, so neither imports the
other's insides.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio.abc
import anyio.to_thread

from ..backends import CompilerBackend
from ..cache import RemoteCache, ResultCache
from ..config import EngineConfig
from ..errors import InvalidJob
from ..gpu import local_gpu_arch
from ..toolkit import Toolkit, find_toolkit
from . import _limits
from ._pipeline import Scheduler
from ._tally import Counting, Tally, timed_out

__all__ = (
    "Counting",
    "LocalRunner",
    "MakeBackends",
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


def check_arch(toolkit: Toolkit, backend: str, arch: str, what: str) -> None:
    """Raise :class:`~asynccomp.InvalidJob` if ``backend``'s compiler in ``toolkit``
    does not take ``arch``; ``what`` says whose architecture it is."""
    if not toolkit.supports(backend, arch):
        raise InvalidJob(
            "arch",
            arch,
            f"{backend} ({toolkit.compiler_versions[backend]}) supports "
            f"{toolkit.supported_archs(backend)} (a: 90 and up; f: 100 and up); {what}",
        )


@dataclass
class LocalRunner:
    """The scheduler of an engine (or a compile server) that compiles on this machine's
    workers, or on a Ray cluster's actors."""

    toolkit: Toolkit
    scheduler: Scheduler
    renderers: Mapping[str, CompilerBackend]  # the local backends (they render every job)
    cache: ResultCache | None
    on_cluster: bool


async def start_local(
    config: EngineConfig,
    *,
    remote: RemoteCache | None,
    workers: Mapping[str, int],
    make_backends: MakeBackends,
    task_group: anyio.abc.TaskGroup,
    stack: contextlib.AsyncExitStack,
) -> LocalRunner:
    """Start the local scheduler: toolkit, cache, backends (or the Ray executor's)."""
    from ..cache._remote import RemoteWriter

    # The first lookup runs nvcc --version: keep it off the event loop.
    toolkit = (
        config.toolkit
        if config.toolkit is not None
        else await anyio.to_thread.run_sync(find_toolkit)
    )
    if config.arch is None:
        # Asked once, off the event loop (cuInit can take a while); cached after.
        await anyio.to_thread.run_sync(local_gpu_arch)
    else:
        check_arch(toolkit, "nvrtc", config.arch, "Engine(arch=...)")
    cache = await anyio.to_thread.run_sync(_make_cache, config, remote)
    local = backends = make_backends(toolkit)
    slots = dict(workers)
    shared_slots = on_cluster = False
    where = "in process"
    if config.executor is not None:
        started = await config.executor.start(toolkit, backends)
        if started is not None:  # None: it fell back to local workers (warned)
            backends, actors, where = started
            slots = dict.fromkeys(backends, actors)
            shared_slots = on_cluster = True  # an actor runs either compiler
    writer = None
    if cache is not None and cache.remote is not None:
        stats = cache.stats
        writer = RemoteWriter(cache.remote, stored=lambda: stats.add(remote_stores=1))
    scheduler = Scheduler(
        toolkit=toolkit,
        backends=backends,
        slots=slots,
        cache=cache,
        writer=writer,
        shared_slots=shared_slots,
        where=where,
    )
    stack.push_async_callback(scheduler.aclose)
    await scheduler.start(task_group)
    return LocalRunner(toolkit, scheduler, local, cache, on_cluster)


def default_backends(
    toolkit: Toolkit, mode: str, workers: Mapping[str, int], arch: str | None
) -> dict[str, CompilerBackend]:
    """NVRTC (``mode``: threads or processes) and nvcc, as an engine makes them."""
    from ..backends import NvccBackend, NvrtcBackend

    return {
        "nvrtc": NvrtcBackend(
            toolkit,
            "processes" if mode == "processes" else "threads",
            workers.get("nvrtc", 1),
            warmup_arch=arch or "sm_80",
        ),
        "nvcc": NvccBackend(toolkit),
    }


def _make_cache(config: EngineConfig, remote: RemoteCache | None) -> ResultCache | None:
    """Blocking: the engine's cache (``None`` when caching is off)."""
    from ..cache import default_cache_dir
    from ..cache._settings import max_size

    if not config.cache:
        return None
    if config.cache_dir is False:
        disk = None
    else:
        disk = default_cache_dir() if config.cache_dir is None else Path(config.cache_dir)
    disk_bytes, _ = max_size(disk, config.disk_cache_bytes)
    return ResultCache(
        disk,
        memory_bytes=config.memory_cache_bytes,
        disk_bytes=disk_bytes,
        cache_failures=config.cache_failures,
        remote=remote,
    )


def remote_cache(value: object) -> RemoteCache | None:
    """The remote tier ``remote_cache`` asks for, made (not connected) and checked now:
    a bad URL, or a missing key, is :class:`~asynccomp.InvalidJob` as the engine is made;
    ``None`` reads ``$ASYNCCOMP_REMOTE_CACHE``."""
    from ..cache import remote_cache_from_environment, remote_cache_from_url

    if value is False:
        return None
    if value is None:
        return remote_cache_from_environment(strict=True)
    if isinstance(value, RemoteCache):
        return value
    assert isinstance(value, str)
    return remote_cache_from_url(value)


def local_workers(config: EngineConfig) -> tuple[dict[str, int], str]:
    """The worker counts and NVRTC mode of an engine that compiles in this process
    (counts capped by memory, with a warning for a count that was given)."""
    nvrtc = _limits.nvrtc_workers(config.nvrtc_workers)
    mode = config.nvrtc_mode
    if mode == "auto":
        mode = "processes" if nvrtc > 1 else "threads"
    return {"nvrtc": nvrtc, "nvcc": _limits.nvcc_workers(config.nvcc_workers)}, mode
