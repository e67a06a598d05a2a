"""The parent's side of the lowering seam: TileLang's ``lower_to_host_device_ir``,
answered from a worker's result.

:func:`install` wraps TileLang's function (in ``tilelang.engine.lower``, and in
``tilelang.autotuner.grouped_compile``, which imported it by name). Inside
:func:`answering` a thread's calls for a function whose ``global_symbol`` has a worker's
answer return that answer (or raise that config's exception) instead of lowering again;
any other call, and every call outside :func:`answering`, lowers as TileLang does.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ._lowering import Lowered

__all__ = ("answering", "install", "uninstall")

_local = threading.local()
_originals: dict[str, Callable[..., Any]] = {}
#: Where TileLang's lowering calls find the function (the grouped path imported it).
_MODULES = ("tilelang.engine.lower", "tilelang.autotuner.grouped_compile")


def _symbol(func_or_mod: Any) -> str | None:
    attrs = getattr(func_or_mod, "attrs", None)
    if attrs is not None and "global_symbol" in attrs:
        return str(attrs["global_symbol"])
    return None


def _answered(original: Callable[..., Any]) -> Callable[..., Any]:
    def lower_to_host_device_ir(func_or_mod: Any, context: Any, runtime_only: bool = False) -> Any:
        answers: Mapping[str, Lowered] | None = getattr(_local, "answers", None)
        symbol = _symbol(func_or_mod)
        answer = None if answers is None or symbol is None else answers.get(symbol)
        if answer is None or answer.symbol != symbol:
            return original(func_or_mod, context, runtime_only)
        if answer.error is not None:
            raise answer.error
        assert answer.result is not None
        return answer.result

    lower_to_host_device_ir.__wrapped__ = original  # type: ignore[attr-defined]
    return lower_to_host_device_ir


@contextlib.contextmanager
def answering(answers: Mapping[str, Lowered]) -> Iterator[None]:
    """Answer this thread's lowerings from ``answers`` (by ``global_symbol``) within."""
    previous = getattr(_local, "answers", None)
    _local.answers = answers
    try:
        yield
    finally:
        _local.answers = previous


def install() -> None:
    """Wrap TileLang's ``lower_to_host_device_ir`` (idempotent)."""
    import importlib

    for name in _MODULES:
        module = importlib.import_module(name)  # `tilelang.engine.lower` is also a function
        if module.__name__ not in _originals:
            _originals[module.__name__] = module.lower_to_host_device_ir
            setattr(module, "lower_to_host_device_ir", _answered(module.lower_to_host_device_ir))  # noqa: B010


def uninstall() -> None:
    """Give TileLang its own function back."""
    import sys

    for name, original in _originals.items():
        setattr(sys.modules[name], "lower_to_host_device_ir", original)  # noqa: B010
    _originals.clear()
