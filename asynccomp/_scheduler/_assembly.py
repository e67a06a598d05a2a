"""Putting an engine together as it starts, and taking it apart.

An engine is a :class:`~._front.Front` (planning, results, dumps, counts) over a
:class:`~asynccomp.runner.Runner`:

- in process: this module's scheduler (:class:`~._pipeline.Scheduler`) over the local
  backends, or over a Ray cluster's actors (``executor``), with its own cache;
- on a compile server: :class:`asynccomp.server.ServerClient`; the jobs are rendered
  here with the server's toolkit (its welcome says what it is), and the cache is the
  server's.

Each part that starts is registered on an exit stack, so a start that fails half way
(no server, a Ray cluster that cannot be reached, a dump folder that cannot be written)
takes down what it had started, in reverse order, and raises.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio.abc
import anyio.to_thread

from ..backends import CompilerBackend
from ..cache import RemoteCache, ResultCache
from ..config import EngineConfig
from ..cost import CostModel
from ..errors import AsyncCompWarning, InvalidJob
from ..gpu import local_gpu_arch
from ..runner import Runner
from ..toolkit import Toolkit, find_toolkit
from . import _limits
from ._dumps import DumpRegistry
from ._front import Front
from ._pipeline import Scheduler
from ._plan import Planner

__all__ = (
    "LocalRunner",
    "Parts",
    "assemble",
    "check_arch",
    "default_backends",
    "local_workers",
    "start_local",
)

MakeBackends = Callable[[Toolkit], dict[str, CompilerBackend]]


@dataclass
class Parts:
    """A started engine's parts."""

    toolkit: Toolkit
    runner: Runner
    front: Front
    cache: ResultCache | None
    on_cluster: bool


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


async def assemble(
    config: EngineConfig,
    *,
    remote: RemoteCache | None,
    workers: Mapping[str, int],
    cost_model: CostModel,
    make_backends: MakeBackends,
    task_group: anyio.abc.TaskGroup,
    stack: contextlib.AsyncExitStack,
) -> Parts:
    """Start the engine's parts (each registered on ``stack`` to be closed)."""
    dumps = DumpRegistry(None if config.dump_dir is None else Path(config.dump_dir))
    # An unusable dump root fails here, before any job runs.
    await anyio.to_thread.run_sync(dumps.open_engine_root)
    if config.server is not None:
        return await _on_server(config, dumps, cost_model, make_backends, task_group, stack)
    local = await start_local(
        config,
        remote=remote,
        workers=workers,
        make_backends=make_backends,
        task_group=task_group,
        stack=stack,
    )
    front = _front(config, local.toolkit, local.renderers, local.scheduler, dumps, cost_model)
    return Parts(local.toolkit, local.scheduler, front, local.cache, local.on_cluster)


def _front(
    config: EngineConfig,
    toolkit: Toolkit,
    renderers: Mapping[str, CompilerBackend],
    runner: Runner,
    dumps: DumpRegistry,
    cost_model: CostModel,
) -> Front:
    planner = Planner(
        arch=config.arch,
        renderers=renderers,
        slots=runner.slots(),
        cost_model=cost_model,
        split_compile=config.split_compile,
        tvm_fast_path=config.tvm_fast_path,
        dumps=dumps,
    )
    return Front(
        planner=planner,
        runner=runner,
        cost_model=cost_model,
        versions=lambda: toolkit.compiler_versions,
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
    writer = RemoteWriter(cache.remote) if cache is not None and cache.remote is not None else None
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

    if not config.cache:
        return None
    if config.cache_dir is False:
        disk = None
    else:
        disk = default_cache_dir() if config.cache_dir is None else Path(config.cache_dir)
    return ResultCache(
        disk,
        memory_bytes=config.memory_cache_bytes,
        disk_bytes=config.disk_cache_bytes,
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


async def _on_server(
    config: EngineConfig,
    dumps: DumpRegistry,
    cost_model: CostModel,
    make_backends: MakeBackends,
    task_group: anyio.abc.TaskGroup,
    stack: contextlib.AsyncExitStack,
) -> Parts:
    from ..server import ServerClient

    server = config.server
    assert server is not None
    socket = None if server == "auto" else Path(server)
    # remote_cache=False is the one remote setting an engine on a server takes.
    if config.remote_cache is False:
        client = ServerClient(socket, remote_cache=False)
    else:
        client = ServerClient(socket)
    stack.push_async_callback(client.aclose)
    await client.start(task_group)
    toolkit = client.toolkit
    if config.arch is not None:
        check_arch(toolkit, "nvrtc", config.arch, "Engine(arch=...), on the compile server")
    for warning in client.overridden_settings():
        warnings.warn(warning, AsyncCompWarning, stacklevel=4)
    # Rendered here, with the server's toolkit; never started (the server compiles).
    renderers = make_backends(toolkit)
    front = _front(config, toolkit, renderers, client, dumps, cost_model)
    return Parts(toolkit, client, front, None, False)


def local_workers(config: EngineConfig) -> tuple[dict[str, int], str]:
    """The worker counts and NVRTC mode of an engine that compiles in this process
    (counts capped by memory, with a warning for a count that was given)."""
    nvrtc = _limits.nvrtc_workers(config.nvrtc_workers)
    mode = config.nvrtc_mode
    if mode == "auto":
        mode = "processes" if nvrtc > 1 else "threads"
    return {"nvrtc": nvrtc, "nvcc": _limits.nvcc_workers(config.nvcc_workers)}, mode
