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

from ..backends import BackendOutput, NvccBackend, NvrtcBackend, PreparedCompile
from ..backends._workdirs import make_work_folder, sweep_work_folders
from ..cache._compile_key import key_identity
from ..toolkit import Toolkit, find_toolkit

__all__ = ("CompileActor", "toolkit_identity")


def toolkit_identity(toolkit: Toolkit) -> dict[str, str]:
    """What a cache key says about each compiler (its version, its library or program,
    the fingerprint of the headers it reads): equal on both sides or no compile."""
    identity = {}
    for backend in ("nvrtc", "nvcc"):
        compiler, headers = key_identity(backend, toolkit)
        identity[backend] = f"{compiler} | headers {headers}"
    return identity


class CompileActor:
    """Compiles :class:`~asynccomp.backends.PreparedCompile` s sent by an engine.

    Every call is a coroutine (an asyncio actor), so ``ray.cancel`` reaches a running
    compile as a cancellation: NVRTC stops at its next flow callback, nvcc is killed.
    """

    def __init__(self) -> None:
        self.toolkit = find_toolkit()
        self.identity = toolkit_identity(self.toolkit)
        # Threads mode: the actor is the worker process; one compile at a time. Made
        # and started once (at the first call), and kept warm across calls.
        self.nvrtc = NvrtcBackend(self.toolkit, "threads", 1)
        self._nvrtc_starts = 0
        self.nvcc = NvccBackend(self.toolkit)
        # What actors killed on this node before left (an engine's start does the same
        # for local nvcc; an actor never runs NvccBackend.start).
        sweep_work_folders()

    async def describe(self) -> dict[str, object]:
        """Who this actor is: its toolkit's identity, process and host."""
        return {
            "identity": self.identity,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "nvrtc_starts": self._nvrtc_starts,
        }

    async def _started_nvrtc(self) -> NvrtcBackend:
        """The actor's NVRTC backend, started at the first call that needs it."""
        if self._nvrtc_starts == 0:
            self._nvrtc_starts += 1  # before the await: a concurrent call starts none
            # NvrtcBackend runs nothing in the group (its threads need no task): a group
            # of this call's is enough.
            async with anyio.create_task_group() as task_group:
                await self.nvrtc.start(task_group)
        return self.nvrtc

    async def warm_up(self) -> None:
        """Load NVRTC and read the common headers once (the first compile's cost)."""
        await (await self._started_nvrtc()).warm_up()

    async def compile(
        self, prepared: PreparedCompile, identity: str, keep: bool = False
    ) -> BackendOutput:
        """Compile ``prepared`` if this actor's compiler is the one its cache key was
        made with (``identity``); refuse otherwise. ``keep``: send nvcc's intermediate
        files back in ``intermediates`` (the job's dump folder is on the client)."""
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
        if prepared.backend == "nvcc" and keep:
            folder = await anyio.to_thread.run_sync(make_work_folder, "keep")
            try:
                out = await self.nvcc.run(replace(prepared, keep_dir=str(folder)))
                files = await anyio.to_thread.run_sync(_read_files, folder)
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(shutil.rmtree, folder, True)
            return replace(out, intermediates=files)
        if prepared.backend == "nvcc":
            return await self.nvcc.run(prepared)
        # A cancelled or timed-out compile's thread keeps the backend's one slot until it
        # stops, so the next compile here waits for it (see backends._nvrtc_threads).
        return await (await self._started_nvrtc()).run(prepared)


def _read_files(folder: Path) -> tuple[tuple[str, bytes], ...]:
    return tuple((p.name, p.read_bytes()) for p in sorted(folder.iterdir()) if p.is_file())
