"""What a lowering worker runs: elaborate one config, lower it, send the IR back.

A task is a :class:`Recipe` (packed by :mod:`._transport`): ``elaborate()`` gives the
config's ``PrimFunc`` (TileLang's DSL, in Python), ``compile(program)`` is the call
TileLang itself would make on it (``tilelang.compile`` with the tuner's arguments, or
one item of a grouped compile). The worker runs that call with TileLang's
``lower_to_host_device_ir`` (the Python-heavy part: semantic checks, the CUDA pass
pipeline, the tile operators' lowering) wrapped so that its answer is captured and the
rest (device codegen, the CUDA compile) never runs here; the parent runs TileLang's same
call again with that answer (:mod:`._answers`), so every step but the lowering is
TileLang's own, in the parent, and the sources and binaries are TileLang's.

Every TileLang exception is sent back as itself (pickled; as a ``RuntimeError`` with the
same text when it does not pickle), so the parent raises it where TileLang would.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from ._transport import Packed, as_main, unpack

__all__ = ("Lowered", "Raised", "Recipe", "lower", "warm_up")


@dataclasses.dataclass(frozen=True)
class Recipe:
    """One config's work: ``compile(elaborate())`` as TileLang would run it."""

    elaborate: Callable[[], Any]
    compile: Callable[[Any], Any]


@dataclasses.dataclass(frozen=True)
class Lowered:
    """A config elaborated: its ``program``, and the answer of the lowering TileLang's
    call asked for (``symbol``: the function's ``global_symbol`` then) or the exception
    it raised (``error``). ``symbol`` is ``None`` if the call never lowered (a cache of
    TileLang's answered it): the parent then runs it as TileLang does."""

    program: Any
    symbol: str | None
    result: tuple[Any, ...] | None
    error: BaseException | None


@dataclasses.dataclass(frozen=True)
class Raised:
    """The config's elaboration raised ``error`` (TileLang's exception)."""

    error: BaseException


class _Captured(Exception):
    def __init__(self, symbol: str, result: tuple[Any, ...] | None, error: BaseException | None):
        super().__init__(symbol)
        self.symbol, self.result, self.error = symbol, result, error


def _capture(original: Callable[..., Any]) -> Callable[..., Any]:
    def lower_to_host_device_ir(func_or_mod: Any, context: Any, runtime_only: bool = False) -> Any:
        symbol = _symbol(func_or_mod)
        try:
            result = original(func_or_mod, context, runtime_only)
        except Exception as exc:
            raise _Captured(symbol, None, _portable(exc)) from None
        raise _Captured(symbol, tuple(result), None)

    return lower_to_host_device_ir


def _symbol(func_or_mod: Any) -> str:
    attrs = getattr(func_or_mod, "attrs", None)
    if attrs is not None and "global_symbol" in attrs:
        return str(attrs["global_symbol"])
    return ""


def _portable(exc: BaseException) -> BaseException:
    """What the parent re-raises for ``exc``, with the worker's traceback as a note:
    ``exc`` if it pickles; else the same type made from its ``args`` (a TVM error holds
    its C++ error object, which does not pickle: the message is its first argument);
    else a ``RuntimeError`` with its type and message."""
    import pickle

    import cloudpickle

    trace = "".join(traceback.format_exception(exc))
    note = f"raised in an asynccomp lowering worker (pid {os.getpid()}):\n{trace}"
    candidates: list[Callable[[], BaseException]] = [
        lambda: exc,
        lambda: type(exc)(*exc.args),
        lambda: RuntimeError(f"{type(exc).__name__}: {exc}"),
    ]
    for make in candidates:
        try:
            clone = make()
            if str(clone) != str(exc) and make is not candidates[-1]:
                continue
            pickle.loads(cloudpickle.dumps(clone))
        except Exception:
            continue
        _add_note(clone, note)
        return clone
    return RuntimeError(f"{type(exc).__name__}: {exc}")


def _add_note(exc: BaseException, note: str) -> None:
    add = getattr(exc, "add_note", None)  # Python 3.11: shown under the traceback
    if add is not None:
        add(note)


