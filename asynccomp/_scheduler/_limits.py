"""How many compiles may run at once: one per CPU by default, never more than memory holds.

A worker count is a number of processes (NVRTC workers, nvcc runs with their cicc and
ptxas children), each needing memory of its own; a count that memory cannot hold ends
in the out-of-memory killer taking the machine down (``-j 100000`` once started ~1,750
NVRTC workers). So every count, given or default, is capped by the memory available when
the engine is made (at one per the backend's ``worker_memory``: 1 GiB per NVRTC worker,
512 MiB per nvcc or ptxas run), and a count that was given and lowered says so with a
:class:`~asynccomp.errors.ResourceLimitWarning`.
"""

from __future__ import annotations

import os

from .._warn import warn
from ..errors import InvalidJob, ResourceLimitWarning

__all__ = ("available_memory", "default_workers", "worker_count")


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
        warn(
            f"{name}={requested} lowered to {cap}: {available / 2**30:.1f} GiB of memory "
            f"is available, and each {what} is given {per_worker / 2**30:g} GiB",
            ResourceLimitWarning,
        )
        return cap
    return requested


def worker_count(setting: str, requested: object, per_worker: int, what: str) -> int:
    """A backend's worker count: ``requested`` (a positive int, the engine setting
    named ``setting``) or one per CPU, capped at one per ``per_worker`` bytes of
    available memory (the backend's ``worker_memory``; ``what`` names one worker)."""
    return _capped(setting, _checked(setting, requested), per_worker, what)
