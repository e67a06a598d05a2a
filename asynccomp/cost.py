"""How long will a compile take? Estimates for longest-first dispatch.

The estimate only has to *order* the jobs of one batch on one backend, and it must be
cheap (it runs on the event loop for every job). It is, in order of preference:

1. the time this exact compile took before (same backend, options and source: a sweep
   run again with the cache off or evicted, a benchmark's second pass);
2. the time of a *similar* source: the same text up to its numbers (autotuning
   candidates that differ only in tile sizes or unroll factors);
3. a size model: ``base + rate * len(source)``, where ``rate`` is learned from the
   compiles this model has seen; both start from the backend's
   :attr:`~asynccomp.backends.CompilerBackend.cost_prior` (measured medians).

Why not just source size: it ranks the 60 TVM kernels of the shared corpus fairly
(Spearman 0.80 against their NVRTC times, ``benchmarks/compile/time_predictors.py``) but
misses single kernels by up to 6.5x (a 13 KB convolution takes 1.6 s, 4.7x what its size
predicts). Other features of the text (unrolled statement counts, loop nests, local array
sizes) ranked worse in a one-off trial. What does predict a compile's time well is its
own earlier time, so the model remembers those (bounded; per model, which lives as long
as its engine unless you share one: ``Engine(cost_model=...)``).

>>> model = CostModel()
>>> model.estimate("nvrtc", ("-O3",), "x" * 1000) < model.estimate("nvrtc", ("-O3",), "x" * 10**6)
True
>>> model.observe("nvrtc", ("-O3",), "small but slow", 7.5)
>>> model.estimate("nvrtc", ("-O3",), "small but slow")
7.5
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from .backends import backend_class

__all__ = ("CostModel",)

# Weight of a new observation in the running averages of one source's time, and of the
# per-byte rate (which pools every source, so it moves more slowly).
_ALPHA = 0.5
_RATE_ALPHA = 0.2
_DIGITS = str.maketrans("0123456789", "0000000000")


class _Bounded(OrderedDict[int, float]):
    """A small LRU map of running averages."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def update_average(self, key: int, value: float) -> None:
        old = self.pop(key, None)
        self[key] = value if old is None else old + _ALPHA * (value - old)
        if len(self) > self.limit:
            self.popitem(last=False)


class CostModel:
    """Estimated compile seconds per job, learned from the compiles it observes.

    Thread-safe. ``limit`` bounds how many distinct sources it remembers.
    """

    def __init__(self, limit: int = 100_000) -> None:
        self._exact = _Bounded(limit)
        self._similar = _Bounded(limit)
        # Seconds per source character, per backend: from its prior (the backend's
        # ``cost_prior``), then learned.
        self._rate: dict[str, float] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _keys(backend: str, options: Sequence[str], source: str) -> tuple[int, int]:
        # Python's str hash: fast, and collisions only cost a worse guess.
        options = tuple(options)
        return (
            hash((backend, options, source)),
            hash((backend, options, source.translate(_DIGITS))),
        )

    def estimate(self, backend: str, options: Sequence[str], source: str) -> float:
        """Seconds this compile is expected to take (never negative)."""
        exact, similar = self._keys(backend, options, source)
        with self._lock:
            seen = self._exact.get(exact)
            if seen is None:
                seen = self._similar.get(similar)
            if seen is not None:
                return seen
            base, prior = backend_class(backend).cost_prior
            rate = self._rate.get(backend, prior)
        return base + rate * len(source)

    def observe(self, backend: str, options: Sequence[str], source: str, seconds: float) -> None:
        """Record that this compile took ``seconds``."""
        exact, similar = self._keys(backend, options, source)
        base, prior = backend_class(backend).cost_prior
        with self._lock:
            self._exact.update_average(exact, seconds)
            self._similar.update_average(similar, seconds)
            if source:
                rate = max(0.0, seconds - base) / len(source)
                old = self._rate.get(backend, prior)
                self._rate[backend] = old + _RATE_ALPHA * (rate - old)
