"""Where a chunk's blocking cache lookups run: threads of the cache's own, each batch
under a deadline and its caller's cancellation, stopped rather than abandoned.

Two pools of :data:`LOOKUP_THREADS` threads each, apart from anyio's shared ones (which
nvcc's work folders, dependency snapshots and cache writes use), so that no number of
slow lookups takes a thread a compile needs:

- ``reads``: the disk tier's entries. Bounded: an entry is a regular file of bounded
  size, opened without blocking. A miss is known after a read, so a job that is not
  cached never waits behind another entry's checks.
- ``checks``: dependency checks (a header whose mtime changed is read and hashed, up to
  64 MiB) and the remote tier's verification (HMAC, decoding, dependencies, the copy to
  disk). These can take a while.

A batch (:meth:`Lookups.each`) works on its items one at a time and keeps each item's
answer as soon as it has it. When the batch's deadline passes, or its caller is
cancelled, it is told to stop: the items answered so far keep their answers, the others
are ``None`` (misses: compiled instead), and the thread stops at its next item or its
next MiB read (``stopped``, passed to the work), instead of reading on in the background
for nobody.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Generic, Literal, TypeVar

import anyio
import anyio.to_thread

from ._files import Stopped

__all__ = ("LOOKUP_LIMIT", "LOOKUP_THREADS", "Lookups")

logger = logging.getLogger("asynccomp")

#: Threads of each lookup pool: a few, apart from anyio's shared ones.
LOOKUP_THREADS = 4
#: The longest a chunk's cache lookups may take before its jobs are compiled instead.
LOOKUP_LIMIT = 30.0

T = TypeVar("T")
R = TypeVar("R")
Pool = Literal["reads", "checks"]


class _Batch(Generic[T, R]):
    """``work`` over ``items`` in a thread, one item at a time, until :meth:`stop`."""

    def __init__(self, work: Callable[[T, Callable[[], bool]], R], items: Sequence[T]) -> None:
        self.work = work
        self.items = items
        self.answers: list[R | None] = [None] * len(items)
        self._stop = threading.Event()
        # Taken to keep an answer and to stop: once stop() has copied the answers, the
        # thread keeps no more (the caller has moved on).
        self._lock = threading.Lock()

    def run(self) -> None:
        stopped = self._stop.is_set
        for index, item in enumerate(self.items):
            if stopped():
                return
            try:
                answer = self.work(item, stopped)
            except Stopped:
                return
            except Exception:  # a bug: this item is a miss, the others still count
                logger.exception("asynccomp: a cache lookup failed; compiling instead")
                continue
            with self._lock:
                if stopped():
                    return
                self.answers[index] = answer

    def stop(self) -> list[R | None]:
        """Stop the work; the answers kept until now."""
        with self._lock:
            self._stop.set()
            return list(self.answers)


class Lookups:
    """The lookup pools of one scheduler."""

    def __init__(self, threads: int = LOOKUP_THREADS) -> None:
        self._pools: dict[Pool, anyio.CapacityLimiter] = {
            "reads": anyio.CapacityLimiter(threads),
            "checks": anyio.CapacityLimiter(threads),
        }

    def borrowed(self, pool: Pool) -> int:
        """Threads of ``pool`` in use now (for the tests)."""
        return int(self._pools[pool].borrowed_tokens)

    async def each(
        self,
        pool: Pool,
        work: Callable[[T, Callable[[], bool]], R],
        items: Sequence[T],
        *,
        deadline: float,
    ) -> list[R | None]:
        """``work(item, stopped)`` for each of ``items``, in a thread of ``pool``, until
        ``deadline`` (anyio's clock): the answers, ``None`` for the items not answered
        by then. The caller's cancellation stops the work too (and propagates)."""
        if not items:
            return []
        batch = _Batch(work, items)
        answers: list[R | None] = [None] * len(items)
        with anyio.CancelScope(deadline=deadline) as scope:
            try:
                # Abandoned on cancel: a thread stuck in a system call (a hung network
                # file system) must not hold its caller; it stops at its next item.
                await anyio.to_thread.run_sync(
                    batch.run, abandon_on_cancel=True, limiter=self._pools[pool]
                )
            finally:
                answers = batch.stop()
        if scope.cancelled_caught:
            logger.warning(
                "asynccomp: cache lookups (%s, %d items) ran past their deadline; what was "
                "not answered by then is compiled",
                pool,
                len(items),
            )
        return answers
