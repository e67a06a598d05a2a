"""Putting an engine together as it starts, and taking it apart.

An engine is a :class:`~._front.Front` (planning, results, dumps, counts) over a
:class:`~asynccomp.runner.Runner`:

- in process (:class:`~asynccomp.config.InProcess`, :class:`~asynccomp.config.OnRay`):
  an :class:`~asynccomp.engine.InProcessRunner`, the scheduler over the local backends
  or over a Ray cluster's actors, with its own cache;
- on a compile server (:class:`~asynccomp.config.OnServer`):
  :class:`asynccomp.server.ServerClient`; the jobs are rendered here with the server's
  toolkit (its welcome says what it is), and the cache is the server's;
- a runner of one's own (``Engine(runner=...)``): the jobs are rendered here with the
  engine's toolkit (given, or found as it starts); it has no cache the engine sees.

Each part that starts is registered on an exit stack, so a start that fails half way
(no server, a Ray cluster that cannot be reached, a dump folder that cannot be written)
takes down what it had started, in reverse order, and raises.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import anyio.abc
import anyio.to_thread

from .._os import empty_folder
from .._scheduler.local import InProcessRunner, MakeBackends, check_arch
from .._warn import warn
from ..backends import CompilerBackend, compiler_versions
from ..cache import TieredCache
from ..config import EngineConfig, OnServer
from ..cost import CostModel
from ..errors import AsyncCompWarning, ServerError
from ..gpu import local_gpu_arch
from ..job import DEFAULT_BACKEND
from ..runner import Runner
from ..toolkit import Toolkit, find_toolkit
from ._dumps import DumpRegistry
from ._front import Front
from ._plan import Planner

__all__ = ("Parts", "assemble")


@dataclass
class Parts:
    """A started engine's parts."""

    toolkit: Toolkit
    runner: Runner
    front: Front
    cache: TieredCache | None
    on_cluster: bool
    #: The (backend, architecture) pairs found to be taken by the backend's compiler.
    archs_taken: set[tuple[str, str]] = field(default_factory=set)


async def assemble(
    config: EngineConfig,
    *,
    runner: Runner | None,
    cost_model: CostModel,
    make_backends: MakeBackends,
    task_group: anyio.abc.TaskGroup,
    stack: contextlib.AsyncExitStack,
) -> Parts:
    """Start the engine's parts (each registered on ``stack`` to be closed): ``runner``
    (an :class:`InProcessRunner`, or one of the caller's own), or a compile server's
    client for :class:`OnServer` (``runner`` is then ``None``)."""
    dump_dir = None if config.job.dump_dir is None else Path(config.job.dump_dir)
    dumps = DumpRegistry(dump_dir, config.job.umask)
    # An unusable dump root fails here, before any job runs.
    await anyio.to_thread.run_sync(dumps.open_engine_root)
    if isinstance(config.mode, OnServer):
        return await _on_server(
            config, config.mode, dumps, cost_model, make_backends, task_group, stack
        )
    assert runner is not None
    if isinstance(runner, InProcessRunner):
        stack.push_async_callback(runner.aclose)
        await runner.start(task_group)
        local = runner.started
        renderers = local.renderers
        if not local.on_cluster:
            # These backends compile too: a dump's rerun.py compiles where they do.
            dumps.compiled_in = lambda name: (
                renderers[name].quote_folder() if name in renderers else None
            )
        front = _front(config, local.toolkit, renderers, runner, dumps, cost_model)
        return Parts(local.toolkit, runner, front, local.cache, local.on_cluster)
    # A runner of one's own: the jobs are rendered here, with the toolkit given or found.
    toolkit = config.mode.toolkit
    if toolkit is None:
        toolkit = await anyio.to_thread.run_sync(find_toolkit)
    if config.job.arch is None:
        await anyio.to_thread.run_sync(local_gpu_arch)  # asked once, off the event loop
    else:
        check_arch(toolkit, "nvrtc", config.job.arch, "Engine(arch=...)", setting=True)
    stack.push_async_callback(runner.aclose)
    await runner.start(task_group)
    # Rendered here; never started (the runner compiles).
    front = _front(config, toolkit, make_backends(toolkit), runner, dumps, cost_model)
    return Parts(toolkit, runner, front, None, False)


def _front(
    config: EngineConfig,
    toolkit: Toolkit,
    renderers: Mapping[str, CompilerBackend],
    runner: Runner,
    dumps: DumpRegistry,
    cost_model: CostModel,
) -> Front:
    planner = Planner(
        arch=config.job.arch,
        renderers=renderers,
        slots=runner.slots(),
        cost_model=cost_model,
        split_compile=config.job.split_compile,
        tvm_fast_path=config.job.tvm_fast_path,
        dumps=dumps,
    )
    return Front(
        planner=planner,
        runner=runner,
        cost_model=cost_model,
        versions=lambda: compiler_versions(toolkit),
    )


async def _on_server(
    config: EngineConfig,
    mode: OnServer,
    dumps: DumpRegistry,
    cost_model: CostModel,
    make_backends: MakeBackends,
    task_group: anyio.abc.TaskGroup,
    stack: contextlib.AsyncExitStack,
) -> Parts:
    # Imported here: an engine in process never loads the server package. (No loop: the
    # server builds on .local, never on this module.)
    from ..server import ServerClient

    # remote_cache=False is the one remote setting an engine on a server takes.
    if mode.remote_cache is False:
        client = ServerClient(mode.socket, remote_cache=False)
    else:
        client = ServerClient(mode.socket)
    stack.push_async_callback(client.aclose)
    await client.start(task_group)
    toolkit = client.toolkit
    if config.job.arch is not None:
        check_arch(
            toolkit,
            DEFAULT_BACKEND,
            config.job.arch,
            "Engine(arch=...), on the compile server",
            setting=True,
        )
    mismatch = client.remote_key_mismatch()
    if mismatch is not None:
        raise ServerError(mismatch)
    for warning in client.overridden_settings():
        warn(warning, AsyncCompWarning)
    theirs = client.welcome.settings
    modes = theirs.get("modes") if theirs.get("executor") == "local" else None
    if isinstance(modes, dict):
        # The server's NVRTC worker processes run in this user's empty folder, as ours
        # would: a dump's rerun.py compiles there (line info names the folder).
        dumps.compiled_in = lambda name: empty_folder() if modes.get(name) == "processes" else None
    # Rendered here, with the server's toolkit; never started (the server compiles).
    renderers = make_backends(toolkit)
    front = _front(config, toolkit, renderers, client, dumps, cost_model)
    return Parts(toolkit, client, front, None, False)
