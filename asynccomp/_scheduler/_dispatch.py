"""Dispatch order: which queued compile gets the next free slot of its backend.

A sweep's wall time is at least its longest compile, so the longest jobs of a batch must
start first: started last, one long kernel keeps the sweep running while every other
worker sits idle. :class:`SlotQueue` holds at most ``total`` compiles running and starts
queued ones lowest key first. The scheduler's key is ``(batch, -estimated seconds,
sequence)``: batches in the order they were submitted, longest first within a batch
(estimates from :class:`~asynccomp.cost.CostModel`), submission order among equals.

A queued compile is a small entry in a heap, not a waiting task: 10,000 queued jobs cost
a few MB. When a slot frees, the queue calls ``start(item)`` at once (from plain code on
the event loop), which starts the compile's task.

>>> started = []
>>> queue = SlotQueue(1, started.append)
>>> first = queue.submit((0,), "first")  # a free slot: started at once
>>> short = queue.submit((1, -0.2), "short")
>>> long = queue.submit((1, -5.0), "long")
>>> queue.withdraw(short)  # e.g. its caller was cancelled
True
>>> queue.release()  # "first" finished
>>> started
['first', 'long']
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ("Entry", "SlotQueue")

T = TypeVar("T")


class Entry(Generic[T]):
    """One item's place in a :class:`SlotQueue`."""

    __slots__ = ("item", "key", "live", "sequence")

    def __init__(self, key: tuple[float, ...], sequence: int, item: T) -> None:
        self.key = key
        self.sequence = sequence
        self.item = item
        self.live = True  # False once started or withdrawn

    def __lt__(self, other: Entry[T]) -> bool:
        return (self.key, self.sequence) < (other.key, other.sequence)


class SlotQueue(Generic[T]):
    """At most ``total`` items running at once; queued items start lowest key first.

    Use only from the event loop that owns it. Every started item must be followed by
    exactly one :meth:`release`.
    """

    def __init__(self, total: int, start: Callable[[T], None]) -> None:
        if total < 1:
            raise ValueError(f"total must be >= 1, not {total}")
        self.total = total
        self._start = start
        self._running = 0
        self._waiting = 0
        self._heap: list[Entry[T]] = []
        self._sequence = itertools.count()

    @property
    def running(self) -> int:
        """Items started and not yet released."""
        return self._running

    @property
    def waiting(self) -> int:
        """Items queued now."""
        return self._waiting

    def submit(self, key: tuple[float, ...], item: T) -> Entry[T]:
        """Queue ``item``; it starts at once if a slot is free (and nothing better waits)."""
        entry = Entry(key, next(self._sequence), item)
        heapq.heappush(self._heap, entry)
        self._waiting += 1
        self._dispatch()
        return entry

    def withdraw(self, entry: Entry[T]) -> bool:
        """Take a queued item out; ``False`` if it already started (or was withdrawn)."""
        if not entry.live:
            return False
        entry.live = False  # stays in the heap; _dispatch() skips it
        self._waiting -= 1
        if len(self._heap) > 2 * self._waiting + 64:
            # Mostly withdrawn entries (a cancelled batch): drop them.
            self._heap = [e for e in self._heap if e.live]
            heapq.heapify(self._heap)
        return True

    def resize(self, total: int) -> None:
        """Run at most ``total`` at once from now on (at least one: a queue that could
        start nothing would hold its items forever). Items already running finish."""
        self.total = max(1, total)
        self._dispatch()

    def release(self) -> None:
        """A started item finished: its slot goes to the best queued item."""
        if self._running <= 0:
            raise RuntimeError("a slot was released that was never taken")
        self._running -= 1
        self._dispatch()

    def _dispatch(self) -> None:
        while self._running < self.total and self._waiting:
            entry = heapq.heappop(self._heap)
            if not entry.live:
                continue
            entry.live = False
            self._waiting -= 1
            self._running += 1
            self._start(entry.item)
        if not self._waiting and self._heap:
            self._heap.clear()  # only withdrawn entries are left
