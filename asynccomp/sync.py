"""A blocking engine for code that is not async (scripts, TVM's synchronous callback).

:class:`SyncEngine` is a thin layer over :class:`~asynccomp.Engine`: the engine runs in
an event loop in a background thread (anyio's blocking portal), and each method is one
``portal.call``. Any number of threads may call one ``SyncEngine`` at once; their jobs
share the engine's workers. Closing it waits for the calls other threads have made.

A ``SyncEngine`` belongs to the process that started it: after ``os.fork()`` its event
loop thread does not exist in the child, so there every method raises
:class:`~asynccomp.EngineClosed` at once (make a new one in the child).

Called from a thread that runs an event loop itself (a Jupyter notebook), a method
blocks that loop until the compile is done; async code should use ``Engine``.

Example::

    from asynccomp import CompileJob, SyncEngine

    with SyncEngine(arch="sm_90a") as engine:
        result = engine.compile(CompileJob('extern "C" __global__ void k() {}'))
        print(result.ok, len(result.unwrap()))
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, overload

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from ._wakers import soon_caller
from ._warn import call_site
from .engine import CompletedResults, Engine, EngineState, EngineStatistics
from .errors import EngineClosed
from .job import CompileJob
from .result import CompileResult
from .toolkit import Toolkit

if TYPE_CHECKING:
    from .cache import TieredCache

__all__ = ("SyncEngine", "SyncResults")

T = TypeVar("T")
P = ParamSpec("P")


def _engine_arguments(
    engine: Callable[P, Engine],
) -> Callable[[Callable[..., None]], Callable[Concatenate[Any, P], None]]:
    """Give ``SyncEngine.__init__`` the signature of ``Engine``'s: for type checkers
    (through ``P``) and for ``help()`` and IDEs (through ``__signature__``)."""

    def typed(init: Callable[..., None]) -> Callable[Concatenate[Any, P], None]:
        init.__signature__ = inspect.signature(engine.__init__)  # type: ignore[attr-defined]
        return init

    return typed


class SyncEngine:
    """The blocking twin of :class:`~asynccomp.Engine`; takes the same arguments."""

    @_engine_arguments(Engine)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.engine = Engine(*args, **kwargs)
        self._stack: ExitStack | None = None
        self._portal: BlockingPortal | None = None
        self._pid: int | None = None

    def __enter__(self) -> SyncEngine:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # The engine sees the block's exception, as an ``async with`` would: it cancels
        # what is left (prefetched compiles too) instead of waiting for it.
        self._check_process()
        stack, self._stack, self._portal = self._stack, None, None
        if stack is not None:
            stack.__exit__(exc_type, exc, tb)

    def _check_process(self) -> None:
        if self._pid is not None and self._pid != os.getpid():
            raise EngineClosed(
                f"this SyncEngine belongs to the parent process (pid {self._pid}), whose "
                "event loop thread a forked child does not have: make a new one here"
            )

    @property
    def state(self) -> EngineState:
        """The engine's state (``NEW`` before :meth:`start`)."""
        return self.engine.state

    def start(self) -> None:
        """Start the background event loop and the engine (``with`` does this)."""
        self._check_process()
        if self._stack is not None:
            return
        # The engine starts on the portal's thread: its warnings name this call.
        self.engine._started_from = call_site(2)
        with ExitStack() as stack:
            portal = stack.enter_context(start_blocking_portal())
            manager: AbstractContextManager[Engine] = portal.wrap_async_context_manager(self.engine)
            stack.enter_context(manager)
            self._portal = portal
            self._pid = os.getpid()
            self._stack = stack.pop_all()

    def close(self, *, cancel_prefetched: bool = False) -> None:
        """Stop taking calls, wait for the calls other threads have made, stop the engine
        and its event loop.

        ``cancel_prefetched=True`` first stops the compiles :meth:`prefetch` started that
        are still queued or running, instead of waiting for them.
        """
        self._check_process()
        if cancel_prefetched and self._portal is not None:
            self._portal.call(self.engine.cancel_prefetched)
        stack, self._stack, self._portal = self._stack, None, None
        if stack is not None:
            stack.close()

    def _running_portal(self) -> BlockingPortal:
        self._check_process()
        portal = self._portal
        if portal is None:
            raise EngineClosed("the SyncEngine is not running: use it inside `with SyncEngine()`")
        return portal

    @overload
    def _call(self, func: Callable[..., Awaitable[T]], *args: Any) -> T: ...
    @overload
    def _call(self, func: Callable[..., T], *args: Any) -> T: ...
    def _call(self, func: Callable[..., Any], *args: Any) -> Any:
        return self._call_on(self._running_portal(), func, *args)

    def _call_on(self, portal: BlockingPortal, func: Callable[..., Any], *args: Any) -> Any:
        """One call in ``portal``'s event loop, waited for. A close in another thread
        that stopped the portal first is ``EngineClosed``; an exception that interrupts
        the caller (Ctrl-C: ``KeyboardInterrupt``) cancels the call in the event loop, as
        cancelling an ``await`` would, instead of leaving it to run on unseen: wherever
        it lands, even inside ``start_task_soon`` (the call may be scheduled by then,
        with no future yet to cancel it by)."""
        call = _Cancellable(func, args)
        try:
            try:
                future = portal.start_task_soon(call.run)
            except RuntimeError as exc:
                if self._portal is portal:
                    raise
                # The portal stopped between the caller's check and this call (a close
                # in another thread).
                raise EngineClosed("the SyncEngine was closed") from exc
            return future.result()
        except BaseException:
            call.cancel()  # a no-op once it has finished
            raise

    def compile(self, job: CompileJob) -> CompileResult:
        """Compile one job and wait for it."""
        return self._call(self.engine.compile, job)

    def compile_many(self, jobs: Iterable[CompileJob]) -> list[CompileResult]:
        """Compile ``jobs`` concurrently; results in the order of ``jobs``."""
        return self._call(self.engine.compile_many, list(jobs))

    def as_completed(self, jobs: Iterable[CompileJob]) -> SyncResults:
        """Compile ``jobs`` concurrently; iterate over results as they finish::

            with engine.as_completed(jobs) as results:
                for result in results:
                    ...

        Leaving the block cancels the jobs still queued or running.
        """
        portal = self._running_portal()
        completed = self._call_on(portal, self.engine.as_completed, list(jobs))
        if self._portal is not portal:  # closed by another thread meanwhile
            raise EngineClosed("the SyncEngine was closed")
        return SyncResults(self, portal, completed)

    def prefetch(self, jobs: Iterable[CompileJob]) -> None:
        """Start compiling ``jobs`` in the background and return at once (results go to
        the cache; closing the engine waits for them unless told not to)."""
        self._call(self.engine.prefetch, list(jobs))

    def cancel_prefetched(self) -> None:
        """Stop the prefetched compiles still queued or running."""
        self._call(self.engine.cancel_prefetched)

    def warm_up(self) -> None:
        """Start every NVRTC worker and compile a small program in each, now."""
        self._call(self.engine.warm_up)

    def make_pch(self, job: CompileJob) -> bool:
        """Make the precompiled header ``job`` would use, now (:meth:`Engine.make_pch
        <asynccomp.Engine.make_pch>`); whether the workers share it."""
        return self._call(self.engine.make_pch, job)

    def statistics(self) -> EngineStatistics:
        """An immutable snapshot of the engine's counters."""
        return self._call(self.engine.statistics)

    def running(self) -> list[tuple[CompileJob, float]]:
        """The jobs compiling now, with how long each has run (seconds), longest first."""
        return self._call(self.engine.running)

    def estimate(self, job: CompileJob) -> float:
        """The cost model's estimate of ``job``'s compile, in seconds."""
        return self._call(self.engine.estimate, job)

    @property
    def toolkit(self) -> Toolkit:
        """The toolkit the engine compiles with (known once started)."""
        return self.engine.toolkit

    @property
    def cache(self) -> TieredCache | None:
        """The engine's result cache (``None`` when off, or on a compile server)."""
        return self.engine.cache

    @property
    def compiler_versions(self) -> dict[str, str | None]:
        """The versions of the compilers the engine uses."""
        return self.engine.compiler_versions

    @property
    def where(self) -> str:
        """Where the compiles run (``"in process"``, ``"on the compile server (pid
        N)"``, ``"on Ray at ADDRESS"``)."""
        return self.engine.where

    @property
    def slots(self) -> Mapping[str, int]:
        """How many compiles of each backend run at once (a compile server's own)."""
        return self.engine.slots


