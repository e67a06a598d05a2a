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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio.abc
import anyio.to_thread

from .._scheduler.local import MakeBackends, check_arch, start_local
from ..backends import CompilerBackend, compiler_versions
from ..cache import RemoteCache, ResultCache
from ..config import EngineConfig
from ..cost import CostModel
from ..errors import AsyncCompWarning, ServerError
from ..job import DEFAULT_BACKEND
from ..runner import Runner
from ..toolkit import Toolkit
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
    cache: ResultCache | None
    on_cluster: bool


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
        versions=lambda: compiler_versions(toolkit),
    )


async def _on_server(
    config: EngineConfig,
    dumps: DumpRegistry,
    cost_model: CostModel,
    make_backends: MakeBackends,
    task_group: anyio.abc.TaskGroup,
    stack: contextlib.AsyncExitStack,
) -> Parts:
    # Imported here: an engine in process never loads the server package. (No loop: the
    # server builds on .local, never on this module.)
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
        check_arch(toolkit, DEFAULT_BACKEND, config.arch, "Engine(arch=...), on the compile server")
    mismatch = client.remote_key_mismatch()
    if mismatch is not None:
        raise ServerError(mismatch)
    for warning in client.overridden_settings():
        warnings.warn(warning, AsyncCompWarning, stacklevel=4)
    # Rendered here, with the server's toolkit; never started (the server compiles).
    renderers = make_backends(toolkit)
    front = _front(config, toolkit, renderers, client, dumps, cost_model)
    return Parts(toolkit, client, front, None, False)
