"""NVRTC compiles in threads of this process (``nvrtc_mode="threads"``), at most
``workers`` at once, and what becomes of a thread that does not stop.

A thread cannot be killed, and NVRTC may call the flow callback that stops it only
seconds after being told to. So a job whose deadline passed (or that was cancelled)
returns at once and its thread runs on, keeping its slot, so that no more than
``workers`` threads compile at once. A thread blocked where NVRTC never calls back (it
opened a FIFO, or a file on a hung network mount) would keep its slot forever, and
every later job would wait behind it: so a thread that has not stopped
:data:`ABANDON_GRACE` seconds after it was told to is **abandoned**: its slot comes
back, the thread is left to finish on its own, and the runner is :attr:`stuck`: it
starts no thread again, and :class:`~.nvrtc.NvrtcBackend` compiles in worker processes
from then on (those can be killed). Abandoned threads are so bounded by ``workers``
(only the threads running when the first was abandoned can follow it).

The threads are daemon threads of their own, not anyio's workers: the interpreter
waits for anyio's threads as it exits, and an abandoned thread may never end. Closing
waits for running threads to stop, at most :data:`ABANDON_GRACE` seconds.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable

import anyio

from .._wakers import soon_caller
from ._base import BackendOutput, PreparedCompile
from ._nvrtc_api import compile_prepared
from ._nvrtc_workers import KILL_GRACE

__all__ = ("ABANDON_GRACE", "THREAD_NAME", "NvrtcThreads")

logger = logging.getLogger("asynccomp")

#: How long a thread told to stop (its job timed out or was cancelled) keeps its slot
#: before it is abandoned. NVRTC's flow callbacks can be seconds apart in a long front
#: end; a thread that is past this is blocked somewhere NVRTC never calls back.
ABANDON_GRACE = 5.0

#: The name of every compile thread (``threading.enumerate()`` finds them).
THREAD_NAME = "asynccomp-nvrtc"


class _Compile:
    """One compile in a daemon thread of its own."""

    def __init__(self, prepared: PreparedCompile) -> None:
        self.prepared = prepared
        self.cancel = threading.Event()  # NVRTC stops at its next flow callback
        self.done = anyio.Event()  # set on the event loop once the thread has ended
        self.output: BackendOutput | None = None
        self.error: BaseException | None = None
        self.abandon_at = math.inf  # set when it is told to stop

    def start(self, ended: Callable[[], None]) -> None:
        """Start the thread; ``ended`` is called on the event loop when it ends."""
        call_soon = soon_caller()

        def main() -> None:
            try:
                self.output = compile_prepared(self.prepared, self.cancel)
            except BaseException as exc:  # a bug in compile_prepared: raised in run()
                self.error = exc
            finally:
                call_soon(ended)

        threading.Thread(target=main, name=THREAD_NAME, daemon=True).start()


class NvrtcThreads:
    """At most ``workers`` NVRTC compiles at once in threads of this process."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._holding: set[_Compile] = set()  # threads holding a slot
        self._abandoned: set[_Compile] = set()  # abandoned threads not ended yet
        self._stuck = False
        self._changed: anyio.Event | None = None

    @property
    def stuck(self) -> bool:
        """Whether a thread was abandoned: no thread is started again."""
        return self._stuck

    def abandoned(self) -> int:
        """Abandoned threads still running (never more than ``workers``)."""
        return len(self._abandoned)

    async def run(self, prepared: PreparedCompile) -> BackendOutput | None:
        """Compile in a thread; ``None`` when the runner is :attr:`stuck` (the caller
        compiles the job elsewhere)."""
        compile_ = _Compile(prepared)
        if not await self._take_slot(compile_):
            return None
        try:
            compile_.start(lambda: self._ended(compile_))
        except RuntimeError as exc:  # no thread could be started (a limit on threads)
            self._holding.discard(compile_)
            self._notify()
            return BackendOutput("internal", None, "", f"no thread for NVRTC: {exc}", cause=exc)
        limit = None if prepared.timeout is None else prepared.timeout + KILL_GRACE
        try:
            with anyio.move_on_after(limit):
                await compile_.done.wait()
        finally:
            if not compile_.done.is_set():
                self._stop(compile_)
        if compile_.error is not None:
            raise compile_.error
        if compile_.done.is_set() and compile_.output is not None:
            return compile_.output
        return BackendOutput(
            "timeout", None, "", "NVRTC did not stop at the timeout; its thread was left to stop"
        )

    async def aclose(self) -> None:
        """Tell every thread to stop; wait for them, at most :data:`ABANDON_GRACE`."""
        for compile_ in list(self._holding):
            self._stop(compile_)
        while self._holding:
            await self._wait_for_change()

    async def _take_slot(self, compile_: _Compile) -> bool:
        while not self._stuck:
            if len(self._holding) < self.workers:
                self._holding.add(compile_)
                return True
            await self._wait_for_change()
        return False

    async def _wait_for_change(self) -> None:
        """Until a thread ends, is told to stop or is abandoned (which this does, once
        the first one told to stop is overdue)."""
        self._changed = changed = self._changed or anyio.Event()
        overdue = min((c.abandon_at for c in self._holding), default=math.inf)
        with anyio.move_on_after(overdue - anyio.current_time()):
            await changed.wait()
        self._abandon_overdue()

    def _abandon_overdue(self) -> None:
        now = anyio.current_time()
        overdue = [c for c in self._holding if c.abandon_at <= now]
        for compile_ in overdue:
            self._holding.discard(compile_)
            self._abandoned.add(compile_)
            self._stuck = True
            logger.warning(
                "asynccomp: an NVRTC compile thread (%s) did not stop %g s after it was "
                "told to (blocked reading a file?); it is left to finish on its own, and "
                "NVRTC compiles in worker processes from now on",
                compile_.prepared.filename,
                ABANDON_GRACE,
            )
        if overdue:
            self._notify()  # a slot came back

    def _stop(self, compile_: _Compile) -> None:
        compile_.cancel.set()
        compile_.abandon_at = min(compile_.abandon_at, anyio.current_time() + ABANDON_GRACE)
        self._notify()  # waiters look at the new deadline

    def _ended(self, compile_: _Compile) -> None:
        """On the event loop: ``compile_``'s thread has ended."""
        compile_.done.set()
        self._holding.discard(compile_)
        self._abandoned.discard(compile_)
        self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()
