"""Checking what arrives on the compile server's wire against the type it must have.

A message is a frozen dataclass (:mod:`._protocol`); :func:`build` makes one from the
JSON fields a peer sent, checking every field against its annotation as JSON gives it
(``int`` is not ``bool``, ``float`` is finite, ``list[T]`` and ``dict[str, T]`` item by
item, unions option by option, nested dataclasses field by field). Whatever the bytes,
the answer is a value of the annotated type or a :class:`~._wire.WireError` naming the
field: a peer's message is never trusted to have the shape it claims.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from ._wire import WireError

__all__ = ("build",)

M = TypeVar("M")


def _check(value: Any, hint: Any, where: str) -> Any:
    """``value`` if it has the type ``hint`` (as JSON gives it), else WireError."""
    origin = get_origin(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        for option in get_args(hint):
            try:
                return _check(value, option, where)
            except WireError:
                continue
        raise WireError(f"{where}: {_shown(value)} is none of {hint}")
    if hint is type(None):
        if value is not None:
            raise WireError(f"{where}: expected null, got {_shown(value)}")
        return None
    if hint is bool:
        if not isinstance(value, bool):
            raise WireError(f"{where}: expected a bool, got {_shown(value)}")
        return value
    if hint is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise WireError(f"{where}: expected an int, got {_shown(value)}")
        return value
    if hint is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise WireError(f"{where}: expected a number, got {_shown(value)}")
        if not math.isfinite(value):
            raise WireError(f"{where}: not a finite number")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise WireError(f"{where}: expected a string, got {_shown(value)}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise WireError(f"{where}: expected a list, got {_shown(value)}")
        (item,) = get_args(hint)
        return [_check(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise WireError(f"{where}: expected an object, got {_shown(value)}")
        _, item = get_args(hint)
        return {str(k): _check(v, item, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return build(hint, value, where)
    raise TypeError(f"no wire check for {hint!r}")  # pragma: no cover - a bug here


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def build(cls: type[M], fields: Any, where: str) -> M:
    """A ``cls`` made from ``fields`` (a JSON object), each field checked."""
    if not isinstance(fields, dict):
        raise WireError(f"{where}: expected an object")
    values = {}
    for name, hint in _fields_of(cls):  # type: ignore[arg-type]
        if name not in fields:
            raise WireError(f"{where}: no field {name!r}")
        values[name] = _check(fields[name], hint, f"{where}.{name}")
    return cls(**values)


@functools.cache
def _fields_of(cls: type) -> tuple[tuple[str, Any], ...]:
    """A dataclass's fields and their types (resolved once per class: every message
    is built through here)."""
    hints = get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))
