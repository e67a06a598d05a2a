"""TileLang's many-kernel entry points, lowering on the workers of :mod:`._pool`.

:func:`install` (``register(lower_in_workers=True)``, the default) replaces:

- ``AutoTuner._prepare_compile_execution`` (what ``AutoTuner.run`` and the
  ``@tilelang.autotune`` decorator compile their configs with, grouped or not): every
  config is elaborated and lowered in a worker, and TileLang's own code runs the rest in
  this process (device codegen, host codegen, the kernel object; the CUDA compile goes
  through the registered callback, asynccomp's engine) on as many threads as CPUs (its
  own pool has ``int(0.9 * CPUs)``, one on two cores).
- ``AutoTuneImpl._make_jit_compile_func``: the decorator's per-config compile, which
  TileLang runs under one lock (``_pass_configs_lock``, for per-config pass configs it
  sets on the shared ``JITImpl``); here each config gets its own merged pass configs and
  nothing is shared, so nothing is locked. Called directly it is TileLang's.
- ``tilelang.par_compile`` (``JITImpl.par_compile`` calls it): each ``PrimFunc`` lowered
  in a worker (:mod:`._par_compile`).

Anything else (another execution backend or target, a ``jit_compile`` of the user's, a
decorator with ``debug_root_path``) runs as TileLang runs it. A factory that does not
pickle runs in this process, with a warning naming why; one that pickles but does not
load in a worker likewise, per config.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from . import _answers, _pool
from ._lowering import (
    Call,
    CompileCall,
    GroupedCall,
    JitElaborate,
    Lowered,
    Raised,
    Recipe,
)
from ._par_compile import par_compile
from ._patched import cpus, originals, set_workers, workers
from ._pool import Batch, Outcome, Unavailable, Unit
from ._transport import Packed, pack_or_why

__all__ = ("DecoratorCompile", "install", "installed", "uninstall")

logger = logging.getLogger("asynccomp.tilelang")

_PASS_CONFIGS_KEY = "__pass_configs__"  # tilelang/autotuner/tuner.py


def installed() -> bool:
    return bool(originals)


def start(count: int | None = None, timeout: float | None = _pool.LOWERING_TIMEOUT) -> None:
    """Start ``count`` lowering workers (default: one per CPU) in the background, or
    keep those running (another ``count`` replaces them), each config for at most
    ``timeout`` seconds. TileLang need not be imported here yet: the template the
    workers fork from imports it, at the same time as this process does."""
    size = count or cpus()
    set_workers(size)
    _pool.set_timeout(timeout)
    _pool.pool(size)


def install(count: int | None = None, timeout: float | None = _pool.LOWERING_TIMEOUT) -> None:
    """Put the replacements in place, lowering on ``count`` workers (:func:`start`;
    idempotent). The workers live on, warm, for every autotune and ``par_compile`` of
    the process."""
    import sys

    start(count, timeout)
    import tilelang
    from tilelang.autotuner.tuner import AutoTuneImpl, AutoTuner

    jit_module = sys.modules["tilelang.jit"]  # `tilelang.jit` is the decorator

    if not originals:
        originals["prepare"] = AutoTuner._prepare_compile_execution
        originals["make_compile"] = AutoTuneImpl._make_jit_compile_func
        originals["par_compile"] = jit_module.par_compile
        AutoTuner._prepare_compile_execution = _prepare_compile_execution
        AutoTuneImpl._make_jit_compile_func = _make_jit_compile_func
        setattr(jit_module, "par_compile", par_compile)  # noqa: B010
        tilelang.par_compile = par_compile
        _answers.install()


def uninstall() -> None:
    """TileLang's own functions back, the workers ended."""
    if originals:
        import sys

        import tilelang
        from tilelang.autotuner.tuner import AutoTuneImpl, AutoTuner

        AutoTuner._prepare_compile_execution = originals.pop("prepare")
        AutoTuneImpl._make_jit_compile_func = originals.pop("make_compile")
        par_compile = originals.pop("par_compile")
        setattr(sys.modules["tilelang.jit"], "par_compile", par_compile)  # noqa: B010
        tilelang.par_compile = par_compile
        _answers.uninstall()
    _pool.close()


class DecoratorCompile:
    """The ``@tilelang.autotune`` decorator's per-config compile: TileLang's own closure
    when called (its ``_pass_configs_lock`` included), and what it compiles, which
    :func:`_prepare_compile_execution` compiles without the lock."""

    def __init__(self, autotune: Any, mode: str, args: tuple[Any, ...], kwargs: dict[str, Any]):
        self.impl = autotune.jit_impl  # the JITImpl the decorator wraps
        self.mode, self.args, self.kwargs = mode, args, kwargs
        self.own = originals["make_compile"](autotune, mode, args, kwargs)

    def __call__(self, **config_arg: Any) -> Any:
        return self.own(**config_arg)