def warm_up(sys_path: list[str]) -> None:
    """A worker's initializer: the parent's import path, TileLang imported once, its
    kernel cache off (the parent's call consults it), the lowering captured."""
    for entry in reversed(sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    import importlib

    import tilelang  # noqa: F401 - the import the worker exists to keep
    from tilelang import env

    env.disable_cache()
    for name in _CAPTURED:
        module = importlib.import_module(name)  # `tilelang.engine.lower` is also a function
        _originals[name] = module.lower_to_host_device_ir
        setattr(module, "lower_to_host_device_ir", _capture(module.lower_to_host_device_ir))  # noqa: B010


_CAPTURED = ("tilelang.engine.lower", "tilelang.autotuner.grouped_compile")
_originals: dict[str, Callable[..., Any]] = {}  # TileLang's own, once warm_up captured them


@contextlib.contextmanager
def uncaptured() -> Iterator[None]:
    """TileLang's lowering whole again, for a task that wants its source
    (:mod:`._pch_ahead`'s probe); captured again after."""
    captured = {name: sys.modules[name].lower_to_host_device_ir for name in _originals}
    for name, original in _originals.items():
        setattr(sys.modules[name], "lower_to_host_device_ir", original)  # noqa: B010
    try:
        yield
    finally:
        for name, wrapped in captured.items():
            setattr(sys.modules[name], "lower_to_host_device_ir", wrapped)  # noqa: B010


def lower(packed: Packed) -> Lowered | Raised:
    """The task: one config's recipe, elaborated and lowered (see the module's doc)."""
    recipe, main = unpack(packed)
    with as_main(main):
        try:
            program = recipe.elaborate()
        except Exception as exc:
            return Raised(_portable(exc))
        try:
            recipe.compile(program)
        except _Captured as captured:
            return Lowered(program, captured.symbol, captured.result, captured.error)
        except Exception as exc:  # before the lowering (TileLang's argument checks)
            return Lowered(program, "", None, _portable(exc))
        return Lowered(program, None, None, None)


@dataclasses.dataclass(frozen=True)
class CompileCall:
    """``tilelang.compile(program, ...)`` with these arguments (the tuner's
    ``CompileArgs.compile_program``; ``JITImpl.compile`` adds ``compile_flags``)."""

    out_idx: Any
    execution_backend: Any
    target: Any
    target_host: Any
    verbose: Any
    pass_configs: Any
    compile_flags: Any = None

    def __call__(self, program: Any) -> Any:
        import tilelang

        return tilelang.compile(
            program,
            out_idx=self.out_idx,
            execution_backend=self.execution_backend,
            target=self.target,
            target_host=self.target_host,
            verbose=self.verbose,
            pass_configs=self.pass_configs,
            compile_flags=self.compile_flags,
        )


@dataclasses.dataclass(frozen=True)
class GroupedCall:
    """Config ``index`` of a grouped compile, as TileLang's
    ``compile_grouped_unit_tvm_ffi`` lowers it (its symbol renamed ``*_gc_<index>``)."""

    compile_args: Any
    index: int

    def __call__(self, program: Any) -> Any:
        from tilelang.autotuner.grouped_compile import compile_grouped_unit_tvm_ffi

        results = compile_grouped_unit_tvm_ffi(
            [(self.index, {})], self.compile_args, lambda **_: program
        )
        for _, _, _, error in results:  # it keeps each item's exception as a result
            if error is not None:
                raise error
        return results


@dataclasses.dataclass(frozen=True)
class Call:
    """``fn(*args, **kwargs)``: a kernel factory's config (``AutoTuner.from_kernel``)."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __call__(self) -> Any:
        return self.fn(*self.args, **self.kwargs)


@dataclasses.dataclass(frozen=True)
class JitElaborate:
    """``JITImpl.get_tir(*args, **kwargs)`` of a ``@tilelang.jit`` function, rebuilt
    here from the function and the decorator's arguments (a ``JITImpl`` holds compiled
    kernels, which do not travel)."""

    function: Callable[..., Any]
    settings: dict[str, Any]
    mode: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    token: str  # one per autotune: the worker decorates the function once for all

    def __call__(self) -> Any:
        import tilelang

        impl = _decorated.get(self.token)
        if impl is None:
            impl = tilelang.jit(**self.settings)(self.function)
            impl.mode = self.mode
            _decorated.clear()  # the last autotune's only: no growth over a session
            _decorated[self.token] = impl
        return impl.get_tir(*self.args, **self.kwargs)


_decorated: dict[str, Any] = {}


@dataclasses.dataclass(frozen=True)
class Given:
    """An elaborated ``PrimFunc`` (``par_compile``'s inputs)."""

    program: Any

    def __call__(self) -> Any:
        return self.program
