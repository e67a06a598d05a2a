"""How many compiles may run at once: one per CPU by default, never more than memory holds.

A worker count is a number of processes (NVRTC workers, nvcc runs with their cicc and
ptxas children), each needing memory of its own; a count that memory cannot hold ends
in the out-of-memory killer taking the machine down (``-j 100000`` once started ~1,750
NVRTC workers). So every count, given or default, is capped by the memory available when
the engine is made, and a count that was given and lowered says so with a
:class:`~asynccomp.errors.ResourceLimitWarning`.
"""

from __future__ import annotations

import os
import warnings

from ..errors import InvalidJob, ResourceLimitWarning

__all__ = (
    "NVCC_JOB_MEMORY",
    "NVRTC_WORKER_MEMORY",
    "available_memory",
    "default_workers",
    "nvcc_workers",
    "nvrtc_workers",
)

#: Memory set aside per NVRTC worker process: generous on purpose (on the H200 run in
#: benchmarks/RESULTS.md, 16 workers and the benchmark process peaked at 3.4 GiB over the
#: TVM corpus, whose largest kernel is 750 KB of source).
NVRTC_WORKER_MEMORY = 2**30
#: Memory set aside per nvcc run (nvcc, cicc and ptxas at once on a TVM kernel: a few
#: hundred MiB).
NVCC_JOB_MEMORY = 2**29


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


def _checked(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidJob(name, value, "must be a positive int or None")
    return value


def _capped(name: str, requested: int | None, per_worker: int, what: str) -> int:
    available = available_memory()
    cap = None if available is None else max(1, available // per_worker)
    if requested is None:
        cpus = default_workers()
        return cpus if cap is None else min(cpus, cap)
    if available is not None and cap is not None and requested > cap:
        warnings.warn(
            f"{name}={requested} lowered to {cap}: {available / 2**30:.1f} GiB of memory "
            f"is available, and each {what} is given {per_worker / 2**30:g} GiB",
            ResourceLimitWarning,
            stacklevel=4,
        )
        return cap
    return requested


def nvrtc_workers(requested: object = None) -> int:
    """The NVRTC worker count: ``requested`` (a positive int) or one per CPU, capped at
    one per :data:`NVRTC_WORKER_MEMORY` of available memory."""
    return _capped(
        "nvrtc_workers",
        _checked("nvrtc_workers", requested),
        NVRTC_WORKER_MEMORY,
        "NVRTC worker",
    )


def nvcc_workers(requested: object = None) -> int:
    """The nvcc concurrency: ``requested`` or one per CPU, capped at one per
    :data:`NVCC_JOB_MEMORY` of available memory."""
    return _capped("nvcc_workers", _checked("nvcc_workers", requested), NVCC_JOB_MEMORY, "nvcc run")
