"""A batch: the jobs of one call (``compile``, ``compile_many``, ``as_completed``,
``prefetch``) and where their results go.

Results are delivered from plain code (no waiting): into a list in job order
(``compile_many``), into a stream in completion order (``as_completed``), or nowhere
(``prefetch``: only the cache wants them, and they are counted, not built).
"""

from __future__ import annotations

import time

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from ..result import CompileResult

__all__ = ("Batch",)


class Batch:
    """``size`` jobs whose results go to ``sink``: ``None`` keeps them in
    :attr:`results`; ``wanted=False`` (a prefetch) keeps nothing."""

    def __init__(
        self,
        size: int,
        sink: MemoryObjectSendStream[CompileResult] | None = None,
        *,
        wanted: bool = True,
    ) -> None:
        self.size = size
        self.wanted = wanted
        self.submitted = time.monotonic()
        self.results: list[CompileResult | None] = [None] * size if sink is None and wanted else []
        self._sink = sink
        self.pending = size
        self.finished = anyio.Event()
        if size == 0:
            self.finished.set()

    def deliver(self, index: int, result: CompileResult | None) -> None:
        """Job ``index`` is done (``None``: done, and nobody wants its result)."""
        if result is not None and self.wanted:
            if self._sink is None:
                self.results[index] = result
            else:
                try:
                    self._sink.send_nowait(result)  # the buffer holds the whole batch
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass  # the consumer has left; its batch is being cancelled
        self.pending -= 1
        if self.pending == 0:
            self.finished.set()

    def ordered_results(self) -> list[CompileResult]:
        """The results in job order (for a batch made with ``sink=None``, once finished)."""
        assert self.pending == 0
        return [r for r in self.results if r is not None]
