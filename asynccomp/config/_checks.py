"""The checks settings share: each raises :class:`~asynccomp.SettingsError` naming the
setting and the value (no I/O)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import SettingsError

__all__ = ("check_bool", "check_bytes", "check_count", "check_instance", "check_path")


def check_count(name: str, value: object, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise SettingsError(name, value, f"must be an int >= {least}")


def check_bytes(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SettingsError(name, value, "must be a number of bytes, 0 or more")


def check_bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise SettingsError(name, value, "must be True or False")


def check_path(name: str, value: object, problem: str) -> Path:
    """``value`` as a :class:`~pathlib.Path`; ``""`` would be the working folder, never
    what a caller meant."""
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise SettingsError(name, value, problem)
    text = os.fspath(value)
    if not isinstance(text, str) or "\x00" in text:
        raise SettingsError(name, value, problem)
    return Path(text)


def check_instance(name: str, value: object, kind: type[Any], what: str) -> None:
    """``value`` is ``None`` or a ``kind`` (``what`` names it for the message)."""
    if value is not None and not isinstance(value, kind):
        raise SettingsError(name, value, f"must be {what} or None")
