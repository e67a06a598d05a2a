"""Counting jobs, by one set of rules, for :class:`~asynccomp.EngineStatistics`.

Every door counts the same way because there is one counter: an engine's
(:mod:`._front`) counts its own jobs whatever runs them, and the compile server counts
every client's with the same :class:`Tally`. What is live (queued, running, workers) is
not counted but read when a snapshot is taken.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..runner import Answer
from ..statistics import EngineStatistics

__all__ = ("Tally",)


@dataclass
class Tally:
    """Running totals, changed only on the engine's event loop."""

    submitted: int = 0
    completed: int = 0
    succeeded: int = 0
    failed: int = 0
    timed_out: int = 0
    compiled: int = 0
    cache_hits: int = 0
    deduplicated: int = 0

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

    def ended(self, *, ok: bool, timed_out: bool) -> None:
        """A job has its result (``timed_out``: it ran past its own timeout)."""
        self.completed += 1
        if ok:
            self.succeeded += 1
        else:
            self.failed += 1
            self.timed_out += timed_out

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
