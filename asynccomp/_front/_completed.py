"""``Engine.as_completed``: a block whose value iterates over results as they finish."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream

from ..errors import EngineClosed
from ..job import CompileJob
from ..result import CompileResult
from ._batch import Batch

if TYPE_CHECKING:
    from ._engine import Engine

__all__ = ("CompletedResults",)


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
        life = self._engine._life
        life.require_running()
        if self._batch is not None:
            raise RuntimeError("as_completed() results can be entered once")
        await anyio.lowlevel.checkpoint()
        front = life.require_running().front
        send, receive = anyio.create_memory_object_stream[CompileResult](len(self._jobs) or 1)
        batch = self._batch = Batch(len(self._jobs), send)
        self._receive = receive

        async def run() -> None:
            try:
                async with send:
                    await front.run(batch, self._jobs)
            finally:
                self._done.set()

        # The batch runs in the engine's task group, not around the caller's block: an
        # exception of the block propagates as it is, and the block can be left any time.
        life.spawn(self._scope, run, prefetch=False)
        return receive

    def discard(self) -> None:
        """Close the results stream without the event loop (it is gone: the engine
        closed while a blocking caller still held the block)."""
        if self._receive is not None:
            self._receive.close()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._scope.cancel()
        with anyio.CancelScope(shield=True):
            await self._done.wait()
        if self._receive is not None:
            self._receive.close()
        if (
            exc_type is None
            and self._batch is not None
            and self._batch.pending
            and self._engine._life.forced
        ):
            raise EngineClosed("the engine was closed before these jobs finished")
