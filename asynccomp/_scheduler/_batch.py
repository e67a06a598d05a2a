"""A batch: the jobs of one call (``compile``, ``compile_many``, ``as_completed``,
``prefetch``), the task group their compiles run in, and where their results go.

The task group belongs to the caller's task (the engine's own for ``prefetch``), so a
compile never outlives the call that asked for it, and cancelling the call cancels its
compiles. Results are delivered from plain code (no waiting): into a list in job order
(``compile_many``), into a stream in completion order (``as_completed``), or nowhere
but the cache (``prefetch``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectSendStream

from ..result import CompileResult
from ._dispatch import Entry

if TYPE_CHECKING:
    from ._plan import PlannedJob

__all__ = ("Batch",)


class Batch:
    """``size`` jobs whose results go to ``sink`` (``None``: kept in :attr:`results`)."""

    def __init__(
        self,
        size: int,
        sink: MemoryObjectSendStream[CompileResult] | Callable[[CompileResult], None] | None,
        *,
        wanted: bool = True,
    ) -> None:
        self.size = size
        #: False when nobody reads the results (a prefetch): only the cache wants them.
        self.wanted = wanted
        self.submitted = time.monotonic()
        self.results: list[CompileResult | None] = [None] * size if sink is None else []
        self._sink = sink
        self.pending = size
        self.finished = anyio.Event()
        #: Why a compile server refused the whole batch (a bad value), if it did.
        self.rejected: str | None = None
        self.task_group: anyio.abc.TaskGroup | None = None
        # What this batch has waiting in the engine, withdrawn if it is cancelled:
        # its queue entries, and its jobs that wait for another job's compile.
        self.queued: dict[int, Entry[PlannedJob]] = {}
        self.following: dict[int, PlannedJob] = {}
        if size == 0:
            self.finished.set()

    def deliver(self, index: int, result: CompileResult) -> None:
        """Job ``index`` is done."""
        sink = self._sink
        if sink is None:
            self.results[index] = result
        elif isinstance(sink, MemoryObjectSendStream):
            try:
                sink.send_nowait(result)  # the buffer holds the whole batch: never blocks
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the consumer has left; its batch is being cancelled
        else:
            sink(result)
        self.pending -= 1
        if self.pending == 0:
            self.finished.set()

    def ordered_results(self) -> list[CompileResult]:
        """The results in job order (for a batch made with ``sink=None``, once finished)."""
        assert self.pending == 0
        return [r for r in self.results if r is not None]
