"""Checking what arrives on the compile server's wire against the type it must have, and
turning a message into what the wire carries.

A message is a frozen dataclass (:mod:`._protocol`); :func:`build` makes one from the
JSON fields a peer sent, checking every field against its annotation as JSON gives it
(``int`` is not ``bool``, ``float`` is finite, ``list[T]`` and ``dict[str, T]`` item by
item, unions option by option, nested dataclasses field by field). Whatever the bytes,
the answer is a value of the annotated type or a :class:`~._wire.WireError` naming the
field: a peer's message is never trusted to have the shape it claims. :func:`plain`
goes the other way (nested dataclasses as JSON objects).

Both are made once per type (a check per annotation, a field list per class), and the
place named in an error is put together only when there is one: every message of every
call goes through here, and resolving annotations per message, deep copies and error
texts made in advance were a good part of a cache hit's time on the server.
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

#: A check: the value as its type, or :class:`_Bad` (the place is added on the way out).
Check = Callable[[Any], Any]


class _Bad(Exception):
    """A value of the wrong type, ``path`` below the value checked."""

    def __init__(self, message: str, path: str = "") -> None:
        self.message = message
        self.path = path

    def under(self, step: str) -> _Bad:
        return _Bad(self.message, step + self.path)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _scalar(kind: type, words: str) -> Check:
    def check(value: Any) -> Any:
        # bool is an int to Python, never to the wire.
        if type(value) is not kind:
            raise _Bad(f"expected {words}, got {_shown(value)}")
        return value

    return check


def _number(value: Any) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise _Bad(f"expected a number, got {_shown(value)}")
    if not math.isfinite(value):
        raise _Bad("not a finite number")
    return float(value)


def _null(value: Any) -> None:
    if value is not None:
        raise _Bad(f"expected null, got {_shown(value)}")


@functools.cache
def _checker(hint: Any) -> Check:
    """The check for values of type ``hint`` (made once per annotation)."""
    origin = get_origin(hint)
    if hint is Any:
        return lambda value: value
    if origin in (Union, types.UnionType):
        options = [_checker(option) for option in get_args(hint)]

        def union(value: Any) -> Any:
            for option in options:
                try:
                    return option(value)
                except _Bad:
                    continue
            raise _Bad(f"{_shown(value)} is none of {hint}")

        return union
    if hint is type(None):
        return _null
    if hint in (bool, int, str):
        return _scalar(hint, {bool: "a bool", int: "an int", str: "a string"}[hint])
    if hint is float:
        return _number
    if origin is list:
        (item_hint,) = get_args(hint)
        item = _checker(item_hint)

        def listed(value: Any) -> list[Any]:
            if not isinstance(value, list):
                raise _Bad(f"expected a list, got {_shown(value)}")
            checked = []
            for i, v in enumerate(value):
                try:
                    checked.append(item(v))
                except _Bad as bad:
                    raise bad.under(f"[{i}]") from None
            return checked

        return listed
    if origin is dict:
        _, item_hint = get_args(hint)
        item = _checker(item_hint)

        def mapped(value: Any) -> dict[str, Any]:
            if not isinstance(value, dict):
                raise _Bad(f"expected an object, got {_shown(value)}")
            checked = {}
            for k, v in value.items():
                try:
                    checked[str(k)] = item(v)
                except _Bad as bad:
                    raise bad.under(f".{k}") from None
            return checked

        return mapped
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        cls = hint
        return lambda value: _made(cls, value)
    raise TypeError(f"no wire check for {hint!r}")  # pragma: no cover - a bug here


_FIELDS: dict[type, tuple[tuple[str, Check], ...]] = {}


def _fields_of(cls: type) -> tuple[tuple[str, Check], ...]:
    """A dataclass's fields and the check of each (made once per class)."""
    found = _FIELDS.get(cls)
    if found is None:
        hints = get_type_hints(cls)
        fields = dataclasses.fields(cls)
        found = _FIELDS[cls] = tuple((f.name, _checker(hints[f.name])) for f in fields)
    return found


def _made(cls: type[M], fields: Any) -> M:
    if not isinstance(fields, dict):
        raise _Bad("expected an object")
    values = {}
    for name, check in _fields_of(cls):
        if name not in fields:
            raise _Bad(f"no field {name!r}")
        try:
            values[name] = check(fields[name])
        except _Bad as bad:
            raise bad.under(f".{name}") from None
    return cls(**values)


def build(cls: type[M], fields: Any, where: str) -> M:
    """A ``cls`` made from ``fields`` (a JSON object), each field checked."""
    try:
        return _made(cls, fields)
    except _Bad as bad:
        raise WireError(f"{where}{bad.path}: {bad.message}") from None


# -- the other way ----------------------------------------------------------------------------

#: How a field's value becomes JSON: ``None`` when it already is (no copy made).
Plain = Callable[[Any], Any] | None

_PLAIN: dict[type, tuple[tuple[str, Plain], ...]] = {}


def _plain_of(hint: Any) -> Plain:
    """How values of type ``hint`` become JSON (``None``: as they are)."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return plain
    if get_origin(hint) is list:
        (item_hint,) = get_args(hint)
        item = _plain_of(item_hint)
        if item is not None:
            convert = item
            return lambda value: [convert(v) for v in value]
    return None


def plain(message: Any) -> dict[str, Any]:
    """A message's fields as the wire's JSON carries them (nested messages as objects;
    nothing copied that JSON takes as it is)."""
    cls = type(message)
    converters = _PLAIN.get(cls)
    if converters is None:
        hints = get_type_hints(cls)
        fields = dataclasses.fields(cls)
        converters = _PLAIN[cls] = tuple((f.name, _plain_of(hints[f.name])) for f in fields)
    return {
        name: getattr(message, name) if convert is None else convert(getattr(message, name))
        for name, convert in converters
    }
