"""Warnings that point at the caller's code, not at asynccomp's.

A warning asynccomp issues names the file and line where the user called asynccomp: the
innermost frame of the stack that is neither asynccomp's nor the machinery between
(anyio, asyncio, contextlib, threading, concurrent.futures), as ``skip_file_prefixes``
does on Python 3.12. A warning issued where no such frame is on the stack (in a worker
thread, or on the event loop thread of a :class:`~asynccomp.SyncEngine`) names the call
that started the engine instead: ``Engine.__aenter__`` (and ``SyncEngine.start``, for
its thread) records it in a context variable, which the tasks and threads the engine
starts inherit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sys
import threading
import warnings
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = ("CallSite", "call_site", "calls_from", "warn")


def _folder(module: Any) -> str:
    return str(Path(module.__file__).parent) + "/"


_OURS = str(Path(__file__).parent) + "/"


def _machinery() -> tuple[str, ...]:
    prefixes = [
        _OURS,
        _folder(asyncio),
        _folder(concurrent.futures),
        str(Path(contextlib.__file__)),
        str(Path(threading.__file__)),
    ]
    for name in ("anyio", "trio", "outcome"):  # the loops anyio runs on, and theirs
        loaded = sys.modules.get(name)
        if loaded is not None and getattr(loaded, "__file__", None):
            prefixes.append(_folder(loaded))
    return tuple(prefixes)


@dataclass(frozen=True)
class CallSite:
    """Where a caller called asynccomp: what a warning names."""

    filename: str
    lineno: int
    module: str
    globals: dict[str, Any]


_SITE: ContextVar[CallSite | None] = ContextVar("asynccomp_call_site", default=None)


def call_site(skip: int = 1) -> CallSite | None:
    """The innermost frame of this thread's stack outside asynccomp and the machinery
    (``skip``: frames to leave out first, this function's being 0), or ``None``."""
    machinery = _machinery()
    frame: FrameType | None = sys._getframe(skip)
    while frame is not None and frame.f_code.co_filename.startswith(machinery):
        frame = frame.f_back
    if frame is None:
        return None
    module = frame.f_globals.get("__name__", "__main__")
    return CallSite(frame.f_code.co_filename, frame.f_lineno, str(module), frame.f_globals)


@contextlib.contextmanager
def calls_from(site: CallSite | None) -> Iterator[None]:
    """Warnings issued meanwhile (and in the tasks and threads started meanwhile) with
    no caller's frame on their stack name ``site``."""
    token = _SITE.set(site if site is not None else _SITE.get())
    try:
        yield
    finally:
        _SITE.reset(token)


def warn(message: str, category: type[Warning]) -> None:
    """``warnings.warn(message, category)``, naming the caller's line (see the module)."""
    site = call_site(2) or _SITE.get()
    if site is None:
        warnings.warn(message, category, stacklevel=2)
        return
    registry = site.globals.setdefault("__warningregistry__", {})
    # No module_globals: warn_explicit would ask the module's loader for its source,
    # which fails for code that has none (python -c: "'__main__' is not a built-in").
    warnings.warn_explicit(message, category, site.filename, site.lineno, site.module, registry)
