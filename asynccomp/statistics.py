"""The engine's counters: live ones, and the immutable snapshot users get."""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ("Counters", "EngineStatistics")


@dataclass(frozen=True)
class EngineStatistics:
    """A snapshot of an engine's counters (``Engine.statistics()``).

    ``submitted`` jobs are ``queued`` (waiting for a worker), ``running``, or
    ``completed``; completed ones either ``succeeded`` or ``failed`` (``timed_out`` counts
    the failures that were timeouts). ``compiled`` counts compiler runs, ``cache_hits``
    the jobs answered from the cache, ``deduplicated`` those that waited for an identical
    job already compiling.
    """

    submitted: int = 0
    queued: int = 0
    running: int = 0
    completed: int = 0
    succeeded: int = 0
    failed: int = 0
    timed_out: int = 0
    compiled: int = 0
    cache_hits: int = 0
    deduplicated: int = 0


@dataclass
class Counters:
    """The live counters behind :meth:`Engine.statistics` (EngineStatistics' fields)."""

    submitted: int = 0
    queued: int = 0
    running: int = 0
    completed: int = 0
    succeeded: int = 0
    failed: int = 0
    timed_out: int = 0
    compiled: int = 0
    cache_hits: int = 0
    deduplicated: int = 0

    def snapshot(self) -> EngineStatistics:
        return EngineStatistics(**asdict(self))
