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

Screening (``register(screen=Screen())``; off by default): Triton benchmarks every
config for ~125 ms of GPU time (``do_bench``'s 25 ms warm-up and 100 ms of runs), one
after the other, so 64 configs take ~8 s however fast they compile. A :class:`Screen`
benchmarks each config briefly first (Triton's ``do_bench`` with ``warmup_ms`` and
``rep_ms``, through Triton's own ``_bench``), as it is compiled, and gives the
autotuner's full benchmark only to the configs within ``keep_within`` of the fastest
brief timing (while compiles are still coming, the ones that look best so far), then to
any other whose brief timing is below the best full one. The others keep their brief
timing. So the config ``run`` chooses always has its full benchmark, and no config timed
only briefly measured faster than it. Screening applies where the autotuner benchmarks
with Triton's default ``do_bench`` (a ``do_bench=`` of the user's may measure in other
units: every config gets it in full).

Left as Triton runs it: an autotune inside the user's own ``AsyncCompileMode``, a list of
one config, and a ``_bench`` call that is not ``run``'s benchmark of the list
``prune_configs`` returned.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from . import _compile, _pool
from ._errors import TritonCompileCrashed, TritonCompileTimeout

__all__ = ("Screen", "install", "installed", "set_screen", "uninstall")

logger = logging.getLogger("asynccomp.triton")

_PRUNED = "_asynccomp_pruned"  # on the tuner: the list prune_configs returned last
_ROUND = "_asynccomp_round"  # on the tuner: the benchmark of that list under way

originals: dict[str, Any] = {}


@dataclasses.dataclass(frozen=True)
class Screen:
    """Benchmark an autotune's configs briefly first, and in full only those that can win
    (``asynccomp.triton.register(screen=Screen())``).

    ``keep_within``: configs whose brief timing is within this factor of the fastest
    brief timing get the autotuner's full benchmark; ``warmup_ms`` and ``rep_ms``: the
    brief benchmark's (Triton's ``do_bench``; its defaults are 25 and 100). The config
    chosen always has its full benchmark (see :mod:`asynccomp.triton._autotune`)."""

    keep_within: float = 1.1
    warmup_ms: float = 1.0
    rep_ms: float = 10.0

    def __post_init__(self) -> None:
        from ..errors import SettingsError

        if not (isinstance(self.keep_within, (int, float)) and 1.0 <= self.keep_within < math.inf):
            raise SettingsError("keep_within", self.keep_within, "must be a finite number >= 1")
        for name in ("warmup_ms", "rep_ms"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 < value < math.inf):
                raise SettingsError(name, value, "must be a positive number of milliseconds")


_screen: Screen | None = None


def set_screen(value: object) -> None:
    """``register(screen=...)``: a :class:`Screen`, ``True`` (its defaults) or ``False``."""
    global _screen
    if isinstance(value, Screen):
        _screen = value
    elif value is True or value is False or value is None:
        _screen = Screen() if value else None
    else:
        from ..errors import SettingsError

        raise SettingsError("screen", value, "must be an asynccomp.triton.Screen, True or False")


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
        # Screening where the autotuner benchmarks with Triton's default do_bench only
        # (a do_bench of the user's may measure in other units).
        screening = _screen if getattr(self, "_do_bench", None) is None else None
        bench = _Round(self, configs, args, meta, screening)
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


_NONE = object()


def _seconds(timing: Any) -> float:
    """What Triton's ``min`` over the timings compares first: the median where
    ``do_bench`` gave quantiles."""
    return float(timing[0] if isinstance(timing, (list, tuple)) else timing)


class _Round:
    """One benchmark of a pruned list of configs (see the module's doc)."""

    def __init__(
        self,
        tuner: Any,
        configs: Sequence[Any],
        args: tuple[Any, ...],
        meta: Any,
        screen: Screen | None = None,
    ):
        from triton.runtime._async_compile import AsyncCompileMode

        self.tuner, self.configs, self.args, self.meta = tuner, list(configs), args, meta
        self.screen = screen
        self.brief: dict[int, Any] = {}  # screening: the brief timings, finite ones
        self.full: dict[int, Any] = {}  # screening: the full timings
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
        step = self._bench_next if self.screen is None else self._screen_next
        try:
            while i not in self.outcomes:
                step(i)
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
            self._await_compiled(useful)
        j = todo[0]
        self.ready.remove(j)
        ok, value = self._bench_one(j)
        self.outcomes[j] = (ok, value)
        if not ok:
            self.stop_at = min(self.stop_at, j)

    def _await_compiled(self, useful: Callable[[int], bool]) -> bool:
        """Wait for the next of the ``useful`` configs' compiles to end (its configs are
        then ready); ``False`` at once if none of them is compiling."""
        futures = [f for f, idx in self.waiting.items() if any(map(useful, idx))]
        if not futures:
            return False
        start = time.perf_counter()
        done, _ = concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_COMPLETED)
        _compile.count(compile_wait_seconds=time.perf_counter() - start)
        for future in done:
            self.ready.extend(sorted(self.waiting.pop(future)))
        return True

    def _bench_one(self, j: int, brief: bool = False) -> tuple[bool, Any]:
        from triton.runtime._async_compile import active_mode

        kind = "short_benchmark" if brief else "full_benchmark"
        start = time.perf_counter()
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
        own = self.tuner.__dict__
        before = own.get("do_bench", _NONE)
        if brief:  # Triton's _bench, its do_bench for a brief while (see Screen)
            own["do_bench"] = self._brief_bench
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
            if brief:
                if before is _NONE:
                    own.pop("do_bench", None)
                else:
                    own["do_bench"] = before
            if token is not None:
                active_mode.reset(token)
            _compile.count(**{f"{kind}s": 1, f"{kind}_seconds": time.perf_counter() - start})

    def _brief_bench(self, kernel_call: Any, quantiles: Any) -> Any:
        import triton.testing  # looked up at each call, as Triton's benchmarker is

        assert self.screen is not None
        return triton.testing.do_bench(
            kernel_call,
            warmup=self.screen.warmup_ms,
            rep=self.screen.rep_ms,
            quantiles=quantiles,
        )

    def _screen_next(self, wanted: int) -> None:
        """One step of a screened round: a brief benchmark of a config compiled, else a
        full one of a config that can win, else a wait for the next compile; once all
        are timed, every config's outcome (see :class:`Screen`)."""
        assert self.screen is not None
        useful = [j for j in range(len(self.configs)) if j <= self.stop_at]
        ready = [j for j in self.ready if j <= self.stop_at]
        if ready:
            j = ready[0]
            self.ready.remove(j)
            ok, value = self._bench_one(j, brief=True)
            if ok and _seconds(value) < math.inf:
                self.brief[j] = value
            else:  # failed, or dropped: a full benchmark would say the same
                self.outcomes[j] = (ok, value)
                if not ok:
                    self.stop_at = min(self.stop_at, j)
            return
        timed = [j for j in useful if j in self.brief and j not in self.full]
        if timed:
            fastest = min(_seconds(self.brief[j]) for j in useful if j in self.brief)
            bound = fastest * self.screen.keep_within
            within = [j for j in timed if _seconds(self.brief[j]) <= bound]
            if within:
                self._full(min(within, key=lambda j: _seconds(self.brief[j])))
                return
        if self._await_compiled(lambda j: j <= self.stop_at):
            return
        full = [_seconds(self.full[j]) for j in useful if j in self.full and j in self.brief]
        best = min(full, default=math.inf)
        below = [j for j in timed if _seconds(self.brief[j]) < best]
        if below:  # timed only briefly, and faster than the best full timing
            self._full(min(below, key=lambda j: _seconds(self.brief[j])))
            return
        for j in useful:
            if j in self.brief and j not in self.outcomes:
                self.outcomes[j] = (True, self.full.get(j, self.brief[j]))
        if wanted not in self.outcomes:  # every config run may ask for is timed by now
            raise RuntimeError(f"asynccomp.triton: config {wanted} of the autotune has no timing")

    def _full(self, j: int) -> None:
        ok, value = self._bench_one(j)
        if ok:
            self.full[j] = value
        else:
            self.brief.pop(j)
            self.outcomes[j] = (False, value)
            self.stop_at = min(self.stop_at, j)

    def close(self) -> None:
        if self.tuner.__dict__.get(_ROUND) is self:
            del self.tuner.__dict__[_ROUND]
        self.executor.shutdown(wait=False, cancel_futures=True)
