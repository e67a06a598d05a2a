"""What :func:`._offload.install` put in TileLang's place, for the replacements
(:mod:`._offload`, :mod:`._par_compile`) to share: TileLang's own functions, which they
call for what they do not take over, and how many lowering workers to run."""

from __future__ import annotations

import os
from typing import Any

__all__ = ("cpus", "originals", "set_workers", "workers")

#: TileLang's functions that install() replaced, by what they do ("prepare",
#: "make_compile", "par_compile"); empty when nothing is replaced.
originals: dict[str, Any] = {}
_workers = 0


def cpus() -> int:
    return len(os.sched_getaffinity(0))


def workers() -> int:
    """The lowering workers to run: as install() was told, else one per CPU."""
    return _workers or cpus()


def set_workers(count: int) -> None:
    global _workers
    _workers = count
