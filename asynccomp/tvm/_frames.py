"""``inspect.stack()`` without its search through ``sys.modules``: for imports that parse
TVMScript.

TVMScript's parser calls ``inspect.stack()`` for every ``@T.prim_func`` it parses (to find
the function's closure variables in the enclosing frames, and whether it sits in a
class). For each frame, ``inspect`` looks for the module that holds the frame's file;
where no module does (an import's own frames, ``<frozen importlib._bootstrap>``), it scans
every module in ``sys.modules``, each time. An import that parses many functions pays
that scan per frame per function: ``import tvm.s_tir.tensor_intrin`` (what MetaSchedule's
``default_build`` imports; 496 functions parsed under ~10 import frames) spent 90% of its
19 s there on 2 cores, 1-2 s without it.

:func:`quick_stack` returns what ``inspect.stack`` returns (a ``FrameInfo`` per frame,
with ``context`` lines of source read through ``linecache``, as ``inspect`` reads them),
found without the search; :func:`quick_frames` puts it in place of ``inspect.stack`` for a
block. Where it may differ: ``filename`` is the frame's own ``co_filename`` (``inspect``
maps a file to the module's source file where it finds one: the same path for modules
imported from ``.py`` files), and a frame whose module has a ``__loader__`` but no file on
disk gets its lines from that loader through ``linecache``, as ``inspect`` does.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import linecache
import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any

__all__ = ("quick_frames", "quick_stack")


def _positions(frame: FrameType) -> Any:
    """``inspect``'s: the instruction's source positions (Python 3.11 and later)."""
    import dis

    make: Any = getattr(dis, "Positions")  # noqa: B009 - not in Python 3.10's typeshed
    index = frame.f_lasti
    every = getattr(frame.f_code, "co_positions")()  # noqa: B009 - the same
    found = next(itertools.islice(every, index // 2, None), None) if index >= 0 else None
    return make(*found) if found is not None else make(None, None, None, None)


def _info(frame: FrameType, context: int) -> inspect.FrameInfo:
    code = frame.f_code
    lineno = frame.f_lineno
    lines: list[str] | None = None
    index: int | None = None
    if context > 0 and lineno is not None:
        linecache.checkcache(code.co_filename)  # a file edited since: read again, as inspect
        source = linecache.getlines(code.co_filename, frame.f_globals)
        if source:  # inspect.getframeinfo's window of ``context`` lines around lineno
            start = max(0, min(lineno - 1 - context // 2, len(source) - context))
            lines = source[start : start + context]
            index = lineno - 1 - start
    fields = (frame, code.co_filename, lineno, code.co_name, lines, index)
    if sys.version_info >= (3, 11):
        return inspect.FrameInfo(*fields, positions=_positions(frame))
    return inspect.FrameInfo(*fields)  # pragma: no cover - Python 3.10


def quick_stack(context: int = 1) -> list[inspect.FrameInfo]:
    """``inspect.stack(context)``: the caller's frame first, then each one above it."""
    frames: list[inspect.FrameInfo] = []
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        frames.append(_info(frame, context))
        frame = frame.f_back
    return frames


@contextlib.contextmanager
def quick_frames() -> Iterator[None]:
    """``inspect.stack`` is :func:`quick_stack` inside the block. It replaces the
    ``inspect`` module's attribute, so another thread that calls ``inspect.stack``
    meanwhile gets :func:`quick_stack` too: the same answer, sooner."""
    saved = inspect.stack
    inspect.stack = quick_stack
    try:
        yield
    finally:
        inspect.stack = saved
