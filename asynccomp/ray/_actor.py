"""The cluster side: a compile worker that lives in a Ray actor.

One :class:`CompileActor` is one Ray worker process holding one CPU: it compiles one job
at a time (the client never sends a second before the first answered), with the same
backends a local engine runs, so NVRTC front ends run in parallel across actors and each
stays warm (headers read, libraries loaded) across batches.

This module imports nothing of Ray: :mod:`._pool` wraps the class with ``ray.remote``
when an engine starts, so ``import asynccomp.ray`` works without Ray installed.
"""

from __future__ import annotations

import os
import shutil
import socket
from dataclasses import replace
from pathlib import Path

import anyio

from .._include_identity import include_identity
from ..backends import (
    BackendOutput,
    BackendSettings,
    CompilerBackend,
    PreparedCompile,
    backend_class,
    backend_names,
    key_identities,
)
from ..backends._workdirs import make_work_folder, sweep_work_folders
from ..toolkit import Toolkit, find_toolkit

__all__ = ("CompileActor", "toolkit_identity")


def toolkit_identity(toolkit: Toolkit) -> dict[str, str]:
    """What a cache key says about each compiler (its version, its library or program,
    the fingerprint of the headers it reads): equal on both sides or no compile."""
    return {
        backend: f"{compiler} | headers {include_identity(includes)}"
        for backend, (compiler, includes) in key_identities(toolkit).items()
    }


class CompileActor:
    """Compiles :class:`~asynccomp.backends.PreparedCompile` s sent by an engine.

    Every call is a coroutine (an asyncio actor), so ``ray.cancel`` reaches a running
    compile as a cancellation: NVRTC stops at its next flow callback, nvcc is killed.
    """

    def __init__(self) -> None:
        self.toolkit = find_toolkit()
        self.identity = toolkit_identity(self.toolkit)
        # Each backend as the actor runs it: one compile at a time, in this process
        # (NVRTC in threads mode: the actor is the worker process). Made and started
        # at the first call that needs it, and kept warm across calls.
        self.backends: dict[str, CompilerBackend] = {}
        self._starting: dict[str, anyio.Event] = {}
        self._starts: dict[str, int] = {}  # how often each backend was started
        # What actors killed on this node before left (an engine's start does the same
        # for local program backends).
        sweep_work_folders()

    async def describe(self) -> dict[str, object]:
        """Who this actor is: its toolkit's identity, process and host."""
        return {
            "identity": self.identity,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "starts": dict(self._starts),
        }

    async def _started(self, name: str) -> CompilerBackend:
        """The actor's backend ``name``, made and started at the first call that needs
        it (a concurrent call waits for that start)."""
        starting = self._starting.get(name)
        if starting is None:
            self._starting[name] = starting = anyio.Event()
            cls = backend_class(name)
            backend = cls.create(self.toolkit, BackendSettings(1, "threads"))
            self._starts[name] = self._starts.get(name, 0) + 1
            try:
                # What a backend runs in the group as it starts is short (a sweep of its
                # work folders): a group of this call's is enough.
                async with anyio.create_task_group() as task_group:
                    await backend.start(task_group)
            finally:
                self.backends[name] = backend
                starting.set()
        await starting.wait()
        return self.backends[name]

    async def warm_up(self) -> None:
        """Load the compilers that warm up and read their common headers once (the
        first compile's cost)."""
        for name in backend_names():
            if backend_class(name).warms_up:
                await (await self._started(name)).warm_up()

    async def compile(
        self, prepared: PreparedCompile, identity: str, keep: bool = False
    ) -> BackendOutput:
        """Compile ``prepared`` if this actor's compiler is the one its cache key was
        made with (``identity``); refuse otherwise. ``keep``: send the compiler's
        intermediate files back in ``intermediates`` (the job's dump folder is on the
        client)."""
        mine = self.identity.get(prepared.backend)
        if mine != identity:
            return BackendOutput(
                "internal",
                None,
                "",
                f"refused by the Ray actor on {socket.gethostname()} (pid {os.getpid()}): "
                f"its {prepared.backend} is {mine!r}, the job's cache key was made with "
                f"{identity!r}",
            )
        # A cancelled or timed-out compile's thread keeps NVRTC's one slot until it
        # stops, so the next compile here waits for it (see backends._nvrtc_threads).
        backend = await self._started(prepared.backend)
        if not (keep and backend_class(prepared.backend).keeps_intermediates):
            return await backend.run(prepared)
        folder = await anyio.to_thread.run_sync(make_work_folder, "keep")
        try:
            out = await backend.run(replace(prepared, keep_dir=str(folder)))
            files = await anyio.to_thread.run_sync(_read_files, folder)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(shutil.rmtree, folder, True)
        return replace(out, intermediates=files)


def _read_files(folder: Path) -> tuple[tuple[str, bytes], ...]:
    return tuple((p.name, p.read_bytes()) for p in sorted(folder.iterdir()) if p.is_file())
