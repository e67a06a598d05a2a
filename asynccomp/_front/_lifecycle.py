"""An engine's life: its state, the parts it started, and the calls under way.

:class:`Lifecycle` is what ``async with Engine()`` does. Starting assembles the parts
(:mod:`._assembly`) on an exit stack and a task group of the engine's own; a start
that fails half way takes down what it had started, in reverse order, and raises.
Calls are counted while they run (:meth:`Lifecycle.open_call`, :meth:`Lifecycle.spawn`),
so closing can wait for them, from any task or thread, or cancel them: a call that a
close cancelled raises :class:`~asynccomp.EngineClosed`.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc
import anyio.lowlevel

from ..errors import EngineClosed
from ._assembly import Parts

__all__ = ("EngineState", "Lifecycle")

Assemble = Callable[[anyio.abc.TaskGroup, contextlib.AsyncExitStack], Awaitable[Parts]]


class EngineState(enum.Enum):
    """Where an engine is in its life. Calls are taken only while ``RUNNING``."""

    NEW = "new"  #: made, not started
    RUNNING = "running"  #: inside ``async with``
    CLOSING = "closing"  #: leaving ``async with``: finishing the calls already made
    CLOSED = "closed"  #: done; an engine is not started twice


class Lifecycle:
    """One engine's life (see the module's docstring)."""

    def __init__(self) -> None:
        self.state = EngineState.NEW
        self.parts: Parts | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        # Calls under way (compile, compile_many, as_completed, warm_up), and prefetched
        # batches: what closing waits for, or cancels.
        self._calls: set[anyio.CancelScope] = set()
        self._prefetches: set[anyio.CancelScope] = set()
        #: Closing cancelled the calls instead of waiting for them.
        self.forced = False
        self._changed = anyio.Event()

    async def start(self, assemble: Assemble) -> Parts:
        """Assemble the parts; a failure unwinds what was started and raises."""
        if self.state is not EngineState.NEW:
            raise EngineClosed(f"this Engine is {self.state.value}; an engine starts once")
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        stack = contextlib.AsyncExitStack()
        try:
            async with contextlib.AsyncExitStack() as unwind:
                unwind.push_async_exit(stack)
                parts = await assemble(task_group, stack)
                unwind.pop_all()  # started: the stack is closed with the engine
        except BaseException:
            task_group.cancel_scope.cancel()
            await task_group.__aexit__(None, None, None)
            raise
        self.parts, self._stack, self._task_group = parts, stack, task_group
        self.state = EngineState.RUNNING
        return parts

    async def close(self, *, clean: bool) -> None:
        """Stop taking calls; wait for those under way (``clean``: the block ended
        normally) or cancel them; take the parts down."""
        if self.state is not EngineState.RUNNING:
            return
        self.state = EngineState.CLOSING
        task_group, stack = self._task_group, self._stack
        assert task_group is not None and stack is not None
        try:
            if clean:
                while self._calls or self._prefetches:
                    await self._changed.wait()
        finally:
            with anyio.CancelScope(shield=True):
                # Whatever is left was not waited for (an error, a cancellation): cancel
                # it, and let it finish unwinding before the parts go.
                if self._calls or self._prefetches:
                    self.forced = True
                    for scope in (*self._calls, *self._prefetches):
                        scope.cancel()
                    while self._calls or self._prefetches:
                        await self._changed.wait()
                await stack.aclose()
            # Outside the shield (the task group's scope must be the innermost one when
            # it exits): the background tasks left (threads NVRTC has not stopped yet)
            # are cancelled and waited for. The body's own exception, if any, propagates
            # as it is, not wrapped in a group of this task group's.
            task_group.cancel_scope.cancel()
            await task_group.__aexit__(None, None, None)
            self._task_group = None
            self.state = EngineState.CLOSED

    def require_running(self) -> Parts:
        if self.state is not EngineState.RUNNING:
            if self.state is EngineState.NEW:
                raise EngineClosed("the engine is not running: use it inside `async with Engine()`")
            raise EngineClosed(f"the engine is {self.state.value}: it takes no more calls")
        assert self.parts is not None
        return self.parts

    def open_call(self) -> tuple[anyio.CancelScope, Parts]:
        """A public call starts: its cancel scope, counted (closing waits for it, or
        cancels it when forced) until :meth:`close_call`, and the parts it runs on.
        Raises :class:`~asynccomp.EngineClosed` unless the engine is running."""
        parts = self.require_running()
        scope = anyio.CancelScope()
        self._calls.add(scope)
        return scope, parts

    def close_call(self, scope: anyio.CancelScope) -> None:
        """The call of ``scope`` (from :meth:`open_call`) has ended."""
        self._calls.discard(scope)
        self._notify()

    def spawn(
        self, scope: anyio.CancelScope, run: Callable[[], Awaitable[None]], *, prefetch: bool
    ) -> None:
        """Run ``run`` in ``scope`` as a task of the engine's (a batch that outlives the
        caller's step: ``as_completed``'s, a prefetch), counted for closing."""
        self.require_running()
        group = self._prefetches if prefetch else self._calls
        group.add(scope)

        async def counted() -> None:
            try:
                with scope:
                    await run()
            finally:
                group.discard(scope)
                self._notify()

        assert self._task_group is not None
        self._task_group.start_soon(counted)

    def cancel_prefetched(self) -> None:
        for scope in self._prefetches:
            scope.cancel()

    def _notify(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()
