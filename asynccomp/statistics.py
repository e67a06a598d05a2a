"""What an engine reports about itself: :class:`EngineStatistics`."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ("EngineStatistics",)


@dataclass(frozen=True)
class EngineStatistics:
    """A snapshot of an engine's counters (``Engine.statistics()``).

    ``submitted`` jobs are ``queued`` (waiting for a compiler slot), ``running``, or
    ``completed``; completed ones either ``succeeded`` or ``failed`` (``timed_out``
    counts the failures that were timeouts). ``compiled`` counts compiler runs,
    ``cache_hits`` the jobs answered from the cache, ``deduplicated`` those answered by
    an identical job's compile that was already under way. ``workers`` is the number of
    worker processes alive at the time of the snapshot (NVRTC's and nvJitLink's).
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
    workers: int = 0
