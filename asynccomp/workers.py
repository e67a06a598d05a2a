"""How many compiles to run at once, by default."""

from __future__ import annotations

import os

__all__ = ("NVRTC_WORKER_MEMORY", "available_memory", "default_nvrtc_workers", "default_workers")

#: Memory set aside per concurrent NVRTC compile: generous on purpose (on the H200 run in
#: benchmarks/RESULTS.md, 16 workers and the benchmark process peaked at 3.4 GiB over the
#: TVM corpus, whose largest kernel is 750 KB of source).
NVRTC_WORKER_MEMORY = 2**30


def default_workers() -> int:
    """One worker per CPU this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def available_memory() -> int | None:
    """Bytes of memory available for new work (``MemAvailable``), or ``None`` if unknown."""
    try:
        with open("/proc/meminfo") as meminfo:
            fields = dict(line.split(":", 1) for line in meminfo)
        return int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None


def default_nvrtc_workers() -> int:
    """One per CPU, but no more than available memory holds at
    :data:`NVRTC_WORKER_MEMORY` per worker (so a sweep cannot exhaust memory)."""
    workers = default_workers()
    available = available_memory()
    if available is None:
        return workers
    return max(1, min(workers, available // NVRTC_WORKER_MEMORY))
