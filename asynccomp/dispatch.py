"""Dispatch order: who gets the next free compiler slot.

A sweep's wall time is at least its longest compile, so the longest jobs of a batch must
start first: started last, one long kernel keeps the sweep running while every other
worker sits idle. :class:`PrioritySlots` is a capacity limiter (like
:class:`anyio.CapacityLimiter`) whose waiters are served in the order of a sort key
instead of first come, first served. The engine's key is ``(batch, -estimated seconds,
sequence)``: batches in the order they were submitted, longest-first within a batch
(estimates from :class:`~asynccomp.cost.CostModel`), and submission order among equals.

>>> import anyio
>>> async def demo() -> list[str]:
...     slots, order = PrioritySlots(1), []
...     async def job(name: str, key: tuple[float, ...]) -> None:
...         async with slots.slot(key):
...             order.append(name)
...             await anyio.sleep(0.01)
...     async with anyio.create_task_group() as tg:
...         tg.start_soon(job, "first", (0,))  # takes the free slot at once
...         await anyio.sleep(0.001)
...         tg.start_soon(job, "short", (1, -0.2))
...         tg.start_soon(job, "long", (1, -5.0))
...     return order
>>> anyio.run(demo)
['first', 'long', 'short']
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel

__all__ = ("PrioritySlots",)


@dataclass(order=True)
class Ticket:
    """A place in the queue for one slot (see :meth:`PrioritySlots.reserve`)."""

    key: tuple[float, ...]
    sequence: int
    event: anyio.Event = field(compare=False, default_factory=anyio.Event)
    # waiting -> granted -> used -> done, or waiting/granted -> done through withdraw().
    state: str = field(compare=False, default="waiting")


class PrioritySlots:
    """At most ``total`` holders at once; waiters are served lowest ``key`` first.

    Use only from the event loop that created it (the engine's). A slot is handed from
    the releasing holder straight to the best waiter, so a late arrival with a better key
    never overtakes a waiter that was already granted one.

    A batch that should be served in key order takes its tickets with one
    :meth:`reserve_batch` call before any of its jobs runs: the whole batch is queued
    before the first slot is handed out, whatever order the jobs' tasks start in.
    """

    def __init__(self, total: int) -> None:
        if total < 1:
            raise ValueError(f"total must be >= 1, not {total}")
        self.total = total
        self._borrowed = 0
        self._waiting = 0
        self._heap: list[Ticket] = []
        self._sequence = itertools.count()

    @property
    def borrowed(self) -> int:
        """Slots held now (granted, whether or not their holder has started using them)."""
        return self._borrowed

    @property
    def waiting(self) -> int:
        """Tickets waiting for a slot now."""
        return self._waiting

    def reserve(self, key: tuple[float, ...]) -> Ticket:
        """Take a place in the queue now (no waiting); granted at once if a slot is free.

        Every ticket must end in :meth:`use` (then released on leaving it) or
        :meth:`withdraw`.
        """
        return self.reserve_batch([key])[0]

    def reserve_batch(self, keys: Iterable[tuple[float, ...]]) -> list[Ticket]:
        """:meth:`reserve` for many keys at once: free slots go to the best of them."""
        tickets = [Ticket(key, next(self._sequence)) for key in keys]
        for ticket in tickets:
            heapq.heappush(self._heap, ticket)
        self._waiting += len(tickets)
        self._dispatch()
        return tickets

    def withdraw(self, ticket: Ticket) -> None:
        """Give up a ticket that will not be used (a cache hit, a failure, a cancel).
        A granted slot goes to the next waiter. Idempotent; a used ticket is left alone."""
        if ticket.state == "waiting":
            ticket.state = "done"  # stays in the heap; _dispatch() skips it
            self._waiting -= 1
        elif ticket.state == "granted":
            ticket.state = "done"
            self._release()

    @asynccontextmanager
    async def use(self, ticket: Ticket) -> AsyncIterator[None]:
        """Wait until ``ticket`` is granted, then hold its slot for the ``async with``."""
        if ticket.state == "done":
            raise RuntimeError("this ticket was withdrawn")
        try:
            await ticket.event.wait()
        except BaseException:
            self.withdraw(ticket)
            raise
        ticket.state = "used"
        try:
            yield
        finally:
            ticket.state = "done"
            self._release()

    @asynccontextmanager
    async def slot(self, key: tuple[float, ...]) -> AsyncIterator[None]:
        """Reserve and hold one slot for the body of the ``async with``."""
        await anyio.lowlevel.checkpoint_if_cancelled()
        async with self.use(self.reserve(key)):
            yield

    def _dispatch(self) -> None:
        while self._borrowed < self.total and self._heap:
            ticket = heapq.heappop(self._heap)
            if ticket.state != "waiting":
                continue
            ticket.state = "granted"
            self._waiting -= 1
            self._borrowed += 1
            ticket.event.set()

    def _release(self) -> None:
        if self._borrowed <= 0:
            raise RuntimeError("a slot was released that was never granted")
        self._borrowed -= 1
        self._dispatch()