class SyncResults:
    """What :meth:`SyncEngine.as_completed` returns: a context manager whose value is an
    iterator over the results in completion order.

    Entering and leaving are each one portal call (the batch runs in the engine's task
    group, not in the calling thread's task), so nothing of the block waits in the
    event loop for this thread: a ``close()`` from another thread finishes the batch
    and stops the loop, and this thread's next step raises ``EngineClosed``.
    """

    def __init__(self, owner: SyncEngine, portal: BlockingPortal, completed: CompletedResults):
        self._owner = owner
        self._completed = completed
        self._portal = portal

    def __enter__(self) -> Iterator[CompileResult]:
        results = self._owner._call(self._completed.__aenter__)
        return self._iterate(results)

    def _iterate(self, results: Any) -> Iterator[CompileResult]:
        while True:
            try:
                result: CompileResult = self._owner._call(results.__anext__)
            except StopAsyncIteration:
                return
            yield result

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._owner._portal is self._portal:
            try:
                self._portal.call(self._completed.__aexit__, exc_type, exc, tb)
                return
            except RuntimeError as error:
                if isinstance(error, EngineClosed) or self._owner._portal is self._portal:
                    raise
        # The engine was closed (by another thread): it finished or cancelled the batch,
        # and its event loop is gone; what is left to do is plain code.
        self._completed.discard()


class _Cancellable:
    """A call for the event loop that the calling thread can cancel whenever it is
    interrupted: before the call starts (it then does not run) or while it runs (its
    scope is cancelled in the loop)."""

    def __init__(self, func: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.func, self.args = func, args
        self.cancelled = False
        self._scope: anyio.CancelScope | None = None
        self._call_soon: Callable[[Callable[[], None]], None] | None = None

    async def run(self) -> Any:
        # Set in this order, with no checkpoint between, against cancel()'s order
        # (flag, then the caller): one of the two sees the other.
        self._call_soon = soon_caller()
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self.cancelled:
                scope.cancel()
            result = self.func(*self.args)
            if inspect.isawaitable(result):
                result = await result
            return result
        return None  # cancelled by its caller, who has raised and reads nothing

    def cancel(self) -> None:
        """From the calling thread."""
        self.cancelled = True
        call_soon = self._call_soon
        if call_soon is not None:
            call_soon(self._cancel_scope)

    def _cancel_scope(self) -> None:
        if self._scope is not None:
            self._scope.cancel()
