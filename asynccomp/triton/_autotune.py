"""``@triton.autotune`` without the serial wall: every config compiles at once on the
workers, and each is benchmarked as soon as it is compiled.

Triton's ``Autotuner.run`` benchmarks its pruned configs one at a time
(``{config: self._bench(*args, config=config, **kwargs) for config in pruned_configs}``),
and each config compiles on its first call inside ``_bench``: compile, benchmark, compile,
benchmark. ``run`` itself is left as Triton wrote it (its pruning, its disk cache of
timings, its choice ``min(timings, key=timings.get)``, its hooks and printing); what is
replaced (:func:`install`):

- ``Autotuner.prune_configs``: Triton's, which also notes the list it returns (the one
  ``run`` benchmarks next).
- ``Autotuner._bench``: at the first config of that list, every config's compile starts
  at once (Triton's own ``JITFunction.run(warmup=True)`` of the config under Triton's
  ``AsyncCompileMode``, so each compile goes, as Triton submits it, to a thread waiting on
  an asynccomp worker). Then, asked for config *i*, it benchmarks the configs whose
  kernels are ready, in the order they become ready, with Triton's own ``_bench`` (the
  same ``do_bench``, hooks and error handling), until config *i* has its timing, and
  answers that. Triton's ``run`` gets each config's own timing in its own order, so it
  chooses as Triton alone would given the same timings.
- ``Autotuner.warmup``: Triton's, with every config's compile in flight at once.

Failures are Triton's: a config whose compile raises what ``_bench`` catches
(``OutOfResources``, ``PTXASError``, ``CompileTimeAssertionFailure``) gets an infinite
timing; anything else is raised when ``run`` reaches that config (configs after it are
not benchmarked). What Triton alone cannot survive costs one config here: a worker that
dies compiling it (Triton's C++ aborting) or runs past the compile timeout drops that
config (infinite timing, logged) and the others go on.

Left as Triton runs it: an autotune inside the user's own ``AsyncCompileMode``, a list of
one config, and a ``_bench`` call that is not ``run``'s benchmark of the list
``prune_configs`` returned.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Sequence
from typing import Any

from . import _pool
from ._errors import TritonCompileCrashed, TritonCompileTimeout

__all__ = ("install", "installed", "uninstall")

logger = logging.getLogger("asynccomp.triton")

_PRUNED = "_asynccomp_pruned"  # on the tuner: the list prune_configs returned last
_ROUND = "_asynccomp_round"  # on the tuner: the benchmark of that list under way

originals: dict[str, Any] = {}


def installed() -> bool:
    return bool(originals)


def install() -> None:
    from triton.runtime.autotuner import Autotuner

    if not originals:
        originals["prune_configs"] = Autotuner.prune_configs
        originals["_bench"] = Autotuner._bench
        originals["warmup"] = Autotuner.warmup
        Autotuner.prune_configs = _prune_configs
        Autotuner._bench = _bench
        Autotuner.warmup = _warmup


def uninstall() -> None:
    from triton.runtime.autotuner import Autotuner

    if originals:
        Autotuner.prune_configs = originals.pop("prune_configs")
        Autotuner._bench = originals.pop("_bench")
        Autotuner.warmup = originals.pop("warmup")


def _prune_configs(self: Any, kwargs: dict[str, Any]) -> Any:
    pruned = originals["prune_configs"](self, kwargs)
    self.__dict__[_PRUNED] = list(pruned)
    return pruned


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    """Threads for Triton's async compile mode: each waits on one worker's compile."""
    return concurrent.futures.ThreadPoolExecutor(
        _pool.size(), thread_name_prefix="asynccomp-triton"
    )


def _bench(self: Any, *args: Any, config: Any, **meta: Any) -> Any:
    own = originals["_bench"]
    bench: _Round | None = self.__dict__.get(_ROUND)
    if bench is not None and not bench.asks(config, args, meta):
        bench.close()  # not run's benchmark of that list any more
        bench = None
    if bench is None:
        from triton.runtime._async_compile import active_mode

        configs = self.__dict__.pop(_PRUNED, None)
        if (
            not configs
            or len(configs) < 2
            or configs[0] is not config
            or active_mode.get() is not None
        ):
            return own(self, *args, config=config, **meta)
        bench = _Round(self, configs, args, meta)
    return bench.timing(config)


def _warmup(self: Any, *args: Any, **kwargs: Any) -> Any:
    from triton.runtime._async_compile import AsyncCompileMode, FutureKernel, active_mode

    own = originals["warmup"]
    if active_mode.get() is not None:
        return own(self, *args, **kwargs)
    executor = _executor()
    token = active_mode.set(AsyncCompileMode(executor))
    try:
        kernels = own(self, *args, **kwargs)
    finally:
        active_mode.reset(token)
    try:  # in the configs' order: the first failure raises, as in Triton's loop
        return [k.result() if isinstance(k, FutureKernel) else k for k in kernels]
    finally:
        executor.shutdown(wait=False, cancel_futures=True)


class _Round:
    """One benchmark of a pruned list of configs (see the module's doc)."""

    def __init__(self, tuner: Any, configs: Sequence[Any], args: tuple[Any, ...], meta: Any):
        from triton.runtime._async_compile import AsyncCompileMode

        self.tuner, self.configs, self.args, self.meta = tuner, list(configs), args, meta
        self.asked = 0  # configs run has asked for
        self.outcomes: dict[int, tuple[bool, Any]] = {}  # (True, timing) or (False, exc)
        self.ready: list[int] = []  # benchmarkable now, in the order they became so
        self.waiting: dict[concurrent.futures.Future[Any], list[int]] = {}
        self.kernels: dict[int, Any] = {}  # FutureKernels of the configs compiling
        self.stop_at = len(self.configs)  # the first config whose outcome is an exception
        self.executor = _executor()
        self.mode = AsyncCompileMode(self.executor)
        tuner.__dict__[_ROUND] = self
        try:
            self._compile_all()
        except BaseException:
            self.close()
            raise

    def asks(self, config: Any, args: tuple[Any, ...], meta: Any) -> bool:
        """Whether this is the call the round expects next."""
        return (
            self.asked < len(self.configs)
            and self.configs[self.asked] is config
            and len(args) == len(self.args)
            and all(a is b for a, b in zip(args, self.args, strict=True))
            and meta.keys() == self.meta.keys()
        )

    def _compile_all(self) -> None:
        from triton.runtime._async_compile import FutureKernel, active_mode

        token = active_mode.set(self.mode)
        try:
            for i, config in enumerate(self.configs):
                kernel = self._start(config)
                if isinstance(kernel, FutureKernel):
                    self.kernels[i] = kernel
                    self.waiting.setdefault(kernel.future, []).append(i)
                else:  # compiled already, or _bench will meet what stopped it
                    self.ready.append(i)
        finally:
            active_mode.reset(token)

    def _start(self, config: Any) -> Any:
        """The config's compile, as ``_bench``'s first call would start it."""
        if self.meta.keys() & config.kwargs.keys():
            return None  # _bench raises Triton's "Conflicting meta-parameters"
        current = dict(self.meta, **config.all_kwargs())
        current["warmup"] = True
        current.setdefault("grid", None)
        try:
            return self.tuner.fn.run(*self.args, **current)
        except Exception:  # Triton's _bench meets it again, and handles it as Triton does
            return None

    def timing(self, config: Any) -> Any:
        """Config ``config``'s timing (it is the next in the list), benchmarking the
        configs compiled meanwhile first."""
        i = self.asked
        self.asked += 1
        try:
            while i not in self.outcomes:
                self._bench_next(i)
        except BaseException:
            self.close()
            raise
        ok, value = self.outcomes.pop(i)
        if not ok or self.asked == len(self.configs):
            self.close()
        if not ok:
            raise value
        return value

    def _bench_next(self, wanted: int) -> None:
        """Benchmark the next config ready (``wanted``, the one run asks for, among
        them); none past the first that raised, whose exception run will raise."""

        def useful(j: int) -> bool:
            return j <= self.stop_at or j == wanted

        while not (todo := [j for j in self.ready if useful(j)]):
            futures = [f for f, idx in self.waiting.items() if any(map(useful, idx))]
            done, _ = concurrent.futures.wait(
                futures, return_when=concurrent.futures.FIRST_COMPLETED
            )
            for future in done:
                self.ready.extend(sorted(self.waiting.pop(future)))
        j = todo[0]
        self.ready.remove(j)
        ok, value = self._bench_one(j)
        self.outcomes[j] = (ok, value)
        if not ok:
            self.stop_at = min(self.stop_at, j)

    def _bench_one(self, j: int) -> tuple[bool, Any]:
        from triton.runtime._async_compile import active_mode

        config = self.configs[j]
        kernel = self.kernels.get(j)
        failed = False
        if kernel is not None:
            try:  # Triton's finalize: the kernel into the JIT's cache, the post-compile hook
                kernel.result()
            except Exception:
                failed = True
        # A failed compile is raised inside the config's kernel call, as Triton raises it:
        # under the same async mode the call finds its FutureKernel, and raises.
        token = active_mode.set(self.mode) if failed else None
        try:
            return True, originals["_bench"](self.tuner, *self.args, config=config, **self.meta)
        except (TritonCompileCrashed, TritonCompileTimeout) as exc:
            logger.warning(
                "asynccomp.triton: autotuning %s: config %s dropped: %s",
                getattr(self.tuner.base_fn, "__name__", "?"),
                config,
                exc,
            )
            return True, [float("inf")] * 3
        except Exception as exc:
            return False, exc
        finally:
            if token is not None:
                active_mode.reset(token)

    def close(self) -> None:
        if self.tuner.__dict__.get(_ROUND) is self:
            del self.tuner.__dict__[_ROUND]
        self.executor.shutdown(wait=False, cancel_futures=True)
