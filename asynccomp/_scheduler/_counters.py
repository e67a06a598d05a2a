"""The engine's live counters, behind :class:`~asynccomp.statistics.EngineStatistics`."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..statistics import EngineStatistics

__all__ = ("Counters",)


@dataclass
class Counters:
    """Live counts, changed only on the engine's event loop."""

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

    def snapshot(self, workers: int) -> EngineStatistics:
        return EngineStatistics(**asdict(self), workers=workers)
