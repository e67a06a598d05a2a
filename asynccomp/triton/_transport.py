"""Triton kernels to a worker process, as the worker must see them to build the same
kernel.

A compile's source holds ``@triton.jit`` functions (the kernel, and any passed as a
``constexpr``), which are not plain pickles: a ``JITFunction`` keeps every kernel it has
built, and reads its own source text (``inspect.getsourcelines``) when it is made.

- A kernel of an importable module travels by name (module, qualified name): the worker
  imports that module, as ``pickle`` does for functions.
- One defined in ``__main__``, in a notebook cell or in a function (a closure) travels by
  value: its Python function by cloudpickle (``pip install cloudpickle``), its
  ``@triton.jit`` settings, the source text the parent's ``JITFunction`` holds, and the
  lines the parent's ``linecache`` holds for its file, which the worker puts in its own
  ``linecache`` before it makes the ``JITFunction`` (cloudpickle 3.1.3 renames every
  code object's file ``<dynamic-code>``; Triton writes the file name into the kernel's
  line info, so the code objects keep their names here).

Whatever travels, the worker checks that Triton's cache key of what it got equals the
parent's before compiling (:mod:`._worker`): a kernel that differs there (its file edited
since the parent imported it) is compiled in the parent instead, never wrongly.
"""

from __future__ import annotations

import importlib
import io
import linecache
import pickle
import sys
import types
from typing import Any

__all__ = ("CannotTravel", "Packed", "pack", "unpack")

# (pickle of the value, {file name: its lines as the parent's linecache holds them})
Packed = tuple[bytes, dict[str, list[str]]]


class CannotTravel(Exception):
    """A value cannot be sent to a worker; the message says why and what to do."""


def _jit_by_name(module: str, qualname: str) -> Any:
    from triton.runtime.jit import JITCallable

    value: Any = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    while not isinstance(value, JITCallable) and hasattr(value, "fn"):
        value = value.fn  # @triton.autotune / @triton.heuristics around the kernel
    if not isinstance(value, JITCallable):
        raise CannotTravel(f"{module}.{qualname} is not a Triton function in the worker")
    return value


def _jit_by_value(cls: type, fn: Any, settings: dict[str, Any], src: str) -> Any:
    jit = cls(fn, **settings)
    if jit.src != src:  # the parent's was changed with _unsafe_update_src
        jit._unsafe_update_src(src)
    return jit


def _code_at(args: tuple[Any, ...], filename: str) -> types.CodeType:
    return types.CodeType(*args).replace(co_filename=filename)


def _resolves_to(obj: Any) -> bool:
    """Whether importing ``obj``'s module and walking its qualified name finds ``obj``."""
    from triton.runtime.jit import JITCallable

    module = sys.modules.get(obj.__module__)
    if module is None or obj.__module__ in ("__main__", "__mp_main__"):
        return False
    if "<locals>" in obj.__qualname__:
        return False
    value: Any = module
    try:
        for part in obj.__qualname__.split("."):
            value = getattr(value, part)
    except AttributeError:
        return False
    while not isinstance(value, JITCallable) and hasattr(value, "fn"):
        value = value.fn
    return value is obj


def _settings(obj: Any) -> dict[str, Any] | None:
    """The keyword arguments that make ``obj`` again, or ``None`` for a kind of Triton
    function this module does not rebuild."""
    from triton.runtime.jit import ConstexprFunction, JITFunction

    if type(obj) is JITFunction:
        return {
            "version": obj.version,
            "do_not_specialize": obj.do_not_specialize,
            "do_not_specialize_on_alignment": obj.do_not_specialize_on_alignment,
            "debug": obj.debug,
            "noinline": obj.noinline,
            "repr": obj._repr,
            "launch_metadata": obj.launch_metadata,
        }
    if type(obj) is ConstexprFunction:
        return {}
    return None


def pack(value: object) -> Packed:
    """``value`` pickled for a worker (see the module's doc). Raises :class:`CannotTravel`
    (or what pickling raises) for a value that cannot go."""
    from triton.runtime.jit import JITCallable

    try:
        import cloudpickle
        from cloudpickle import cloudpickle as implementation
    except ImportError:
        cloudpickle = None
    sources: dict[str, list[str]] = {}
    base: type = pickle.Pickler if cloudpickle is None else cloudpickle.Pickler

    class Pickler(base):  # type: ignore[misc]
        def reducer_override(self, obj: Any) -> Any:
            if isinstance(obj, JITCallable):
                return self._jit(obj)
            if cloudpickle is None:
                return NotImplemented
            if isinstance(obj, types.CodeType):
                _, args = implementation._code_reduce(obj)
                filename = obj.co_filename
                if filename not in sources:
                    sources[filename] = linecache.getlines(filename)
                return _code_at, (args, filename)
            return super().reducer_override(obj)

        def _jit(self, obj: Any) -> Any:
            if _resolves_to(obj):
                return _jit_by_name, (obj.__module__, obj.__qualname__)
            where = (
                "in __main__ (a script or a notebook)"
                if obj.__module__ in ("__main__", "__mp_main__")
                else f"in a function of {obj.__module__} (a closure)"
                if "<locals>" in obj.__qualname__
                else f"as {obj.__module__}.{obj.__qualname__}, which its module does not hold"
            )
            if cloudpickle is None:
                raise CannotTravel(
                    f"the Triton function {obj.__qualname__} is defined {where}, and sending "
                    "it to a worker by value needs cloudpickle (pip install cloudpickle); "
                    "define it in an importable module, or install cloudpickle"
                )
            settings = _settings(obj)
            if settings is None:
                raise CannotTravel(
                    f"the Triton function {obj.__qualname__} ({type(obj).__name__}) is "
                    f"defined {where}; asynccomp.triton sends only @triton.jit and "
                    "@triton.constexpr_function ones by value"
                )
            return _jit_by_value, (type(obj), obj.fn, settings, obj.src)

    buffer = io.BytesIO()
    Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue(), {name: lines for name, lines in sources.items() if lines}


def unpack(packed: Packed) -> Any:
    """The value :func:`pack` packed (its sources put in this process's ``linecache``
    first: the Triton functions it holds read them as they are made)."""
    payload, sources = packed
    for filename, lines in sources.items():  # the parent's view wins: what it compiles
        linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)
    return pickle.loads(payload)
