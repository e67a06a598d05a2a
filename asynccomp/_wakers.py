"""Calling into the event loop from another thread, at once and without blocking.

anyio's ``from_thread.run_sync`` blocks the calling thread until the loop has run the
call, and needs a token only anyio 4.11 has. Threads that asynccomp leaves running on
their own (a Ray connect, an NVRTC compile that did not stop) must never block on a
loop that may be gone: these functions schedule the call and return, and do nothing
once the loop has closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import Callable

import anyio

__all__ = ("soon_caller", "waker")


def soon_caller() -> Callable[[Callable[[], None]], None]:
    """A function any thread may call with ``fn`` to have ``fn()`` run on this event
    loop (the one running now) soon; a no-op once the loop has closed."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio: anyio's other backend, trio
        loop = None
    if loop is not None:

        def call_soon(fn: Callable[[], None]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(fn)

        return call_soon
    trio = importlib.import_module("trio")
    token = trio.lowlevel.current_trio_token()

    def call_soon_trio(fn: Callable[[], None]) -> None:
        with contextlib.suppress(RuntimeError):  # trio.RunFinishedError
            token.run_sync_soon(fn)

    return call_soon_trio


def waker(event: anyio.Event) -> Callable[[], None]:
    """A function any thread may call to set ``event`` on this event loop."""
    call_soon = soon_caller()
    return lambda: call_soon(event.set)