def _make_jit_compile_func(
    self: Any, mode: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Callable[..., Any]:
    return DecoratorCompile(self, mode, args, kwargs)


class _Plan:
    """How one autotune's configs are elaborated (in a worker) and compiled (here)."""

    def __init__(self, tuner: Any, compile_func: Any) -> None:
        self.tuner = tuner
        self.decorator = compile_func if isinstance(compile_func, DecoratorCompile) else None
        self.token = uuid.uuid4().hex

    def kwargs(self, config_arg: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in config_arg.items() if k != _PASS_CONFIGS_KEY}

    def elaborate(self, config_arg: dict[str, Any]) -> Callable[[], Any]:
        d = self.decorator
        if d is None:
            return Call(self.tuner.fn, kwargs=self.kwargs(config_arg))
        impl = d.impl
        settings = {
            "out_idx": impl.out_idx,
            "target": impl.target,
            "target_host": impl.target_host,
            "execution_backend": impl.execution_backend,
            "verbose": impl.verbose,
            "pass_configs": impl.pass_configs,
            "compile_flags": impl.compile_flags,
        }
        merged = {**d.kwargs, **self.kwargs(config_arg)}
        return JitElaborate(impl.func.orig_func, settings, d.mode, d.args, merged, self.token)

    def compile_call(self, config_arg: dict[str, Any]) -> CompileCall:
        """The ``tilelang.compile`` call TileLang makes for this config."""
        per_config = config_arg.get(_PASS_CONFIGS_KEY)
        d = self.decorator
        if d is None:
            a = self.tuner._merge_pass_configs_into_compile_args(per_config)
            return CompileCall(
                a.out_idx, a.execution_backend, a.target, a.target_host, a.verbose, a.pass_configs
            )
        impl = d.impl
        configs = impl.pass_configs
        if per_config is not None:
            configs = {**(configs or {}), **per_config}
        return CompileCall(
            impl.out_idx,
            impl.execution_backend,
            impl.target,
            impl.target_host,
            impl.verbose,
            configs,
            impl.compile_flags,
        )

    def compile(self, config_arg: dict[str, Any], program: Any) -> Any:
        """This config's kernel from its elaborated ``program``, as TileLang makes it
        (the decorator's lazy mode: through the ``JITImpl``'s kernel cache)."""
        d = self.decorator
        if d is not None and d.mode == "lazy" and config_arg.get(_PASS_CONFIGS_KEY) is None:
            impl = d.impl
            key, _ = impl.func.parse_args(*d.args, **{**d.kwargs, **self.kwargs(config_arg)})
            kernel = impl._kernel_cache.get(key)
            if kernel is None:
                kernel = self.compile_call(config_arg)(program)
                impl._kernel_cache[key] = kernel
            return kernel
        return self.compile_call(config_arg)(program)


def _plan(tuner: Any, compile_func: Any, elaborate_func: Any) -> _Plan | str:
    """A plan, or why this autotune runs as TileLang runs it."""
    from tilelang.autotuner.tuner import AutoTuner
    from tilelang.language.eager import JITFunc
    from tvm.target import Target

    args = tuner.compile_args
    target = args.target
    if not (isinstance(target, Target) and target.kind.name == "cuda"):
        return f"target {target}: only CUDA is lowered in workers"
    if str(args.execution_backend) != "tvm_ffi":
        return f"execution backend {args.execution_backend}: only tvm_ffi is lowered in workers"
    if isinstance(compile_func, DecoratorCompile):
        if compile_func.impl.debug_root_path is not None:
            return "the decorator's debug_root_path is set"
        if not isinstance(compile_func.impl.func, JITFunc):
            return "the decorator wraps a PrimFunc"
        return _Plan(tuner, compile_func)
    own_compile = getattr(compile_func, "__func__", None) is AutoTuner._default_compile
    own_elaborate = getattr(elaborate_func, "__func__", None) is AutoTuner._default_elaborate
    if own_compile and own_elaborate:
        return _Plan(tuner, compile_func)
    return "the autotuner's jit_compile is not TileLang's own"


def _on_device() -> Callable[[], None]:
    """What TileLang's compile threads do first: bind the caller's CUDA device."""
    import torch

    if not torch.cuda.is_available():
        return lambda: None
    device = torch.cuda.current_device()
    return lambda: torch.cuda.set_device(device)


def _prepare_compile_execution(
    self: Any,
    config_args: list[dict[str, Any]],
    grouped_compile_active: bool,
    group_compile_size: int,
    compile_func: Callable[..., Any],
    elaborate_func: Callable[..., Any],
) -> Any:
    own = originals["prepare"]
    plan = _plan(self, compile_func, elaborate_func)
    if isinstance(plan, _Plan) and grouped_compile_active:
        grouped = _grouped(self, plan, config_args, group_compile_size, elaborate_func)
        if not isinstance(grouped, str):
            return grouped
        plan = grouped
    packed: list[Packed] = []
    if isinstance(plan, _Plan):
        for config_arg in config_args:
            one = pack_or_why(Recipe(plan.elaborate(config_arg), plan.compile_call(config_arg)))
            if isinstance(one, str):
                plan = one
                break
            packed.append(one)
    if not isinstance(plan, _Plan):
        logger.warning("asynccomp.tilelang: lowering this autotune in this process: %s", plan)
        return own(
            self,
            config_args,
            grouped_compile_active,
            group_compile_size,
            compile_func,
            elaborate_func,
        )
    bind = _on_device()
    units = []
    for i, config_arg in enumerate(config_args):

        def finish(
            outcomes: list[Outcome], i: int = i, config_arg: dict[str, Any] = config_arg
        ) -> Any:
            bind()
            try:
                kernel = _compile_one(plan, compile_func, config_arg, outcomes[0])
            except Exception as exc:
                return [(i, config_arg, None, exc)]
            return [(i, config_arg, kernel, None)]

        units.append(Unit([packed[i]], finish))
    batch = Batch(_pool.pool(workers()), units, _finishers(self))
    units_items = [[(i, c)] for i, c in enumerate(config_args)]
    return (
        batch,
        batch.futures,
        dict(zip(batch.futures, units_items, strict=True)),
        "Compiling configurations",
    )


def _compile_one(
    plan: _Plan, compile_func: Any, config_arg: dict[str, Any], outcome: Outcome
) -> Any:
    if isinstance(outcome, Raised):
        raise outcome.error
    if isinstance(outcome, Unavailable):
        return compile_func(**dict(config_arg))  # TileLang's own, in this process
    answers = {outcome.symbol: outcome} if outcome.symbol else {}
    with _answers.answering(answers):
        return plan.compile(config_arg, outcome.program)


def _grouped(
    tuner: Any,
    plan: _Plan,
    config_args: list[dict[str, Any]],
    group_size: int,
    elaborate_func: Callable[..., Any],
) -> Any:
    """TileLang's grouped units (its bucketing by per-config pass configs), each
    finished by its own ``compile_grouped_unit_tvm_ffi``; or why not (a factory that
    does not pickle), the configs untouched."""
    from tilelang.autotuner.grouped_compile import compile_grouped_unit_tvm_ffi

    buckets: dict[Any, list[tuple[int, dict[str, Any], Any]]] = {}
    for i, cfg in enumerate(config_args):
        per_config = cfg.get(_PASS_CONFIGS_KEY)
        key = tuple(sorted(per_config.items())) if per_config else None
        buckets.setdefault(key, []).append((i, cfg, per_config))
    bind = _on_device()
    units: list[Unit] = []
    units_items: list[list[tuple[int, dict[str, Any]]]] = []
    for bucket in buckets.values():
        per_config = bucket[0][2]
        compile_args = tuner._merge_pass_configs_into_compile_args(per_config)
        items = [(i, cfg) for i, cfg, _ in bucket]
        for start in range(0, len(items), group_size):
            unit_items = items[start : start + group_size]
            recipes = []
            for i, cfg in unit_items:
                packed = pack_or_why(Recipe(plan.elaborate(cfg), GroupedCall(compile_args, i)))
                if isinstance(packed, str):
                    return packed  # nothing changed yet: TileLang's own path takes over
                recipes.append(packed)

            def finish(
                outcomes: list[Outcome],
                unit_items: list[tuple[int, dict[str, Any]]] = unit_items,
                compile_args: Any = compile_args,
            ) -> Any:
                bind()
                pending = iter(outcomes)

                def elaborate(**config_arg: Any) -> Any:
                    outcome = next(pending)
                    if isinstance(outcome, Raised):
                        raise outcome.error
                    if isinstance(outcome, Lowered):
                        return outcome.program
                    return elaborate_func(**config_arg)

                answers = {o.symbol: o for o in outcomes if isinstance(o, Lowered) and o.symbol}
                with _answers.answering(answers):
                    return compile_grouped_unit_tvm_ffi(unit_items, compile_args, elaborate)

            units.append(Unit(recipes, finish))
            units_items.append(unit_items)
    for config_arg in config_args:  # as TileLang's own grouped path leaves them
        config_arg.pop(_PASS_CONFIGS_KEY, None)
    batch = Batch(_pool.pool(workers()), units, _finishers(tuner))
    desc = "Compiling configurations (grouped)"
    return batch, batch.futures, dict(zip(batch.futures, units_items, strict=True)), desc


def _finishers(tuner: Any) -> int:
    """Threads compiling at once: one per CPU (TileLang's own pool: ``int(0.9 *
    CPUs)``), or ``TILELANG_AUTO_TUNING_CPU_COUNTS`` where the user set it."""
    from tilelang import env

    if int(env.TILELANG_AUTO_TUNING_CPU_COUNTS) > 0:
        return int(tuner._resolve_num_compile_workers())
    return cpus()
