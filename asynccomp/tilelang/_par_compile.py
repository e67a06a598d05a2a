"""``tilelang.par_compile`` with each function lowered in a worker of :mod:`._pool`
(installed by :func:`._offload.install`; TileLang's ``JITImpl.par_compile`` calls it
too, after elaborating its configs here). The same results, order, progress bar and
``ignore_error`` handling as TileLang's; another target or execution backend, or a
function that does not pickle, goes to TileLang's own."""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable, Iterable
from typing import Any

from . import _answers, _pool
from ._lowering import CompileCall, Given, Lowered, Recipe
from ._patched import cpus, originals, workers
from ._pool import Batch, Outcome, Unit
from ._transport import pack_or_why

__all__ = ("par_compile",)


def par_compile(
    funcs: Iterable[Any],
    out_idx: Any = None,
    execution_backend: Any = None,
    target: Any = None,
    target_host: Any = None,
    verbose: Any = None,
    pass_configs: Any = None,
    compile_flags: Any = None,
    num_workers: int | None = None,
    ignore_error: bool = False,
) -> list[Any]:
    """``tilelang.par_compile``, each function lowered in a worker (see the module's doc)."""
    from tqdm.auto import tqdm

    funcs = list(funcs)
    call = CompileCall(
        out_idx, execution_backend, target, target_host, verbose, pass_configs, compile_flags
    )
    why = _par_compile_unsupported(call) if funcs else "nothing to compile"
    packed = [] if why else [pack_or_why(Recipe(Given(f), call)) for f in funcs]
    why = why or next((p for p in packed if isinstance(p, str)), None)
    if why:
        own: Callable[..., list[Any]] = originals["par_compile"]
        return own(
            funcs, out_idx, execution_backend, target, target_host, verbose, pass_configs,
            compile_flags, num_workers, ignore_error,
        )  # fmt: skip
    units = []
    for func, one in zip(funcs, packed, strict=True):

        def finish(outcomes: list[Outcome], func: Any = func) -> Any:
            (outcome,) = outcomes
            if isinstance(outcome, Lowered) and outcome.symbol:
                with _answers.answering({outcome.symbol: outcome}):
                    return call(func)
            return call(func)

        assert not isinstance(one, str)
        units.append(Unit([one], finish))
    batch = Batch(
        _pool.pool(workers()),
        units,
        num_workers or min(len(funcs), cpus()),
    )
    results: list[Any] = [None] * len(funcs)
    index = {future: i for i, future in enumerate(batch.futures)}
    tilelang_logger = logging.getLogger("tilelang.jit")
    try:
        for future in tqdm(
            concurrent.futures.as_completed(batch.futures),
            total=len(funcs),
            desc="Parallel Compiling",
        ):
            i = index[future]
            if ignore_error:
                try:
                    results[i] = future.result()
                except Exception as e:
                    tilelang_logger.warning(f"Error compiling function at index {i}: {e}")
                    results[i] = None
            else:
                results[i] = future.result()
    except BaseException:
        # Ctrl-C, or a config's error: the configs not lowered yet are cancelled in
        # their workers, and nothing waits for them.
        batch.shutdown(wait=False)
        raise
    batch.shutdown()
    return results


def _par_compile_unsupported(call: CompileCall) -> str | None:
    from tilelang import env
    from tilelang.backend.module import create_backend_context

    try:
        context = create_backend_context(
            call.target if call.target is not None else env.get_default_target(),
            call.target_host,
            call.execution_backend
            if call.execution_backend is not None
            else env.get_default_execution_backend(),
        )
    except Exception as exc:  # TileLang's own call raises it, as it would
        return str(exc)
    if context.target.kind.name != "cuda" or context.execution_backend.name != "tvm_ffi":
        return "only CUDA with tvm_ffi is lowered in workers"
    return None
