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
block. Where it may differ: ``filename`` is the frame's own ``co_filename``, where
``inspect`` maps a compiled file to its source (the same path for modules imported from
``.py`` files, as TVM's are). TVMScript reads each frame's locals and one frame's source
line, never its file name.
"""

from __future__ import annotations

import contextlib
import dis
import inspect
import itertools
import linecache
import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any

__all__ = ("import_tensor_intrinsics", "quick_frames", "quick_stack")

#: ``dis.Positions``: a ``FrameInfo``'s ``positions`` (Python 3.11 and later; ``None`` on
#: 3.10, whose ``FrameInfo`` has none, and whose typeshed lacks it).
_POSITIONS: Any = getattr(dis, "Positions", None)


def _position(frame: FrameType) -> tuple[Any, ...]:
    """``inspect``'s (Python 3.11 and later): the instruction's source position."""
    index = frame.f_lasti
    if index < 0:
        return (None, None, None, None)
    every = getattr(frame.f_code, "co_positions")()  # noqa: B009 - not in 3.10's typeshed
    return tuple(next(itertools.islice(every, index // 2, None)))


def _info(frame: FrameType, context: int) -> inspect.FrameInfo:
    """``inspect.getframeinfo``'s answer, but for the module search."""
    code = frame.f_code
    lineno = frame.f_lineno
    extra: dict[str, Any] = {}
    if _POSITIONS is not None:  # the line is the instruction's, where it has one
        found = _position(frame)
        found = found if found[0] is not None else (lineno, *found[1:])
        lineno = found[0]
        extra["positions"] = _POSITIONS(*found)
    lines: list[str] | None = None
    index: int | None = None
    if context > 0 and lineno is not None:
        linecache.checkcache(code.co_filename)  # a file edited since: read again, as inspect
        source = linecache.getlines(code.co_filename, frame.f_globals)
        if source:  # inspect.getframeinfo's window of ``context`` lines around lineno
            start = max(0, min(lineno - 1 - context // 2, len(source) - context))
            lines = source[start : start + context]
            index = lineno - 1 - start
    return inspect.FrameInfo(frame, code.co_filename, lineno, code.co_name, lines, index, **extra)


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


def import_tensor_intrinsics() -> None:
    """``import tvm.s_tir.tensor_intrin``, as MetaSchedule does it (its ``TuneContext``
    for a CUDA target, its ``default_build`` at a worker's first build), with quick
    frames: 1-2 s instead of 17-20 s on 2 cores."""
    with quick_frames():
        import tvm.s_tir.tensor_intrin  # noqa: F401
