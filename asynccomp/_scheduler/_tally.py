"""Counting jobs, by one set of rules, for :class:`~asynccomp.EngineStatistics`.

Every door counts the same way because there is one counter: an engine's
(:mod:`asynccomp._front`) counts its own jobs whatever runs them, and the compile server
counts every client's with the same :class:`Tally`, through :class:`Counting` (a
call's events, counted on their way). Whether a job timed out is decided here only
(:func:`timed_out`). What is live (queued, running, workers) is not counted but read
when a snapshot is taken.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..runner import Answer, CompileRequest, Outcome, RunEvents
from ..statistics import EngineStatistics

__all__ = ("Counting", "Tally", "timed_out")


def timed_out(status: str | None, timeout: float | None) -> bool:
    """Whether a job whose compile ended with ``status`` (``None``: it never ran) ran
    past its own ``timeout``. A compile stopped with no timeout of the job's own (one
    it shared, run for a job allowed less time) is a failure, not this job's timeout."""
    return status == "timeout" and timeout is not None


@dataclass
class Tally:
    """Running totals, changed only on the event loop of the engine (or server)."""

    submitted: int = 0
    completed: int = 0
    succeeded: int = 0
    failed: int = 0
    timed_out: int = 0
    compiled: int = 0
    cache_hits: int = 0
    deduplicated: int = 0

    def submit(self, count: int) -> None:
        """``count`` jobs were asked for."""
        self.submitted += count

    def started(self) -> None:
        """A compiler run started (counted whether it ends or is cancelled)."""
        self.compiled += 1

    def answered(self, answer: Answer) -> None:
        """A runner answered a job without a compile of its own: from the cache, or by
        sharing an identical compile (a compiled job was counted when it started)."""
        if answer == "cache":
            self.cache_hits += 1
        elif answer == "shared":
            self.deduplicated += 1

    def ended(self, status: str | None, timeout: float | None) -> None:
        """A job has its result: ``status`` is its compile's (``None``: it could not
        run), ``timeout`` the job's own."""
        self.completed += 1
        if status == "ok":
            self.succeeded += 1
        else:
            self.failed += 1
            self.timed_out += timed_out(status, timeout)

    def snapshot(self, *, queued: int, running: int, workers: int) -> EngineStatistics:
        return EngineStatistics(
            submitted=self.submitted,
            queued=queued,
            running=running,
            completed=self.completed,
            succeeded=self.succeeded,
            failed=self.failed,
            timed_out=self.timed_out,
            compiled=self.compiled,
            cache_hits=self.cache_hits,
            deduplicated=self.deduplicated,
            workers=workers,
        )


class Counting:
    """A call's :class:`~asynccomp.runner.RunEvents`, counted in ``tally`` on their way
    to ``events``: a job counts as submitted when it is :meth:`expect` ed, as compiled
    when it starts, and as ended with its outcome."""

    def __init__(self, tally: Tally, events: RunEvents) -> None:
        self.tally = tally
        self.events = events
        self._timeouts: dict[int, float | None] = {}

    def expect(self, requests: Iterable[CompileRequest]) -> None:
        before = len(self._timeouts)
        for request in requests:
            self._timeouts[request.index] = request.prepared.timeout
        self.tally.submit(len(self._timeouts) - before)

    def started(self, index: int) -> None:
        self.tally.started()
        self.events.started(index)

    def finished(self, index: int, outcome: Outcome) -> None:
        self.tally.answered(outcome.answer)
        self.tally.ended(outcome.output.status, self._timeouts.pop(index, None))
        self.events.finished(index, outcome)
