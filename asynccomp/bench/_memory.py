"""Peak resident memory of the benchmark: this process plus its child processes.

Sampled from a background thread with psutil (the ``bench`` extra). Without psutil
nothing is measured and the peak is ``None``. Short-lived children (nvcc's ``cicc`` and
``ptxas``) are caught only if a sample lands while they run.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from types import TracebackType
from typing import Any

try:
    import psutil
except ImportError:  # pragma: no cover - psutil comes with the test and bench extras
    psutil = None

__all__ = ("MemorySampler", "child_pids", "memory_sampling_available")


def memory_sampling_available() -> bool:
    """``True`` when psutil is installed, so peaks can be measured."""
    return psutil is not None


def child_pids() -> set[int]:
    """Process ids of this process's direct children (empty without psutil)."""
    if psutil is None:
        return set()
    try:
        return {child.pid for child in psutil.Process().children()}
    except psutil.Error:
        return set()


def _rss(process: Any) -> int:
    try:
        rss: int = process.memory_info().rss
        return rss
    except psutil.Error:  # it exited between listing and reading
        return 0


class MemorySampler:
    """``with MemorySampler(exclude=pids) as sampler: ...`` then ``sampler.peak``: the
    highest sum of resident set sizes seen for this process and its descendants, leaving
    out the children in ``exclude`` (and theirs), e.g. other engines' idle workers."""

    def __init__(self, exclude: Collection[int] = (), interval: float = 0.05) -> None:
        self.exclude = frozenset(exclude)
        self.interval = interval
        self.peak: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> int | None:
        """One reading now (bytes), also folded into :attr:`peak`."""
        if psutil is None:
            return None
        me = psutil.Process()
        total = _rss(me)
        try:
            children = me.children()
        except psutil.Error:
            children = []
        for child in children:
            if child.pid in self.exclude:
                continue
            total += _rss(child)
            try:
                total += sum(_rss(grandchild) for grandchild in child.children(recursive=True))
            except psutil.Error:
                pass
        self.peak = total if self.peak is None else max(self.peak, total)
        return total

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> MemorySampler:
        self.sample()
        if psutil is not None:
            self._thread = threading.Thread(target=self._loop, name="memory-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()
