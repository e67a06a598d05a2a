"""A blocking engine for code that is not async (scripts, TVM's synchronous callback).

:class:`SyncEngine` is a thin layer over :class:`~asynccomp.Engine`: the engine runs in
an event loop in a background thread (anyio's blocking portal), and each method is one
``portal.call``. Any number of threads may call one ``SyncEngine`` at once; their jobs
share the engine's workers.

Example::

    from asynccomp import CompileJob, SyncEngine

    with SyncEngine(arch="sm_90a") as engine:
        result = engine.compile(CompileJob('extern "C" __global__ void k() {}'))
        print(result.ok, len(result.unwrap()))
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import AbstractContextManager, ExitStack
from types import TracebackType
from typing import Any, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

from .engine import Engine, EngineStatistics
from .errors import EngineClosed
from .job import CompileJob
from .result import CompileResult

__all__ = ("SyncEngine",)

T = TypeVar("T")


class SyncEngine:
    """The blocking twin of :class:`~asynccomp.Engine`; takes the same arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.engine = Engine(*args, **kwargs)
        self._stack: ExitStack | None = None
        self._portal: BlockingPortal | None = None

    def __enter__(self) -> SyncEngine:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def start(self) -> None:
        """Start the background event loop and the engine (``with`` does this)."""
        if self._stack is not None:
            return
        with ExitStack() as stack:
            portal = stack.enter_context(start_blocking_portal())
            manager: AbstractContextManager[Engine] = portal.wrap_async_context_manager(self.engine)
            stack.enter_context(manager)
            self._portal = portal
            self._stack = stack.pop_all()

    def close(self, *, cancel_prefetched: bool = False) -> None:
        """Wait for running jobs, stop the engine and its event loop.

        ``cancel_prefetched=True`` first stops the compiles :meth:`prefetch` started that
        are still queued or running, instead of waiting for them.
        """
        if cancel_prefetched and self._portal is not None:
            self._portal.call(self.engine.cancel_prefetched)
        stack, self._stack, self._portal = self._stack, None, None
        if stack is not None:
            stack.close()

    def _call(self, func: Callable[..., Any], *args: Any) -> Any:
        if self._portal is None:
            raise EngineClosed("the SyncEngine is not running: use it inside `with SyncEngine()`")
        return self._portal.call(func, *args)

    def compile(self, job: CompileJob) -> CompileResult:
        """Compile one job and wait for it."""
        result: CompileResult = self._call(self.engine.compile, job)
        return result

    def compile_many(self, jobs: Iterable[CompileJob]) -> list[CompileResult]:
        """Compile ``jobs`` concurrently; results in the order of ``jobs``."""
        results: list[CompileResult] = self._call(self.engine.compile_many, list(jobs))
        return results

    def prefetch(self, jobs: Iterable[CompileJob]) -> None:
        """Start compiling ``jobs`` in the background and return at once (results go to
        the cache; closing the engine waits for them unless told not to)."""
        self._call(self.engine.prefetch, list(jobs))

    def as_completed(self, jobs: Iterable[CompileJob]) -> Iterator[CompileResult]:
        """Yield results in completion order (stopping early cancels the rest)."""
        iterator = self._call(_start, self.engine.as_completed, list(jobs))
        try:
            while True:
                try:
                    result: CompileResult = self._call(iterator.__anext__)
                except StopAsyncIteration:
                    return
                yield result
        finally:
            if self._portal is not None:
                self._call(iterator.aclose)

    def statistics(self) -> EngineStatistics:
        """An immutable snapshot of the engine's counters."""
        return self.engine.statistics()


async def _start(
    make: Callable[[list[CompileJob]], AsyncIterator[CompileResult]], jobs: list[CompileJob]
) -> AsyncIterator[CompileResult]:
    # The async generator is made inside the portal's loop thread, where it will run.
    return make(jobs)
