"""The doors a call can come in by, behind one async interface, for tests that check
that every door answers the same: an ``Engine`` in process, an ``Engine`` on a real
compile server, a ``SyncEngine`` in process and on the server (its calls made from
worker threads), and an ``Engine`` on a real Ray cluster."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from asynccomp import CompileJob, CompileResult, Engine, EngineStatistics, SyncEngine
from asynccomp.ray import RayExecutor

__all__ = ("Door", "DoorEngine", "open_door")

T = TypeVar("T")


@dataclass(frozen=True)
class Door:
    """A way in: ``kind`` is ``engine``, ``sync`` or ``ray``; ``server`` a socket."""

    name: str
    kind: str
    server: Path | None = None
    ray_address: str | None = None

    def settings(self, given: dict[str, Any]) -> dict[str, Any]:
        settings = dict(given)
        if self.server is not None:
            settings["server"] = str(self.server)
        if self.ray_address is not None:
            settings["executor"] = RayExecutor(address=self.ray_address)
        return settings


class DoorEngine:
    """An engine seen through a door: every call is async here; for a ``SyncEngine``
    it runs in a worker thread, as a program's threads would call it."""

    def __init__(self, engine: Engine | SyncEngine) -> None:
        self.engine = engine

    @property
    def sync(self) -> bool:
        return isinstance(self.engine, SyncEngine)

    async def _call(self, name: str, *args: Any) -> Any:
        method = getattr(self.engine, name)
        if isinstance(self.engine, SyncEngine):
            return await anyio.to_thread.run_sync(functools.partial(method, *args))
        result = method(*args)
        return await result if hasattr(result, "__await__") else result

    async def compile(self, job: CompileJob) -> CompileResult:
        result: CompileResult = await self._call("compile", job)
        return result

    async def compile_many(self, jobs: Sequence[CompileJob]) -> list[CompileResult]:
        results: list[CompileResult] = await self._call("compile_many", list(jobs))
        return results

    async def first_of(self, jobs: Sequence[CompileJob]) -> CompileResult:
        """The first result of ``as_completed(jobs)``; leaving the block cancels the
        rest."""
        engine = self.engine
        if isinstance(engine, SyncEngine):

            def first() -> CompileResult:
                with engine.as_completed(list(jobs)) as results:
                    return next(iter(results))

            return await anyio.to_thread.run_sync(first)
        async with engine.as_completed(list(jobs)) as results:
            async for result in results:
                return result
        raise AssertionError("no result")

    async def prefetch(self, jobs: Sequence[CompileJob]) -> None:
        await self._call("prefetch", list(jobs))

    async def warm_up_twice(self) -> None:
        """Two warm-ups at once: from two tasks (two threads for a SyncEngine)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._call, "warm_up")
            tg.start_soon(self._call, "warm_up")

    def slots(self) -> int:
        """How many NVRTC compiles run at once where the jobs go (local workers, a
        server's, a cluster's actors)."""
        engine = self.engine.engine if isinstance(self.engine, SyncEngine) else self.engine
        return engine.nvrtc_workers

    async def statistics(self) -> EngineStatistics:
        stats: EngineStatistics = await self._call("statistics")
        return stats

    async def wait_for(
        self, check: Callable[[EngineStatistics], bool], within: float = 120
    ) -> None:
        with anyio.fail_after(within):
            while not check(await self.statistics()):  # noqa: ASYNC110 - no event to wait on
                await anyio.sleep(0.02)


@contextlib.asynccontextmanager
async def open_door(door: Door, **given: Any) -> AsyncIterator[DoorEngine]:
    """An engine with ``given`` settings, through ``door``, started and closed."""
    settings = door.settings(given)
    if door.kind == "sync":
        engine = SyncEngine(**settings)
        await anyio.to_thread.run_sync(engine.start)
        try:
            yield DoorEngine(engine)
        finally:
            await anyio.to_thread.run_sync(engine.close)
        return
    async with Engine(**settings) as started:
        yield DoorEngine(started)
