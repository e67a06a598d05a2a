"""``asynccomp.tvm._frames.quick_stack`` gives what ``inspect.stack`` gives (TVMScript's
parser reads it for each function it parses), without ``inspect``'s module search: in a
plain call, a class body, code run from a string, and an import's own frames."""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

import pytest

from asynccomp.tvm._frames import quick_frames, quick_stack


def fields(frames: list[inspect.FrameInfo]) -> list[tuple[Any, ...]]:
    """Every field of each frame's ``FrameInfo``; the first frame's (``both``, at two
    calls) without its instruction's position."""
    with_positions = sys.version_info >= (3, 11)
    return [
        (info.frame, info.filename, info.lineno, info.function, info.code_context, info.index)
        # (positions: not in Python 3.10's FrameInfo, nor in its typeshed)
        + ((getattr(info, "positions"),) if with_positions and depth else ())  # noqa: B009
        for depth, info in enumerate(frames)
    ]


def both(context: int) -> tuple[list[inspect.FrameInfo], list[inspect.FrameInfo]]:
    """Both stacks, taken from one line of ``both`` (the frames above it are at the same
    instruction for both)."""
    return inspect.stack(context), quick_stack(context)


@pytest.mark.parametrize("context", [0, 1, 3])
def test_the_same_frames_lines_and_positions_as_inspect(context: int) -> None:
    theirs, ours = both(context)
    assert len(ours) > 3  # this test's frame and pytest's under it
    assert fields(ours) == fields(theirs)
    del theirs, ours  # frames refer to themselves through these lists


def test_a_call_over_several_lines() -> None:
    """The line is the instruction's (``inspect`` reads it from its position)."""
    theirs, ours = both(
        3,
    )
    if sys.version_info >= (3, 11):
        position = getattr(ours[1], "positions")  # noqa: B009 - not in 3.10's typeshed
        assert position.end_lineno == ours[1].lineno + 2
    assert fields(ours) == fields(theirs)
    del theirs, ours


def test_a_class_body_and_code_from_a_string() -> None:
    class Holder:
        theirs, ours = both(1)

    assert Holder.ours[1].function == "Holder"
    assert fields(Holder.ours) == fields(Holder.theirs)
    namespace: dict[str, Any] = {"both": both}
    exec("theirs, ours = both(1)", namespace)  # a frame whose file is "<string>"
    assert namespace["ours"][1].filename == "<string>"
    assert namespace["ours"][1].code_context is None
    assert fields(namespace["ours"]) == fields(namespace["theirs"])


def test_inside_an_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The frames of an import: ``<frozen importlib._bootstrap>`` has no source."""
    (tmp_path / "quick_stack_probe.py").write_text(
        "from tests.test_tvm_frames import both\n\ntheirs, ours = both(2)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("quick_stack_probe")
    try:
        frozen = [f for f in module.ours if f.filename.startswith("<frozen")]
        assert frozen and all(f.code_context is None for f in frozen)
        assert module.ours[1].code_context == ["\n", "theirs, ours = both(2)\n"]
        assert fields(module.ours) == fields(module.theirs)
    finally:
        del sys.modules["quick_stack_probe"]


def test_quick_frames_replaces_inspect_stack_for_the_block_only() -> None:
    original = inspect.stack
    with quick_frames():
        assert inspect.stack is quick_stack
    assert inspect.stack is original
    with pytest.raises(KeyError), quick_frames():
        raise KeyError("inside")
    assert inspect.stack is original
