"""Kernel factories to a lowering worker, with the source TileLang's frontend reads.

TileLang's DSL (``@T.prim_func``, ``@tilelang.jit``) parses a kernel's Python source
(``inspect.getsourcelines``) when it elaborates it. A factory from an importable module
travels by name and the worker reads the same file. One defined in ``__main__``, in a
notebook cell or as a closure travels by value (cloudpickle), and there two things are
lost: cloudpickle 3.1 names every code object it sends ``<dynamic-code>``, and a
notebook's cells are in the notebook's ``linecache``, not on disk. :func:`pack` keeps
each code object's file name and sends the lines the parent's ``linecache`` holds for
it; :func:`unpack` puts those lines in the worker's ``linecache`` (with no modification
time, so ``linecache.checkcache`` keeps them) before it loads the factory.

A third: with ``from __future__ import annotations`` TileLang evaluates a kernel's
annotations (``T.Tensor(...)``) in the globals of the module the function names
(``typing.ForwardRef(module=...)``), and in a worker ``__main__`` is the worker. So
:func:`pack` also sends the parent's ``__main__`` globals that the functions it sends by
value use, and :func:`as_main` makes them the worker's ``__main__`` while a task runs.
"""

from __future__ import annotations

import contextlib
import io
import linecache
import pickle
import sys
import types
from collections.abc import Iterator
from typing import Any

__all__ = ("Packed", "as_main", "pack", "pack_or_why", "unpack")

# (pickle of the object, {file name: its lines as the parent read them})
Packed = tuple[bytes, dict[str, list[str]]]


def _code_at(args: tuple[Any, ...], filename: str) -> types.CodeType:
    return types.CodeType(*args).replace(co_filename=filename)


def pack_or_why(value: object) -> Packed | str:
    """:func:`pack`, or why ``value`` cannot travel (a factory runs in process then)."""
    try:
        return pack(value)
    except Exception as exc:
        return f"the kernel factory does not pickle ({type(exc).__name__}: {exc})"


def pack(value: object) -> Packed:
    """``value`` pickled by cloudpickle, keeping the file names of the code it sends by
    value, and those files' lines. Raises what pickling raises (``TypeError``,
    ``pickle.PicklingError``) for a value that cannot travel."""
    import cloudpickle
    from cloudpickle import cloudpickle as implementation

    sources: dict[str, list[str]] = {}
    main: dict[str, Any] = {}

    class Pickler(cloudpickle.Pickler):  # type: ignore[misc]
        def reducer_override(self, obj: Any) -> Any:
            if isinstance(obj, types.FunctionType) and obj.__module__ == "__main__":
                names = implementation._extract_code_globals(obj.__code__)
                main.update({k: obj.__globals__[k] for k in names if k in obj.__globals__})
            if isinstance(obj, types.CodeType):
                _, args = implementation._code_reduce(obj)
                filename = obj.co_filename
                if filename not in sources:
                    sources[filename] = linecache.getlines(filename)
                return _code_at, (args, filename)
            return super().reducer_override(obj)

    buffer = io.BytesIO()
    pickler = Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dump(value)
    pickler.dump(main)  # after the value: the functions that fill it are met first
    return buffer.getvalue(), {name: lines for name, lines in sources.items() if lines}


def unpack(packed: Packed) -> tuple[Any, dict[str, Any]]:
    """The value :func:`pack` packed, and the ``__main__`` globals its functions use;
    its sources in this process's ``linecache``."""
    payload, sources = packed
    for filename, lines in sources.items():  # the parent's view wins: what it elaborates
        linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)
    stream = io.BytesIO(payload)
    unpickler = pickle.Unpickler(stream)
    return unpickler.load(), unpickler.load()


@contextlib.contextmanager
def as_main(names: dict[str, Any]) -> Iterator[None]:
    """A module holding ``names`` is ``__main__`` within (none given: unchanged)."""
    if not names:
        yield
        return
    module = types.ModuleType("__main__")
    module.__dict__.update(names)
    saved = sys.modules["__main__"]
    sys.modules["__main__"] = module
    try:
        yield
    finally:
        sys.modules["__main__"] = saved
