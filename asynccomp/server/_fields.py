"""Checking what arrives on the compile server's wire against the type it must have, and
turning a message into what the wire carries.

A message is a frozen dataclass (:mod:`._protocol`); :func:`build` makes one from the
JSON fields a peer sent, checking every field against its annotation as JSON gives it
(``int`` is not ``bool``, ``float`` is finite, ``list[T]`` and ``dict[str, T]`` item by
item, unions option by option, nested dataclasses field by field). Whatever the bytes,
the answer is a value of the annotated type or a :class:`~._wire.WireError` naming the
field: a peer's message is never trusted to have the shape it claims. :func:`plain`
goes the other way (nested dataclasses as JSON objects).

Both are made once per type (a checker per annotation, a field list per class): every
message of every call goes through them, and resolving annotations per message cost a
cache hit on the server a good part of its time.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
from collections.abc import Callable
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from ._wire import WireError

__all__ = ("build", "plain")

M = TypeVar("M")

#: A check: (value, where) -> the value as its type, or WireError naming ``where``.
Check = Callable[[Any, Callable[[], str]], Any]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@functools.cache
def _checker(hint: Any) -> Check:
    """The check for values of type ``hint`` (made once per annotation)."""
    origin = get_origin(hint)
    if hint is Any:
        return lambda value, where: value
    if origin in (Union, types.UnionType):
        options = [_checker(option) for option in get_args(hint)]

        def union(value: Any, where: Callable[[], str]) -> Any:
            for option in options:
                try:
                    return option(value, where)
                except WireError:
                    continue
            raise WireError(f"{where()}: {_shown(value)} is none of {hint}")

        return union
    if hint is type(None):

        def null(value: Any, where: Callable[[], str]) -> None:
            if value is not None:
                raise WireError(f"{where()}: expected null, got {_shown(value)}")

        return null
    if hint is bool:

        def boolean(value: Any, where: Callable[[], str]) -> bool:
            if not isinstance(value, bool):
                raise WireError(f"{where()}: expected a bool, got {_shown(value)}")
            return value

        return boolean
    if hint is int:

        def integer(value: Any, where: Callable[[], str]) -> int:
            if not isinstance(value, int) or isinstance(value, bool):
                raise WireError(f"{where()}: expected an int, got {_shown(value)}")
            return value

        return integer
    if hint is float:

        def number(value: Any, where: Callable[[], str]) -> float:
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise WireError(f"{where()}: expected a number, got {_shown(value)}")
            if not math.isfinite(value):
                raise WireError(f"{where()}: not a finite number")
            return float(value)

        return number
    if hint is str:

        def string(value: Any, where: Callable[[], str]) -> str:
            if not isinstance(value, str):
                raise WireError(f"{where()}: expected a string, got {_shown(value)}")
            return value

        return string
    if origin is list:
        (item_hint,) = get_args(hint)
        item = _checker(item_hint)

        def listed(value: Any, where: Callable[[], str]) -> list[Any]:
            if not isinstance(value, list):
                raise WireError(f"{where()}: expected a list, got {_shown(value)}")
            return [item(v, _place(where, f"[{i}]")) for i, v in enumerate(value)]

        return listed
    if origin is dict:
        _, item_hint = get_args(hint)
        item = _checker(item_hint)

        def mapped(value: Any, where: Callable[[], str]) -> dict[str, Any]:
            if not isinstance(value, dict):
                raise WireError(f"{where()}: expected an object, got {_shown(value)}")
            return {str(k): item(v, _place(where, f".{k}")) for k, v in value.items()}

        return mapped
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        cls = hint
        return lambda value, where: build(cls, value, where())
    raise TypeError(f"no wire check for {hint!r}")  # pragma: no cover - a bug here


def _place(where: Callable[[], str], suffix: str) -> Callable[[], str]:
    """Where a value is, said only when an error names it."""
    return lambda: where() + suffix


_FIELDS: dict[type, tuple[tuple[str, Check], ...]] = {}


def _fields_of(cls: type) -> tuple[tuple[str, Check], ...]:
    """A dataclass's fields and the check of each (made once per class)."""
    found = _FIELDS.get(cls)
    if found is None:
        hints = get_type_hints(cls)
        fields = dataclasses.fields(cls)
        found = _FIELDS[cls] = tuple((f.name, _checker(hints[f.name])) for f in fields)
    return found


def build(cls: type[M], fields: Any, where: str) -> M:
    """A ``cls`` made from ``fields`` (a JSON object), each field checked."""
    if not isinstance(fields, dict):
        raise WireError(f"{where}: expected an object")
    values = {}
    for name, check in _fields_of(cls):
        if name not in fields:
            raise WireError(f"{where}: no field {name!r}")
        values[name] = check(fields[name], _place(lambda: where, f".{name}"))
    return cls(**values)


def plain(message: Any) -> dict[str, Any]:
    """A message's fields as the wire's JSON carries them (nested messages as objects;
    a shallow copy where :func:`dataclasses.asdict` would copy every value deeply)."""
    fields = _fields_of(type(message))
    return {name: _plain(getattr(message, name)) for name, _ in fields}


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(value)
    return value
